//! Constants only a GPU can tell (CUDA context, workspaces, allocator slack), with documented
//! defaults that are marked as assumed until a calibration file replaces them.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::catalog::{Gpu, GpuCatalog};
use crate::error::ContentError;

const MIB: u64 = 1 << 20;

/// The calibration file schema this core reads (`schema_version`).
pub const SCHEMA_VERSION: u32 = 1;

/// Where the runtime constants of an estimate come from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CalibrationSource {
    /// Documented defaults from public reports (see each field).
    Assumed,
    /// A calibration file measured on this GPU by `calibrate`.
    Measured { file: String, measured_on: String },
}

/// Runtime constants for one GPU and software stack.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    pub source: CalibrationSource,
    /// Device memory the CUDA context takes (NVML used minus reserved after a full step).
    /// Default 500 MiB: reports range from 256 MiB (RTX 3090, CUDA 12.8) to 426 MiB
    /// (RTX 6000 Ada, CUDA 13), and the context grows as cuBLAS, NCCL and Triton load modules.
    pub cuda_context_bytes: u64,
    /// One cuBLAS workspace: 32 MiB on sm90, 8 MiB + 128 KiB elsewhere
    /// (PyTorch `CublasHandlePool.cpp`). Allocated through the caching allocator.
    pub cublas_workspace_bytes: u64,
    /// Workspaces alive in a training step: one per (handle, stream); forward runs on the main
    /// thread and backward on autograd's device thread, each with its own handle.
    pub cublas_workspaces: u64,
    /// Reserved minus allocated at the peak, as a fraction of the step's transient bytes,
    /// with the default allocator (segments that cannot be reused for other sizes).
    pub reserved_slack_fraction: f64,
    /// The same with `expandable_segments:True` (segments grow in place, little slack).
    pub reserved_slack_fraction_expandable: f64,
    /// NCCL's communicator buffers per process when more than one GPU trains.
    /// Default 512 MiB ("~0.5 GB per communicator", okoge-kaz memory estimator; unverified).
    pub nccl_bytes: u64,
}

impl Calibration {
    /// The documented defaults for `gpu`.
    pub fn assumed(gpu: &Gpu) -> Self {
        Calibration {
            source: CalibrationSource::Assumed,
            cuda_context_bytes: 500 * MIB,
            cublas_workspace_bytes: if gpu.is_sm90() {
                32 * MIB
            } else {
                4096 * 1024 * 2 + 16 * 1024 * 8
            },
            cublas_workspaces: 2,
            reserved_slack_fraction: 0.08,
            reserved_slack_fraction_expandable: 0.01,
            nccl_bytes: 512 * MIB,
        }
    }

    /// Parses a calibration file written by `calibrate` (only the constants the core uses;
    /// the file holds much more for the site's calibration page). Every error names the field
    /// and the allowed range.
    pub fn parse(name: &str, text: &str) -> Result<(String, Self), ContentError> {
        let value: Value = serde_json::from_str(text).map_err(|e| ContentError::Parse {
            file: name.to_string(),
            message: e.to_string(),
        })?;
        let f = Fields { name, root: &value };
        let version = f.uint("schema_version", 0, u64::MAX)?;
        if version != u64::from(SCHEMA_VERSION) {
            return Err(f.err(
                "schema_version",
                format!("must be {SCHEMA_VERSION}, found {version}"),
            ));
        }
        let gpu_id = f.text("gpu_id")?;
        if gpu_id.is_empty()
            || !gpu_id
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        {
            return Err(f.err(
                "gpu_id",
                format!("must be a catalog id (lowercase letters, digits, `-`), found `{gpu_id}`"),
            ));
        }
        let measured_on = f.text("measured_on")?;
        if !is_date(&measured_on) {
            return Err(f.err(
                "measured_on",
                format!("must be a date YYYY-MM-DD, found `{measured_on}`"),
            ));
        }
        let c = "constants";
        if !value.get(c).is_some_and(Value::is_object) {
            return Err(f.err(c, "must be an object with the fitted constants".into()));
        }
        Ok((
            gpu_id,
            Calibration {
                source: CalibrationSource::Measured {
                    file: name.to_string(),
                    measured_on,
                },
                cuda_context_bytes: f.uint("constants.cuda_context_bytes", MIB, 8 << 30)?,
                cublas_workspace_bytes: f.uint("constants.cublas_workspace_bytes", 0, 1 << 30)?,
                cublas_workspaces: f.uint("constants.cublas_workspaces", 0, 64)?,
                reserved_slack_fraction: f.fraction("constants.reserved_slack_fraction")?,
                reserved_slack_fraction_expandable: f
                    .fraction("constants.reserved_slack_fraction_expandable")?,
                nccl_bytes: f.uint("constants.nccl_bytes", 0, 16 << 30)?,
            },
        ))
    }

