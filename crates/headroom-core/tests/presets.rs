//! The builtin model presets: the embedded index parses, and every preset's computed
//! parameter count equals the `parameters_total` recorded in `content/models/presets.toml`.
//!
//! `PresetCatalog::builtin()` falls back to an empty catalog on a parse error (the core must
//! not panic in the browser), so these tests parse the embedded content directly: a malformed
//! entry fails here, loudly, instead of silently emptying the model list.

use headroom_core::PresetCatalog;
use headroom_core::catalog::embedded::{MODEL_CONFIGS, PRESETS_JSON};
use headroom_core::model::inventory;

fn parsed() -> PresetCatalog {
    PresetCatalog::parse(PRESETS_JSON, MODEL_CONFIGS)
        .unwrap_or_else(|e| panic!("content/models does not parse: {e}"))
}

#[test]
fn embedded_presets_parse() {
    let catalog = parsed();
    // builtin() is the same content; if it fell back to empty, the counts would differ.
    assert_eq!(
        PresetCatalog::builtin().presets.len(),
        catalog.presets.len()
    );
}

#[test]
fn at_least_25_presets() {
    let n = parsed().presets.len();
    assert!(n >= 25, "only {n} presets");
}

#[test]
fn every_preset_count_equals_recorded_total() {
    let wrong: Vec<String> = parsed()
        .presets
        .iter()
        .filter_map(|p| {
            let computed = inventory(&p.spec).total();
            (computed != p.parameters_total).then(|| {
                format!(
                    "{} ({}): computed {computed}, recorded {}",
                    p.id, p.spec.model_type, p.parameters_total
                )
            })
        })
        .collect();
    assert!(wrong.is_empty(), "counts differ:\n{}", wrong.join("\n"));
}

#[test]
fn every_config_file_has_a_preset() {
    // A JSON file without an index entry would be embedded but unreachable.
    let catalog = parsed();
    for (stem, _) in MODEL_CONFIGS {
        assert!(
            catalog.presets.iter().any(|p| p.id == *stem),
            "content/models/{stem}.json has no [[preset]] in presets.toml"
        );
    }
}

#[test]
fn preset_fields_are_filled() {
    for p in &parsed().presets {
        assert!(!p.name.trim().is_empty(), "{}: empty name", p.id);
        assert!(p.hf_id.contains('/'), "{}: hf_id `{}`", p.id, p.hf_id);
        // The config's URL is in the embedded copy with provenance (the CLI's), not the site's.
        if cfg!(feature = "provenance") {
            assert!(
                p.source.starts_with("https://huggingface.co/")
                    && p.source.ends_with("config.json"),
                "{}: source `{}`",
                p.id,
                p.source
            );
        } else {
            assert!(p.source.is_empty(), "{}: source `{}`", p.id, p.source);
        }
        assert_eq!(
            p.id,
            p.id.to_ascii_lowercase(),
            "ids are looked up lowercased"
        );
    }
}

