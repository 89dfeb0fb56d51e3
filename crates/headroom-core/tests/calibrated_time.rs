//! Measured speed reaches every surface: with a calibration loaded (the fixture written by
//! calibrate's fake backend), the analysis, the strategy table and the planner time each step
//! with the file's matmul curve and host link, exactly as `step_time_with` does with the rates
//! read from the file's `native` report; without one, nothing changes.

use headroom_core::calibration::schema::CalibrationFile;
use headroom_core::codec::{decode_pairs, query_pairs};
use headroom_core::dtype::DType;
use headroom_core::estimate::resolve;
use headroom_core::model::ModelSpec;
use headroom_core::plan::{DEFAULT_SPACE, PlanOptions, plan_with};
use headroom_core::strategies::strategies;
use headroom_core::time::{Rates, StepTime, TermKind, TimeAssumptions, step_time_with};
use headroom_core::{Analysis, Calibration, Confidence, Gpu, Scenario, analyze, analyze_with};

const FIXTURE_NAME: &str = "h100-sxm-80gb-cuda13.0-torch2.11";
const FIXTURE: &str = include_str!("fixtures/calibration/h100-sxm-80gb-cuda13.0-torch2.11.json");

fn fixture() -> Calibration {
    let (gpu_id, cal) = Calibration::parse(FIXTURE_NAME, FIXTURE).expect("fixture parses");
    assert_eq!(gpu_id, "h100-sxm-80gb");
    cal
}

/// The rates the fixture's `native` report gives for `dtype`, read straight from the file.
fn native_rates(dtype: DType) -> Rates {
    let file: CalibrationFile = serde_json::from_str(FIXTURE).expect("schema");
    Rates::from_native(&file.native, dtype, FIXTURE_NAME)
}

/// The default scenario (on the fixture's GPU) with `change` (`key=value&...`) applied.
fn scenario(change: &str) -> Scenario {
    let pairs = query_pairs(change).expect("query");
    decode_pairs(Scenario::default(), &pairs).expect("valid change")
}

fn measured(spec: &ModelSpec, gpu: &Gpu, scen: &Scenario) -> StepTime {
    let rates = native_rates(scen.precision.compute_dtype());
    step_time_with(spec, gpu, scen, &rates, &TimeAssumptions::default())
}

fn analyzed(scen: &Scenario, cal: &Calibration) -> Analysis {
    let r = resolve(scen).expect("resolves");
    analyze_with(&r.name, &r.spec, r.gpu, cal, scen, headroom_core::What::ALL)
}

#[test]
fn a_calibration_carries_the_rates_its_native_report_measured() {
    let cal = fixture();
    assert!(!cal.rates.is_empty());
    let gpu = resolve(&Scenario::default()).expect("resolves").gpu;
    assert!(Calibration::assumed(gpu).rates.is_empty());
    for dtype in [DType::Bf16, DType::F16, DType::F32] {
        let rates = Rates::for_calibration(&cal, dtype);
        assert_eq!(rates, native_rates(dtype), "{dtype:?}");
        // calibrate names formats `bf16`, `fp16`, `fp32`: each finds its own curve.
        assert_eq!(rates.gemm_curve.len(), 3, "{dtype:?}: {rates:?}");
    }
    let bf16 = Rates::for_calibration(&cal, DType::Bf16);
    assert!(bf16.host_to_device_gbs.is_some_and(|g| g > 1.0));
    assert!(bf16.device_to_host_gbs.is_some_and(|g| g > 1.0));
    assert_eq!(
        Rates::for_calibration(&Calibration::assumed(gpu), DType::Bf16),
        Rates::assumed()
    );
}

#[test]
fn the_analysis_times_the_step_with_the_calibrations_rates() {
    let cal = fixture();
    for change in [
        "",
        "precision=amp-fp16",
        "precision=fp32",
        "act_offload=true",
    ] {
        let scen = scenario(change);
        let r = resolve(&scen).expect("resolves");
        let with = analyzed(&scen, &cal).time;
        let without = analyze(&scen).expect("analyzes").time;
        assert_eq!(with, measured(&r.spec, r.gpu, &scen), "{change}");
        assert_ne!(with.step_seconds, without.step_seconds, "{change}");
        // A fused attention kernel runs at its own published rate, which calibrate does not
        // measure: that term stays assumed, the matmuls' are the calibration's.
        for t in with.terms.iter().filter(|t| t.kind == TermKind::Compute) {
            if t.id == "attention" {
                assert_eq!(t.confidence, Confidence::Assumed, "{change}");
                continue;
            }
            assert_eq!(t.confidence, Confidence::Calibrated, "{change}: {}", t.id);
            // Terms carry their formulas only with the `time-text` feature (the CLI's).
            if cfg!(feature = "time-text") {
                assert!(t.formula.contains(FIXTURE_NAME), "{change}: {}", t.formula);
            } else {
                assert!(t.formula.is_empty());
            }
        }
    }
    // The measured host link times the offload, and says so.
    let t = analyzed(&scenario("act_offload=true"), &cal).time;
    let offload = t.term("offload_activations").expect("transfer term");
    assert_eq!(offload.confidence, Confidence::Calibrated);
}

