//! The normalized description of a decoder-only transformer that every formula reads.
//!
//! Optional parts, None where the model has none: `Mla` (DeepSeek-V2/V3's multi-head latent
//! attention dimensions), `Llama4` (NoPE layers, chunk size, q/k L2 norm) and `LinearAttention`
//! (Qwen3-Next's gated DeltaNet layers). `is_other_attention(i)` marks the layers with the model's
//! other kind of attention (Llama 4's NoPE layers, Qwen3-Next's full-attention layers), spread
//! evenly by their number.
//!
//! Multi-token prediction: `mtp_modules` is the config's `num_nextn_predict_layers` (DeepSeek-V3,
//! GLM-4.5). `estimate::resolve` applies the scenario's `mtp` with `with_mtp`, which adds the
//! modules' decoder layers to `layers` (as MoE layers) and sets `mtp_trained`. That is read by
//! `params.rs` (each module's eh_proj and norms), `activations::outside_layers` (their norms, the
//! concatenation and lm_head's input), `loss.rs` (one loss per head, kept together) and the time
//! model (the lm_head and eh_proj again, and the loss traffic).

use serde::{Deserialize, Serialize};

pub use super::classes::Family;

/// The normalization layer a family uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NormKind {
    RmsNorm,
    LayerNorm,
}

/// The MLP's shape: gated (SwiGLU/GeGLU, three matrices) or plain (two matrices).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MlpKind {
    Gated,
    Plain,
}

/// How a MoE layer's router scores the experts and picks them, which sets what it saves.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Router {
    /// A Linear in the compute dtype, a softmax over the experts, top-k (Mixtral, Qwen MoE,
    /// Granite MoE; Granite takes the softmax over the top-k logits).
    #[default]
    Softmax,
    /// DeepSeek-V2's (`DeepseekV2TopkRouter`): the Linear in fp32
    /// (`F.linear(x.float(), weight.float())`), a softmax, top-k. With `group_limited`
    /// (`topk_method: group_limited_greedy`) the scores outside the best groups are zeroed
    /// first by a `masked_fill`, which keeps its mask.
    DeepseekV2 { group_limited: bool },
    /// DeepSeek-V3's and GLM-4.5's (`DeepseekV3TopkRouter`): the Linear in fp32, a sigmoid, and
    /// a group-limited choice whose group top-k and mask lead to the experts' indices only, so
    /// autograd frees what they saved when the forward ends.
    DeepseekV3,
}

/// Mixture-of-experts layout of the MLP.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Moe {
    pub experts: u64,
    pub top_k: u64,
    /// Intermediate size of one routed expert.
    pub expert_intermediate: u64,
    /// Intermediate size of the always-on shared expert (Qwen2-MoE), 0 if none.
    pub shared_intermediate: u64,
    /// Whether the shared expert has a sigmoid gate (Qwen2-MoE: a Linear(h, 1)).
    pub shared_gate: bool,
    /// Number of layers whose MLP is sparse; the rest use a dense MLP of `intermediate`.
    pub sparse_layers: u64,
    /// Whether the router divides its top-k probabilities by their sum in place (Mixtral
    /// always; Qwen2/Qwen3-MoE with `norm_topk_prob`), which keeps both for backward.
    #[serde(default)]
    pub norm_topk: bool,
    #[serde(default)]
    pub router: Router,
}

/// Multi-head latent attention (DeepSeek-V2/V3's `DeepseekV3Attention`): q through a low-rank
/// pair with a norm between (or one q_proj), k and v from one compressed latent
/// (`kv_a_proj_with_mqa` -> `kv_a_layernorm` -> `kv_b_proj`) plus a RoPE part shared by all
/// heads. The spec's `head_dim` is the q/k head width (`qk_nope_head_dim + qk_rope_head_dim`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mla {
    /// `q_lora_rank`; 0 where it is null (one q_proj of hidden x heads x q/k head width).
    pub q_lora_rank: u64,
    pub kv_lora_rank: u64,
    /// The part of each q/k head without RoPE (`qk_nope_head_dim`).
    pub qk_nope_head_dim: u64,
    /// The rotated part of each q/k head, whose k is shared by all heads (`qk_rope_head_dim`).
    pub qk_rope_head_dim: u64,
    pub v_head_dim: u64,
}

