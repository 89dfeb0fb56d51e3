//! The planner: for a target (global batch, sequence length) on the scenario's GPUs, every
//! combination of the techniques in a [`SearchSpace`] is estimated (memory) and timed (speed);
//! the combinations that fit are ranked by tokens per second, and a ladder of single changes
//! leads from the scenario as it is to the first setup that fits.
//!
//! Memory comes from [`estimate_with`], speed from [`step_time`], the ladder's changes from the
//! strategy table's candidates ([`crate::strategies`]), so a plan's figures are the figures the
//! calculator shows for the plan's link.
//!
//! Search: memory grows with the micro-batch (every other input fixed), so for each structural
//! combination the largest fitting micro-batch is found by bisection over the allowed ones
//! (powers of two dividing the per-replica batch). The time model is cheaper than an estimate,
//! so every combination is timed at every allowed micro-batch first; its best time is an upper
//! bound of what it can reach, and combinations are estimated best bound first, stopping once
//! the bound of the next one cannot enter the ranked list (branch and bound: the list is
//! exactly the one an exhaustive search gives).

use std::cell::Cell;

use serde::Serialize;

use crate::calibration::Calibration;
use crate::catalog::Gpu;
use crate::codec;
use crate::error::ScenarioError;
use crate::estimate::{estimate_with, resolve};
use crate::model::ModelSpec;
use crate::scenario::{
    Attention, Checkpointing, DataParallel, LossImpl, MAX_GRAD_ACCUM, MAX_SEQ, Method, Offload,
    Optimizer, Precision, Scenario,
};
use crate::strategies::candidates;
use crate::time::{StepTime, TimeAssumptions, step_time};

/// A change of the training recipe (tried only when the user allows changes to the training):
/// `None` keeps the scenario's value.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Recipe {
    pub id: &'static str,
    pub precision: Option<Precision>,
    pub optimizer: Option<Optimizer>,
    pub method: Option<Method>,
}

/// What the planner varies. Settings that cost no speed in the time model and only save memory
/// are applied to every plan rather than searched (SDPA attention instead of eager, the
/// allocator's expandable segments, no CUDA-graph pool), and sequence parallelism is on
/// whenever tensor parallelism is (Megatron's recommended pairing; it only divides the
/// activations that tensor parallelism replicates).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SearchSpace {
    pub data_parallel: &'static [DataParallel],
    /// (optimizer offload, parameter offload) pairs; a pair the strategy cannot do is skipped.
    pub offload: &'static [(Offload, Offload)],
    pub checkpointing: &'static [Checkpointing],
    /// Tensor-parallel degrees, kept within one node (the time model's `gpus_per_node`) and to
    /// degrees dividing the attention and key-value heads (Megatron's requirement).
    pub tensor_parallel: &'static [u32],
    pub loss: &'static [LossImpl],
    /// `save_on_cpu` around the forward: tried only without checkpointing, since with it the
    /// only saved tensors left are the checkpoints themselves.
    pub offload_activations: &'static [bool],
    /// Largest micro-batch tried (powers of two up to this).
    pub max_micro_batch: u32,
    /// Recipes tried with `allow_training_changes`, each on top of every combination above.
    pub recipes: &'static [Recipe],
}

/// The default search space (issue 6: under 15 ms natively and 50 ms in the browser).
pub const DEFAULT_SPACE: SearchSpace = SearchSpace {
    data_parallel: &[
        DataParallel::Ddp,
        DataParallel::Zero1,
        DataParallel::Zero2,
        DataParallel::Zero3,
        DataParallel::Fsdp,
    ],
    offload: &[
        (Offload::None, Offload::None),
        (Offload::Cpu, Offload::None),
        (Offload::Cpu, Offload::Cpu),
    ],
    checkpointing: &[
        Checkpointing::None,
        Checkpointing::Selective,
        Checkpointing::Every(2),
        Checkpointing::Full,
    ],
    tensor_parallel: &[1, 2, 4, 8],
    loss: &[LossImpl::Hf, LossImpl::Fused],
    offload_activations: &[false, true],
    max_micro_batch: 1024,
    recipes: &[
        Recipe {
            id: "bf16",
            precision: Some(Precision::Bf16),
            optimizer: None,
            method: None,
        },
        Recipe {
            id: "adamw8bit",
            precision: None,
            optimizer: Some(Optimizer::AdamW8bit),
            method: None,
        },
        Recipe {
            id: "bf16+adamw8bit",
            precision: Some(Precision::Bf16),
            optimizer: Some(Optimizer::AdamW8bit),
            method: None,
        },
        Recipe {
            id: "paged-adamw8bit",
            precision: None,
            optimizer: Some(Optimizer::PagedAdamW8bit),
            method: None,
        },
        Recipe {
            id: "adafactor",
            precision: None,
            optimizer: Some(Optimizer::Adafactor),
            method: None,
        },
        Recipe {
            id: "lora",
            precision: None,
            optimizer: None,
            method: Some(Method::Lora),
        },
        Recipe {
            id: "qlora",
            precision: None,
            optimizer: None,
            method: Some(Method::Qlora),
        },
    ],
};

