//! One declaration per Hugging Face config class: its `model_type`, how its config is read, its
//! defaults and the traits that set its layout.
//!
//! `hf/` reads a config with its class, the link writer (`codec::text_config`) writes the keys
//! its class reads, and the inventories (`activations/`,
//! `params.rs`, `fp8.rs`) branch on its traits: after parsing, no code tests a `model_type`
//! string. A family that differs from a declared one only in known traits is one new row here.
//! Defaults and traits are those of transformers 5.23's configuration and modeling files
//! (`configuration_<type>.py`, `modeling_<type>.py`); each row's comment names what is not
//! obvious.
//!
//! The traits a row declares: biases, the window and which layers slide, the rotary share, norms
//! and q/k norms, experts and their router, multi-head latent attention, multi-token prediction,
//! gpt-oss's and Qwen3-Next's layouts, Llama 4's text model and GPT-2's `Conv1D` projections.
//! Besides `hf/` and the link writer, the exports and the inventories read them through
//! `ModelSpec::class()`; the decoder-layer class names the exports write are a table in
//! `export/names.rs` (kept out of the site's first download, with a test that every class has one).
//!
//! `examples/config_sweep.rs` checks a refactor of the parser and the link writer byte for byte
//! over 3,454 configs. Seed-OSS (`seed_oss`), Ernie 4.5 (`ernie4_5`) and OLMoE (`olmoe`) were each
//! added as one row here, a trait and their tests.

use serde::{Deserialize, Serialize};

/// A config class.
#[derive(Debug, Clone, Copy)]
pub struct ConfigClass {
    /// Its `model_type`.
    pub model_type: &'static str,
    /// Which reader in `hf/` builds its spec.
    pub reader: Reader,
    /// The class defaults a Llama-like or Gemma reader takes for absent keys: vocab, hidden,
    /// intermediate, layers, heads, kv heads (0: as many as heads), max positions, tied
    /// embeddings (0 or 1). A table, not code per type: the site's bundle is small.
    pub defaults: [u32; 8],
    /// The traits its reader and the inventories read.
    pub traits: Traits,
}

/// The reader of a config class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reader {
    /// RMSNorm, separate q/k/v with RoPE, a gated MLP; the traits say the rest.
    LlamaLike,
    /// Gemma 1/2/3's text models.
    Gemma,
    Phi3,
    Gpt2,
    GptNeox,
    Opt,
    Starcoder2,
    /// A multimodal wrapper: a text model from `text_config` and a vision tower.
    Multimodal,
    /// Llama 4's wrapper (`Llama4Config`): a `llama4_text` model and its vision tower.
    Llama4,
}

/// How the attention Linears' biases are configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bias {
    /// Hard-coded on q, k and v (no key turns it off or on), never on o: Qwen2's `bias=True`,
    /// Mistral's and Mixtral's `bias=False`.
    Fixed(bool),
    /// Read from `key` (absent: `default`) for q, k and v, and for o when `o`.
    Key {
        key: &'static str,
        default: bool,
        o: bool,
    },
    /// `attention_bias` for q, k and v and `attention_out_bias` for o, with these defaults
    /// (Seed-OSS).
    Separate { qkv: bool, o: bool },
    /// `use_bias` (false by default) for every Linear of the layer, the MLP's too (Ernie 4.5).
    UseBias,
}

/// Where RoPE's cos and sin are saved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayerRope {
    /// The model's tables, once for all layers (`activations::outside`).
    Shared,
    /// Each layer interleaves them (`repeat_interleave`) and its multiplies save the copies, in
    /// the hidden states' dtype (GLM-4).
    InterleavedStream,
    /// As `InterleavedStream`, in fp32 whatever the model's dtype: the rotation runs in fp32
    /// and casts q and k back (Ernie 4.5).
    InterleavedFp32,
}

/// Which config keys set the share of each head that RoPE rotates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RotaryKey {
    /// None: the class fixes it ([`Traits::rotary_percent`], gpt-oss's).
    Fixed,
    /// `partial_rotary_factor`.
    Factor,
    /// `partial_rotary_factor`, else `rotary_dim / head_dim` (MiniMax-M2's released configs
    /// give `rotary_dim`, which its config class converts).
    FactorOrDim,
}

