"""DPO and GRPO steps measured on the H200 as TRL 1.16 runs them, against the core (issue 31).

The runs (gpu/h200/posttrain/posttrain.json and posttrain2.json, measure_posttrain.py): TRL's
own DPOTrainer and GRPOTrainer `train()` on random-weight catalog presets, each phase's peak at
the three levels. The Trainer's optimizer is its default, fused AdamW (`adamw_torch_fused`
since torch 2.8: no temporaries in the step), so the core is asked with `--optimizer
adamw-fused`. The first call's four DPO rows were compared while the model was built; the
second call's three were measured after it and are held out.

DPO: the allocated peak within 1%, two rows a known gap (strict). GRPO (16 completions of
128 + 256 tokens, with and without a KL term's reference model; then, held out, LoRA with
checkpointing and fp32 weights under autocast with two micro-batches per step): the generation
phase's peak within 1%, the step's within 2% (the training peak is 1.2% under: 0.16 GB not
found) and the step time within 15% (the host's cost per decoding kernel was fitted on the
first row), the held-out rows' misses strict known gaps. Reserved and device are in report.md for every row (the allocator's slack
is issue 30's).
"""
import json
import pathlib
import subprocess

import pytest

import report
from test_saved_bytes import BIN

# Its section of report.md is written when the module ends: all its tests in one worker
# (scripts/test.sh distributes the others test by test).
pytestmark = pytest.mark.xdist_group("posttrain_measured")

HERE = pathlib.Path(__file__).parent
FILES = ["gpu/h200/posttrain/posttrain.json", "gpu/h200/posttrain/posttrain2.json",
         "gpu/h200/posttrain/posttrain3.json"]
LEVELS = ("allocated", "reserved", "device")

# Known gaps at the allocated level, strict: they fail when they start agreeing.
GAPS = {
    "dpo-qwen0.5b-full-amp": "+2.0%: an fp32 Qwen2.5 0.5B under autocast, 0.45 GB over at the loss's backward (not found)",
    "dpo-qwen1.5b-lora-bf16-ckpt": "-4.5%: LoRA with checkpointing on Qwen2.5 1.5B, 1.0 GB under in the last layer's "
                                   "backward (not found; the Llama rows with checkpointing are exact)",
}
REPORT = []


def rows():
    out = []
    for i, f in enumerate(FILES):
        for r in json.loads((HERE / f).read_text())["runs"]:
            r["call"] = "first" if i == 0 else "held out"
            out.append(r)
    return out


ROWS = rows()
DPO = [r for r in ROWS if r["run"][0] == "dpo"]
GRPO = [r for r in ROWS if r["run"][0] == "grpo"]


def estimate(r):
    kind, preset, prec, meth, b, p, c, opts = r["run"]
    args = [BIN, "estimate", "--model", preset, "--gpu", "h200-sxm-141gb", "--batch", str(b), "--seq", str(p + c),
            "--precision", prec, "--attention", "sdpa", "--checkpointing", "full" if opts.get("ckpt") else "none",
            "--method", meth, "--optimizer", "adamw-fused", "--trainer", kind, "--format", "json"]
    if meth != "full":
        args += ["--rank", "16", "--targets", "all"]
    if kind == "grpo":
        # measure_posttrain's GRPO batch is the completions per device, num_generations of each prompt.
        args += ["--prompt", str(p), "--accum", str(opts.get("accum", 1))] + (["--kl"] if opts.get("beta") else [])
    return json.loads(subprocess.run(args, capture_output=True, text=True, check=True).stdout)


def test_every_run_trained_and_the_files_are_trl_116():
    assert len(DPO) == 7 and len(GRPO) == 4
    for f in FILES:
        env = json.loads((HERE / f).read_text())["environment"]
        assert env["trl"] == "1.16.0" and env["gpu"] == "NVIDIA H200"
    assert all(r["status"] == "ok" for r in ROWS)


def _with_gaps(rows, gaps, key):
    """The rows as test parameters, a strict xfail on each whose `key(row)` names a gap."""
    return [pytest.param(r, id=r["name"], marks=[pytest.mark.xfail(strict=True, reason=gaps[key(r)])]
                         if key(r) in gaps else []) for r in rows]


@pytest.mark.parametrize("row", _with_gaps(DPO, GAPS, lambda r: r["name"]))
def test_dpo_allocated_peak_within_1_percent(row):
    e = estimate(row)
    REPORT.append((row, e))
    got, want = e["bytes"]["peak_allocated"], row["peak_allocated"]
    err = (got - want) / want
    assert abs(err) <= 0.01, f"core {got}, H200 {want} ({100 * err:+.2f}%)"


GRPO_REPORT = []


def _last(r, phase):
    return next(p for p in reversed(r["phases"]) if p["phase"] == phase)


