//! TRL's script arguments (`trl sft --config FILE`: `ModelConfig` with `SFTConfig`, `DPOConfig`
//! or `GRPOConfig`) and plain transformers `TrainingArguments`, as TRL 1.16 reads them.
//!
//! TRL's configs default to bf16 autocast and gradient checkpointing (`sft_config.py`,
//! `dpo_config.py`, `grpo_config.py`: "Defaults to `True` instead of `False`"); `ModelConfig`
//! loads the weights in `dtype`, float32 by default (`model_config.py`). The objective is read
//! from the keys only one trainer has: GRPO's generation settings, DPO's reference-model ones.

use serde_json::{Map, Value};

use super::hf_args::{self, Defaults, Half};
use super::{
    ImportError, Out, as_bool, as_f64, as_str, as_u32, attention, dropout, modules_to_save, number,
    set_precision, switch, take_bool, targets,
};

const GRPO_KEYS: &[&str] = &[
    "num_generations",
    "max_completion_length",
    "generation_batch_size",
    "use_vllm",
];
/// RLOOConfig's keys GRPOConfig lacks (TRL 1.16).
const RLOO_KEYS: &[&str] = &["normalize_advantages", "reward_clip_range"];
/// KTOConfig's keys DPOConfig lacks (TRL 1.16).
const KTO_KEYS: &[&str] = &["desirable_weight", "undesirable_weight"];
/// CPOConfig's keys DPOConfig lacks (TRL 1.16 `trl.experimental.cpo`): SimPO is its
/// `loss_type="simpo"`. ORPOConfig has no key of its own: an ORPO file reads as SFT here.
const CPO_KEYS: &[&str] = &["cpo_alpha", "simpo_gamma"];
const DPO_KEYS: &[&str] = &[
    "precompute_ref_log_probs",
    "ref_model_init_kwargs",
    "rpo_alpha",
    "ref_adapter_name",
];

/// TRL's and its datasets' keys with no effect on one step's memory or time.
const NO_EFFECT: &[&str] = &[
    "dataset_name",
    "dataset_config",
    "dataset_train_split",
    "dataset_test_split",
    "dataset_text_field",
    "dataset_num_proc",
    "dataset_kwargs",
    "dataset_path",
    "eval_dataset_path",
    "completion_only_loss",
    "assistant_only_loss",
    "chat_template_path",
    "eos_token",
    "pad_token",
    "lora_alpha",
    "lora_task_type",
    "use_rslora",
    "bnb_4bit_quant_type",
    "use_bnb_nested_quant",
    "log_completions",
    "num_completions_to_print",
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "repetition_penalty",
    "loss_type",
    "scale_rewards",
    "epsilon",
    "epsilon_high",
    "reward_weights",
    "num_generations",
    "num_iterations",
    "shuffle_dataset",
    "project_name",
    "task",
    "model_name",
    "truncation_mode",
    "label_smoothing",
    "f_divergence_type",
    "sync_ref_model",
    "vllm_importance_sampling_correction",
];

pub(super) fn read(mut map: Map<String, Value>, out: &mut Out) -> Result<(), ImportError> {
    // The model: ModelConfig's `model_name_or_path` (TRL's NeMo-Gym recipes name it
    // `model_name`).
    let model_key = ["model_name_or_path", "model_name"]
        .into_iter()
        .find(|k| map.contains_key(*k));
    if let Some(k) = model_key {
        let v = map.remove(k).expect("present");
        out.model(k, &v)?;
    }
    let trainer = read_trainer(&map, out);
    let online = matches!(trainer, "grpo" | "rloo");
    let adapters = read_peft(&mut map, out)?;
    let training = hf_args::read(
        &mut map,
        out,
        &Defaults {
            who: "TRL",
            bf16: true,
            checkpointing: true,
        },
    )?;
    // The sequence: SFT's and DPO's max_length (1024 by default), GRPO's completion.
    if online {
        read_online(&mut map, out, trainer)?;
    } else {
        read_offline(&mut map, out, trainer)?;
    }
    for key in ["packing", "padding_free"] {
        if let Some(v) = map.remove(key) {
            if as_bool(key, &v)? {
                out.mapped(key, &v, &[("packing", "1")]);
            } else {
                out.no_effect(key, &v);
            }
        }
    }
    if let Some(v) = map.remove("attn_implementation") {
        attention(out, "attn_implementation", &v)?;
    }
    let (load, load_why) = read_load_dtype(&mut map, out, training.half)?;
    set_precision(out, adapters, training.half, load, false, &load_why);
    out.rest(map, "", &[hf_args::NO_EFFECT, NO_EFFECT].concat());
    Ok(())
}

