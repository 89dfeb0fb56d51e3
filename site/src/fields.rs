//! The calculator's inputs: one entry per link field, grouped so a newcomer is not buried.
//!
//! Each field is keyed by its link key: an edit goes through the core's codec exactly like a
//! link does, so the form, the URL and the CLI accept and reject the same values.

use headroom_core::catalog::{GpuCatalog, PresetCatalog};
use headroom_core::format;
use headroom_core::scenario::{
    Attention, BaseDtype, Checkpointing, DataParallel, Fp8Recipe, Generator, LoraTargets, LossImpl,
    Method, ModelChoice, Offload, Optimizer, Precision, Scenario, SdpaKernel, Trainer,
    VisionTraining,
};

/// How a field is edited.
#[derive(Debug, Clone, Copy)]
pub enum Control {
    /// A choice among `(value, label)` options.
    Select(fn(&Scenario) -> Vec<(String, String)>),
    /// A whole number (or a probability for dropout) in a range.
    Number { min: f64, max: f64, step: f64 },
    /// On or off (`1` / `0`).
    Check,
}

/// One input.
#[derive(Debug, Clone, Copy)]
pub struct Field {
    pub key: &'static str,
    pub label: &'static str,
    pub control: Control,
    /// Whether the field applies to this scenario (LoRA rank only with LoRA, say).
    pub shown: fn(&Scenario) -> bool,
}

/// A group of inputs under one heading.
#[derive(Debug, Clone, Copy)]
pub struct Group {
    pub id: &'static str,
    pub title: &'static str,
    /// Open on first view (the groups most people change).
    pub open: bool,
    pub fields: &'static [Field],
}

fn always(_: &Scenario) -> bool {
    true
}

fn adapters(s: &Scenario) -> bool {
    s.method != Method::Full
}

fn quantized_base(s: &Scenario) -> bool {
    s.method.quantized_base()
}

fn sharded(s: &Scenario) -> bool {
    s.parallel.data != DataParallel::Ddp
}

fn params_offloadable(s: &Scenario) -> bool {
    matches!(s.parallel.data, DataParallel::Zero3 | DataParallel::Fsdp)
}

fn with_tp(s: &Scenario) -> bool {
    s.parallel.tensor > 1
}

fn zero(s: &Scenario) -> bool {
    matches!(
        s.parallel.data,
        DataParallel::Zero1 | DataParallel::Zero2 | DataParallel::Zero3
    )
}

fn fsdp(s: &Scenario) -> bool {
    s.parallel.data == DataParallel::Fsdp
}

fn fsdp_amp(s: &Scenario) -> bool {
    fsdp(s) && s.precision.is_autocast()
}

fn ddp(s: &Scenario) -> bool {
    s.parallel.data == DataParallel::Ddp && s.gpus > 1
}

fn options<T: Copy>(
    all: &[T],
    id: fn(T) -> &'static str,
    label: fn(T) -> &'static str,
) -> Vec<(String, String)> {
    all.iter()
        .map(|x| (id(*x).to_string(), label(*x).to_string()))
        .collect()
}

/// Each GPU with the memory the verdict uses: CUDA's measured total where a calibration has
/// one (the H100's 79.18 GiB, not nvidia-smi's 79.65), the catalog's otherwise.
fn gpu_options(_: &Scenario) -> Vec<(String, String)> {
    GpuCatalog::builtin()
        .gpus
        .iter()
        .map(|g| {
            let usable = headroom_core::Calibration::for_gpu(g).capacity(g);
            (
                g.id.clone(),
                format!("{} ({})", g.name, format::bytes(usable)),
            )
        })
        .collect()
}

/// Preset ids and names; the model field itself is drawn by the model picker.
pub fn model_options() -> Vec<(String, String)> {
    PresetCatalog::builtin()
        .presets
        .iter()
        .map(|p| {
            (
                p.id.clone(),
                format!("{} ({})", p.name, format::count(p.parameters_total)),
            )
        })
        .collect()
}

