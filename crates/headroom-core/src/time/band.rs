//! How far measured steps fell from the model's: a band around a step's time, from the spread of
//! the runs the model was checked against, wider where the GPU has no calibration. A band, not
//! an error bar: eight in ten of those runs fell inside it.
//!
//! The band is the 10th to 90th percentiles of the committed runs on calibrated GPUs, wider below
//! without a calibration (from the published A100 rows). The CLI shows it.

use crate::confidence::Confidence;

use super::StepTime;

/// Measured over modelled step time, 10th and 90th percentiles, over the 52 step times the
/// project measured on its calibrated H100 and H200 (tests/reference/test_step_time.py, both
/// halves; that test recomputes them). FITTED: a statement of the model's spread, not a
/// correction of its figure.
pub const CALIBRATED_BAND: (f64, f64) = (0.80, 1.18);

/// The same without a calibration: the low end is the 10th percentile over the 75 published
/// step times of fine-tuning loops on A100s (tests/reference/test_published_speed.py
/// recomputes it: 2023-24 software stacks ran up to 1.9x faster than the model); the high end is
/// the calibrated one, as none of those rows was more than 2% slower than the model. FITTED, as
/// [`CALIBRATED_BAND`].
pub const ASSUMED_BAND: (f64, f64) = (0.55, 1.18);

/// A step's band: its seconds and its throughput, low to high.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Band {
    pub step_seconds: (f64, f64),
    pub tokens_per_second: (f64, f64),
    /// Whether the matmuls ran on a measured curve (the narrower band).
    pub calibrated: bool,
}

impl StepTime {
    /// The band around this step's time: [`CALIBRATED_BAND`] where its matmul terms come from
    /// a calibration, [`ASSUMED_BAND`] otherwise.
    pub fn band(&self) -> Band {
        let calibrated = self
            .term("forward")
            .is_some_and(|t| t.confidence == Confidence::Calibrated);
        let (low, high) = if calibrated {
            CALIBRATED_BAND
        } else {
            ASSUMED_BAND
        };
        Band {
            step_seconds: (self.step_seconds * low, self.step_seconds * high),
            tokens_per_second: (self.tokens_per_second / high, self.tokens_per_second / low),
            calibrated,
        }
    }
}
