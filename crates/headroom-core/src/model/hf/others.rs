//! The readers of the classes that are not Llama-like: Gemma 1/2/3's text models, Phi-3, GPT-2,
//! GPT-NeoX, OPT and StarCoder2.

use super::llama_like::rotary_fraction;
use super::{Cfg, ConfigError, Defaults, base_spec, nonzero};
use crate::model::classes::{self, ConfigClass, QkNorm, Window};
use crate::model::spec::{Dropout, Family, MlpKind, ModelSpec, NormKind};

/// Gemma 1/2/3's text models: GeGLU, scaled embeddings, (1 + w) RMSNorms; head_dim 256 by
/// default; the class's traits say the norms per layer, q/k norms and the window.
pub(super) fn gemma(cfg: &Cfg, class: &ConfigClass) -> Result<ModelSpec, ConfigError> {
    let t = &class.traits;
    let d = Defaults::from_row(&class.defaults);
    let hidden = cfg.u64_or("hidden_size", d.hidden)?;
    let heads = cfg.heads("num_attention_heads", d.heads)?;
    nonzero("num_attention_heads", heads)?;
    let act_default = "gelu_pytorch_tanh";
    let activation = match cfg.present("hidden_activation") {
        Some(_) => cfg.str_or("hidden_activation", act_default)?,
        None => cfg.str_or("hidden_act", act_default)?,
    };
    let attention_bias = cfg.bool_or("attention_bias", false)?;
    Ok(ModelSpec {
        model_type: class.model_type.to_string(),
        family: Family::Gemma,
        vocab: cfg.u64_or("vocab_size", d.vocab)?,
        hidden,
        layers: cfg.layers("num_hidden_layers", d.layers)?,
        heads,
        kv_heads: cfg.u64_or("num_key_value_heads", d.kv_heads)?,
        head_dim: cfg.u64_or("head_dim", 256)?,
        intermediate: cfg.u64_or("intermediate_size", d.intermediate)?,
        activation,
        norms_per_layer: t.norms_per_layer.into(),
        qk_norm: t.qk_norm == QkNorm::Yes,
        qkv_bias: attention_bias,
        o_bias: attention_bias,
        tie_embeddings: cfg.bool_or("tie_word_embeddings", d.tie)?,
        embed_proj_dim: hidden,
        dropout: Dropout {
            attention: cfg.f64_or("attention_dropout", 0.0)?,
            residual: 0.0,
            embedding: 0.0,
        },
        max_positions: cfg.u64_or("max_position_embeddings", d.max_positions)?,
        sliding_window: match t.window {
            Window::Default(w) => cfg.opt_u64("sliding_window")?.or(Some(w.into())),
            _ => None,
        },
        ..base_spec()
    })
}

pub(super) fn phi3(cfg: &Cfg) -> Result<ModelSpec, ConfigError> {
    let hidden = cfg.u64_or("hidden_size", 3072)?;
    let heads = cfg.heads("num_attention_heads", 32)?;
    nonzero("num_attention_heads", heads)?;
    let head_dim = cfg.u64_or("head_dim", hidden / heads)?;
    Ok(ModelSpec {
        model_type: "phi3".into(),
        family: Family::Phi3,
        vocab: cfg.u64_or("vocab_size", 32064)?,
        hidden,
        layers: cfg.layers("num_hidden_layers", 32)?,
        heads,
        kv_heads: cfg.u64_or("num_key_value_heads", heads)?,
        head_dim,
        intermediate: cfg.u64_or("intermediate_size", 8192)?,
        activation: cfg.str_or("hidden_act", "silu")?,
        tie_embeddings: cfg.bool_or("tie_word_embeddings", false)?,
        embed_proj_dim: hidden,
        dropout: Dropout {
            attention: cfg.f64_or("attention_dropout", 0.0)?,
            residual: cfg.f64_or("resid_pdrop", 0.0)?,
            embedding: cfg.f64_or("embd_pdrop", 0.0)?,
        },
        max_positions: cfg.u64_or("max_position_embeddings", 4096)?,
        rotary_fraction: rotary_fraction(cfg, &classes::of("phi3").traits, head_dim)?,
        sliding_window: cfg.opt_u64("sliding_window")?,
        ..base_spec()
    })
}