/// The vision encoder a multimodal wrapper puts in front of its text model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VisionKind {
    /// Gemma 3 (`gemma3`): SigLIP's ViT (LayerNorms, q/k/v/out with biases, a GELU MLP,
    /// learned positions), average-pooled to `mm_tokens_per_image` and projected.
    Siglip,
    /// Qwen2.5-VL (`qwen2_5_vl`): RMSNorms, fused qkv, a gated MLP with biases, and a patch
    /// merger (2 x 2 patches -> one token) that projects to the text model's width.
    Qwen25,
    /// Qwen3-VL (`qwen3_vl`): LayerNorms, fused qkv, a plain MLP, learned positions, a patch
    /// merger and one more merger per DeepStack layer.
    Qwen3,
    /// Mistral 3 (`mistral3`, Mistral Small 3.1): Pixtral's ViT (RMSNorms, no biases, a gated
    /// MLP), then a projector with a learned 2 x 2 patch merger.
    Pixtral,
    /// Llama 4 (`llama4`): a ViT over 336 x 336 tiles (an unfolded patch Linear, a class token,
    /// learned positions, LayerNorms, q/k/v/o and a GELU MLP with biases, 2-D RoPE), a pixel
    /// shuffle (2 x 2 patches -> one) into a two-Linear adapter, and one projection to the text
    /// model's width.
    Llama4,
}

/// A multimodal wrapper's vision tower and projector (`vision_config` and the wrapper's own
/// keys); the text model is the rest of the [`ModelSpec`]. Images are square, of
/// [`Vision::image_px`] pixels a side.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Vision {
    pub kind: VisionKind,
    pub hidden: u64,
    pub layers: u64,
    pub heads: u64,
    pub intermediate: u64,
    pub patch: u64,
    pub channels: u64,
    /// Frames one patch spans (Qwen-VL's Conv3d: 2; an image is repeated to fill them), 1
    /// elsewhere.
    pub temporal_patch: u64,
    /// SigLIP's and Pixtral's `image_size` (SigLIP's learned positions are its patch grid;
    /// Pixtral's is the largest side its processor makes); 0 for Qwen-VL.
    pub image_size: u64,
    /// Qwen3-VL's learned positions (`num_position_embeddings`); 0 elsewhere.
    pub positions: u64,
    /// Patches merged into one token per side (`spatial_merge_size`; Gemma 3: 1, it pools).
    pub merge: u64,
    /// Gemma 3's `mm_tokens_per_image`; 0 for the others (their count follows the image).
    pub tokens_per_image: u64,
    /// The projector's output width (the text model's hidden size; Qwen-VL's
    /// `out_hidden_size`).
    pub out_hidden: u64,
    /// Qwen3-VL's DeepStack mergers (`deepstack_visual_indexes`), 0 elsewhere.
    pub deepstack: u64,
    /// SigLIP's attention-pooling head (`vision_use_head`; Gemma 3 turns it off).
    pub pooling_head: bool,
    /// Mistral 3's `vision_feature_layer` count (a list concatenates layers) and
    /// `multimodal_projector_bias`.
    pub feature_layers: u64,
    pub projector_bias: bool,
    /// Llama 4's adapter and projector widths (`projector_input_dim`, `projector_output_dim`,
    /// `vision_output_dim`); 0 elsewhere.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub projector_in: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub projector_out: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub vision_out: u64,
}

impl Vision {
    /// The side of the images an estimate assumes: Gemma 3's SigLIP takes 896 x 896 only
    /// (its processor resizes every image to `image_size`); Qwen-VL and Pixtral take any size,
    /// and the same 896 x 896 is assumed for them (a documented default, `VISION_IMAGE_PX`).
    pub fn image_px(&self) -> u64 {
        match self.kind {
            VisionKind::Siglip | VisionKind::Llama4 => self.image_size,
            _ => VISION_IMAGE_PX,
        }
    }

