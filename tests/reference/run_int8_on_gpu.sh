#!/usr/bin/env bash
# Prepared 2026-11-28 for the next session lent a GPU (not yet run): LoRA on 8-bit bases
# (issue 29's LLM.int8, `method=lora8`) at the three levels, beside a 16-bit LoRA run of the same
# shape. From the repository root (bitsandbytes, peft and transformers as the GPU machine has
# them, as for the QLoRA runs of 2026-11-27):
#
#   tests/reference/run_int8_on_gpu.sh OUTDIR [SECONDS]      (SECONDS: the budget, 300)
#
# measure_gpu.py int8presets (PRESETS_INT8): peaks per phase, device use, step times. (The CPU
# harness's saved-bytes rows of test_peft.py build their models on the CPU: not run here.)
# Writes OUTDIR/env.txt, int8.json and the log. Compare with the core by reading the rows as
# test_gpu_measured.py reads `presets`.
set -u
OUT=${1:?usage: run_int8_on_gpu.sh OUTDIR [SECONDS]}
BUDGET=${2:-300}
START=$(date +%s)
left() { echo $((BUDGET - ($(date +%s) - START))); }
at() { echo "$1 at $(( $(date +%s) - START )) s" >>"$OUT/env.txt"; }
export PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  python3 -c 'import sys, torch, transformers, peft, bitsandbytes; print(sys.version.split()[0], torch.__version__, transformers.__version__, peft.__version__, bitsandbytes.__version__)'; } >"$OUT/env.txt" 2>&1
cd tests/reference

T=$(( $(left) - 5 )); [ "$T" -gt 280 ] && T=280
timeout "$T" python3 measure_gpu.py int8presets "$OUT/int8.json" --deadline $((T - 10)) 2>"$OUT/int8.log"
at "int8presets rc=$?"

at "end"
