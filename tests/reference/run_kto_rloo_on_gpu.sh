#!/usr/bin/env bash
# Prepared for a GPU session (not run yet). From the repository root, with TRL 1.16's wheel
# unpacked into .whl/site (pip install --no-deps --target .whl/site trl==1.16.0) and carried:
#
#   tests/reference/run_kto_rloo_on_gpu.sh OUTDIR [SECONDS]      (SECONDS: the budget, 240)
#
# KTO, RLOO, ORPO, CPO and SimPO steps as TRL 1.16 runs them (measure_posttrain.py: issue 31),
# phase by phase at the three levels (ORPO's and CPO's with TRL's Triton log-probability kernel,
# which the CPU check emulates), for test_posttrain_measured.py to compare once committed as
# gpu/h200/posttrain/posttrain4.json (its FILES list and row counts then take it in).
set -u
OUT=${1:?usage: run_kto_rloo_on_gpu.sh OUTDIR [SECONDS]}
BUDGET=${2:-240}
ROOT=$(pwd)
export PYTHONUNBUFFERED=1
[ -d .whl/site ] && export PYTHONPATH="$ROOT/.whl/site:${PYTHONPATH:-}"
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  python3 -c 'import sys, torch, transformers, peft, accelerate, trl; print(sys.version.split()[0], torch.__version__, transformers.__version__, peft.__version__, accelerate.__version__, trl.__version__)'
} >"$OUT/env.txt" 2>&1
cd tests/reference
RUNS=kto-qwen0.5b-full-bf16,kto-llama1b-lora-bf16-ckpt,rloo-qwen0.5b-full-bf16,rloo-qwen0.5b-full-bf16-beta0,orpo-qwen0.5b-full-bf16,simpo-qwen0.5b-full-amp,cpo-llama1b-lora-bf16-ckpt
timeout "$BUDGET" python3 measure_posttrain.py "$OUT/posttrain4.json" --deadline $((BUDGET - 15)) --only "$RUNS" \
  2>"$OUT/posttrain4.log"
echo "posttrain4 rc=$?" >>"$OUT/env.txt"
