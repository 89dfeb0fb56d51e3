//! What multi-head latent attention's projections save before the attention core
//! (DeepSeek-V2/V3, GLM-4.5).

use super::linear::linear_inputs;
use super::norms::rms_norm_of;
use super::{Inventory, Layout, Shape};
use crate::dtype::DType;
use crate::model::{Mla, ModelSpec};

/// Multi-head latent attention's projections before the attention core
/// (`DeepseekV3Attention.forward`): q_a_proj (or q_proj) and kv_a_proj_with_mqa read the
/// norm's output; q_a_layernorm and kv_a_layernorm normalize the two latents, which q_b_proj
/// and kv_b_proj read.
pub(super) fn mla_projections(
    inv: &mut Inventory,
    spec: &ModelSpec,
    sh: &Shape,
    l: &Layout,
    m: &Mla,
) {
    let (t, c) = (l.t, sh.compute());
    if m.q_lora_rank > 0 {
        let r = m.q_lora_rank;
        linear_inputs(
            inv,
            label!("q_a_proj/kv_a_proj_with_mqa input"),
            l.th,
            2,
            sh,
        );
        rms_norm_of(inv, label!("q_a_layernorm"), (t, r, c), sh, spec.family);
        linear_inputs(
            inv,
            label!("q_b_proj input (q_a_layernorm output)"),
            t * r,
            1,
            sh,
        );
    } else {
        linear_inputs(inv, label!("q_proj/kv_a_proj_with_mqa input"), l.th, 2, sh);
    }
    // kv_a_layernorm reads the latent columns of kv_a_proj_with_mqa's output, a view: its fp32
    // cast copies the view in 16-bit, but in fp32 `.to` returns the view, so pow and mul keep
    // the whole output (the shared rotated k's columns too).
    let kvr = m.kv_lora_rank;
    let (first, what) = if c == DType::F32 {
        (
            t * (kvr + m.qk_rope_head_dim),
            label!(
                "kv_a_layernorm: kv_a_proj_with_mqa output, kept by its input view (saved by pow, mul)"
            ),
        )
    } else {
        (
            t * kvr,
            label!("kv_a_layernorm: fp32 copy of the input (saved by pow, mul)"),
        )
    };
    inv.add(what, first, DType::F32);
    inv.add(
        what!("kv_a_layernorm: rsqrt of the variance"),
        t,
        DType::F32,
    );
    if sh.base_trainable {
        inv.add(
            what!("kv_a_layernorm: normalized input (saved by mul with weight)"),
            t * kvr,
            c,
        );
    }
    linear_inputs(
        inv,
        label!("kv_b_proj input (kv_a_layernorm output)"),
        t * kvr,
        1,
        sh,
    );
}
