//! What a Llama-like layer's attention half saves: its input norm, the projections' inputs, the
//! q/k norms, the attention core (SDPA's fused and math kernels, eager attention, gpt-oss's
//! sinks, window masks) and the output projection's input.
//!
//! Per kernel: the math kernel keeps the fp32 s x s probabilities; the memory-efficient kernel pads
//! its logsumexp to 32 rows. The time model and the scale bound treat the math kernel as quadratic,
//! like eager attention.

use super::linear::{
    attention_output_inputs, dora_outputs, linear_inputs, lora_adapter_inputs, te_linear_inputs,
};
use super::linear_attention::gated_delta_net;
use super::mla::mla_projections;
use super::norms::{
    cohere_norm, layer_norm, norm_family, rms_norm, rms_norm_of, zero_centred_norm,
};
use super::{Inventory, Layout, Part, Shape, residual_dropout};
use crate::dtype::DType;
use crate::model::classes::{LayerRope, QkNorm};
use crate::model::{Family, ModelSpec, NormKind};
use crate::scenario::Attention;
use crate::sdpa::{self, Backend};

/// A Llama-like layer's first half: the input norm, the attention projections' inputs, RoPE
/// (and q/k norms), the attention core, the output projection's input and its residual
/// dropout.
pub(super) fn llama_attention(inv: &mut Inventory, spec: &ModelSpec, sh: &Shape, l: &Layout) {
    inv.at(Part::InputNorm);
    input_norm(inv, spec, sh, l);
    inv.at(Part::AttentionInputs);
    if let Some(la) = &spec.linear_attention
        && !l.other
    {
        return gated_delta_net(inv, sh, l, la, spec.deltanet_projections());
    }
    projections(inv, spec, sh, l);
    // RoPE: q * cos + rotate_half(q) * sin. Under autocast cos/sin are fp32, so q and k become
    // fp32; the rotated q, k and v are what attention saves.
    qk_norms(inv, spec, sh, l);
    if let Some(l4) = &spec.llama4 {
        llama4_qk(inv, (l4, spec.head_dim), sh, l);
    }
    match spec.class().traits.rope {
        LayerRope::Shared => {}
        LayerRope::InterleavedStream => interleaved_rope(inv, spec, sh, sh.stream()),
        LayerRope::InterleavedFp32 => interleaved_rope(inv, spec, sh, DType::F32),
    }
    inv.at(Part::AttentionCore);
    attention_core(inv, spec, sh, l);
    inv.at(Part::OutputProjection);
    output_projection(inv, spec, sh, l);
    residual_dropout(inv, sh, l, Part::AttentionResidualDropout);
}

/// The layer's first norm: a LayerNorm, Cohere 2's, Qwen3-Next's zero-centred RMSNorm or the
/// family's RMSNorm (OLMo 2 has none before attention).
fn input_norm(inv: &mut Inventory, spec: &ModelSpec, sh: &Shape, l: &Layout) {
    if spec.norm == NormKind::LayerNorm {
        layer_norm(inv, label!("input_layernorm"), sh, l);
    } else if spec.family == Family::Cohere2 {
        cohere_norm(
            inv,
            label!("input_layernorm"),
            (l.norm_tokens, l.h_local),
            sh,
        );
    } else if spec.gated_attention() {
        let (nt, h) = (l.norm_tokens, l.h_local);
        zero_centred_norm(
            inv,
            label!("input_layernorm"),
            (nt * h, nt * h, h),
            sh,
            sh.stream(),
        );
    } else if spec.family != Family::Olmo2 {
        let (nt, h) = (l.norm_tokens, l.h_local);
        rms_norm(inv, label!("input_layernorm"), nt, h, sh, norm_family(spec));
    }
}

