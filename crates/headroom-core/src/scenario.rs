//! A training scenario: every input of an estimate, with defaults, names and validation.

use serde::{Deserialize, Serialize};

use crate::dtype::DType;
use crate::error::ScenarioError;
use crate::model::ModelSpec;

/// Declares a fieldless enum with its identifiers (as typed in flags and links) and labels.
macro_rules! named_enum {
    ($(#[$meta:meta])* $name:ident, $what:literal { $($variant:ident => $id:literal, $label:literal;)+ }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        pub enum $name { $($variant),+ }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The identifier used in flags, links and JSON.
            pub const fn id(self) -> &'static str {
                match self { $($name::$variant => $id),+ }
            }

            /// A label for people.
            pub const fn label(self) -> &'static str {
                match self { $($name::$variant => $label),+ }
            }

            /// Parses an identifier, naming the allowed ones on failure.
            pub fn parse(field: &str, s: &str) -> Result<Self, ScenarioError> {
                match s {
                    $($id => Ok($name::$variant),)+
                    _ => Err(ScenarioError::invalid(field, format!(
                        "unknown {} `{}`; allowed: {}", $what, crate::scenario::shorten(s),
                        [$($id),+].join(", ")))),
                }
            }
        }
    };
}

pub fn shorten(s: &str) -> String {
    let mut out: String = s.chars().take(40).collect();
    if s.chars().count() > 40 {
        out.push_str("...");
    }
    out
}

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

    /// The same precision in fp16 where the GPU has no bf16 (T4, V100: amp-bf16 becomes
    /// amp-fp16, bf16 fp16), as the planner, the ladder and the strategy table propose it;
    /// unchanged elsewhere.
    pub fn for_gpu(self, gpu: &crate::catalog::Gpu) -> Precision {
        match self {
            Precision::AmpBf16 if !gpu.has_bf16() => Precision::AmpFp16,
            Precision::Bf16 if !gpu.has_bf16() => Precision::Fp16,
            p => p,
        }
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
            LoraTargets::Attention => ATTENTION_PROJECTIONS.contains(&name),
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

/// Serde's test for numeric fields a link or file leaves out at 0 (here and in `ModelSpec`).
pub(crate) fn is_zero<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

fn is_false(v: &bool) -> bool {
    !*v
}

fn default_doc_len() -> u32 {
    DEFAULT_DOC_LEN
}

fn is_default_doc_len(v: &u32) -> bool {
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

/// Everything an estimate needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Scenario {
    pub model: ModelChoice,
    pub gpu: String,
    /// GPUs in total (data x tensor x pipeline x context parallel).
    pub gpus: u32,
    pub micro_batch: u32,
    pub seq: u32,
    pub grad_accum: u32,
    pub method: Method,
    pub lora: Lora,
    pub precision: Precision,
    /// fp8 matmuls in the decoder layers (off: the compute dtype's).
    #[serde(default)]
    pub fp8: Fp8Recipe,
    pub optimizer: Optimizer,
    /// A multimodal model's vision tower and projector: frozen or trained.
    #[serde(default)]
    pub vision: VisionTraining,
    /// Images per sample (a multimodal model's; ignored for text-only models). Their tokens
    /// are part of `seq`: `seq` is the length of the sequence the text model sees, image
    /// tokens included, as a processor's expanded prompt and TRL's `max_length` count it.
    #[serde(default = "one_image")]
    pub images: u32,
    /// Multi-token prediction modules trained with the model (DeepSeek-V3's and GLM-4.5's,
    /// as Megatron-LM's `--mtp-num-layers` trains them): at most the config's
    /// `num_nextn_predict_layers`; 0 trains none, as transformers does.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub mtp: u32,
    pub attention: Attention,
    /// SDPA's kernel (auto: PyTorch's choice for the GPU); read only with `Attention::Sdpa`.
    #[serde(default)]
    pub sdpa: SdpaKernel,
    /// Overrides every dropout probability of the model; `None` keeps the config's.
    pub dropout: Option<f64>,
    pub checkpointing: Checkpointing,
    /// `torch.autograd.graph.save_on_cpu(pin_memory=True)` around the forward.
    pub offload_activations: bool,
    /// The decoder layers' saved floating-point tensors packed to int8 with one scale each (a
    /// `saved_tensors_hooks` pair, worked example 2's `compress_activation`): a what-if.
    #[serde(default, skip_serializing_if = "is_false")]
    pub act_int8: bool,
    pub loss: LossImpl,
    /// The objective. `Dpo` is TRL's DPOTrainer: each micro-batch sequence is a pair (chosen
    /// and rejected, concatenated into one forward of twice the sequences, padded to `seq`),
    /// the log-probabilities come from TRL's tiled fused LM head (no logits), and a reference
    /// model's log-probabilities from a no-grad forward after the policy's: the adapters
    /// disabled under LoRA/QLoRA, a copy of the model in its dtype for a full fine-tune. `Kto`
    /// is KTOTrainer: unpaired samples, and no-grad passes over mismatched "KL" completions.
    /// `Grpo` and `Rloo` generate their completions each step; RLOO also scores them with the
    /// policy before training (its old log-probabilities, always computed).
    #[serde(default, skip_serializing_if = "is_sft")]
    pub trainer: Trainer,
    /// TRL's `precompute_ref_log_probs`: the reference log-probabilities computed before
    /// training, so no reference model and no reference forward in the step (DPO and KTO).
    #[serde(default, skip_serializing_if = "is_false")]
    pub ref_precompute: bool,
    /// GRPO and RLOO: tokens of each prompt, the rest of `seq` the completion TRL scores (0: not
    /// stated, every token scored).
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub prompt: u32,
    /// GRPO and RLOO: a KL term (`beta` > 0), so a reference model whose log-probabilities the
    /// generation phase computes (a copy of the weights for a full fine-tune).
    #[serde(default, skip_serializing_if = "is_false")]
    pub kl: bool,
    /// GRPO and RLOO: where the completions are generated (`crate::vllm` models vLLM's share).
    #[serde(default, skip_serializing_if = "is_hf_generator")]
    pub generator: Generator,
    /// vLLM's `gpu_memory_utilization` in percent: its budget as a share of the GPU's memory
    /// (0: TRL's defaults, 30 colocated and 90 for `trl vllm-serve`).
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub vllm_util: u32,
    /// vLLM's `max_model_len` (TRL's `vllm_max_model_length`), tokens (0: the model's
    /// `max_position_embeddings`, as vLLM infers it when TRL leaves it unset).
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub vllm_len: u32,
    /// TRL's `vllm_enable_sleep_mode`: the colocated engine frees its weights and KV cache
    /// between generations (`sleep(level=2)`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub vllm_sleep: bool,
    /// Whether the training loop keeps `outputs` (and so the logits) alive through backward.
    pub keep_logits: bool,
    pub parallel: Parallel,
    pub runtime: Runtime,
    /// Sequence packing with variable-length attention: each row of `seq` tokens holds several
    /// whole documents, with no padding and no attention across documents (transformers'
    /// `DataCollatorWithFlattening`: `position_ids` restart at each document and the flash
    /// kernels run varlen from them).
    #[serde(default, skip_serializing_if = "is_false")]
    pub packing: bool,
    /// Mean document length in tokens when packing (a longer one is cut at `seq`).
    #[serde(
        default = "default_doc_len",
        skip_serializing_if = "is_default_doc_len"
    )]
    pub doc_len: u32,
    /// Dynamic padding: the samples' mean length in tokens (0: every micro-batch is `seq` tokens,
    /// one shape). Each micro-batch is padded to its longest sample, lengths drawn log-normal with
    /// this mean and `len_sd`, so the step's shape changes and the caching allocator keeps blocks
    /// cut for the longest step so far (`estimate::padding`). 0 to [`MAX_SEQ`].
    #[serde(default, skip_serializing_if = "is_zero")]
    pub len_mean: u32,
    /// The samples' length standard deviation in tokens (with `len_mean`). 0 to [`MAX_SEQ`].
    #[serde(default, skip_serializing_if = "is_zero")]
    pub len_sd: u32,
    /// Samples longer than `seq` are dropped (axolotl's and ms-swift's default) rather than cut
    /// to `seq` (transformers' tokenizer truncation, TRL's and LLaMA-Factory's).
    #[serde(default, skip_serializing_if = "is_false")]
    pub drop_long: bool,
}

