//! Prepare: everything about one training step that the phases read, computed once from the
//! model and the scenario (model states, saved tensors per layer, the loss, temporaries, the
//! checkpointing plan of each layer).
//!
//! Each layer's `LayerPlan` comes from `Checkpointing::plan` and is shared with the time model.
//! GRPO's `Generation` holds the completions' KV cache and the largest no-grad working set before
//! training. With vLLM, `crate::vllm::Engine` gives its budget, weights, profile run and KV cache,
//! what it holds while the trainer trains, and why it would refuse to start.

use std::borrow::Cow;

use crate::activations::{self, Saved, Shape};
use crate::catalog::Gpu;
use crate::dtype::DType;
use crate::loss::{LossMemory, loss_memory};
use crate::model::{ModelSpec, ParamInventory, inventory};
use crate::scenario::{Attention, Checkpointing, LayerPlan, Method, Scenario};
use crate::states::{ModelStates, model_states};

use super::backward::LayerBackward;
use super::kv_cache::{KvCache, kv_cache};

/// One prepared training step.
pub(super) struct Step<'a> {
    pub spec: &'a ModelSpec,
    pub scen: &'a Scenario,
    /// The parameter inventory and the model states (shared with the time model).
    pub inv: Cow<'a, ParamInventory>,
    pub st: ModelStates,
    /// Tokens in the micro-batch.
    pub t: u64,
    /// The residual stream's dtype and the matmuls' dtype.
    pub stream: DType,
    pub compute: DType,
    /// Decoder layers on this GPU.
    pub layers: u64,
    /// In-flight micro-batches on the first pipeline stage (1F1B keeps up to pp of them).
    pub in_flight: u64,
    /// Whether saved tensors go to the host (`save_on_cpu`).
    pub offload: bool,
    /// One dense layer's saved tensors, and their bytes.
    pub dense: Vec<Saved>,
    pub dense_bytes: u64,
    /// A dense layer's saved tensors with the model's other kind of attention (empty where
    /// all layers attend alike): what the allocator replay writes for those layers.
    #[cfg(feature = "replay")]
    other: Vec<Saved>,
    /// One MoE layer's saved bytes (0 for dense models) and how many of the last layers are MoE.
    moe_bytes: u64,
    /// A dense and a MoE layer's saved bytes with the model's other kind of attention
    /// (`ModelSpec::is_other_attention`), 0 where all layers attend alike.
    other_dense_bytes: u64,
    other_moe_bytes: u64,
    /// One MoE layer's saved tensors (empty for a dense model).
    pub moe: Vec<Saved>,
    sparse_layers: u64,
    /// What a checkpointed layer keeps: its input.
    pub ckpt_input: u64,
    /// Of a layer's saved bytes, what an 8-bit base's Linears hold outside autograd's hooks
    /// ([`activations::Saved::held`]): kept through checkpointing and to the end of
    /// backward. By kind as [`Step::full`]: dense, MoE, and each with the other attention.
    held: [u64; 4],
    /// Of `held`, what is the layer's input itself (OLMo 2's q/k/v read it with no norm
    /// between): a checkpointed layer keeps it once.
    held_input: u64,
    /// What the first layer does not save when its input needs no gradient: under LoRA/QLoRA
    /// without checkpointing nothing calls `enable_input_require_grads`, the frozen embeddings'
    /// output has no grad, and the first input norm runs outside autograd (measured on CPU,
    /// tests/reference/test_peft.py).
    first_unsaved: u64,
    /// Of `first_unsaved`, the 8-bit Linears' inputs the first layer's contexts do not hold.
    first_unsaved_held: u64,
    /// Eager attention's s x s tensors in a dense layer (what selective recompute drops), and
    /// in a layer with the model's other kind of attention.
    pub attention_scores: u64,
    other_attention_scores: u64,
    /// Saved tensors outside the layers (RoPE tables, final norm, lm_head input).
    pub outside: Vec<Saved>,
    pub outside_bytes: u64,
    pub lm: LossMemory,
    /// input_ids and labels (int64).
    pub inputs: u64,
    /// Alive from the step's start: weights, optimizer states (and master weights), inputs,
    /// communication buckets.
    pub base: u64,
    pub tmp: Temporaries,
    pub bwd: LayerBackward,
    /// fp8 operand copies inside one converted Linear's backward (0 without fp8), and the
    /// context-parallel ring's chunks in flight in attention's backward (0 without cp).
    pub backward_extra: u64,
    pub kv: KvCache,
    /// GRPO's generation phase before the training forward: the KV cache its completions fill
    /// and the largest no-grad working set (the prompts' prefill, or the reference's
    /// log-probability pass); both 0 for other objectives.
    pub generation: Generation,
    /// vLLM generating GRPO's completions (`crate::vllm`), None otherwise.
    pub vllm: Option<crate::vllm::Engine>,
}

