//! What Qwen3-Next's linear-attention layers save: the gated DeltaNet as transformers' torch
//! path runs it.

use super::linear::inputs_if_adapted;
use super::{Inventory, Layout, Part, Shape};
use crate::dtype::DType;
use crate::model::LinearAttention;

/// Qwen3-Next's gated DeltaNet (`Qwen3NextGatedDeltaNet`) as transformers runs it without the
/// fla and causal-conv1d kernels (its torch fallbacks, `torch_causal_conv1d_fn` and
/// `torch_chunk_gated_delta_rule`, which CPU runs): the depthwise conv1d over q, k and v, beta
/// and the decay, then the chunked delta rule in fp32 (chunks of 64, the sequence padded to
/// them): q and k L2-normalized, the chunk-local systems solved by `solve_triangular`, a
/// Python loop over the chunks carrying the recurrent state (each chunk's state and new values
/// saved); then the gated RMSNorm over each value head and out_proj. On GPUs the fla Triton
/// kernel runs instead and saves differently (assumed: not modelled; the torch path is what
/// is estimated). Qwen3.5's (`Qwen3_5GatedDeltaNet`) saves the same with its input read by four
/// projections (`projections`), not two: conv1d saves in_proj_qkv's output where Qwen3-Next's
/// saves q, k and v joined by a cat, the same bytes.
pub(super) fn gated_delta_net(
    inv: &mut Inventory,
    sh: &Shape,
    l: &Layout,
    la: &LinearAttention,
    projections: u64,
) {
    let n = Sizes::new(sh, la);
    conv_and_gates(inv, sh, l, la, &n, projections);
    inv.at(Part::AttentionCore);
    chunk_systems(inv, sh, l, &n);
    recurrent_state(inv, sh, &n);
    inv.at(Part::OutputProjection);
    gated_norm(inv, sh, l, &n);
    let out_proj = (label!("out_proj input"), l.t * n.vd, 1);
    inputs_if_adapted(inv, out_proj, sh.lora_all_linear, sh);
}

/// The delta rule's chunk length (`torch_chunk_gated_delta_rule`'s `chunk_size`).
const CHUNK: u64 = 64;

/// The gated DeltaNet's sizes on this GPU.
struct Sizes {
    /// Value heads, and the key and value head widths.
    hv: u64,
    dk: u64,
    dv: u64,
    /// The value width.
    vd: u64,
    /// The channels the conv1d runs over: q, k and v joined.
    conv: u64,
    /// Chunks of the sequence.
    chunks: u64,
    /// Padded tokens over the micro-batch, and per value head.
    tp_pad: u64,
    chunk_tokens: u64,
    /// One recurrent state's elements over the micro-batch.
    state: u64,
}

impl Sizes {
    fn new(sh: &Shape, la: &LinearAttention) -> Self {
        let tp = sh.tp.max(1);
        let (hv, dk, dv) = (la.value_heads / tp, la.key_head_dim, la.value_head_dim);
        let (kd, vd) = (la.key_dim() / tp, la.value_dim() / tp);
        let chunks = sh.s.div_ceil(CHUNK);
        let tp_pad = sh.b * chunks * CHUNK;
        Sizes {
            hv,
            dk,
            dv,
            vd,
            conv: 2 * kd + vd,
            chunks,
            tp_pad,
            chunk_tokens: tp_pad * hv,
            state: sh.b * hv * dk * dv,
        }
    }
}

/// The projections' input and what the depthwise conv1d over q, k and v, beta and the decay
/// save.
fn conv_and_gates(
    inv: &mut Inventory,
    sh: &Shape,
    l: &Layout,
    la: &LinearAttention,
    n: &Sizes,
    projections: u64,
) {
    let (t, c) = (l.t, sh.compute());
    let f32 = DType::F32;
    let (hv, conv) = (n.hv, n.conv);
    // The projections save their input where they train or carry adapters (all-linear).
    let inputs = (label!("the input projections' input"), l.th, projections);
    inputs_if_adapted(inv, inputs, sh.lora_all_linear, sh);
    inv.add(what!("q, k, v joined (saved by conv1d)"), t * conv, c);
    inv.add(
        what!("conv1d output with its kernel - 1 extra positions (saved by silu)"),
        sh.b * conv * (sh.s + la.conv_kernel - 1),
        c,
    );
    // in_proj_b's output: a 4-bit base's Linear returns its input's dtype (fp32 where the
    // stream is, under prepare_model_for_kbit_training).
    inv.add(what!("beta (saved by sigmoid)"), t * hv, sh.linear_out());
    if sh.base_trainable {
        inv.add(
            what!("exp(A_log), fp32 (saved by exp and the decay's product)"),
            2 * hv,
            f32,
        );
        inv.add(
            what!("softplus output, fp32 (saved by the decay's product)"),
            t * hv,
            f32,
        );
    } else {
        // Frozen (LoRA): the product still saves -exp(A_log) for the softplus's gradient,
        // which the layer's input carries (found by peft's adapters on CPU: 16 B a layer).
        inv.add(
            what!("-exp(A_log), fp32 (saved by the decay's product)"),
            hv,
            f32,
        );
    }
    inv.add(what!("a + dt_bias, fp32 (saved by softplus)"), t * hv, f32);
}

