"""One decoder layer's saved bytes at real preset sizes, with CUDA's dispatch, against the core.

The CPU suite (test_saved_bytes.py) is exact where CPU and CUDA agree, at small sizes. This one
runs the presets' own configs (7B to 108B; each model cut to the layers up to the one compared,
which the layers after it cannot change) on fake CUDA tensors (measure_cuda_fake.py): autocast's
CUDA lists, the fused dropout's bool mask, and each SDPA kernel's saved outputs (flash,
memory-efficient with its logsumexp padded to 32 rows, cuDNN, math), forced on both sides
(`--sdpa`). Exact, byte for byte. Which kernel PyTorch picks for a GPU is read from its source
(crates/headroom-core/src/sdpa.rs) and cannot be observed without one.
"""
import json
import os
import pathlib
import subprocess

import pytest
import transformers

from measure_cuda_fake import saved_forward

HERE = pathlib.Path(__file__).parent
MODELS = HERE.parent.parent / "content" / "models"
BIN = os.environ.get("HEADROOM_BIN", str(HERE.parent.parent / "target" / "debug" / "headroom"))

# (preset, precision, kernel, sequence, dropout). Sequences under autocast are no weight's
# dimension (autocast's weight copies are told apart by shape); 1000 is not a multiple of 32
# (the memory-efficient kernel pads its logsumexp).
CASES = [
    ("llama-3.1-8b", "bf16", "flash", 4096, 0.0),
    ("llama-3.1-8b", "bf16", "efficient", 1000, 0.0),
    ("llama-3.1-8b", "bf16", "cudnn", 4096, 0.0),
    ("llama-3.1-8b", "bf16", "math", 1024, 0.0),
    ("llama-3.1-8b", "bf16", "math", 1024, 0.1),
    ("llama-3.1-8b", "amp-bf16", "flash", 2048, 0.0),
    ("llama-3.1-8b", "amp-bf16", "math", 512, 0.0),
    ("llama-3.1-70b", "bf16", "cudnn", 8000, 0.0),
    ("llama-3.1-70b", "amp-bf16", "efficient", 2000, 0.0),
    ("qwen2.5-7b", "amp-bf16", "efficient", 2048, 0.0),
    ("qwen2.5-72b", "bf16", "flash", 4096, 0.0),
    ("qwen3-8b", "amp-bf16", "cudnn", 2048, 0.0),
    ("mistral-7b-v0.3", "bf16", "flash", 8192, 0.0),
    # Issue 13's dense architectures. Granite 3.1's and StarCoder2's configs train with dropout
    # (0.1): the case's 0.0 replaces it on both sides, as the fused kernels' RNG state is not
    # observable on fake CUDA (their meta functions return it whatever the dropout).
    ("olmo-2-7b", "bf16", "cudnn", 4096, 0.0),
    ("olmo-2-13b", "amp-bf16", "flash", 2048, 0.0),
    ("olmo-3-7b", "bf16", "efficient", 4000, 0.0),
    ("granite-3.1-8b", "bf16", "flash", 4096, 0.0),
    ("smollm3-3b", "amp-bf16", "efficient", 2000, 0.0),
    # Below its 4,096-token window no mask is built and flash runs; at the window, SDPA gets
    # the mask (flash takes none: cuDNN, the H100's pick, saves it with repeated k and v).
    ("starcoder2-7b", "bf16", "flash", 4000, 0.0),
    ("starcoder2-7b", "bf16", "cudnn", 4096, 0.0),
    ("glm-4-9b-0414", "bf16", "flash", 4096, 0.0),
    ("glm-4-9b-0414", "amp-bf16", "efficient", 2000, 0.0),
    # At its 4,096-token window Command R7B's sliding layers get a mask: cuDNN saves it.
    ("command-r7b", "bf16", "cudnn", 4096, 0.0),
    ("command-r7b", "amp-bf16", "cudnn", 2048, 0.0),
    # The disagreements of cuda_fake_report.md, each traced and fixed in the core. GPT-2
    # under autocast: CUDA's autocast runs gelu_new's pow in fp32 (CPU's does not), so
    # tanh's output and 1 + tanh are fp32 too. OPT: ReLU's output is the down projection's
    # input (one storage). GPT-NeoX and Phi-3: with the KV cache on, attention saves the
    # cache's v, not a view of the fused qkv output; q rotated from a slice of it reaches the
    # flash and cuDNN kernels heads-first, so the output projection reads a contiguous copy
    # (not after the memory-efficient kernel); NeoX's parallel residual feeds the MLP's
    # LayerNorm the layer input. Gemma: each RMSNorm saves 1 + weight in fp32, and Gemma 3's
    # q_norm/k_norm are Gemma norms (fp32 normalized input).
    ("gpt2", "amp-bf16", "flash", 2000, 0.0),
    # Eager attention under CUDA autocast: softmax runs in fp32 (its fp32 list) and the cast
    # back to the compute dtype is a second saved tensor (found on an H100: GPT-2).
    ("gpt2", "amp-bf16", "eager", 2000, 0.0),
    ("pythia-410m", "amp-bf16", "eager", 2000, 0.0),
    ("opt-1.3b", "amp-bf16", "eager", 2000, 0.0),
    ("gpt2-large", "amp-bf16", "cudnn", 2000, 0.0),
    ("gpt2-xl", "bf16", "efficient", 1000, 0.0),
    ("opt-1.3b", "bf16", "flash", 2000, None),  # its residual dropout (0.1): bool masks
    ("opt-1.3b", "amp-bf16", "efficient", 2000, 0.0),
    ("pythia-1.4b", "bf16", "flash", 2000, 0.0),
    ("pythia-1.4b", "amp-bf16", "cudnn", 2000, 0.0),
    ("pythia-410m", "amp-bf16", "efficient", 2000, 0.0),
    ("phi-3-mini-4k", "amp-bf16", "flash", 2000, 0.0),
    ("phi-3-mini-4k", "bf16", "efficient", 2000, 0.0),
    # Past the 512-token window: the sliding layers' mask, saved by cuDNN / memory-efficient.
    ("gemma-3-1b-pt", "bf16", "cudnn", 2000, 0.0),
    ("gemma-3-1b-pt", "amp-bf16", "efficient", 2000, 0.0),
    ("gemma-2b", "bf16", "cudnn", 2000, 0.0),
    ("gemma-2-9b", "amp-bf16", "flash", 2000, 0.0),
    # Llama 4 Scout's second layer: RoPE with the q/k L2 norm, every token through its 16
    # experts by bmm. (The grouped_mm MoE presets are in test_every_preset_one_layer_on_cuda.)
    ("llama-4-scout-17b-16e", "bf16", "flash", 4096, 0.0),
    ("llama-4-scout-17b-16e", "amp-bf16", "cudnn", 2000, 0.0),
]


