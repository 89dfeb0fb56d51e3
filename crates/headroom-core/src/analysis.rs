//! Everything one scenario shows: the estimate, the step time, the link, and what fits and the
//! strategy table when the caller shows them.
//!
//! The CLI, the site and the guides all assemble their [`Analysis`] here ([`analyze`],
//! [`analyze_only`] or [`analyze_with`]), so a number printed by one is the number shown by the
//! others. The site's page uses [`analyze_without_table`] and has its on-demand worker compute
//! the strategy table (`strategies::wire`), which keeps the table's code out of its download.
//!
//! The estimate and the step time share one preparation (`estimate::estimate_and_time`: the
//! parameter inventory, model states and a layer's saved bytes built once), and the strategy table
//! starts from them (`strategies_from`).

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

/// What to compute beyond the estimate, the step time and the link: each costs many estimates
/// (what fits about 4·log₂ of the range, the strategy table one estimate and one step time per
/// row), so callers ask only for what they show.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct What {
    pub fit: bool,
    pub strategies: bool,
}

impl What {
    /// The estimate, step time and link only.
    pub const ESTIMATE: What = What {
        fit: false,
        strategies: false,
    };
    /// Also what fits.
    pub const FIT: What = What {
        fit: true,
        strategies: false,
    };
    /// Also the strategy table.
    pub const STRATEGIES: What = What {
        fit: false,
        strategies: true,
    };
    /// Everything.
    pub const ALL: What = What {
        fit: true,
        strategies: true,
    };
}

/// The answer for one scenario.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Analysis {
    pub estimate: Estimate,
    /// What fits; `None` when not asked for ([`What::fit`]). Inside, `None` fields mean nothing
    /// fits.
    pub fit: Option<Fit>,
    /// The strategy table; `None` when not asked for ([`What::strategies`]).
    pub strategies: Option<Vec<Strategy>>,
    /// One optimizer step's time, tokens per second and MFU (the calibration's measured rates
    /// where it has them, else the default efficiency assumptions).
    pub time: StepTime,
    /// The scenario's share link (a query string without `?`).
    pub link: String,
}

/// Analyzes a scenario with the built-in catalogs and the GPU's calibration: everything.
pub fn analyze(scen: &Scenario) -> Result<Analysis, ScenarioError> {
    analyze_only(scen, What::ALL, None)
}

/// Analyzes a scenario, computing only `what`, with `own` calibration when given (a user's own
/// calibration file for the scenario's GPU, say) and the GPU's built-in one otherwise.
pub fn analyze_only(
    scen: &Scenario,
    what: What,
    own: Option<&Calibration>,
) -> Result<Analysis, ScenarioError> {
    let r = resolve(scen)?;
    let cal = own.unwrap_or(&r.calibration);
    Ok(analyze_with(&r.name, &r.spec, r.gpu, cal, scen, what))
}

/// Analyzes with an explicit model, GPU and calibration, computing only `what`.
pub fn analyze_with(
    name: &str,
    spec: &ModelSpec,
    gpu: &Gpu,
    cal: &Calibration,
    scen: &Scenario,
    what: What,
) -> Analysis {
    let mut a = without_table(name, spec, gpu, cal, scen, what.fit);
    if what.strategies {
        a.strategies = Some(strategies_from(spec, gpu, cal, scen, &a.estimate, &a.time));
    }
    a
}

/// [`analyze_only`] without the strategy table (`strategies` is `None`): for a caller that has
/// the table computed elsewhere (the site's page asks its on-demand worker), so the table's code
/// is not linked into its download.
pub fn analyze_without_table(
    scen: &Scenario,
    fit: bool,
    own: Option<&Calibration>,
) -> Result<Analysis, ScenarioError> {
    let r = resolve(scen)?;
    let cal = own.unwrap_or(&r.calibration);
    Ok(without_table(&r.name, &r.spec, r.gpu, cal, scen, fit))
}

/// The estimate, the step time, the link and (`fit`) what fits.
fn without_table(
    name: &str,
    spec: &ModelSpec,
    gpu: &Gpu,
    cal: &Calibration,
    scen: &Scenario,
    with_fit: bool,
) -> Analysis {
    // The estimate and the step time share one preparation (inventory, model states).
    let (estimate, time) = estimate_and_time(spec, gpu, cal, scen);
    let estimate = Estimate {
        model: name.to_string(),
        ..estimate
    };
    Analysis {
        fit: with_fit.then(|| fit(spec, gpu, cal, scen)),
        strategies: None,
        estimate,
        time,
        link: codec::encode(scen),
    }
}
