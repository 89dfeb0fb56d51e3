//! axolotl's training YAML (`axolotl train FILE`), as its config schema
//! (`src/axolotl/utils/schemas/`) and model loader (`src/axolotl/loaders/model.py`) read it.
//!
//! The model loads in bf16 when `bf16` is true or `auto` (the Trainer then autocasts), so a
//! full fine-tune trains 16-bit weights; adapters are peft's (fp32 by default). QLoRA calls
//! peft's `prepare_model_for_kbit_training` except under FSDP or ZeRO-3
//! (`_prepare_model_for_quantization`). The optimizer defaults to `adamw_torch_fused`
//! (`schemas/training.py`), the sequence to 512 tokens and the micro-batch to 1.

use serde_json::{Map, Value};

use super::hf_args::{self, Half};
use super::{
    ImportError, Out, as_bool, as_f64, as_str, as_u32, attention, checkpointing, dropout,
    modules_to_save, number, optimizer, set_precision, switch, take_bool, targets,
};

/// axolotl's keys with no effect on one step's memory or time.
const NO_EFFECT: &[&str] = &[
    "base_model_config",
    "model_type",
    "tokenizer_type",
    "tokenizer_config",
    "tokenizer_use_fast",
    "tokenizer_legacy",
    "trust_remote_code",
    "revision_of_model",
    "datasets",
    "test_datasets",
    "dataset_prepared_path",
    "dataset_processes",
    "dataset_exact_deduplication",
    "shuffle_merged_datasets",
    "val_set_size",
    "output_dir",
    "lora_model_dir",
    "lora_alpha",
    "lora_fan_in_fan_out",
    "peft_use_rslora",
    "pad_to_sequence_len",
    "eval_sample_packing",
    "eval_batch_size",
    "eval_max_new_tokens",
    "eval_table_size",
    "num_epochs",
    "max_steps",
    "lr_scheduler",
    "lr_scheduler_kwargs",
    "learning_rate",
    "lr_quadratic_warmup",
    "cosine_min_lr_ratio",
    "warmup_steps",
    "warmup_ratio",
    "weight_decay",
    "max_grad_norm",
    "adam_beta1",
    "adam_beta2",
    "adam_epsilon",
    "evals_per_epoch",
    "eval_steps",
    "eval_strategy",
    "saves_per_epoch",
    "save_steps",
    "save_strategy",
    "save_total_limit",
    "save_first_step",
    "save_safetensors",
    "save_only_model",
    "logging_steps",
    "logging_first_step",
    "early_stopping_patience",
    "resume_from_checkpoint",
    "auto_resume_from_checkpoints",
    "local_rank",
    "debug",
    "seed",
    "strict",
    "chat_template",
    "chat_template_jinja",
    "default_system_message",
    "special_tokens",
    "tokens",
    "added_tokens_overrides",
    "train_on_inputs",
    "group_by_length",
    "hub_model_id",
    "hub_strategy",
    "wandb_project",
    "wandb_entity",
    "wandb_watch",
    "wandb_name",
    "wandb_run_id",
    "wandb_log_model",
    "mlflow_tracking_uri",
    "mlflow_experiment_name",
    "use_tensorboard",
    "loss_watchdog_threshold",
    "loss_watchdog_patience",
    "gradient_checkpointing_kwargs",
    "tf32",
    "xformers_attention",
    "heads_k_stride",
    "plugins",
    "dpo_beta",
    "rl_beta",
    "dataloader_num_workers",
    "dataloader_pin_memory",
    "dataloader_prefetch_factor",
    "ddp_timeout",
    "remove_unused_columns",
    "use_ray",
    "profiler_steps",
    "include_tokens_per_second",
    "skip_prepare_dataset",
    "min_sample_len",
    "max_sample_len",
];

