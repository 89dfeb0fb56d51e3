//! How a setup differs from the scenario: the fields it changes, and whether it changes what
//! is trained.

use crate::scenario::{Method, Optimizer, Scenario};

use super::Change;

/// Whether `s` trains something other than `reference`: the weights' precision (fp32 and the
/// autocast modes keep fp32 weights and states, so switching among them does not count), the
/// optimizer's algorithm or state precision (AdamW's implementations are one algorithm: for-loop,
/// foreach and fused compute the same update; paging 8-bit states moves them, it does not
/// change them), the method or LoRA settings, or the tokens of an optimizer step. How the same
/// training runs (checkpointing, offload, sharding, parallelism, the fused loss) does not count.
/// The one rule: the strategy table and the planner both ask it.
pub fn changes_training(reference: &Scenario, s: &Scenario) -> bool {
    let family = |o: Optimizer| match o {
        Optimizer::AdamW | Optimizer::AdamWForLoop | Optimizer::AdamWFused => Optimizer::AdamW,
        Optimizer::PagedAdamW8bit => Optimizer::AdamW8bit,
        other => other,
    };
    let tokens = |x: &Scenario| x.global_batch() * x.seq as u64;
    s.method != reference.method
        || (s.method != Method::Full && s.lora != reference.lora)
        || family(s.optimizer) != family(reference.optimizer)
        || s.precision.param_dtype() != reference.precision.param_dtype()
        || tokens(s) != tokens(reference)
}

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
