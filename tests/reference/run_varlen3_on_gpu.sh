#!/usr/bin/env bash
# The third GPU call of 2026-11-28 (issue 30's dynamic padding): 1,000 steps over variable
# lengths from the first, where the core's horizon is, on a two-layer Qwen2.5 0.5B (its full
# 151,936-token vocabulary, whose logits-sized blocks make the growth) so that a step takes
# milliseconds; three seeds. Everything in OUTDIR/varlen3.tar. From the repository root:
#   tests/reference/run_varlen3_on_gpu.sh OUTDIR [SECONDS]
set -u
OUT=${1:?usage: run_varlen3_on_gpu.sh OUTDIR [SECONDS]}
BUDGET=${2:-170}
START=$(date +%s)
left() { echo $((BUDGET - ($(date +%s) - START))); }
export PYTHONUNBUFFERED=1
W="$OUT/varlen3"; mkdir -p "$W"
cd tests/reference
SC='"qwen2.5-0.5b","amp-bf16","sdpa","full",1,2048,"lora",8,"qkv","off",false,{"num_hidden_layers":2}'
for seed in 0 1 2; do
    [ "$(left)" -lt 50 ] && { echo "seed $seed skipped" >>"$W/env.txt"; continue; }
    timeout 50 python3 measure_allocator.py dynamic \
        "{\"scenario\":[$SC],\"steps\":1000,\"seconds\":38,\"seed\":$seed}" "$W/d1000-seed$seed.json" 2>>"$W/measure.log"
    echo "seed $seed rc=$? at $(( $(date +%s) - START )) s" >>"$W/env.txt"
done
(cd "$OUT" && tar cf varlen3.tar varlen3 && rm -rf varlen3)
