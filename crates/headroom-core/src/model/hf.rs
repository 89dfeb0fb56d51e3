//! Hugging Face `config.json` to [`ModelSpec`], with transformers' defaults for missing keys.
//!
//! Defaults are those of the transformers 5.x configuration classes (`LlamaConfig`,
//! `GPT2Config`, ...), so a pasted config that leaves a key out means what it means there.

use serde_json::{Map, Value};

use super::spec::{
    Dropout, Family, LinearAttention, Llama4, Mla, MlpKind, ModelSpec, Moe, NormKind, Router,
    Vision, VisionKind,
};
use crate::bounds::{MAX_HEADS, MAX_LAYERS};
use crate::error::ConfigError;

/// The `model_type`s the core understands.
pub const SUPPORTED_MODEL_TYPES: &[&str] = &[
    "llama",
    "mistral",
    "mixtral",
    "qwen2",
    "qwen2_moe",
    "qwen3",
    "qwen3_moe",
    "granite",
    "granitemoe",
    "smollm3",
    "olmo2",
    "olmo3",
    "glm4",
    "glm4_moe",
    "cohere2",
    "gemma",
    "gemma2",
    "gemma3_text",
    "phi3",
    "gpt2",
    "gpt_neox",
    "opt",
    "starcoder2",
    "gpt_oss",
    "deepseek_v2",
    "deepseek_v3",
    "gemma3",
    "qwen2_5_vl",
    "qwen3_vl",
    "mistral3",
    "llama4_text",
    "llama4",
    "qwen3_next",
];

/// The largest integer any config key may hold (2^40): far above every real dimension, and
/// small enough that the defaults derived from a key (4 x n_embd, n_positions + 2) fit in u64.
pub const MAX_CONFIG_INTEGER: u64 = 1 << 40;

/// Parses `config.json` text.
pub fn parse_config_json(text: &str) -> Result<ModelSpec, ConfigError> {
    let value: Value = serde_json::from_str(text).map_err(|e| ConfigError::Json(e.to_string()))?;
    from_config_value(&value)
}

/// Converts an already parsed `config.json`.
pub fn from_config_value(value: &Value) -> Result<ModelSpec, ConfigError> {
    let obj = value.as_object().ok_or(ConfigError::NotAnObject)?;
    let cfg = Cfg(obj);
    let supported = SUPPORTED_MODEL_TYPES.join(", ");
    let model_type = match obj.get("model_type") {
        Some(Value::String(s)) => s.clone(),
        Some(other) => {
            return Err(ConfigError::BadField {
                field: "model_type".into(),
                expected: "a string".into(),
                found: other.to_string(),
            });
        }
        None => return Err(ConfigError::MissingModelType { supported }),
    };
    let spec = match model_type.as_str() {
        "llama" | "mistral" | "mixtral" | "qwen2" | "qwen2_moe" | "qwen3" | "qwen3_moe"
        | "granite" | "granitemoe" | "smollm3" | "olmo2" | "olmo3" | "glm4" | "glm4_moe"
        | "cohere2" | "gpt_oss" | "deepseek_v2" | "deepseek_v3" | "llama4_text" | "qwen3_next" => {
            llama_like(&cfg, &model_type)?
        }
        "llama4" => llama4_wrapper(obj)?,
        "gemma" | "gemma2" | "gemma3_text" => gemma(&cfg, &model_type)?,
        "phi3" => phi3(&cfg)?,
        "gpt2" => gpt2(&cfg)?,
        "gpt_neox" => gpt_neox(&cfg)?,
        "opt" => opt(&cfg)?,
        "starcoder2" => starcoder2(&cfg)?,
        "gemma3" | "qwen2_5_vl" | "qwen3_vl" | "mistral3" => multimodal(&cfg, &model_type)?,
        _ => approximate(&cfg)?,
    };
    validate(&spec)?;
    Ok(spec)
}

/// Typed access to the JSON object, with errors that name the key.
struct Cfg<'a>(&'a Map<String, Value>);

impl Cfg<'_> {
    fn present(&self, key: &str) -> Option<&Value> {
        self.0.get(key).filter(|v| !v.is_null())
    }

    /// A non-negative integer up to [`MAX_CONFIG_INTEGER`] (each dimension has a tighter
    /// bound, checked once the spec is built: `bounds::check_model`; this one keeps the
    /// defaults derived on the way, such as 4 x n_embd, from overflowing).
    fn opt_u64(&self, key: &str) -> Result<Option<u64>, ConfigError> {
        let n = match self.present(key) {
            None => return Ok(None),
            Some(v) => match v.as_u64() {
                Some(n) => (n, v),
                // Some configs write integers as floats (e.g. 4096.0); accept exact ones.
                None => match v.as_f64() {
                    Some(f) if f >= 0.0 && f.fract() == 0.0 && f < 9.0e15 => (f as u64, v),
                    _ => return Err(bad(key, "a non-negative integer", v)),
                },
            },
        };
        if n.0 > MAX_CONFIG_INTEGER {
            return Err(bad(
                key,
                &format!("a non-negative integer up to {MAX_CONFIG_INTEGER}"),
                n.1,
            ));
        }
        Ok(Some(n.0))
    }

    /// A count from 1 to `max`, checked as it is read: the number of layers (before anything
    /// loops over them) and of heads (before anything divides by them).
    fn count(&self, key: &str, default: u64, max: u64) -> Result<u64, ConfigError> {
        let n = self.u64_or(key, default)?;
        if n == 0 || n > max {
            return Err(ConfigError::BadField {
                field: key.into(),
                expected: format!("an integer from 1 to {max}"),
                found: n.to_string(),
            });
        }
        Ok(n)
    }

    fn layers(&self, key: &str, default: u64) -> Result<u64, ConfigError> {
        self.count(key, default, MAX_LAYERS)
    }

    fn heads(&self, key: &str, default: u64) -> Result<u64, ConfigError> {
        self.count(key, default, MAX_HEADS)
    }

    fn u64_or(&self, key: &str, default: u64) -> Result<u64, ConfigError> {
        Ok(self.opt_u64(key)?.unwrap_or(default))
    }

    fn f64_or(&self, key: &str, default: f64) -> Result<f64, ConfigError> {
        match self.present(key) {
            None => Ok(default),
            Some(v) => v.as_f64().ok_or_else(|| bad(key, "a number", v)),
        }
    }

    fn bool_or(&self, key: &str, default: bool) -> Result<bool, ConfigError> {
        match self.present(key) {
            None => Ok(default),
            Some(v) => v.as_bool().ok_or_else(|| bad(key, "true or false", v)),
        }
    }

    /// A name such as an activation function: kept in the model, written into share links and
    /// shown on the page, so only a name's characters are accepted (a config with other text
    /// there made a link that did not decode; found by the fuzz harness).
    fn str_or(&self, key: &str, default: &str) -> Result<String, ConfigError> {
        const EXPECTED: &str = "a name of letters, digits, `_`, `.` or `-` (at most 64)";
        match self.present(key) {
            None => Ok(default.to_string()),
            Some(Value::String(s))
                if !s.is_empty()
                    && s.len() <= 64
                    && s.chars()
                        .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c)) =>
            {
                Ok(s.clone())
            }
            Some(v) => Err(bad(key, EXPECTED, v)),
        }
    }

    /// Length of a list-valued key such as `mlp_only_layers`, with its entries checked.
    fn index_list(&self, key: &str, layers: u64) -> Result<Vec<u64>, ConfigError> {
        match self.present(key) {
            None => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| match v.as_u64() {
                    Some(i) if i < layers => Ok(i),
                    _ => Err(bad(
                        key,
                        &format!("a list of layer indices below {layers}"),
                        v,
                    )),
                })
                .collect(),
            Some(v) => Err(bad(key, "a list of layer indices", v)),
        }
    }
}

fn bad(key: &str, expected: &str, found: &Value) -> ConfigError {
    ConfigError::BadField {
        field: key.to_string(),
        expected: expected.to_string(),
        // Shortened by characters: cutting at byte 40 panicked inside a multi-byte character
        // (found by the fuzz harness: a config value of non-ASCII text).
        found: crate::scenario::shorten(&found.to_string()),
    }
}