/// Whether a class has a sliding window, and how its config says so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    /// `sliding_window` when the config gives one.
    Key,
    /// Never read (the class has none, or its local attention is something else).
    Off,
    /// `sliding_window` only with `use_sliding_window: true` (Qwen2/3, SmolLM3).
    OptIn,
    /// `sliding_window`, else this default.
    Default(u16),
    /// `sliding_window`, else this default; an explicit null turns it off (Mistral, gpt-oss).
    NullDisables(u16),
}

/// Which layers slide when the config lists none (`layer_types`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LocalRule {
    /// The class's default layout ([`Traits::local_share`]).
    Layout,
    /// Qwen2's and Qwen3's: the layers from `max_window_layers` (28) on.
    FromMaxWindow,
    /// Qwen2-MoE's: the even layers below `max_window_layers`.
    EvenBelowMaxWindow,
    /// SmolLM3's: its NoPE layers.
    NopeLayers,
    /// EXAONE 4's `sliding_window_pattern`: an integer p (every layer i with (i + 1) % p != 0
    /// slides, as Exaone4Config's `__post_init__` lists them) or a string of L (local) and G
    /// (global) repeated over the layers, as its released configs give it ("LLLG").
    Pattern,
}

/// The share of layers that slide in a class's default `layer_types` (when it has a window).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LocalShare {
    All,
    /// One in two (Gemma 2, gpt-oss).
    OneInTwo,
    /// Five in six (Gemma 3).
    FiveInSix,
    /// Three in four (OLMo 3, Cohere 2).
    ThreeInFour,
}

impl LocalShare {
    /// How many of `layers` slide.
    pub fn of(self, layers: u64) -> u64 {
        match self {
            LocalShare::All => layers,
            LocalShare::OneInTwo => layers - layers / 2,
            LocalShare::FiveInSix => layers - layers / 6,
            LocalShare::ThreeInFour => layers - layers / 4,
        }
    }
}

/// Per-head q/k norms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QkNorm {
    No,
    Yes,
    /// When `use_qk_norm` is true (false by default: GLM-4.5).
    Key,
    /// Always, over the whole q and k projections (not each head), with the class's RMSNorm
    /// (OLMoE's and MiniMax-M2's cast, then the weight; OLMo 2's the weight in fp32).
    Whole,
    /// Always, per head, after RoPE (Hunyuan; `Yes` norms before it): under autocast they
    /// normalize RoPE's fp32 output (fp32 cos and sin), so they keep it and their output in
    /// fp32.
    AfterRope,
}

/// A class's mixture of experts, and the keys and defaults it reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MoeRule {
    None,
    /// Every layer's MLP is `num_local_experts` (`experts`; with `num_experts_key`, read from
    /// `num_experts` when absent, as GptOssConfig maps it) experts of `intermediate_size`,
    /// top `num_experts_per_tok` (`top_k`); `norm_topk`: whether the router divides by the
    /// sum whatever the config says (Mixtral's always, Granite's and gpt-oss's never), or None
    /// where `norm_topk_prob` says (false by default: OLMoE).
    Uniform {
        experts: u16,
        num_experts_key: bool,
        top_k: u16,
        norm_topk: Option<bool>,
    },
    /// Qwen's: `num_experts` of `moe_intermediate_size` (`expert`), top `num_experts_per_tok`,
    /// sparse where `decoder_sparse_step` and `mlp_only_layers` say; a gated shared expert of
    /// `shared_expert_intermediate_size` (`shared`, 0: none); `norm_topk_prob` read when
    /// `norm_topk_key`.
    Qwen {
        experts: u16,
        top_k: u16,
        expert: u16,
        shared: u16,
        norm_topk_key: bool,
    },
    /// DeepSeek-style routed experts (`hf/llama_like.rs`, `routed_moe`): the defaults of experts, expert
    /// intermediate, top-k, first dense layers and shared experts.
    Routed([u16; 5]),
    /// Llama 4's (`hf/llama_like.rs`, `llama4_moe`).
    Llama4,
}

/// How a routed MoE's router scores: the generic softmax, or DeepSeek's routers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouterKind {
    Softmax,
    DeepseekV2,
    DeepseekV3,
}

/// The dtype of the routing weight each routed row's multiply saves, under the generic router.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouterWeight {
    /// The router logits' dtype.
    Logits,
    /// fp32 (Mixtral's router scores in fp32).
    Fp32,
    /// The hidden states' dtype (Granite MoE's `type_as`).
    Stream,
}