/// The attention projections' inputs. With sequence parallelism a column-parallel linear saves
/// its sequence-sharded input and all-gathers it again in backward (Korthikanti et al. 2022,
/// §4.2.2; Megatron's LinearWithGradAccumulationAndAsyncCommunication), so it saves `th`.
/// Under LoRA only the adapted projections keep anything (`lora_qkv` of q, k, v).
fn projections(inv: &mut Inventory, spec: &ModelSpec, sh: &Shape, l: &Layout) {
    let Layout { t, th, q, kv, .. } = *l;
    let qkv = if sh.base_trainable { 3 } else { sh.lora_qkv };
    if spec.family == Family::Phi3 {
        linear_inputs(inv, label!("qkv_proj input"), th, qkv.min(1), sh);
    } else if spec.family == Family::Cohere2 {
        // q/k/v and the MLP's gate/up read the same norm output (parallel block); with
        // attention-only adapters only the three projections keep an adapter copy.
        let readers = if sh.base_trainable || sh.lora_mlp {
            qkv + 2
        } else {
            qkv
        };
        linear_inputs(
            inv,
            label!("q/k/v_proj and gate/up_proj input"),
            th,
            readers,
            sh,
        );
    } else if let Some(m) = &spec.mla {
        mla_projections(inv, spec, sh, l, m);
    } else {
        linear_inputs(inv, label!("q/k/v_proj input"), th, qkv, sh);
        if sh.dora && !sh.base_trainable {
            let adapted = sh.adapted_qkv_widths(q, kv);
            dora_outputs(
                inv,
                label!("q/k/v_proj"),
                (th / t.max(1), sh.linear_out()),
                &adapted,
                sh,
            );
        }
    }
}

/// The norms of q and k before RoPE: Qwen3-Next's zero-centred ones, OLMo 2's over the whole
/// projections, Gemma 3's, Qwen3's and EXAONE 4's per head.
fn qk_norms(inv: &mut Inventory, spec: &ModelSpec, sh: &Shape, l: &Layout) {
    let Layout { t, q, kv, .. } = *l;
    let c = sh.compute();
    if spec.gated_attention() {
        // Qwen3-Next's q_norm and k_norm: zero-centred RMSNorms over each head. q is a view of
        // q_proj's output (query and gate side by side), so in fp32, where `.float()` returns
        // the view, pow and mul keep the whole output.
        // A 4-bit base's q_proj returns its input's dtype (`Shape::linear_out`).
        let out = sh.linear_out();
        let q_in = if out == DType::F32 { 2 * t * q } else { t * q };
        let d = spec.head_dim;
        inv.at(Part::QkNorm);
        zero_centred_norm(inv, label!("q_norm"), (q_in, t * q, d), sh, out);
        zero_centred_norm(inv, label!("k_norm"), (t * kv, t * kv, d), sh, out);
    } else if spec.qk_norm && spec.class().traits.qk_norm == QkNorm::Whole {
        // The class's RMSNorm over the whole q and k projections (their compute-dtype
        // outputs): the fp32 input, the rsqrt, the normalized input where the weight trains
        // (fp32 where the weight is applied before the cast back, OLMo 2's; OLMoE's and
        // MiniMax-M2's cast first).
        let family = norm_family(spec);
        inv.at(Part::QkNorm);
        rms_norm_of(inv, label!("q_norm"), (t, q, c), sh, family);
        rms_norm_of(inv, label!("k_norm"), (t, kv, c), sh, family);
    } else if spec.qk_norm && spec.family == Family::Gemma {
        // Gemma 3's q_norm/k_norm are Gemma's RMSNorm per head: the fp32 input (a copy of
        // the 16-bit projection output), the rsqrt, and (x * rsqrt) * (1 + w) in fp32, which
        // saves the fp32 normalized input and each norm's 1 + w (found on fake CUDA).
        inv.at(Part::QkNorm).add(
            what!("q_norm/k_norm: fp32 inputs and fp32 normalized inputs (saved by pow, mul)"),
            2 * t * (q + kv),
            DType::F32,
        );
        inv.add(
            what!("q_norm/k_norm: rsqrt of the variance (one per head)"),
            t * (q + kv) / spec.head_dim,
            DType::F32,
        );
        inv.add(
            what!("q_norm/k_norm: 1 + weight, fp32 (saved by mul)"),
            2 * spec.head_dim,
            DType::F32,
        );
    } else if spec.qk_norm {
        // Per-head RMSNorm on q and k before RoPE (Qwen3): fp32 input + normalized. After
        // RoPE under autocast (Hunyuan) both are fp32: RoPE's output is.
        let fp32_out =
            c == DType::F32 || (sh.amp() && spec.class().traits.qk_norm == QkNorm::AfterRope);
        // The weight's product saves the normalized input only where the weight trains
        // (frozen under LoRA: measured on CPU, tests/reference/test_peft.py).
        let trains = sh.base_trainable;
        let per = if fp32_out && trains { 2 } else { 1 };
        inv.at(Part::QkNorm).add(
            what!("q_norm/k_norm: fp32 inputs and normalized outputs"),
            (t * (q + kv)) * per,
            DType::F32,
        );
        // The rsqrt of each head's variance, fp32, saved by the normalizing mul (found at
        // full size on fake CUDA: tests/reference/test_cuda_fake.py).
        inv.add(
            what!("q_norm/k_norm: rsqrt of the variance (one per head)"),
            t * (q + kv) / spec.head_dim,
            DType::F32,
        );
        if !fp32_out && trains {
            inv.add(what!("q_norm/k_norm: normalized outputs"), t * (q + kv), c);
        }
    }
}