/// Defaults of a config class: (vocab, hidden, intermediate, layers, heads, kv heads or 0 for "= heads").
struct Defaults {
    vocab: u64,
    hidden: u64,
    intermediate: u64,
    layers: u64,
    heads: u64,
    kv_heads: u64,
    max_positions: u64,
    tie: bool,
}

/// Each Llama-like config class's defaults (transformers 5.23): model_type, then vocab, hidden,
/// intermediate, layers, heads, kv heads (0: as many as heads), max positions, tied embeddings
/// (0 or 1). A table, not code per type: the site's bundle is small.
const LLAMA_DEFAULTS: &[(&str, [u64; 8])] = &[
    ("llama", [32000, 4096, 11008, 32, 32, 0, 2048, 0]),
    ("mistral", [32000, 4096, 14336, 32, 32, 8, 131072, 0]),
    ("mixtral", [32000, 4096, 14336, 32, 32, 8, 131072, 0]),
    ("qwen2", [151936, 4096, 22016, 32, 32, 32, 32768, 0]),
    ("qwen2_moe", [151936, 2048, 5632, 24, 16, 16, 32768, 0]),
    ("qwen3", [151936, 4096, 22016, 32, 32, 32, 32768, 0]),
    ("granite", [32000, 4096, 11008, 32, 32, 0, 2048, 0]),
    ("granitemoe", [32000, 4096, 11008, 32, 32, 0, 2048, 0]),
    ("smollm3", [128256, 2048, 11008, 36, 16, 4, 32768, 1]),
    ("olmo2", [50304, 4096, 11008, 32, 32, 0, 2048, 0]),
    ("olmo3", [50304, 4096, 11008, 32, 32, 0, 2048, 0]),
    ("glm4", [151552, 4096, 13696, 40, 32, 2, 131072, 0]),
    ("glm4_moe", [151552, 4096, 10944, 46, 96, 8, 131072, 0]),
    ("cohere2", [256000, 8192, 22528, 40, 64, 0, 8192, 1]),
    ("qwen3_moe", [151936, 2048, 6144, 24, 32, 4, 32768, 0]),
    ("gpt_oss", [201088, 2880, 2880, 36, 64, 8, 131072, 0]),
    ("deepseek_v2", [102400, 4096, 11008, 32, 32, 0, 2048, 0]),
    ("deepseek_v3", [129280, 7168, 18432, 61, 128, 0, 4096, 0]),
    // The text configs of the multimodal wrappers: Qwen2.5-VL's is a Qwen2 (72B-sized
    // defaults), Qwen3-VL's a Qwen3.
    (
        "qwen2_5_vl_text",
        [152064, 8192, 29568, 80, 64, 8, 32768, 0],
    ),
    (
        "qwen3_vl_text",
        [151936, 4096, 22016, 32, 32, 32, 128000, 0],
    ),
    // Llama4TextConfig's intermediate_size is the experts' (and the shared expert's); its
    // dense layers read intermediate_size_mlp (16384).
    ("llama4_text", [202048, 5120, 8192, 48, 40, 8, 131072, 0]),
    ("qwen3_next", [151936, 2048, 5632, 48, 16, 2, 32768, 0]),
];

fn llama_like(cfg: &Cfg, model_type: &str) -> Result<ModelSpec, ConfigError> {
    llama_like_with(cfg, model_type, model_type)
}

