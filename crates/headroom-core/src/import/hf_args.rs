//! transformers' `TrainingArguments` keys, which TRL's configs and LLaMA-Factory's YAML share:
//! batch, accumulation, 16-bit flags, checkpointing, optimizer, compile, Liger, FSDP and
//! DeepSpeed (transformers 5.23 `training_args.py`).

use serde_json::{Map, Value};

use super::{ImportError, Out, as_bool, as_names, as_str, as_u32, bad, number, optimizer};

/// The framework's defaults where they differ from transformers'.
pub(super) struct Defaults {
    /// Who sets the defaults, for the notes ("transformers", "TRL's SFTConfig").
    pub who: &'static str,
    /// `bf16` when neither `bf16` nor `fp16` is given (TRL: true).
    pub bf16: bool,
    /// `gradient_checkpointing` when not given (TRL: true).
    pub checkpointing: bool,
}

/// The 16-bit type the training arguments ask autocast for, if any.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Half {
    Bf16,
    Fp16,
    None,
}

impl Half {
    pub fn word(self) -> &'static str {
        match self {
            Half::Bf16 => "bf16",
            Half::Fp16 => "fp16",
            Half::None => "fp32",
        }
    }
}

/// What the shared keys tell the framework's own precision rule.
pub(super) struct Training {
    pub half: Half,
    /// DeepSpeed ZeRO-3 or FSDP shards the parameters.
    pub sharded: bool,
}

/// Keys of `TrainingArguments` (and TRL's and LLaMA-Factory's data and logging keys) with no
/// effect on one step's memory or time.
pub(super) const NO_EFFECT: &[&str] = &[
    "output_dir",
    "overwrite_output_dir",
    "do_train",
    "do_eval",
    "do_predict",
    "eval_strategy",
    "evaluation_strategy",
    "eval_steps",
    "per_device_eval_batch_size",
    "eval_accumulation_steps",
    "eval_on_start",
    "prediction_loss_only",
    "learning_rate",
    "weight_decay",
    "adam_beta1",
    "adam_beta2",
    "adam_epsilon",
    "max_grad_norm",
    "num_train_epochs",
    "max_steps",
    "lr_scheduler_type",
    "lr_scheduler_kwargs",
    "warmup_ratio",
    "warmup_steps",
    "log_level",
    "logging_dir",
    "logging_strategy",
    "logging_first_step",
    "logging_steps",
    "save_strategy",
    "save_steps",
    "save_total_limit",
    "save_only_model",
    "save_safetensors",
    "seed",
    "data_seed",
    "run_name",
    "report_to",
    "push_to_hub",
    "hub_model_id",
    "hub_strategy",
    "hub_private_repo",
    "resume_from_checkpoint",
    "load_best_model_at_end",
    "metric_for_best_model",
    "greater_is_better",
    "dataloader_num_workers",
    "dataloader_pin_memory",
    "dataloader_drop_last",
    "dataloader_persistent_workers",
    "remove_unused_columns",
    "label_names",
    "ddp_timeout",
    "disable_tqdm",
    "tf32",
    "include_num_input_tokens_seen",
    "include_tokens_per_second",
    "optim_args",
    "gradient_checkpointing_kwargs",
    "trust_remote_code",
    "model_revision",
    "neftune_noise_alpha",
    "env",
    "use_cpu",
    "local_rank",
];

