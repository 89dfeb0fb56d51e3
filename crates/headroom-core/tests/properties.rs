//! Properties of the core over generated inputs (proptest; tests build with overflow checks, so
//! a wrapped `u64` is a panic here): links round-trip, every accepted scenario estimates without
//! a panic and with coherent peaks, memory moves the right way with batch and sharding, and a
//! config or link with absurd numbers gets a message naming the field, never a panic or a hang.
//! Scenarios draw every option word from each enum's `ALL` (a new word is generated without
//! being listed here); "named" means the message starts with a key the input gave or a link
//! field (`names_a_link_field`), or names one of the config's own keys (`names_a_config_key`).
//!
//! The normal test run tries `PROPTEST_CASES` cases per property (default 256 here); set it
//! higher for a longer search, e.g. `PROPTEST_CASES=100000 cargo test -p headroom-core --test
//! suite --release properties::` (the core's tests are one binary, `tests/suite.rs`).

use headroom_core::catalog::{GpuCatalog, PresetCatalog};
use headroom_core::codec::{decode, decode_pairs, encode};
use headroom_core::error::{ConfigError, ScenarioError};
use headroom_core::model::parse_config_json;
use headroom_core::scenario::{
    Attention, BaseDtype, DataParallel, Fp8Recipe, Generator, LoraTargets, LossImpl, Method,
    Offload, Optimizer, Precision, Scenario, SdpaKernel, Trainer,
};
use headroom_core::{bounds, estimate};
use proptest::prelude::*;
use proptest::test_runner::Config;

fn config() -> Config {
    config_with(256)
}

/// `PROPTEST_CASES` when set, else `default` cases.
fn config_with(default: u32) -> Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(default);
    Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    }
}

fn one_of(xs: &'static [&'static str]) -> impl Strategy<Value = String> {
    proptest::sample::select(xs).prop_map(str::to_string)
}

/// Every option word of a link field's vocabulary (its enum's `ALL`), so that a word added to
/// an enum is generated without anyone listing it here.
fn every<T: Copy + std::fmt::Debug + 'static>(
    all: &'static [T],
    id: fn(T) -> &'static str,
) -> impl Strategy<Value = String> {
    proptest::sample::select(all).prop_map(move |x| id(x).to_string())
}