/// A Llama-like model of `model_type`'s layout with the defaults of config class
/// `defaults` (a multimodal wrapper's text config has its own defaults).
fn llama_like_with(cfg: &Cfg, model_type: &str, defaults: &str) -> Result<ModelSpec, ConfigError> {
    let row = LLAMA_DEFAULTS
        .iter()
        .find(|(t, _)| *t == defaults)
        .map_or([0; 8], |(_, d)| *d);
    let d = Defaults {
        vocab: row[0],
        hidden: row[1],
        intermediate: row[2],
        layers: row[3],
        heads: row[4],
        kv_heads: row[5],
        max_positions: row[6],
        tie: row[7] == 1,
    };
    let hidden = cfg.u64_or("hidden_size", d.hidden)?;
    let heads = cfg.heads("num_attention_heads", d.heads)?;
    nonzero("num_attention_heads", heads)?;
    let kv_default = if d.kv_heads == 0 { heads } else { d.kv_heads };
    let kv_heads = cfg.u64_or("num_key_value_heads", kv_default)?;
    // Qwen3Config declares `head_dim: int = 128`; Qwen3MoeConfig declares no head_dim, so
    // Qwen3MoeAttention falls back to `getattr(config, "head_dim", hidden_size //
    // num_attention_heads)` (transformers 5.23, modeling_qwen3_moe.py), as Llama-likes do.
    let head_dim_default = match model_type {
        "qwen3" | "glm4" | "llama4_text" => 128,
        // Qwen3NextConfig declares `head_dim: int = 256`.
        "qwen3_next" => 256,
        // GptOssConfig declares `head_dim: int = 64`.
        "gpt_oss" => 64,
        _ => hidden / heads,
    };
    let mla = mla(cfg, model_type)?;
    // Multi-head latent attention expands k and v to every head (`kv_b_proj`), and its q/k
    // heads are the unrotated and rotated parts together; the config's head_dim (the RoPE
    // width, set by DeepseekV3Config itself) and num_key_value_heads do not shape it.
    let (head_dim, kv_heads) = match &mla {
        Some(m) => (m.qk_nope_head_dim + m.qk_rope_head_dim, heads),
        None => (cfg.u64_or("head_dim", head_dim_default)?, kv_heads),
    };
    let layers = cfg.layers("num_hidden_layers", d.layers)?;
    let qwen2ish = model_type == "qwen2" || model_type == "qwen2_moe";
    // Qwen2 puts biases on q, k and v only; Llama's `attention_bias` covers q, k, v and o.
    let attention_bias = cfg.bool_or("attention_bias", false)?;
    let (qkv_bias, o_bias) = if model_type == "qwen2" {
        // Qwen2Attention hard-codes `bias=True` on q/k/v (modeling_qwen2.py); no key turns it off.
        (true, false)
    } else if model_type == "qwen2_moe" {
        // Qwen2MoeAttention reads `bias=config.qkv_bias` (Qwen2MoeConfig: `qkv_bias = True`).
        (cfg.bool_or("qkv_bias", true)?, false)
    } else if model_type == "glm4" || model_type == "glm4_moe" {
        // Glm4(Moe)Attention: `bias=config.attention_bias` on q/k/v (True by default for
        // GLM-4, False for GLM-4 MoE), none on o.
        (cfg.bool_or("attention_bias", model_type == "glm4")?, false)
    } else if model_type == "gpt_oss" {
        // GptOssAttention: `bias=config.attention_bias` (True by default) on q, k, v and o.
        let bias = cfg.bool_or("attention_bias", true)?;
        (bias, bias)
    } else if model_type == "mistral" || model_type == "mixtral" {
        // MistralAttention and MixtralAttention hard-code `bias=False` on q/k/v/o
        // (modeling_mistral.py, modeling_mixtral.py); their configs have no attention_bias.
        (false, false)
    } else {
        (attention_bias, attention_bias)
    };
    let moe = match model_type {
        // GraniteMoeConfig: every layer's MLP is 8 experts of intermediate_size, top-2.
        // GptOssConfig: every layer's MLP is 128 experts of intermediate_size, top-4.
        "llama4_text" => llama4_moe(cfg, layers, d.intermediate)?,
        "mixtral" | "granitemoe" | "gpt_oss" => Some(Moe {
            experts: match cfg.opt_u64("num_local_experts")? {
                Some(n) => n,
                // GptOssConfig maps `num_experts` to `num_local_experts`.
                None if model_type == "gpt_oss" => cfg.u64_or("num_experts", 128)?,
                None => 8,
            },
            top_k: cfg.u64_or(
                "num_experts_per_tok",
                if model_type == "gpt_oss" { 4 } else { 2 },
            )?,
            expert_intermediate: cfg.u64_or("intermediate_size", d.intermediate)?,
            shared_intermediate: 0,
            shared_gate: false,
            sparse_layers: layers,
            // MixtralTopKRouter divides by the sum whatever the config says.
            norm_topk: model_type == "mixtral",
            router: Router::Softmax,
        }),
        "qwen2_moe" | "qwen3_moe" | "qwen3_next" => {
            let qwen2 = model_type == "qwen2_moe";
            let next = model_type == "qwen3_next";
            // Qwen3NextConfig: 512 experts of 512, top-10, a gated shared expert of 512.
            let experts = cfg.u64_or(
                "num_experts",
                match model_type {
                    "qwen2_moe" => 60,
                    "qwen3_moe" => 128,
                    _ => 512,
                },
            )?;
            let step = cfg.u64_or("decoder_sparse_step", 1)?;
            let dense_only = cfg.index_list("mlp_only_layers", layers)?;
            // transformers: a layer is sparse when it is not listed in `mlp_only_layers`,
            // experts > 0 and (index + 1) % decoder_sparse_step == 0.
            let sparse_layers = (0..layers)
                .filter(|i| {
                    !dense_only.contains(i) && experts > 0 && step > 0 && (i + 1) % step == 0
                })
                .count() as u64;
            Some(Moe {
                experts,
                top_k: cfg.u64_or(
                    "num_experts_per_tok",
                    match model_type {
                        "qwen2_moe" => 4,
                        "qwen3_moe" => 8,
                        _ => 10,
                    },
                )?,
                expert_intermediate: cfg.u64_or(
                    "moe_intermediate_size",
                    match model_type {
                        "qwen2_moe" => 1408,
                        "qwen3_moe" => 768,
                        _ => 512,
                    },
                )?,
                shared_intermediate: if qwen2 || next {
                    cfg.u64_or(
                        "shared_expert_intermediate_size",
                        if qwen2 { 5632 } else { 512 },
                    )?
                } else {
                    0
                },
                shared_gate: qwen2 || next,
                sparse_layers,
                // Qwen2MoeConfig and Qwen3MoeConfig default it to false (Qwen3-Next has its
                // own router inventory).
                norm_topk: !next && cfg.bool_or("norm_topk_prob", false)?,
                router: Router::Softmax,
            })
        }
        // Glm4MoeConfig: 128 routed experts of 1408, top-8, one shared, the first layer dense.
        "glm4_moe" => routed_moe(cfg, model_type, layers, [128, 1408, 8, 1, 1])?,
        // DeepseekV3Config: 256 routed experts of 2048, top-8, one shared, three dense layers
        // first; DeepseekV2Config: 64 of 1407, two shared, no dense layer (its top-k defaults
        // to None, which no forward runs with: DeepSeek-V2's 6 is taken).
        "deepseek_v3" => routed_moe(cfg, model_type, layers, [256, 2048, 8, 3, 1])?,
        "deepseek_v2" => routed_moe(cfg, model_type, layers, [64, 1407, 6, 0, 2])?,
        _ => None,
    };
    let attention_dropout = cfg.f64_or("attention_dropout", 0.0)?;
    let olmo = model_type.starts_with("olmo");
    let sliding_window = if model_type == "olmo3" || model_type == "cohere2" {
        // Olmo3Config and Cohere2Config: `sliding_window = 4096` on three layers in four.
        cfg.opt_u64("sliding_window")?.or(Some(4096))
    } else if qwen2ish
        || model_type == "qwen3"
        || model_type == "qwen3_moe"
        || model_type == "smollm3"
    {
        if cfg.bool_or("use_sliding_window", false)? {
            cfg.opt_u64("sliding_window")?
        } else {
            None
        }
    } else if model_type == "mistral" || model_type == "gpt_oss" {
        // MistralConfig defaults sliding_window to 4096, GptOssConfig to 128 (on every other
        // layer); an explicit null disables it.
        match cfg.0.get("sliding_window") {
            Some(Value::Null) => None,
            None => Some(if model_type == "mistral" { 4096 } else { 128 }),
            Some(_) => cfg.opt_u64("sliding_window")?,
        }
    } else if mla.is_some() || model_type == "llama4_text" || model_type == "qwen3_next" {
        // DeepSeek-V2/V3, Llama 4 (its chunks are `llama4`'s) and Qwen3-Next read no window.
        None
    } else {
        cfg.opt_u64("sliding_window")?
    };
    // Kept only where it differs from the type's default layout (so that links stay short).
    let sliding_layers = match sliding_window {
        Some(_) => sliding_layers(cfg, model_type, layers)?
            .filter(|&n| n != super::spec::default_sliding_layers(model_type, layers)),
        None => None,
    };
    Ok(ModelSpec {
        model_type: model_type.to_string(),
        approximate: None,
        parallel_residual: false,
        mtp_modules: mtp_modules(cfg, model_type)?,
        mtp_trained: 0,
        mla,
        vision: None,
        llama4: llama4(cfg, model_type, layers)?,
        linear_attention: linear_attention(cfg, model_type, layers)?,
        family: match model_type {
            "olmo2" | "olmo3" => Family::Olmo2,
            "glm4" => Family::Glm4,
            "cohere2" => Family::Cohere2,
            _ => Family::Llama,
        },
        vocab: cfg.u64_or("vocab_size", d.vocab)?,
        hidden,
        layers,
        heads,
        kv_heads,
        head_dim,
        intermediate: if model_type == "llama4_text" {
            cfg.u64_or("intermediate_size_mlp", 16384)?
        } else {
            cfg.u64_or("intermediate_size", d.intermediate)?
        },
        mlp: MlpKind::Gated,
        activation: cfg.str_or("hidden_act", "silu")?,
        norm: NormKind::RmsNorm,
        norms_per_layer: match model_type {
            "glm4" => 4,
            "cohere2" => 1,
            _ => 2,
        },
        // Qwen3-Next's gated attention has per-head q/k norms (its linear layers none);
        // Llama 4's weightless L2 norm is `llama4`'s.
        qk_norm: model_type == "qwen3"
            || model_type == "qwen3_moe"
            || model_type == "qwen3_next"
            || olmo
            || (model_type == "glm4_moe" && cfg.bool_or("use_qk_norm", false)?),
        qkv_bias,
        o_bias,
        // DeepseekV2MLP (dense layers and shared experts) reads `mlp_bias` too.
        mlp_bias: if reads_mlp_bias(model_type) || model_type == "deepseek_v2" {
            cfg.bool_or("mlp_bias", false)?
        } else {
            false
        },
        tie_embeddings: cfg.bool_or("tie_word_embeddings", d.tie)?,
        position_embeddings: 0,
        embed_proj_dim: hidden,
        moe,
        final_norm: true,
        dropout: Dropout {
            attention: attention_dropout,
            residual: 0.0,
            embedding: 0.0,
        },
        max_positions: cfg.u64_or("max_position_embeddings", d.max_positions)?,
        rotary_fraction: rotary_fraction(cfg, model_type)?,
        sliding_window,
        sliding_layers,
    })
}

/// The share of each head RoPE rotates: the config's `partial_rotary_factor` (a fraction in
/// (0, 1]; Phi-4-mini's 0.75), else its config class's default: GLM-4's and GLM-4.5's 0.5,
/// Qwen3-Next's 0.25, 1 for the others. gpt-oss rotates every dimension, from cos and sin
/// tables of half the head that its `_apply_rotary_emb` applies to each half: counted as 0.5.
fn rotary_fraction(cfg: &Cfg, model_type: &str) -> Result<f64, ConfigError> {
    let default = match model_type {
        "glm4" | "glm4_moe" => 0.5,
        "qwen3_next" => 0.25,
        "gpt_oss" => return Ok(0.5),
        _ => 1.0,
    };
    let f = cfg.f64_or("partial_rotary_factor", default)?;
    if !(f > 0.0 && f <= 1.0) {
        return Err(bad(
            "partial_rotary_factor",
            "a fraction in (0, 1]",
            &Value::from(f),
        ));
    }
    Ok(f)
}