/// GLM-4's and Ernie 4.5's apply_rotary_pos_emb interleave cos and sin afresh in every layer
/// (`repeat_interleave`), and their multiplies save those copies, not the shared tables: in
/// the hidden states' dtype (GLM-4), or in fp32 (Ernie 4.5 rotates in fp32 and casts back).
fn interleaved_rope(inv: &mut Inventory, spec: &ModelSpec, sh: &Shape, rope: DType) {
    inv.add(
        what!("RoPE cos and sin, interleaved in this layer (saved by RoPE's multiplies)"),
        2 * sh.s * spec.rotary_dim(),
        rope,
    );
}

/// The attention core as the layer's implementation and kernel run it: SDPA's math kernel,
/// a fused kernel, gpt-oss's eager attention with sinks, or eager attention.
fn attention_core(inv: &mut Inventory, spec: &ModelSpec, sh: &Shape, l: &Layout) {
    match sh.attention {
        Attention::Sdpa | Attention::Flash2 | Attention::Flash3 | Attention::Flex
            if l.kernel == Backend::Math =>
        {
            math_attention(inv, sh, l)
        }
        Attention::Sdpa | Attention::Flash2 | Attention::Flash3 | Attention::Flex => {
            fused_qkv(inv, spec, sh, l);
            window_mask(inv, spec, sh, l);
            // The kernel's output is o_proj's input as it is, unless a gate or a heads-first
            // layout comes between: an 8-bit o_proj then holds it too.
            let read_by_o_proj = !spec.gated_attention() && !q_heads_first(spec, l);
            sdpa_outputs(inv, sh, l, sh.held_inputs && read_by_o_proj);
        }
        Attention::Eager if spec.is_gpt_oss() => sink_attention(inv, sh, l),
        Attention::Eager => eager_attention(inv, spec, sh, l),
    }
}

