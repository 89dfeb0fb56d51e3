"""The time model against every step time a real GPU measured for this project (issue 33).

Sources, all committed under gpu/ (median of steps 3 to 5 of a plain PyTorch loop: forward,
loss, backward, AdamW foreach, zero_grad; no data loading):
- the nine real-size presets on an H100 and on an H200 (measure_gpu.py `presets`);
- torchao float8 runs and their bf16 twins on the H200 (`fp8presets`);
- a grid of sizes (GPT-2 124M to Llama 3.1 8B), full and LoRA, checkpointing, shapes and one
  compiled run on the H200 (measure_allocator.py `timing`, 2026-11-26);
- launch-bound steps of 64 tokens (`launch`: the host's cost per kernel is their median, so
  all in the fit half) and steps between the launch- and GPU-bound regimes (`launchmid`,
  measured after that constant was set: all held out), on the H200 (2026-11-27).

Each run falls in one half by a hash of its name (`half`): the fit half may be used to fit a
constant, the held-out half never. No constant is fitted on either: the framework factor is
the profiled kernels' share of four H200 steps, the elementwise kernels' bandwidth share was
fitted on three of those profiles' kernel times (not their step times), and the unaligned
GEMM share on one profiled kernel (tests/time.rs recomputes all three).

The model meets its median goal on both halves but not the maximum (25%): the H100's
checkpointed LoRA of Llama 3.1 8B (fit half) and steps near the host's launch floor (held-out),
nor the H200's speed-up over the H100 within 5% per run: strict expected failures until it gets
there. report.md gets every row with its error and the implied framework efficiency, and
the rank correlation of predicted and measured throughput within each source.
"""
import hashlib
import json
import pathlib
import statistics

import pytest

import report
from test_gpu_measured import preset_estimate

# Its section of report.md is written when the module ends: all its tests in one worker
# (scripts/test.sh distributes the others test by test).
pytestmark = pytest.mark.xdist_group("step_time")

GPU = pathlib.Path(__file__).parent / "gpu"
SOURCES = [
    ("H100 presets", "h100-sxm-80gb", "gpu_presets.json", "presets"),
    ("H200 presets", "h200-sxm-141gb", "h200/gpu_presets.json", "presets"),
    ("H200 fp8", "h200-sxm-141gb", "h200/gpu_presets_fp8.json", "fp8presets"),
    ("H200 grid", "h200-sxm-141gb", "h200/edge/timing.json", "timing"),
    # 2026-11-27: seven launch-bound steps of 64 tokens (the host's cost per kernel is their
    # median: all fit), then nine between the regimes, measured after that constant was set.
    ("H200 launch", "h200-sxm-141gb", "h200/posttrain/launch.json", "launch"),
    ("H200 launch-mid", "h200-sxm-141gb", "h200/posttrain/launchmid.json", "launchmid"),
]
FIXED_HALF = {"H200 launch": "fit", "H200 launch-mid": "held-out"}
# The time model's default efficiency (`--efficiency`), to show what each run implies.
EFFICIENCY = 0.93


def name(sc):
    m, prec, attn, ckpt, b, s, meth, rank = sc[:8]
    extra = f" fp8={sc[9]}" if len(sc) > 9 and sc[9] != "off" else ""
    extra += " compiled" if len(sc) > 10 and sc[10] else ""
    return f"{m} {prec} {attn} ckpt={ckpt} b{b}s{s} {meth}{rank or ''}{extra}"


def half(source, sc):
    """'fit' or 'held-out', fixed by the run's name: a run never changes half. The sources
    measured for one constant or after it are placed whole."""
    if source in FIXED_HALF:
        return FIXED_HALF[source]
    return "fit" if hashlib.sha256(f"{source}|{name(sc)}".encode()).digest()[0] % 2 == 0 else "held-out"


# (gpu, run) -> the core's band as multiples of its step time, and whether it is the calibrated one.
BANDS = {}


def predict(gpu, sc):
    speed = preset_estimate(gpu, sc)["speed"]
    band = speed["band"]
    BANDS[(gpu, name(sc))] = (tuple(round(x / speed["step_seconds"], 6) for x in band["step_seconds"]),
                              band["calibrated"])
    return speed["step_seconds"]


def runs():
    """(source, gpu, scenario, measured seconds) of every timed run that trained on the whole
    model (runs cut to fewer layers are left out: the catalog has no such model)."""
    out = []
    for source, gpu, path, key in SOURCES:
        for row in json.loads((GPU / path).read_text())[key]:
            sc = row["scenario"]
            if row.get("status") == "ok" and row.get("median_step_seconds") and not (len(sc) > 11 and sc[11]):
                out.append((source, gpu, sc, row["median_step_seconds"]))
    return out


RUNS = runs()
PREDICTED = {}


def _predicted(source, gpu, sc):
    key = (source, name(sc))
    if key not in PREDICTED:
        PREDICTED[key] = predict(gpu, sc)
    return PREDICTED[key]