fn method_options(_: &Scenario) -> Vec<(String, String)> {
    options(Method::ALL, Method::id, Method::label)
}
fn target_options(_: &Scenario) -> Vec<(String, String)> {
    options(LoraTargets::ALL, LoraTargets::id, LoraTargets::label)
}
fn adapter_options(_: &Scenario) -> Vec<(String, String)> {
    headroom_core::codec::ADAPTER_DTYPES
        .iter()
        .map(|(id, d)| (id.to_string(), d.torch_name().to_string()))
        .collect()
}
fn trainer_options(_: &Scenario) -> Vec<(String, String)> {
    options(Trainer::ALL, Trainer::id, Trainer::label)
}
fn is_dpo(s: &Scenario) -> bool {
    s.trainer.preference()
}
fn is_grpo(s: &Scenario) -> bool {
    s.trainer.generates()
}
fn generator_options(_: &Scenario) -> Vec<(String, String)> {
    options(Generator::ALL, Generator::id, Generator::label)
}
fn uses_vllm(s: &Scenario) -> bool {
    is_grpo(s) && s.generator != Generator::Hf
}
fn vllm_colocated(s: &Scenario) -> bool {
    is_grpo(s) && s.generator == Generator::Colocate
}
fn base_options(_: &Scenario) -> Vec<(String, String)> {
    options(BaseDtype::ALL, BaseDtype::id, BaseDtype::label)
}
fn precision_options(_: &Scenario) -> Vec<(String, String)> {
    options(Precision::ALL, Precision::id, Precision::label)
}
fn fp8_options(_: &Scenario) -> Vec<(String, String)> {
    options(Fp8Recipe::ALL, Fp8Recipe::id, Fp8Recipe::label)
}
fn is_moe(s: &Scenario) -> bool {
    headroom_core::estimate::resolve_model(s).is_ok_and(|(_, spec)| spec.moe.is_some())
}
fn has_mtp(s: &Scenario) -> bool {
    headroom_core::estimate::resolve_model(s).is_ok_and(|(_, spec)| spec.mtp_modules > 0)
}
fn is_packing(s: &Scenario) -> bool {
    s.packing
}
fn is_full(s: &Scenario) -> bool {
    s.method == Method::Full
}

/// torchao's fp8 recipes, whose casts torch.compile fuses (Transformer Engine's are fused).
fn torchao_fp8(s: &Scenario) -> bool {
    is_full(s) && matches!(s.fp8, Fp8Recipe::Tensorwise | Fp8Recipe::Rowwise)
}
fn vision_options(_: &Scenario) -> Vec<(String, String)> {
    options(
        VisionTraining::ALL,
        VisionTraining::id,
        VisionTraining::label,
    )
}
/// Whether the scenario's model has a vision tower (a multimodal preset or pasted config).
fn is_multimodal(s: &Scenario) -> bool {
    match &s.model {
        ModelChoice::Custom(spec) => spec.vision.is_some(),
        ModelChoice::Preset(id) => PresetCatalog::builtin()
            .get(id)
            .is_ok_and(|p| p.spec.vision.is_some()),
    }
}
fn is_multimodal_full(s: &Scenario) -> bool {
    is_multimodal(s) && is_full(s)
}
fn optimizer_options(_: &Scenario) -> Vec<(String, String)> {
    options(Optimizer::ALL, Optimizer::id, Optimizer::label)
}
fn attention_options(_: &Scenario) -> Vec<(String, String)> {
    options(Attention::ALL, Attention::id, Attention::label)
}
fn sdpa_options(_: &Scenario) -> Vec<(String, String)> {
    options(SdpaKernel::ALL, SdpaKernel::id, SdpaKernel::label)
}
fn is_sdpa(s: &Scenario) -> bool {
    s.attention == Attention::Sdpa
}
fn loss_options(_: &Scenario) -> Vec<(String, String)> {
    options(LossImpl::ALL, LossImpl::id, LossImpl::label)
}
fn dp_options(_: &Scenario) -> Vec<(String, String)> {
    options(DataParallel::ALL, DataParallel::id, DataParallel::label)
}
fn offload_options(_: &Scenario) -> Vec<(String, String)> {
    options(Offload::ALL, Offload::id, Offload::label)
}

