//! Matrix-multiply FLOPs per token of a model, from its parameter inventory: the numerator of
//! every compute term and of MFU.

use serde::Serialize;

use crate::catalog::Gpu;
use crate::model::ModelSpec;
use crate::model::params::{ParamInventory, Scope, inventory};
use crate::scenario::{Method, Scenario};

/// FLOPs per token of one model's matrix multiplies (whole model, before any splitting).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TokenFlops {
    /// Forward FLOPs per token of every Linear in the decoder layers (active experts only).
    pub layer_matmul_forward: f64,
    /// Backward FLOPs per token of those Linears (input and, where trainable, weight grads).
    pub layer_matmul_backward: f64,
    /// The part of those two that runs in fp8 (the Linears `crate::fp8` converts; 0 without
    /// fp8).
    pub fp8_forward: f64,
    pub fp8_backward: f64,
    /// Forward FLOPs per token of Linears outside the layers (lm_head, OPT projections).
    pub outside_forward: f64,
    pub outside_backward: f64,
    /// Attention score and value matmuls per token over all layers, forward, as executed
    /// (full s x s for eager, the causal half for fused kernels).
    pub attention_forward: f64,
    /// Their backward (2x forward, 2.5x for fused kernels that recompute Q·Kᵀ).
    pub attention_backward: f64,
    /// Forward attention FLOPs per token with a causal mask's half only (model FLOPs).
    pub attention_causal_forward: f64,
    /// Parameters taking part in matrix multiplies per token (N of 6·N·T), and the
    /// trainable ones among them.
    pub matmul_params: f64,
    pub matmul_params_trainable: f64,
}

pub(super) fn layer_count(inv: &ParamInventory, scope: Scope) -> f64 {
    match scope {
        Scope::Model => 1.0,
        Scope::Layer => (inv.dense_layers + inv.sparse_layers) as f64,
        Scope::DenseLayer => inv.dense_layers as f64,
        Scope::SparseLayer => inv.sparse_layers as f64,
        Scope::AttentionLayer | Scope::LinearAttentionLayer => inv.multiplicity(scope) as f64,
    }
}

/// Matrix-multiply FLOPs per token of `spec` trained as `scen` says, from the parameter
/// inventory (`model/params.rs`).
/// Attention's FLOPs depend on the kernel, so on the GPU (`crate::sdpa`).
pub fn token_flops(spec: &ModelSpec, gpu: &Gpu, scen: &Scenario) -> TokenFlops {
    let quadratic = crate::sdpa::materializes_scores(spec, gpu, scen);
    token_flops_of(spec, &inventory(spec), scen, quadratic)
}

