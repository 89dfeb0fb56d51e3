//! The ranges a model's configuration must fall in, with the reason for each (the scenario's
//! and the step's are in `crate::bounds`, which re-exports these): real models' sizes with room
//! to spare, so an estimate's work is bounded and its products cannot wrap.

use crate::error::ConfigError;
use crate::model::{Family, ModelSpec, inventory};

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
/// Parameters of one model: the largest trained are around 2 trillion.
pub const MAX_PARAMETERS: u64 = 100_000_000_000_000;
/// A model given only by its size (`model=7b`): from 0.2B, the smallest size the nearest
/// preset's layout reaches with one layer or more (Qwen2.5-0.5B's embeddings alone are 0.14B),
/// to 2,000B, about the largest trained.
pub const MIN_SIZED_PARAMETERS: u64 = 200_000_000;
pub const MAX_SIZED_PARAMETERS: u64 = 2_000_000_000_000;
/// Checks a model's dimensions against the bounds above (and its parameters against [`MAX_PARAMETERS`]); each error names the config key.
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
        (
            // OPT's learned table is max_position_embeddings + 2 rows (it has no n_positions).
            if s.family == Family::Opt {
                "max_position_embeddings"
            } else {
                "n_positions"
            },
            s.position_embeddings,
            0,
            MAX_POSITIONS,
        ),
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
