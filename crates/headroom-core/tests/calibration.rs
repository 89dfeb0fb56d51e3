//! Calibration files: every committed one parses and is in range; the fixture written by
//! calibrate's fake backend parses and is used; bad files give errors naming the field.

use headroom_core::calibration::schema::CalibrationFile;
use headroom_core::calibration::{calibration_files, calibrations_ready, install_calibrations};
use headroom_core::{Calibration, ContentError, GpuCatalog, Scenario, estimate_with};
use serde_json::{Value, json};

const FIXTURE_NAME: &str = "h100-sxm-80gb-cuda13.0-torch2.11";
const FIXTURE: &str = include_str!("fixtures/calibration/h100-sxm-80gb-cuda13.0-torch2.11.json");

/// The committed files, in a build that does not embed them (the site's build of the core):
/// installed as the site installs them, from what site/pages.sh writes as
/// `content/calibrations.json` (each file with its rows emptied).
fn publish() {
    if calibrations_ready() {
        return;
    }
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../content/calibration");
    let mut files = serde_json::Map::new();
    for entry in std::fs::read_dir(&dir).expect("content/calibration/ reads") {
        let path = entry.expect("a directory entry").path();
        if path.extension().is_some_and(|e| e == "json") {
            let text = std::fs::read_to_string(&path).expect("a calibration file reads");
            let mut file: Value = serde_json::from_str(&text).expect("a committed file is JSON");
            file["rows"] = json!([]);
            let stem = path
                .file_stem()
                .and_then(|s| s.to_str())
                .expect("a file name");
            files.insert(stem.to_string(), file);
        }
    }
    install_calibrations(&Value::Object(files).to_string()).expect("the committed files install");
}

#[test]
fn every_committed_calibration_file_parses_is_in_range_and_is_used() {
    publish();
    let catalog = GpuCatalog::builtin();
    for (name, text) in calibration_files() {
        let cal = Calibration::check(name, text, catalog)
            .unwrap_or_else(|e| panic!("content/calibration/{name}.json: {e}"));
        assert!(cal.is_measured());
        let (gpu_id, _) = Calibration::parse(name, text).expect("checked above");
        let gpu = catalog.get(&gpu_id).expect("checked above");
        assert!(
            Calibration::for_gpu(gpu).is_measured(),
            "{name}: the core does not pick a file for {gpu_id}"
        );
    }
}

#[test]
fn the_fake_backends_fixture_parses_and_drives_estimates() {
    let (gpu_id, cal) = Calibration::parse(FIXTURE_NAME, FIXTURE).expect("fixture parses");
    assert_eq!(gpu_id, "h100-sxm-80gb");
    assert!(cal.is_measured());
    assert!(
        (256 << 20..=2 << 30).contains(&cal.cuda_context_bytes),
        "{cal:?}"
    );
    assert!((0.0..0.5).contains(&cal.reserved_slack_fraction), "{cal:?}");
    let gpu = GpuCatalog::builtin().get(&gpu_id).expect("in the catalog");
    let picked = Calibration::pick(&[(FIXTURE_NAME, FIXTURE)], gpu);
    assert_eq!(picked, cal);
    let a100 = GpuCatalog::builtin()
        .get("a100-sxm4-80gb")
        .expect("in the catalog");
    assert!(!Calibration::pick(&[(FIXTURE_NAME, FIXTURE)], a100).is_measured());

    let scen = Scenario::default();
    let (_, spec) = headroom_core::estimate::resolve_model(&scen).expect("default model");
    let e = estimate_with(&spec, gpu, &cal, &scen);
    assert!(e.calibrated);
    let ctx = e
        .components
        .iter()
        .find(|c| c.bytes == cal.cuda_context_bytes && c.source.contains(FIXTURE_NAME))
        .expect("a component carries the measured context and names the file");
    assert_eq!(ctx.confidence, headroom_core::Confidence::Calibrated);

    // Fake data must never pass as a committed measurement.
    let err = Calibration::check(FIXTURE_NAME, FIXTURE, GpuCatalog::builtin())
        .expect_err("fake data is refused");
    assert_eq!(field(&err), "native.backend");
}