/// The chunked delta rule up to its loop over the chunks: q and k L2-normalized, beta and v
/// padded, the chunk-local systems and their solution, and the cumulative decays.
fn chunk_systems(inv: &mut Inventory, sh: &Shape, l: &Layout, n: &Sizes) {
    let (t, c) = (l.t, sh.compute());
    let f32 = DType::F32;
    let (hv, dk, dv, tp_pad, chunk_tokens) = (n.hv, n.dk, n.dv, n.tp_pad, n.chunk_tokens);
    inv.add_n(
        what!("q and k in fp32, per value head (saved by the L2 norm)"),
        t * hv * dk,
        f32,
        2,
    );
    inv.add_n(what!("L2 norm's rsqrt of q and of k"), t * hv, f32, 2);
    inv.add(
        what!("beta in fp32, padded (saved by v * beta, k * beta)"),
        tp_pad * hv,
        f32,
    );
    inv.add(
        what!("v in fp32, padded (saved by v * beta)"),
        tp_pad * hv * dv,
        f32,
    );
    inv.add(
        what!("strictly upper mask of a chunk, bool"),
        CHUNK * CHUNK,
        DType::Bool,
    );
    // Under autocast the matmuls run in the compute dtype: their fp32 operands are cast (each
    // cast saved), and (k beta) k^T and q k^T come out 16-bit.
    let amp = sh.amp();
    let mm = if amp { c } else { f32 };
    inv.add_n(
        what!("pairwise decay and the triangular system (chunk x chunk)"),
        chunk_tokens * CHUNK,
        f32,
        2,
    );
    inv.add_n(
        what!("(k beta) k^T and q k^T (chunk x chunk, saved by their products with the decay)"),
        chunk_tokens * CHUNK,
        mm,
        2,
    );
    inv.add(
        what!("intra-chunk attention (chunk x chunk, saved by its matmul with v_new)"),
        chunk_tokens * CHUNK,
        mm,
    );
    inv.add_n(
        what!("k normalized and padded, k * beta, q scaled, the solved k cumulative decay"),
        chunk_tokens * dk,
        f32,
        4,
    );
    inv.add(
        what!("k decayed to the chunk's end (saved by k^T @ v_new)"),
        chunk_tokens * dk,
        mm,
    );
    if amp {
        inv.add_n(
            what!("k^T (twice), k * beta and q scaled cast for their matmuls"),
            chunk_tokens * dk,
            c,
            4,
        );
    } else if c == f32 && sh.s.is_multiple_of(CHUNK) {
        // In fp32 `.to(float32, memory_format=contiguous_format)` returns the transposed view
        // as it is, and so does F.pad with nothing to pad, so at::matmul's folding into bmm
        // copies k^T (twice), k * beta and q (padding makes them contiguous).
        inv.add_n(
            what!("k^T (twice), k * beta and q copied contiguous by matmul"),
            chunk_tokens * dk,
            f32,
            4,
        );
    }
    inv.add(
        what!("new values (solved by solve_triangular)"),
        chunk_tokens * dv,
        f32,
    );
    inv.add_n(what!("exp of the cumulative decays"), chunk_tokens, f32, 3);
}

/// The delta rule's loop over the chunks: the recurrent state entering each chunk, each
/// chunk's new values and, once the state carries gradients, the decayed q and k_cumdecay.
fn recurrent_state(inv: &mut Inventory, sh: &Shape, n: &Sizes) {
    let c = sh.compute();
    let f32 = DType::F32;
    let amp = sh.amp();
    let (hv, dk, dv, chunks) = (n.hv, n.dk, n.dv, n.chunks);
    let (state, chunk_tokens) = (n.state, n.chunk_tokens);
    inv.add(
        what!("exp of each chunk's total decay"),
        sh.b * hv * chunks,
        f32,
    );
    inv.add_n(
        what!("recurrent state entering each chunk (saved by the decay's product)"),
        state,
        f32,
        chunks,
    );
    if amp {
        inv.add_n(
            what!("each chunk's state cast for k_cumdecay @ state and q @ state"),
            state,
            c,
            2 * chunks,
        );
        inv.add_n(
            what!("each chunk's v_new cast for its two matmuls"),
            chunk_tokens * dv,
            c,
            2,
        );
    } else {
        inv.add(
            what!("each chunk's v_new (saved by its matmuls)"),
            chunk_tokens * dv,
            f32,
        );
    }
    if chunks > 1 && amp {
        // From the second chunk on the state carries gradients: q @ state and k_cumdecay @
        // state also save their q and k_cumdecay chunks, cast.
        inv.add_n(
            what!(
                "the later chunks' decayed q and k_cumdecay, cast for their matmuls with the state"
            ),
            sh.b * hv * CHUNK * dk,
            c,
            2 * (chunks - 1),
        );
    } else if chunks > 1 {
        inv.add(
            what!("q decayed (saved by q @ state once the state carries gradients)"),
            chunk_tokens * dk,
            f32,
        );
    }
}

/// The gated RMSNorm (`Qwen3NextRMSNormGated`) over each value head: fp32 input, rsqrt, the
/// normalized input cast back (saved by the weight's product, when the weight trains), the
/// fp32 gate z and its silu, and the weight's product (in the weight's dtype).
fn gated_norm(inv: &mut Inventory, sh: &Shape, l: &Layout, n: &Sizes) {
    let (t, c, x) = (l.t, sh.compute(), sh.stream());
    let f32 = DType::F32;
    let (hv, vd) = (n.hv, n.vd);
    inv.add(
        what!("gated norm: fp32 copy of the input (saved by pow, mul)"),
        t * vd,
        f32,
    );
    inv.add(what!("gated norm: rsqrt of the variance"), t * hv, f32);
    if sh.base_trainable {
        inv.add(
            what!("gated norm: normalized input (saved by the weight's product)"),
            t * vd,
            c,
        );
    }
    inv.add(what!("gated norm: z in fp32 (saved by silu)"), t * vd, f32);
    inv.add(
        what!("gated norm: silu(z) (saved by the product)"),
        t * vd,
        f32,
    );
    inv.add(
        what!("gated norm: weight * normalized (saved by the product)"),
        t * vd,
        x,
    );
}
