//! The options of each scenario setting: precisions, optimizers, attention kernels, methods,
//! adapters, checkpointing, parallelism and the runtime.

use serde::{Deserialize, Serialize};

use crate::dtype::DType;
use crate::error::ScenarioError;
use crate::model::ModelSpec;
pub(crate) use crate::model::spec::is_zero;

use super::shorten;

named_enum!(
    /// Number formats of weights, gradients and compute.
    Precision, "precision" {
        Fp32 => "fp32", "fp32 everywhere";
        Bf16 => "bf16", "pure bf16 (weights, grads, states in bf16)";
        Fp16 => "fp16", "pure fp16";
        AmpBf16 => "amp-bf16", "mixed: fp32 weights, bf16 autocast";
        AmpFp16 => "amp-fp16", "mixed: fp32 weights, fp16 autocast + GradScaler";
    }
);

impl Precision {
    /// The dtype of the weights the model holds (and of their gradients) for full training.
    pub const fn param_dtype(self) -> DType {
        match self {
            Precision::Fp32 | Precision::AmpBf16 | Precision::AmpFp16 => DType::F32,
            Precision::Bf16 => DType::Bf16,
            Precision::Fp16 => DType::F16,
        }
    }

    /// The dtype matrix multiplies run in.
    pub const fn compute_dtype(self) -> DType {
        match self {
            Precision::Fp32 => DType::F32,
            Precision::Bf16 | Precision::AmpBf16 => DType::Bf16,
            Precision::Fp16 | Precision::AmpFp16 => DType::F16,
        }
    }

    pub const fn is_autocast(self) -> bool {
        matches!(self, Precision::AmpBf16 | Precision::AmpFp16)
    }

    /// The 16-bit type of this precision family (bf16 for fp32, which has none).
    /// The pure 16-bit precision of the same dtype (amp-bf16 and bf16: bf16).
    pub const fn half(self) -> Precision {
        match self {
            Precision::Fp16 | Precision::AmpFp16 => Precision::Fp16,
            _ => Precision::Bf16,
        }
    }

    pub const fn half_dtype(self) -> DType {
        match self {
            Precision::Fp16 | Precision::AmpFp16 => DType::F16,
            _ => DType::Bf16,
        }
    }
}

named_enum!(
    /// The optimizer and its implementation (which sets the step's transient memory).
    Optimizer, "optimizer" {
        AdamW => "adamw", "AdamW (foreach, PyTorch's CUDA default)";
        AdamWForLoop => "adamw-forloop", "AdamW (for-loop)";
        AdamWFused => "adamw-fused", "AdamW (fused)";
        AdamW8bit => "adamw8bit", "8-bit AdamW (bitsandbytes)";
        PagedAdamW8bit => "paged-adamw8bit", "paged 8-bit AdamW (bitsandbytes)";
        Lion => "lion", "Lion";
        Adafactor => "adafactor", "Adafactor (factored, no momentum)";
        Sgd => "sgd", "SGD";
        SgdMomentum => "sgd-momentum", "SGD with momentum";
        AdamMini => "adam-mini", "Adam-mini";
    }
);

impl Optimizer {
    /// bitsandbytes' 8-bit optimizers: their states and step live on the GPU (CUDA kernels),
    /// so they cannot be the optimizer of offloaded states.
    pub const fn is_bitsandbytes(self) -> bool {
        matches!(self, Optimizer::AdamW8bit | Optimizer::PagedAdamW8bit)
    }
}

named_enum!(
    /// The attention implementation.
    Attention, "attention" {
        Eager => "eager", "eager (materializes s x s scores)";
        Sdpa => "sdpa", "SDPA / FlashAttention";
        Flash2 => "flash2", "flash_attention_2 (flash-attn package)";
        Flash3 => "flash3", "flash_attention_3 (flash-attn, Hopper)";
        Flex => "flex", "flex_attention (torch.compile)";
    }
);

impl Attention {
    /// A fused kernel: no s x s scores saved (SDPA unless it runs its math kernel, and
    /// transformers' flash-attn and flex implementations).
    pub const fn fused(self) -> bool {
        !matches!(self, Attention::Eager)
    }