pub(super) fn read(mut map: Map<String, Value>, out: &mut Out) -> Result<(), ImportError> {
    if let Some(v) = map.remove("base_model") {
        out.model("base_model", &v)?;
    }
    let adapters = method(&mut map, out)?;
    shape(&mut map, out)?;
    attention_and_kernels(&mut map, out)?;
    parallel_degrees_and_packing(&mut map, out)?;
    step_settings(&mut map, out)?;
    let sharded = sharding(&mut map, out)?;
    if matches!(out.get("method"), Some("qlora" | "lora8")) {
        // `ModelLoader._configure_embedding_dtypes`: the fp32 upcast of
        // prepare_model_for_kbit_training is undone for the norms and the embedding layers
        // (cast back to the load dtype for flash attention) whenever adapters train.
        out.default(
            "prepare_model_for_kbit_training",
            &[("kbit", "0")],
            if sharded {
                "axolotl skips it under FSDP and ZeRO-3"
            } else {
                "axolotl calls it for a 4-bit or 8-bit base, then casts the norms, \
                 embeddings and lm_head back to the load dtype: no fp32 stream"
            },
        );
    }
    objective(&mut map, out)?;
    precision(&mut map, out, adapters)?;
    out.rest(map, "", NO_EFFECT);
    Ok(())
}

/// The method: `adapter` (lora, qlora) and the 4-bit switch; whether adapters train.
fn method(map: &mut Map<String, Value>, out: &mut Out) -> Result<bool, ImportError> {
    let four = take_bool(map, "load_in_4bit")?;
    let eight = take_bool(map, "load_in_8bit")?;
    let adapter = match map.remove("adapter") {
        Some(v) if v.is_null() => None,
        Some(v) => Some((as_str("adapter", &v)?.to_string(), v)),
        None => None,
    };
    let adapters = match &adapter {
        Some((a, v)) => {
            let on = |flag: &Option<(bool, Value)>| flag.as_ref().is_some_and(|(b, _)| *b);
            let qlora = a == "qlora" || a == "lora" && on(&four);
            // axolotl loads an 8-bit base for `adapter: lora` with load_in_8bit only
            // (`ModelLoader._set_quantization_config`).
            let eight_bit = a == "lora" && !qlora && on(&eight);
            let method = match (qlora, eight_bit) {
                (true, _) => "qlora",
                (false, true) => "lora8",
                _ => "lora",
            };
            match a.as_str() {
                "lora" | "qlora" => out.mapped("adapter", v, &[("method", method)]),
                other => {
                    return Err(super::bad(
                        "adapter",
                        format!("`{other}` is not modelled; Headroom estimates lora and qlora"),
                    ));
                }
            }
            true
        }
        None => {
            out.default(
                "adapter",
                &[("method", "full")],
                "no adapter: full fine-tuning",
            );
            false
        }
    };
    if let Some((_, v)) = &four {
        out.no_effect("load_in_4bit", v);
    }
    match &eight {
        Some((true, v)) if out.get("method") != Some("lora8") => out.not_expressed(
            "load_in_8bit",
            v,
            "axolotl quantizes to 8 bits for adapter: lora only; this run's base is not 8-bit",
        ),
        Some((_, v)) => out.no_effect("load_in_8bit", v),
        None => {}
    }
    if adapters {
        lora_keys(map, out)?;
    }
    Ok(adapters)
}

/// Sequence, micro-batch and accumulation.
fn shape(map: &mut Map<String, Value>, out: &mut Out) -> Result<(), ImportError> {
    number(
        map,
        out,
        "sequence_len",
        "seq",
        Some(("512", "axolotl's default")),
    )?;
    number(
        map,
        out,
        "micro_batch_size",
        "batch",
        Some(("1", "axolotl's default")),
    )?;
    number(
        map,
        out,
        "gradient_accumulation_steps",
        "accum",
        Some(("1", "axolotl's default")),
    )?;
    if let Some(v) = map.remove("batch_size") {
        out.not_expressed(
            "batch_size",
            &v,
            "the global batch is micro_batch_size x gradient_accumulation_steps x GPUs here",
        );
    }
    Ok(())
}

