//! The planner: for a target (global batch, sequence length) on the scenario's GPUs, every
//! combination of the techniques in a [`SearchSpace`] is estimated (memory) and timed (speed);
//! the combinations that fit are ranked by tokens per second, and a ladder of single changes
//! leads from the scenario as it is to the first setup that fits.
//!
//! Memory comes from [`memory_with`](crate::estimate::memory_with), speed from
//! [`step_time`](crate::time::step_time), the ladder's changes from the strategy table's
//! candidates ([`crate::strategies`]), so a plan's figures are the figures the calculator shows
//! for the plan's link.
//!
//! Search: memory grows with the micro-batch (every other input fixed), so for each structural
//! combination the largest fitting micro-batch is found by bisection over the allowed ones
//! (powers of two dividing the per-replica batch). The time model is cheaper than an estimate,
//! so every combination is timed at every allowed micro-batch first; its best time is an upper
//! bound of what it can reach, and combinations are estimated best bound first, stopping once
//! the bound of the next one cannot enter the ranked list (branch and bound: the list is
//! exactly the one an exhaustive search gives).
//!
//! Plans no reader could tell apart are listed once. The scenario's safety margin and host RAM are
//! kept, and so are its pipeline and context-parallel degrees. bitsandbytes' 8-bit optimizers are
//! never paired with optimizer offload. For sequences from 16k tokens the strategy table and the
//! ladder offer cp x 2 with twice the accumulation.

mod batch;
mod changes;
mod combos;
mod eval;
mod ladder;
mod options;
mod search;
mod space;
#[cfg(test)]
mod tests;
pub mod wire;

use serde::Serialize;

use crate::calibration::Calibration;
use crate::catalog::Gpu;
use crate::error::ScenarioError;
use crate::estimate::resolve;
use crate::model::ModelSpec;
use crate::scenario::{Attention, Method, Precision, Scenario};

pub use crate::scenario::changes_training;
pub use batch::retarget;
pub use changes::differences;
pub use options::{Keep, MAX_GLOBAL_BATCH, MAX_TOKENS, PlanOptions, Stack};
pub use search::SAME_SPEED;
pub use space::{DEFAULT_SPACE, Recipe, SearchSpace};

use combos::combos;
use eval::Ctx;
use ladder::ladder;
use search::{ranks_before, search};

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
    /// The stacks that run it as estimated, by the id of the export that writes their file
    /// ([`Stack::STACKS`]); empty where only `env.sh` carries it.
    pub runs_on: Vec<&'static str>,
    /// Whether it trains something else than the target (see [`changes_training`]).
    pub changes_training: bool,
    pub cost: Option<TrainCost>,
}

/// One rung of the ladder: a single change and where it leaves memory and speed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LadderStep {
    /// The strategy table's id of the change (`start` for the scenario as given, `target` for
    /// the requested global batch and sequence).
    pub id: String,
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

/// A sentence naming the first plans of `plans` (fastest first) whose speeds the time model
/// cannot tell apart: their bands ([`crate::time::band_factors`]) overlap the first's. `None`
/// when the first stands alone.
pub fn spread_note(plans: &[Plan], calibrated: bool) -> Option<String> {
    let band = crate::time::band_factors(calibrated);
    let close = crate::time::indistinct_from_first(plans.iter().map(|p| p.tokens_per_second), band);
    (close > 1).then(|| {
        format!(
            "Plans 1-{close}: within the time model's spread of each other (eight in ten measured \
             steps fell within {:.2}-{:.2}x of its time here): which is fastest is not certain",
            band.0, band.1
        )
    })
}

/// Plans a scenario with the built-in catalogs and the default search space.
pub fn plan(scen: &Scenario, opts: &PlanOptions) -> Result<Planning, ScenarioError> {
    let r = resolve(scen)?;
    plan_with(&r.spec, r.gpu, &r.calibration, scen, opts, &DEFAULT_SPACE)
}

/// The ladder alone (no search): the cheapest path, one change at a time, from the scenario as
/// given to a setup that fits without changing the training, on a stack that runs each step;
/// and whether its last step fits. What [`plan`] returns as `ladder` and `ladder_fits` with the
/// default options, for pages that show only the path.
pub fn cheapest_path(scen: &Scenario) -> Result<(Vec<LadderStep>, bool), ScenarioError> {
    let r = resolve(scen)?;
    scen.validate()?;
    let ctx = Ctx::new(&r.spec, r.gpu, &r.calibration);
    let start = retarget(scen, scen.global_batch(), scen.seq)?;
    Ok(ladder(
        &ctx,
        scen,
        &start,
        &start,
        false,
        &Keep::default(),
        Stack::default(),
    ))
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
    let ctx = Ctx::new(spec, gpu, cal);
    let start = retarget(scen, global_batch, seq)?;
    // Settings that only save memory and cost no speed in the time model go into every plan.
    let base = Scenario {
        attention: Attention::Sdpa,
        // The user's safety margin stays: every plan offered fits with it.
        runtime: crate::scenario::Runtime {
            expandable_segments: true,
            cuda_graphs: false,
            // Without CUDA graphs the model stays compiled (the default mode) if it was.
            compile: start.runtime.compiled(),
            ..start.runtime
        },
        ..start.clone()
    };
    let same = combos(&ctx, &base, global_batch, space, &opts.keep, opts.stack);
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
                combos(&ctx, &b, global_batch, space, &opts.keep, opts.stack),
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
        opts.stack,
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