    /// Patches one image gives the vision tower (its sequence length): Llama 4's tile adds
    /// its class token.
    pub fn patches_per_image(&self) -> u64 {
        let side = self.image_px() / self.patch.max(1);
        side * side + u64::from(self.kind == VisionKind::Llama4)
    }

    /// Tokens one image adds to the text model's sequence: Gemma 3's `mm_tokens_per_image`;
    /// Qwen-VL's patches over merge^2 (Qwen2VLProcessor: `image_grid_thw.prod() //
    /// merge_size**2`); Pixtral's merged rows each followed by `[IMG_BREAK]`, the last by
    /// `[IMG_END]` (PixtralProcessor: rows x (columns + 1)).
    pub fn tokens_per_image(&self) -> u64 {
        let side = self.image_px() / (self.patch * self.merge).max(1);
        match self.kind {
            VisionKind::Siglip => self.tokens_per_image,
            VisionKind::Qwen25 | VisionKind::Qwen3 => side * side,
            VisionKind::Pixtral => side * (side + 1),
            // One tile (an image up to 336 x 336): `<|image_start|>`, `<|image|>`, its shuffled
            // patches as `<|patch|>` and `<|image_end|>` (Llama4Processor._prompt_split_image).
            VisionKind::Llama4 => side * side + 3,
        }
    }

    /// The name people know the tower by.
    pub fn name(&self) -> &'static str {
        match self.kind {
            VisionKind::Siglip => "SigLIP",
            VisionKind::Qwen25 => "Qwen2.5-VL ViT",
            VisionKind::Qwen3 => "Qwen3-VL ViT",
            VisionKind::Pixtral => "Pixtral",
            VisionKind::Llama4 => "Llama 4 ViT",
        }
    }

    /// The wrapper's `model_type`.
    pub fn wrapper(&self) -> &'static str {
        match self.kind {
            VisionKind::Siglip => "gemma3",
            VisionKind::Qwen25 => "qwen2_5_vl",
            VisionKind::Qwen3 => "qwen3_vl",
            VisionKind::Pixtral => "mistral3",
            VisionKind::Llama4 => "llama4",
        }
    }
}

/// The image side, in pixels, assumed for vision towers that take any size (Qwen-VL,
/// Pixtral): Gemma 3's fixed 896, so the models compare on the same images.
pub const VISION_IMAGE_PX: u64 = 896;

/// Llama 4's text layers (`Llama4TextConfig`): RoPE layers attend in chunks
/// (`attention_chunk_size`) and L2-normalize q and k (`use_qk_norm`, no weight); NoPE layers
/// (`no_rope_layers` zeros, one in four by default) attend to the whole sequence and scale q by
/// position (`attn_temperature_tuning`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Llama4 {
    /// Layers without RoPE.
    pub nope_layers: u64,
    /// `attention_chunk_size` of the RoPE layers; None where the config sets null.
    pub chunk: Option<u64>,
    /// `use_qk_norm`: the weightless L2 norm of q and k on the RoPE layers.
    pub qk_l2_norm: bool,
    /// `attn_temperature_tuning`: the NoPE layers' position-dependent scale of q.
    pub temperature_tuning: bool,
}

/// Gated DeltaNet linear attention (Qwen3-Next's `linear_attention` layers,
/// `Qwen3NextGatedDeltaNet`): in_proj_qkvz and in_proj_ba, a depthwise causal conv1d over q, k
/// and v, the gated delta rule, a gated RMSNorm and out_proj. The other layers are gated
/// softmax attention (q_proj twice as wide: the query and a sigmoid gate on the output).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinearAttention {
    /// Layers of linear attention (`layer_types` "linear_attention").
    pub layers: u64,
    pub key_heads: u64,
    pub value_heads: u64,
    pub key_head_dim: u64,
    pub value_head_dim: u64,
    /// `linear_conv_kernel_dim`.
    pub conv_kernel: u64,
}

