//! The fuzz targets as tests. `cargo test` runs each for about a second of random structured
//! inputs (bolero's default), plus the committed corpus under `tests/__fuzz__/`; set
//! `BOLERO_RANDOM_ITERATIONS` for a fixed count (the root README's Fuzzing section: ten million
//! per target), or run one coverage-guided with
//! `cargo +nightly bolero test -p headroom-fuzz --test targets <name>`.

use bolero::check;
use headroom_fuzz::{input, stats};

#[test]
fn link() {
    check!().with_type::<input::Link>().for_each(|l| {
        stats::count("link", "case");
        headroom_fuzz::link(l)
    });
    eprint!("{}", stats::report("link"));
}

#[test]
fn link_raw_text() {
    check!().with_type::<String>().for_each(|text| {
        let _ = headroom_core::codec::decode(text);
        if let Ok(pairs) = headroom_core::codec::query_pairs(text) {
            let (_, errors) = headroom_core::codec::decode_lenient(Default::default(), &pairs);
            assert!(errors.iter().all(|e| !e.to_string().is_empty()));
        }
    });
    eprint!("{}", stats::report("link_raw_text"));
}

#[test]
fn import_config() {
    check!().with_type::<input::ImportConfig>().for_each(|c| {
        stats::count("import_config", "case");
        headroom_fuzz::import_config(c)
    });
    eprint!("{}", stats::report("import_config"));
}

#[test]
fn import_raw_text() {
    check!().with_type::<String>().for_each(|text| {
        for name in ["x.yaml", "x.json", "x.toml"] {
            headroom_fuzz::import_text(text, Some(name));
        }
    });
    eprint!("{}", stats::report("import_config"));
}

#[test]
fn config() {
    check!().with_type::<input::Config>().for_each(|c| {
        stats::count("config", "case");
        headroom_fuzz::config(c)
    });
    eprint!("{}", stats::report("config"));
}

#[test]
fn scenario_file() {
    check!().with_type::<input::ScenarioFile>().for_each(|f| {
        stats::count("scenario_file", "case");
        headroom_fuzz::scenario_file(f)
    });
    eprint!("{}", stats::report("scenario_file"));
}

#[test]
fn calibration() {
    check!().with_type::<Vec<input::Mutation>>().for_each(|m| {
        stats::count("calibration", "case");
        headroom_fuzz::calibration(m)
    });
    eprint!("{}", stats::report("calibration"));
}

#[test]
fn guide() {
    check!()
        .with_type::<(input::Guide, input::Link)>()
        .for_each(|(g, reader)| {
            stats::count("guide", "case");
            headroom_fuzz::guide(g, reader)
        });
    eprint!("{}", stats::report("guide"));
}

#[test]
fn planner() {
    check!()
        .with_type::<(input::Link, bool)>()
        .for_each(|(l, allow)| {
            stats::count("planner", "case");
            headroom_fuzz::planner(l, *allow)
        });
    eprint!("{}", stats::report("planner"));
}
