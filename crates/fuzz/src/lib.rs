//! Fuzz targets for every input from outside the core: share links (decode + analyze), pasted
//! `config.json`, scenario files, calibration files, guide Markdown and the planner.
//!
//! Each target takes a structured input (`input`), renders the text a person or a page could
//! hand the core, and checks properties, not only "no panic": a link round-trips, a valid
//! scenario's peaks are ordered and at least its weights, more micro-batch never lowers the
//! activations, more GPUs never raise the per-GPU model states, every refusal has a message,
//! every plan offered fits, every figure is finite. The targets run from `tests/targets.rs`:
//! a bounded random search in `cargo test`, ten million cases with `BOLERO_RANDOM_ITERATIONS`
//! (see the root README's Fuzzing section), or coverage-guided with `cargo bolero test`
//! (libFuzzer, nightly).

pub mod input;
pub mod stats;

use headroom_core::analysis::{What, analyze_only};
use headroom_core::codec::{self, decode, encode};
use headroom_core::model::parse_config_json;
use headroom_core::scenario::{Method, ModelChoice, Scenario};
use headroom_core::{Calibration, Estimate, bounds, estimate};
use std::sync::OnceLock;

/// A link: decoded strictly and leniently; an accepted scenario is analyzed and its
/// properties checked.
pub fn link(input: &input::Link) {
    let text = input.render();
    stats::show("link", &text);
    match decode(&text) {
        Ok(scen) => {
            stats::count("link", "decoded");
            scenario_properties(&scen, &text)
        }
        Err(e) => assert!(!e.to_string().is_empty(), "{text:?}: empty message"),
    }
    if let Ok(pairs) = codec::query_pairs(&text) {
        let (scen, errors) = codec::decode_lenient(Scenario::default(), &pairs);
        for e in errors {
            assert!(!e.to_string().is_empty(), "{text:?}: empty message");
        }
        // What the page shows for a half-readable link must analyze as well.
        let _ = analyze_only(&scen, What::ESTIMATE, None);
    }
}

/// The properties of one accepted scenario; `what` names the input in a failure.
pub fn scenario_properties(scen: &Scenario, what: &str) {
    // decode(encode(s)) == s, except LoRA's settings under full fine-tuning, the document
    // length without packing and dynamic padding's spread and drop setting without a mean
    // length, which a link leaves out on purpose (they change nothing there).
    let mut expected = scen.clone();
    if scen.method == Method::Full {
        expected.lora = Scenario::default().lora;
    }
    if !scen.packing {
        expected.doc_len = Scenario::default().doc_len;
    }
    if scen.len_mean == 0 {
        expected.len_sd = 0;
        expected.drop_long = false;
    }
    assert_eq!(decode(&encode(scen)).as_ref(), Ok(&expected), "{what:?}");

    // A link may name a preset or GPU that does not exist: refused with the list of known ones.
    stats::count("scenario", "checked");
    if let Err(e) = headroom_core::estimate::resolve(scen) {
        assert!(!e.to_string().is_empty(), "{what:?}: empty message");
        return;
    }
    let e = match estimate(scen) {
        Ok(e) => {
            stats::count("scenario", "estimated");
            e
        }
        // Otherwise refused only past the scale bound, naming the field.
        Err(err) => {
            let err = err.to_string();
            assert!(
                err.starts_with("`seq`") || err.starts_with("`batch`"),
                "{what:?}: {err}"
            );
            return;
        }
    };
    peaks_are_ordered(&e, what);

    if let Some(b) = scen.micro_batch.checked_mul(2) {
        let bigger = Scenario {
            micro_batch: b,
            ..scen.clone()
        };
        if let Ok(e2) = estimate(&bigger) {
            assert!(
                e2.bytes.activations_per_layer >= e.bytes.activations_per_layer
                    && e2.bytes.peak_tensors >= e.bytes.peak_tensors,
                "{what:?}: twice the micro-batch lowered the activations"
            );
        }
    }
    let more = Scenario {
        gpus: scen.gpus.saturating_mul(2),
        ..scen.clone()
    };
    if more.validate().is_ok()
        && let Ok(e2) = estimate(&more)
    {
        let states = |e: &Estimate| e.bytes.weights + e.bytes.gradients + e.bytes.optimizer_states;
        assert!(
            states(&e2) <= states(&e),
            "{what:?}: twice the GPUs raised the per-GPU states"
        );
    }
    if let Ok(a) = analyze_only(scen, What::ESTIMATE, None) {
        let t = &a.time;
        for (name, v) in [
            ("step_seconds", t.step_seconds),
            ("tokens_per_second", t.tokens_per_second),
            ("mfu", t.mfu),
        ] {
            assert!(v.is_finite() && v >= 0.0, "{what:?}: time.{name} = {v}");
        }
    }
}

