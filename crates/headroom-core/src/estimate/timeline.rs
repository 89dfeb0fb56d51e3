//! The step's timeline as it is built: live tensor bytes at each point, with the gradients
//! each point holds so that gradient accumulation can replay the micro-batch.

use super::types::Phase;

#[derive(Default)]
pub(super) struct Timeline {
    pub points: Vec<(Phase, String, u64)>,
    /// Per point, the accumulated gradients its bytes include (`grads_now` when pushed).
    held: Vec<u64>,
    /// Gradients accumulated so far in this micro-batch's backward.
    pub grads_now: u64,
}

impl Timeline {
    pub fn push(&mut self, phase: Phase, label: impl Into<String>, tensors: u64) {
        self.points.push((phase, label.into(), tensors));
        self.held.push(self.grads_now);
    }

    /// Gradient accumulation: the micro-batches after the first run the same forward, loss and
    /// backward while the whole gradient from the earlier ones stays allocated (`zero_grad`
    /// runs only after the optimizer step; AccumulateGrad adds each new gradient into it in
    /// place). Appends that pass: each point of the first micro-batch (from `first`) with the
    /// gradients it held replaced by all of them.
    pub fn accumulated_pass(&mut self, first: usize, gradients: u64) {
        for j in first..self.points.len() {
            let (phase, label, tensors) = self.points[j].clone();
            let held = self.held[j];
            self.points.push((
                phase,
                format!("next micro-batches: {label}"),
                tensors.saturating_sub(held) + gradients,
            ));
            self.held.push(gradients);
        }
    }
}
