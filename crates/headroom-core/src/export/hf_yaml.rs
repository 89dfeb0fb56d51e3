//! axolotl's and LLaMA-Factory's training YAML for a single-node Hugging Face plan: the keys
//! each framework reads (axolotl's config schema, `src/axolotl/utils/schemas/`; LLaMA-Factory's
//! `src/llamafactory/hparams/`), with the defaults `crate::import` reads them with, so importing
//! the file gives the plan back (`tests/import.rs`). What a framework decides itself is offered
//! only where it decides as estimated: axolotl loads the weights in the autocast's 16 bits and
//! calls `prepare_model_for_kbit_training` for QLoRA except under FSDP or ZeRO-3;
//! LLaMA-Factory upcasts trainable weights to fp32 unless `pure_bf16` and never calls it.

use crate::model::ModelSpec;
use crate::scenario::{
    Attention, BaseDtype, Checkpointing, DataParallel, LossImpl, Method, Offload, Optimizer,
    Precision, Scenario,
};

use super::Target;
use super::common::{comment_lines, common_notes, lora_targets, python_notes, summary};
use super::names::{layer_class, model_path};

/// Why axolotl's or LLaMA-Factory's YAML cannot run `scen` as estimated (the rules every
/// target shares are checked before, in `offer.rs`).
pub(super) fn refusal(scen: &Scenario, target: Target) -> Option<String> {
    let name = target.file_name();
    let axolotl = target == Target::Axolotl;
    if matches!(scen.checkpointing, Checkpointing::Every(_)) {
        return Some("checkpointing every k-th layer has no switch in axolotl or LLaMA-Factory (gradient checkpointing is all layers)".into());
    }
    if scen.trainer.generates() {
        return Some(
            "GRPO's and RLOO's generation settings are TRL's configs (training_args.py), not written here"
                .into(),
        );
    }
    if scen.ref_precompute {
        return Some(
            "precompute_ref_log_probs is TRL's DPOConfig setting, not written here".into(),
        );
    }
    if scen.trainer == crate::scenario::Trainer::Cpo {
        return Some(
            "CPO (sigmoid loss) has no setting in axolotl or LLaMA-Factory (they run ORPO and SimPO): TRL's CPOConfig in training_args.py".into(),
        );
    }
    if optimizer_name(scen.optimizer).is_none() {
        return Some(format!(
            "the {} optimizer has no optim name in these files",
            scen.optimizer.id()
        ));
    }
    let p = &scen.parallel;
    match p.data {
        DataParallel::Fsdp if !axolotl => {
            return Some("LLaMA-Factory runs FSDP through accelerate's config: use accelerate_config.yaml with training_args.py".into());
        }
        DataParallel::Fsdp
            if p.offload_params != p.offload_optimizer || p.offload_params == Offload::Nvme =>
        {
            return Some("FSDP offloads parameters, gradients and optimizer states together, to the CPU only".into());
        }
        DataParallel::Ddp
            if p.offload_params != Offload::None || p.offload_optimizer != Offload::None =>
        {
            return Some("DDP has no offload; the plan's offload needs DeepSpeed ZeRO".into());
        }
        DataParallel::Zero1 | DataParallel::Zero2 if p.offload_params != Offload::None => {
            return Some("DeepSpeed offloads parameters only at ZeRO stage 3".into());
        }
        _ => {}
    }
    let adapters = scen.method != Method::Full;
    let sixteen = matches!(scen.precision, Precision::AmpBf16 | Precision::AmpFp16);
    if adapters {
        if !sixteen {
            return Some(format!(
                "{name} trains adapters under autocast on a 16-bit base (amp-bf16 or amp-fp16)"
            ));
        }
        if scen.lora.base == BaseDtype::Fp32 {
            return Some(format!(
                "{name} loads the base in the compute dtype, not fp32"
            ));
        }
        if scen.lora.adapter_dtype != crate::dtype::DType::F32 {
            return Some("the adapters' dtype is peft's fp32 in these files".into());
        }
        // Neither leaves prepare_model_for_kbit_training's fp32 norms and embeddings:
        // LLaMA-Factory does not call it, axolotl casts them back to the load dtype after it.
        if scen.method.quantized_base() && scen.lora.kbit {
            return Some(format!(
                "{} trains the quantized base without prepare_model_for_kbit_training's fp32 \
                 norms and embeddings; the estimate assumes them (kbit=1)",
                if axolotl { "axolotl" } else { "LLaMA-Factory" },
            ));
        }
    } else {
        let deepspeed = matches!(
            p.data,
            DataParallel::Zero1 | DataParallel::Zero2 | DataParallel::Zero3
        );
        let ok = match scen.precision {
            // axolotl loads the weights in bf16: fp32 master weights only through DeepSpeed.
            Precision::AmpBf16 | Precision::AmpFp16 => !axolotl || deepspeed,
            // LLaMA-Factory: pure_bf16; axolotl: bf16 weights without DeepSpeed's fp32 masters.
            Precision::Bf16 => !deepspeed,
            Precision::Fp16 => false,
            Precision::Fp32 => axolotl,
        };
        if !ok {
            return Some(format!(
                "{} {} cannot be written for {} ({})",
                if axolotl { "axolotl" } else { "LLaMA-Factory" },
                name,
                scen.precision.id(),
                if axolotl {
                    "it loads full fine-tunes in the autocast's dtype; fp32 master weights come from DeepSpeed"
                } else {
                    "it upcasts trainable weights to fp32 under bf16 or fp16, or keeps bf16 with pure_bf16"
                }
            ));
        }
    }
    if !axolotl {
        if scen.attention == Attention::Flex {
            return Some("LLaMA-Factory's flash_attn has no flex attention".into());
        }
        if scen.offload_activations && scen.checkpointing != Checkpointing::Full {
            return Some(
                "LLaMA-Factory offloads activations only with checkpointing (use_unsloth_gc)"
                    .into(),
            );
        }
        if scen.packing && scen.attention != Attention::Flash2 {
            return Some("LLaMA-Factory packs without cross-document attention (neat_packing) with flash_attn fa2 only".into());
        }
    }
    None
}