/// Unsaved tensors that set peaks inside the phases.
pub(super) struct Temporaries {
    /// Alive for the whole model forward: the eager mask and the 16-bit embedding output.
    pub model_forward: u64,
    /// The eager mask again when checkpointing keeps it (until the first layer's
    /// backward), else 0.
    pub ckpt_mask: u64,
    /// Inside one layer's forward: the largest unsaved temporary.
    pub layer_forward: u64,
    /// Inside one MoE layer's backward: activation gradients in flight (assumed).
    pub layer_backward: u64,
    /// The residual stream's gradient.
    pub residual_grad: u64,
}

impl<'a> Step<'a> {
    pub fn prepare(spec: &'a ModelSpec, gpu: &Gpu, scen: &'a Scenario) -> Self {
        Self::prepare_with(spec, Cow::Owned(inventory(spec)), gpu, scen)
    }

    /// [`Step::prepare`] with the model's parameter inventory already built.
    pub fn prepare_with(
        spec: &'a ModelSpec,
        inv: Cow<'a, ParamInventory>,
        gpu: &Gpu,
        scen: &'a Scenario,
    ) -> Self {
        let st = model_states(spec, &inv, gpu, scen);
        let sh = Shape::from_scenario(spec, gpu, scen);
        let t = sh.tokens();
        let stream = sh.stream();
        let compute = scen.precision.compute_dtype();
        let pp = scen.parallel.pipeline as u64;
        let LayerKinds {
            dense,
            dense_bytes,
            #[cfg(feature = "replay")]
            other,
            moe,
            moe_bytes,
            held,
            other_dense_bytes,
            other_moe_bytes,
            other_attention_scores,
            unpacked,
        } = LayerKinds::of(spec, &sh, scen);
        let first = if first_moe(spec) { &moe } else { &dense };
        let held_input = if spec.family == crate::model::Family::Olmo2 {
            held_in(first, activations::Part::AttentionInputs)
        } else {
            0
        };
        let first_unsaved_held = first_layer_unheld(scen, &sh, first);
        let first_unsaved = first_layer_unsaved(spec, scen, &sh, first) + first_unsaved_held;
        let outside = activations::outside_layers(spec, &sh);
        let outside_bytes = activations::total(&outside);
        let lm = loss_memory(spec, scen);
        let inputs = 2 * t * 8;
        let vllm = crate::vllm::Engine::of(spec, scen, gpu, &st);
        let vllm_held = vllm
            .as_ref()
            .map_or(0, crate::vllm::Engine::held_while_training);
        let base = st.weights
            + st.optimizer.device
            + st.master_weights
            + inputs
            + st.persistent_comm()
            + vllm_held;
        let tp = scen.parallel.tensor as u64;
        let (tmp, backward_extra) = transients(spec, &inv, scen, &sh, unpacked);
        // DPO's reference forward runs after the policy's, under no_grad (TRL's
        // `_compute_loss`): every tensor the policy saved is alive while one reference layer
        // holds its working set (the residual and normed inputs, and a gated MLP's gate, up
        // and product at once) and then its head.
        let mut lm = lm;
        // One layer's no-grad working set per token: the residual and normed inputs, and a
        // gated MLP's gate, up and product at once.
        let no_grad_layer = spec.hidden * (stream.bytes() + compute.bytes())
            + spec.intermediate / tp
                * compute.bytes()
                * if spec.mlp == crate::model::MlpKind::Gated {
                    3
                } else {
                    2
                };
        if scen.reference_forward() {
            lm.forward_peak = lm
                .forward_peak
                .max(lm.retained + (t * no_grad_layer + tmp.layer_forward).max(lm.reference_head));
        }
        // Autocast's cache of the trainable weights' 16-bit casts, which `generate` fills too:
        // it runs under autocast, and the cache keeps the cast of any leaf that requires a
        // gradient, no_grad or not.
        let autocast_cache = if scen.precision.is_autocast() {
            st.autocast_cache_per_layer * st.layers_local + st.autocast_cache_outside
        } else {
            0
        };
        let generation = Generation::of(spec, scen, compute, (no_grad_layer, autocast_cache));
        let bwd = LayerBackward::new(spec, scen, &sh, &dense, st.autocast_cache_per_layer);
        // transformers' decoder models return a KV cache in training too (`use_cache` defaults
        // to True; `DynamicLayer.update` keeps the key/value tensors themselves). It lives as
        // long as the outputs: through the loss, and to the end of the step when the loop
        // keeps `outputs`.
        let kv = kv_cache(spec, scen, &sh);
        Step {
            backward_extra,
            layers: st.layers_local,
            in_flight: pp.min(scen.grad_accum as u64).max(1),
            offload: scen.offload_activations,
            ckpt_input: activations::checkpoint_input(spec, &sh),
            held,
            held_input,
            first_unsaved,
            first_unsaved_held,
            attention_scores: activations::attention_scores(&dense),
            other_attention_scores,
            sparse_layers: spec.moe.as_ref().map_or(0, |m| m.sparse_layers),
            spec,
            scen,
            inv,
            st,
            t,
            stream,
            compute,
            dense,
            dense_bytes,
            #[cfg(feature = "replay")]
            other,
            moe_bytes,
            other_dense_bytes,
            other_moe_bytes,
            moe,
            outside,
            outside_bytes,
            lm,
            inputs,
            base,
            tmp,
            bwd,
            kv,
            generation,
            vllm,
        }
    }

