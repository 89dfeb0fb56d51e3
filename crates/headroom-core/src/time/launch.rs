//! The host's side of an eager step: every kernel is issued by Python, the dispatcher and
//! autograd one at a time, and when kernels are shorter than that the GPU waits. The step can
//! be no faster than its kernel count times the host's cost per kernel.
//!
//! The kernels are counted from the ops transformers and peft run (the same inventory
//! `elementwise.rs` counts bytes from), forward per layer; backward runs a measured multiple of
//! the forward's kernels; the optimizer's multi-tensor kernels follow PyTorch's chunking.
//!
//! The count is within 7% of the profiler's on eleven H200 steps. What the GPU's terms do not cover
//! becomes an idle term, so small eager steps are no faster than their launches. GRPO's generation
//! is one decoding step per completion token, the slower of the host's launches and reading the
//! weights; with vLLM, waves of what its KV cache holds, bound by reading the weights and the
//! cache.

use crate::activations::Shape;
use crate::model::Scope;
use crate::model::spec::{MlpKind, NormKind};
use crate::scenario::{Method, Optimizer};
use crate::sdpa::Backend;

use super::cx::Cx;
use super::terms::Terms;

/// Host seconds per kernel of an eager transformers training step (Python module calls,
/// autograd's bookkeeping, the dispatcher and the launch). MEASURED: seven steps of 64
/// tokens on the H200 machine (tests/reference/gpu/h200/posttrain/launch.json: Qwen2.5 0.5B,
/// Llama 3.2 1B, GPT-2; eager and SDPA, autocast, checkpointing, LoRA), where the GPU is idle
/// most of the step, took 24.6 to 46.4 µs per kernel the profiler counted; their median,
/// 31.7 µs (`tests/time.rs` recomputes it). A host CPU of another speed changes it.
pub const HOST_SECONDS_PER_KERNEL: f64 = 31.7e-6;

/// Kernels a layer's backward launches per forward kernel that is not a matmul (a matmul's
/// backward is its two gradients' matmuls, one where the weight is frozen). MEASURED on the
/// same runs: Llama 3.2 1B's forward launches 34.6 kernels per layer (what full checkpointing
/// adds, 3,136 against 2,582 per step) and its step 129 per layer beside the optimizer and
/// the parts outside the layers, so its backward 94.4: 14 matmuls and 2.5 kernels per other
/// forward kernel (a norm's and rotary's backward, autograd's gradient sums and copies).
pub const BACKWARD_KERNELS_PER_FORWARD: f64 = 2.5;

/// PyTorch's multi-tensor apply (aten/src/ATen/native/cuda/MultiTensorApply.cuh): one launch
/// covers at most 320 blocks of 65,536 elements, and at most 36 tensors of a four-list op.
const FOREACH_ELEMENTS_PER_LAUNCH: f64 = 320.0 * 65_536.0;
const FOREACH_TENSORS_PER_LAUNCH: f64 = 36.0;

/// Kernels of one step on one GPU, by where they run.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StepKernels {
    /// One layer's forward.
    pub layer_forward: f64,
    /// One layer's backward.
    pub layer_backward: f64,
    /// The parts outside the layers, forward and backward (embedding, rotary tables, final
    /// norm, lm_head, the loss).
    pub outside: f64,
    /// Forward, recompute and backward of every layer of this GPU over all micro-batches.
    pub layers: f64,
    /// The optimizer step.
    pub optimizer: f64,
}

impl StepKernels {
    pub fn total(&self) -> f64 {
        self.layers + self.outside + self.optimizer
    }
}

/// Pushes the host's wait (the part of the host's time the GPU's terms do not cover), then
/// GRPO's generation; both count one layer's kernels, counted once here.
pub(super) fn terms(cx: &Cx, terms: &mut Terms) {
    let sh = Shape::from_scenario(cx.spec, cx.gpu, cx.scen);
    let layer = layer_kernels(cx, &sh);
    // Megatron-style fused loops and replayed CUDA graphs launch few kernels per layer.
    if !(cx.a.fused_kernels || cx.scen.runtime.cuda_graphs) {
        host_wait(terms, &step_kernels_of(cx, &sh, &layer));
    }
    generation(cx, terms, layer.forward);
}

