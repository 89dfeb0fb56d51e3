//! Content compiled into the core, or fetched and installed by the site: the GPU catalog, model
//! presets, named scenarios, calibrations.
//!
//! The presets' `config.json` files are embedded with the `embedded-configs` feature, keeping only
//! the keys the parser in `src/model/` names, or installed at run time by `install_model_configs`.

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

pub use gpus::{Gpu, GpuCatalog, Tflops, gpus_ready, install_gpus};
pub use models::{Preset, PresetCatalog, install_model_configs, model_configs_ready};
