#!/usr/bin/env bash
# The GPU session of 2026-11-27, in a fixed time. From the repository root, with TRL 1.16's wheel
# unpacked into .whl/site (pip install --no-deps --target .whl/site trl==1.16.0) and carried:
#
#   tests/reference/run_posttrain_on_gpu.sh OUTDIR [SECONDS]      (SECONDS: the budget, 420)
#
# 1. DPO and GRPO steps as TRL runs them (measure_posttrain.py: issue 31), phase by phase.
# 2. Launch-bound steps at 64 tokens with their kernel counts (measure_allocator.py launch:
#    issue 33's host cost per kernel).
# 3. The allocator traces run_traces_on_gpu.sh lists from 14 on (compiled runs, checkpointed
#    amp LoRA on an fp32 base: issue 30), in what time is left.
# Writes OUTDIR/env.txt, posttrain.json, launch.json, traces.tar and the logs.
set -u
OUT=${1:?usage: run_posttrain_on_gpu.sh OUTDIR [SECONDS]}
BUDGET=${2:-420}
START=$(date +%s)
left() { echo $((BUDGET - ($(date +%s) - START))); }
at() { echo "$1 at $(( $(date +%s) - START )) s" >>"$OUT/env.txt"; }
ROOT=$(pwd)
export PYTHONUNBUFFERED=1
[ -d .whl/site ] && export PYTHONPATH="$ROOT/.whl/site:${PYTHONPATH:-}"
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  python3 -c 'import sys, torch, transformers, peft, accelerate, trl; print(sys.version.split()[0], torch.__version__, transformers.__version__, peft.__version__, accelerate.__version__, trl.__version__)'
  for m in datasets pandas pyarrow; do python3 -c "import $m; print('$m', $m.__version__)" 2>&1 | tail -1; done; } >"$OUT/env.txt" 2>&1
cd tests/reference

T=$(( $(left) - 200 )); [ "$T" -gt 170 ] && T=170
timeout "$T" python3 measure_posttrain.py "$OUT/posttrain.json" --deadline $((T - 10)) 2>"$OUT/posttrain.log"
at "posttrain rc=$?"

T=$(( $(left) - 110 )); [ "$T" -gt 90 ] && T=90
timeout "$T" python3 measure_allocator.py launch "$OUT/launch.json" --deadline $((T - 10)) 2>"$OUT/launch.log"
at "launch rc=$?"

T=$(( $(left) - 5 ))
[ "$T" -gt 40 ] && (cd "$ROOT" && tests/reference/run_traces_on_gpu.sh "$OUT" "$T" 14) && at "traces done"
at "end"
