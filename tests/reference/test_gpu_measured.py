"""The core against what real GPUs measured (measure_gpu.py; the raw outputs are under gpu/):

- an H100 80GB HBM3, torch 2.11.0+cu130, cuDNN 9.19, transformers 5.23.0 (this suite's, carried
  to the device as a wheel), peft 0.21.0, on 2026-11-25 (gpu/*.json). A first run with the
  device's own transformers 5.17.0 (gpu/gpu_presets_tf5.17.json) differed only where 5.17's gradient
  checkpointing keeps less than 5.23's (transformers 5.17 on CPU gives its figures exactly);
- an H200 141GB, the same software and torchao 0.18.0, on 2026-11-26 (gpu/h200/*.json), with
  the harness that counts only what autograd's graph still holds, and torchao float8 training
  against bf16 (gpu/h200/gpu_presets_fp8.json).

No GPU is needed to run this: the measurements are committed, the core is asked now.

- SDPA's kernel choice: `torch._fused_sdp_choice` for the call transformers makes (causal, no
  mask, q/k/v widths equal) against the core's pick, over dtype, head width, dropout and GQA.
- One layer's saved bytes and everything alive after forward, on CUDA, for the reference
  suite's scenarios: exact per layer, within 1% alive; the kernel that ran (its autograd node)
  is the one the core assumes.
- The step's peak of the reference suite's step scenarios: torch.cuda.max_memory_allocated
  against `peak_tensors`, within 1% (2% with eager attention, whose CUDA backward keeps more
  transients than the core's CPU-measured schedule).
- Real-size presets: the allocated peak within 1%, and fits or not as the GPU said; fp8 runs
  too, and their step time against the same run in bf16 as the time model says.

Where the GPU disagrees for a reason the core does not model, the case is a strict xfail
naming it; `report.md` gets a section with every figure.
"""
import json
import pathlib
import subprocess
import tempfile

import pytest

import report
from test_saved_bytes import BIN, CONFIGS, predict

# Its section of report.md is written when the module ends: all its tests in one worker
# (scripts/test.sh distributes the others test by test).
pytestmark = pytest.mark.xdist_group("gpu_measured")

HERE = pathlib.Path(__file__).parent


def _load(path):
    return json.loads((HERE / "gpu" / path).read_text())


# Each measured GPU: its name in the report, its catalog id, and what was measured on it.
MACHINES = {
    "h100": {"label": "H100 80GB HBM3", "gpu": "h100-sxm-80gb", "presets": _load("gpu_presets.json"),
             "small": _load("gpu_small.json"),
             # Three of the runs again with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True.
             "expandable": _load("gpu_presets_expandable.json")},
    "h200": {"label": "H200 141GB", "gpu": "h200-sxm-141gb", "presets": _load("h200/gpu_presets.json"),
             "small": _load("h200/gpu_small.json"), "fp8": _load("h200/gpu_presets_fp8.json")},
}
REPORT = {name: {"presets": [], "saved": [], "peak": []} for name in MACHINES}

KNOWN = {
    # (name or family, precision, attention, checkpointing): why the core differs.
}


def _gpu(machine):
    return ["--gpu", MACHINES[machine]["gpu"]]


def dead_router_bytes(config, b, s):
    """What measure_saved.py counted, when the H100's rows were measured, of DeepSeek-V3's router
    that autograd frees when the forward ends: it held every saved tensor, so the group top-2
    indices (t x groups x 2, int64), the group top-k indices (t x topk_group, int64) and the
    expert mask (t x experts, bool), saved by nodes the loss does not reach, were counted. The
    harness now counts what the graph still holds (measure_saved.py), as on the H200, whose rows
    need no correction; the H100's are corrected by these bytes, computed from the config."""
    t = b * s
    return t * (config["n_group"] * 2 * 8 + config["topk_group"] * 8 + config["n_routed_experts"])


def _kernel_label(attention):
    for k, label in (("cuDNN", "Cudnn"), ("memory-efficient", "Efficient"), ("flash", "Flash"), ("math", "Math")):
        if attention.startswith(f"SDPA, {k} kernel"):
            return label
    return None


# --- SDPA's choice -------------------------------------------------------------------------

NAMES = {"CUDNN_ATTENTION": "Cudnn", "FLASH_ATTENTION": "Flash", "EFFICIENT_ATTENTION": "Efficient", "MATH": "Math"}