/// Settings the user keeps as in the scenario (the changes the planner may not make), e.g. the
/// tensor-parallel degree when the training runs under the Trainer, which has no tensor
/// parallelism.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Keep {
    pub dp: bool,
    pub tp: bool,
    /// Optimizer and parameter offload.
    pub offload: bool,
    pub ckpt: bool,
    /// Micro-batch (and so the accumulation).
    pub batch: bool,
    pub loss: bool,
    pub act_offload: bool,
    pub precision: bool,
}

impl Keep {
    /// The names `parse` accepts.
    pub const NAMES: [&'static str; 8] = [
        "dp",
        "tp",
        "offload",
        "ckpt",
        "batch",
        "loss",
        "act_offload",
        "precision",
    ];

    /// Parses a comma-separated list of [`Keep::NAMES`].
    pub fn parse(field: &str, s: &str) -> Result<Keep, ScenarioError> {
        let mut k = Keep::default();
        for name in s.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let flag = match name {
                "dp" => &mut k.dp,
                "tp" => &mut k.tp,
                "offload" => &mut k.offload,
                "ckpt" => &mut k.ckpt,
                "batch" => &mut k.batch,
                "loss" => &mut k.loss,
                "act_offload" => &mut k.act_offload,
                "precision" => &mut k.precision,
                _ => {
                    return Err(ScenarioError::invalid(
                        field,
                        format!(
                            "unknown setting `{}`; allowed: {}",
                            crate::scenario::shorten(name),
                            Keep::NAMES.join(", ")
                        ),
                    ));
                }
            };
            *flag = true;
        }
        Ok(k)
    }

    /// Whether a change of `field` (a link key, as in [`Change`]) is allowed.
    pub fn allows(&self, field: &str) -> bool {
        !match field {
            "dp" => self.dp,
            "tp" | "sp" => self.tp,
            "opt_offload" | "param_offload" => self.offload,
            "ckpt" => self.ckpt,
            "batch" | "accum" => self.batch,
            "loss" => self.loss,
            "act_offload" => self.act_offload,
            "precision" => self.precision,
            _ => false,
        }
    }
}

/// What the user asks for besides the scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanOptions {
    /// Sequences per optimizer step over all GPUs; `None` keeps the scenario's.
    pub global_batch: Option<u64>,
    /// Sequence length; `None` keeps the scenario's.
    pub seq: Option<u32>,
    /// Also search recipes that change what is trained (precision of the weights, optimizer,
    /// LoRA/QLoRA); they are ranked in their own list.
    pub allow_training_changes: bool,
    /// Tokens to train on, for the time and GPU-hours of each plan.
    pub tokens: Option<f64>,
    /// Price of one GPU-hour, given by the user (Headroom keeps no price list).
    pub price_per_gpu_hour: Option<f64>,
    /// Plans kept per list.
    pub max_plans: usize,
    /// Settings kept as in the scenario.
    pub keep: Keep,
}

impl Default for PlanOptions {
    fn default() -> Self {
        PlanOptions {
            global_batch: None,
            seq: None,
            allow_training_changes: false,
            tokens: None,
            price_per_gpu_hour: None,
            max_plans: 10,
            keep: Keep::default(),
        }
    }
}

/// Largest global batch accepted (more sequences per step than any published run uses).
pub const MAX_GLOBAL_BATCH: u64 = 1 << 30;
/// Largest token count accepted (100x the largest published pre-training runs).
pub const MAX_TOKENS: f64 = 1e15;

impl PlanOptions {
    /// Checks ranges; every message names the field as the CLI's flags do.
    pub fn validate(&self) -> Result<(), ScenarioError> {
        if let Some(g) = self.global_batch
            && !(1..=MAX_GLOBAL_BATCH).contains(&g)
        {
            return Err(ScenarioError::invalid(
                "global_batch",
                format!("must be an integer from 1 to {MAX_GLOBAL_BATCH}, found {g}"),
            ));
        }
        if let Some(s) = self.seq
            && !(1..=MAX_SEQ).contains(&s)
        {
            return Err(ScenarioError::invalid(
                "seq",
                format!("must be an integer from 1 to {MAX_SEQ}, found {s}"),
            ));
        }
        if let Some(t) = self.tokens
            && !(t.is_finite() && (1.0..=MAX_TOKENS).contains(&t))
        {
            return Err(ScenarioError::invalid(
                "tokens",
                format!("must be a number from 1 to {MAX_TOKENS:e}, found {t}"),
            ));
        }
        if let Some(p) = self.price_per_gpu_hour
            && !(p.is_finite() && (0.0..=1e6).contains(&p))
        {
            return Err(ScenarioError::invalid(
                "price_per_gpu_hour",
                format!("must be a number from 0 to 1000000, found {p}"),
            ));
        }
        if !(1..=1000).contains(&self.max_plans) {
            return Err(ScenarioError::invalid(
                "max_plans",
                format!(
                    "must be an integer from 1 to 1000, found {}",
                    self.max_plans
                ),
            ));
        }
        Ok(())
    }
}

