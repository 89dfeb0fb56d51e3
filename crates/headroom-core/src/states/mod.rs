//! Model states per GPU: weights, gradients, optimizer states and master weights, after
//! LoRA/QLoRA, tensor/pipeline splits and DDP/ZeRO/FSDP sharding, plus what goes to the host.
//!
//! In three steps: `placement.rs` (this GPU's share of the layers and degrees), `local.rs`
//! (its tensors before sharding: weights, what trains, autocast copies, rounding) and
//! `sharding.rs` (DDP, ZeRO 1/2/3, FSDP2 and offload).
//!
//! Expert parallelism splits the stacked experts over `ep` ranks and shards their per-parameter
//! states over the other `dp / ep` (`Placement::share`, `Placement::shard`). A frozen vision tower
//! (the scenario's `vision`, frozen by default) holds only its weights. ZeRO follows DeepSpeed's
//! bf16 master, gradient and optimizer-state options (`ds_bf16`).
//!
//! This module also owns the dtypes the rest of the core reads: `weight_dtype`; `stream_dtype`, the
//! residual stream (the base's load dtype under LoRA, fp32 after `prepare_model_for_kbit_training`,
//! 16-bit under FSDP's mixed-precision policy and DeepSpeed's 16-bit module, `runs_16bit`); and
//! `activation_precision`.

mod local;
mod placement;
mod sharding;

pub(crate) use placement::Placement;

use crate::dtype::DType;
use crate::model::{ModelSpec, ParamInventory, ParamTensor, Scope};
use crate::optimizer::{StateBytes, TrainTensor, state_bytes};
use crate::scenario::{BaseDtype, DataParallel, Method, Offload, Precision, Scenario};

use local::{Local, local_tensors};
use sharding::{Explained, Facts, Sharded};

/// Per-GPU bytes of everything that is not an activation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelStates {
    pub params_total: u64,
    pub params_trainable: u64,
    /// Parameters held by this GPU (after TP/PP), before ZeRO-3/FSDP sharding.
    pub params_local: u64,
    /// Every weight this GPU holds, a DPO reference model's included.
    pub weights: u64,
    pub weights_formula: String,
    /// Of `weights`, a DPO reference model's copy (frozen: no optimizer ever touches it).
    pub reference_weights: u64,
    pub gradients: u64,
    pub gradients_formula: String,
    pub optimizer: StateBytes,
    pub optimizer_formula: String,
    /// fp32 master weights (DeepSpeed mixed precision keeps them in the optimizer).
    pub master_weights: u64,
    /// DDP gradient buckets or ZeRO's reduce buckets, allocated once and kept.
    pub comm_buffers: u64,
    pub comm_formula: String,
    /// Unsharded parameters gathered for the running and the prefetched unit (ZeRO-3, FSDP).
    pub gather_transient: u64,
    /// FSDP's units phase by phase (the root's and a layer's gathers and reductions); `None`
    /// where FSDP does not shard.
    pub fsdp: Option<FsdpBuffers>,
    /// Autocast's cached 16-bit copies of the trainable Linear weights (per layer, and lm_head).
    pub autocast_cache_per_layer: u64,
    pub autocast_cache_outside: u64,
    /// The per-layer copies by kind of layer (dense or MoE, softmax or linear attention):
    /// where a model mixes kinds, each layer caches its own.
    pub autocast_cache_kinds: local::LayerCasts,
    /// Weight copies of one layer that no cache holds, by kind of layer, kept from the layer's
    /// forward to its backward: Transformer Engine's fp8 copies (`fp8=te`) and autocast's casts
    /// of an fp32 frozen base under LoRA (all zero otherwise).
    pub kept_weight_copies_kinds: local::LayerCasts,
    /// Of one layer's casts (both kinds above), those of the Linears reading the layer's input.
    pub layer_input_casts: u64,
    /// Trainable parameters of one decoder layer on this GPU (for the backward timeline).
    pub layer_grad_bytes: u64,
    /// Gradient bytes outside layers (embeddings, lm_head, final norm).
    pub outside_grad_bytes: u64,
    /// Host memory for offloaded states (pinned CPU RAM), and NVMe bytes.
    pub host_bytes: u64,
    pub nvme_bytes: u64,
    /// Decoder layers on this GPU (pipeline stage).
    pub layers_local: u64,
    /// Extra bytes of 512-byte rounding over the persistent tensors (allocated level).
    pub rounding_overhead: u64,
}

