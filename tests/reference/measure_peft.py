"""Builds LoRA and QLoRA models as people train them, for measure_saved.measure: a transformers
model loaded in the base dtype, bitsandbytes' NF4 4-bit Linears for QLoRA or its LLM.int8
8-bit Linears for `lora8` (quantized on load from a saved checkpoint, as `from_pretrained`
does), peft's `prepare_model_for_kbit_training`
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
        if method in ("qlora", "lora8"):
            # Random weights saved and loaded back: bitsandbytes quantizes while loading.
            with tempfile.TemporaryDirectory() as tmp:
                transformers.AutoModelForCausalLM.from_config(cfg).save_pretrained(tmp)
                if method == "lora8":
                    route_int8_to_cuda_function()
                    quant = transformers.BitsAndBytesConfig(load_in_8bit=True)
                else:
                    quant = transformers.BitsAndBytesConfig(
                        load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                        bnb_4bit_compute_dtype=torch.bfloat16)
                model = transformers.AutoModelForCausalLM.from_pretrained(
                    tmp, quantization_config=quant, dtype=dtype, attn_implementation=attention,
                    device_map="cpu")
        else:
            model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation=attention, dtype=dtype)
        if method in ("qlora", "lora8") and kbit:
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


def route_int8_to_cuda_function():
    """Makes bitsandbytes' 8-bit Linears train through `MatMul8bitLt`, the autograd function
    CUDA runs, instead of the CPU's `MatMul8bitFp` (measure_int8.py), and records each input
    that function's context keeps (`ctx.tensors` holds A when it needs a gradient) with the
    decoder layer running it, for measure_saved.measure: no saved-tensor hook sees them."""
    import bitsandbytes as bnb
    import bitsandbytes.nn.modules as modules
    from bitsandbytes.autograd import _functions as functions

    import measure_saved

    def cuda_matmul(A, B, out=None, state=None, threshold=0.0, bias=None):
        state = state or functions.MatmulLtState()
        if threshold > 0.0:
            state.threshold = threshold
        result = functions.MatMul8bitLt.apply(A, B, out, bias, state)
        # The function's own node (a 3-D input's output is a view of its result): its context
        # keeps (CAt, subA, A). A is the 2-D view of the input; subA, the input's LLM.int8
        # outlier columns (|x| >= 6), depends on the data and is left out, as the core leaves it.
        node = result.grad_fn
        while node is not None and not type(node).__name__.startswith("MatMul8bitLt"):
            node = node.next_functions[0][0] if node.next_functions else None
        held = getattr(node, "tensors", None) or ()
        if len(held) == 3 and isinstance(held[2], torch.Tensor) and held[2].numel():
            measure_saved.HELD.append((measure_saved.CURRENT[0], held[2]))
        return result

    bnb.matmul = functions.matmul = modules.bnb.matmul = cuda_matmul
    # Its warning that 16-bit inputs are cast to fp16 for quantization, once per call.
    import logging
    logging.getLogger("bitsandbytes.autograd._functions").setLevel(logging.ERROR)


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
