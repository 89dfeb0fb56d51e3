#!/usr/bin/env bash
# One run on a GPU machine (no cargo there): the real-GPU reference measurements and calibrate,
# in a fixed time. From the repository root, with a calibrate binary built here:
#
#   cargo build --release -p calibrate && cp target/release/calibrate gpu-bin/
#   tests/reference/run_on_gpu.sh OUTDIR [SECONDS]      (SECONDS: the whole run's budget, 520)
#
# Writes OUTDIR/env.txt, gpu_presets_fp8.json (torchao float8 runs against bf16),
# calibrate's file and log, gpu_presets.json (SDPA choices, fp8 GEMMs and real-size runs),
# gpu_small.json (the reference suite's scenarios on CUDA) and measure.log. Each part has its
# own time limit, so a slow or failing part leaves the others their time; the parts run in
# that order, the ones fewest earlier runs measured first.
set -u
OUT=${1:?usage: run_on_gpu.sh OUTDIR [SECONDS]}
BUDGET=${2:-520}
START=$(date +%s)
left() { echo $((BUDGET - ($(date +%s) - START))); }
at() { echo "$1 at $(( $(date +%s) - START )) s" >>"$OUT/env.txt"; }
ROOT=$(pwd)
export PYTHONUNBUFFERED=1

{ nvidia-smi; python3 -c 'import torch, transformers, peft; print(torch.__version__, transformers.__version__, peft.__version__)'; } >"$OUT/env.txt" 2>&1

# 1. torchao float8 training against bf16 (about two minutes).
(cd tests/reference && timeout 170 python3 measure_gpu.py fp8presets "$OUT/gpu_presets_fp8.json" --deadline 160) \
    2>"$OUT/measure.log"
at "fp8 presets done"

# 2. calibrate: cuBLAS and NVRTC from CUDA's own folder or from torch's wheels.
SP=$(python3 -c 'import site; print(site.getsitepackages()[0])')
LIBS=/usr/local/cuda/lib64
for d in "$SP"/nvidia/*/lib "$SP"/nvidia/cu13/lib; do [ -d "$d" ] && LIBS="$LIBS:$d"; done
CAL_TIME=$(( $(left) - 100 ))
[ "$CAL_TIME" -gt 300 ] && CAL_TIME=300
LD_LIBRARY_PATH="$LIBS:${LD_LIBRARY_PATH:-}" timeout "$CAL_TIME" "$ROOT/gpu-bin/calibrate" --out "$OUT" >"$OUT/calibrate.log" 2>&1
at "calibrate rc=$? done"

# 3. SDPA's choices, fp8 GEMMs and the real-size presets (about a minute).
T=$(( $(left) - 5 ))
[ "$T" -gt 120 ] && T=120
(cd tests/reference && timeout "$T" python3 measure_gpu.py sdpa,fp8gemm,presets "$OUT/gpu_presets.json" --deadline $((T - 10))) \
    2>>"$OUT/measure.log"
at "presets done"

# 4. The reference suite's small scenarios on CUDA, in what time is left.
T=$(( $(left) - 5 ))
[ "$T" -gt 20 ] && (cd tests/reference && timeout "$T" python3 measure_gpu.py peak,backends,saved "$OUT/gpu_small.json" --deadline $((T - 5))) \
    2>>"$OUT/measure.log"
at "small done"
