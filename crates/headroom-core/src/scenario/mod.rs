//! A training scenario: every input of an estimate, with defaults, names and validation.
//!
//! The options of each setting (`options`), the scenario and what follows from it (here) and
//! its validation (`validate`).

use serde::{Deserialize, Serialize};

use crate::dtype::DType;

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

pub use crate::error::shorten;

mod options;
pub mod padding;
mod validate;

pub use options::*;
use options::{default_doc_len, is_default_doc_len, is_false};

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

/// Images a sample carries (and tokens an image adds): vision-language fine-tuning sets use one
/// to a few dozen.
pub const MAX_IMAGES: u32 = 1024;
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

    /// Sequences one forward of a micro-batch runs: `micro_batch`, or twice it under DPO, ORPO,
    /// CPO and SimPO (each sample a chosen and a rejected sequence, concatenated along the
    /// batch).
    pub fn sequences(&self) -> u32 {
        if self.trainer.paired() {
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
        self.reference_passes()
            + match self.trainer {
                // KTO's policy pass over the mismatched KL completions.
                Trainer::Kto => 1,
                _ => 0,
            }
    }

    /// Of [`Scenario::no_grad_forwards`], the reference model's: DPO's one, KTO's two (over
    /// the batch and the KL completions); none with precomputed log-probabilities.
    pub fn reference_passes(&self) -> u32 {
        let reference = u32::from(self.reference_forward());
        match self.trainer {
            Trainer::Kto => 2 * reference,
            _ => reference,
        }
    }

    /// Tokens of one sequence on this GPU: `seq / cp` (validation makes it exact).
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
}

/// Whether `s` trains something other than `reference`: whether the sequence of weights it
/// produces can differ, beyond floating-point reordering. The one rule for the planner, the
/// ladder and the strategy table.
///
/// It does:
/// - the weights' precision (pure bf16 rounds every update; fp32 and the autocast modes keep
///   fp32 weights and states, so switching among them does not count);
/// - the optimizer's algorithm or its state precision (AdamW to 8-bit AdamW quantizes the
///   moments, and 8-bit AdamW back to a 32-bit AdamW stops quantizing them; Lion, Adafactor,
///   Adam-mini and SGD are other updates);
/// - the method or the LoRA settings (other parameters are trained);
/// - the tokens of an optimizer step (another batch is another gradient);
/// - fp8 matmuls or their recipe (the matmuls' operands are rounded to fp8);
/// - int8 activation compression (backward reads rounded activations);
/// - packing on or off (documents stop attending to the others in their row).
///
/// It does not: the same math run elsewhere or in another order. AdamW's for-loop, foreach and
/// fused kernels compute one update; paged 8-bit AdamW is 8-bit AdamW with its states in
/// unified memory; checkpointing recomputes the same activations; offload, sharding (ZeRO,
/// FSDP), tensor, pipeline and context parallelism, the fused loss, SDPA and allocator settings move
/// or split the same tensors; more GPUs with less accumulation keep the global batch.
pub fn changes_training(reference: &Scenario, s: &Scenario) -> bool {
    let family = |o: Optimizer| match o {
        Optimizer::AdamW | Optimizer::AdamWForLoop | Optimizer::AdamWFused => Optimizer::AdamW,
        // Paging moves the 8-bit states; it does not change them.
        Optimizer::PagedAdamW8bit => Optimizer::AdamW8bit,
        other => other,
    };
    // In u128: the largest global batch times the longest sequence passes u64 (found by
    // tests/properties.rs: 65536 x 10^6 accumulation x 1024 GPUs x 274878 tokens).
    let tokens = |x: &Scenario| u128::from(x.global_batch()) * u128::from(x.seq);
    s.method != reference.method
        || (s.method != Method::Full && s.lora != reference.lora)
        || family(s.optimizer) != family(reference.optimizer)
        || s.precision.param_dtype() != reference.precision.param_dtype()
        || tokens(s) != tokens(reference)
        || s.fp8 != reference.fp8
        || s.packing != reference.packing
        || s.act_int8 != reference.act_int8
}