impl LinearAttention {
    /// Width of all key heads (q's too).
    pub fn key_dim(&self) -> u64 {
        self.key_heads * self.key_head_dim
    }

    /// Width of all value heads.
    pub fn value_dim(&self) -> u64 {
        self.value_heads * self.value_head_dim
    }
}

/// Dropout probabilities the model applies in training (0 where a family has none).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct Dropout {
    /// On the attention probabilities.
    pub attention: f64,
    /// On the attention and MLP outputs before the residual add.
    pub residual: f64,
    /// On the embedding output.
    pub embedding: f64,
}

fn whole_head() -> f64 {
    1.0
}

fn is_whole_head(f: &f64) -> bool {
    *f == 1.0
}

/// A decoder-only transformer, normalized from its `config.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelSpec {
    pub model_type: String,
    pub family: Family,
    pub vocab: u64,
    pub hidden: u64,
    pub layers: u64,
    pub heads: u64,
    pub kv_heads: u64,
    pub head_dim: u64,
    /// Dense MLP intermediate size.
    pub intermediate: u64,
    pub mlp: MlpKind,
    /// Hugging Face activation name (`silu`, `gelu_new`, `gelu_pytorch_tanh`, `relu`, ...).
    pub activation: String,
    pub norm: NormKind,
    /// Norm layers inside one decoder layer (2 for most, 4 for Gemma 2/3).
    pub norms_per_layer: u64,
    /// Per-head RMSNorm on q and k (Qwen3, Gemma 3).
    pub qk_norm: bool,
    pub qkv_bias: bool,
    pub o_bias: bool,
    pub mlp_bias: bool,
    pub tie_embeddings: bool,
    /// Rows of a learned position embedding (GPT-2, OPT), 0 with rotary embeddings.
    pub position_embeddings: u64,
    /// OPT's `word_embed_proj_dim` when it differs from `hidden` (adds project_in/out).
    pub embed_proj_dim: u64,
    pub moe: Option<Moe>,
    /// Whether a norm follows the last layer (OPT-350m, with post-norm layers, has none).
    pub final_norm: bool,
    pub dropout: Dropout,
    pub max_positions: u64,
    /// The share of each head RoPE rotates: the config's `partial_rotary_factor` (1 where the
    /// config class has none; see `hf::rotary_fraction`). Multi-head latent attention's rotary
    /// width is its own (`Mla::qk_rope_head_dim`).
    #[serde(default = "whole_head", skip_serializing_if = "is_whole_head")]
    pub rotary_fraction: f64,
    /// Sliding-window attention size, if the model uses one.
    pub sliding_window: Option<u64>,
    /// How many layers slide where the config decides it (its `layer_types`, or the rule of
    /// Qwen2/Qwen3's `max_window_layers`, Qwen2-MoE's and SmolLM3's); None where the model
    /// type's default layout holds ([`ModelSpec::local_attention`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sliding_layers: Option<u64>,
    /// Multi-head latent attention's dimensions (DeepSeek-V2/V3), None for every other layout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mla: Option<Mla>,
    /// A multimodal wrapper's vision tower and projector (Gemma 3, Qwen2.5-VL, Qwen3-VL,
    /// Mistral 3); None for a text-only model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vision: Option<Vision>,
    /// Llama 4's chunked, NoPE and L2-normalized attention, None for every other layout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llama4: Option<Llama4>,
    /// Qwen3-Next's gated DeltaNet layers, None for every other layout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub linear_attention: Option<LinearAttention>,
    /// Why the layout is approximate, when it is: a `model_type` the core does not model
    /// (estimated as the closest known layout) or a model given only by its size. Shown as a
    /// warning; the estimate's parameter count is then not exact.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approximate: Option<String>,
    /// GPT-NeoX's `use_parallel_residual` (its default, and every Pythia's): attention and the
    /// MLP both read the layer's input, so the MLP's LayerNorm saves the tensor the attention
    /// LayerNorm saved (one storage).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub parallel_residual: bool,
    /// The multi-token prediction modules of the checkpoint (DeepSeek-V3's and GLM-4.5's
    /// `num_nextn_predict_layers`): each a decoder layer of the same layout plus two input
    /// norms, a `2h -> h` projection and a head norm, sharing the embedding and the lm_head.
    /// transformers builds none (it drops their weights); a scenario trains them with `mtp`.
    /// 0 elsewhere.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub mtp_modules: u64,
    /// How many of them the resolved scenario trains ([`ModelSpec::with_mtp`]): their decoder
    /// layers are then counted in `layers`. 0 in a spec read from a config.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub mtp_trained: u64,
}