    /// transformers' `attn_implementation` name.
    pub const fn hf_name(self) -> &'static str {
        match self {
            Attention::Eager => "eager",
            Attention::Sdpa => "sdpa",
            Attention::Flash2 => "flash_attention_2",
            Attention::Flash3 => "flash_attention_3",
            Attention::Flex => "flex_attention",
        }
    }
}

named_enum!(
    /// The kernel SDPA runs: what PyTorch picks for the GPU (`crate::sdpa::choose`), or one
    /// the user forces (`torch.nn.attention.sdpa_kernel`).
    SdpaKernel, "SDPA kernel" {
        Auto => "auto", "what PyTorch picks for the GPU";
        Flash => "flash", "flash";
        Efficient => "efficient", "memory-efficient";
        Cudnn => "cudnn", "cuDNN";
        Math => "math", "math (saves the s x s probabilities)";
    }
);

// `named_enum!` declares the variants, so `#[default]` cannot be put on one.
#[allow(clippy::derivable_impls)]
impl Default for SdpaKernel {
    fn default() -> Self {
        SdpaKernel::Auto
    }
}

named_enum!(
    /// fp8 matrix multiplies in the decoder layers' Linears. torchao's float8 training
    /// (`convert_to_float8_training` with `Float8LinearConfig.from_recipe_name`) casts the
    /// inputs, weights and output gradients of each matmul to fp8 just before it (e4m3; the
    /// tensorwise recipe casts gradients to e5m2); what autograd saves stays in 16 bits, and so
    /// do the weights, gradients and optimizer states (torchao/float8/float8_linear.py).
    /// Transformer Engine (`te`: accelerate's TE backend, which swaps `nn.Linear` for
    /// `te.Linear` under `DelayedScaling`) saves each Linear's input in fp8 and keeps an fp8
    /// copy of its weight until its backward (`crate::fp8`).
    Fp8Recipe, "fp8 recipe" {
        Off => "off", "off (matmuls in the compute dtype)";
        Tensorwise => "tensorwise", "fp8 tensorwise (torchao: one scale per tensor, fp8 all-gather under FSDP2)";
        Rowwise => "rowwise", "fp8 rowwise (torchao: one scale per row, more accurate, slower)";
        Te => "te", "fp8 Transformer Engine (delayed scaling, accelerate's TE backend: fp8 inputs saved, fp8 weight copies)";
    }
);

named_enum!(
    /// A multimodal model's vision tower and projector in training: frozen (what most
    /// fine-tuning recipes do: TRL's and Qwen-VL's scripts train the language model, and the
    /// tower costs its weights only) or trained with the rest (gradients, optimizer states and
    /// its own saved activations). Read only for a model with a vision tower.
    VisionTraining, "vision setting" {
        Frozen => "frozen", "frozen (weights only: no gradients, states or saved activations)";
        Trained => "trained", "trained (gradients, optimizer states, saved activations)";
    }
);

#[allow(clippy::derivable_impls)]
impl Default for VisionTraining {
    fn default() -> Self {
        VisionTraining::Frozen
    }
}

// `named_enum!` declares the variants, so `#[default]` cannot be put on one.
#[allow(clippy::derivable_impls)]
impl Default for Fp8Recipe {
    fn default() -> Self {
        Fp8Recipe::Off
    }
}

impl Fp8Recipe {
    pub const fn is_on(self) -> bool {
        !matches!(self, Fp8Recipe::Off)
    }

    /// Whether FSDP2 all-gathers the Linear weights in fp8 (1 byte each): torchao's
    /// `enable_fsdp_float8_all_gather`, which it allows with tensorwise weight scales only
    /// (`Float8LinearConfig.__post_init__`) and which its published benchmarks pair with the
    /// tensorwise recipe.
    pub const fn fp8_all_gather(self) -> bool {
        matches!(self, Fp8Recipe::Tensorwise)
    }
}