/// Multi-head latent attention's keys (DeepseekV2Config and DeepseekV3Config share their
/// defaults), None for the other types. `q_lora_rank: null` means one q_proj; 0 is refused,
/// since transformers would build a zero-width q_a_proj that no model has.
fn mla(cfg: &Cfg, model_type: &str) -> Result<Option<Mla>, ConfigError> {
    if !model_type.starts_with("deepseek_v") {
        return Ok(None);
    }
    let q_lora_rank = match cfg.0.get("q_lora_rank") {
        Some(Value::Null) => 0,
        None => 1536,
        Some(v) => match cfg.opt_u64("q_lora_rank")? {
            Some(0) | None => return Err(bad("q_lora_rank", "a positive integer or null", v)),
            Some(n) => n,
        },
    };
    Ok(Some(Mla {
        q_lora_rank,
        kv_lora_rank: cfg.u64_or("kv_lora_rank", 512)?,
        qk_nope_head_dim: cfg.u64_or("qk_nope_head_dim", 128)?,
        qk_rope_head_dim: cfg.u64_or("qk_rope_head_dim", 64)?,
        v_head_dim: cfg.u64_or("v_head_dim", 128)?,
    }))
}

/// Llama 4's MoE layers (`Llama4TextConfig`): `moe_layers`, or one in
/// `interleave_moe_layer_step` (every layer by default, Maverick's 2 alternates dense and MoE);
/// each has `num_local_experts` (16) experts of `intermediate_size`, top
/// `num_experts_per_tok` (1), and a shared expert as wide. The dense layers' MLP is
/// `intermediate_size_mlp` (the spec's `intermediate`).
fn llama4_moe(cfg: &Cfg, layers: u64, expert: u64) -> Result<Option<Moe>, ConfigError> {
    let sparse_layers = match cfg.present("moe_layers") {
        Some(_) => {
            let listed = cfg.index_list("moe_layers", layers)?;
            (0..layers).filter(|i| listed.contains(i)).count() as u64
        }
        None => {
            let step = cfg.u64_or("interleave_moe_layer_step", 1)?;
            if step == 0 {
                return Err(ConfigError::BadField {
                    field: "interleave_moe_layer_step".into(),
                    expected: "a positive integer".into(),
                    found: "0".into(),
                });
            }
            // range(step - 1, layers, step)
            (0..layers).filter(|i| (i + 1) % step == 0).count() as u64
        }
    };
    Ok(Some(Moe {
        experts: cfg.u64_or("num_local_experts", 16)?,
        top_k: cfg.u64_or("num_experts_per_tok", 1)?,
        expert_intermediate: cfg.u64_or("intermediate_size", expert)?,
        shared_intermediate: cfg.u64_or("intermediate_size", expert)?,
        shared_gate: false,
        sparse_layers,
        norm_topk: false,
        router: Router::Softmax,
    }))
}

/// NoPE layers as Llama 4's and SmolLM3's configs give them (`__post_init__`):
/// `no_rope_layers` (1 = RoPE, 0 = NoPE; at least one entry per layer), or one NoPE layer every
/// `no_rope_layer_interval` (4) layers.
fn nope_layers(cfg: &Cfg, layers: u64) -> Result<u64, ConfigError> {
    Ok(match cfg.present("no_rope_layers") {
        // An empty list means the default (`self.no_rope_layers if self.no_rope_layers else
        // default`).
        Some(Value::Array(items)) if !items.is_empty() => {
            if (items.len() as u64) < layers {
                return Err(bad(
                    "no_rope_layers",
                    &format!("a list of 0 or 1 with at least {layers} entries (one per layer)"),
                    &Value::from(items.len()),
                ));
            }
            let mut nope = 0;
            for v in items.iter().take(layers as usize) {
                match v.as_u64() {
                    Some(0) => nope += 1,
                    Some(1) => {}
                    _ => return Err(bad("no_rope_layers", "a list of 0 or 1", v)),
                }
            }
            nope
        }
        Some(Value::Array(_)) | None => {
            let interval = cfg.u64_or("no_rope_layer_interval", 4)?;
            if interval == 0 {
                return Err(ConfigError::BadField {
                    field: "no_rope_layer_interval".into(),
                    expected: "a positive integer".into(),
                    found: "0".into(),
                });
            }
            layers / interval
        }
        Some(v) => return Err(bad("no_rope_layers", "a list of 0 or 1", v)),
    })
}

/// Llama 4's attention keys (`Llama4TextConfig.__post_init__`), None for the other types:
/// `no_rope_layers` (1 = RoPE, 0 = NoPE; at least one entry per layer), or a NoPE layer every
/// `no_rope_layer_interval` (4) layers; `attention_chunk_size` (8192, null: none).
fn llama4(cfg: &Cfg, model_type: &str, layers: u64) -> Result<Option<Llama4>, ConfigError> {
    if model_type != "llama4_text" {
        return Ok(None);
    }
    let nope_layers = nope_layers(cfg, layers)?;
    Ok(Some(Llama4 {
        nope_layers,
        chunk: match cfg.0.get("attention_chunk_size") {
            Some(Value::Null) => None,
            None => Some(8192),
            Some(_) => cfg.opt_u64("attention_chunk_size")?,
        },
        qk_l2_norm: cfg.bool_or("use_qk_norm", true)?,
        temperature_tuning: cfg.bool_or("attn_temperature_tuning", true)?,
    }))
}

/// Qwen3-Next's gated DeltaNet layers (`Qwen3NextConfig`), None for the other types:
/// `layer_types` ("linear_attention" or "full_attention" per layer), or three linear layers
/// then a full one (`full_attention_interval`, 4); 16 key heads and 32 value heads of 128, a
/// causal conv1d of kernel 4.
fn linear_attention(
    cfg: &Cfg,
    model_type: &str,
    layers: u64,
) -> Result<Option<LinearAttention>, ConfigError> {
    if model_type != "qwen3_next" {
        return Ok(None);
    }
    let linear = match count_layer_types(cfg, layers, "linear_attention")? {
        Some(n) => n,
        None => {
            let interval = cfg.u64_or("full_attention_interval", 4)?;
            if interval == 0 {
                return Err(ConfigError::BadField {
                    field: "full_attention_interval".into(),
                    expected: "a positive integer".into(),
                    found: "0".into(),
                });
            }
            layers - layers / interval
        }
    };
    Ok(Some(LinearAttention {
        layers: linear,
        key_heads: cfg.u64_or("linear_num_key_heads", 16)?,
        value_heads: cfg.u64_or("linear_num_value_heads", 32)?,
        key_head_dim: cfg.u64_or("linear_key_head_dim", 128)?,
        value_head_dim: cfg.u64_or("linear_value_head_dim", 128)?,
        conv_kernel: cfg.u64_or("linear_conv_kernel_dim", 4)?,
    }))
}

/// A `llama4` config (`Llama4Config`) is the multimodal model its checkpoints are
/// (`Llama4ForConditionalGeneration`): the text model of its `text_config` (a `llama4_text`
/// model) and the vision tower, adapter and projector of its `vision_config`, with
/// Llama4VisionConfig's defaults where a key is absent.
fn llama4_wrapper(obj: &Map<String, Value>) -> Result<ModelSpec, ConfigError> {
    let mut text = match obj.get("text_config") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(v) => return Err(bad("text_config", "an object (the text model's config)", v)),
    };
    text.insert("model_type".into(), Value::from("llama4_text"));
    let mut spec = llama_like(&Cfg(&text), "llama4_text")?;
    let vision_obj = match obj.get("vision_config") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(v) => return Err(bad("vision_config", "an object", v)),
    };
    let v = Cfg(&vision_obj);
    // The pixel shuffle folds 1/ratio x 1/ratio patches into one: 0.5 in every release.
    let ratio = v.f64_or("pixel_shuffle_ratio", 0.5)?;
    let merge = match ratio {
        0.5 => 2,
        0.25 => 4,
        1.0 => 1,
        _ => {
            return Err(bad(
                "vision_config.pixel_shuffle_ratio",
                "0.5 (as every Llama 4), 0.25 or 1",
                &Value::from(ratio),
            ));
        }
    };
    spec.vision = Some(Vision {
        kind: VisionKind::Llama4,
        hidden: v.u64_or("hidden_size", 768)?,
        layers: v.layers("num_hidden_layers", 34)?,
        heads: v.heads("num_attention_heads", 16)?,
        intermediate: v.u64_or("intermediate_size", 5632)?,
        patch: v.u64_or("patch_size", 14)?,
        channels: v.u64_or("num_channels", 3)?,
        temporal_patch: 1,
        image_size: v.u64_or("image_size", 448)?,
        positions: 0,
        merge,
        tokens_per_image: 0,
        out_hidden: spec.hidden,
        deepstack: 0,
        pooling_head: false,
        feature_layers: 1,
        projector_bias: false,
        projector_in: v.u64_or("projector_input_dim", 4096)?,
        projector_out: v.u64_or("projector_output_dim", 4096)?,
        vision_out: v.u64_or("vision_output_dim", 7680)?,
    });
    Ok(spec)
}

