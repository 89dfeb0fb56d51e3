#!/usr/bin/env bash
# The second GPU call of 2026-11-27 (about two minutes): DPO rows held out from the first
# call's comparison and step times between the launch-bound and GPU-bound regimes. From the
# repository root, TRL in .whl/site as for run_posttrain_on_gpu.sh:
#   tests/reference/run_more_on_gpu.sh OUTDIR
set -u
OUT=${1:?usage: run_more_on_gpu.sh OUTDIR}
export PYTHONUNBUFFERED=1
[ -d .whl/site ] && export PYTHONPATH="$(pwd)/.whl/site:${PYTHONPATH:-}"
cd tests/reference
timeout 100 python3 measure_posttrain.py "$OUT/posttrain2.json" --deadline 90 \
    --only dpo-llama1b-full-amp-ckpt,dpo-qwen1.5b-lora-bf16-ckpt,dpo-qwen0.5b-lora-bf16 2>"$OUT/posttrain2.log"
echo "posttrain rc=$?" >>"$OUT/env.txt"
timeout 110 python3 measure_allocator.py launchmid "$OUT/launchmid.json" --deadline 100 2>"$OUT/launchmid.log"
echo "launchmid rc=$?" >>"$OUT/env.txt"