fn peaks_are_ordered(e: &Estimate, what: &str) {
    let b = &e.bytes;
    assert!(
        b.weights <= b.peak_tensors
            && b.peak_tensors <= b.peak_allocated
            && b.peak_allocated <= b.peak_reserved
            && b.peak_reserved <= b.peak_device,
        "{what:?}: peaks out of order: {b:?}"
    );
}

/// A `config.json`: parsed or refused with a message; a parsed model is within its bounds,
/// estimates (or is refused by name), and its `cfg=` link round-trips.
pub fn config(input: &input::Config) {
    let text = input.render();
    stats::show("config", &text);
    config_text(&text);
}

/// The config properties for any text.
pub fn config_text(text: &str) {
    match parse_config_json(text) {
        Err(e) => assert!(!e.to_string().is_empty(), "{text:?}: empty message"),
        Ok(spec) => {
            stats::count("config", "parsed");
            assert!(
                bounds::check_model(&spec).is_ok(),
                "{text:?}: past its bounds"
            );
            let scen = Scenario {
                model: ModelChoice::Custom(Box::new(spec)),
                ..Scenario::default()
            };
            scenario_properties(&scen, text);
        }
    }
}

/// A real calibration file, changed in generated places: read or refused with a message
/// naming the field; one that is read analyzes.
pub fn calibration(mutations: &[input::Mutation]) {
    let text = input::mutate(calibration_fixture(), mutations);
    calibration_text(&text);
}

/// The calibration properties for any text.
pub fn calibration_text(text: &str) {
    match Calibration::parse("fuzz.json", text) {
        Err(e) => assert!(!e.to_string().is_empty(), "{text:?}: empty message"),
        Ok((_, cal)) => {
            stats::count("calibration", "read");
            let scen = Scenario::default();
            if let Ok(a) = analyze_only(&scen, What::ESTIMATE, Some(&cal)) {
                peaks_are_ordered(&a.estimate, text);
                assert!(a.time.step_seconds.is_finite(), "{text:?}: step time");
            }
        }
    }
}

fn calibration_fixture() -> &'static serde_json::Value {
    static DOC: OnceLock<serde_json::Value> = OnceLock::new();
    DOC.get_or_init(|| {
        serde_json::from_str(include_str!(
            "../../headroom-core/tests/fixtures/calibration/h100-sxm-80gb-cuda13.0-torch2.11.json"
        ))
        .unwrap_or(serde_json::Value::Null)
    })
}

/// A scenario file (TOML): read or refused with a message; one that is read has the
/// scenario properties. The same text as a claims file is read or refused too.
pub fn scenario_file(input: &input::ScenarioFile) {
    let text = input.render();
    stats::show("scenario_file", &text);
    scenario_file_text(&text);
}

/// The scenario-file properties for any text.
pub fn scenario_file_text(text: &str) {
    match codec::parse_scenario_file("fuzz", text) {
        Ok(named) => {
            stats::count("scenario_file", "read");
            scenario_properties(&named.scenario, text)
        }
        Err(e) => assert!(!e.to_string().is_empty(), "{text:?}: empty message"),
    }
    if let Err(e) = headroom_core::claims::parse_file("fuzz", text) {
        assert!(!e.to_string().is_empty(), "{text:?}: empty message");
    }
}

