#!/usr/bin/env bash
# The fourth GPU call of 2026-11-27 (about two minutes): two GRPO steps held out from the GRPO
# model's fit (LoRA with checkpointing; fp32 weights under autocast with two micro-batches per
# step). From the repository root, TRL in .whl/site:  tests/reference/run_grpo_on_gpu.sh OUTDIR
set -u
OUT=${1:?usage: run_grpo_on_gpu.sh OUTDIR}
export PYTHONUNBUFFERED=1
[ -d .whl/site ] && export PYTHONPATH="$(pwd)/.whl/site:${PYTHONPATH:-}"
cd tests/reference
timeout 170 python3 measure_posttrain.py "$OUT/posttrain3.json" --deadline 160 \
    --only grpo-llama1b-lora-ckpt,grpo-qwen0.5b-amp-accum2 2>"$OUT/posttrain3.log"
echo "posttrain rc=$?" >"$OUT/env_grpo.txt"
