//! The KV cache transformers' decoder models return in training, and the part of it that
//! attention does not save anyway.

use crate::activations::Shape;
use crate::model::{Family, ModelSpec};
use crate::scenario::{Attention, Checkpointing, Scenario};
use crate::sdpa::Backend;

/// The KV cache transformers returns in training (Llama-like families; off under gradient
/// checkpointing, which sets `use_cache=False`, and for the TRL trainers that pass it,
/// `Trainer::use_cache`): bytes per layer, split into what attention
/// saves anyway (the same storages) and what only the cache holds: the un-repeated k and v of
/// eager attention with grouped heads, and under autocast the fp32 k after RoPE (fp32 cos/sin
/// promote it; SDPA and matmul save bf16 casts).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct KvCache {
    pub saved: u64,
    pub unsaved: u64,
}

pub(super) fn kv_cache(spec: &ModelSpec, scen: &Scenario, sh: &Shape) -> KvCache {
    if scen.checkpointing != Checkpointing::None || !scen.trainer.use_cache() {
        return KvCache::default();
    }
    let tp = scen.parallel.tensor as u64;
    // SDPA's math kernel saves k scaled (a new tensor), not the cache's k, and under GQA
    // the repeated v, not the cache's.
    let math = scen.attention.fused() && sh.sdpa == Backend::Math;
    if spec.family == Family::Gpt2 {
        // `DynamicLayer.update` concatenates: contiguous k and v, which attention saves.
        let c = scen.precision.compute_dtype().bytes();
        let each = sh.tokens() * spec.q_dim() / tp * c;
        return KvCache {
            saved: if math { each } else { 2 * each },
            unsaved: if math { each } else { 0 },
        };
    }
    if !spec.returns_kv_cache() {
        return KvCache::default();
    }
    let kv = (spec.kv_heads / tp).max(1) * spec.head_dim * sh.tokens();
    // The precision the layers run in (16-bit under FSDP's mixed-precision policy).
    let precision = crate::states::activation_precision(scen);
    let c = precision.compute_dtype().bytes();
    let amp = precision.is_autocast();
    let grouped = spec.heads > spec.kv_heads;
    let eager = scen.attention == Attention::Eager;
    let k = kv * if amp { 4 } else { c };
    let v = kv * c;
    let k_unsaved = amp || (eager && grouped) || math;
    let v_unsaved = (eager || math) && grouped;
    let unsaved = if k_unsaved { k } else { 0 } + if v_unsaved { v } else { 0 };
    KvCache {
        saved: k + v - unsaved,
        unsaved,
    }
}
