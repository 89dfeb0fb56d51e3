//! The whole calibration file, as `calibrate` writes it: pure data types, so the site's
//! calibration page and the tests read it with the same definitions (`calibrate` re-exports
//! them). [`Calibration::parse`](super::Calibration::parse) reads only the `constants` it needs, field by field, and the
//! `native` report's matmul curve and copy bandwidths.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::ScenarioError;
use crate::model::{ModelSpec, parse_config_json};
use crate::scenario::{
    Attention, BaseDtype, Checkpointing, LoraTargets, Method, ModelChoice, Optimizer, Precision,
    Scenario,
};

/// One measured quantity: how it was measured, how often, and its median with the spread.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measured {
    /// What the numbers are in (`bytes`, `tflops`, `gb_per_s`).
    pub unit: String,
    /// How it was measured, in one sentence.
    pub method: String,
    pub reps: u32,
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// First and third quartiles (linear interpolation between order statistics).
    pub q1: f64,
    pub q3: f64,
}

impl Measured {
    /// Summarizes `samples`; `None` when there are none or one is not finite.
    pub fn from_samples(unit: &str, method: &str, samples: &[f64]) -> Option<Self> {
        if samples.is_empty() || samples.iter().any(|x| !x.is_finite()) {
            return None;
        }
        let mut s = samples.to_vec();
        s.sort_by(f64::total_cmp);
        Some(Measured {
            unit: unit.to_string(),
            method: method.to_string(),
            reps: u32::try_from(s.len()).unwrap_or(u32::MAX),
            median: quantile(&s, 0.5),
            min: s[0],
            max: s[s.len() - 1],
            q1: quantile(&s, 0.25),
            q3: quantile(&s, 0.75),
        })
    }

    /// Interquartile range relative to the median (0 when the median is 0).
    pub fn relative_spread(&self) -> f64 {
        if self.median == 0.0 {
            0.0
        } else {
            (self.q3 - self.q1) / self.median.abs()
        }
    }
}

/// The `q`-quantile of sorted, non-empty `s`, interpolating linearly.
pub fn quantile(s: &[f64], q: f64) -> f64 {
    let pos = q * (s.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    let frac = pos - lo as f64;
    s[lo] + (s[hi] - s[lo]) * frac
}

/// The median of any samples (sorted here); 0 for none.
pub fn median(samples: &[f64]) -> f64 {
    if samples.is_empty() {
        return 0.0;
    }
    let mut s = samples.to_vec();
    s.sort_by(f64::total_cmp);
    quantile(&s, 0.5)
}

/// One point of the matmul efficiency curve.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MatmulPoint {
    pub dtype: String,
    /// Square problem: `n x n` times `n x n`.
    pub n: u64,
    pub tflops: Measured,
    /// The median over the catalog's dense peak for this format, when the catalog has one.
    pub efficiency: Option<f64>,
}

/// A format (or copy) that was not measured, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Unsupported {
    pub dtype: String,
    pub reason: String,
}

/// One copy bandwidth.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bandwidth {
    pub kind: String,
    pub bytes: u64,
    /// GB/s (10^9 bytes); device-to-device counts bytes read plus bytes written.
    pub gb_per_s: Measured,
}

/// Everything measured natively.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NativeReport {
    pub backend: String,
    pub context_bytes: Measured,
    pub granularity_minimum_bytes: u64,
    pub granularity_recommended_bytes: u64,
    pub cublas_handle_bytes: Measured,
    pub cublas_first_gemm_bytes: Measured,
    pub matmul: Vec<MatmulPoint>,
    pub matmul_unsupported: Vec<Unsupported>,
    pub bandwidth: Vec<Bandwidth>,
    /// Copies that failed (`dtype` holds the copy kind), with the error.
    #[serde(default)]
    pub bandwidth_failed: Vec<Unsupported>,
}

/// LoRA settings of a probe scenario (PEFT, adapters kept in fp32 as PEFT does by default).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeLora {
    pub rank: u32,
    /// `attn` (q, k, v, o projections) or `all` (every linear layer but the head).
    pub targets: String,
}