/// Link fields over every option, including the extremes of each range.
fn scenario_pairs() -> impl Strategy<Value = Vec<(String, String)>> {
    let models: Vec<String> = PresetCatalog::builtin()
        .presets
        .iter()
        .map(|p| p.id.clone())
        .collect();
    let gpus: Vec<String> = GpuCatalog::builtin()
        .gpus
        .iter()
        .map(|g| g.id.clone())
        .collect();
    let numbers = (
        prop_oneof![1u32..=8, Just(65_536u32), 1u32..=65_536],
        prop_oneof![1u32..=4096, Just(4_194_304u32), 1u32..=4_194_304],
        prop_oneof![Just(1u32), 1u32..=64, Just(1_000_000u32)],
        prop_oneof![Just(1u32), Just(2), Just(8)],
        prop_oneof![Just(1u32), Just(4), Just(16)],
        prop_oneof![Just(1u32), Just(2), Just(64), Just(1024)],
        prop_oneof![1u32..=64, Just(65_536u32)],
    );
    let choices = (
        every(Method::ALL, Method::id),
        every(Precision::ALL, Precision::id),
        every(Optimizer::ALL, Optimizer::id),
        every(Attention::ALL, Attention::id),
        one_of(&["none", "full", "every:2", "every:1024", "selective"]),
        every(DataParallel::ALL, DataParallel::id),
        every(Offload::ALL, Offload::id),
        (any::<bool>(), any::<bool>(), any::<bool>(), any::<bool>()),
    );
    // The options the ones above leave at their defaults, each drawn or left out.
    let extras = (
        proptest::option::of(every(LoraTargets::ALL, LoraTargets::id)),
        proptest::option::of(every(BaseDtype::ALL, BaseDtype::id)),
        proptest::option::of(every(Fp8Recipe::ALL, Fp8Recipe::id)),
        proptest::option::of(every(SdpaKernel::ALL, SdpaKernel::id)),
        proptest::option::of(every(LossImpl::ALL, LossImpl::id)),
        (any::<bool>(), any::<bool>(), any::<bool>(), any::<bool>()),
        proptest::option::of(every(Trainer::ALL, Trainer::id)),
        proptest::option::of(every(Generator::ALL, Generator::id)),
    );
    (
        proptest::sample::select(models),
        proptest::sample::select(gpus),
        numbers,
        choices,
        extras,
    )
        .prop_map(
            |(model, gpu, (b, s, accum, tp, pp, dp, rank), choices, extras)| {
                let (method, precision, opt, attn, ckpt, data, offload, flags) = choices;
                let (act_offload, keep_logits, sp, graphs) = flags;
                let bit = |x: bool| if x { "1" } else { "0" }.to_string();
                let mut p = vec![
                    ("model", model),
                    ("gpu", gpu),
                    ("batch", b.to_string()),
                    ("seq", s.to_string()),
                    ("accum", accum.to_string()),
                    ("gpus", (tp * pp * dp).to_string()),
                    ("tp", tp.to_string()),
                    ("pp", pp.to_string()),
                    ("rank", rank.to_string()),
                    ("method", method),
                    ("precision", precision),
                    ("optimizer", opt),
                    ("attention", attn),
                    ("ckpt", ckpt),
                    ("dp", data.clone()),
                    ("act_offload", bit(act_offload)),
                    ("keep_logits", bit(keep_logits)),
                    ("graphs", bit(graphs)),
                ];
                if tp > 1 {
                    p.push(("sp", bit(sp)));
                }
                let (targets, base, fp8, sdpa, loss, flags, trainer, generator) = extras;
                let (dropout, dora, fsdp1, expandable) = flags;
                for (key, word) in [
                    ("targets", targets),
                    ("base", base),
                    ("fp8", fp8),
                    ("sdpa", sdpa),
                    ("loss", loss),
                    ("trainer", trainer),
                    ("gen", generator),
                ] {
                    if let Some(word) = word {
                        p.push((key, word));
                    }
                }
                p.push(("lora_dropout", bit(dropout)));
                p.push(("dora", bit(dora)));
                p.push(("expandable", bit(expandable)));
                if data == "fsdp" {
                    p.push(("fsdp1", bit(fsdp1)));
                }
                if data != "ddp" {
                    p.push(("opt_offload", offload.clone()));
                }
                if matches!(data.as_str(), "zero3" | "fsdp") && offload != "nvme" {
                    p.push(("param_offload", offload));
                }
                p.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
            },
        )
}

/// Whether a link's error names the field it is about: a key the link gave (as it may be quoted
/// back) or a link field, first in the message; an unknown GPU or model names its kind and
/// the word given.
fn names_a_link_field(e: &ScenarioError, pairs: &[(String, String)]) -> bool {
    let text = e.to_string();
    match e {
        ScenarioError::Invalid { field, .. } => {
            let given = pairs
                .iter()
                .any(|(k, _)| headroom_core::codec::printable(k) == *field);
            !field.is_empty()
                && (given || headroom_core::codec::KEYS.contains(&field.as_str()))
                && text.starts_with(&format!("`{field}`"))
        }
        ScenarioError::Unknown { what, found, .. } => {
            text.contains(what) && text.contains(found.as_str())
        }
        ScenarioError::Config(c) => !c.to_string().is_empty(),
    }
}

