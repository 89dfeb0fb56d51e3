//! The strategy table: each memory-saving technique applied to this scenario, with the memory
//! it saves here and its speed cost, both computed: the changed scenario goes through the
//! estimate (memory) and the time model ([`crate::time::step_time`], speed), and is compared
//! with the scenario as it is.
//!
//! Speed is compared in tokens per second of the whole job, so a change that keeps the tokens
//! of an optimizer step (micro-batch halved with accumulation doubled) and one that does not
//! (shorter sequences) are compared on the same footing; each row's `change` says which.
//!
//! Each row gives tokens/s after the change, the speed change, whether it changes the training, and
//! the recommended change when nothing fits. "Changes the training" is one rule,
//! `plan::changes_training`, asked by the table and the planner alike; the candidates (`Candidate`)
//! are shared with the planner's ladder.

use serde::Serialize;

use crate::calibration::Calibration;
use crate::catalog::Gpu;
use crate::estimate::{Estimate, estimate_with, memory_with};
use crate::model::ModelSpec;
use crate::scenario::{
    Attention, Checkpointing, DataParallel, LossImpl, Method, Offload, Optimizer, Precision,
    Scenario,
};
use crate::time::{StepTime, step_time, step_time_of};

pub mod wire;

/// One row: a change, the device peak after it and the speed after it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Strategy {
    pub id: String,
    pub technique: String,
    pub change: String,
    pub peak_device: u64,
    /// Device peak saved compared with the scenario (negative when it costs memory).
    pub saved: i64,
    pub fits: bool,
    /// One optimizer step after the change, seconds (time model, default assumptions).
    pub step_seconds: f64,
    /// Tokens per optimizer step over all GPUs after the change.
    pub tokens_per_step: u64,
    /// Tokens per second of the whole job after the change.
    pub tokens_per_second: f64,
    /// Tokens per second per GPU after the change (differs from the job's rate when a change
    /// adds GPUs).
    pub tokens_per_second_per_gpu: f64,
    /// Throughput change versus the scenario, a signed fraction of its tokens per second:
    /// −0.25 is 25% slower, +0.9 is 90% faster (more GPUs).
    pub speed_change: f64,
    /// The change alters what is trained or how it updates, not only how the same training
    /// runs: decided by [`crate::scenario::changes_training`], the planner's rule.
    pub changes_training: bool,
    /// When the scenario does not fit: among the changes that fit and keep the training as it
    /// is, the one with the highest tokens per second per GPU (so adding GPUs is weighed by
    /// what they cost). At most one row.
    pub recommended: bool,
    /// The share-link query of the scenario after the change (`v=1&...`), to apply it.
    pub link: String,
}

/// One technique applied to a scenario: the strategy table's row id, the technique, the change
/// as read by a person, and the scenario after it.
pub(crate) struct Candidate {
    pub id: &'static str,
    pub technique: &'static str,
    pub change: String,
    pub scenario: Scenario,
}

impl Candidate {
    /// The change as it runs on `gpu`: its bf16 precision in fp16 where the GPU has no bf16
    /// (T4, V100; `Precision::for_gpu`), the text with it, so neither the table nor the
    /// ladder offers what the estimate refuses there (`estimate::check_dtypes`).
    pub(crate) fn on_gpu(mut self, gpu: &Gpu) -> Candidate {
        let fixed = self.scenario.precision.for_gpu(gpu);
        if fixed != self.scenario.precision {
            self.change = self
                .change
                .replace(self.scenario.precision.id(), fixed.id());
            self.scenario.precision = fixed;
        }
        self
    }
}

/// QLoRA computes in 16 bits: an fp32 scenario moves to bf16, any other precision is kept.
fn qlora_precision(p: Precision) -> Precision {
    if p == Precision::Fp32 {
        Precision::Bf16
    } else {
        p
    }
}

/// GRPO generating with vLLM (`crate::vllm`): its context cut to the sequence, which it needs
/// to hold in its KV cache to start, and a colocated engine's sleep mode.
fn vllm_candidates(scen: &Scenario, c: &mut Collector) {
    use crate::scenario::Generator;
    if !scen.trainer.generates() || scen.generator == Generator::Hf {
        return;
    }
    if scen.vllm_len == 0 || scen.vllm_len > scen.seq {
        c.add(
            "vllm_len",
            "vLLM context = the sequence",
            format!("max_model_len -> {}", scen.seq),
            Scenario {
                vllm_len: scen.seq,
                ..scen.clone()
            },
        );
    }
    if scen.generator == Generator::Colocate && !scen.vllm_sleep {
        c.add(
            "vllm_sleep",
            "vLLM sleep mode",
            "vllm_enable_sleep_mode".into(),
            Scenario {
                vllm_sleep: true,
                ..scen.clone()
            },
        );
    }
}

