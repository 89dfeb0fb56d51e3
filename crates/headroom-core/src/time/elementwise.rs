//! The bandwidth-bound kernels of the decoder layers: norms, rotary embeddings, the MLP's
//! activation, residual adds, layout copies, autocast's casts, dropout, gradient
//! accumulation at branch points and LoRA's adapter path, counted in bytes per token from the
//! ops transformers and peft run, and timed at the share of HBM bandwidth such kernels reach.
//!
//! Eager loops run each op as its own kernel (transformers' `LlamaRMSNorm` alone is six:
//! cast, pow, mean, rsqrt-multiply, cast back, weight multiply).
//! Megatron-style fused kernels read each fused region's inputs and write its outputs once;
//! torch.compile'd steps keep the eager count ([`COMPILED_SHARE_OF_EAGER`]: what two
//! measured compiled steps say).

use crate::activations::Shape;
use crate::dtype::DType;
use crate::model::Scope;
use crate::model::spec::{MlpKind, NormKind};
use crate::scenario::Method;

use super::compute::Busy;
use super::cx::Cx;
use super::terms::Terms;

/// The share of the HBM bandwidth eager elementwise kernels reach. Many are small, several
/// broadcast (a norm's per-token scale, rotary's cos and sin) and run PyTorch's
/// non-vectorized loop. FITTED on the three runs profiled on the H200 whose layers this
/// module counts (tests/reference/gpu/h200/edge/timing.json: Llama 3.2 1B, Llama 3.2 3B
/// with LoRA, Llama 3.1 8B checkpointed): their elementwise, copy and reduction kernels took
/// the time of the bytes counted here at 0.45 to 0.55 of the 4.8 TB/s
/// (`tests/time.rs` recomputes them).
pub const EAGER_BANDWIDTH_SHARE: f64 = 0.5;

/// The share fused kernels (Megatron's fused norms and activations) reach: assumed 0.8, what
/// a large contiguous copy reaches on an H100.
pub const FUSED_BANDWIDTH_SHARE: f64 = 0.8;

/// The share of the eager elementwise bytes a torch.compile'd step moves. Inductor fuses
/// chains of pointwise ops, yet the two compiled steps measured on the H200
/// (tests/reference/gpu/h200: Llama 3.2 1B, 2 x 4,096 tokens of an 8-layer Llama 3.1 8B) took
/// what the eager count gives them (+5% and -8% with 1.0) and ran 17-23% slower than fused
/// counts or half the eager bytes predict; where inductor's time goes instead is not
/// measured (no compiled profile), so compiled steps keep the eager bytes: 1.0.
pub const COMPILED_SHARE_OF_EAGER: f64 = 1.0;

/// Bytes per token of one layer's forward and backward elementwise work on one GPU.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LayerBytes {
    pub forward: f64,
    pub backward: f64,
}

impl LayerBytes {
    fn add(&mut self, forward: f64, backward: f64) {
        self.forward += forward;
        self.backward += backward;
    }
}