/// Reads the shared keys out of `map`.
pub(super) fn read(
    map: &mut Map<String, Value>,
    out: &mut Out,
    defaults: &Defaults,
) -> Result<Training, ImportError> {
    let who = defaults.who;
    let transformers = "transformers' default";
    number(
        map,
        out,
        "per_device_train_batch_size",
        "batch",
        Some(("8", transformers)),
    )?;
    number(
        map,
        out,
        "gradient_accumulation_steps",
        "accum",
        Some(("1", transformers)),
    )?;
    let bf16 = map.remove("bf16");
    let fp16 = map.remove("fp16");
    let half = match (&bf16, &fp16) {
        (Some(b), _) if as_bool("bf16", b)? => Half::Bf16,
        (_, Some(f)) if as_bool("fp16", f)? => Half::Fp16,
        (None, None) if defaults.bf16 => Half::Bf16,
        _ => Half::None,
    };
    if bf16.is_none() && fp16.is_none() {
        out.default(
            "bf16",
            &[],
            &format!(
                "{who}'s default: {}",
                if defaults.bf16 {
                    "bf16 autocast"
                } else {
                    "no autocast"
                }
            ),
        );
    }
    for (key, v) in [("bf16", &bf16), ("fp16", &fp16)] {
        if let Some(v) = v {
            out.note(
                key,
                v,
                super::Outcome::Mapped,
                "with the model's load dtype: precision (below)",
            );
        }
    }
    let default = format!("{who}'s default");
    super::checkpointing(map, out, (defaults.checkpointing, &default))?;
    match map.remove("optim") {
        Some(v) => optimizer(out, "optim", &v)?,
        None => out.default(
            "optim",
            &[("optimizer", "adamw-fused")],
            "transformers' default with torch 2.8 or later (adamw_torch_fused)",
        ),
    }
    super::switch(map, out, "torch_compile", "compile")?;
    for key in ["torch_compile_backend", "torch_compile_mode"] {
        if let Some(v) = map.remove(key) {
            out.not_expressed(key, &v, "the default backend and mode are modelled");
        }
    }
    if let Some(v) = map.remove("use_liger_kernel") {
        liger(out, "use_liger_kernel", &v)?;
    }
    if let Some(v) = map.remove("ddp_bucket_cap_mb") {
        out.not_expressed(
            "ddp_bucket_cap_mb",
            &v,
            "DDP's bucket size is not read: PyTorch's default (25 MB) is modelled",
        );
    }
    if let Some(v) = map.remove("ddp_find_unused_parameters") {
        out.no_effect("ddp_find_unused_parameters", &v);
    }
    let mut sharded = false;
    if let Some(v) = map.remove("fsdp") {
        sharded |= fsdp(out, "fsdp", &v)?;
    }
    if let Some(v) = map.remove("fsdp_config") {
        match &v {
            Value::Object(m) => fsdp_config(out, "fsdp_config.", m.clone())?,
            Value::String(_) => out.not_expressed(
                "fsdp_config",
                &v,
                "a path to an FSDP config is not read: import its settings with the file itself",
            ),
            _ => return Err(bad("fsdp_config", "expected a mapping or a path")),
        }
    }
    sharded |= out.deepspeed_key(map)?;
    Ok(Training { half, sharded })
}

/// `use_liger_kernel` (TRL, transformers) or `enable_liger_kernel` (LLaMA-Factory): Liger's fused
/// linear cross-entropy is the fused loss; its other kernels are not modelled.
pub(super) fn liger(out: &mut Out, key: &str, v: &Value) -> Result<(), ImportError> {
    if as_bool(key, v)? {
        out.mapped(key, v, &[("loss", "fused")]);
        out.not_expressed(
            key,
            v,
            "Liger's RMSNorm, RoPE and SwiGLU kernels (which save less than transformers' \
             layers) are not modelled: only its fused linear cross-entropy is",
        );
    } else {
        out.no_effect(key, v);
    }
    Ok(())
}

/// transformers' `fsdp` option string or list (`full_shard auto_wrap offload`); true when it
/// shards.
pub(super) fn fsdp(out: &mut Out, key: &str, v: &Value) -> Result<bool, ImportError> {
    if v.as_bool() == Some(false) || v.as_str() == Some("") {
        out.no_effect(key, v);
        return Ok(false);
    }
    let words = if v.as_bool() == Some(true) {
        vec!["full_shard".to_string()]
    } else {
        as_names(key, v)?
    };
    let mut fields: Vec<(&str, &str)> = Vec::new();
    for w in &words {
        match w.as_str() {
            "full_shard" => fields.push(("dp", "fsdp")),
            "shard_grad_op" | "hybrid_shard" | "hybrid_shard_zero2" => {
                fields.push(("dp", "fsdp"));
                out.not_expressed(
                    key,
                    v,
                    format!(
                        "{w}: modelled as full sharding within one group (FSDP's FULL_SHARD), \
                         which holds less than {w} does between forward and backward"
                    ),
                );
            }
            "offload" => {
                fields.push(("param_offload", "cpu"));
                fields.push(("opt_offload", "cpu"));
            }
            "no_shard" => fields.push(("dp", "ddp")),
            "auto_wrap" => {}
            other => {
                return Err(bad(
                    key,
                    format!(
                        "unknown FSDP option `{other}`; transformers allows full_shard, \
                         shard_grad_op, hybrid_shard, hybrid_shard_zero2, no_shard, offload, \
                         auto_wrap"
                    ),
                ));
            }
        }
    }
    if fields.is_empty() {
        fields.push(("dp", "fsdp"));
    }
    let sharded = fields.contains(&("dp", "fsdp"));
    out.mapped(key, v, &fields);
    Ok(sharded)
}