named_enum!(
    /// The training objective, as TRL 1.16 runs it.
    Trainer, "trainer" {
        Sft => "sft", "SFT";
        Dpo => "dpo", "DPO (TRL)";
        Kto => "kto", "KTO (TRL)";
        Orpo => "orpo", "ORPO (TRL)";
        Cpo => "cpo", "CPO (TRL)";
        Simpo => "simpo", "SimPO (TRL)";
        Grpo => "grpo", "GRPO (TRL)";
        Rloo => "rloo", "RLOO (TRL)";
    }
);

impl Trainer {
    /// Preference training against a reference model's log-probabilities (DPO, KTO):
    /// `ref_precompute` applies.
    pub const fn preference(self) -> bool {
        matches!(self, Trainer::Dpo | Trainer::Kto)
    }

    /// Chosen and rejected completions concatenated into one forward (DPOTrainer's,
    /// ORPOTrainer's and CPOTrainer's `concatenated_forward`): a micro-batch of `b` pairs runs
    /// `2b` sequences.
    pub const fn paired(self) -> bool {
        matches!(
            self,
            Trainer::Dpo | Trainer::Orpo | Trainer::Cpo | Trainer::Simpo
        )
    }

    /// Preference training without a reference model whose loss reads the whole logits
    /// (TRL 1.16's experimental ORPOTrainer and CPOTrainer, SimPO being CPO's `loss_type`):
    /// the log-probabilities come from the model's full logits, not TRL's fused head.
    pub const fn full_logits(self) -> bool {
        matches!(self, Trainer::Orpo | Trainer::Cpo | Trainer::Simpo)
    }

    /// Whether the training forward returns transformers' KV cache (`use_cache` left at its
    /// default True): not for DPO, KTO, ORPO and CPO, whose `concatenated_forward` and
    /// `_compute_loss` pass `use_cache=False` (TRL 1.16); GRPO's and RLOO's training forwards
    /// and SFT's leave it.
    pub const fn use_cache(self) -> bool {
        !(self.preference() || self.full_logits())
    }

    /// Where TRL 1.16 keeps the trainer and the stem of its classes (`{stem}Trainer`,
    /// `{stem}Config`): ORPO's and CPO's (SimPO's) in `trl.experimental`.
    pub const fn trl_class(self) -> (&'static str, &'static str) {
        match self {
            Trainer::Sft => ("trl", "SFT"),
            Trainer::Dpo => ("trl", "DPO"),
            Trainer::Kto => ("trl", "KTO"),
            Trainer::Orpo => ("trl.experimental.orpo", "ORPO"),
            Trainer::Cpo | Trainer::Simpo => ("trl.experimental.cpo", "CPO"),
            Trainer::Grpo => ("trl", "GRPO"),
            Trainer::Rloo => ("trl", "RLOO"),
        }
    }

    /// The smallest micro-batch the trainer runs: KTOTrainer refuses one sample (its KL
    /// completions are the batch's own, shifted by one), the others take any.
    pub const fn min_micro_batch(self) -> u32 {
        if matches!(self, Trainer::Kto) { 2 } else { 1 }
    }

    /// Online training that generates its completions every step (GRPO, RLOO): `prompt`,
    /// `kl` and `gen` apply.
    pub const fn generates(self) -> bool {
        matches!(self, Trainer::Grpo | Trainer::Rloo)
    }
}

named_enum!(
    /// Where GRPO's completions are generated: TRL's `use_vllm` and `vllm_mode`.
    Generator, "generation engine" {
        Hf => "hf", "transformers generate";
        Colocate => "colocate", "vLLM, colocated";
        Server => "server", "vLLM server";
    }
);

// `named_enum!` declares the variants, so `#[default]` cannot be put on one.
#[allow(clippy::derivable_impls)]
impl Default for Generator {
    fn default() -> Self {
        Generator::Hf
    }
}

named_enum!(
    /// How the loss is computed from the last hidden states.
    LossImpl, "loss" {
        Hf => "hf", "transformers' loss (fp32 upcast of the logits)";
        Fused => "fused", "fused linear cross-entropy (Liger), chunked logits";
    }
);

