//! The model's names in the outputs: its Hub id, its decoder-layer class and the Python
//! expression of its layers.

use crate::catalog::PresetCatalog;
use crate::model::ModelSpec;
use crate::scenario::{ModelChoice, Scenario};

/// Model id for `from_pretrained`: the preset's Hub id; a placeholder for custom configs and
/// for the stand-ins of the worked examples, which are not published models.
pub fn model_path(scen: &Scenario) -> String {
    if let ModelChoice::Preset(id) = &scen.model
        && let Ok(p) = PresetCatalog::builtin().get(id)
        && !p.name.contains("not a published model")
    {
        return p.hf_id.clone();
    }
    "path/to/your/model".into()
}

/// transformers' decoder-layer class per `model_type` (what FSDP wraps, one unit per layer).
pub fn layer_class(spec: &ModelSpec) -> &'static str {
    // A multimodal wrapper's text model has its own layer class (Gemma 3 and Mistral 3 reuse
    // the text model's).
    match spec.vision.map(|v| v.kind) {
        Some(crate::model::VisionKind::Qwen25) => return "Qwen2_5_VLDecoderLayer",
        Some(crate::model::VisionKind::Qwen3) => return "Qwen3VLTextDecoderLayer",
        _ => {}
    }
    match spec.model_type.as_str() {
        "llama" => "LlamaDecoderLayer",
        "mistral" => "MistralDecoderLayer",
        "mixtral" => "MixtralDecoderLayer",
        "qwen2" => "Qwen2DecoderLayer",
        "qwen2_moe" => "Qwen2MoeDecoderLayer",
        "qwen3" => "Qwen3DecoderLayer",
        "qwen3_moe" => "Qwen3MoeDecoderLayer",
        "gemma" => "GemmaDecoderLayer",
        "gemma2" => "Gemma2DecoderLayer",
        "gemma3_text" => "Gemma3DecoderLayer",
        "phi3" => "Phi3DecoderLayer",
        "gpt2" => "GPT2Block",
        "gpt_neox" => "GPTNeoXLayer",
        "opt" => "OPTDecoderLayer",
        "granite" => "GraniteDecoderLayer",
        "granitemoe" => "GraniteMoeDecoderLayer",
        "smollm3" => "SmolLM3DecoderLayer",
        "olmo2" => "Olmo2DecoderLayer",
        "olmo3" => "Olmo3DecoderLayer",
        "glm4" => "Glm4DecoderLayer",
        "glm4_moe" => "Glm4MoeDecoderLayer",
        "cohere2" => "Cohere2DecoderLayer",
        "starcoder2" => "Starcoder2DecoderLayer",
        "gpt_oss" => "GptOssDecoderLayer",
        "deepseek_v2" => "DeepseekV2DecoderLayer",
        "deepseek_v3" => "DeepseekV3DecoderLayer",
        "llama4_text" => "Llama4TextDecoderLayer",
        "qwen3_next" => "Qwen3NextDecoderLayer",
        _ => "DecoderLayer",
    }
}

/// Python expression of the decoder layers' list in a transformers `*ForCausalLM`.
pub(super) fn layers_expr(spec: &ModelSpec) -> &'static str {
    match spec.model_type.as_str() {
        "gpt2" => "model.transformer.h",
        "gpt_neox" => "model.gpt_neox.layers",
        "opt" => "model.model.decoder.layers",
        _ => "model.model.layers",
    }
}