/// Attention: `attn_implementation`, or the older boolean flags; the kernels' switches and
/// the fused losses.
fn attention_and_kernels(map: &mut Map<String, Value>, out: &mut Out) -> Result<(), ImportError> {
    match map.remove("attn_implementation") {
        Some(v) => attention(out, "attn_implementation", &v)?,
        None => {
            let legacy = [
                ("flash_attention", "flash_attention_2"),
                ("flex_attention", "flex_attention"),
                ("sdp_attention", "sdpa"),
                ("eager_attention", "eager"),
            ];
            let mut set = false;
            for (key, name) in legacy {
                if let Some((on, v)) = take_bool(map, key)? {
                    if on && !set {
                        attention(out, key, &Value::String(name.into()))?;
                        set = true;
                    } else {
                        out.no_effect(key, &v);
                    }
                }
            }
            if !set {
                out.default(
                    "attn_implementation",
                    &[("attention", "sdpa")],
                    "none given: transformers' default, SDPA",
                );
            }
        }
    }
    for key in [
        "flash_attn_cross_entropy",
        "flash_attn_rms_norm",
        "flash_attn_fuse_qkv",
        "flash_attn_fuse_mlp",
        "tiled_mlp",
        "lora_mlp_kernel",
        "lora_qkv_kernel",
        "lora_o_kernel",
        "unfrozen_parameters",
        "peft_layers_to_transform",
        "liger_rms_norm",
        "liger_glu_activation",
        "liger_rope",
        "liger_layer_norm",
        "liger_swiglu",
    ] {
        if let Some(v) = map.remove(key) {
            if v.as_bool() == Some(false) || v.is_null() {
                out.no_effect(key, &v);
            } else {
                out.not_expressed(key, &v, "this kernel or setting is not modelled");
            }
        }
    }
    for key in [
        "liger_fused_linear_cross_entropy",
        "cut_cross_entropy",
        "chunked_cross_entropy",
    ] {
        if let Some((on, v)) = take_bool(map, key)? {
            if on {
                out.mapped(key, &v, &[("loss", "fused")]);
            } else {
                out.no_effect(key, &v);
            }
        }
    }
    Ok(())
}

/// Parallel degrees before packing, which context parallelism rules out.
fn parallel_degrees_and_packing(
    map: &mut Map<String, Value>,
    out: &mut Out,
) -> Result<(), ImportError> {
    for (key, field) in [
        ("tensor_parallel_size", "tp"),
        ("context_parallel_size", "cp"),
        ("sequence_parallel_degree", "cp"),
    ] {
        if let Some(v) = map.remove(key) {
            let n = as_u32(key, &v)?;
            out.mapped(key, &v, &[(field, &n.to_string())]);
        }
    }
    if out.get("cp").is_some_and(|c| c != "1") && out.get("attention") == Some("flash2") {
        out.pair("attention", "sdpa");
        out.not_expressed(
            "context_parallel_size",
            &Value::Null,
            "axolotl's context parallelism runs ring-flash-attn; Headroom's ring attention runs \
             SDPA's flash kernel, which saves the same: attention=sdpa",
        );
    }
    if let Some((on, v)) = take_bool(map, "sample_packing")? {
        let varlen = matches!(out.get("attention"), Some("flash2" | "flash3" | "flex"));
        let context_parallel = out.get("cp").is_some_and(|c| c != "1");
        if !on {
            out.no_effect("sample_packing", &v);
        } else if context_parallel {
            out.not_expressed(
                "sample_packing",
                &v,
                "packed documents under context parallelism: Headroom's ring attention does \
                 not take varlen documents, so the rows are estimated as full sequences",
            );
        } else if varlen {
            out.mapped("sample_packing", &v, &[("packing", "1")]);
        } else {
            out.not_expressed(
                "sample_packing",
                &v,
                "packing is modelled with a varlen attention (flash_attention_2/3, flex): with \
                 this attention the rows are estimated as full sequences",
            );
        }
    }
    Ok(())
}

/// Checkpointing, activation offload, the optimizer and compile.
fn step_settings(map: &mut Map<String, Value>, out: &mut Out) -> Result<(), ImportError> {
    checkpointing(map, out, (false, "axolotl's default"))?;
    if let Some(v) = map.remove("activation_offloading") {
        if v.as_bool() == Some(false) || v.is_null() {
            out.no_effect("activation_offloading", &v);
        } else {
            out.mapped("activation_offloading", &v, &[("act_offload", "1")]);
        }
    }
    match map.remove("optimizer") {
        Some(v) => optimizer(out, "optimizer", &v)?,
        None => out.default(
            "optimizer",
            &[("optimizer", "adamw-fused")],
            "axolotl's default (adamw_torch_fused)",
        ),
    }
    switch(map, out, "torch_compile", "compile")?;
    if let Some(v) = map.remove("torch_compile_backend") {
        out.not_expressed(
            "torch_compile_backend",
            &v,
            "the default backend is modelled",
        );
    }
    Ok(())
}