/// The q, k and v a fused kernel (flash, memory-efficient, cuDNN) saves; it keeps its output
/// and the fp32 logsumexp besides (`sdpa_outputs`), and no s x s. Under autocast SDPA casts the
/// fp32 rotated q and k to the compute dtype.
fn fused_qkv(inv: &mut Inventory, spec: &ModelSpec, sh: &Shape, l: &Layout) {
    let Layout { t, q, kv, .. } = *l;
    let c = sh.compute();
    if repeats_kv(spec, sh, l) {
        // transformers' repeat_kv copies k and v to every query head (no enable_gqa with a
        // mask or wide heads): SDPA saves the copies (measured on CPU for Llama 4's chunked
        // layers).
        inv.add(what!("q after RoPE (saved by SDPA)"), t * q, c);
        inv.add(
            what!("k after RoPE, repeated to all heads (repeat_kv; saved by SDPA)"),
            t * kv * l.groups,
            c,
        );
        inv.add(
            what!("v repeated to all heads (repeat_kv; saved by SDPA)"),
            t * kv * l.groups,
            c,
        );
    } else if spec.family == Family::Phi3 {
        // q and k rotated (new tensors); v a view of the fused output, or with the KV cache
        // on the cache's concatenated copy (found on fake CUDA).
        inv.add(what!("q, k (rotated) (saved by SDPA)"), t * (q + kv), c);
        if sh.kv_cache {
            inv.add(
                what!("v concatenated into the KV cache (use_cache; saved by SDPA)"),
                t * kv,
                c,
            );
        } else {
            inv.add(
                what!("fused qkv output, kept by the v view (saved by SDPA)"),
                t * (q + 2 * kv),
                c,
            );
        }
    } else if let Some(m) = &spec.mla {
        inv.add(
            what!("q, unrotated and rotated parts joined (saved by SDPA)"),
            t * q,
            c,
        );
        inv.add(
            what!("k expanded from the latent (saved by SDPA)"),
            t * kv,
            c,
        );
        // v is a view of kv_b_proj's output (16-bit already under autocast, so not cast):
        // SDPA keeps that whole storage, the unrotated k's columns too.
        inv.add(
            what!("kv_b_proj output, kept by the v view (saved by SDPA)"),
            t * l.heads * (m.qk_nope_head_dim + m.v_head_dim),
            c,
        );
    } else {
        inv.add(what!("q after RoPE (saved by SDPA)"), t * q, c);
        inv.add(what!("k after RoPE (saved by SDPA)"), t * kv, c);
        inv.add(what!("v (saved by SDPA)"), t * kv, c);
    }
}

/// Eager attention: matmul(q, k^T) saves q and the repeated k; softmax saves its fp32 output,
/// which is cast back to the query dtype (fp32 under autocast, where matmul then casts it) and
/// saved by matmul(probs, v) with the repeated v.
fn eager_attention(inv: &mut Inventory, spec: &ModelSpec, sh: &Shape, l: &Layout) {
    let c = sh.compute();
    eager_qk(inv, sh, l);
    // Llama 4's softmax runs in the scores' dtype: the residual stream's (its mask, in the
    // stream's dtype, promotes the 16-bit scores under autocast).
    let probs = if spec.llama4.is_some() {
        sh.stream()
    } else {
        DType::F32
    };
    inv.at(Part::AttentionScores).add(
        if probs == DType::F32 {
            label!("softmax output, fp32 (saved by softmax)")
        } else {
            label!("softmax output (saved by softmax)")
        },
        l.scores,
        probs,
    );
    if !eager_dropout(inv, sh, l, sh.compute()) && c != probs {
        inv.add(
            what!("probabilities cast to the compute dtype (saved by matmul probs v)"),
            l.scores,
            c,
        );
    }
    eager_v(inv, sh, l);
}

/// What eager attention's matmul(q, k^T) saves: q after RoPE and k, repeated to every query
/// head under grouped-query attention.
fn eager_qk(inv: &mut Inventory, sh: &Shape, l: &Layout) {
    let Layout { t, q, kv, .. } = *l;
    let c = sh.compute();
    inv.add(what!("q after RoPE (saved by matmul q k^T)"), t * q, c);
    let k_what = if l.groups > 1 {
        label!("k repeated to all heads (saved by matmul q k^T)")
    } else {
        label!("k after RoPE (saved by matmul q k^T)")
    };
    inv.add(k_what, t * kv * l.groups, c);
}

/// What eager attention's matmul(probs, v) saves besides the probabilities: v, repeated to
/// every query head under grouped-query attention. (Multi-head latent attention's v is a
/// strided view, which matmul copies.)
fn eager_v(inv: &mut Inventory, sh: &Shape, l: &Layout) {
    let v_what = if l.groups > 1 {
        label!("v repeated to all heads (saved by matmul probs v)")
    } else {
        label!("v (saved by matmul probs v)")
    };
    inv.at(Part::AttentionCore)
        .add(v_what, l.t * l.v * l.groups, sh.compute());
}

