#!/usr/bin/env bash
# FSDP on a real GPU (issues 29 and 30), in a fixed time. From the repository root:
#
#   tests/reference/run_fsdp_on_gpu.sh OUTDIR [SECONDS [PART]]   (SECONDS: the budget, 330; PART: 1 or 2)
#
# One GPU stands for one rank of a larger group: measure_fsdp_peak.py's CUDA part wraps real-size
# Llama and Qwen2 presets with FSDP2 and FSDP1 on PyTorch's fake process group, which launches
# no collective kernels but hands FSDP its real gather and reduce buffers on its own streams, so
# the allocated level is the rank's, reserved is what the caching allocator makes of FSDP's
# streams, and device lacks only NCCL's buffers. transformers 5.23 and peft 0.21.2 travel as
# wheels in .whl, bitsandbytes 0.50.2 as a copy unpacked in .whl/site with its CUDA 13.0 and CPU
# libraries only (the wheel is 43 MB). A fresh process per run; two of them record
# the allocator's every action with its stream. Writes OUTDIR/env.txt, measure.log,
# fsdp_cuda.json (one row a run, in order; PART 2: fsdp_cuda_2.json) and traces.tar (committed
# unpacked in gpu/h200/fsdp/traces/, which tests/allocator_traces.rs replays).
set -u
OUT=${1:?usage: run_fsdp_on_gpu.sh OUTDIR [SECONDS]}
BUDGET=${2:-330}
START=$(date +%s)
left() { echo $((BUDGET - ($(date +%s) - START))); }
export PYTHONUNBUFFERED=1
# The wheels in .whl (transformers, peft) installed apart; bitsandbytes' trimmed copy as it is.
SITE=${TMPDIR:-/tmp}/fsdp_site
ls .whl/*.whl >/dev/null 2>&1 && python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .whl/*.whl
export PYTHONPATH="$SITE:$(pwd)/.whl/site:${PYTHONPATH:-}"
{ nvidia-smi; python3 -c 'import torch, transformers, peft, bitsandbytes; print(torch.__version__, transformers.__version__, peft.__version__, bitsandbytes.__version__)'; } >"$OUT/env.txt" 2>&1
cd tests/reference
LOG="$OUT/measure.log"
mkdir -p "$OUT/traces"
ROWS="$OUT/rows.jsonl"
: >"$ROWS"
i=0
# Each line: a scenario for measure_fsdp_peak.py (device cuda), then "trace" to record one.
# PART 1 (the first call, 315 s): the step at three levels across FSDP1/2, methods, precisions
# and checkpointing, two traces. PART 2 (the second, 2026-11-27): peft's FSDP-QLoRA docs run
# scaled to Llama 3.1 8B (two micro-batches, LoRA dropout 0.1) with and without parameter
# offload, and traces with phase markers of the runs whose reserved level the core misses most.
# PART 3 (the third, 2026-11-27, RUN_LIMIT=120): LoRA under FSDP1's parameter offload, which ran
# past 60 s in the second.
PART=${3:-1}
runs() {
    if [ "$PART" = 1 ]; then cat <<'LIST'
{"model":"llama-3.1-8b","world":2,"batch":4,"seq":2048,"precision":"amp-bf16","checkpointing":"full","method":"lora","rank":16,"targets":"all","fsdp":1,"reduce":"compute","device":"cuda"}
{"model":"llama-3.1-8b","world":2,"batch":4,"seq":2048,"precision":"amp-bf16","checkpointing":"full","method":"qlora","rank":16,"targets":"all","fsdp":1,"reduce":"compute","device":"cuda"}
{"model":"llama-3.2-1b","world":2,"batch":4,"seq":2048,"precision":"amp-bf16","checkpointing":"none","method":"full","fsdp":2,"reduce":"fp32","device":"cuda"} trace
{"model":"llama-3.2-1b","world":2,"batch":8,"seq":2048,"precision":"amp-bf16","checkpointing":"full","method":"full","fsdp":1,"reduce":"compute","device":"cuda"} trace
{"model":"llama-3.1-8b","world":2,"batch":4,"seq":2048,"precision":"amp-bf16","checkpointing":"full","method":"lora","rank":16,"targets":"all","fsdp":2,"reduce":"compute","device":"cuda"}
{"model":"llama-3.1-8b","world":2,"batch":2,"seq":2048,"precision":"amp-bf16","checkpointing":"none","method":"qlora","rank":16,"targets":"all","fsdp":1,"reduce":"compute","device":"cuda"}
{"model":"llama-3.2-1b","world":2,"batch":8,"seq":2048,"precision":"amp-bf16","checkpointing":"full","method":"full","fsdp":2,"reduce":"compute","device":"cuda"}
{"model":"qwen2.5-0.5b","world":2,"batch":8,"seq":2048,"precision":"amp-bf16","checkpointing":"none","method":"full","fsdp":2,"reduce":"fp32","device":"cuda"}
{"model":"llama-3.2-1b","world":8,"batch":4,"seq":2048,"precision":"bf16","checkpointing":"none","method":"full","fsdp":2,"device":"cuda"}
{"model":"llama-3.1-8b","world":8,"batch":2,"seq":4096,"precision":"bf16","checkpointing":"full","method":"full","fsdp":2,"device":"cuda"}
{"model":"llama-3.1-8b","world":8,"batch":2,"seq":4096,"precision":"amp-bf16","checkpointing":"full","method":"full","fsdp":1,"reduce":"compute","device":"cuda"}
LIST
    elif [ "$PART" = 3 ]; then cat <<'LIST'
{"model":"llama-3.2-3b","world":2,"batch":2,"seq":2048,"accum":2,"precision":"amp-bf16","checkpointing":"full","method":"lora","rank":8,"targets":"all","dropout":0.1,"fsdp":1,"reduce":"compute","offload":true,"device":"cuda"}
{"model":"llama-3.1-8b","world":2,"batch":2,"seq":2048,"accum":2,"precision":"amp-bf16","checkpointing":"full","method":"lora","rank":8,"targets":"all","dropout":0.1,"fsdp":1,"reduce":"compute","offload":true,"device":"cuda"}
LIST
    else cat <<'LIST'
{"model":"llama-3.1-8b","world":2,"batch":2,"seq":2048,"accum":2,"precision":"amp-bf16","checkpointing":"full","method":"qlora","rank":8,"targets":"all","dropout":0.1,"fsdp":1,"reduce":"compute","device":"cuda"}
{"model":"llama-3.1-8b","world":2,"batch":2,"seq":2048,"accum":2,"precision":"amp-bf16","checkpointing":"full","method":"qlora","rank":8,"targets":"all","dropout":0.1,"fsdp":1,"reduce":"compute","offload":true,"device":"cuda"}
{"model":"llama-3.1-8b","world":2,"batch":2,"seq":2048,"accum":2,"precision":"amp-bf16","checkpointing":"full","method":"lora","rank":8,"targets":"all","dropout":0.1,"fsdp":1,"reduce":"compute","offload":true,"device":"cuda"}
{"model":"llama-3.1-8b","world":8,"batch":2,"seq":4096,"precision":"bf16","checkpointing":"full","method":"full","fsdp":2,"device":"cuda"} trace
{"model":"llama-3.2-1b","world":2,"batch":8,"seq":2048,"precision":"amp-bf16","checkpointing":"full","method":"full","fsdp":1,"reduce":"compute","device":"cuda"} trace
{"model":"llama-3.1-8b","world":2,"batch":4,"seq":2048,"precision":"amp-bf16","checkpointing":"full","method":"lora","rank":16,"targets":"all","fsdp":2,"reduce":"compute","device":"cuda"} trace
LIST
    fi
}
while read -r sc tr; do
    [ -z "$sc" ] && continue
    i=$((i + 1))
    [ "$(left)" -lt 30 ] && { echo "run $i skipped: out of time" >>"$OUT/env.txt"; continue; }
    t=$(left); [ "$t" -gt "${RUN_LIMIT:-60}" ] && t=${RUN_LIMIT:-60}
    args=("$sc")
    P=""; [ "$PART" = 1 ] || P="p$PART"_
    [ "$tr" = "trace" ] && args+=("$OUT/traces/fsdp_$P""trace$i.json.gz")
    timeout "$t" python3 measure_fsdp_peak.py "${args[@]}" >"$OUT/last.out" 2>>"$LOG"
    rc=$?
    row=$(tail -n 1 "$OUT/last.out")
    [ -n "$row" ] && echo "$row" >>"$ROWS" || echo "{\"scenario\": $sc, \"status\": \"failed\", \"rc\": $rc}" >>"$ROWS"
    echo "run $i rc=$rc at $(( $(date +%s) - START )) s" >>"$OUT/env.txt"
done <<<"$(runs)"
NAME=fsdp_cuda.json; [ "$PART" = 1 ] || NAME=fsdp_cuda_$PART.json
python3 - "$ROWS" "$OUT/$NAME" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
json.dump({"runs": rows}, open(sys.argv[2], "w"), indent=1)
PY
rm -f "$ROWS" "$OUT/last.out"
T=traces.tar; [ "$PART" = 1 ] || T=traces_$PART.tar
(cd "$OUT" && tar cf "$T" traces && rm -rf traces)
echo "done at $(( $(date +%s) - START )) s" >>"$OUT/env.txt"