pub(super) fn gpt2(cfg: &Cfg) -> Result<ModelSpec, ConfigError> {
    let hidden = cfg.u64_or("n_embd", 768)?;
    let heads = cfg.heads("n_head", 12)?;
    nonzero("n_head", heads)?;
    Ok(ModelSpec {
        model_type: "gpt2".into(),
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
        qkv_bias: true,
        o_bias: true,
        mlp_bias: true,
        tie_embeddings: cfg.bool_or("tie_word_embeddings", true)?,
        position_embeddings: cfg.u64_or("n_positions", 1024)?,
        embed_proj_dim: hidden,
        dropout: Dropout {
            attention: cfg.f64_or("attn_pdrop", 0.1)?,
            residual: cfg.f64_or("resid_pdrop", 0.1)?,
            embedding: cfg.f64_or("embd_pdrop", 0.1)?,
        },
        max_positions: cfg.u64_or("n_positions", 1024)?,
        ..base_spec()
    })
}

pub(super) fn gpt_neox(cfg: &Cfg) -> Result<ModelSpec, ConfigError> {
    let hidden = cfg.u64_or("hidden_size", 6144)?;
    let heads = cfg.heads("num_attention_heads", 64)?;
    nonzero("num_attention_heads", heads)?;
    let bias = cfg.bool_or("attention_bias", true)?;
    Ok(ModelSpec {
        model_type: "gpt_neox".into(),
        parallel_residual: cfg.bool_or("use_parallel_residual", true)?,
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
        qkv_bias: bias,
        o_bias: bias,
        mlp_bias: true,
        tie_embeddings: cfg.bool_or("tie_word_embeddings", false)?,
        embed_proj_dim: hidden,
        dropout: Dropout {
            attention: cfg.f64_or("attention_dropout", 0.0)?,
            residual: cfg.f64_or("hidden_dropout", 0.0)?,
            embedding: 0.0,
        },
        max_positions: cfg.u64_or("max_position_embeddings", 2048)?,
        ..base_spec()
    })
}

pub(super) fn opt(cfg: &Cfg) -> Result<ModelSpec, ConfigError> {
    let hidden = cfg.u64_or("hidden_size", 768)?;
    let heads = cfg.heads("num_attention_heads", 12)?;
    nonzero("num_attention_heads", heads)?;
    let bias = cfg.bool_or("enable_bias", true)?;
    let max_positions = cfg.u64_or("max_position_embeddings", 2048)?;
    let final_norm = cfg.bool_or("do_layer_norm_before", true)?
        && !cfg.bool_or("_remove_final_layer_norm", false)?;
    Ok(ModelSpec {
        model_type: "opt".into(),
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
        qkv_bias: bias,
        o_bias: bias,
        mlp_bias: bias,
        tie_embeddings: cfg.bool_or("tie_word_embeddings", true)?,
        // OPT's learned positions carry an offset of 2 rows.
        position_embeddings: max_positions + 2,
        embed_proj_dim: cfg.u64_or("word_embed_proj_dim", hidden)?,
        final_norm,
        dropout: Dropout {
            attention: cfg.f64_or("attention_dropout", 0.0)?,
            residual: cfg.f64_or("dropout", 0.1)?,
            embedding: 0.0,
        },
        max_positions,
        ..base_spec()
    })
}

/// Starcoder2Config's defaults are StarCoder2-3B's shape; `use_bias` covers every Linear but
/// lm_head, and head_dim is `hidden_size / num_attention_heads` unless given.
pub(super) fn starcoder2(cfg: &Cfg) -> Result<ModelSpec, ConfigError> {
    let hidden = cfg.u64_or("hidden_size", 3072)?;
    let heads = cfg.heads("num_attention_heads", 24)?;
    let bias = cfg.bool_or("use_bias", true)?;
    Ok(ModelSpec {
        model_type: "starcoder2".into(),
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
        qkv_bias: bias,
        o_bias: bias,
        mlp_bias: bias,
        tie_embeddings: cfg.bool_or("tie_word_embeddings", true)?,
        embed_proj_dim: hidden,
        dropout: Dropout {
            attention: cfg.f64_or("attention_dropout", 0.0)?,
            residual: cfg.f64_or("residual_dropout", 0.0)?,
            embedding: cfg.f64_or("embedding_dropout", 0.0)?,
        },
        max_positions: cfg.u64_or("max_position_embeddings", 4096)?,
        sliding_window: cfg.opt_u64("sliding_window")?,
        ..base_spec()
    })
}
