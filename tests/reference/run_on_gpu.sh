#!/usr/bin/env bash
# One run on a GPU machine (no cargo there): the real-GPU reference measurements and calibrate,
# in a fixed time. From the repository root, with a calibrate binary built here:
#
#   cargo build --release -p calibrate && cp target/release/calibrate gpu-bin/
#   tests/reference/run_on_gpu.sh OUTDIR [SECONDS]      (SECONDS: the whole run's budget, 520)
#
# Writes OUTDIR/env.txt, gpu_presets.json (SDPA choices and real-size runs), calibrate's file
# and log, gpu_small.json (the reference suite's scenarios on CUDA) and measure.log. Each part
# has its own time limit, so a slow or failing part leaves the others their time.
set -u
OUT=${1:?usage: run_on_gpu.sh OUTDIR [SECONDS]}
BUDGET=${2:-520}
START=$(date +%s)
left() { echo $((BUDGET - ($(date +%s) - START))); }
ROOT=$(pwd)
export PYTHONUNBUFFERED=1

{ nvidia-smi; python3 -c 'import torch, transformers, peft; print(torch.__version__, transformers.__version__, peft.__version__)'; } >"$OUT/env.txt" 2>&1

# 1. SDPA's choices and the real-size presets (about two minutes).
(cd tests/reference && timeout 200 python3 measure_gpu.py sdpa,fp8gemm,presets "$OUT/gpu_presets.json" --deadline 170) \
    2>"$OUT/measure.log"
echo "presets done at $(( $(date +%s) - START )) s" >>"$OUT/env.txt"

# 2. calibrate: cuBLAS and NVRTC from CUDA's own folder or from torch's wheels.
SP=$(python3 -c 'import site; print(site.getsitepackages()[0])')
LIBS=/usr/local/cuda/lib64
for d in "$SP"/nvidia/*/lib "$SP"/nvidia/cu13/lib; do [ -d "$d" ] && LIBS="$LIBS:$d"; done
export LD_LIBRARY_PATH="$LIBS:${LD_LIBRARY_PATH:-}"
CAL_TIME=$(( $(left) - 110 ))
[ "$CAL_TIME" -gt 300 ] && CAL_TIME=300
timeout "$CAL_TIME" "$ROOT/gpu-bin/calibrate" --out "$OUT" >"$OUT/calibrate.log" 2>&1
echo "calibrate rc=$? done at $(( $(date +%s) - START )) s" >>"$OUT/env.txt"

# 3. The reference suite's small scenarios on CUDA, in what time is left.
T=$(( $(left) - 5 ))
(cd tests/reference && timeout "$T" python3 measure_gpu.py peak,backends,saved "$OUT/gpu_small.json" --deadline $((T - 5))) \
    2>>"$OUT/measure.log"
echo "small done at $(( $(date +%s) - START )) s" >>"$OUT/env.txt"
