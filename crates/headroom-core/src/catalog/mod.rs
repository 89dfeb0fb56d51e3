//! Content compiled into the core: the GPU catalog, model presets, named scenarios, calibrations.

pub mod gpus;
pub mod models;

/// The raw files, embedded by `build.rs` (file stem, text).
pub mod embedded {
    include!(concat!(env!("OUT_DIR"), "/content.rs"));
    /// The GPU catalog, `content/gpus.toml`.
    pub const GPUS_TOML: &str = include_str!("../../../../content/gpus.toml");
    /// The preset index, `content/models/presets.toml`.
    pub const PRESETS_TOML: &str = include_str!("../../../../content/models/presets.toml");
}

pub use gpus::{Gpu, GpuCatalog, Tflops};
pub use models::{Preset, PresetCatalog};