fn one_image() -> u32 {
    1
}

// `named_enum!` declares the variants, so `#[default]` cannot be put on one.
#[allow(clippy::derivable_impls)]
impl Default for Trainer {
    fn default() -> Self {
        Trainer::Sft
    }
}

fn is_sft(t: &Trainer) -> bool {
    *t == Trainer::Sft
}

fn is_hf_generator(g: &Generator) -> bool {
    *g == Generator::Hf
}

fn is_zero_u32(n: &u32) -> bool {
    *n == 0
}

impl Default for Scenario {
    fn default() -> Self {
        Scenario {
            model: ModelChoice::Preset("llama-3.1-8b".into()),
            gpu: "h100-sxm-80gb".into(),
            gpus: 1,
            micro_batch: 1,
            seq: 4096,
            grad_accum: 1,
            method: Method::Full,
            lora: Lora {
                rank: 16,
                targets: LoraTargets::AllLinear,
                adapter_dtype: DType::F32,
                base: BaseDtype::Half,
                kbit: false,
                dropout: false,
                save_embeddings: false,
                dora: false,
            },
            precision: Precision::AmpBf16,
            fp8: Fp8Recipe::Off,
            optimizer: Optimizer::AdamW,
            vision: VisionTraining::Frozen,
            images: 1,
            mtp: 0,
            attention: Attention::Sdpa,
            sdpa: SdpaKernel::Auto,
            dropout: None,
            checkpointing: Checkpointing::None,
            offload_activations: false,
            act_int8: false,
            loss: LossImpl::Hf,
            trainer: Trainer::Sft,
            ref_precompute: false,
            prompt: 0,
            kl: false,
            generator: Generator::Hf,
            vllm_util: 0,
            vllm_len: 0,
            vllm_sleep: false,
            keep_logits: false,
            parallel: Parallel {
                data: DataParallel::Ddp,
                tensor: 1,
                pipeline: 1,
                sequence: false,
                offload_optimizer: Offload::None,
                offload_params: Offload::None,
                grad_bucket_view: false,
                ds_bf16_states: false,
                fsdp1: false,
                reduce32: false,
                expert: 1,
                context: 1,
            },
            runtime: Runtime {
                expandable_segments: false,
                cuda_graphs: false,
                compile: false,
                margin: 0,
                host_ram: 0,
                gpus_per_node: 0,
                internode_gbs: 0,
                efficiency: 0,
            },
            packing: false,
            doc_len: DEFAULT_DOC_LEN,
            len_mean: 0,
            len_sd: 0,
            drop_long: false,
        }
    }
}

