//! The search space: what the planner varies, and the default space it searches.

use serde::Serialize;

use crate::scenario::{
    Checkpointing, DataParallel, LossImpl, Method, Offload, Optimizer, Precision,
};

/// A change of the training recipe (tried only when the user allows changes to the training):
/// `None` keeps the scenario's value.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Recipe {
    pub id: &'static str,
    pub precision: Option<Precision>,
    pub optimizer: Option<Optimizer>,
    pub method: Option<Method>,
}

/// What the planner varies. Settings that cost no speed in the time model and only save memory
/// are applied to every plan rather than searched (SDPA attention instead of eager, the
/// allocator's expandable segments, no CUDA-graph pool), and sequence parallelism is on
/// whenever tensor parallelism is (Megatron's recommended pairing; it only divides the
/// activations that tensor parallelism replicates).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SearchSpace {
    pub data_parallel: &'static [DataParallel],
    /// (optimizer offload, parameter offload) pairs; a pair the strategy cannot do is skipped.
    pub offload: &'static [(Offload, Offload)],
    pub checkpointing: &'static [Checkpointing],
    /// Tensor-parallel degrees, kept within one node (the time model's `gpus_per_node`) and to
    /// degrees dividing the attention and key-value heads (Megatron's requirement).
    pub tensor_parallel: &'static [u32],
    pub loss: &'static [LossImpl],
    /// `save_on_cpu` around the forward: tried only without checkpointing, since with it the
    /// only saved tensors left are the checkpoints themselves.
    pub offload_activations: &'static [bool],
    /// Largest micro-batch tried (powers of two up to this).
    pub max_micro_batch: u32,
    /// Recipes tried with `allow_training_changes`, each on top of every combination above.
    pub recipes: &'static [Recipe],
}

/// The default search space (issue 6: under 15 ms natively and 50 ms in the browser).
pub const DEFAULT_SPACE: SearchSpace = SearchSpace {
    data_parallel: &[
        DataParallel::Ddp,
        DataParallel::Zero1,
        DataParallel::Zero2,
        DataParallel::Zero3,
        DataParallel::Fsdp,
    ],
    offload: &[
        (Offload::None, Offload::None),
        (Offload::Cpu, Offload::None),
        (Offload::Cpu, Offload::Cpu),
    ],
    checkpointing: &[
        Checkpointing::None,
        Checkpointing::Selective,
        Checkpointing::Every(2),
        Checkpointing::Full,
    ],
    tensor_parallel: &[1, 2, 4, 8],
    loss: &[LossImpl::Hf, LossImpl::Fused],
    offload_activations: &[false, true],
    max_micro_batch: 1024,
    recipes: &[
        Recipe {
            id: "bf16",
            precision: Some(Precision::Bf16),
            optimizer: None,
            method: None,
        },
        Recipe {
            id: "adamw8bit",
            precision: None,
            optimizer: Some(Optimizer::AdamW8bit),
            method: None,
        },
        Recipe {
            id: "bf16+adamw8bit",
            precision: Some(Precision::Bf16),
            optimizer: Some(Optimizer::AdamW8bit),
            method: None,
        },
        Recipe {
            id: "paged-adamw8bit",
            precision: None,
            optimizer: Some(Optimizer::PagedAdamW8bit),
            method: None,
        },
        Recipe {
            id: "adafactor",
            precision: None,
            optimizer: Some(Optimizer::Adafactor),
            method: None,
        },
        Recipe {
            id: "lora",
            precision: None,
            optimizer: None,
            method: Some(Method::Lora),
        },
        Recipe {
            id: "qlora",
            precision: None,
            optimizer: None,
            method: Some(Method::Qlora),
        },
    ],
};
