//! Links as pages read them: lenient decoding keeps the good fields and names each bad one.

use headroom_core::codec::{decode_lenient, encode, query_pairs};
use headroom_core::scenario::{Checkpointing, Scenario};
use headroom_core::{ScenarioError, analyze};

#[track_caller]
fn lenient(query: &str) -> (Scenario, Vec<String>) {
    let pairs = query_pairs(query).expect("the query splits");
    let (scen, errors) = decode_lenient(Scenario::default(), &pairs);
    (scen, errors.iter().map(ToString::to_string).collect())
}

#[test]
fn a_valid_link_decodes_without_errors() {
    let (scen, errors) = lenient("?v=1&batch=4&ckpt=full&gpu=a100-sxm4-80gb");
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(scen.micro_batch, 4);
    assert_eq!(scen.checkpointing, Checkpointing::Full);
    assert_eq!(scen.gpu, "a100-sxm4-80gb");
}

#[test]
fn bad_fields_are_named_and_the_rest_is_kept() {
    let (scen, errors) = lenient("batch=abc&seq=2048&precision=fp64&ckpt=full");
    assert_eq!(scen.seq, 2048);
    assert_eq!(scen.checkpointing, Checkpointing::Full);
    assert_eq!(scen.micro_batch, Scenario::default().micro_batch);
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(errors[0].contains("batch"), "{errors:?}");
    assert!(errors[1].contains("precision") && errors[1].contains("amp-bf16"));
}

#[test]
fn a_field_that_breaks_a_combination_is_dropped_alone() {
    // 8 GPUs with tp = 8 is fine; pp = 2 would need 16 GPUs.
    let (scen, errors) = lenient("gpus=8&pp=2&tp=8");
    assert_eq!(
        (scen.gpus, scen.parallel.tensor, scen.parallel.pipeline),
        (8, 8, 1)
    );
    assert_eq!(errors.len(), 1);
    assert!(errors[0].contains("gpus"), "{errors:?}");
}

#[test]
fn hostile_values_never_pass_through() {
    let hostile = [
        "model=%3Cscript%3Ealert(1)%3C%2Fscript%3E",
        "gpu=%22%3E%3Cimg%20src%3Dx%20onerror%3Dalert(1)%3E",
        "%3Cb%3E=1",
        "batch=%ZZ",
        "cfg=%3Csvg%20onload%3Dalert(1)%3E",
    ];
    for q in hostile {
        let (scen, errors) = match query_pairs(q) {
            Ok(pairs) => decode_lenient(Scenario::default(), &pairs),
            Err(e) => (Scenario::default(), vec![e]),
        };
        assert_eq!(scen, Scenario::default(), "{q}");
        assert!(!errors.is_empty(), "{q}");
        for e in &errors {
            let text = e.to_string();
            // Messages may quote the field, but never a `<` that could open markup.
            assert!(!text.contains('<'), "{q}: {text}");
        }
    }
}

#[test]
fn duplicate_keys_keep_the_first() {
    let (scen, errors) = lenient("batch=2&batch=8");
    assert_eq!(scen.micro_batch, 2);
    assert_eq!(errors.len(), 1);
}

#[test]
fn analyze_agrees_with_its_parts() {
    let scen = Scenario::default();
    let a = analyze(&scen).expect("the default scenario analyzes");
    assert_eq!(
        a.estimate,
        headroom_core::estimate(&scen).expect("estimates")
    );
    assert_eq!(a.link, encode(&scen));
    assert!(!a.strategies.as_ref().expect("asked for").is_empty());
    let bad = Scenario {
        gpu: "no-such-gpu".into(),
        ..Scenario::default()
    };
    assert!(matches!(analyze(&bad), Err(ScenarioError::Unknown { .. })));
}

#[test]
fn every_field_value_round_trips_through_the_codec() {
    let scen = headroom_core::codec::decode(
        "batch=3&seq=1024&method=lora&rank=8&targets=attn&ckpt=every:4&dropout=0.1&dp=zero3\
         &gpus=8&opt_offload=cpu&param_offload=cpu&expandable=1",
    )
    .expect("a valid link");
    let pairs: Vec<(String, String)> = headroom_core::codec::KEYS
        .iter()
        .filter_map(|k| headroom_core::codec::field_value(&scen, k).map(|v| (k.to_string(), v)))
        .collect();
    assert_eq!(
        pairs.len(),
        headroom_core::codec::KEYS.len() - 2,
        "all but v and cfg"
    );
    let back = headroom_core::codec::decode_pairs(Scenario::default(), &pairs).expect("valid");
    assert_eq!(back, scen);
}