/// A framework config (issue 32): imported or refused with a message; an import's link fields
/// apply to the default scenario or are refused naming a field, and an accepted scenario has
/// the scenario properties. Every key of an import has a note.
pub fn import_config(input: &input::ImportConfig) {
    let (text, name) = input.render();
    stats::show("import_config", &text);
    import_text(&text, Some(&name));
}

/// The import properties for any text.
pub fn import_text(text: &str, name: Option<&str>) {
    match headroom_core::import::import(text, name, &|_: &str| None) {
        Ok(imported) => {
            stats::count("import_config", "imported");
            assert!(
                imported.notes.iter().all(|n| !n.key.is_empty()),
                "{text:?}: a note without its key"
            );
            match codec::decode_pairs(Scenario::default(), &imported.pairs) {
                Ok(scen) => {
                    stats::count("import_config", "applied");
                    scenario_properties(&scen, text)
                }
                Err(e) => assert!(!e.to_string().is_empty(), "{text:?}: empty message"),
            }
        }
        Err(e) => assert!(!e.0.is_empty(), "{text:?}: empty message"),
    }
}

/// A guide: parsed or refused with a line and a message; every block of a parsed guide
/// evaluates for generated reader inputs (or says what is wrong), and so does every live
/// value in its text.
pub fn guide(input: &input::Guide, reader: &input::Link) {
    let text = input.render(named_ids());
    guide_text(&text, &reader.pairs());
}

/// The guide properties for any text and reader inputs.
pub fn guide_text(text: &str, reader: &[(String, String)]) {
    use headroom_core::guide::{self, Inline};
    let g = match guide::parse("fuzz", text) {
        Ok(g) => g,
        Err(e) => {
            assert!(!e.to_string().is_empty(), "{text:?}: empty message");
            return;
        }
    };
    stats::count("guide", "parsed");
    let blocks: Vec<_> = g.blocks().collect();
    for b in &blocks {
        match guide::evaluate(b, reader) {
            Ok(_) => stats::count("guide", "block evaluated"),
            Err(m) => assert!(!m.is_empty(), "{text:?}: empty message"),
        }
    }
    for i in g.inlines() {
        if let Inline::Value {
            metric,
            change,
            block,
        } = i
            && let Some(b) = blocks.get(*block)
            && let Err(m) = guide::evaluate_value(b, reader, metric, change)
        {
            assert!(!m.is_empty(), "{text:?}: empty message");
        }
    }
}

fn named_ids() -> &'static [String] {
    static IDS: OnceLock<Vec<String>> = OnceLock::new();
    IDS.get_or_init(|| codec::named_scenarios().into_iter().map(|n| n.id).collect())
}

/// The planner and the full analysis (what fits, the strategy table) on a link's scenario:
/// no panic, every plan offered fits, every strategy row's figures are finite, and the
/// planner's memory-only check agrees with the estimate.
pub fn planner(input: &input::Link, allow_training_changes: bool) {
    let text = input.render();
    stats::show("planner", &text);
    let Ok(scen) = decode(&text) else { return };
    if let Ok(a) = analyze_only(&scen, What::ALL, None) {
        stats::count("planner", "analyzed");
        peaks_are_ordered(&a.estimate, &text);
        let r = headroom_core::estimate::resolve(&scen).expect("analyzed, so resolved");
        let inv = headroom_core::model::inventory(&r.spec);
        let m = headroom_core::estimate::memory_with(&r.spec, &inv, r.gpu, &r.calibration, &scen);
        assert_eq!(
            (m.peak_device, &m.verdict),
            (a.estimate.peak.device, &a.estimate.verdict),
            "{text:?}: memory_with differs from the estimate"
        );
    }
    let opts = headroom_core::plan::PlanOptions {
        allow_training_changes,
        ..Default::default()
    };
    if let Ok(planning) = headroom_core::plan::plan(&scen, &opts) {
        stats::count("planner", "planned");
        for p in planning.plans.iter().chain(&planning.training_plans) {
            assert!(p.fits, "{text:?}: a plan that does not fit");
        }
    }
}