/// One field a plan sets differently from the scenario (keys as in links).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Change {
    pub field: &'static str,
    pub from: String,
    pub to: String,
}

/// Time and money to train on the requested tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TrainCost {
    pub tokens: f64,
    pub seconds: f64,
    pub gpu_hours: f64,
    /// `gpu_hours x price`, when the user gave a price.
    pub money: Option<f64>,
}

/// One setup with its memory and speed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Plan {
    pub scenario: Scenario,
    /// Share link (query string without `?`): the calculator opens on this plan.
    pub link: String,
    pub peak_device: u64,
    pub capacity: u64,
    pub fits: bool,
    /// Capacity minus the device peak (negative when it does not fit).
    pub headroom: i64,
    pub headroom_percent: f64,
    pub step_seconds: f64,
    pub tokens_per_step: u64,
    pub tokens_per_second: f64,
    pub tokens_per_second_per_gpu: f64,
    pub mfu: f64,
    /// Fields that differ from the scenario as given.
    pub changes: Vec<Change>,
    /// Whether it trains something else than the target (see [`changes_training`]).
    pub changes_training: bool,
    pub cost: Option<TrainCost>,
}

/// One rung of the ladder: a single change and where it leaves memory and speed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LadderStep {
    /// The strategy table's id of the change (`start` for the scenario as given, `target` for
    /// the requested global batch and sequence).
    pub id: &'static str,
    pub technique: String,
    pub change: String,
    pub peak_device: u64,
    pub fits: bool,
    pub headroom: i64,
    pub tokens_per_second: f64,
    /// Speed after this step versus the step before, a signed fraction (−0.2 = 20% slower).
    pub speed_change: f64,
    /// Speed after this step versus the start.
    pub speed_vs_start: f64,
    pub changes_training: bool,
    pub link: String,
}

/// The planner's answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Planning {
    /// The scenario as given, with its figures (it may not fit).
    pub input: Plan,
    pub global_batch: u64,
    pub seq: u32,
    /// Plans that fit and train the same thing, fastest first.
    pub plans: Vec<Plan>,
    /// Plans that fit by changing the training (only with `allow_training_changes`): the
    /// fastest of each recipe of the search space, fastest first.
    pub training_plans: Vec<Plan>,
    pub ladder: Vec<LadderStep>,
    /// Whether the ladder's last step fits.
    pub ladder_fits: bool,
    /// Structural combinations in the space for this target.
    pub combinations: u32,
    /// Estimates run (memory); the rest were ruled out by their speed bound.
    pub estimates: u32,
}

/// Plans a scenario with the built-in catalogs and the default search space.
pub fn plan(scen: &Scenario, opts: &PlanOptions) -> Result<Planning, ScenarioError> {
    let r = resolve(scen)?;
    plan_with(&r.spec, r.gpu, &r.calibration, scen, opts, &DEFAULT_SPACE)
}

/// Whether `s` trains something other than `reference`: the weights' precision (fp32 and the
/// autocast modes keep fp32 weights and states, so switching among them does not count), the
/// optimizer's algorithm or state precision (AdamW's implementations are one algorithm), the
/// method or LoRA settings, or the tokens of an optimizer step. Mirrors the strategy table's
/// `changes_training`, decided here from the scenarios rather than from a row id.
pub fn changes_training(reference: &Scenario, s: &Scenario) -> bool {
    let family = |o: Optimizer| match o {
        Optimizer::AdamW | Optimizer::AdamWForLoop | Optimizer::AdamWFused => Optimizer::AdamW,
        Optimizer::PagedAdamW8bit => Optimizer::AdamW8bit,
        other => other,
    };
    let tokens = |x: &Scenario| x.global_batch() * x.seq as u64;
    s.method != reference.method
        || (s.method != Method::Full && s.lora != reference.lora)
        || family(s.optimizer) != family(reference.optimizer)
        || s.precision.param_dtype() != reference.precision.param_dtype()
        || tokens(s) != tokens(reference)
}

/// Fields of `s` that differ from `base`, keyed and written as in links (the codec's own
/// field values, so a change reads like the link that makes it).
pub fn differences(base: &Scenario, s: &Scenario) -> Vec<Change> {
    crate::codec::KEYS
        .iter()
        .filter(|k| !matches!(**k, "v" | "cfg" | "model" | "gpu" | "gpus"))
        .filter_map(|&field| {
            let from = crate::codec::field_value(base, field)?;
            let to = crate::codec::field_value(s, field)?;
            (from != to).then_some(Change { field, from, to })
        })
        .collect()
}

/// The model, GPU and calibration every evaluation uses, and a count of estimates.
struct Ctx<'a> {
    spec: &'a ModelSpec,
    gpu: &'a Gpu,
    cal: &'a Calibration,
    estimates: Cell<u32>,
}

