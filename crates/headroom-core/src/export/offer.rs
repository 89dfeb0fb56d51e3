//! Which targets can express a plan: a target whose file would run a different plan (another
//! sharding, no tensor parallelism, offload it cannot split) is not offered for it.
//!
//! No target expresses tensor, pipeline or context parallelism or selective recompute. Packing only
//! in `training_args.py` and `train_fsdp2.py`, which write `DataCollatorWithFlattening`; DeepSpeed
//! only for ZeRO; the FSDP2 script only for DDP or FSDP2 with all-or-nothing CPU offload. The CLI
//! refuses the other targets, naming the plans that can use them; the site shows only the offered
//! ones. axolotl and LLaMA-Factory YAML are written by `hf_yaml.rs`.

use crate::scenario::{Checkpointing, DataParallel, Fp8Recipe, Method, Offload, Scenario, Trainer};

use super::Target;

/// Why `target` cannot express `scen`, or `None` when its file is the plan that was estimated.
///
/// The rules follow what each stack can say: DeepSpeed's JSON has ZeRO stages 1-3 (parameter
/// offload only at stage 3, `offload_param` in DeepSpeed's config docs); FSDP2's
/// `CPUOffloadPolicy` offloads parameters, gradients and optimizer states together, to the CPU
/// only; the Trainer, accelerate and torchrun (HF example scripts) run DDP, FSDP2 or DeepSpeed;
/// none of them has tensor or pipeline parallelism or selective recompute (Megatron-LM's); fp8
/// (torchao) only the FSDP2 script writes; context parallelism none of them (PyTorch's
/// `context_parallel` shards each batch inside the training loop); packing
/// (`DataCollatorWithFlattening`, a data collator) the Trainer script and the FSDP2 script.
pub fn not_expressed(scen: &Scenario, target: Target) -> Option<String> {
    if target == Target::Env {
        return None;
    }
    // torchtitan has the parallelisms the other targets lack: its own rules.
    if target == Target::Torchtitan {
        return super::torchtitan::refusal(scen);
    }
    let p = &scen.parallel;
    if p.tensor > 1 {
        return Some(format!(
            "tensor parallelism {} is not a setting of these files (Megatron-LM or torch.distributed.tensor.parallel)",
            p.tensor
        ));
    }
    if p.pipeline > 1 {
        return Some(format!(
            "pipeline parallelism {} is not a setting of these files (Megatron-LM or torch.distributed.pipelining)",
            p.pipeline
        ));
    }
    if p.expert > 1 {
        return Some(format!(
            "expert parallelism {} is not a setting of these files (torchtitan's expert_parallel_degree or Megatron-LM's --expert-model-parallel-size)",
            p.expert
        ));
    }
    if scen.context() > 1 {
        return Some(format!(
            "context parallelism cp = {} is not a {} setting: PyTorch's context_parallel shards \
             each batch's buffers inside the training loop (torchtitan: \
             --parallelism.context_parallel_degree; Megatron-LM: --context-parallel-size)",
            scen.context(),
            target.file_name()
        ));
    }
    if scen.packing
        && !matches!(
            target,
            Target::Trainer | Target::Fsdp2 | Target::Axolotl | Target::LlamaFactory
        )
    {
        return Some(format!(
            "packing is a data collator (transformers' DataCollatorWithFlattening), which {} \
             does not carry: training_args.py, train_fsdp2.py, axolotl.yaml (sample_packing) \
             and llamafactory.yaml (neat_packing) write it",
            target.file_name()
        ));
    }
    if scen.act_int8 {
        return Some(
            "int8 activation compression is a custom saved_tensors_hooks pair (worked example 2's compress_activation), not a setting of these files".into(),
        );
    }
    if scen.checkpointing == Checkpointing::Selective {
        return Some(
            "selective recompute (attention internals only) has no transformers switch (Megatron-LM: --recompute-granularity selective)".into(),
        );
    }
    let fsdp_offload = || -> Option<String> {
        if p.offload_params != p.offload_optimizer {
            Some("FSDP2 offloads parameters, gradients and optimizer states together (CPUOffloadPolicy): this plan offloads only some; DeepSpeed ZeRO can".into())
        } else if p.offload_params == Offload::Nvme {
            Some("FSDP2 offloads to the CPU only, not to NVMe; DeepSpeed ZeRO-Infinity can".into())
        } else {
            None
        }
    };
    let zero_offload = || -> Option<String> {
        (p.offload_params != Offload::None && p.data != DataParallel::Zero3).then(|| {
            format!(
                "DeepSpeed offloads parameters only at ZeRO stage 3; this plan uses {}",
                p.data.label()
            )
        })
    };
    let ddp_offload = || -> Option<String> {
        (p.offload_params != Offload::None || p.offload_optimizer != Offload::None)
            .then(|| "DDP has no offload; the plan's offload needs DeepSpeed ZeRO".into())
    };
    match scen.fp8 {
        // accelerate's config carries Transformer Engine (mixed_precision: fp8 and its
        // fp8_config), for DDP and FSDP; the other files have no such setting.
        Fp8Recipe::Te
            if target != Target::Accelerate
                || !matches!(p.data, DataParallel::Ddp | DataParallel::Fsdp) =>
        {
            return Some(
                "fp8 te (Transformer Engine) is written only by accelerate's config (mixed_precision: \
                 fp8, fp8_config: {backend: TE}), for DDP and FSDP plans: TrainingArguments and the \
                 FSDP2 script have no such setting, and Headroom does not write DeepSpeed's fp8"
                    .into(),
            );
        }
        Fp8Recipe::Tensorwise | Fp8Recipe::Rowwise if target != Target::Fsdp2 => {
            return Some(format!(
                "fp8 ({}) is written only by the FSDP2 script (torchao's convert_to_float8_training): \
                 TrainingArguments has no fp8 setting, and DeepSpeed's fp8 is Transformer Engine's, \
                 another recipe",
                scen.fp8.id()
            ));
        }
        _ => {}
    }
    // accelerate (under the Trainer, torchrun's HF scripts, axolotl and LLaMA-Factory too) sets
    // FSDP's reduce dtype to the compute dtype; only the FSDP2 script writes an fp32 reduce.
    if p.reduce32 && p.data == DataParallel::Fsdp && target != Target::Fsdp2 {
        return Some(
            "the plan reduces FSDP's gradients in fp32 (reduce32): accelerate's policy reduces in \
             the compute dtype, and only the FSDP2 script writes reduce_dtype=torch.float32"
                .into(),
        );
    }
    // TRL runs the objectives other than SFT: training_args.py builds its trainer, which needs
    // whole groups of at least two completions per prompt for GRPO and RLOO.
    if scen.trainer != Trainer::Sft {
        let (_, stem) = scen.trainer.trl_class();
        if target == Target::Fsdp2 {
            return Some(format!(
                "the FSDP2 script's loop trains the supervised objective; {} is TRL's {stem}Trainer, \
                 which training_args.py builds",
                scen.trainer.label()
            ));
        }
        if scen.trainer.generates()
            && super::trl::num_generations(scen).is_none()
            && matches!(
                target,
                Target::Trainer | Target::Accelerate | Target::Torchrun
            )
        {
            return Some(format!(
                "{} needs at least 2 completions per prompt (TRL's num_generations), and the \
                 generation batch (micro-batch x GPUs x accumulation) is 1",
                scen.trainer.label()
            ));
        }
    }
    match target {
        Target::Env | Target::Torchtitan => None,
        Target::Fsdp2 if p.fsdp1 => Some(
            "the plan runs FSDP1 (flat parameters), which the FSDP2 script does not write: \
             accelerate's config (fsdp_version: 1) and the Trainer's fsdp_config do"
                .into(),
        ),
        Target::DeepSpeed => match p.data {
            DataParallel::Zero1 | DataParallel::Zero2 | DataParallel::Zero3 => zero_offload(),
            DataParallel::Ddp => Some(
                "the plan uses plain DDP, not DeepSpeed (a stage-0 DeepSpeed engine keeps other states)".into(),
            ),
            DataParallel::Fsdp => Some(
                "the plan shards with FSDP2, not DeepSpeed (ZeRO-3 shards and prefetches differently)".into(),
            ),
        },
        Target::Fsdp2 => match p.data {
            DataParallel::Ddp => ddp_offload(),
            DataParallel::Fsdp if scen.method == Method::Qlora => Some(
                "QLoRA under FSDP2 needs bnb_4bit_quant_storage and a sharded 4-bit load this script does not write".into(),
            ),
            DataParallel::Fsdp => fsdp_offload(),
            DataParallel::Zero1 | DataParallel::Zero2 | DataParallel::Zero3 => Some(format!(
                "the plan uses {}, which FSDP2 does not reproduce (other sharding, buffers and offload)",
                p.data.label()
            )),
        },
        Target::Axolotl | Target::LlamaFactory => super::hf_yaml::refusal(scen, target),
        Target::Trainer | Target::Accelerate | Target::Torchrun => match p.data {
            DataParallel::Ddp => ddp_offload(),
            DataParallel::Fsdp => fsdp_offload(),
            DataParallel::Zero1 | DataParallel::Zero2 | DataParallel::Zero3 => zero_offload(),
        },
    }
}

/// The targets that express `scen`, in [`Target::ALL`]'s order.
pub fn offered(scen: &Scenario) -> Vec<Target> {
    Target::ALL
        .into_iter()
        .filter(|&t| not_expressed(scen, t).is_none())
        .collect()
}