/// Largest values accepted, so no product of inputs overflows `u64` and the page stays sane.
pub const MAX_GPUS: u32 = 65_536;
pub const MAX_MICRO_BATCH: u32 = 65_536;
pub const MAX_SEQ: u32 = 4_194_304;
pub const MAX_GRAD_ACCUM: u32 = 1_000_000;
pub const MAX_LORA_RANK: u32 = 65_536;

impl Scenario {
    /// Data-parallel degree: GPUs divided by the tensor, pipeline and context degrees (each
    /// data-parallel replica reads its own sequences).
    pub fn data_parallel(&self) -> u32 {
        self.gpus / (self.parallel.tensor * self.parallel.pipeline * self.context()).max(1)
    }

    /// Context-parallel degree (at least 1).
    pub fn context(&self) -> u32 {
        self.parallel.context.max(1)
    }

    /// Ranks the gradients are reduced over and ZeRO/FSDP shard over: data x context
    /// parallel, since the context ranks of a replica hold the same weights and each computes
    /// gradients from its part of the sequence (torchtitan's `dp_shard_cp` mesh; Megatron-LM's
    /// `get_data_parallel_group(with_context_parallel=True)`).
    pub fn shard_ranks(&self) -> u32 {
        self.data_parallel() * self.context()
    }

    /// Tokens of one sequence on this GPU: `seq / cp` (validation makes it exact).
    /// Sequences one forward of a micro-batch runs: `micro_batch`, or twice it under DPO
    /// (each sample a chosen and a rejected sequence, concatenated along the batch).
    pub fn sequences(&self) -> u32 {
        if self.trainer == Trainer::Dpo {
            self.micro_batch.saturating_mul(2)
        } else {
            self.micro_batch
        }
    }

    /// Tokens of each sequence the loss scores: GRPO's and RLOO's completions (after the prompt), every
    /// token otherwise.
    pub fn scored_tokens(&self) -> u32 {
        if self.trainer.generates() && self.prompt > 0 {
            self.seq.saturating_sub(self.prompt)
        } else {
            self.seq
        }
    }

