//! A model given by its configuration in a link (`cfg=key:value~...`): the Hugging Face keys that
//! reproduce a `ModelSpec` for its family, and their reading back.
//!
//! A pasted wrapper config's `text_config` and `vision_config` keys travel as
//! `text_config.key:value` in `cfg`.

use serde_json::{Map, Value};

use crate::error::ScenarioError;
use crate::model::classes::{Bias, LocalRule, MoeRule, QkNorm, RotaryKey, Window};
use crate::model::{Family, ModelSpec, Router, Vision, VisionKind};

/// Hugging Face config keys that reproduce `spec` for its family (round-trips through
/// [`parse_config_json`]).
pub fn spec_to_config(spec: &ModelSpec) -> Map<String, Value> {
    match &spec.vision {
        Some(v) => multimodal_config(spec, v),
        None => text_config(spec),
    }
}

/// A multimodal wrapper's keys: its own, `text_config` (the text model's, as [`text_config`]
/// writes them) and `vision_config`.
fn multimodal_config(spec: &ModelSpec, v: &Vision) -> Map<String, Value> {
    let text = ModelSpec {
        vision: None,
        ..spec.clone()
    };
    let mut m = Map::new();
    let mut vc = Map::new();
    let mut put = |k: &str, x: Value| {
        vc.insert(k.to_string(), x);
    };
    let indices = |n: u64| Value::Array((0..n).map(Value::from).collect());
    put("hidden_size", v.hidden.into());
    put("intermediate_size", v.intermediate.into());
    put("patch_size", v.patch.into());
    match v.kind {
        VisionKind::Qwen25 | VisionKind::Qwen3 => {
            put("depth", v.layers.into());
            put("num_heads", v.heads.into());
            put("in_channels", v.channels.into());
            put("temporal_patch_size", v.temporal_patch.into());
            put("spatial_merge_size", v.merge.into());
            put("out_hidden_size", v.out_hidden.into());
            if v.kind == VisionKind::Qwen3 {
                put("num_position_embeddings", v.positions.into());
                put("deepstack_visual_indexes", indices(v.deepstack));
            }
        }
        VisionKind::Siglip | VisionKind::Pixtral | VisionKind::Llama4 => {
            put("num_hidden_layers", v.layers.into());
            put("num_attention_heads", v.heads.into());
            put("num_channels", v.channels.into());
            put("image_size", v.image_size.into());
            if v.kind == VisionKind::Siglip {
                put("vision_use_head", v.pooling_head.into());
            }
            if v.kind == VisionKind::Llama4 {
                put("pixel_shuffle_ratio", (1.0 / v.merge.max(1) as f64).into());
                put("projector_input_dim", v.projector_in.into());
                put("projector_output_dim", v.projector_out.into());
                put("vision_output_dim", v.vision_out.into());
            }
        }
    }
    m.insert("model_type".into(), spec.display_type().into());
    m.insert("tie_word_embeddings".into(), spec.tie_embeddings.into());
    match v.kind {
        VisionKind::Siglip => {
            m.insert("mm_tokens_per_image".into(), v.tokens_per_image.into());
        }
        VisionKind::Pixtral => {
            m.insert("spatial_merge_size".into(), v.merge.into());
            m.insert("multimodal_projector_bias".into(), v.projector_bias.into());
            if v.feature_layers > 1 {
                m.insert("vision_feature_layer".into(), indices(v.feature_layers));
            }
        }
        VisionKind::Qwen25 | VisionKind::Qwen3 | VisionKind::Llama4 => {}
    }
    m.insert("text_config".into(), Value::Object(text_config(&text)));
    m.insert("vision_config".into(), Value::Object(vc));
    m
}

