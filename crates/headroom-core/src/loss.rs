//! Logits and the loss: transformers' fp32 upcast and cross-entropy, or a fused chunked loss.
//!
//! transformers' `ForCausalLMLoss` does `logits.float()`, then `cross_entropy`, which is
//! `log_softmax` (saves its fp32 output) plus `nll_loss` (saves the shifted labels).
//!
//! For DPO and GRPO, TRL's fused log-probability head; for ORPO and CPO, the full logits with TRL's
//! Triton kernel (`full_logits_head`).

use crate::dtype::DType;
use crate::model::ModelSpec;
use crate::scenario::{LossImpl, Method, Scenario, Trainer};

/// Memory of the logits and loss for one micro-batch on one GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LossMemory {
    /// Logits as lm_head returns them.
    pub logits: u64,
    /// Kept through backward: the log_softmax output and the shifted labels (or, fused, the
    /// precomputed input and weight gradients).
    pub retained: u64,
    /// Peak above everything else during the loss forward.
    pub forward_peak: u64,
    /// Peak above everything else during the loss backward (before lm_head's backward).
    pub backward_peak: u64,
    /// What the loss backward hands to lm_head's backward: the logits' gradient.
    pub grad_logits: u64,
    /// The largest single tensor the loss allocates: the fp32 logits (the upcast, or
    /// log_softmax's output), or one fused chunk. Usually the step's largest block.
    pub largest_block: u64,
    /// DPO: what the reference model's no-grad forward adds at its head (its last hidden
    /// states, their compact copy, one projection tile and its fp32 vectors); 0 otherwise.
    pub reference_head: u64,
}

/// The loss of one micro-batch of `scen`: its tokens' logits over the vocabulary split across
/// the tensor-parallel GPUs (vocab-parallel), in the compute dtype.
pub fn loss_memory(spec: &ModelSpec, scen: &Scenario) -> LossMemory {
    one_head(spec, scen).with_mtp_heads(spec.mtp_trained)
}

impl LossMemory {
    /// With `n` multi-token prediction heads beside the model's: each depth's loss runs one
    /// after another over the same tokens, so what each keeps for backward adds up while the
    /// last one's transients come on top (assumed order: Megatron-LM computes the depths' losses
    /// after the main one's and backward reaches them together).
    fn with_mtp_heads(self, n: u64) -> LossMemory {
        LossMemory {
            retained: self.retained * (1 + n),
            forward_peak: self.retained * n + self.forward_peak,
            backward_peak: self.retained * n + self.backward_peak,
            ..self
        }
    }
}