impl ModelSpec {
    /// This spec with `n` of its multi-token prediction modules trained: their decoder layers
    /// run after the model's (MoE layers where the model has experts past its dense ones, as
    /// in DeepSeek-V3 and GLM-4.5), and `mtp_trained` adds each module's projection and norms
    /// to the parameters and its head's logits to the loss. An error where the config has
    /// fewer modules.
    pub fn with_mtp(mut self, n: u64) -> Result<Self, String> {
        if n > self.mtp_modules {
            return Err(format!(
                "{n} multi-token prediction modules asked for; this model's config has {} \
                 (num_nextn_predict_layers: DeepSeek-V3 and GLM-4.5 ship one)",
                self.mtp_modules
            ));
        }
        self.layers += n;
        if let Some(moe) = &mut self.moe {
            moe.sparse_layers += n;
        }
        self.mtp_trained = n;
        Ok(self)
    }

    /// The lm_head's input width: OPT's `word_embed_proj_dim`, the hidden size elsewhere.
    pub fn lm_head_width(&self) -> u64 {
        if self.family == Family::Opt {
            self.embed_proj_dim
        } else {
            self.hidden
        }
    }

    /// One gate_up_proj Linear whose output the MLP chunks into gate and up (Phi-3, GLM-4).
    pub fn fused_gate_up(&self) -> bool {
        matches!(self.family, Family::Phi3 | Family::Glm4)
    }

    /// Width of the RoPE tables: GLM-4 (and its MoE) rotates half of each head (the configs'
    /// `partial_rotary_factor`, 0.5 in every released GLM-4); gpt-oss rotates all of it from
    /// tables of half the width (its `_apply_rotary_emb` multiplies each half by the same
    /// cos and sin); multi-head latent attention rotates `qk_rope_head_dim` of each head; the
    /// others all of it. Below `head_dim`, q comes out of a `torch.cat` (heads-first layout).
    pub fn rotary_dim(&self) -> u64 {
        match &self.mla {
            Some(m) => m.qk_rope_head_dim,
            // transformers: `int(head_dim * partial_rotary_factor)`.
            None => (self.head_dim as f64 * self.rotary_fraction) as u64,
        }
    }

    /// Layers with the model's other kind of attention: Llama 4's NoPE layers (the others
    /// have RoPE, chunks and the q/k L2 norm), Qwen3-Next's full-attention layers (the others
    /// are gated DeltaNet's), the full-attention layers where sliding-window layers alternate
    /// with full ones (Gemma 2/3, OLMo 3, Cohere 2, gpt-oss: SDPA gets no window mask there);
    /// 0 for every other layout, whose layers all attend alike.
    pub fn other_attention_layers(&self) -> u64 {
        match (&self.llama4, &self.linear_attention) {
            (Some(l4), _) => l4.nope_layers,
            (_, Some(la)) => self.layers - la.layers,
            _ => self
                .local_attention()
                .map_or(0, |(_, local)| self.layers - local),
        }
    }

