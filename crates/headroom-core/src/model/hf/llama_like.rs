//! The Llama-like readers: a config class's traits ([`super::classes`]) set its biases, window,
//! experts, q/k norms, rotary share and the parts only some classes have (multi-head latent
//! attention, Llama 4's NoPE and chunked layers, Qwen3-Next's gated DeltaNet layers).

use serde_json::Value;

use super::{Cfg, ConfigError, Defaults, bad, base_spec, nonzero};
use crate::model::classes::{
    self, Bias, ConfigClass, LocalRule, MoeRule, QkNorm, RotaryKey, RouterKind, Window,
};
use crate::model::spec::{Dropout, LinearAttention, Llama4, Mla, ModelSpec, Moe, Router};

/// A Llama-like model of `class`'s layout with the class defaults `defaults` (a multimodal
/// wrapper's text config has its own defaults: [`TEXT_CLASSES`]).
pub(super) fn llama_like(
    cfg: &Cfg,
    class: &ConfigClass,
    defaults: &[u32; 8],
) -> Result<ModelSpec, ConfigError> {
    let t = &class.traits;
    let d = Defaults::from_row(defaults);
    let hidden = cfg.u64_or("hidden_size", d.hidden)?;
    let heads = cfg.heads("num_attention_heads", d.heads)?;
    nonzero("num_attention_heads", heads)?;
    let kv_default = if d.kv_heads == 0 { heads } else { d.kv_heads };
    let kv_heads = cfg.u64_or("num_key_value_heads", kv_default)?;
    // A class that declares no head_dim falls back to `getattr(config, "head_dim", hidden_size
    // // num_attention_heads)` (transformers 5.23), as Llama does.
    let head_dim_default = match t.head_dim {
        0 => hidden / heads,
        declared => u64::from(declared),
    };
    let mla = if t.mla { Some(mla(cfg)?) } else { None };
    // Multi-head latent attention expands k and v to every head (`kv_b_proj`), and its q/k
    // heads are the unrotated and rotated parts together; the config's head_dim (the RoPE
    // width, set by DeepseekV3Config itself) and num_key_value_heads do not shape it.
    let (head_dim, kv_heads) = match &mla {
        Some(m) => (m.qk_nope_head_dim + m.qk_rope_head_dim, heads),
        None => (cfg.u64_or("head_dim", head_dim_default)?, kv_heads),
    };
    let layers = cfg.layers("num_hidden_layers", d.layers)?;
    // Read whatever the class does with it: a malformed value is named for every class.
    cfg.bool_or("attention_bias", false)?;
    let (qkv_bias, o_bias) = match t.bias {
        Bias::Fixed(b) => (b, false),
        Bias::UseBias => {
            let b = cfg.bool_or("use_bias", false)?;
            (b, b)
        }
        Bias::Separate { qkv, o } => (
            cfg.bool_or("attention_bias", qkv)?,
            cfg.bool_or("attention_out_bias", o)?,
        ),
        Bias::Key { key, default, o } => {
            let b = cfg.bool_or(key, default)?;
            (b, o && b)
        }
    };
    let moe = class_moe(cfg, t, layers, d.intermediate)?;
    let attention_dropout = cfg.f64_or("attention_dropout", t.dropout())?;
    let residual_dropout = if t.residual_dropout {
        cfg.f64_or("residual_dropout", t.dropout())?
    } else {
        0.0
    };
    let sliding_window = match t.window {
        Window::Default(w) => cfg.opt_u64("sliding_window")?.or(Some(w.into())),
        Window::OptIn => {
            if cfg.bool_or("use_sliding_window", false)? {
                cfg.opt_u64("sliding_window")?
            } else {
                None
            }
        }
        // An explicit null disables it.
        Window::NullDisables(w) => match cfg.0.get("sliding_window") {
            Some(Value::Null) => None,
            None => Some(w.into()),
            Some(_) => cfg.opt_u64("sliding_window")?,
        },
        Window::Off => None,
        Window::Key => cfg.opt_u64("sliding_window")?,
    };
    // Kept only where it differs from the type's default layout (so that links stay short).
    let sliding_layers = match sliding_window {
        Some(_) => {
            sliding_layers(cfg, t.local_rule, layers)?.filter(|&n| n != t.local_share.of(layers))
        }
        None => None,
    };
    Ok(ModelSpec {
        model_type: class.model_type.to_string(),
        mtp_modules: if t.mtp { mtp_modules(cfg)? } else { 0 },
        mla,
        llama4: if t.llama4 {
            Some(llama4(cfg, layers)?)
        } else {
            None
        },
        linear_attention: if t.qwen3_next {
            Some(linear_attention(cfg, layers)?)
        } else {
            None
        },
        family: t.family,
        vocab: cfg.u64_or("vocab_size", d.vocab)?,
        hidden,
        layers,
        heads,
        kv_heads,
        head_dim,
        intermediate: if t.llama4 {
            cfg.u64_or("intermediate_size_mlp", 16384)?
        } else {
            cfg.u64_or("intermediate_size", d.intermediate)?
        },
        activation: cfg.str_or("hidden_act", "silu")?,
        norms_per_layer: t.norms_per_layer.into(),
        // Llama 4's weightless L2 norm is `llama4`'s.
        qk_norm: match t.qk_norm {
            QkNorm::No => false,
            QkNorm::Yes | QkNorm::Whole | QkNorm::AfterRope => true,
            QkNorm::Key => cfg.bool_or("use_qk_norm", false)?,
        },
        qkv_bias,
        o_bias,
        mlp_bias: if t.mlp_bias_key {
            cfg.bool_or("mlp_bias", false)?
        } else {
            t.bias == Bias::UseBias && qkv_bias
        },
        tie_embeddings: cfg.bool_or("tie_word_embeddings", d.tie)?,
        embed_proj_dim: hidden,
        moe,
        dropout: Dropout {
            attention: attention_dropout,
            residual: residual_dropout,
            embedding: 0.0,
        },
        max_positions: cfg.u64_or("max_position_embeddings", d.max_positions)?,
        rotary_fraction: rotary_fraction(cfg, t, head_dim)?,
        sliding_window,
        sliding_layers,
        ..base_spec()
    })
}

