//! How a setup differs from the scenario: the fields it changes, and whether it changes what
//! is trained.

use crate::scenario::Scenario;

use super::Change;

/// Fields of `s` that differ from `base`, keyed and written as in links (the codec's own
/// field values, so a change reads like the link that makes it).
pub fn differences(base: &Scenario, s: &Scenario) -> Vec<Change> {
    crate::codec::KEYS
        .iter()
        .filter(|k| !matches!(**k, "v" | "cfg" | "model" | "gpu" | "gpus"))
        .filter_map(|&field| {
            let from = crate::codec::field_value(base, field)?;
            let to = crate::codec::field_value(s, field)?;
            (from != to).then_some(Change { field, from, to })
        })
        .collect()
}
