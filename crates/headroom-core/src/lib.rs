//! Headroom's core: how much GPU memory one training step of a decoder-only transformer needs.
//!
//! Pure: no files, clock, randomness or network. Content (GPU catalog, model presets, named
//! scenarios, calibrations) is embedded at compile time or passed in as text. Compiles for
//! `wasm32-unknown-unknown` and natively; the CLI, the site and the guides all call
//! [`analyze`] (or [`estimate`]) with the same [`Scenario`] and get the same bytes.
//!
//! The API: [`analyze`], [`estimate`], `fit`, `strategies`, `time`, `plan`, `export`, `import`, `codec`,
//! `guide`, `metrics`, `claims`, the catalogs and the result types. The formula modules
//! (`activations`, `states`, `loss`, `optimizer`) are private to the crate: tests reach them
//! through an estimate (`tests/inventory.rs` renders a layer's saved tensors and the step's
//! timeline from a share link).
//!
//! Features: `toml` (default; reads TOML that people write, such as the CLI's `--scenario`
//! files) and `provenance` (default; keeps the GPU catalog's source text, which the CLI prints).
//! The site builds without either.
//!
//! More features, each on for the CLI and off in the site's page: `time-text` keeps the time terms'
//! names, formulas and sources (without it `Terms::text` returns nothing and that code leaves the
//! bundle); `source-text` keeps each breakdown component's and optimizer's source
//! (`content/sources.toml`, `catalog::source_text`; a `Component` names its line in `source_key`);
//! `guide-summaries` keeps the guide index's summaries (the site shows both from its fetched
//! `content/help.json`); `inventory-text` keeps the labels of a layer's saved tensors
//! (`Saved::what`), written through the `what!` and `label!` macros here, which give empty text
//! without it. The page is built without `inventory-text` and its on-demand worker with it: the
//! page's "what one layer saves" table asks the worker for the labels when it opens. The
//! `embedded-*` features and `replay` are described in `Cargo.toml`.

/// A saved tensor's label for people ([`activations::Saved::what`]): `format!`'s arguments, or
/// an empty string where the feature `inventory-text` is off (the site's first download, whose
/// worker is built with it and answers the page's layer inventory). Only display reads it.
macro_rules! what {
    ($($t:tt)*) => {
        if cfg!(feature = "inventory-text") {
            #[allow(clippy::useless_format)]
            let label = format!($($t)*);
            label
        } else {
            String::new()
        }
    };
}

/// A label's piece, `&'static str`, under the same rule as [`what!`].
macro_rules! label {
    ($lit:literal) => {
        if cfg!(feature = "inventory-text") {
            $lit
        } else {
            ""
        }
    };
}

pub(crate) mod activations;
pub mod allocator;
pub mod analysis;
pub mod bounds;
pub mod calibration;
pub mod catalog;
pub mod claims;
pub mod codec;
pub mod compiled;
pub mod confidence;
pub mod content;
pub mod context;
pub mod dtype;
pub mod error;
pub mod estimate;
pub mod export;
pub mod fit;
pub mod format;
pub mod fp8;
pub mod guide;
pub mod import;
pub(crate) mod loss;
pub mod metrics;
pub mod model;
pub(crate) mod optimizer;
pub mod plan;
pub mod scenario;
pub mod sdpa;
pub(crate) mod states;
pub mod strategies;
pub mod time;
pub mod vllm;
pub(crate) mod wire;

pub use activations::{Part, Saved};
pub use analysis::{Analysis, What, analyze, analyze_only, analyze_with};
pub use calibration::Calibration;
pub use catalog::{Gpu, GpuCatalog, Preset, PresetCatalog};
pub use error::{ConfigError, ContentError, ScenarioError};
pub use estimate::{Component, Confidence, Estimate, Phase, estimate, estimate_with};
pub use fit::fit;
pub use scenario::Scenario;
