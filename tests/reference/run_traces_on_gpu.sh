#!/usr/bin/env bash
# Allocator traces on a GPU machine (issue 30), a fresh process each, in a fixed time. From the
# repository root:   tests/reference/run_traces_on_gpu.sh OUTDIR [SECONDS [FROM]]
#   (SECONDS: the budget, 240; FROM: the first trace to record, 14)
#
# Traces 6-13 (committed 2026-11-26): the four uncapped runs of run_edge_on_gpu.sh's first part
# again under expandable segments, Llama 3.1 8B in bf16 at the H100's edge (out of memory on one
# fp32 logits block), QLoRA on the GPU and LoRA on an fp32 base. Then, for the next GPU session
# (not yet measured): compiled runs (what inductor allocates and frees in the compiled forward,
# loss and backward; CPU's inductor code differs from CUDA's at the loss) and checkpointed amp
# LoRA. Writes OUTDIR/traces.tar (one gzipped trace each), env.txt and measure.log.
set -u
OUT=${1:?usage: run_traces_on_gpu.sh OUTDIR [SECONDS]}
BUDGET=${2:-240}
FROM=${3:-14}  # traces before this number are committed already
START=$(date +%s)
export PYTHONUNBUFFERED=1
[ -d .whl/site ] && export PYTHONPATH="$(pwd)/.whl/site:${PYTHONPATH:-}"
cd tests/reference
mkdir -p "$OUT/traces"
E=expandable_segments:True
i=5
while read -r conf sc; do
    i=$((i + 1))
    [ "$i" -lt "$FROM" ] && continue
    [ $((BUDGET - ($(date +%s) - START))) -lt 40 ] && break
    [ "$conf" = "-" ] && conf=""
    PYTORCH_CUDA_ALLOC_CONF=$conf timeout 60 python3 measure_allocator.py trace "$sc" "$OUT/traces/trace$i.json.gz" 2>>"$OUT/measure.log"
    echo "trace $i ($conf) rc=$? at $(( $(date +%s) - START )) s" >>"$OUT/env.txt"
done <<LIST
$E ["llama-3.2-1b","amp-bf16","sdpa","full",16,2048,"full",0,""]
$E ["llama-3.2-1b","bf16","sdpa","none",8,2048,"full",0,""]
- ["llama-3.1-8b","bf16","sdpa","full",4,4096,"full",0,"","off",false,{},{"cap":84216381440}]
$E ["llama-3.1-8b","bf16","sdpa","full",4,4096,"full",0,"","off",false,{},{"cap":84216381440}]
- ["llama-3.1-8b","amp-bf16","sdpa","full",4,2048,"qlora",16,"all","off",false,{},{"kbit":true}]
- ["llama-3.2-1b","amp-bf16","sdpa","none",1,2048,"lora",16,"all","off",false,{},{"base":"fp32"}]
$E ["qwen2.5-0.5b","amp-bf16","eager","none",4,1024,"full",0,""]
$E ["llama-3.1-8b","bf16","sdpa","full",4,4096,"lora",16,"all"]
- ["llama-3.2-1b","bf16","sdpa","none",4,2048,"full",0,"","off",true]
- ["llama-3.1-8b","bf16","sdpa","none",2,4096,"full",0,"","off",true,{"num_hidden_layers":8}]
- ["llama-3.1-8b","amp-bf16","sdpa","full",4,4096,"lora",16,"all","off",false,{},{"base":"fp32"}]
LIST
(cd "$OUT" && tar cf traces.tar traces && rm -rf traces)