#[test]
fn the_whole_fixture_reads_into_the_schema_types() {
    let f: CalibrationFile = serde_json::from_str(FIXTURE).expect("schema");
    assert_eq!(f.schema_version, headroom_core::calibration::SCHEMA_VERSION);
    assert_eq!(f.file_name(), format!("{FIXTURE_NAME}.json"));
    assert_eq!(f.native.backend, "fake");
    assert!(!f.native.matmul.is_empty() && !f.native.bandwidth.is_empty());
    assert!(f.native.context_bytes.min <= f.native.context_bytes.median);
    assert_eq!(f.torch.status, "measured");
    assert_eq!(f.rows.len(), f.torch.scenarios);
    let gpu = GpuCatalog::builtin()
        .get(&f.gpu_id)
        .expect("in the catalog");
    for r in &f.rows {
        // Every row's scenario reaches the core again, as the site would re-estimate it.
        let (spec, scen) = r.scenario.to_core(&f.gpu_id).expect("a valid scenario");
        let (_, cal) = Calibration::parse(FIXTURE_NAME, FIXTURE).expect("fixture parses");
        let e = estimate_with(&spec, gpu, &cal, &scen);
        assert!(e.bytes.peak_device > 0);
        assert!(r.link.starts_with("v=1"), "{}", r.link);
    }
    let after = f.torch.held_out_after.expect("error table");
    assert!(after.device.rows > 0);
}

#[test]
fn the_newest_file_for_a_gpu_wins() {
    let gpu = GpuCatalog::builtin()
        .get("h100-sxm-80gb")
        .expect("in the catalog");
    let older = edit(|v| {
        v["measured_on"] = json!("2026-01-05");
        v["constants"]["cuda_context_bytes"] = json!(400u64 << 20);
    });
    let files = [("b-older", older.as_str()), (FIXTURE_NAME, FIXTURE)];
    let (_, newest) = Calibration::parse(FIXTURE_NAME, FIXTURE).expect("fixture parses");
    assert_eq!(Calibration::pick(&files, gpu), newest);
    let files = [(FIXTURE_NAME, FIXTURE), ("b-older", older.as_str())];
    assert_eq!(Calibration::pick(&files, gpu), newest);
}

#[test]
fn fitted_and_full_runs_win_over_newer_native_only_or_quick_ones() {
    let gpu = GpuCatalog::builtin()
        .get("h100-sxm-80gb")
        .expect("in the catalog");
    let full = edit(|v| {
        v["mode"] = json!("full");
        v["measured_on"] = json!("2026-10-01");
        v["constants"]["cuda_context_bytes"] = json!(500u64 << 20);
    });
    let newer_quick = edit(|v| {
        v["mode"] = json!("quick");
        v["measured_on"] = json!("2026-11-01");
    });
    let newest_native = edit(|v| {
        v["mode"] = json!("full");
        v["torch"]["status"] = json!("skipped");
        v["measured_on"] = json!("2026-12-01");
    });
    let files = [
        ("c-native", newest_native.as_str()),
        ("a-full", full.as_str()),
        ("b-quick", newer_quick.as_str()),
    ];
    let picked = Calibration::pick(&files, gpu);
    assert_eq!(picked.cuda_context_bytes, 500 << 20, "{picked:?}");
    let files = [
        ("c-native", newest_native.as_str()),
        ("b-quick", newer_quick.as_str()),
    ];
    let picked = Calibration::pick(&files, gpu);
    let (_, quick) = Calibration::parse("b-quick", &newer_quick).expect("parses");
    assert_eq!(picked, quick, "fitted on PyTorch beats native-only");
}

fn edit(f: impl FnOnce(&mut Value)) -> String {
    let mut v: Value = serde_json::from_str(FIXTURE).expect("fixture is JSON");
    f(&mut v);
    v.to_string()
}

fn field(e: &ContentError) -> &str {
    match e {
        ContentError::Field { field, .. } => field,
        ContentError::Parse { .. } => "(parse)",
    }
}

#[track_caller]
fn check_bad(f: impl FnOnce(&mut Value), expect_field: &str, expect_message: &str) {
    let text = edit(f);
    let err = Calibration::parse("bad", &text).expect_err("must be rejected");
    assert_eq!(field(&err), expect_field, "{err}");
    let msg = err.to_string();
    assert!(msg.contains(expect_message), "{msg}");
    assert!(msg.starts_with("bad: "), "names the file: {msg}");
}