named_enum!(
    /// Multi-GPU data-parallel strategy (with its sharding).
    DataParallel, "data-parallel strategy" {
        Ddp => "ddp", "DDP";
        Zero1 => "zero1", "DeepSpeed ZeRO-1";
        Zero2 => "zero2", "DeepSpeed ZeRO-2";
        Zero3 => "zero3", "DeepSpeed ZeRO-3";
        Fsdp => "fsdp", "FSDP2 (fully_shard)";
    }
);

named_enum!(
    /// Where ZeRO offloads optimizer states or parameters.
    Offload, "offload target" {
        None => "none", "no offload";
        Cpu => "cpu", "CPU (pinned host memory)";
        Nvme => "nvme", "NVMe";
    }
);

named_enum!(
    /// Training method: which weights train.
    Method, "training method" {
        Full => "full", "full training";
        Lora => "lora", "LoRA";
        Qlora => "qlora", "QLoRA (4-bit NF4 base)";
        Int8 => "lora8", "LoRA on an 8-bit base (LLM.int8)";
    }
);

impl Method {
    /// Whether bitsandbytes quantizes the base's decoder-layer Linears (QLoRA's 4-bit
    /// `Linear4bit`, LLM.int8's `Linear8bitLt`): frozen, each returning its input's dtype.
    pub const fn quantized_base(self) -> bool {
        matches!(self, Method::Qlora | Method::Int8)
    }
}

named_enum!(
    /// The dtype a LoRA/QLoRA base model is loaded in (`from_pretrained(dtype=...)`): its
    /// frozen weights (a QLoRA model's unquantized ones), and so the residual stream's dtype.
    BaseDtype, "base weights dtype" {
        Half => "16bit", "16-bit (the precision's bf16 or fp16)";
        Fp32 => "fp32", "fp32 (loaded in float32)";
    }
);

// `named_enum!` declares the variants, so `#[default]` cannot be put on one.
#[allow(clippy::derivable_impls)]
impl Default for BaseDtype {
    fn default() -> Self {
        BaseDtype::Half
    }
}

named_enum!(
    /// Which Linear layers LoRA adapts.
    LoraTargets, "LoRA targets" {
        Attention => "attn", "attention projections";
        AllLinear => "all", "all linear layers";
        Qv => "qv", "q and v (peft's default for Llama)";
        Qkv => "qkv", "q, k and v projections";
        Mlp => "mlp", "MLP projections only";
    }
);

/// The attention projections' module names across families (LoRA's `attn` targets).
const ATTENTION_PROJECTIONS: &[&str] = &[
    "q_proj",
    "k_proj",
    "v_proj",
    "o_proj",
    "qkv_proj",
    "c_attn",
    "query_key_value",
    "out_proj",
];

/// Fused q/k/v projections, which peft's per-model defaults target where q and v are not
/// separate modules (GPT-2's `c_attn`, Phi-3's `qkv_proj`, GPT-NeoX's `query_key_value`).
const FUSED_QKV: &[&str] = &["qkv_proj", "c_attn", "query_key_value"];

impl LoraTargets {
    /// Whether an adapter sits on a decoder layer's Linear named `name` whose module path is
    /// `path` (`self_attn.q_proj.weight`, `mlp.c_proj.weight`, ...).
    pub fn adapts(self, name: &str, path: &str) -> bool {
        match self {
            LoraTargets::AllLinear => true,
            // A gated DeltaNet's out_proj is not one: the exported list names q, k, v and o.
            LoraTargets::Attention => {
                ATTENTION_PROJECTIONS.contains(&name) && !path.starts_with("linear_attn.")
            }
            LoraTargets::Qkv => {
                matches!(name, "q_proj" | "k_proj" | "v_proj") || FUSED_QKV.contains(&name)
            }
            LoraTargets::Qv => matches!(name, "q_proj" | "v_proj") || FUSED_QKV.contains(&name),
            LoraTargets::Mlp => !is_attention_path(path),
        }
    }

