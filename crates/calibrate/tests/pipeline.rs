//! The whole pipeline on the fake backends: measure, fit, write the file atomically, and the
//! core parses it; plus the paths without PyTorch and without peft.

use calibrate::device::Device;
use calibrate::fake::{FakeDevice, FakeTrainer};
use calibrate::probe::{ProbeError, ProbeOutput, Stack, Status, Trainer};
use calibrate::report::{CalibrationFile, write_atomic};
use calibrate::{Options, Silent, calibrate};
use headroom_core::{Calibration, GpuCatalog};

const MIB: u64 = 1 << 20;
/// 2026-11-22T09:00:00Z.
const NOW: u64 = 1_795_338_000;

fn opts(quick: bool) -> Options {
    Options {
        quick,
        gpu: None,
        native_only: false,
        now_secs: NOW,
    }
}

fn temp_dir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("calibrate-test-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn measure_fit_write_and_the_core_reads_it() {
    let gpu = GpuCatalog::builtin().get("h100-sxm-80gb").expect("catalog");
    let mut dev = FakeDevice::default();
    let mut trainer = FakeTrainer::h100(gpu);
    let truth = trainer.truth.clone();
    let file = calibrate(&mut dev, Some(&mut trainer), &opts(false), &mut Silent).expect("runs");

    assert_eq!(file.gpu_id, "h100-sxm-80gb");
    assert!(file.machine.gpu_in_catalog);
    assert_eq!(file.measured_on, "2026-11-22");
    assert_eq!(file.generated_at, "2026-11-22T09:00:00Z");
    assert_eq!(file.software.stack, "cuda13.0-torch2.11");
    assert_eq!(file.file_name(), "h100-sxm-80gb-cuda13.0-torch2.11.json");
    assert_eq!(file.native.backend, "fake");

    // Native: every measurement with its spread; fp8 reported as not measured, with a reason.
    assert_eq!(file.native.context_bytes.reps, 7);
    assert!(file.native.context_bytes.min <= file.native.context_bytes.median);
    assert_eq!(file.native.matmul.len(), 4 * 7, "4 formats x 7 sizes");
    assert!(
        file.native
            .matmul_unsupported
            .iter()
            .any(|u| u.dtype == "fp8")
    );
    let bf16: Vec<f64> = file
        .native
        .matmul
        .iter()
        .filter(|p| p.dtype == "bf16")
        .map(|p| p.tflops.median)
        .collect();
    assert!(
        bf16.windows(2).all(|w| w[0] < w[1]),
        "efficiency rises with size: {bf16:?}"
    );
    assert_eq!(file.native.bandwidth.len(), 5);

    // PyTorch: 42 rows; the 7B fp32 eager scenario does not fit 80 GB and is recorded as OOM.
    assert!(file.rows.len() >= 40);
    assert_eq!(file.torch.scenarios, file.rows.len());
    let oom: Vec<_> = file
        .rows
        .iter()
        .filter(|r| r.status == Status::Oom)
        .collect();
    assert!(
        oom.iter().any(|r| r.id.starts_with("llama-xl")),
        "OOM recorded"
    );
    assert!(
        oom.iter()
            .all(|r| r.measured.is_none() && !r.predicted_after.fits)
    );
    assert_eq!(file.torch.oom, oom.len());
    let held = file.rows.iter().filter(|r| r.split == "held_out").count();
    assert_eq!(held, file.rows.len() / 3);
    assert!(file.rows.iter().all(|r| r.link.starts_with("v=1")));
    assert!(file.rows.iter().any(|r| r.phases.len() == 6));

    // The fit finds the fake's constants again, and the held-out error drops.
    let c = &file.constants;
    assert_eq!(c.cublas_workspaces, truth.cublas_workspaces);
    assert_eq!(c.cublas_workspace_bytes, truth.cublas_workspace_bytes);
    assert!(c.cuda_context_bytes.abs_diff(truth.cuda_context_bytes) <= 4 * MIB);
    // The fake's reserved level is the allocator replay's wherever the core replays a step
    // (every row of the grid), so the slack fraction, fitted with the replay off as the
    // stand-in for steps it cannot replay, is not the fake's: it is only a fraction.
    // (fit.rs's own test recovers it from rows made with the slack fraction.)
    assert!((0.0..=1.0).contains(&c.reserved_slack_fraction));
    assert!((0.0..=1.0).contains(&c.reserved_slack_fraction_expandable));
    let before = file.torch.held_out_before.as_ref().expect("held-out table");
    let after = file.torch.held_out_after.as_ref().expect("held-out table");
    assert!(after.device.mean_abs_pct < 0.5 && before.device.mean_abs_pct > 1.0);
    for key in [
        "cuda_context_bytes",
        "cublas_workspace_bytes",
        "cublas_workspaces",
        "reserved_slack_fraction",
        "reserved_slack_fraction_expandable",
        "nccl_bytes",
    ] {
        assert!(file.constants_source.contains_key(key), "source of {key}");
    }

    // Written atomically, read back by the core as the calibration of this GPU.
    let dir = temp_dir("pipeline");
    let text = serde_json::to_string_pretty(&file).expect("serializes");
    let path = write_atomic(&dir, &file.file_name(), &text).expect("writes");
    let back = std::fs::read_to_string(&path).expect("reads");
    let reread: CalibrationFile = serde_json::from_str(&back).expect("round trip");
    // (Floats may differ in the last bit through JSON; the integers and names must not.)
    assert_eq!(reread.constants.cuda_context_bytes, c.cuda_context_bytes);
    assert_eq!(reread.rows.len(), file.rows.len());
    assert_eq!(reread.native.matmul.len(), file.native.matmul.len());
    let stem = file.file_name().trim_end_matches(".json").to_string();
    let (id, cal) = Calibration::parse(&stem, &back).expect("the core parses it");
    assert_eq!(id, "h100-sxm-80gb");
    assert_eq!(cal.cuda_context_bytes, c.cuda_context_bytes);
    assert_eq!(Calibration::pick(&[(&stem, &back)], gpu), cal);
    assert_eq!(
        std::fs::read_dir(&dir).expect("dir").count(),
        1,
        "no temporaries"
    );
    std::fs::remove_dir_all(&dir).expect("cleanup");
}

