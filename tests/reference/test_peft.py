"""LoRA and QLoRA as people run them, against the core, live on CPU: real peft adapters, real
bitsandbytes NF4 4-bit Linears (double quantization, bf16 compute), a base loaded in 16 bits or
in fp32, and peft's `prepare_model_for_kbit_training`, under pure bf16 and under autocast.

Exact: trainable parameters, gradients, optimizer states, weights (LoRA; QLoRA's NF4 state is
the core's formula), one layer's saved bytes. Within 1%: everything alive after forward and
loss. Each row is one (method, precision, base, kbit, targets, checkpointing) the core now tells
apart; before this suite the core modelled only the first kind of row (bf16, 16-bit base).

lora_dropout > 0 and peft's modules_to_save are checked the same way (`check`), the dropout masks
corrected for CPU's noise tensors (measure_peft.dropout_correction).
"""
import importlib.util

import pytest

from measure_peft import builder, dropout_correction
from measure_saved import measure
from test_saved_bytes import CONFIGS, REPORT, assert_figures, cpu_flash, predict, predicted_figures, rng_correction

HAS_BNB = importlib.util.find_spec("bitsandbytes") is not None

LLAMA = CONFIGS["llama"]
QWEN2 = CONFIGS["qwen2"]

# Small MoE models whose routed rows (120 tokens x top-2) and dimensions differ from every
# weight's shape, so the harness does not take a saved tensor for autocast's weight cast.
_MOE_BASE = {"vocab_size": 3000, "hidden_size": 192, "num_hidden_layers": 4, "num_attention_heads": 6,
             "num_key_value_heads": 2, "head_dim": 32}
MOE = {
    "qwen3_moe": dict(_MOE_BASE, model_type="qwen3_moe", intermediate_size=384, num_experts=8,
                      num_experts_per_tok=2, moe_intermediate_size=64),
    "mixtral": dict(_MOE_BASE, model_type="mixtral", intermediate_size=64, num_local_experts=8,
                    num_experts_per_tok=2),
    "olmoe": dict(_MOE_BASE, model_type="olmoe", intermediate_size=64, num_experts=8, num_experts_per_tok=2),
    "qwen2_moe": dict(_MOE_BASE, model_type="qwen2_moe", intermediate_size=384, num_experts=8,
                      num_experts_per_tok=2, moe_intermediate_size=64, shared_expert_intermediate_size=96),
    "qwen3_next": CONFIGS["qwen3_next"],
    "qwen3_5_moe": CONFIGS["qwen3_5_moe"],
    # Every layer MoE (the suite's config is dense throughout; the core's one-layer figure of
    # a model with both kinds is its dense layer's).
    "deepseek_v3": dict(CONFIGS["deepseek_v3"], first_k_dense_replace=0),
}
# The classes whose MoE config peft converts (their router adapted: `states::lora_adapts`).
CONVERTED = {"qwen3_moe", "mixtral", "olmoe", "qwen3_next", "deepseek_v3"}


def folded_router_correction(config, prec, targets):
    """Under autocast an adapted router's linear saves the 16-bit cast of its folded weight (the
    weight plus the adapters' product): the router weight's shape and dtype, which the harness
    takes for autocast's cached weight cast and leaves out of the layer (measure_saved.measure's
    `cast`). Added back: experts x hidden in bf16."""
    if config["model_type"] not in CONVERTED or not prec.startswith("amp") or targets != "all":
        return 0
    experts = config.get("num_experts") or config.get("num_local_experts") or config.get("n_routed_experts")
    return experts * config["hidden_size"] * 2

