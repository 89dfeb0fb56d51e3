"""Builds LoRA and QLoRA models as people train them, for measure_saved.measure: a transformers
model loaded in the base dtype, bitsandbytes' NF4 4-bit Linears for QLoRA (quantized on load
from a saved checkpoint, as `from_pretrained` does), peft's `prepare_model_for_kbit_training`
when asked, then peft's LoRA adapters. Runs on CPU: bitsandbytes 0.50 quantizes and runs 4-bit
Linears there.
"""
import tempfile

import torch
import transformers

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
# Headroom's `--targets` as peft's `target_modules` for Llama-like layers.
TARGETS = {"attn": ["q_proj", "k_proj", "v_proj", "o_proj"], "all": "all-linear", "qv": ["q_proj", "v_proj"],
           "qkv": ["q_proj", "k_proj", "v_proj"], "mlp": ["gate_proj", "up_proj", "down_proj"]}


def load_dtype(precision, base):
    """The dtype the base model is loaded in: Headroom's `--base` under an amp precision, the
    precision's own otherwise."""
    if precision.startswith("amp"):
        return DTYPES["fp32" if base == "fp32" else "bf16"]
    return DTYPES["fp32" if precision == "fp32" else "bf16"]


def builder(config, precision, attention, checkpointing, method, rank, targets, base="16bit", kbit=False,
            dropout=0.0, save_embeddings=False, adapter="fp32", dora=False):
    """A function that builds the model of one LoRA/QLoRA scenario (seeded, in train mode)."""
    import peft

    def build():
        torch.manual_seed(0)
        cfg = transformers.AutoConfig.for_model(**config)
        dtype = load_dtype(precision, base)
        if method == "qlora":
            # Random weights saved and loaded back: bitsandbytes quantizes while loading.
            with tempfile.TemporaryDirectory() as tmp:
                transformers.AutoModelForCausalLM.from_config(cfg).save_pretrained(tmp)
                quant = transformers.BitsAndBytesConfig(
                    load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                    bnb_4bit_compute_dtype=torch.bfloat16)
                model = transformers.AutoModelForCausalLM.from_pretrained(
                    tmp, quantization_config=quant, dtype=dtype, attn_implementation=attention,
                    device_map="cpu")
        else:
            model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation=attention, dtype=dtype)
        if method == "qlora" and kbit:
            model = peft.prepare_model_for_kbit_training(model, use_gradient_checkpointing=False)
        lora = peft.LoraConfig(r=rank, lora_alpha=2 * rank, lora_dropout=dropout, target_modules=TARGETS[targets],
                               modules_to_save=["embed_tokens", "lm_head"] if save_embeddings else None,
                               use_dora=dora,
                               task_type="CAUSAL_LM")
        # peft casts 16-bit adapters to fp32 unless told not to (Headroom's `--adapter`).
        model = peft.get_peft_model(model, lora, autocast_adapter_dtype=adapter == "fp32")
        model.train()
        if checkpointing == "full":
            # As the Trainer does for a PEFT model: non-reentrant checkpointing, and inputs that
            # require grad so the first layer's recompute has something to differentiate.
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            model.enable_input_require_grads()
        return model

    return build


def dropout_correction(model, batch, seq, first_frozen):
    """CUDA minus CPU bytes of lora_dropout's masks in the middle layer and in all layers:
    CUDA's fused dropout keeps a bool mask, CPU's multiplies by a noise tensor of the input's
    dtype (fp32 here: peft casts the input to the fp32 adapters first) and saves that."""
    from measure_saved import decoder_layers

    layers = decoder_layers(model)
    per_layer = []
    for i, layer in enumerate(layers):
        # The first layer's q/k/v dropouts run outside autograd when its input needs no
        # gradient (`first_frozen`): nothing of theirs is saved on either device.
        elements = sum(m.in_features for n, m in layer.named_modules() if n.endswith("lora_A.default")
                       and not (i == 0 and first_frozen and n.split(".")[-3] in ("q_proj", "k_proj", "v_proj")))
        per_layer.append(batch * seq * elements * (1 - 4))
    return per_layer[len(layers) // 2], sum(per_layer)
