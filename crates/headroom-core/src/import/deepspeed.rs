//! A DeepSpeed config (JSON), alone or named by another config's `deepspeed:` key: the ZeRO
//! stage and offload, 16-bit modes, micro-batch and accumulation where they are not "auto"
//! (DeepSpeed 0.19 `runtime/config.py`, `runtime/zero/config.py`).
//!
//! "auto" values are filled in by the Trainer from its own arguments, so they set nothing here.

use serde_json::{Map, Value};

use super::{ImportError, Out, as_bool, as_str, as_u32};

/// DeepSpeed keys with no effect on one step's memory or time in the model.
const NO_EFFECT: &[&str] = &[
    "gradient_clipping",
    "steps_per_print",
    "wall_clock_breakdown",
    "train_batch_size",
    "scheduler",
    "zero_allow_untested_optimizer",
    "zero_force_ds_cpu_optimizer",
    "prescale_gradients",
    "tensorboard",
    "wandb",
    "flops_profiler",
    "comms_logger",
    "checkpoint",
    "data_types",
];

/// ZeRO keys the model does not read (bucket and prefetch sizes are DeepSpeed's defaults).
const ZERO_NOT_READ: &[&str] = &[
    "reduce_bucket_size",
    "allgather_bucket_size",
    "stage3_prefetch_bucket_size",
    "stage3_param_persistence_threshold",
    "stage3_max_live_parameters",
    "stage3_max_reuse_distance",
    "sub_group_size",
    "prefetch_bucket_size",
    "param_persistence_threshold",
    "max_live_parameters",
    "max_reuse_distance",
];

const ZERO_NO_EFFECT: &[&str] = &[
    "overlap_comm",
    "contiguous_gradients",
    "allgather_partitions",
    "reduce_scatter",
    "round_robin_gradients",
    "stage3_gather_16bit_weights_on_model_save",
    "stage3_gather_fp16_weights_on_model_save",
    "gather_16bit_weights_on_model_save",
    "elastic_checkpoint",
    "load_from_fp32_weights",
    "ignore_unused_parameters",
    "use_multi_rank_bucket_allreduce",
];

/// "auto": the Trainer's value.
fn is_auto(v: &Value) -> bool {
    v.as_str() == Some("auto")
}