/// What sets a class's layout beyond its dimensions.
#[derive(Debug, Clone, Copy)]
pub struct Traits {
    pub family: Family,
    /// Its declared `head_dim` default; 0: `hidden_size / num_attention_heads`.
    pub head_dim: u16,
    pub bias: Bias,
    /// Whether its MLP reads `mlp_bias` (the others hard-code `bias=False`).
    pub mlp_bias_key: bool,
    /// The class default of `attention_dropout` (and of `residual_dropout` where it is read),
    /// in percent (a byte per class, not eight: the table is in the site's first download).
    pub dropout_percent: u8,
    /// Whether its layers apply dropout to the attention and MLP outputs (`residual_dropout`).
    pub residual_dropout: bool,
    /// Where RoPE's cos and sin are saved.
    pub rope: LayerRope,
    /// The default `partial_rotary_factor`, in percent.
    pub rotary_percent: u8,
    /// Which keys set the rotary share.
    pub rotary_key: RotaryKey,
    pub norms_per_layer: u8,
    pub qk_norm: QkNorm,
    pub window: Window,
    pub local_rule: LocalRule,
    pub local_share: LocalShare,
    pub moe: MoeRule,
    pub router: RouterKind,
    pub router_weight: RouterWeight,
    /// Granite MoE's gating: a softmax over the top-k logits (saved in fp32).
    pub topk_softmax: bool,
    /// Multi-head latent attention (DeepSeek-V2/V3).
    pub mla: bool,
    /// Multi-token prediction modules (`num_nextn_predict_layers`).
    pub mtp: bool,
    /// gpt-oss's layout: attention sinks, a router with a bias, biased experts, a clamped
    /// SwiGLU.
    pub gpt_oss: bool,
    /// Qwen3-Next's gated attention and gated DeltaNet layers.
    pub qwen3_next: bool,
    /// peft 0.21 converts a LoRA config for this MoE class's transformers-5 layout
    /// (`peft/utils/transformers_weight_conversion.py`, for the classes transformers 5.23's
    /// `conversion_mapping._MODEL_TO_CONVERSION_PATTERN` lists, and Mixtral): the v4 names
    /// (`gate_proj`, `up_proj`, `down_proj`, `gate`; Mixtral's `w1`-`w3`) become the fused
    /// experts' parameters (gate and up at twice the rank) and the router's weight, each a
    /// `ParamWrapper`; Linears elsewhere that carry those names (shared experts, dense MLPs) lose
    /// their adapters. Other MoE classes keep their fused experts and router unadapted.
    pub peft_converts_moe: bool,
    /// Qwen3.5's gated DeltaNet: four input projections (in_proj_qkv, in_proj_z, in_proj_b,
    /// in_proj_a) where Qwen3-Next has two (in_proj_qkvz, in_proj_ba).
    pub deltanet_split: bool,
    /// Llama 4's text model (NoPE layers, chunked attention, `intermediate_size_mlp`).
    pub llama4: bool,
    /// RoPE's cos and sin in fp32, one pair per kind of layer (OLMo 3).
    pub rope_fp32_per_kind: bool,
    /// Its projections are GPT-2's `Conv1D`s, no `nn.Linear` (fp8 conversion leaves them).
    pub conv1d: bool,
    /// Its RMSNorms apply the weight in fp32 before the cast back,
    /// `(self.weight * hidden_states).to(input_dtype)` (OLMo 2 and 3, gpt-oss), where Llama's
    /// cast first.
    pub norm_weight_fp32: bool,
}

/// Llama's traits, which every class starts from.
const LLAMA: Traits = Traits {
    family: Family::Llama,
    head_dim: 0,
    bias: Bias::Key {
        key: "attention_bias",
        default: false,
        o: true,
    },
    mlp_bias_key: false,
    dropout_percent: 0,
    residual_dropout: false,
    rope: LayerRope::Shared,
    rotary_percent: 100,
    rotary_key: RotaryKey::Factor,
    norms_per_layer: 2,
    qk_norm: QkNorm::No,
    window: Window::Key,
    local_rule: LocalRule::Layout,
    local_share: LocalShare::All,
    moe: MoeRule::None,
    router: RouterKind::Softmax,
    router_weight: RouterWeight::Logits,
    topk_softmax: false,
    mla: false,
    mtp: false,
    gpt_oss: false,
    qwen3_next: false,
    deltanet_split: false,
    peft_converts_moe: false,
    llama4: false,
    rope_fp32_per_kind: false,
    conv1d: false,
    norm_weight_fp32: false,
};

