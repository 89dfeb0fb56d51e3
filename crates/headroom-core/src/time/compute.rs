//! Compute terms: the forward, backward and recomputed matrix multiplies of one GPU's share.

use crate::scenario::Checkpointing;

use super::attention::KernelRate;
use super::cx::Cx;
use super::terms::Terms;

/// Seconds the GPU computes, by phase: the windows communication can hide behind.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Busy {
    pub forward: f64,
    pub backward: f64,
    /// Checkpointed layers' second forward (0 without checkpointing).
    pub recompute: f64,
    /// Memory-bound kernels inside forward and backward: eager attention's softmax, and the loss.
    pub softmax: f64,
    pub loss: f64,
    /// Of `forward`, the seconds of peft's adapter path (its elementwise kernels): what a
    /// forward with the adapters disabled does not run.
    pub adapter_forward: f64,
}

impl Busy {
    /// Everything the pipeline schedule runs per micro-batch (what its bubble is a fraction of).
    pub fn all(&self) -> f64 {
        self.forward + self.backward + self.recompute + self.softmax + self.loss
    }
}

/// Pushes the compute terms; the memory-bound seconds of `Busy` are the caller's to fill.
pub(super) fn terms(cx: &Cx, terms: &mut Terms) -> Busy {
    let (tf, tokens, mp) = (&cx.tf, cx.tokens, cx.mp);
    // A fused attention kernel is timed at its own rate (`attention_terms`); eager attention
    // and SDPA's math kernel are batched matmuls, timed with the others.
    let fused = super::attention::kernel_rate(cx.gpu, cx.scen, cx.sdpa).filter(|_| !cx.quadratic);
    let (attn_fwd, attn_bwd) = if fused.is_some() {
        (0.0, 0.0)
    } else {
        (tf.attention_forward, tf.attention_backward)
    };
    // Per GPU: layers split over pipeline stages, each matmul split over tensor ranks.
    let fwd_layers = (tf.layer_matmul_forward + attn_fwd) * tokens / mp;
    let fwd_outside = tf.outside_forward * tokens / mp;
    let bwd = (tf.layer_matmul_backward + attn_bwd + tf.outside_backward) * tokens / mp;
    let forward = terms.compute(
        "forward",
        "forward matrix multiplies",
        (fwd_layers + fwd_outside, tf.fp8_forward * tokens / mp),
        || format!(
            "(2·N_linear + 2·h·V + attention {attn_fwd:.3e}/token) x {tokens:.0} tokens / (tp·pp = {mp})"
        ),
        "2 FLOPs per multiply-add (Kaplan et al. 2020 §2.1); attention per Korthikanti et al. 2022 App. A",
    );
    let backward = terms.compute(
        "backward",
        "backward matrix multiplies",
        (bwd, tf.fp8_backward * tokens / mp),
        || format!(
            "input grads 2·N + weight grads 2·N_trainable + attention x{} x {tokens:.0} tokens / {mp}",
            if fused.is_some() {
                "0 (its own term)"
            } else if !cx.quadratic {
                "2.5 (Q·Kᵀ recomputed)"
            } else {
                "2"
            }
        ),
        "backward = 2x forward (Kaplan et al. 2020; EleutherAI Transformer Math 101); FlashAttention-2 (Dao 2023) backward 5 matmuls",
    );
    let ck = cx.ck;
    let per_layer_fwd = (tf.layer_matmul_forward + attn_fwd) / cx.layers;
    let per_layer_fp8 = tf.fp8_forward / cx.layers;
    let recompute = match cx.scen.checkpointing {
        Checkpointing::Selective if cx.quadratic => {
            // Korthikanti's selective recompute reruns Q·Kᵀ and softmax (P·V's output is not
            // needed by backward): half the eager attention forward.
            0.5 * tf.attention_forward * tokens / mp
        }
        // Fused attention already recomputes in backward: selective adds nothing.
        Checkpointing::Selective => 0.0,
        _ => ck * per_layer_fwd * tokens / mp,
    };
    let recompute_fp8 = match cx.scen.checkpointing {
        Checkpointing::Selective => 0.0,
        _ => ck * per_layer_fp8 * tokens / mp,
    };
    let recompute = if recompute > 0.0 {
        terms.compute(
            "recompute",
            "recompute under checkpointing",
            (recompute, recompute_fp8),
            || match cx.scen.checkpointing {
                Checkpointing::Selective => "0.5 x eager attention forward (Q·Kᵀ, softmax)".into(),
                c => format!(
                    "{ck:.0} checkpointed layers ({}) x one layer forward x {tokens:.0} tokens / {mp}",
                    c.id()
                ),
            },
            "one extra forward per checkpointed layer (Chen et al. 2016; Korthikanti et al. 2022 §4-5)",
        )
    } else {
        0.0
    };
    let mut busy = Busy {
        forward,
        backward,
        recompute,
        ..Busy::default()
    };
    if let Some(k) = fused {
        attention_terms(cx, terms, &k, &mut busy);
    }
    unaligned_lm_head(cx, terms, &mut busy);
    busy
}

/// The share of the GEMM curve's rate cuBLAS reaches when a 16-bit matrix's dimension is not a
/// multiple of 8 elements (16 bytes): it cannot use its aligned tensor-core kernels and falls
/// back to CUTLASS kernels that load one element at a time (`*_align1`). MEASURED on the H200
/// (tests/reference/gpu/h200/edge/timing.json, GPT-2 at 8 x 1,024 tokens, vocabulary 50,257):
/// the lm_head's three GEMMs (`cutlass_75_tensorop_bf16_s1688gemm_bf16_*_align1`) took 15.4 ms
/// for 1.9 TFLOP, 0.12 of the dense peak where the calibrated curve gives that shape about
/// 0.7; 0.18 of it.
pub const UNALIGNED_GEMM_SHARE: f64 = 0.18;

