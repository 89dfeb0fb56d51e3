//! The Python that builds the model as estimated, shared by the FSDP2 script and the Trainer
//! file: the weights' dtype, attention, 4-bit quantization, LoRA, checkpointing, and the dry
//! run (`HEADROOM_DRY_RUN=config.json`: the architecture on the meta device, no weights).
//!
//! The weights' dtype comes from `states::weight_dtype`. `tests/reference/test_export.py` runs the
//! dry run (PyTorch's fake process group stands in for FSDP2's ranks) and compares it with the
//! estimate.

use crate::dtype::DType;
use crate::scenario::{Checkpointing, LossImpl, Method, Scenario};

/// `torch.<dtype>` of the base model's weights: the estimate's own rule
/// (`states::weight_dtype`): fp32 masters in full mixed-precision training, a 16-bit frozen base
/// under LoRA/QLoRA, a 16-bit module under DeepSpeed's mixed precision.
pub(super) fn load_dtype(scen: &Scenario) -> &'static str {
    if crate::states::kbit_upcast(scen) && scen.lora.base != crate::scenario::BaseDtype::Fp32 {
        // Loaded in 16 bits; prepare_model_for_kbit_training then upcasts (`build_model_code`).
        return torch_dtype(scen.precision.half_dtype());
    }
    let ds_mixed = crate::states::deepspeed_mixed(scen);
    torch_dtype(crate::states::weight_dtype(scen, ds_mixed))
}

pub(super) fn torch_dtype(d: DType) -> &'static str {
    match d {
        DType::F32 => "torch.float32",
        DType::Bf16 => "torch.bfloat16",
        DType::F16 => "torch.float16",
        _ => "torch.float32",
    }
}

/// Imports the model code needs (after `import torch` and `import os`).
pub(super) fn imports(scen: &Scenario) -> String {
    let mut t = String::from(
        "from transformers import AutoConfig, AutoModelForCausalLM\nfrom transformers.modeling_layers import GradientCheckpointingLayer\n",
    );
    if scen.method.quantized_base() {
        t.push_str("from transformers import BitsAndBytesConfig\n");
    }
    if scen.method != Method::Full {
        t.push_str("from peft import LoraConfig, get_peft_model\n");
    }
    if crate::states::kbit_upcast(scen) {
        t.push_str("from peft import prepare_model_for_kbit_training\n");
    }
    t
}