#[cfg(feature = "toml")]
const ONE_CONFIG: &[(&str, &str)] = &[("tiny", r#"{"model_type":"gpt2","n_layer":1}"#)];

/// The index is TOML that people write: read with the `toml` feature (the site, built without
/// it, uses the embedded JSON conversion).
#[cfg(feature = "toml")]
#[test]
fn malformed_index_is_an_error() {
    let ok = "[[preset]]\nid = \"tiny\"\nname = \"T\"\nhf_id = \"a/b\"\nsource = \"s\"\nparameters_total = 1\n";
    assert!(PresetCatalog::parse(ok, ONE_CONFIG).is_ok());
    for (what, index) in [
        ("missing field", ok.replace("parameters_total = 1\n", "")),
        (
            "misspelt field",
            ok.replace("parameters_total", "parameter_total"),
        ),
        ("wrong type", ok.replace("= 1\n", "= \"1\"\n")),
        ("unknown id", ok.replace("\"tiny\"", "\"other\"")),
        ("duplicate id", format!("{ok}{ok}")),
        ("not toml", "[[preset]\n".to_string()),
    ] {
        assert!(
            PresetCatalog::parse(&index, ONE_CONFIG).is_err(),
            "{what} was accepted"
        );
    }
    let bad_json: &[(&str, &str)] = &[("tiny", r#"{"model_type":"gpt2","#)];
    assert!(
        PresetCatalog::parse(ok, bad_json).is_err(),
        "bad JSON accepted"
    );
}

/// Configs where the core once disagreed with transformers 5.23; counts are transformers'
/// `num_parameters()` (meta device), also re-checked live by tests/reference/test_presets.py.
#[test]
fn parsing_fixes_match_transformers() {
    let small = r#""hidden_size":256,"intermediate_size":512,"num_hidden_layers":2,
        "num_attention_heads":4,"num_key_value_heads":2,"vocab_size":1000"#;
    for (config, expect) in [
        // Qwen3MoeConfig has no head_dim field: hidden_size / heads = 64, not Qwen3's 128.
        (r#"{"model_type":"qwen3_moe"}"#.to_string(), 15_350_731_776),
        // Mistral and Mixtral attention hard-code bias=False whatever attention_bias says.
        (
            format!(r#"{{"model_type":"mistral","attention_bias":true,{small}}}"#),
            1_692_928,
        ),
        // Qwen2 attention hard-codes bias=True on q/k/v; qkv_bias is a Qwen2-MoE key only.
        (
            format!(r#"{{"model_type":"qwen2","qkv_bias":false,{small}}}"#),
            1_693_952,
        ),
    ] {
        let spec = headroom_core::model::parse_config_json(&config).expect("config parses");
        assert_eq!(inventory(&spec).total(), expect, "{config}");
    }
}

/// RoPE's share of each head is the config's `partial_rotary_factor` where it states one
/// (transformers: `int(head_dim * partial_rotary_factor)`), its class's default otherwise:
/// Phi-4-mini-instruct (a Phi3Config) rotates 0.75 of its 128-wide heads; GLM-4 half without
/// the key; a factor outside (0, 1] is refused by name.
#[test]
fn the_rotary_share_is_the_configs_partial_rotary_factor() {
    use headroom_core::model::parse_config_json;
    let phi4_mini = r#"{"model_type": "phi3", "vocab_size": 200064, "hidden_size": 3072,
        "intermediate_size": 8192, "num_hidden_layers": 32, "num_attention_heads": 24,
        "num_key_value_heads": 8, "partial_rotary_factor": 0.75,
        "max_position_embeddings": 131072}"#;
    let spec = parse_config_json(phi4_mini).expect("parses");
    assert_eq!((spec.head_dim, spec.rotary_dim()), (128, 96));
    let without = phi4_mini.replace("\"partial_rotary_factor\": 0.75,", "");
    assert_eq!(
        parse_config_json(&without).expect("parses").rotary_dim(),
        128
    );
    let glm = r#"{"model_type": "glm4", "hidden_size": 4096, "num_attention_heads": 32,
        "num_key_value_heads": 2, "head_dim": 128, "num_hidden_layers": 40}"#;
    assert_eq!(parse_config_json(glm).expect("parses").rotary_dim(), 64);
    // A link with this config keeps the share.
    let scen = headroom_core::Scenario {
        model: headroom_core::scenario::ModelChoice::Custom(Box::new(spec.clone())),
        ..Default::default()
    };
    let back = headroom_core::codec::decode(&headroom_core::codec::encode(&scen)).expect("decodes");
    match back.model {
        headroom_core::scenario::ModelChoice::Custom(s) => assert_eq!(s.rotary_dim(), 96),
        other => panic!("{other:?}"),
    }
    let bad = phi4_mini.replace("0.75", "1.5");
    let e = parse_config_json(&bad).expect_err("refused").to_string();
    assert!(e.contains("partial_rotary_factor"), "{e}");
}
