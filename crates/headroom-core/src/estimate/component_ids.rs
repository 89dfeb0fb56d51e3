//! Every component an estimate can report, and what never changes for each (name, lifetime,
//! phase, level, source, how sure): a table keyed by [`ComponentId`].

use serde::Serialize;

use super::labels::{Level, Lifetime, Phase};

/// Declares the component ids once: the enum and its list in display order.
macro_rules! component_ids {
    ($($id:ident),+ $(,)?) => {
        /// Every component an estimate can report (`Estimate::components` lists those present).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
        #[serde(rename_all = "snake_case")]
        pub enum ComponentId {
            $($id),+
        }

        impl ComponentId {
            /// Every id, in display order.
            pub const ALL: &'static [ComponentId] = &[$(ComponentId::$id),+];
        }
    };
}

component_ids!(
    Weights,
    Gradients,
    OptimizerStates,
    MasterWeights,
    PagedStates,
    Inputs,
    Activations,
    OutsideLayers,
    AutocastCache,
    Logits,
    LossForward,
    LossBackward,
    LayerBackward,
    LayerTransients,
    GradientsInFlight,
    KvCache,
    Vllm,
    ForwardTemporaries,
    OptimizerStep,
    CommBuffers,
    GatheredParams,
    Rounding,
    CublasWorkspace,
    ReservedSlack,
    CudaContext,
    Nccl,
    CudaGraphPool,
    Host,
);

/// Where a component's source text comes from.
#[derive(Debug, Clone, Copy)]
pub(super) enum Src {
    /// The component's line of content/sources.toml (`[component]`, by id).
    Text,
    /// The optimizer's own source (`optimizer::source`).
    Optimizer,
    /// The calibration: the file it was measured into, or the documented defaults.
    Calibration,
}

/// How sure a component is.
#[derive(Debug, Clone, Copy)]
pub(super) enum Sure {
    Exact,
    Assumed,
    /// Calibrated when the calibration was measured, else assumed.
    Runtime,
}

/// What never changes for a component.
pub(super) struct Meta {
    pub(super) id: &'static str,
    pub(super) name: &'static str,
    pub(super) lifetime: Lifetime,
    pub(super) phase: Phase,
    pub(super) level: Level,
    pub(super) source: Src,
    pub(super) sure: Sure,
}

