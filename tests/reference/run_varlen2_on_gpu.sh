#!/usr/bin/env bash
# The second GPU call of 2026-11-28 (issue 30's dynamic padding): the allocator trace of a run
# over variable lengths (the first call's did not come back), the same run for longer (does
# reserved keep growing after its longest length?) and with other seeds (how much the peak
# depends on which lengths came first). Everything in OUTDIR/varlen2.tar. From the root:
#   tests/reference/run_varlen2_on_gpu.sh OUTDIR [SECONDS]
set -u
OUT=${1:?usage: run_varlen2_on_gpu.sh OUTDIR [SECONDS]}
BUDGET=${2:-300}
START=$(date +%s)
left() { echo $((BUDGET - ($(date +%s) - START))); }
export PYTHONUNBUFFERED=1
W="$OUT/varlen2"; mkdir -p "$W"
cd tests/reference
Q18='"qwen1-1.8b-as-qwen2","amp-bf16","sdpa","full",1,2048,"lora",8,"qkv"'
run() {
    local name=$1 spec=$2 limit=$3 ext=${4:-json}
    if [ "$(left)" -lt $((limit + 5)) ]; then echo "$name skipped" >>"$W/env.txt"; return; fi
    timeout "$limit" python3 measure_allocator.py dynamic "$spec" "$W/$name.$ext" 2>>"$W/measure.log"
    echo "$name rc=$? at $(( $(date +%s) - START )) s" >>"$W/env.txt"
}
run t1-q18-2048 "{\"scenario\":[$Q18],\"steps\":30,\"seconds\":14,\"trace\":true}" 50 json.gz
run d9-q18-2048-long "{\"scenario\":[$Q18],\"steps\":2000,\"seconds\":110}" 140
run d10-q18-2048-seed1 "{\"scenario\":[$Q18],\"steps\":400,\"seconds\":30,\"seed\":1}" 55
run d11-q18-2048-seed2 "{\"scenario\":[$Q18],\"steps\":400,\"seconds\":30,\"seed\":2}" 55
(cd "$OUT" && tar cf varlen2.tar varlen2 && rm -rf varlen2)
