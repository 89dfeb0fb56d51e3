//! LLaMA-Factory's training YAML (`llamafactory-cli train FILE`): its model, data and
//! fine-tuning arguments (`src/llamafactory/hparams/`) over transformers' `TrainingArguments`.
//!
//! Its defaults differ from the others': LoRA is the default method, on every linear layer
//! (`lora_target: all`), rank 8 without dropout; gradient checkpointing is on unless
//! `disable_gradient_checkpointing`; the model loads in the compute dtype and the trainable
//! weights are upcast to fp32 unless `pure_bf16` (or ZeRO-3 without quantization, which keeps
//! them in fp32 itself) (`model/adapter.py`, `init_adapter`); it does not call peft's
//! `prepare_model_for_kbit_training`.

use serde_json::{Map, Value};

use super::hf_args::{self, Defaults, Half};
use super::{
    ImportError, Out, as_bool, as_names, as_str, as_u32, dropout, modules_to_save, number,
    set_precision, switch, targets,
};

/// LLaMA-Factory's keys with no effect on one step's memory or time.
const NO_EFFECT: &[&str] = &[
    "dataset",
    "eval_dataset",
    "dataset_dir",
    "media_dir",
    "template",
    "max_samples",
    "overwrite_cache",
    "preprocessing_num_workers",
    "val_size",
    "plot_loss",
    "lora_alpha",
    "use_rslora",
    "pref_beta",
    "pref_ftx",
    "dpo_label_smoothing",
    "kto_chosen_weight",
    "kto_rejected_weight",
    "streaming",
    "buffer_size",
    "mix_strategy",
    "interleave_probs",
    "tokenized_path",
    "train_on_prompt",
    "mask_history",
    "default_system",
    "enable_thinking",
    "use_reentrant_gc",
    "print_param_status",
    "export_dir",
    "infer_backend",
    "double_quantization",
    "image_max_pixels",
    "video_max_pixels",
    "use_swanlab",
    "swanlab_project",
    "predict_with_generate",
    "generation_max_length",
    "disable_shuffling",
    "ddp_timeout",
];

pub(super) fn read(mut map: Map<String, Value>, out: &mut Out) -> Result<(), ImportError> {
    if let Some(v) = map.remove("model_name_or_path") {
        out.model("model_name_or_path", &v)?;
    }
    objective(&mut map, out)?;
    let (adapters, quantized) = method(&mut map, out)?;
    if adapters {
        lora_keys(&mut map, out)?;
    }
    number(
        &mut map,
        out,
        "cutoff_len",
        "seq",
        Some(("2048", "LLaMA-Factory's default")),
    )?;
    let mut liger = None;
    if let Some(v) = map.remove("enable_liger_kernel") {
        liger = Some(v);
    }
    if let Some(v) = map.remove("disable_gradient_checkpointing") {
        {
            let off = as_bool("disable_gradient_checkpointing", &v)?;
            out.mapped(
                "disable_gradient_checkpointing",
                &v,
                &[("ckpt", if off { "none" } else { "full" })],
            );
        }
    }
    let training = hf_args::read(
        &mut map,
        out,
        &Defaults {
            who: "LLaMA-Factory",
            bf16: false,
            // LLaMA-Factory enables it itself; `gradient_checkpointing` is not its switch.
            checkpointing: !out
                .notes
                .iter()
                .any(|n| n.key == "disable_gradient_checkpointing" && n.text == "ckpt=none"),
        },
    )?;
    if let Some(v) = liger {
        hf_args::liger(out, "enable_liger_kernel", &v)?;
    }
    attention_packing_kernels(&mut map, out)?;
    let pure = match map.remove("pure_bf16") {
        Some(v) => {
            let on = as_bool("pure_bf16", &v)?;
            out.note("pure_bf16", &v, super::Outcome::Mapped, "precision (below)");
            on
        }
        None => false,
    };
    for key in [
        "upcast_layernorm",
        "upcast_lmhead_output",
        "use_unsloth",
        "shift_attn",
    ] {
        if let Some(v) = map.remove(key) {
            if as_bool(key, &v)? {
                out.not_expressed(key, &v, "not modelled");
            } else {
                out.no_effect(key, &v);
            }
        }
    }
    for key in [
        "use_galore",
        "use_apollo",
        "use_badam",
        "mixture_of_depths",
        "rope_scaling",
    ] {
        if let Some(v) = map.remove(key) {
            if v.as_bool() == Some(false) || v.is_null() {
                out.no_effect(key, &v);
            } else {
                out.not_expressed(key, &v, "not modelled");
            }
        }
    }
    precision(
        out,
        adapters,
        quantized,
        pure,
        training.half,
        training.sharded,
    );
    out.rest(map, "", &[hf_args::NO_EFFECT, NO_EFFECT].concat());
    Ok(())
}

