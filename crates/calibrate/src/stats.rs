//! Summary statistics of repeated measurements: median, quartiles and range.

pub use headroom_core::calibration::schema::{Measured, median, quantile};

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
