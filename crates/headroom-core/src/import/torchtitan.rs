//! A torchtitan job TOML (`torchtitan/config/job_config.py` of torchtitan 0.3, the
//! `train_configs/*.toml` layout): the model and flavor, local batch and sequence, the parallel
//! degrees, activation checkpointing, compile, float8 and the optimizer.
//!
//! torchtitan trains fp32 parameters under FSDP2's bf16 mixed-precision policy
//! (`mixed_precision_param = "bfloat16"`, reductions in fp32) and its AdamW is fused by default.
//! The GPUs are the launcher's (`NGPU`, 8 in `run_train.sh`), not the file's.

use serde_json::{Map, Value};

use super::{ImportError, Out, as_names, as_str, as_u32};

/// Sections with no effect on one step's memory or time.
const NO_EFFECT_SECTIONS: &[&str] = &[
    "job",
    "profiling",
    "metrics",
    "lr_scheduler",
    "checkpoint",
    "validation",
    "comm",
    "fault_tolerance",
    "experimental",
    "memory_estimation",
];

/// torchtitan's (model, flavor) as a preset: the export's table of flavors.
fn preset(name: &str, flavor: &str) -> Option<&'static str> {
    crate::export::torchtitan::FLAVORS
        .iter()
        .find(|f| f.module == name && f.flavor == flavor)
        .map(|f| f.preset)
}

pub(super) fn read(mut map: Map<String, Value>, out: &mut Out) -> Result<(), ImportError> {
    let mut section = |name: &str| -> Result<Map<String, Value>, ImportError> {
        match map.remove(name) {
            Some(Value::Object(m)) => Ok(m),
            Some(_) => Err(super::bad(name, "expected a [table]")),
            None => Ok(Map::new()),
        }
    };
    let model = section("model")?;
    let training = section("training")?;
    let parallelism = section("parallelism")?;
    let ac = section("activation_checkpoint")?;
    let compile = section("compile")?;
    let optimizer = section("optimizer")?;
    let quantize = section("quantize")?;
    let float8_old = section("float8")?;
    let mut rest_sections = Vec::new();
    for name in NO_EFFECT_SECTIONS {
        if let Ok(m) = section(name)
            && !m.is_empty()
        {
            rest_sections.push(*name);
        }
    }
    for s in &rest_sections {
        out.no_effect(&format!("[{s}]"), &Value::Null);
    }

    let converters = read_model(model, out)?;
    let reduce = read_training(training, out)?;
    read_parallelism(parallelism, out)?;
    read_checkpointing(ac, out)?;
    read_compile(compile, out)?;
    read_float8(&converters, quantize, float8_old, out);
    read_optimizer(optimizer, out);
    read_precision(reduce, out)?;
    out.rest(map, "", &[]);
    Ok(())
}

/// `[model]`: the preset by name and flavor (or the config beside `hf_assets_path`); returns
/// its converters (float8's switch).
fn read_model(mut model: Map<String, Value>, out: &mut Out) -> Result<Vec<String>, ImportError> {
    let name = model
        .remove("name")
        .map(|v| as_str("model.name", &v).map(str::to_string))
        .transpose()?
        .unwrap_or_default();
    let flavor = model
        .remove("flavor")
        .map(|v| as_str("model.flavor", &v).map(str::to_string))
        .transpose()?
        .unwrap_or_default();
    let assets = model.remove("hf_assets_path");
    let shown = Value::String(format!("{name} {flavor}"));
    match preset(&name, &flavor) {
        Some(id) => {
            out.mapped("model.flavor", &shown, &[("model", id)]);
            out.preset = Some(id.into());
            out.model = Some(format!("{name} {flavor}"));
        }
        None => match &assets {
            Some(a) => out.model("model.hf_assets_path", a)?,
            None => out.not_expressed(
                "model.flavor",
                &shown,
                "not a preset and no hf_assets_path: give --model path/to/config.json",
            ),
        },
    }
    if let Some(a) = assets
        && out.preset.is_some()
    {
        out.no_effect("model.hf_assets_path", &a);
    }
    let converters = model
        .remove("converters")
        .map(|v| as_names("model.converters", &v))
        .transpose()?
        .unwrap_or_default();
    out.rest(model, "model.", &["tokenizer_path"]);

    Ok(converters)
}

