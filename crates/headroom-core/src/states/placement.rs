//! Where one GPU sits in the parallel layout: its tensor, pipeline and data-parallel degrees and
//! the decoder layers its pipeline stage holds.

use crate::model::{ModelSpec, ParamInventory, ParamTensor, Scope};
use crate::scenario::Scenario;

/// One GPU's share of the model.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Placement {
    pub tp: u64,
    pub dp: u64,
    /// Expert-parallel degree: each stacked expert tensor is split over `ep` ranks.
    pub ep: u64,
    /// Parameters on this GPU, and of those the experts' (after TP and EP), so that the
    /// expert share of any per-parameter quantity shards over `dp / ep` ranks instead of `dp`.
    pub params_local: u64,
    pub expert_local: u64,
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
        let mut p = Placement {
            tp: scen.parallel.tensor as u64,
            // ZeRO and FSDP shard over data x context parallel ranks.
            dp: scen.shard_ranks().max(1) as u64,
            ep: u64::from(scen.parallel.expert.max(1)),
            params_local: 0,
            expert_local: 0,
            layers_local,
            dense_local,
            sparse_local: layers_local - dense_local.min(layers_local),
            linear_local: (inv.linear_layers * layers_local).div_ceil(spec.layers),
        };
        for t in &inv.tensors {
            let n = p.share(t).saturating_mul(p.count(t.scope));
            p.params_local = p.params_local.saturating_add(n);
            if is_expert(t) {
                p.expert_local = p.expert_local.saturating_add(n);
            }
        }
        p
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
    /// vectors; EP splits the stacked experts.
    pub fn share(&self, t: &ParamTensor) -> u64 {
        let split = if t.d_in > 1 && t.d_out > 1 {
            self.tp
        } else {
            1
        };
        let experts = if is_expert(t) { self.ep } else { 1 };
        t.numel().div_ceil(split * experts)
    }

    /// `bytes` of a per-parameter quantity split evenly over the data-parallel ranks (ZeRO and
    /// FSDP partitions). Under expert parallelism the experts' share is replicated over only
    /// `dp / ep` ranks, so it shards over those.
    pub fn shard(&self, bytes: u64) -> u64 {
        if self.ep <= 1 || self.params_local == 0 {
            return bytes.div_ceil(self.dp);
        }
        let experts = (u128::from(bytes) * u128::from(self.expert_local)
            / u128::from(self.params_local)) as u64;
        (bytes - experts).div_ceil(self.dp) + experts.div_ceil((self.dp / self.ep).max(1))
    }
}

/// A stacked expert tensor of a MoE layer (the experts' copies, which EP splits; a shared
/// expert is a single copy and stays whole).
pub(crate) fn is_expert(t: &ParamTensor) -> bool {
    t.copies > 1 && t.scope == Scope::SparseLayer
}