/// Sequences from this many tokens on are offered context parallelism.
pub(crate) const LONG_SEQ: u32 = 16_384;

/// Candidate changes that apply to `scen` (a technique already in use is skipped).
pub(crate) fn candidates(scen: &Scenario) -> Vec<Candidate> {
    let mut c = Collector {
        scen,
        out: Vec::new(),
    };
    numerics(scen, &mut c);
    activations(scen, &mut c);
    fp8(scen, &mut c);
    kernels(scen, &mut c);
    adapters(scen, &mut c);
    sharding(scen, &mut c);
    runtime(scen, &mut c);
    c.out
}

/// Gathers the changes that differ from the scenario they start from.
struct Collector<'a> {
    scen: &'a Scenario,
    out: Vec<Candidate>,
}

impl Collector<'_> {
    fn add(&mut self, id: &'static str, technique: &'static str, change: String, s: Scenario) {
        if s != *self.scen {
            self.out.push(Candidate {
                id,
                technique,
                change,
                scenario: s,
            });
        }
    }
}

/// Mixed or pure 16-bit precision and lighter optimizers.
fn numerics(scen: &Scenario, c: &mut Collector) {
    let base = scen.clone();
    if scen.precision == Precision::Fp32 {
        c.add(
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
        c.add(
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
            c.add(
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
}

/// Less held for backward: checkpointing, offloaded or compressed activations, smaller micro-batches and sequences.
fn activations(scen: &Scenario, c: &mut Collector) {
    let base = scen.clone();
    for (id, ck) in [
        ("ckpt_full", Checkpointing::Full),
        ("ckpt_every2", Checkpointing::Every(2)),
        ("ckpt_selective", Checkpointing::Selective),
    ] {
        if scen.checkpointing != ck {
            c.add(
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
        c.add(
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
        // Halve when even; an odd micro-batch goes to 1. Accumulation grows by the same factor,
        // so the tokens of an optimizer step stay the same.
        let factor = if scen.micro_batch.is_multiple_of(2) {
            2
        } else {
            scen.micro_batch
        };
        let b = scen.micro_batch / factor;
        c.add(
            "halve_micro_batch",
            "Smaller micro-batch, more accumulation",
            format!(
                "micro-batch {} -> {b}, accumulation {} -> {} (same tokens per step)",
                scen.micro_batch,
                scen.grad_accum,
                scen.grad_accum.saturating_mul(factor)
            ),
            Scenario {
                micro_batch: b,
                grad_accum: scen.grad_accum.saturating_mul(factor),
                ..base.clone()
            },
        );
    }
    if scen.seq > 256 {
        c.add(
            "halve_seq",
            "Shorter sequences",
            format!(
                "sequence {} -> {} (half the tokens per step)",
                scen.seq,
                scen.seq / 2
            ),
            Scenario {
                seq: scen.seq / 2,
                ..base.clone()
            },
        );
    }
}

/// fp8 matmuls for a full fine-tune in bf16.
fn fp8(scen: &Scenario, c: &mut Collector) {
    let base = scen.clone();
    if scen.method == Method::Full
        && matches!(scen.precision, Precision::Bf16 | Precision::AmpBf16)
        && !scen.fp8.is_on()
    {
        // Kept only on GPUs with fp8 tensor cores (`estimate::check_fp8`, by the callers).
        c.add(
            "fp8",
            "fp8 matmuls (torchao)",
            "fp8 off -> tensorwise".into(),
            Scenario {
                fp8: crate::scenario::Fp8Recipe::Tensorwise,
                ..base.clone()
            },
        );
    }
}

/// Context parallelism for long sequences, int8 activations, fused attention and loss.
fn kernels(scen: &Scenario, c: &mut Collector) {
    let base = scen.clone();
    // Long sequences: split each over twice the context-parallel ranks, taking them from data
    // parallelism, with twice the accumulation so an optimizer step sees the same tokens
    // (torchtitan and Megatron-LM add context parallelism for long-context training).
    let cp = scen.context();
    if scen.seq >= LONG_SEQ
        && scen.attention == Attention::Sdpa
        && !scen.packing
        && scen.data_parallel() >= 2
        && scen.data_parallel().is_multiple_of(2)
    {
        c.add(
            "context_parallel",
            "Context parallelism (ring attention)",
            format!(
                "cp {cp} -> {}, accumulation {} -> {} (same tokens per step)",
                cp * 2,
                scen.grad_accum,
                scen.grad_accum.saturating_mul(2)
            ),
            Scenario {
                parallel: crate::scenario::Parallel {
                    context: cp * 2,
                    ..base.parallel
                },
                grad_accum: scen.grad_accum.saturating_mul(2),
                ..base.clone()
            },
        );
    }
    if !scen.act_int8
        && !scen.offload_activations
        && scen.checkpointing == crate::scenario::Checkpointing::None
    {
        c.add(
            "act_int8",
            "int8 activation compression (what-if)",
            "saved activations packed to int8 with one scale each".into(),
            Scenario {
                act_int8: true,
                ..base.clone()
            },
        );
    }
    vllm_candidates(scen, c);
    if scen.attention == Attention::Eager {
        c.add(
            "sdpa",
            "Flash / SDPA attention",
            "eager -> sdpa".into(),
            Scenario {
                attention: Attention::Sdpa,
                ..base.clone()
            },
        );
    }
    // TRL's trainers have their own fused head (`loss::trl_head`): no loss to fuse.
    if scen.loss == LossImpl::Hf && scen.trainer == crate::scenario::Trainer::Sft {
        c.add(
            "fused_loss",
            "Fused linear cross-entropy",
            "hf -> fused (chunked logits)".into(),
            Scenario {
                loss: LossImpl::Fused,
                ..base.clone()
            },
        );
    }
}

/// Adapters instead of full training, and a quantized base under them.
fn adapters(scen: &Scenario, c: &mut Collector) {
    let base = scen.clone();
    if scen.method == Method::Full {
        c.add(
            "lora",
            "LoRA",
            format!("full -> LoRA r{}", scen.lora.rank),
            Scenario {
                method: Method::Lora,
                ..base.clone()
            },
        );
        c.add(
            "qlora",
            "QLoRA",
            format!("full -> QLoRA r{} (NF4 base)", scen.lora.rank),
            Scenario {
                method: Method::Qlora,
                precision: qlora_precision(scen.precision),
                ..base.clone()
            },
        );
    }
    if matches!(scen.method, Method::Lora | Method::Int8) {
        c.add(
            "qlora",
            "QLoRA",
            format!(
                "{} -> QLoRA r{} (NF4 base)",
                if scen.method == Method::Int8 {
                    "8-bit LoRA"
                } else {
                    "LoRA"
                },
                scen.lora.rank
            ),
            Scenario {
                method: Method::Qlora,
                precision: qlora_precision(scen.precision),
                ..base.clone()
            },
        );
    }
}

/// Sharded and offloaded states, and more GPUs.
fn sharding(scen: &Scenario, c: &mut Collector) {
    let base = scen.clone();
    if scen.gpus > 1 {
        for (id, dp) in [
            ("zero1", DataParallel::Zero1),
            ("zero2", DataParallel::Zero2),
            ("zero3", DataParallel::Zero3),
            ("fsdp", DataParallel::Fsdp),
        ] {
            if scen.parallel.data != dp {
                c.add(
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
        ..scen.parallel
    };
    // Offloaded states are stepped by DeepSpeed's CPU Adam: bitsandbytes' 8-bit optimizers
    // (CUDA kernels) give way to AdamW, which changes what is trained.
    let (offload_optimizer, instead) = if scen.optimizer.is_bitsandbytes() {
        (
            Optimizer::AdamW,
            " (DeepSpeed's CPU AdamW replaces 8-bit AdamW)",
        )
    } else {
        (scen.optimizer, "")
    };
    let offloaded = Scenario {
        optimizer: offload_optimizer,
        ..base.clone()
    };
    c.add(
        "zero3_offload",
        "ZeRO-3 + CPU optimizer offload",
        format!("optimizer states to pinned CPU memory{instead}"),
        Scenario {
            parallel: z3,
            ..offloaded.clone()
        },
    );
    if scen.parallel.offload_params == Offload::None {
        c.add(
            "zero3_offload_params",
            "ZeRO-3 + CPU optimizer and parameter offload",
            format!("optimizer states and parameters to pinned CPU memory{instead}"),
            Scenario {
                parallel: crate::scenario::Parallel {
                    offload_params: Offload::Cpu,
                    ..z3
                },
                ..offloaded
            },
        );
    }
    let more = scen.gpus.saturating_mul(2).min(crate::scenario::MAX_GPUS);
    // Twice the GPUs with half the accumulation keeps the global batch when it can.
    let keep = more == scen.gpus.saturating_mul(2) && scen.grad_accum.is_multiple_of(2);
    c.add(
        "more_gpus",
        "More GPUs (ZeRO-3)",
        if keep {
            format!(
                "{} -> {more} GPUs with ZeRO-3, accumulation {} -> {} (same global batch)",
                scen.gpus,
                scen.grad_accum,
                scen.grad_accum / 2
            )
        } else {
            format!(
                "{} -> {more} GPUs with ZeRO-3 ({}x the global batch)",
                scen.gpus,
                more / scen.gpus.max(1)
            )
        },
        Scenario {
            gpus: more,
            grad_accum: if keep {
                scen.grad_accum / 2
            } else {
                scen.grad_accum
            },
            parallel: crate::scenario::Parallel {
                data: DataParallel::Zero3,
                ..scen.parallel
            },
            ..base.clone()
        },
    );
}

/// The allocator's and CUDA graphs' settings.
fn runtime(scen: &Scenario, c: &mut Collector) {
    let base = scen.clone();
    if !scen.runtime.expandable_segments {
        c.add(
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
        c.add(
            "no_cuda_graphs",
            "CUDA graphs off",
            "no private graph pool".into(),
            Scenario {
                runtime: crate::scenario::Runtime {
                    cuda_graphs: false,
                    compile: scen.runtime.compiled(),
                    ..scen.runtime
                },
                ..base.clone()
            },
        );
    }
}

/// `after / before − 1`, 0 when `before` is not a positive rate.
fn speed_change(after: f64, before: f64) -> f64 {
    if before > 0.0 && before.is_finite() && after.is_finite() {
        after / before - 1.0
    } else {
        0.0
    }
}

/// Every applicable technique with its effect, largest saving first, then fastest.
pub fn strategies(
    spec: &ModelSpec,
    gpu: &Gpu,
    cal: &Calibration,
    scen: &Scenario,
) -> Vec<Strategy> {
    let now = estimate_with(spec, gpu, cal, scen);
    let now_time = step_time(spec, gpu, cal, scen);
    strategies_from(spec, gpu, cal, scen, &now, &now_time)
}

/// The strategy table compared with the scenario's own estimate and step time (`now_estimate`,
/// `now_time`, which the caller has already computed: `analyze`).
pub fn strategies_from(
    spec: &ModelSpec,
    gpu: &Gpu,
    cal: &Calibration,
    scen: &Scenario,
    now_estimate: &Estimate,
    now_time: &StepTime,
) -> Vec<Strategy> {
    let now = now_estimate.peak.device as i64;
    let now_tps = now_time.tokens_per_second;
    let inv = crate::model::inventory(spec);
    let mut rows: Vec<Strategy> = candidates(scen)
        .into_iter()
        .map(|c| c.on_gpu(gpu))
        .filter(|c| {
            c.scenario.validate().is_ok()
                && crate::estimate::check_fp8(gpu, &c.scenario).is_ok()
                && crate::estimate::check_dtypes(gpu, &c.scenario).is_ok()
                && crate::estimate::check_context(spec, gpu, &c.scenario).is_ok()
        })
        .map(|c| {
            let s = c.scenario;
            let e = memory_with(spec, &inv, gpu, cal, &s);
            let t = step_time_of(spec, &inv, gpu, cal, &s);
            Strategy {
                id: c.id.to_string(),
                technique: c.technique.to_string(),
                change: c.change,
                peak_device: e.peak_device,
                saved: now - e.peak_device as i64,
                fits: e.verdict.fits,
                step_seconds: t.step_seconds,
                tokens_per_step: t.tokens_per_step,
                tokens_per_second: t.tokens_per_second,
                tokens_per_second_per_gpu: t.tokens_per_second_per_gpu,
                speed_change: speed_change(t.tokens_per_second, now_tps),
                changes_training: crate::scenario::changes_training(scen, &s),
                recommended: false,
                link: crate::codec::encode(&s),
            }
        })
        .collect();
    rows.sort_by(|a, b| {
        b.saved
            .cmp(&a.saved)
            .then(b.speed_change.total_cmp(&a.speed_change))
            .then(a.id.cmp(&b.id))
    });
    if !now_estimate.verdict.fits {
        // max_by keeps the last of equals: iterate in reverse so ties go to the earlier row
        // (the larger saving).
        let best = rows
            .iter()
            .enumerate()
            .rev()
            .filter(|(_, r)| r.fits && !r.changes_training)
            .max_by(|(_, a), (_, b)| {
                a.tokens_per_second_per_gpu
                    .total_cmp(&b.tokens_per_second_per_gpu)
            })
            .map(|(i, _)| i);
        if let Some(i) = best {
            rows[i].recommended = true;
        }
    }
    rows
}

/// What the verdict offers when a scenario does not fit: the fastest change that fits and
/// trains the same thing (the table's recommendation), and beside it the fastest change that
/// fits at all when that one changes the training and is faster, so a user sees what keeping
/// the training as it is costs (issue 34: CPU offload at -94% beside pure bf16 at +16%).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NextSteps<'a> {
    pub same_training: Option<&'a Strategy>,
    pub fastest: Option<&'a Strategy>,
}

/// The next steps among `rows`, the strategy table of a scenario that fits (`fits`: none) or
/// does not.
pub fn next_steps(rows: &[Strategy], fits: bool) -> NextSteps<'_> {
    if fits {
        return NextSteps {
            same_training: None,
            fastest: None,
        };
    }
    let same_training = rows.iter().find(|r| r.recommended);
    // Compared as the recommendation is, per GPU, so adding GPUs is weighed by what they cost;
    // the first of equals (the larger saving) wins.
    let fastest = rows
        .iter()
        .filter(|r| r.fits && r.changes_training)
        .fold(None::<&Strategy>, |best, r| match best {
            Some(b) if b.tokens_per_second_per_gpu >= r.tokens_per_second_per_gpu => Some(b),
            _ => Some(r),
        })
        .filter(|f| {
            same_training.is_none_or(|s| f.tokens_per_second_per_gpu > s.tokens_per_second_per_gpu)
        });
    NextSteps {
        same_training,
        fastest,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str, fits: bool, changes_training: bool, recommended: bool, tps: f64) -> Strategy {
        Strategy {
            id: id.into(),
            technique: String::new(),
            change: String::new(),
            peak_device: 0,
            saved: 0,
            fits,
            step_seconds: 1.0,
            tokens_per_step: 1,
            tokens_per_second: tps,
            tokens_per_second_per_gpu: tps,
            speed_change: 0.0,
            changes_training,
            recommended,
            link: String::new(),
        }
    }

    /// The recommendation keeps the training; beside it, only a faster change that fits and
    /// changes the training (the fastest, the first of equals); nothing when the scenario fits.
    #[test]
    fn next_steps_pair_the_same_training_with_a_faster_change() {
        let rows = vec![
            row("offload", true, false, true, 400.0),
            row("lora", true, true, false, 7500.0),
            row("bf16", true, true, false, 8000.0),
            row("bf16_again", true, true, false, 8000.0),
            row("sgd", false, true, false, 9000.0),
        ];
        let n = next_steps(&rows, false);
        assert_eq!(n.same_training.map(|r| r.id.as_str()), Some("offload"));
        assert_eq!(n.fastest.map(|r| r.id.as_str()), Some("bf16"));
        assert_eq!(
            next_steps(&rows, true),
            NextSteps {
                same_training: None,
                fastest: None
            }
        );
        // A slower training change is not offered beside a faster recommendation.
        let rows = vec![
            row("ckpt", true, false, true, 5000.0),
            row("lora", true, true, false, 4000.0),
        ];
        assert_eq!(next_steps(&rows, false).fastest, None);
        // Without a recommendation the fastest change that fits is the one step.
        let rows = vec![
            row("lora", true, true, false, 4000.0),
            row("x", false, false, false, 1.0),
        ];
        let n = next_steps(&rows, false);
        assert_eq!(
            (n.same_training, n.fastest.map(|r| r.id.as_str())),
            (None, Some("lora"))
        );
    }
}