const QWEN2: Traits = Traits {
    // Qwen2Attention hard-codes `bias=True` on q/k/v (modeling_qwen2.py).
    bias: Bias::Fixed(true),
    window: Window::OptIn,
    local_rule: LocalRule::FromMaxWindow,
    ..LLAMA
};

const QWEN3: Traits = Traits {
    // Qwen3Config declares `head_dim: int = 128`.
    head_dim: 128,
    qk_norm: QkNorm::Yes,
    window: Window::OptIn,
    local_rule: LocalRule::FromMaxWindow,
    ..LLAMA
};

const QWEN3_NEXT: Traits = Traits {
    // Qwen3NextConfig declares `head_dim: int = 256`; its gated attention has per-head q/k
    // norms (its linear layers none).
    head_dim: 256,
    rotary_percent: 25,
    qk_norm: QkNorm::Yes,
    window: Window::Off,
    qwen3_next: true,
    ..LLAMA
};

const DEEPSEEK: Traits = Traits {
    mla: true,
    peft_converts_moe: true,
    window: Window::Off,
    ..LLAMA
};

const GEMMA2: Traits = Traits {
    family: Family::Gemma,
    norms_per_layer: 4,
    window: Window::Default(4096),
    local_share: LocalShare::OneInTwo,
    ..LLAMA
};

const fn class(
    model_type: &'static str,
    reader: Reader,
    defaults: [u32; 8],
    traits: Traits,
) -> ConfigClass {
    ConfigClass {
        model_type,
        reader,
        defaults,
        traits,
    }
}

use Reader::*;

