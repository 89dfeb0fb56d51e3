//! The content the site fetches instead of embedding (site/pages.sh writes it): a file that is
//! not what it should be is refused with its name, before anything is installed.

use headroom_core::catalog::install_model_configs;
use headroom_core::codec::install_named_scenarios;

#[test]
fn a_broken_models_file_is_refused_by_name() {
    for text in ["not json", "[]", r#"{"configs": {}}"#, r#"{"index": {}}"#] {
        let e = install_model_configs(text).expect_err(text).to_string();
        assert!(e.contains("content/models.json"), "{text}: {e}");
    }
    // An index naming a preset whose config is missing.
    let e = install_model_configs(
        r#"{"index": {"preset": [{"id": "x", "name": "X", "hf_id": "a/x", "parameters_total": 1}]}, "configs": {}}"#,
    )
    .expect_err("no config")
    .to_string();
    assert!(e.contains("models/x.json"), "{e}");
}

#[test]
fn a_broken_scenarios_file_is_refused_by_name() {
    for text in ["not json", "[]"] {
        let e = install_named_scenarios(text).expect_err(text).to_string();
        assert!(e.contains("content/scenarios.json"), "{text}: {e}");
    }
    // One scenario whose field is not a link field's value.
    let e = install_named_scenarios(r#"{"bad-one": {"scenario": "not a table"}}"#)
        .expect_err("refused")
        .to_string();
    assert!(e.contains("content/scenarios.json: bad-one"), "{e}");
}
