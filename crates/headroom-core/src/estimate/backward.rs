//! One decoder layer's backward above its saved tensors: the autograd nodes transformers'
//! layers record, in the order the engine runs them.

use crate::activations::{self, Saved, Shape};
use crate::model::{MlpKind, ModelSpec, NormKind};
use crate::scenario::{Attention, Method, Scenario};

/// One decoder layer's backward, from the autograd nodes transformers' layers record (reverse
/// order; each node frees its saved tensors once it ran, `release_variables` in
/// torch/csrc/autograd/engine.cpp; AccumulateGrad steals a fresh gradient as `.grad`). Two
/// points set a dense layer's backward peak above its start (saved tensors, incoming gradient):
/// - the MLP's output side: the output projection's weight gradient, then the product's (or
///   the activation's) input gradients while the incoming one replaced the freed projection
///   input: `dW_out + n x T x f` (n = 2 for act(gate) * up, gelu_new's last product and ReLU,
///   whose saved output is freed only after it ran; 1 for gelu/gelu_tanh). Under autocast the
///   output projection's bf16 weight copy is released by then;
/// - the attention core: the MLP, second norm and output projection gradients have
///   accumulated while their saved tensors were released; eager attention then holds the
///   probabilities' and the scores' gradients (both in softmax's dtype: fp32 in Llama-like
///   models, `softmax(..., dtype=float32)`; SDPA's math kernel the same, in fp32) and v's gradient; the 16-bit copy of the
///   probabilities that matmul saved is freed by then (MmBackward ran). SDPA holds q/k/v's
///   gradients and the flash kernel's fp32 dq accumulator (assumed from its CUDA code).
///
/// Checked against the CPU allocator's events in tests/reference/test_step_peak.py.
pub(super) struct LayerBackward {
    pub lm_head_grad: u64,
    pub final_norm_grad: u64,
    mlp_out: u64,
    before_attention_grads: u64,
    before_attention_freed: u64,
    attention_inflight: u64,
}

impl LayerBackward {
    pub fn new(
        spec: &ModelSpec,
        scen: &Scenario,
        sh: &Shape,
        items: &[Saved],
        autocast_cache_per_layer: u64,
    ) -> Self {
        let tp = scen.parallel.tensor as u64;
        let t = sh.tokens();
        let h = spec.hidden;
        let c = scen.precision.compute_dtype().bytes();
        let pb = sh.stream().bytes();
        let full = scen.method == Method::Full;
        let trained = |x: u64| if full { x * pb } else { 0 };
        let f = spec.intermediate / tp;
        let q = spec.q_dim() / tp;
        let heads = spec.heads / tp.min(spec.heads);
        let norm_params = match spec.norm {
            NormKind::RmsNorm => h,
            NormKind::LayerNorm => 2 * h,
        };
        // The trained weights' casts, freed as each weight's gradient is computed (a LoRA
        // layer's cache holds only its adapters' small casts).
        let amp = full && autocast_cache_per_layer > 0;
        let mats = crate::model::params::mlp_matrices(spec);
        let out_bias = if spec.mlp_bias { h } else { 0 };
        let n = match spec.mlp {
            // A fused gate_up's backward joins the gate and up gradients (GLM-4; measured in
            // tests/reference/test_step_peak.py).
            MlpKind::Gated if spec.fused_gate_up() => 3,
            MlpKind::Gated => 2,
            MlpKind::Plain if matches!(spec.activation.as_str(), "gelu_new" | "relu") => 2,
            MlpKind::Plain => 1,
        };
        let mlp_out = trained(h * f + out_bias) + n * t * f * c - if amp { h * f * c } else { 0 };
        let mlp_params = mats * h * f + if spec.mlp_bias { (mats - 1) * f + h } else { 0 };
        let post_norms = spec.mlp_side_norms();
        let o_params = q * h + if spec.o_bias { h } else { 0 };
        let before_attention_grads = trained(mlp_params + post_norms * norm_params + o_params);
        let before_attention_freed = activations::freed_before_attention(items)
            + if amp { (mats * h * f + q * h) * c } else { 0 };
        let scores = sh.b * heads * sh.s * sh.s;
        let attention_inflight = match scen.attention {
            Attention::Eager => {
                let soft = if spec.softmax_in_fp32() { 4 } else { c };
                let cast_freed = if soft != c { scores * c } else { 0 };
                2 * scores * soft - cast_freed + t * q * c
            }
            // SDPA's math kernel: the same two gradients, all fp32 (it upcasts its inputs).
            Attention::Sdpa | Attention::Flash2 | Attention::Flash3 | Attention::Flex
                if sh.quadratic() =>
            {
                2 * scores * 4 + t * q * 4
            }
            Attention::Sdpa | Attention::Flash2 | Attention::Flash3 | Attention::Flex => {
                t * (spec.q_dim() + 2 * spec.kv_dim()) / tp * c + t * q * 4 + t * q * c
            }
        };
        LayerBackward {
            lm_head_grad: trained(spec.vocab.div_ceil(tp) * h),
            final_norm_grad: if spec.final_norm {
                trained(norm_params)
            } else {
                0
            },
            mlp_out,
            before_attention_grads,
            before_attention_freed,
            attention_inflight,
        }
    }

    /// The MLP's output side above the layer's start: the output projection's weight gradient
    /// (when trained) and the product's input gradients (the allocator replay writes it).
    #[cfg(feature = "replay")]
    pub fn mlp_out(&self) -> u64 {
        self.mlp_out
    }

    /// What the attention core's backward holds at once (the allocator replay writes it).
    #[cfg(feature = "replay")]
    pub fn attention_inflight(&self) -> u64 {
        self.attention_inflight
    }

    /// The layer's backward peak above its start (its gradients as this GPU keeps them).
    pub fn peak(&self, layer_grads: u64) -> u64 {
        let attention = (self.before_attention_grads.min(layer_grads) + self.attention_inflight)
            .saturating_sub(self.before_attention_freed);
        self.mlp_out.max(attention)
    }
}