# Known gaps of the two GRPO rows measured after the model was built, strict.
GRPO_GAPS = {
    ("grpo-llama1b-lora-ckpt", "allocated"): "-3.8%: LoRA with checkpointing, 0.23 GB under in the last layer's "
                                             "backward (the DPO row of LoRA with checkpointing is 4.5% under: not found)",
    ("grpo-llama1b-lora-ckpt", "time"): "-33%: peft's Python around each adapted Linear makes a decoding kernel cost the "
                                        "host more than the plain model's (training shows it too: 37 against 27 us)",
    ("grpo-qwen0.5b-amp-accum2", "allocated"): "+2.8%: fp32 weights under autocast, two micro-batches: 0.4 GB over in the "
                                               "second micro-batch's head backward (not found)",
    ("grpo-qwen0.5b-amp-accum2", "time"): "-24%: autocast's dispatch makes a decoding kernel cost the host more",
    ("grpo-qwen0.5b-amp-accum2", "generation"): "-1.0%: 71 MB under in generation (sampling's fp32 temporaries over "
                                                "the vocabulary are not counted; 22 MB under on the bf16 row)",
}


def _grpo_params(what):
    return _with_gaps(GRPO, GRPO_GAPS, lambda r: (r["name"], what))


@pytest.mark.parametrize("row", _grpo_params("generation"))
def test_grpo_generation_phase_within_1_percent(row):
    e = estimate(row)
    GRPO_REPORT.append((row, e))
    generation = next(t for t in e["timeline"] if t["label"].startswith("generation"))
    want = _last(row, "generation+scoring")["max_allocated"]
    assert abs(generation["allocated"] - want) <= 0.01 * want, (generation["allocated"], want)


@pytest.mark.parametrize("row", _grpo_params("allocated"))
def test_grpo_allocated_peak_within_2_percent(row):
    got, want = estimate(row)["bytes"]["peak_allocated"], row["peak_allocated"]
    assert abs(got - want) <= 0.02 * want, f"core {got}, H200 {want} ({100 * (got - want) / want:+.2f}%)"


@pytest.mark.parametrize("row", _grpo_params("time"))
def test_grpo_step_time_within_15_percent(row):
    t, m = estimate(row)["speed"]["step_seconds"], row["median_step_seconds"]
    assert abs(t - m) <= 0.15 * m, (t, m)


# DPO's step time, within 20%; strict known gaps (2026-11-28, after the reference under LoRA
# lost the adapters' path and the no-grad forwards' launches were counted).
DPO_TIME_GAPS = {
    "dpo-qwen0.5b-lora-bf16": "-20.7%: launch-bound (8 x 1,024 tokens of a 0.5B model with LoRA); the host's "
                              "cost per kernel is one constant, peft's Python around each adapted Linear is not",
}


@pytest.mark.parametrize("row", _with_gaps(DPO, DPO_TIME_GAPS, lambda r: r["name"]))
def test_dpo_step_time_within_20_percent(row):
    t, m = estimate(row)["speed"]["step_seconds"], row["median_step_seconds"]
    assert abs(t - m) <= 0.20 * m, f"core {t:.4f} s, H200 {m:.4f} s ({100 * (t - m) / m:+.1f}%)"


def teardown_module(module):
    lines = ["", "## DPO and GRPO on the H200 as TRL 1.16 runs them (test_posttrain_measured.py)", "",
             "Peaks measured / core (GB), at the three levels; the Trainer's default fused AdamW. Rows of the "
             "second device call are held out (measured after the model was built).", "",
             "| run | call | tokens | allocated | reserved | device | step time (s) | core's peak at |",
             "|---|---|---|---|---|---|---|---|"]
    for r, e in REPORT:
        cells = []
        for lvl in LEVELS:
            got, want = e["bytes"][f"peak_{lvl}"], r[f"peak_{lvl}"]
            cells.append(f"{want / 1e9:.2f} / {got / 1e9:.2f} ({100 * (got - want) / want:+.1f}%)")
        t, m = e["speed"]["step_seconds"], r["median_step_seconds"]
        cells.append(f"{m:.3f} / {t:.3f} ({100 * (t - m) / m:+.0f}%)")
        shape = r["input_shapes"][0]["input_ids"]
        lines.append(f"| {r['name']} | {r['call']} | {shape[0]} x {shape[1]} | {' | '.join(cells)} | {e['peak']['at']} |")
    lines += ["", "GRPO, generation with transformers' generate (no vLLM): measured / core, GB and seconds; the "
              "generation phase's allocated peak apart from the step's.", "",
              "| run | completions x (prompt + completion) | generation | allocated | reserved | device | step time |",
              "|---|---|---|---|---|---|---|"]
    for r, e in GRPO_REPORT:
        shape = r["input_shapes"][0]
        gen_core = next(t for t in e["timeline"] if t["label"].startswith("generation"))["allocated"]
        gen = _last(r, "generation+scoring")["max_allocated"]
        cells = [f"{gen / 1e9:.2f} / {gen_core / 1e9:.2f} ({100 * (gen_core - gen) / gen:+.1f}%)"]
        for lvl in LEVELS:
            got, want = e["bytes"][f"peak_{lvl}"], r[f"peak_{lvl}"]
            cells.append(f"{want / 1e9:.2f} / {got / 1e9:.2f} ({100 * (got - want) / want:+.1f}%)")
        t, m = e["speed"]["step_seconds"], r["median_step_seconds"]
        cells.append(f"{m:.2f} / {t:.2f} ({100 * (t - m) / m:+.0f}%)")
        lines.append(f"| {r['name']} | {shape['completion_ids'][0]} x ({shape['prompt_ids'][1]} + "
                     f"{shape['completion_ids'][1]}) | {' | '.join(cells)} |")
    report.write_section("posttrain-measured", lines)
