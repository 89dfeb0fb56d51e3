"""The core against FSDP on a real GPU: eleven real-size runs an H200 measured on 2026-11-27
(run_fsdp_on_gpu.sh; raw output in gpu/h200/fsdp/: torch 2.11.0+cu130, transformers 5.23.0,
peft 0.21.2, bitsandbytes 0.50.2).

One GPU stands for one rank of 2 or 8: measure_fsdp_peak.py wraps Llama 3.2 1B, Llama 3.1 8B and
Qwen2.5 0.5B with FSDP2 (one unit a decoder layer and the root) and FSDP1 (as accelerate wraps
it for the Trainer, peft's wrap policy under LoRA) on PyTorch's fake process group, which
launches no collective kernels but hands FSDP its real buffers on its own streams. Full
fine-tuning, LoRA and QLoRA (bitsandbytes NF4 stored as bf16, FSDP1 as peft's FSDP-QLoRA recipe),
pure bf16 and amp-bf16 reducing in bf16 (accelerate) or fp32 (torchtitan), with and without
checkpointing; levels of four steps, the first left out.

- The allocated peak is within 0.5% of the core's on every run (measured: 0.0% to +0.2%), and
  the rank's weight and optimizer-state shards are the core's to the byte (QLoRA's measured
  weights are its parameters, without the quantization states the core counts beside them).
  Under FSDP1's parameter offload the quantization states stay on the GPU (module attributes,
  not parameters): the core had moved them to the host with the shards (-0.9%, now +0.2%).
- Reserved and device: FSDP's steps are not replayed through the allocator model
  (estimate/sequence.rs `supported`), so reserved is the allocated peak plus the slack fraction.
  Runs more than 5% off are strict xfails with their figures; `table()` prints every run at the
  three levels (gpu/h200/fsdp/report.md). On these runs the caching allocator kept separate
  pools for FSDP's streams (FSDP2's copy-in and all-gather streams, FSDP1's unshard and
  post-backward streams: 3 to 5 GiB on Llama 3.2 1B, allocator traces in traces/), and the
  checkpointed runs cached 7 to 12 GiB beyond the allocated peak on the default stream.
  The measured device level lacks NCCL's buffers (the fake group has none) while the core's
  counts 512 MiB of them, so its device errors here flatter the core by that much.
"""
import json
import pathlib
import subprocess

import pytest

from test_fsdp import fsdp_flags
from test_saved_bytes import BIN

FSDP = pathlib.Path(__file__).parent / "gpu" / "h200" / "fsdp"
# The second call's third run (LoRA with parameter offload) ran past its 60 s and left no row;
# the third call ran it with 120 s.
RUNS = [r for f in (FSDP / "fsdp_cuda.json", FSDP / "part2" / "fsdp_cuda_2.json", FSDP / "part3" / "fsdp_cuda_3.json")
        for r in json.loads(f.read_text())["runs"] if r["status"] != "failed"]
GIB = 2 ** 30


def _id(sc):
    reduce = f"/reduce_{sc['reduce']}" if sc["precision"].startswith("amp") else ""
    extra = (f"/accum{sc['accum']}" if sc.get("accum", 1) > 1 else "") + ("/dropout" if sc.get("dropout") else "") + (
        "/offload" if sc.get("offload") else "")
    return (f"{sc['model']}/w{sc['world']}/fsdp{sc['fsdp']}/{sc['method']}/{sc['precision']}{reduce}/"
            f"ckpt_{sc['checkpointing']}/b{sc['batch']}s{sc['seq']}{extra}")


def estimate(sc):
    """The core's estimate of one run on the H200 (`test_fsdp.fsdp_flags` for the rest)."""
    args = [BIN, "estimate", "--model", sc["model"], "--gpu", "h200-sxm-141gb", "--batch", str(sc["batch"]),
            "--seq", str(sc["seq"]), "--precision", sc["precision"], "--attention", "sdpa",
            "--checkpointing", sc["checkpointing"], "--optimizer", "adamw", "--format", "json", *fsdp_flags(sc)]
    return json.loads(subprocess.run(args, capture_output=True, text=True, check=True).stdout)


def _error(core, measured):
    return (core - measured) / measured


@pytest.mark.parametrize("row", RUNS, ids=lambda r: _id(r["scenario"]))
def test_fsdp_allocated_peak_and_shards_on_gpu(row):
    assert row["status"] == "ok", row.get("error")
    p = estimate(row["scenario"])
    got, want = p["peak"]["allocated"], row["peak_allocated"]
    assert abs(_error(got, want)) < 0.005, f"allocated: core {got}, H200 {want} ({100 * _error(got, want):+.2f}%)"
    if row["scenario"].get("offload"):
        return  # the shards and AdamW's states live on the host
    assert p["bytes"]["optimizer_states"] == row["optimizer_states"]
    if row["scenario"]["method"] != "qlora":
        assert p["bytes"]["weights"] == row["weights"]


def _reserved_params():
    out = []
    for row in RUNS:
        p = estimate(row["scenario"])
        err = _error(p["peak"]["reserved"], row["peak_reserved"])
        marks = []
        if abs(err) > 0.05:
            reason = (f"FSDP's reserved level is the slack fraction, not a replay: core "
                      f"{p['peak']['reserved'] / GIB:.2f} GiB, H200 {row['peak_reserved'] / GIB:.2f} GiB "
                      f"({100 * err:+.1f}%)")
            marks = [pytest.mark.xfail(strict=True, reason=reason)]
        out.append(pytest.param(row, p, marks=marks, id=_id(row["scenario"])))
    return out


@pytest.mark.parametrize("row,p", _reserved_params())
def test_fsdp_reserved_within_five_percent(row, p):
    err = _error(p["peak"]["reserved"], row["peak_reserved"])
    assert abs(err) <= 0.05, f"reserved {100 * err:+.1f}%"


def table():
    """Every run at the three levels, measured / core (GiB), as markdown."""
    lines = ["| run | allocated | reserved | device | step (s) |", "|---|---|---|---|---|"]
    errors = {"allocated": [], "reserved": [], "device": []}
    for row in RUNS:
        pk = estimate(row["scenario"])["peak"]
        cells = []
        for level in ("allocated", "reserved", "device"):
            measured, core = row[f"peak_{level}"], pk[level]
            errors[level].append(abs(_error(core, measured)))
            cells.append(f"{measured / GIB:.2f} / {core / GIB:.2f} ({100 * _error(core, measured):+.1f}%)")
        lines.append(f"| {_id(row['scenario'])} | {' | '.join(cells)} | {sorted(row['step_seconds'][1:])[1]:.3f} |")
    summary = ", ".join(f"{k} median {100 * sorted(v)[len(v) // 2]:.1f}% max {100 * max(v):.1f}%" for k, v in errors.items())
    return "\n".join(lines) + f"\n\nAbsolute errors: {summary}.\n"


if __name__ == "__main__":
    print(table())
