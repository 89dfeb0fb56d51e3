//! The strategy table: each memory-saving technique applied to this scenario, with the memory
//! it saves here (speed costs come with the time model).

use serde::Serialize;

use crate::calibration::Calibration;
use crate::catalog::Gpu;
use crate::estimate::estimate_with;
use crate::model::ModelSpec;
use crate::scenario::{
    Attention, Checkpointing, DataParallel, LossImpl, Method, Offload, Optimizer, Precision,
    Scenario,
};

/// One row: a change, and the device peak after it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Strategy {
    pub id: &'static str,
    pub technique: String,
    pub change: String,
    pub peak_device: u64,
    /// Device peak saved compared with the scenario (negative when it costs memory).
    pub saved: i64,
    pub fits: bool,
}

/// Candidate changes that apply to `scen` (a technique already in use is skipped).
fn candidates(scen: &Scenario) -> Vec<(&'static str, String, String, Scenario)> {
    let mut out = Vec::new();
    let mut add = |id: &'static str, technique: &str, change: String, s: Scenario| {
        if s != *scen {
            out.push((id, technique.to_string(), change, s));
        }
    };
    let base = scen.clone();
    if scen.precision == Precision::Fp32 {
        add(
            "amp",
            "Mixed precision",
            "fp32 -> amp-bf16".into(),
            Scenario {
                precision: Precision::AmpBf16,
                ..base.clone()
            },
        );
    }
    if scen.precision.is_autocast() || scen.precision == Precision::Fp32 {
        add(
            "pure_bf16",
            "Pure bf16 weights and states",
            format!("{} -> bf16", scen.precision.id()),
            Scenario {
                precision: Precision::Bf16,
                ..base.clone()
            },
        );
    }
    for (id, opt) in [
        ("adamw8bit", Optimizer::AdamW8bit),
        ("paged_adamw8bit", Optimizer::PagedAdamW8bit),
        ("adafactor", Optimizer::Adafactor),
        ("lion", Optimizer::Lion),
        ("adam_mini", Optimizer::AdamMini),
        ("adamw_fused", Optimizer::AdamWFused),
        ("sgd", Optimizer::Sgd),
    ] {
        if scen.optimizer != opt {
            add(
                id,
                "Optimizer",
                format!("{} -> {}", scen.optimizer.id(), opt.id()),
                Scenario {
                    optimizer: opt,
                    ..base.clone()
                },
            );
        }
    }
    for (id, ck) in [
        ("ckpt_full", Checkpointing::Full),
        ("ckpt_every2", Checkpointing::Every(2)),
        ("ckpt_selective", Checkpointing::Selective),
    ] {
        if scen.checkpointing != ck {
            add(
                id,
                "Activation checkpointing",
                format!("{} -> {}", scen.checkpointing.id(), ck.id()),
                Scenario {
                    checkpointing: ck,
                    ..base.clone()
                },
            );
        }
    }
    if !scen.offload_activations {
        add(
            "offload_activations",
            "CPU activation offload",
            "save_on_cpu(pin_memory=True)".into(),
            Scenario {
                offload_activations: true,
                ..base.clone()
            },
        );
    }
    if scen.micro_batch > 1 {
        let b = scen.micro_batch / 2;
        add(
            "halve_micro_batch",
            "Smaller micro-batch, more accumulation",
            format!(
                "micro-batch {} -> {b}, accumulation x2 (same global batch)",
                scen.micro_batch
            ),
            Scenario {
                micro_batch: b,
                grad_accum: scen.grad_accum.saturating_mul(2),
                ..base.clone()
            },
        );
    }
    if scen.seq > 256 {
        add(
            "halve_seq",
            "Shorter sequences",
            format!("sequence {} -> {}", scen.seq, scen.seq / 2),
            Scenario {
                seq: scen.seq / 2,
                ..base.clone()
            },
        );
    }
    if scen.attention == Attention::Eager {
        add(
            "sdpa",
            "Flash / SDPA attention",
            "eager -> sdpa".into(),
            Scenario {
                attention: Attention::Sdpa,
                ..base.clone()
            },
        );
    }
    if scen.loss == LossImpl::Hf {
        add(
            "fused_loss",
            "Fused linear cross-entropy",
            "hf -> fused (chunked logits)".into(),
            Scenario {
                loss: LossImpl::Fused,
                ..base.clone()
            },
        );
    }
    if scen.method == Method::Full {
        add(
            "lora",
            "LoRA",
            format!("full -> LoRA r{}", scen.lora.rank),
            Scenario {
                method: Method::Lora,
                ..base.clone()
            },
        );
        let q_prec = if scen.precision == Precision::Fp32 {
            Precision::Bf16
        } else {
            scen.precision
        };
        add(
            "qlora",
            "QLoRA",
            format!("full -> QLoRA r{} (NF4 base)", scen.lora.rank),
            Scenario {
                method: Method::Qlora,
                precision: q_prec,
                ..base.clone()
            },
        );
    }
    if scen.gpus > 1 {
        for (id, dp) in [
            ("zero1", DataParallel::Zero1),
            ("zero2", DataParallel::Zero2),
            ("zero3", DataParallel::Zero3),
            ("fsdp", DataParallel::Fsdp),
        ] {
            if scen.parallel.data != dp {
                add(
                    id,
                    "Sharding",
                    format!("{} -> {}", scen.parallel.data.id(), dp.id()),
                    Scenario {
                        parallel: crate::scenario::Parallel {
                            data: dp,
                            ..scen.parallel
                        },
                        ..base.clone()
                    },
                );
            }
        }
    }
    let z3 = crate::scenario::Parallel {
        data: DataParallel::Zero3,
        offload_optimizer: Offload::Cpu,
        offload_params: Offload::None,
        ..scen.parallel
    };
    add(
        "zero3_offload",
        "ZeRO-3 + CPU optimizer offload",
        "optimizer states to pinned CPU memory".into(),
        Scenario {
            parallel: z3,
            ..base.clone()
        },
    );
    let more = scen.gpus.saturating_mul(2).min(crate::scenario::MAX_GPUS);
    add(
        "more_gpus",
        "More GPUs (ZeRO-3)",
        format!("{} -> {more} GPUs with ZeRO-3", scen.gpus),
        Scenario {
            gpus: more,
            parallel: crate::scenario::Parallel {
                data: DataParallel::Zero3,
                ..scen.parallel
            },
            ..base.clone()
        },
    );
    if !scen.runtime.expandable_segments {
        add(
            "expandable_segments",
            "Allocator setting",
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True".into(),
            Scenario {
                runtime: crate::scenario::Runtime {
                    expandable_segments: true,
                    ..scen.runtime
                },
                ..base.clone()
            },
        );
    }
    if scen.runtime.cuda_graphs {
        add(
            "no_cuda_graphs",
            "CUDA graphs off",
            "no private graph pool".into(),
            Scenario {
                runtime: crate::scenario::Runtime {
                    cuda_graphs: false,
                    ..scen.runtime
                },
                ..base.clone()
            },
        );
    }
    out
}

/// Every applicable technique with its effect, largest saving first.
pub fn strategies(
    spec: &ModelSpec,
    gpu: &Gpu,
    cal: &Calibration,
    scen: &Scenario,
) -> Vec<Strategy> {
    let now = estimate_with("", spec, gpu, cal, scen).peak.device as i64;
    let mut rows: Vec<Strategy> = candidates(scen)
        .into_iter()
        .filter(|(_, _, _, s)| s.validate().is_ok())
        .map(|(id, technique, change, s)| {
            let e = estimate_with("", spec, gpu, cal, &s);
            Strategy {
                id,
                technique,
                change,
                peak_device: e.peak.device,
                saved: now - e.peak.device as i64,
                fits: e.verdict.fits,
            }
        })
        .collect();
    rows.sort_by(|a, b| b.saved.cmp(&a.saved).then(a.id.cmp(b.id)));
    rows
}