/// The host's wait for the step's kernels `k`.
fn host_wait(terms: &mut Terms, k: &StepKernels) {
    let host = k.total() * HOST_SECONDS_PER_KERNEL;
    let gpu: f64 = terms.list.iter().map(|t| t.exposed_seconds).sum();
    let wait = (host - gpu).max(0.0);
    if wait <= 0.0 {
        return;
    }
    terms.idle(
        "host_launches",
        "waiting on the host to launch kernels",
        wait,
        || {
            format!(
                "{:.0} kernels ({:.0} forward and {:.0} backward per layer, times layers, \
                 recompute and micro-batches; {:.0} outside the layers, {:.0} optimizer) x {:.1} \
                 µs = {host:.4} s, less the {gpu:.4} s the GPU's terms take",
                k.total(),
                k.layer_forward,
                k.layer_backward,
                k.outside,
                k.optimizer,
                HOST_SECONDS_PER_KERNEL * 1e6
            )
        },
        "eager PyTorch issues each kernel from the host; cost per kernel measured on the H200 machine",
    );
    if let Some(t) = terms.list.last_mut() {
        t.confidence = crate::confidence::Confidence::Calibrated;
    }
}

/// The step's kernels on one GPU.
pub(super) fn step_kernels(cx: &Cx) -> StepKernels {
    let sh = Shape::from_scenario(cx.spec, cx.gpu, cx.scen);
    step_kernels_of(cx, &sh, &layer_kernels(cx, &sh))
}

/// The step's kernels from one layer's.
fn step_kernels_of(cx: &Cx, sh: &Shape, layer: &LayerKernels) -> StepKernels {
    let LayerKernels {
        forward,
        matmul_gradients,
        other,
        adapter_forward,
    } = *layer;
    let backward = matmul_gradients + BACKWARD_KERNELS_PER_FORWARD * other;
    let recomputed = cx.ck / cx.layers;
    // DPO's and KTO's no-grad forwards launch a forward's layer kernels each (the kernels
    // outside the layers are not counted for them); the reference's under LoRA without the
    // adapters' (peft's adapters disabled).
    let reference = f64::from(cx.scen.reference_passes());
    let policy = f64::from(cx.scen.no_grad_forwards()) - reference;
    let per_layer =
        forward * (1.0 + recomputed + policy) + (forward - adapter_forward) * reference + backward;
    let outside = outside_kernels(cx, sh);
    StepKernels {
        layer_forward: forward,
        layer_backward: backward,
        outside: outside * cx.m,
        layers: per_layer * cx.layers_local() * cx.m,
        optimizer: optimizer_kernels(cx),
    }
}

/// One layer's forward kernels, the matmuls its backward runs for them, and its other kernels.
#[derive(Clone, Copy)]
struct LayerKernels {
    forward: f64,
    matmul_gradients: f64,
    other: f64,
    /// Of `forward`, peft's adapter path: lora_A's and lora_B's matmuls and the kernels beside
    /// them (0 without adapters).
    adapter_forward: f64,
}