fn ckpt_options(s: &Scenario) -> Vec<(String, String)> {
    let mut modes = vec![
        Checkpointing::None,
        Checkpointing::Full,
        Checkpointing::Every(2),
        Checkpointing::Every(4),
        Checkpointing::Selective,
    ];
    // A link may hold any k: keep it selectable.
    if !modes.contains(&s.checkpointing) {
        modes.push(s.checkpointing);
    }
    modes.into_iter().map(|c| (c.id(), c.label())).collect()
}

const INT: Control = Control::Number {
    min: 1.0,
    max: 4_194_304.0,
    step: 1.0,
};

/// A count whose 0 means none or the default (images, host RAM, GPUs per node, network
/// bandwidth, efficiency, margin): the core accepts 0 there, so the form must too, or every
/// default page renders these inputs out of range (issue 28).
const COUNT0: Control = Control::Number {
    min: 0.0,
    max: 4_194_304.0,
    step: 1.0,
};

pub static GROUPS: &[Group] = &[
    Group {
        id: "hardware",
        title: "GPUs",
        open: true,
        fields: &[
            Field {
                key: "gpu",
                label: "GPU",
                control: Control::Select(gpu_options),
                shown: always,
            },
            Field {
                key: "gpus",
                label: "Number of GPUs",
                control: INT,
                shown: always,
            },
        ],
    },
    Group {
        id: "batch",
        title: "Batch and sequence",
        open: true,
        fields: &[
            Field {
                key: "batch",
                label: "Micro-batch (sequences per GPU)",
                control: INT,
                shown: always,
            },
            Field {
                key: "seq",
                label: "Sequence length (tokens)",
                control: INT,
                shown: always,
            },
            Field {
                key: "images",
                label: "Images per sample",
                control: COUNT0,
                shown: is_multimodal,
            },
            Field {
                key: "accum",
                label: "Gradient accumulation steps",
                control: INT,
                shown: always,
            },
            Field {
                key: "packing",
                label: "Sequence packing",
                control: Control::Check,
                shown: always,
            },
            Field {
                key: "doc_len",
                label: "Mean document length (tokens)",
                control: INT,
                shown: is_packing,
            },
        ],
    },
    Group {
        id: "training",
        title: "Precision, optimizer and method",
        open: true,
        fields: &[
            Field {
                key: "precision",
                label: "Precision",
                control: Control::Select(precision_options),
                shown: always,
            },
            Field {
                key: "fp8",
                label: "fp8 matmuls",
                control: Control::Select(fp8_options),
                shown: is_full,
            },
            Field {
                key: "mtp",
                label: "MTP modules trained",
                control: Control::Number {
                    min: 0.0,
                    max: 16.0,
                    step: 1.0,
                },
                shown: has_mtp,
            },
            Field {
                key: "compile",
                label: "torch.compile",
                control: Control::Check,
                shown: torchao_fp8,
            },
            Field {
                key: "vision",
                label: "Vision tower",
                control: Control::Select(vision_options),
                shown: is_multimodal_full,
            },
            Field {
                key: "optimizer",
                label: "Optimizer",
                control: Control::Select(optimizer_options),
                shown: always,
            },
            Field {
                key: "trainer",
                label: "Objective",
                control: Control::Select(trainer_options),
                shown: always,
            },
            Field {
                key: "ref_precompute",
                label: "precompute_ref_log_probs",
                control: Control::Check,
                shown: is_dpo,
            },
            Field {
                key: "prompt",
                label: "Prompt tokens",
                control: Control::Number {
                    min: 0.0,
                    max: 1_048_576.0,
                    step: 1.0,
                },
                shown: is_grpo,
            },
            Field {
                key: "kl",
                label: "KL term (beta > 0)",
                control: Control::Check,
                shown: is_grpo,
            },
            Field {
                key: "gen",
                label: "Generation",
                control: Control::Select(generator_options),
                shown: is_grpo,
            },
            Field {
                key: "vllm_util",
                label: "vLLM memory (%)",
                control: Control::Number {
                    min: 0.0,
                    max: 100.0,
                    step: 1.0,
                },
                shown: uses_vllm,
            },
            Field {
                key: "vllm_len",
                label: "vLLM max_model_len",
                control: Control::Number {
                    min: 0.0,
                    max: 1_048_576.0,
                    step: 1.0,
                },
                shown: uses_vllm,
            },
            Field {
                key: "vllm_sleep",
                label: "vLLM sleep mode",
                control: Control::Check,
                shown: vllm_colocated,
            },
            Field {
                key: "method",
                label: "Training method",
                control: Control::Select(method_options),
                shown: always,
            },
            Field {
                key: "rank",
                label: "LoRA rank",
                control: Control::Number {
                    min: 1.0,
                    max: 65_536.0,
                    step: 1.0,
                },
                shown: adapters,
            },
            Field {
                key: "targets",
                label: "LoRA targets",
                control: Control::Select(target_options),
                shown: adapters,
            },
            Field {
                key: "base",
                label: "Base model loaded in",
                control: Control::Select(base_options),
                shown: adapters,
            },
            Field {
                key: "adapter",
                label: "Adapters' dtype",
                control: Control::Select(adapter_options),
                shown: adapters,
            },
            Field {
                key: "lora_dropout",
                label: "LoRA dropout above 0",
                control: Control::Check,
                shown: adapters,
            },
            Field {
                key: "save_embeddings",
                label: "Train embeddings (modules_to_save)",
                control: Control::Check,
                shown: adapters,
            },
            Field {
                key: "dora",
                label: "DoRA (use_dora)",
                control: Control::Check,
                shown: adapters,
            },
            Field {
                key: "kbit",
                label: "prepare_model_for_kbit_training",
                control: Control::Check,
                shown: quantized_base,
            },
        ],
    },
    Group {
        id: "activations",
        title: "Activations and loss",
        open: false,
        fields: &[
            Field {
                key: "attention",
                label: "Attention",
                control: Control::Select(attention_options),
                shown: always,
            },
            Field {
                key: "sdpa",
                label: "SDPA kernel",
                control: Control::Select(sdpa_options),
                shown: is_sdpa,
            },
            Field {
                key: "ckpt",
                label: "Activation checkpointing",
                control: Control::Select(ckpt_options),
                shown: always,
            },
            Field {
                key: "dropout",
                label: "Dropout probability",
                control: Control::Number {
                    min: 0.0,
                    max: 0.99,
                    step: 0.05,
                },
                shown: always,
            },
            Field {
                key: "act_offload",
                label: "Offload activations to CPU (save_on_cpu)",
                control: Control::Check,
                shown: always,
            },
            Field {
                key: "act_int8",
                label: "Compress saved activations to int8 (what-if)",
                control: Control::Check,
                shown: always,
            },
            Field {
                key: "loss",
                label: "Loss implementation",
                control: Control::Select(loss_options),
                shown: always,
            },
            Field {
                key: "keep_logits",
                label: "Training loop keeps the logits through backward",
                control: Control::Check,
                shown: always,
            },
        ],
    },
    Group {
        id: "parallel",
        title: "Parallelism and offload",
        open: false,
        fields: &[
            Field {
                key: "dp",
                label: "Data parallelism",
                control: Control::Select(dp_options),
                shown: always,
            },
            Field {
                key: "tp",
                label: "Tensor parallel degree",
                control: Control::Number {
                    min: 1.0,
                    max: 1024.0,
                    step: 1.0,
                },
                shown: always,
            },
            Field {
                key: "pp",
                label: "Pipeline parallel degree",
                control: Control::Number {
                    min: 1.0,
                    max: 1024.0,
                    step: 1.0,
                },
                shown: always,
            },
            Field {
                key: "ep",
                label: "Expert parallel (MoE)",
                control: Control::Number {
                    min: 1.0,
                    max: 1024.0,
                    step: 1.0,
                },
                shown: is_moe,
            },
            Field {
                key: "cp",
                label: "Context parallel degree",
                control: Control::Number {
                    min: 1.0,
                    max: 1024.0,
                    step: 1.0,
                },
                shown: always,
            },
            Field {
                key: "sp",
                label: "Sequence parallelism (with TP)",
                control: Control::Check,
                shown: with_tp,
            },
            Field {
                key: "opt_offload",
                label: "Optimizer offload",
                control: Control::Select(offload_options),
                shown: sharded,
            },
            Field {
                key: "param_offload",
                label: "Parameter offload",
                control: Control::Select(offload_options),
                shown: params_offloadable,
            },
            Field {
                key: "bucket_view",
                label: "DDP gradient_as_bucket_view",
                control: Control::Check,
                shown: ddp,
            },
            Field {
                key: "fsdp1",
                label: "FSDP1 (flat parameters)",
                control: Control::Check,
                shown: fsdp,
            },
            Field {
                key: "reduce32",
                label: "FSDP reduces in fp32",
                control: Control::Check,
                shown: fsdp_amp,
            },
            Field {
                key: "ds_bf16",
                label: "DeepSpeed bf16 master and states",
                control: Control::Check,
                shown: zero,
            },
        ],
    },
    Group {
        id: "runtime",
        title: "Advanced overheads",
        open: false,
        fields: &[
            Field {
                key: "expandable",
                label: "expandable_segments:True",
                control: Control::Check,
                shown: always,
            },
            Field {
                key: "graphs",
                label: "CUDA graphs",
                control: Control::Check,
                shown: always,
            },
            Field {
                key: "host_ram",
                label: "Host RAM per node (GiB)",
                control: COUNT0,
                shown: always,
            },
            Field {
                key: "node",
                label: "GPUs per node",
                control: COUNT0,
                shown: always,
            },
            Field {
                key: "ib",
                label: "Inter-node GB/s per GPU",
                control: COUNT0,
                shown: always,
            },
            Field {
                key: "eff",
                label: "Framework efficiency (%)",
                control: COUNT0,
                shown: always,
            },
            Field {
                key: "margin",
                label: "Safety margin (% of GPU memory)",
                control: COUNT0,
                shown: always,
            },
        ],
    },
];

