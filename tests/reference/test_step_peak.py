"""The core's step peak (`bytes.peak_tensors`, `peak_phase`) against real transformers/torch.

Each scenario runs two training steps on CPU (forward, HF loss, backward, AdamW foreach step,
zero_grad) and measures the live tensor bytes of the second one (see measure_peak.py for the
method and the named CPU-to-CUDA corrections). The step's peak within 1% and in the same phase;
without checkpointing also each decoder layer's backward peak within 1%. Rows are report.md's
"Step peak" section (report.py). Run by scripts/test.sh with HEADROOM_BIN pointing at
the CLI.
"""
import pathlib

import pytest

import report
from measure_peak import measure_step, validate
from test_saved_bytes import CONFIGS, cpu_flash, predict

# Its section of report.md is written when the module ends: all its tests in one worker
# (scripts/test.sh distributes the others test by test).
pytestmark = pytest.mark.xdist_group("step_peak")

HERE = pathlib.Path(__file__).parent

# (family, precision, attention, checkpointing, batch, seq, keep_logits). Small batches put the
# peak in the optimizer step (gradients + AdamW's sqrt list), larger ones in the backward.
SCENARIOS = [
    ("llama", "fp32", "eager", "none", 2, 64, False),
    ("llama", "bf16", "sdpa", "none", 2, 64, False),
    ("llama", "fp32", "eager", "none", 4, 128, False),
    ("llama", "amp-bf16", "sdpa", "none", 4, 128, False),
    ("llama", "bf16", "sdpa", "full", 4, 128, False),
    ("llama", "fp32", "eager", "full", 4, 128, False),
    ("llama", "amp-bf16", "sdpa", "full", 4, 128, False),
    ("llama", "fp32", "eager", "none", 4, 128, True),
    ("llama", "bf16", "eager", "none", 1, 512, False),
    ("mistral", "fp32", "sdpa", "none", 4, 128, False),
    ("mistral", "bf16", "eager", "none", 4, 128, True),
    ("mistral", "amp-bf16", "eager", "none", 2, 64, False),
    ("mistral", "bf16", "eager", "full", 4, 128, True),
    ("qwen2", "bf16", "eager", "none", 4, 128, False),
    ("qwen2", "amp-bf16", "sdpa", "none", 4, 128, False),
    ("qwen2", "fp32", "sdpa", "full", 4, 128, True),
    ("gpt2", "fp32", "eager", "none", 4, 128, False),
    ("gpt2", "bf16", "sdpa", "none", 4, 128, False),
    ("gpt2", "fp32", "sdpa", "full", 4, 128, False),
    ("gpt2", "bf16", "eager", "none", 2, 64, True),
    ("gpt2", "fp32", "eager", "none", 1, 256, False),
    # Issue 13's dense architectures.
    # The step's peak and phase agree for all; one layer's backward peak is off by 1.5% for
    # OLMo 2 (its norms after attention and the MLP run first in backward: not modelled).
    # Strict: passing means the core learned it. (StarCoder2's -1.8% here was the CPU GEMM's
    # scratch buffer in its c_fc weight gradient, now left out by measure_peak.walk: exact.)
    pytest.param("olmo2", "fp32", "eager", "none", 4, 128, False, marks=pytest.mark.xfail(
        strict=True, reason="one layer's backward peak +1.5% (OLMo 2's post-norms)")),
    ("olmo2", "bf16", "sdpa", "full", 4, 128, False),
    ("starcoder2", "bf16", "sdpa", "none", 4, 128, False),
    ("starcoder2", "fp32", "eager", "full", 4, 128, False),
    ("glm4", "amp-bf16", "sdpa", "none", 4, 128, False),
    ("glm4", "bf16", "eager", "none", 4, 128, False),
    ("cohere2", "bf16", "sdpa", "none", 4, 128, False),
    ("cohere2", "fp32", "eager", "full", 4, 128, False),
    ("granite", "amp-bf16", "sdpa", "none", 4, 128, False),
    ("granite", "bf16", "eager", "none", 4, 128, True),
    ("smollm3", "bf16", "sdpa", "none", 4, 128, False),
]

# Kept logits (`--keep-logits`) in every precision, across vocabularies from 1K to 256K: a
# check from outside reported the peak over by one logits tensor in fp32, fp32 with
# checkpointing and bf16 with a 128K vocabulary (not reproduced here: these pin it).
# (family, vocabulary, precision, attention, checkpointing, batch, seq)
KEPT = [
    ("llama", 1000, "fp32", "sdpa", "none", 4, 128),
    ("llama", 32000, "fp32", "sdpa", "full", 2, 64),
    ("llama", 128256, "fp32", "sdpa", "none", 1, 64),
    ("llama", 128256, "fp32", "eager", "full", 1, 64),
    ("llama", 128256, "bf16", "sdpa", "none", 2, 128),
    ("llama", 128256, "amp-bf16", "sdpa", "none", 2, 64),
    ("qwen2", 151936, "bf16", "eager", "full", 2, 64),
    ("qwen2", 256000, "bf16", "sdpa", "none", 1, 64),
    ("gpt2", 1000, "bf16", "sdpa", "none", 4, 128),
    ("gpt2", 128256, "fp32", "sdpa", "full", 1, 64),
]

