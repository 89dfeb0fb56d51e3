//! What is saved outside the decoder layers: RoPE tables, the embedding dropout mask, the final
//! norm, the vision tower, multi-token prediction modules and lm_head's input.

use super::linear::te_linear_inputs;
use super::norms::{cohere_norm, norm_family, rms_norm, zero_centred_norm};
use super::vision::vision_tower;
use super::{Inventory, Part, Saved, Shape};
use crate::dtype::DType;
use crate::model::classes::LayerRope;
use crate::model::{Family, ModelSpec, NormKind};

/// Saved tensors outside the decoder layers: RoPE tables, the final norm, lm_head's input.
pub fn outside_layers(spec: &ModelSpec, sh: &Shape) -> Vec<Saved> {
    let mut inv = Inventory::default();
    let t = sh.tokens();
    let h = spec.hidden;
    rope_tables(&mut inv, spec, sh);
    match spec.norm {
        NormKind::RmsNorm if spec.family == Family::Cohere2 => {
            inv.at(Part::FinalNorm);
            cohere_norm(&mut inv, label!("final norm"), (t, h), sh);
        }
        NormKind::RmsNorm if spec.gated_attention() => {
            inv.at(Part::FinalNorm);
            zero_centred_norm(
                &mut inv,
                label!("final norm"),
                (t * h, t * h, h),
                sh,
                sh.stream(),
            );
        }
        NormKind::RmsNorm => {
            if spec.final_norm {
                inv.at(Part::FinalNorm);
                rms_norm(&mut inv, label!("final norm"), t, h, sh, norm_family(spec));
            }
        }
        NormKind::LayerNorm => {
            if sh.embedding_dropout > 0.0 {
                inv.at(Part::EmbeddingDropout).add(
                    what!("embedding dropout mask"),
                    t * h,
                    DType::Bool,
                );
            }
            if spec.final_norm {
                inv.at(Part::FinalNorm);
                inv.add(what!("final LayerNorm input"), t * h, sh.stream());
                inv.add(
                    what!("final LayerNorm mean and rstd, fp32"),
                    2 * t,
                    DType::F32,
                );
            }
        }
    }
    if let Some(v) = &spec.vision
        && sh.vision_trained
        && sh.images > 0
    {
        inv.at(Part::Vision);
        vision_tower(&mut inv, v, sh);
    }
    for _ in 0..spec.mtp_trained {
        mtp_module(&mut inv, spec, sh);
    }
    lm_head_input(&mut inv, spec, sh);
    inv.items
}

/// The RoPE tables the layers' rotations share, kept until the first layer's backward.
fn rope_tables(inv: &mut Inventory, spec: &ModelSpec, sh: &Shape) {
    if spec.llama4.is_some() {
        // Llama 4's `freqs_cis`: (1, s, head_dim / 2) complex64 whatever the precision, saved
        // by every RoPE layer's complex multiply.
        inv.at(Part::Rope).add(
            what!("RoPE freqs_cis, complex64 (saved by every RoPE layer's multiply)"),
            sh.s * spec.head_dim,
            DType::F32,
        );
    } else if spec.is_rotary() && spec.class().traits.rope == LayerRope::Shared {
        // cos and sin, (1, s, head_dim) in the stream dtype, saved by RoPE's multiplies.
        // OLMo 3's rotary embedding returns them in fp32 whatever the model's dtype, one pair
        // per kind of layer (its sliding and full layers rotate with their own tables; traced
        // on CPU, kept by the checkpoints' closures too).
        let olmo3 = spec.class().traits.rope_fp32_per_kind;
        // They are cast to the hidden states' dtype: the stream's (fp32 under autocast in full
        // training, the base's under LoRA).
        let rope = if olmo3 { DType::F32 } else { sh.stream() };
        let pairs =
            if olmo3 && spec.local_attention().is_some() && spec.other_attention_layers() > 0 {
                2
            } else {
                1
            };
        inv.at(Part::Rope).add_n(
            what!("RoPE cos and sin (saved by every layer's RoPE)"),
            2 * sh.s * spec.rotary_dim(),
            rope,
            pairs,
        );
    }
}

/// One trained multi-token prediction module: its two input norms, the concatenation eh_proj
/// saves, its head's norm and the lm_head's input again (its decoder layer is counted with the
/// layers).
fn mtp_module(inv: &mut Inventory, spec: &ModelSpec, sh: &Shape) {
    let (t, h) = (sh.tokens(), spec.hidden);
    inv.at(Part::FinalNorm);
    let family = norm_family(spec);
    rms_norm(
        inv,
        label!("MTP enorm (next token's embedding)"),
        t,
        h,
        sh,
        family,
    );
    rms_norm(
        inv,
        label!("MTP hnorm (previous depth's hidden state)"),
        t,
        h,
        sh,
        family,
    );
    let cat = if sh.amp() { sh.compute() } else { sh.stream() };
    inv.add(
        what!("MTP eh_proj input (the two norms concatenated)"),
        2 * t * h,
        cat,
    );
    rms_norm(inv, label!("MTP head norm"), t, h, sh, family);
    inv.at(Part::LmHeadInput);
    inv.add(what!("MTP lm_head input"), t * h, cat);
}

/// lm_head's input when the lm_head (or the tied embedding) trains.
fn lm_head_input(inv: &mut Inventory, spec: &ModelSpec, sh: &Shape) {
    let (t, h) = (sh.tokens(), spec.hidden);
    inv.at(Part::LmHeadInput);
    if sh.te_lm_head {
        te_linear_inputs(inv, label!("lm_head input"), t * h, 1);
    } else if sh.base_trainable || !spec.tie_embeddings {
        // A frozen lm_head (LoRA) needs no weight gradient, so its matmul keeps only the
        // weight (or under autocast the weight's cast, `states::local::frozen_cast`); a
        // trained one (full training, peft's modules_to_save copy) keeps its input: under
        // autocast the input's cast, which a 16-bit stream does not need.
        if sh.amp() && sh.lm_head_trained && sh.stream() != sh.compute() {
            inv.add(
                what!("lm_head input, cast by autocast"),
                t * h,
                sh.compute(),
            );
        } else if sh.lm_head_trained {
            inv.add(
                what!("lm_head input (final norm output)"),
                t * h,
                sh.stream(),
            );
        }
    }
}