impl Ctx<'_> {
    /// Device peak and whether it fits.
    fn memory(&self, s: &Scenario) -> (u64, bool, i64, f64, u64) {
        self.estimates.set(self.estimates.get() + 1);
        let e = estimate_with("", self.spec, self.gpu, self.cal, s);
        (
            e.peak.device,
            e.verdict.fits,
            e.verdict.headroom,
            e.verdict.headroom_percent,
            e.verdict.capacity,
        )
    }

    fn time(&self, s: &Scenario) -> StepTime {
        step_time(self.spec, self.gpu, s)
    }

    /// Autocast on this GPU: bf16 where it has bf16 tensor math, fp16 otherwise (T4, V100).
    fn half_precision(&self, pure: bool) -> Precision {
        match (self.gpu.dense_tflops.bf16.is_some(), pure) {
            (true, false) => Precision::AmpBf16,
            (true, true) => Precision::Bf16,
            (false, false) => Precision::AmpFp16,
            (false, true) => Precision::Fp16,
        }
    }

    fn plan(
        &self,
        input: &Scenario,
        reference: &Scenario,
        s: Scenario,
        opts: &PlanOptions,
    ) -> Plan {
        let (peak, fits, headroom, headroom_percent, capacity) = self.memory(&s);
        let t = self.time(&s);
        let cost = opts.tokens.map(|tokens| {
            let gpu_hours = t.gpu_hours_for_tokens(tokens, s.gpus);
            TrainCost {
                tokens,
                seconds: t.seconds_for_tokens(tokens),
                gpu_hours,
                money: opts.price_per_gpu_hour.map(|p| p * gpu_hours),
            }
        });
        Plan {
            link: codec::encode(&s),
            peak_device: peak,
            capacity,
            fits,
            headroom,
            headroom_percent,
            step_seconds: t.step_seconds,
            tokens_per_step: t.tokens_per_step,
            tokens_per_second: t.tokens_per_second,
            tokens_per_second_per_gpu: t.tokens_per_second_per_gpu,
            mfu: t.mfu,
            changes: differences(input, &s),
            changes_training: changes_training(reference, &s),
            cost,
            scenario: s,
        }
    }
}

/// The scenario with the target applied: the sequence length, and the accumulation that gives
/// the global batch at the largest micro-batch not above the scenario's that divides it.
pub fn retarget(scen: &Scenario, global_batch: u64, seq: u32) -> Result<Scenario, ScenarioError> {
    let d = scen.data_parallel().max(1) as u64;
    if !global_batch.is_multiple_of(d) {
        return Err(ScenarioError::invalid(
            "global_batch",
            format!(
                "must be a multiple of the data-parallel degree (gpus / (tp x pp) = {d}), found {global_batch}"
            ),
        ));
    }
    let per = global_batch / d;
    let b = (1..=scen.micro_batch.max(1) as u64)
        .rev()
        .find(|b| per.is_multiple_of(*b))
        .unwrap_or(1);
    let accum = per / b;
    if accum > MAX_GRAD_ACCUM as u64 {
        return Err(ScenarioError::invalid(
            "global_batch",
            format!(
                "needs {accum} accumulation steps at micro-batch {b} on {d} data-parallel GPUs; at most {MAX_GRAD_ACCUM}"
            ),
        ));
    }
    Ok(Scenario {
        seq,
        micro_batch: b as u32,
        grad_accum: accum as u32,
        ..scen.clone()
    })
}

/// One structural combination: its scenario (micro-batch and accumulation unset), the allowed
/// micro-batches (ascending) and the tokens per second at each (only at the largest without
/// pipeline parallelism, see [`speed_grows_with_micro_batch`]).
struct Combo {
    scen: Scenario,
    per_replica: u64,
    micro_batches: Vec<u32>,
    speeds: Vec<f64>,
    bound: f64,
}

/// Without pipeline parallelism the time model's throughput never falls as the micro-batch
/// grows at a fixed global batch: larger matrix multiplies run at a higher efficiency, fewer
/// micro-batches mean fewer ZeRO-3/FSDP gathers, and everything else scales with the tokens
/// (checked over the worked examples' search spaces in this module's tests). The largest
/// micro-batch that fits is then the fastest, and only it needs timing. A pipeline's bubble
/// shrinks with more micro-batches, so there every micro-batch is timed.
fn speed_grows_with_micro_batch(s: &Scenario) -> bool {
    s.parallel.pipeline <= 1
}

fn with_batch(s: &Scenario, per_replica: u64, b: u32) -> Scenario {
    Scenario {
        micro_batch: b,
        grad_accum: (per_replica / b as u64) as u32,
        ..s.clone()
    }
}

/// The scenario's own value when the user keeps it, else every value of the space.
fn pick<T: Copy>(kept: bool, own: T, all: &[T]) -> Vec<T> {
    if kept { vec![own] } else { all.to_vec() }
}

