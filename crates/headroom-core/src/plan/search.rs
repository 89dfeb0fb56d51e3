//! Branch and bound over the combinations: the largest fitting micro-batch by bisection,
//! combinations pruned by their speed bound or their lightest forms, and the ranking.

use crate::scenario::{Checkpointing, LossImpl, Scenario};

use super::batch::with_batch;
use super::combos::Combo;
use super::eval::Ctx;
use super::{Plan, PlanOptions};

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
/// micro-batch has no member that fits (checked in the planner's tests).
pub(super) fn lightest(s: &Scenario) -> [Scenario; 2] {
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
pub(super) fn search(
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
            // A plan that only adds changes to one already found, at the same speed and
            // peak, is the same plan with more work (a fused loss where logits are small,
            // ZeRO-2 against ZeRO-3 on one GPU): keep the one with fewer changes.
            if let Some(i) = found.iter().position(|q| same_plan(&p, q)) {
                if ranks_before(&p, &found[i]) {
                    found.remove(i);
                } else {
                    continue;
                }
            }
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

/// Two plans no reader would tell apart: the same speed (within [`SAME_SPEED`]) and the same
/// device peak (within 0.5%), or one is the other plus changes at the same speed.
fn same_plan(p: &Plan, q: &Plan) -> bool {
    let speed = (p.tokens_per_second - q.tokens_per_second).abs()
        <= SAME_SPEED * q.tokens_per_second.abs().max(1e-9);
    if !speed {
        return false;
    }
    let peak = (p.peak_device as f64 - q.peak_device as f64).abs() <= 0.005 * q.peak_device as f64;
    let subset = |a: &Plan, b: &Plan| a.changes.iter().all(|c| b.changes.contains(c));
    // On one data-parallel GPU the ZeRO stage shards nothing: stages that differ only there
    // are one plan (the offload they enable is the same).
    let replicas = |x: &Plan| x.scenario.data_parallel();
    let only_stage = replicas(p) == 1
        && replicas(q) == 1
        && p.changes.len() == q.changes.len()
        && p.changes
            .iter()
            .filter(|c| !q.changes.contains(c))
            .all(|c| c.field == "dp");
    peak || only_stage || subset(p, q) || subset(q, p)
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
pub(super) fn ranks_before(p: &Plan, q: &Plan) -> bool {
    let same = (p.tokens_per_second - q.tokens_per_second).abs()
        <= SAME_SPEED * q.tokens_per_second.abs().max(1e-9);
    if !same {
        return p.tokens_per_second > q.tokens_per_second;
    }
    let selective = |x: &Plan| x.scenario.checkpointing == Checkpointing::Selective;
    (p.changes.len(), selective(p), p.peak_device) < (q.changes.len(), selective(q), q.peak_device)
}
