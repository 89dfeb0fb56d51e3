//! accelerate's config file (`accelerate_config.yaml`): DDP, FSDP2 or DeepSpeed, machines and
//! processes.

use crate::model::ModelSpec;
use crate::scenario::{Checkpointing, DataParallel, Offload, Precision, Scenario};

use super::Target;
use super::common::{comment_lines, common_notes, summary};
use super::deepspeed::zero_stage;
use super::launch::nodes;
use super::names::layer_class;

pub(super) fn accelerate_text(spec: &ModelSpec, scen: &Scenario) -> (String, Vec<String>) {
    let mut notes = common_notes(scen);
    let p = &scen.parallel;
    let nodes = nodes(scen);
    let mut t = format!("# Headroom plan: {}\n", summary(scen));
    t.push_str(&format!("# {}\n", super::checked_with_line()));
    t.push_str("compute_environment: LOCAL_MACHINE\n");
    let ty = match p.data {
        DataParallel::Fsdp => "FSDP",
        DataParallel::Ddp if scen.gpus == 1 => "'NO'",
        DataParallel::Ddp => "MULTI_GPU",
        _ => "DEEPSPEED",
    };
    t.push_str(&format!("distributed_type: {ty}\n"));
    match p.data {
        DataParallel::Fsdp => {
            let offload = p.offload_params != Offload::None || p.offload_optimizer != Offload::None;
            if p.offload_optimizer != p.offload_params {
                notes.push("FSDP2 offloads parameters, gradients and optimizer states together (fsdp_offload_params); optimizer-only offload needs DeepSpeed ZeRO".into());
            }
            let version = if p.fsdp1 { 1 } else { 2 };
            t.push_str(&format!("fsdp_config:\n  fsdp_version: {version}\n"));
            t.push_str("  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP\n");
            t.push_str(&format!(
                "  fsdp_transformer_layer_cls_to_wrap: {}\n",
                layer_class(spec)
            ));
            if p.fsdp1 {
                // FSDP1 as the estimate assumed: FULL_SHARD, one layer prefetched in backward,
                // flat parameters (peft's wrap policy keeps the adapters in units of their own).
                t.push_str("  fsdp_sharding_strategy: FULL_SHARD\n");
                t.push_str("  fsdp_backward_prefetch: BACKWARD_PRE\n");
                t.push_str("  fsdp_forward_prefetch: false\n");
                t.push_str("  fsdp_use_orig_params: false\n");
                t.push_str("  fsdp_sync_module_states: true\n");
            } else {
                t.push_str("  fsdp_reshard_after_forward: true\n");
            }
            t.push_str(&format!("  fsdp_offload_params: {offload}\n"));
            t.push_str(&format!(
                "  fsdp_activation_checkpointing: {}\n",
                scen.checkpointing == Checkpointing::Full
            ));
            t.push_str("  fsdp_cpu_ram_efficient_loading: true\n");
            t.push_str("  fsdp_state_dict_type: SHARDED_STATE_DICT\n");
        }
        DataParallel::Ddp => {}
        _ => {
            t.push_str("deepspeed_config:\n");
            t.push_str(&format!(
                "  deepspeed_config_file: {}\n",
                Target::DeepSpeed.file_name()
            ));
            t.push_str(&format!("  zero3_init_flag: {}\n", zero_stage(p.data) == 3));
            if nodes > 1 {
                t.push_str("  deepspeed_multinode_launcher: standard\n");
            }
        }
    }
    let mixed = match scen.precision {
        // Transformer Engine's fp8 through accelerate (`offer` writes it for DDP and FSDP).
        _ if scen.fp8 == crate::scenario::Fp8Recipe::Te => "fp8",
        Precision::AmpBf16 | Precision::Bf16 => "bf16",
        Precision::AmpFp16 | Precision::Fp16 => "fp16",
        Precision::Fp32 => "'no'",
    };
    if ty == "DEEPSPEED" {
        // accelerate refuses mixed_precision beside a deepspeed_config_file: the file sets it.
        t.push_str("# mixed precision, batch sizes and accumulation come from ds_config.json\n");
    } else {
        t.push_str(&format!("mixed_precision: {mixed}\n"));
    }
    if scen.fp8 == crate::scenario::Fp8Recipe::Te {
        // The recipe Headroom estimates (crate::fp8): delayed scaling, HYBRID (e4m3 forward,
        // e5m2 backward), 1024 amax values kept per tensor; keys as `accelerate launch` reads
        // them (`fp8_` + key: `--fp8_amax_history_len`, ...), values its TERecipeKwargs
        // defaults.
        t.push_str("fp8_config:\n  backend: TE\n  fp8_format: HYBRID\n");
        t.push_str("  amax_history_len: 1024\n  amax_compute_algo: most_recent\n");
    }
    t.push_str(&format!("num_machines: {nodes}\n"));
    t.push_str(&format!("num_processes: {}\n", scen.gpus));
    t.push_str("machine_rank: 0\n");
    if nodes > 1 {
        t.push_str("main_process_ip: 10.0.0.1  # the first node's address\n");
        t.push_str("main_process_port: 29500\n");
    }
    t.push_str("main_training_function: main\n");
    t.push_str("rdzv_backend: static\n");
    t.push_str("same_network: true\n");
    t.push_str("use_cpu: false\n");
    if scen.checkpointing == Checkpointing::Full && p.data != DataParallel::Fsdp {
        notes.push("activation checkpointing: activation_checkpointing=True in TrainingArguments (or model.activation_checkpointing_enable())".into());
    }
    if scen.offload_activations {
        notes.push("activation offload: run the forward inside torch.autograd.graph.save_on_cpu(pin_memory=True)".into());
    }
    let mut out = t;
    if scen.runtime.expandable_segments {
        notes.push("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True in the environment (env.sh): accelerate's config has no field for it".into());
    }
    out.push_str(&comment_lines(&notes, "# "));
    (out, notes)
}
