//! `calibrate`: measures one GPU and software stack and writes the calibration file the core reads.
//!
//! The pipeline is generic over a [`device::Device`] (CUDA through cudarc, or a fake) and a
//! [`probe::Trainer`] (real PyTorch steps through python3, or a fake), so the tests drive all of
//! it (measure, fit, write, parse back with the core) on machines without a GPU.

pub mod device;
pub mod fake;
pub mod fit;
pub mod grid;
pub mod native;
pub mod probe;
pub mod progress;
pub mod report;
pub mod stats;

#[cfg(feature = "cuda")]
pub mod cuda;

use std::collections::BTreeMap;

use headroom_core::catalog::Tflops;
use headroom_core::{Calibration, Gpu, GpuCatalog, codec};
use thiserror::Error;

use crate::device::{Device, DeviceError, DeviceInfo, MatmulDtype};
use crate::fit::{Sample, errors, predict};
use crate::grid::{ProbeScenario, grid};
use crate::native::{NativePlan, NativeReport};
use crate::probe::{ProbeError, Status, Trainer};
use crate::report::{
    CalibrationFile, Constants, Machine, Prediction, RowReport, SCHEMA_VERSION, Software,
    TorchPart, WorkspaceMeasure, major_minor, slug,
};

/// Why a calibration could not be produced.
#[derive(Debug, Error)]
pub enum CalibrateError {
    #[error(transparent)]
    Device(#[from] DeviceError),
    #[error(transparent)]
    Probe(#[from] ProbeError),
    #[error("unknown GPU id `{0}` for --gpu; `headroom gpus` lists the catalog")]
    UnknownGpu(String),
    #[error(transparent)]
    Grid(#[from] grid::GridError),
}

/// What to run.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub quick: bool,
    /// A catalog id to file the results under instead of the one matched from the device name.
    pub gpu: Option<String>,
    /// Skip the PyTorch part even where torch exists.
    pub native_only: bool,
    /// Seconds since the Unix epoch (the binary reads the clock; tests pass a fixed time).
    pub now_secs: u64,
}

/// Receives progress: a phase with its number of steps, then one tick per step.
pub trait Progress {
    fn phase(&mut self, name: &str, steps: u64);
    fn tick(&mut self, label: &str);
    /// A line for the person running it (printed above the bar).
    fn note(&mut self, line: &str);
}

/// A progress sink that ignores everything (tests).
#[derive(Debug, Default)]
pub struct Silent;

impl Progress for Silent {
    fn phase(&mut self, _: &str, _: u64) {}
    fn tick(&mut self, _: &str) {}
    fn note(&mut self, _: &str) {}
}

/// The catalog GPU this device is, from its compute capability, memory and name.
pub fn match_gpu<'a>(info: &DeviceInfo, catalog: &'a GpuCatalog) -> Option<&'a Gpu> {
    let name = info.name.to_ascii_lowercase();
    let form = |s: &str| {
        if s.contains("pcie") {
            "pcie"
        } else if s.contains("nvl") {
            "nvl"
        } else {
            "other"
        }
    };
    catalog
        .gpus
        .iter()
        .filter(|g| g.vendor == "nvidia" && g.compute_capability == info.compute_capability)
        .filter(|g| form(&g.id) == form(&name))
        .filter(|g| {
            let d = g.total_bytes.abs_diff(info.total_bytes) as f64;
            d / (g.total_bytes as f64) < 0.04
        })
        .min_by_key(|g| g.total_bytes.abs_diff(info.total_bytes))
}

/// A catalog-shaped GPU for a device the catalog lacks.
fn synthetic_gpu(info: &DeviceInfo) -> Gpu {
    Gpu {
        id: slug(&info.name),
        aliases: Vec::new(),
        name: info.name.clone(),
        vendor: "nvidia".into(),
        architecture: String::new(),
        compute_capability: info.compute_capability.clone(),
        memory_gb: (info.total_bytes as f64 / 1e9).round(),
        total_bytes: info.total_bytes,
        total_bytes_source: "measured by calibrate".into(),
        memory_type: String::new(),
        memory_bandwidth_gbs: 0.0,
        host_link: String::new(),
        host_link_gbs: 0.0,
        peer_link: String::new(),
        peer_link_gbs: 0.0,
        tdp_w: 0.0,
        dense_tflops: Tflops::default(),
        provenance: Default::default(),
    }
}

