"""Multi-token prediction modules (DeepSeek-V3, GLM-4.5): what `mtp=1` adds to the parameters.

transformers builds no MTP module (it drops the `model.layers.{num_hidden_layers}.*` weights),
so the module is built here as DeepSeek's checkpoint lays it out (README_WEIGHTS.md in
deepseek-ai/DeepSeek-V3; vLLM's `deepseek_mtp.py` loads it the same way): transformers' own
decoder layer at the next index (a MoE layer), `enorm` and `hnorm` (RMSNorm of the hidden
size), `eh_proj` (Linear 2h -> h, no bias) and `shared_head.norm`, the embedding and the lm_head
being the model's. Built on the meta device at full size; its parameter count must equal what
the CLI's total grows by with `--mtp 1`.
"""
import json
import os
import pathlib
import subprocess

import pytest
import torch
from torch import nn
from transformers import AutoConfig
from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3DecoderLayer, DeepseekV3RMSNorm
from transformers.models.glm4_moe.modeling_glm4_moe import Glm4MoeDecoderLayer, Glm4MoeRMSNorm

HERE = pathlib.Path(__file__).parent
MODELS = HERE.parent.parent / "content" / "models"
BIN = os.environ.get("HEADROOM_BIN", str(HERE.parent.parent / "target" / "debug" / "headroom"))

CASES = {
    "deepseek-v3": (DeepseekV3DecoderLayer, DeepseekV3RMSNorm),
    "glm-4.5": (Glm4MoeDecoderLayer, Glm4MoeRMSNorm),
    "glm-4.5-air": (Glm4MoeDecoderLayer, Glm4MoeRMSNorm),
}


class MtpModule(nn.Module):
    def __init__(self, cfg, layer_cls, norm_cls):
        super().__init__()
        h = cfg.hidden_size
        self.enorm = norm_cls(h)
        self.hnorm = norm_cls(h)
        self.eh_proj = nn.Linear(2 * h, h, bias=False)
        self.shared_head_norm = norm_cls(h)
        self.block = layer_cls(cfg, cfg.num_hidden_layers)


def total(preset, mtp):
    out = subprocess.run([BIN, "estimate", "--model", preset, "--gpu", "h200", "--gpus", "256", "--dp", "fsdp",
                          "--mtp", str(mtp), "--format", "json"], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)["parameters"]["total"]


@pytest.mark.parametrize("preset", CASES)
def test_one_mtp_module_adds_its_layer_projection_and_norms(preset):
    config = json.loads((MODELS / f"{preset}.json").read_text())
    config = {k: v for k, v in config.items() if k not in ("architectures", "torch_dtype", "dtype")}
    assert config["num_nextn_predict_layers"] == 1
    cfg = AutoConfig.for_model(**config)
    layer_cls, norm_cls = CASES[preset]
    with torch.device("meta"):
        module = MtpModule(cfg, layer_cls, norm_cls)
    # The module's layer is a MoE layer, as every layer past the dense ones.
    assert hasattr(module.block.mlp, "experts")
    want = sum(p.numel() for p in module.parameters())
    assert total(preset, 1) - total(preset, 0) == want


def test_deepseek_v3_module_is_its_readmes_11_5b():
    # README_WEIGHTS.md: "11.5B unique parameters (excluding the shared 0.9B Embedding and 0.9B
    # output Head)"; the MoE layer alone is 11.51B, with eh_proj 11.61B.
    added = total("deepseek-v3", 1) - total("deepseek-v3", 0)
    assert 11.5e9 <= added < 11.65e9