/// What FSDP2 (`fully_shard`, one unit a decoder layer and the root unit around them)
/// allocates and frees around its units, read from `torch/distributed/fsdp/_fully_shard/
/// _fsdp_param_group.py` and measured on the fake process group (tests/reference/
/// test_fsdp.py): in forward the running layer's unsharded parameters and its all-gather
/// output (kept until the next layer's copy-out); after the last layer, that output alone
/// (prefetched again for backward); in a layer's backward its unsharded parameters, the next
/// one's prefetched all-gather output, its unsharded gradients and the previous layer's
/// reduce-scatter input (held until this layer's post-backward); the root's parameters
/// unsharded from the first forward to the end of backward, lm_head's unsharded gradient from
/// its backward on, and the root's reduce-scatter last.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FsdpBuffers {
    /// The root unit's unsharded parameters (embeddings, final norm, lm_head).
    pub root: u64,
    /// One decoder layer gathered: its unsharded parameters, or its all-gather output.
    pub layer: u64,
    /// One layer's unsharded gradients (the dtype its parameters were gathered in).
    pub layer_grads: u64,
    /// One layer's reduce-scatter input (the reduce dtype).
    pub layer_reduce: u64,
    /// The root's trained parameters' unsharded gradients, and their reduce-scatter input.
    pub root_grads: u64,
    pub root_reduce: u64,
    /// Of `root_reduce`, the copy-in's cast of the largest tensor's rank chunk (FSDP2 reducing
    /// in another dtype than the gradients'): beside the input, not reduce-scattered. Read by
    /// the allocator replay only.
    #[cfg(feature = "replay")]
    pub root_copy_in: u64,
    /// FSDP1's flat parameters (`FullyShardedDataParallel`): the all-gather's output is the
    /// unit's parameters (no copy-out), nothing is gathered ahead in forward, and a unit's
    /// gradient is its parameters' gradients concatenated into one flat tensor that is
    /// reduce-scattered as it is when it is in the reduce dtype, else a cast copy of it.
    pub flat: bool,
    /// The ranks a unit is sharded over.
    pub shards: u64,
    /// Whether the reduce-scatter's output is in another dtype than the sharded gradient kept
    /// (cast on the reduce-scatter stream after it).
    pub reduce_cast: bool,
    /// FSDP1 under a mixed-precision policy over wider parameters: each unshard first casts
    /// the rank's shard to the compute dtype (`_use_low_precision_shard`).
    pub shard_cast: bool,
}

impl ModelStates {
    /// Communication buffers alive from the step's start: DDP's and ZeRO's buckets (FSDP's
    /// come and go with its units).
    pub fn persistent_comm(&self) -> u64 {
        if self.fsdp.is_some() {
            0
        } else {
            self.comm_buffers
        }
    }

    /// Parameters gathered in a layer's forward: under FSDP2 the root, the running layer and
    /// its all-gather output; under FSDP1 the root and the running layer.
    pub fn gathered_in_forward(&self) -> u64 {
        match self.fsdp {
            Some(f) if f.flat => f.root + f.layer,
            _ => self.gather_transient,
        }
    }

    /// Parameters gathered while the loss runs: under FSDP2 the root and the last layer's
    /// all-gather output (held until the root's post-forward), under FSDP1 the root only.
    pub fn gathered_at_loss(&self) -> u64 {
        match self.fsdp {
            Some(f) if f.flat => f.root,
            Some(f) => f.root + f.layer,
            None => self.gather_transient,
        }
    }

    /// Parameters gathered from the backward's start to the first layer's backward: under FSDP
    /// the root and the last layer, prefetched at the root's pre-backward.
    pub fn gathered_in_backward(&self) -> u64 {
        self.fsdp
            .map_or(self.gather_transient, |f| f.root + f.layer)
    }
}

/// bitsandbytes NF4 with double quantization: packed 4-bit codes, 8-bit absmax per 64 weights,
/// fp32 absmax per 256 blocks and one fp32 offset (`functional.py::quantize_4bit`), and the two
/// code books each quantization state keeps its own copy of (`code.to(device, copy=True)`: the
/// 16 NF4 levels and the 256 levels of the absmax's 8-bit dynamic map, fp32).
pub fn nf4_bytes(numel: u64) -> u64 {
    let blocks = numel.div_ceil(64);
    let code_books = (16 + 256) * 4;
    numel.div_ceil(2) + blocks + blocks.div_ceil(256) * 4 + 4 + code_books
}