/// [`token_flops`] from an inventory the caller already built (the time model shares one).
pub(super) fn token_flops_of(
    spec: &ModelSpec,
    inv: &ParamInventory,
    scen: &Scenario,
    quadratic: bool,
) -> TokenFlops {
    let full = scen.method == Method::Full;
    let r = scen.lora.rank as f64;
    let mut f = TokenFlops {
        layer_matmul_forward: 0.0,
        layer_matmul_backward: 0.0,
        fp8_forward: 0.0,
        fp8_backward: 0.0,
        outside_forward: 0.0,
        outside_backward: 0.0,
        attention_forward: 0.0,
        attention_backward: 0.0,
        attention_causal_forward: 0.0,
        matmul_params: 0.0,
        matmul_params_trainable: 0.0,
    };
    let top_k = spec.moe.as_ref().map_or(1, |m| m.top_k);
    for t in &inv.tensors {
        // Matrices that multiply activations: every Linear and the MoE router; embeddings are
        // lookups (no FLOPs); vectors (norms, biases) are elementwise.
        let is_router = t.name == "mlp.gate.weight" || t.name == "feed_forward.router.weight";
        if t.linear.is_none() && !is_router {
            continue;
        }
        // Each token passes through top_k of the experts' copies (Fedus et al. 2021).
        let active = if t.copies > 1 { top_k.min(t.copies) } else { 1 } as f64;
        let n = t.d_in as f64 * t.d_out as f64 * active * layer_count(inv, t.scope);
        // transformers' Llama4TextMoe multiplies every token by every expert (the unchosen with
        // a zero score): the GPU executes all the experts' products, the model's FLOPs (MFU)
        // are the top-k's.
        let executed = if spec.llama4.is_some() && t.copies > 1 {
            n * t.copies as f64 / active
        } else {
            n
        };
        let fwd = 2.0 * executed;
        // Input gradient always (earlier layers or adapters need it); weight gradient only
        // when the weight trains.
        let mut bwd = if full { 4.0 * executed } else { 2.0 * executed };
        let mut fwd_total = fwd;
        f.matmul_params += n;
        if full {
            f.matmul_params_trainable += n;
        }
        if !full && t.linear.is_some() && crate::states::lora_adapts(spec, scen, t) {
            // x·A (d_in x r) then ·B (r x d_out): 2r(d_in + d_out) forward, twice that back.
            let a = r * (t.d_in + t.d_out) as f64 * active * layer_count(inv, t.scope);
            fwd_total += 2.0 * a;
            bwd += 4.0 * a;
            f.matmul_params += a;
            f.matmul_params_trainable += a;
        }
        if t.scope == Scope::Model {
            f.outside_forward += fwd_total;
            f.outside_backward += bwd;
        } else {
            f.layer_matmul_forward += fwd_total;
            f.layer_matmul_backward += bwd;
            if scen.fp8.is_on() && crate::fp8::converts(t) {
                f.fp8_forward += fwd_total;
                f.fp8_backward += bwd;
            }
        }
    }
    // A multimodal model's vision tower and projector run over each sample's image patches:
    // 2 FLOPs per weight per patch forward (the tower's parameters, its position table
    // included: about 1% over) plus its bidirectional attention (4 x patches x hidden per
    // patch and layer), spread over the sample's `seq` tokens; backward only when it trains
    // (frozen, autograd records nothing there).
    if let Some(v) = &spec.vision {
        let patches = f64::from(scen.images) * v.patches_per_image() as f64;
        let per_patch =
            2.0 * inv.vision() as f64 + 4.0 * (v.patches_per_image() * v.hidden * v.layers) as f64;
        let fwd = per_patch * patches / f64::from(scen.seq.max(1));
        f.outside_forward += fwd;
        if full && scen.vision == crate::scenario::VisionTraining::Trained {
            f.outside_backward += 2.0 * fwd;
        }
    }
    // lm_head: tied models have no separate tensor in the inventory, but still multiply.
    let head_dim = spec.lm_head_width();
    // Each trained multi-token prediction module runs the lm_head again and its eh_proj
    // (2h -> h) on every token (its decoder layer is among the layers).
    let heads = 1.0 + spec.mtp_trained as f64;
    let eh_proj = 2.0 * (spec.hidden * spec.hidden) as f64 * spec.mtp_trained as f64;
    let head = head_dim as f64 * spec.vocab as f64 * heads + eh_proj;
    f.outside_forward += 2.0 * head;
    // The lm_head weight trains in full training (tied or not); LoRA freezes it.
    f.outside_backward += if full { 4.0 * head } else { 2.0 * head };
    f.matmul_params += head;
    if full {
        f.matmul_params_trainable += head;
    }
    // Attention: Q·Kᵀ and P·V, 2·s·d each per token per layer, over the whole s x s matrix
    // (Korthikanti et al. 2022 App. A). A sliding window bounds the keys a query sees. Packed
    // documents attend within themselves (varlen attention): the span is the mean document
    // length, so a row's attention is (seq/doc_len)·doc_len² instead of seq², doc_len/seq of it.
    // Under context parallelism a token still attends to the whole sequence (the ring brings
    // every chunk's keys): the span stays seq, the tokens per GPU are seq/cp.
    let s = scen.attention_span() as f64;
    let keys = spec.sliding_window.map_or(s, |w| s.min(w as f64));
    // Layers with softmax attention: Qwen3-Next's gated DeltaNet layers have none.
    let linear_layers = spec.linear_attention.as_ref().map_or(0, |la| la.layers);
    let softmax_layers = (spec.layers - linear_layers) as f64;
    let full_matrix = 4.0 * keys * spec.q_dim() as f64 * softmax_layers;
    // Causal: on average a query sees half the keys (s/2 for a full window).
    let mut causal = if keys < s {
        full_matrix * (1.0 - keys / (2.0 * s))
    } else {
        full_matrix / 2.0
    };
    // Llama 4's RoPE layers attend within chunks: a query sees its chunk's earlier keys, on
    // average half a chunk.
    if let Some(l4) = &spec.llama4
        && let Some(c) = l4.chunk
        && (c as f64) < s
    {
        let chunked = (spec.layers - l4.nope_layers) as f64;
        causal -= 4.0 * spec.q_dim() as f64 * chunked * (s - c as f64) / 2.0;
    }
    // The gated DeltaNet's chunked delta rule per token and value head (chunks of 64): the
    // chunk x chunk products (k beta k^T, q k^T, the triangular solves, the intra-chunk
    // attention) and the state's products (k_cumdecay @ S, q @ S, k^T @ v_new).
    let delta_rule = spec.linear_attention.as_ref().map_or(0.0, |la| {
        let (c, dk, dv) = (64.0, la.key_head_dim as f64, la.value_head_dim as f64);
        let per_head = 4.0 * c * dk + 3.0 * c * dv + 6.0 * dk * dv;
        per_head * la.value_heads as f64 * linear_layers as f64
    });
    causal += delta_rule;
    f.attention_causal_forward = causal;
    if quadratic {
        // Eager (and SDPA's math kernel) multiplies the whole s x s matrix and masks
        // afterwards, window or not.
        let eager = 4.0 * s * spec.q_dim() as f64 * softmax_layers + delta_rule;
        f.attention_forward = eager;
        f.attention_backward = 2.0 * eager;
    } else {
        f.attention_forward = causal;
        f.attention_backward = 2.5 * causal;
    }
    f
}
