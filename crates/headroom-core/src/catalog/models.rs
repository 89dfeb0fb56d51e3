//! Model presets: real Hugging Face configs with their source and recorded parameter count.

use serde::Deserialize;

use crate::error::{ContentError, ScenarioError};
use crate::model::{ModelSpec, parse_config_json};

/// One preset: a real `config.json` and where it comes from.
#[derive(Debug, Clone, PartialEq)]
pub struct Preset {
    pub id: String,
    pub name: String,
    pub hf_id: String,
    pub source: String,
    /// transformers' `num_parameters()` for this config, recorded when the preset was added.
    pub parameters_total: u64,
    pub spec: ModelSpec,
}

// Unknown keys are errors, so a misspelt `parameters_total` fails instead of being ignored.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    id: String,
    name: String,
    hf_id: String,
    source: String,
    parameters_total: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Index {
    preset: Vec<Entry>,
}

/// All presets.
#[derive(Debug, Clone, PartialEq)]
pub struct PresetCatalog {
    pub presets: Vec<Preset>,
}

impl PresetCatalog {
    /// Parses the index (TOML or JSON) and the configs it names (`configs` holds (id, config.json
    /// text)).
    pub fn parse(index: &str, configs: &[(&str, &str)]) -> Result<Self, ContentError> {
        let index: Index = super::parse_content("models/presets.toml", index)?;
        let mut presets = Vec::new();
        for e in index.preset {
            // `get` finds the first match, so a repeated id would hide its second entry.
            if presets.iter().any(|p: &Preset| p.id == e.id) {
                return Err(ContentError::Field {
                    file: "models/presets.toml".into(),
                    field: "id".into(),
                    message: format!("`{}` appears twice", e.id),
                });
            }
            let file = format!("models/{}.json", e.id);
            let text = configs
                .iter()
                .find(|(id, _)| *id == e.id)
                .map(|(_, t)| *t)
                .ok_or_else(|| ContentError::Field {
                    file: "models/presets.toml".into(),
                    field: "id".into(),
                    message: format!("`{}` has no {file}", e.id),
                })?;
            let spec = parse_config_json(text).map_err(|err| ContentError::Parse {
                file: file.clone(),
                message: err.to_string(),
            })?;
            presets.push(Preset {
                id: e.id,
                name: e.name,
                hf_id: e.hf_id,
                source: e.source,
                parameters_total: e.parameters_total,
                spec,
            });
        }
        Ok(PresetCatalog { presets })
    }

    /// The presets compiled into the core.
    pub fn builtin() -> &'static PresetCatalog {
        static CATALOG: std::sync::OnceLock<PresetCatalog> = std::sync::OnceLock::new();
        CATALOG.get_or_init(|| {
            PresetCatalog::parse(
                super::embedded::PRESETS_JSON,
                super::embedded::MODEL_CONFIGS,
            )
            .unwrap_or(PresetCatalog {
                presets: Vec::new(),
            })
        })
    }

    pub fn get(&self, id: &str) -> Result<&Preset, ScenarioError> {
        let key = id.trim().to_ascii_lowercase();
        self.presets
            .iter()
            .find(|p| p.id == key)
            .ok_or_else(|| ScenarioError::Unknown {
                what: "model preset",
                found: crate::scenario::shorten(id),
                known: self
                    .presets
                    .iter()
                    .map(|p| p.id.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }
}
