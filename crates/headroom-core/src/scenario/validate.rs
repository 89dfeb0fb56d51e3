//! A scenario's validation: ranges and combinations, each refusal naming the link key of the
//! field it is about.

use super::*;
use crate::error::ScenarioError;

impl Scenario {
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
        if self.drop_long && crate::scenario::padding::almost_none_kept(self) {
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
        self.check_ranges()?;
        self.check_lengths()?;
        self.check_trainer()?;
        if self.method != Method::Full {
            range("rank", self.lora.rank, 1, MAX_LORA_RANK)?;
        }
        self.check_degrees()?;
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
        self.check_sharding()?;
        self.check_features()?;
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

    /// Every integer setting within its range.
    fn check_ranges(&self) -> Result<(), ScenarioError> {
        range("gpus", self.gpus, 1, MAX_GPUS)?;
        range("batch", self.micro_batch, 1, MAX_MICRO_BATCH)?;
        range("seq", self.seq, 1, MAX_SEQ)?;
        range("accum", self.grad_accum, 1, MAX_GRAD_ACCUM)?;
        range("images", self.images, 0, MAX_IMAGES)?;
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
        Ok(())
    }

    /// What TRL's trainers run: data parallelism over padded sequences, their own batch rules,
    /// and the settings that apply to each.
    fn check_trainer(&self) -> Result<(), ScenarioError> {
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
        Ok(())
    }

    /// The GPUs split evenly over the tensor, pipeline, context and expert degrees.
    fn check_degrees(&self) -> Result<(), ScenarioError> {
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
        Ok(())
    }

    /// Offload, FSDP and sequence-parallel settings with the sharding they need.
    fn check_sharding(&self) -> Result<(), ScenarioError> {
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
        Ok(())
    }

    /// Activation compression, fp8, the vision tower and QLoRA with what they work with.
    fn check_features(&self) -> Result<(), ScenarioError> {
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
