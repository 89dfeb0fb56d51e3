//! Everything one scenario shows: the estimate, what fits, the strategy table and the link.
//!
//! The CLI, the site and the guides all call [`analyze`], so a number printed by one is the
//! number shown by the others.

use serde::Serialize;

use crate::calibration::Calibration;
use crate::catalog::Gpu;
use crate::codec;
use crate::error::ScenarioError;
use crate::estimate::{Estimate, estimate_and_time, resolve};
use crate::fit::{Fit, fit};
use crate::model::ModelSpec;
use crate::scenario::Scenario;
use crate::strategies::{Strategy, strategies_from};
use crate::time::StepTime;

/// The full answer for one scenario.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Analysis {
    pub estimate: Estimate,
    pub fit: Fit,
    pub strategies: Vec<Strategy>,
    /// One optimizer step's time, tokens per second and MFU (default efficiency assumptions).
    pub time: StepTime,
    /// The scenario's share link (a query string without `?`).
    pub link: String,
}

/// Analyzes a scenario with the built-in catalogs and the GPU's calibration.
pub fn analyze(scen: &Scenario) -> Result<Analysis, ScenarioError> {
    let r = resolve(scen)?;
    Ok(analyze_with(&r.name, &r.spec, r.gpu, &r.calibration, scen))
}

/// Analyzes with an explicit model, GPU and calibration (a user's own calibration file, say).
pub fn analyze_with(
    name: &str,
    spec: &ModelSpec,
    gpu: &Gpu,
    cal: &Calibration,
    scen: &Scenario,
) -> Analysis {
    let (estimate, time) = estimate_and_time(spec, gpu, cal, scen);
    let strategies = strategies_from(spec, gpu, cal, scen, &estimate, &time);
    Analysis {
        estimate: Estimate {
            model: name.to_string(),
            ..estimate
        },
        fit: fit(spec, gpu, cal, scen),
        strategies,
        time,
        link: codec::encode(scen),
    }
}
