"""Every model preset: transformers' count == presets.toml's parameters_total == the CLI's.

For each `[[preset]]` in content/models/presets.toml, the preset's config.json is built with
transformers on the meta device (no memory, so Llama 3.1 405B costs nothing) and its
`num_parameters()` is compared with the recorded `parameters_total` and with what
`headroom estimate --model <id> --format json` reports as `parameters.total`.
Multimodal wrappers (gemma3, qwen2_5_vl, qwen3_vl, mistral3, llama4) are built as their
ForConditionalGeneration class (vision tower, projector and text model).
VARIANTS are small configs that exercise keys and defaults no preset uses (OPT's projections,
MoE layer selection, bias switches, per-type head_dim defaults), compared the same way.
Run by scripts/test.sh with HEADROOM_BIN pointing at the CLI.
"""
import json
import os
import pathlib
import subprocess
import tempfile
import tomllib

import pytest
import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForImageTextToText

HERE = pathlib.Path(__file__).parent
MODELS = HERE.parent.parent / "content" / "models"
BIN = os.environ.get("HEADROOM_BIN", str(HERE.parent.parent / "target" / "debug" / "headroom"))

PRESETS = tomllib.loads((MODELS / "presets.toml").read_text())["preset"]


MULTIMODAL = {"gemma3", "qwen2_5_vl", "qwen3_vl", "mistral3", "llama4", "qwen3_5", "qwen3_5_moe"}


def transformers_count(config: dict) -> int:
    cfg = AutoConfig.for_model(**config)
    auto = AutoModelForImageTextToText if config["model_type"] in MULTIMODAL else AutoModelForCausalLM
    # Meta tensors have shapes but no storage: the count is exact and costs no memory.
    with torch.device("meta"):
        model = auto.from_config(cfg)
    return model.num_parameters()


