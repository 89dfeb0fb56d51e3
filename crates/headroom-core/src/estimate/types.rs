//! The estimate's result types: components, timeline points, peaks, verdict and the headline
//! byte counts.

use serde::Serialize;

use crate::activations::Saved;

use super::component_ids::ComponentId;
pub use super::labels::{Level, Lifetime, Phase};

pub use crate::confidence::Confidence;

/// One line of the breakdown.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Component {
    pub id: &'static str,
    pub name: String,
    pub bytes: u64,
    pub lifetime: Lifetime,
    /// The phase in which it is largest or allocated.
    pub phase: Phase,
    pub level: Level,
    pub formula: String,
    pub source: String,
    /// Where `source` comes from when it is content/sources.toml's (`[table] key`): the site,
    /// built without that text, shows it from its fetched help file.
    #[serde(skip)]
    pub source_key: (&'static str, &'static str),
    pub confidence: Confidence,
}

/// One point of the step timeline.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TimelinePoint {
    pub phase: Phase,
    pub label: String,
    pub tensors: u64,
    pub allocated: u64,
    pub reserved: u64,
    pub device: u64,
}

/// Peaks at each level and where the tensor peak happens.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Peaks {
    pub tensors: u64,
    pub allocated: u64,
    pub reserved: u64,
    pub device: u64,
    pub phase: Phase,
    pub at: String,
    /// What the tensor peak is made of: the bytes of each component live at that instant
    /// (summing to `tensors`), in display order.
    pub parts: Vec<LivePart>,
}

/// A component's bytes live at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct LivePart {
    pub id: ComponentId,
    pub bytes: u64,
}

/// A scenario's device peak and verdict alone ([`crate::estimate::memory_with`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Memory {
    pub peak_device: u64,
    pub verdict: Verdict,
}

/// Fits or not on the chosen GPU.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    pub gpu: String,
    pub capacity: u64,
    pub fits: bool,
    /// Capacity minus the device-level peak (negative when it does not fit).
    pub headroom: i64,
    pub headroom_percent: f64,
    /// Bytes the scenario's safety margin keeps free: it fits when `headroom >= margin`.
    pub margin: u64,
    /// It fits with less than [`TIGHT_PERCENT`] of the GPU to spare: the runtime constants
    /// (context, allocator slack) are assumed until calibrated, so such a fit is risky.
    pub tight: bool,
    /// Pinned host memory one node needs (per GPU times the node's GPUs).
    pub host_per_node: u64,
    /// The node's host RAM the scenario states (0: unchecked).
    pub host_ram: u64,
    /// Whether that need fits the host RAM (true when unchecked). `fits` requires it.
    pub host_fits: bool,
}

/// Below this much headroom (percent of the GPU's memory) a fit is marked tight.
pub const TIGHT_PERCENT: f64 = 5.0;

/// Parameter counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ParamCounts {
    pub total: u64,
    pub trainable: u64,
    /// Held by one GPU after tensor/pipeline splitting (before ZeRO-3/FSDP sharding).
    pub per_gpu: u64,
}

/// The headline byte counts (the CLI's `bytes` object).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct KeyBytes {
    pub weights: u64,
    pub gradients: u64,
    pub optimizer_states: u64,
    /// One steady decoder layer's saved tensors (parameters excluded), without checkpointing.
    pub activations_per_layer: u64,
    /// Of those, the s x s tensors (eager attention or SDPA's math kernel: probabilities,
    /// their copies, the dropout mask); 0 for the fused kernels.
    pub attention_scores_per_layer: u64,
    /// Of those, what attention keeps apart from the s x s tensors: q, k, v, the output, the
    /// logsumexp and RNG state of a fused kernel.
    pub attention_core_per_layer: u64,
    /// Everything alive after forward and loss beyond weights, gradients, optimizer states and
    /// input ids: saved activations, autocast weight copies, logits if kept, loss buffers.
    pub retained_after_forward: u64,
    pub peak_tensors: u64,
    pub peak_allocated: u64,
    pub peak_reserved: u64,
    pub peak_device: u64,
    /// Pinned host memory for offloaded activations or states, and NVMe bytes.
    pub host: u64,
    pub nvme: u64,
}

/// The full result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Estimate {
    pub model: String,
    pub gpu: String,
    pub parameters: ParamCounts,
    /// How sure the parameter counts are: exact for a modelled architecture, assumed for an
    /// approximate layout (an unknown `model_type`, a model given only by its size; the
    /// reason is among `warnings`).
    pub parameters_confidence: Confidence,
    pub bytes: KeyBytes,
    pub peak: Peaks,
    pub verdict: Verdict,
    pub components: Vec<Component>,
    pub timeline: Vec<TimelinePoint>,
    /// The saved tensors of one decoder layer, for the "why" view.
    pub layer_inventory: Vec<Saved>,
    pub calibrated: bool,
    /// The attention kernel assumed and why ("SDPA, cuDNN kernel: first on sm90 ..."), a short
    /// line for the report.
    pub attention: String,
    /// What fp8 matmuls change (`crate::fp8::describe`), empty without fp8.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub fp8: String,
    /// What context parallelism and packing change (`crate::context::describe`), empty when
    /// both are off.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub context: String,
    /// A multimodal model's images and vision tower (`describe_vision`), empty for a text-only
    /// model.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub vision: String,
    /// The trained multi-token prediction modules (`describe_mtp`), empty when none.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub mtp: String,
    /// What makes the scenario questionable though it can be estimated (a sequence longer than
    /// the model's positions, say), one sentence each.
    pub warnings: Vec<String>,
}
