//! vLLM generating GRPO's completions as TRL runs it (`use_vllm`): the engine's budget on a
//! GPU, what fills it, how many completions it decodes at once, and why it would refuse to
//! start.
//!
//! Read from TRL (`trl/generation/vllm_generation.py`, `trl/trainer/grpo_config.py`,
//! `trl/scripts/vllm_serve.py`: main at f2cd577, and the same defaults checked in the 1.16.0
//! wheel) and vLLM's V1 GPU worker (`vllm/v1/worker/gpu_worker.py`; TRL 1.16 pins
//! `vllm>=0.22,<=0.31`):
//! - vLLM takes `gpu_memory_utilization x the GPU's total memory` as its budget and refuses to
//!   start when the GPU has less than that free (a colocated trainer's model is already
//!   loaded by then). TRL's default is 0.3 colocated, 0.9 for `trl vllm-serve`.
//! - Within the budget: its own copy of the weights (the checkpoint's 16-bit dtype; bitsandbytes
//!   4-bit when the trained model is a QLoRA base, which TRL passes as `quantization`), the
//!   peak of a profile run (a forward of `max_num_batched_tokens` tokens, 4096 as TRL sets it
//!   colocated, and the sampler over `max_num_seqs` rows), and the KV cache, which gets the
//!   rest. The profile counts only what vLLM itself allocates since its start, so a colocated
//!   trainer's memory is outside the budget, beside it.
//! - The KV cache must hold one sequence of `max_model_len` tokens (the model's
//!   `max_position_embeddings` unless TRL's `vllm_max_model_length` is set), or vLLM refuses.
//! - Colocated with `vllm_enable_sleep_mode`, TRL puts the engine to sleep at level 2 after
//!   every generation (weights and KV cache freed) and wakes it for the next.
//!
//! Not counted: the CUDA graphs vLLM captures after the profile (outside the budget; its log
//! gives their size at start), and the top-k/top-p sort, which the profile run skips.

use crate::catalog::Gpu;
use crate::model::ModelSpec;
use crate::scenario::{Generator, Method, Scenario};
use crate::states::ModelStates;

/// TRL's `vllm_gpu_memory_utilization` default (colocated), in percent.
pub const COLOCATE_UTIL: u32 = 30;
/// `trl vllm-serve`'s `gpu_memory_utilization` default, in percent.
pub const SERVER_UTIL: u32 = 90;
/// `max_num_batched_tokens` TRL passes to a colocated engine.
const COLOCATE_BATCHED_TOKENS: u64 = 4096;

/// The engine on one GPU: its budget and what it holds.
#[derive(Debug, Clone, PartialEq)]
pub struct Engine {
    pub mode: Generator,
    /// `gpu_memory_utilization`, percent.
    pub util: u32,
    /// util x the GPU's total memory.
    pub budget: u64,
    /// Its copy of the model.
    pub weights: u64,
    /// The profile run's peak: one forward of `batched_tokens` tokens and the sampler's logits
    /// (model dtype, fp32 copy and probabilities) over `max_num_seqs` rows.
    pub profile: u64,
    /// The rest of the budget (0 when weights and profile exceed it).
    pub kv_cache: u64,
    /// KV cache bytes per token of a `seq`-token sequence (sliding-window layers keep their
    /// window only).
    pub kv_per_token: u64,
    /// The longest sequence the KV cache holds.
    pub kv_tokens: u64,
    /// vLLM's `max_model_len`.
    pub max_len: u64,
    pub max_num_seqs: u64,
    pub batched_tokens: u64,
    /// Completions one generation asks for: this GPU's colocated, every training GPU's on a
    /// server.
    pub sequences: u64,
    /// Completions decoded at once (the KV cache and `max_num_seqs` allowing).
    pub concurrent: u64,
    /// The sequence (prompt + completion), and the KV cache one `max_len` sequence needs.
    pub seq: u64,
    pub max_len_kv: u64,
    /// Colocated with TRL's sleep mode: weights and KV cache freed while the trainer trains.
    pub sleeps: bool,
}

impl Engine {
    /// The engine of a GRPO scenario generating with vLLM, None otherwise. `gpu` is the
    /// training GPU's model, which a server is assumed to be too.
    pub(crate) fn of(
        spec: &ModelSpec,
        scen: &Scenario,
        gpu: &Gpu,
        st: &ModelStates,
    ) -> Option<Self> {
        if !scen.trainer.generates() || scen.generator == Generator::Hf {
            return None;
        }
        let colocated = scen.generator == Generator::Colocate;
        let util = match scen.vllm_util {
            0 if colocated => COLOCATE_UTIL,
            0 => SERVER_UTIL,
            u => u,
        };
        let total = gpu.total_bytes;
        let budget = (total as u128 * u128::from(util) / 100) as u64;
        let half = 2u64;
        let weights = if scen.method == Method::Qlora {
            // The same NF4 layers and 16-bit rest as the trainer's own base.
            st.weights
        } else {
            st.params_total * half
        };
        // vLLM's defaults for the LLM class (`EngineArgs.get_batch_defaults`): larger on GPUs
        // of 70 GiB or more that are not A100s.
        let large = total >= 70 << 30 && !gpu.id.contains("a100");
        let max_num_seqs = if large { 1024 } else { 256 };
        let batched_tokens = if colocated {
            COLOCATE_BATCHED_TOKENS
        } else if large {
            16384
        } else {
            8192
        };
        let profile = batched_tokens * forward_bytes_per_token(spec)
            + max_num_seqs.min(batched_tokens) * spec.vocab * (half + 8);
        let kv_cache = budget.saturating_sub(weights + profile);
        let seq = u64::from(scen.seq).max(1);
        let kv_per_token = (kv_bytes(spec, seq) / seq).max(1);
        let kv_tokens = longest_held(spec, kv_cache);
        let max_len = match scen.vllm_len {
            0 => spec.max_positions.max(seq),
            n => u64::from(n),
        };
        let per_gpu = u64::from(scen.micro_batch) * u64::from(scen.grad_accum);
        let sequences = if colocated {
            per_gpu
        } else {
            per_gpu * u64::from(scen.gpus)
        };
        let concurrent = sequences
            .min(max_num_seqs)
            .min(kv_cache / kv_bytes(spec, seq).max(1))
            .max(1);
        Some(Engine {
            mode: scen.generator,
            util,
            budget,
            weights,
            profile,
            kv_cache,
            kv_per_token,
            kv_tokens,
            max_len,
            max_num_seqs,
            batched_tokens,
            sequences,
            concurrent,
            seq,
            max_len_kv: kv_bytes(spec, max_len),
            sleeps: scen.vllm_sleep,
        })
    }