    /// Whether the step holds a reference model's weights (DPO or KTO of a full fine-tune without
    /// precomputed reference log-probabilities; under LoRA the adapters are disabled instead).
    pub fn reference_copy(&self) -> bool {
        self.method == Method::Full
            && (self.reference_forward() || self.trainer.generates() && self.kl)
    }

    /// Whether the step runs a reference forward (DPO or KTO without precomputed
    /// log-probabilities).
    pub fn reference_forward(&self) -> bool {
        self.trainer.preference() && !self.ref_precompute
    }

    /// No-grad forwards of the step's sequences beside the training forward: DPO's reference
    /// pass; KTO's policy pass over the mismatched KL completions and the reference's passes
    /// over both (`KTOTrainer._compute_loss`, TRL 1.16).
    pub fn no_grad_forwards(&self) -> u32 {
        let reference = u32::from(self.reference_forward());
        match self.trainer {
            Trainer::Kto => 1 + 2 * reference,
            _ => reference,
        }
    }

    pub fn seq_local(&self) -> u32 {
        self.seq / self.context()
    }

    /// Tokens one query attends to at most before a window: the whole sequence, or, packed,
    /// its document (the mean length, cut at `seq`).
    pub fn attention_span(&self) -> u32 {
        if self.packing {
            self.doc_len.min(self.seq).max(1)
        } else {
            self.seq
        }
    }

    /// Sequences per optimizer step over all GPUs.
    pub fn global_batch(&self) -> u64 {
        self.micro_batch as u64 * self.grad_accum as u64 * self.data_parallel() as u64
    }

    /// Dynamic padding's settings: in range, not with packing (packed rows are never padded),
    /// and with samples no longer than `seq` left to draw when long ones are dropped.
    fn check_lengths(&self) -> Result<(), ScenarioError> {
        range("len_mean", self.len_mean, 0, MAX_SEQ)?;
        range("len_sd", self.len_sd, 0, MAX_SEQ)?;
        if self.len_mean == 0 {
            return Ok(());
        }
        if self.packing {
            return Err(ScenarioError::invalid(
                "len_mean",
                "packed rows are not padded: 0 with packing",
            ));
        }
        if self.drop_long && crate::estimate::padding::almost_none_kept(self) {
            return Err(ScenarioError::invalid(
                "drop_long",
                "would drop almost every sample (longer than seq)",
            ));
        }
        Ok(())
    }

