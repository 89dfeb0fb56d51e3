//! Where one GPU sits in the parallel layout: its tensor, pipeline and data-parallel degrees and
//! the decoder layers its pipeline stage holds.

use crate::model::{ModelSpec, ParamInventory, ParamTensor, Scope};
use crate::scenario::Scenario;

/// One GPU's share of the model.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Placement {
    pub tp: u64,
    pub dp: u64,
    /// Decoder layers on this GPU (its pipeline stage).
    pub layers_local: u64,
    /// Of those, layers with a dense MLP and with a sparse (MoE) one.
    pub dense_local: u64,
    pub sparse_local: u64,
    /// Of those, layers with linear attention (Qwen3-Next), in the model's proportion.
    pub linear_local: u64,
}

impl Placement {
    pub fn new(spec: &ModelSpec, inv: &ParamInventory, scen: &Scenario) -> Self {
        let layers_local = spec.layers.div_ceil(scen.parallel.pipeline as u64);
        let dense_local = (inv.dense_layers * layers_local).div_ceil(spec.layers);
        Placement {
            tp: scen.parallel.tensor as u64,
            dp: scen.data_parallel().max(1) as u64,
            layers_local,
            dense_local,
            sparse_local: layers_local - dense_local.min(layers_local),
            linear_local: (inv.linear_layers * layers_local).div_ceil(spec.layers),
        }
    }

    /// How many times a tensor of `scope` occurs on this GPU.
    pub fn count(&self, scope: Scope) -> u64 {
        match scope {
            Scope::Model => 1,
            Scope::Layer => self.layers_local,
            Scope::DenseLayer => self.dense_local,
            Scope::SparseLayer => self.sparse_local,
            Scope::AttentionLayer => self.layers_local - self.linear_local.min(self.layers_local),
            Scope::LinearAttentionLayer => self.linear_local,
        }
    }

    /// Elements of one copy of `t` on this GPU: TP splits matrices (and the vocabulary), not
    /// vectors.
    pub fn share(&self, t: &ParamTensor) -> u64 {
        let split = if t.d_in > 1 && t.d_out > 1 {
            self.tp
        } else {
            1
        };
        t.numel().div_ceil(split)
    }

    /// `bytes` split evenly over the data-parallel ranks (ZeRO and FSDP partitions).
    pub fn shard(&self, bytes: u64) -> u64 {
        bytes.div_ceil(self.dp)
    }
}
