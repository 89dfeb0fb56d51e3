//! What a GPT-2, GPT-NeoX or OPT layer saves: LayerNorm, fused or separate attention
//! projections, the attention core and a plain MLP.

use super::attention::{eager_dropout, math_attention, q_heads_first, sdpa_outputs};
use super::linear::{attention_output_inputs, linear_inputs, lora_adapter_inputs};
use super::mlp::plain_mlp_side;
use super::norms::layer_norm;
use super::{Inventory, Layout, Part, Shape, residual_dropout};
use crate::dtype::DType;
use crate::model::{Family, ModelSpec};
use crate::scenario::Attention;
use crate::sdpa::Backend;

/// GPT-2, GPT-NeoX and OPT: LayerNorm, fused or separate attention projections, plain MLP.
pub(super) fn gpt_layer(inv: &mut Inventory, spec: &ModelSpec, sh: &Shape, l: &Layout) {
    let Layout { t, q, .. } = *l;
    // An 8-bit output projection holds its input, which is the fused kernel's own output
    // where nothing lays it out again (measured on CPU: GPT-2).
    let held_kernel_output = sh.held_inputs && !l.quadratic(sh) && !q_heads_first(spec, l);
    inv.at(Part::InputNorm);
    layer_norm(inv, label!("attention LayerNorm"), sh, l);
    inv.at(Part::AttentionInputs);
    projections(inv, spec, sh, l);
    inv.at(Part::AttentionCore);
    match sh.attention {
        Attention::Sdpa | Attention::Flash2 | Attention::Flash3 | Attention::Flex
            if l.kernel == Backend::Math =>
        {
            math_attention(inv, sh, l)
        }
        Attention::Sdpa | Attention::Flash2 | Attention::Flash3 | Attention::Flex => {
            fused_qkv(inv, spec, sh, l);
            sdpa_outputs(inv, sh, l, held_kernel_output);
        }
        Attention::Eager => eager_attention(inv, spec, sh, l),
    }
    inv.at(Part::OutputProjection);
    if held_kernel_output {
        let out = u64::from(sh.lora_o);
        lora_adapter_inputs(
            inv,
            label!("attention output projection input"),
            t * q,
            out,
            sh,
            true,
        );
    } else if l.quadratic(sh) || !sh.base_trainable || q_heads_first(spec, l) {
        let out = u64::from(sh.base_trainable || sh.lora_o);
        attention_output_inputs(
            inv,
            label!("attention output projection input"),
            t * q,
            out,
            sh,
        );
    }
    residual_dropout(inv, sh, l, Part::AttentionResidualDropout);
    plain_mlp_side(inv, spec, sh, l);
}

/// Whether q, k and v come from one fused Linear (GPT-2's c_attn, GPT-NeoX's
/// query_key_value), not three (OPT).
fn fused_projection(spec: &ModelSpec) -> bool {
    matches!(spec.family, Family::Gpt2 | Family::GptNeox)
}

/// The attention projections' inputs: one fused Linear's, or q/k/v_proj's.
fn projections(inv: &mut Inventory, spec: &ModelSpec, sh: &Shape, l: &Layout) {
    let th = l.th;
    if fused_projection(spec) {
        let fused = if sh.base_trainable {
            1
        } else {
            sh.lora_qkv.min(1)
        };
        linear_inputs(inv, label!("qkv input"), th, fused, sh);
    } else {
        let qkv = if sh.base_trainable { 3 } else { sh.lora_qkv };
        linear_inputs(inv, label!("q/k/v_proj input"), th, qkv, sh);
    }
}

