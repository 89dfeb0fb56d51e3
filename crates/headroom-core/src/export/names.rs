//! The model's names in the outputs: its Hub id, its decoder-layer class and the Python
//! expression of its layers.

use crate::catalog::PresetCatalog;
use crate::model::ModelSpec;
use crate::model::classes::Reader;
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

/// transformers' decoder-layer class of each config class (what FSDP wraps, one unit per
/// layer). Kept here, beside the exports that write it, not in `model::classes`: the site's
/// first download has no exporter, and the names would be half a kilobyte of it. A multimodal
/// wrapper that is not listed uses its text model's (Gemma 3, Mistral 3, Llama 4); a test
/// checks that every other class has one.
const LAYER_CLASSES: &[(&str, &str)] = &[
    ("llama", "LlamaDecoderLayer"),
    ("mistral", "MistralDecoderLayer"),
    ("mixtral", "MixtralDecoderLayer"),
    ("qwen2", "Qwen2DecoderLayer"),
    ("qwen2_moe", "Qwen2MoeDecoderLayer"),
    ("qwen3", "Qwen3DecoderLayer"),
    ("qwen3_moe", "Qwen3MoeDecoderLayer"),
    ("granite", "GraniteDecoderLayer"),
    ("granitemoe", "GraniteMoeDecoderLayer"),
    ("smollm3", "SmolLM3DecoderLayer"),
    ("olmo2", "Olmo2DecoderLayer"),
    ("exaone4", "Exaone4DecoderLayer"),
    ("olmo3", "Olmo3DecoderLayer"),
    ("glm4", "Glm4DecoderLayer"),
    ("glm4_moe", "Glm4MoeDecoderLayer"),
    ("cohere2", "Cohere2DecoderLayer"),
    ("gemma", "GemmaDecoderLayer"),
    ("gemma2", "Gemma2DecoderLayer"),
    ("gemma3_text", "Gemma3DecoderLayer"),
    ("phi3", "Phi3DecoderLayer"),
    ("gpt2", "GPT2Block"),
    ("gpt_neox", "GPTNeoXLayer"),
    ("opt", "OPTDecoderLayer"),
    ("starcoder2", "Starcoder2DecoderLayer"),
    ("gpt_oss", "GptOssDecoderLayer"),
    ("deepseek_v2", "DeepseekV2DecoderLayer"),
    ("deepseek_v3", "DeepseekV3DecoderLayer"),
    ("qwen2_5_vl", "Qwen2_5_VLDecoderLayer"),
    ("qwen3_vl", "Qwen3VLTextDecoderLayer"),
    ("llama4_text", "Llama4TextDecoderLayer"),
    ("qwen3_next", "Qwen3NextDecoderLayer"),
    ("qwen3_5_text", "Qwen3_5DecoderLayer"),
    ("qwen3_5_moe_text", "Qwen3_5MoeDecoderLayer"),
    ("seed_oss", "SeedOssDecoderLayer"),
    ("ernie4_5", "Ernie4_5DecoderLayer"),
    ("olmoe", "OlmoeDecoderLayer"),
    ("minimax_m2", "MiniMaxM2DecoderLayer"),
    ("hunyuan_v1_dense", "HunYuanDenseV1DecoderLayer"),
];

fn layer_class_of(model_type: &str) -> Option<&'static str> {
    LAYER_CLASSES
        .iter()
        .find(|(t, _)| *t == model_type)
        .map(|(_, c)| *c)
}

/// transformers' decoder-layer class of `spec` (a model the core does not model:
/// `DecoderLayer`).
pub fn layer_class(spec: &ModelSpec) -> &'static str {
    layer_class_of(spec.display_type())
        .or_else(|| layer_class_of(&spec.model_type))
        .unwrap_or("DecoderLayer")
}

/// Python expression of the decoder layers' list in a transformers `*ForCausalLM`.
pub(super) fn layers_expr(spec: &ModelSpec) -> &'static str {
    match spec.class().reader {
        Reader::Gpt2 => "model.transformer.h",
        Reader::GptNeox => "model.gpt_neox.layers",
        Reader::Opt => "model.model.decoder.layers",
        _ => "model.model.layers",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::classes::CLASSES;

    #[test]
    fn every_class_names_its_layer_or_is_a_wrapper_of_a_text_model() {
        for c in CLASSES {
            let wrapper = matches!(c.reader, Reader::Multimodal | Reader::Llama4);
            assert!(
                layer_class_of(c.model_type).is_some() || wrapper,
                "{} has no decoder-layer class",
                c.model_type
            );
        }
        for (t, _) in LAYER_CLASSES {
            assert!(
                crate::model::classes::find(t).is_some(),
                "{t} is not a class"
            );
        }
    }
}