/// Pushes the term and adds its seconds to the phases they run in.
pub(super) fn terms(cx: &Cx, terms: &mut Terms, busy: &mut Busy) {
    let fused = cx.a.fused_kernels;
    let compiled = cx.scen.runtime.compiled() && !fused;
    let (mut per_token, adapters) = layer_bytes(cx, fused);
    if compiled {
        per_token.forward *= COMPILED_SHARE_OF_EAGER;
        per_token.backward *= COMPILED_SHARE_OF_EAGER;
    }
    let share = if fused {
        FUSED_BANDWIDTH_SHARE
    } else {
        EAGER_BANDWIDTH_SHARE
    };
    let tokens = cx.b * cx.s * cx.m;
    let layers = cx.layers_local();
    let recomputed = cx.ck / cx.layers;
    let forward = per_token.forward * tokens * layers;
    let backward = per_token.backward * tokens * layers;
    let bytes = forward * (1.0 + recomputed) + backward;
    let seconds = terms.memory_at(
        "elementwise",
        "elementwise kernels (norms, activations, casts, copies)",
        bytes,
        share,
        || {
            format!(
                "({:.0} forward x {:.2} + {:.0} backward) bytes per token per layer x {tokens:.0} \
                 tokens x {layers:.0} layers ({})",
                per_token.forward,
                1.0 + recomputed,
                per_token.backward,
                if fused {
                    "fused kernels"
                } else if compiled {
                    "compiled, counted as eager"
                } else {
                    "eager, one kernel per op"
                }
            )
        },
        "transformers' LlamaRMSNorm, apply_rotary_pos_emb, ACT2FN, peft's lora.Linear.forward: bytes per op counted; the bandwidth share fitted on three H200 profiles",
    );
    let per_byte = seconds / bytes.max(1.0);
    busy.forward += forward * per_byte;
    // Of the forward, what peft's adapter path moves: a pass with the adapters disabled (DPO's
    // and KTO's reference under LoRA) does not.
    let scale = if compiled {
        COMPILED_SHARE_OF_EAGER
    } else {
        1.0
    };
    busy.adapter_forward += adapters.forward * scale * tokens * layers * per_byte;
    busy.backward += backward * per_byte;
    busy.recompute += forward * recomputed * per_byte;
}

/// The bytes one layer's elementwise kernels move per token, forward and backward, on one
/// GPU (tensor parallelism splits the head and MLP widths; sequence parallelism the hidden),
/// and of them peft's adapter path's.
pub(super) fn layer_bytes(cx: &Cx, fused: bool) -> (LayerBytes, LayerBytes) {
    let (spec, scen) = (cx.spec, cx.scen);
    let sh = Shape::from_scenario(spec, cx.gpu, scen);
    let tp = cx.tp as f64;
    let h = spec.hidden as f64 / if scen.parallel.sequence { tp } else { 1.0 };
    let q = spec.q_dim() as f64 / tp;
    let kv = spec.kv_dim() as f64 / tp;
    let stream = sh.stream().bytes() as f64;
    let compute = if sh.quantized_base {
        stream
    } else {
        sh.precision.compute_dtype().bytes() as f64
    };
    let mut b = LayerBytes::default();
    // Norms: the layer's own (two in most, four in Gemma 2/3) on the residual stream.
    for _ in 0..spec.norms_per_layer {
        let (f, k) = norm(spec.norm, stream, fused);
        b.add(f * h, k * h);
    }
    if spec.qk_norm {
        let (f, k) = norm(NormKind::RmsNorm, compute, fused);
        b.add(f * (q + kv), k * (q + kv));
    }
    // Rotary embeddings on q and k: q·cos, rotate_half (neg, cat), ·sin, add: 10 element
    // accesses forward, 15 backward (the slices' backward zero-fills and copies); one fused
    // pass each way when compiled.
    if spec.position_embeddings == 0 && spec.head_dim > 0 {
        let rotated = (q + kv) * spec.rotary_dim() as f64 / spec.head_dim as f64;
        let (f, k) = if fused { (2.0, 2.0) } else { (10.0, 15.0) };
        b.add(f * compute * rotated, k * compute * rotated);
    }
    // Attention's output transposed back to (tokens, heads·dim): one copy, and its gradient's.
    b.add(2.0 * compute * q, 2.0 * compute * q);
    // Two residual adds (stream + branch -> stream), and the gradient summed where the
    // stream forks (folded into the norms when fused).
    if !fused {
        b.add(2.0 * (2.0 * stream + compute) * h, 2.0 * 3.0 * stream * h);
    } else {
        b.add(2.0 * stream * h, 2.0 * stream * h);
    }
    mlp(cx, compute, fused, &mut b);
    branch_points(cx, &sh, h, stream, compute, fused, &mut b);
    if sh.residual_dropout > 0.0 {
        // Dropout on both branches' outputs: the kernel writes the dropped copy and a mask
        // byte; backward reads the mask and scales.
        let per = (2.0 * compute + 1.0) * h * 2.0;
        b.add(per, per);
    }
    biases(cx, compute, &mut b);
    let mut adapters = LayerBytes::default();
    if scen.method != Method::Full {
        lora(cx, &sh, stream, compute, fused, (&mut b, &mut adapters));
    }
    (b, adapters)
}