    /// Checks ranges and combinations; every message names the link key of the field (the
    /// key a link, a form input or a scenario file uses), so the site shows it under that input.
    pub fn validate(&self) -> Result<(), ScenarioError> {
        range("gpus", self.gpus, 1, MAX_GPUS)?;
        range("batch", self.micro_batch, 1, MAX_MICRO_BATCH)?;
        range("seq", self.seq, 1, MAX_SEQ)?;
        range("accum", self.grad_accum, 1, MAX_GRAD_ACCUM)?;
        range("images", self.images, 0, crate::bounds::MAX_IMAGES)?;
        range("mtp", self.mtp, 0, crate::model::hf::MAX_MTP_MODULES as u32)?;
        range("tp", self.parallel.tensor, 1, 1024)?;
        range("margin", self.runtime.margin, 0, MAX_MARGIN)?;
        range("host_ram", self.runtime.host_ram, 0, MAX_HOST_RAM_GIB)?;
        range("node", self.runtime.gpus_per_node, 0, MAX_GPUS_PER_NODE)?;
        range("ib", self.runtime.internode_gbs, 0, MAX_INTERNODE_GBS)?;
        if self.runtime.efficiency != 0 {
            range("eff", self.runtime.efficiency, 5, 100)?;
        }
        range("pp", self.parallel.pipeline, 1, 1024)?;
        range("ep", self.parallel.expert, 1, 1024)?;
        range("cp", self.parallel.context, 1, 1024)?;
        if self.packing {
            range("doc_len", self.doc_len, 1, MAX_SEQ)?;
        }
        self.check_lengths()?;
        if self.trainer != Trainer::Sft {
            let p = &self.parallel;
            if p.tensor > 1 || p.pipeline > 1 || p.context > 1 || p.expert > 1 {
                return Err(ScenarioError::invalid(
                    "trainer",
                    "TRL's trainers run data parallelism only: set tp, pp, cp and ep to 1",
                ));
            }
            if self.packing {
                return Err(ScenarioError::invalid(
                    "trainer",
                    "TRL's trainers pad their sequences: turn packing off",
                ));
            }
        }
        if self.micro_batch < self.trainer.min_micro_batch() {
            // KTOTrainer's KL completions are the batch's own, shifted by one.
            return Err(ScenarioError::invalid(
                "batch",
                "KTO needs 2 or more samples per micro-batch (TRL refuses 1)",
            ));
        }
        if self.ref_precompute && !self.trainer.preference() {
            return Err(ScenarioError::invalid(
                "ref_precompute",
                "applies to trainer=dpo or kto only",
            ));
        }
        if !self.trainer.generates() && (self.prompt > 0 || self.kl) {
            return Err(ScenarioError::invalid(
                if self.kl { "kl" } else { "prompt" },
                "applies to trainer=grpo or rloo only",
            ));
        }
        self.validate_vllm()?;
        if self.prompt >= self.seq && self.prompt > 0 {
            return Err(ScenarioError::invalid(
                "prompt",
                "must be shorter than seq (prompt + completion)",
            ));
        }
        if self.method != Method::Full {
            range("rank", self.lora.rank, 1, MAX_LORA_RANK)?;
        }
        let cp = self.parallel.context;
        let model_parallel = self.parallel.tensor * self.parallel.pipeline;
        if cp == 1 && !self.gpus.is_multiple_of(model_parallel) {
            return Err(ScenarioError::invalid(
                "gpus",
                format!(
                    "must be a multiple of tp x pp = {model_parallel}, found {}",
                    self.gpus
                ),
            ));
        }
        if !self.data_parallel().is_multiple_of(self.parallel.expert) {
            return Err(ScenarioError::invalid(
                "ep",
                format!(
                    "expert parallelism splits the experts over data-parallel ranks: ep must \
                     divide the data-parallel degree {} (gpus / (tp x pp x cp)), found {}",
                    self.data_parallel(),
                    self.parallel.expert
                ),
            ));
        }
        // tp, pp and cp are at most 1024 each: their product fits a u64.
        let split = u64::from(model_parallel) * u64::from(cp);
        if cp > 1 && !u64::from(self.gpus).is_multiple_of(split) {
            return Err(ScenarioError::invalid(
                "gpus",
                format!(
                    "must be a multiple of tp x pp x cp = {split}, found {}",
                    self.gpus
                ),
            ));
        }
        self.check_context()?;
        self.check_packing()?;
        if let Some(p) = self.dropout
            && !(0.0..1.0).contains(&p)
        {
            return Err(ScenarioError::invalid(
                "dropout",
                format!("must be a probability in [0, 1), found {p}"),
            ));
        }
        let zero = matches!(
            self.parallel.data,
            DataParallel::Zero1 | DataParallel::Zero2 | DataParallel::Zero3
        );
        if self.parallel.offload_optimizer != Offload::None
            && !zero
            && self.parallel.data != DataParallel::Fsdp
        {
            return Err(ScenarioError::invalid(
                "opt_offload",
                "optimizer offload needs ZeRO (zero1, zero2, zero3) or FSDP",
            ));
        }
        if self.parallel.offload_params != Offload::None
            && !matches!(self.parallel.data, DataParallel::Zero3 | DataParallel::Fsdp)
        {
            return Err(ScenarioError::invalid(
                "param_offload",
                "parameter offload needs ZeRO-3 or FSDP",
            ));
        }
        if self.parallel.data == DataParallel::Fsdp && self.parallel.offload_params == Offload::Nvme
        {
            return Err(ScenarioError::invalid(
                "param_offload",
                "FSDP offloads to CPU only; NVMe needs DeepSpeed ZeRO-3",
            ));
        }
        if self.parallel.fsdp1 && self.parallel.data != DataParallel::Fsdp {
            return Err(ScenarioError::invalid("fsdp1", "needs dp=fsdp"));
        }
        if self.parallel.reduce32
            && (self.parallel.data != DataParallel::Fsdp || !self.precision.is_autocast())
        {
            return Err(ScenarioError::invalid(
                "reduce32",
                "needs dp=fsdp and an amp precision",
            ));
        }
        if self.parallel.sequence && self.parallel.tensor == 1 {
            return Err(ScenarioError::invalid(
                "sp",
                "sequence parallelism needs tp > 1",
            ));
        }
        if self.act_int8 && self.offload_activations {
            return Err(ScenarioError::invalid(
                "act_int8",
                "int8 compression and act_offload are both saved-tensor hooks, and only the \
                 innermost runs: choose one",
            ));
        }
        if self.act_int8 && self.checkpointing != Checkpointing::None {
            return Err(ScenarioError::invalid(
                "act_int8",
                "inside checkpointed layers the checkpoint's own saved-tensor hooks take over \
                 (torch.utils.checkpoint), which Headroom does not model with int8 \
                 compression: choose ckpt none",
            ));
        }
        if self.fp8.is_on() && !matches!(self.precision, Precision::Bf16 | Precision::AmpBf16) {
            return Err(ScenarioError::invalid(
                "fp8",
                "fp8 training casts bf16 matmul inputs: choose precision bf16 or amp-bf16",
            ));
        }
        if self.vision == VisionTraining::Trained && self.method != Method::Full {
            return Err(ScenarioError::invalid(
                "vision",
                "LoRA and QLoRA put adapters on the language model and keep the vision tower \
                 frozen: choose method full to train the vision tower",
            ));
        }
        if self.fp8.is_on() && self.method != Method::Full {
            return Err(ScenarioError::invalid(
                "fp8",
                "fp8 training (torchao, Transformer Engine) converts the Linear layers that \
                 train: choose method full",
            ));
        }
        if self.method == Method::Qlora && self.precision == Precision::Fp32 {
            return Err(ScenarioError::invalid(
                "precision",
                "QLoRA computes in 16 bits: choose bf16, fp16, amp-bf16 or amp-fp16",
            ));
        }
        self.check_int8()?;
        if self.method != Method::Full
            && self.lora.base == BaseDtype::Fp32
            && matches!(self.precision, Precision::Bf16 | Precision::Fp16)
        {
            return Err(ScenarioError::invalid(
                "base",
                "an fp32 base model trains under fp32 or an amp precision (amp-bf16, amp-fp16); \
                 pure bf16 and fp16 load the base in 16 bits",
            ));
        }
        Ok(())
    }
}