/// The keys of a text-only model (or of a wrapper's text model).
fn text_config(spec: &ModelSpec) -> Map<String, Value> {
    let mut m = Map::new();
    let mut put = |k: &str, v: Value| {
        m.insert(k.to_string(), v);
    };
    put("model_type", Value::from(spec.model_type.clone()));
    put("vocab_size", spec.vocab.into());
    put("tie_word_embeddings", spec.tie_embeddings.into());
    if spec.family == Family::Gpt2 {
        gpt2_keys(spec, &mut put);
    } else {
        // Written in this order: a later key overwrites an earlier one of the same name.
        shape_keys(spec, &mut put);
        family_keys(spec, &mut put);
        bias_keys(spec, &mut put);
        window_keys(spec, &mut put);
        layer_kind_keys(spec, &mut put);
        moe_keys(spec, &mut put);
    }
    m
}

/// GPT-2's own names for its sizes and dropouts.
fn gpt2_keys(spec: &ModelSpec, put: &mut impl FnMut(&str, Value)) {
    put("n_embd", spec.hidden.into());
    put("n_layer", spec.layers.into());
    put("n_head", spec.heads.into());
    put("n_inner", spec.intermediate.into());
    put("n_positions", spec.max_positions.into());
    put("activation_function", spec.activation.clone().into());
    put("attn_pdrop", spec.dropout.attention.into());
    put("resid_pdrop", spec.dropout.residual.into());
    put("embd_pdrop", spec.dropout.embedding.into());
}

/// The sizes every other family names alike.
fn shape_keys(spec: &ModelSpec, put: &mut impl FnMut(&str, Value)) {
    let t = spec.class().traits;
    put("hidden_size", spec.hidden.into());
    put("num_hidden_layers", spec.layers.into());
    put("num_attention_heads", spec.heads.into());
    put("num_key_value_heads", spec.kv_heads.into());
    put("head_dim", spec.head_dim.into());
    put("intermediate_size", spec.intermediate.into());
    put("max_position_embeddings", spec.max_positions.into());
    put("attention_dropout", spec.dropout.attention.into());
    if spec.rotary_fraction != 1.0 && t.rotary_key != RotaryKey::Fixed {
        put("partial_rotary_factor", spec.rotary_fraction.into());
    }
}

/// The keys a family names its own way: activations, OPT's and GPT-NeoX's layouts, dropouts.
fn family_keys(spec: &ModelSpec, put: &mut impl FnMut(&str, Value)) {
    if matches!(spec.family, Family::Opt) {
        put("ffn_dim", spec.intermediate.into());
        put("word_embed_proj_dim", spec.embed_proj_dim.into());
        put("do_layer_norm_before", spec.final_norm.into());
        put("enable_bias", spec.qkv_bias.into());
        put("dropout", spec.dropout.residual.into());
        put("activation_function", spec.activation.clone().into());
    } else if matches!(spec.family, Family::Gemma) {
        put("hidden_activation", spec.activation.clone().into());
        put("attention_bias", spec.qkv_bias.into());
    } else {
        put("hidden_act", spec.activation.clone().into());
    }
    if matches!(spec.family, Family::GptNeox) {
        put("attention_bias", spec.qkv_bias.into());
        put("hidden_dropout", spec.dropout.residual.into());
        // Found by the config fuzz target: without it a link turned Pythia-style
        // sequential residuals (`use_parallel_residual: false`) into parallel ones.
        put("use_parallel_residual", spec.parallel_residual.into());
    }
    if spec.family == Family::Starcoder2 {
        put("use_bias", spec.qkv_bias.into());
        put("residual_dropout", spec.dropout.residual.into());
        put("embedding_dropout", spec.dropout.embedding.into());
    }
    if spec.family == Family::Phi3 {
        put("resid_pdrop", spec.dropout.residual.into());
        put("embd_pdrop", spec.dropout.embedding.into());
    }
}

