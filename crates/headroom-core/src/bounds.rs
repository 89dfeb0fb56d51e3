//! The ranges Headroom accepts, with the reason for each (a model's own in `model/limits.rs`,
//! re-exported here), and the scale check that keeps every byte count of an estimate inside
//! `u64`.
//!
//! Every number a config, a link, a flag or a file carries is bounded: by what real training
//! reaches, with room to spare. The bounds make two promises. Work is bounded (an estimate walks
//! at most [`MAX_LAYERS`] layers, so a link cannot hang a page). And arithmetic cannot wrap: a
//! config's dimensions are each below 2^22 or so, so the parameter inventory's products stay
//! below 2^60, and [`check_scale`] refuses a scenario whose step would need more than
//! [`MAX_STEP_BYTES`] before any `u64` formula runs, which keeps every sum the estimate forms
//! at least 256 times below `u64::MAX`.
//!
//! `fit` and the planner treat a step that `check_scale` refuses (an `f64` upper bound past 1 EiB
//! per GPU) as not fitting.

use crate::catalog::Gpu;
use crate::error::ScenarioError;
use crate::model::{ModelSpec, inventory};

pub use crate::model::limits::*;
pub use crate::scenario::MAX_IMAGES;
use crate::scenario::Scenario;

/// The largest step Headroom computes, per GPU: 2^60 B = 1 EiB (by [`step_bytes_bound`], which
/// is several times the estimate). No GPU holds more than 2^38 B, so a step past this cannot fit
/// anywhere; refusing it keeps every `u64` sum of the estimate 16 times below `u64::MAX`.
pub const MAX_STEP_BYTES: f64 = 1_152_921_504_606_846_976.0;

/// The accepted links with the most work found by timing the extremes of every bound above
/// (2026-11-24, natively, release build with overflow checks, on a shared 2-core machine; the
/// default scenario takes 1.1 ms to analyze and 4.7 ms to plan):
/// - the most layers at the widest dense shape with eager attention over 65,536 tokens and the
///   logits kept: the heaviest analysis (estimate, fit, strategies), 8.3 ms;
/// - the same model over 1,024 pipeline stages of 65,536 GPUs with FSDP, selective
///   checkpointing and a million accumulation steps: the heaviest plan, 260 ms;
/// - 4,096 experts all routed, at 65,536 sequences of one token.
///
/// The benchmarks (`benches/estimate.rs`, `benches/plan.rs`) and the site's budgets (analysis
/// time in the browser) run them, so the bound on work is measured where it is promised.
pub const HEAVIEST_LINKS: &[&str] = &[
    "cfg=model_type:llama~num_hidden_layers:1024~hidden_size:16384~num_attention_heads:128~num_key_value_heads:8~intermediate_size:53248~vocab_size:4194304&attention=eager&seq=65536&keep_logits=1",
    "cfg=model_type:llama~num_hidden_layers:1024~hidden_size:16384~num_attention_heads:128~num_key_value_heads:8~intermediate_size:53248~vocab_size:4194304&gpus=65536&tp=8&pp=1024&dp=fsdp&accum=1000000&ckpt=selective&seq=131072",
    "cfg=model_type:qwen2_moe~num_hidden_layers:512~hidden_size:128~num_attention_heads:2~num_key_value_heads:1~intermediate_size:256~moe_intermediate_size:64~num_experts:4096~num_experts_per_tok:4096~vocab_size:4194304~shared_expert_intermediate_size:64&batch=65536&seq=1",
];

/// The model's share of the step bound: its parameters and the widths LoRA could adapt. A
/// search over batch and sequence (`fit`, the planner) computes it once for the model and
/// bounds each probe with [`ModelScale::check`].
#[derive(Debug, Clone, Copy)]
pub struct ModelScale {
    /// Parameters of the model.
    params: f64,
    /// Sum of d_in + d_out over every Linear (each copy, each layer): a rank-r adapter on all
    /// of them has r times this many parameters.
    linear_widths: f64,
}

impl ModelScale {
    pub fn of(spec: &ModelSpec) -> Self {
        let inv = inventory(spec);
        ModelScale {
            params: inv.total() as f64,
            linear_widths: inv
                .linears()
                .map(|t| (t.d_in + t.d_out) as f64 * (t.copies * inv.multiplicity(t.scope)) as f64)
                .sum(),
        }
    }