    /// How many of a Llama-like layer's q, k and v projections get adapters.
    pub fn qkv_adapted(self) -> u64 {
        match self {
            LoraTargets::AllLinear | LoraTargets::Attention | LoraTargets::Qkv => 3,
            LoraTargets::Qv => 2,
            LoraTargets::Mlp => 0,
        }
    }

    /// Whether the attention's output projection gets an adapter.
    pub fn output_adapted(self) -> bool {
        matches!(self, LoraTargets::AllLinear | LoraTargets::Attention)
    }

    /// Whether the MLP's (and the experts') Linears get adapters.
    pub fn mlp_adapted(self) -> bool {
        matches!(self, LoraTargets::AllLinear | LoraTargets::Mlp)
    }
}

/// Whether a decoder-layer parameter path belongs to the attention block.
fn is_attention_path(path: &str) -> bool {
    [
        "self_attn.",
        "attn.",
        "attention.",
        "linear_attn.",
        "mixer.",
    ]
    .iter()
    .any(|p| path.starts_with(p))
}

/// Activation checkpointing mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Checkpointing {
    None,
    /// Every decoder layer keeps only its input and is recomputed in backward.
    Full,
    /// One layer in every `k` is checkpointed (k = 1 is `Full`).
    Every(u32),
    /// Attention internals only are recomputed (Korthikanti's selective recompute).
    Selective,
}

impl Checkpointing {
    pub fn id(self) -> String {
        match self {
            Checkpointing::None => "none".into(),
            Checkpointing::Full => "full".into(),
            Checkpointing::Every(k) => format!("every:{k}"),
            Checkpointing::Selective => "selective".into(),
        }
    }

    pub fn parse(field: &str, s: &str) -> Result<Self, ScenarioError> {
        match s {
            "none" | "off" => Ok(Checkpointing::None),
            "full" | "on" => Ok(Checkpointing::Full),
            "selective" => Ok(Checkpointing::Selective),
            _ => match s.strip_prefix("every:").map(str::parse::<u32>) {
                Some(Ok(1)) => Ok(Checkpointing::Full),
                Some(Ok(k)) if (2..=1024).contains(&k) => Ok(Checkpointing::Every(k)),
                _ => Err(ScenarioError::invalid(
                    field,
                    format!(
                        "unknown checkpointing `{}`; allowed: none, full, every:K (K from 1 to 1024), selective",
                        shorten(s)
                    ),
                )),
            },
        }
    }

    /// What this setting does with decoder layer `layer` (0-based, counted on this GPU):
    /// `Every(k)` checkpoints the layers whose index is a multiple of `k` (0, k, 2k, ...).
    /// The estimate and the time model both read the plan from here.
    pub fn plan(self, layer: u64) -> LayerPlan {
        match self {
            Checkpointing::None => LayerPlan::Saved,
            Checkpointing::Full => LayerPlan::Checkpointed,
            Checkpointing::Every(k) if layer.is_multiple_of(u64::from(k.max(1))) => {
                LayerPlan::Checkpointed
            }
            Checkpointing::Every(_) => LayerPlan::Saved,
            Checkpointing::Selective => LayerPlan::Selective,
        }
    }

    /// How many of `layers` layers [`plan`](Self::plan) checkpoints (their forward runs twice).
    pub fn checkpointed_layers(self, layers: u64) -> u64 {
        match self {
            Checkpointing::None | Checkpointing::Selective => 0,
            Checkpointing::Full => layers,
            Checkpointing::Every(k) => layers.div_ceil(u64::from(k.max(1))),
        }
    }

    pub fn label(self) -> String {
        match self {
            Checkpointing::None => "no checkpointing".into(),
            Checkpointing::Full => "every layer".into(),
            Checkpointing::Every(k) => format!("one layer in {k}"),
            Checkpointing::Selective => "selective (attention)".into(),
        }
    }
}

/// What checkpointing does with one decoder layer ([`Checkpointing::plan`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayerPlan {
    /// Every tensor the layer saves stays until its backward.
    Saved,
    /// Only the layer's input is kept; the rest is recomputed in backward.
    Checkpointed,
    /// Attention's quadratic internals are recomputed; the rest is saved.
    Selective,
}

