//! Constants only a GPU can tell (CUDA context, workspaces, allocator slack) and the speed it
//! measured (matmul efficiency, host link), with documented defaults that are marked as
//! assumed until a calibration file replaces them.
//!
//! The constants cover the context, workspaces, allocator slack and NCCL; the measured speed is
//! `MeasuredRates` (a matmul curve per dtype and the pinned host link, read from the file's
//! `native` report); `Calibration::capacity` is the CUDA-visible memory the verdict and the planner
//! use. A file in `content/calibration/` for the GPU, or the user's own file on the site, replaces
//! the defaults; `for_gpu` parses the files once per process. `build.rs` embeds each file compact
//! and without its rows under the `embedded-calibrations` feature (the CLI, the tests); the site
//! leaves it off, fetches `content/calibrations.json` (the files without their rows) before its
//! first page and installs it with `install_calibrations`; `calibration_files()` lists the files,
//! embedded or installed. The calibration page fetches the whole file from `content/calibration/`
//! next to the app (Trunk copies it).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::catalog::{Gpu, GpuCatalog};
use crate::error::ContentError;

const MIB: u64 = 1 << 20;

pub use schema::SCHEMA_VERSION;

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
    /// The speed the file measured (matmul curve, host link), which the time model uses in
    /// place of its defaults; none for the defaults. Read from the file's `native` report at
    /// parse time, not a field of the file's `constants` (the file schema is unchanged), and
    /// left out of the JSON when empty so an uncalibrated estimate reads as before.
    #[serde(default, skip_serializing_if = "MeasuredRates::is_empty")]
    pub rates: MeasuredRates,
    /// The device memory CUDA reports (`cuDeviceTotalMem`, torch's `total_memory`), which the
    /// file measured: what the context, the caching allocator and everything else share. The
    /// catalog's figure is nvidia-smi's, larger by what the driver keeps (an H100 80GB HBM3,
    /// driver 580: 81,559 MiB in nvidia-smi, 81,079 MiB to CUDA; a run there stopped with
    /// "total capacity of 79.18 GiB"). From the file's `machine.total_bytes`; none for the
    /// defaults, and left out of the JSON then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usable_bytes: Option<u64>,
    /// Whether the reserved level replays the step through the allocator model where the
    /// replay models it (the `replay` feature). Off only where the slack fraction, which stands
    /// in for the replay elsewhere, is fitted on runs the replay models (calibrate's fit).
    #[serde(skip, default = "replays")]
    pub replay: bool,
}

/// What a calibration file measured of speed, for every dtype it measured (the time model picks
/// the scenario's compute dtype, [`crate::time::Rates::from_measured`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MeasuredRates {
    /// Matmul efficiency points with a usable efficiency (finite, above 0), in file order.
    pub matmul: Vec<MatmulEfficiency>,
    /// Pinned host-to-device and device-to-host copy bandwidths (medians), GB/s.
    pub host_to_device_gbs: Option<f64>,
    pub device_to_host_gbs: Option<f64>,
}

/// One point of a measured matmul efficiency curve.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MatmulEfficiency {
    /// The format as `calibrate` names it (`bf16`, `fp16`, `tf32`, `fp32`, `fp8`).
    pub dtype: String,
    /// Square problem size.
    pub n: u64,
    /// Fraction of the catalog's dense peak.
    pub efficiency: f64,
}

impl MeasuredRates {
    /// The usable rates of a `native` report: points without a finite, positive efficiency and
    /// bandwidths that are not finite and positive are left out (a failed or absurd
    /// measurement must not replace a default).
    pub fn from_native(report: &schema::NativeReport) -> Self {
        Self::from_points(
            report
                .matmul
                .iter()
                .map(|p| (p.dtype.as_str(), p.n, p.efficiency)),
            report
                .bandwidth
                .iter()
                .map(|b| (b.kind.as_str(), b.gb_per_s.median)),
        )
    }