/// A Llama-like class's experts ([`MoeRule`]); `intermediate` is the class's default width.
pub(super) fn class_moe(
    cfg: &Cfg,
    t: &classes::Traits,
    layers: u64,
    intermediate: u64,
) -> Result<Option<Moe>, ConfigError> {
    Ok(match t.moe {
        MoeRule::None => None,
        MoeRule::Llama4 => llama4_moe(cfg, layers, intermediate)?,
        MoeRule::Uniform {
            experts,
            num_experts_key,
            top_k,
            norm_topk,
        } => Some(Moe {
            experts: match cfg.opt_u64("num_local_experts")? {
                Some(n) => n,
                None if num_experts_key => cfg.u64_or("num_experts", experts.into())?,
                None => experts.into(),
            },
            top_k: cfg.u64_or("num_experts_per_tok", top_k.into())?,
            expert_intermediate: cfg.u64_or("intermediate_size", intermediate)?,
            shared_intermediate: 0,
            shared_gate: false,
            sparse_layers: layers,
            norm_topk: match norm_topk {
                Some(fixed) => fixed,
                None => cfg.bool_or("norm_topk_prob", false)?,
            },
            router: Router::Softmax,
        }),
        MoeRule::Qwen {
            experts,
            top_k,
            expert,
            shared,
            norm_topk_key,
        } => {
            let experts = cfg.u64_or("num_experts", experts.into())?;
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
                top_k: cfg.u64_or("num_experts_per_tok", top_k.into())?,
                expert_intermediate: cfg.u64_or("moe_intermediate_size", expert.into())?,
                shared_intermediate: if shared > 0 {
                    cfg.u64_or("shared_expert_intermediate_size", shared.into())?
                } else {
                    0
                },
                shared_gate: shared > 0,
                sparse_layers,
                // Qwen2MoeConfig and Qwen3MoeConfig default it to false (Qwen3-Next has its
                // own router inventory).
                norm_topk: norm_topk_key && cfg.bool_or("norm_topk_prob", false)?,
                router: Router::Softmax,
            })
        }
        MoeRule::Routed(defaults) => routed_moe(cfg, t.router, layers, defaults.map(u64::from))?,
    })
}