    /// Parses a file and also checks that its GPU is in `catalog` (a file for a GPU the catalog
    /// lacks would never be used) and that it was measured, not made by the fake backend. The
    /// core's tests run this on every committed file.
    pub fn check(name: &str, text: &str, catalog: &GpuCatalog) -> Result<Self, ContentError> {
        let (gpu_id, cal) = Calibration::parse(name, text)?;
        // The fake backend exists for tests; its numbers must never pass for measurements.
        let backend = serde_json::from_str::<Value>(text)
            .ok()
            .and_then(|v| v.pointer("/native/backend")?.as_str().map(str::to_string));
        if backend.as_deref() == Some("fake") {
            return Err(ContentError::Field {
                file: name.to_string(),
                field: "native.backend".into(),
                message: "is `fake`: test data from calibrate's fake backend, not a measurement"
                    .into(),
            });
        }
        if catalog.gpus.iter().all(|g| g.id != gpu_id) {
            return Err(ContentError::Field {
                file: name.to_string(),
                field: "gpu_id".into(),
                message: format!(
                    "`{gpu_id}` is not in the GPU catalog (content/gpus.toml); add it there or rerun calibrate with --gpu ID"
                ),
            });
        }
        Ok(cal)
    }

    /// The calibration for `gpu`: the best committed file for it, the defaults otherwise.
    /// Best: fitted on PyTorch training steps before native-only, a full run before a quick
    /// one, then the newest (`measured_on`), then the last file name.
    pub fn for_gpu(gpu: &Gpu) -> Self {
        Calibration::pick(crate::catalog::embedded::CALIBRATION_FILES, gpu)
    }

    /// [`Calibration::for_gpu`] over any set of (file stem, text) pairs.
    pub fn pick(files: &[(&str, &str)], gpu: &Gpu) -> Self {
        files
            .iter()
            .filter_map(|(name, text)| {
                let (id, cal) = Calibration::parse(name, text).ok()?;
                (id == gpu.id).then(|| (rank(text), cal))
            })
            .max_by(|(ra, a), (rb, b)| (ra, a.sort_key()).cmp(&(rb, b.sort_key())))
            .map(|(_, c)| c)
            .unwrap_or_else(|| Calibration::assumed(gpu))
    }

    fn sort_key(&self) -> (String, String) {
        match &self.source {
            CalibrationSource::Measured { file, measured_on } => {
                (measured_on.clone(), file.clone())
            }
            CalibrationSource::Assumed => (String::new(), String::new()),
        }
    }

    pub fn is_measured(&self) -> bool {
        matches!(self.source, CalibrationSource::Measured { .. })
    }
}

/// How complete a file is: (constants fitted on PyTorch steps, full rather than quick run).
fn rank(text: &str) -> (bool, bool) {
    let v: Value = serde_json::from_str(text).unwrap_or(Value::Null);
    (
        v.pointer("/torch/status").and_then(Value::as_str) == Some("measured"),
        v.get("mode").and_then(Value::as_str) != Some("quick"),
    )
}

/// Typed, range-checked access to a calibration file's fields by dotted path.
struct Fields<'a> {
    name: &'a str,
    root: &'a Value,
}

impl Fields<'_> {
    fn err(&self, field: &str, message: String) -> ContentError {
        ContentError::Field {
            file: self.name.to_string(),
            field: field.to_string(),
            message,
        }
    }

    fn get(&self, path: &str) -> Result<&Value, ContentError> {
        path.split('.')
            .try_fold(self.root, |v, key| v.get(key))
            .filter(|v| !v.is_null())
            .ok_or_else(|| self.err(path, "is missing".into()))
    }

    fn uint(&self, path: &str, lo: u64, hi: u64) -> Result<u64, ContentError> {
        let v = self.get(path)?;
        let n = v
            .as_u64()
            .ok_or_else(|| self.err(path, format!("must be a non-negative integer, found {v}")))?;
        if n < lo || n > hi {
            return Err(self.err(path, format!("must be from {lo} to {hi}, found {n}")));
        }
        Ok(n)
    }

    fn fraction(&self, path: &str) -> Result<f64, ContentError> {
        let v = self.get(path)?;
        match v.as_f64() {
            Some(x) if (0.0..=1.0).contains(&x) => Ok(x),
            _ => Err(self.err(path, format!("must be a number from 0 to 1, found {v}"))),
        }
    }

    fn text(&self, path: &str) -> Result<String, ContentError> {
        let v = self.get(path)?;
        v.as_str()
            .map(str::to_string)
            .ok_or_else(|| self.err(path, format!("must be a string, found {v}")))
    }
}

/// `YYYY-MM-DD` with a plausible month and day.
fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    if b.len() != 10
        || b[4] != b'-'
        || b[7] != b'-'
        || !digits(0..4)
        || !digits(5..7)
        || !digits(8..10)
    {
        return false;
    }
    let month = (b[5] - b'0') * 10 + (b[6] - b'0');
    let day = (b[8] - b'0') * 10 + (b[9] - b'0');
    (1..=12).contains(&month) && (1..=31).contains(&day)
}