    /// What a colocated vLLM engine holds while the trainer trains.
    pub fn vllm_held(&self) -> u64 {
        self.vllm
            .as_ref()
            .map_or(0, crate::vllm::Engine::held_while_training)
    }

    /// Whether layer `i` is a MoE layer: the last `sparse_layers` when some are dense
    /// (mlp_only_layers).
    pub fn is_moe(&self, i: u64) -> bool {
        self.spec.moe.is_some() && i >= self.spec.layers - self.sparse_layers
    }

    /// The tensors dense layer `i` saves, in forward order: a layer with the model's other
    /// kind of attention (a sliding-window model's full or sliding layers) has its own, as its
    /// kernel and mask may differ.
    #[cfg(feature = "replay")]
    pub fn saved_of(&self, i: u64) -> &[Saved] {
        if self.spec.is_other_attention(i) && !self.other.is_empty() {
            &self.other
        } else {
            &self.dense
        }
    }

    /// Everything layer `i` saves without checkpointing.
    pub fn full(&self, i: u64) -> u64 {
        match (self.is_moe(i), self.spec.is_other_attention(i)) {
            (true, false) => self.moe_bytes,
            (false, false) => self.dense_bytes,
            (true, true) => self.other_moe_bytes,
            (false, true) => self.other_dense_bytes,
        }
    }

    /// Of [`full`](Self::full), what an 8-bit base's Linears hold outside autograd's hooks
    /// (0 otherwise): a checkpointed layer keeps it, its recompute's copies are freed with the
    /// recomputed graph, and backward releases it only with the whole graph.
    pub fn held(&self, i: u64) -> u64 {
        let other = self.spec.is_other_attention(i);
        self.held[usize::from(self.is_moe(i)) + 2 * usize::from(other)]
    }

    /// Autocast's 16-bit weight copies of layer `i`: one layer's, but where a model mixes dense
    /// and MoE layers or softmax and linear attention (Qwen3-Next), that layer's kind's.
    pub fn casts(&self, i: u64) -> u64 {
        let mixed_mlp = self.sparse_layers > 0 && self.sparse_layers < self.spec.layers;
        if mixed_mlp || self.spec.linear_attention.is_some() {
            let softmax = self.spec.linear_attention.is_none() || self.spec.is_other_attention(i);
            self.st.autocast_cache_kinds.of(self.is_moe(i), softmax)
        } else {
            self.st.autocast_cache_per_layer
        }
    }

    /// The weight copies layer `i` keeps to its backward when it saves its tensors
    /// ([`casts`](Self::casts) and [`kept_copies`](Self::kept_copies)): the first layer keeps
    /// none of its input projections' when its input needs no gradient.
    pub fn kept_casts(&self, i: u64) -> u64 {
        let unsaved = if i == 0 && self.first_unsaved > 0 {
            self.st.layer_input_casts
        } else {
            0
        };
        (self.casts(i) + self.kept_copies(i)).saturating_sub(unsaved)
    }