/// The output projection's input, and DoRA's tensors for it. attn_output.transpose(1, 2)
/// .contiguous(): the fused kernels already write their output in (batch, seq, heads, dim)
/// layout, so o_proj saves a view of it; eager's and the math kernel's matmul output is
/// (batch, heads, seq, dim) and the transpose makes a copy that o_proj saves. A q that reaches
/// the kernel heads-first makes the transpose copy too (`q_heads_first`).
fn output_projection(inv: &mut Inventory, spec: &ModelSpec, sh: &Shape, l: &Layout) {
    let t = l.t;
    let c = sh.compute();
    if spec.gated_attention() {
        // Qwen3-Next multiplies the attention output by sigmoid(gate) before o_proj: the
        // sigmoid of the gate half of q_proj's output and the contiguous attention output (a
        // copy where the kernel wrote it heads first, else the fused kernel's own output) are
        // saved by the product, which o_proj saves in turn.
        inv.add(
            what!("output gate sigmoid (saved by the product)"),
            t * l.o,
            sh.linear_out(),
        );
        if l.quadratic(sh) || q_heads_first(spec, l) {
            inv.add(
                what!("contiguous attention output (saved by the gate's product)"),
                t * l.o,
                c,
            );
        }
        attention_output_inputs(
            inv,
            label!("o_proj input (gated attention output)"),
            t * l.o,
            1,
            sh,
        );
    } else if !sh.base_trainable && !sh.lora_o {
        // A frozen o_proj without an adapter keeps nothing, but an 8-bit one its input: the
        // contiguous copy where the kernel wrote heads first (a fused kernel's own output
        // is saved by the kernel already).
        if sh.held_inputs && (l.quadratic(sh) || q_heads_first(spec, l)) {
            attention_output_inputs(
                inv,
                label!("o_proj input (contiguous attention output)"),
                t * l.o,
                0,
                sh,
            );
        }
    } else if !sh.base_trainable && !l.quadratic(sh) && !q_heads_first(spec, l) {
        // LoRA: the fused kernel's output, which the kernel saves, is o_proj's input as it is
        // (the transpose makes no copy): lora_A keeps only the copies it casts.
        lora_adapter_inputs(
            inv,
            label!("o_proj input (the kernel's output)"),
            t * l.o,
            1,
            sh,
            true,
        );
    } else if l.quadratic(sh) || !sh.base_trainable || q_heads_first(spec, l) {
        attention_output_inputs(
            inv,
            label!("o_proj input (contiguous attention output)"),
            t * l.o,
            1,
            sh,
        );
    } else if sh.te_fp8 {
        // The kernel's output is o_proj's input, saved by the kernel; a te.Linear saves its
        // own fp8 copy of it besides.
        te_linear_inputs(
            inv,
            label!("o_proj input (the kernel's output)"),
            t * l.o,
            1,
        );
    }
    if sh.dora && !sh.base_trainable && sh.lora_o {
        // Its input is attention's output, in the compute dtype, which a 4-bit Linear returns.
        dora_outputs(inv, label!("o_proj"), (l.o, sh.compute()), &[l.h_local], sh);
    }
}

/// Whether q reaches a fused kernel laid out (batch, heads, seq, dim): a half-rotary q (GLM-4
/// and its MoE, multi-head latent attention) comes from `torch.cat` in that layout, and so
/// does RoPE's result when q is a slice of a fused qkv output (Phi-3, GPT-NeoX: the strided
/// view is not dense, and the elementwise ops write a contiguous result). The flash and cuDNN
/// kernels write their output in q's layout, so `transpose(1, 2).contiguous()` copies it
/// before the output projection; the memory-efficient kernel always writes (batch, seq, heads,
/// dim). Found on fake CUDA (tests/reference/test_cuda_fake.py).
pub(super) fn q_heads_first(spec: &ModelSpec, l: &Layout) -> bool {
    let heads_first =
        spec.rotary_dim() < spec.head_dim || matches!(spec.family, Family::Phi3 | Family::GptNeox);
    heads_first && l.kernel != Backend::Efficient
}

