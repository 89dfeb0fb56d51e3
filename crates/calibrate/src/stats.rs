//! Summary statistics of repeated measurements: median, quartiles and range.

use serde::{Deserialize, Serialize};

/// One measured quantity: how it was measured, how often, and its median with the spread.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measured {
    /// What the numbers are in (`bytes`, `tflops`, `gb_per_s`).
    pub unit: String,
    /// How it was measured, in one sentence.
    pub method: String,
    pub reps: u32,
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// First and third quartiles (linear interpolation between order statistics).
    pub q1: f64,
    pub q3: f64,
}

impl Measured {
    /// Summarizes `samples`; `None` when there are none or one is not finite.
    pub fn from_samples(unit: &str, method: &str, samples: &[f64]) -> Option<Self> {
        if samples.is_empty() || samples.iter().any(|x| !x.is_finite()) {
            return None;
        }
        let mut s = samples.to_vec();
        s.sort_by(f64::total_cmp);
        Some(Measured {
            unit: unit.to_string(),
            method: method.to_string(),
            reps: u32::try_from(s.len()).unwrap_or(u32::MAX),
            median: quantile(&s, 0.5),
            min: s[0],
            max: s[s.len() - 1],
            q1: quantile(&s, 0.25),
            q3: quantile(&s, 0.75),
        })
    }

    /// Interquartile range relative to the median (0 when the median is 0).
    pub fn relative_spread(&self) -> f64 {
        if self.median == 0.0 {
            0.0
        } else {
            (self.q3 - self.q1) / self.median.abs()
        }
    }
}

/// The `q`-quantile of sorted, non-empty `s`, interpolating linearly.
pub fn quantile(s: &[f64], q: f64) -> f64 {
    let pos = q * (s.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    let frac = pos - lo as f64;
    s[lo] + (s[hi] - s[lo]) * frac
}

/// The median of any samples (sorted here); 0 for none.
pub fn median(samples: &[f64]) -> f64 {
    if samples.is_empty() {
        return 0.0;
    }
    let mut s = samples.to_vec();
    s.sort_by(f64::total_cmp);
    quantile(&s, 0.5)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // In tests a panic is the failure report.
mod tests {
    use super::*;

    #[test]
    fn summary_of_known_samples() {
        let m = Measured::from_samples("bytes", "test", &[5.0, 1.0, 3.0, 2.0, 4.0]).unwrap();
        assert_eq!(
            (m.median, m.min, m.max, m.q1, m.q3, m.reps),
            (3.0, 1.0, 5.0, 2.0, 4.0, 5)
        );
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(Measured::from_samples("x", "y", &[]).is_none());
        assert!(Measured::from_samples("x", "y", &[f64::NAN]).is_none());
    }
}