/// One scenario as the probe script reads it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeScenario {
    pub id: String,
    pub model: String,
    pub config: Value,
    pub batch: u32,
    pub seq: u32,
    /// `fp32`, `bf16`, `fp16`, `amp-bf16`, `amp-fp16` (the core's identifiers).
    pub precision: String,
    /// `adamw`, `adamw-fused`, `adamw-forloop`, `sgd`, `sgd-momentum`.
    pub optimizer: String,
    /// `eager` or `sdpa`.
    pub attention: String,
    /// `none` or `full`.
    pub checkpointing: String,
    pub lora: Option<ProbeLora>,
    pub expandable_segments: bool,
}

impl ProbeScenario {
    /// The core's scenario for this probe scenario on `gpu_id` (the config goes through
    /// [`parse_config_json`], as a pasted `config.json` would).
    pub fn to_core(&self, gpu_id: &str) -> Result<(ModelSpec, Scenario), ScenarioError> {
        let spec = parse_config_json(&self.config.to_string())?;
        let mut s = Scenario {
            model: ModelChoice::Custom(Box::new(spec.clone())),
            gpu: gpu_id.to_string(),
            micro_batch: self.batch,
            seq: self.seq,
            precision: Precision::parse("precision", &self.precision)?,
            optimizer: Optimizer::parse("optimizer", &self.optimizer)?,
            attention: Attention::parse("attention", &self.attention)?,
            checkpointing: Checkpointing::parse("checkpointing", &self.checkpointing)?,
            ..Scenario::default()
        };
        s.runtime.expandable_segments = self.expandable_segments;
        if let Some(l) = &self.lora {
            s.method = Method::Lora;
            s.lora.rank = l.rank;
            s.lora.targets = LoraTargets::parse("lora.targets", &l.targets)?;
            // The probe builds the model with `from_config` (fp32) and casts it only for
            // pure bf16/fp16: under autocast its frozen base is fp32 (probe.py).
            if s.precision.is_autocast() {
                s.lora.base = BaseDtype::Fp32;
            }
        }
        s.validate()?;
        Ok((spec, s))
    }

    /// Whether grid row `index` is held out from fitting (every third scenario).
    pub fn held_out(index: usize) -> bool {
        index % 3 == 2
    }
}

/// Peak bytes at the three levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Levels {
    /// `torch.cuda.max_memory_allocated`.
    pub allocated: u64,
    /// `torch.cuda.max_memory_reserved`.
    pub reserved: u64,
    /// Device memory the process uses (NVML), at its highest.
    pub device: u64,
}

/// What a direct probe of PyTorch's cuBLAS workspaces found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceProbe {
    pub bytes: u64,
    pub count: u64,
}

/// Error statistics of one level over a set of rows, in percent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LevelError {
    pub rows: usize,
    pub mean_abs_pct: f64,
    pub median_abs_pct: f64,
    pub max_abs_pct: f64,
    /// Positive: the core over-estimates on average.
    pub mean_signed_pct: f64,
}

/// Errors at the three levels.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorTable {
    pub allocated: LevelError,
    pub reserved: LevelError,
    pub device: LevelError,
}

/// The version of this schema; the core's `Calibration::parse` checks it.
pub const SCHEMA_VERSION: u32 = 1;

/// The constants block, exactly as the core reads it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Constants {
    pub cuda_context_bytes: u64,
    pub cublas_workspace_bytes: u64,
    pub cublas_workspaces: u64,
    pub reserved_slack_fraction: f64,
    pub reserved_slack_fraction_expandable: f64,
    pub nccl_bytes: u64,
}

/// The machine measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    pub gpu_name: String,
    /// Whether `gpu_id` was recognized in the GPU catalog (false: a slug of the name).
    pub gpu_in_catalog: bool,
    pub compute_capability: String,
    pub total_bytes: u64,
    pub free_bytes_at_start: u64,
    pub multiprocessors: u32,
    pub driver_version: Option<String>,
    pub driver_cuda_version: String,
    pub cublas_version: Option<String>,
    pub nvrtc_version: Option<String>,
    pub os: String,
    pub arch: String,
}

/// The software the numbers hold for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Software {
    /// `cuda13.0-torch2.11` (or `cuda13.0-native` without PyTorch): the file name's stack part.
    pub stack: String,
    pub calibrate_version: String,
    pub cuda: String,
    pub torch: Stack,
}