fn constants(c: &Calibration) -> Constants {
    Constants {
        cuda_context_bytes: c.cuda_context_bytes,
        cublas_workspace_bytes: c.cublas_workspace_bytes,
        cublas_workspaces: c.cublas_workspaces,
        reserved_slack_fraction: c.reserved_slack_fraction,
        reserved_slack_fraction_expandable: c.reserved_slack_fraction_expandable,
        nccl_bytes: c.nccl_bytes,
    }
}

fn prediction(s: &Sample, gpu: &Gpu, cal: &Calibration) -> Prediction {
    let l = predict(s, gpu, cal);
    Prediction {
        allocated: l.allocated,
        reserved: l.reserved,
        device: l.device,
        fits: l.device <= gpu.total_bytes,
    }
}

/// Runs everything: native measurements on `dev`, training steps through `trainer` (when given
/// and available), the fit, and returns the file to write.
pub fn calibrate(
    dev: &mut dyn Device,
    trainer: Option<&mut dyn Trainer>,
    opts: &Options,
    progress: &mut dyn Progress,
) -> Result<CalibrationFile, CalibrateError> {
    let info = dev.info()?;
    let catalog = GpuCatalog::builtin();
    let (gpu, in_catalog) = match &opts.gpu {
        Some(id) => (
            catalog
                .get(id)
                .map_err(|_| CalibrateError::UnknownGpu(id.clone()))?
                .clone(),
            true,
        ),
        None => match match_gpu(&info, catalog) {
            Some(g) => (g.clone(), true),
            None => (synthetic_gpu(&info), false),
        },
    };
    progress.note(&format!(
        "{} (compute capability {}, {:.1} GiB) filed as `{}`{}",
        info.name,
        info.compute_capability,
        info.total_bytes as f64 / (1u64 << 30) as f64,
        gpu.id,
        if in_catalog {
            ""
        } else {
            " (not in the GPU catalog: pass --gpu ID to file it under one)"
        }
    ));

    let plan = NativePlan::new(opts.quick);
    progress.phase("native CUDA measurements", plan.steps());
    let peak = |d: MatmulDtype| match d {
        MatmulDtype::Bf16 => gpu.dense_tflops.bf16,
        MatmulDtype::Fp16 => gpu.dense_tflops.fp16,
        MatmulDtype::Tf32 => gpu.dense_tflops.tf32,
        MatmulDtype::Fp32 => gpu.dense_tflops.fp32,
        MatmulDtype::Fp8 => gpu.dense_tflops.fp8,
    };
    let native = native::measure(dev, &info, &plan, &peak, &mut |l| progress.tick(l))?;

    let defaults = Calibration::assumed(&gpu);
    let mut sources: BTreeMap<String, String> = BTreeMap::new();
    let (stack, torch_part, rows, cal) = match trainer {
        Some(t) if !opts.native_only => match t.stack() {
            Ok(stack) => match torch_part(
                t,
                &stack,
                &gpu,
                &defaults,
                &native,
                opts,
                progress,
                &mut sources,
            ) {
                Ok((part, rows, cal)) => (stack, part, rows, cal),
                // The probe itself broke: keep the native measurements rather than lose them.
                Err(CalibrateError::Probe(e)) => {
                    progress.note(&format!("PyTorch part failed: {e}"));
                    sources.clear();
                    let cal = native_constants(&defaults, &native, &mut sources);
                    (stack, failed(&e.to_string()), Vec::new(), cal)
                }
                Err(e) => return Err(e),
            },
            Err(ProbeError::Unavailable(reason)) => {
                progress.note(&format!("PyTorch part skipped: {reason}"));
                let cal = native_constants(&defaults, &native, &mut sources);
                (Default::default(), skipped(&reason), Vec::new(), cal)
            }
            Err(e) => {
                progress.note(&format!("PyTorch part failed: {e}"));
                let cal = native_constants(&defaults, &native, &mut sources);
                (Default::default(), failed(&e.to_string()), Vec::new(), cal)
            }
        },
        _ => {
            let reason = "skipped (--native-only)";
            let cal = native_constants(&defaults, &native, &mut sources);
            (Default::default(), skipped(reason), Vec::new(), cal)
        }
    };

    let cuda = stack
        .torch_cuda
        .clone()
        .unwrap_or_else(|| info.driver_cuda_version.clone());
    let stack_name = match &stack.torch {
        Some(v) => format!("cuda{}-torch{}", major_minor(&cuda), major_minor(v)),
        None => format!("cuda{}-native", major_minor(&cuda)),
    };
    let (date, time) = report::utc(opts.now_secs);
    Ok(CalibrationFile {
        schema_version: SCHEMA_VERSION,
        gpu_id: gpu.id.clone(),
        measured_on: date,
        generated_at: time,
        mode: if opts.quick { "quick" } else { "full" }.into(),
        machine: Machine {
            gpu_name: info.name.clone(),
            gpu_in_catalog: in_catalog,
            compute_capability: info.compute_capability.clone(),
            total_bytes: info.total_bytes,
            free_bytes_at_start: info.free_bytes,
            multiprocessors: info.multiprocessors,
            driver_version: info.driver_version.clone().or(stack.driver.clone()),
            driver_cuda_version: info.driver_cuda_version.clone(),
            cublas_version: info.cublas_version.clone(),
            nvrtc_version: info.nvrtc_version.clone(),
            os: std::env::consts::OS.into(),
            arch: std::env::consts::ARCH.into(),
        },
        software: Software {
            stack: stack_name,
            calibrate_version: env!("CARGO_PKG_VERSION").into(),
            cuda,
            torch: stack,
        },
        native,
        torch: torch_part,
        constants: constants(&cal),
        constants_source: sources,
        defaults: constants(&defaults),
        rows,
    })
}

