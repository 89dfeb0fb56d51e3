//! The ladder: from the scenario as given to the first setup that fits, one change of the
//! strategy table at a time.

use crate::codec;
use crate::scenario::Scenario;
use crate::strategies::candidates;

use super::eval::Ctx;
use super::{Keep, LadderStep, Stack, changes_training, differences};

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
pub(super) fn ladder(
    ctx: &Ctx,
    input: &Scenario,
    start: &Scenario,
    reference: &Scenario,
    allow_training_changes: bool,
    keep: &Keep,
    stack: Stack,
) -> (Vec<LadderStep>, bool) {
    let mut steps = Vec::new();
    let (peak0, fits0, head0, _, _) = ctx.memory(input);
    let tps0 = ctx.time(input).tokens_per_second;
    steps.push(LadderStep {
        id: "start".into(),
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
            id: "target".into(),
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
        for c in candidates(&cur) {
            if LADDER_EXCLUDED.contains(&c.id) {
                continue;
            }
            // The strategy table's mixed-precision rows use bf16; a GPU without bf16 tensor
            // math (T4, V100) runs the fp16 form of the same change.
            let c = c.on_gpu(ctx.gpu);
            let (id, technique, change, s) = (c.id, c.technique, c.change, c.scenario);
            if s.validate().is_err()
                || crate::estimate::check_fp8(ctx.gpu, &s).is_err()
                || crate::estimate::check_dtypes(ctx.gpu, &s).is_err()
                || crate::estimate::check_context(ctx.spec, ctx.gpu, &s).is_err()
                || s == cur
                || !differences(&cur, &s).iter().all(|c| keep.allows(c.field))
                // A step the stack does not run as it is is no step to take on it.
                || stack.run_as(&s).as_ref() != Some(&s)
            {
                continue;
            }
            let training = changes_training(reference, &s);
            if training && !allow_training_changes {
                continue;
            }
            let (peak, fits, headroom, _, _) = ctx.memory(&s);
            // A change must save memory, unless it makes the run start at all (vLLM's context,
            // host RAM): then it is taken as any change that makes it fit.
            let starts_it = fits && !cur_fits;
            if peak >= cur_peak && !starts_it {
                continue;
            }
            let tps = ctx.time(&s).tokens_per_second;
            cands.push(Cand {
                id,
                technique: technique.to_string(),
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
            id: c.id.to_string(),
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