/// Whether a config's error names what is wrong: a key of it in backticks, or the file itself
/// where it is not JSON, not an object or has no `model_type`.
fn names_a_config_key(e: &ConfigError, json: &str) -> bool {
    match e {
        ConfigError::Json(_) | ConfigError::NotAnObject | ConfigError::MissingModelType { .. } => {
            e.to_string().starts_with("config.json")
        }
        ConfigError::MissingKeys { found, missing, .. } => {
            !missing.is_empty() && json.contains(found.as_str())
        }
        // One of the keys the field names is the config's (a derived one names its sources),
        // or the message says the value is its class's default.
        ConfigError::BadField { field, .. } | ConfigError::Inconsistent { field, .. } => {
            field
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .any(|key| !key.is_empty() && json.contains(&format!("\"{key}\"")))
                || e.to_string().contains("default")
        }
    }
}

fn accepted(pairs: &[(String, String)]) -> Option<Scenario> {
    decode_pairs(Scenario::default(), pairs).ok()
}

proptest! {
    #![proptest_config(config())]

    /// decode(encode(s)) == s, except what a link leaves out on purpose: LoRA's settings
    /// when the method is full fine-tuning (they change nothing there).
    #[test]
    fn a_link_round_trips(pairs in scenario_pairs()) {
        if let Some(scen) = accepted(&pairs) {
            let expected = if scen.method == headroom_core::scenario::Method::Full {
                Scenario { lora: Scenario::default().lora, ..scen.clone() }
            } else {
                scen.clone()
            };
            prop_assert_eq!(decode(&encode(&scen)), Ok(expected));
        }
    }

    #[test]
    fn an_accepted_scenario_estimates_coherently(pairs in scenario_pairs()) {
        let Some(scen) = accepted(&pairs) else { return Ok(()) };
        match estimate(&scen) {
            Ok(e) => {
                let b = &e.bytes;
                prop_assert!(b.weights <= b.peak_tensors, "{pairs:?}");
                prop_assert!(b.peak_tensors <= b.peak_allocated, "{pairs:?}");
                prop_assert!(b.peak_allocated <= b.peak_reserved, "{pairs:?}");
                prop_assert!(b.peak_reserved <= b.peak_device, "{pairs:?}");
                // The planner's memory-only check gives the estimate's own peak and verdict.
                let r = headroom_core::estimate::resolve(&scen).expect("estimated, so resolved");
                let inv = headroom_core::model::inventory(&r.spec);
                let m = headroom_core::estimate::memory_with(&r.spec, &inv, r.gpu, &r.calibration, &scen);
                prop_assert_eq!(m.peak_device, e.peak.device, "{:?}", pairs);
                prop_assert_eq!(&m.verdict, &e.verdict, "{:?}", pairs);
                // And its time model the figures `step_time` gives, without the terms' text.
                let fast = headroom_core::time::step_time_of(&r.spec, &inv, r.gpu, &r.calibration, &scen);
                let full = headroom_core::time::step_time(&r.spec, r.gpu, &r.calibration, &scen);
                let figures = |t: &headroom_core::time::StepTime| {
                    let terms: Vec<_> =
                        t.terms.iter().map(|x| (x.id, x.seconds, x.exposed_seconds)).collect();
                    (t.step_seconds, t.tokens_per_second, t.mfu, terms)
                };
                prop_assert_eq!(figures(&fast), figures(&full), "{:?}", pairs);
            }
            // Refused only past the scale bound (GRPO's generation of batch x accum
            // completions: `accum`), for bf16 or fp8 on a GPU without it (T4, V100; fp8 before
            // sm89), an 8-bit base on an MoE model, or lora_dropout or DoRA on the fused experts
            // peft wraps (`estimate::check_lora`), and then with a message naming the field.
            Err(err) => {
                let text = err.to_string();
                prop_assert!(
                    text.starts_with("`seq`")
                        || text.starts_with("`batch`")
                        || (text.starts_with("`accum`") && text.contains("x accum"))
                        || (text.starts_with("`method`") && text.contains("not modelled for MoE"))
                        || (text.starts_with("`precision`") && text.contains("needs bf16, which"))
                        || (text.starts_with("`fp8`") && text.contains("no fp8 tensor cores"))
                        || ((text.starts_with("`lora_dropout`") || text.starts_with("`dora`"))
                            && text.contains("ParamWrapper")),
                    "{pairs:?}: {text}"
                );
            }
        }
    }

    #[test]
    fn more_micro_batch_never_lowers_the_activations(pairs in scenario_pairs()) {
        let Some(scen) = accepted(&pairs) else { return Ok(()) };
        let Some(bigger) = scen.micro_batch.checked_mul(2).map(|b| Scenario {
            micro_batch: b,
            ..scen.clone()
        }) else {
            return Ok(());
        };
        if let (Ok(a), Ok(b)) = (estimate(&scen), estimate(&bigger)) {
            prop_assert!(
                b.bytes.activations_per_layer >= a.bytes.activations_per_layer,
                "{pairs:?}"
            );
            prop_assert!(b.bytes.peak_tensors >= a.bytes.peak_tensors, "{pairs:?}");
        }
    }

    #[test]
    fn sharding_over_more_gpus_never_raises_the_states(pairs in scenario_pairs()) {
        let Some(scen) = accepted(&pairs) else { return Ok(()) };
        let more = Scenario {
            gpus: scen.gpus * 2,
            ..scen.clone()
        };
        if more.validate().is_err() {
            return Ok(());
        }
        if let (Ok(a), Ok(b)) = (estimate(&scen), estimate(&more)) {
            let states = |e: &headroom_core::Estimate| {
                e.bytes.weights + e.bytes.gradients + e.bytes.optimizer_states
            };
            prop_assert!(states(&b) <= states(&a), "{pairs:?}");
        }
    }

    /// Any integers in a config: a message naming a key, or a model that estimates.
    #[test]
    fn a_config_with_any_numbers_is_parsed_or_named(
        dims in proptest::collection::vec(
            prop_oneof![0u64..=8, 1u64..=100_000, Just(u64::MAX), any::<u64>(), Just(1u64 << 40)],
            8,
        ),
        model_type in one_of(&["llama", "gpt2", "opt", "qwen2_moe", "mixtral", "gemma2", "phi3"]),
    ) {
        let json = format!(
            r#"{{"model_type":"{model_type}","vocab_size":{},"hidden_size":{},"n_embd":{},
            "num_hidden_layers":{},"n_layer":{},"num_attention_heads":{},"n_head":{},
            "intermediate_size":{},"max_position_embeddings":{},"word_embed_proj_dim":{},
            "num_experts":{},"moe_intermediate_size":{}}}"#,
            dims[0], dims[1], dims[1], dims[2], dims[2], dims[3], dims[3], dims[4], dims[5],
            dims[6], dims[7], dims[4]
        );
        match parse_config_json(&json) {
            Err(e) => prop_assert!(names_a_config_key(&e, &json), "{json}: {e}"),
            Ok(spec) => {
                prop_assert!(bounds::check_model(&spec).is_ok());
                let scen = Scenario {
                    model: headroom_core::scenario::ModelChoice::Custom(Box::new(spec)),
                    ..Scenario::default()
                };
                if let Err(e) = estimate(&scen) {
                    prop_assert!(!e.to_string().is_empty());
                }
            }
        }
    }
}