/// Biases, q/k norms, multi-token prediction and multi-head latent attention.
fn bias_keys(spec: &ModelSpec, put: &mut impl FnMut(&str, Value)) {
    let t = spec.class().traits;
    // Cohere 2 reads `attention_bias` for q, k, v and o alike; a Cohere 2 config's
    // biases were dropped from its link before (found by the fuzz harness).
    if spec.family == Family::Cohere2
        || matches!(
            t.bias,
            Bias::Key {
                key: "attention_bias",
                o: false,
                ..
            }
        )
    {
        put("attention_bias", spec.qkv_bias.into());
    }
    if t.qk_norm == QkNorm::Key {
        put("use_qk_norm", spec.qk_norm.into());
    }
    if spec.is_gpt_oss() {
        put("attention_bias", spec.qkv_bias.into());
        if spec.sliding_window.is_none() {
            put("sliding_window", Value::Null);
        }
    }
    if spec.mtp_modules > 0 {
        put("num_nextn_predict_layers", spec.mtp_modules.into());
    }
    if let Some(mla) = &spec.mla {
        put("attention_bias", spec.qkv_bias.into());
        put("mlp_bias", spec.mlp_bias.into());
        put(
            "q_lora_rank",
            match mla.q_lora_rank {
                0 => Value::Null,
                r => r.into(),
            },
        );
        put("kv_lora_rank", mla.kv_lora_rank.into());
        put("qk_nope_head_dim", mla.qk_nope_head_dim.into());
        put("qk_rope_head_dim", mla.qk_rope_head_dim.into());
        put("v_head_dim", mla.v_head_dim.into());
    }
    if matches!(spec.family, Family::Llama | Family::Olmo2) {
        // An approximate layout is read as Llama's (`model::hf`), mlp_bias included;
        // multi-head latent attention's biases are written with its keys.
        if t.bias == Bias::UseBias {
            put("use_bias", spec.qkv_bias.into());
        } else if matches!(t.bias, Bias::Separate { .. }) {
            put("attention_bias", spec.qkv_bias.into());
            put("attention_out_bias", spec.o_bias.into());
            put("mlp_bias", spec.mlp_bias.into());
        } else if t.mlp_bias_key && spec.mla.is_none() {
            put("attention_bias", spec.o_bias.into());
            put("mlp_bias", spec.mlp_bias.into());
        } else if spec.o_bias {
            // The other Llama-like types read `attention_bias` too (q, k, v and o); a
            // Qwen3-MoE config's biases were dropped from its link before (found by
            // the fuzz harness). Written only when set, so other links are unchanged.
            put("attention_bias", true.into());
        }
        // Qwen2's fixed bias is written too, as links always had it.
        if matches!(
            t.bias,
            Bias::Fixed(true)
                | Bias::Key {
                    key: "qkv_bias",
                    ..
                }
        ) {
            put("qkv_bias", spec.qkv_bias.into());
        }
        if t.residual_dropout {
            put("residual_dropout", spec.dropout.residual.into());
        }
        if spec.sliding_window.is_none() && matches!(t.window, Window::NullDisables(_)) {
            put("sliding_window", Value::Null);
        }
    }
}

/// The sliding window and which layers use it.
fn window_keys(spec: &ModelSpec, put: &mut impl FnMut(&str, Value)) {
    let t = spec.class().traits;
    // Every family that reads a window (Llama-like, Phi-3, ...): a Phi-3 config's
    // window was dropped from its link before (found by the fuzz harness).
    if let Some(w) = spec.sliding_window {
        put("sliding_window", w.into());
        put("use_sliding_window", true.into());
        // Where the config decided how many layers slide: Qwen2/Qwen3's and Qwen2-MoE's
        // rule by `max_window_layers`, the others by listing the layers.
        if let Some(n) = spec.sliding_layers {
            match t.local_rule {
                LocalRule::FromMaxWindow => put("max_window_layers", (spec.layers - n).into()),
                LocalRule::EvenBelowMaxWindow => put("max_window_layers", (2 * n).into()),
                LocalRule::Layout | LocalRule::NopeLayers | LocalRule::Pattern => {
                    let kinds = (0..spec.layers).map(|i| {
                        Value::from(if i < n {
                            "sliding_attention"
                        } else {
                            "full_attention"
                        })
                    });
                    put("layer_types", Value::Array(kinds.collect()));
                }
            }
        }
    }
}