/// `[training]`: batch, sequence and the parameters' precision; returns
/// `mixed_precision_reduce`, read once the data-parallel kind is known.
fn read_training(
    mut training: Map<String, Value>,
    out: &mut Out,
) -> Result<Option<Value>, ImportError> {
    for (k, field) in [
        ("local_batch_size", "batch"),
        ("batch_size", "batch"),
        ("seq_len", "seq"),
    ] {
        if let Some(v) = training.remove(k) {
            let n = as_u32(&format!("training.{k}"), &v)?;
            out.mapped(&format!("training.{k}"), &v, &[(field, &n.to_string())]);
        }
    }
    if let Some(v) = training.remove("global_batch_size") {
        out.not_expressed(
            "training.global_batch_size",
            &v,
            "accumulation follows from it and the data-parallel degree at launch: set --accum",
        );
    }
    if let Some(v) = training.remove("mixed_precision_param") {
        let p = match as_str("training.mixed_precision_param", &v)? {
            "bfloat16" => "amp-bf16",
            "float16" => "amp-fp16",
            _ => "fp32",
        };
        out.mapped("training.mixed_precision_param", &v, &[("precision", p)]);
    }
    let reduce = training.remove("mixed_precision_reduce");
    out.rest(
        training,
        "training.",
        &[
            "max_norm",
            "steps",
            "dataset",
            "dataset_path",
            "seed",
            "deterministic",
            "gc_freq",
            "enable_cpu_offload",
        ],
    );

    Ok(reduce)
}

/// `[parallelism]`: the degrees; the GPUs are the launcher's.
fn read_parallelism(mut parallelism: Map<String, Value>, out: &mut Out) -> Result<(), ImportError> {
    let mut degree = |k: &str| -> Result<Option<(i64, Value)>, ImportError> {
        match parallelism.remove(k) {
            Some(v) => {
                let n = v.as_i64().ok_or_else(|| {
                    super::bad(&format!("parallelism.{k}"), "expected an integer")
                })?;
                Ok(Some((n, v)))
            }
            None => Ok(None),
        }
    };
    let tp = degree("tensor_parallel_degree")?;
    let pp = degree("pipeline_parallel_degree")?;
    let cp = degree("context_parallel_degree")?;
    let ep = degree("expert_parallel_degree")?;
    let shard = degree("data_parallel_shard_degree")?;
    let replicate = degree("data_parallel_replicate_degree")?;
    let mut model_parallel = 1u32;
    for (k, field, d) in [
        ("tensor_parallel_degree", "tp", &tp),
        ("pipeline_parallel_degree", "pp", &pp),
        ("context_parallel_degree", "cp", &cp),
    ] {
        if let Some((n, v)) = d {
            let n = u32::try_from(*n)
                .ok()
                .filter(|n| *n >= 1)
                .ok_or_else(|| super::bad(&format!("parallelism.{k}"), "expected 1 or more"))?;
            model_parallel = model_parallel.saturating_mul(n);
            out.mapped(&format!("parallelism.{k}"), v, &[(field, &n.to_string())]);
        }
    }
    if let Some((n, v)) = &ep {
        if *n > 1 {
            out.mapped(
                "parallelism.expert_parallel_degree",
                v,
                &[("ep", &n.to_string())],
            );
        } else {
            out.no_effect("parallelism.expert_parallel_degree", v);
        }
    }
    let replicas = match &replicate {
        Some((n, v)) if *n > 1 => {
            out.not_expressed(
                "parallelism.data_parallel_replicate_degree",
                v,
                "HSDP (replicas of sharded groups) is modelled as sharding over every \
                 data-parallel GPU",
            );
            *n as u32
        }
        Some((_, v)) => {
            out.no_effect("parallelism.data_parallel_replicate_degree", v);
            1
        }
        None => 1,
    };
    match &shard {
        Some((n, v)) if *n > 0 => {
            let g = (*n as u32)
                .saturating_mul(replicas)
                .saturating_mul(model_parallel);
            out.mapped(
                "parallelism.data_parallel_shard_degree",
                v,
                &[("dp", "fsdp"), ("gpus", &g.to_string())],
            );
        }
        other => {
            let g = if 8 % model_parallel == 0 {
                8
            } else {
                model_parallel
            };
            if let Some((_, v)) = other {
                out.mapped(
                    "parallelism.data_parallel_shard_degree",
                    v,
                    &[("dp", "fsdp")],
                );
            }
            out.default(
                "gpus",
                &[("dp", "fsdp"), ("gpus", &g.to_string())],
                "data_parallel_shard_degree -1 shards over every GPU the launcher starts: \
                 run_train.sh's NGPU (8); set --gpus for yours",
            );
        }
    }
    if let Some(v) = parallelism.remove("pipeline_parallel_schedule") {
        out.not_expressed(
            "parallelism.pipeline_parallel_schedule",
            &v,
            "the pipeline is modelled as 1F1B",
        );
    }
    if let Some(v) = parallelism.remove("fsdp_reshard_after_forward") {
        match v.as_str() {
            Some("default") | Some("always") => {
                out.no_effect("parallelism.fsdp_reshard_after_forward", &v)
            }
            _ => out.not_expressed(
                "parallelism.fsdp_reshard_after_forward",
                &v,
                "parameters kept gathered between forward and backward are not modelled",
            ),
        }
    }
    out.rest(
        parallelism,
        "parallelism.",
        &[
            "enable_async_tensor_parallel",
            "expert_tensor_parallel_degree",
            "disable_loss_parallel",
            "enable_compiled_autograd",
        ],
    );

    Ok(())
}

