//! What a layer's MLP half saves: the norms around it, the gated MLP of the Llama-like layers
//! and the plain MLP of the LayerNorm layers.

use super::linear::{dora_outputs, mlp_linear_inputs, mlp_lora_inputs, next_linear_input};
use super::norms::{layer_norm, norm_family, rms_norm, rms_norm_of, zero_centred_norm};
use super::{Inventory, Layout, Part, Shape, residual_dropout};
use crate::dtype::DType;
use crate::model::{Family, ModelSpec};

/// A Llama-like layer's second half: the norm(s) around the MLP (Gemma 2/3 add one after
/// attention and one after the MLP), the MLP that `mlp` adds, and the residual dropout.
pub(super) fn llama_mlp_side(
    inv: &mut Inventory,
    spec: &ModelSpec,
    sh: &Shape,
    l: &Layout,
    mlp: impl FnOnce(&mut Inventory),
) {
    let family = spec.family;
    let (nt, h) = (l.norm_tokens, l.h_local);
    if family == Family::Olmo2 {
        // OLMo 2 and EXAONE 4 normalize the attention output and the MLP output (each in
        // the compute dtype); the MLP reads the residual stream itself.
        let (post, norms) = ((nt, h, sh.compute()), norm_family(spec));
        inv.at(Part::MlpNorm);
        rms_norm_of(inv, label!("post_attention_layernorm"), post, sh, norms);
        inv.at(Part::Mlp);
        mlp(inv);
        rms_norm_of(inv, label!("post_feedforward_layernorm"), post, sh, norms);
        return residual_dropout(inv, sh, l, Part::MlpResidualDropout);
    }
    // The norms after attention and after the MLP (Gemma 2/3, GLM-4) read a projection's
    // output, in the compute dtype.
    let four_norms = spec.norms_per_layer == 4;
    let post = (nt, h, sh.compute());
    inv.at(Part::MlpNorm);
    // (Named as Gemma 2 names them; GLM-4's are post_self_attn, post_attention, post_mlp.)
    if four_norms {
        rms_norm_of(inv, label!("post_attention_layernorm"), post, sh, family);
    }
    let second = if four_norms {
        label!("pre_feedforward_layernorm")
    } else {
        label!("post_attention_layernorm")
    };
    if spec.gated_attention() {
        zero_centred_norm(inv, second, (nt * h, nt * h, h), sh, sh.stream());
    } else {
        rms_norm(inv, second, nt, h, sh, norm_family(spec));
    }
    inv.at(Part::Mlp);
    mlp(inv);
    if four_norms {
        rms_norm_of(inv, label!("post_feedforward_layernorm"), post, sh, family);
    }
    residual_dropout(inv, sh, l, Part::MlpResidualDropout);
}

/// act(gate(x)) * up(x) then down: the gate output (activation input), the activation
/// output and the up output (both saved by the product) and the product (down's input).
pub(super) fn gated_mlp(inv: &mut Inventory, spec: &ModelSpec, sh: &Shape, f: u64) {
    let t = sh.tokens();
    // Linear outputs: the compute dtype, the stream's for QLoRA's 4-bit Linears.
    let c = sh.linear_out();
    // The sequence-sharded input with sequence parallelism, as for the attention projections.
    let th = if sh.sp {
        t * spec.hidden / sh.tp
    } else {
        t * spec.hidden
    };
    let fused = spec.fused_gate_up();
    if fused {
        mlp_linear_inputs(inv, label!("gate_up_proj input"), th, 1, sh);
    } else if spec.family == Family::Cohere2 {
        // Counted with the attention projections, which read the same norm output.
    } else {
        mlp_linear_inputs(inv, label!("gate/up_proj input"), th, 2, sh);
        if sh.dora && sh.lora_mlp && !sh.base_trainable {
            dora_outputs(inv, label!("gate/up_proj"), (spec.hidden, c), &[f, f], sh);
        }
    }
    let what = if fused {
        label!("gate_up output (saved by the activation and the product)")
    } else {
        label!("gate output (saved by the activation)")
    };
    if fused {
        inv.add(what, 2 * t * f, c);
    } else {
        inv.add(what, t * f, c);
        inv.add(what!("up output (saved by the product)"), t * f, c);
    }
    inv.add(what!("activation output (saved by the product)"), t * f, c);
    if sh.base_trainable {
        next_linear_input(
            inv,
            label!("product act(gate) * up (saved by down_proj)"),
            t * f,
            c,
            sh,
        );
    } else {
        mlp_lora_inputs(inv, label!("down_proj input"), t * f, 1, sh);
        if sh.dora && sh.lora_mlp {
            dora_outputs(
                inv,
                label!("down_proj"),
                (f, c),
                &[spec.hidden / sh.tp.max(1)],
                sh,
            );
        }
    }
}