/// The objective: `stage` (sft, pt, dpo, kto) and DPO's own keys.
fn objective(map: &mut Map<String, Value>, out: &mut Out) -> Result<(), ImportError> {
    let stage = match map.remove("stage") {
        Some(v) => {
            let s = as_str("stage", &v)?.to_string();
            match s.as_str() {
                "sft" | "pt" => out.mapped("stage", &v, &[("trainer", "sft")]),
                "dpo" => out.mapped("stage", &v, &[("trainer", "dpo")]),
                "kto" => out.mapped("stage", &v, &[("trainer", "kto")]),
                _ => {
                    out.pair("trainer", "sft");
                    out.not_expressed(
                        "stage",
                        &v,
                        format!(
                            "{s} (reward modelling, PPO) is not modelled: estimated as \
                             supervised fine-tuning"
                        ),
                    )
                }
            }
            s
        }
        None => {
            out.default("stage", &[("trainer", "sft")], "LLaMA-Factory's default");
            "sft".into()
        }
    };
    if stage == "dpo" {
        match map.remove("pref_loss") {
            Some(v) if ["orpo", "simpo"].contains(&as_str("pref_loss", &v)?) => {
                let set = out.set(&[("trainer", as_str("pref_loss", &v)?)]);
                out.note(
                    "pref_loss",
                    &v,
                    super::Outcome::Mapped,
                    format!(
                        "{set}: no reference model, the loss reads the full logits (LLaMA-Factory \
                         runs ORPO and SimPO in its own DPO trainer, estimated as TRL's \
                         ORPOTrainer and CPOTrainer)"
                    ),
                );
            }
            Some(v) => out.no_effect("pref_loss", &v),
            None => {}
        }
    }
    if stage == "dpo" || stage == "kto" {
        for key in ["ref_model", "ref_model_quantization_bit"] {
            if let Some(v) = map.remove(key) {
                out.not_expressed(
                    key,
                    &v,
                    "a separate reference model is not modelled: the policy's own weights (a \
                     copy for a full fine-tune, adapters off for LoRA) are",
                );
            }
        }
    }
    Ok(())
}

/// The method: LoRA by default; 4-bit bitsandbytes makes it QLoRA. Whether adapters train, and
/// whether the base is quantized.
fn method(map: &mut Map<String, Value>, out: &mut Out) -> Result<(bool, bool), ImportError> {
    let method = match map.remove("finetuning_type") {
        Some(v) => {
            let m = as_str("finetuning_type", &v)?.to_string();
            match m.as_str() {
                "full" => out.mapped("finetuning_type", &v, &[("method", "full")]),
                "lora" => out.mapped("finetuning_type", &v, &[("method", "lora")]),
                other => {
                    return Err(super::bad(
                        "finetuning_type",
                        format!(
                            "`{other}` (freeze, OFT) is not modelled; Headroom estimates full, \
                             lora and qlora"
                        ),
                    ));
                }
            }
            m
        }
        None => {
            out.default(
                "finetuning_type",
                &[("method", "lora")],
                "LLaMA-Factory's default",
            );
            "lora".into()
        }
    };
    let adapters = method == "lora";
    let quantized = match map.remove("quantization_bit") {
        Some(v) if v.is_null() => false,
        Some(v) => {
            let bits = as_u32("quantization_bit", &v)?;
            let qm = map.remove("quantization_method");
            let bnb = qm.as_ref().is_none_or(|m| {
                m.as_str()
                    .is_some_and(|s| s == "bnb" || s == "bitsandbytes")
            });
            if bits == 4 && bnb && adapters {
                out.mapped(
                    "quantization_bit",
                    &v,
                    &[("method", "qlora"), ("kbit", "0")],
                );
            } else if bits == 8 && bnb && adapters {
                out.mapped(
                    "quantization_bit",
                    &v,
                    &[("method", "lora8"), ("kbit", "0")],
                );
            } else {
                out.not_expressed(
                    "quantization_bit",
                    &v,
                    "only bitsandbytes' 4-bit and 8-bit bases under LoRA are modelled: \
                     estimated unquantized",
                );
            }
            if let Some(qm) = qm {
                out.no_effect("quantization_method", &qm);
            }
            matches!(bits, 4 | 8) && bnb && adapters
        }
        None => false,
    };
    Ok((adapters, quantized))
}