/// `[activation_checkpoint]`.
fn read_checkpointing(mut ac: Map<String, Value>, out: &mut Out) -> Result<(), ImportError> {
    let mode = ac
        .remove("mode")
        .map(|v| as_str("activation_checkpoint.mode", &v).map(str::to_string))
        .transpose()?;
    let option = ac.remove("selective_ac_option");
    match mode.as_deref() {
        Some("none") | None => out.default(
            "activation_checkpoint.mode",
            &[("ckpt", "none")],
            if mode.is_some() {
                "as written"
            } else {
                "torchtitan's default"
            },
        ),
        Some("full") => out.mapped(
            "activation_checkpoint.mode",
            &Value::String("full".into()),
            &[("ckpt", "full")],
        ),
        Some("selective") => {
            let opt = option.clone().unwrap_or(Value::String("2".into()));
            let every = match &opt {
                Value::String(s) => s.parse::<u32>().ok(),
                Value::Number(n) => n.as_u64().and_then(|n| u32::try_from(n).ok()),
                _ => None,
            };
            match every {
                Some(k) if k >= 1 => out.mapped(
                    "activation_checkpoint.selective_ac_option",
                    &opt,
                    &[("ckpt", &format!("every:{k}"))],
                ),
                _ => {
                    out.pair("ckpt", "selective");
                    out.not_expressed(
                        "activation_checkpoint.selective_ac_option",
                        &opt,
                        "per-op selective checkpointing (saves matmul outputs, recomputes the \
                         rest) is estimated as Headroom's selective (attention's internals \
                         recomputed): between none and full",
                    );
                }
            }
        }
        Some(other) => {
            return Err(super::bad(
                "activation_checkpoint.mode",
                format!("unknown mode `{other}`; torchtitan allows none, selective, full"),
            ));
        }
    }
    out.rest(
        ac,
        "activation_checkpoint.",
        &[
            "preserve_rng_state",
            "early_stop",
            "per_op_sac_force_recompute_mm_shapes_by_fqns",
        ],
    );

    Ok(())
}

/// `[compile]`.
fn read_compile(mut compile: Map<String, Value>, out: &mut Out) -> Result<(), ImportError> {
    let enabled = compile
        .remove("enable")
        .map(|v| super::as_bool("compile.enable", &v))
        .transpose()?
        .unwrap_or(false);
    let components = compile
        .remove("components")
        .map(|v| as_names("compile.components", &v))
        .transpose()?
        .unwrap_or_else(|| vec!["model".into(), "loss".into()]);
    let shown = Value::String(format!(
        "enable={enabled}, components={}",
        components.join(",")
    ));
    if enabled && components.iter().any(|c| c == "model") {
        out.mapped("compile", &shown, &[("compile", "1")]);
    } else if enabled {
        out.not_expressed(
            "compile",
            &shown,
            "only the loss compiled is not modelled: eager layers",
        );
    } else {
        out.no_effect("compile", &shown);
    }
    out.rest(compile, "compile.", &["backend"]);

    Ok(())
}

