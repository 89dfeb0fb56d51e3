"""fp8 training (torchao float8) saves what bf16 training saves.

Headroom models torchao's fp8 as bf16 training whose decoder Linears multiply in fp8: the saved
activations are unchanged (`crates/headroom-core/tests/fp8.rs` asserts it of the estimate). This
runs a small Llama in bf16 on CPU twice, with plain `nn.Linear`s and with torchao's `Float8Linear`
(emulated fp8 matmuls, the same autograd function and casts), and compares the bytes of every
tensor autograd saves, storage by storage. It also checks which Linears torchao converts with the
filter Headroom assumes, and the fp8 dtypes of each recipe.
"""
import pytest
import torch
import transformers
from torchao.float8 import Float8LinearConfig, convert_to_float8_training
from torchao.float8.float8_linear import Float8Linear

# The export's filter (crates/headroom-core/src/export/fsdp2.rs) and crate::fp8::converts; the
# H200 runs used it too.
from measure_gpu import fp8_filter

CONFIG = dict(vocab_size=512, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)


def build(recipe):
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(**CONFIG, attn_implementation="sdpa")
    model = transformers.LlamaForCausalLM(cfg).to(torch.bfloat16)
    if recipe is not None:
        config = Float8LinearConfig.from_recipe_name(recipe)
        config = Float8LinearConfig(**{**config.__dict__, "emulate": True})
        convert_to_float8_training(model, config=config, module_filter_fn=fp8_filter)
    return model


def saved_bytes(model):
    """Bytes of the distinct storages autograd saves in one forward + loss."""
    seen = {}

    def pack(t):
        if t.device.type != "meta":
            s = t.untyped_storage()
            seen[s.data_ptr()] = s.nbytes()
        return t

    ids = torch.randint(0, CONFIG["vocab_size"], (2, 64))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = model(input_ids=ids, labels=ids)
    out.loss.backward()
    return sum(seen.values())


@pytest.mark.parametrize("recipe", ["tensorwise", "rowwise"])
def test_fp8_saves_what_bf16_saves(recipe):
    assert saved_bytes(build(recipe)) == saved_bytes(build(None))


@pytest.mark.parametrize("recipe, dtypes", [
    ("tensorwise", "i:dyn_ten_e4m3,w:dyn_ten_e4m3,go:dyn_ten_e5m2"),
    ("rowwise", "i:dyn_axs_e4m3,w:dyn_axs_e4m3,go:dyn_axs_e4m3"),
])
def test_converted_linears_and_dtypes(recipe, dtypes):
    model = build(recipe)
    converted = [n for n, m in model.named_modules() if isinstance(m, Float8Linear)]
    # Every decoder Linear (7 per layer), never the lm_head.
    assert len(converted) == 7 * CONFIG["num_hidden_layers"] and not any("lm_head" in n for n in converted)
    assert all(dtypes in repr(m) for m in model.modules() if isinstance(m, Float8Linear))
