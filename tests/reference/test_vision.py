"""A trained vision tower's saved tensors: the CLI's per-layer bytes against PyTorch's.

SigLIP's encoder layer (Gemma 3's vision tower, transformers 5.23's modeling_siglip.py) runs on
CPU with SDPA, in bf16 and under autocast (amp-bf16); `saved_tensors_hooks` collect every
storage saved for backward once, parameters left out (autocast's weight casts are kept: the CLI
counts them in its autocast cache). One layer's bytes are the difference between towers of 3 and
2 layers, in the CLI (`outside_layers` + `autocast_cache` of a Gemma 3 config with
`--vision trained`) and in PyTorch alike, so the projector and the text model cancel out.
CPU's LayerNorm keeps bf16 mean and rstd where CUDA keeps fp32 (the CLI's): that difference,
2 norms x 2 statistics x patches x 2 B, is added to the measurement in bf16.
"""
import json
import os
import pathlib
import subprocess
import tempfile

import pytest
import torch
from transformers import SiglipVisionConfig, SiglipVisionModel

HERE = pathlib.Path(__file__).parent
BIN = os.environ.get("HEADROOM_BIN", str(HERE.parent.parent / "target" / "debug" / "headroom"))

VISION = {"model_type": "siglip_vision_model", "hidden_size": 64, "intermediate_size": 96,
          "num_attention_heads": 4, "image_size": 64, "patch_size": 8, "vision_use_head": False}
TEXT = {"model_type": "gemma3_text", "hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "vocab_size": 1000}
IMAGES = 2
PATCHES = IMAGES * (64 // 8) ** 2


def saved_bytes(model, precision):
    """Bytes of the distinct storages `model`'s forward on IMAGES 64 x 64 images saves for
    backward, parameters left out, in bf16 or under CPU autocast (amp-bf16)."""
    torch.manual_seed(0)
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    model = model.to(dtype).train()
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen = {}

    def pack(t):
        st = t.untyped_storage()
        if st.data_ptr() not in params:
            seen[st.data_ptr()] = st.nbytes()
        return t

    pixels = torch.randn(IMAGES, 3, 64, 64, dtype=dtype)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "amp-bf16"):
            model(pixel_values=pixels)
    return sum(seen.values())


def cli_bytes(config, precision, seq):
    """The CLI's bytes outside the text layers (the tower's saved tensors) plus its autocast
    cache, for the multimodal `config` with a trained tower and IMAGES images."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(config, f)
    try:
        out = subprocess.run([BIN, "estimate", "--model", f.name, "--vision", "trained", "--images", str(IMAGES),
                              "--seq", str(seq), "--precision", precision, "--attention", "sdpa", "--format", "json"],
                             capture_output=True, text=True, check=True).stdout
    finally:
        os.unlink(f.name)
    parts = {c["id"]: c["bytes"] for c in json.loads(out)["components"]}
    return parts["outside_layers"] + parts.get("autocast_cache", 0)


def siglip_measured(layers, precision):
    cfg = SiglipVisionConfig(**{k: v for k, v in VISION.items() if k != "model_type"}, num_hidden_layers=layers)
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(0)
    return saved_bytes(SiglipVisionModel(cfg), precision)


def siglip_cli(layers, precision):
    config = {"model_type": "gemma3", "mm_tokens_per_image": 16, "text_config": TEXT,
              "vision_config": dict(VISION, num_hidden_layers=layers)}
    return cli_bytes(config, precision, 64)


@pytest.mark.parametrize("precision", ["bf16", "amp-bf16"])
def test_siglip_layer_saved_bytes(precision):
    measured = siglip_measured(3, precision) - siglip_measured(2, precision)
    if precision == "bf16":
        measured += 2 * 2 * PATCHES * 2
    assert siglip_cli(3, precision) - siglip_cli(2, precision) == measured


# Llama 4's tower (modeling_llama4.py's Llama4VisionModel): LayerNorms, q/k/v/o with biases, a 2-D
# RoPE whose complex multiply saves only its constant table (the table needs no gradient, so
# q and k are not kept), SDPA, and a GELU MLP. One layer's bytes the same way as SigLIP's, with a
# small llama4 config around it; 2 images of one 64 x 64 tile each: 64 patches and the class
# token apiece. (`.to(bfloat16)` casts the complex RoPE table to a real one, with PyTorch's
# warning: the table is one constant storage, so it cancels between 3 and 2 layers either way.)
L4_VISION = {"hidden_size": 64, "intermediate_size": 256, "num_attention_heads": 4, "image_size": 64,
             "patch_size": 8, "projector_input_dim": 128, "projector_output_dim": 128, "vision_output_dim": 128,
             "pixel_shuffle_ratio": 0.5}
L4_TEXT = {"hidden_size": 128, "intermediate_size": 256, "intermediate_size_mlp": 256, "num_hidden_layers": 2,
           "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "vocab_size": 1000,
           "num_local_experts": 2, "interleave_moe_layer_step": 1}
L4_PATCHES = IMAGES * ((64 // 8) ** 2 + 1)


def llama4_measured(layers, precision):
    from transformers.models.llama4.configuration_llama4 import Llama4VisionConfig
    from transformers.models.llama4.modeling_llama4 import Llama4VisionModel

    cfg = Llama4VisionConfig(**L4_VISION, num_hidden_layers=layers)
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(0)
    return saved_bytes(Llama4VisionModel(cfg), precision)


def llama4_cli(layers, precision):
    config = {"model_type": "llama4", "text_config": L4_TEXT, "vision_config": dict(L4_VISION, num_hidden_layers=layers)}
    return cli_bytes(config, precision, 128)


@pytest.mark.parametrize("precision", ["bf16", "amp-bf16"])
def test_llama4_vision_layer_saved_bytes(precision):
    measured = llama4_measured(3, precision) - llama4_measured(2, precision)
    if precision == "bf16":
        # CPU's LayerNorm keeps bf16 statistics, CUDA's (the CLI's) fp32.
        measured += 2 * 2 * L4_PATCHES * 2
    assert llama4_cli(3, precision) - llama4_cli(2, precision) == measured