#[test]
fn bad_files_name_the_field() {
    check_bad(
        |v| v["schema_version"] = json!(2),
        "schema_version",
        "must be 1, found 2",
    );
    check_bad(
        |v| {
            v.as_object_mut().expect("object").remove("schema_version");
        },
        "schema_version",
        "is missing",
    );
    check_bad(|v| v["gpu_id"] = json!("H100 SXM!"), "gpu_id", "catalog id");
    check_bad(|v| v["gpu_id"] = json!(7), "gpu_id", "must be a string");
    check_bad(
        |v| v["measured_on"] = json!("22/11/2026"),
        "measured_on",
        "YYYY-MM-DD",
    );
    check_bad(
        |v| v["measured_on"] = json!("2026-13-01"),
        "measured_on",
        "YYYY-MM-DD",
    );
    check_bad(
        |v| v["constants"] = json!(3),
        "constants",
        "must be an object",
    );
    check_bad(
        |v| {
            v["constants"]
                .as_object_mut()
                .expect("object")
                .remove("cuda_context_bytes");
        },
        "constants.cuda_context_bytes",
        "is missing",
    );
    check_bad(
        |v| v["constants"]["cuda_context_bytes"] = json!(-5),
        "constants.cuda_context_bytes",
        "non-negative integer",
    );
    check_bad(
        |v| v["constants"]["cuda_context_bytes"] = json!(9u64 << 30),
        "constants.cuda_context_bytes",
        "must be from 1048576 to 8589934592",
    );
    check_bad(
        |v| v["constants"]["cuda_context_bytes"] = json!(1000),
        "constants.cuda_context_bytes",
        "must be from",
    );
    check_bad(
        |v| v["constants"]["cublas_workspace_bytes"] = json!(2u64 << 30),
        "constants.cublas_workspace_bytes",
        "must be from 0 to 1073741824",
    );
    check_bad(
        |v| v["constants"]["cublas_workspaces"] = json!(65),
        "constants.cublas_workspaces",
        "must be from 0 to 64, found 65",
    );
    check_bad(
        |v| v["constants"]["reserved_slack_fraction"] = json!(1.5),
        "constants.reserved_slack_fraction",
        "from 0 to 1, found 1.5",
    );
    check_bad(
        |v| v["constants"]["reserved_slack_fraction_expandable"] = json!("0.1"),
        "constants.reserved_slack_fraction_expandable",
        "must be a number",
    );
    check_bad(
        |v| v["constants"]["nccl_bytes"] = json!(1u64 << 40),
        "constants.nccl_bytes",
        "must be from 0",
    );
    // The measured rates' ranges (their reasons are beside the checks in calibration/mod.rs).
    check_bad(
        |v| v["native"]["matmul"][1]["efficiency"] = json!(1e300),
        "native.matmul[1].efficiency",
        "above 0 and at most 2",
    );
    check_bad(
        |v| v["native"]["matmul"][0]["efficiency"] = json!(-0.5),
        "native.matmul[0].efficiency",
        "above 0 and at most 2",
    );
    check_bad(
        |v| v["native"]["matmul"][2]["n"] = json!(0),
        "native.matmul[2].n",
        "from 1 to 1048576",
    );
    check_bad(
        |v| v["native"]["bandwidth"][1]["gb_per_s"]["median"] = json!(1e9),
        "native.bandwidth[1].gb_per_s.median",
        "at most 20000",
    );
    let err = Calibration::parse("broken", "{\"schema_version\": 1,").expect_err("not JSON");
    assert!(matches!(err, ContentError::Parse { .. }), "{err}");

    // A GPU the catalog lacks is caught by the committed-file check.
    let text = edit(|v| {
        v["gpu_id"] = json!("nvidia-h100-80gb-hbm3");
        v["native"]["backend"] = json!("cuda");
    });
    let err = Calibration::check("x", &text, GpuCatalog::builtin()).expect_err("unknown GPU");
    assert_eq!(field(&err), "gpu_id");
    assert!(err.to_string().contains("--gpu"), "{err}");
    let text = edit(|v| v["native"]["backend"] = json!("cuda"));
    assert!(Calibration::check("x", &text, GpuCatalog::builtin()).is_ok());
}

/// A measured file's CUDA total (`machine.total_bytes`) is the verdict's capacity: on the H100
/// measured 2026-11-25, CUDA reports 85,017,493,504 B (torch: "total capacity of 79.18 GiB"),
/// 480 MiB below nvidia-smi's 81,559 MiB in the catalog. Without a file the catalog's figure
/// stays; a file cut down to its constants calibrates without one.
#[test]
fn a_measured_files_cuda_total_is_the_capacity() {
    publish();
    let h100 = headroom_core::estimate(&Scenario::default()).expect("estimates");
    assert_eq!(h100.verdict.capacity, 85_017_493_504);
    let catalog = GpuCatalog::builtin();
    let a100 = catalog.get("a100-sxm4-80gb").expect("catalog");
    let (_, spec) = headroom_core::estimate::resolve_model(&Scenario::default()).expect("model");
    let e = estimate_with(
        &spec,
        a100,
        &Calibration::assumed(a100),
        &Scenario {
            gpu: a100.id.clone(),
            ..Scenario::default()
        },
    );
    assert_eq!(e.verdict.capacity, a100.total_bytes);
    let cut = edit(|v| {
        v.as_object_mut().expect("object").remove("machine");
    });
    let (_, cal) = Calibration::parse("cut.json", &cut).expect("parses");
    assert_eq!(cal.usable_bytes, None);
}
