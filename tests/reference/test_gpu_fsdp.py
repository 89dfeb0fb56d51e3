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
- Reserved and device: FSDP's step is replayed through the allocator model with its streams
  (estimate/sequence/fsdp.rs for FSDP2: the all-gather outputs on the copy-in stream, the
  unsharded parameters and the reduce-scatter inputs on the default stream, each sharded gradient
  on the reduce-scatter stream; fsdp1.rs for FSDP1's flat parameters on its pre-unshard, unshard
  and post-backward streams, a reshard's block waiting for the default stream). FSDP2: reserved
  within 2% on every run (it was -20.1% to +2.0% with the slack fraction), the device level within
  2% once the NCCL buffers are taken out. FSDP1: LoRA -0.5% (was -10.3%), full fine-tuning +7.0%
  and -1.4% (were -17.8% and -21.3%; the 1B run was -18.9% until AdamW's states under FSDP1
  became one request per flat parameter, as its first step makes them), QLoRA +0.3%, -0.2% and +2.9% (were -8.3%, +5.1%, -7.7%:
  each rank loads its shard of the 4-bit weights and all of their quantization states);
  parameter offload keeps the slack fraction. Each
  run more than 5% off is a strict xfail (`FSDP1_OFF`). `table()` prints every run at the three
  levels (gpu/h200/fsdp/report.md; allocator traces in traces/). The measured device level lacks
  NCCL's buffers (the fake group has none) while the core's counts 512 MiB of them, so its device
  errors in the table flatter the core by that much.
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


# FSDP1 runs more than 5% off at the reserved level, as measured / core in GiB. Replayed
# (estimate/sequence/fsdp1.rs): the 1B run's second step cut a fourth 8 GiB logits block the replay
# does not (as on the single-GPU trace 1, tests/allocator_sequence.rs); the 8B run over 8 ranks is
# over, with no trace to say where. Parameter offload is not replayed and keeps the slack fraction.
FSDP1_OFF = {
    "llama-3.1-8b/w8/fsdp1/full/amp-bf16/reduce_compute/ckpt_full/b2s4096": "replayed: 35.85 / 38.37 (+7.0%)",
    "llama-3.1-8b/w2/fsdp1/qlora/amp-bf16/reduce_compute/ckpt_full/b2s2048/accum2/dropout/offload":
        "slack fraction: 12.11 / 10.17 (-16.0%)",
    "llama-3.2-3b/w2/fsdp1/lora/amp-bf16/reduce_compute/ckpt_full/b2s2048/accum2/dropout/offload":
        "slack fraction: 9.60 / 8.41 (-12.4%)",
    "llama-3.1-8b/w2/fsdp1/lora/amp-bf16/reduce_compute/ckpt_full/b2s2048/accum2/dropout/offload":
        "slack fraction: 12.62 / 10.41 (-17.5%)",
}


def _params():
    out = []
    for row in RUNS:
        name = _id(row["scenario"])
        marks = []
        if name in FSDP1_OFF:
            marks = [pytest.mark.xfail(strict=True, reason="FSDP1 " + FSDP1_OFF[name])]
        out.append(pytest.param(row, marks=marks, id=name))
    return out


@pytest.mark.parametrize("row", _params())
def test_fsdp_reserved(row):
    """FSDP2 is replayed through the allocator model with its streams (estimate/sequence/fsdp.rs):
    within 2% of what the H200 reserved (it was -20.1% to +2.0% with the slack fraction). FSDP1
    (estimate/sequence/fsdp1.rs where replayed) within 5%, or a named disagreement above."""
    p = estimate(row["scenario"])
    err = _error(p["peak"]["reserved"], row["peak_reserved"])
    assert abs(err) <= (0.02 if row["scenario"]["fsdp"] == 2 else 0.05), f"reserved {100 * err:+.1f}%"


@pytest.mark.parametrize("row", [r for r in RUNS if r["scenario"]["fsdp"] == 2], ids=lambda r: _id(r["scenario"]))
def test_fsdp2_device_without_nccl(row):
    """The device level (what nvidia-smi shows) of the FSDP2 runs, less the NCCL buffers the core
    counts and the fake process group never made: within 2%."""
    p = estimate(row["scenario"])
    nccl = next(c["bytes"] for c in p["components"] if c["id"] == "nccl")
    err = _error(p["peak"]["device"] - nccl, row["peak_device"])
    assert abs(err) <= 0.02, f"device {100 * err:+.1f}%"


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