    pub fn colocated(&self) -> bool {
        self.mode == Generator::Colocate
    }

    /// What the colocated engine holds on the training GPU while the trainer trains: its
    /// weights and KV cache, or nothing when it sleeps between generations; nothing on a
    /// server.
    pub fn held_while_training(&self) -> u64 {
        if !self.colocated() || self.sleeps {
            0
        } else {
            self.weights + self.kv_cache
        }
    }

    /// What it holds while generating: its weights, KV cache and working memory (at most the
    /// profile's), on the training GPU when colocated.
    pub fn while_generating(&self) -> u64 {
        if self.colocated() {
            self.weights + self.kv_cache + self.profile
        } else {
            0
        }
    }

    /// Why vLLM would refuse to start, if it would: colocated, with `free` bytes free on the
    /// GPU when it starts (after the trainer has loaded its model) under its budget; anywhere,
    /// with no KV cache left, or one that cannot hold a `max_model_len` sequence. Written only
    /// when asked (the planner builds engines by the thousand).
    pub fn start_problem(&self, free: u64) -> Option<String> {
        let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
        if self.colocated() && free < self.budget {
            Some(format!(
                "vLLM cannot start: {:.1} GiB are free once the trainer's model is loaded, under \
                 its budget ({}% of the GPU, {:.1} GiB): lower vllm_util",
                gib(free),
                self.util,
                gib(self.budget)
            ))
        } else if self.kv_cache == 0 {
            Some(format!(
                "vLLM cannot start: its budget ({}% of the GPU, {:.1} GiB) is under its weights \
                 ({:.1} GiB) and profile run ({:.1} GiB), leaving no KV cache: raise vllm_util",
                self.util,
                gib(self.budget),
                gib(self.weights),
                gib(self.profile)
            ))
        } else if self.kv_tokens < self.max_len {
            Some(format!(
                "vLLM cannot start: one sequence of max_model_len {} needs {:.1} GiB of KV cache, \
                 its budget leaves {:.1} GiB: set vllm_len between seq ({}) and {}, or raise \
                 vllm_util",
                self.max_len,
                gib(self.max_len_kv),
                gib(self.kv_cache),
                self.seq,
                self.kv_tokens
            ))
        } else {
            None
        }
    }

    /// Passes of decoding the completions need (waves of `concurrent`).
    pub fn waves(&self) -> u64 {
        self.sequences.div_ceil(self.concurrent.max(1))
    }
}

/// One token's working set in vLLM's forward (no grad, 16-bit): the residual and normed
/// hidden states, and a gated MLP's gate/up output with its product (assumed: vLLM's fused
/// kernels keep the same widths).
fn forward_bytes_per_token(spec: &ModelSpec) -> u64 {
    let mlp = if spec.mlp == crate::model::MlpKind::Gated {
        3
    } else {
        2
    };
    2 * (2 * spec.hidden + mlp * spec.intermediate)
}

/// The engine in one line, for the breakdown.
pub fn describe(e: &Engine) -> String {
    let gib = |b: u64| format!("{:.2} GiB", b as f64 / (1u64 << 30) as f64);
    format!(
        "{}% of the GPU ({}): weights {}, profile run {}, KV cache {} ({} tokens, {} \
         completions at once){}",
        e.util,
        gib(e.budget),
        gib(e.weights),
        gib(e.profile),
        gib(e.kv_cache),
        e.kv_tokens,
        e.concurrent,
        if e.colocated() {
            "; weights and KV cache held while training, unless it sleeps"
        } else {
            ""
        }
    )
}

/// KV cache bytes of one sequence of `len` tokens in vLLM (16-bit, its `kv_cache_dtype` auto):
/// keys and values per attention layer, a sliding-window layer's within its window, a linear-
/// attention layer's none (its recurrent state is small); MLA's one latent and rotary key per
/// layer (`kv_lora_rank + qk_rope_head_dim`).
fn kv_bytes(spec: &ModelSpec, len: u64) -> u64 {
    let per_layer = match &spec.mla {
        Some(m) => (m.kv_lora_rank + m.qk_rope_head_dim) * 2,
        None => 2 * spec.kv_dim() * 2,
    };
    let (window, local) = spec.local_attention().unwrap_or((0, 0));
    let attention = match &spec.linear_attention {
        Some(la) => spec.layers - la.layers,
        None => spec.layers,
    };
    let local = local.min(attention);
    ((attention - local).saturating_mul(len) + local * len.min(window)).saturating_mul(per_layer)
}

/// The longest sequence whose KV cache fits in `bytes`.
fn longest_held(spec: &ModelSpec, bytes: u64) -> u64 {
    let (mut lo, mut hi) = (0u64, 1u64 << 32);
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if kv_bytes(spec, mid) <= bytes {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    lo
}