/// The Linears that read a decoder layer's (normed) input, across families.
const INPUT_PROJECTIONS: &[&str] = &[
    "q_proj",
    "k_proj",
    "v_proj",
    "qkv_proj",
    "c_attn",
    "query_key_value",
    "q_a_proj",
    "kv_a_proj_with_mqa",
];

/// Computes the model states of `scen` for `spec`.
pub fn model_states(
    spec: &ModelSpec,
    inv: &ParamInventory,
    gpu: &crate::catalog::Gpu,
    scen: &Scenario,
) -> ModelStates {
    let place = Placement::new(spec, inv, scen);
    let p = scen.precision;
    let full = scen.method == Method::Full;
    let zero = match scen.parallel.data {
        DataParallel::Zero1 => 1,
        DataParallel::Zero2 => 2,
        DataParallel::Zero3 => 3,
        _ => 0,
    };
    // DeepSpeed trains a 16-bit model and keeps fp32 master weights in its optimizer.
    let ds_mixed = zero > 0 && p != Precision::Fp32;
    // DeepSpeed's bf16_master_weights_and_grads + bf16_optimizer_states: 2 B instead of 4.
    let ds_master = if ds_bf16_states(scen) {
        DType::Bf16
    } else {
        DType::F32
    };
    let base_dtype = weight_dtype(scen, ds_mixed);
    let te_copy = crate::fp8::te_weight_copy_bytes(gpu);
    let local = local_tensors(spec, inv, scen, &place, (base_dtype, ds_mixed, te_copy));
    let trainable: u64 = local.train.iter().map(|t| t.rows * t.cols * t.count).sum();
    let grad_dtype = if full {
        base_dtype
    } else {
        scen.lora.adapter_dtype
    };
    let ds = ds_mixed.then_some(ds_master);
    let mut s = unsharded(&local, scen, base_dtype, grad_dtype, trainable, ds);
    let facts = Facts {
        scen,
        inv,
        place: &place,
        trainable,
        grad_bytes: grad_dtype.bytes(),
        weight_bytes: base_dtype.bytes(),
        layer_trainable: local.layer_trainable,
        outside_trainable: local.outside_trainable,
        quant_state: local.quant_state,
    };
    // DeepSpeed also keeps an fp32 gradient partition (its estimator: 2 + 4 + 4 + 8 = 18
    // B/param).
    let ds_fp32_grads = if ds_mixed {
        trainable * ds_master.bytes()
    } else {
        0
    };
    match scen.parallel.data {
        DataParallel::Ddp => sharding::ddp(&mut s, scen, &place),
        DataParallel::Zero1 | DataParallel::Zero2 | DataParallel::Zero3 => {
            sharding::zero(zero, &mut s, &facts, ds_fp32_grads)
        }
        // On one GPU FSDP shards nothing, but its CPU offload still moves the parameters,
        // gradients and states to the host (accelerate's FSDP on one card, as axolotl's 70B
        // QLoRA example runs): without offload it changes nothing the estimate counts.
        DataParallel::Fsdp
            if place.dp > 1
                || scen.parallel.offload_params != Offload::None
                || scen.parallel.offload_optimizer != Offload::None =>
        {
            sharding::fsdp(&mut s, &facts, p)
        }
        DataParallel::Fsdp => {}
    }
    // DPO of a full fine-tune: TRL loads a reference model in the policy's dtype and prepares
    // it as the policy (ZeRO-3 and FSDP shard it; below ZeRO-3 `prepare_deepspeed` keeps it
    // whole, as the policy's weights are): the same bytes again.
    let reference_weights = if scen.reference_copy() {
        s.weights.bytes
    } else {
        0
    };
    if reference_weights > 0 {
        s.weights.bytes += reference_weights;
        s.weights.formula = format!(
            "{} x 2 (DPO: the frozen reference model, same dtype and sharding)",
            s.weights.formula
        );
    }
    let per_gpu_grads = |params: u64, dtype: DType| {
        let bytes = params * dtype.bytes();
        if s.grads_sharded {
            place.shard(bytes)
        } else {
            bytes
        }
    };
    ModelStates {
        params_total: inv.total(),
        params_trainable: if full {
            inv.total() - frozen_vision(inv, scen)
        } else {
            lora_params(spec, inv, scen) + local.saved_modules
        },
        params_local: local.params,
        layer_grad_bytes: per_gpu_grads(local.layer_trainable, grad_dtype),
        outside_grad_bytes: per_gpu_grads(
            local.outside_trainable - local.saved_modules,
            grad_dtype,
        ) + per_gpu_grads(local.saved_modules, base_dtype),
        weights: s.weights.bytes,
        weights_formula: s.weights.formula,
        reference_weights,
        gradients: s.gradients.bytes,
        gradients_formula: s.gradients.formula,
        optimizer: s.optimizer,
        optimizer_formula: s.optimizer_formula,
        master_weights: s.master,
        comm_buffers: s.comm.bytes,
        comm_formula: s.comm.formula,
        gather_transient: s.gather,
        fsdp: s.fsdp,
        autocast_cache_per_layer: local.cache_layer,
        autocast_cache_outside: local.cache_outside,
        autocast_cache_kinds: local.cache_kinds,
        kept_weight_copies_kinds: local.kept_copy_kinds,
        layer_input_casts: local.input_casts,
        host_bytes: s.host,
        nvme_bytes: s.nvme,
        layers_local: place.layers_local,
        // Gradients and Adam's two states round like the weights they mirror.
        rounding_overhead: local.rounding * (1 + u64::from(full) * 3),
    }
}

