//! The content a build without the `embedded-*` features fetches before its first estimate:
//! the GPU catalog, the models' configurations, the calibrations and the named scenarios, each
//! with what installs it into the core.

use crate::error::ContentError;

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
        install: crate::catalog::install_gpus,
    },
    Fetched {
        path: "content/models.json",
        what: "The models' configurations",
        install: crate::catalog::install_model_configs,
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
    crate::catalog::gpus_ready()
        && crate::catalog::model_configs_ready()
        && crate::calibration::calibrations_ready()
        && crate::codec::named_scenarios_ready()
}