/// (forward, backward) bytes per element of a norm over a tensor of `bytes`-wide elements.
fn norm(kind: NormKind, bytes: f64, fused: bool) -> (f64, f64) {
    match (kind, fused) {
        // Read once, write once; backward reads the input and the gradient and writes one.
        (_, true) | (NormKind::LayerNorm, false) => (2.0 * bytes, 3.0 * bytes + bytes),
        // transformers' RMSNorm in fp32: the cast in (16-bit streams), pow, mean, the
        // rsqrt-scaled multiply, the cast back and the weight multiply; backward about twice.
        (NormKind::RmsNorm, false) => {
            let casts = if bytes < 4.0 {
                2.0 * (bytes + 4.0)
            } else {
                0.0
            };
            let forward = casts + 8.0 + 4.0 + 8.0 + 2.0 * bytes;
            (forward, 2.0 * forward)
        }
    }
}

/// The MLP's activation (and, gated, its product), on the intermediate width each token
/// reaches: the dense MLP's, or top-k experts' plus the shared expert's in MoE layers, with
/// the routed tokens' gather and weighted scatter.
fn mlp(cx: &Cx, compute: f64, fused: bool, b: &mut LayerBytes) {
    let spec = cx.spec;
    let tp = cx.tp as f64;
    let share_sparse = spec
        .moe
        .as_ref()
        .map_or(0.0, |m| m.sparse_layers as f64 / cx.layers);
    let dense = spec.intermediate as f64 / tp;
    let (routed, routing) = spec.moe.as_ref().map_or((0.0, 0.0), |m| {
        (
            (m.top_k * m.expert_intermediate + m.shared_intermediate) as f64 / tp,
            // index_select of each token's copies, the weighted product and index_add back.
            5.0 * compute * m.top_k as f64 * spec.hidden as f64,
        )
    });
    let width = dense * (1.0 - share_sparse) + routed * share_sparse;
    let python_gelu = python_gelu(spec);
    // One activation kernel (silu, gelu, gelu tanh) reads and writes once; transformers'
    // Python GELUs (NewGELUActivation: pow, three multiplies, two adds, tanh) run about ten.
    let (act_f, act_b) = match (fused, python_gelu) {
        (true, _) => (0.0, 0.0),
        (false, true) => (20.0, 40.0),
        (false, false) => (2.0, 3.0),
    };
    let (mul_f, mul_b) = match (spec.mlp, fused) {
        (MlpKind::Gated, false) => (3.0, 6.0),
        (MlpKind::Gated, true) => (3.0, 5.0),
        (MlpKind::Plain, true) => (2.0, 3.0),
        (MlpKind::Plain, false) => (0.0, 0.0),
    };
    b.add(
        (act_f + mul_f) * compute * width + routing * share_sparse,
        (act_b + mul_b) * compute * width + 2.0 * routing * share_sparse,
    );
}

/// Whether the activation is one of transformers' GELUs written in Python (NewGELUActivation
/// and its kin: about ten kernels where a fused activation is one).
pub(super) fn python_gelu(spec: &crate::model::ModelSpec) -> bool {
    matches!(
        spec.activation.as_str(),
        "gelu_new" | "gelu_fast" | "quick_gelu" | "gelu_python"
    )
}

/// Where one tensor feeds several Linears (q, k and v; gate and up), backward sums their
/// input gradients; under autocast an fp32 stream is cast to 16 bits for each Linear that
/// reads it (autocast caches weights' casts, not activations'), and each cast's gradient back.
fn branch_points(
    cx: &Cx,
    sh: &Shape,
    h: f64,
    stream: f64,
    compute: f64,
    fused: bool,
    b: &mut LayerBytes,
) {
    let has = |n: &str| {
        cx.inv
            .tensors
            .iter()
            .any(|t| t.scope != Scope::Model && t.linear == Some(n))
    };
    let attention_readers = ["q_proj", "k_proj", "v_proj"]
        .iter()
        .filter(|n| has(n))
        .count()
        .max(1) as f64;
    let mlp_readers = if cx.spec.mlp == MlpKind::Gated && has("gate_proj") && has("up_proj") {
        2.0
    } else {
        1.0
    };
    let readers = attention_readers + mlp_readers;
    if fused {
        return;
    }
    b.add(0.0, 3.0 * compute * h * (readers - 2.0));
    if sh.precision.is_autocast() && stream > compute {
        let cast = (stream + compute) * h * readers;
        b.add(cast, cast);
    }
}