/// A machine with CUDA but no usable PyTorch.
struct NoTorch;

impl Trainer for NoTorch {
    fn stack(&mut self) -> Result<Stack, ProbeError> {
        Err(ProbeError::Unavailable(
            "python3 cannot import torch (ModuleNotFoundError)".into(),
        ))
    }
    fn run(
        &mut self,
        _: &[calibrate::grid::ProbeScenario],
        _: &Stack,
        _: &mut dyn FnMut(&str),
    ) -> Result<ProbeOutput, ProbeError> {
        unreachable!("not called without a stack")
    }
}

#[test]
fn without_torch_the_native_part_runs_and_says_so() {
    let mut dev = FakeDevice::default();
    let file = calibrate(&mut dev, Some(&mut NoTorch), &opts(true), &mut Silent).expect("runs");
    assert_eq!(file.torch.status, "skipped");
    assert!(file.torch.reason.as_deref().unwrap_or("").contains("torch"));
    assert!(file.rows.is_empty());
    assert_eq!(file.software.stack, "cuda13.0-native");
    // Context from the native figures (bare context plus a cuBLAS handle); the rest defaults.
    let info_ctx = file.native.context_bytes.median + file.native.cublas_handle_bytes.median;
    assert_eq!(file.constants.cuda_context_bytes, info_ctx.round() as u64);
    assert_eq!(
        file.constants.reserved_slack_fraction,
        file.defaults.reserved_slack_fraction
    );
    assert!(file.constants_source["reserved_slack_fraction"].starts_with("default"));
    let text = serde_json::to_string(&file).expect("serializes");
    assert!(Calibration::parse("x", &text).is_ok());
    assert_eq!(file.mode, "quick");
}

