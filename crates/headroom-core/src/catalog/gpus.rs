//! The GPU catalog: memory, throughput and links of each GPU, parsed from `content/gpus.toml`.

use serde::{Deserialize, Serialize};

use crate::error::{ContentError, ScenarioError};
use crate::scenario::Precision;

/// Dense peak throughput per dtype, in TFLOP/s (absent where the GPU lacks the format).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tflops {
    pub fp64: Option<f64>,
    pub fp32: Option<f64>,
    pub tf32: Option<f64>,
    pub bf16: Option<f64>,
    pub fp16: Option<f64>,
    pub fp8: Option<f64>,
    pub int8: Option<f64>,
    pub fp4: Option<f64>,
}

/// Where a GPU's figures come from.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Provenance {
    #[serde(default)]
    pub specs: Vec<String>,
    #[serde(default)]
    pub notes: String,
}

/// One GPU model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Gpu {
    pub id: String,
    #[serde(default)]
    pub aliases: Vec<String>,
    pub name: String,
    pub vendor: String,
    pub architecture: String,
    pub compute_capability: String,
    /// Capacity as marketed, in GB.
    pub memory_gb: f64,
    /// Total memory the driver reports: the most any process can ever use.
    pub total_bytes: u64,
    #[serde(default)]
    pub total_bytes_source: String,
    pub memory_type: String,
    pub memory_bandwidth_gbs: f64,
    pub host_link: String,
    pub host_link_gbs: f64,
    #[serde(default)]
    pub peer_link: String,
    #[serde(default)]
    pub peer_link_gbs: f64,
    #[serde(default)]
    pub tdp_w: f64,
    pub dense_tflops: Tflops,
    #[serde(default)]
    pub provenance: Provenance,
}

impl Gpu {
    /// The compute capability as (major, minor); (0, 0) where it is not a number (AMD's
    /// `gfx942`).
    pub fn sm(&self) -> (u32, u32) {
        let mut parts = self.compute_capability.split('.');
        let mut num = || parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
        (num(), num())
    }

    /// Whether the GPU computes in bf16 (compute capability 8.0 on, Ampere; not the T4 or
    /// V100), which the catalog records as a bf16 throughput. Every rule that asks reads this:
    /// the scenario's refusal (`estimate::check_dtypes`) and the planner's and strategy table's
    /// choice of fp16 instead.
    pub fn has_bf16(&self) -> bool {
        self.dense_tflops.bf16.is_some()
    }

    /// Hopper (sm90) gets a 32 MiB cuBLAS workspace in PyTorch; others get 8 MiB + 128 KiB.
    pub fn is_sm90(&self) -> bool {
        self.vendor == "nvidia" && self.compute_capability == "9.0"
    }
}

/// All GPUs of the catalog.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuCatalog {
    pub gpus: Vec<Gpu>,
}

#[derive(Deserialize)]
struct File {
    gpu: Vec<Gpu>,
}

impl GpuCatalog {
    /// Parses and checks catalog text, TOML or JSON (ids unique, sizes and throughputs positive).
    pub fn parse(text: &str) -> Result<Self, ContentError> {
        let file: File = super::parse_content("gpus.toml", text)?;
        let mut seen = std::collections::BTreeSet::new();
        for g in &file.gpu {
            let field = |field: &str, message: String| ContentError::Field {
                file: format!("gpus.toml [{}]", g.id),
                field: field.into(),
                message,
            };
            for name in std::iter::once(&g.id).chain(&g.aliases) {
                if !seen.insert(name.clone()) {
                    return Err(field("id", format!("`{name}` is used twice")));
                }
            }
            if g.total_bytes < (1 << 30) || g.total_bytes > (1 << 44) {
                return Err(field(
                    "total_bytes",
                    format!("must be between 1 GiB and 16 TiB, found {}", g.total_bytes),
                ));
            }
            if g.memory_bandwidth_gbs.is_nan()
                || g.host_link_gbs.is_nan()
                || g.memory_bandwidth_gbs <= 0.0
                || g.host_link_gbs <= 0.0
            {
                return Err(field(
                    "memory_bandwidth_gbs",
                    "bandwidths must be positive".into(),
                ));
            }
            if g.dense_tflops
                .bf16
                .or(g.dense_tflops.fp16)
                .or(g.dense_tflops.fp32)
                .is_none()
            {
                return Err(field(
                    "dense_tflops",
                    "needs at least one of bf16, fp16, fp32".into(),
                ));
            }
        }
        Ok(GpuCatalog { gpus: file.gpu })
    }

    /// The catalog: compiled into the core (the `embedded-gpus` feature), or installed by
    /// [`install_gpus`], else empty.
    pub fn builtin() -> &'static GpuCatalog {
        static CATALOG: std::sync::OnceLock<GpuCatalog> = std::sync::OnceLock::new();
        static EMPTY: GpuCatalog = GpuCatalog { gpus: Vec::new() };
        let embedded = super::embedded::GPUS_JSON;
        if embedded.is_empty() {
            return INSTALLED.get().unwrap_or(&EMPTY);
        }
        CATALOG.get_or_init(|| {
            // The embedded file is checked by the core's tests; a broken one is a build bug.
            GpuCatalog::parse(embedded).unwrap_or(GpuCatalog { gpus: Vec::new() })
        })
    }

    /// Finds a GPU by id or alias.
    pub fn get(&self, id: &str) -> Result<&Gpu, ScenarioError> {
        let key = id.trim().to_ascii_lowercase();
        self.gpus
            .iter()
            .find(|g| g.id == key || g.aliases.contains(&key))
            .ok_or_else(|| ScenarioError::Unknown {
                what: "GPU",
                found: crate::error::shorten(id),
                known: self
                    .gpus
                    .iter()
                    .map(|g| g.id.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }
}

static INSTALLED: std::sync::OnceLock<GpuCatalog> = std::sync::OnceLock::new();

/// Installs the GPU catalog from JSON (what site/pages.sh writes as `content/gpus.json`:
/// content/gpus.toml without its provenance), checked as the embedded one is.
pub fn install_gpus(json: &str) -> Result<(), ContentError> {
    let catalog = GpuCatalog::parse(json)?;
    let _ = INSTALLED.set(catalog);
    Ok(())
}

/// Whether the GPU catalog is in: embedded, or installed by [`install_gpus`].
pub fn gpus_ready() -> bool {
    !super::embedded::GPUS_JSON.is_empty() || INSTALLED.get().is_some()
}

// The precision a GPU runs: here, beside `Gpu`, so the scenario does not depend on the catalog.
impl Precision {
    /// The same precision in fp16 where the GPU has no bf16 (T4, V100: amp-bf16 becomes
    /// amp-fp16, bf16 fp16), as the planner, the ladder and the strategy table propose it;
    /// unchanged elsewhere.
    pub fn for_gpu(self, gpu: &Gpu) -> Self {
        match self {
            Precision::AmpBf16 if !gpu.has_bf16() => Precision::AmpFp16,
            Precision::Bf16 if !gpu.has_bf16() => Precision::Fp16,
            p => p,
        }
    }
}
