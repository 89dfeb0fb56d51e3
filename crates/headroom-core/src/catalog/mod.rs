//! Content compiled into the core, or fetched and installed by the site: the GPU catalog, model
//! presets, named scenarios, calibrations.

pub mod gpus;
pub mod models;

/// The content files, embedded by `build.rs`: JSON files as they are, TOML files converted to
/// JSON (`GPUS_JSON` is `content/gpus.toml`, `PRESETS_JSON` is `content/models/presets.toml`,
/// `SCENARIO_FILES` are `content/scenarios/*.toml`, `CLAIM_FILES` `content/claims/*.toml`).
pub mod embedded {
    include!(concat!(env!("OUT_DIR"), "/content.rs"));
}

use serde::de::DeserializeOwned;

/// A line of content/sources.toml, `[table] key = "text"` (where a breakdown figure or an
/// optimizer's states come from), or "" in a build without the `source-text` feature (the site,
/// which shows them from its fetched help file).
pub fn source_text(table: &str, key: &str) -> &'static str {
    embedded::SOURCES
        .iter()
        .find(|(k, _)| k.strip_prefix(table).and_then(|r| r.strip_prefix('.')) == Some(key))
        .map_or("", |(_, text)| text)
}

use crate::error::ContentError;

/// Parses content text: JSON (what the core embeds), or TOML with the `toml` feature (files
/// people write, such as a scenario file passed to the CLI).
pub(crate) fn parse_content<T: DeserializeOwned>(
    file: &str,
    text: &str,
) -> Result<T, ContentError> {
    let error = |message: String| ContentError::Parse {
        file: file.to_string(),
        message,
    };
    if text.trim_start().starts_with('{') {
        return serde_json::from_str(text).map_err(|e| error(e.to_string()));
    }
    #[cfg(feature = "toml")]
    {
        toml::from_str(text).map_err(|e| error(e.to_string()))
    }
    #[cfg(not(feature = "toml"))]
    {
        Err(error(
            "is not JSON, and this build reads TOML only with the `toml` feature".into(),
        ))
    }
}

/// One file of the content a build without the `embedded-*` features fetches instead (site/
/// pages.sh writes each beside the app): where it is, what it holds (for messages), and what
/// installs it into the core.
#[derive(Debug, Clone, Copy)]
pub struct Fetched {
    pub path: &'static str,
    pub what: &'static str,
    pub install: fn(&str) -> Result<(), ContentError>,
}

/// Everything the site installs before its first estimate, in the order it is installed: the
/// GPU catalog, the presets (index and configs), the published calibrations and the named
/// scenarios.
pub const FETCHED: [Fetched; 4] = [
    // First: the calibrations and the named scenarios name GPUs.
    Fetched {
        path: "content/gpus.json",
        what: "The GPU catalog",
        install: install_gpus,
    },
    Fetched {
        path: "content/models.json",
        what: "The models' configurations",
        install: install_model_configs,
    },
    Fetched {
        path: "content/calibrations.json",
        what: "The GPUs' calibrations",
        install: crate::calibration::install_calibrations,
    },
    Fetched {
        path: "content/scenarios.json",
        what: "The scenarios",
        install: crate::codec::install_named_scenarios,
    },
];

/// Whether every [`FETCHED`] file is in, embedded or installed.
pub fn fetched_ready() -> bool {
    gpus::gpus_ready()
        && models::model_configs_ready()
        && crate::calibration::calibrations_ready()
        && crate::codec::named_scenarios_ready()
}

pub use gpus::{Gpu, GpuCatalog, Tflops, gpus_ready, install_gpus};
pub use models::{Preset, PresetCatalog, install_model_configs, model_configs_ready};