/// Which TRL trainer the file configures, known by its config's own keys.
fn read_trainer(map: &Map<String, Value>, out: &mut Out) -> &'static str {
    let has = |keys: &[&str]| keys.iter().any(|k| map.contains_key(*k));
    // CPO's keys first: CPOConfig has GRPO's max_completion_length too.
    let trainer = if has(CPO_KEYS) {
        if map.get("loss_type").and_then(Value::as_str) == Some("simpo") {
            "simpo"
        } else {
            "cpo"
        }
    } else if has(RLOO_KEYS) {
        "rloo"
    } else if has(GRPO_KEYS) {
        "grpo"
    } else if has(KTO_KEYS) {
        "kto"
    } else if has(DPO_KEYS) {
        "dpo"
    } else {
        "sft"
    };
    out.default(
        "trainer",
        &[("trainer", trainer)],
        match trainer {
            "rloo" => "read from RLOOConfig's own keys",
            "grpo" => "read from GRPOConfig's generation keys",
            "kto" => "read from KTOConfig's own keys",
            "cpo" => "read from CPOConfig's own keys",
            "simpo" => "read from CPOConfig's own keys, with loss_type simpo",
            "dpo" => "read from DPOConfig's reference-model keys",
            _ => "SFT: the file has none of the DPO, KTO, CPO, GRPO or RLOO configs' own keys",
        },
    );
    trainer
}

/// GRPO's and RLOO's generation: the completion's length, the KL term and vLLM.
fn read_online(
    map: &mut Map<String, Value>,
    out: &mut Out,
    trainer: &str,
) -> Result<(), ImportError> {
    let completion = match map.remove("max_completion_length") {
        Some(v) => as_u32("max_completion_length", &v)?,
        None => 512,
    };
    out.default(
        "max_completion_length",
        &[("seq", &completion.to_string()), ("prompt", "0")],
        &format!(
            "{completion} completion tokens; the prompts' length is the dataset's, not in \
             the file: add it to --seq and give --prompt"
        ),
    );
    match map.remove("beta") {
        Some(v) if as_f64("beta", &v)? > 0.0 => out.mapped("beta", &v, &[("kl", "1")]),
        Some(v) => out.no_effect("beta", &v),
        None if trainer == "rloo" => out.default(
            "beta",
            &[("kl", "1")],
            "RLOOConfig's default 0.05: a reference model",
        ),
        None => out.default("beta", &[], "GRPOConfig's default 0.0: no reference model"),
    }
    read_vllm(map, out)?;
    if let Some(v) = map.remove("generation_batch_size") {
        out.not_expressed(
            "generation_batch_size",
            &v,
            "generation is modelled for one optimizer step's completions per GPU (batch x \
             accum)",
        );
    }
    Ok(())
}