/// The PyTorch part: what ran, what was fitted, how well.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TorchPart {
    /// `measured`; `skipped` (no torch, or `--native-only`) or `failed` (the probe broke), with
    /// `reason`.
    pub status: String,
    pub reason: Option<String>,
    pub scenarios: usize,
    pub ok: usize,
    pub oom: usize,
    pub errors: usize,
    pub skipped: usize,
    pub workspace_probe: Option<WorkspaceMeasure>,
    /// How device memory was read (NVML per process, or whole device).
    pub device_method: Option<String>,
    pub train_rows: usize,
    pub held_out_rows: usize,
    /// Errors on the held-out rows with the documented defaults, and with the fitted constants.
    pub held_out_before: Option<ErrorTable>,
    pub held_out_after: Option<ErrorTable>,
}

/// The direct cuBLAS workspace probe through PyTorch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkspaceMeasure {
    pub bytes: u64,
    pub count: u64,
    pub method: String,
}

/// A prediction at three levels and whether the core says it fits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Prediction {
    pub allocated: u64,
    pub reserved: u64,
    pub device: u64,
    pub fits: bool,
}

/// One scenario: what it was, what was measured, what the core predicted before and after.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RowReport {
    pub id: String,
    /// `train` (used for fitting) or `held_out`.
    pub split: String,
    pub scenario: ProbeScenario,
    /// The core's share link of the same scenario (the model config rides along).
    pub link: String,
    pub status: Status,
    pub error: Option<String>,
    pub measured: Option<Levels>,
    pub phases: Vec<Phase>,
    /// `memory_allocated` before the scenario started (PyTorch's cuBLAS workspaces, kept
    /// between scenarios; anything more is a leak from an earlier one).
    pub allocated_before: u64,
    /// `num_alloc_retries` of the caching allocator (cache flushes under memory pressure).
    pub alloc_retries: u64,
    pub seconds: f64,
    pub predicted_before: Prediction,
    pub predicted_after: Prediction,
}

/// The whole file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CalibrationFile {
    pub schema_version: u32,
    pub gpu_id: String,
    /// `YYYY-MM-DD`, from the system clock when calibrate ran.
    pub measured_on: String,
    /// `YYYY-MM-DDTHH:MM:SSZ`.
    pub generated_at: String,
    /// `full` or `quick`.
    pub mode: String,
    pub machine: Machine,
    pub software: Software,
    pub native: NativeReport,
    pub torch: TorchPart,
    /// What the core uses (`Calibration::parse`).
    pub constants: Constants,
    /// Where each constant came from, one sentence each.
    pub constants_source: std::collections::BTreeMap<String, String>,
    /// The core's defaults for this GPU, for comparison.
    pub defaults: Constants,
    pub rows: Vec<RowReport>,
}

impl CalibrationFile {
    /// Whether this run has less than `existing` (quick versus full, or no PyTorch data where
    /// it had some): such a run must not replace it.
    pub fn is_less_complete_than(&self, existing: &CalibrationFile) -> bool {
        (existing.mode == "full" && self.mode != "full")
            || (existing.torch.status == "measured" && self.torch.status != "measured")
    }

    /// `<gpu_id>-<stack>.json`.
    pub fn file_name(&self) -> String {
        format!("{}-{}.json", self.gpu_id, self.software.stack)
    }
}

/// The software the probe found.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Stack {
    pub python: Option<String>,
    pub torch: Option<String>,
    /// The CUDA version torch was built with.
    pub torch_cuda: Option<String>,
    pub cudnn: Option<u64>,
    pub transformers: Option<String>,
    pub peft: Option<String>,
    /// `pynvml` when NVML was reachable from python, `none` otherwise.
    pub nvml: Option<String>,
    pub driver: Option<String>,
    pub device_name: Option<String>,
}

/// One phase of one step, as measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Phase {
    pub step: u32,
    pub phase: String,
    pub allocated: u64,
    pub reserved: u64,
    pub max_allocated: u64,
    pub max_reserved: u64,
    pub device: u64,
}

/// What happened to one scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Ok,
    Oom,
    Error,
    Skipped,
}
