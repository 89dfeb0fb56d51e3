//! The search's premises, checked over the search spaces of the worked examples: speed grows
//! with the micro-batch without pipeline parallelism, and a combination whose lightest forms
//! do not fit has no member that fits.

use crate::codec;
use crate::estimate::{Resolved, resolve};

use super::batch::with_batch;
use super::combos::combos;
use super::eval::Ctx;
use super::search::lightest;
use super::{DEFAULT_SPACE, Keep, Stack, retarget};

/// The evaluation context of a resolved scenario, no estimates counted yet.
fn context(r: &Resolved) -> Ctx<'_> {
    Ctx::new(&r.spec, r.gpu, &r.calibration)
}

/// The premise of
/// [`speed_grows_with_micro_batch`](super::combos::speed_grows_with_micro_batch): over every
/// combination of the default space for each worked example (pipeline-free ones), tokens per
/// second never fall as the micro-batch doubles at the same global batch.
#[test]
fn speed_grows_with_micro_batch_without_pipeline() {
    let mut checked = 0;
    for n in codec::named_scenarios() {
        if !n.id.starts_with("ex") || n.scenario.parallel.pipeline > 1 {
            continue;
        }
        let r = resolve(&n.scenario).expect("named scenarios resolve");
        let ctx = context(&r);
        // A large global batch, so every combination has several micro-batches to compare.
        let g = 256 * n.scenario.gpus as u64;
        let base = retarget(&n.scenario, g, n.scenario.seq).expect("retargets");
        for c in combos(&ctx, &base, g, &DEFAULT_SPACE, &Keep::default(), Stack::Any) {
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
        let ctx = context(&r);
        let g = n.scenario.global_batch();
        let base = retarget(&n.scenario, g, n.scenario.seq).expect("retargets");
        for c in combos(&ctx, &base, g, &DEFAULT_SPACE, &Keep::default(), Stack::Any) {
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

/// The ladder alone is the planner's ladder with the default options.
#[test]
fn cheapest_path_is_the_planners_ladder() {
    for n in crate::codec::named_scenarios().into_iter().take(8) {
        let p = super::plan(&n.scenario, &super::PlanOptions::default()).expect("plans");
        let (ladder, fits) = super::cheapest_path(&n.scenario).expect("a path");
        assert_eq!((ladder, fits), (p.ladder, p.ladder_fits), "{}", n.id);
    }
}
