"""ORPO, CPO and SimPO's loss (issue 31) against TRL 1.16's own trainers.

TRL's experimental ORPOTrainer and CPOTrainer (SimPO is CPO's loss_type) build the whole logits;
on CUDA their log-probabilities come from TRL's Triton kernel, which saves the logits and
allocates their gradient in backward. measure_orpo_cuda_path.py runs the trainers' own
compute_loss and backward on CPU with that kernel replaced by a stand-in making exactly its
allocations, and records the loss phase's live bytes; cpu/orpo_cuda_path.json holds its 54 runs
(three trainers, bf16 and fp32, one to three pairs of 16 to 64 tokens, a tiny Llama with a
8,192-word vocabulary). Here the core's logits line must equal the logits' bytes, and its loss
forward and backward lines the measured peaks within 0.1% (the core leaves out a few hundred
bytes of scalars and masks, and counts the labels freed during the phase). One run is measured
again, so the committed figures follow the installed TRL.
"""
import json
import os
import pathlib
import subprocess
import tempfile

import pytest

from test_saved_bytes import BIN

HERE = pathlib.Path(__file__).parent
DATA = json.loads((HERE / "cpu" / "orpo_cuda_path.json").read_text())
TRAINER = {"orpo": "orpo", "cpo-sigmoid": "cpo", "simpo": "simpo"}
TOLERANCE = 0.001


def core(run):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(DATA["model"], f)
    args = [BIN, "estimate", "--model", f.name, "--gpu", "h200-sxm-141gb", "--batch", str(run["n"]), "--seq",
            str(run["s"]), "--precision", run["precision"], "--trainer", TRAINER[run["kind"]], "--format", "json"]
    out = subprocess.run(args, capture_output=True, text=True)
    os.unlink(f.name)
    assert out.returncode == 0, out.stderr
    lines = {c["id"]: c["bytes"] for c in json.loads(out.stdout)["components"]}
    return lines


def name(run):
    return f"{run['kind']}-{run['precision']}-{run['n']}x{run['s']}"


@pytest.mark.parametrize("run", DATA["runs"], ids=name)
def test_loss_lines_equal_the_measured_peaks(run):
    lines = core(run)
    c = 2 if run["precision"] == "bf16" else 4
    assert lines["logits"] == 2 * run["n"] * run["s"] * run["vocab"] * c
    for line, measured in [("loss_forward", run["forward_peak"]), ("loss_backward", run["backward_peak"])]:
        err = (lines[line] - measured) / measured
        assert abs(err) <= TOLERANCE, f"{line}: core {lines[line]}, measured {measured} ({100 * err:+.3f}%)"


def test_one_run_measured_again_gives_the_committed_figures():
    pytest.importorskip("trl")
    import measure_orpo_cuda_path as m

    run = next(r for r in DATA["runs"] if (r["kind"], r["precision"], r["n"], r["s"]) == ("orpo", "bf16", 2, 33))
    got = m.measure("orpo", "bf16", 2, 33, run["vocab"])
    for key in ("retained", "forward_peak", "backward_peak"):
        assert got[key] == run[key], (key, got[key], run[key])