/// Parallelism and sharding (FSDP, DeepSpeed); whether the weights are sharded.
fn sharding(map: &mut Map<String, Value>, out: &mut Out) -> Result<bool, ImportError> {
    let mut sharded = false;
    if let Some(v) = map.remove("dp_shard_size") {
        out.no_effect("dp_shard_size", &v);
    }
    let model_parallel: u32 = ["tp", "cp"]
        .iter()
        .filter_map(|f| out.get(f).and_then(|v| v.parse::<u32>().ok()))
        .product();
    if model_parallel > 1 {
        out.default(
            "gpus",
            &[("gpus", &model_parallel.to_string())],
            "the GPUs are set at launch: the fewest the parallel degrees need; set --gpus for yours",
        );
    }
    if let Some(v) = map.remove("fsdp") {
        sharded |= hf_args::fsdp(out, "fsdp", &v)?;
    }
    if let Some(v) = map.remove("fsdp_version") {
        hf_args::fsdp_version(out, "fsdp_version", &v)?;
        sharded = true;
    }
    if let Some(v) = map.remove("fsdp_config") {
        let Value::Object(m) = v else {
            return Err(super::bad("fsdp_config", "expected a mapping"));
        };
        hf_args::fsdp_config(out, "fsdp_config.", m)?;
        sharded = true;
    }
    sharded |= out.deepspeed_key(map)?;
    Ok(sharded)
}

/// Precision: the load dtype follows bf16 / fp16; the Trainer autocasts to it.
fn precision(
    map: &mut Map<String, Value>,
    out: &mut Out,
    adapters: bool,
) -> Result<(), ImportError> {
    let bf16 = map.remove("bf16");
    let fp16 = map.remove("fp16");
    let bfloat16 = take_bool(map, "bfloat16")?;
    let float16 = take_bool(map, "float16")?;
    let is_on = |v: &Option<Value>| {
        v.as_ref()
            .is_some_and(|v| v.as_bool() == Some(true) || v.as_str() == Some("auto"))
    };
    let half = if is_on(&bf16) {
        Half::Bf16
    } else if is_on(&fp16) {
        Half::Fp16
    } else {
        Half::None
    };
    for (key, v) in [("bf16", &bf16), ("fp16", &fp16)] {
        if let Some(v) = v {
            out.note(key, v, super::Outcome::Mapped, "precision (below)");
        }
    }
    let load = match (half, &bfloat16, &float16) {
        (_, Some((true, _)), _) => Half::Bf16,
        (_, _, Some((true, _))) => Half::Fp16,
        (h, _, _) => h,
    };
    for (key, v) in [("bfloat16", &bfloat16), ("float16", &float16)] {
        if let Some((_, v)) = v {
            out.note(
                key,
                v,
                super::Outcome::Mapped,
                "the load dtype: precision (below)",
            );
        }
    }
    let why = format!("the model loads in {}", load.word());
    set_precision(out, adapters, half, Some(load), false, &why);
    Ok(())
}

/// `rl` (dpo, ipo, kto, orpo, simpo, grpo) and its `trl` settings.
fn objective(map: &mut Map<String, Value>, out: &mut Out) -> Result<(), ImportError> {
    let trl = map.remove("trl");
    let vllm = map.remove("vllm");
    match map.remove("rl") {
        Some(v) if !v.is_null() => {
            let rl = as_str("rl", &v)?;
            match rl {
                // IPO is DPOTrainer with another loss_type: the same step.
                "dpo" | "ipo" => out.mapped("rl", &v, &[("trainer", "dpo")]),
                "kto" => out.mapped("rl", &v, &[("trainer", "kto")]),
                // axolotl's ORPO is TRL's ORPOTrainer, its SimPO TRL's CPOTrainer with
                // loss_type simpo (`core/trainers/builders/rl.py`).
                "orpo" => out.mapped("rl", &v, &[("trainer", "orpo")]),
                "simpo" => out.mapped("rl", &v, &[("trainer", "simpo")]),
                "grpo" => {
                    out.mapped("rl", &v, &[("trainer", "grpo")]);
                    grpo(trl.as_ref(), vllm.as_ref(), out)?;
                    return Ok(());
                }
                other => {
                    out.pair("trainer", "sft");
                    out.not_expressed(
                        "rl",
                        &v,
                        format!(
                            "`{other}` is not modelled (DPO, IPO, KTO, ORPO, SimPO and GRPO are): estimated as SFT"
                        ),
                    );
                }
            }
        }
        _ => out.default("rl", &[("trainer", "sft")], "supervised fine-tuning"),
    }
    if let Some(t) = trl {
        out.no_effect("trl", &t);
    }
    if let Some(v) = vllm {
        out.no_effect("vllm", &v);
    }
    Ok(())
}

