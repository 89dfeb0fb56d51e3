//! How a setup differs from the scenario: the fields it changes, and whether it changes what
//! is trained.

use crate::scenario::{Method, Optimizer, Scenario};

use super::Change;

/// Whether `s` trains something other than `reference`: whether the sequence of weights it
/// produces can differ, beyond floating-point reordering. The one rule for the planner, the
/// ladder and the strategy table.
///
/// It does:
/// - the weights' precision (pure bf16 rounds every update; fp32 and the autocast modes keep
///   fp32 weights and states, so switching among them does not count);
/// - the optimizer's algorithm or its state precision (AdamW to 8-bit AdamW quantizes the
///   moments, and 8-bit AdamW back to a 32-bit AdamW stops quantizing them; Lion, Adafactor,
///   Adam-mini and SGD are other updates);
/// - the method or the LoRA settings (other parameters are trained);
/// - the tokens of an optimizer step (another batch is another gradient);
/// - fp8 matmuls or their recipe (the matmuls' operands are rounded to fp8);
/// - int8 activation compression (backward reads rounded activations);
/// - packing on or off (documents stop attending to the others in their row).
///
/// It does not: the same math run elsewhere or in another order. AdamW's for-loop, foreach and
/// fused kernels compute one update; paged 8-bit AdamW is 8-bit AdamW with its states in
/// unified memory; checkpointing recomputes the same activations; offload, sharding (ZeRO,
/// FSDP), tensor, pipeline and context parallelism, the fused loss, SDPA and allocator settings move
/// or split the same tensors; more GPUs with less accumulation keep the global batch.
pub fn changes_training(reference: &Scenario, s: &Scenario) -> bool {
    let family = |o: Optimizer| match o {
        Optimizer::AdamW | Optimizer::AdamWForLoop | Optimizer::AdamWFused => Optimizer::AdamW,
        // Paging moves the 8-bit states; it does not change them.
        Optimizer::PagedAdamW8bit => Optimizer::AdamW8bit,
        other => other,
    };
    // In u128: the largest global batch times the longest sequence passes u64 (found by
    // tests/properties.rs: 65536 x 10^6 accumulation x 1024 GPUs x 274878 tokens).
    let tokens = |x: &Scenario| u128::from(x.global_batch()) * u128::from(x.seq);
    s.method != reference.method
        || (s.method != Method::Full && s.lora != reference.lora)
        || family(s.optimizer) != family(reference.optimizer)
        || s.precision.param_dtype() != reference.precision.param_dtype()
        || tokens(s) != tokens(reference)
        || s.fp8 != reference.fp8
        || s.packing != reference.packing
        || s.act_int8 != reference.act_int8
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