/// The q, k and v a fused kernel saves (its output and logsumexp are `sdpa_outputs`).
fn fused_qkv(inv: &mut Inventory, spec: &ModelSpec, sh: &Shape, l: &Layout) {
    let Layout { t, q, .. } = *l;
    let c = sh.compute();
    if spec.family == Family::Gpt2 {
        // q, k and v are transposed views of c_attn's output, and SDPA (flash and efficient
        // on CUDA, flash on CPU) saves its inputs as given: no copies of its own. With
        // transformers' KV cache on (`use_cache`: GPT-2's config default, and what
        // `model(input_ids, labels=...)` does in training), `DynamicLayer.update`
        // concatenates k and v into fresh tensors, which SDPA then saves; q keeps the fused
        // output. Gradient checkpointing turns the cache off, and so does the Trainer
        // (`TrainingArguments.use_cache` defaults to False in transformers 5): k and v are
        // then views of the fused output.
        inv.add(
            what!("fused qkv output, kept by the q view (saved by SDPA)"),
            3 * t * q,
            c,
        );
        if sh.kv_cache {
            inv.add(
                what!("k and v concatenated into the KV cache (use_cache; saved by SDPA)"),
                2 * t * q,
                c,
            );
        }
    } else if fused_projection(spec) {
        // GPT-NeoX: q and k rotated (new tensors); v a view of the fused output, or with the
        // KV cache on the cache's concatenated copy (found on fake CUDA).
        inv.add(what!("q and k after RoPE (saved by SDPA)"), 2 * t * q, c);
        if sh.kv_cache {
            inv.add(
                what!("v concatenated into the KV cache (use_cache; saved by SDPA)"),
                t * q,
                c,
            );
        } else {
            inv.add(
                what!("fused qkv output, kept by the v view (saved by SDPA)"),
                3 * t * q,
                c,
            );
        }
    } else {
        inv.add(what!("q, k, v (saved by SDPA)"), 3 * t * q, c);
    }
}

/// Eager attention: q and k saved by matmul(q, k^T), the softmax output (and under autocast
/// its cast back), dropout's tensors, and v saved by matmul(probs, v).
fn eager_attention(inv: &mut Inventory, spec: &ModelSpec, sh: &Shape, l: &Layout) {
    let Layout { t, q, .. } = *l;
    let c = sh.compute();
    if spec.family == Family::Gpt2 && sh.b == 1 {
        // q is a transposed view of c_attn's output. at::matmul folds (b, heads, s, d) into
        // (b * heads, s, d) for bmm: with b = 1 that is a view, so bmm saves the whole fused
        // output; with b > 1 it is a copy of q alone. Under autocast c_attn's output is
        // already in the compute dtype, so the same holds (fake CUDA). k (from the KV cache's
        // concatenation) is contiguous.
        inv.add(
            what!("fused qkv output, kept by the q view (saved by matmul q k^T)"),
            3 * t * q,
            c,
        );
        inv.add(what!("k (saved by matmul q k^T)"), t * q, c);
    } else {
        inv.add(what!("q and k (saved by matmul q k^T)"), 2 * t * q, c);
    }
    // GPT-2/NeoX/OPT eager attention calls softmax in the scores' own dtype (no fp32 upcast,
    // unlike Llama), then casts to v's dtype, a no-op. Under CUDA autocast softmax is on the
    // fp32 list: it saves its fp32 output, and the cast back is a new tensor, which the matmul
    // with v saves when no dropout follows (measured on an H100 and on fake CUDA: GPT-2, 4 B
    // more per score than the 16-bit output).
    if sh.amp() {
        inv.at(Part::AttentionScores).add(
            what!("softmax output, fp32 by autocast (saved by softmax)"),
            l.scores,
            DType::F32,
        );
        if sh.attention_dropout <= 0.0 {
            inv.add(
                what!("probabilities cast to the compute dtype (saved by matmul probs v)"),
                l.scores,
                c,
            );
        }
    } else {
        inv.at(Part::AttentionScores)
            .add(what!("softmax output (saved by softmax)"), l.scores, c);
    }
    eager_dropout(inv, sh, l, sh.compute());
    inv.at(Part::AttentionCore)
        .add(what!("v (saved by matmul probs v)"), t * q, c);
}