def _choice_rows(machine):
    return [r for r in MACHINES[machine]["presets"]["sdpa"]
            if r["mask"] == "causal" and r["v_head_dim"] == r["head_dim"] and r["seq"] == 4096]


def _transformers_call(r, rows):
    """The measured row of the call transformers makes for row `r`: with grouped-query heads wider
    than 256 it repeats k and v and passes no `enable_gqa` (`use_gqa_in_sdpa`), which is the
    same call as with as many key/value heads as query heads."""
    if r["kv_heads"] == r["heads"] or r["head_dim"] <= 256:
        return r
    same = [m for m in rows if m["kv_heads"] == m["heads"] and
            all(m[k] == r[k] for k in ("dtype", "head_dim", "dropout", "v_head_dim"))]
    assert same, f"no measured row with repeated heads for {r}"
    return same[0]


@pytest.mark.parametrize("machine", MACHINES)
def test_sdpa_choice_is_the_gpus(machine):
    rows, wrong = _choice_rows(machine), []
    for r in rows:
        d, heads = r["head_dim"], r["heads"]
        config = {"model_type": "llama", "vocab_size": 1000, "hidden_size": 1024, "intermediate_size": 1024,
                  "num_hidden_layers": 2, "num_attention_heads": heads, "num_key_value_heads": r["kv_heads"],
                  "head_dim": d, "attention_dropout": r["dropout"]}
        with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
            json.dump(config, f)
            f.flush()
            out = subprocess.run([BIN, "estimate", "--model", f.name, *_gpu(machine), "--precision", r["dtype"],
                                  "--batch", "1", "--seq", "128", "--format", "json"],
                                 capture_output=True, text=True, check=True)
        core = _kernel_label(json.loads(out.stdout)["attention"])
        want = _transformers_call(r, rows)["backend"]
        if core != NAMES[want]:
            wrong.append((r["dtype"], d, r["dropout"], f"{heads}/{r['kv_heads']}", want, core))
    assert len(rows) >= 90
    assert not wrong, f"{len(wrong)} of {len(rows)} picks differ (dtype, head_dim, dropout, heads, GPU, core): {wrong}"


# --- One layer and what is alive after forward, on CUDA --------------------------------------

def _saved_id(row):
    name, fam, over, prec, attn, ckpt, b, s, keep = row["scenario"]
    return f"{name or fam}/{prec}/{attn}/ckpt_{ckpt}/b{b}s{s}{'/keep' if keep else ''}"


def _saved_params():
    out = []
    for machine, m in MACHINES.items():
        for row in m["small"]["saved"]:
            if "error" in row:
                continue
            name, fam, over, prec, attn, ckpt, b, s, keep = row["scenario"]
            why = KNOWN.get((name or fam, prec, attn, ckpt))
            marks = [pytest.mark.xfail(strict=True, reason=why)] if why else []
            out.append(pytest.param(machine, row, marks=marks, id=f"{machine}/{_saved_id(row)}"))
    return out


@pytest.mark.parametrize("machine,row", _saved_params())
def test_layer_on_gpu(machine, row):
    name, fam, over, prec, attn, ckpt, b, s, keep = row["scenario"]
    m = row["result"]
    config = {**CONFIGS[fam], **over}
    p = predict(config, b, s, prec, attn, ckpt, keep, _gpu(machine))
    got_l, want_l = p["bytes"]["activations_per_layer"], m["activations_per_layer"]
    got_r, want_r = p["bytes"]["retained_after_forward"], m["retained_after_forward"]
    if name == "deepseek_v3-moe":
        # The measured layer (the middle one) is a MoE layer, the core's one-layer figure its
        # dense layer's: its MoE layer is the one of the same config with every layer MoE.
        one_moe = predict({**config, "first_k_dense_replace": 0}, b, s, prec, attn, ckpt, keep, _gpu(machine))
        got_l = one_moe["bytes"]["activations_per_layer"]
        if machine == "h100":
            dead = dead_router_bytes(config, b, s)
            want_l -= dead
            want_r -= dead * (config["num_hidden_layers"] - config["first_k_dense_replace"])
    REPORT[machine]["saved"].append((_saved_id(row), got_l, want_l, got_r, want_r, m["sdpa_nodes"], p["attention"]))
    if attn == "sdpa":
        ran = {n.replace("ScaledDotProduct", "").split("Attention")[0] for n in m["sdpa_nodes"]} or {"Math"}
        assert ran == {_kernel_label(p["attention"])}, f"{machine} ran {m['sdpa_nodes']}, core: {p['attention']}"
    if ckpt == "none":
        assert got_l == want_l, f"one layer: core {got_l}, {machine} {want_l} ({got_l - want_l:+d} B)"
    assert abs(got_r - want_r) <= 0.01 * want_r, f"alive after forward: core {got_r}, {machine} {want_r}"


