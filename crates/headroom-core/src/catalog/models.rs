//! Model presets: real Hugging Face configs with their source and recorded parameter count.
//!
//! A model may be given by its size alone (`model=7b`): the layout of the nearest Llama 3.x or
//! Qwen2.5 preset with its layers scaled, marked approximate (`SIZED_FROM`).

use serde::Deserialize;

use crate::error::{ContentError, ScenarioError};
use crate::model::{ModelSpec, parse_config_json};

/// The presets whose layouts a model given only by its size takes ([`PresetCatalog::sized`]):
/// the current Llama 3.x and Qwen2.5 dense models, and Llama 2 13B between 8B and 70B.
pub const SIZED_FROM: [&str; 10] = [
    "qwen2.5-0.5b",
    "llama-3.2-1b",
    "qwen2.5-1.5b",
    "llama-3.2-3b",
    "qwen2.5-7b",
    "llama-3.1-8b",
    "llama-2-13b",
    "llama-3.1-70b",
    "qwen2.5-72b",
    "llama-3.1-405b",
];

/// The catalog with the configs installed at run time (the site's fetched `content/models.json`).
static INSTALLED: std::sync::OnceLock<PresetCatalog> = std::sync::OnceLock::new();

/// Whether the presets' configs are in: embedded, or installed.
pub fn model_configs_ready() -> bool {
    !super::embedded::MODEL_CONFIGS.is_empty() || INSTALLED.get().is_some()
}

/// Installs the presets from what site/pages.sh writes as `content/models.json`: `index`, the
/// presets' index (`content/models/presets.toml` as JSON), and `configs`, an object of file stem
/// to `config.json` object; checks that every preset then parses. A build with the configs
/// embedded keeps its own; a second install is ignored.
pub fn install_model_configs(json: &str) -> Result<(), ContentError> {
    let bad = |message: &str| ContentError::Parse {
        file: "content/models.json".into(),
        message: message.into(),
    };
    let value: serde_json::Value = serde_json::from_str(json).map_err(|e| bad(&e.to_string()))?;
    let (Some(index), Some(configs)) = (
        value.get("index"),
        value.get("configs").and_then(|c| c.as_object()),
    ) else {
        return Err(bad(
            "not an object of the presets' `index` and their `configs` by file name",
        ));
    };
    // Each config is read from the parsed object itself (not written out and parsed again).
    // The index too: read from the parsed value (writing it out to parse it again linked
    // serde_json's serializer into the page for this alone).
    let index = Index::deserialize(index).map_err(|e| ContentError::Parse {
        file: "models/presets.toml".into(),
        message: e.to_string(),
    })?;
    let catalog = PresetCatalog::parse_with(index, |stem| {
        configs.get(stem).map(crate::model::from_config_value)
    })?;
    let _ = INSTALLED.set(catalog);
    Ok(())
}

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
    /// Left out of the site's embedded copy (no `provenance` feature).
    #[serde(default)]
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
        Self::parse_with(index, |stem| {
            configs
                .iter()
                .find(|(id, _)| *id == stem)
                .map(|(_, text)| parse_config_json(text))
        })
    }

    /// [`PresetCatalog::parse`] with each preset's config parsed by `config(stem)` (`None`:
    /// no such file).
    fn parse_with(
        index: Index,
        config: impl Fn(&str) -> Option<Result<ModelSpec, crate::ConfigError>>,
    ) -> Result<Self, ContentError> {
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
            let spec = config(&e.id)
                .ok_or_else(|| ContentError::Field {
                    file: "models/presets.toml".into(),
                    field: "id".into(),
                    message: format!("`{}` has no {file}", e.id),
                })?
                .map_err(|err| ContentError::Parse {
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

    /// The presets compiled into the core, with their configs: embedded (the
    /// `embedded-configs` feature) or installed by [`install_model_configs`]. Empty until
    /// then: a build without the configs must install them before its first estimate.
    pub fn builtin() -> &'static PresetCatalog {
        static CATALOG: std::sync::OnceLock<PresetCatalog> = std::sync::OnceLock::new();
        static EMPTY: PresetCatalog = PresetCatalog {
            presets: Vec::new(),
        };
        if super::embedded::MODEL_CONFIGS.is_empty() {
            return INSTALLED.get().unwrap_or(&EMPTY);
        }
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

    /// A model given only by its size (`7b`, `1.5B`, `500m`), or `None` when `id` is not a
    /// size: the layout of the nearest of [`SIZED_FROM`] (by the ratio of parameter counts) with
    /// its layer count scaled to come closest to the size, marked approximate with the reason.
    pub fn sized(&self, id: &str) -> Option<Result<ModelSpec, ScenarioError>> {
        let id = id.trim().to_ascii_lowercase();
        let (number, unit) = match id.strip_suffix('b') {
            Some(n) => (n, 1e9),
            None => (id.strip_suffix('m')?, 1e6),
        };
        if number.is_empty() || !number.chars().all(|c| c.is_ascii_digit() || c == '.') {
            return None;
        }
        let target = number.parse::<f64>().ok()? * unit;
        let (lo, hi) = (
            crate::model::limits::MIN_SIZED_PARAMETERS,
            crate::model::limits::MAX_SIZED_PARAMETERS,
        );
        if !(lo as f64..=hi as f64).contains(&target) {
            return Some(Err(ScenarioError::invalid(
                "model",
                format!(
                    "a model given by its size must have from {}b to {}b parameters, found {id}",
                    lo as f64 / 1e9,
                    hi as f64 / 1e9
                ),
            )));
        }
        let distance = |p: &&Preset| libm::fabs(libm::log(p.parameters_total as f64 / target));
        let near = SIZED_FROM
            .iter()
            .filter_map(|id| self.presets.iter().find(|p| p.id == *id))
            .min_by(|a, b| distance(a).total_cmp(&distance(b)))?;
        let inv = crate::model::inventory(&near.spec);
        let per_layer = inv.per_layer().max(1) as f64;
        let layers = libm::round((target - inv.outside_layers() as f64) / per_layer).max(1.0);
        let mut spec = near.spec.clone();
        spec.layers = layers as u64;
        let total = crate::model::inventory(&spec).total();
        let b = |n: u64| format!("{:.2}B", n as f64 / 1e9);
        spec.approximate = Some(format!(
            "Given only its size ({id}), the model is estimated with the layout of {} (the \
             nearest Llama or Qwen preset, {}) at {} layers instead of {}: {} parameters. Its \
             parameters and activations are approximate.",
            near.name,
            b(near.parameters_total),
            spec.layers,
            near.spec.layers,
            b(total)
        ));
        Some(Ok(spec))
    }

    pub fn get(&self, id: &str) -> Result<&Preset, ScenarioError> {
        let key = id.trim().to_ascii_lowercase();
        self.presets
            .iter()
            .find(|p| p.id == key)
            .ok_or_else(|| ScenarioError::Unknown {
                what: "model preset",
                found: crate::error::shorten(id),
                known: self
                    .presets
                    .iter()
                    .map(|p| p.id.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }
}