    /// An upper bound of one GPU's step bytes, in `f64` (which cannot overflow here): every
    /// per-token tensor at the model's widest width many times over per layer, eager
    /// attention's scores (or SDPA's math kernel's), the logits and the loss, and 32 bytes per parameter (LoRA's adapters
    /// on every Linear included). It is far above the estimate, on purpose: it only has to
    /// bound it.
    pub fn step_bytes_bound(&self, spec: &ModelSpec, gpu: &Gpu, scen: &Scenario) -> f64 {
        let b = f64::from(scen.sequences());
        let s = f64::from(scen.seq);
        let tokens = b * s;
        let moe_width = spec.moe.as_ref().map_or(0.0, |m| {
            if spec.llama4.is_some() {
                // Llama 4 runs every token through every expert.
                (m.experts * (m.expert_intermediate + spec.hidden + 1)) as f64
            } else {
                (m.top_k * m.expert_intermediate + m.experts) as f64
            }
        });
        // The gated DeltaNet per token (padded to chunks of 64): chunk x chunk rows, the heads'
        // q/k/v and a share of each chunk's recurrent state, and the conv1d's channels.
        let linear_width = spec.linear_attention.as_ref().map_or(0.0, |la| {
            let (dk, dv) = (la.key_head_dim as f64, la.value_head_dim as f64);
            let per_head = 64.0 + dk + dv + dk * dv / 64.0 + 1.0;
            let conv = (2 * la.key_dim() + la.value_dim()) as f64;
            (la.value_heads as f64 * per_head + conv) * (s + 64.0) / s.max(1.0)
        });
        let width = [
            spec.hidden as f64,
            (spec.q_dim() + 2 * spec.kv_dim()) as f64,
            spec.intermediate as f64,
            moe_width,
            linear_width,
            f64::from(scen.lora.rank) * 4.0,
        ]
        .into_iter()
        .fold(0.0, f64::max);
        let scores = if crate::sdpa::materializes_scores(spec, gpu, scen) {
            b * spec.heads as f64 * s * s
        } else {
            0.0
        };
        // 64 tensors of 8 bytes per token and width, and 16 bytes per score, per layer. A
        // pipeline stage holds layers/pp layers for up to pp micro-batches in flight: at most
        // twice the model's layers.
        let per_layer = 64.0 * 8.0 * tokens * width + 16.0 * scores;
        let layers = 2.0 * spec.layers as f64;
        let logits = 8.0 * 8.0 * tokens * spec.vocab as f64;
        let adapters = self.linear_widths * f64::from(scen.lora.rank);
        // A trained vision tower: the same 64 tensors of 8 bytes per patch and width per
        // layer, over every image of the micro-batch.
        let vision = spec.vision.as_ref().map_or(0.0, |v| {
            let patches = b * f64::from(scen.images) * v.patches_per_image() as f64;
            64.0 * 8.0
                * patches
                * v.hidden.max(v.intermediate).max(v.out_hidden) as f64
                * (v.layers + 2) as f64
        });
        per_layer * layers
            + logits
            + vision
            + 32.0 * (self.params + adapters)
            + Self::generation_bound(spec, scen)
    }

    /// GRPO's and RLOO's generation with transformers' `generate`: the completions of every
    /// micro-batch of the step at once (batch x accum sequences), their KV cache, a layer's
    /// no-grad working set per token (the residual, its norm and a gated MLP's three
    /// intermediates) and the next-token logits, 8 bytes an element (0 for the others).
    fn generation_bound(spec: &ModelSpec, scen: &Scenario) -> f64 {
        if !scen.trainer.generates() {
            return 0.0;
        }
        let sequences = f64::from(scen.micro_batch) * f64::from(scen.grad_accum);
        let per_token = (2 * spec.kv_dim() + 2 * spec.hidden + 3 * spec.intermediate) as f64;
        8.0 * sequences * (f64::from(scen.seq) * per_token * spec.layers as f64 + spec.vocab as f64)
    }

    /// Refuses a scenario whose step would need more than [`MAX_STEP_BYTES`] on one GPU,
    /// naming the field that makes it so (the sequence or the batch).
    pub fn check(&self, spec: &ModelSpec, gpu: &Gpu, scen: &Scenario) -> Result<(), ScenarioError> {
        if self.step_bytes_bound(spec, gpu, scen) <= MAX_STEP_BYTES {
            return Ok(());
        }
        // GRPO generates batch x accum completions at once.
        let generation = Self::generation_bound(spec, scen) > MAX_STEP_BYTES / 2.0;
        let field = if generation {
            "accum"
        } else if scen.seq >= scen.micro_batch {
            "seq"
        } else {
            "batch"
        };
        Err(ScenarioError::invalid(
            field,
            format!(
                "batch {} x seq {}{} is beyond what Headroom computes for this model: the step \
                 would need more than 1 EiB per GPU; lower one of them",
                scen.micro_batch,
                scen.seq,
                if generation {
                    format!(" x accum {}", scen.grad_accum)
                } else {
                    String::new()
                }
            ),
        ))
    }
}

/// [`ModelScale::check`] for one scenario.
pub fn check_scale(spec: &ModelSpec, gpu: &Gpu, scen: &Scenario) -> Result<(), ScenarioError> {
    ModelScale::of(spec).check(spec, gpu, scen)
}