# (name, config, method, precision, base, kbit, targets, checkpointing, batch, seq)
SCENARIOS = [
    ("llama-lora-bf16", LLAMA, "lora", "bf16", "16bit", False, "all", "none", 2, 64),
    ("llama-lora-amp-16bit", LLAMA, "lora", "amp-bf16", "16bit", False, "all", "none", 2, 64),
    ("llama-lora-amp-fp32", LLAMA, "lora", "amp-bf16", "fp32", False, "all", "none", 2, 64),
    ("llama-lora-amp-16bit-attn", LLAMA, "lora", "amp-bf16", "16bit", False, "attn", "none", 2, 64),
    ("llama-lora-fp32", LLAMA, "lora", "fp32", "fp32", False, "all", "none", 2, 64),
    ("llama-lora-amp-fp32-ckpt", LLAMA, "lora", "amp-bf16", "fp32", False, "all", "full", 2, 64),
    ("qwen2-lora-amp-16bit", QWEN2, "lora", "amp-bf16", "16bit", False, "all", "none", 2, 64),
    ("llama-qlora-bf16", LLAMA, "qlora", "bf16", "16bit", False, "all", "none", 2, 64),
    ("llama-qlora-amp", LLAMA, "qlora", "amp-bf16", "16bit", False, "all", "none", 2, 64),
    ("llama-qlora-amp-kbit", LLAMA, "qlora", "amp-bf16", "16bit", True, "all", "none", 2, 64),
    ("llama-qlora-bf16-kbit", LLAMA, "qlora", "bf16", "16bit", True, "all", "none", 2, 64),
    ("llama-qlora-amp-attn", LLAMA, "qlora", "amp-bf16", "16bit", False, "attn", "none", 2, 64),
    ("llama-qlora-amp-kbit-ckpt", LLAMA, "qlora", "amp-bf16", "16bit", True, "all", "full", 2, 64),
    # peft's default targets for Llama-like models (q_proj, v_proj), q/k/v without o, MLP only.
    ("llama-lora-amp-qv", LLAMA, "lora", "amp-bf16", "16bit", False, "qv", "none", 2, 64),
    ("llama-lora-bf16-qkv", LLAMA, "lora", "bf16", "16bit", False, "qkv", "none", 2, 64),
    ("llama-lora-amp-fp32-mlp", LLAMA, "lora", "amp-bf16", "fp32", False, "mlp", "none", 2, 64),
    ("qwen2-qlora-amp-kbit-qv", QWEN2, "qlora", "amp-bf16", "16bit", True, "qv", "none", 2, 64),
    # An 8-bit base (load_in_8bit, LLM.int8), trained through the autograd function CUDA runs
    # (`MatMul8bitLt`, measure_peft.route_int8_to_cuda_function): each 8-bit Linear keeps its
    # input in its context, outside the hooks and through checkpointing.
    ("llama-lora8-bf16", LLAMA, "lora8", "bf16", "16bit", False, "all", "none", 2, 64),
    ("llama-lora8-amp-qv", LLAMA, "lora8", "amp-bf16", "16bit", False, "qv", "none", 2, 64),
    ("llama-lora8-amp-ckpt", LLAMA, "lora8", "amp-bf16", "16bit", False, "all", "full", 2, 64),
    ("llama-lora8-bf16-qv-ckpt", LLAMA, "lora8", "bf16", "16bit", False, "qv", "full", 2, 64),
    ("llama-lora8-amp-kbit-ckpt", LLAMA, "lora8", "amp-bf16", "16bit", True, "all", "full", 2, 64),
    ("llama-lora8-bf16-mlp", LLAMA, "lora8", "bf16", "16bit", False, "mlp", "none", 2, 64),
    ("qwen2-lora8-amp-kbit-qv", QWEN2, "lora8", "amp-bf16", "16bit", True, "qv", "none", 2, 64),
    # Other layer shapes: GPT-2's Conv1D projections (the fused kernel's output is c_proj's
    # input), OLMo 2's post-norms (q/k/v read the layer's input itself: kept once under
    # checkpointing), Mistral, StarCoder2's LayerNorm and plain MLP, GLM-4, Cohere 2's
    # parallel block.
    ("gpt2-lora8-bf16", CONFIGS["gpt2"], "lora8", "bf16", "16bit", False, "all", "none", 2, 64),
    ("gpt2-lora8-bf16-ckpt", CONFIGS["gpt2"], "lora8", "bf16", "16bit", False, "all", "full", 2, 64),
    ("olmo2-lora8-bf16", CONFIGS["olmo2"], "lora8", "bf16", "16bit", False, "all", "none", 2, 64),
    ("olmo2-lora8-bf16-ckpt", CONFIGS["olmo2"], "lora8", "bf16", "16bit", False, "all", "full", 2, 64),
    ("mistral-lora8-bf16", CONFIGS["mistral"], "lora8", "bf16", "16bit", False, "all", "none", 2, 64),
    ("starcoder2-lora8-bf16-ckpt", CONFIGS["starcoder2"], "lora8", "bf16", "16bit", False, "all", "full", 2, 64),
    ("glm4-lora8-bf16", CONFIGS["glm4"], "lora8", "bf16", "16bit", False, "all", "none", 2, 64),
    ("cohere2-lora8-bf16-ckpt", CONFIGS["cohere2"], "lora8", "bf16", "16bit", False, "all", "full", 2, 64),
    # Qwen3.5's DeltaNet layers: all-linear LoRA adapts its four input projections (in_proj_qkv,
    # in_proj_z, in_proj_b, in_proj_a), each keeping its own adapter's input under autocast.
    ("qwen3_5-lora-bf16", CONFIGS["qwen3_5"], "lora", "bf16", "16bit", False, "all", "none", 2, 64),
    ("qwen3_5-lora-amp-16bit", CONFIGS["qwen3_5"], "lora", "amp-bf16", "16bit", False, "all", "none", 2, 64),
    ("qwen3_5-lora-amp-fp32-ckpt", CONFIGS["qwen3_5"], "lora", "amp-bf16", "fp32", False, "all", "full", 2, 64),
    ("qwen3_5-qlora-amp-kbit", CONFIGS["qwen3_5"], "qlora", "amp-bf16", "16bit", True, "all", "none", 2, 64),
    ("qwen3_5-qlora-bf16", CONFIGS["qwen3_5"], "qlora", "bf16", "16bit", False, "all", "none", 2, 64),
    ("qwen3_5-qlora-amp", CONFIGS["qwen3_5"], "qlora", "amp-bf16", "16bit", False, "all", "none", 2, 64),
    # MoE layers as transformers 5.23 builds them: the experts are fused 3-D parameters, which
    # bitsandbytes leaves in the load dtype and all-linear reaches only where peft converts
    # the config (Qwen3-MoE, Mixtral, OLMoE, Qwen3-Next, DeepSeek: the experts' and router's
    # ParamWrappers, each forward folding the adapters into a copy of the expert stack);
    # Qwen2-MoE and Qwen3.5-MoE keep them bare, their shared experts adapted.
    *[(f"{name}-lora-{prec}-{base}", MOE[name], "lora", prec, base, False, "all", "none", 3, 40)
      for name in MOE for prec, base in (("bf16", "16bit"), ("amp-bf16", "fp32"))],
    ("qwen3_moe-lora-bf16-attn", MOE["qwen3_moe"], "lora", "bf16", "16bit", False, "attn", "none", 3, 40),
    ("qwen2_moe-lora-bf16-attn", MOE["qwen2_moe"], "lora", "bf16", "16bit", False, "attn", "none", 3, 40),
    ("qwen3_moe-lora-amp-16bit", MOE["qwen3_moe"], "lora", "amp-bf16", "16bit", False, "all", "none", 3, 40),
    ("qwen3_moe-lora-fp32", MOE["qwen3_moe"], "lora", "fp32", "fp32", False, "all", "none", 3, 40),
    ("qwen3_moe-qlora-bf16", MOE["qwen3_moe"], "qlora", "bf16", "16bit", False, "all", "none", 3, 40),
    ("qwen3_moe-qlora-amp-kbit", MOE["qwen3_moe"], "qlora", "amp-bf16", "16bit", True, "all", "none", 3, 40),
    ("mixtral-qlora-bf16", MOE["mixtral"], "qlora", "bf16", "16bit", False, "all", "none", 3, 40),
    ("qwen3_moe-lora-bf16-ckpt", MOE["qwen3_moe"], "lora", "bf16", "16bit", False, "all", "full", 3, 40),
    # DeepSeek-V3's dense layers under a converted config: their gate/up/down_proj keep no
    # adapters (peft took those names for the experts).
    ("deepseek_v3-dense-lora-bf16", CONFIGS["deepseek_v3"], "lora", "bf16", "16bit", False, "all", "none", 3, 40),
]