impl Scenario {
    /// Context parallelism's own rules: a causal sequence split into 2·cp chunks, and an
    /// attention kernel the ring can run.
    fn check_context(&self) -> Result<(), ScenarioError> {
        let cp = self.parallel.context;
        if cp == 1 {
            return Ok(());
        }
        // Causal load balancing gives each rank chunk i and chunk 2·cp−1−i of the sequence
        // (Megatron-LM's `get_batch_on_this_cp_rank`; PyTorch's head-tail load balancer).
        if !self.seq.is_multiple_of(2 * cp) {
            return Err(ScenarioError::invalid(
                "seq",
                format!(
                    "context parallelism cp = {cp} splits a causal sequence into 2 x cp = {} \
                     load-balanced chunks: seq must be a multiple of {}, found {}",
                    2 * cp,
                    2 * cp,
                    self.seq
                ),
            ));
        }
        // PyTorch's `context_parallel` replaces `scaled_dot_product_attention`'s flash,
        // memory-efficient and cuDNN ops with ring versions; eager attention's explicit
        // s x s matmuls, the math kernel and transformers' own flash-attn / flex calls are not
        // dispatched through it.
        if self.attention != Attention::Sdpa {
            return Err(ScenarioError::invalid(
                "cp",
                format!(
                    "context parallelism runs ring attention through SDPA's fused kernels \
                     (torch's context_parallel); attention {} is not split: choose attention sdpa",
                    self.attention.id()
                ),
            ));
        }
        if self.sdpa == SdpaKernel::Math {
            return Err(ScenarioError::invalid(
                "cp",
                "context parallelism has no ring version of SDPA's math kernel: choose sdpa auto, \
                 flash, efficient or cudnn",
            ));
        }
        if self.packing {
            return Err(ScenarioError::invalid(
                "cp",
                "context parallelism (ring SDPA) does not take packed documents' varlen \
                 attention: turn packing off or cp to 1",
            ));
        }
        Ok(())
    }