/// Llama 4's RoPE layers L2-normalize q and k after RoPE (`Llama4TextL2Norm`, no weight:
/// `x.float()` saved by pow and mul, and the rsqrt per head), where `use_qk_norm`; its NoPE
/// layers scale q by a per-position temperature (`attn_temperature_tuning`), an fp32 vector of
/// the sequence's length that the multiply saves. RoPE itself (a complex multiply by the
/// shared `freqs_cis`) saves nothing of its own.
fn llama4_qk(
    inv: &mut Inventory,
    (l4, head_dim): (&crate::model::Llama4, u64),
    sh: &Shape,
    l: &Layout,
) {
    if !l.other && l4.qk_l2_norm {
        inv.at(Part::QkNorm).add(
            what!("q/k L2 norm: fp32 q and k (saved by pow, mul)"),
            l.t * (l.q + l.kv),
            DType::F32,
        );
        inv.add(
            what!("q/k L2 norm: rsqrt per head (saved by mul)"),
            l.t * (l.q + l.kv) / head_dim,
            DType::F32,
        );
    } else if l.other && l4.temperature_tuning {
        inv.at(Part::AttentionInputs).add(
            what!("attention temperature per position, fp32 (saved by mul with q)"),
            sh.s,
            DType::F32,
        );
    }
}

/// gpt-oss's eager attention (`eager_attention_forward` in modeling_gpt_oss): each head's
/// sink logit is joined to the scores by `torch.cat`, the row maximum subtracted (max keeps
/// its int64 indices), and the softmax runs in the logits' dtype (the residual stream's: bf16
/// in bf16, fp32 under autocast, where the fp32 mask promotes them) over s + 1 columns; the
/// probabilities without the sink column are a view that matmul reads as it is, cast to v's
/// dtype first when they differ.
fn sink_attention(inv: &mut Inventory, sh: &Shape, l: &Layout) {
    let c = sh.compute();
    eager_qk(inv, sh, l);
    let rows = sh.b * l.heads * sh.s;
    inv.add(
        what!("row maximum's indices, int64 (saved by max)"),
        rows,
        DType::I64,
    );
    let logits = sh.stream();
    inv.at(Part::AttentionScores).add(
        what!("softmax output over the scores and the sink (saved by softmax)"),
        rows * (sh.s + 1),
        logits,
    );
    if !eager_dropout(inv, sh, l, c) && logits != c {
        inv.add(
            what!("probabilities cast to the compute dtype (saved by matmul probs v)"),
            l.scores,
            c,
        );
    }
    eager_v(inv, sh, l);
}

/// Whether transformers' SDPA path copies k and v to every query head before the call
/// (`sdpa::sdpa_takes_gqa`): grouped-query attention in a masked layer, or with heads wider
/// than 256. With one key/value head on the GPU `repeat_kv`'s reshape of the expanded
/// tensor is a view, and the kernel saves the head itself (fake CUDA: Gemma 3 1B).
fn repeats_kv(spec: &ModelSpec, sh: &Shape, l: &Layout) -> bool {
    sh.attention == Attention::Sdpa
        && l.groups > 1
        && l.kv > spec.head_dim
        && !sdpa::sdpa_takes_gqa(spec, l.masked)
}

/// A masked local layer's attention mask as SDPA saves it: transformers' boolean (batch, 1,
/// s, s) mask becomes a float one in q's dtype (`convert_boolean_attn_mask`, materialized
/// over the batch), which the fused kernels keep for backward as `attn_bias`; the
/// memory-efficient kernel pads its last dimension to a multiple of 16 (`preprocess_mask`)
/// and keeps the padded storage. The math kernel adds it in place and keeps nothing.
/// Measured on CPU and on an H100 (cuDNN): OLMo 3's sliding layers, Llama 4's chunked ones.
fn window_mask(inv: &mut Inventory, spec: &ModelSpec, sh: &Shape, l: &Layout) {
    if !l.masked || l.kernel == Backend::Math || sh.attention != Attention::Sdpa {
        return;
    }
    let cols = if l.kernel == Backend::Efficient {
        sh.s.div_ceil(16) * 16
    } else {
        sh.s
    };
    let what = if spec.llama4.is_some() {
        label!("chunked-attention mask in q's dtype (saved by SDPA)")
    } else {
        label!("sliding-window mask in q's dtype (saved by SDPA)")
    };
    inv.add(what, sh.b * sh.s * cols, sh.compute());
}