#[test]
fn links_are_written_in_the_field_tables_order() {
    let link = "v=1&model=qwen2.5-7b&gpu=a100-sxm4-80gb&gpus=8&batch=2&seq=1024&accum=4&method=lora\
                &rank=8&targets=attn&precision=bf16&optimizer=adamw8bit&attention=eager\
                &dropout=0.1&ckpt=every:2&act_offload=1&loss=fused&keep_logits=1&dp=zero3&tp=2\
                &sp=1&opt_offload=cpu&param_offload=cpu&bucket_view=1&expandable=1&graphs=1&compile=1";
    let scen = headroom_core::codec::decode(link).expect("a valid link");
    assert_eq!(encode(&scen), link);
    // LoRA fields are left out of a full fine-tune's link, whatever they hold.
    let full = Scenario {
        method: headroom_core::scenario::Method::Full,
        ..scen
    };
    assert!(!encode(&full).contains("rank=") && !encode(&full).contains("targets="));
    assert_eq!(encode(&Scenario::default()), "v=1");
}

#[test]
fn an_empty_dropout_is_the_configs_own() {
    let (scen, errors) = lenient("v=1&dropout=");
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(scen.dropout, None);
    assert_eq!(encode(&scen), "v=1");
    // Old links keep their meaning.
    assert_eq!(lenient("dropout=0").0.dropout, Some(0.0));
    assert_eq!(lenient("dropout=0.1").0.dropout, Some(0.1));
}

#[test]
fn messages_name_the_link_key() {
    for (link, key) in [
        ("accum=0", "accum"),
        ("method=lora&rank=0", "rank"),
        ("opt_offload=cpu", "opt_offload"),
        ("dp=ddp&param_offload=cpu", "param_offload"),
        ("keep_logits=maybe", "keep_logits"),
    ] {
        let err = headroom_core::codec::decode(link).expect_err(link);
        let ScenarioError::Invalid { field, .. } = &err else {
            panic!("{link}: {err:?}")
        };
        assert_eq!(field, key, "{link}: {err}");
    }
}

/// Every real config in `content/models/`, given as a custom model: its link decodes to the
/// same model. Phi-3 Mini's sliding window (2,047) was dropped from its link before (found by
/// the fuzz harness in crates/fuzz).
#[test]
fn every_real_config_round_trips_through_its_link() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../content/models");
    let mut n = 0;
    for entry in std::fs::read_dir(dir).expect("content/models") {
        let path = entry.expect("entry").path();
        if path.extension().is_none_or(|x| x != "json") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("readable");
        let spec = headroom_core::model::parse_config_json(&text).expect("a known config");
        let scen = Scenario {
            model: headroom_core::scenario::ModelChoice::Custom(Box::new(spec)),
            ..Scenario::default()
        };
        let back = headroom_core::codec::decode(&encode(&scen));
        assert_eq!(back.as_ref(), Ok(&scen), "{}", path.display());
        n += 1;
    }
    assert!(n >= 20, "only {n} configs");
    // A dropout probability that serde_json's text parser reads one ulp off (a link's config was
    // re-printed and re-parsed before, and came back different).
    let text = r#"{"model_type":"qwen2","attention_dropout":8.421026719040054e-47}"#;
    let scen = Scenario {
        model: headroom_core::scenario::ModelChoice::Custom(Box::new(
            headroom_core::model::parse_config_json(text).expect("qwen2"),
        )),
        ..Scenario::default()
    };
    assert_eq!(headroom_core::codec::decode(&encode(&scen)), Ok(scen));
    // A GPT-NeoX config with sequential residuals (`use_parallel_residual: false`): its link
    // made them parallel before (found by the config fuzz target).
    let text = r#"{"model_type":"gpt_neox","use_parallel_residual":false,"num_hidden_layers":4}"#;
    let spec = headroom_core::model::parse_config_json(text).expect("gpt_neox");
    assert!(!spec.parallel_residual);
    let scen = Scenario {
        model: headroom_core::scenario::ModelChoice::Custom(Box::new(spec)),
        ..Scenario::default()
    };
    assert_eq!(headroom_core::codec::decode(&encode(&scen)), Ok(scen));
    // A Qwen3-MoE config with attention biases (its link dropped them before).
    let text = r#"{"model_type":"qwen3_moe","attention_bias":true,"num_hidden_layers":4}"#;
    let spec = headroom_core::model::parse_config_json(text).expect("qwen3_moe");
    assert!(spec.qkv_bias && spec.o_bias);
    let scen = Scenario {
        model: headroom_core::scenario::ModelChoice::Custom(Box::new(spec)),
        ..Scenario::default()
    };
    assert_eq!(headroom_core::codec::decode(&encode(&scen)), Ok(scen));
}