    /// Layer `i`'s weight copies that no cache holds (Transformer Engine's fp8 copies, an fp32
    /// frozen base's casts under LoRA; else 0): kept to the layer's backward where the layer
    /// saves its tensors, made again by a checkpointed layer's recompute.
    pub fn kept_copies(&self, i: u64) -> u64 {
        let softmax = self.spec.linear_attention.is_none() || self.spec.is_other_attention(i);
        self.st.kept_weight_copies_kinds.of(self.is_moe(i), softmax)
    }

    /// What checkpointing does with layer `i`. Selective recompute drops eager attention's
    /// s x s tensors; with fused attention there are none, so the layer is saved as is.
    pub fn plan(&self, i: u64) -> LayerPlan {
        match self.scen.checkpointing.plan(i) {
            LayerPlan::Selective if self.scores(i) == 0 => LayerPlan::Saved,
            plan => plan,
        }
    }

    /// Layer `i`'s s x s attention tensors (what selective recompute drops): a layer with the
    /// model's other kind of attention has its own, as its kernel may differ (found by the
    /// planner fuzz target: OLMo 3 with heads no fused kernel takes, whose masked sliding layers
    /// ran the math kernel and whose full layers did not, overflowed here).
    fn scores(&self, i: u64) -> u64 {
        if self.spec.is_other_attention(i) {
            self.other_attention_scores
        } else {
            self.attention_scores
        }
    }

    /// What layer `i` keeps from its forward to its backward.
    pub fn kept(&self, i: u64) -> u64 {
        match self.plan(i) {
            LayerPlan::Saved if i == 0 => self.full(i).saturating_sub(self.first_unsaved),
            LayerPlan::Saved => self.full(i),
            LayerPlan::Checkpointed => {
                (self.ckpt_input + self.held(i)).saturating_sub(self.held_input)
            }
            LayerPlan::Selective => self.full(i) - self.scores(i),
        }
    }

    /// What layer `i`'s backward releases of what it [`kept`](Self::kept): all of it but what
    /// 8-bit Linears hold, which goes with the whole graph at the end of backward.
    pub fn released(&self, i: u64) -> u64 {
        let unheld = if i == 0 && self.plan(i) == LayerPlan::Saved {
            self.first_unsaved_held
        } else {
            0
        };
        self.kept(i)
            .saturating_sub(self.held(i).saturating_sub(unheld))
    }

    /// Bytes that stay on the GPU: none when activations are offloaded.
    pub fn on_gpu(&self, bytes: u64) -> u64 {
        if self.offload { 0 } else { bytes }
    }

    /// Layer `i`'s backward peak above its start (the layer's gradients as this GPU keeps
    /// them, plus the activation gradients in flight).
    pub fn layer_backward(&self, i: u64) -> u64 {
        let grads = self.layer_grads_in_backward();
        if self.is_moe(i) {
            // MoE layers: the routed experts' backward is not modelled op by op (assumed).
            self.tmp.layer_backward + grads + self.backward_extra
        } else {
            self.bwd.peak(grads) + self.backward_extra
        }
    }

    /// A layer's gradients while its backward runs: as this GPU keeps them, but unsharded
    /// under FSDP (reduce-scattered in the layer's post-backward).
    fn layer_grads_in_backward(&self) -> u64 {
        self.st
            .fsdp
            .map_or(self.st.layer_grad_bytes, |f| f.layer_grads)
    }

    /// The breakdown's line for one layer's backward peak: a MoE layer's (assumed) in a MoE
    /// model, else a dense layer's.
    pub fn layer_backward_line(&self) -> u64 {
        let grads = self.layer_grads_in_backward();
        if self.spec.moe.is_some() {
            self.tmp.layer_backward + grads + self.backward_extra
        } else {
            self.bwd.peak(grads) + self.backward_extra
        }
    }

    /// Whether a checkpointed layer's recompute saves its kept input again: not when the first
    /// norm saves the input itself (fp32 stream or LayerNorm: the detached input shares its
    /// storage).
    pub fn recompute_shares_input(&self) -> bool {
        self.spec.norm_saves_input() || self.stream == DType::F32
    }
}