fn failed(reason: &str) -> TorchPart {
    TorchPart {
        status: "failed".into(),
        ..skipped(reason)
    }
}

fn skipped(reason: &str) -> TorchPart {
    TorchPart {
        status: "skipped".into(),
        reason: Some(reason.to_string()),
        scenarios: 0,
        ok: 0,
        oom: 0,
        errors: 0,
        skipped: 0,
        workspace_probe: None,
        device_method: None,
        train_rows: 0,
        held_out_rows: 0,
        held_out_before: None,
        held_out_after: None,
    }
}

/// Fits the constants on `train` (see [`fit::fit`]), recording where each came from in
/// `sources`; falls back to the native figures where the PyTorch part measured nothing usable.
fn fit_constants(
    train: &[Sample],
    gpu: &Gpu,
    defaults: &Calibration,
    native: &NativeReport,
    workspace: Option<fit::WorkspaceProbe>,
    sources: &mut BTreeMap<String, String>,
) -> Calibration {
    let fitted = fit::fit(train, gpu, defaults, workspace);
    let mut cal = fitted.calibration;
    for (k, v) in fitted.notes {
        sources.insert(k, v);
    }
    sources.insert(
        "nccl_bytes".into(),
        "default: one GPU measured, no NCCL communicator".into(),
    );
    if train.is_empty() {
        // Nothing measured in PyTorch: fall back to the native figures.
        cal = native_constants(defaults, native, sources);
    } else if cal.cuda_context_bytes < 1 << 20 {
        // A context below 1 MiB means the device readings did not include it (whole-device
        // readings gone wrong); the native figure is the better one.
        let native_cal = native_constants(defaults, native, &mut BTreeMap::new());
        cal.cuda_context_bytes = native_cal.cuda_context_bytes;
        sources.insert(
            "cuda_context_bytes".into(),
            "native (the fitted device-level residual was below 1 MiB): bare context plus one cuBLAS handle".into(),
        );
    }
    cal
}