/// Every config class the core models.
pub const CLASSES: &[ConfigClass] = &[
    class(
        "llama",
        LlamaLike,
        [32000, 4096, 11008, 32, 32, 0, 2048, 0],
        Traits {
            mlp_bias_key: true,
            ..LLAMA
        },
    ),
    class(
        "mistral",
        LlamaLike,
        [32000, 4096, 14336, 32, 32, 8, 131072, 0],
        Traits {
            bias: Bias::Fixed(false),
            window: Window::NullDisables(4096),
            ..LLAMA
        },
    ),
    class(
        "mixtral",
        LlamaLike,
        [32000, 4096, 14336, 32, 32, 8, 131072, 0],
        Traits {
            peft_converts_moe: true,
            bias: Bias::Fixed(false),
            moe: MoeRule::Uniform {
                experts: 8,
                num_experts_key: false,
                top_k: 2,
                norm_topk: Some(true),
            },
            router_weight: RouterWeight::Fp32,
            ..LLAMA
        },
    ),
    class(
        "qwen2",
        LlamaLike,
        [151936, 4096, 22016, 32, 32, 32, 32768, 0],
        QWEN2,
    ),
    class(
        "qwen2_moe",
        LlamaLike,
        [151936, 2048, 5632, 24, 16, 16, 32768, 0],
        Traits {
            // Qwen2MoeAttention reads `bias=config.qkv_bias` (True by default).
            bias: Bias::Key {
                key: "qkv_bias",
                default: true,
                o: false,
            },
            local_rule: LocalRule::EvenBelowMaxWindow,
            moe: MoeRule::Qwen {
                experts: 60,
                top_k: 4,
                expert: 1408,
                shared: 5632,
                norm_topk_key: true,
            },
            ..QWEN2
        },
    ),
    class(
        "qwen3",
        LlamaLike,
        [151936, 4096, 22016, 32, 32, 32, 32768, 0],
        QWEN3,
    ),
    class(
        "qwen3_moe",
        LlamaLike,
        [151936, 2048, 6144, 24, 32, 4, 32768, 0],
        Traits {
            peft_converts_moe: true,
            // Qwen3MoeConfig declares no head_dim: Qwen3MoeAttention falls back to
            // `hidden_size // num_attention_heads`; its window has no `max_window_layers` rule.
            head_dim: 0,
            local_rule: LocalRule::Layout,
            moe: MoeRule::Qwen {
                experts: 128,
                top_k: 8,
                expert: 768,
                shared: 0,
                norm_topk_key: true,
            },
            ..QWEN3
        },
    ),
    class(
        "granite",
        LlamaLike,
        [32000, 4096, 11008, 32, 32, 0, 2048, 0],
        Traits {
            mlp_bias_key: true,
            ..LLAMA
        },
    ),
    class(
        "granitemoe",
        LlamaLike,
        [32000, 4096, 11008, 32, 32, 0, 2048, 0],
        Traits {
            moe: MoeRule::Uniform {
                experts: 8,
                num_experts_key: false,
                top_k: 2,
                norm_topk: Some(false),
            },
            router_weight: RouterWeight::Stream,
            topk_softmax: true,
            ..LLAMA
        },
    ),
    class(
        "smollm3",
        LlamaLike,
        [128256, 2048, 11008, 36, 16, 4, 32768, 1],
        Traits {
            mlp_bias_key: true,
            window: Window::OptIn,
            local_rule: LocalRule::NopeLayers,
            ..LLAMA
        },
    ),
    class(
        "olmo2",
        LlamaLike,
        [50304, 4096, 11008, 32, 32, 0, 2048, 0],
        Traits {
            family: Family::Olmo2,
            qk_norm: QkNorm::Whole,
            norm_weight_fp32: true,
            ..LLAMA
        },
    ),
    class(
        "olmo3",
        LlamaLike,
        [50304, 4096, 11008, 32, 32, 0, 2048, 0],
        Traits {
            family: Family::Olmo2,
            qk_norm: QkNorm::Whole,
            norm_weight_fp32: true,
            window: Window::Default(4096),
            local_share: LocalShare::ThreeInFour,
            rope_fp32_per_kind: true,
            ..LLAMA
        },
    ),
    class(
        "exaone4",
        LlamaLike,
        [102400, 4096, 16384, 32, 32, 0, 2048, 0],
        Traits {
            // OLMo 2's layer (no input norm; norms after attention and after the MLP) with
            // Llama's RMSNorm, per-head q/k norms before RoPE and hard-coded `bias=False`. Its
            // global layers skip RoPE when there is a window, which saves nothing either way.
            family: Family::Olmo2,
            bias: Bias::Fixed(false),
            qk_norm: QkNorm::Yes,
            window: Window::NullDisables(4096),
            local_rule: LocalRule::Pattern,
            local_share: LocalShare::ThreeInFour,
            ..LLAMA
        },
    ),
    class(
        "glm4",
        LlamaLike,
        [151552, 4096, 13696, 40, 32, 2, 131072, 0],
        Traits {
            family: Family::Glm4,
            head_dim: 128,
            bias: Bias::Key {
                key: "attention_bias",
                default: true,
                o: false,
            },
            rope: LayerRope::InterleavedStream,
            rotary_percent: 50,
            norms_per_layer: 4,
            ..LLAMA
        },
    ),
    class(
        "glm4_moe",
        LlamaLike,
        [151552, 4096, 10944, 46, 96, 8, 131072, 0],
        Traits {
            peft_converts_moe: true,
            bias: Bias::Key {
                key: "attention_bias",
                default: false,
                o: false,
            },
            rotary_percent: 50,
            qk_norm: QkNorm::Key,
            // 128 routed experts of 1408, top-8, one shared, the first layer dense.
            moe: MoeRule::Routed([128, 1408, 8, 1, 1]),
            router: RouterKind::DeepseekV3,
            mtp: true,
            ..LLAMA
        },
    ),
    class(
        "cohere2",
        LlamaLike,
        [256000, 8192, 22528, 40, 64, 0, 8192, 1],
        Traits {
            family: Family::Cohere2,
            norms_per_layer: 1,
            window: Window::Default(4096),
            local_share: LocalShare::ThreeInFour,
            ..LLAMA
        },
    ),
    class(
        "gemma",
        Gemma,
        [256000, 3072, 24576, 28, 16, 16, 8192, 1],
        Traits {
            window: Window::Off,
            norms_per_layer: 2,
            local_share: LocalShare::All,
            ..GEMMA2
        },
    ),
    class(
        "gemma2",
        Gemma,
        [256000, 2304, 9216, 26, 8, 4, 8192, 1],
        GEMMA2,
    ),
    class(
        "gemma3_text",
        Gemma,
        [262208, 2304, 9216, 26, 8, 4, 131072, 1],
        Traits {
            qk_norm: QkNorm::Yes,
            local_share: LocalShare::FiveInSix,
            ..GEMMA2
        },
    ),
    class(
        "phi3",
        Phi3,
        [0; 8],
        Traits {
            family: Family::Phi3,
            ..LLAMA
        },
    ),
    class(
        "gpt2",
        Gpt2,
        [0; 8],
        Traits {
            family: Family::Gpt2,
            conv1d: true,
            ..LLAMA
        },
    ),
    class(
        "gpt_neox",
        GptNeox,
        [0; 8],
        Traits {
            family: Family::GptNeox,
            ..LLAMA
        },
    ),
    class(
        "opt",
        Opt,
        [0; 8],
        Traits {
            family: Family::Opt,
            ..LLAMA
        },
    ),
    class(
        "starcoder2",
        Starcoder2,
        [0; 8],
        Traits {
            family: Family::Starcoder2,
            ..LLAMA
        },
    ),
    class(
        "gpt_oss",
        LlamaLike,
        [201088, 2880, 2880, 36, 64, 8, 131072, 0],
        Traits {
            head_dim: 64,
            // GptOssAttention: `bias=config.attention_bias` (True by default) on q, k, v and o.
            bias: Bias::Key {
                key: "attention_bias",
                default: true,
                o: true,
            },
            // It rotates every dimension, from cos and sin tables of half the head that its
            // `_apply_rotary_emb` applies to each half: counted as 0.5, not read.
            rotary_percent: 50,
            rotary_key: RotaryKey::Fixed,
            window: Window::NullDisables(128),
            local_share: LocalShare::OneInTwo,
            moe: MoeRule::Uniform {
                experts: 128,
                num_experts_key: true,
                top_k: 4,
                norm_topk: Some(false),
            },
            gpt_oss: true,
            norm_weight_fp32: true,
            ..LLAMA
        },
    ),
    class(
        "deepseek_v2",
        LlamaLike,
        [102400, 4096, 11008, 32, 32, 0, 2048, 0],
        Traits {
            // DeepseekV2MLP (dense layers and shared experts) reads `mlp_bias`.
            mlp_bias_key: true,
            // 64 experts of 1407, two shared, no dense layer (its top-k defaults to None,
            // which no forward runs with: DeepSeek-V2's 6 is taken).
            moe: MoeRule::Routed([64, 1407, 6, 0, 2]),
            router: RouterKind::DeepseekV2,
            ..DEEPSEEK
        },
    ),
    class(
        "deepseek_v3",
        LlamaLike,
        [129280, 7168, 18432, 61, 128, 0, 4096, 0],
        Traits {
            // 256 routed experts of 2048, top-8, one shared, three dense layers first.
            moe: MoeRule::Routed([256, 2048, 8, 3, 1]),
            router: RouterKind::DeepseekV3,
            mtp: true,
            ..DEEPSEEK
        },
    ),
    class("gemma3", Multimodal, [0; 8], LLAMA),
    class("qwen2_5_vl", Multimodal, [0; 8], LLAMA),
    class("qwen3_vl", Multimodal, [0; 8], LLAMA),
    class("mistral3", Multimodal, [0; 8], LLAMA),
    class(
        "llama4_text",
        LlamaLike,
        // Its intermediate_size is the experts' (and the shared expert's); its dense layers
        // read intermediate_size_mlp (16384).
        [202048, 5120, 8192, 48, 40, 8, 131072, 0],
        Traits {
            head_dim: 128,
            window: Window::Off,
            moe: MoeRule::Llama4,
            llama4: true,
            ..LLAMA
        },
    ),
    class("llama4", Llama4, [0; 8], LLAMA),
    class(
        "qwen3_next",
        LlamaLike,
        [151936, 2048, 5632, 48, 16, 2, 32768, 0],
        Traits {
            peft_converts_moe: true,
            // 512 experts of 512, top-10, a gated shared expert of 512.
            moe: MoeRule::Qwen {
                experts: 512,
                top_k: 10,
                expert: 512,
                shared: 512,
                norm_topk_key: false,
            },
            ..QWEN3_NEXT
        },
    ),
    // Qwen3.5's text models (Qwen3_5TextConfig, Qwen3_5MoeTextConfig): Qwen3-Next's layers with
    // the DeltaNet's input projections split in four; the dense one has Llama's MLP, the MoE
    // one Qwen3-Next's MoE on every layer (its config has no `decoder_sparse_step` or
    // `mlp_only_layers`; its router always renormalizes the top-k).
    class(
        "qwen3_5_text",
        LlamaLike,
        [248320, 4096, 12288, 32, 16, 4, 32768, 0],
        Traits {
            deltanet_split: true,
            ..QWEN3_NEXT
        },
    ),
    class(
        "qwen3_5_moe_text",
        LlamaLike,
        [248320, 2048, 5632, 40, 16, 2, 32768, 0],
        Traits {
            deltanet_split: true,
            moe: MoeRule::Qwen {
                experts: 256,
                top_k: 8,
                expert: 512,
                shared: 512,
                norm_topk_key: false,
            },
            ..QWEN3_NEXT
        },
    ),
    class("qwen3_5", Multimodal, [0; 8], LLAMA),
    class("qwen3_5_moe", Multimodal, [0; 8], LLAMA),
    class(
        "seed_oss",
        LlamaLike,
        [155136, 4096, 27648, 64, 80, 8, 524288, 0],
        Traits {
            head_dim: 128,
            bias: Bias::Separate {
                qkv: true,
                o: false,
            },
            mlp_bias_key: true,
            // SeedOssConfig trains with dropout by default: 0.1 on the attention
            // probabilities and on the attention and MLP outputs (`residual_dropout`).
            dropout_percent: 10,
            residual_dropout: true,
            ..LLAMA
        },
    ),
    class(
        "ernie4_5",
        LlamaLike,
        [103424, 1024, 3072, 18, 16, 2, 131072, 1],
        Traits {
            head_dim: 128,
            bias: Bias::UseBias,
            rope: LayerRope::InterleavedFp32,
            ..LLAMA
        },
    ),
    class(
        "olmoe",
        LlamaLike,
        [50304, 2048, 2048, 16, 16, 0, 4096, 0],
        Traits {
            peft_converts_moe: true,
            qk_norm: QkNorm::Whole,
            window: Window::Off,
            // Every layer's MLP is 64 experts of intermediate_size, top-8, Qwen3-MoE's router
            // and experts.
            moe: MoeRule::Uniform {
                experts: 64,
                num_experts_key: true,
                top_k: 8,
                norm_topk: None,
            },
            ..LLAMA
        },
    ),
    class(
        "minimax_m2",
        LlamaLike,
        [200064, 3072, 1536, 62, 48, 8, 196608, 0],
        Traits {
            peft_converts_moe: true,
            head_dim: 128,
            bias: Bias::Fixed(false),
            rotary_key: RotaryKey::FactorOrDim,
            qk_norm: QkNorm::Whole,
            window: Window::Off,
            // Every layer's MLP is 256 experts of intermediate_size, top-8. Its router scores
            // with an fp32 sigmoid, chooses by the scores plus `e_score_correction_bias` (a
            // buffer, not a parameter) and always divides the chosen fp32 scores by their sum:
            // the generic router's tensors, a sigmoid's output for the softmax's.
            moe: MoeRule::Uniform {
                experts: 256,
                num_experts_key: true,
                top_k: 8,
                norm_topk: Some(true),
            },
            router_weight: RouterWeight::Fp32,
            ..LLAMA
        },
    ),
    class(
        "hunyuan_v1_dense",
        LlamaLike,
        [290943, 4096, 11008, 32, 32, 0, 2048, 0],
        Traits {
            // Llama's layer with per-head q/k RMSNorms applied after RoPE. Its config class
            // declares head_dim None, which its attention then cannot build with: a config
            // without one is read as hidden_size / num_attention_heads.
            qk_norm: QkNorm::AfterRope,
            window: Window::Off,
            ..LLAMA
        },
    ),
];