/// Whether the first decoder layer is a MoE layer (every layer is).
fn first_moe(spec: &ModelSpec) -> bool {
    spec.moe
        .as_ref()
        .is_some_and(|m| m.sparse_layers >= spec.layers)
}

/// What the first layer (its saved tensors `first`) does not save when its input needs no
/// gradient: under LoRA/QLoRA without checkpointing nothing calls `enable_input_require_grads`,
/// the frozen embeddings' output has no grad (unless a modules_to_save copy of them trains),
/// and until the q/k/v adapters add theirs nothing in the layer does. Measured on CPU against
/// peft (tests/reference/test_peft.py): the input norm saves nothing, nor do the q/k/v
/// adapters' lora_dropout masks, nor DoRA's (scale - 1) for their base outputs, nor, with
/// lora_dropout, DoRA's weight cast for F.linear.
fn first_layer_unsaved(spec: &ModelSpec, scen: &Scenario, sh: &Shape, first: &[Saved]) -> u64 {
    let frozen_input = scen.method != Method::Full
        && scen.checkpointing == Checkpointing::None
        && !scen.lora.save_embeddings;
    if !frozen_input {
        return 0;
    }
    let t = sh.tokens();
    let th = if sh.sp {
        t * spec.hidden / sh.tp
    } else {
        t * spec.hidden
    };
    let masks = if scen.lora.dropout {
        th * sh.lora_qkv
    } else {
        0
    };
    let tp = u64::from(scen.parallel.tensor.max(1));
    let (q, kv) = (spec.q_dim() / tp, spec.kv_dim() / tp);
    let outs = sh.adapted_qkv_widths(q, kv);
    let dora = if scen.lora.dora {
        let a = scen.lora.adapter_dtype.bytes();
        let weight = if scen.lora.dropout {
            spec.hidden * a
        } else {
            0
        };
        outs.iter().map(|w| w * (a + weight)).sum::<u64>()
    } else {
        0
    };
    let norm: u64 = first
        .iter()
        .filter(|s| s.part == activations::Part::InputNorm)
        .map(|s| s.elements * s.dtype.bytes() * s.copies)
        .sum();
    masks + dora + norm
}

/// The 8-bit Linears' held input that the first layer does not hold when its input needs no
/// gradient (`MatMul8bitLt` keeps A only when `needs_input_grad`): the q/k/v input, unless
/// lora_A saves that very tensor anyway. 0 with checkpointing (`enable_input_require_grads`).
fn first_layer_unheld(scen: &Scenario, sh: &Shape, first: &[Saved]) -> u64 {
    let frozen_input = scen.checkpointing == Checkpointing::None && !scen.lora.save_embeddings;
    if !sh.held_inputs
        || !frozen_input
        || (sh.lora_qkv > 0 && activations::lora_saves_input_itself(sh))
    {
        return 0;
    }
    held_in(first, activations::Part::AttentionInputs)
}

/// Bytes of the held tensors in `part` of a layer's saved tensors.
fn held_in(items: &[Saved], part: activations::Part) -> u64 {
    items
        .iter()
        .filter(|s| s.held && s.part == part)
        .map(Saved::bytes)
        .sum()
}

/// DoRA's column norms, computed in every forward for each adapted Linear
/// (`DoraLinearLayer.get_weight_norm`, peft 0.21): the adapters' product is formed by running
/// an identity matrix through them (`x_eye`, d_in x d_in, kept by lora_A's graph while the
/// product lives), then the base weight cast to the adapters' dtype, the scaled product and
/// their sum: four d_out x d_in matrices and the identity at once, for the largest adapted
/// Linear (read from peft's code; assumed, not measured).
fn dora_norm_bytes(spec: &ModelSpec, inv: &ParamInventory, scen: &Scenario) -> u64 {
    if scen.method == Method::Full || !scen.lora.dora {
        return 0;
    }
    let tp = u64::from(scen.parallel.tensor.max(1));
    let a = scen.lora.adapter_dtype.bytes();
    inv.linears()
        .filter(|t| {
            t.scope != crate::model::Scope::Model && crate::states::lora_adapts(spec, scen, t)
        })
        .map(|t| (t.d_in * t.d_in + 4 * (t.d_in * t.d_out).div_ceil(tp)) * a)
        .max()
        .unwrap_or(0)
}