/// The field of a link key (`None` for `model`, drawn by the model picker, and unknown keys).
pub fn find(key: &str) -> Option<&'static Field> {
    GROUPS
        .iter()
        .flat_map(|g| g.fields.iter())
        .find(|f| f.key == key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use headroom_core::codec::{FIELDS, field_value};

    /// Dynamic padding's fields (`len_mean`, `len_sd`, `drop_long`) have none: the page does
    /// not replay the allocator, so they would change no figure here; a link keeps them, the
    /// breakdown says the CLI replays them.
    #[test]
    fn every_link_field_but_model_has_one_input() {
        let mut keys: Vec<&str> = GROUPS
            .iter()
            .flat_map(|g| g.fields.iter().map(|f| f.key))
            .collect();
        keys.sort_unstable();
        let before = keys.len();
        keys.dedup();
        assert_eq!(before, keys.len(), "a key appears twice");
        let mut expected: Vec<&str> = FIELDS
            .iter()
            .map(|f| f.key)
            .filter(|k| {
                !matches!(
                    *k,
                    "v" | "model" | "cfg" | "len_mean" | "len_sd" | "drop_long"
                )
            })
            .collect();
        expected.sort_unstable();
        assert_eq!(keys, expected);
    }

    /// The inputs a default page renders are in range: a number's default (where the link has
    /// one) lies within its control's bounds. Six fields whose 0 means none or the default had
    /// a minimum of 1, so every default page showed them out of range.
    #[test]
    fn every_number_default_is_within_its_inputs_range() {
        let scen = Scenario::default();
        for g in GROUPS {
            for f in g.fields {
                if let Control::Number { min, max, .. } = f.control {
                    let value = field_value(&scen, f.key).expect("a link field");
                    if value.is_empty() {
                        continue;
                    }
                    let v: f64 = value.parse().expect("a number");
                    assert!(
                        (min..=max).contains(&v),
                        "{}: default {v} outside {min}..={max}",
                        f.key
                    );
                }
            }
        }
    }

    #[test]
    fn every_select_offers_the_current_value() {
        let scen = Scenario::default();
        for g in GROUPS {
            for f in g.fields {
                if let Control::Select(opts) = f.control {
                    let value = field_value(&scen, f.key).expect("a link field");
                    assert!(
                        opts(&scen).iter().any(|(v, _)| *v == value),
                        "{}: {value} not offered",
                        f.key
                    );
                }
            }
        }
    }
}