/// transformers' `optim` name, or `None` where there is none.
fn optimizer_name(o: Optimizer) -> Option<&'static str> {
    Some(match o {
        Optimizer::AdamW => "adamw_torch",
        Optimizer::AdamWFused => "adamw_torch_fused",
        Optimizer::AdamW8bit => "adamw_bnb_8bit",
        Optimizer::PagedAdamW8bit => "paged_adamw_8bit",
        Optimizer::Lion => "lion_32bit",
        Optimizer::Adafactor => "adafactor",
        Optimizer::Sgd => "sgd",
        Optimizer::AdamWForLoop | Optimizer::SgdMomentum | Optimizer::AdamMini => return None,
    })
}

/// peft's module names for the scenario's targets as a YAML list: the Python targets' list
/// (`common::lora_targets`) without its quotes, every linear layer spelled out.
fn target_list(scen: &Scenario) -> String {
    match scen.lora.targets {
        crate::scenario::LoraTargets::AllLinear => {
            "[q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj]".into()
        }
        _ => lora_targets(scen).replace('"', ""),
    }
}

/// The keys where the two frameworks differ, for the lines they otherwise share.
struct Dialect {
    optimizer_key: &'static str,
    fused_loss: &'static str,
}

const AXOLOTL: Dialect = Dialect {
    optimizer_key: "optimizer",
    fused_loss: "plugins:\n  - axolotl.integrations.liger.LigerPlugin\nliger_fused_linear_cross_entropy: true\n",
};

const LLAMA_FACTORY: Dialect = Dialect {
    optimizer_key: "optim",
    fused_loss: "enable_liger_kernel: true\n",
};

/// The optimizer, the fused loss and compile.
fn training_keys(t: &mut String, scen: &Scenario, d: &Dialect) {
    t.push_str(&format!(
        "{}: {}\n",
        d.optimizer_key,
        optimizer_name(scen.optimizer).unwrap_or("adamw_torch")
    ));
    if scen.loss == LossImpl::Fused {
        t.push_str(d.fused_loss);
    }
    if scen.runtime.compile {
        t.push_str("torch_compile: true\n");
    }
}