/// The largest quantized Linear's weight dequantized for the input's gradient: QLoRA's to the
/// compute dtype, an 8-bit base's to its input's dtype (`MatMul8bitLt.backward`:
/// `CB.to(ctx.dtype_A, copy=True)`); 0 otherwise.
fn dequantized_weight_bytes(
    inv: &ParamInventory,
    scen: &Scenario,
    compute: DType,
    stream: DType,
) -> u64 {
    let dtype = match scen.method {
        Method::Qlora => compute,
        Method::Int8 => stream,
        _ => return 0,
    };
    let tp = u64::from(scen.parallel.tensor.max(1));
    quantized_linears(inv)
        .map(|t| (t.d_in * t.d_out).div_ceil(tp) * dtype.bytes())
        .max()
        .unwrap_or(0)
}

/// The decoder layers' Linears bitsandbytes quantizes.
fn quantized_linears(inv: &ParamInventory) -> impl Iterator<Item = &crate::model::ParamTensor> {
    inv.tensors
        .iter()
        .filter(|t| t.quantizable && t.scope != crate::model::Scope::Model)
}

/// The largest unsaved working set of an 8-bit Linear's forward over `m` tokens, beside its
/// input and output (bitsandbytes 0.50, `MatMul8bitLt.forward` on CUDA): quantizing the input
/// holds its fp16 cast (none for an fp16 input), the int8 codes, and `A.abs() >= threshold`'s
/// fp16 and bool tensors at once (LLM.int8's outlier test, threshold 6.0 by default); the
/// matmul then holds the codes, its int32 result and `int8_mm_dequant`'s fp16 output, which
/// becomes the output itself only for an fp16 input (else `.to(A.dtype)` copies it). Each with
/// the rows' fp32 scales. Written from bitsandbytes' code; not measured on a GPU.
fn int8_forward_bytes(inv: &ParamInventory, m: u64, input: DType) -> u64 {
    let cast = if input == DType::F16 { 0 } else { 2 };
    quantized_linears(inv)
        .map(|t| {
            let (k, n) = (t.d_in, t.d_out);
            let quantize = m * k * (cast + 1 + 2 + 1);
            let matmul = m * k + m * n * (4 + cast);
            quantize.max(matmul) + 4 * m
        })
        .max()
        .unwrap_or(0)
}

impl Temporaries {
    fn new(spec: &ModelSpec, scen: &Scenario, sh: &Shape) -> Self {
        let t = sh.tokens();
        let stream = sh.stream();
        let compute = scen.precision.compute_dtype();
        let tp = scen.parallel.tensor as u64;
        let eager_mask = if scen.attention == Attention::Eager {
            sh.b * sh.s * sh.s * stream.bytes() * spec.attention_masks()
        } else {
            0
        };
        let embed_out = if stream == DType::F32 {
            0
        } else {
            t * spec.hidden * stream.bytes()
        };
        // Checkpointing keeps every tensor argument of a checkpointed layer for the recompute,
        // the eager causal mask included: GPT-2 passes it positionally (saved by
        // `save_for_backward`), Llama-like layers as a keyword that transformers binds in the
        // `functools.partial` the checkpoint holds. It then lives until the first layer's
        // backward instead of ending with the forward (measured, `tests/reference`).
        // Under SDPA the local layers' boolean mask, (1, s, s) expanded over the batch, is
        // kept the same way (traced on CPU: OLMo 3's sliding layers).
        let sdpa_mask = if sh.local_mask { sh.s * sh.s } else { 0 };
        let ckpt_mask = if matches!(
            scen.checkpointing,
            Checkpointing::Full | Checkpointing::Every(_)
        ) {
            eager_mask + sdpa_mask
        } else {
            0
        };
        // Inside one layer: the largest unsaved temporary (eager scores before softmax, or the
        // fp32 normalized tensor before its cast).
        let heads_local = spec.heads / tp.min(spec.heads);
        // SDPA's math kernel materializes the scores like eager attention does.
        let quadratic = sh.quadratic();
        let layer_forward = if quadratic {
            sh.b * heads_local * sh.s * sh.s * compute.bytes()
        } else {
            t * spec.hidden * 4
        };
        // Backward of one layer: activation gradients in flight (MLP: the product's grad and
        // the two factor grads; eager attention: probability and score grads) and the
        // residual grad.
        let f_local = spec.intermediate / tp;
        let mlp_bwd = 3 * t * f_local * compute.bytes();
        let attn_bwd = if quadratic {
            sh.b * heads_local * sh.s * sh.s * (4 + 4 + compute.bytes())
        } else {
            t * (spec.q_dim() + 2 * spec.kv_dim()) / tp * compute.bytes() + t * spec.q_dim() * 4
        };
        let residual_grad = t * spec.hidden * stream.bytes();
        Temporaries {
            model_forward: eager_mask + embed_out,
            ckpt_mask,
            layer_forward,
            layer_backward: mlp_bwd.max(attn_bwd) + residual_grad,
            residual_grad,
        }
    }
}