#[test]
fn the_strategy_table_times_every_row_with_the_calibrations_rates() {
    let cal = fixture();
    let scen = Scenario::default();
    let r = resolve(&scen).expect("resolves");
    let with = strategies(&r.spec, r.gpu, &cal, &scen);
    let without = strategies(&r.spec, r.gpu, &r.calibration, &scen);
    let row = |rows: &[headroom_core::strategies::Strategy]| {
        rows.iter()
            .find(|s| s.id == "offload_activations")
            .map(|s| s.step_seconds)
            .expect("an activation offload row")
    };
    let offloaded = Scenario {
        offload_activations: true,
        ..scen.clone()
    };
    assert_eq!(
        row(&with),
        measured(&r.spec, r.gpu, &offloaded).step_seconds
    );
    assert_ne!(row(&with), row(&without));
    assert_eq!(analyzed(&scen, &cal).strategies, Some(with));
}

#[test]
fn the_planner_times_every_plan_with_the_calibrations_rates() {
    let cal = fixture();
    let scen = Scenario::default();
    let r = resolve(&scen).expect("resolves");
    let opts = PlanOptions::default();
    let with = plan_with(&r.spec, r.gpu, &cal, &scen, &opts, &DEFAULT_SPACE).expect("plans");
    let without =
        plan_with(&r.spec, r.gpu, &r.calibration, &scen, &opts, &DEFAULT_SPACE).expect("plans");
    assert!(!with.plans.is_empty());
    for p in &with.plans {
        assert_eq!(
            p.step_seconds,
            measured(&r.spec, r.gpu, &p.scenario).step_seconds,
            "{}",
            p.link
        );
    }
    let first = |p: &headroom_core::plan::Planning| p.plans[0].step_seconds;
    assert_ne!(first(&with), first(&without));
}

#[test]
fn without_a_calibration_the_step_is_timed_with_the_defaults() {
    // On an A100, which no committed calibration covers (the H100 has one: measured
    // 2026-11-25).
    for change in ["", "precision=fp32", "act_offload=true&ckpt=full"] {
        let scen = Scenario {
            gpu: "a100-sxm4-80gb".into(),
            ..scenario(change)
        };
        let r = resolve(&scen).expect("resolves");
        assert!(
            !r.calibration.is_measured(),
            "a committed file would change this test"
        );
        let a = analyze(&scen).expect("analyzes");
        let assumed = step_time_with(
            &r.spec,
            r.gpu,
            &scen,
            &Rates::assumed(),
            &TimeAssumptions::default(),
        );
        assert_eq!(a.time, assumed, "{change}");
        // The defaults serialize as before: no `rates` in their JSON.
        let json = serde_json::to_value(&r.calibration).expect("json");
        assert!(json.get("rates").is_none(), "{json}");
    }
}

#[test]
fn a_calibration_round_trips_through_json_with_its_rates() {
    let cal = fixture();
    let json = serde_json::to_string(&cal).expect("json");
    let back: Calibration = serde_json::from_str(&json).expect("back");
    assert_eq!(back, cal);
}

#[test]
fn a_file_without_native_rates_calibrates_memory_only_and_a_bad_one_names_the_field() {
    let mut v: serde_json::Value = serde_json::from_str(FIXTURE).expect("json");
    v["native"]
        .as_object_mut()
        .expect("native")
        .remove("matmul");
    let (_, cal) = Calibration::parse("cut", &v.to_string()).expect("parses without a curve");
    assert!(cal.rates.matmul.is_empty());
    assert!(cal.rates.host_to_device_gbs.is_some());
    v["native"]["bandwidth"] = serde_json::json!("fast");
    let err = Calibration::parse("bad", &v.to_string()).expect_err("a bandwidth list");
    match err {
        headroom_core::ContentError::Field { field, .. } => assert_eq!(field, "native.bandwidth"),
        other => panic!("{other}"),
    }
}