# Known gaps, strict: they fail the suite when they start agreeing.
GAPS = {
    # With adapters on the MLP only and no checkpointing, nothing in the first layer needs a
    # gradient before its MLP's adapters: its whole attention block saves nothing. The core
    # models that only for the first input norm (the q/k/v adapters' case).
    "llama-lora-amp-fp32-mlp": "first layer's attention block unsaved with MLP-only adapters",
    # The same with an 8-bit base: its first layer's attention Linears and gate/up hold nothing
    # either (their inputs need no gradient), only its down_proj's input.
    "llama-lora8-bf16-mlp": "first layer's attention block unsaved with MLP-only adapters",
    # CPU's autocast runs the router's top-k sum in bf16, CUDA's in fp32 as the core counts it
    # (t x 2 B: 240 B here); the rest of the layer is exact.
    "deepseek_v3-lora-amp-bf16-fp32": "CPU autocast's bf16 top-k sum where CUDA's is fp32 (240 B)",
}



def check(name, config, method, prec, base, kbit, targets, ckpt="none", b=2, s=64, dropout=False, emb=False,
          adapter="fp32", dora=False, attn="sdpa"):
    """Builds the scenario with peft (and bitsandbytes), measures one step on CPU and compares
    it with the CLI's estimate of the same flags."""
    if method in ("qlora", "lora8") and not HAS_BNB:
        pytest.skip("bitsandbytes is not installed")
    rank = 8
    build = builder(config, prec, attn, ckpt, method, rank, targets, base, kbit,
                    dropout=0.05 if dropout else 0.0, save_embeddings=emb, adapter=adapter, dora=dora)
    layer_fix, all_fix = (0, 0)
    if dropout:
        # Without checkpointing nothing needs the first layer's input to have a gradient.
        layer_fix, all_fix = dropout_correction(build(), b, s, first_frozen=ckpt == "none" and not emb)
    m = measure(config, b, s, prec, attn, ckpt, builder=build)
    extra = ["--method", method, "--rank", str(rank), "--targets", targets, "--base", base, "--adapter", adapter]
    extra += ["--kbit"] * kbit + ["--lora-dropout"] * dropout + ["--save-embeddings"] * emb + ["--dora"] * dora
    # A kbit-prepared QLoRA model without autocast runs its activations in fp32 (the core's
    # `states::activation_precision`): CPU's fp32 SDPA is flash, as for fp32 (cpu_flash).
    fp32_acts = method in ("qlora", "lora8") and kbit and not prec.startswith("amp")
    p = predict(config, b, s, prec, attn, ckpt, False, extra + cpu_flash(config, "fp32" if fp32_acts else prec, attn))
    # SDPA's CUDA kernels save RNG state that CPU's do not (test_saved_bytes.rng_correction).
    layer_rng, retained_rng = rng_correction(config, p, ckpt)
    if ckpt == "none":
        layer_fix += folded_router_correction(config, prec, targets)
    m["activations_per_layer"] += layer_rng + layer_fix
    m["retained_after_forward"] += retained_rng + all_fix
    got = predicted_figures(p)
    flags = f"{'' if adapter == 'fp32' else ' adapters ' + adapter}{' kbit' if kbit else ''}{' lora_dropout' if dropout else ''}{' modules_to_save' if emb else ''}{' dora' if dora else ''}"
    REPORT.append((f"{name} {prec} base={base}{flags} {targets} ckpt={ckpt} b{b} s{s}", got, m))
    assert_figures(got, m, ckpt, ("parameters_trainable", "weights", "gradients", "optimizer_states"))


