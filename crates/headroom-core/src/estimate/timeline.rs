//! The step's timeline as it is built: live tensor bytes at each point, split by the component
//! that holds them, with the gradients each point holds so that gradient accumulation can
//! replay the micro-batch.

use std::fmt;

use super::component_ids::ComponentId;
use super::labels::Phase;

/// Where a timeline point is, kept as data while the step is walked and written out only when
/// the timeline is shown: the planner's estimates never format their few hundred labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum At {
    Text(&'static str),
    /// Layer `n` (counted from 1) running its forward.
    LayerForward(u64),
    AfterLayer(u64),
    LayerBackward(u64),
    AfterLayerBackward(u64),
}

/// A point's label: where it is, and whether it is the first micro-batch's point repeated by
/// the micro-batches after it (gradient accumulation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Label {
    pub at: At,
    pub repeated: bool,
}

impl From<&'static str> for Label {
    fn from(text: &'static str) -> Self {
        At::Text(text).into()
    }
}

impl From<At> for Label {
    fn from(at: At) -> Self {
        Label {
            at,
            repeated: false,
        }
    }
}

impl fmt::Display for Label {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.repeated {
            f.write_str("next micro-batches: ")?;
        }
        match self.at {
            At::Text(t) => f.write_str(t),
            At::LayerForward(n) => write!(f, "layer {n} forward"),
            At::AfterLayer(n) => write!(f, "after layer {n}"),
            At::LayerBackward(n) => write!(f, "layer {n} backward"),
            At::AfterLayerBackward(n) => write!(f, "after layer {n} backward"),
        }
    }
}

/// Live tensor bytes at one instant, per component (indexed by `ComponentId as usize`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Live([u64; ComponentId::ALL.len()]);

impl Default for Live {
    fn default() -> Self {
        Live([0; ComponentId::ALL.len()])
    }
}

impl Live {
    // In the site's wasm, `with` and `less` stay out of line, so that the phases' many sums
    // stay small in the bundle; natively they inline, so the planner's thousands of estimates
    // do not copy the whole array through every call.

    /// These bytes plus `bytes` of `id`.
    #[must_use]
    #[cfg_attr(target_arch = "wasm32", inline(never))]
    pub fn with(mut self, id: ComponentId, bytes: u64) -> Self {
        self.0[id as usize] += bytes;
        self
    }

    /// These bytes less `bytes` of `id` (which holds them).
    #[must_use]
    #[cfg_attr(target_arch = "wasm32", inline(never))]
    pub fn less(mut self, id: ComponentId, bytes: u64) -> Self {
        self.0[id as usize] -= bytes;
        self
    }

    pub fn get(&self, id: ComponentId) -> u64 {
        self.0[id as usize]
    }

    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }

    /// The components holding bytes, in display order.
    pub fn parts(&self) -> Vec<(ComponentId, u64)> {
        ComponentId::ALL
            .iter()
            .map(|&id| (id, self.get(id)))
            .filter(|&(_, b)| b > 0)
            .collect()
    }

    /// Each component's larger value of the two.
    #[must_use]
    pub fn max(mut self, other: &Live) -> Self {
        for (a, b) in self.0.iter_mut().zip(other.0) {
            *a = (*a).max(b);
        }
        self
    }
}

#[derive(Default)]
pub(super) struct Timeline {
    pub points: Vec<(Phase, Label, u64)>,
    /// Per point, what its bytes are made of.
    pub parts: Vec<Live>,
    /// Per point, the accumulated gradients its bytes include (`grads_now` when pushed).
    held: Vec<u64>,
    /// Gradients accumulated so far in this micro-batch's backward.
    pub grads_now: u64,
}

impl Timeline {
    /// An empty timeline with room for `points` points (the schedule knows about how many).
    pub fn with_capacity(points: usize) -> Self {
        Timeline {
            points: Vec::with_capacity(points),
            parts: Vec::with_capacity(points),
            held: Vec::with_capacity(points),
            grads_now: 0,
        }
    }

    pub fn push(&mut self, phase: Phase, label: impl Into<Label>, live: Live) {
        self.points.push((phase, label.into(), live.total()));
        self.parts.push(live);
        self.held.push(self.grads_now);
    }

    /// Gradient accumulation: the micro-batches after the first run the same forward, loss and
    /// backward while the whole gradient from the earlier ones stays allocated (`zero_grad`
    /// runs only after the optimizer step; AccumulateGrad adds each new gradient into it in
    /// place). Appends that pass: each point of the first micro-batch (from `first`) with the
    /// gradients it held replaced by all of them.
    pub fn accumulated_pass(&mut self, first: usize, gradients: u64) {
        use ComponentId::{Gradients, GradientsInFlight};
        for j in first..self.points.len() {
            let (phase, label, _) = self.points[j];
            let live = self.parts[j];
            // Its gradients beyond those it held (lm_head's, just computed) are new ones, in
            // flight until AccumulateGrad adds them into the held ones.
            let fresh = live.get(Gradients) - self.held[j];
            let live = live
                .less(Gradients, fresh + self.held[j])
                .with(Gradients, gradients)
                .with(GradientsInFlight, fresh);
            let label = Label {
                repeated: true,
                ..label
            };
            self.points.push((phase, label, live.total()));
            self.parts.push(live);
            self.held.push(gradients);
        }
    }
}