/// The DeepSpeed JSON beside the file, for ZeRO plans.
fn deepspeed_key(t: &mut String, scen: &Scenario) {
    if matches!(
        scen.parallel.data,
        DataParallel::Zero1 | DataParallel::Zero2 | DataParallel::Zero3
    ) {
        t.push_str(&format!("deepspeed: {}\n", Target::DeepSpeed.file_name()));
    }
}

/// The file's head: the plan, the versions, what it cannot carry.
fn head(scen: &Scenario, framework: &str, launch: &str) -> (String, Vec<String>) {
    // The Python targets' how-to notes (peft, BitsAndBytesConfig, dtype) are this file's keys.
    let python = python_notes(scen);
    let mut notes: Vec<String> = common_notes(scen)
        .into_iter()
        .filter(|n| !python.contains(n))
        .collect();
    if scen.runtime.cuda_graphs {
        notes.push(
            "CUDA graphs (torch.compile mode=\"reduce-overhead\") are not a key of this file"
                .into(),
        );
    }
    notes.push(format!(
        "launch on {} GPU{}: {launch}",
        scen.gpus,
        if scen.gpus == 1 { "" } else { "s" }
    ));
    if scen.runtime.expandable_segments {
        notes.push(
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True in the environment (env.sh)".into(),
        );
    }
    let t = format!(
        "# Headroom plan: {}\n# Keys as {framework} reads them; checked by reading this file back with Headroom's import \
         (crates/headroom-core/tests/import.rs), not run by the reference suite\n",
        summary(scen)
    );
    (t, notes)
}

/// axolotl's YAML (`axolotl train axolotl.yaml`).
pub(super) fn axolotl_text(spec: &ModelSpec, scen: &Scenario) -> (String, Vec<String>) {
    let (mut t, notes) = head(
        scen,
        "axolotl 0.21",
        "accelerate launch --num_processes N -m axolotl.cli.train axolotl.yaml",
    );
    t.push_str(&format!("base_model: {}\n", model_path(scen)));
    t.push_str("datasets:\n  - path: your/dataset  # a dataset of yours\n    type: alpaca\n");
    t.push_str("output_dir: ./outputs\n");
    t.push_str(&format!(
        "sequence_len: {}\nmicro_batch_size: {}\ngradient_accumulation_steps: {}\n",
        scen.seq, scen.micro_batch, scen.grad_accum
    ));
    if scen.method != Method::Full {
        let qlora = scen.method == Method::Qlora;
        let eight_bit = scen.method == Method::Int8;
        t.push_str(&format!(
            "adapter: {}\nload_in_8bit: {eight_bit}\nload_in_4bit: {qlora}\nlora_r: {}\nlora_alpha: {}\nlora_dropout: {}\nlora_target_modules: {}\n",
            if qlora { "qlora" } else { "lora" },
            scen.lora.rank,
            2 * scen.lora.rank,
            if scen.lora.dropout { "0.05" } else { "0.0" },
            target_list(scen)
        ));
        if scen.lora.save_embeddings {
            t.push_str("lora_modules_to_save: [embed_tokens, lm_head]\n");
        }
        if scen.lora.dora {
            t.push_str("peft_use_dora: true\n");
        }
    }
    match scen.precision {
        Precision::AmpBf16 | Precision::Bf16 => t.push_str("bf16: true\n"),
        Precision::AmpFp16 | Precision::Fp16 => t.push_str("fp16: true\n"),
        Precision::Fp32 => t.push_str("bf16: false\nfp16: false\n"),
    }
    t.push_str(&format!(
        "attn_implementation: {}\n",
        scen.attention.hf_name()
    ));
    if scen.packing {
        t.push_str("sample_packing: true\n");
    }
    t.push_str(&format!(
        "gradient_checkpointing: {}\n",
        scen.checkpointing == Checkpointing::Full
    ));
    if scen.offload_activations {
        t.push_str("activation_offloading: true\n");
    }
    training_keys(&mut t, scen, &AXOLOTL);
    if scen.trainer.preference() || scen.trainer.full_logits() {
        // axolotl's `rl` names DPO, KTO, ORPO and SimPO (CPO is refused above).
        t.push_str(&format!("rl: {}\n", scen.trainer.id()));
    }
    deepspeed_key(&mut t, scen);
    if scen.parallel.data == DataParallel::Fsdp {
        t.push_str(&format!(
            "fsdp_version: {}\nfsdp_config:\n  offload_params: {}\n  auto_wrap_policy: TRANSFORMER_BASED_WRAP\n  transformer_layer_cls_to_wrap: {}\n  reshard_after_forward: true\n  state_dict_type: SHARDED_STATE_DICT\n",
            if scen.parallel.fsdp1 { 1 } else { 2 },
            scen.parallel.offload_params != Offload::None,
            layer_class(spec)
        ));
    }
    t.push_str(&comment_lines(&notes, "# "));
    (t, notes)
}