PARAMS = [pytest.param(*sc, id=sc[0], marks=[pytest.mark.xfail(strict=True, reason=GAPS[sc[0]])] if sc[0] in GAPS else [])
          for sc in SCENARIOS]


@pytest.mark.parametrize("name,config,method,prec,base,kbit,targets,ckpt,b,s", PARAMS)
def test_peft_against_pytorch(name, config, method, prec, base, kbit, targets, ckpt, b, s):
    check(name, config, method, prec, base, kbit, targets, ckpt, b, s)


# Options on top of a scenario, each checked the same way: lora_dropout > 0 (peft's 0.05 in most
# recipes: a dropped copy and a mask per adapted Linear), peft's modules_to_save=["embed_tokens",
# "lm_head"] (Qwen-1's "LoRA (emb)": trained copies), adapters left in the base's 16 bits
# (get_peft_model(..., autocast_adapter_dtype=False)) and DoRA (use_dora=True: magnitudes, and
# the base's and adapters' outputs kept for them).
# (name, config, method, precision, base, kbit, targets, options)
OPTIONS = [
    ("llama-lora-amp-16bit-dropout", LLAMA, "lora", "amp-bf16", "16bit", False, "all", dict(dropout=True)),
    ("llama-lora-bf16-dropout", LLAMA, "lora", "bf16", "16bit", False, "all", dict(dropout=True)),
    ("llama-lora-fp32-dropout", LLAMA, "lora", "fp32", "fp32", False, "attn", dict(dropout=True)),
    ("llama-qlora-amp-kbit-dropout", LLAMA, "qlora", "amp-bf16", "16bit", True, "qv", dict(dropout=True)),
    ("llama-lora-bf16-emb", LLAMA, "lora", "bf16", "16bit", False, "all", dict(emb=True)),
    ("llama-lora-amp-16bit-emb", LLAMA, "lora", "amp-bf16", "16bit", False, "all", dict(emb=True)),
    ("llama-lora-amp-fp32-emb", LLAMA, "lora", "amp-bf16", "fp32", False, "attn", dict(emb=True)),
    ("llama-qlora-amp-kbit-emb", LLAMA, "qlora", "amp-bf16", "16bit", True, "qv", dict(emb=True)),
    ("llama-lora-bf16-bf16-adapters", LLAMA, "lora", "bf16", "16bit", False, "all", dict(adapter="bf16")),
    ("llama-lora-amp-bf16-adapters", LLAMA, "lora", "amp-bf16", "16bit", False, "attn", dict(adapter="bf16")),
    ("llama-qlora-bf16-bf16-adapters", LLAMA, "qlora", "bf16", "16bit", False, "qv", dict(adapter="bf16")),
    ("llama-dora-bf16", LLAMA, "lora", "bf16", "16bit", False, "all", dict(dora=True)),
    ("llama-dora-amp-16bit", LLAMA, "lora", "amp-bf16", "16bit", False, "all", dict(dora=True)),
    ("llama-dora-amp-fp32-qv", LLAMA, "lora", "amp-bf16", "fp32", False, "qv", dict(dora=True)),
    ("llama-qdora-amp-kbit", LLAMA, "qlora", "amp-bf16", "16bit", True, "all", dict(dora=True)),
    ("llama-dora-bf16-dropout", LLAMA, "lora", "bf16", "16bit", False, "attn", dict(dora=True, dropout=True)),
    ("llama-lora8-amp-dropout", LLAMA, "lora8", "amp-bf16", "16bit", False, "qv", dict(dropout=True)),
    ("llama-lora8-bf16-emb", LLAMA, "lora8", "bf16", "16bit", False, "all", dict(emb=True)),
    # Eager attention under amp on a kbit-prepared 8-bit base: the attention output o_proj
    # holds is autocast's bf16 (its matmul's), not the fp32 residual stream's dtype.
    ("llama-lora8-amp-kbit-eager", LLAMA, "lora8", "amp-bf16", "16bit", True, "all", dict(attn="eager")),
    ("llama-lora8-amp-kbit-eager-qv", LLAMA, "lora8", "amp-bf16", "16bit", True, "qv", dict(attn="eager")),
]


@pytest.mark.parametrize("name,config,method,prec,base,kbit,targets,options", OPTIONS, ids=[o[0] for o in OPTIONS])
def test_peft_options_against_pytorch(name, config, method, prec, base, kbit, targets, options):
    check(name, config, method, prec, base, kbit, targets, **options)