/// The share of each head RoPE rotates: the config's `partial_rotary_factor` (a fraction in
/// (0, 1]; Phi-4-mini's 0.75; at the top level or in `rope_parameters`), else its config
/// class's default: GLM-4's and GLM-4.5's 0.5,
/// Qwen3-Next's 0.25, 1 for the others. gpt-oss rotates every dimension, from cos and sin
/// tables of half the head that its `_apply_rotary_emb` applies to each half: counted as 0.5.
/// MiniMax-M2's configs give `rotary_dim` instead (a share of heads `head_dim` wide).
pub(super) fn rotary_fraction(
    cfg: &Cfg,
    t: &classes::Traits,
    head_dim: u64,
) -> Result<f64, ConfigError> {
    let default = match t.rotary_key {
        RotaryKey::Fixed => return Ok(t.rotary()),
        RotaryKey::Factor => t.rotary(),
        RotaryKey::FactorOrDim => match cfg.opt_u64("rotary_dim")? {
            Some(dim) => dim as f64 / head_dim as f64,
            None => t.rotary(),
        },
    };
    // transformers 5.x keeps it in `rope_parameters` (its standardized rope keys, where a
    // top-level key is moved to); Qwen3.5's released configs give it only there.
    let default = match cfg.0.get("rope_parameters") {
        Some(Value::Object(rope)) => match rope.get("partial_rotary_factor") {
            None | Some(Value::Null) => default,
            Some(v) => v
                .as_f64()
                .ok_or_else(|| bad("rope_parameters.partial_rotary_factor", "a number", v))?,
        },
        _ => default,
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
/// defaults). `q_lora_rank: null` means one q_proj; 0 is refused, since transformers would
/// build a zero-width q_a_proj that no model has.
pub(super) fn mla(cfg: &Cfg) -> Result<Mla, ConfigError> {
    let q_lora_rank = match cfg.0.get("q_lora_rank") {
        Some(Value::Null) => 0,
        None => 1536,
        Some(v) => match cfg.opt_u64("q_lora_rank")? {
            Some(0) | None => return Err(bad("q_lora_rank", "a positive integer or null", v)),
            Some(n) => n,
        },
    };
    Ok(Mla {
        q_lora_rank,
        kv_lora_rank: cfg.u64_or("kv_lora_rank", 512)?,
        qk_nope_head_dim: cfg.u64_or("qk_nope_head_dim", 128)?,
        qk_rope_head_dim: cfg.u64_or("qk_rope_head_dim", 64)?,
        v_head_dim: cfg.u64_or("v_head_dim", 128)?,
    })
}

/// Llama 4's MoE layers (`Llama4TextConfig`): `moe_layers`, or one in
/// `interleave_moe_layer_step` (every layer by default, Maverick's 2 alternates dense and MoE);
/// each has `num_local_experts` (16) experts of `intermediate_size`, top
/// `num_experts_per_tok` (1), and a shared expert as wide. The dense layers' MLP is
/// `intermediate_size_mlp` (the spec's `intermediate`).
pub(super) fn llama4_moe(cfg: &Cfg, layers: u64, expert: u64) -> Result<Option<Moe>, ConfigError> {
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
pub(super) fn nope_layers(cfg: &Cfg, layers: u64) -> Result<u64, ConfigError> {
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

/// Llama 4's attention keys (`Llama4TextConfig.__post_init__`):
/// `no_rope_layers` (1 = RoPE, 0 = NoPE; at least one entry per layer), or a NoPE layer every
/// `no_rope_layer_interval` (4) layers; `attention_chunk_size` (8192, null: none).
pub(super) fn llama4(cfg: &Cfg, layers: u64) -> Result<Llama4, ConfigError> {
    let nope_layers = nope_layers(cfg, layers)?;
    Ok(Llama4 {
        nope_layers,
        chunk: match cfg.0.get("attention_chunk_size") {
            Some(Value::Null) => None,
            None => Some(8192),
            Some(_) => cfg.opt_u64("attention_chunk_size")?,
        },
        qk_l2_norm: cfg.bool_or("use_qk_norm", true)?,
        temperature_tuning: cfg.bool_or("attn_temperature_tuning", true)?,
    })
}

/// Qwen3-Next's gated DeltaNet layers (`Qwen3NextConfig`):
/// `layer_types` ("linear_attention" or "full_attention" per layer), or three linear layers
/// then a full one (`full_attention_interval`, 4); 16 key heads and 32 value heads of 128, a
/// causal conv1d of kernel 4.
pub(super) fn linear_attention(cfg: &Cfg, layers: u64) -> Result<LinearAttention, ConfigError> {
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
    Ok(LinearAttention {
        layers: linear,
        key_heads: cfg.u64_or("linear_num_key_heads", 16)?,
        value_heads: cfg.u64_or("linear_num_value_heads", 32)?,
        key_head_dim: cfg.u64_or("linear_key_head_dim", 128)?,
        value_head_dim: cfg.u64_or("linear_value_head_dim", 128)?,
        conv_kernel: cfg.u64_or("linear_conv_kernel_dim", 4)?,
    })
}

/// The layers of `kind` in an explicit `layer_types` (one entry per layer, each `kind` or
/// "full_attention"), None when the config has none.
pub(super) fn count_layer_types(
    cfg: &Cfg,
    layers: u64,
    kind: &str,
) -> Result<Option<u64>, ConfigError> {
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

/// DeepSeek-V3's and GLM-4.5's `num_nextn_predict_layers` (0 when absent).
pub(super) fn mtp_modules(cfg: &Cfg) -> Result<u64, ConfigError> {
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

pub(super) fn sliding_layers(
    cfg: &Cfg,
    rule: LocalRule,
    layers: u64,
) -> Result<Option<u64>, ConfigError> {
    if let Some(n) = count_layer_types(cfg, layers, "sliding_attention")? {
        return Ok(Some(n));
    }
    let below = |layers: u64| -> Result<u64, ConfigError> {
        Ok(cfg.u64_or("max_window_layers", 28)?.min(layers))
    };
    Ok(match rule {
        LocalRule::FromMaxWindow => Some(layers - below(layers)?),
        LocalRule::EvenBelowMaxWindow => Some(below(layers)?.div_ceil(2)),
        LocalRule::NopeLayers => Some(nope_layers(cfg, layers)?),
        LocalRule::Pattern => Some(pattern_layers(cfg, layers)?),
        LocalRule::Layout => None,
    })
}

/// How many layers slide under EXAONE 4's `sliding_window_pattern` (4 when absent): an
/// integer p slides every layer i with (i + 1) % p != 0 (Exaone4Config's `__post_init__`); a
/// string of L (local) and G (global), which its released configs give with their
/// `layer_types`, repeats over the layers.
fn pattern_layers(cfg: &Cfg, layers: u64) -> Result<u64, ConfigError> {
    let local: Vec<bool> = match cfg.present("sliding_window_pattern") {
        None => return Ok(layers - layers / 4),
        Some(Value::String(s))
            if (1..=256).contains(&s.len()) && s.bytes().all(|c| c == b'L' || c == b'G') =>
        {
            s.bytes().map(|c| c == b'L').collect()
        }
        Some(v) => match v.as_u64() {
            Some(p) if p > 0 => return Ok(layers - layers / p),
            _ => {
                return Err(bad(
                    "sliding_window_pattern",
                    "a positive integer, or a string of L (local) and G (global) layers",
                    v,
                ));
            }
        },
    };
    Ok((0..layers as usize)
        .filter(|i| local[i % local.len()])
        .count() as u64)
}

/// Routed experts as DeepSeek-style configs (and links) give them: `num_local_experts`,
/// `num_experts` or `n_routed_experts` experts of `moe_intermediate_size`, top
/// `num_experts_per_tok`, `n_shared_experts` x `moe_intermediate_size` shared (or
/// `shared_expert_intermediate_size`), dense layers listed in `mlp_only_layers` (a link's form)
/// or the first `first_k_dense_replace`. `d`: the defaults of experts, expert intermediate,
/// top-k, first dense layers and shared experts. No experts: no MoE.
pub(super) fn routed_moe(
    cfg: &Cfg,
    router: RouterKind,
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
    let (router, norm_topk) = deepseek_router(cfg, router)?;
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
pub(super) fn deepseek_router(
    cfg: &Cfg,
    router: RouterKind,
) -> Result<(Router, bool), ConfigError> {
    match router {
        RouterKind::DeepseekV2 => {}
        RouterKind::DeepseekV3 => {
            return Ok((Router::DeepseekV3, cfg.bool_or("norm_topk_prob", true)?));
        }
        RouterKind::Softmax => return Ok((Router::Softmax, cfg.bool_or("norm_topk_prob", false)?)),
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