#[test]
fn without_peft_lora_scenarios_are_skipped_and_the_rest_fit() {
    let gpu = GpuCatalog::builtin().get("h100-sxm-80gb").expect("catalog");
    let mut trainer = FakeTrainer {
        peft: false,
        ..FakeTrainer::h100(gpu)
    };
    let mut dev = FakeDevice::default();
    let file = calibrate(&mut dev, Some(&mut trainer), &opts(false), &mut Silent).expect("runs");
    let skipped: Vec<_> = file
        .rows
        .iter()
        .filter(|r| r.status == Status::Skipped)
        .collect();
    assert_eq!(skipped.len(), 4);
    assert!(skipped.iter().all(|r| r.scenario.lora.is_some()));
    assert!(file.torch.train_rows > 20);
}

#[test]
fn an_unknown_gpu_override_is_an_error_and_a_known_one_is_used() {
    let mut dev = FakeDevice::default();
    let mut o = opts(true);
    o.native_only = true;
    o.gpu = Some("h200".into());
    let file = calibrate(&mut dev, None, &o, &mut Silent).expect("runs");
    assert_eq!(file.gpu_id, "h200-sxm-141gb");
    o.gpu = Some("no-such-gpu".into());
    let err = calibrate(&mut dev, None, &o, &mut Silent).expect_err("unknown id");
    assert!(err.to_string().contains("no-such-gpu"));
    let info = dev.info().expect("fake");
    assert_eq!(
        calibrate::match_gpu(&info, GpuCatalog::builtin()).map(|g| g.id.as_str()),
        Some("h100-sxm-80gb")
    );
}

/// A probe that breaks mid-run (python crashed before printing anything useful).
struct Broken;

impl Trainer for Broken {
    fn stack(&mut self) -> Result<Stack, ProbeError> {
        Ok(Stack {
            torch: Some("2.11.0+cu130".into()),
            torch_cuda: Some("13.0".into()),
            ..Stack::default()
        })
    }
    fn run(
        &mut self,
        _: &[calibrate::grid::ProbeScenario],
        _: &Stack,
        _: &mut dyn FnMut(&str),
    ) -> Result<ProbeOutput, ProbeError> {
        Err(ProbeError::Failed("a row the probe wrote: EOF".into()))
    }
}

#[test]
fn a_broken_probe_keeps_the_native_part_and_never_replaces_a_complete_file() {
    let gpu = GpuCatalog::builtin().get("h100-sxm-80gb").expect("catalog");
    let mut dev = FakeDevice::default();
    let broken = calibrate(&mut dev, Some(&mut Broken), &opts(true), &mut Silent).expect("runs");
    assert_eq!(broken.torch.status, "failed");
    assert!(broken.torch.reason.as_deref().unwrap_or("").contains("EOF"));
    assert!(broken.constants_source["cuda_context_bytes"].starts_with("native"));
    assert_eq!(broken.file_name(), "h100-sxm-80gb-cuda13.0-torch2.11.json");

    let mut trainer = FakeTrainer::h100(gpu);
    let quick = calibrate(&mut dev, Some(&mut trainer), &opts(true), &mut Silent).expect("runs");
    let full = calibrate(&mut dev, Some(&mut trainer), &opts(false), &mut Silent).expect("runs");
    assert!(broken.is_less_complete_than(&quick));
    assert!(quick.is_less_complete_than(&full));
    assert!(!full.is_less_complete_than(&quick));
    assert!(!quick.is_less_complete_than(&broken));
}