/// What fused attention (SDPA's flash, memory-efficient and cuDNN kernels) saves besides q,
/// k and v: the output (`held` when an 8-bit o_proj's context holds it too: kept through
/// checkpointing), the fp32 logsumexp and the kernel's RNG tensors.
pub(super) fn sdpa_outputs(inv: &mut Inventory, sh: &Shape, l: &Layout, held: bool) {
    let what = label!("attention output (saved by SDPA)");
    if held {
        inv.add_held(
            what!("{what}, held by the 8-bit o_proj"),
            l.t * l.o,
            sh.compute(),
        );
    } else {
        inv.add(what, l.t * l.o, sh.compute());
    }
    // The memory-efficient kernel pads the logsumexp's sequence to a multiple of 32
    // (`_efficient_attention_forward`; torch/_meta_registrations.py); flash keeps
    // (b, heads, s) and cuDNN (b, heads, s, 1).
    let (rows, what) = if l.kernel == Backend::Efficient {
        (
            sh.s.div_ceil(32) * 32,
            label!("logsumexp, sequence padded to 32 (saved by SDPA)"),
        )
    } else {
        (sh.s, label!("logsumexp (saved by SDPA)"))
    };
    inv.add(what, sh.b * l.heads * rows, DType::F32);
    if sh.attention == Attention::Sdpa {
        // SDPA's CUDA kernels return their philox seed and offset whether dropout is on or
        // not, and the backward keeps them: 16 B for cuDNN and memory-efficient, 24 B for
        // flash (`rng_state` and `unused`). Measured on an H100 (torch 2.11): each kernel
        // forced in turn, every layer's saved bytes exact with these.
        let (n, what) = if l.kernel == Backend::Flash {
            (
                3,
                label!("RNG state: rng_state and unused (saved by SDPA's flash kernel)"),
            )
        } else {
            (
                2,
                label!("RNG state: philox seed and offset (saved by SDPA)"),
            )
        };
        inv.add(what, n, DType::I64);
    } else if sh.attention_dropout > 0.0 {
        // flash-attn regenerates the dropout mask from its saved RNG state (assumed).
        inv.add(
            what!("dropout RNG state (saved by flash-attn)"),
            2,
            DType::I64,
        );
    }
}

/// SDPA's math kernel (`_scaled_dot_product_attention_math`, the same composite on CUDA and
/// CPU): fp16/bf16 inputs are first cast to fp32 (PyTorch's default,
/// `allow_fp16_bf16_reduction_math_sdp(False)`), then q and k scaled by sqrt(scale) each
/// (new tensors, which the q k^T matmul saves, k repeated to all heads under GQA), the
/// softmax output, dropout's mask and dropped probabilities, and v (repeated under GQA) for
/// the probs v matmul, all fp32. No logsumexp. (Measured on CPU, where SDPA with dropout
/// runs this kernel: `tests/reference`.)
pub(super) fn math_attention(inv: &mut Inventory, sh: &Shape, l: &Layout) {
    let c = DType::F32;
    inv.add(
        what!("q scaled (saved by matmul q k^T, SDPA math)"),
        l.t * l.q,
        c,
    );
    inv.add(
        what!("k scaled, repeated to all heads (saved by matmul q k^T, SDPA math)"),
        l.t * l.kv * l.groups,
        c,
    );
    inv.at(Part::AttentionScores).add(
        what!("softmax output (saved by softmax, SDPA math)"),
        l.scores,
        c,
    );
    eager_dropout(inv, sh, l, c);
    inv.at(Part::AttentionCore).add(
        what!("v, repeated to all heads (saved by matmul probs v, SDPA math)"),
        l.t * l.v * l.groups,
        c,
    );
}

/// Eager attention's dropout on the probabilities: the mask and the dropped probabilities
/// (which matmul(probs, v) saves). Returns whether dropout is on.
pub(super) fn eager_dropout(inv: &mut Inventory, sh: &Shape, l: &Layout, dtype: DType) -> bool {
    if sh.attention_dropout <= 0.0 {
        return false;
    }
    inv.add(
        what!("attention dropout mask (saved by dropout)"),
        l.scores,
        DType::Bool,
    );
    inv.add(
        what!("dropped probabilities (saved by matmul probs v)"),
        l.scores,
        dtype,
    );
    true
}