/// SFT's, DPO's, KTO's and CPO's sequence length and the preference trainers' own settings.
fn read_offline(
    map: &mut Map<String, Value>,
    out: &mut Out,
    trainer: &str,
) -> Result<(), ImportError> {
    let key = ["max_length", "max_seq_length"]
        .into_iter()
        .find(|k| map.contains_key(*k));
    match key {
        Some(k) => {
            let v = map.remove(k).expect("present");
            let n = as_u32(k, &v)?;
            out.mapped(k, &v, &[("seq", &n.to_string())]);
        }
        None => out.default("max_length", &[("seq", "1024")], "TRL's default"),
    }
    if matches!(trainer, "dpo" | "kto") {
        if let Some(v) = map.remove("precompute_ref_log_probs") {
            let on = as_bool("precompute_ref_log_probs", &v)?;
            out.mapped(
                "precompute_ref_log_probs",
                &v,
                &[("ref_precompute", if on { "1" } else { "0" })],
            );
        }
        for key in [
            "beta",
            "max_prompt_length",
            "ref_model_init_kwargs",
            "rpo_alpha",
            "desirable_weight",
            "undesirable_weight",
        ] {
            if let Some(v) = map.remove(key) {
                out.no_effect(key, &v);
            }
        }
    }
    if matches!(trainer, "cpo" | "simpo") {
        // The loss's weights and margin change no tensor.
        for key in [
            "beta",
            "max_prompt_length",
            "simpo_gamma",
            "max_completion_length",
        ] {
            if let Some(v) = map.remove(key) {
                out.no_effect(key, &v);
            }
        }
        // `cpo_alpha` 0 skips the NLL term (its copy, log_softmax and slices' gradients), which
        // the core counts as TRL's default 1.0 runs it.
        if let Some(v) = map.remove("cpo_alpha") {
            if as_f64("cpo_alpha", &v)? == 0.0 {
                out.not_expressed(
                    "cpo_alpha",
                    &v,
                    "0 skips the NLL term, which the estimate counts (cpo_alpha 1.0, TRL's default): an upper bound",
                );
            } else {
                out.no_effect("cpo_alpha", &v);
            }
        }
    }
    Ok(())
}

/// The load dtype: ModelConfig's `dtype` (formerly `torch_dtype`), or `model_init_kwargs`'s;
/// with the reason it is what it is.
fn read_load_dtype(
    map: &mut Map<String, Value>,
    out: &mut Out,
    half: Half,
) -> Result<(Option<Half>, String), ImportError> {
    let mut load = Some(Half::None);
    let mut load_why = "ModelConfig's default dtype float32".to_string();
    let init = map.remove("model_init_kwargs");
    let dtype_value = ["dtype", "torch_dtype"]
        .into_iter()
        .find_map(|k| map.remove(k).map(|v| (k.to_string(), v)))
        .or_else(|| {
            let m = init.as_ref()?.as_object()?;
            ["dtype", "torch_dtype"].into_iter().find_map(|k| {
                m.get(k)
                    .map(|v| (format!("model_init_kwargs.{k}"), v.clone()))
            })
        });
    if let Some((k, v)) = dtype_value {
        load = load_dtype(&k, &v, half)?;
        load_why = format!("{k}: {}", super::show(&v));
        out.note(
            &k,
            &v,
            super::Outcome::Mapped,
            "the weights' load dtype: precision",
        );
    }
    if let Some(init) = &init
        && !out
            .notes
            .iter()
            .any(|n| n.key.starts_with("model_init_kwargs"))
    {
        out.note(
            "model_init_kwargs",
            init,
            super::Outcome::Unknown,
            "only its dtype is read",
        );
    }
    Ok((load, load_why))
}

/// transformers' dtype names as the load dtype (`auto`: the checkpoint's, 16-bit for every
/// preset; with autocast off it is taken as bf16).
pub(super) fn load_dtype(key: &str, v: &Value, half: Half) -> Result<Option<Half>, ImportError> {
    Ok(Some(match as_str(key, v)? {
        "float32" | "fp32" | "torch.float32" => Half::None,
        "bfloat16" | "bf16" | "torch.bfloat16" => Half::Bf16,
        "float16" | "fp16" | "half" | "torch.float16" => Half::Fp16,
        "auto" => match half {
            Half::Fp16 => Half::Fp16,
            _ => Half::Bf16,
        },
        other => {
            return Err(super::bad(
                key,
                format!("unknown dtype `{other}`; allowed: float32, bfloat16, float16, auto"),
            ));
        }
    }))
}

