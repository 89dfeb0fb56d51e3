//! An accelerate config (`accelerate launch --config_file FILE`, accelerate 1.15
//! `commands/config/config_args.py`): the GPUs and nodes, the distributed type with its FSDP or
//! DeepSpeed settings, mixed precision and dynamo. It names no model, batch or sequence: those
//! stay the scenario's.

use serde_json::{Map, Value};

use super::{ImportError, Out, as_str, as_u32, hf_args};

/// accelerate keys with no effect on one step's memory or time.
const NO_EFFECT: &[&str] = &[
    "compute_environment",
    "debug",
    "downcast_bf16",
    "enable_cpu_affinity",
    "machine_rank",
    "main_training_function",
    "main_process_ip",
    "main_process_port",
    "rdzv_backend",
    "same_network",
    "tpu_env",
    "tpu_use_cluster",
    "tpu_use_sudo",
    "use_cpu",
    "gpu_ids",
];

pub(super) fn read(mut map: Map<String, Value>, out: &mut Out) -> Result<(), ImportError> {
    let processes = match map.remove("num_processes") {
        Some(v) => {
            let n = as_u32("num_processes", &v)?;
            out.mapped("num_processes", &v, &[("gpus", &n.to_string())]);
            n
        }
        None => 1,
    };
    if let Some(v) = map.remove("num_machines") {
        let nodes = as_u32("num_machines", &v)?.max(1);
        if nodes > 1 && processes % nodes == 0 {
            out.mapped(
                "num_machines",
                &v,
                &[("node", &(processes / nodes).to_string())],
            );
        } else {
            out.no_effect("num_machines", &v);
        }
    }
    if let Some(v) = map.remove("distributed_type") {
        {
            let t = as_str("distributed_type", &v)?.to_string();
            match t.as_str() {
                "MULTI_GPU" => out.mapped("distributed_type", &v, &[("dp", "ddp")]),
                "NO" => out.mapped("distributed_type", &v, &[("dp", "ddp"), ("gpus", "1")]),
                "FSDP" => out.mapped("distributed_type", &v, &[("dp", "fsdp")]),
                "DEEPSPEED" => out.note(
                    "distributed_type",
                    &v,
                    super::Outcome::Mapped,
                    "DeepSpeed: its stage from deepspeed_config",
                ),
                other => out.not_expressed(
                    "distributed_type",
                    &v,
                    format!("`{other}` is not modelled (MULTI_GPU, FSDP, DEEPSPEED are)"),
                ),
            }
        }
    }
    if let Some(v) = map.remove("fsdp_config") {
        if let Value::Object(m) = v {
            hf_args::fsdp_config(out, "fsdp_config.", m)?;
        } else if !v.is_null() {
            return Err(super::bad("fsdp_config", "expected a mapping"));
        }
    }
    if let Some(v) = map.remove("deepspeed_config") {
        let Value::Object(m) = v else {
            return Err(super::bad("deepspeed_config", "expected a mapping"));
        };
        deepspeed_plugin(m, out)?;
    }
    if let Some(v) = map.remove("mixed_precision") {
        {
            let p = match as_str("mixed_precision", &v)? {
                "bf16" => "amp-bf16",
                "fp16" => "amp-fp16",
                "no" => "fp32",
                other => {
                    out.not_expressed(
                        "mixed_precision",
                        &v,
                        format!("`{other}` is not modelled (bf16, fp16, no are)"),
                    );
                    ""
                }
            };
            if !p.is_empty() {
                out.mapped("mixed_precision", &v, &[("precision", p)]);
                out.not_expressed(
                    "mixed_precision",
                    &v,
                    "the weights' load dtype is the training script's: fp32 weights under \
                     autocast are assumed",
                );
            }
        }
    }
    if let Some(v) = map.remove("fp8_config") {
        let backend = v.get("backend").and_then(Value::as_str).unwrap_or("");
        if backend.eq_ignore_ascii_case("te") {
            out.mapped("fp8_config", &v, &[("fp8", "te")]);
        } else {
            out.not_expressed(
                "fp8_config",
                &v,
                "only Transformer Engine's recipe is modelled through accelerate",
            );
        }
    }
    if let Some(v) = map.remove("dynamo_config") {
        let backend = v
            .get("dynamo_backend")
            .and_then(Value::as_str)
            .unwrap_or("NO");
        if backend.eq_ignore_ascii_case("no") {
            out.no_effect("dynamo_config", &v);
        } else {
            out.mapped("dynamo_config", &v, &[("compile", "1")]);
        }
    }
    out.rest(map, "", NO_EFFECT);
    Ok(())
}

/// accelerate's DeepSpeed plugin keys (`zero_stage`, the offload devices), or the DeepSpeed JSON
/// it names.
fn deepspeed_plugin(mut m: Map<String, Value>, out: &mut Out) -> Result<(), ImportError> {
    if let Some(v) = m.remove("deepspeed_config_file") {
        out.deepspeed_file("deepspeed_config.deepspeed_config_file", &v)?;
    }
    if let Some(v) = m.remove("zero_stage") {
        let dp = super::deepspeed::stage_dp("deepspeed_config.zero_stage", &v)?;
        out.mapped("deepspeed_config.zero_stage", &v, &[("dp", dp)]);
    }
    for (k, field) in [
        ("offload_optimizer_device", "opt_offload"),
        ("offload_param_device", "param_offload"),
    ] {
        if let Some(v) = m.remove(k) {
            let key = format!("deepspeed_config.{k}");
            match as_str(&key, &v)? {
                "none" => out.no_effect(&key, &v),
                d @ ("cpu" | "nvme") => out.mapped(&key, &v, &[(field, d)]),
                other => {
                    return Err(super::bad(
                        &key,
                        format!("unknown device `{other}`; allowed: none, cpu, nvme"),
                    ));
                }
            }
        }
    }
    if let Some(v) = m.remove("gradient_accumulation_steps")
        && v.as_str() != Some("auto")
    {
        let n = as_u32("deepspeed_config.gradient_accumulation_steps", &v)?;
        out.mapped(
            "deepspeed_config.gradient_accumulation_steps",
            &v,
            &[("accum", &n.to_string())],
        );
    }
    out.rest(
        m,
        "deepspeed_config.",
        &[
            "deepspeed_multinode_launcher",
            "zero3_init_flag",
            "zero3_save_16bit_model",
            "gradient_clipping",
        ],
    );
    Ok(())
}