/// Parameters of a frozen vision tower and projector (0 when they train or there are none).
pub fn frozen_vision(inv: &ParamInventory, scen: &Scenario) -> u64 {
    match scen.vision {
        crate::scenario::VisionTraining::Frozen => inv.vision(),
        crate::scenario::VisionTraining::Trained => 0,
    }
}

/// Whether DeepSpeed keeps its master copy, gradient partition and optimizer states in bf16
/// (`bf16_master_weights_and_grads`, `bf16_optimizer_states`): asked for, under ZeRO with a
/// bf16 precision.
pub fn ds_bf16_states(scen: &Scenario) -> bool {
    scen.parallel.ds_bf16_states
        && matches!(
            scen.parallel.data,
            DataParallel::Zero1 | DataParallel::Zero2 | DataParallel::Zero3
        )
        && matches!(scen.precision, Precision::Bf16 | Precision::AmpBf16)
}

/// The (base) model's weight dtype: 16 bits under DeepSpeed's mixed precision, the precision's
/// parameter dtype in full training; under LoRA/QLoRA the dtype the frozen base was loaded in
/// (`Lora::base`; fp32 in fp32 training), and fp32 for a QLoRA model's unquantized parameters
/// after peft's `prepare_model_for_kbit_training` (`Lora::kbit`).
pub(crate) fn weight_dtype(scen: &Scenario, ds_mixed: bool) -> DType {
    let p = scen.precision;
    if ds_mixed {
        p.half_dtype()
    } else if scen.method == Method::Full {
        p.param_dtype()
    } else if p == Precision::Fp32 || scen.lora.base == BaseDtype::Fp32 || kbit_upcast(scen) {
        DType::F32
    } else {
        p.half_dtype()
    }
}

/// Whether a QLoRA model's 16-bit parameters were upcast to fp32 by peft's
/// `prepare_model_for_kbit_training` (`peft/utils/other.py`: every fp16/bf16 parameter that is
/// not a `Params4bit`).
pub(crate) fn kbit_upcast(scen: &Scenario) -> bool {
    scen.method.quantized_base() && scen.lora.kbit
}

/// Whether the layers run on 16-bit parameters though an amp precision keeps fp32 ones. FSDP's
/// mixed-precision policy gathers every parameter in the compute dtype
/// (`MixedPrecisionPolicy(param_dtype=...)`, as the FSDP2 export, torchtitan and accelerate set
/// it; measured on the fake process group, the same activations with or without a
/// `torch.autocast` around the forward: tests/reference/test_fsdp.py), and DeepSpeed's engine
/// casts the module to 16 bits (`_configure_distributed_model`: `module.bfloat16()` or
/// `half()`; accelerate runs no autocast under DeepSpeed, `native_amp` off). Either way the
/// layers compute as in pure 16-bit training, with a 16-bit residual stream; the fp32 copies
/// are shards or masters that only meet the optimizer.
pub(crate) fn runs_16bit(scen: &Scenario) -> bool {
    scen.parallel.data != DataParallel::Ddp && scen.precision.is_autocast()
}

