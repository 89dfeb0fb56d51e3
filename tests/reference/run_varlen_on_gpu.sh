#!/usr/bin/env bash
# One GPU call for runs over variable lengths from their first step (issue 30: the reserved
# level of dynamic padding; ms-swift's benchmark, 28 published rows 8-59% above the core), each
# run a fresh process so its allocator starts empty. From the repository root:
#
#   tests/reference/run_varlen_on_gpu.sh OUTDIR [SECONDS]      (SECONDS: the whole call, 420)
#
# Writes OUTDIR/env.txt, measure.log and one JSON per run (trace*.json.gz: allocator traces).
set -u
OUT=${1:?usage: run_varlen_on_gpu.sh OUTDIR [SECONDS]}
BUDGET=${2:-420}
START=$(date +%s)
left() { echo $((BUDGET - ($(date +%s) - START))); }
export PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; python3 -c 'import torch, transformers, peft; print(torch.__version__, transformers.__version__, peft.__version__)'; } >"$OUT/env.txt" 2>&1
cd tests/reference
LOG="$OUT/measure.log"
Q18='"qwen1-1.8b-as-qwen2","amp-bf16","sdpa"'
# name | steps | seconds of stepping | timeout | spec's scenario (ms-swift's: LoRA r8 on q,k,v, amp, b1)
run() {
    local name=$1 steps=$2 secs=$3 limit=$4 sc=$5 extra=${6:-}
    if [ "$(left)" -lt $((limit + 5)) ]; then echo "$name skipped at $(( $(date +%s) - START )) s" >>"$OUT/env.txt"; return; fi
    local ext=json; [ -n "$extra" ] && ext=json.gz
    env $ENVV timeout "$limit" python3 measure_allocator.py dynamic \
        "{\"scenario\":[$sc],\"steps\":$steps,\"seconds\":$secs$extra}" "$OUT/$name.$ext" 2>>"$LOG"
    echo "$name rc=$? at $(( $(date +%s) - START )) s" >>"$OUT/env.txt"
}
ENVV=""
run d1-q18-2048 400 30 60 "$Q18,\"full\",1,2048,\"lora\",8,\"qkv\""
run t1-q18-2048 40 12 45 "$Q18,\"full\",1,2048,\"lora\",8,\"qkv\"" ',"trace":true'
run d2-q18-4096 300 30 60 "$Q18,\"full\",1,4096,\"lora\",8,\"qkv\""
run d3-q18-2048-b4 200 30 60 "$Q18,\"full\",4,2048,\"lora\",8,\"qkv\""
run d4-q18-2048-nockpt 300 25 50 "$Q18,\"none\",1,2048,\"lora\",8,\"qkv\""
run d5-q7-2048 200 35 75 "\"qwen1-7b-as-qwen2\",\"amp-bf16\",\"sdpa\",\"full\",1,2048,\"lora\",8,\"qkv\""
run d6-yi6-2048 200 30 70 "\"yi-6b-chat\",\"amp-bf16\",\"sdpa\",\"full\",1,2048,\"lora\",8,\"qkv\""
ENVV="PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"
run d7-q18-2048-expandable 300 25 50 "$Q18,\"full\",1,2048,\"lora\",8,\"qkv\""
ENVV=""
run d8-llama1b-full-b8 200 25 55 "\"llama-3.2-1b\",\"bf16\",\"sdpa\",\"full\",8,2048,\"full\",0,\"\""
echo "done at $(( $(date +%s) - START )) s" >>"$OUT/env.txt"