REPORT = []


def test_method_on_known_sizes():
    r = validate()
    assert r["peak"] == 4000 + 10000, r
    assert r["phase"] == "forward", r
    assert r["residual"] == 800, r


@pytest.mark.parametrize("fam,prec,attn,ckpt,b,s,keep", SCENARIOS,
                         ids=[f"{f}-{p}-{a}-ckpt_{c}-b{b}s{s}{'-keep' if k else ''}"
                              for f, p, a, c, b, s, k in (getattr(x, "values", x) for x in SCENARIOS)])
def test_step_peak(fam, prec, attn, ckpt, b, s, keep):
    check_peak(f"{fam} {prec} {attn} ckpt={ckpt} b{b} s{s}{' keep' if keep else ''}",
               CONFIGS[fam], prec, attn, ckpt, b, s, keep)


@pytest.mark.parametrize("fam,vocab,prec,attn,ckpt,b,s", KEPT,
                         ids=[f"{f}-v{v}-{p}-{a}-ckpt_{c}-b{b}s{s}-keep" for f, v, p, a, c, b, s in KEPT])
def test_kept_logits_peak(fam, vocab, prec, attn, ckpt, b, s):
    check_peak(f"{fam} vocab {vocab} {prec} {attn} ckpt={ckpt} b{b} s{s} keep",
               {**CONFIGS[fam], "vocab_size": vocab}, prec, attn, ckpt, b, s, True)


def check_peak(name, config, prec, attn, ckpt, b, s, keep):
    # Per-layer backward marks need module backward hooks, which reentrant checkpointing
    # does not order; they add identity nodes only (the step's peak is the same with them).
    detail = ckpt == "none"
    m = measure_step(config, b, s, prec, attn, ckpt, keep, detail=detail)
    # fp32 with grouped-query attention: math on CUDA, flash on CPU (`cpu_flash`).
    extra = cpu_flash(config, prec, attn)
    p = predict(config, b, s, prec, attn, ckpt, keep, extra)
    got, want = p["bytes"]["peak_tensors"], m["peak"]
    err = 100 * (got - want) / want
    layer_errs = layer_backward_errors(m, p) if detail else {}
    worst = max(layer_errs.values(), key=abs) if layer_errs else None
    REPORT.append((name, want, got, err, m["phase"], p["peak"]["phase"], worst))
    assert m["residual"] == 0, f"the step did not free what it allocated: {m['residual']} B left"
    assert abs(got - want) <= 0.01 * want, f"peak_tensors: predicted {got}, measured {want} ({err:+.2f}%)"
    assert p["peak"]["phase"] == m["phase"], f"peak phase: predicted {p['peak']['phase']}, measured {m['phase']}"
    # Each decoder layer's backward peak (the core's "layer k backward" point), within 1%.
    for k, e in layer_errs.items():
        assert abs(e) <= 1.0, f"layer {k} backward: predicted vs measured {e:+.2f}% (all: {layer_errs})"


def layer_backward_errors(m, p):
    """Error (%) of the core's "layer k backward" points against the measured maximum between
    the marks of layer k's and layer k-1's backward. Layer 1's stretch runs on to the optimizer
    and so also holds the embedding's backward: compared with the larger of the two points."""
    core = {pt["label"]: pt["tensors"] for pt in p["timeline"]}
    seg = {}
    for name, _start, mx in m["segments"]:
        seg[name] = max(seg.get(name, 0), mx)
    out = {}
    k = 1
    while f"backward:layer {k}" in seg:
        c = core[f"layer {k} backward"]
        if k == 1:
            c = max(c, core["embedding backward"])
        out[k] = 100 * (c - seg[f"backward:layer {k}"]) / seg[f"backward:layer {k}"]
        k += 1
    return out


def teardown_module(module):
    lines = ["", "## Step peak (`peak_tensors`)", "",
             "| scenario | measured peak | core peak | error | measured phase | core phase | worst layer backward |",
             "|---|---|---|---|---|---|---|"]
    for name, want, got, err, mph, cph, worst in REPORT:
        layer = "-" if worst is None else f"{worst:+.2f}%"
        lines.append(f"| {name} | {want} | {got} | {err:+.2f}% | {mph} | {cph} | {layer} |")
    report.write_section("step-peak", lines)
