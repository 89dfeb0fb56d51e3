//! The largest micro-batch and the longest sequence that fit on the chosen GPU.

use serde::Serialize;

use crate::bounds::ModelScale;
use crate::calibration::Calibration;
use crate::catalog::Gpu;
use crate::estimate::memory_with;
use crate::model::{ModelSpec, ParamInventory, inventory};
use crate::scenario::{MAX_MICRO_BATCH, MAX_SEQ, Scenario};

/// What fits: `None` when not even 1 fits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Fit {
    pub max_micro_batch: Option<u32>,
    pub max_seq: Option<u32>,
}

/// The model's share of the work, built once per search: its parameter inventory and its
/// share of the scale bound.
struct Model<'a> {
    spec: &'a ModelSpec,
    inv: ParamInventory,
    scale: ModelScale,
}

impl Model<'_> {
    /// Whether `scen` fits. Past the scale bound nothing fits on any GPU (and the formulas are
    /// not run there).
    fn fits(&self, gpu: &Gpu, cal: &Calibration, scen: &Scenario) -> bool {
        self.scale.check(self.spec, gpu, scen).is_ok()
            && memory_with(self.spec, &self.inv, gpu, cal, scen)
                .verdict
                .fits
    }
}

/// Largest `x` in `1..=hi` with `ok(x)`, assuming `ok` is monotone (memory grows with x).
fn largest(least: u32, hi: u32, ok: impl Fn(u32) -> bool) -> Option<u32> {
    if least > hi || !ok(least) {
        return None;
    }
    // Gallop up, then bisect: about 2 log2(answer) estimates.
    let mut lo = least;
    let mut step = 1u32;
    let mut upper = None;
    while upper.is_none() {
        let probe = lo.saturating_add(step).min(hi);
        if probe == lo {
            return Some(lo);
        }
        if ok(probe) {
            lo = probe;
            step = step.saturating_mul(2);
        } else {
            upper = Some(probe);
        }
    }
    let mut hi_bad = upper.unwrap_or(hi);
    while hi_bad - lo > 1 {
        let mid = lo + (hi_bad - lo) / 2;
        if ok(mid) { lo = mid } else { hi_bad = mid }
    }
    Some(lo)
}

/// Searches micro-batch (at this sequence length) and sequence length (at this micro-batch).
pub fn fit(spec: &ModelSpec, gpu: &Gpu, cal: &Calibration, scen: &Scenario) -> Fit {
    // Learned position tables cap the sequence; rotary models can be stretched.
    let max_seq_model = if spec.position_embeddings > 0 {
        (spec.max_positions.min(MAX_SEQ as u64) as u32).max(1)
    } else {
        MAX_SEQ
    };
    let model = Model {
        spec,
        inv: inventory(spec),
        scale: ModelScale::of(spec),
    };
    let cp = scen.context();
    let seq_unit = if cp > 1 { 2 * cp } else { 1 };
    Fit {
        max_micro_batch: largest(scen.trainer.min_micro_batch(), MAX_MICRO_BATCH, |b| {
            model.fits(
                gpu,
                cal,
                &Scenario {
                    micro_batch: b,
                    ..scen.clone()
                },
            )
        }),
        // Under context parallelism a sequence is cut into 2·cp chunks: search in those units.
        max_seq: largest(1, (max_seq_model / seq_unit).max(1), |k| {
            model.fits(
                gpu,
                cal,
                &Scenario {
                    seq: k * seq_unit,
                    ..scen.clone()
                },
            )
        })
        .map(|k| k * seq_unit),
    }
}