/// The Llama-like types whose MLP reads `mlp_bias` (the others hard-code `bias=False`).
pub(crate) fn reads_mlp_bias(model_type: &str) -> bool {
    matches!(model_type, "llama" | "granite" | "smollm3")
}

fn gemma(cfg: &Cfg, model_type: &str) -> Result<ModelSpec, ConfigError> {
    let d = match model_type {
        "gemma" => Defaults {
            vocab: 256000,
            hidden: 3072,
            intermediate: 24576,
            layers: 28,
            heads: 16,
            kv_heads: 16,
            max_positions: 8192,
            tie: true,
        },
        "gemma2" => Defaults {
            vocab: 256000,
            hidden: 2304,
            intermediate: 9216,
            layers: 26,
            heads: 8,
            kv_heads: 4,
            max_positions: 8192,
            tie: true,
        },
        _ => Defaults {
            vocab: 262208,
            hidden: 2304,
            intermediate: 9216,
            layers: 26,
            heads: 8,
            kv_heads: 4,
            max_positions: 131072,
            tie: true,
        },
    };
    let hidden = cfg.u64_or("hidden_size", d.hidden)?;
    let heads = cfg.heads("num_attention_heads", d.heads)?;
    nonzero("num_attention_heads", heads)?;
    let v1 = model_type == "gemma";
    let act_default = "gelu_pytorch_tanh";
    let activation = match cfg.present("hidden_activation") {
        Some(_) => cfg.str_or("hidden_activation", act_default)?,
        None => cfg.str_or("hidden_act", act_default)?,
    };
    let attention_bias = cfg.bool_or("attention_bias", false)?;
    Ok(ModelSpec {
        model_type: model_type.to_string(),
        approximate: None,
        parallel_residual: false,
        mtp_modules: 0,
        mtp_trained: 0,
        mla: None,
        vision: None,
        llama4: None,
        linear_attention: None,
        family: Family::Gemma,
        vocab: cfg.u64_or("vocab_size", d.vocab)?,
        hidden,
        layers: cfg.layers("num_hidden_layers", d.layers)?,
        heads,
        kv_heads: cfg.u64_or("num_key_value_heads", d.kv_heads)?,
        head_dim: cfg.u64_or("head_dim", 256)?,
        intermediate: cfg.u64_or("intermediate_size", d.intermediate)?,
        mlp: MlpKind::Gated,
        activation,
        norm: NormKind::RmsNorm,
        norms_per_layer: if v1 { 2 } else { 4 },
        qk_norm: model_type == "gemma3_text",
        qkv_bias: attention_bias,
        o_bias: attention_bias,
        mlp_bias: false,
        tie_embeddings: cfg.bool_or("tie_word_embeddings", d.tie)?,
        position_embeddings: 0,
        embed_proj_dim: hidden,
        moe: None,
        final_norm: true,
        dropout: Dropout {
            attention: cfg.f64_or("attention_dropout", 0.0)?,
            residual: 0.0,
            embedding: 0.0,
        },
        max_positions: cfg.u64_or("max_position_embeddings", d.max_positions)?,
        rotary_fraction: 1.0,
        sliding_window: if v1 {
            None
        } else {
            cfg.opt_u64("sliding_window")?.or(Some(4096))
        },
        sliding_layers: None,
    })
}

fn phi3(cfg: &Cfg) -> Result<ModelSpec, ConfigError> {
    let hidden = cfg.u64_or("hidden_size", 3072)?;
    let heads = cfg.heads("num_attention_heads", 32)?;
    nonzero("num_attention_heads", heads)?;
    Ok(ModelSpec {
        model_type: "phi3".into(),
        approximate: None,
        parallel_residual: false,
        mtp_modules: 0,
        mtp_trained: 0,
        mla: None,
        vision: None,
        llama4: None,
        linear_attention: None,
        family: Family::Phi3,
        vocab: cfg.u64_or("vocab_size", 32064)?,
        hidden,
        layers: cfg.layers("num_hidden_layers", 32)?,
        heads,
        kv_heads: cfg.u64_or("num_key_value_heads", heads)?,
        head_dim: cfg.u64_or("head_dim", hidden / heads)?,
        intermediate: cfg.u64_or("intermediate_size", 8192)?,
        mlp: MlpKind::Gated,
        activation: cfg.str_or("hidden_act", "silu")?,
        norm: NormKind::RmsNorm,
        norms_per_layer: 2,
        qk_norm: false,
        qkv_bias: false,
        o_bias: false,
        mlp_bias: false,
        tie_embeddings: cfg.bool_or("tie_word_embeddings", false)?,
        position_embeddings: 0,
        embed_proj_dim: hidden,
        moe: None,
        final_norm: true,
        dropout: Dropout {
            attention: cfg.f64_or("attention_dropout", 0.0)?,
            residual: cfg.f64_or("resid_pdrop", 0.0)?,
            embedding: cfg.f64_or("embd_pdrop", 0.0)?,
        },
        max_positions: cfg.u64_or("max_position_embeddings", 4096)?,
        rotary_fraction: rotary_fraction(cfg, "phi3")?,
        sliding_window: cfg.opt_u64("sliding_window")?,
        sliding_layers: None,
    })
}

fn gpt2(cfg: &Cfg) -> Result<ModelSpec, ConfigError> {
    let hidden = cfg.u64_or("n_embd", 768)?;
    let heads = cfg.heads("n_head", 12)?;
    nonzero("n_head", heads)?;
    Ok(ModelSpec {
        model_type: "gpt2".into(),
        approximate: None,
        parallel_residual: false,
        mtp_modules: 0,
        mtp_trained: 0,
        mla: None,
        vision: None,
        llama4: None,
        linear_attention: None,
        family: Family::Gpt2,
        vocab: cfg.u64_or("vocab_size", 50257)?,
        hidden,
        layers: cfg.layers("n_layer", 12)?,
        heads,
        kv_heads: heads,
        head_dim: hidden / heads,
        intermediate: cfg.u64_or("n_inner", 4 * hidden)?,
        mlp: MlpKind::Plain,
        activation: cfg.str_or("activation_function", "gelu_new")?,
        norm: NormKind::LayerNorm,
        norms_per_layer: 2,
        qk_norm: false,
        qkv_bias: true,
        o_bias: true,
        mlp_bias: true,
        tie_embeddings: cfg.bool_or("tie_word_embeddings", true)?,
        position_embeddings: cfg.u64_or("n_positions", 1024)?,
        embed_proj_dim: hidden,
        moe: None,
        final_norm: true,
        dropout: Dropout {
            attention: cfg.f64_or("attn_pdrop", 0.1)?,
            residual: cfg.f64_or("resid_pdrop", 0.1)?,
            embedding: cfg.f64_or("embd_pdrop", 0.1)?,
        },
        max_positions: cfg.u64_or("n_positions", 1024)?,
        rotary_fraction: 1.0,
        sliding_window: None,
        sliding_layers: None,
    })
}