/// The text configs of the multimodal wrappers, their own defaults with a text class's traits:
/// Qwen2.5-VL's is a Qwen2 (72B-sized defaults), Qwen3-VL's a Qwen3.
pub const TEXT_CLASSES: &[(&str, &str, [u32; 8])] = &[
    (
        "qwen2_5_vl_text",
        "qwen2",
        [152064, 8192, 29568, 80, 64, 8, 32768, 0],
    ),
    (
        "qwen3_vl_text",
        "qwen3",
        [151936, 4096, 22016, 32, 32, 32, 128000, 0],
    ),
];

/// The wrappers whose text model is a class of its own (not a [`TEXT_CLASSES`] entry), by
/// that class: Qwen3.5's (Qwen3_5Config and Qwen3_5MoeConfig, Qwen3-VL's tower without
/// DeepStack around a Qwen3.5 text model).
pub const WRAPPED_TEXT: &[(&str, &str)] = &[
    ("qwen3_5", "qwen3_5_text"),
    ("qwen3_5_moe", "qwen3_5_moe_text"),
];

/// How a `model_type` the core does not model is read: as Llama's layout, named approximate.
pub const APPROXIMATE: ConfigClass = ConfigClass {
    model_type: "",
    reader: LlamaLike,
    defaults: [32000, 4096, 11008, 32, 32, 0, 2048, 0],
    traits: Traits {
        mlp_bias_key: true,
        ..LLAMA
    },
};

