//! The ranges Headroom accepts, with the reason for each, and the scale check that keeps every
//! byte count of an estimate inside `u64`.
//!
//! Every number a config, a link, a flag or a file carries is bounded: by what real training
//! reaches, with room to spare. The bounds make two promises. Work is bounded (an estimate walks
//! at most [`MAX_LAYERS`] layers, so a link cannot hang a page). And arithmetic cannot wrap: a
//! config's dimensions are each below 2^22 or so, so the parameter inventory's products stay
//! below 2^60, and [`check_scale`] refuses a scenario whose step would need more than
//! [`MAX_STEP_BYTES`] before any `u64` formula runs, which keeps every sum the estimate forms
//! at least 256 times below `u64::MAX`.

use crate::catalog::Gpu;
use crate::error::{ConfigError, ScenarioError};
use crate::model::{ModelSpec, inventory};
use crate::scenario::Scenario;

/// `vocab_size`: the largest released vocabularies are about 262,144 (Gemma 3).
pub const MAX_VOCAB: u64 = 1 << 22;
/// `hidden_size`: the widest released models are 16,384 (Llama 3.1 405B) to 18,432 (PaLM).
pub const MAX_HIDDEN: u64 = 1 << 17;
/// `num_hidden_layers`: released models have at most about 126 (Llama 3.1 405B).
pub const MAX_LAYERS: u64 = 1024;
/// `num_attention_heads` and `num_key_value_heads`: released models have at most 128.
pub const MAX_HEADS: u64 = 4096;
/// `head_dim`: released models use 64 to 256 (multi-head latent attention: up to 576).
pub const MAX_HEAD_DIM: u64 = 4096;
/// `intermediate_size` (and an expert's): the widest released MLPs are 73,728 (PaLM).
pub const MAX_INTERMEDIATE: u64 = 1 << 20;
/// Routed experts per MoE layer: released models have at most 384 (Kimi K2).
pub const MAX_EXPERTS: u64 = 4096;
/// `linear_conv_kernel_dim`: the gated DeltaNet's causal convolution spans 4 tokens in every
/// released model (Qwen3-Next).
pub const MAX_CONV_KERNEL: u64 = 256;
/// `max_position_embeddings`, a learned position table's rows and a sliding window: the
/// longest released context is 10M tokens (Llama 4 Scout).
pub const MAX_POSITIONS: u64 = 1 << 27;
/// A vision tower's patch side, channels, temporal patch and spatial merge: released towers use
/// patches of 14 or 16 pixels, 3 channels, 2 frames (Qwen-VL) and 2 x 2 merges.
pub const MAX_VISION_SMALL: u64 = 1 << 10;
/// A vision tower's image side and learned positions: SigLIP's 896 (4,096 positions), Pixtral's
/// 1,540, Qwen3-VL's 2,304 positions.
pub const MAX_VISION_IMAGE: u64 = 1 << 16;
/// Images a sample carries (and tokens an image adds): vision-language fine-tuning sets use one
/// to a few dozen.
pub const MAX_IMAGES: u32 = 1024;
/// Parameters of one model: the largest trained are around 2 trillion.
pub const MAX_PARAMETERS: u64 = 100_000_000_000_000;
/// A model given only by its size (`model=7b`): from 0.2B, the smallest size the nearest
/// preset's layout reaches with one layer or more (Qwen2.5-0.5B's embeddings alone are 0.14B),
/// to 2,000B, about the largest trained.
pub const MIN_SIZED_PARAMETERS: u64 = 200_000_000;
pub const MAX_SIZED_PARAMETERS: u64 = 2_000_000_000_000;
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

/// Checks a model's dimensions against the bounds above; each error names the config key.
pub fn check_model(s: &ModelSpec) -> Result<(), ConfigError> {
    let mut dims = vec![
        ("vocab_size", s.vocab, 1, MAX_VOCAB),
        ("hidden_size", s.hidden, 1, MAX_HIDDEN),
        ("num_hidden_layers", s.layers, 1, MAX_LAYERS),
        ("num_attention_heads", s.heads, 1, MAX_HEADS),
        ("num_key_value_heads", s.kv_heads, 1, MAX_HEADS),
        // Where a config gives no head_dim, it is hidden_size / num_attention_heads.
        (
            "head_dim (or hidden_size / num_attention_heads)",
            s.head_dim,
            1,
            MAX_HEAD_DIM,
        ),
        (
            // Llama 4's dense layers read intermediate_size_mlp (its intermediate_size is the
            // experts').
            if s.llama4.is_some() {
                "intermediate_size_mlp"
            } else {
                "intermediate_size"
            },
            s.intermediate,
            1,
            MAX_INTERMEDIATE,
        ),
        ("word_embed_proj_dim", s.embed_proj_dim, 0, MAX_HIDDEN),
        ("n_positions", s.position_embeddings, 0, MAX_POSITIONS),
        ("max_position_embeddings", s.max_positions, 0, MAX_POSITIONS),
        (
            "sliding_window",
            s.sliding_window.unwrap_or(0),
            0,
            MAX_POSITIONS,
        ),
    ];
    dims.extend(part_dims(s));
    if let Some(v) = &s.vision {
        dims.extend(vision_dims(v));
    }
    for (field, v, lo, hi) in dims {
        if v < lo || v > hi {
            return Err(ConfigError::BadField {
                field: field.into(),
                expected: format!("an integer from {lo} to {hi}"),
                found: v.to_string(),
            });
        }
    }
    let params = inventory(s).total();
    if params > MAX_PARAMETERS {
        return Err(ConfigError::Inconsistent {
            field: "hidden_size".into(),
            message: format!(
                "the config describes {params} parameters; Headroom estimates models of up to \
                 {MAX_PARAMETERS} (100 trillion)"
            ),
        });
    }
    Ok(())
}

