//! What a torch.compile'd Llama-like decoder layer saves for backward.
//!
//! Compiled, AOTAutograd's min-cut partitioner decides what the forward keeps: it saves the
//! few tensors the backward cannot recompute cheaply and recomputes the pointwise rest (the
//! norms' fp32 copies, rotary's pieces, the activation's inputs), so a compiled layer keeps
//! far less than eager transformers does. Read with `saved_tensors_hooks` on real compiled
//! transformers layers on CPU (torch 2.15, transformers 5.23; `tests/reference/test_compiled.py`
//! checks every element count against this module): per layer, in the layer's order,
//! - the layer's input and the residual stream after attention, in the stream's dtype;
//! - the two norms' outputs as the matmuls read them (the compute dtype);
//! - rotated q and attention's output (q width), rotated k and v (kv width), and SDPA's fp32
//!   logsumexp per head and query;
//! - gate's and up's outputs and their activated product (intermediate width);
//! - each norm's fp32 reciprocal root per token.
//!
//! On the H200 this takes a compiled Llama 3.2 1B step's allocated peak from the eager
//! estimate's 34.5 GB to within 4% of the measured 24.9 GB (tests/reference/gpu/h200/edge/
//! timing.json), with the compiled loss (`crate::loss`). Only this layout is modelled; other
//! layouts, adapters, checkpointing and tensor parallelism keep the eager inventory, which
//! is higher than what compiled runs allocate (conservative).

use crate::activations::{Part, Saved, Shape};
use crate::dtype::DType;
use crate::model::{Family, MlpKind, ModelSpec, NormKind};
use crate::scenario::{Attention, Checkpointing, Method, Scenario};
use crate::sdpa::Backend;

/// The compiled layer's saved tensors where the scenario is one this module models: a
/// compiled, fully trained Llama-family dense layer (RMSNorm, full rotary, separate q/k/v,
/// gated MLP) with a fused SDPA kernel, no checkpointing, dropout, fp8, int8 packing,
/// packing or model parallelism. None elsewhere.
pub fn layer(spec: &ModelSpec, sh: &Shape, scen: &Scenario) -> Option<Vec<Saved>> {
    let modelled = scen.runtime.compiled()
        && spec.family == Family::Llama
        && spec.moe.is_none()
        && !spec.qk_norm
        && spec.norm == NormKind::RmsNorm
        && spec.mlp == MlpKind::Gated
        && spec.rotary_dim() == spec.head_dim
        && spec.sliding_window.is_none()
        && scen.method == Method::Full
        && scen.attention == Attention::Sdpa
        && matches!(
            sh.sdpa,
            Backend::Flash | Backend::Cudnn | Backend::Efficient
        )
        && scen.checkpointing == Checkpointing::None
        && sh.attention_dropout == 0.0
        && sh.residual_dropout == 0.0
        && !scen.fp8.is_on()
        && !scen.act_int8
        && !scen.offload_activations
        && !scen.packing
        && sh.tp == 1
        && scen.context() == 1;
    if !modelled {
        return None;
    }
    let t = sh.tokens();
    let (h, q, kv, i) = (spec.hidden, spec.q_dim(), spec.kv_dim(), spec.intermediate);
    let compute = sh.precision.compute_dtype();
    // As eager SDPA keeps them (`activations`): the memory-efficient kernel pads the
    // logsumexp's sequence to 32, and the CUDA kernels keep their RNG state.
    let lse_rows = if sh.sdpa == Backend::Efficient {
        sh.s.div_ceil(32) * 32
    } else {
        sh.s
    };
    let rng = if sh.sdpa == Backend::Flash { 3 } else { 2 };
    let (f32, stream) = (DType::F32, sh.stream());
    let items: [(&str, u64, DType, u64, Part); 11] = [
        (
            label!("layer input (compiled)"),
            t * h,
            stream,
            1,
            Part::InputNorm,
        ),
        (
            label!("input norm rsqrt, fp32 (compiled)"),
            t,
            f32,
            1,
            Part::InputNorm,
        ),
        (
            label!("q/k/v input (compiled)"),
            t * h,
            compute,
            1,
            Part::AttentionInputs,
        ),
        (
            label!("rotated q, attention output (compiled)"),
            t * q,
            compute,
            2,
            Part::AttentionCore,
        ),
        (
            label!("rotated k, v (compiled)"),
            t * kv,
            compute,
            2,
            Part::AttentionCore,
        ),
        (
            label!("SDPA logsumexp, fp32 (compiled)"),
            sh.b * spec.heads * lse_rows,
            f32,
            1,
            Part::AttentionCore,
        ),
        (
            label!("SDPA RNG state (compiled)"),
            rng,
            DType::I64,
            1,
            Part::AttentionCore,
        ),
        (
            label!("residual after attention (compiled)"),
            t * h,
            stream,
            1,
            Part::MlpNorm,
        ),
        (
            label!("MLP norm rsqrt, fp32 (compiled)"),
            t,
            f32,
            1,
            Part::MlpNorm,
        ),
        (
            label!("gate/up input (compiled)"),
            t * h,
            compute,
            1,
            Part::MlpNorm,
        ),
        (
            label!("gate, up, act(gate) * up (compiled)"),
            t * i,
            compute,
            3,
            Part::Mlp,
        ),
    ];
    Some(
        items
            .into_iter()
            .map(|(what, elements, dtype, copies, part)| Saved {
                what: what.to_string(),
                elements,
                dtype,
                copies,
                part,
                held: false,
            })
            .collect(),
    )
}
