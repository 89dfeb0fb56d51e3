//! Hugging Face `config.json` to [`ModelSpec`], with transformers' defaults for missing keys.
//!
//! Defaults are those of the transformers 5.x configuration classes (`LlamaConfig`,
//! `GPT2Config`, ...), so a pasted config that leaves a key out means what it means there.
//!
//! The readers are split by layout: `llama_like.rs` reads every Llama-like class from its traits,
//! `others.rs` Gemma, Phi-3, GPT-2, GPT-NeoX, OPT and StarCoder2, `multimodal.rs` the wrappers. A
//! `model_type` Headroom does not model is read, when it has the standard keys, as the closest
//! known layout (Llama's, or MoE when it names experts), with `ModelSpec::approximate` saying why:
//! a warning, and the parameter count and every exact component become assumed. Without those keys
//! the error names the missing ones.

use serde_json::{Map, Value};

mod llama_like;
mod multimodal;
mod others;

pub use llama_like::MAX_MTP_MODULES;

use llama_like::{llama_like, routed_moe};
use multimodal::{llama4_wrapper, multimodal};
use others::{gemma, gpt_neox, gpt2, opt, phi3, starcoder2};

use super::classes::{self, Reader, RouterKind};
use super::spec::{Dropout, Family, MlpKind, ModelSpec, NormKind};
use crate::error::ConfigError;
use crate::model::limits::{MAX_HEADS, MAX_LAYERS};

/// The `model_type`s the core understands, in the order of [`classes::CLASSES`].
pub fn supported_model_types() -> impl Iterator<Item = &'static str> {
    classes::CLASSES.iter().map(|c| c.model_type)
}

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
    let supported = supported_model_types().collect::<Vec<_>>().join(", ");
    let model_type = match obj.get("model_type") {
        Some(Value::String(s)) => s.clone(),
        Some(other) => {
            return Err(ConfigError::BadField {
                field: "model_type".into(),
                expected: "a string".into(),
                found: crate::error::shorten(&crate::error::shown_json(other)),
            });
        }
        None => return Err(ConfigError::MissingModelType { supported }),
    };
    let spec = match classes::find(&model_type) {
        Some(class) => match class.reader {
            Reader::LlamaLike => llama_like(&cfg, class, &class.defaults)?,
            Reader::Llama4 => llama4_wrapper(obj)?,
            Reader::Gemma => gemma(&cfg, class)?,
            Reader::Phi3 => phi3(&cfg)?,
            Reader::Gpt2 => gpt2(&cfg)?,
            Reader::GptNeox => gpt_neox(&cfg)?,
            Reader::Opt => opt(&cfg)?,
            Reader::Starcoder2 => starcoder2(&cfg)?,
            Reader::Multimodal => multimodal(&cfg, class.model_type)?,
        },
        None => approximate(&cfg)?,
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
        found: crate::error::shorten(&crate::error::shown_json(found)),
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

impl Defaults {
    /// A class's row ([`ConfigClass::defaults`]).
    fn from_row(row: &[u32; 8]) -> Self {
        let row = row.map(u64::from);
        Defaults {
            vocab: row[0],
            hidden: row[1],
            intermediate: row[2],
            layers: row[3],
            heads: row[4],
            kv_heads: row[5],
            max_positions: row[6],
            tie: row[7] == 1,
        }
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
            supported: super::supported_model_types()
                .collect::<Vec<_>>()
                .join(", ")
                .into(),
        });
    }
    let mut spec = llama_like(cfg, &classes::APPROXIMATE, &classes::APPROXIMATE.defaults)?;
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
        RouterKind::Softmax,
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

/// What every reader's spec starts from: a dense decoder without extras (no experts, latent
/// attention, vision tower, window or multi-token prediction), two RMSNorms and a gated MLP per
/// layer, unbiased Linears, RoPE over the whole head, no dropout. Each reader sets the
/// dimensions and what its class changes; the zero dimensions here are never kept.
fn base_spec() -> ModelSpec {
    ModelSpec {
        model_type: String::new(),
        approximate: None,
        parallel_residual: false,
        mtp_modules: 0,
        mtp_trained: 0,
        mla: None,
        vision: None,
        llama4: None,
        linear_attention: None,
        family: Family::Llama,
        vocab: 0,
        hidden: 0,
        layers: 0,
        heads: 0,
        kv_heads: 0,
        head_dim: 0,
        intermediate: 0,
        mlp: MlpKind::Gated,
        activation: String::new(),
        norm: NormKind::RmsNorm,
        norms_per_layer: 2,
        qk_norm: false,
        qkv_bias: false,
        o_bias: false,
        mlp_bias: false,
        tie_embeddings: false,
        position_embeddings: 0,
        embed_proj_dim: 0,
        moe: None,
        final_norm: true,
        dropout: Dropout::default(),
        max_positions: 0,
        rotary_fraction: 1.0,
        sliding_window: None,
        sliding_layers: None,
    }
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
    crate::model::limits::check_model(s)?;
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