/// Llama 4's layers, or linear-attention layers and their sizes.
fn layer_kind_keys(spec: &ModelSpec, put: &mut impl FnMut(&str, Value)) {
    if let Some(l4) = &spec.llama4 {
        llama4_keys(spec, l4, put);
    } else if let Some(la) = &spec.linear_attention {
        put_layer_types(spec.layers, la.layers, put);
        put("linear_num_key_heads", la.key_heads.into());
        put("linear_num_value_heads", la.value_heads.into());
        put("linear_key_head_dim", la.key_head_dim.into());
        put("linear_value_head_dim", la.value_head_dim.into());
        put("linear_conv_kernel_dim", la.conv_kernel.into());
    }
}

/// The experts: how many, their width, which layers are sparse, the router's options.
fn moe_keys(spec: &ModelSpec, put: &mut impl FnMut(&str, Value)) {
    let t = spec.class().traits;
    if spec.llama4.is_some() {
        // Written by `llama4_keys`.
    } else if let Some(moe) = &spec.moe {
        if let MoeRule::Uniform { norm_topk, .. } = t.moe {
            put("num_local_experts", moe.experts.into());
            if norm_topk.is_none() && moe.norm_topk {
                put("norm_topk_prob", true.into());
            }
        } else {
            put("num_experts", moe.experts.into());
            put("moe_intermediate_size", moe.expert_intermediate.into());
            put(
                "shared_expert_intermediate_size",
                moe.shared_intermediate.into(),
            );
            // Sparse layers are written as the dense ones listed first.
            let dense: Vec<Value> = (0..spec.layers - moe.sparse_layers)
                .map(Value::from)
                .collect();
            put("mlp_only_layers", Value::Array(dense));
            // Written where it differs from the config class's default: true for
            // DeepSeek-V3 and GLM-4.5, false for the others.
            if moe.norm_topk != (moe.router == Router::DeepseekV3) {
                put("norm_topk_prob", moe.norm_topk.into());
            }
            if moe.router
                == (Router::DeepseekV2 {
                    group_limited: true,
                })
            {
                put("topk_method", "group_limited_greedy".into());
            }
        }
        put("num_experts_per_tok", moe.top_k.into());
    } else if matches!(t.moe, MoeRule::Routed(_)) {
        // A GLM-4.5 (or DeepSeek) config with no routed experts is dense; its link
        // must say so, or the class default (128 experts) comes back (found by the
        // fuzz harness).
        put("num_experts", 0.into());
    }
}

/// Llama 4's keys: the experts' width is its `intermediate_size` (the dense layers' is
/// `intermediate_size_mlp`), MoE layers listed last, NoPE layers by an interval where one gives
/// their number, else listed.
fn llama4_keys(spec: &ModelSpec, l4: &crate::model::Llama4, put: &mut impl FnMut(&str, Value)) {
    put("intermediate_size_mlp", spec.intermediate.into());
    if let Some(moe) = &spec.moe {
        put("intermediate_size", moe.expert_intermediate.into());
        put("num_local_experts", moe.experts.into());
        put("num_experts_per_tok", moe.top_k.into());
        let sparse = (spec.layers - moe.sparse_layers..spec.layers).map(Value::from);
        put("moe_layers", Value::Array(sparse.collect()));
    }
    match (1..=spec.layers + 1).find(|k| spec.layers / k == l4.nope_layers) {
        Some(k) => put("no_rope_layer_interval", k.into()),
        None => {
            let rope = (0..spec.layers).map(|i| Value::from(u64::from(i >= l4.nope_layers)));
            put("no_rope_layers", Value::Array(rope.collect()));
        }
    }
    put(
        "attention_chunk_size",
        l4.chunk.map_or(Value::Null, Value::from),
    );
    put("use_qk_norm", l4.qk_l2_norm.into());
    put("attn_temperature_tuning", l4.temperature_tuning.into());
}

/// Qwen3-Next's layer kinds: by `full_attention_interval` where one gives the number of linear
/// layers, else listed (linear layers first).
fn put_layer_types(layers: u64, linear: u64, put: &mut impl FnMut(&str, Value)) {
    match (1..=layers + 1).find(|k| layers - layers / k == linear) {
        Some(k) => put("full_attention_interval", k.into()),
        None => {
            let kinds = (0..layers).map(|i| {
                Value::from(if i < linear {
                    "linear_attention"
                } else {
                    "full_attention"
                })
            });
            put("layer_types", Value::Array(kinds.collect()));
        }
    }
}