/// One layer's kernels, op by op as transformers' Llama-like, GPT-2 and MoE layers and peft's
/// LoRA Linear run them.
fn layer_kernels(cx: &Cx, sh: &Shape) -> LayerKernels {
    let (spec, scen) = (cx.spec, cx.scen);
    let stream = sh.stream().bytes();
    let compute = sh.precision.compute_dtype().bytes();
    let autocast = sh.precision.is_autocast();
    let mut k = spec.norms_per_layer as f64 * norm_kernels(spec.norm, stream);
    if spec.qk_norm {
        k += 2.0 * norm_kernels(NormKind::RmsNorm, compute);
    }
    // Each Linear one matmul (an expert layer runs its top-k experts' Linears).
    let linears: f64 = cx
        .inv
        .linears()
        .filter(|t| t.scope != Scope::Model)
        .map(|t| cx.used_per_layer(t))
        .sum();
    // Rotary on q and k: x·cos, rotate_half's neg and cat, ·sin and the sum, for each.
    if spec.position_embeddings == 0 && spec.head_dim > 0 {
        k += 10.0;
    }
    k += attention_kernels(cx, sh);
    // The attention output made contiguous, the two residual adds.
    k += 3.0;
    k += if super::elementwise::python_gelu(spec) {
        8.0
    } else {
        1.0
    };
    if spec.mlp == MlpKind::Gated {
        k += 1.0;
    }
    if sh.residual_dropout > 0.0 {
        k += 2.0;
    }
    // Autocast: an fp32 stream cast for each Linear that reads it, and each fp32 weight cast
    // (the trainable ones once per step, a frozen fp32 base's at every forward: once here).
    if autocast {
        let readers = if spec.mlp == MlpKind::Gated { 5.0 } else { 2.0 };
        if stream > compute {
            k += readers;
        }
        if !scen.method.quantized_base()
            && crate::states::weight_dtype(scen, false).bytes() > compute
        {
            k += linears;
        }
    }
    // bitsandbytes' 4-bit Linear dequantizes its weight (the absmax's own dequantization
    // first, with double quantization) before the matmul.
    if scen.method == Method::Qlora {
        k += 2.0 * linears;
    }
    // An 8-bit Linear's forward: the fp16 cast, abs, >=, any, argwhere (outlier columns),
    // the row quantization and the int32 result's dequantization and cast.
    if scen.method == Method::Int8 {
        k += 8.0 * linears;
    }
    // The base's matmuls: two gradients each where the weights train, one where frozen.
    let mut matmuls = linears;
    let mut matmul_gradients = if scen.method == Method::Full {
        2.0 * linears
    } else {
        linears
    };
    let mut adapter_forward = 0.0;
    if scen.method != Method::Full {
        let (adapters, per_adapter) = lora_kernels(cx, sh);
        // lora_A and lora_B train: two gradients each.
        matmuls += 2.0 * adapters;
        matmul_gradients += 4.0 * adapters;
        k += adapters * per_adapter;
        adapter_forward = adapters * (2.0 + per_adapter);
    }
    LayerKernels {
        forward: k + matmuls,
        matmul_gradients,
        other: k,
        adapter_forward,
    }
}

/// transformers' RMSNorm: the cast in (16-bit inputs), pow, mean, the eps add, rsqrt, the
/// multiply, the cast back and the weight multiply; LayerNorm is one kernel.
fn norm_kernels(kind: NormKind, input_bytes: u64) -> f64 {
    match kind {
        NormKind::RmsNorm if input_bytes < 4 => 8.0,
        NormKind::RmsNorm => 6.0,
        _ => 1.0,
    }
}

/// SDPA's fused kernels are one; eager (and SDPA's math kernel) run the scores' matmul, the
/// scaling, the mask's add, softmax in fp32 with its casts and the values' matmul, and
/// repeat_kv copies grouped keys and values.
fn attention_kernels(cx: &Cx, sh: &Shape) -> f64 {
    let grouped = cx.spec.kv_dim() < cx.spec.q_dim();
    let eager = cx.quadratic || matches!(cx.sdpa, Backend::Math);
    let mut k = if eager { 7.0 } else { 1.0 };
    if eager && grouped {
        k += 2.0;
    }
    if sh.attention_dropout > 0.0 && eager {
        k += 1.0;
    }
    k
}

/// peft's lora.Linear: the adapted Linears per layer, and the kernels beside lora_A's and
/// lora_B's matmuls each runs: the scaling, the sum, and the input's cast to the adapters'
/// dtype where it differs.
fn lora_kernels(cx: &Cx, sh: &Shape) -> (f64, f64) {
    let scen = cx.scen;
    let storage = scen.lora.adapter_dtype.bytes();
    let casts = if sh.stream().bytes() != storage {
        1.0
    } else {
        0.0
    } + if sh.precision.is_autocast() && storage != sh.precision.compute_dtype().bytes()
    {
        1.0
    } else {
        0.0
    };
    let adapters = cx
        .inv
        .tensors
        .iter()
        .filter(|t| t.scope != Scope::Model && crate::states::lora_adapts(cx.spec, scen, t))
        .map(|t| cx.used_per_layer(t))
        .sum();
    (adapters, 2.0 + casts)
}

