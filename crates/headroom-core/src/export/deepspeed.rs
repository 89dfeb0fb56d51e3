//! DeepSpeed's configuration JSON (`ds_config.json`): ZeRO stage, offload, precision and the
//! optimizer block.

use serde_json::{Value, json};

use crate::scenario::{
    Checkpointing, DataParallel, LossImpl, Offload, Optimizer, Precision, Scenario,
};

use super::common::common_notes;

/// The AdamW hyperparameters of the DeepSpeed JSON's `optimizer` block (placeholders to set):
/// learning rate, betas, epsilon, weight decay. The trainer export passes the same values as
/// `learning_rate`, `adam_beta1`/`adam_beta2`, `adam_epsilon` and `weight_decay`:
/// `TrainingArguments(deepspeed=...)` checks the block against them and Trainer raises on a
/// mismatch (transformers' `HfTrainerDeepSpeedConfig.trainer_config_process`).
pub(super) const DS_ADAMW_LR: f64 = 1e-4;
pub(super) const DS_ADAMW_BETAS: [f64; 2] = [0.9, 0.95];
pub(super) const DS_ADAMW_EPS: f64 = 1e-8;
pub(super) const DS_ADAMW_WEIGHT_DECAY: f64 = 0.1;

/// Whether the DeepSpeed JSON carries an `optimizer` block: offloaded AdamW states are stepped
/// by DeepSpeed's CPU AdamW.
pub(super) fn ds_adamw_block(scen: &Scenario) -> bool {
    scen.parallel.offload_optimizer != Offload::None
        && matches!(
            scen.optimizer,
            Optimizer::AdamW | Optimizer::AdamWForLoop | Optimizer::AdamWFused
        )
}

pub(super) fn zero_stage(dp: DataParallel) -> u8 {
    match dp {
        DataParallel::Ddp => 0,
        DataParallel::Zero1 => 1,
        DataParallel::Zero2 => 2,
        // FSDP full sharding shards what ZeRO-3 shards.
        DataParallel::Zero3 | DataParallel::Fsdp => 3,
    }
}

/// DeepSpeed's configuration JSON for the scenario, with the notes it cannot carry.
pub fn deepspeed_config(scen: &Scenario) -> (Value, Vec<String>) {
    let mut notes = vec![super::checked_with_line()];
    notes.extend(common_notes(scen));
    let p = &scen.parallel;
    let stage = zero_stage(p.data);
    if p.data == DataParallel::Fsdp {
        notes.push(
            "the plan shards with FSDP2; this is DeepSpeed's equivalent, ZeRO stage 3".into(),
        );
    }
    let mut zero = json!({
        "stage": stage,
        "overlap_comm": true,
        "contiguous_gradients": true,
        "reduce_bucket_size": 500_000_000u64,
    });
    if stage >= 1 && p.offload_optimizer != Offload::None {
        zero["offload_optimizer"] = offload_json(p.offload_optimizer);
    }
    if stage == 3 {
        zero["stage3_prefetch_bucket_size"] = json!(50_000_000u64);
        zero["stage3_param_persistence_threshold"] = json!(100_000u64);
        zero["stage3_gather_16bit_weights_on_model_save"] = json!(true);
        if p.offload_params != Offload::None {
            zero["offload_param"] = offload_json(p.offload_params);
        }
    }
    let mut cfg = json!({
        "train_batch_size": scen.global_batch(),
        "train_micro_batch_size_per_gpu": scen.micro_batch,
        "gradient_accumulation_steps": scen.grad_accum,
        "gradient_clipping": 1.0,
        "steps_per_print": 100,
        "zero_optimization": zero,
    });
    match scen.precision {
        Precision::AmpBf16 | Precision::Bf16 if crate::states::ds_bf16_states(scen) => {
            cfg["bf16"] = json!({
                "enabled": true,
                "bf16_master_weights_and_grads": true,
                "bf16_optimizer_states": true
            })
        }
        Precision::AmpBf16 | Precision::Bf16 => cfg["bf16"] = json!({"enabled": true}),
        Precision::AmpFp16 | Precision::Fp16 => {
            // Dynamic loss scaling (loss_scale 0), DeepSpeed's documented default form.
            cfg["fp16"] = json!({
                "enabled": true,
                "loss_scale": 0,
                "initial_scale_power": 16,
                "loss_scale_window": 1000,
                "hysteresis": 2,
                "min_loss_scale": 1
            });
        }
        Precision::Fp32 => {}
    }
    if p.offload_optimizer != Offload::None {
        // Offloaded states are stepped on the CPU: DeepSpeed's CPU Adam for AdamW; any other
        // optimizer runs as a client optimizer, which DeepSpeed must be told to accept.
        if ds_adamw_block(scen) {
            cfg["optimizer"] = json!({
                "type": "AdamW",
                "params": {
                    "lr": DS_ADAMW_LR,
                    "betas": DS_ADAMW_BETAS,
                    "eps": DS_ADAMW_EPS,
                    "weight_decay": DS_ADAMW_WEIGHT_DECAY
                }
            });
            notes.push("optimizer: DeepSpeed's CPU AdamW steps the offloaded states; lr, betas, eps and weight_decay are placeholders to set (the trainer export repeats them as learning_rate, adam_beta1/adam_beta2, adam_epsilon and weight_decay: change both together, transformers rejects a mismatch)".into());
        } else {
            cfg["zero_force_ds_cpu_optimizer"] = json!(false);
            notes.push(format!(
                "optimizer {} runs as a client optimizer on offloaded states (zero_force_ds_cpu_optimizer false); it must have a CPU implementation",
                scen.optimizer.id()
            ));
        }
    } else if !matches!(
        scen.optimizer,
        Optimizer::AdamW | Optimizer::AdamWForLoop | Optimizer::AdamWFused
    ) {
        cfg["zero_allow_untested_optimizer"] = json!(true);
    }
    if scen.checkpointing != Checkpointing::None {
        notes.push(format!(
            "activation checkpointing ({}) is set in the model (TrainingArguments activation_checkpointing, or model.activation_checkpointing_enable()), not in ds_config.json",
            scen.checkpointing.label()
        ));
    }
    if scen.offload_activations {
        notes.push("activation offload: wrap the forward in torch.autograd.graph.save_on_cpu(pin_memory=True)".into());
    }
    if scen.loss == LossImpl::Fused {
        notes.push("fused linear cross-entropy: Liger kernels in the model (TrainingArguments use_liger_kernel=True)".into());
    }
    (cfg, notes)
}

fn offload_json(o: Offload) -> Value {
    match o {
        Offload::Nvme => json!({"device": "nvme", "nvme_path": "/local_nvme", "pin_memory": true}),
        _ => json!({"device": "cpu", "pin_memory": true}),
    }
}
