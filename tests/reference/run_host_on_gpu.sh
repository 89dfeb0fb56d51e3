#!/usr/bin/env bash
# The third GPU call of 2026-11-27 (about two minutes): each phase of the launch-bound and
# in-between steps timed apart, with the kernels it launched (issue 33's host cost per kernel
# by phase). From the repository root:  tests/reference/run_host_on_gpu.sh OUTDIR
set -u
OUT=${1:?usage: run_host_on_gpu.sh OUTDIR}
export PYTHONUNBUFFERED=1
cd tests/reference
timeout 200 python3 measure_allocator.py hostphases "$OUT/hostphases.json" --deadline 190 2>"$OUT/hostphases.log"
echo "hostphases rc=$?" >"$OUT/env.txt"