/// Outside the layers, forward and backward: the embedding (its backward when it trains), the
/// rotary tables, the final norm, lm_head's matmuls and the loss (the cast to fp32, the
/// shifted labels, log-softmax and NLL, and their backward).
fn outside_kernels(cx: &Cx, sh: &Shape) -> f64 {
    let norm = norm_kernels(cx.spec.norm, sh.stream().bytes());
    let embedding = if cx.scen.method == Method::Full {
        5.0
    } else {
        1.0
    };
    let rotary = if cx.spec.position_embeddings == 0 {
        8.0
    } else {
        1.0
    };
    embedding + rotary + norm * (1.0 + BACKWARD_KERNELS_PER_FORWARD) + 3.0 + 10.0
}

/// The optimizer's kernels: foreach AdamW runs eight multi-tensor ops (lerp, mul, addcmul,
/// sqrt, div, add, addcdiv, the weight decay's mul), each as many launches as its chunks need;
/// fused AdamW one such op; bitsandbytes' 8-bit step one kernel per tensor. The for-loop
/// AdamW is priced per tensor by `memory.rs`.
fn optimizer_kernels(cx: &Cx) -> f64 {
    let scen = cx.scen;
    let inv = &cx.inv;
    let count =
        |t: &crate::model::ParamTensor| (t.copies.max(1) * inv.multiplicity(t.scope)) as f64;
    let tensors = if scen.method == Method::Full {
        inv.tensors.iter().map(count).sum::<f64>()
    } else {
        2.0 * inv
            .tensors
            .iter()
            .filter(|t| crate::states::lora_adapts(cx.spec, scen, t))
            .map(count)
            .sum::<f64>()
    };
    let share = cx.st.params_local as f64 / cx.st.params_total.max(1) as f64;
    let elements = cx.st.params_trainable as f64 * share;
    let tensors = tensors * share;
    let launches = (elements / FOREACH_ELEMENTS_PER_LAUNCH)
        .ceil()
        .max((tensors / FOREACH_TENSORS_PER_LAUNCH).ceil());
    match scen.optimizer {
        Optimizer::AdamW => 8.0 * launches,
        Optimizer::AdamWFused => launches,
        Optimizer::AdamWForLoop => 0.0,
        Optimizer::AdamW8bit | Optimizer::PagedAdamW8bit => tensors,
        Optimizer::Sgd => launches,
        _ => 4.0 * launches,
    }
}

/// Host seconds per kernel of transformers' `generate` decoding (no autograd: each op is the
/// module call, the dispatcher and the launch). FITTED on one GRPO step measured on the H200
/// (tests/reference/gpu/h200/posttrain/posttrain.json, Qwen2.5 0.5B, 16 completions of 256
/// tokens: 4.87 s a step, of which the model's training 0.10 s); the same step with a KL
/// term's reference pass is held out (tests/reference/test_posttrain_measured.py).
pub const GENERATE_HOST_SECONDS_PER_KERNEL: f64 = 18.3e-6;

/// Kernels of one decoding step beside the layers' forward: the embedding, the final norm,
/// lm_head, and sampling's temperature, top-k/top-p filtering, softmax and draw.
const DECODE_OUTSIDE_KERNELS: f64 = 30.0;