/// LLaMA-Factory's YAML (`llamafactory-cli train llamafactory.yaml`).
pub(super) fn llamafactory_text(_spec: &ModelSpec, scen: &Scenario) -> (String, Vec<String>) {
    let (mut t, notes) = head(
        scen,
        "LLaMA-Factory 0.9.5",
        "FORCE_TORCHRUN=1 NPROC_PER_NODE=N llamafactory-cli train llamafactory.yaml",
    );
    t.push_str(&format!("model_name_or_path: {}\n", model_path(scen)));
    t.push_str(&format!(
        "stage: {}\ndo_train: true\n",
        if scen.trainer.preference() {
            scen.trainer.id()
        } else if scen.trainer.full_logits() {
            "dpo"
        } else {
            "sft"
        }
    ));
    if scen.trainer.full_logits() {
        // LLaMA-Factory's DPO stage runs ORPO and SimPO as its `pref_loss`, without a
        // reference model (CPO is refused above).
        t.push_str(&format!("pref_loss: {}\n", scen.trainer.id()));
    }
    t.push_str("dataset: your_dataset  # registered in data/dataset_info.json\ntemplate: default\noutput_dir: saves/headroom-plan\n");
    match scen.method {
        Method::Full => t.push_str("finetuning_type: full\n"),
        m => {
            t.push_str(&format!(
                "finetuning_type: lora\nlora_rank: {}\nlora_target: {}\nlora_dropout: {}\n",
                scen.lora.rank,
                if scen.lora.targets == crate::scenario::LoraTargets::AllLinear {
                    "all".to_string()
                } else {
                    target_list(scen).trim_matches(['[', ']']).replace(' ', "")
                },
                if scen.lora.dropout { "0.05" } else { "0.0" }
            ));
            if m.quantized_base() {
                t.push_str(if m == Method::Qlora {
                    "quantization_bit: 4\nquantization_method: bnb\n"
                } else {
                    "quantization_bit: 8\nquantization_method: bnb\n"
                });
            }
            if scen.lora.save_embeddings {
                t.push_str("additional_target: embed_tokens,lm_head\n");
            }
            if scen.lora.dora {
                t.push_str("use_dora: true\n");
            }
        }
    }
    t.push_str(&format!(
        "cutoff_len: {}\nper_device_train_batch_size: {}\ngradient_accumulation_steps: {}\n",
        scen.seq, scen.micro_batch, scen.grad_accum
    ));
    match scen.precision {
        Precision::Bf16 => t.push_str("bf16: true\npure_bf16: true\n"),
        Precision::AmpFp16 | Precision::Fp16 => t.push_str("fp16: true\n"),
        _ => t.push_str("bf16: true\n"),
    }
    t.push_str(&format!(
        "flash_attn: {}\n",
        match scen.attention {
            Attention::Eager => "disabled",
            Attention::Flash2 => "fa2",
            Attention::Flash3 => "fa3",
            _ => "sdpa",
        }
    ));
    if scen.packing {
        t.push_str("neat_packing: true\n");
    }
    if scen.checkpointing != Checkpointing::Full {
        t.push_str("disable_gradient_checkpointing: true\n");
    } else if scen.offload_activations {
        t.push_str("use_unsloth_gc: true\n");
    }
    training_keys(&mut t, scen, &LLAMA_FACTORY);
    deepspeed_key(&mut t, scen);
    t.push_str(&comment_lines(&notes, "# "));
    (t, notes)
}