fn gpt_neox(cfg: &Cfg) -> Result<ModelSpec, ConfigError> {
    let hidden = cfg.u64_or("hidden_size", 6144)?;
    let heads = cfg.heads("num_attention_heads", 64)?;
    nonzero("num_attention_heads", heads)?;
    let bias = cfg.bool_or("attention_bias", true)?;
    Ok(ModelSpec {
        model_type: "gpt_neox".into(),
        approximate: None,
        parallel_residual: cfg.bool_or("use_parallel_residual", true)?,
        mtp_modules: 0,
        mtp_trained: 0,
        mla: None,
        vision: None,
        llama4: None,
        linear_attention: None,
        family: Family::GptNeox,
        vocab: cfg.u64_or("vocab_size", 50432)?,
        hidden,
        layers: cfg.layers("num_hidden_layers", 44)?,
        heads,
        kv_heads: heads,
        head_dim: hidden / heads,
        intermediate: cfg.u64_or("intermediate_size", 24576)?,
        mlp: MlpKind::Plain,
        activation: cfg.str_or("hidden_act", "gelu")?,
        norm: NormKind::LayerNorm,
        norms_per_layer: 2,
        qk_norm: false,
        qkv_bias: bias,
        o_bias: bias,
        mlp_bias: true,
        tie_embeddings: cfg.bool_or("tie_word_embeddings", false)?,
        position_embeddings: 0,
        embed_proj_dim: hidden,
        moe: None,
        final_norm: true,
        dropout: Dropout {
            attention: cfg.f64_or("attention_dropout", 0.0)?,
            residual: cfg.f64_or("hidden_dropout", 0.0)?,
            embedding: 0.0,
        },
        max_positions: cfg.u64_or("max_position_embeddings", 2048)?,
        rotary_fraction: 1.0,
        sliding_window: None,
        sliding_layers: None,
    })
}

fn opt(cfg: &Cfg) -> Result<ModelSpec, ConfigError> {
    let hidden = cfg.u64_or("hidden_size", 768)?;
    let heads = cfg.heads("num_attention_heads", 12)?;
    nonzero("num_attention_heads", heads)?;
    let bias = cfg.bool_or("enable_bias", true)?;
    let max_positions = cfg.u64_or("max_position_embeddings", 2048)?;
    let final_norm = cfg.bool_or("do_layer_norm_before", true)?
        && !cfg.bool_or("_remove_final_layer_norm", false)?;
    Ok(ModelSpec {
        model_type: "opt".into(),
        approximate: None,
        parallel_residual: false,
        mtp_modules: 0,
        mtp_trained: 0,
        mla: None,
        vision: None,
        llama4: None,
        linear_attention: None,
        family: Family::Opt,
        vocab: cfg.u64_or("vocab_size", 50272)?,
        hidden,
        layers: cfg.layers("num_hidden_layers", 12)?,
        heads,
        kv_heads: heads,
        head_dim: hidden / heads,
        intermediate: cfg.u64_or("ffn_dim", 3072)?,
        mlp: MlpKind::Plain,
        activation: cfg.str_or("activation_function", "relu")?,
        norm: NormKind::LayerNorm,
        norms_per_layer: 2,
        qk_norm: false,
        qkv_bias: bias,
        o_bias: bias,
        mlp_bias: bias,
        tie_embeddings: cfg.bool_or("tie_word_embeddings", true)?,
        // OPT's learned positions carry an offset of 2 rows.
        position_embeddings: max_positions + 2,
        embed_proj_dim: cfg.u64_or("word_embed_proj_dim", hidden)?,
        moe: None,
        final_norm,
        dropout: Dropout {
            attention: cfg.f64_or("attention_dropout", 0.0)?,
            residual: cfg.f64_or("dropout", 0.1)?,
            embedding: 0.0,
        },
        max_positions,
        rotary_fraction: 1.0,
        sliding_window: None,
        sliding_layers: None,
    })
}

/// The layers of `kind` in an explicit `layer_types` (one entry per layer, each `kind` or
/// "full_attention"), None when the config has none.
fn count_layer_types(cfg: &Cfg, layers: u64, kind: &str) -> Result<Option<u64>, ConfigError> {
    let expected = format!("a list of \"{kind}\" or \"full_attention\", one per layer");
    let items = match cfg.present("layer_types") {
        None => return Ok(None),
        Some(Value::Array(items)) => items,
        Some(v) => return Err(bad("layer_types", &expected, v)),
    };
    if items.len() as u64 != layers {
        return Err(bad("layer_types", &expected, &Value::from(items.len())));
    }
    let mut n = 0;
    for item in items {
        match item.as_str() {
            Some(k) if k == kind => n += 1,
            Some("full_attention") => {}
            _ => return Err(bad("layer_types", &expected, item)),
        }
    }
    Ok(Some(n))
}

/// How many layers slide where the config decides it, for a model with a window: an explicit
/// `layer_types` (one entry per layer, counted), else the config class's own rule (transformers
/// 5.23): Qwen2's and Qwen3's layers from `max_window_layers` (28) on, Qwen2-MoE's even layers
/// below it, SmolLM3's NoPE layers (`no_rope_layers`' zeros, else one in
/// `no_rope_layer_interval`, 4). None: the model type's default layout.
/// The most multi-token prediction modules a config may declare (DeepSeek-V3 and GLM-4.5 ship
/// one; the technical report trains depth 1).
pub const MAX_MTP_MODULES: u64 = 16;

/// DeepSeek-V3's and GLM-4.5's `num_nextn_predict_layers` (0 when absent); other types have no
/// multi-token prediction modules.
fn mtp_modules(cfg: &Cfg, model_type: &str) -> Result<u64, ConfigError> {
    if !matches!(model_type, "deepseek_v3" | "glm4_moe") {
        return Ok(0);
    }
    let n = cfg.u64_or("num_nextn_predict_layers", 0)?;
    if n > MAX_MTP_MODULES {
        return Err(ConfigError::BadField {
            field: "num_nextn_predict_layers".into(),
            expected: format!("at most {MAX_MTP_MODULES}"),
            found: n.to_string(),
        });
    }
    Ok(n)
}

fn sliding_layers(cfg: &Cfg, model_type: &str, layers: u64) -> Result<Option<u64>, ConfigError> {
    if let Some(n) = count_layer_types(cfg, layers, "sliding_attention")? {
        return Ok(Some(n));
    }
    let below = |layers: u64| -> Result<u64, ConfigError> {
        Ok(cfg.u64_or("max_window_layers", 28)?.min(layers))
    };
    Ok(match model_type {
        "qwen2" | "qwen3" => Some(layers - below(layers)?),
        "qwen2_moe" => Some(below(layers)?.div_ceil(2)),
        "smollm3" => Some(nope_layers(cfg, layers)?),
        _ => None,
    })
}

/// Routed experts as DeepSeek-style configs (and links) give them: `num_local_experts`,
/// `num_experts` or `n_routed_experts` experts of `moe_intermediate_size`, top
/// `num_experts_per_tok`, `n_shared_experts` x `moe_intermediate_size` shared (or
/// `shared_expert_intermediate_size`), dense layers listed in `mlp_only_layers` (a link's form)
/// or the first `first_k_dense_replace`. `d`: the defaults of experts, expert intermediate,
/// top-k, first dense layers and shared experts. No experts: no MoE.
fn routed_moe(
    cfg: &Cfg,
    model_type: &str,
    layers: u64,
    d: [u64; 5],
) -> Result<Option<Moe>, ConfigError> {
    let experts = match cfg.opt_u64("num_local_experts")? {
        Some(n) => n,
        None => match cfg.opt_u64("num_experts")? {
            Some(n) => n,
            None => cfg.u64_or("n_routed_experts", d[0])?,
        },
    };
    if experts == 0 {
        return Ok(None);
    }
    let expert_intermediate = cfg.u64_or("moe_intermediate_size", d[1])?;
    let (router, norm_topk) = deepseek_router(cfg, model_type)?;
    let dense_only = cfg.index_list("mlp_only_layers", layers)?;
    let first_dense = match cfg.present("mlp_only_layers") {
        Some(_) => 0,
        None => cfg.u64_or("first_k_dense_replace", d[3])?,
    };
    let shared = cfg
        .u64_or("n_shared_experts", d[4])?
        .saturating_mul(expert_intermediate);
    Ok(Some(Moe {
        experts,
        top_k: cfg.u64_or("num_experts_per_tok", d[2])?,
        expert_intermediate,
        shared_intermediate: cfg.u64_or("shared_expert_intermediate_size", shared)?,
        shared_gate: false,
        sparse_layers: (0..layers)
            .filter(|i| !dense_only.contains(i) && *i >= first_dense)
            .count() as u64,
        norm_topk,
        router,
    }))
}