/// GRPO's `trl:` block: the completion's length, the KL term, vLLM; and the `vllm:` block
/// axolotl reads for vLLM's budget (`core/trainers/grpo/__init__.py`: a colocated engine gets
/// its `gpu_memory_utilization`, default 0.9, and `axolotl vllm-serve` its context too).
fn grpo(trl: Option<&Value>, vllm: Option<&Value>, out: &mut Out) -> Result<(), ImportError> {
    let get = |k: &str| trl.and_then(|t| t.get(k)).cloned();
    let completion = match get("max_completion_length") {
        Some(v) => as_u32("trl.max_completion_length", &v)?,
        None => 512,
    };
    out.default(
        "trl.max_completion_length",
        &[("seq", &completion.to_string()), ("prompt", "0")],
        &format!(
            "{completion} completion tokens; the prompts' length is the dataset's: add it to \
             --seq and give --prompt"
        ),
    );
    match get("beta") {
        Some(v) if as_f64("trl.beta", &v)? > 0.0 => out.mapped("trl.beta", &v, &[("kl", "1")]),
        _ => out.default("trl.beta", &[], "TRL's default 0.0: no reference model"),
    }
    let Some(on) = get("use_vllm") else {
        return Ok(());
    };
    if !as_bool("trl.use_vllm", &on)? {
        out.mapped("trl.use_vllm", &on, &[("gen", "hf")]);
        return Ok(());
    }
    let mode = match get("vllm_mode") {
        Some(v) if !v.is_null() => {
            let m = super::vllm_mode("trl.vllm_mode", &v)?;
            out.mapped("trl.use_vllm", &on, &[]);
            out.mapped("trl.vllm_mode", &v, &[("gen", m)]);
            m
        }
        _ => {
            out.mapped("trl.use_vllm", &on, &[("gen", "colocate")]);
            "colocate"
        }
    };
    let block = |k: &str| {
        vllm.and_then(|b| b.get(k))
            .cloned()
            .filter(|v| !v.is_null())
    };
    let util = match block("gpu_memory_utilization") {
        Some(v) => super::vllm_util_percent("vllm.gpu_memory_utilization", &v)?,
        None => 90,
    };
    out.default(
        "vllm.gpu_memory_utilization",
        &[("vllm_util", &util.to_string())],
        "axolotl's vllm block (default 0.9), passed to the engine colocated or served",
    );
    if mode == "server"
        && let Some(v) = block("max_model_len")
    {
        let n = as_u32("vllm.max_model_len", &v)?;
        out.mapped("vllm.max_model_len", &v, &[("vllm_len", &n.to_string())]);
    }
    if mode == "colocate"
        && let Some(v) = get("vllm_enable_sleep_mode").filter(|v| !v.is_null())
    {
        let on = as_bool("trl.vllm_enable_sleep_mode", &v)?;
        out.mapped(
            "trl.vllm_enable_sleep_mode",
            &v,
            &[("vllm_sleep", if on { "1" } else { "0" })],
        );
    }
    Ok(())
}

/// The LoRA keys: rank, targets, dropout, modules to save, DoRA.
fn lora_keys(map: &mut Map<String, Value>, out: &mut Out) -> Result<(), ImportError> {
    number(map, out, "lora_r", "rank", None)?;
    let linear = take_bool(map, "lora_target_linear")?;
    match (linear, map.remove("lora_target_modules")) {
        (Some((true, v)), modules) => {
            out.mapped("lora_target_linear", &v, &[("targets", "all")]);
            if let Some(m) = modules {
                out.note(
                    "lora_target_modules",
                    &m,
                    super::Outcome::NoEffect,
                    "lora_target_linear adapts every linear layer already",
                );
            }
        }
        (_, Some(m)) => targets(out, "lora_target_modules", &m)?,
        (linear, None) => {
            if let Some((_, v)) = linear {
                out.no_effect("lora_target_linear", &v);
            }
            out.default(
                "lora_target_modules",
                &[("targets", "qv")],
                "none given: peft's default for Llama-like models (q_proj, v_proj)",
            )
        }
    }
    dropout(map, out, ("0", "axolotl's default"))?;
    modules_to_save(map, out, "lora_modules_to_save")?;
    switch(map, out, "peft_use_dora", "dora")?;
    Ok(())
}