/// Every structural combination of `space` (for one recipe) on top of `base`.
fn combos(
    ctx: &Ctx,
    base: &Scenario,
    global_batch: u64,
    space: &SearchSpace,
    keep: &Keep,
) -> Vec<Combo> {
    let mut out = Vec::new();
    let pp = base.parallel.pipeline.max(1);
    let node = TimeAssumptions::default().gpus_per_node;
    let mut precisions = vec![base.precision];
    if base.precision == Precision::Fp32 && !keep.precision {
        // Autocast keeps fp32 weights and states: the same training, in half the activations.
        precisions.push(ctx.half_precision(false));
    }
    // Each kept setting takes the scenario's value instead of the space's values.
    let bp = &base.parallel;
    let tps = pick(keep.tp, bp.tensor, space.tensor_parallel);
    let dps = pick(keep.dp, bp.data, space.data_parallel);
    let offloads = pick(
        keep.offload,
        (bp.offload_optimizer, bp.offload_params),
        space.offload,
    );
    let ckpts = pick(keep.ckpt, base.checkpointing, space.checkpointing);
    let losses = pick(keep.loss, base.loss, space.loss);
    let acts = pick(
        keep.act_offload,
        base.offload_activations,
        space.offload_activations,
    );
    let own_sharding = (bp.data, bp.offload_optimizer, bp.offload_params);
    for tp in tps {
        if (tp > node && tp != bp.tensor)
            || !base.gpus.is_multiple_of(tp * pp)
            || !ctx.spec.heads.is_multiple_of(tp as u64)
            || !ctx.spec.kv_heads.max(1).is_multiple_of(tp as u64)
        {
            continue;
        }
        let d = (base.gpus / (tp * pp)) as u64;
        if !global_batch.is_multiple_of(d) {
            continue;
        }
        let per = global_batch / d;
        let micro_batches: Vec<u32> = if keep.batch {
            [base.micro_batch as u64]
                .into_iter()
                .filter(|b| per.is_multiple_of(*b) && per / b <= MAX_GRAD_ACCUM as u64)
                .map(|b| b as u32)
                .collect()
        } else {
            (0..31)
                .map(|k| 1u64 << k)
                .take_while(|b| *b <= per && *b <= space.max_micro_batch as u64)
                .filter(|b| per.is_multiple_of(*b) && per / b <= MAX_GRAD_ACCUM as u64)
                .map(|b| b as u32)
                .collect()
        };
        if micro_batches.is_empty() {
            continue;
        }
        for &precision in &precisions {
            for &dp in &dps {
                for &(oo, op) in &offloads {
                    // The rules below drop dominated alternatives, never the scenario's own.
                    let own = (dp, oo, op) == own_sharding;
                    // One-way sharding shards nothing: on one data-parallel GPU, ZeRO and FSDP
                    // are only worth their overhead for the offload they enable.
                    if !own && d == 1 && dp != DataParallel::Ddp && oo == Offload::None {
                        continue;
                    }
                    // ZeRO-2 offloads the same states with the gradients sharded too, at the
                    // same communication: ZeRO-1 with offload is never the better plan.
                    if !own && dp == DataParallel::Zero1 && oo != Offload::None {
                        continue;
                    }
                    // FSDP2's CPUOffloadPolicy moves parameters, gradients and optimizer
                    // states together: it has no optimizer-only offload.
                    if !own && dp == DataParallel::Fsdp && oo != op {
                        continue;
                    }
                    for &ck in &ckpts {
                        for &loss in &losses {
                            for &act in &acts {
                                if act && ck != Checkpointing::None && !keep.act_offload {
                                    continue;
                                }
                                let s = Scenario {
                                    precision,
                                    checkpointing: ck,
                                    loss,
                                    offload_activations: act,
                                    parallel: crate::scenario::Parallel {
                                        data: dp,
                                        tensor: tp,
                                        sequence: if keep.tp { bp.sequence } else { tp > 1 },
                                        offload_optimizer: oo,
                                        offload_params: op,
                                        ..base.parallel
                                    },
                                    ..base.clone()
                                };
                                if with_batch(&s, per, 1).validate().is_err() {
                                    continue;
                                }
                                let timed: &[u32] = if speed_grows_with_micro_batch(&s) {
                                    &micro_batches[micro_batches.len() - 1..]
                                } else {
                                    &micro_batches
                                };
                                let speeds: Vec<f64> = timed
                                    .iter()
                                    .map(|&b| ctx.time(&with_batch(&s, per, b)).tokens_per_second)
                                    .collect();
                                let bound = speeds.iter().copied().fold(0.0, f64::max);
                                out.push(Combo {
                                    scen: s,
                                    per_replica: per,
                                    micro_batches: micro_batches.clone(),
                                    speeds,
                                    bound,
                                });
                            }
                        }
                    }
                }
            }
        }
    }
    out
}