def predict(preset, precision, kernel, seq, dropout, extra=()):
    kernel = ["--attention", "eager"] if kernel == "eager" else ["--sdpa", kernel]
    args = [BIN, "estimate", "--model", preset, "--gpu", "h100-sxm-80gb", *kernel,
            "--precision", precision, "--optimizer", "adamw", "--batch", "1", "--seq", str(seq),
            "--format", "json", *extra]
    if dropout is not None:
        args += ["--dropout", str(dropout)]
    out = subprocess.run(args, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def assert_same_layer(predicted, measured, what="one layer"):
    """The core's one-layer bytes equal fake CUDA's; the message lists both inventories."""
    got = predicted["bytes"]["activations_per_layer"]
    want = measured["activations_per_layer"]
    assert got == want, (
        f"{what}: predicted {got}, fake CUDA {want} ({got - want:+d} B, {100 * (got - want) / want:+.2f}%)\n"
        f"measured: {measured['layer1']}\npredicted: {predicted['layer_inventory']}")


def strict_xfails(whys):
    """Parameters for `whys` (name: reason or None): a strict expected failure where a reason is given."""
    return [pytest.param(p, marks=[pytest.mark.xfail(strict=True, reason=why)] if why else [])
            for p, why in whys.items()]


@pytest.mark.parametrize("preset,precision,kernel,seq,dropout", CASES,
                         ids=[f"{c[0]}-{c[1]}-{c[2]}-s{c[3]}{'-dropout' if c[4] else ''}"
                              for c in (getattr(c, "values", c) for c in CASES)])
def test_one_layer_at_full_size_on_cuda(preset, precision, kernel, seq, dropout):
    config = json.loads((MODELS / f"{preset}.json").read_text())
    # The case's dropout replaces every dropout the config has (as `--dropout` does); None
    # keeps the config's own.
    for key in ("attention_dropout", "residual_dropout", "embedding_dropout", "attn_pdrop", "resid_pdrop",
                "embd_pdrop", "hidden_dropout", "dropout"):
        if dropout is not None and (dropout or config.get(key)):
            config[key] = dropout
    measured = saved_forward(config, 1, seq, precision, kernel)
    predicted = predict(preset, precision, kernel, seq, dropout)
    assert_same_layer(predicted, measured)


# Without transformers' KV cache (gradient checkpointing turns it off, and so does the
# Trainer): attention saves views of the fused qkv output instead of the cache's
# concatenated k and v. The core drops the cache under checkpointing (`Shape::kv_cache`), so a
# layer's inventory there is compared with a forward whose config says `use_cache=False`.
NO_CACHE = [
    ("gpt2-medium", "bf16", "flash", 2000),
    ("gpt2", "amp-bf16", "efficient", 2000),
    ("pythia-1.4b", "bf16", "flash", 2000),
    ("pythia-410m", "amp-bf16", "cudnn", 2000),
    ("phi-3-mini-4k", "bf16", "flash", 2000),
    ("phi-3-mini-4k", "amp-bf16", "efficient", 2000),
    ("llama-3.1-8b", "amp-bf16", "flash", 2000),
]


@pytest.mark.parametrize("preset,precision,kernel,seq", NO_CACHE,
                         ids=[f"{c[0]}-{c[1]}-{c[2]}-s{c[3]}-no-cache" for c in NO_CACHE])
def test_one_layer_without_kv_cache(preset, precision, kernel, seq):
    config = json.loads((MODELS / f"{preset}.json").read_text())
    for key in ("attention_dropout", "attn_pdrop", "resid_pdrop", "embd_pdrop", "hidden_dropout", "dropout"):
        if config.get(key):
            config[key] = 0.0
    config["use_cache"] = False
    measured = saved_forward(config, 1, seq, precision, kernel)
    args = [BIN, "estimate", "--model", preset, "--gpu", "h100-sxm-80gb", "--sdpa", kernel,
            "--precision", precision, "--optimizer", "adamw", "--batch", "1", "--seq", str(seq),
            "--checkpointing", "full", "--dropout", "0", "--format", "json"]
    predicted = json.loads(subprocess.run(args, capture_output=True, text=True, check=True).stdout)
    assert_same_layer(predicted, measured, "one layer without the KV cache")


# Every other preset once, as the H100 runs it by default: bf16, the cuDNN kernel (sliding-window
# and chunked layers past their window get SDPA's mask there), 2,048 tokens. The cases above
# cover the kernels and precisions; this covers each preset's own shapes at full size.
COVERED = {c[0] for c in CASES} | {c[0] for c in NO_CACHE}
# Presets judged differently: gpt-oss has no SDPA path in transformers (eager, flash-attn 3 or
# flex only), so both sides run eager attention (its full-attention layer 1 then saves what a
# sliding one does: the s x s scores either way); the Qwen-VL wrappers run a text-only forward
# (no images: `--images 0`); Llama 4 Maverick's and the DeepSeek/GLM MoE presets' layer 1 is a
# MoE layer where the core's one-layer figure is the dense layer's, so their MoE layers are
# compared in test_moe_layer_of_a_mixed_preset_on_cuda.
EAGER = {"gpt-oss-20b", "gpt-oss-120b"}
NO_IMAGES = {"qwen2.5-vl-7b-instruct", "qwen3-vl-8b-instruct", "qwen3.5-9b", "qwen3.5-35b-a3b", "qwen3.5-397b-a17b"}
CANNOT_RUN = {
    **{p: "its layer 1 is a MoE layer and the core's one-layer figure is its dense layer's: its MoE layer "
          "is compared in test_moe_layer_of_a_mixed_preset_on_cuda"
       for p in ("deepseek-v2-lite", "glm-4.5-air", "llama-4-maverick-17b-128e")},
}
# MoE layers at full size on fake CUDA (one MoE layer, bf16, 2,048 tokens): Mixtral, Qwen1.5 and
# Qwen3 MoE and Granite MoE are exact with grouped_mm's routing buffers (`activations::moe::moe_mlp`);
# DeepSeek-V3's layer 1 is dense (three dense layers first) and exact, its MoE layer is compared
# below. Qwen3-Next's layer 1 is a gated DeltaNet layer, exact: the 16 B it was short by were
# the SDPA RNG state the harness added to a layer that runs no SDPA.
# A multimodal wrapper's text layers, built from its text config (the vision tower is outside
# the layers; its tokens are part of the sequence either way); Qwen3.5's wrappers too (no images).
WRAPPERS = {"gemma3", "mistral3", "qwen3_5", "qwen3_5_moe"}
EVERY = [p.stem for p in sorted(MODELS.glob("*.json")) if p.stem not in COVERED]


@pytest.mark.parametrize("preset", EVERY)
def test_every_preset_one_layer_on_cuda(preset):
    if preset in CANNOT_RUN:
        pytest.skip(CANNOT_RUN[preset])
    config = json.loads((MODELS / f"{preset}.json").read_text())
    if config["model_type"] in WRAPPERS:
        config = dict(config["text_config"])
        # The text config class's own vocabulary where the file leaves it out (Gemma 3's).
        config.setdefault("vocab_size", transformers.AutoConfig.for_model(**config).vocab_size)
    kernel = "eager" if preset in EAGER else "cudnn"
    measured = saved_forward(config, 1, 2048, "bf16", kernel)
    predicted = predict(preset, "bf16", kernel, 2048, None, ["--images", "0"] if preset in NO_IMAGES else [])
    assert_same_layer(predicted, measured)


# The MoE layer of the presets whose layer 1 is MoE but whose one-layer figure is dense: the
# same config with every layer MoE (`first_k_dense_replace: 0`), given to the core as a file,
# so that both sides describe its MoE layer (DeepSeek-V3 cut to three layers: the layer is the
# same). DeepSeek's routers (`activations::moe::deepseek_router`): the Linear in fp32, DeepSeek-V2's
# softmax with its group-limited mask, DeepSeek-V3's and GLM-4.5's sigmoid, whose group top-k
# and mask autograd frees when the forward ends; under autocast V3's scores are 16-bit.
# Llama 4 Maverick's MoE layer (every token through its 128 experts by bmm) likewise, with
# `interleave_moe_layer_step: 1`. (preset, precision, tokens, overrides of the text config)
DENSE_FIRST = {"first_k_dense_replace": 0}
ALL_MOE = [
    ("deepseek-v2-lite", "bf16", 2048, DENSE_FIRST),
    ("deepseek-v2-lite", "amp-bf16", 2000, DENSE_FIRST),
    ("deepseek-v2-lite", "fp32", 1000, DENSE_FIRST),
    ("deepseek-v2-lite", "bf16", 2048, {**DENSE_FIRST, "topk_method": "group_limited_greedy", "n_group": 8,
                                        "topk_group": 3}),
    ("glm-4.5-air", "bf16", 2048, DENSE_FIRST),
    ("glm-4.5-air", "amp-bf16", 2000, DENSE_FIRST),
    ("glm-4.5-air", "fp32", 1000, DENSE_FIRST),
    ("glm-4.5-air", "bf16", 2048, {**DENSE_FIRST, "norm_topk_prob": False}),
    ("deepseek-v3", "bf16", 2048, {**DENSE_FIRST, "num_hidden_layers": 3}),
    ("llama-4-maverick-17b-128e", "bf16", 2048, {"interleave_moe_layer_step": 1}),
    ("llama-4-maverick-17b-128e", "amp-bf16", 2000, {"interleave_moe_layer_step": 1}),
]


@pytest.mark.parametrize("preset,precision,seq,overrides", ALL_MOE,
                         ids=[f"{p}-{prec}-s{s}-{'-'.join(o)}" for p, prec, s, o in ALL_MOE])
def test_moe_layer_of_a_mixed_preset_on_cuda(preset, precision, seq, overrides, tmp_path):
    config = json.loads((MODELS / f"{preset}.json").read_text())
    config.get("text_config", config).update(overrides)
    path = tmp_path / f"{preset}-all-moe.json"
    path.write_text(json.dumps(config))
    measured = saved_forward(config, 1, seq, precision, "cudnn")
    predicted = predict(str(path), precision, "cudnn", seq, None)
    assert_same_layer(predicted, measured, "one MoE layer")


# gpt-oss under autocast, eager attention on both sides (see EAGER).
def test_gpt_oss_under_autocast_on_cuda():
    config = json.loads((MODELS / "gpt-oss-20b.json").read_text())
    measured = saved_forward(config, 1, 2000, "amp-bf16", "eager")
    predicted = predict("gpt-oss-20b", "amp-bf16", "eager", 2000, None)
    assert_same_layer(predicted, measured)


# MoE presets under autocast: autocast has no rule for grouped_mm, so the experts run in fp32
# (the weights' dtype) and save fp32 rows (2,000 tokens: no weight's dimension).
AMP_MOE = {
    "mixtral-8x7b": None,
    "qwen3-30b-a3b": None,
    "qwen1.5-moe-a2.7b": None,
    # Granite casts each row's weight to the hidden states' dtype (`type_as`): fp32 here.
    "granite-3.1-1b-a400m": None,
}


@pytest.mark.parametrize("preset", strict_xfails(AMP_MOE))
def test_moe_layer_under_autocast_on_cuda(preset):
    config = json.loads((MODELS / f"{preset}.json").read_text())
    measured = saved_forward(config, 1, 2000, "amp-bf16", "cudnn")
    predicted = predict(preset, "amp-bf16", "cudnn", 2000, None)
    assert_same_layer(predicted, measured)