def errors(which):
    return [abs(_predicted(s, g, sc) - t) / t for s, g, sc, t in RUNS if half(s, sc) == which]


def spearman(xs, ys):
    def ranks(v):
        order = sorted(range(len(v)), key=lambda i: v[i])
        r = [0.0] * len(v)
        for k, i in enumerate(order):
            r[i] = k
        return r

    rx, ry = ranks(xs), ranks(ys)
    n = len(xs)
    return 1 - 6 * sum((a - b) ** 2 for a, b in zip(rx, ry)) / (n * (n * n - 1)) if n > 2 else float("nan")


def test_every_committed_run_is_timed_and_both_halves_hold_runs():
    assert len(RUNS) >= 30, len(RUNS)
    halves = {half(s, sc) for s, _g, sc, _t in RUNS}
    assert halves == {"fit", "held-out"}


@pytest.mark.parametrize("which", [
    pytest.param("fit", marks=pytest.mark.xfail(strict=True, reason=(
        "issue 33: median 7% but LoRA of Llama 3.1 8B with checkpointing on the H100 is 29% slow in the model "
        "(the same run on the H200: +14%)"))),
    # The launch-bound Qwen2.5 0.5B steps under amp were 38-41% fast before the host's launch floor (launch.rs);
    # the steps between the regimes measured after it (launch-mid) were 37-81% fast without it.
    pytest.param("held-out", marks=pytest.mark.xfail(strict=True, reason=(
        "issue 33: median 8%, but steps near the launch floor are -20% to +46% off: the host's cost per kernel "
        "varies 24-46 us between code paths (peft, autocast, checkpointing, GPT-2's modules; phase by phase in "
        "gpu/h200/posttrain/hostphases.json) and the floor counts one median cost"))),
])
def test_step_times_within_10_percent_median_and_25_percent_max(which):
    e = errors(which)
    assert statistics.median(e) <= 0.10 and max(e) <= 0.25, (statistics.median(e), max(e))


@pytest.mark.xfail(strict=True, reason="issue 33: the model's H200/H100 ratio comes from the elementwise kernels' "
                                       "bandwidth now, 1.16-1.33 against the runs' 1.10-1.26, but only one run is within 5%")
def test_the_h200s_speed_up_over_the_h100_comes_out_of_the_model():
    by = {(s, name(sc)): (g, sc, t) for s, g, sc, t in RUNS if s.endswith("presets")}
    for (s, n), (g, sc, t) in by.items():
        if s != "H100 presets" or ("H200 presets", n) not in by:
            continue
        g2, sc2, t2 = by[("H200 presets", n)]
        measured, model = t / t2, _predicted(s, g, sc) / _predicted("H200 presets", g2, sc2)
        assert abs(model - measured) <= 0.05 * measured, (n, measured, model)


def test_the_calibrated_band_is_where_eight_in_ten_runs_fell():
    """time::CALIBRATED_BAND, recomputed: the 10th and 90th percentiles of measured over modelled
    step time over every run here (all on calibrated GPUs), within 0.01."""
    ratios = [t / _predicted(s, g, sc) for s, g, sc, t in RUNS]
    deciles = statistics.quantiles(ratios, n=10, method="inclusive")
    bands = {BANDS[(g, name(sc))] for s, g, sc, t in RUNS}
    assert len(bands) == 1, bands
    ((low, high), calibrated), = bands
    assert calibrated
    assert abs(low - deciles[0]) <= 0.01 and abs(high - deciles[-1]) <= 0.01, (low, high, deciles[0], deciles[-1])


def teardown_module(module):
    lines = ["", "## Step time: the time model against every committed GPU run (test_step_time.py)", "",
             "Seconds per step, measured / core; the framework efficiency each run implies at the model's "
             f"{EFFICIENCY:.2f}; the half each run belongs to (no step time is fitted).", "",
             "| source | run | half | measured | core | error | implied efficiency |", "|---|---|---|---|---|---|---|"]
    by_source = {}
    for s, g, sc, t in RUNS:
        p = _predicted(s, g, sc)
        lines.append(f"| {s} | {name(sc)} | {half(s, sc)} | {t:.4f} | {p:.4f} | {100 * (p - t) / t:+.0f}% | "
                     f"{EFFICIENCY * p / t:.2f} |")
        b, seq = sc[4], sc[5]
        by_source.setdefault(s, []).append((b * seq / p, b * seq / t))
    lines += ["", "| source | runs | Spearman rank correlation of tokens/s, core against measured |", "|---|---|---|"]
    for s, pairs in by_source.items():
        lines.append(f"| {s} | {len(pairs)} | {spearman([a for a, _ in pairs], [b for _, b in pairs]):.2f} |")
    for which in ("fit", "held-out"):
        e = errors(which)
        lines.append(f"\n{which}: {len(e)} runs, median error {100 * statistics.median(e):.0f}%, max {100 * max(e):.0f}%.")
    report.write_section("step-time", lines)