/// The precision the activations run in: the scenario's, but 16-bit under FSDP's mixed
/// precision and DeepSpeed (`runs_16bit`), and fp32 for a QLoRA model that
/// peft's `prepare_model_for_kbit_training` upcast and that trains without autocast (its
/// fp32 embeddings give an fp32 stream, each 4-bit Linear returns its input's dtype, so every
/// op runs in fp32 but the 4-bit matmuls, measured on CPU: tests/reference/test_peft.py).
pub(crate) fn activation_precision(scen: &Scenario) -> Precision {
    if runs_16bit(scen) {
        scen.precision.half()
    } else if kbit_upcast(scen) && !scen.precision.is_autocast() {
        Precision::Fp32
    } else {
        scen.precision
    }
}

/// Whether DeepSpeed trains a 16-bit copy of the model under its mixed precision (ZeRO with a
/// precision other than fp32).
pub(crate) fn deepspeed_mixed(scen: &Scenario) -> bool {
    matches!(
        scen.parallel.data,
        DataParallel::Zero1 | DataParallel::Zero2 | DataParallel::Zero3
    ) && scen.precision != Precision::Fp32
}

/// The residual stream's dtype: the dtype of the token embeddings' output, which every
/// residual add keeps. In full training the weights' (fp32 masters under autocast); under
/// LoRA/QLoRA the frozen base's load dtype, whatever autocast computes in (a 16-bit base under
/// amp keeps a 16-bit stream: autocast changes the matmuls' dtype, not the adds'); 16-bit when
/// FSDP or DeepSpeed runs the layers on 16-bit parameters (`runs_16bit`).
pub(crate) fn stream_dtype(scen: &Scenario) -> DType {
    if runs_16bit(scen) {
        scen.precision.half_dtype()
    } else if scen.method == Method::Full {
        scen.precision.param_dtype()
    } else {
        weight_dtype(scen, deepspeed_mixed(scen))
    }
}

/// The states on one GPU before data parallelism: weights, gradients in the training dtype,
/// the optimizer's states (over DeepSpeed's master copy, of dtype `ds`, under its mixed
/// precision).
fn unsharded(
    local: &Local,
    scen: &Scenario,
    base_dtype: DType,
    grad_dtype: DType,
    trainable: u64,
    ds: Option<DType>,
) -> Sharded {
    let state_tensors: Vec<TrainTensor> = match ds {
        Some(master) => local
            .train
            .iter()
            .map(|t| TrainTensor {
                dtype: master,
                ..*t
            })
            .collect(),
        None => local.train.clone(),
    };
    let qlora = match scen.method {
        Method::Qlora => ", NF4 + double-quant for the layers' Linears (0.516 B/param)",
        Method::Int8 => ", int8 + an fp32 scale per row for the layers' Linears",
        _ => "",
    };
    Sharded {
        weights: Explained::new(
            local.weights,
            format!(
                "{} params x {} B ({}){qlora}",
                local.params,
                base_dtype.bytes(),
                base_dtype.torch_name(),
            ),
        ),
        gradients: if local.saved_modules == 0 {
            Explained::new(
                trainable * grad_dtype.bytes(),
                format!(
                    "{trainable} trainable params x {} B ({})",
                    grad_dtype.bytes(),
                    grad_dtype.torch_name()
                ),
            )
        } else {
            let adapters = trainable - local.saved_modules;
            Explained::new(
                adapters * grad_dtype.bytes() + local.saved_modules * base_dtype.bytes(),
                format!(
                    "{adapters} adapter params x {} B ({}) + {} modules_to_save params x {} B ({})",
                    grad_dtype.bytes(),
                    grad_dtype.torch_name(),
                    local.saved_modules,
                    base_dtype.bytes(),
                    base_dtype.torch_name()
                ),
            )
        },
        optimizer: state_bytes(scen.optimizer, &state_tensors),
        optimizer_formula: crate::optimizer::formula(scen.optimizer).to_string(),
        master: ds.map_or(0, |m| trainable * m.bytes()),
        ..Sharded::default()
    }
}