/// The fastest fitting micro-batch of a combination, if any fits (bisection on memory).
fn best_fit(ctx: &Ctx, c: &Combo) -> Option<Scenario> {
    let fits = |i: usize| {
        ctx.memory(&with_batch(&c.scen, c.per_replica, c.micro_batches[i]))
            .1
    };
    if !fits(0) {
        return None;
    }
    // Invariant: lo fits, hi (exclusive bound) does not or is past the end.
    let (mut lo, mut hi) = (0usize, c.micro_batches.len());
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if fits(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    if c.speeds.len() < c.micro_batches.len() {
        // Speed grows with the micro-batch: the largest that fits is the fastest.
        return Some(with_batch(&c.scen, c.per_replica, c.micro_batches[lo]));
    }
    let best = (0..=lo).max_by(|&a, &b| c.speeds[a].total_cmp(&c.speeds[b]).then(a.cmp(&b)))?;
    Some(with_batch(&c.scen, c.per_replica, c.micro_batches[best]))
}

/// The activation settings that need the least memory, whatever the rest: every layer
/// checkpointed, or no checkpointing with every saved tensor offloaded; both with the fused
/// loss (no fp32 logits). A combination whose lightest forms do not fit at its smallest
/// micro-batch has no member that fits (checked in this module's tests).
fn lightest(s: &Scenario) -> [Scenario; 2] {
    let light = |checkpointing, offload_activations| Scenario {
        checkpointing,
        offload_activations,
        loss: LossImpl::Fused,
        ..s.clone()
    };
    [
        light(Checkpointing::Full, false),
        light(Checkpointing::None, true),
    ]
}

/// Whether any lightest form of the combination fits at its smallest micro-batch, memoized
/// per group of combinations that differ only in activation settings (they share the
/// lightest forms).
fn group_can_fit(ctx: &Ctx, c: &Combo, groups: &mut Vec<(Scenario, bool)>) -> bool {
    let forms = lightest(&with_batch(&c.scen, c.per_replica, c.micro_batches[0]));
    if let Some((_, ok)) = groups.iter().find(|(k, _)| *k == forms[0]) {
        return *ok;
    }
    let ok = forms.iter().any(|f| ctx.memory(f).1);
    let [key, _] = forms;
    groups.push((key, ok));
    ok
}

/// Searches `combos` best bound first and keeps the `keep` fastest that fit.
fn search(
    ctx: &Ctx,
    mut combos: Vec<Combo>,
    input: &Scenario,
    reference: &Scenario,
    opts: &PlanOptions,
) -> Vec<Plan> {
    combos.sort_by(|a, b| b.bound.total_cmp(&a.bound));
    let mut found: Vec<Plan> = Vec::new();
    let mut groups = Vec::new();
    for c in &combos {
        if found.len() >= opts.max_plans
            && found
                .last()
                .is_some_and(|worst| c.bound < worst.tokens_per_second * (1.0 - SAME_SPEED))
        {
            break;
        }
        if !group_can_fit(ctx, c, &mut groups) {
            continue;
        }
        if let Some(s) = best_fit(ctx, c) {
            let p = ctx.plan(input, reference, s, opts);
            let at = found
                .iter()
                .position(|q| ranks_before(&p, q))
                .unwrap_or(found.len());
            found.insert(at, p);
            found.truncate(opts.max_plans);
        }
    }
    found
}

/// Speeds within this fraction of each other rank as equal: the time model's differences
/// below 0.1% (a fused loss where the logits are small, say) are below its resolution and not
/// worth a change.
pub const SAME_SPEED: f64 = 1e-3;

/// Ranking: faster first; at the same speed (within [`SAME_SPEED`]; the time model often
/// prices two setups alike, e.g. when CPU offload bounds the step), fewer changes from the
/// scenario first, since each change is work and risk for the user; then a plan every export
/// can express (selective recompute has no switch in transformers or FSDP2); then the lower
/// peak.
fn ranks_before(p: &Plan, q: &Plan) -> bool {
    let same = (p.tokens_per_second - q.tokens_per_second).abs()
        <= SAME_SPEED * q.tokens_per_second.abs().max(1e-9);
    if !same {
        return p.tokens_per_second > q.tokens_per_second;
    }
    let selective = |x: &Plan| x.scenario.checkpointing == Checkpointing::Selective;
    (p.changes.len(), selective(p), p.peak_device) < (q.changes.len(), selective(q), q.peak_device)
}

fn speed_change(after: f64, before: f64) -> f64 {
    if before > 0.0 && before.is_finite() && after.is_finite() {
        after / before - 1.0
    } else {
        0.0
    }
}

/// Changes the ladder never takes: the GPU count and the sequence length are the user's.
const LADDER_EXCLUDED: [&str; 2] = ["more_gpus", "halve_seq"];
/// Rungs at most (each saves memory, so this is never reached in practice).
const LADDER_MAX: usize = 16;

/// From the scenario as given to the first setup that fits, one change at a time: a change
/// that makes it fit is taken at once (the fastest such); otherwise the change that loses the
/// least speed per byte saved (free changes first, largest saving first among them). This
/// reproduces the order practitioners take: precision, checkpointing, smaller micro-batches,
/// an 8-bit optimizer, then ZeRO and offload.
fn ladder(
    ctx: &Ctx,
    input: &Scenario,
    start: &Scenario,
    reference: &Scenario,
    allow_training_changes: bool,
    keep: &Keep,
) -> (Vec<LadderStep>, bool) {
    let mut steps = Vec::new();
    let (peak0, fits0, head0, _, _) = ctx.memory(input);
    let tps0 = ctx.time(input).tokens_per_second;
    steps.push(LadderStep {
        id: "start",
        technique: "As given".into(),
        change: String::new(),
        peak_device: peak0,
        fits: fits0,
        headroom: head0,
        tokens_per_second: tps0,
        speed_change: 0.0,
        speed_vs_start: 0.0,
        changes_training: false,
        link: codec::encode(input),
    });
    let mut cur = input.clone();
    let (mut cur_peak, mut cur_fits, mut cur_tps) = (peak0, fits0, tps0);
    if start != input {
        let (peak, fits, headroom, _, _) = ctx.memory(start);
        let tps = ctx.time(start).tokens_per_second;
        steps.push(LadderStep {
            id: "target",
            technique: "Target batch and sequence".into(),
            change: format!(
                "global batch {} -> {}, sequence {} -> {} (micro-batch {}, accumulation {})",
                input.global_batch(),
                start.global_batch(),
                input.seq,
                start.seq,
                start.micro_batch,
                start.grad_accum
            ),
            peak_device: peak,
            fits,
            headroom,
            tokens_per_second: tps,
            speed_change: speed_change(tps, cur_tps),
            speed_vs_start: speed_change(tps, tps0),
            changes_training: false,
            link: codec::encode(start),
        });
        cur = start.clone();
        (cur_peak, cur_fits, cur_tps) = (peak, fits, tps);
    }
    while !cur_fits && steps.len() < LADDER_MAX {
        struct Cand {
            id: &'static str,
            technique: String,
            change: String,
            scen: Scenario,
            peak: u64,
            fits: bool,
            headroom: i64,
            tps: f64,
            training: bool,
        }
        let mut cands = Vec::new();
        for (id, technique, mut change, mut s) in candidates(&cur) {
            if LADDER_EXCLUDED.contains(&id) {
                continue;
            }
            // The strategy table's mixed-precision rows use bf16; a GPU without bf16 tensor
            // math (T4, V100) runs the fp16 form of the same change.
            if ctx.gpu.dense_tflops.bf16.is_none() {
                let fixed = match s.precision {
                    Precision::AmpBf16 => Precision::AmpFp16,
                    Precision::Bf16 => Precision::Fp16,
                    p => p,
                };
                if fixed != s.precision {
                    change = change.replace(s.precision.id(), fixed.id());
                    s.precision = fixed;
                }
            }
            if s.validate().is_err()
                || s == cur
                || !differences(&cur, &s).iter().all(|c| keep.allows(c.field))
            {
                continue;
            }
            let training = changes_training(reference, &s);
            if training && !allow_training_changes {
                continue;
            }
            let (peak, fits, headroom, _, _) = ctx.memory(&s);
            if peak >= cur_peak {
                continue;
            }
            let tps = ctx.time(&s).tokens_per_second;
            cands.push(Cand {
                id,
                technique,
                change,
                scen: s,
                peak,
                fits,
                headroom,
                tps,
                training,
            });
        }
        let pick = if cands.iter().any(|c| c.fits) {
            cands
                .iter()
                .filter(|c| c.fits)
                .max_by(|a, b| a.tps.total_cmp(&b.tps).then(b.peak.cmp(&a.peak)))
        } else {
            let cost = |c: &Cand| {
                let lost = (-speed_change(c.tps, cur_tps)).max(0.0);
                lost / (cur_peak - c.peak) as f64
            };
            cands.iter().min_by(|a, b| {
                cost(a)
                    .total_cmp(&cost(b))
                    .then(a.peak.cmp(&b.peak))
                    .then(b.tps.total_cmp(&a.tps))
            })
        };
        let Some(c) = pick else { break };
        steps.push(LadderStep {
            id: c.id,
            technique: c.technique.clone(),
            change: c.change.clone(),
            peak_device: c.peak,
            fits: c.fits,
            headroom: c.headroom,
            tokens_per_second: c.tps,
            speed_change: speed_change(c.tps, cur_tps),
            speed_vs_start: speed_change(c.tps, tps0),
            changes_training: c.training,
            link: codec::encode(&c.scen),
        });
        cur = c.scen.clone();
        (cur_peak, cur_fits, cur_tps) = (c.peak, c.fits, c.tps);
    }
    (steps, cur_fits)
}

/// Plans with an explicit model, GPU, calibration and search space.
pub fn plan_with(
    spec: &ModelSpec,
    gpu: &Gpu,
    cal: &Calibration,
    scen: &Scenario,
    opts: &PlanOptions,
    space: &SearchSpace,
) -> Result<Planning, ScenarioError> {
    scen.validate()?;
    opts.validate()?;
    let global_batch = opts.global_batch.unwrap_or_else(|| scen.global_batch());
    let seq = opts.seq.unwrap_or(scen.seq);
    let ctx = Ctx {
        spec,
        gpu,
        cal,
        estimates: Cell::new(0),
    };
    let start = retarget(scen, global_batch, seq)?;
    // Settings that only save memory and cost no speed in the time model go into every plan.
    let base = Scenario {
        attention: Attention::Sdpa,
        runtime: crate::scenario::Runtime {
            expandable_segments: true,
            cuda_graphs: false,
        },
        ..start.clone()
    };
    let same = combos(&ctx, &base, global_batch, space, &opts.keep);
    let combinations = same.len() as u32;
    let plans = search(&ctx, same, scen, &start, opts);
    let mut training_plans = Vec::new();
    if opts.allow_training_changes {
        // The fastest plan of each recipe: a list of alternatives (LoRA, QLoRA, 8-bit
        // AdamW...) rather than ten variants of the fastest one.
        let one = PlanOptions {
            max_plans: 1,
            ..opts.clone()
        };
        for r in space.recipes {
            if opts.keep.precision && r.precision.is_some() {
                continue;
            }
            let mut b = base.clone();
            if let Some(p) = r.precision {
                // Pure 16-bit weights in the GPU's half type.
                b.precision = if p == Precision::Bf16 {
                    ctx.half_precision(true)
                } else {
                    p
                };
            }
            if let Some(o) = r.optimizer {
                b.optimizer = o;
            }
            if let Some(m) = r.method {
                b.method = m;
                if m == Method::Qlora && b.precision == Precision::Fp32 {
                    b.precision = ctx.half_precision(false);
                }
            }
            // A recipe that keeps the training (paged 8-bit AdamW for 8-bit AdamW: the same
            // algorithm) is no alternative to list here.
            if b == base || !changes_training(&start, &b) {
                continue;
            }
            let found = search(
                &ctx,
                combos(&ctx, &b, global_batch, space, &opts.keep),
                scen,
                &start,
                &one,
            );
            for p in found {
                let at = training_plans
                    .iter()
                    .position(|q| ranks_before(&p, q))
                    .unwrap_or(training_plans.len());
                training_plans.insert(at, p);
            }
        }
        training_plans.truncate(opts.max_plans);
    }
    let (ladder, ladder_fits) = ladder(
        &ctx,
        scen,
        &start,
        &start,
        opts.allow_training_changes,
        &opts.keep,
    );
    let input = ctx.plan(scen, &start, scen.clone(), opts);
    Ok(Planning {
        input,
        global_batch,
        seq,
        plans,
        training_plans,
        ladder,
        ladder_fits,
        combinations,
        estimates: ctx.estimates.get(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The premise of [`speed_grows_with_micro_batch`]: over every combination of the default
    /// space for each worked example (pipeline-free ones), tokens per second never fall as the
    /// micro-batch doubles at the same global batch.
    #[test]
    fn speed_grows_with_micro_batch_without_pipeline() {
        let mut checked = 0;
        for n in codec::named_scenarios() {
            if !n.id.starts_with("ex") || n.scenario.parallel.pipeline > 1 {
                continue;
            }
            let r = resolve(&n.scenario).expect("named scenarios resolve");
            let ctx = Ctx {
                spec: &r.spec,
                gpu: r.gpu,
                cal: &r.calibration,
                estimates: Cell::new(0),
            };
            // A large global batch, so every combination has several micro-batches to compare.
            let g = 256 * n.scenario.gpus as u64;
            let base = retarget(&n.scenario, g, n.scenario.seq).expect("retargets");
            for c in combos(&ctx, &base, g, &DEFAULT_SPACE, &Keep::default()) {
                let speeds: Vec<f64> = c
                    .micro_batches
                    .iter()
                    .map(|&b| {
                        ctx.time(&with_batch(&c.scen, c.per_replica, b))
                            .tokens_per_second
                    })
                    .collect();
                for w in speeds.windows(2) {
                    assert!(
                        w[1] >= w[0] * (1.0 - 1e-9),
                        "{}: {} then {} tokens/s in {}",
                        n.id,
                        w[0],
                        w[1],
                        codec::encode(&c.scen)
                    );
                }
                checked += 1;
            }
        }
        assert!(checked > 500, "only {checked} combinations checked");
    }

    /// The premise of [`lightest`]: for every combination of the default space of each worked
    /// example, when it fits at its smallest micro-batch, one of its lightest forms fits too.
    #[test]
    fn lightest_forms_bound_every_combination() {
        let mut fitting = 0;
        for n in codec::named_scenarios() {
            if !n.id.starts_with("ex") {
                continue;
            }
            let r = resolve(&n.scenario).expect("named scenarios resolve");
            let ctx = Ctx {
                spec: &r.spec,
                gpu: r.gpu,
                cal: &r.calibration,
                estimates: Cell::new(0),
            };
            let g = n.scenario.global_batch();
            let base = retarget(&n.scenario, g, n.scenario.seq).expect("retargets");
            for c in combos(&ctx, &base, g, &DEFAULT_SPACE, &Keep::default()) {
                let s = with_batch(&c.scen, c.per_replica, c.micro_batches[0]);
                if ctx.memory(&s).1 {
                    fitting += 1;
                    assert!(
                        lightest(&s).iter().any(|f| ctx.memory(f).1),
                        "{}: {} fits, its lightest forms do not",
                        n.id,
                        codec::encode(&s)
                    );
                }
            }
        }
        assert!(fitting > 200, "only {fitting} fitting combinations checked");
    }
}