/// The class of `model_type`, if the core models it.
pub fn find(model_type: &str) -> Option<&'static ConfigClass> {
    CLASSES.iter().find(|c| c.model_type == model_type)
}

/// The class of `model_type`, or Llama's read as an approximate layout.
pub fn of(model_type: &str) -> &'static ConfigClass {
    find(model_type).unwrap_or(&APPROXIMATE)
}

impl Traits {
    /// The default `partial_rotary_factor`.
    pub fn rotary(&self) -> f64 {
        f64::from(self.rotary_percent) / 100.0
    }

    /// The class default of `attention_dropout` (and `residual_dropout`).
    pub fn dropout(&self) -> f64 {
        f64::from(self.dropout_percent) / 100.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_model_type_is_declared_once_with_what_its_reader_needs() {
        for (i, c) in CLASSES.iter().enumerate() {
            assert!(
                CLASSES[i + 1..]
                    .iter()
                    .all(|d| d.model_type != c.model_type),
                "{} declared twice",
                c.model_type
            );
            // The Llama-like and Gemma readers take every absent dimension from the row.
            if matches!(c.reader, LlamaLike | Gemma) {
                assert!(c.defaults[..5].iter().all(|&d| d > 0), "{}", c.model_type);
            }
        }
        for (text, layout, _) in TEXT_CLASSES {
            assert!(
                find(text).is_none(),
                "{text} is a wrapper's text config, not a class"
            );
            assert_eq!(find(layout).map(|c| c.reader), Some(LlamaLike), "{text}");
        }
        assert!(find("unknown").is_none());
        assert_eq!(of("unknown").reader, LlamaLike);
    }
}

/// How a family lays out its decoder layer; decides which tensors exist and what they save.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    /// Llama, Mistral, Mixtral, Qwen2/3 (+MoE): RMSNorm, RoPE, gated MLP, separate q/k/v.
    Llama,
    /// Gemma 1/2/3: Llama-like with GeGLU, scaled embeddings, (1 + w) RMSNorm, extra norms.
    Gemma,
    /// Phi-3: fused qkv and fused gate/up projections.
    Phi3,
    /// OLMo 2 / OLMo 3 / EXAONE 4: Llama-like without an input norm; RMSNorms after attention
    /// and after the MLP (OLMo's apply the weight in fp32: [`Traits::norm_weight_fp32`]), and
    /// q/k norms (OLMo's over the whole projection, EXAONE 4's per head).
    Olmo2,
    /// GLM-4: Llama-like with q/k/v biases, a fused gate_up projection, four norms per layer
    /// (after attention and after the MLP too) and RoPE on half of each head.
    Glm4,
    /// Command R7B / Command A (Cohere 2): one mean-centred norm without bias (weight applied
    /// in fp32) feeding attention and the gated MLP in parallel; RoPE on the sliding-window
    /// layers only.
    Cohere2,
    /// GPT-2: Conv1D projections, LayerNorm, learned positions, GELU MLP, dropout.
    Gpt2,
    /// GPT-NeoX / Pythia: fused qkv, parallel residual, partial rotary, GELU MLP.
    GptNeox,
    /// OPT: LayerNorm, learned positions (offset 2), ReLU MLP, optional projections.
    Opt,
    /// StarCoder2: LayerNorm with biases, separate q/k/v with RoPE and GQA, a plain GELU MLP,
    /// residual and embedding dropout.
    Starcoder2,
}

impl Family {
    /// Whether the family's layers apply dropout to the attention and MLP outputs (the config
    /// keys `model/hf/` reads: `resid_pdrop`, `hidden_dropout`, `dropout`).
    pub fn has_residual_dropout(self) -> bool {
        matches!(
            self,
            Family::Phi3 | Family::Gpt2 | Family::GptNeox | Family::Opt | Family::Starcoder2
        )
    }

    /// Whether the family applies dropout to the embeddings (`embd_pdrop`).
    pub fn has_embedding_dropout(self) -> bool {
        matches!(self, Family::Phi3 | Family::Gpt2 | Family::Starcoder2)
    }
}