/// Whether LoRA puts an adapter on this tensor: decoder layers only, all Linears or the
/// attention projections (PEFT's `target_modules`). The time model uses the same rule.
///
/// A MoE model's experts are fused 3-D parameters in transformers 5.x, which no module rule
/// reaches: peft 0.21 adapts them (and the router) only where it converts the config for the
/// class (`ModelSpec::peft_converts_moe`), and then the Linears elsewhere that carry the experts'
/// v4 names (a shared expert's, a dense layer's `gate_proj`, `up_proj`, `down_proj`) lose
/// theirs (measured: tests/reference/test_peft.py).
pub(crate) fn lora_adapts(spec: &ModelSpec, scen: &Scenario, t: &ParamTensor) -> bool {
    if t.scope == Scope::Model {
        return false;
    }
    let targets = scen.lora.targets;
    let reach = peft_reach(spec, targets);
    if is_router(t) {
        return reach.router;
    }
    // Qwen's shared-expert gate is an nn.Linear(h, 1): all-linear adapts it, converted or not.
    if t.name == "mlp.shared_expert_gate.weight" {
        return reach.all_linear;
    }
    let Some(name) = t.linear else { return false };
    if t.is_expert() {
        return reach.experts;
    }
    if reach.mlp_names_taken && matches!(name, "gate_proj" | "up_proj" | "down_proj") {
        return false;
    }
    targets.adapts(name, &t.name)
}

/// What peft's LoRA reaches beyond the Linears its targets name: one rule for the adapters'
/// parameters ([`lora_adapts`]) and the tensors the layers save (`activations::Shape`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct PeftReach {
    /// The fused experts' parameters: a converted MoE class under targets on the MLP.
    pub experts: bool,
    /// The router's weight: a converted MoE class under all-linear.
    pub router: bool,
    /// Every nn.Linear whatever its name (a Qwen shared expert's gate, a DeltaNet's
    /// projections): all-linear.
    pub all_linear: bool,
    /// peft took `gate_proj`, `up_proj` and `down_proj` for the experts (a converted class):
    /// the Linears elsewhere with those names keep no adapter.
    pub mlp_names_taken: bool,
}

/// [`PeftReach`] of `targets` on `spec`.
pub(crate) fn peft_reach(spec: &ModelSpec, targets: crate::scenario::LoraTargets) -> PeftReach {
    let converts = spec.peft_converts_moe();
    let all_linear = targets == crate::scenario::LoraTargets::AllLinear;
    PeftReach {
        experts: converts && targets.mlp_adapted(),
        router: converts && all_linear,
        all_linear,
        mlp_names_taken: converts,
    }
}

/// A MoE layer's router weight (`mlp.gate.weight`; gpt-oss's `mlp.router.weight`).
fn is_router(t: &ParamTensor) -> bool {
    t.linear.is_none()
        && t.scope == Scope::SparseLayer
        && (t.name == "mlp.gate.weight" || t.name == "mlp.router.weight")
}

/// The (d_in, d_out) of the adapter on `t`: its own, but for the fused experts' gate and up
/// projections, which peft adapts as one `gate_up_proj` at twice the rank (lora_A 2r x h,
/// lora_B 2I x 2r per expert): counted as each at its own d_in and twice its d_out.
pub(crate) fn adapter_dims(t: &ParamTensor) -> (u64, u64) {
    if t.is_expert() && matches!(t.linear, Some("gate_proj" | "up_proj")) {
        (t.d_in, 2 * t.d_out)
    } else {
        (t.d_in, t.d_out)
    }
}

/// One adapted Linear(d_in, d_out)'s adapter parameters: lora_A (r x d_in), lora_B
/// (d_out x r) and, with DoRA, a magnitude per output.
pub(super) fn adapter_params(scen: &Scenario, d_in: u64, d_out: u64) -> u64 {
    let magnitude = if scen.lora.dora { d_out } else { 0 };
    u64::from(scen.lora.rank) * (d_in + d_out) + magnitude
}

/// LoRA parameters over the whole model (as PEFT's `print_trainable_parameters` counts them).
fn lora_params(spec: &ModelSpec, inv: &ParamInventory, scen: &Scenario) -> u64 {
    inv.tensors
        .iter()
        .filter(|t| lora_adapts(spec, scen, t))
        .map(|t| {
            let (d_in, d_out) = adapter_dims(t);
            adapter_params(scen, d_in, d_out) * t.copies * inv.multiplicity(t.scope)
        })
        .sum()
}