/// Unsloth's checkpointing, the attention kernel, packing and the switches not modelled.
fn attention_packing_kernels(
    map: &mut Map<String, Value>,
    out: &mut Out,
) -> Result<(), ImportError> {
    if let Some(v) = map.remove("use_unsloth_gc") {
        if as_bool("use_unsloth_gc", &v)? {
            out.mapped(
                "use_unsloth_gc",
                &v,
                &[("ckpt", "full"), ("act_offload", "1")],
            );
        } else {
            out.no_effect("use_unsloth_gc", &v);
        }
    }
    match map.remove("flash_attn") {
        Some(v) => {
            let a = as_str("flash_attn", &v)?;
            let field = match a {
                "auto" | "sdpa" => "sdpa",
                "fa2" => "flash2",
                "fa3" => "flash3",
                "disabled" => "eager",
                other => {
                    return Err(super::bad(
                        "flash_attn",
                        format!(
                            "unknown `{other}`; LLaMA-Factory allows auto, disabled, sdpa, fa2, fa3"
                        ),
                    ));
                }
            };
            out.mapped("flash_attn", &v, &[("attention", field)]);
        }
        None => out.default(
            "flash_attn",
            &[("attention", "sdpa")],
            "LLaMA-Factory's auto: transformers' SDPA",
        ),
    }
    match (map.remove("packing"), map.remove("neat_packing")) {
        (_, Some(v)) if as_bool("neat_packing", &v)? => {
            out.mapped("neat_packing", &v, &[("packing", "1")]);
        }
        (Some(v), _) => out.note(
            "packing",
            &v,
            super::Outcome::NoEffect,
            "rows filled to cutoff_len with attention across documents: the estimate's full rows",
        ),
        _ => {}
    }
    Ok(())
}

/// The compute dtype is the load dtype (bf16 or fp16 from the flags); trainable weights go to
/// fp32 unless pure_bf16, or ZeRO-3 without quantization (already fp32 there).
fn precision(
    out: &mut Out,
    adapters: bool,
    quantized: bool,
    pure: bool,
    flags: Half,
    sharded: bool,
) {
    let half = if pure { Half::Bf16 } else { flags };
    let load = match half {
        Half::None => Some(Half::Bf16),
        h => Some(h),
    };
    let upcast = !pure;
    let why = if pure {
        "pure_bf16: the weights stay bf16".to_string()
    } else if sharded && !quantized {
        "loaded in the compute dtype, kept in fp32 by ZeRO-3 / FSDP".into()
    } else {
        "loaded in the compute dtype, trainable weights upcast to fp32 (init_adapter)".into()
    };
    let precision_half = if pure { Half::None } else { half };
    set_precision(out, adapters, precision_half, load, upcast, &why);
}

/// `lora_rank`, `lora_target`, `lora_dropout`, `additional_target`, `use_dora`.
fn lora_keys(map: &mut Map<String, Value>, out: &mut Out) -> Result<(), ImportError> {
    number(
        map,
        out,
        "lora_rank",
        "rank",
        Some(("8", "LLaMA-Factory's default")),
    )?;
    match map.remove("lora_target") {
        Some(v) => {
            let names = as_names("lora_target", &v)?;
            if names == ["all"] {
                out.mapped("lora_target", &v, &[("targets", "all")]);
            } else {
                targets(out, "lora_target", &v)?;
            }
        }
        None => out.default(
            "lora_target",
            &[("targets", "all")],
            "LLaMA-Factory's default: every linear layer",
        ),
    }
    dropout(map, out, ("0", "LLaMA-Factory's default"))?;
    modules_to_save(map, out, "additional_target")?;
    switch(map, out, "use_dora", "dora")?;
    Ok(())
}