# --- The step's peak on CUDA ----------------------------------------------------------------

def _peak_params():
    out = []
    for machine, m in MACHINES.items():
        for row in m["small"]["peak"]["scenarios"]:
            fam, prec, attn, ckpt, b, s, keep = row["scenario"]
            out.append(pytest.param(machine, CONFIGS[fam], row,
                                    id=f"{machine}/{fam}/{prec}/{attn}/ckpt_{ckpt}/b{b}s{s}{'/keep' if keep else ''}"))
        for row in m["small"]["peak"]["kept"]:
            fam, vocab, prec, attn, ckpt, b, s = row["scenario"]
            row = {**row, "scenario": [fam, prec, attn, ckpt, b, s, True]}
            out.append(pytest.param(machine, {**CONFIGS[fam], "vocab_size": vocab}, row,
                                    id=f"{machine}/{fam}/v{vocab}/{prec}/{attn}/ckpt_{ckpt}/b{b}s{s}/keep"))
    return out


@pytest.mark.parametrize("machine,config,row", _peak_params())
def test_step_peak_on_gpu(machine, config, row):
    fam, prec, attn, ckpt, b, s, keep = row["scenario"]
    want = row["result"]["cuda_max_allocated"]
    got = predict(config, b, s, prec, attn, ckpt, keep, _gpu(machine))["bytes"]["peak_tensors"]
    err = 100 * (got - want) / want
    REPORT[machine]["peak"].append((f"{fam} {prec} {attn} ckpt={ckpt} b{b} s{s}{' keep' if keep else ''}",
                                    want, got, err))
    assert abs(err) <= (2.0 if attn == "eager" else 1.0), f"peak: core {got}, {machine} {want} ({err:+.2f}%)"


# --- Real-size presets ------------------------------------------------------------------------

def _preset_id(machine, sc):
    m, prec, attn, ckpt, b, s, meth = sc[:7]
    fp8 = f"/fp8_{sc[9]}" if len(sc) > 9 else ""
    return f"{machine}/{m}/{prec}/{attn}/ckpt_{ckpt}/b{b}s{s}/{meth}{fp8}"


def _preset_params():
    out = []
    for machine, mach in MACHINES.items():
        for row in mach["presets"]["presets"] + mach.get("fp8", {}).get("fp8presets", []):
            m, prec = row["scenario"][:2]
            marks = []
            if machine == "h100" and m == "llama-3.2-1b" and prec == "amp-bf16":
                # The fp32 logits of 16 x 2048 tokens x 128,256 are one 15.66 GiB block: with
                # 17.29 GiB cached in smaller free blocks the allocator could not place it
                # (fragmentation), so the run stopped at 68.3 GiB of 79.2. The core's replay of
                # the step reserves 68.2 GiB and fits (it keeps that block's segment whole:
                # estimate/sequence/mod.rs); the estimate warns that the block exceeds the room
                # left. With expandable segments the same run trains (76.65 GiB:
                # test_preset_with_expandable_segments), as it does on the H200's 139.8 GiB.
                marks = [pytest.mark.xfail(strict=True, reason="fragmentation: one 15.66 GiB block did not fit")]
            out.append(pytest.param(machine, row, marks=marks, id=_preset_id(machine, row["scenario"])))
    return out


def preset_estimate(gpu, sc, extra=()):
    """The core's estimate (`--format json`) of a measure_gpu.run_preset scenario on `gpu`:
    every field of the tuple as its CLI flag (adapters, fp8, compile, and the options' base
    dtype and kbit; the config overrides and the allocator cap have none)."""
    m, prec, attn, ckpt, b, s, meth, rank, tg = sc[:9]
    args = [BIN, "estimate", "--model", m, "--gpu", gpu, "--batch", str(b), "--seq", str(s), "--precision", prec,
            "--attention", attn, "--checkpointing", ckpt, "--method", meth, "--optimizer", "adamw",
            "--format", "json", *extra]
    if meth != "full":
        args += ["--rank", str(rank), "--targets", tg]
    if len(sc) > 9:
        args += ["--fp8", sc[9]]
    if len(sc) > 10 and sc[10]:
        args.append("--compile")
    opts = sc[12] if len(sc) > 12 else {}
    if opts.get("kbit"):
        args.append("--kbit")
    if "base" in opts:
        args += ["--base", opts["base"]]
    return json.loads(subprocess.run(args, capture_output=True, text=True, check=True).stdout)


