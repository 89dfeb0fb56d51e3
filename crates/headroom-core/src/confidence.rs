//! How sure a number is: exact, calibrated on a GPU, or assumed. Shared by the estimate, the
//! time model and their parts.

use serde::Serialize;

/// How sure a number is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Confidence {
    /// Follows from shapes and dtypes; checked against real PyTorch where covered.
    Exact,
    /// Measured on this GPU by `calibrate`.
    Calibrated,
    /// A documented default or a modelling assumption.
    Assumed,
}

impl Confidence {
    /// The id the JSON and the page's classes use.
    pub fn id(self) -> &'static str {
        match self {
            Confidence::Exact => "exact",
            Confidence::Calibrated => "calibrated",
            Confidence::Assumed => "assumed",
        }
    }
}
