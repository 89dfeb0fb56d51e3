//! One module per route.

pub mod calculator;
pub mod compare;
pub mod embed;
pub mod not_found;

use std::rc::Rc;

use headroom_core::{Analysis, Scenario};

/// The analysis a page shows, or the sentence that says why there is none.
pub type Outcome = Result<Rc<Analysis>, String>;

/// Analyzes a scenario, recording how long the core took (`data-analyze-ms` on `<body>`, read
/// by the budget script next to the whole update's time).
pub fn outcome(s: &Scenario) -> Outcome {
    let started = crate::dom::now_ms();
    let result = headroom_core::analyze(s)
        .map(Rc::new)
        .map_err(|e| format!("This scenario cannot be estimated: {e}"));
    crate::dom::mark_analyze(crate::dom::now_ms() - started);
    result
}
