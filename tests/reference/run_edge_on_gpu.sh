#!/usr/bin/env bash
# One run on a GPU machine for the allocator (issue 30), QLoRA and LoRA at the fit boundary
# (issue 29) and step times (issue 33), in a fixed time. From the repository root:
#
#   tests/reference/run_edge_on_gpu.sh OUTDIR [SECONDS]      (SECONDS: the whole run's budget, 500)
#
# bitsandbytes travels as a trimmed copy under .whl/site (its CUDA 13.0 library only), put on
# PYTHONPATH. Writes OUTDIR/env.txt, measure.log, traces.tar (one gzipped allocator trace per
# run), boundary.json, boundary_expandable.json, varlen.json and timing.json; each part has its
# own time limit and they run in that order.
set -u
OUT=${1:?usage: run_edge_on_gpu.sh OUTDIR [SECONDS]}
BUDGET=${2:-500}
START=$(date +%s)
left() { echo $((BUDGET - ($(date +%s) - START))); }
at() { echo "$1 at $(( $(date +%s) - START )) s" >>"$OUT/env.txt"; }
export PYTHONUNBUFFERED=1
[ -d .whl/site ] && export PYTHONPATH="$(pwd)/.whl/site:${PYTHONPATH:-}"
{ nvidia-smi; python3 -c 'import torch, transformers, peft, bitsandbytes; print(torch.__version__, transformers.__version__, peft.__version__, bitsandbytes.__version__)'; } >"$OUT/env.txt" 2>&1
cd tests/reference
LOG="$OUT/measure.log"

# 1. Allocator traces from an empty allocator, a fresh process each (about 2 minutes).
mkdir -p "$OUT/traces"
i=0
for sc in \
    '["llama-3.2-1b","amp-bf16","sdpa","full",16,2048,"full",0,""]' \
    '["llama-3.2-1b","bf16","sdpa","none",8,2048,"full",0,""]' \
    '["qwen2.5-0.5b","amp-bf16","eager","none",4,1024,"full",0,""]' \
    '["llama-3.1-8b","bf16","sdpa","full",4,4096,"lora",16,"all"]' \
    '["llama-3.2-1b","amp-bf16","sdpa","full",16,2048,"full",0,"","off",false,{},{"cap":84216381440}]'; do
    i=$((i + 1))
    [ "$(left)" -lt 300 ] && break
    timeout 50 python3 measure_allocator.py trace "$sc" "$OUT/traces/trace$i.json.gz" 2>>"$LOG"
    at "trace $i rc=$?"
done
(cd "$OUT" && tar cf traces.tar traces && rm -rf traces)

# 2. The fit boundary, capped to smaller cards (about 3 minutes).
T=$(( $(left) - 150 )); [ "$T" -gt 190 ] && T=190
timeout "$T" python3 measure_allocator.py boundary "$OUT/boundary.json" --deadline $((T - 10)) 2>>"$LOG"
at "boundary rc=$?"

# 3. The same edges with expandable segments.
T=$(( $(left) - 110 )); [ "$T" -gt 80 ] && T=80
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout "$T" python3 measure_allocator.py boundary \
    "$OUT/boundary_expandable.json" --deadline $((T - 10)) --only 0,3,6,8,10 2>>"$LOG"
at "boundary expandable rc=$?"

# 4. Dynamic padding: reserved drift over a few hundred steps.
T=$(( $(left) - 60 )); [ "$T" -gt 60 ] && T=60
timeout "$T" python3 measure_allocator.py varlen "$OUT/varlen.json" --deadline $((T - 15)) 2>>"$LOG"
at "varlen rc=$?"

# 5. Step times and kernel times, in what is left.
T=$(( $(left) - 5 ))
[ "$T" -gt 30 ] && timeout "$T" python3 measure_allocator.py timing "$OUT/timing.json" --deadline $((T - 5)) 2>>"$LOG"
at "timing done"