    /// vLLM's settings: GRPO and RLOO only, a budget vLLM accepts, a context that holds `seq`.
    /// An 8-bit base (`Linear8bitLt`) as people run it: replicated on each GPU (its `Int8Params`
    /// keep their scales beside the weight, which FSDP and ZeRO-3 do not shard, and DeepSpeed
    /// casts the module to 16 bits), eager, its held inputs on the GPU.
    fn check_int8(&self) -> Result<(), ScenarioError> {
        if self.method != Method::Int8 {
            return Ok(());
        }
        let p = &self.parallel;
        let why = if p.data != DataParallel::Ddp {
            Some(("dp", "an 8-bit base trains replicated: choose dp=ddp"))
        } else if p.tensor > 1 || p.pipeline > 1 || p.context > 1 || p.expert > 1 {
            Some((
                "method",
                "an 8-bit base runs data parallelism only: set tp, pp, cp and ep to 1",
            ))
        } else if self.offload_activations || self.act_int8 {
            Some((
                if self.act_int8 {
                    "act_int8"
                } else {
                    "act_offload"
                },
                "not modelled with lora8 (its Linears keep their inputs outside \
                 saved-tensor hooks)",
            ))
        } else if self.runtime.compile {
            Some(("compile", "not modelled with lora8: turn compile off"))
        } else if self.lora.adapter_dtype != DType::F32 {
            // `_move_adapter_to_device_of_base_layer` casts adapters to the base layer's
            // dtype only when it is a floating-point one; an 8-bit Linear's weight is int8.
            Some((
                "adapter",
                "peft keeps an 8-bit base's adapters in fp32: choose adapter fp32",
            ))
        } else {
            None
        };
        match why {
            Some((field, msg)) => Err(ScenarioError::invalid(field, msg)),
            None => Ok(()),
        }
    }

    fn validate_vllm(&self) -> Result<(), ScenarioError> {
        let vllm = self.generator != Generator::Hf;
        if !self.trainer.generates() && vllm {
            return Err(ScenarioError::invalid(
                "gen",
                "applies to trainer=grpo or rloo only",
            ));
        }
        let set = [
            ("vllm_util", self.vllm_util > 0),
            ("vllm_len", self.vllm_len > 0),
            ("vllm_sleep", self.vllm_sleep),
        ];
        if let Some((field, _)) = set.iter().find(|(_, on)| *on && !vllm) {
            return Err(ScenarioError::invalid(
                *field,
                "needs gen=colocate or gen=server",
            ));
        }
        if self.vllm_sleep && self.generator != Generator::Colocate {
            return Err(ScenarioError::invalid("vllm_sleep", "needs gen=colocate"));
        }
        if self.vllm_util > 0 {
            // vLLM's `CacheConfig` takes a fraction in (0, 1].
            range("vllm_util", self.vllm_util, 1, 100)?;
        }
        if self.vllm_len > 0 && self.vllm_len < self.seq {
            return Err(ScenarioError::invalid(
                "vllm_len",
                format!(
                    "must hold prompt + completion: at least seq ({}), found {}",
                    self.seq, self.vllm_len
                ),
            ));
        }
        Ok(())
    }

    /// Packing's rule: variable-length attention needs a kernel that reads document bounds.
    fn check_packing(&self) -> Result<(), ScenarioError> {
        if !self.packing {
            return Ok(());
        }
        // transformers' flash_attention_2/3 take `cu_seqlens` from the restarting position_ids
        // (`_flash_attention_forward`), flex builds a block mask that skips other documents;
        // eager and SDPA need a 4D block-diagonal mask (b x 1 x s x s), which this estimate
        // does not model.
        if !matches!(
            self.attention,
            Attention::Flash2 | Attention::Flash3 | Attention::Flex
        ) {
            return Err(ScenarioError::invalid(
                "packing",
                format!(
                    "packed documents need variable-length attention (flash2, flash3 or flex); \
                     attention {} would need a 4D block-diagonal mask: choose attention flash2, \
                     flash3 or flex",
                    self.attention.id()
                ),
            ));
        }
        Ok(())
    }
}

fn range(field: &str, v: u32, lo: u32, hi: u32) -> Result<(), ScenarioError> {
    if v < lo || v > hi {
        return Err(ScenarioError::invalid(
            field,
            format!("must be an integer from {lo} to {hi}, found {v}"),
        ));
    }
    Ok(())
}