/// The model a scenario trains: a preset id, or a parsed config.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ModelChoice {
    Preset(String),
    Custom(Box<ModelSpec>),
}

/// LoRA settings (used when the method is LoRA or QLoRA).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Lora {
    pub rank: u32,
    pub targets: LoraTargets,
    /// Adapter weights' dtype: PEFT casts 16-bit adapters to fp32 by default.
    pub adapter_dtype: DType,
    /// The dtype the base model is loaded in. Under an amp precision a 16-bit base keeps a
    /// 16-bit residual stream; an fp32 base keeps an fp32 one, and autocast casts each frozen
    /// Linear's weight to 16 bits in every forward (the cast is saved for backward).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub base: BaseDtype,
    /// QLoRA and 8-bit bases: peft's `prepare_model_for_kbit_training` was called, which casts
    /// every 16-bit parameter that is not quantized (embeddings, norms, lm_head) to fp32, and
    /// so makes the residual stream fp32 (TRL's SFTTrainer and axolotl call it).
    #[serde(default, skip_serializing_if = "is_false")]
    pub kbit: bool,
    /// peft's `lora_dropout` above 0 (its probability changes nothing here): each adapted
    /// Linear drops out its own copy of the input, which lora_A saves, and keeps the mask.
    #[serde(default, skip_serializing_if = "is_false")]
    pub dropout: bool,
    /// peft's `modules_to_save=["embed_tokens", "lm_head"]`: a trained copy of the token
    /// embedding and the lm_head beside the frozen originals (new tokens, chat templates).
    #[serde(default, skip_serializing_if = "is_false")]
    pub save_embeddings: bool,
    /// DoRA (peft's `use_dora`): a trained magnitude per output of each adapted Linear, the
    /// weight's column norms computed in every forward, and the base's and the adapters'
    /// outputs kept for the magnitude's gradient.
    #[serde(default, skip_serializing_if = "is_false")]
    pub dora: bool,
}

/// Parallelism across GPUs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Parallel {
    pub data: DataParallel,
    pub tensor: u32,
    pub pipeline: u32,
    /// Megatron-style sequence parallelism (with tensor parallelism).
    pub sequence: bool,
    pub offload_optimizer: Offload,
    pub offload_params: Offload,
    /// DDP's `gradient_as_bucket_view` (saves a full copy of the gradients).
    pub grad_bucket_view: bool,
    /// DeepSpeed's `bf16_master_weights_and_grads` and `bf16_optimizer_states` (ZeRO with
    /// bf16): the master copy, the gradient partition and the optimizer states in bf16.
    #[serde(default)]
    pub ds_bf16_states: bool,
    /// FSDP1 (`FullyShardedDataParallel`, as accelerate and transformers' Trainer run it by
    /// default: flat parameters, `use_orig_params=False`, the mixed-precision policy reducing
    /// in the compute dtype) instead of FSDP2 (`fully_shard`, as the FSDP2 export and
    /// torchtitan run it).
    #[serde(default)]
    pub fsdp1: bool,
    /// FSDP's mixed-precision policy reduces the gradients in fp32 (`reduce_dtype=float32`, as
    /// torchtitan and PyTorch's FSDP recipes set it) instead of the compute dtype
    /// (`reduce_dtype=param_dtype`, as accelerate and transformers' Trainer set it).
    #[serde(default)]
    pub reduce32: bool,
    /// Expert parallelism: each MoE layer's experts split over this many data-parallel ranks,
    /// tokens exchanged by all-to-all (torchtitan's expert_parallel_degree, Megatron-LM's
    /// --expert-model-parallel-size). 1: every rank holds every expert.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub expert: u32,
    /// Context parallelism: the sequence split over this many ranks, attention's keys and
    /// values passed around them in a ring (PyTorch's `context_parallel`, torchtitan's
    /// `context_parallel_degree`, Megatron-LM's `--context-parallel-size`). 1 is off.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub context: u32,
}