def _preset_predict(machine, sc, extra=()):
    return preset_estimate(MACHINES[machine]["gpu"], sc, extra)


@pytest.mark.parametrize("machine,row", _preset_params())
def test_preset_on_gpu(machine, row):
    p = _preset_predict(machine, row["scenario"])
    fits = p["verdict"]["fits"]
    REPORT[machine]["presets"].append((row, p))
    assert fits == (row["status"] == "ok"), f"core says fits={fits}, the {machine} run: {row['status']} {row.get('error', '')}"
    if row["status"] == "ok":
        got, want = p["bytes"]["peak_allocated"], row["peak_allocated"]
        assert abs(got - want) <= 0.01 * want, f"allocated peak: core {got}, {machine} {want} ({100 * (got - want) / want:+.2f}%)"


@pytest.mark.parametrize("row", MACHINES["h100"]["expandable"]["presets"], ids=lambda r: _preset_id("h100", r["scenario"]))
def test_preset_with_expandable_segments(row):
    assert MACHINES["h100"]["expandable"]["allocator"] == "expandable_segments:True"
    p = _preset_predict("h100", row["scenario"], ["--expandable-segments"])
    assert row["status"] == "ok" and p["verdict"]["fits"]
    got, want = p["bytes"]["peak_allocated"], row["peak_allocated"]
    assert abs(got - want) <= 0.01 * want, f"allocated peak: core {got}, H100 {want} ({100 * (got - want) / want:+.2f}%)"


def _preset_name(sc):
    m, prec, attn, ckpt, b, s, meth, rank = sc[:8]
    fp8 = f" fp8={sc[9]}" if len(sc) > 9 else ""
    return f"{m} {prec} {attn} ckpt={ckpt} b{b} s{s} {meth}{rank or ''}{fp8}"


def _report_lines(machine):
    g, rep, mach = 2 ** 30, REPORT[machine], MACHINES[machine]
    env = mach["presets"]["environment"]
    lines = ["", f"## On a real GPU: {mach['label']} (torch {env['torch']}, transformers {env['transformers']}, "
             f"measured {mach['presets']['measured_on']}; test_gpu_measured.py)", "",
             "Real-size presets: peaks in GiB, measured / core; step time in seconds, measured / core.", "",
             "| run | status | allocated | reserved | device | step time | tokens/s |", "|---|---|---|---|---|---|---|"]
    for row, p in rep["presets"]:
        pb, sp = p["bytes"], p["speed"]
        name = _preset_name(row["scenario"])
        if row["status"] != "ok":
            lines.append(f"| {name} | {row['status']} (core fits: {p['verdict']['fits']}) | - | - | - | - | - |")
            continue
        lines.append(
            f"| {name} | ok | {row['peak_allocated'] / g:.2f} / {pb['peak_allocated'] / g:.2f} | "
            f"{row['peak_reserved'] / g:.2f} / {pb['peak_reserved'] / g:.2f} | {row['peak_device'] / g:.2f} / "
            f"{pb['peak_device'] / g:.2f} | {row['median_step_seconds']:.3f} / {sp['step_seconds']:.3f} | "
            f"{row['tokens_per_second']:.0f} / {sp['tokens_per_second']:.0f} |")
    lines += ["", "Step peak (`peak_tensors` against torch.cuda.max_memory_allocated):", "",
              "| scenario | GPU | core | error |", "|---|---|---|---|"]
    lines += [f"| {n} | {w} | {g_} | {e:+.2f}% |" for n, w, g_, e in rep["peak"]]
    lines += ["", "One layer and alive after forward on CUDA:", "",
              "| scenario | layer GPU | layer core | alive GPU | alive core | kernel ran | core |",
              "|---|---|---|---|---|---|---|"]
    lines += [f"| {n} | {wl} | {gl} | {wr} | {gr} | {','.join(k) or '-'} | {a.split(':')[0]} |"
              for n, gl, wl, gr, wr, k, a in rep["saved"]]
    return lines


def teardown_module(module):
    lines = [line for machine in MACHINES for line in _report_lines(machine)]
    report.write_section("gpu-measured", lines)
