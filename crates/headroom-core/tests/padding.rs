//! Dynamic padding (`len_mean`, `len_sd`, `drop_long`: `estimate::padding`) against runs over
//! variable lengths that an H200 measured from their first step (tests/reference/gpu/h200/
//! varlen, measure_allocator.py `dynamic`: torch 2.11, transformers 5.17, peft 0.21; lengths
//! log-normal like ms-swift's benchmark data, samples over max_length dropped). Reserved grew
//! only at a step longer than every step before it; each such step's reserved level, replayed
//! through the allocator model with the measured lengths in order, is checked here, and every
//! error is printed (`cargo test -- --nocapture`).
use crate::common;

use headroom_core::codec::{decode_pairs, query_pairs};
use headroom_core::scenario::ModelChoice;
use headroom_core::{Scenario, estimate};

const GIB: f64 = (1u64 << 30) as f64;

/// The measured run's scenario: a preset by its link, or a published table's stand-in config.
fn scenario(run: &serde_json::Value) -> Scenario {
    let sc = &run["run"]["scenario"];
    let id = sc[0].as_str().expect("model id");
    let expandable = run["allocator"]
        .as_str()
        .is_some_and(|a| a.contains("expandable_segments:True"));
    let mut link = common::measured_link(sc, "h200-141gb") + "&optimizer=adamw";
    if expandable {
        link += "&expandable=1";
    }
    let stand_in = format!(
        "{}/../../tests/reference/published_configs/{id}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut custom = std::fs::read_to_string(&stand_in).ok();
    // A preset with config overrides (the thirteenth field's neighbour, e.g. two layers).
    if let Some(overrides) = sc[11].as_object().filter(|o| !o.is_empty()) {
        let path = format!(
            "{}/../../content/models/{id}.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read_to_string(&path).expect("preset config");
        let mut config: serde_json::Value = serde_json::from_str(&text).expect("JSON");
        for (k, v) in overrides {
            config[k] = v.clone();
        }
        custom = Some(config.to_string());
    }
    if custom.is_some() {
        link = link.replace(&format!("model={id}"), "model=llama-3.2-1b");
    }
    let mut scen =
        decode_pairs(Scenario::default(), &query_pairs(&link).expect("query")).expect("link");
    if let Some(text) = custom {
        let spec = headroom_core::model::hf::parse_config_json(&text).expect("config");
        scen.model = ModelChoice::Custom(Box::new(spec));
    }
    scen
}

/// Per step: its padded length and the reserved peak over its phases.
fn steps(run: &serde_json::Value) -> Vec<(u32, u64)> {
    let lengths = run["lengths"].as_array().expect("lengths");
    let phases = run["run"]["phases"].as_array().expect("phases");
    phases
        .chunks(3)
        .zip(lengths)
        .map(|(ph, l)| {
            let reserved = ph
                .iter()
                .map(|p| p["max_reserved"].as_u64().expect("max_reserved"))
                .max()
                .expect("phases");
            (l.as_u64().expect("length") as u32, reserved)
        })
        .collect()
}

/// The records of a measured run: (length, reserved measured after it, until the next record).
fn records(steps: &[(u32, u64)]) -> Vec<(u32, u64)> {
    let mut out: Vec<(u32, u64)> = Vec::new();
    for &(len, reserved) in steps {
        match out.last_mut() {
            Some(last) if len <= last.0 => last.1 = last.1.max(reserved),
            _ => out.push((len, reserved)),
        }
    }
    out
}

const RUNS: &[&str] = &[
    "d1-q18-2048",
    "d9-q18-2048-long",
    "d10-q18-2048-seed1",
    "d11-q18-2048-seed2",
    "d2-q18-4096",
    "d3-q18-2048-b4",
    "d4-q18-2048-nockpt",
    "d5-q7-2048",
    "d6-yi6-2048",
    "d7-q18-2048-expandable",
    "d8-llama1b-full-b8",
    "d1000-seed0",
    "d1000-seed1",
    "d1000-seed2",
];

#[test]
fn each_record_reserves_what_the_h200_reserved() {
    let mut errors = Vec::new();
    for name in RUNS {
        let run = common::measured_on_gpu(&format!("h200/varlen/{name}.json"));
        let scen = scenario(&run);
        let recs = records(&steps(&run));
        let mut lengths = vec![recs[0].0];
        let mut line = format!("{name}:");
        for &(len, measured) in &recs {
            lengths.push(len);
            let replayed = estimate::replay_lengths(&scen, &lengths)
                .expect("estimates")
                .expect("replayed");
            let err = 100.0 * (replayed.reserved as f64 / measured as f64 - 1.0);
            line += &format!(
                " {len}: {:.2}/{:.2} ({err:+.1}%)",
                replayed.reserved as f64 / GIB,
                measured as f64 / GIB
            );
            errors.push((name, len, err));
        }
        println!("{line}");
    }
    let mut abs: Vec<f64> = errors.iter().map(|e| e.2.abs()).collect();
    abs.sort_by(f64::total_cmp);
    let (median, max) = (abs[abs.len() / 2], abs[abs.len() - 1]);
    println!(
        "{} records: median |error| {median:.1}%, max {max:.1}%",
        abs.len()
    );
    // 59 records of 14 runs: median 1.0%, max 3.8% (the uncheckpointed run's first record).
    assert!(median < 2.0 && max < 5.0, "{errors:?}");
}

/// The prediction from the length distribution alone (records at their medians,
/// `padding::records`, over as many micro-batches as the run made) against each run: printed,
/// not asserted, since a run's own first lengths decide its level (three seeds of one run held
/// 11.51, 12.51 and 15.65 GiB after 39 to 58 steps; the median records give 16.54). What is
/// asserted is that the prediction lies above the one-shape replay and, with expandable
/// segments, within 5% of the run.
#[test]
fn the_distributions_records_against_each_run() {
    for name in RUNS {
        let run = common::measured_on_gpu(&format!("h200/varlen/{name}.json"));
        let mut scen = scenario(&run);
        scen.len_mean = 3234;
        scen.len_sd = 2548;
        scen.drop_long = true;
        let measured = steps(&run);
        let peak = measured.iter().map(|s| s.1).max().expect("steps");
        let recs = headroom_core::estimate::padding::records(&scen, measured.len() as u64);
        let mut lengths = vec![recs[0]];
        lengths.extend(&recs);
        lengths.push(*recs.last().expect("a record"));
        let replayed = estimate::replay_lengths(&scen, &lengths)
            .expect("estimates")
            .expect("replayed");
        let err = 100.0 * (replayed.reserved as f64 / peak as f64 - 1.0);
        let one_shape = estimate::replay_lengths(&scen, &[scen.seq; 3])
            .expect("estimates")
            .expect("replayed");
        assert!(replayed.reserved > one_shape.reserved || scen.runtime.expandable_segments);
        if scen.runtime.expandable_segments {
            assert!(err.abs() < 5.0, "{name}: {err:+.1}%");
        }
        println!(
            "{name}: {} steps, records {recs:?} (measured {}): {:.2}/{:.2} GiB ({err:+.1}%)",
            measured.len(),
            records(&measured).len(),
            replayed.reserved as f64 / GIB,
            peak as f64 / GIB
        );
    }
}

/// Bad settings are refused by name: padding with packing, dropping every sample, out of range.
#[test]
fn bad_lengths_are_refused_by_name() {
    let refused = |link: &str, key: &str| {
        let pairs = query_pairs(link).expect("query");
        let err = decode_pairs(Scenario::default(), &pairs)
            .and_then(|s| s.validate().map(|()| s))
            .expect_err(link);
        assert!(
            err.to_string().starts_with(&format!("`{key}`")),
            "{link}: {err}"
        );
    };
    refused(
        "attention=flash2&packing=1&len_mean=400&len_sd=300",
        "len_mean",
    );
    refused(
        "seq=2048&len_mean=100000&len_sd=1000&drop_long=1",
        "drop_long",
    );
    refused("len_mean=99999999", "len_mean");
    refused("len_mean=400&len_sd=99999999", "len_sd");
    // Cut instead of dropped, the same lengths are fine: every sample becomes seq long.
    let ok = decode_pairs(
        Scenario::default(),
        &query_pairs("seq=2048&len_mean=100000&len_sd=1000").expect("query"),
    )
    .expect("valid");
    assert_eq!(
        headroom_core::estimate::padding::records(&ok, 1000),
        vec![2048]
    );
}

/// Links carry the lengths and leave them out when off.
#[test]
fn links_round_trip_the_lengths() {
    let link = "len_mean=3234&len_sd=2548&drop_long=1";
    let scen = decode_pairs(Scenario::default(), &query_pairs(link).expect("query")).expect("ok");
    let written = headroom_core::codec::encode(&scen);
    assert!(written.contains(link), "{written}");
    assert!(!headroom_core::codec::encode(&Scenario::default()).contains("len_"));
    // Off, its spread and drop setting are not written.
    let off = decode_pairs(
        Scenario::default(),
        &query_pairs("len_sd=2548&drop_long=1").expect("query"),
    )
    .expect("ok");
    assert!(!headroom_core::codec::encode(&off).contains("len_sd"));
}
