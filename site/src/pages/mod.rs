//! One module per route.

pub mod calculator;
pub mod calibration;
pub mod catalog;
pub mod compare;
pub mod embed;
pub mod examples;
pub mod not_found;

use std::rc::Rc;

use headroom_core::{Analysis, Scenario};

/// The analysis a page shows, or the sentence that says why there is none.
pub type Outcome = Result<Rc<Analysis>, String>;

/// Analyzes a scenario with the built-in calibration, with what fits when the page shows it
/// (`fit`), recording how long the core took (`data-analyze-ms` on `<body>`, read by the budget
/// script next to the whole update's time). The strategy table is the worker's
/// (`components/strategies.rs`): never computed here.
pub fn outcome(s: &Scenario, fit: bool) -> Outcome {
    outcome_with(s, None, fit)
}

/// [`outcome`] with the user's own calibration file when it is for the scenario's GPU (the
/// built-in calibration, or the defaults, otherwise).
pub fn outcome_with(
    s: &Scenario,
    user: Option<&crate::calibration_state::UserCalibration>,
    fit: bool,
) -> Outcome {
    let started = crate::dom::now_ms();
    let own = user.and_then(|u| u.for_gpu(&s.gpu));
    let result = headroom_core::analysis::analyze_without_table(s, fit, own)
        .map(Rc::new)
        .map_err(|e| format!("This scenario cannot be estimated: {e}"));
    crate::dom::mark_analyze(crate::dom::now_ms() - started);
    result
}