impl ComponentId {
    /// The id as the CLI's JSON, metrics and guides spell it.
    pub fn id(self) -> &'static str {
        self.meta().id
    }

    /// The component with id `id`, if there is one.
    pub fn parse(id: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|c| c.id() == id)
    }

    pub(super) fn meta(self) -> Meta {
        use ComponentId::*;
        use Level::{Allocator, Device, Tensors};
        use Lifetime::{Persistent, Transient};
        let m = |id, name, lifetime, phase, level, source, sure| Meta {
            id,
            name,
            lifetime,
            phase,
            level,
            source,
            sure,
        };
        match self {
            Weights => m(
                "weights",
                "Weights",
                Persistent,
                Phase::Start,
                Tensors,
                Src::Text,
                Sure::Exact,
            ),
            Gradients => m(
                "gradients",
                "Gradients",
                Transient,
                Phase::Backward,
                Tensors,
                Src::Text,
                Sure::Exact,
            ),
            OptimizerStates => m(
                "optimizer_states",
                "Optimizer states",
                Persistent,
                Phase::Start,
                Tensors,
                Src::Optimizer,
                Sure::Exact,
            ),
            MasterWeights => m(
                "master_weights",
                "fp32 master weights and gradient partition",
                Persistent,
                Phase::Start,
                Tensors,
                Src::Text,
                Sure::Exact,
            ),
            PagedStates => m(
                "paged_states",
                "Paged optimizer states (managed memory)",
                Persistent,
                Phase::Start,
                Device,
                Src::Text,
                Sure::Exact,
            ),
            Inputs => m(
                "inputs",
                "Input ids and labels",
                Persistent,
                Phase::Start,
                Tensors,
                Src::Text,
                Sure::Exact,
            ),
            Activations => m(
                "activations",
                "Saved activations (all layers)",
                Transient,
                Phase::Forward,
                Tensors,
                Src::Text,
                Sure::Exact,
            ),
            OutsideLayers => m(
                "outside_layers",
                "RoPE tables, final norm, lm_head input",
                Transient,
                Phase::Forward,
                Tensors,
                Src::Text,
                Sure::Exact,
            ),
            AutocastCache => m(
                "autocast_cache",
                "Autocast 16-bit weight copies",
                Transient,
                Phase::Forward,
                Tensors,
                Src::Text,
                Sure::Exact,
            ),
            Logits => m(
                "logits",
                "Logits",
                Transient,
                Phase::Loss,
                Tensors,
                Src::Text,
                Sure::Exact,
            ),
            LossForward => m(
                "loss_forward",
                "Loss forward (fp32 upcast + log_softmax)",
                Transient,
                Phase::Loss,
                Tensors,
                Src::Text,
                Sure::Exact,
            ),
            LossBackward => m(
                "loss_backward",
                "Loss backward buffers",
                Transient,
                Phase::Backward,
                Tensors,
                Src::Text,
                Sure::Exact,
            ),
            LayerBackward => m(
                "layer_backward",
                "One layer's backward peak above its saved tensors",
                Transient,
                Phase::Backward,
                Tensors,
                Src::Text,
                Sure::Exact,
            ),
            LayerTransients => m(
                "layer_transients",
                "A layer's temporaries and recompute",
                Transient,
                Phase::Backward,
                Tensors,
                Src::Text,
                Sure::Exact,
            ),
            GradientsInFlight => m(
                "gradients_in_flight",
                "Gradients in flight, last hidden state",
                Transient,
                Phase::Backward,
                Tensors,
                Src::Text,
                Sure::Exact,
            ),
            KvCache => m(
                "kv_cache",
                "KV cache returned in training",
                Transient,
                Phase::Forward,
                Tensors,
                Src::Text,
                Sure::Exact,
            ),
            Vllm => m(
                "vllm",
                "vLLM engine (colocated)",
                Persistent,
                Phase::Start,
                Tensors,
                Src::Text,
                Sure::Assumed,
            ),
            ForwardTemporaries => m(
                "forward_temporaries",
                "Forward temporaries (mask, embeddings)",
                Transient,
                Phase::Forward,
                Tensors,
                Src::Text,
                Sure::Exact,
            ),
            OptimizerStep => m(
                "optimizer_step",
                "Optimizer step temporaries",
                Transient,
                Phase::Optimizer,
                Tensors,
                Src::Text,
                Sure::Exact,
            ),
            CommBuffers => m(
                "comm_buffers",
                "Communication buckets",
                Persistent,
                Phase::Backward,
                Tensors,
                Src::Text,
                Sure::Assumed,
            ),
            GatheredParams => m(
                "gathered_params",
                "Gathered (unsharded) parameters",
                Transient,
                Phase::Forward,
                Tensors,
                Src::Text,
                Sure::Assumed,
            ),
            Rounding => m(
                "rounding",
                "Allocator rounding (512 B blocks)",
                Persistent,
                Phase::Start,
                Allocator,
                Src::Text,
                Sure::Exact,
            ),
            CublasWorkspace => m(
                "cublas_workspace",
                "cuBLAS workspaces",
                Persistent,
                Phase::Forward,
                Allocator,
                Src::Text,
                Sure::Runtime,
            ),
            ReservedSlack => m(
                "reserved_slack",
                "Allocator slack (reserved - allocated)",
                Transient,
                Phase::Backward,
                Allocator,
                Src::Calibration,
                Sure::Runtime,
            ),
            CudaContext => m(
                "cuda_context",
                "CUDA context",
                Persistent,
                Phase::Start,
                Device,
                Src::Calibration,
                Sure::Runtime,
            ),
            Nccl => m(
                "nccl",
                "NCCL buffers",
                Persistent,
                Phase::Start,
                Device,
                Src::Calibration,
                Sure::Runtime,
            ),
            CudaGraphPool => m(
                "cuda_graph_pool",
                "CUDA graph private pool",
                Persistent,
                Phase::Optimizer,
                Allocator,
                Src::Text,
                Sure::Assumed,
            ),
            Host => m(
                "host",
                "Host (CPU) memory, per GPU",
                Persistent,
                Phase::Start,
                Level::Host,
                Src::Text,
                Sure::Assumed,
            ),
        }
    }
}

#[cfg(all(test, feature = "source-text"))]
mod source_tests {
    use super::{ComponentId, Src};
    use crate::catalog::{embedded::SOURCES, source_text};

    /// content/sources.toml has a line for every component that reads one, and no other.
    #[test]
    fn every_component_source_has_a_line_and_every_line_a_component() {
        for c in ComponentId::ALL {
            let meta = c.meta();
            if matches!(meta.source, Src::Text) {
                assert!(!source_text("component", meta.id).is_empty(), "{}", meta.id);
            }
        }
        for (key, _) in SOURCES {
            if let Some(id) = key.strip_prefix("component.") {
                let c = ComponentId::parse(id).unwrap_or_else(|| panic!("{key}: no component"));
                assert!(matches!(c.meta().source, Src::Text), "{key}: not read");
            }
        }
        for o in crate::scenario::Optimizer::ALL {
            let key = crate::optimizer::source_key(*o);
            assert!(!source_text("optimizer", key).is_empty(), "{}", o.id());
        }
    }
}