    /// The layers that attend within a window, as (window, how many): sliding-window layers
    /// (`sliding_window`) or Llama 4's chunked RoPE layers (`attention_chunk_size`); None when
    /// every layer attends to the whole sequence. How many follows each config class's default
    /// `layer_types`: one layer in two slides for Gemma 2 and gpt-oss, five in six for Gemma 3,
    /// three in four for OLMo 3 and Cohere 2, every layer elsewhere (Mistral, Phi-3,
    /// Starcoder2, Qwen3-MoE), unless the config decides (`sliding_layers`: an explicit
    /// `layer_types`, Qwen2/Qwen3's layers from `max_window_layers` on, Qwen2-MoE's even layers
    /// below it, SmolLM3's NoPE layers). The local layers are the ones that are not
    /// [`ModelSpec::is_other_attention`].
    pub fn local_attention(&self) -> Option<(u64, u64)> {
        if let Some(l4) = &self.llama4 {
            return l4.chunk.map(|c| (c, self.layers - l4.nope_layers));
        }
        if self.linear_attention.is_some() {
            return None;
        }
        let w = self.sliding_window?;
        let l = self.layers;
        let local = match self.sliding_layers {
            Some(n) => n.min(l),
            None => self.class().traits.local_share.of(l),
        };
        (local > 0).then_some((w, local))
    }

    /// Whether layer `i` has the other kind of attention: the other layers are spread evenly
    /// (the last of every `layers / n`), which is where both models' defaults put them (Llama
    /// 4's NoPE layers every fourth layer, Qwen3-Next's full attention every fourth, the full
    /// layers of the sliding-window models as their `layer_types` place them); a config
    /// that lists them elsewhere keeps their number, not their places.
    pub fn is_other_attention(&self, i: u64) -> bool {
        let n = self.other_attention_layers();
        n > 0 && (i + 1) * n / self.layers > i * n / self.layers
    }

    /// gpt-oss's layout: a learned sink logit per head in every attention (`self_attn.sinks`,
    /// joined to the scores before the softmax), a router with a bias, experts with biases and
    /// a clamped SwiGLU.
    pub fn is_gpt_oss(&self) -> bool {
        self.class().traits.gpt_oss
    }

    /// The gated DeltaNet's input projections, all reading the layer's normalized input:
    /// Qwen3-Next's two (in_proj_qkvz, in_proj_ba), Qwen3.5's four (in_proj_qkv, in_proj_z,
    /// in_proj_b, in_proj_a).
    pub fn deltanet_projections(&self) -> u64 {
        if self.class().traits.deltanet_split {
            4
        } else {
            2
        }
    }

    /// Whether peft's LoRA adapts this MoE model's fused experts and router by converting its
    /// config (`classes::Traits::peft_converts_moe`).
    pub fn peft_converts_moe(&self) -> bool {
        self.moe.is_some() && self.class().traits.peft_converts_moe
    }

    /// Qwen3-Next's gated attention: q_proj gives the query and a sigmoid gate on the
    /// attention output (twice the q width).
    pub fn gated_attention(&self) -> bool {
        self.class().traits.qwen3_next
    }

    /// Whether its layers apply dropout to the attention and MLP outputs: the families that
    /// read `resid_pdrop`, `hidden_dropout` or `dropout`, and the classes that read
    /// `residual_dropout` (Seed-OSS).
    pub fn has_residual_dropout(&self) -> bool {
        self.family.has_residual_dropout() || self.class().traits.residual_dropout
    }