/// GRPO's generation phase (TRL 1.16 with transformers' `generate`, no vLLM): the completions
/// of `micro_batch x grad_accum` prompts at once (`generation_batch_size` is the per-device
/// batch times `steps_per_generation`, which defaults to the accumulation steps), each filling a
/// KV cache of `seq` tokens; before it the prompts' prefill, and after it, with a KL term, the
/// reference model's no-grad log-probability pass over prompt and completion, one layer's
/// working set at a time; under autocast, the 16-bit casts of the trainable weights, which
/// autocast's cache keeps through the generation. Decoding's own working set (one token per
/// sequence) is small.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Generation {
    pub kv_cache: u64,
    pub working: u64,
}

impl Generation {
    fn of(
        spec: &ModelSpec,
        scen: &Scenario,
        compute: DType,
        (no_grad_layer, autocast_cache): (u64, u64),
    ) -> Generation {
        if !scen.trainer.generates() {
            return Generation::default();
        }
        let sequences = u64::from(scen.micro_batch) * u64::from(scen.grad_accum);
        let seq = u64::from(scen.seq);
        let kv_per_token = spec.layers * 2 * spec.kv_dim() * compute.bytes();
        // The fit search varies `seq` under a fixed prompt: the prompt is cut to it.
        let prompt = if scen.prompt > 0 {
            u64::from(scen.prompt).min(seq)
        } else {
            seq
        };
        let scored = if scen.prompt > 0 { seq - prompt } else { seq };
        // The next-token logits generate keeps in fp32 for each sequence.
        let logits = sequences * spec.vocab * 4;
        let prefill = sequences * prompt * no_grad_layer + logits;
        // A no-grad log-probability pass over prompt and completion: TRL runs it in chunks of
        // `per_device_train_batch_size` sequences (`_get_per_token_logps_and_entropies`).
        let chunk = u64::from(scen.micro_batch);
        let scoring =
            chunk * seq * no_grad_layer + chunk * scored * spec.lm_head_width() * compute.bytes();
        if scen.generator != crate::scenario::Generator::Hf {
            // vLLM generates (`crate::vllm`); TRL's importance-sampling correction, on by
            // default with vLLM, scores the completions with the policy in such a pass, and a
            // KL term with the reference in another.
            return Generation {
                kv_cache: 0,
                working: scoring + autocast_cache,
            };
        }
        // RLOO scores the completions with the policy before training, whatever the KL term
        // (its `old_logps`); GRPO only with a KL term, through the reference.
        let reference = if scen.kl || scen.trainer == crate::scenario::Trainer::Rloo {
            scoring
        } else {
            0
        };
        Generation {
            kv_cache: sequences * seq * kv_per_token,
            working: prefill.max(reference) + autocast_cache,
        }
    }
}

/// What each kind of layer saves: the dense and MoE layers, and those with the model's other
/// kind of attention, as the step keeps them (compressed to int8 where asked).
struct LayerKinds {
    dense: Vec<activations::Saved>,
    dense_bytes: u64,
    #[cfg(feature = "replay")]
    other: Vec<activations::Saved>,
    moe: Vec<activations::Saved>,
    moe_bytes: u64,
    held: [u64; 4],
    other_dense_bytes: u64,
    other_moe_bytes: u64,
    other_attention_scores: u64,
    /// int8 compression: the largest tensor a node's backward unpacks.
    unpacked: u64,
}