    /// The rates from a report's points, (format, size, efficiency) and (kind, median GB/s),
    /// however they were read: the typed report or the file's fields.
    fn from_points<'a>(
        matmul: impl Iterator<Item = (&'a str, u64, Option<f64>)>,
        bandwidth: impl Iterator<Item = (&'a str, f64)>,
    ) -> Self {
        let usable = |x: f64| x.is_finite() && x > 0.0;
        let bandwidth: Vec<(&str, f64)> = bandwidth.collect();
        // The first record of each kind, when it is usable.
        let bw = |kind: &str| {
            bandwidth
                .iter()
                .find(|b| b.0 == kind)
                .map(|b| b.1)
                .filter(|x| usable(*x))
        };
        MeasuredRates {
            matmul: matmul
                .filter_map(|(dtype, n, efficiency)| {
                    Some(MatmulEfficiency {
                        dtype: dtype.to_string(),
                        n,
                        efficiency: efficiency.filter(|e| usable(*e))?,
                    })
                })
                .collect(),
            host_to_device_gbs: bw("host_to_device_pinned"),
            device_to_host_gbs: bw("device_to_host_pinned"),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.matmul.is_empty()
            && self.host_to_device_gbs.is_none()
            && self.device_to_host_gbs.is_none()
    }
}

fn replays() -> bool {
    true
}

/// Whether [`Calibration::for_gpu`] lets estimates replay the step (see
/// [`Calibration::replay`]): on, unless the process turns it off with [`set_replay`].
static REPLAY: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// Turns the allocator replay off (or on again) for every estimate of this process that takes
/// its GPU's calibration: the CLI's `--no-replay`, which gives the reserved and device levels
/// as the site computes them (from the slack fraction; the site's download leaves the replay
/// out).
pub fn set_replay(on: bool) {
    REPLAY.store(on, std::sync::atomic::Ordering::Relaxed);
}

/// The calibration files installed at run time (the site's fetched `content/calibrations.json`),
/// as (file stem, text) sorted by stem, with what [`Calibration::for_gpu`] picks from.
struct Installed {
    /// Each file as installed; written out as text only when [`calibration_files`] is asked
    /// (the calibration pages), so the calculator's download carries no JSON writer.
    files: Vec<(String, Value)>,
    texts: std::sync::OnceLock<Vec<(String, String)>>,
    candidates: Vec<Candidate>,
}

static INSTALLED: std::sync::OnceLock<Installed> = std::sync::OnceLock::new();

/// Whether the published calibration files are in: embedded (the `embedded-calibrations`
/// feature), or installed by [`install_calibrations`].
pub fn calibrations_ready() -> bool {
    cfg!(feature = "embedded-calibrations") || INSTALLED.get().is_some()
}

/// The published calibration files as (file stem, JSON text), sorted by stem: the embedded
/// ones when the build has any, else the installed ones, else none. The embedded copies are
/// cut down to what estimates read (`build.rs`); the installed ones lack only their rows.
pub fn calibration_files() -> Vec<(&'static str, &'static str)> {
    let embedded = crate::catalog::embedded::CALIBRATION_FILES;
    if !embedded.is_empty() {
        return embedded.to_vec();
    }
    INSTALLED
        .get()
        .map(|i| {
            i.texts
                .get_or_init(|| {
                    i.files
                        .iter()
                        .map(|(stem, file)| (stem.clone(), file.to_string()))
                        .collect()
                })
                .iter()
                .map(|(stem, text)| (stem.as_str(), text.as_str()))
                .collect()
        })
        .unwrap_or_default()
}

/// [`calibration_files`] as parsed JSON (the site's calibration pages read these: the installed
/// files are kept parsed, so nothing writes them out as text in the browser). Parsed once.
pub fn calibration_values() -> Vec<(&'static str, &'static Value)> {
    let embedded = crate::catalog::embedded::CALIBRATION_FILES;
    if !embedded.is_empty() {
        static PARSED: std::sync::OnceLock<Vec<(&'static str, Value)>> = std::sync::OnceLock::new();
        return PARSED
            .get_or_init(|| {
                embedded
                    .iter()
                    .filter_map(|(stem, text)| Some((*stem, serde_json::from_str(text).ok()?)))
                    .collect()
            })
            .iter()
            .map(|(stem, file)| (*stem, file))
            .collect();
    }
    INSTALLED
        .get()
        .map(|i| {
            i.files
                .iter()
                .map(|(stem, file)| (stem.as_str(), file))
                .collect()
        })
        .unwrap_or_default()
}

/// Installs the published calibration files from a JSON object of file stem to the file's
/// JSON object (what site/pages.sh writes as `content/calibrations.json`), each checked by
/// [`Calibration::parse`]: a file that does not parse is refused, its error naming it, and
/// nothing is installed. [`Calibration::for_gpu`] then picks from them as from embedded files.
/// A build with the files embedded keeps its own; a second install is ignored.
pub fn install_calibrations(json: &str) -> Result<(), ContentError> {
    let installed = read_installed(json)?;
    let _ = INSTALLED.set(installed);
    Ok(())
}

/// What [`install_calibrations`] installs: every file of `json`, parsed.
fn read_installed(json: &str) -> Result<Installed, ContentError> {
    let bad = |message: String| ContentError::Parse {
        file: "content/calibrations.json".into(),
        message,
    };
    let value: Value = serde_json::from_str(json).map_err(|e| bad(e.to_string()))?;
    let map = value
        .as_object()
        .ok_or_else(|| bad("not a JSON object of file names to calibration files".into()))?;
    let mut installed = Installed {
        files: Vec::new(),
        texts: std::sync::OnceLock::new(),
        candidates: Vec::new(),
    };
    // serde_json's map iterates in key order: the files come sorted by stem.
    for (stem, file) in map {
        // Named by its stem, as an embedded file is: estimates cite the same name.
        let (gpu_id, cal) = Calibration::parse_value(stem, file)?;
        installed.candidates.push((gpu_id, rank_of(file), cal));
        installed.files.push((stem.clone(), file.clone()));
    }
    Ok(installed)
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
            rates: MeasuredRates::default(),
            usable_bytes: None,
            replay: true,
        }
    }

    /// The memory a scenario on `gpu` may use: the measured CUDA total where this calibration
    /// has one (never above the catalog's), else the catalog's.
    pub fn capacity(&self, gpu: &Gpu) -> u64 {
        self.usable_bytes
            .map_or(gpu.total_bytes, |u| u.min(gpu.total_bytes))
    }

    /// Parses a calibration file written by `calibrate` (only the constants and measured rates
    /// the core uses; the file holds much more for the site's calibration page). Every error
    /// names the field and the allowed range.
    pub fn parse(name: &str, text: &str) -> Result<(String, Self), ContentError> {
        let value: Value = serde_json::from_str(text).map_err(|e| ContentError::Parse {
            file: name.to_string(),
            message: e.to_string(),
        })?;
        Calibration::parse_value(name, &value)
    }

    /// [`Calibration::parse`] of a file already read as JSON.
    pub fn parse_value(name: &str, value: &Value) -> Result<(String, Self), ContentError> {
        let f = Fields { name, root: value };
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
                rates: f.measured_rates()?,
                // Optional: a file cut down to its constants still calibrates memory.
                usable_bytes: match f.get("machine.total_bytes") {
                    Ok(_) => Some(f.uint("machine.total_bytes", 1 << 30, 1 << 41)?),
                    Err(_) => None,
                },
                replay: true,
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
    /// one, then the newest (`measured_on`), then the last file name. The files are the
    /// embedded ones when the build has any, else those [`install_calibrations`] installed
    /// (none before: the defaults). They are parsed once per process: every estimate asks,
    /// and the planner asks thousands of times.
    pub fn for_gpu(gpu: &Gpu) -> Self {
        static EMBEDDED: std::sync::OnceLock<Vec<Candidate>> = std::sync::OnceLock::new();
        let embedded = crate::catalog::embedded::CALIBRATION_FILES;
        let parsed: &[Candidate] = if embedded.is_empty() {
            INSTALLED.get().map_or(&[], |i| &i.candidates)
        } else {
            EMBEDDED.get_or_init(|| candidates(embedded))
        };
        Calibration {
            replay: REPLAY.load(std::sync::atomic::Ordering::Relaxed),
            ..best(parsed, gpu)
        }
    }

    /// [`Calibration::for_gpu`] over any set of (file stem, text) pairs.
    pub fn pick(files: &[(&str, &str)], gpu: &Gpu) -> Self {
        best(&candidates(files), gpu)
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

/// A file that parsed: its GPU id, how complete it is ([`rank`]) and its constants.
type Candidate = (String, (bool, bool), Calibration);

/// Every file of `files` that parses, with its GPU id and rank.
fn candidates(files: &[(&str, &str)]) -> Vec<Candidate> {
    files
        .iter()
        .filter_map(|(name, text)| {
            let (id, cal) = Calibration::parse(name, text).ok()?;
            Some((id, rank(text), cal))
        })
        .collect()
}

/// The best candidate for `gpu` (see [`Calibration::for_gpu`]), the defaults when none is.
fn best(candidates: &[Candidate], gpu: &Gpu) -> Calibration {
    candidates
        .iter()
        .filter(|(id, _, _)| *id == gpu.id)
        .max_by(|(_, ra, a), (_, rb, b)| (ra, a.sort_key()).cmp(&(rb, b.sort_key())))
        .map(|(_, _, c)| c.clone())
        .unwrap_or_else(|| Calibration::assumed(gpu))
}

/// How complete a file is: (constants fitted on PyTorch steps, full rather than quick run).
fn rank(text: &str) -> (bool, bool) {
    rank_of(&serde_json::from_str(text).unwrap_or(Value::Null))
}

/// [`rank`] of a file already read as JSON.
fn rank_of(v: &Value) -> (bool, bool) {
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
        let n = v.as_u64().ok_or_else(|| {
            self.err(
                path,
                format!(
                    "must be a non-negative integer, found {}",
                    crate::error::shorten(&crate::error::shown_json(v))
                ),
            )
        })?;
        if n < lo || n > hi {
            return Err(self.err(path, format!("must be from {lo} to {hi}, found {n}")));
        }
        Ok(n)
    }

    fn fraction(&self, path: &str) -> Result<f64, ContentError> {
        let v = self.get(path)?;
        match v.as_f64() {
            Some(x) if (0.0..=1.0).contains(&x) => Ok(x),
            _ => Err(self.err(
                path,
                format!(
                    "must be a number from 0 to 1, found {}",
                    crate::error::shorten(&crate::error::shown_json(v))
                ),
            )),
        }
    }

    /// The records of the list at `path`; none when the file has none (a file cut down to its
    /// constants still calibrates memory).
    fn records(&self, path: &str) -> Result<&[Value], ContentError> {
        match self.get(path) {
            Err(_) => Ok(&[]),
            Ok(Value::Array(items)) => Ok(items),
            Ok(_) => Err(self.err(path, "must be a list".into())),
        }
    }

    /// The measured speeds of `native`: the matmul curve and the pinned copy bandwidths, read
    /// field by field (a wrong field is named with its record's index), then filtered as
    /// [`MeasuredRates::from_native`] does. Read without serde's derived decoders, which the
    /// site would otherwise download for this alone.
    fn measured_rates(&self) -> Result<MeasuredRates, ContentError> {
        let mut matmul = Vec::new();
        for (i, p) in self.records("native.matmul")?.iter().enumerate() {
            let at = |key: &str| format!("native.matmul[{i}].{key}");
            let dtype = p
                .get("dtype")
                .and_then(Value::as_str)
                .ok_or_else(|| self.err(&at("dtype"), "must be a string".into()))?;
            // calibrate times square matmuls of 256 to 16,384; 2^20 leaves room for more.
            let n = p
                .get("n")
                .and_then(Value::as_u64)
                .filter(|n| (1..=1 << 20).contains(n))
                .ok_or_else(|| {
                    self.err(&at("n"), "must be a matrix size from 1 to 1048576".into())
                })?;
            // A fraction of the catalog's dense peak: measured H100 curves reach about 0.75;
            // past twice the datasheet peak the file is wrong, not the datasheet.
            let efficiency =
                match p.get("efficiency") {
                    None | Some(Value::Null) => None,
                    Some(v) => Some(v.as_f64().filter(|e| *e > 0.0 && *e <= 2.0).ok_or_else(
                        || {
                            self.err(
                        &at("efficiency"),
                        format!(
                            "must be a fraction of the GPU's dense peak, above 0 and at most 2 \
                             (null when the peak is unknown), found {}",
                            crate::error::shorten(&crate::error::shown_json(v))
                        ),
                    )
                        },
                    )?),
                };
            matmul.push((dtype, n, efficiency));
        }
        let mut bandwidth = Vec::new();
        for (i, b) in self.records("native.bandwidth")?.iter().enumerate() {
            let at = |key: &str| format!("native.bandwidth[{i}].{key}");
            let kind = b
                .get("kind")
                .and_then(Value::as_str)
                .ok_or_else(|| self.err(&at("kind"), "must be a string".into()))?;
            // Host links are tens of GB/s, HBM3e about 8,000 GB/s: 20,000 leaves room.
            let median = b
                .pointer("/gb_per_s/median")
                .and_then(Value::as_f64)
                .filter(|x| *x > 0.0 && *x <= 20_000.0)
                .ok_or_else(|| {
                    self.err(
                        &at("gb_per_s.median"),
                        "must be a bandwidth in GB/s, above 0 and at most 20000".into(),
                    )
                })?;
            bandwidth.push((kind, median));
        }
        Ok(MeasuredRates::from_points(
            matmul.into_iter(),
            bandwidth.into_iter(),
        ))
    }

    fn text(&self, path: &str) -> Result<String, ContentError> {
        let v = self.get(path)?;
        v.as_str().map(str::to_string).ok_or_else(|| {
            self.err(
                path,
                format!(
                    "must be a string, found {}",
                    crate::error::shorten(&crate::error::shown_json(v))
                ),
            )
        })
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

/// The whole calibration file, as `calibrate` writes it: pure data types, so the site's
/// calibration page and the tests read it with the same definitions (`calibrate` re-exports
/// them). [`Calibration::parse`] reads only the `constants` it needs, field by field, and the
/// `native` report's matmul curve and copy bandwidths.
pub mod schema;

#[cfg(test)]
mod tests {
    use super::*;

    /// `content/calibrations.json` as site/pages.sh writes it: every committed file by its
    /// stem, with its rows emptied.
    fn published() -> serde_json::Map<String, Value> {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../content/calibration");
        let mut files = serde_json::Map::new();
        for entry in std::fs::read_dir(&dir).expect("content/calibration/ reads") {
            let path = entry.expect("a directory entry").path();
            if path.extension().is_none_or(|e| e != "json") {
                continue;
            }
            let stem = path
                .file_stem()
                .and_then(|s| s.to_str())
                .expect("a file name");
            let text = std::fs::read_to_string(&path).expect("a calibration file reads");
            let mut file: Value = serde_json::from_str(&text).expect("a committed file is JSON");
            file["rows"] = Value::Array(Vec::new());
            files.insert(stem.to_string(), file);
        }
        assert!(!files.is_empty(), "no file in {}", dir.display());
        files
    }

    #[test]
    fn installed_files_pick_the_constants_the_embedded_copies_pick() {
        let files = published();
        let json = Value::Object(files.clone()).to_string();
        let installed = read_installed(&json).expect("the published files install");
        assert_eq!(
            installed
                .files
                .iter()
                .map(|(s, _)| s.as_str())
                .collect::<Vec<_>>(),
            files.keys().map(String::as_str).collect::<Vec<_>>()
        );
        install_calibrations(&json).expect("the published files install");
        assert!(calibrations_ready());
        let catalog = GpuCatalog::builtin();
        for (stem, file) in &files {
            let gpu_id = file["gpu_id"].as_str().expect("a GPU id");
            let gpu = catalog
                .get(gpu_id)
                .expect("the file's GPU is in the catalog");
            let from_installed = best(&installed.candidates, gpu);
            assert!(from_installed.is_measured(), "{stem}: {from_installed:?}");
            // What every estimate of the build takes: the embedded copies where it has them
            // (then the same constants as the installed files), else the installed files.
            let picked = Calibration {
                replay: true,
                ..Calibration::for_gpu(gpu)
            };
            assert_eq!(picked, from_installed, "{stem}");
            if cfg!(feature = "embedded-calibrations") {
                let embedded = Calibration::pick(crate::catalog::embedded::CALIBRATION_FILES, gpu);
                assert_eq!(embedded, from_installed, "{stem}");
            }
        }
        let stems: Vec<&str> = calibration_files().iter().map(|(s, _)| *s).collect();
        assert_eq!(stems, files.keys().map(String::as_str).collect::<Vec<_>>());
    }

    #[test]
    fn a_broken_file_is_refused_by_name() {
        let mut files = published();
        let (stem, file) = files.iter_mut().next().expect("a file");
        let stem = stem.clone();
        file["constants"]["cuda_context_bytes"] = Value::from("lots");
        let err = read_installed(&Value::Object(files).to_string())
            .err()
            .expect("a broken file is refused");
        match &err {
            ContentError::Field { file, field, .. } => {
                assert_eq!(
                    (file.as_str(), field.as_str()),
                    (stem.as_str(), "constants.cuda_context_bytes")
                );
            }
            other => panic!("{other:?}"),
        }
        assert!(err.to_string().contains(&stem), "{err}");
        for json in ["[]", "{", r#"{"x": 1}"#] {
            assert!(install_calibrations(json).is_err(), "{json}");
        }
    }
}