/// The router of a DeepSeek-style MoE and whether it divides its top-k weights by their sum:
/// `DeepseekV2TopkRouter` never does (it has no such branch) and runs `topk_method` "greedy"
/// (the default) or "group_limited_greedy", the only two it has; DeepSeek-V3's and GLM-4.5's
/// router (`DeepseekV3TopkRouter`, `Glm4MoeTopkRouter`) read `norm_topk_prob`, True by default.
/// Any other type read as routed experts (an unknown one, approximately) gets the generic
/// router, normalized where its config says so.
fn deepseek_router(cfg: &Cfg, model_type: &str) -> Result<(Router, bool), ConfigError> {
    match model_type {
        "deepseek_v2" => {}
        "deepseek_v3" | "glm4_moe" => {
            return Ok((Router::DeepseekV3, cfg.bool_or("norm_topk_prob", true)?));
        }
        _ => return Ok((Router::Softmax, cfg.bool_or("norm_topk_prob", false)?)),
    }
    let group_limited = match cfg.present("topk_method") {
        None => false,
        Some(Value::String(m)) if m == "greedy" => false,
        Some(Value::String(m)) if m == "group_limited_greedy" => true,
        Some(v) => {
            return Err(bad(
                "topk_method",
                "\"greedy\" or \"group_limited_greedy\" (DeepSeek-V2's router has no other)",
                v,
            ));
        }
    };
    Ok((Router::DeepseekV2 { group_limited }, false))
}

/// A multimodal wrapper (`Gemma3ForConditionalGeneration`, `Qwen2_5_VLForConditionalGeneration`,
/// `Qwen3VLForConditionalGeneration`, `Mistral3ForConditionalGeneration`): the text model from
/// `text_config`, read as its own `model_type` is (Qwen2.5-VL's released configs keep the text
/// keys at the top level, which `Qwen2_5_VLConfig` reads as the text config), and the vision
/// tower and projector from `vision_config` and the wrapper's keys. The wrapper's
/// `tie_word_embeddings` decides the tie (transformers 5.23's `tie_weights` reads the top-level
/// config): True by default for Gemma 3 and Mistral 3, False for Qwen-VL (Qwen2.5-VL also ties
/// when its text config does, `Qwen2_5_VLConfig.__post_init__`).
fn multimodal(cfg: &Cfg, wrapper: &str) -> Result<ModelSpec, ConfigError> {
    let text_obj = match cfg.present("text_config") {
        Some(Value::Object(m)) => Some(m),
        Some(v) => return Err(bad("text_config", "an object", v)),
        None => None,
    };
    let flat = text_obj.is_none() && wrapper == "qwen2_5_vl";
    // Mistral3Config builds Mistral Small 3.1's text and vision configs when they are absent
    // (its `sub_configs_defaults` init_kwargs); a partial one takes the class defaults.
    let mistral = wrapper == "mistral3";
    let default_text = if mistral {
        mistral3_default("text")
    } else {
        Map::new()
    };
    let text = Cfg(match text_obj {
        Some(m) => m,
        None if flat => cfg.0,
        None => &default_text,
    });
    let text_default_type = match wrapper {
        "gemma3" => "gemma3_text",
        "qwen2_5_vl" => "qwen2_5_vl_text",
        "qwen3_vl" => "qwen3_vl_text",
        _ => "mistral",
    };
    let text_type = if flat {
        text_default_type.to_string()
    } else {
        text.str_or("model_type", text_default_type)?
    };
    let mut spec = match text_type.as_str() {
        "qwen2_5_vl_text" => llama_like_with(&text, "qwen2", "qwen2_5_vl_text")?,
        "qwen3_vl_text" => llama_like_with(&text, "qwen3", "qwen3_vl_text")?,
        "gemma3_text" => gemma(&text, "gemma3_text")?,
        t if SUPPORTED_MODEL_TYPES.contains(&t)
            && !matches!(t, "gemma3" | "qwen2_5_vl" | "qwen3_vl" | "mistral3") =>
        {
            let mut m = text.0.clone();
            m.insert("model_type".into(), Value::from(t));
            from_config_value(&Value::Object(m))?
        }
        t => {
            return Err(ConfigError::BadField {
                field: "text_config.model_type".into(),
                expected: format!("a text model type Headroom models ({text_default_type}, ...)"),
                found: crate::scenario::shorten(t),
            });
        }
    };
    let vision_obj = match cfg.present("vision_config") {
        Some(Value::Object(m)) => m.clone(),
        Some(v) => return Err(bad("vision_config", "an object", v)),
        None if mistral => mistral3_default("vision"),
        None => Map::new(),
    };
    let v = Cfg(&vision_obj);
    let vision = match wrapper {
        // SiglipVisionConfig's defaults (Gemma3Config builds one when vision_config is absent).
        "gemma3" => Vision {
            kind: VisionKind::Siglip,
            hidden: v.u64_or("hidden_size", 768)?,
            layers: v.layers("num_hidden_layers", 12)?,
            heads: v.heads("num_attention_heads", 12)?,
            intermediate: v.u64_or("intermediate_size", 3072)?,
            patch: v.u64_or("patch_size", 16)?,
            channels: v.u64_or("num_channels", 3)?,
            temporal_patch: 1,
            image_size: v.u64_or("image_size", 224)?,
            positions: 0,
            merge: 1,
            tokens_per_image: cfg.u64_or("mm_tokens_per_image", 256)?,
            out_hidden: spec.hidden,
            deepstack: 0,
            pooling_head: v.bool_or("vision_use_head", true)?,
            feature_layers: 1,
            projector_bias: false,
            projector_in: 0,
            projector_out: 0,
            vision_out: 0,
        },
        // Qwen2_5_VLVisionConfig's and Qwen3VLVisionConfig's defaults.
        "qwen2_5_vl" | "qwen3_vl" => {
            let q3 = wrapper == "qwen3_vl";
            let deepstack = match v.present("deepstack_visual_indexes") {
                Some(Value::Array(items)) => items.len() as u64,
                Some(other) => {
                    return Err(bad(
                        "vision_config.deepstack_visual_indexes",
                        "a list",
                        other,
                    ));
                }
                None => 3,
            };
            Vision {
                kind: if q3 {
                    VisionKind::Qwen3
                } else {
                    VisionKind::Qwen25
                },
                hidden: v.u64_or("hidden_size", if q3 { 1152 } else { 3584 })?,
                layers: v.layers("depth", if q3 { 27 } else { 32 })?,
                heads: v.heads("num_heads", 16)?,
                intermediate: v.u64_or("intermediate_size", if q3 { 4304 } else { 3420 })?,
                patch: v.u64_or("patch_size", if q3 { 16 } else { 14 })?,
                channels: v.u64_or("in_channels", 3)?,
                temporal_patch: v.u64_or("temporal_patch_size", 2)?,
                image_size: 0,
                positions: if q3 {
                    v.u64_or("num_position_embeddings", 2304)?
                } else {
                    0
                },
                merge: v.u64_or("spatial_merge_size", 2)?,
                tokens_per_image: 0,
                out_hidden: v.u64_or("out_hidden_size", 3584)?,
                deepstack: if q3 { deepstack } else { 0 },
                pooling_head: false,
                feature_layers: 1,
                projector_bias: true,
                projector_in: 0,
                projector_out: 0,
                vision_out: 0,
            }
        }
        // PixtralVisionConfig's defaults; the merge and the projector are Mistral3Config's.
        _ => Vision {
            kind: VisionKind::Pixtral,
            hidden: v.u64_or("hidden_size", 1024)?,
            layers: v.layers("num_hidden_layers", 24)?,
            heads: v.heads("num_attention_heads", 16)?,
            intermediate: v.u64_or("intermediate_size", 4096)?,
            patch: v.u64_or("patch_size", 16)?,
            channels: v.u64_or("num_channels", 3)?,
            temporal_patch: 1,
            image_size: v.u64_or("image_size", 1024)?,
            positions: 0,
            merge: cfg.u64_or("spatial_merge_size", 2)?,
            tokens_per_image: 0,
            out_hidden: spec.hidden,
            deepstack: 0,
            pooling_head: false,
            feature_layers: match cfg.present("vision_feature_layer") {
                Some(Value::Array(items)) => items.len() as u64,
                _ => 1,
            },
            projector_bias: cfg.bool_or("multimodal_projector_bias", false)?,
            projector_in: 0,
            projector_out: 0,
            vision_out: 0,
        },
    };
    let tie_default = match wrapper {
        "gemma3" | "mistral3" => true,
        "qwen2_5_vl" => text_obj.is_some() && text.bool_or("tie_word_embeddings", false)?,
        _ => false,
    };
    spec.tie_embeddings = cfg.bool_or("tie_word_embeddings", tie_default)?;
    spec.vision = Some(vision);
    Ok(spec)
}

