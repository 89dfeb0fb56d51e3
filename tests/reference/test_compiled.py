"""What a torch.compile'd decoder layer saves for backward, on real transformers layers (CPU).

AOTAutograd's partitioner decides what a compiled forward keeps; the core models it for
Llama-family dense layers (`crates/headroom-core/src/compiled.rs`). Here real models compile on
CPU (torch 2.15, transformers 5.23) with one and with two layers, every tensor the compiled
graph saves is recorded with `saved_tensors_hooks`, and the second layer's bytes (the
difference) are compared with the core's per-layer figure for the same configuration, plus the
CUDA kernel's RNG state the CPU kernel does not have (`test_saved_bytes.rng_correction`).

Checked: Llama in bf16, Qwen2 (q/k/v biases) under autocast with fp32 weights, and Llama in
fp32. Run by scripts/test.sh with HEADROOM_BIN pointing at the CLI.
"""
import collections

import pytest
import torch
import transformers

from test_saved_bytes import predict, rng_correction

BATCH, SEQ = 2, 96
BASE = {"hidden_size": 256, "intermediate_size": 768, "num_attention_heads": 8, "num_key_value_heads": 2,
        "vocab_size": 1000, "max_position_embeddings": 512, "rms_norm_eps": 1e-6}
# fp32 with grouped-query attention runs SDPA's math kernel on CUDA (enable_gqa is flash and
# cuDNN only), which the core does not model compiled: the fp32 case has one kv head per head,
# so CUDA runs the memory-efficient kernel (its logsumexp padded to 32 rows).
CASES = [("llama", "bf16", {}), ("qwen2", "amp-bf16", {}), ("llama", "fp32", {"num_key_value_heads": 8})]


def saved_by_compiled(model_type, precision, layers, extra):
    """Bytes of every distinct storage the compiled step saves for backward (weights aside)."""
    torch.manual_seed(0)
    torch._dynamo.reset()
    cfg = transformers.AutoConfig.for_model(model_type=model_type, num_hidden_layers=layers, **{**BASE, **extra})
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa", dtype=dtype)
    model.train()
    compiled = torch.compile(model)
    ids = torch.randint(BASE["vocab_size"], (BATCH, SEQ))
    seen = {}

    def pack(t):
        if not isinstance(t, torch.nn.Parameter):
            st = t.untyped_storage()
            seen[st.data_ptr()] = (st.nbytes(), str(t.dtype), tuple(t.shape))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "amp-bf16"):
            compiled(input_ids=ids, labels=ids).loss
    return collections.Counter(seen.values())


@pytest.mark.parametrize("model_type,precision,extra", CASES)
def test_a_compiled_layer_saves_what_the_core_says(model_type, precision, extra):
    one = saved_by_compiled(model_type, precision, 1, extra)
    two = saved_by_compiled(model_type, precision, 2, extra)
    layer = two - one
    measured = sum(nbytes * n for (nbytes, _, _), n in layer.items())
    # Under autocast each Linear's 16-bit weight cast is saved too: the core counts those
    # casts as their own component (autocast's weight cache), not in the layer's activations.
    if precision == "amp-bf16":
        h, i, q, kv = BASE["hidden_size"], BASE["intermediate_size"], 256, 64
        measured -= 2 * (3 * h * i + 2 * h * q + 2 * h * kv)
    config = {"model_type": model_type, "num_hidden_layers": 2, **BASE, **extra}
    p = predict(config, BATCH, SEQ, precision, "sdpa", "none", False, ("--compile",))
    layer_rng, _ = rng_correction(config, p, "none")
    # The memory-efficient kernel pads the logsumexp's rows to a multiple of 32 on CUDA.
    if "memory-efficient kernel" in p["attention"]:
        heads = config["num_attention_heads"]
        measured += BATCH * heads * (-(-SEQ // 32) * 32 - SEQ) * 4
    assert p["bytes"]["activations_per_layer"] == measured + layer_rng, (
        f"{model_type} {precision}: core {p['bytes']['activations_per_layer']}, "
        f"compiled on CPU {measured} + CUDA RNG {layer_rng}; saved: {sorted(layer.items())}")