/// Fits a calibration file's constants again from its own measured rows, with this build's
/// core: what to do when the core's model changed after the measurement (the measurements
/// stay; the constants, every row's predictions and the held-out tables are recomputed, and
/// `constants_source.refit` says when and why). Rows keep their split.
pub fn refit(file: &CalibrationFile, now_secs: u64) -> Result<CalibrationFile, CalibrateError> {
    let gpu = GpuCatalog::builtin()
        .get(&file.gpu_id)
        .map_err(|_| CalibrateError::UnknownGpu(file.gpu_id.clone()))?
        .clone();
    let defaults = Calibration::assumed(&gpu);
    // Every row as the core's scenario (for its predictions), and which rows were measured.
    let mut samples = Vec::new();
    for r in &file.rows {
        let (spec, scenario) = grid::core_scenario(&r.scenario, &gpu.id)?;
        let measured = r
            .measured
            .filter(|m| r.status == Status::Ok && m.allocated > 0);
        samples.push((
            r.split == "held_out",
            measured.is_some(),
            Sample {
                id: r.id.clone(),
                spec,
                scenario,
                measured: measured.unwrap_or(fit::Levels {
                    allocated: 0,
                    reserved: 0,
                    device: 0,
                }),
            },
        ));
    }
    let pick = |held: bool| -> Vec<Sample> {
        samples
            .iter()
            .filter(|(h, measured, _)| *h == held && *measured)
            .map(|(_, _, s)| s.clone())
            .collect()
    };
    let (train, held) = (pick(false), pick(true));
    let workspace = file
        .torch
        .workspace_probe
        .as_ref()
        .map(|w| fit::WorkspaceProbe {
            bytes: w.bytes,
            count: w.count,
        });
    let mut sources = BTreeMap::new();
    let cal = fit_constants(
        &train,
        &gpu,
        &defaults,
        &file.native,
        workspace,
        &mut sources,
    );
    let (date, _) = report::utc(now_secs);
    sources.insert(
        "refit".into(),
        format!(
            "refitted on {date} by calibrate {} from this file's rows measured on {}: the core's model changed since",
            env!("CARGO_PKG_VERSION"),
            file.measured_on
        ),
    );
    let mut out = file.clone();
    for (row, (_, _, sample)) in out.rows.iter_mut().zip(&samples) {
        row.link = codec::encode(&sample.scenario);
        row.predicted_before = prediction(sample, &gpu, &defaults);
        row.predicted_after = prediction(sample, &gpu, &cal);
    }
    out.torch.train_rows = train.len();
    out.torch.held_out_rows = held.len();
    out.torch.held_out_before = (!held.is_empty()).then(|| errors(&held, &gpu, &defaults));
    out.torch.held_out_after = (!held.is_empty()).then(|| errors(&held, &gpu, &cal));
    out.constants = constants(&cal);
    out.constants_source = sources;
    out.defaults = constants(&defaults);
    Ok(out)
}

/// Constants from native measurements alone (no PyTorch): the bare context plus what one cuBLAS
/// handle loads; workspaces and slack stay at their documented defaults.
fn native_constants(
    defaults: &Calibration,
    native: &NativeReport,
    sources: &mut BTreeMap<String, String>,
) -> Calibration {
    let mut c = defaults.clone();
    c.cuda_context_bytes =
        (native.context_bytes.median + native.cublas_handle_bytes.median).round() as u64;
    sources.insert(
        "cuda_context_bytes".into(),
        "native: median bare context (cuCtxCreate) plus one cuBLAS handle; PyTorch's context grows further as its kernels load, so a run with torch measures it better".into(),
    );
    for f in [
        "cublas_workspace_bytes",
        "cublas_workspaces",
        "reserved_slack_fraction",
        "reserved_slack_fraction_expandable",
    ] {
        sources.insert(
            f.into(),
            "default: needs PyTorch training steps to measure".into(),
        );
    }
    sources.insert(
        "nccl_bytes".into(),
        "default: one GPU measured, no NCCL communicator".into(),
    );
    c
}