/// Mistral3Config's default text (`"text"`) or vision config: Mistral Small 3.1's
/// (configuration_mistral3.py, `sub_configs_defaults`).
fn mistral3_default(which: &str) -> Map<String, Value> {
    let v = if which == "text" {
        serde_json::json!({
            "model_type": "mistral", "hidden_size": 5120, "head_dim": 128,
            "intermediate_size": 32768, "max_position_embeddings": 131072,
            "num_attention_heads": 32, "num_hidden_layers": 40, "num_key_value_heads": 8,
            "sliding_window": null, "vocab_size": 131072
        })
    } else {
        serde_json::json!({
            "intermediate_size": 4096, "hidden_size": 1024, "patch_size": 14,
            "image_size": 1540, "num_hidden_layers": 24, "num_attention_heads": 16
        })
    };
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

/// The keys an unknown `model_type` needs to be estimated as the closest known layout.
const STANDARD_KEYS: [&str; 5] = [
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "vocab_size",
];

/// A `model_type` the core does not model: with the standard keys, estimated as the closest
/// known layout, Llama's (RMSNorm, separate q/k/v with RoPE, a gated MLP; MoE when the config
/// names experts), and marked approximate with the reason. The reason depends only on what a
/// link carries (`codec::spec_to_config`), so such a config round-trips through a link.
fn approximate(cfg: &Cfg) -> Result<ModelSpec, ConfigError> {
    let model_type = cfg.str_or("model_type", "")?;
    let missing: Vec<&str> = STANDARD_KEYS
        .into_iter()
        .filter(|k| cfg.present(k).is_none())
        .collect();
    if !missing.is_empty() {
        let mut missing = missing.join(", ");
        if cfg.present("text_config").is_some() {
            missing.push_str(" (a multimodal config: its text model's keys are under text_config)");
        }
        return Err(ConfigError::MissingKeys {
            found: model_type,
            missing,
        });
    }
    let mut spec = llama_like(cfg, "llama")?;
    // LlamaConfig's 2048 would say a longer sequence is past the model's positions: unknown.
    if cfg.present("max_position_embeddings").is_none() {
        spec.max_positions = 0;
    }
    // Qwen-style configs carry a window that `use_sliding_window: false` turns off.
    if !cfg.bool_or("use_sliding_window", true)? {
        spec.sliding_window = None;
    }
    spec.moe = routed_moe(
        cfg,
        &model_type,
        spec.layers,
        [0, spec.intermediate, 2, 0, 0],
    )?;
    spec.approximate = Some(format!(
        "model_type `{model_type}` is not one Headroom models exactly: estimated as the closest \
         known layout, Llama's (RMSNorm, separate q/k/v with RoPE, a gated MLP{}), so its \
         parameters and activations are approximate.",
        if spec.moe.is_some() { ", MoE" } else { "" },
    ));
    spec.model_type = model_type;
    Ok(spec)
}

/// Starcoder2Config's defaults are StarCoder2-3B's shape; `use_bias` covers every Linear but
/// lm_head, and head_dim is `hidden_size / num_attention_heads` unless given.
fn starcoder2(cfg: &Cfg) -> Result<ModelSpec, ConfigError> {
    let hidden = cfg.u64_or("hidden_size", 3072)?;
    let heads = cfg.heads("num_attention_heads", 24)?;
    let bias = cfg.bool_or("use_bias", true)?;
    Ok(ModelSpec {
        model_type: "starcoder2".into(),
        approximate: None,
        parallel_residual: false,
        mtp_modules: 0,
        mtp_trained: 0,
        mla: None,
        vision: None,
        llama4: None,
        linear_attention: None,
        family: Family::Starcoder2,
        vocab: cfg.u64_or("vocab_size", 49152)?,
        hidden,
        layers: cfg.layers("num_hidden_layers", 30)?,
        heads,
        kv_heads: cfg.u64_or("num_key_value_heads", 2)?,
        head_dim: cfg.u64_or("head_dim", hidden / heads)?,
        intermediate: cfg.u64_or("intermediate_size", 12288)?,
        mlp: MlpKind::Plain,
        activation: cfg.str_or("hidden_act", "gelu_pytorch_tanh")?,
        norm: NormKind::LayerNorm,
        norms_per_layer: 2,
        qk_norm: false,
        qkv_bias: bias,
        o_bias: bias,
        mlp_bias: bias,
        tie_embeddings: cfg.bool_or("tie_word_embeddings", true)?,
        position_embeddings: 0,
        embed_proj_dim: hidden,
        moe: None,
        final_norm: true,
        dropout: Dropout {
            attention: cfg.f64_or("attention_dropout", 0.0)?,
            residual: cfg.f64_or("residual_dropout", 0.0)?,
            embedding: cfg.f64_or("embedding_dropout", 0.0)?,
        },
        max_positions: cfg.u64_or("max_position_embeddings", 4096)?,
        rotary_fraction: 1.0,
        sliding_window: cfg.opt_u64("sliding_window")?,
        sliding_layers: None,
    })
}

fn nonzero(field: &str, value: u64) -> Result<(), ConfigError> {
    if value == 0 {
        return Err(ConfigError::BadField {
            field: field.into(),
            expected: "a positive integer".into(),
            found: "0".into(),
        });
    }
    Ok(())
}

/// Rejects configs whose sizes cannot describe a real model, so no formula divides by zero
/// or overflows.
fn validate(s: &ModelSpec) -> Result<(), ConfigError> {
    crate::bounds::check_model(s)?;
    if !s.heads.is_multiple_of(s.kv_heads) {
        return Err(ConfigError::Inconsistent {
            field: "num_key_value_heads".into(),
            message: format!(
                "must divide num_attention_heads ({}), found {} (the config's value, or its \
                 class's default where the config gives none)",
                s.heads, s.kv_heads
            ),
        });
    }
    if let Some(la) = &s.linear_attention
        && !la.value_heads.is_multiple_of(la.key_heads)
    {
        // Qwen3NextGatedDeltaNet views each key head's q/k/v/z block with value_heads /
        // key_heads value heads in it.
        return Err(ConfigError::Inconsistent {
            field: "linear_num_value_heads".into(),
            message: format!(
                "must be a multiple of linear_num_key_heads ({}), found {}",
                la.key_heads, la.value_heads
            ),
        });
    }
    for (field, p) in [
        ("attention_dropout", s.dropout.attention),
        ("resid_pdrop", s.dropout.residual),
        ("embd_pdrop", s.dropout.embedding),
    ] {
        if !(0.0..1.0).contains(&p) {
            return Err(ConfigError::BadField {
                field: field.into(),
                expected: "a probability in [0, 1)".into(),
                found: p.to_string(),
            });
        }
    }
    if let Some(m) = &s.moe
        && (m.experts == 0 || m.top_k == 0 || m.top_k > m.experts || m.experts > 4096)
    {
        return Err(ConfigError::Inconsistent {
            field: "num_experts_per_tok".into(),
            message: format!(
                "must be between 1 and the number of experts ({})",
                m.experts
            ),
        });
    }
    Ok(())
}