/// Bias gradients: a reduction over the tokens of each biased Linear's output gradient.
fn biases(cx: &Cx, compute: f64, b: &mut LayerBytes) {
    let spec = cx.spec;
    let tp = cx.tp as f64;
    let mut widths = 0.0;
    if spec.qkv_bias {
        widths += (spec.q_dim() + 2 * spec.kv_dim()) as f64 / tp;
    }
    if spec.o_bias {
        widths += spec.hidden as f64;
    }
    if spec.mlp_bias {
        widths += (spec.intermediate + spec.hidden) as f64 / tp;
    }
    b.add(0.0, compute * widths);
}

/// peft's lora.Linear.forward per adapted Linear: the input cast to the adapters' dtype,
/// lora_A reading it, lora_B writing its output, the scaling multiply, the sum with the base
/// output (in the wider dtype) and the cast back; backward the same in reverse plus the
/// input gradient summed into the base's. The adapters' thin matmuls move these bytes more
/// than they compute.
/// Each Linear's bytes go to the layer's total `b` (in the order they always did) and to
/// `adapters`, the path's own.
fn lora(
    cx: &Cx,
    sh: &Shape,
    stream: f64,
    compute: f64,
    fused: bool,
    (b, adapters): (&mut LayerBytes, &mut LayerBytes),
) {
    let scen = cx.scen;
    let tp = cx.tp as f64;
    // peft casts the input to the adapters' storage dtype (`_cast_input_dtype`); under
    // autocast F.linear then casts it to 16 bits again, and the adapters' matmuls run there.
    let storage = match scen.lora.adapter_dtype {
        DType::F32 => 4.0,
        d => d.bytes() as f64,
    };
    let autocast = sh.precision.is_autocast();
    let adapter = if autocast { compute } else { storage };
    let wide = adapter.max(compute);
    for t in cx.inv.tensors.iter().filter(|t| t.scope != Scope::Model) {
        if !crate::states::lora_adapts(cx.spec, scen, t) {
            continue;
        }
        // A token passes through its top-k experts' copies only.
        let share = cx.used_per_layer(t);
        let (d_in, d_out) = (t.d_in as f64 / tp, t.d_out as f64 / tp);
        // The attention's and MLP's first Linears read the norm's output (the stream's
        // dtype); the others a 16-bit activation.
        let input = if matches!(t.linear, Some("o_proj" | "down_proj")) {
            compute
        } else {
            stream
        };
        let peft_cast = if input != storage {
            (input + storage) * d_in
        } else {
            0.0
        };
        let autocast_cast = if autocast && storage != compute {
            (storage + compute) * d_in
        } else {
            0.0
        };
        let cast_in = peft_cast + autocast_cast;
        let (forward, backward) = if fused {
            (
                input * d_in + adapter * d_out + (compute + adapter + compute) * d_out,
                compute * d_out
                    + 2.0 * adapter * d_out
                    + input * d_in
                    + adapter * d_in
                    + (adapter + 2.0 * input) * d_in,
            )
        } else {
            let cast_out = if wide > compute {
                (wide + compute) * d_out
            } else {
                0.0
            };
            (
                cast_in
                    + adapter * d_in
                    + adapter * d_out
                    + 2.0 * adapter * d_out
                    + (compute + adapter + wide) * d_out
                    + cast_out,
                cast_out
                    + 2.0 * adapter * d_out
                    + 2.0 * adapter * d_out
                    + 2.0 * adapter * d_in
                    + cast_in
                    + 3.0 * input * d_in,
            )
        };
        b.add(forward * share, backward * share);
        adapters.add(forward * share, backward * share);
    }
}