/// ModelConfig's peft and bitsandbytes keys; true when adapters are trained.
fn read_peft(map: &mut Map<String, Value>, out: &mut Out) -> Result<bool, ImportError> {
    let use_peft = match map.remove("use_peft") {
        Some(v) => {
            let on = as_bool("use_peft", &v)?;
            if !on {
                out.mapped("use_peft", &v, &[("method", "full")]);
            }
            on.then_some(v)
        }
        None => {
            out.default(
                "use_peft",
                &[("method", "full")],
                "ModelConfig's default: no adapters",
            );
            None
        }
    };
    let four = map
        .remove("load_in_4bit")
        .map(|v| as_bool("load_in_4bit", &v).map(|b| (b, v)))
        .transpose()?;
    let eight = map
        .remove("load_in_8bit")
        .map(|v| as_bool("load_in_8bit", &v).map(|b| (b, v)))
        .transpose()?;
    let Some(peft) = use_peft else {
        if let Some((true, v)) = eight {
            out.not_expressed(
                "load_in_8bit",
                &v,
                "an 8-bit base without adapters cannot train",
            );
        }
        if let Some((true, v)) = four {
            out.not_expressed(
                "load_in_4bit",
                &v,
                "a 4-bit base without adapters cannot train",
            );
        }
        return Ok(false);
    };
    // TRL's trainers call peft's prepare_model_for_kbit_training on a 4-bit or 8-bit model.
    let quantized = match (four, eight) {
        (Some((true, v)), _) => Some(("qlora", "load_in_4bit", v)),
        (_, Some((true, v))) => Some(("lora8", "load_in_8bit", v)),
        _ => None,
    };
    match quantized {
        Some((method, key, v)) => {
            out.mapped("use_peft", &peft, &[("method", method)]);
            out.mapped(key, &v, &[("kbit", "1")]);
            out.note(
                key,
                &v,
                super::Outcome::Mapped,
                "TRL's trainers call peft's prepare_model_for_kbit_training on a quantized model",
            );
        }
        None => out.mapped("use_peft", &peft, &[("method", "lora")]),
    }
    number(
        map,
        out,
        "lora_r",
        "rank",
        Some(("16", "ModelConfig's default")),
    )?;
    match map.remove("lora_target_modules") {
        Some(v) => targets(out, "lora_target_modules", &v)?,
        None => out.default(
            "lora_target_modules",
            &[("targets", "qv")],
            "peft's default for Llama-like models (q_proj, v_proj)",
        ),
    }
    dropout(map, out, ("1", "ModelConfig's default 0.05"))?;
    modules_to_save(map, out, "lora_modules_to_save")?;
    switch(map, out, "use_dora", "dora")?;
    if let Some(v) = map.remove("lora_target_parameters") {
        out.not_expressed(
            "lora_target_parameters",
            &v,
            "adapters on parameters (MoE experts) are not modelled",
        );
    }
    if let Some(v) = map.remove("bnb_4bit_quant_storage") {
        out.not_expressed(
            "bnb_4bit_quant_storage",
            &v,
            "the packed 4-bit weights' storage dtype is taken as uint8 on one GPU and as the \
             compute dtype under FSDP",
        );
    }
    Ok(true)
}

/// GRPOConfig's vLLM keys: `use_vllm` and `vllm_mode` pick the generation engine (TRL main's
/// default mode is colocate), and its budget, context and sleep mode.
fn read_vllm(map: &mut Map<String, Value>, out: &mut Out) -> Result<(), ImportError> {
    let use_vllm = take_bool(map, "use_vllm")?;
    if let Some((false, v)) = &use_vllm {
        out.mapped("use_vllm", v, &[("gen", "hf")]);
    }
    let Some((true, use_vllm)) = use_vllm else {
        for key in [
            "vllm_mode",
            "vllm_gpu_memory_utilization",
            "vllm_max_model_length",
            "vllm_enable_sleep_mode",
        ] {
            if let Some(v) = map.remove(key) {
                out.no_effect(key, &v);
            }
        }
        return Ok(());
    };
    match map.remove("vllm_mode") {
        Some(v) => {
            let mode = super::vllm_mode("vllm_mode", &v)?;
            out.mapped("use_vllm", &use_vllm, &[]);
            out.mapped("vllm_mode", &v, &[("gen", mode)]);
        }
        None => out.mapped("use_vllm", &use_vllm, &[("gen", "colocate")]),
    }
    if let Some(v) = map.remove("vllm_gpu_memory_utilization") {
        let percent = super::vllm_util_percent("vllm_gpu_memory_utilization", &v)?;
        out.mapped(
            "vllm_gpu_memory_utilization",
            &v,
            &[("vllm_util", &percent.to_string())],
        );
    }
    number(map, out, "vllm_max_model_length", "vllm_len", None)?;
    switch(map, out, "vllm_enable_sleep_mode", "vllm_sleep")
}
