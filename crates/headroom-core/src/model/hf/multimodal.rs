//! The multimodal wrappers: a text model from `text_config` and a vision tower with its
//! projector from `vision_config` (Gemma 3, Qwen2.5-VL, Qwen3-VL, Mistral 3, Llama 4).
//!
//! The text model is read from `text_config` as its own `model_type` would be (also Qwen2.5-VL's
//! released flat layout, and Mistral3Config's default sub-configs); the tower and projector go into
//! `ModelSpec::vision` (`Vision`: SigLIP, the Qwen-VL ViTs with their mergers and DeepStack,
//! Pixtral with Mistral 3's patch-merging projector). The spec's `model_type` stays the text
//! model's; `display_type` names the wrapper. A `llama4` config is its `text_config` (a
//! `llama4_text` model) with its `vision_config` tower (`VisionKind::Llama4`: unfolded patches,
//! class token, pixel-shuffle adapter, projector), as Llama4ForConditionalGeneration builds it.
//! `Vision::tokens_per_image` is each processor's count for the assumed image: Gemma 3's fixed 896
//! px, and 896 px assumed for Qwen-VL and Pixtral (`VISION_IMAGE_PX`).

use serde_json::{Map, Value};

use super::llama_like::llama_like;
use super::{Cfg, ConfigError, bad, from_config_value};
use crate::model::classes::{self, Reader, TEXT_CLASSES};
use crate::model::spec::{ModelSpec, Vision, VisionKind};

/// A `llama4` config (`Llama4Config`) is the multimodal model its checkpoints are
/// (`Llama4ForConditionalGeneration`): the text model of its `text_config` (a `llama4_text`
/// model) and the vision tower, adapter and projector of its `vision_config`, with
/// Llama4VisionConfig's defaults where a key is absent.
pub(super) fn llama4_wrapper(obj: &Map<String, Value>) -> Result<ModelSpec, ConfigError> {
    let mut text = match obj.get("text_config") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(v) => return Err(bad("text_config", "an object (the text model's config)", v)),
    };
    text.insert("model_type".into(), Value::from("llama4_text"));
    let class = classes::of("llama4_text");
    let mut spec = llama_like(&Cfg(&text), class, &class.defaults)?;
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

/// A multimodal wrapper (`Gemma3ForConditionalGeneration`, `Qwen2_5_VLForConditionalGeneration`,
/// `Qwen3VLForConditionalGeneration`, `Mistral3ForConditionalGeneration`): the text model from
/// `text_config`, read as its own `model_type` is (Qwen2.5-VL's released configs keep the text
/// keys at the top level, which `Qwen2_5_VLConfig` reads as the text config), and the vision
/// tower and projector from `vision_config` and the wrapper's keys. The wrapper's
/// `tie_word_embeddings` decides the tie (transformers 5.23's `tie_weights` reads the top-level
/// config): True by default for Gemma 3 and Mistral 3, False for Qwen-VL (Qwen2.5-VL also ties
/// when its text config does, `Qwen2_5_VLConfig.__post_init__`).
pub(super) fn multimodal(cfg: &Cfg, wrapper: &str) -> Result<ModelSpec, ConfigError> {
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
        w => classes::WRAPPED_TEXT
            .iter()
            .find(|(wrapper, _)| *wrapper == w)
            .map_or("mistral", |(_, text)| text),
    };
    let text_type = if flat {
        text_default_type.to_string()
    } else {
        text.str_or("model_type", text_default_type)?
    };
    let text_class = TEXT_CLASSES.iter().find(|(t, _, _)| *t == text_type);
    let mut spec = match (text_class, classes::find(&text_type)) {
        // A wrapper's own text config: its defaults with a text class's layout.
        (Some((_, layout, defaults)), _) => llama_like(&text, classes::of(layout), defaults)?,
        (None, Some(c)) if c.reader != Reader::Multimodal => {
            let t = c.model_type;
            let mut m = text.0.clone();
            m.insert("model_type".into(), Value::from(t));
            from_config_value(&Value::Object(m))?
        }
        _ => {
            let t = text_type.as_str();
            return Err(ConfigError::BadField {
                field: "text_config.model_type".into(),
                expected: format!("a text model type Headroom models ({text_default_type}, ...)"),
                found: crate::error::shorten(t),
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
        "gemma3" => siglip_vision(cfg, &v, spec.hidden)?,
        "qwen2_5_vl" => qwen_vl_vision(&v, None)?,
        "qwen3_vl" => qwen_vl_vision(&v, Some(3))?,
        // Qwen3.5's tower is Qwen3-VL's without DeepStack (Qwen3_5VisionModel deletes it).
        "qwen3_5" | "qwen3_5_moe" => qwen_vl_vision(&v, Some(0))?,
        _ => pixtral_vision(cfg, &v, spec.hidden)?,
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

/// SiglipVisionConfig's defaults (Gemma3Config builds one when vision_config is absent).
fn siglip_vision(cfg: &Cfg, v: &Cfg, text_hidden: u64) -> Result<Vision, ConfigError> {
    Ok(Vision {
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
        out_hidden: text_hidden,
        deepstack: 0,
        pooling_head: v.bool_or("vision_use_head", true)?,
        feature_layers: 1,
        projector_bias: false,
        projector_in: 0,
        projector_out: 0,
        vision_out: 0,
    })
}

/// Qwen2_5_VLVisionConfig's and Qwen3VLVisionConfig's defaults (Qwen3_5VisionConfig's are
/// Qwen3-VL's). `deepstack_default`: None for Qwen2.5-VL's tower, else Qwen3-VL's with this many
/// DeepStack mergers when `deepstack_visual_indexes` is absent (0: none whatever it says).
fn qwen_vl_vision(v: &Cfg, deepstack_default: Option<u64>) -> Result<Vision, ConfigError> {
    let q3 = deepstack_default.is_some();
    let deepstack = match (deepstack_default, v.present("deepstack_visual_indexes")) {
        (Some(0) | None, _) => 0,
        (_, Some(Value::Array(items))) => items.len() as u64,
        (_, Some(other)) => {
            return Err(bad(
                "vision_config.deepstack_visual_indexes",
                "a list",
                other,
            ));
        }
        (Some(n), None) => n,
    };
    Ok(Vision {
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
        deepstack,
        pooling_head: false,
        feature_layers: 1,
        projector_bias: true,
        projector_in: 0,
        projector_out: 0,
        vision_out: 0,
    })
}

/// PixtralVisionConfig's defaults; the merge and the projector are Mistral3Config's.
fn pixtral_vision(cfg: &Cfg, v: &Cfg, text_hidden: u64) -> Result<Vision, ConfigError> {
    Ok(Vision {
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
        out_hidden: text_hidden,
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
    })
}

/// Mistral3Config's default text (`"text"`) or vision config: Mistral Small 3.1's
/// (configuration_mistral3.py, `sub_configs_defaults`).
pub(super) fn mistral3_default(which: &str) -> Map<String, Value> {
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