/// GRPO's generation phase (TRL with transformers' `generate`), once per optimizer step: the
/// prompts' prefill at the matmul rate, then one decoding step per completion token, each
/// bound by reading every weight or by the host's launches, whichever is slower; with a KL
/// term, the reference's no-grad pass over prompt and completion.
fn generation(cx: &Cx, terms: &mut Terms, layer_forward: f64) {
    let scen = cx.scen;
    if !scen.trainer.generates() {
        return;
    }
    if let Some(engine) = crate::vllm::Engine::of(cx.spec, scen, cx.gpu, &cx.st) {
        return vllm_generation(cx, terms, &engine);
    }
    let sequences = f64::from(scen.micro_batch) * f64::from(scen.grad_accum);
    let seq = f64::from(scen.seq);
    let prompt = f64::from(scen.prompt).min(seq);
    let steps = seq - prompt;
    // A decoding step's kernels: each layer's forward and its KV cache's two appends.
    let kernels = (layer_forward + 2.0) * cx.layers_local() + DECODE_OUTSIDE_KERNELS;
    let host = kernels * GENERATE_HOST_SECONDS_PER_KERNEL;
    let read = cx.st.weights as f64 / (cx.hbm * super::elementwise::FUSED_BANDWIDTH_SHARE);
    let per_token = host.max(read);
    let params = cx.tf.matmul_params;
    // No-grad passes over prompt and completion: the reference's with a KL term, and RLOO's
    // policy pass for its old log-probabilities.
    let passes =
        f64::from(u8::from(scen.kl) + u8::from(scen.trainer == crate::scenario::Trainer::Rloo));
    let reference = passes * seq;
    let flops = 2.0 * params * sequences * (prompt + reference);
    let seconds = steps * per_token + flops / cx.rate;
    terms.idle(
        "generation",
        "generation (transformers generate)",
        seconds,
        || {
            format!(
                "{steps:.0} decoding steps x max({kernels:.0} kernels x {:.0} µs, weights read \
                 {read:.4} s) + {flops:.3e} FLOPs of prefill{} at the matmul rate, for \
                 {sequences:.0} completions",
                GENERATE_HOST_SECONDS_PER_KERNEL * 1e6,
                if passes > 0.0 { " and the scoring passes" } else { "" }
            )
        },
        "transformers' generate: one forward per token; host cost per kernel fitted on one H200 GRPO step",
    );
    if let Some(t) = terms.list.last_mut() {
        t.confidence = crate::confidence::Confidence::Calibrated;
    }
}

/// GRPO's generation in vLLM, once per optimizer step: the prompts' prefill at the matmul rate;
/// decoding in waves of the completions the KV cache holds at once, each step reading every
/// weight and the wave's KV cache (CUDA graphs: no host floor); the weights handed to the engine
/// (a device copy colocated, a broadcast over NVLink to a server); and the no-grad scoring passes
/// on the training GPUs: the policy's for TRL's importance-sampling correction, the reference's
/// with a KL term. A server decodes every training GPU's completions while the trainers wait.
fn vllm_generation(cx: &Cx, terms: &mut Terms, e: &crate::vllm::Engine) {
    let scen = cx.scen;
    let seq = f64::from(scen.seq);
    let prompt = f64::from(scen.prompt).min(seq);
    let completion = seq - prompt;
    let share = super::elementwise::FUSED_BANDWIDTH_SHARE;
    let bandwidth = cx.hbm * share;
    let concurrent = e.concurrent as f64;
    let per_step = (e.weights as f64
        + concurrent * (prompt + completion / 2.0) * e.kv_per_token as f64)
        / bandwidth;
    let waves = e.waves() as f64;
    let decode = waves * completion * per_step;
    let params = cx.tf.matmul_params;
    let prefill = 2.0 * params * e.sequences as f64 * prompt / cx.rate;
    let sync = if e.colocated() {
        2.0 * e.weights as f64 / bandwidth
    } else {
        e.weights as f64 / (cx.own_link_gbs(1) * 1e9)
    };
    let sequences = f64::from(scen.micro_batch) * f64::from(scen.grad_accum);
    let passes = if scen.kl { 2.0 } else { 1.0 };
    let scoring = passes * 2.0 * params * sequences * seq / cx.rate;
    terms.idle(
        "generation",
        "generation (vLLM)",
        decode + prefill + sync + scoring,
        || {
            format!(
                "{waves:.0} wave(s) x {completion:.0} decoding steps x {per_step:.4} s (weights and \
                 KV cache read) + prefill {prefill:.3} s + weight sync {sync:.3} s + {passes:.0} \
                 scoring pass(es) {scoring:.3} s, for {} completions ({} at once)",
                e.sequences, e.concurrent
            )
        },
        "vLLM decodes with CUDA graphs, bound by reading the weights and KV cache (assumed); TRL's importance-sampling correction scores every completion",
    );
    if let Some(t) = terms.list.last_mut() {
        t.confidence = crate::confidence::Confidence::Assumed;
    }
}