/// The loss of the model's own head.
fn one_head(spec: &ModelSpec, scen: &Scenario) -> LossMemory {
    let b = scen.sequences() as u64;
    // Context parallelism: this GPU's seq/cp tokens.
    let tokens = b * scen.seq_local() as u64;
    let compute = scen.precision.compute_dtype();
    let keep_logits = scen.keep_logits;
    let imp = scen.loss;
    let v = spec.vocab.div_ceil(scen.parallel.tensor as u64);
    let nv = tokens * v;
    let c = compute.bytes();
    // Labels: pad(labels, (0, 1)) is a transient b x (s + 1); the contiguous shift (b x s int64)
    // is saved by nll_loss.
    let shifted = tokens * 8;
    let padded = tokens * 8 + b * 8;
    if scen.trainer.full_logits() {
        return full_logits_head(scen, v);
    }
    if scen.trainer != Trainer::Sft {
        let scored = b * (scen.scored_tokens() / scen.context()) as u64;
        return trl_head(spec, scen, (tokens, scored), v);
    }
    match imp {
        // Compiled with the model (the Trainer passes labels, so the loss runs inside the
        // compiled forward), the cross-entropy is one fused kernel: no fp32 copy of the logits
        // in forward; it saves the logits as lm_head returns them and an fp32 logsumexp per
        // token (read with saved_tensors_hooks on CPU, `crate::compiled`). Its backward
        // writes the fp32 gradient of the upcast logits, then their gradient in the compute
        // dtype for lm_head (the H200's compiled Llama 3.2 1B step peaked in this backward,
        // 4% under this count; without the second copy the count would be 4.5% under).
        LossImpl::Hf if scen.runtime.compiled() => {
            let logits = nv * c;
            let lse = tokens * 4;
            LossMemory {
                logits,
                retained: logits + lse + shifted,
                forward_peak: logits + lse + shifted + padded,
                // In fp32 the upcast is a no-op and the one gradient is lm_head's.
                backward_peak: if c == 4 {
                    logits + nv * 4 + shifted
                } else {
                    logits + nv * 4 + logits + shifted
                },
                grad_logits: logits,
                largest_block: nv * 4,
                reference_head: 0,
            }
        }
        LossImpl::Hf => {
            let logits = nv * c;
            let upcast = if compute == DType::F32 { 0 } else { nv * 4 };
            let log_softmax = nv * 4;
            let kept = if keep_logits { logits } else { 0 };
            LossMemory {
                logits,
                // + nll_loss's fp32 total_weight and the fp32 loss, 4 B each.
                retained: log_softmax + shifted + kept + 8,
                // logits + fp32 copy + log_softmax output (+ label copies).
                forward_peak: logits + upcast + log_softmax + shifted + padded,
                // nll grad (fp32) + log_softmax grad (fp32) + the saved output, + kept logits.
                backward_peak: kept + log_softmax + 2 * nv * 4 + shifted,
                grad_logits: logits,
                largest_block: nv * 4,
                reference_head: 0,
            }
        }
        LossImpl::Fused => {
            // Liger FLCE: logits exist one chunk at a time; chunk = next_pow2(ceil(N / ceil(V / h))).
            let inc = spec.vocab.div_ceil(spec.hidden).max(1);
            let chunk = tokens.div_ceil(inc).next_power_of_two().min(tokens.max(1));
            let chunk_bytes = chunk * v * 4;
            // grad_input (N x h) and grad_weight (V x h) are computed in forward, held to backward.
            let held = tokens * spec.hidden * c + v * spec.hidden * c;
            LossMemory {
                logits: 0,
                retained: held,
                forward_peak: held + 2 * chunk_bytes,
                backward_peak: held,
                grad_logits: 0,
                largest_block: chunk_bytes,
                reference_head: 0,
            }
        }
    }
}

/// ORPO, CPO and SimPO as TRL 1.16's experimental ORPOTrainer and CPOTrainer run them on a GPU
/// (`concatenated_forward`): one forward of the `N = 2n` sequences returns their logits in the
/// compute dtype, every position (`L`). The chosen half's NLL (`cpo_alpha` 1.0, also SimPO's)
/// is `nn.CrossEntropyLoss` on `logits[:n, :-1].contiguous()` (`H`), a copy when `n > 1` that
/// the loss does not keep; `log_softmax` saves its output (in fp32 under CUDA autocast, which
/// casts the copy to fp32 first: `log_softmax` is on autocast's fp32 list). The
/// log-probabilities come from `selective_log_softmax`, which on CUDA runs TRL's Triton kernel
/// (`kernels/logprob_entropy.py`): it saves the logits themselves, its int64 targets and two fp32
/// values per position, and its backward allocates the sliced logits' gradient (`N x (s - 1) x
/// V`). Backward runs that branch first (its nodes are newer): the logits are released when it
/// is done and the slice's backward writes a full-size gradient (`L`); then the NLL's
/// log_softmax backward (its output, the incoming and the outgoing gradient), the chosen half's
/// two slices written back to full size (`n x s x V`, then `L` again: the peak in bf16 and fp32,
/// `2L + n·s·V`), and an in-place sum. Under autocast the log_softmax is fp32 and its backward
/// (`L` + three fp32 tensors of the chosen half) is the peak. Measured on CPU with the
/// kernel's allocations emulated (tests/reference/measure_orpo_cuda_path.py; the 54 runs of
/// tests/reference/cpu/orpo_cuda_path.json, ORPO, CPO and SimPO in bf16 and fp32, are within
/// 0.1% of these terms, which leave out a few hundred bytes of scalars and masks and count the
/// kernel's saved targets); the autocast terms are derived from PyTorch's autocast lists, not
/// measured. SimPO is counted with `cpo_alpha` 1.0, TRL's default, whose NLL branch runs; with
/// `cpo_alpha` 0 that branch (the copy, the log_softmax, the half's slices) does not.
fn full_logits_head(scen: &Scenario, v: u64) -> LossMemory {
    let c = scen.precision.compute_dtype().bytes();
    let (n, s) = (u64::from(scen.micro_batch), u64::from(scen.seq_local()));
    let big = 2 * n;
    let t = s.saturating_sub(1);
    let ce = if scen.precision.is_autocast() { 4 } else { c };
    let logits = big * s * v * c;
    // `.contiguous()` copies nothing for one pair (a [1, s-1, V] slice is contiguous).
    let copy = if n > 1 { n * t * v * c } else { 0 };
    let cast = if ce != c { n * t * v * 4 } else { 0 };
    let log_softmax = n * t * v * ce;
    let sliced_grad = big * t * v * c;
    // The kernel's saved int64 targets and fp32 log Z and expected logit per position; the
    // NLL's int64 targets; the labels' working copy (`input_ids.clone()`, [N, s] int64).
    let kernel = big * t * (8 + 2 * 4);
    let targets = n * t * 8;
    let labels = big * s * 8;
    let retained = logits + log_softmax + kernel + targets;
    // The NLL's moment (the copy, the cast and log_softmax's output), or the end of the loss
    // forward, whichever holds more (one pair makes no copy).
    let forward_peak = (logits + copy + cast + log_softmax + targets).max(retained) + labels;
    let backward_peak = [
        // The kernel's backward beside the saved logits.
        retained + sliced_grad,
        // log_softmax's backward beside the first full-size gradient.
        logits + 3 * log_softmax + targets,
        // The chosen half's two slices written back to full size.
        2 * logits + n * s * v * c,
    ]
    .into_iter()
    .max()
    .unwrap_or(0);
    LossMemory {
        logits,
        retained,
        forward_peak,
        backward_peak,
        grad_logits: logits,
        largest_block: logits.max(log_softmax),
        reference_head: 0,
    }
}