#[allow(clippy::too_many_arguments)] // One call site; the pieces are the pipeline's state.
fn torch_part(
    t: &mut dyn Trainer,
    stack: &probe::Stack,
    gpu: &Gpu,
    defaults: &Calibration,
    native: &NativeReport,
    opts: &Options,
    progress: &mut dyn Progress,
    sources: &mut BTreeMap<String, String>,
) -> Result<(TorchPart, Vec<RowReport>, Calibration), CalibrateError> {
    let scenarios: Vec<ProbeScenario> = grid(opts.quick);
    progress.note(&format!(
        "PyTorch {} (CUDA {}), transformers {}, peft {}: {} training scenarios",
        stack.torch.as_deref().unwrap_or("?"),
        stack.torch_cuda.as_deref().unwrap_or("?"),
        stack.transformers.as_deref().unwrap_or("?"),
        stack.peft.as_deref().unwrap_or("not installed"),
        scenarios.len()
    ));
    progress.phase("PyTorch training steps", scenarios.len() as u64);
    let out = t.run(&scenarios, stack, &mut |l| progress.tick(l))?;

    let mut samples: Vec<(usize, Sample)> = Vec::new();
    let mut core: Vec<(headroom_core::model::ModelSpec, headroom_core::Scenario)> = Vec::new();
    for s in &scenarios {
        core.push(grid::core_scenario(s, &gpu.id)?);
    }
    for (i, (s, (spec, scen))) in scenarios.iter().zip(&core).enumerate() {
        if let Some(r) = out.rows.iter().find(|r| r.id == s.id)
            && r.status == Status::Ok
            && r.allocated > 0
        {
            samples.push((
                i,
                Sample {
                    id: s.id.clone(),
                    spec: spec.clone(),
                    scenario: scen.clone(),
                    measured: fit::Levels {
                        allocated: r.allocated,
                        reserved: r.reserved,
                        device: r.device,
                    },
                },
            ));
        }
    }
    let train: Vec<Sample> = samples
        .iter()
        .filter(|(i, _)| !ProbeScenario::held_out(*i))
        .map(|(_, s)| s.clone())
        .collect();
    let held: Vec<Sample> = samples
        .iter()
        .filter(|(i, _)| ProbeScenario::held_out(*i))
        .map(|(_, s)| s.clone())
        .collect();
    let cal = fit_constants(&train, gpu, defaults, native, out.workspace, sources);
    let count = |st: Status| out.rows.iter().filter(|r| r.status == st).count();
    let rows: Vec<RowReport> = scenarios
        .iter()
        .zip(&core)
        .enumerate()
        .map(|(i, (s, (spec, scen)))| {
            let r = out.rows.iter().find(|r| r.id == s.id);
            let sample = Sample {
                id: s.id.clone(),
                spec: spec.clone(),
                scenario: scen.clone(),
                measured: fit::Levels {
                    allocated: 0,
                    reserved: 0,
                    device: 0,
                },
            };
            let measured = r.filter(|r| r.status == Status::Ok).map(|r| fit::Levels {
                allocated: r.allocated,
                reserved: r.reserved,
                device: r.device,
            });
            RowReport {
                id: s.id.clone(),
                split: if ProbeScenario::held_out(i) {
                    "held_out"
                } else {
                    "train"
                }
                .into(),
                scenario: s.clone(),
                link: codec::encode(scen),
                status: r.map_or(Status::Skipped, |r| r.status),
                error: r.and_then(|r| r.error.clone()),
                measured,
                phases: r.map(|r| r.phases.clone()).unwrap_or_default(),
                allocated_before: r.map_or(0, |r| r.allocated_before),
                alloc_retries: r.map_or(0, |r| r.alloc_retries),
                seconds: r.map_or(0.0, |r| r.seconds),
                predicted_before: prediction(&sample, gpu, defaults),
                predicted_after: prediction(&sample, gpu, &cal),
            }
        })
        .collect();
    let part = TorchPart {
        status: "measured".into(),
        reason: None,
        scenarios: scenarios.len(),
        ok: count(Status::Ok),
        oom: count(Status::Oom),
        errors: count(Status::Error),
        skipped: count(Status::Skipped),
        workspace_probe: out.workspace.map(|w| WorkspaceMeasure {
            bytes: w.bytes,
            count: w.count,
            method: out.workspace_method.clone().unwrap_or_default(),
        }),
        device_method: out.rows.iter().find_map(|r| r.device_method.clone()),
        train_rows: train.len(),
        held_out_rows: held.len(),
        held_out_before: (!held.is_empty()).then(|| errors(&held, gpu, defaults)),
        held_out_after: (!held.is_empty()).then(|| errors(&held, gpu, &cal)),
    };
    Ok((part, rows, cal))
}