pub(super) fn read(
    mut map: Map<String, Value>,
    prefix: &str,
    out: &mut Out,
) -> Result<(), ImportError> {
    let key = |k: &str| format!("{prefix}{k}");
    for (k, field) in [
        ("train_micro_batch_size_per_gpu", "batch"),
        ("gradient_accumulation_steps", "accum"),
    ] {
        if let Some(v) = map.remove(k) {
            if is_auto(&v) {
                out.note(
                    &key(k),
                    &v,
                    super::Outcome::NoEffect,
                    "auto: the Trainer's value",
                );
            } else {
                let n = as_u32(&key(k), &v)?;
                out.mapped(&key(k), &v, &[(field, &n.to_string())]);
            }
        }
    }
    match map.remove("zero_optimization") {
        Some(Value::Object(zero)) => read_zero(zero, &key("zero_optimization."), out)?,
        Some(v) => {
            return Err(super::bad(
                &key("zero_optimization"),
                format!("expected a mapping, found {}", super::show(&v)),
            ));
        }
        None => out.mapped(&key("zero_optimization"), &Value::Null, &[("dp", "ddp")]),
    }
    for half in ["bf16", "fp16"] {
        if let Some(v) = map.remove(half) {
            let enabled = v.get("enabled").cloned().unwrap_or(Value::Bool(false));
            let k = key(&format!("{half}.enabled"));
            if is_auto(&enabled) {
                out.note(
                    &k,
                    &enabled,
                    super::Outcome::NoEffect,
                    "auto: the Trainer's bf16 / fp16",
                );
            } else if as_bool(&k, &enabled)? {
                // Alone, a DeepSpeed config trains fp32 master weights with 16-bit compute.
                if prefix.is_empty() {
                    out.mapped(&k, &enabled, &[("precision", &format!("amp-{half}"))]);
                } else {
                    out.note(
                        &k,
                        &enabled,
                        super::Outcome::NoEffect,
                        "as the training arguments' own flag",
                    );
                }
            } else {
                out.no_effect(&k, &enabled);
            }
            if half == "bf16"
                && let Some(m) = v.as_object()
            {
                let master = m
                    .get("bf16_master_weights_and_grads")
                    .and_then(Value::as_bool);
                let states = m.get("bf16_optimizer_states").and_then(Value::as_bool);
                if master == Some(true) && states == Some(true) {
                    out.mapped(
                        &key("bf16.bf16_master_weights_and_grads"),
                        &Value::Bool(true),
                        &[("ds_bf16", "1")],
                    );
                }
            }
        }
    }
    if let Some(v) = map.remove("optimizer") {
        let ty = v.get("type").and_then(Value::as_str).unwrap_or("");
        let k = key("optimizer.type");
        match ty.to_ascii_lowercase().as_str() {
            "adam" | "adamw" => {
                out.mapped(&k, &Value::String(ty.into()), &[("optimizer", "adamw")])
            }
            "lion" => out.mapped(&k, &Value::String(ty.into()), &[("optimizer", "lion")]),
            _ => out.not_expressed(
                &k,
                &Value::String(ty.into()),
                "not one of Headroom's optimizers: the scenario keeps its own",
            ),
        }
    }
    if let Some(v) = map.remove("activation_checkpointing") {
        out.not_expressed(
            &key("activation_checkpointing"),
            &v,
            "DeepSpeed's own checkpointing applies to Megatron-style models only; the \
             Trainer's gradient_checkpointing is what transformers models use",
        );
    }
    out.rest(map, prefix, NO_EFFECT);
    Ok(())
}

/// A ZeRO stage (0-3) as the `dp` link field.
pub(super) fn stage_dp(key: &str, v: &Value) -> Result<&'static str, ImportError> {
    Ok(match as_u32(key, v)? {
        0 => "ddp",
        1 => "zero1",
        2 => "zero2",
        3 => "zero3",
        _ => return Err(super::bad(key, "expected 0, 1, 2 or 3")),
    })
}

fn read_zero(mut zero: Map<String, Value>, prefix: &str, out: &mut Out) -> Result<(), ImportError> {
    let key = |k: &str| format!("{prefix}{k}");
    match zero.remove("stage") {
        Some(v) => {
            let dp = stage_dp(&key("stage"), &v)?;
            out.mapped(&key("stage"), &v, &[("dp", dp)]);
        }
        None => out.default(
            &key("stage"),
            &[("dp", "ddp")],
            "DeepSpeed's default stage 0",
        ),
    }
    for (k, field) in [
        ("offload_optimizer", "opt_offload"),
        ("offload_param", "param_offload"),
    ] {
        if let Some(v) = zero.remove(k) {
            let device = v
                .get("device")
                .map(|d| as_str(&key(&format!("{k}.device")), d))
                .transpose()?;
            match device {
                Some("cpu") | Some("nvme") => {
                    out.mapped(&key(k), &v, &[(field, device.expect("matched"))]);
                }
                Some("none") | None => out.no_effect(&key(k), &v),
                Some(other) => {
                    return Err(super::bad(
                        &key(&format!("{k}.device")),
                        format!("unknown device `{other}`; DeepSpeed allows none, cpu, nvme"),
                    ));
                }
            }
        }
    }
    for (k, v) in zero {
        let name = k.as_str();
        if ZERO_NOT_READ.contains(&name) {
            out.not_expressed(
                &key(name),
                &v,
                "bucket and prefetch sizes are not read: DeepSpeed's defaults are modelled",
            );
        } else if ZERO_NO_EFFECT.contains(&name) {
            out.no_effect(&key(name), &v);
        } else {
            out.note(
                &key(name),
                &v,
                super::Outcome::Unknown,
                "not read: check whether it changes memory or time",
            );
        }
    }
    Ok(())
}