/// Tokens per projection tile of TRL's chunked log-probability function, and the vocabulary
/// columns per tile (`trl/kernels/chunked_logprob.py` TOKEN_CHUNK_SIZE, and
/// `_CHUNKED_LOGPROB_CHUNK_SIZE` in `trl/trainer/utils.py`, TRL 1.16).
const TRL_TILE_TOKENS: u64 = 4096;
const TRL_TILE_VOCAB: u64 = 32768;

/// The head of TRL 1.16's DPO and GRPO trainers (`add_fused_lm_head`,
/// `ChunkedLogProbFunction`): no logits. The forward copies the scored positions' hidden states
/// (`hidden_states[mask]`: GRPO's completions; DPO's every token, the prompt's share not being
/// known) and keeps them, the targets and an fp32 log-normalizer per token for backward,
/// projecting through lm_head one (4,096 x 32,768) tile at a time. The backward accumulates the
/// scored hidden states' gradient in fp32 and scatters it into the whole sequence's, and
/// lm_head's weight gradient in fp32 when it trains (full fine-tuning), then casts them to their
/// dtypes, with the tile still held.
fn trl_head(spec: &ModelSpec, scen: &Scenario, (tokens, scored): (u64, u64), v: u64) -> LossMemory {
    let c = scen.precision.compute_dtype().bytes();
    let h = spec.lm_head_width();
    let tile = scored.min(TRL_TILE_TOKENS) * TRL_TILE_VOCAB * c;
    let hidden = scored * h * c;
    let vectors = 5 * scored * 4;
    let retained = hidden + scored * 8 + scored * 4 + scored * 4;
    let weight_grad = if scen.method == Method::Full {
        v * h * (4 + c)
    } else {
        0
    };
    LossMemory {
        logits: 0,
        retained,
        forward_peak: retained + tile + vectors,
        backward_peak: retained + tile + scored * h * 4 + tokens * h * c + weight_grad,
        grad_logits: 0,
        largest_block: tile.max(if weight_grad > 0 { v * h * 4 } else { 0 }),
        // The reference backbone's last hidden states, their compact copy, a tile and the
        // fp32 vectors, while the policy's saved tensors are all alive.
        reference_head: if scen.reference_forward() {
            2 * hidden + tile + vectors
        } else {
            0
        },
    }
}