/// The MLP side of a LayerNorm layer (GPT-2, GPT-NeoX, OPT, StarCoder2): the norm, a plain
/// MLP and its residual dropout.
pub(super) fn plain_mlp_side(inv: &mut Inventory, spec: &ModelSpec, sh: &Shape, l: &Layout) {
    let Layout { t, th, .. } = *l;
    let f = spec.intermediate / sh.tp;
    let c = sh.compute();
    inv.at(Part::MlpNorm);
    if spec.parallel_residual {
        // GPT-NeoX's parallel residual: the MLP's LayerNorm reads the layer's input, which
        // the attention LayerNorm saved already.
        inv.add(
            what!("MLP LayerNorm: mean and rstd, fp32"),
            2 * l.t,
            DType::F32,
        );
    } else {
        layer_norm(inv, label!("MLP LayerNorm"), sh, l);
    }
    inv.at(Part::Mlp);
    mlp_linear_inputs(inv, label!("MLP input"), th, 1, sh);
    match spec.activation.as_str() {
        // GPT-2's gelu_new is written out in Python: 0.5 * x * (1 + tanh(...(x + 0.044715 x^3))):
        // pow saves x, tanh saves its output, the last product saves both factors. Under
        // CUDA autocast `pow` is on the fp32 list (autocast_mode.cpp; CPU's lists lack it):
        // pow saves an fp32 copy of x, and the fp32 x^3 promotes tanh's input, its output
        // and 1 + tanh to fp32; 0.5 * x stays in the compute dtype (found on fake CUDA:
        // tests/reference/test_cuda_fake.py).
        "gelu_new" if sh.amp() => {
            inv.add(
                what!("MLP up output, fp32 copy by autocast (saved by pow)"),
                t * f,
                DType::F32,
            );
            inv.add_n(
                what!("gelu_new: tanh output and 1 + tanh, fp32 (saved by tanh, mul)"),
                t * f,
                DType::F32,
                2,
            );
            inv.add(what!("gelu_new: 0.5 * x (saved by mul)"), t * f, c);
        }
        "gelu_new" => {
            inv.add(what!("MLP up output (saved by pow)"), t * f, c);
            inv.add_n(
                what!("gelu_new: tanh output, 0.5 * x and 1 + tanh (saved by tanh, mul)"),
                t * f,
                c,
                3,
            );
        }
        "relu" => {
            // ReLU's output is also the down projection's input (one storage; under autocast
            // it is already in the compute dtype, so the Linear's cast returns it as is).
            let what = if sh.base_trainable {
                label!("ReLU output (saved by relu and by the down projection)")
            } else {
                label!("ReLU output (saved by relu)")
            };
            inv.add(what, t * f, c);
        }
        _ => inv.add(what!("MLP up output (saved by gelu)"), t * f, c),
    }
    if sh.base_trainable {
        if spec.activation != "relu" {
            next_linear_input(
                inv,
                label!("activation output (saved by the down projection)"),
                t * f,
                c,
                sh,
            );
        }
    } else {
        mlp_lora_inputs(inv, label!("down projection input"), t * f, 1, sh);
    }
    if sh.residual_dropout > 0.0 {
        inv.at(Part::MlpResidualDropout)
            .add(what!("residual dropout mask (MLP)"), th, DType::Bool);
    }
}