/// Config keys whose values are lists, written in a link as their items joined by dots
/// (`layer_types` holds names, the others indices).
const LIST_KEYS: [&str; 6] = [
    "mlp_only_layers",
    "moe_layers",
    "no_rope_layers",
    "layer_types",
    "deepstack_visual_indexes",
    "vision_feature_layer",
];

/// `key:value~key:value...` of the config keys; lists as `a.b.c`, null as `null`; a
/// multimodal wrapper's `text_config` and `vision_config` keys as `text_config.key:value`.
pub fn encode_spec(spec: &ModelSpec) -> String {
    let mut items = Vec::new();
    for (k, v) in spec_to_config(spec) {
        match v {
            Value::Object(inner) => {
                for (k2, v2) in inner {
                    items.push(format!("{k}.{k2}:{}", link_value(&v2)));
                }
            }
            other => items.push(format!("{k}:{}", link_value(&other))),
        }
    }
    items.join("~")
}

/// A config value as a link writes it: a list's items joined by dots, a string as itself, a
/// number or boolean as JSON writes it. Written out rather than serialized: serde_json's
/// serializer was in the page's download for this alone. (`spec_to_config` writes no deeper
/// nesting; an object there would be written as `{}`.)
fn link_value(v: &Value) -> String {
    match v {
        Value::Array(items) => items.iter().map(link_value).collect::<Vec<_>>().join("."),
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Null => "null".into(),
        Value::Object(_) => "{}".into(),
    }
}

pub(super) fn decode_spec(v: &str) -> Result<ModelSpec, ScenarioError> {
    let mut m = Map::new();
    let mut nested: [(&str, Map<String, Value>); 2] =
        [("text_config", Map::new()), ("vision_config", Map::new())];
    for item in v.split('~') {
        let (k, raw) = item.split_once(':').ok_or_else(|| {
            ScenarioError::invalid(
                "cfg",
                format!("`{}` is not key:value", crate::error::shorten(item)),
            )
        })?;
        let (section, k) = match k.split_once('.') {
            Some((p, rest)) if nested.iter().any(|(n, _)| *n == p) => (Some(p), rest),
            _ => (None, k),
        };
        let value = if k == "layer_types" {
            // Names (checked by the config parser).
            let items = raw.split('.').filter(|x| !x.is_empty()).map(Value::from);
            Value::Array(items.collect())
        } else if LIST_KEYS.contains(&k) && !(k == "vision_feature_layer" && raw.starts_with('-')) {
            let items: Result<Vec<Value>, _> = raw
                .split('.')
                .filter(|x| !x.is_empty())
                .map(|x| x.parse::<u64>().map(Value::from))
                .collect();
            Value::Array(items.map_err(|_| {
                ScenarioError::invalid("cfg", format!("{k} must be numbers separated by dots"))
            })?)
        } else if raw == "null" {
            Value::Null
        } else if raw == "true" || raw == "false" {
            Value::Bool(raw == "true")
        } else if let Ok(n) = raw.parse::<u64>() {
            Value::from(n)
        } else if let Ok(f) = raw.parse::<f64>() {
            Value::from(f)
        } else {
            Value::from(raw.to_string())
        };
        match nested.iter_mut().find(|(n, _)| Some(*n) == section) {
            Some((_, inner)) => {
                inner.insert(k.to_string(), value);
            }
            None => {
                m.insert(k.to_string(), value);
            }
        }
    }
    for (name, inner) in nested {
        if !inner.is_empty() {
            m.insert(name.to_string(), Value::Object(inner));
        }
    }
    // Read as a value, not re-printed and re-parsed: serde_json's text parser can land one ulp
    // off (8.421026719040053e-47 came back as ...052e-47; found by the fuzz harness).
    crate::model::from_config_value(&Value::Object(m)).map_err(ScenarioError::from)
}