    /// Its config class (Llama's, read approximately, for a `model_type` the core does not
    /// model).
    pub fn class(&self) -> &'static super::classes::ConfigClass {
        super::classes::of(&self.model_type)
    }

    /// Width of all value heads together, the attention output projection's input: the q/k
    /// width but for multi-head latent attention, whose value heads are `v_head_dim` wide.
    pub fn v_dim(&self) -> u64 {
        match &self.mla {
            Some(m) => self.heads * m.v_head_dim,
            None => self.q_dim(),
        }
    }

    /// Masks transformers builds for eager attention: one per kind of layer, so two where
    /// sliding-window layers mix with full ones (Gemma 2/3, OLMo 3, Cohere 2, gpt-oss, a Qwen
    /// config with `max_window_layers`) or chunked layers with full ones (Llama 4's RoPE and
    /// NoPE layers).
    pub fn attention_masks(&self) -> u64 {
        if let Some(l4) = &self.llama4 {
            let mixed = l4.chunk.is_some() && l4.nope_layers > 0 && l4.nope_layers < self.layers;
            return if mixed { 2 } else { 1 };
        }
        match self.local_attention() {
            Some((_, local)) if local < self.layers => 2,
            _ => 1,
        }
    }

    /// Width of all query heads together.
    pub fn q_dim(&self) -> u64 {
        self.heads * self.head_dim
    }

    /// Width of all key (or value) heads together.
    pub fn kv_dim(&self) -> u64 {
        self.kv_heads * self.head_dim
    }

    /// Layers whose MLP is dense (all of them for non-MoE models).
    pub fn dense_layers(&self) -> u64 {
        self.layers - self.moe.as_ref().map_or(0, |m| m.sparse_layers)
    }

    /// Llama-like layers (Llama, Gemma, Phi-3, OLMo 2 families): RMSNorm, RoPE, a gated MLP.
    pub fn is_llama_like(&self) -> bool {
        matches!(
            self.family,
            Family::Llama
                | Family::Gemma
                | Family::Phi3
                | Family::Olmo2
                | Family::Glm4
                | Family::Cohere2
        )
    }

    /// Eager attention's softmax runs in fp32 (`softmax(..., dtype=torch.float32)` in the
    /// Llama-like modeling code); GPT-2, GPT-NeoX and OPT run it in the scores' dtype.
    pub fn softmax_in_fp32(&self) -> bool {
        self.is_rotary()
    }

    /// RoPE on separate q/k/v with transformers' Llama-style attention (the Llama-like
    /// families and StarCoder2).
    pub fn is_rotary(&self) -> bool {
        self.is_llama_like() || self.family == Family::Starcoder2
    }

    /// The first norm is a LayerNorm that saves the layer's input itself: a checkpointed
    /// layer's recompute then shares the kept input's storage instead of saving a new copy.
    pub fn norm_saves_input(&self) -> bool {
        matches!(
            self.family,
            Family::Gpt2 | Family::GptNeox | Family::Opt | Family::Starcoder2
        )
    }

    /// The model returns a KV cache in training whose tensors are not all saved by attention
    /// (Llama-like `DynamicLayer.update` keeps k and v as they enter attention).
    pub fn returns_kv_cache(&self) -> bool {
        self.is_rotary()
    }

    /// Norms after attention on the MLP side of a layer (Llama-like: all but the input norm;
    /// the LayerNorm families: one).
    pub fn mlp_side_norms(&self) -> u64 {
        // OLMo 2 normalizes after attention and after the MLP: both before the attention core
        // in backward.
        if self.family == Family::Olmo2 {
            self.norms_per_layer
        } else if self.is_llama_like() {
            self.norms_per_layer - 1
        } else {
            1
        }
    }

    /// A short human description, e.g. "llama, 32 layers, hidden 4096, 32/8 heads".
    pub fn summary(&self) -> String {
        let moe = match &self.moe {
            Some(m) => format!(", {} experts top-{}", m.experts, m.top_k),
            None => String::new(),
        };
        let vision = match &self.vision {
            Some(v) => format!(
                " + {} vision tower ({} layers, hidden {})",
                v.name(),
                v.layers,
                v.hidden
            ),
            None => String::new(),
        };
        format!(
            "{}, {} layers, hidden {}, {}/{} heads, vocab {}{}{}",
            self.display_type(),
            self.layers,
            self.hidden,
            self.heads,
            self.kv_heads,
            self.vocab,
            moe,
            vision
        )
    }

    /// The `model_type` a person's config names: the wrapper's for a multimodal model (its
    /// text model's type is `model_type`), else `model_type`.
    pub fn display_type(&self) -> &str {
        let wrapped = super::classes::WRAPPED_TEXT
            .iter()
            .find(|(_, text)| *text == self.model_type);
        match (&self.vision, wrapped) {
            (Some(_), Some((wrapper, _))) => wrapper,
            (Some(v), None) => v.wrapper(),
            (None, _) => &self.model_type,
        }
    }
}

/// Serde's test for numeric fields a link or file leaves out at 0 (here and in `ModelSpec`).
pub(crate) fn is_zero<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}
