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

/// The band's multiples of a step's time: [`CALIBRATED_BAND`] or [`ASSUMED_BAND`].
pub const fn band_factors(calibrated: bool) -> (f64, f64) {
    if calibrated {
        CALIBRATED_BAND
    } else {
        ASSUMED_BAND
    }
}

/// A step's band: its seconds and its throughput, low to high.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Band {
    pub step_seconds: (f64, f64),
    pub tokens_per_second: (f64, f64),
    /// Whether the matmuls ran on a measured curve (the narrower band).
    pub calibrated: bool,
}

/// How many of `tokens_per_second` (fastest first) the band cannot tell from the first: those
/// whose band, `(low, high)` as multiples of a step's time, overlaps the first's. The planner's
/// ranking says so rather than claim an order the measured runs do not support.
pub fn indistinct_from_first(
    tokens_per_second: impl IntoIterator<Item = f64>,
    (low, high): (f64, f64),
) -> usize {
    let mut it = tokens_per_second.into_iter();
    let Some(first) = it.next() else {
        return 0;
    };
    1 + it.take_while(|tps| tps * high / low >= first).count()
}

impl StepTime {
    /// The band around this step's time: [`CALIBRATED_BAND`] where its matmul terms come from
    /// a calibration, [`ASSUMED_BAND`] otherwise.
    pub fn band(&self) -> Band {
        let calibrated = self
            .term("forward")
            .is_some_and(|t| t.confidence == Confidence::Calibrated);
        let (low, high) = band_factors(calibrated);
        Band {
            step_seconds: (self.step_seconds * low, self.step_seconds * high),
            tokens_per_second: (self.tokens_per_second / high, self.tokens_per_second / low),
            calibrated,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With the calibrated band (0.80-1.18x), a plan is told apart from the first only below
    /// 0.80/1.18 = 67.8% of its speed.
    #[test]
    fn plans_within_the_band_of_the_first_are_counted() {
        let b = CALIBRATED_BAND;
        assert_eq!(indistinct_from_first([], b), 0);
        assert_eq!(indistinct_from_first([100.0], b), 1);
        assert_eq!(indistinct_from_first([100.0, 90.0, 68.0, 67.0, 66.0], b), 3);
        // The assumed band is wider: 0.55/1.18 = 46.6%.
        assert_eq!(
            indistinct_from_first([100.0, 60.0, 47.0, 46.0], ASSUMED_BAND),
            3
        );
    }
}