/// FSDP's version (`fsdp_version`, `fsdp_config.version`): 1 is FSDP1, 2 FSDP2.
pub(super) fn fsdp_version(out: &mut Out, key: &str, v: &Value) -> Result<(), ImportError> {
    match as_u32(key, v)? {
        1 => out.mapped(key, v, &[("dp", "fsdp"), ("fsdp1", "1")]),
        2 => out.mapped(key, v, &[("dp", "fsdp"), ("fsdp1", "0")]),
        n => return Err(bad(key, format!("FSDP's version is 1 or 2, found {n}"))),
    }
    Ok(())
}

/// An FSDP config mapping (transformers' `fsdp_config`, accelerate's, axolotl's): its keys with
/// or without the `fsdp_` prefix.
pub(super) fn fsdp_config(
    out: &mut Out,
    prefix: &str,
    map: Map<String, Value>,
) -> Result<(), ImportError> {
    for (k, v) in map {
        let key = format!("{prefix}{k}");
        let name = k.strip_prefix("fsdp_").unwrap_or(&k);
        match name {
            "offload_params" => {
                if as_bool(&key, &v)? {
                    out.mapped(
                        &key,
                        &v,
                        &[
                            ("dp", "fsdp"),
                            ("param_offload", "cpu"),
                            ("opt_offload", "cpu"),
                        ],
                    );
                } else {
                    out.no_effect(&key, &v);
                }
            }
            "activation_checkpointing" => {
                if as_bool(&key, &v)? {
                    out.mapped(&key, &v, &[("ckpt", "full")]);
                } else {
                    out.no_effect(&key, &v);
                }
            }
            "version" => fsdp_version(out, &key, &v)?,
            "sharding_strategy" | "reshard_after_forward" => {
                let s = match &v {
                    Value::Bool(true) => "FULL_SHARD".to_string(),
                    Value::Bool(false) => "SHARD_GRAD_OP".to_string(),
                    Value::Number(n) => match n.as_u64() {
                        Some(1) => "FULL_SHARD".into(),
                        Some(2) => "SHARD_GRAD_OP".into(),
                        Some(3) => "NO_SHARD".into(),
                        _ => n.to_string(),
                    },
                    _ => as_str(&key, &v)?.to_ascii_uppercase(),
                };
                match s.as_str() {
                    "FULL_SHARD" => out.mapped(&key, &v, &[("dp", "fsdp")]),
                    "NO_SHARD" => out.mapped(&key, &v, &[("dp", "ddp")]),
                    other => {
                        out.pair("dp", "fsdp");
                        out.not_expressed(
                            &key,
                            &v,
                            format!(
                                "{other}: modelled as FULL_SHARD, which frees each layer's \
                                 gathered weights after its forward"
                            ),
                        );
                    }
                }
            }
            "backward_prefetch" | "forward_prefetch" | "limit_all_gathers" => out.not_expressed(
                &key,
                &v,
                "prefetching is modelled as FSDP does it by default: FSDP2 one layer ahead in \
                 both passes, FSDP1 one layer ahead in backward (BACKWARD_PRE)",
            ),
            "use_orig_params" => out.not_expressed(
                &key,
                &v,
                "FSDP1 is modelled with its flat parameters as peft's wrap policy builds them \
                 (use_orig_params=False)",
            ),
            "mixed_precision_policy" => out.not_expressed(
                &key,
                &v,
                "FSDP's mixed precision follows the training precision here (parameters \
                 gathered and gradients reduced in the compute dtype, as accelerate's own \
                 policy does; reduce32=1 reduces in fp32)",
            ),
            "auto_wrap_policy"
            | "transformer_layer_cls_to_wrap"
            | "cpu_ram_efficient_loading"
            | "cpu_offload_pin_memory"
            | "final_state_dict_type"
            | "sync_module_states"
            | "state_dict_type"
            | "min_num_params"
            | "xla"
            | "xla_fsdp_grad_ckpt"
            | "xla_fsdp_v2" => out.no_effect(&key, &v),
            _ => out.note(
                &key,
                &v,
                super::Outcome::Unknown,
                "not read: check whether it changes memory or time",
            ),
        }
    }
    Ok(())
}