def cli_json(*args):
    out = subprocess.run([BIN, *args, "--format", "json"], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


@pytest.fixture(scope="module")
def cli_models():
    return {m["id"]: m for m in cli_json("models")}


def test_at_least_25_presets():
    assert len(PRESETS) >= 25
    assert len({p["id"] for p in PRESETS}) == len(PRESETS), "duplicate preset ids"


def test_cli_lists_every_preset(cli_models):
    assert set(cli_models) == {p["id"] for p in PRESETS}


@pytest.mark.parametrize("preset", PRESETS, ids=[p["id"] for p in PRESETS])
def test_preset_count(preset, cli_models):
    config = json.loads((MODELS / f"{preset['id']}.json").read_text())
    expected = transformers_count(config)
    assert preset["parameters_total"] == expected, "presets.toml disagrees with transformers"
    assert cli_models[preset["id"]]["parameters_total"] == expected, "`headroom models` disagrees"
    got = cli_json("estimate", "--model", preset["id"])["parameters"]["total"]
    assert got == expected, "the core's count disagrees with transformers"


SMALL = {"hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 4, "num_attention_heads": 4,
         "num_key_value_heads": 2, "vocab_size": 1000}
MOE = {"num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 64}
VARIANTS = {
    "opt-350m": {"model_type": "opt", "hidden_size": 1024, "ffn_dim": 4096, "num_hidden_layers": 24,
                 "num_attention_heads": 16, "word_embed_proj_dim": 512, "do_layer_norm_before": False,
                 "vocab_size": 50272, "max_position_embeddings": 2048},
    "opt-no-bias": {"model_type": "opt", "hidden_size": 256, "ffn_dim": 512, "num_hidden_layers": 2,
                    "num_attention_heads": 4, "enable_bias": False, "vocab_size": 1000},
    "qwen3_moe-defaults": {"model_type": "qwen3_moe"},
    "qwen3_moe-mlp-only": dict(SMALL, model_type="qwen3_moe", mlp_only_layers=[0, 2], **MOE),
    "qwen3_moe-step-2": dict(SMALL, model_type="qwen3_moe", decoder_sparse_step=2, attention_bias=True, **MOE),
    "qwen2_moe-step-2": dict(SMALL, model_type="qwen2_moe", decoder_sparse_step=2, qkv_bias=False,
                             shared_expert_intermediate_size=96, **MOE),
    "qwen2-qkv-bias-key": dict(SMALL, model_type="qwen2", qkv_bias=False),
    "mistral-attention-bias": dict(SMALL, model_type="mistral", attention_bias=True, head_dim=128),
    "mixtral-attention-bias": dict(SMALL, model_type="mixtral", attention_bias=True, num_local_experts=4),
    "llama-biases-tied": dict(SMALL, model_type="llama", attention_bias=True, mlp_bias=True, tie_word_embeddings=True),
    "gemma3_text-untied": dict(SMALL, model_type="gemma3_text", head_dim=64, tie_word_embeddings=False),
    "gemma2-bias": dict(SMALL, model_type="gemma2", attention_bias=True, head_dim=32),
    "phi3-gqa-tied": dict(SMALL, model_type="phi3", pad_token_id=None, tie_word_embeddings=True),
    "gpt_neox-no-bias-tied": dict(SMALL, model_type="gpt_neox", attention_bias=False, tie_word_embeddings=True),
    "granite-biases": dict(SMALL, model_type="granite", attention_bias=True, mlp_bias=True),
    "granite-defaults": {"model_type": "granite"},
    "smollm3-defaults": {"model_type": "smollm3"},
    "smollm3-biases-untied": dict(SMALL, model_type="smollm3", attention_bias=True, mlp_bias=True, pad_token_id=None,
                                  tie_word_embeddings=False),
    "olmo2-defaults": {"model_type": "olmo2"},
    "olmo2-gqa-bias-tied": dict(SMALL, model_type="olmo2", attention_bias=True, tie_word_embeddings=True),
    "olmo3-gqa": dict(SMALL, model_type="olmo3"),
    "starcoder2-defaults": {"model_type": "starcoder2"},
    "starcoder2-no-bias-untied": dict(SMALL, model_type="starcoder2", use_bias=False, tie_word_embeddings=False),
    "glm4-defaults": {"model_type": "glm4"},
    "glm4-no-bias-tied": dict(SMALL, model_type="glm4", attention_bias=False, tie_word_embeddings=True,
                              head_dim=64, pad_token_id=None),
    "cohere2-defaults": {"model_type": "cohere2"},
    "cohere2-gqa-bias-untied": dict(SMALL, model_type="cohere2", attention_bias=True, tie_word_embeddings=False),
    "granitemoe-defaults": {"model_type": "granitemoe"},
    "granitemoe-bias-tied": dict(SMALL, model_type="granitemoe", attention_bias=True, tie_word_embeddings=True,
                                 num_local_experts=4, num_experts_per_tok=2),
    "glm4_moe-defaults": {"model_type": "glm4_moe"},
    "glm4_moe-qk-norm-3-dense": dict(SMALL, model_type="glm4_moe", head_dim=64, use_qk_norm=True, attention_bias=True,
                                     first_k_dense_replace=3, n_routed_experts=8, n_shared_experts=2,
                                     moe_intermediate_size=64, num_experts_per_tok=2),
    "gpt_oss-defaults": {"model_type": "gpt_oss"},
    "gpt_oss-no-bias-num-experts": dict(SMALL, model_type="gpt_oss", head_dim=64, attention_bias=False, num_experts=4,
                                        num_experts_per_tok=2, sliding_window=None),
    "deepseek_v3-defaults": {"model_type": "deepseek_v3"},
    "deepseek_v3-q-proj-bias-2-dense": dict(SMALL, model_type="deepseek_v3", q_lora_rank=None, kv_lora_rank=32,
                                            qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=24, attention_bias=True,
                                            first_k_dense_replace=2, n_routed_experts=8, n_shared_experts=2,
                                            moe_intermediate_size=64, num_experts_per_tok=2, n_group=2, topk_group=1),
    "deepseek_v2-defaults": {"model_type": "deepseek_v2"},
    "deepseek_v2-q-lora-mlp-bias": dict(SMALL, model_type="deepseek_v2", q_lora_rank=48, kv_lora_rank=32,
                                        qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=24, attention_bias=True,
                                        mlp_bias=True, first_k_dense_replace=1, n_routed_experts=8,
                                        moe_intermediate_size=64, num_experts_per_tok=2),
    # Multimodal wrappers: class defaults (absent sub-configs), small towers exercising each key.
    "gemma3-defaults": {"model_type": "gemma3"},
    "gemma3-pooling-head-untied": {"model_type": "gemma3", "tie_word_embeddings": False, "mm_tokens_per_image": 16,
                                   "text_config": dict(SMALL, model_type="gemma3_text", head_dim=64),
                                   "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 96,
                                                     "intermediate_size": 200, "num_hidden_layers": 2,
                                                     "num_attention_heads": 4, "image_size": 64, "patch_size": 8,
                                                     "num_channels": 4}},
    "qwen2_5_vl-defaults": {"model_type": "qwen2_5_vl"},
    "qwen2_5_vl-nested-tied": {"model_type": "qwen2_5_vl",
                               "text_config": dict(SMALL, model_type="qwen2_5_vl_text", tie_word_embeddings=True),
                               "vision_config": {"depth": 3, "hidden_size": 64, "intermediate_size": 100,
                                                 "num_heads": 4, "out_hidden_size": 256, "patch_size": 8,
                                                 "temporal_patch_size": 1, "spatial_merge_size": 3,
                                                 "in_channels": 2}},
    "qwen3_vl-defaults": {"model_type": "qwen3_vl"},
    "qwen3_vl-small-deepstack-2": {"model_type": "qwen3_vl", "tie_word_embeddings": True,
                                   "text_config": dict(SMALL, model_type="qwen3_vl_text", head_dim=32,
                                                       attention_bias=True),
                                   "vision_config": {"depth": 4, "hidden_size": 64, "intermediate_size": 100,
                                                     "num_heads": 4, "out_hidden_size": 256, "patch_size": 8,
                                                     "num_position_embeddings": 64,
                                                     "deepstack_visual_indexes": [1, 2]}},
    "mistral3-defaults": {"model_type": "mistral3"},
    "mistral3-partial-two-layers-bias": {"model_type": "mistral3", "tie_word_embeddings": False,
                                         "multimodal_projector_bias": True, "vision_feature_layer": [-1, -2],
                                         "spatial_merge_size": 3,
                                         "text_config": dict(SMALL, model_type="mistral"),
                                         "vision_config": {"model_type": "pixtral", "hidden_size": 64,
                                                           "intermediate_size": 128, "num_hidden_layers": 2,
                                                           "num_attention_heads": 4}},
    # Llama 4: Maverick's alternating dense and MoE layers, biases, a short head, NoPE layers
    # listed; MoE layers listed; the multimodal wrapper read as its text_config.
    "llama4_text-defaults": {"model_type": "llama4_text"},
    "llama4_text-interleave-bias": dict(SMALL, model_type="llama4_text", intermediate_size=128,
                                        intermediate_size_mlp=320, num_hidden_layers=6, head_dim=48,
                                        interleave_moe_layer_step=2, num_local_experts=4, attention_bias=True,
                                        tie_word_embeddings=True, no_rope_layers=[1, 0, 0, 1, 1, 1]),
    "llama4_text-moe-layers": dict(SMALL, model_type="llama4_text", intermediate_size=128, intermediate_size_mlp=320,
                                   num_hidden_layers=5, moe_layers=[0, 3], num_local_experts=4,
                                   num_experts_per_tok=2),
    "llama4-wrapper": {"model_type": "llama4", "text_config": dict(SMALL, intermediate_size=128,
                                                                    intermediate_size_mlp=320, num_local_experts=4)},
    # Qwen3-Next: its hybrid layers listed irregularly, a dense layer, biases, narrow linear heads.
    "qwen3_next-defaults": {"model_type": "qwen3_next"},
    "seed_oss-defaults": {"model_type": "seed_oss"},
    "ernie4_5-defaults": {"model_type": "ernie4_5"},
    "olmoe-defaults": {"model_type": "olmoe"},
    "olmoe-small": dict(SMALL, model_type="olmoe", num_experts=8, num_experts_per_tok=2, norm_topk_prob=True),
    "minimax_m2-defaults": {"model_type": "minimax_m2"},
    "minimax_m2-rotary-dim": dict(SMALL, model_type="minimax_m2", head_dim=64, rotary_dim=32,
                                  num_local_experts=8, num_experts_per_tok=2),
    # Its class default head_dim is None, which HunYuanDenseV1Attention cannot build with.
    "hunyuan_v1_dense-defaults": {"model_type": "hunyuan_v1_dense", "head_dim": 128},
    "hunyuan_v1_dense-biases": dict(SMALL, model_type="hunyuan_v1_dense", head_dim=64, attention_bias=True),
    "exaone4-defaults": {"model_type": "exaone4"},
    # The released configs' string pattern comes with layer_types (transformers reads those).
    "exaone4-lllg": dict(SMALL, model_type="exaone4", head_dim=48, sliding_window=64, sliding_window_pattern="LLLG",
                         layer_types=["sliding_attention", "sliding_attention", "sliding_attention", "full_attention"]),
    "ernie4_5-use-bias": dict(SMALL, model_type="ernie4_5", use_bias=True, head_dim=48),
    "seed_oss-biases": dict(SMALL, model_type="seed_oss", attention_bias=False, attention_out_bias=True,
                            mlp_bias=True, head_dim=48),
    "qwen3_next-layer-types-bias": dict(SMALL, model_type="qwen3_next", num_hidden_layers=6, head_dim=64,
                                        linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=32,
                                        linear_value_head_dim=48, linear_conv_kernel_dim=3, mlp_only_layers=[1],
                                        attention_bias=True, shared_expert_intermediate_size=96,
                                        layer_types=["linear_attention", "full_attention", "full_attention",
                                                     "linear_attention", "linear_attention", "full_attention"],
                                        **MOE),
    "qwen3_next-interval-3": dict(SMALL, model_type="qwen3_next", num_hidden_layers=7, full_attention_interval=3,
                                  decoder_sparse_step=2, **MOE),
    # Qwen3.5: Qwen3-Next's layers with the DeltaNet's input projections split in four, dense
    # or MoE text models, and the wrappers around them (Qwen3-VL's tower without DeepStack).
    "qwen3_5_text-defaults": {"model_type": "qwen3_5_text"},
    "qwen3_5_moe_text-defaults": {"model_type": "qwen3_5_moe_text"},
    "qwen3_5-defaults": {"model_type": "qwen3_5"},
    "qwen3_5_moe-defaults": {"model_type": "qwen3_5_moe"},
    "qwen3_5_text-layer-types-bias": dict(SMALL, model_type="qwen3_5_text", num_hidden_layers=5, head_dim=64,
                                          linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=32,
                                          linear_value_head_dim=48, linear_conv_kernel_dim=3, attention_bias=True,
                                          layer_types=["linear_attention", "full_attention", "linear_attention",
                                                       "linear_attention", "full_attention"]),
    "qwen3_5_moe-small-tower": {"model_type": "qwen3_5_moe", "tie_word_embeddings": True,
                                "text_config": dict(SMALL, model_type="qwen3_5_moe_text", head_dim=32,
                                                    linear_num_key_heads=2, linear_num_value_heads=4,
                                                    linear_key_head_dim=16, linear_value_head_dim=24,
                                                    shared_expert_intermediate_size=96, **MOE),
                                "vision_config": {"depth": 3, "hidden_size": 64, "intermediate_size": 100,
                                                  "num_heads": 4, "out_hidden_size": 256, "patch_size": 8,
                                                  "num_position_embeddings": 64}},
    "gpt2-n-inner": {"model_type": "gpt2", "n_embd": 128, "n_layer": 2, "n_head": 4, "n_inner": 300,
                     "vocab_size": 1000, "n_positions": 64},
}


@pytest.mark.parametrize("name", VARIANTS)
def test_variant_count(name):
    config = VARIANTS[name]
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(config, f)
    try:
        got = cli_json("estimate", "--model", f.name)["parameters"]["total"]
    finally:
        os.unlink(f.name)
    assert got == transformers_count(config)


def test_unknown_model_type_is_estimated_as_llama():
    """A model_type the core does not model, with the standard keys: counted as Llama's layout
    (equal to transformers' LlamaForCausalLM of the same keys) and marked approximate."""
    config = dict(SMALL, model_type="my_lm", attention_bias=True)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(config, f)
    try:
        got = cli_json("estimate", "--model", f.name)
    finally:
        os.unlink(f.name)
    assert got["parameters"]["total"] == transformers_count(dict(config, model_type="llama"))
    assert got["parameters_confidence"] == "assumed"
    assert "`my_lm` is not one Headroom models exactly" in got["warnings"][0]
