//! Host memory: `save_on_cpu`'s pinned copies of offloaded activations.

use crate::scenario::LayerPlan;

use super::step::Step;

/// Pinned host bytes of offloaded activations: each save copied, pinned blocks rounded up to a
/// power of two by the caching host allocator. A checkpointed layer saves only its input (the
/// rest is recomputed in backward, on the GPU), so only that goes to the host.
pub(super) fn offloaded_activations(s: &Step) -> u64 {
    if !s.offload {
        return 0;
    }
    let full_layer: u64 = s
        .dense
        .iter()
        .map(|x| x.elements * x.dtype.bytes())
        .map(u64::next_power_of_two)
        .sum();
    let selective: u64 = full_layer.saturating_sub(s.attention_scores);
    let per_layer = |i: u64| match s.plan(i) {
        LayerPlan::Saved => full_layer,
        LayerPlan::Checkpointed => s.ckpt_input.next_power_of_two(),
        LayerPlan::Selective => selective,
    };
    (0..s.layers).map(per_layer).sum::<u64>() * s.in_flight
}
