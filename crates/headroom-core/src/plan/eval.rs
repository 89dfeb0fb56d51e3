//! One setup evaluated: its memory (an estimate) and speed (the time model), made into a
//! [`Plan`].

use std::cell::Cell;

use crate::bounds::ModelScale;
use crate::calibration::Calibration;
use crate::catalog::Gpu;
use crate::codec;
use crate::estimate::memory_with;
use crate::model::{ModelSpec, ParamInventory};
use crate::scenario::{Precision, Scenario};
use crate::time::{StepTime, step_time_of};

use super::{Plan, PlanOptions, Stack, TrainCost, changes_training, differences};

/// The model, GPU and calibration every evaluation uses, and a count of estimates.
pub(super) struct Ctx<'a> {
    pub(super) spec: &'a ModelSpec,
    pub(super) gpu: &'a Gpu,
    pub(super) cal: &'a Calibration,
    /// The model's parameter inventory and its share of the scale bound, built once for the
    /// whole search.
    pub(super) inv: ParamInventory,
    pub(super) scale: ModelScale,
    pub(super) estimates: Cell<u32>,
}

impl<'a> Ctx<'a> {
    /// The context of one model on one GPU, no estimates counted yet.
    pub(super) fn new(spec: &'a ModelSpec, gpu: &'a Gpu, cal: &'a Calibration) -> Self {
        Ctx {
            spec,
            gpu,
            cal,
            inv: crate::model::inventory(spec),
            scale: ModelScale::of(spec),
            estimates: Cell::new(0),
        }
    }

    /// Device peak and whether it fits.
    pub(super) fn memory(&self, s: &Scenario) -> (u64, bool, i64, f64, u64) {
        self.estimates.set(self.estimates.get() + 1);
        if self.scale.check(self.spec, self.gpu, s).is_err() {
            // Past the scale bound nothing fits on any GPU (and the formulas are not run there).
            let capacity = self.cal.capacity(self.gpu);
            return (u64::MAX, false, i64::MIN, -100.0, capacity);
        }
        let e = memory_with(self.spec, &self.inv, self.gpu, self.cal, s);
        (
            e.peak_device,
            e.verdict.fits,
            e.verdict.headroom,
            e.verdict.headroom_percent,
            e.verdict.capacity,
        )
    }

    pub(super) fn time(&self, s: &Scenario) -> StepTime {
        step_time_of(self.spec, &self.inv, self.gpu, self.cal, s)
    }

    /// Autocast on this GPU: bf16 where it has bf16 tensor math, fp16 otherwise (T4, V100).
    pub(super) fn half_precision(&self, pure: bool) -> Precision {
        match (self.gpu.has_bf16(), pure) {
            (true, false) => Precision::AmpBf16,
            (true, true) => Precision::Bf16,
            (false, false) => Precision::AmpFp16,
            (false, true) => Precision::Fp16,
        }
    }

    pub(super) fn plan(
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
            runs_on: Stack::running(&s),
            changes_training: changes_training(reference, &s),
            cost,
            scenario: s,
        }
    }
}