impl LayerKinds {
    fn of(spec: &ModelSpec, sh: &Shape, scen: &Scenario) -> Self {
        // int8 compression packs what each layer saves; a node's backward unpacks its own
        // (the largest unpacked copy is counted above the layer's backward peak).
        let compress = |items: Vec<activations::Saved>| {
            if scen.act_int8 {
                activations::int8_compressed(items)
            } else {
                items
            }
        };
        // A compiled layer keeps what the partitioner saves (`crate::compiled`) where that is
        // modelled; the eager inventory elsewhere.
        let raw =
            crate::compiled::layer(spec, sh, scen).unwrap_or_else(|| activations::layer(spec, sh));
        let unpacked = if scen.act_int8 {
            raw.iter()
                .filter(|s| matches!(s.dtype, DType::F32 | DType::Bf16 | DType::F16))
                .map(|s| s.elements * s.dtype.bytes())
                .max()
                .unwrap_or(0)
        } else {
            0
        };
        let dense = compress(raw);
        let dense_bytes = activations::total(&dense);
        let moe = if spec.moe.is_some() {
            compress(activations::moe_layer(spec, sh))
        } else {
            Vec::new()
        };
        let moe_bytes = activations::total(&moe);
        // The layers with the model's other kind of attention, compressed as the others are
        // (with their own s x s scores: their kernel may be another one).
        let mut held = [activations::held(&dense), activations::held(&moe), 0, 0];
        // Only the allocator replay writes the other layers' tensors one by one.
        #[cfg(feature = "replay")]
        let mut other_saved = Vec::new();
        let (other_dense_bytes, other_moe_bytes, other_attention_scores) =
            if spec.other_attention_layers() > 0 {
                let other = compress(activations::layer_of(spec, sh, true));
                let other_moe = if spec.moe.is_some() {
                    compress(activations::moe_layer_of(spec, sh, true))
                } else {
                    Vec::new()
                };
                held[2] = activations::held(&other);
                held[3] = activations::held(&other_moe);
                let kinds = (
                    activations::total(&other),
                    activations::total(&other_moe),
                    activations::attention_scores(&other),
                );
                #[cfg(feature = "replay")]
                {
                    other_saved = other;
                }
                kinds
            } else {
                (0, 0, 0)
            };
        LayerKinds {
            dense,
            dense_bytes,
            #[cfg(feature = "replay")]
            other: other_saved,
            moe,
            moe_bytes,
            held,
            other_dense_bytes,
            other_moe_bytes,
            other_attention_scores,
            unpacked,
        }
    }
}

/// One layer's forward and backward transients (fp8 casts, dequantized and int8 bases, DoRA's
/// norm, context parallelism's ring, expert parallelism's receive buffer), and what the
/// backward adds above its peak.
fn transients(
    spec: &ModelSpec,
    inv: &ParamInventory,
    scen: &Scenario,
    sh: &Shape,
    unpacked: u64,
) -> (Temporaries, u64) {
    let t = sh.tokens();
    let stream = sh.stream();
    let compute = scen.precision.compute_dtype();
    let mut tmp = Temporaries::new(spec, scen, sh);
    // fp8 (torchao): a converted Linear's fp8 operand copies while its matmul runs.
    let tp = scen.parallel.tensor as u64;
    tmp.layer_forward = tmp
        .layer_forward
        .max(crate::fp8::forward_cast_bytes(inv, scen, t, tp));
    // QLoRA: bitsandbytes' MatMul4Bit dequantizes the whole weight of the Linear it runs,
    // in forward and again in backward for the input's gradient; an 8-bit base's
    // MatMul8bitLt only in backward, and quantizes its input in forward
    // (`bitsandbytes/autograd/_functions.py`); the largest one is the transient.
    let dequantized = dequantized_weight_bytes(inv, scen, compute, stream);
    tmp.layer_forward = tmp
        .layer_forward
        .max(if scen.method == Method::Int8 {
            int8_forward_bytes(inv, t, stream)
        } else {
            dequantized
        })
        .max(dora_norm_bytes(spec, inv, scen));
    // Context parallelism: the ring's key/value chunks in flight during attention (assumed).
    tmp.layer_forward += crate::context::forward_bytes(spec, scen);
    let backward_extra = dequantized
        + unpacked
        + crate::fp8::backward_cast_bytes(inv, scen, t, tp)
        + crate::context::backward_bytes(spec, scen);
    // Expert parallelism: the all-to-all's receive buffer of the layer's top-k token
    // copies, beside the local permuted copy (assumed: balanced routing).
    if scen.parallel.expert > 1
        && let Some(moe) = spec.moe.as_ref()
    {
        let received = t * moe.top_k * spec.hidden * compute.bytes();
        tmp.layer_backward += received;
    }
    (tmp, backward_extra)
}
