//! The labels every part of the estimate shares: how long a component lives, the phase of
//! the step and the level it is counted at.

use serde::Serialize;

/// Whether a component lives all step long or only for part of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Lifetime {
    Persistent,
    Transient,
}

impl Lifetime {
    /// The id the JSON and the page's classes use.
    pub fn id(self) -> &'static str {
        match self {
            Lifetime::Persistent => "persistent",
            Lifetime::Transient => "transient",
        }
    }
}

/// A phase of one training step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Start,
    Forward,
    Loss,
    Backward,
    Optimizer,
}

impl Phase {
    pub fn label(self) -> &'static str {
        match self {
            Phase::Start => "step start",
            Phase::Forward => "forward",
            Phase::Loss => "loss",
            Phase::Backward => "backward",
            Phase::Optimizer => "optimizer step",
        }
    }
}

/// The level a component is counted at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// Live tensor bytes (`torch.cuda.max_memory_allocated`).
    Tensors,
    /// Allocator overheads within `max_memory_allocated` / `max_memory_reserved`.
    Allocator,
    /// Outside PyTorch's allocator: visible to nvidia-smi only.
    Device,
    /// Not on the GPU: pinned host (CPU) memory for offloaded states and activations.
    Host,
}

impl Level {
    /// The id the JSON and the page use.
    pub fn id(self) -> &'static str {
        match self {
            Level::Tensors => "tensors",
            Level::Allocator => "allocator",
            Level::Device => "device",
            Level::Host => "host",
        }
    }
}