#[test]
fn ten_million_layers_is_refused_by_name() {
    let cfg = r#"{"model_type":"llama","num_hidden_layers":10000000}"#;
    let err = parse_config_json(cfg)
        .expect_err("too many layers")
        .to_string();
    assert!(
        err.contains("num_hidden_layers") && err.contains("1024"),
        "{err}"
    );
}

#[test]
fn dimensions_near_u64_max_are_refused_by_name() {
    for (key, model_type) in [
        ("n_embd", "gpt2"),
        ("word_embed_proj_dim", "opt"),
        ("max_position_embeddings", "opt"),
        ("hidden_size", "llama"),
        ("vocab_size", "llama"),
    ] {
        let cfg = format!(r#"{{"model_type":"{model_type}","{key}":18446744073709551615}}"#);
        let err = parse_config_json(&cfg).expect_err(key).to_string();
        assert!(err.contains(key), "{key}: {err}");
    }
}

/// Found by the fuzz harness (crates/fuzz): the message quoting a wrong value cut it at byte 40,
/// inside a multi-byte character, and panicked.
#[test]
fn a_wrong_value_of_non_ascii_text_is_quoted_without_a_panic() {
    let cfg = format!(
        r#"{{"model_type":"llama","hidden_size":"{}"}}"#,
        "é".repeat(60)
    );
    let err = parse_config_json(&cfg).expect_err("text").to_string();
    assert!(err.contains("hidden_size") && err.contains("..."), "{err}");
}

/// Found by the fuzz harness: an activation name of any text was accepted, and the model's
/// share link then did not decode (a link field holds only a name's characters).
#[test]
fn an_activation_that_is_not_a_name_is_refused_by_name() {
    for act in ["gelu new", "<svg onload=x>", "", "ünïcode"] {
        let cfg = format!(r#"{{"model_type":"gpt2","activation_function":"{act}"}}"#);
        let err = parse_config_json(&cfg).expect_err(act).to_string();
        assert!(
            err.contains("activation_function") && err.contains("a name"),
            "{err}"
        );
    }
    let ok = r#"{"model_type":"gemma2","hidden_activation":"gelu_pytorch_tanh"}"#;
    assert!(parse_config_json(ok).is_ok());
}

/// The links the benchmarks and the budgets time as the heaviest are accepted and analyzed (a
/// bound that refused them would make those measurements time a refusal).
#[test]
fn the_heaviest_links_are_accepted() {
    for link in bounds::HEAVIEST_LINKS {
        let scen = decode(link).unwrap_or_else(|e| panic!("{link}: {e}"));
        assert!(estimate(&scen).is_ok(), "{link}");
    }
}

#[test]
fn a_rank_past_its_range_is_refused_by_name() {
    for rank in ["65537", "1152921504606846976"] {
        let err = decode(&format!("method=lora&rank={rank}"))
            .expect_err(rank)
            .to_string();
        assert!(err.contains("rank"), "{rank}: {err}");
    }
}

#[test]
fn a_step_past_the_scale_bound_is_refused_by_name() {
    // 65,536 sequences of 4M tokens with eager attention on a 405B model.
    let scen = decode("model=llama-3.1-405b&batch=65536&seq=4194304&attention=eager")
        .expect("every field is in range");
    let err = estimate(&scen).expect_err("past the bound").to_string();
    assert!(err.starts_with("`seq`") && err.contains("1 EiB"), "{err}");
}

/// Text a person or a page could hand the core: link-like, JSON-like and Markdown-like
/// fragments glued with arbitrary characters.
fn hostile_text() -> impl Strategy<Value = String> {
    let pieces = proptest::sample::select(
        &[
            "v=1",
            "&",
            "=",
            "cfg=",
            "model_type:llama",
            "~",
            "%",
            "%3C",
            "%00",
            "%ZZ",
            "batch=",
            "seq=",
            "99999999999999999999",
            "-1",
            "1e309",
            "{",
            "}",
            "[",
            "]",
            "\"",
            ":",
            ",",
            "null",
            "true",
            "```headroom",
            "```",
            "\n",
            "# ",
            "{{",
            "}}",
            "@",
            "[a](",
            ")",
            "<svg>",
            "javascript:",
            "\u{feff}",
            "é",
            "\u{0}",
            "every:",
            "scenario: ",
            "metric: ",
        ][..],
    );
    proptest::collection::vec(
        prop_oneof![pieces.prop_map(str::to_string), any::<String>()],
        0..24,
    )
    .prop_map(|v| v.concat())
}

/// JSON nested `depth` levels deep, in arrays or objects.
fn nested_json(depth: usize, object: bool) -> String {
    let (open, close) = if object { ("{\"a\":", "}") } else { ("[", "]") };
    format!("{}1{}", open.repeat(depth), close.repeat(depth))
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn any_text_as_a_link_decodes_or_is_named(text in hostile_text()) {
        let _ = decode(&text);
        if let Ok(pairs) = headroom_core::codec::query_pairs(&text) {
            let (_, errors) = headroom_core::codec::decode_lenient(Scenario::default(), &pairs);
            for e in errors {
                prop_assert!(names_a_link_field(&e, &pairs), "{text:?}: {e}");
            }
        }
    }

    #[test]
    fn any_text_as_a_config_parses_or_is_named(text in hostile_text()) {
        if let Err(e) = parse_config_json(&text) {
            prop_assert!(names_a_config_key(&e, &text), "{text:?}: {e}");
        }
    }

    #[test]
    fn any_text_as_a_guide_parses_or_is_named(text in hostile_text()) {
        if let Err(e) = headroom_core::guide::parse("fuzz", &text) {
            prop_assert!(!e.to_string().is_empty());
        }
    }

    #[test]
    fn any_text_as_a_scenario_or_claim_file_is_named(text in hostile_text()) {
        let _ = headroom_core::codec::parse_scenario_file("fuzz", &text);
        let _ = headroom_core::claims::parse_file("fuzz", &text);
    }
}

proptest! {
    // A plan runs hundreds of estimates: fewer cases in the normal run.
    #![proptest_config(config_with(32))]

    /// The planner on any accepted scenario: no panic, and every plan it offers fits.
    #[test]
    fn the_planner_offers_only_plans_that_fit(
        pairs in scenario_pairs(),
        allow in any::<bool>(),
    ) {
        let Some(scen) = accepted(&pairs) else { return Ok(()) };
        let opts = headroom_core::plan::PlanOptions {
            allow_training_changes: allow,
            ..Default::default()
        };
        if let Ok(planning) = headroom_core::plan::plan(&scen, &opts) {
            for p in planning.plans.iter().chain(&planning.training_plans) {
                prop_assert!(p.fits, "{pairs:?}: a plan that does not fit");
            }
        }
    }

    #[test]
    fn any_text_as_a_calibration_file_is_named(text in hostile_text()) {
        if let Err(e) = headroom_core::Calibration::parse("fuzz.json", &text) {
            prop_assert!(!e.to_string().is_empty());
        }
    }
}

/// Found by `the_planner_offers_only_plans_that_fit`: the tokens per step of the largest
/// accepted global batch and sequence overflowed u64 in the planner's "changes training" test.
#[test]
fn the_planner_takes_the_largest_global_batch() {
    let scen = decode(
        "?v=1&model=headroom-40m-gpt2-vocab&gpu=t4-16gb&batch=65536&seq=274878&accum=1000000\
         &gpus=1024&precision=fp16",
    )
    .expect("decodes");
    for allow in [false, true] {
        let opts = headroom_core::plan::PlanOptions {
            allow_training_changes: allow,
            ..Default::default()
        };
        let _ = headroom_core::plan::plan(&scen, &opts);
    }
}

#[test]
fn deeply_nested_and_enormous_configs_are_refused() {
    for object in [false, true] {
        let err = parse_config_json(&nested_json(100_000, object)).expect_err("nested");
        assert!(!err.to_string().is_empty());
    }
    // A config of a million keys parses (or is named) without trouble.
    let big = format!(
        "{{\"model_type\":\"llama\",{}\"vocab_size\":32000}}",
        (0..1_000_000)
            .map(|i| format!("\"k{i}\":{i},"))
            .collect::<String>()
    );
    assert!(parse_config_json(&big).is_ok());
}
