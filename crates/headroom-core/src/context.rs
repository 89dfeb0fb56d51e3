//! Context parallelism (ring attention over `cp` ranks) and sequence packing (varlen
//! attention over whole documents): the bytes the ring keeps in flight, its send/recv traffic,
//! and the report's sentence on what each setting changes.
//!
//! Context parallelism, as PyTorch's `context_parallel` (torch/distributed/tensor/
//! experimental/_attention.py, `_templated_ring_attention`), torchtitan and Megatron-LM
//! (`--context-parallel-size`, Transformer Engine's `AttnFuncWithCPAndKVP2P`) run it: each
//! rank holds `seq / cp` tokens of every sequence (two load-balanced chunks of a causal one),
//! so every activation and the logits are those of `seq / cp` tokens; attention's keys and
//! values go around the ring, `cp − 1` sends per layer, each overlapped with the attention
//! of the chunk already there.
//!
//! Packing (transformers' `DataCollatorWithFlattening`): rows hold whole documents back to
//! back, `position_ids` restart at each, and the flash kernels attend within a document only.
//! Headroom's estimate already assumes rows without padding, so packing changes no byte; the
//! attention FLOPs are those of documents of `doc_len` tokens instead of rows of `seq`.
//!
//! Under CP every per-token formula reads `Scenario::seq_local` (seq / cp: `Shape::s`, the loss,
//! the inputs), ZeRO and FSDP shard and gradients reduce over `Scenario::shard_ranks` (dp x cp),
//! and the ring's key/value chunks in flight are added to a layer's forward and backward
//! temporaries (two chunks forward; two plus two fp32 gradient chunks backward; assumed). The time
//! model takes seq / cp tokens per GPU with attention over the whole sequence, and a
//! `context_parallel` send/recv term hidden behind attention's compute. Packing sets attention's
//! span to the mean document length (`Scenario::attention_span`), so its FLOPs are doc_len / seq of
//! a row's.
//!
//! Refusals: cp needs SDPA's fused kernels and no sliding window (`estimate::check_context`); gpus
//! must be a multiple of tp x pp x cp, and seq of 2 x cp. Packing needs flash2, flash3 or flex
//! (eager and SDPA would need a 4D block mask). Not both.

use crate::model::ModelSpec;
use crate::scenario::Scenario;

/// Widths of the key and of the value heads one tensor-parallel rank holds (MLA passes its
/// expanded per-head keys and values, as its SDPA call takes them).
fn kv_widths(spec: &ModelSpec, tp: u64) -> (u64, u64) {
    let tp = tp.max(1);
    match &spec.mla {
        Some(_) => (spec.q_dim().div_ceil(tp), spec.v_dim().div_ceil(tp)),
        // Fewer KV heads than tensor ranks are replicated, one per rank.
        None => {
            let heads = (spec.kv_heads / tp).max(1);
            (heads * spec.head_dim, heads * spec.head_dim)
        }
    }
}

/// Bytes of one ring chunk: the keys and values of `seq / cp` tokens of the micro-batch, in
/// the compute dtype, as one rank sends them to the next.
pub fn kv_chunk_bytes(spec: &ModelSpec, scen: &Scenario) -> u64 {
    if scen.context() <= 1 {
        return 0;
    }
    let (k, v) = kv_widths(spec, scen.parallel.tensor as u64);
    let tokens = scen.sequences() as u64 * scen.seq_local() as u64;
    tokens * (k + v) * scen.precision.compute_dtype().bytes()
}

/// What the ring keeps during one layer's attention forward beyond the local keys and values:
/// the chunk being attended to and the next one arriving (double buffering, two chunks in
/// flight; assumed from `_templated_ring_attention`'s rotater, not measured).
pub fn forward_bytes(spec: &ModelSpec, scen: &Scenario) -> u64 {
    2 * kv_chunk_bytes(spec, scen)
}

/// What the ring keeps during one layer's attention backward: the two key/value chunks in
/// flight again, and the gradients of the keys and values travelling the other way, two chunks
/// accumulated in fp32 (assumed from `_templated_ring_attention_backward`, not measured).
pub fn backward_bytes(spec: &ModelSpec, scen: &Scenario) -> u64 {
    let chunk = kv_chunk_bytes(spec, scen);
    let half = scen.precision.compute_dtype().bytes().max(1);
    2 * chunk + 2 * chunk * 4 / half
}

/// One sentence on what context parallelism and packing change, empty when both are off.
pub fn describe(spec: &ModelSpec, scen: &Scenario) -> String {
    let mut out = Vec::new();
    let cp = scen.context();
    if cp > 1 {
        out.push(format!(
            "Context parallel cp = {cp}: each GPU holds {} of the {} tokens of a sequence \
             (activations and logits of seq/cp), attention's keys and values go around the ring \
             ({} per layer in flight in forward, {} in backward, assumed); gradients are \
             reduced and ZeRO/FSDP shard over dp x cp = {} ranks.",
            scen.seq_local(),
            scen.seq,
            crate::format::bytes(forward_bytes(spec, scen)),
            crate::format::bytes(backward_bytes(spec, scen)),
            scen.shard_ranks()
        ));
    }
    if scen.packing {
        out.push(format!(
            "Packing: documents of {} tokens on average, no padding (which the estimate assumes \
             anyway: memory unchanged), attention within each document (attention FLOPs x {:.3} \
             of a full {}-token row, causal).",
            scen.attention_span(),
            scen.attention_span() as f64 / scen.seq.max(1) as f64,
            scen.seq
        ));
    }
    out.join(" ")
}