/// One bounded dimension: the config key, its value, and the smallest and largest allowed.
type Dim = (&'static str, u64, u64, u64);

/// The dimensions of the layers' optional parts: experts, Llama 4's chunks and NoPE layers,
/// linear attention and multi-head latent attention.
fn part_dims(s: &ModelSpec) -> Vec<Dim> {
    let mut dims = Vec::new();
    if let Some(m) = &s.moe {
        dims.extend([
            ("num_experts", m.experts, 1, MAX_EXPERTS),
            (
                if s.llama4.is_some() {
                    "intermediate_size"
                } else {
                    "moe_intermediate_size"
                },
                m.expert_intermediate,
                1,
                MAX_INTERMEDIATE,
            ),
            (
                "shared_expert_intermediate_size",
                m.shared_intermediate,
                0,
                MAX_INTERMEDIATE,
            ),
            ("mlp_only_layers", m.sparse_layers, 0, s.layers),
        ]);
    }
    if let Some(l) = &s.llama4 {
        // Llama 4 Scout and Maverick attend in chunks of 8,192 tokens, one layer in four
        // without RoPE.
        dims.extend([
            ("no_rope_layers", l.nope_layers, 0, s.layers),
            (
                "attention_chunk_size",
                l.chunk.unwrap_or(1),
                1,
                MAX_POSITIONS,
            ),
        ]);
    }
    if let Some(la) = &s.linear_attention {
        // Qwen3-Next: 16 key heads and 32 value heads of 128, a kernel of 4, three layers in
        // four linear.
        dims.extend([
            ("layer_types", la.layers, 0, s.layers),
            ("linear_num_key_heads", la.key_heads, 1, MAX_HEADS),
            ("linear_num_value_heads", la.value_heads, 1, MAX_HEADS),
            ("linear_key_head_dim", la.key_head_dim, 1, MAX_HEAD_DIM),
            ("linear_value_head_dim", la.value_head_dim, 1, MAX_HEAD_DIM),
            ("linear_conv_kernel_dim", la.conv_kernel, 1, MAX_CONV_KERNEL),
        ]);
    }
    if let Some(m) = &s.mla {
        // Multi-head latent attention's ranks are below the hidden size (DeepSeek-V3: 1,536
        // and 512 of 7,168) and its head parts at most a head's width.
        dims.extend([
            ("q_lora_rank", m.q_lora_rank, 0, MAX_HIDDEN),
            ("kv_lora_rank", m.kv_lora_rank, 1, MAX_HIDDEN),
            ("qk_nope_head_dim", m.qk_nope_head_dim, 0, MAX_HEAD_DIM),
            ("qk_rope_head_dim", m.qk_rope_head_dim, 0, MAX_HEAD_DIM),
            ("v_head_dim", m.v_head_dim, 1, MAX_HEAD_DIM),
        ]);
    }
    dims
}

/// A vision tower's dimensions.
fn vision_dims(v: &crate::model::Vision) -> Vec<Dim> {
    vec![
        ("vision_config.hidden_size", v.hidden, 1, MAX_HIDDEN),
        ("vision_config.num_hidden_layers", v.layers, 1, MAX_LAYERS),
        ("vision_config.num_attention_heads", v.heads, 1, MAX_HEADS),
        (
            "vision_config.intermediate_size",
            v.intermediate,
            1,
            MAX_INTERMEDIATE,
        ),
        ("vision_config.patch_size", v.patch, 1, MAX_VISION_SMALL),
        (
            "vision_config.num_channels",
            v.channels,
            1,
            MAX_VISION_SMALL,
        ),
        (
            "vision_config.temporal_patch_size",
            v.temporal_patch,
            1,
            MAX_VISION_SMALL,
        ),
        (
            "vision_config.image_size",
            v.image_size,
            0,
            MAX_VISION_IMAGE,
        ),
        (
            "vision_config.num_position_embeddings",
            v.positions,
            0,
            MAX_VISION_IMAGE,
        ),
        ("spatial_merge_size", v.merge, 1, MAX_VISION_SMALL),
        (
            "mm_tokens_per_image",
            v.tokens_per_image,
            0,
            MAX_VISION_IMAGE,
        ),
        ("vision_config.out_hidden_size", v.out_hidden, 1, MAX_HIDDEN),
        (
            "vision_config.deepstack_visual_indexes",
            v.deepstack,
            0,
            MAX_LAYERS,
        ),
        ("vision_feature_layer", v.feature_layers, 1, MAX_LAYERS),
    ]
}

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
        per_layer * layers + logits + vision + 32.0 * (self.params + adapters)
    }

    /// Refuses a scenario whose step would need more than [`MAX_STEP_BYTES`] on one GPU,
    /// naming the field that makes it so (the sequence or the batch).
    pub fn check(&self, spec: &ModelSpec, gpu: &Gpu, scen: &Scenario) -> Result<(), ScenarioError> {
        if self.step_bytes_bound(spec, gpu, scen) <= MAX_STEP_BYTES {
            return Ok(());
        }
        let field = if scen.seq >= scen.micro_batch {
            "seq"
        } else {
            "batch"
        };
        Err(ScenarioError::invalid(
            field,
            format!(
                "batch {} x seq {} is beyond what Headroom computes for this model: the step \
                 would need more than 1 EiB per GPU; lower the sequence or the batch",
                scen.micro_batch, scen.seq
            ),
        ))
    }
}

/// [`ModelScale::check`] for one scenario.
pub fn check_scale(spec: &ModelSpec, gpu: &Gpu, scen: &Scenario) -> Result<(), ScenarioError> {
    ModelScale::of(spec).check(spec, gpu, scen)
}