fn one() -> u32 {
    1
}

fn is_one(v: &u32) -> bool {
    *v == 1
}

pub(super) fn is_false(v: &bool) -> bool {
    !*v
}

pub(super) fn default_doc_len() -> u32 {
    DEFAULT_DOC_LEN
}

pub(super) fn is_default_doc_len(v: &u32) -> bool {
    *v == DEFAULT_DOC_LEN
}

/// The mean document length assumed when packing, in tokens (a setting: `doc_len`).
pub const DEFAULT_DOC_LEN: u32 = 1024;

/// Runtime and allocator settings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Runtime {
    /// `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`.
    pub expandable_segments: bool,
    /// CUDA graphs (torch.compile "reduce-overhead"): a private pool holds its high-water mark.
    pub cuda_graphs: bool,
    /// The model compiled with torch.compile (default mode). Modelled: torchao's fp8 casts fused
    /// into one pass each (`crate::fp8::cast_bytes_per_element`); the fused cross-entropy
    /// (`crate::loss`); and, for fully trained Llama-family dense layers, what the partitioner
    /// saves (`crate::compiled`: an H200's compiled Llama 3.2 1B and 8-layer Llama 3.1 8B steps
    /// within 4.3% and 3.3% of their allocated peaks, where eager counts were 38% and 28%
    /// over). Other layers keep eager training's inventory, an upper bound. CUDA graphs
    /// compile too ([`Runtime::compiled`]).
    #[serde(default, skip_serializing_if = "is_false")]
    pub compile: bool,
    /// Percent of the GPU's memory kept free: a setup fits only with this much to spare
    /// (the verdict, what fits and the planner all use it). 0 to [`MAX_MARGIN`].
    #[serde(default)]
    pub margin: u32,
    /// CPU RAM of one node in GiB, checked against what offloading pins there; 0 leaves it
    /// unchecked. 0 to [`MAX_HOST_RAM_GIB`].
    #[serde(default)]
    pub host_ram: u32,
    /// GPUs per server (node), for per-node host RAM, the launch command's node count and the
    /// time model's links; 0: [`GPUS_PER_NODE`]. 0 to [`MAX_GPUS_PER_NODE`].
    #[serde(default)]
    pub gpus_per_node: u32,
    /// Inter-node bandwidth per GPU and direction in GB/s for the time model; 0: its default
    /// (`time::TimeAssumptions`). 0 to [`MAX_INTERNODE_GBS`].
    #[serde(default)]
    pub internode_gbs: u32,
    /// The time model's framework efficiency in percent; 0: the measured default
    /// (`time::DEFAULT_FRAMEWORK_EFFICIENCY`). 0 or 5 to 100.
    #[serde(default)]
    pub efficiency: u32,
}

impl Runtime {
    /// Whether the model runs compiled: torch.compile in its default mode or with CUDA graphs
    /// ("reduce-overhead").
    pub fn compiled(&self) -> bool {
        self.compile || self.cuda_graphs
    }

    /// GPUs per node: the scenario's, or [`GPUS_PER_NODE`].
    pub fn gpus_per_node(&self) -> u32 {
        if self.gpus_per_node == 0 {
            GPUS_PER_NODE
        } else {
            self.gpus_per_node
        }
    }
}

/// The most GPUs one node can hold here (an NVL72 rack is one NVLink domain of 72).
pub const MAX_GPUS_PER_NODE: u32 = 72;

/// The fastest inter-node link per GPU and direction, GB/s (3.2 Tb/s, above any NIC today).
pub const MAX_INTERNODE_GBS: u32 = 400;

/// The largest host RAM per node, GiB (64 TiB: far above any server's).
pub const MAX_HOST_RAM_GIB: u32 = 65536;

/// GPUs on one node by default, for per-node figures (host RAM) and the time model's links
/// (eight per HGX/DGX server); `Runtime::gpus_per_node` is the scenario's.
pub const GPUS_PER_NODE: u32 = 8;

/// The largest safety margin, in percent of the GPU's memory.
pub const MAX_MARGIN: u32 = 50;
