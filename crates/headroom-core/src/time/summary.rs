//! The step from its terms: step seconds, throughput, MFU, HFU and overall confidence.

use crate::confidence::Confidence;

use super::StepTime;
use super::cx::Cx;

/// Sums the terms' exposed seconds into a step and derives what follows from it.
pub(super) fn summary(cx: &Cx, terms: Vec<super::TimeTerm>) -> StepTime {
    let (scen, tf) = (cx.scen, &cx.tf);
    let step_seconds: f64 = terms
        .iter()
        .map(|t| t.exposed_seconds)
        .sum::<f64>()
        .max(1e-12);
    let hardware_flops: f64 = terms.iter().map(|t| t.flops).sum();
    // Model FLOPs: what the model needs, no recompute, causal attention counted once:
    // 2·N fwd + 2·N input grads + 2·N_trainable weight grads + 3x causal attention forward
    // (forward 1 + backward 2; flash's 2.5x backward includes a recompute MFU leaves out).
    let model_per_token = 4.0 * tf.matmul_params
        + 2.0 * tf.matmul_params_trainable
        + 3.0 * tf.attention_causal_forward;
    let model_flops = model_per_token * cx.tokens / cx.mp;
    // Tokens the model runs: under DPO both sequences of each pair.
    let tokens_per_step = (scen.sequences() as u64)
        .saturating_mul(scen.seq as u64)
        .saturating_mul(scen.grad_accum as u64)
        .saturating_mul(scen.data_parallel().max(1) as u64);
    let tokens_per_second = tokens_per_step as f64 / step_seconds;
    let gpus = scen.gpus.max(1) as f64;
    let peak_flops = cx.peak * 1e12;
    // Terms under 5% of the step cannot move it much, however rough their rate.
    let confidence = if terms
        .iter()
        .filter(|t| t.exposed_seconds > 0.05 * step_seconds)
        .all(|t| t.confidence != Confidence::Assumed)
    {
        Confidence::Calibrated
    } else {
        Confidence::Assumed
    };
    StepTime {
        hardware_flops_per_gpu: hardware_flops,
        model_flops_per_gpu: model_flops,
        peak_tflops: cx.peak,
        matmul_efficiency: cx.eff,
        step_seconds,
        tokens_per_step,
        tokens_per_second,
        tokens_per_second_per_gpu: tokens_per_second / gpus,
        mfu: model_flops / (step_seconds * peak_flops),
        hfu: hardware_flops / (step_seconds * peak_flops),
        confidence,
        terms,
        assumptions: cx.a.clone(),
    }
}