/// The lm_head's extra time where the vocabulary is not a multiple of 8 (GPT-2's 50,257):
/// its forward and backward GEMMs run at [`UNALIGNED_GEMM_SHARE`] of the curve's rate.
fn unaligned_lm_head(cx: &Cx, terms: &mut Terms, busy: &mut Busy) {
    let spec = cx.spec;
    if spec.vocab.is_multiple_of(8) || cx.scen.precision.compute_dtype().bytes() != 2 {
        return;
    }
    let heads = 1.0 + spec.mtp_trained as f64;
    let per_token = spec.lm_head_width() as f64 * spec.vocab as f64 * heads;
    let full = cx.scen.method == crate::scenario::Method::Full;
    let (forward, backward) = (2.0 * per_token, if full { 4.0 } else { 2.0 } * per_token);
    let slower = 1.0 / UNALIGNED_GEMM_SHARE - 1.0;
    let tokens = cx.tokens / cx.mp;
    let seconds = terms.stall(
        "unaligned_lm_head",
        "lm_head GEMMs on an unaligned vocabulary",
        (forward + backward) * tokens / cx.rate * slower,
        || {
            format!(
                "vocabulary {} is not a multiple of 8: the lm_head's {:.3e} FLOPs per token run at {UNALIGNED_GEMM_SHARE} of the GEMM rate",
                spec.vocab,
                forward + backward
            )
        },
        "cuBLAS needs 16-byte-aligned dimensions for its tensor-core kernels; the H200 profile of GPT-2 (align1 CUTLASS kernels)",
    );
    let per_flop = seconds / (forward + backward);
    busy.forward += forward * per_flop;
    busy.backward += backward * per_flop;
}

/// A fused attention kernel's forward, backward and recomputed forward at the kernel's own
/// fraction of the peak (times the framework factor, as the matmuls), added to the phases
/// they run in.
fn attention_terms(cx: &Cx, terms: &mut Terms, k: &KernelRate, busy: &mut Busy) {
    let (tf, tokens, mp) = (&cx.tf, cx.tokens, cx.mp);
    let span = f64::from(cx.scen.attention_span()) / cx.cp as f64;
    let efficiency = k.at_span(span);
    let rate = cx.peak * 1e12 * efficiency * cx.a.framework_efficiency;
    // Checkpointed layers run their attention forward again; selective checkpointing keeps
    // a fused kernel's outputs (nothing recomputed).
    let recomputed = match cx.scen.checkpointing {
        Checkpointing::Selective => 0.0,
        _ => cx.ck / cx.layers,
    };
    let forward = tf.attention_forward * tokens / mp;
    let backward = tf.attention_backward * tokens / mp;
    let flops = forward * (1.0 + recomputed) + backward;
    terms.attention(flops, rate, k.kernel, || {
        format!(
            "causal attention {:.3e} forward + {:.3e} backward FLOPs/token ({:.0} of {:.0} \
                 layers' forward again) x {tokens:.0} tokens / {mp}; {} at {} TFLOP/s x {:.2} \
                 x {span:.0}/({span:.0} + {}) tokens x framework {:.2}",
            tf.attention_forward,
            tf.attention_backward,
            cx.ck,
            cx.layers,
            k.kernel.describe().0,
            cx.peak,
            k.efficiency,
            super::attention::HALF_RATE_SPAN,
            cx.a.framework_efficiency
        )
    });
    busy.forward += forward / rate;
    busy.backward += backward / rate;
    busy.recompute += forward * recomputed / rate;
}

/// The no-grad forwards of DPO and KTO (TRL's `_compute_loss`): the policy's forward over the
/// same sequences again for each pass (`Scenario::no_grad_forwards`), its matmuls, attention
/// and elementwise kernels, with no backward. Counted as the forward's busy seconds so far (the
/// policy's forward terms), less the adapters' elementwise path in the reference's passes under
/// LoRA, which TRL runs with the adapters disabled (`null_ref_context`: peft's
/// `disable_adapter`; the adapters' thin matmuls, a small share, stay counted).
pub(super) fn reference_forward(cx: &Cx, terms: &mut Terms, busy: &mut Busy) {
    let tf = &cx.tf;
    let passes = f64::from(cx.scen.no_grad_forwards());
    let reference = f64::from(cx.scen.reference_passes());
    let flops =
        passes * (tf.layer_matmul_forward + tf.attention_forward + tf.outside_forward) * cx.tokens
            / cx.mp;
    let seconds = passes * busy.forward - reference * busy.adapter_forward;
    terms.extra_pass(
        "reference_forward",
        "DPO and KTO: the no-grad forwards (reference, KL completions)",
        (flops, seconds),
        || {
            let off = if busy.adapter_forward > 0.0 && reference > 0.0 {
                "; the reference's without the adapters"
            } else {
                ""
            };
            format!("{passes:.0} more forward(s) of the same sequences: the forward's matmuls, attention and elementwise seconds{off}")
        },
        "TRL 1.16 DPOTrainer._compute_loss and KTOTrainer._compute_loss (log-probabilities under torch.no_grad; the reference under LoRA with peft's adapters disabled)",
    );
    busy.forward += seconds;
}