/// The `LOAD`/`LORA` constants and `build_model(on_meta)`; `checkpointing` says whether the
/// model turns transformers' activation checkpointing on itself (not when the Trainer or FSDP's
/// own setting does it).
pub(super) fn build_model_code(scen: &Scenario, checkpointing: bool) -> String {
    let attn = scen.attention.hf_name();
    let mut t = String::new();
    t.push_str("# HEADROOM_DRY_RUN=path/to/config.json: build on the meta device from that config (no weights, no GPU), check, report and exit.\nDRY_RUN = os.environ.get(\"HEADROOM_DRY_RUN\")\n");
    if scen.loss == LossImpl::Fused {
        t.push_str("# Fused linear cross-entropy (chunked logits): Liger's kernels patch the model class.\ntry:\n    from liger_kernel.transformers import AutoLigerKernelForCausalLM as CausalLM\nexcept ImportError:\n    if not DRY_RUN:\n        raise\n    CausalLM = AutoModelForCausalLM  # a dry run without Liger (it needs CUDA): the loss kernel is not checked\n");
    } else {
        t.push_str("CausalLM = AutoModelForCausalLM\n");
    }
    t.push_str(&format!(
        "LOAD = dict(dtype={}, attn_implementation=\"{attn}\")\n",
        load_dtype(scen)
    ));
    if scen.method == Method::Qlora {
        // The estimate's QLoRA: NF4 with double quantization, 16-bit compute; embeddings, norms
        // and lm_head in the load dtype, or in fp32 after prepare_model_for_kbit_training where
        // the scenario says it is called (`kbit`).
        let note = if scen.lora.kbit {
            "# NF4 with double quantization, then prepare_model_for_kbit_training (kbit=1): fp32 norms, embeddings, lm_head.\n"
        } else {
            "# NF4 with double quantization, without prepare_model_for_kbit_training (kbit=1 counts its fp32 upcast).\n"
        };
        t.push_str(note);
        t.push_str(&format!(
            "LOAD[\"quantization_config\"] = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type=\"nf4\", bnb_4bit_use_double_quant=True, bnb_4bit_compute_dtype={})\n",
            torch_dtype(scen.precision.half_dtype())
        ));
    }
    if scen.method == Method::Int8 {
        // The estimate's 8-bit base: LLM.int8 with its default outlier threshold (6.0).
        t.push_str(if scen.lora.kbit {
            "# LLM.int8 (load_in_8bit), then prepare_model_for_kbit_training (kbit=1): fp32 norms, embeddings, lm_head.\n"
        } else {
            "# LLM.int8 (load_in_8bit), without prepare_model_for_kbit_training (kbit=1 counts its fp32 upcast).\n"
        });
        t.push_str("LOAD[\"quantization_config\"] = BitsAndBytesConfig(load_in_8bit=True)\n");
    }
    if scen.method != Method::Full {
        let targets = super::common::lora_targets(scen);
        let mut extra = String::new();
        if scen.lora.dropout {
            extra.push_str(", lora_dropout=0.05");
        }
        if scen.lora.dora {
            extra.push_str(", use_dora=True");
        }
        if scen.lora.save_embeddings {
            extra.push_str(", modules_to_save=[\"embed_tokens\", \"lm_head\"]");
        }
        t.push_str(&format!(
            "LORA = LoraConfig(r={}, lora_alpha={}, target_modules={targets}{extra}, task_type=\"CAUSAL_LM\")\n",
            scen.lora.rank,
            2 * scen.lora.rank
        ));
    }
    t.push_str("\n\ndef build_model(on_meta=False, **load):\n");
    t.push_str("    \"\"\"The model as estimated; on_meta: the architecture only, parameters on the meta device.\"\"\"\n");
    t.push_str("    if on_meta:\n");
    t.push_str("        config = AutoConfig.from_pretrained(DRY_RUN or MODEL)\n");
    t.push_str("        with torch.device(\"meta\"):\n");
    t.push_str("            # bitsandbytes quantizes while loading weights: nothing to quantize on the meta device.\n");
    t.push_str("            model = CausalLM.from_config(config, **{k: v for k, v in LOAD.items() if k != \"quantization_config\"})\n");
    t.push_str("    else:\n");
    t.push_str("        model = CausalLM.from_pretrained(MODEL, **LOAD, **load)\n");
    if crate::states::kbit_upcast(scen) {
        // Checkpointing is turned on below (or by the Trainer), not by peft's helper.
        t.push_str("    model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=False)\n");
    }
    if checkpointing {
        // transformers 5.23: activation_checkpointing_enable (gradient_checkpointing_enable is
        // its deprecated alias); every_n_layers checkpoints one decoder layer in k.
        match scen.checkpointing {
            Checkpointing::Full => t.push_str("    model.activation_checkpointing_enable(activation_checkpointing_kwargs={\"use_reentrant\": False})\n"),
            Checkpointing::Every(k) => t.push_str(&format!(
                "    model.activation_checkpointing_enable(activation_checkpointing_kwargs={{\"use_reentrant\": False}}, every_n_layers={k})\n"
            )),
            _ => {}
        }
    }
    if scen.method != Method::Full {
        // peft casts 16-bit adapters to fp32 unless told not to (autocast_adapter_dtype).
        let autocast = if scen.lora.adapter_dtype == DType::F32 {
            ""
        } else {
            ", autocast_adapter_dtype=False"
        };
        t.push_str(&format!(
            "    model = get_peft_model(model, LORA{autocast})  # adapters in {}\n",
            scen.lora.adapter_dtype.torch_name()
        ));
    }
    t.push_str("    return model\n");
    t
}

/// `model_report(model)`: what the dry run built (local shards under FSDP2), for the reference
/// suite to compare with the estimate.
pub(super) fn report_code() -> &'static str {
    "\n\ndef model_report(model):\n    \"\"\"Parameter bytes by dtype (this rank's shards), trainable parameters, checkpointed layers, LoRA.\"\"\"\n    local = [(p.to_local() if hasattr(p, \"to_local\") else p, p.requires_grad) for p in model.parameters()]\n    by_dtype = {}\n    for p, _ in local:\n        by_dtype[str(p.dtype)] = by_dtype.get(str(p.dtype), 0) + p.numel() * p.element_size()\n    return dict(\n        param_bytes_by_dtype=by_dtype,\n        trainable_params=sum(p.numel() for p, g in local if g),\n        trainable_bytes=sum(p.numel() * p.element_size() for p, g in local if g),\n        devices=sorted({p.device.type for p, _ in local}),\n        checkpointed_layers=sum(1 for m in model.modules() if isinstance(m, GradientCheckpointingLayer) and m.gradient_checkpointing),\n        lora=dict(r=LORA.r, modules=sum(1 for n, _ in model.named_modules() if n.endswith(\".lora_A.default\"))) if \"LORA\" in globals() else None,\n        quantization=LOAD[\"quantization_config\"].to_dict() if \"quantization_config\" in LOAD else None,\n    )\n"
}