/// Float8: enabled by the model's converters; the recipe from `[quantize.linear.float8]` (or
/// the older `[float8]`).
fn read_float8(
    converters: &[String],
    mut quantize: Map<String, Value>,
    float8_old: Map<String, Value>,
    out: &mut Out,
) {
    let float8_on = converters
        .iter()
        .any(|c| c == "float8" || c == "quantize.linear.float8");
    let mut f8 = quantize
        .remove("linear")
        .and_then(|l| l.get("float8").cloned())
        .and_then(|v| v.as_object().cloned())
        .unwrap_or(float8_old);
    let recipe = f8
        .remove("recipe_name")
        .and_then(|v| v.as_str().map(str::to_string));
    if float8_on {
        let r = match recipe.as_deref() {
            Some("rowwise") | Some("rowwise_with_gw_hp") => "rowwise",
            _ => "tensorwise",
        };
        out.mapped(
            "model.converters",
            &Value::String(converters.join(",")),
            &[("fp8", r)],
        );
    } else if !f8.is_empty() || recipe.is_some() {
        out.note(
            "quantize.linear.float8",
            &Value::Null,
            super::Outcome::NoEffect,
            "not enabled: model.converters does not name float8",
        );
    }
    if !quantize.is_empty() {
        out.not_expressed(
            "quantize",
            &Value::Object(quantize),
            "float8 grouped matmuls and other quantizations are not modelled",
        );
    }
}

/// `[optimizer]`.
fn read_optimizer(mut optimizer: Map<String, Value>, out: &mut Out) {
    let name = optimizer.remove("name");
    let implementation = optimizer.remove("implementation");
    match name.as_ref().and_then(Value::as_str) {
        Some("AdamW") | Some("Adam") | None => {
            let imp = implementation
                .as_ref()
                .and_then(Value::as_str)
                .unwrap_or("fused");
            let o = match imp {
                "foreach" => "adamw",
                "for-loop" => "adamw-forloop",
                _ => "adamw-fused",
            };
            out.mapped(
                "optimizer",
                &Value::String(format!("AdamW ({imp})")),
                &[("optimizer", o)],
            );
        }
        Some(other) => out.not_expressed(
            "optimizer.name",
            &Value::String(other.into()),
            "not modelled: the scenario keeps its optimizer",
        ),
    }
    out.rest(
        optimizer,
        "optimizer.",
        &[
            "lr",
            "eps",
            "weight_decay",
            "beta1",
            "beta2",
            "early_step_in_backward",
        ],
    );
}

/// The precision's default, and the gradients' reduction dtype under FSDP2's policy.
fn read_precision(reduce: Option<Value>, out: &mut Out) -> Result<(), ImportError> {
    if out.get("precision").is_none() {
        out.default(
            "training.mixed_precision_param",
            &[("precision", "amp-bf16")],
            "torchtitan's default: fp32 parameters, bf16 compute (FSDP2's policy)",
        );
    }
    // FSDP2's policy reduces in `mixed_precision_reduce` (fp32 by default).
    let amp = out.get("precision").is_some_and(|p| p.starts_with("amp"));
    let sharded = out.get("dp") == Some("fsdp") && amp;
    match reduce {
        Some(v) => {
            let key = "training.mixed_precision_reduce";
            match as_str(key, &v)? {
                "float32" if sharded => out.mapped(key, &v, &[("reduce32", "1")]),
                "bfloat16" | "float16" if sharded => out.mapped(key, &v, &[("reduce32", "0")]),
                "float32" | "bfloat16" | "float16" => out.no_effect(key, &v),
                other => {
                    return Err(super::bad(
                        key,
                        format!("expected float32, bfloat16 or float16, found `{other}`"),
                    ));
                }
            }
        }
        None if sharded => out.default(
            "training.mixed_precision_reduce",
            &[("reduce32", "1")],
            "torchtitan's default: gradients reduced in fp32",
        ),
        None => {}
    }
    Ok(())
}
