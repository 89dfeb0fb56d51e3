//! One module per route.

pub mod calculator;
pub mod compare;
pub mod embed;
pub mod not_found;

use std::rc::Rc;

use headroom_core::{Analysis, Scenario};

/// The analysis a page shows, or the sentence that says why there is none.
pub type Outcome = Result<Rc<Analysis>, String>;

pub fn outcome(s: &Scenario) -> Outcome {
    headroom_core::analyze(s)
        .map(Rc::new)
        .map_err(|e| format!("This scenario cannot be estimated: {e}"))
}