#[test]
fn a_failing_measurement_is_recorded_and_the_run_goes_on() {
    let mut dev = calibrate::fake::FlakyDevice::default();
    let mut o = opts(true);
    o.native_only = true;
    let file = calibrate(&mut dev, None, &o, &mut Silent).expect("runs");
    let fp16 = file
        .native
        .matmul_unsupported
        .iter()
        .find(|u| u.dtype == "fp16")
        .expect("fp16 recorded");
    assert!(fp16.reason.contains("failed at n=1024"), "{}", fp16.reason);
    // The sizes before the failure are kept; the other formats are whole.
    assert_eq!(
        file.native
            .matmul
            .iter()
            .filter(|p| p.dtype == "fp16")
            .count(),
        1
    );
    assert_eq!(
        file.native
            .matmul
            .iter()
            .filter(|p| p.dtype == "bf16")
            .count(),
        3
    );
    assert_eq!(file.native.bandwidth.len(), 4);
    assert_eq!(file.native.bandwidth_failed.len(), 1);
    assert_eq!(
        file.native.bandwidth_failed[0].dtype,
        "device_to_host_pageable"
    );
}

/// `refit` fits a file's constants again from its own rows: on a file whose constants were
/// changed after the run, it recovers the run's own fit (same rows, same core), recomputes every
/// row's predictions and the held-out tables, and says so in `constants_source.refit`.
#[test]
fn refit_recovers_the_runs_constants_from_its_rows() {
    let gpu = GpuCatalog::builtin().get("h100-sxm-80gb").expect("catalog");
    let mut trainer = FakeTrainer::h100(gpu);
    let file = calibrate(
        &mut FakeDevice::default(),
        Some(&mut trainer),
        &opts(false),
        &mut Silent,
    )
    .expect("runs");
    let mut stale = file.clone();
    stale.constants.reserved_slack_fraction = 0.5;
    stale.constants.cublas_workspace_bytes = MIB;
    stale.constants.cuda_context_bytes = 2 * MIB;
    for r in &mut stale.rows {
        r.predicted_after.allocated = 1;
        r.link.clear();
    }
    stale.torch.held_out_after = None;
    let again = calibrate::refit(&stale, NOW).expect("refits");
    assert_eq!(again.constants, file.constants);
    assert_eq!(again.torch.held_out_after, file.torch.held_out_after);
    assert_eq!(again.torch.held_out_before, file.torch.held_out_before);
    for (a, b) in again.rows.iter().zip(&file.rows) {
        assert_eq!(a.predicted_after, b.predicted_after, "{}", a.id);
        assert_eq!(a.link, b.link, "{}", a.id);
        assert_eq!(a.measured, b.measured, "{}", a.id);
    }
    let why = &again.constants_source["refit"];
    assert!(
        why.contains("2026-11-22") && why.contains("model changed"),
        "{why}"
    );
    // The measurements themselves are untouched.
    assert_eq!(again.native, file.native);
    assert_eq!(again.measured_on, file.measured_on);
}

/// Every committed calibration file agrees with today's core: refitting it from its own rows
/// gives the same constants and the same predictions for every row. A core change that moves a
/// calibrated figure fails here until the files are refit (`calibrate --refit FILE`), so the
/// calibration pages never show predictions of an older core.
#[test]
fn the_committed_calibrations_are_todays_cores() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../content/calibration");
    let mut files = 0;
    for entry in std::fs::read_dir(&dir).expect("content/calibration exists") {
        let path = entry.expect("a directory entry").path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("reads");
        let file: CalibrationFile = serde_json::from_str(&text).expect("parses");
        let again = calibrate::refit(&file, NOW).expect("refits");
        let name = path.display();
        assert_eq!(
            again.constants, file.constants,
            "{name}: refit it (calibrate --refit)"
        );
        for (old, new) in file.rows.iter().zip(&again.rows) {
            assert_eq!(
                (&old.predicted_before, &old.predicted_after),
                (&new.predicted_before, &new.predicted_after),
                "{name}, row {}: refit the file (calibrate --refit)",
                old.id
            );
        }
        files += 1;
    }
    assert!(files >= 2, "the H100 and H200 files");
}
