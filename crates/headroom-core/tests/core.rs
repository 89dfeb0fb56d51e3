//! Parameter counts, the scenario codec and validation.

use headroom_core::codec::{decode, encode, named_scenarios};
use headroom_core::estimate::Confidence;
use headroom_core::model::{inventory, parse_config_json};
use headroom_core::scenario::{
    Checkpointing, DataParallel, Method, ModelChoice, Optimizer, Precision,
};
use headroom_core::{Scenario, estimate};

#[track_caller]
fn params(config: &str, expect: u64) {
    let spec = parse_config_json(config).expect("config parses");
    assert_eq!(inventory(&spec).total(), expect);
}

// Expected counts are transformers' num_parameters() for the same config (also recorded in
// content/models/presets.toml and re-checked against transformers in tests/reference).
#[test]
fn gpt2_small_params() {
    params(
        r#"{"model_type":"gpt2","n_embd":768,"n_layer":12,"n_head":12,"vocab_size":50257,"n_positions":1024}"#,
        124_439_808,
    );
}

#[test]
fn llama_3_1_8b_params() {
    params(
        r#"{"model_type":"llama","vocab_size":128256,"hidden_size":4096,"intermediate_size":14336,"num_hidden_layers":32,
        "num_attention_heads":32,"num_key_value_heads":8,"tie_word_embeddings":false}"#,
        8_030_261_248,
    );
}

#[test]
fn llama_2_7b_params_with_defaults() {
    // LlamaConfig's defaults are Llama-2-7B's shape.
    params(r#"{"model_type":"llama"}"#, 6_738_415_616);
}

#[test]
fn mistral_7b_params() {
    params(
        r#"{"model_type":"mistral","vocab_size":32000}"#,
        7_241_732_096,
    );
}

#[test]
fn bad_configs_name_the_field() {
    let err = |c: &str| parse_config_json(c).expect_err("must fail").to_string();
    assert!(err("{").contains("not valid JSON"));
    assert!(err(r#"{"model_type":"bert"}"#).contains(
        "lacks hidden_size, num_hidden_layers, num_attention_heads, intermediate_size, vocab_size"
    ));
    assert!(
        err(r#"{"model_type":"bert","hidden_size":768,"num_hidden_layers":12,"vocab_size":9}"#)
            .contains("`bert` is not one Headroom models exactly, and its config lacks num_attention_heads, intermediate_size,")
    );
    assert!(err(r#"{"model_type":"a b","hidden_size":8}"#).contains("`model_type`"));
    assert!(
        err(r#"{"model_type":"llava","text_config":{"hidden_size":8}}"#).contains(
            "vocab_size (a multimodal config: its text model's keys are under text_config)"
        )
    );
    // A multimodal wrapper Headroom models names its text model's unknown type and its
    // vision tower's bad key.
    assert!(
        err(r#"{"model_type":"mistral3","text_config":{"model_type":"bert"}}"#)
            .contains("text_config.model_type")
    );
    assert!(
        err(r#"{"model_type":"gemma3","vision_config":{"patch_size":0}}"#)
            .contains("vision_config.patch_size")
    );
    assert!(err(r#"{"model_type":"llama","hidden_size":"big"}"#).contains("`hidden_size`"));
    assert!(
        err(r#"{"model_type":"llama","num_attention_heads":0}"#).contains("num_attention_heads")
    );
    assert!(
        err(r#"{"model_type":"llama","num_key_value_heads":5}"#).contains("num_key_value_heads")
    );
    assert!(err(r#"{}"#).contains("model_type"));
}

#[test]
fn default_link_is_short_and_round_trips() {
    let s = Scenario::default();
    assert_eq!(encode(&s), "v=1");
    assert_eq!(decode("?v=1").expect("decodes"), s);
}

#[test]
fn every_field_round_trips() {
    let mut s = Scenario {
        model: ModelChoice::Preset("llama-3.1-8b".into()),
        gpus: 8,
        micro_batch: 4,
        seq: 8192,
        grad_accum: 16,
        method: Method::Lora,
        precision: Precision::Bf16,
        optimizer: Optimizer::PagedAdamW8bit,
        checkpointing: Checkpointing::Every(4),
        dropout: Some(0.1),
        keep_logits: true,
        ..Scenario::default()
    };
    s.lora.rank = 64;
    s.parallel.data = DataParallel::Zero3;
    s.parallel.tensor = 2;
    s.runtime.expandable_segments = true;
    let link = encode(&s);
    assert_eq!(decode(&link).expect("decodes"), s, "{link}");
}

#[test]
fn custom_config_round_trips_through_the_link() {
    let spec = parse_config_json(
        r#"{"model_type":"qwen2_moe","num_hidden_layers":4,"mlp_only_layers":[0]}"#,
    )
    .expect("parses");
    let s = Scenario {
        model: ModelChoice::Custom(Box::new(spec)),
        ..Scenario::default()
    };
    assert_eq!(decode(&encode(&s)).expect("decodes"), s);
}

#[test]
fn bad_links_name_the_field() {
    let err = |q: &str| decode(q).expect_err("must fail").to_string();
    assert!(err("v=2").contains("`v`"));
    assert!(err("batch=0").contains("`batch`"));
    assert!(err("batch=abc").contains("`batch`"));
    assert!(err("precision=fp64").contains("`precision`"));
    assert!(err("ckpt=every:0").contains("`ckpt`"));
    assert!(err("bogus=1").contains("unknown link field"));
    // A key left empty is named as such (found by the property test on the text "=").
    assert!(err("=1").starts_with("`(no name)`: unknown link field"));
    assert!(err("seq=1&seq=2").contains("twice"));
    assert!(err("gpus=3&tp=2").contains("`gpus`"));
    assert!(err("dropout=1.5").contains("`dropout`"));
}

#[test]
fn hostile_links_are_rejected_without_echoing_markup() {
    for q in [
        "model=%3Cscript%3Ealert(1)%3C/script%3E",
        "gpu=<img src=x onerror=alert(1)>",
        "cfg=model_type:%22%3E%3Csvg",
        "%ZZ=1",
        "batch=%FF",
    ] {
        let e = decode(q)
            .expect_err("hostile input must not decode")
            .to_string();
        assert!(!e.contains('<') && !e.contains('>'), "{q} -> {e}");
    }
}

#[test]
fn unknown_model_and_gpu_are_clear_errors() {
    let s = decode("model=nope").expect("decodes: known only at estimate time");
    assert!(
        estimate(&s)
            .expect_err("unknown model")
            .to_string()
            .contains("unknown model preset `nope`")
    );
    let s = decode("gpu=nope").expect("decodes");
    assert!(
        estimate(&s)
            .expect_err("unknown gpu")
            .to_string()
            .contains("unknown GPU `nope`")
    );
}

/// A GPU without bf16 (T4 sm75, V100 sm70) refuses every setting that computes in it, naming
/// the field, the GPU and what it allows; Ampere and later accept them. A link is decoded and
/// estimated as the site and the CLI do, so all three surfaces give this message.
#[test]
fn gpus_refuse_the_dtypes_they_lack() {
    let err = |q: &str| {
        let s = decode(q).expect("decodes: the GPU is known only at estimate time");
        estimate(&s).expect_err(q).to_string()
    };
    assert_eq!(
        err("gpu=t4-16gb"),
        "`precision`: amp-bf16 needs bf16, which t4-16gb (compute capability 7.5) lacks; \
         allowed on this GPU: fp32, fp16, amp-fp16"
    );
    for (q, field, says) in [
        (
            "gpu=v100-sxm2-32gb&precision=bf16",
            "precision",
            "bf16 needs bf16",
        ),
        (
            "gpu=t4-16gb&method=qlora",
            "precision",
            "amp-bf16 needs bf16",
        ),
        (
            "gpu=t4-16gb&method=lora&precision=bf16",
            "precision",
            "bf16 needs",
        ),
        (
            "gpu=t4-16gb&trainer=dpo&method=lora",
            "precision",
            "amp-bf16",
        ),
        (
            "gpu=t4-16gb&trainer=grpo&precision=bf16",
            "precision",
            "bf16 needs",
        ),
        (
            "gpu=t4-16gb&method=lora&precision=amp-fp16&adapter=bf16",
            "adapter",
            "adapter dtype bf16 needs bf16",
        ),
    ] {
        let e = err(q);
        assert!(
            e.starts_with(&format!("`{field}`: ")) && e.contains(says) && e.contains("lacks"),
            "{q}: {e}"
        );
    }
    // fp8 keeps its own refusal (no fp8 tensor cores), named before the precision's.
    assert!(err("gpu=t4-16gb&fp8=tensorwise").starts_with("`fp8`"));
    // What the T4 does compute, and bf16 from Ampere on, estimate.
    for q in [
        "gpu=t4-16gb&precision=amp-fp16",
        "gpu=t4-16gb&method=qlora&precision=fp16",
        "gpu=v100-sxm2-16gb&precision=fp32&model=gpt2",
        "gpu=t4-16gb&method=lora&precision=amp-fp16&adapter=fp16",
        "gpu=a100-sxm4-80gb&precision=bf16",
        "gpu=a100-sxm4-80gb&method=qlora",
        "gpu=a10g-24gb&method=lora&adapter=bf16",
    ] {
        estimate(&decode(q).expect("decodes")).unwrap_or_else(|e| panic!("{q}: {e}"));
    }
}

/// The planner starts from the scenario, so it refuses bf16 on a T4 as the estimate does; from
/// an fp32 scenario there, neither its plans, its ladder nor the strategy table propose bf16.
#[test]
fn the_planner_and_strategies_keep_to_the_gpus_dtypes() {
    use headroom_core::plan::{PlanOptions, plan};
    let opts = PlanOptions {
        allow_training_changes: true,
        ..Default::default()
    };
    let bf16 = decode("gpu=t4-16gb&model=gpt2").expect("decodes");
    assert!(
        plan(&bf16, &opts)
            .expect_err("bf16 on a T4")
            .to_string()
            .starts_with("`precision`")
    );
    let fp32 = decode("gpu=t4-16gb&model=llama-3.2-1b&precision=fp32&batch=8").expect("decodes");
    let p = plan(&fp32, &opts).expect("plans");
    let precisions = p
        .plans
        .iter()
        .chain(&p.training_plans)
        .map(|x| x.scenario.precision)
        .chain(p.ladder.iter().map(|l| {
            decode(&l.link)
                .expect("a ladder step's link decodes")
                .precision
        }));
    let mut seen = 0;
    for pr in precisions {
        assert!(
            !matches!(pr, Precision::Bf16 | Precision::AmpBf16),
            "{pr:?}"
        );
        seen += 1;
    }
    assert!(seen > 1 && !p.training_plans.is_empty());
    let a = headroom_core::analyze(&fp32).expect("analyzes");
    let rows = a.strategies.expect("the strategy table");
    assert!(rows.iter().any(|r| r.change == "fp32 -> amp-fp16"));
    for r in &rows {
        let s = decode(&r.link).expect("a row's link decodes");
        assert!(
            !matches!(s.precision, Precision::Bf16 | Precision::AmpBf16),
            "{}: {}",
            r.id,
            r.change
        );
    }
}

#[test]
fn named_scenarios_parse_and_estimate() {
    for n in named_scenarios() {
        estimate(&n.scenario).unwrap_or_else(|e| panic!("{}: {e}", n.id));
    }
}

/// A sequence past the model's positions is estimated but flagged: GPT-2's config has a
/// 1,024-row learned position table (`n_positions`), Llama 3.2's `max_position_embeddings` is
/// 131,072.
#[test]
fn sequences_past_the_models_positions_are_flagged() {
    let warnings = |q: &str| {
        headroom_core::estimate(&headroom_core::codec::decode(q).expect("decodes"))
            .expect("estimates")
            .warnings
    };
    assert!(warnings("model=gpt2&seq=1024").is_empty());
    let w = warnings("model=gpt2&seq=4096");
    assert_eq!(w.len(), 1);
    assert!(w[0].contains("1024 rows"), "{w:?}");
    assert!(warnings("model=llama-3.2-1b&seq=131072").is_empty());
    assert!(warnings("model=llama-3.2-1b&seq=262144")[0].contains("131072"));
}

fn named(id: &str, overrides: &str) -> headroom_core::Scenario {
    let base = headroom_core::codec::named_scenarios()
        .into_iter()
        .find(|n| n.id == id)
        .expect("a named scenario")
        .scenario;
    let pairs = headroom_core::codec::query_pairs(overrides).expect("pairs");
    headroom_core::codec::decode_pairs(base, &pairs).expect("decodes")
}

/// CUDA graph trees keep the compiled forward and backward's allocations in a private pool at
/// its reserved high-water mark (torch/_inductor/cudagraph_trees.py); the eager optimizer step
/// cannot reuse it. So graphs change no live tensor (allocated) figure of the compiled step
/// they capture, and the pool costs the optimizer step's reservation beyond the gradients, on
/// top of that high-water mark.
#[test]
fn the_cuda_graph_pool_costs_what_the_eager_optimizer_step_cannot_reuse() {
    use headroom_core::estimate::Phase;
    let off = headroom_core::analyze(&named("ex0-366m-t4-fp32-baseline", "graphs=0&compile=1"))
        .expect("analyzes")
        .estimate;
    let on = headroom_core::analyze(&named("ex0-366m-t4-fp32-baseline", "graphs=1"))
        .expect("analyzes")
        .estimate;
    assert_eq!(on.peak.allocated, off.peak.allocated);
    assert_eq!(on.peak.tensors, off.peak.tensors);
    let pool = on
        .components
        .iter()
        .find(|c| c.id == "cuda_graph_pool")
        .expect("a pool component")
        .bytes;
    assert_eq!(on.peak.device - off.peak.device, pool);
    // From the eager timeline: the captured phases' reserved high-water mark above the
    // persistent states, then the optimizer step's points with it held (less the gradients,
    // which live in the pool).
    let persistent = off.bytes.weights + off.bytes.optimizer_states;
    let base = off.timeline[0].allocated - off.timeline[0].tensors + persistent;
    let captured = |p: Phase| matches!(p, Phase::Forward | Phase::Loss | Phase::Backward);
    let high_water = off
        .timeline
        .iter()
        .filter(|p| captured(p.phase))
        .map(|p| p.reserved - base)
        .max()
        .expect("points");
    let optimizer_device = off
        .timeline
        .iter()
        .filter(|p| p.phase == Phase::Optimizer)
        .map(|p| p.device + high_water - off.bytes.gradients)
        .max()
        .expect("an optimizer step");
    assert_eq!(pool, optimizer_device.saturating_sub(off.peak.device));
    // AdamW's foreach step in fp32 allocates one parameter-sized temporary (1.46 GB here):
    // the pool costs that plus the allocator's slack on it, not the 66 GB of activations.
    let step = off
        .components
        .iter()
        .find(|c| c.id == "optimizer_step")
        .expect("a step transient")
        .bytes;
    assert!(pool > step && pool < step + step / 4, "{pool} vs {step}");
}

/// DeepSpeed's bf16_master_weights_and_grads + bf16_optimizer_states: under ZeRO-1 on 8 GPUs
/// each GPU keeps the full bf16 weights and gradients, and an eighth of the two bf16 Adam
/// moments (4 B), the bf16 master copy (2 B) and the bf16 gradient partition (2 B), against
/// 8 + 4 + 4 B in its default bf16 mode. Llama 2 7B: 6,738,415,616 parameters.
#[test]
fn deepspeed_bf16_states_halve_the_sharded_optimizer_side() {
    let n = 6_738_415_616u64;
    let b = |o: &str| {
        headroom_core::analyze(&named("ex2-7b-zero-8x80gb", o))
            .expect("analyzes")
            .estimate
            .bytes
    };
    let bf16 = b("dp=zero1&ds_bf16=1");
    assert_eq!(bf16.weights, 2 * n);
    assert_eq!(bf16.gradients, 2 * n);
    assert_eq!(
        bf16.optimizer_states,
        (4 * n).div_ceil(8) + 2 * (2 * n).div_ceil(8)
    );
    let fp32 = b("dp=zero1&ds_bf16=0");
    assert_eq!(
        fp32.optimizer_states,
        (8 * n).div_ceil(8) + 2 * (4 * n).div_ceil(8)
    );
    // Without ZeRO the option does not apply (and says so).
    let a = headroom_core::analyze(&named("ex2-7b-zero-8x80gb", "dp=ddp&ds_bf16=1")).expect("ok");
    assert!(
        a.estimate.warnings.iter().any(|w| w.contains("ds_bf16")),
        "{:?}",
        a.estimate.warnings
    );
}

/// A safety margin keeps that share of the GPU free: the verdict, what fits and every plan
/// respect it, and it never changes a byte of the estimate itself.
#[test]
fn a_safety_margin_is_kept_free_by_the_verdict_the_fit_and_the_planner() {
    let plain = headroom_core::analyze(&named("llama-3.1-8b-lora-4090", "")).expect("ok");
    let v = &plain.estimate.verdict;
    assert!(v.fits && v.margin == 0);
    // A margin just above its headroom turns the verdict, and only the verdict.
    let pct = (v.headroom_percent.ceil() as u32) + 1;
    let m = headroom_core::analyze(&named("llama-3.1-8b-lora-4090", &format!("margin={pct}")))
        .expect("ok");
    assert!(!m.estimate.verdict.fits);
    assert_eq!(m.estimate.verdict.margin, v.capacity / 100 * u64::from(pct));
    assert_eq!(m.estimate.peak, plain.estimate.peak);
    // What fits shrinks with it.
    let seq = |a: &headroom_core::Analysis| a.fit.expect("fit").max_seq.unwrap_or(0);
    assert!(seq(&m) < seq(&plain), "{} vs {}", seq(&m), seq(&plain));
    // Every plan offered keeps the margin free.
    let scen = named("llama-3.1-8b-lora-4090", "margin=25");
    let p = headroom_core::plan::plan(&scen, &headroom_core::plan::PlanOptions::default())
        .expect("plans");
    for plan in &p.plans {
        assert!(
            plan.headroom as f64 >= plan.capacity as f64 * 0.25 - 1.0,
            "{}",
            plan.link
        );
    }
    // Out of range is named.
    let e = headroom_core::codec::decode("v=1&margin=80").expect_err("refused");
    assert!(e.to_string().contains("margin"), "{e}");
}

/// Offloading pins host memory per GPU; a node holds up to 8 GPUs' worth, which the verdict
/// checks against the node's RAM when the scenario states it (ZeRO-3 optimizer offload of
/// Llama 3.1 70B: fp32 master weights, moments and gradient partition, 16 B per parameter).
#[test]
fn host_ram_is_checked_per_node() {
    let a = headroom_core::analyze(&named("llama-3.1-70b-full-8xh100", "host_ram=0")).expect("ok");
    let v = &a.estimate.verdict;
    assert_eq!(v.host_per_node, a.estimate.bytes.host * 8);
    assert!(v.host_fits && v.fits);
    assert!(a.estimate.warnings.iter().any(|w| w.contains("host_ram")));
    let host_gib = (v.host_per_node >> 30) as u32;
    let short = headroom_core::analyze(&named(
        "llama-3.1-70b-full-8xh100",
        &format!("host_ram={}", host_gib - 1),
    ))
    .expect("ok");
    assert!(!short.estimate.verdict.host_fits && !short.estimate.verdict.fits);
    assert_eq!(
        short.estimate.peak, a.estimate.peak,
        "GPU figures unchanged"
    );
    let enough = headroom_core::analyze(&named(
        "llama-3.1-70b-full-8xh100",
        &format!("host_ram={}", host_gib + 1),
    ))
    .expect("ok");
    assert!(enough.estimate.verdict.fits);
    assert!(
        !enough
            .estimate
            .warnings
            .iter()
            .any(|w| w.contains("host_ram"))
    );
    // Host memory is not GPU memory: it is not part of any GPU peak's assumed share.
    let host = a
        .estimate
        .components
        .iter()
        .find(|c| c.id == "host")
        .expect("host");
    assert_eq!(host.level, headroom_core::estimate::Level::Host);
}

/// LlamaConfig's defaults (Llama 2 7B's shape) under a `model_type` the core does not model.
const UNKNOWN_7B: &str = r#"{"model_type":"my_lm","hidden_size":4096,"num_hidden_layers":32,
    "num_attention_heads":32,"intermediate_size":11008,"vocab_size":32000}"#;

#[test]
fn unknown_model_type_is_estimated_as_llama_and_marked_approximate() {
    // transformers' num_parameters() of LlamaConfig() (as llama_2_7b_params_with_defaults).
    params(UNKNOWN_7B, 6_738_415_616);
    let spec = parse_config_json(UNKNOWN_7B).expect("an unknown type with the standard keys");
    assert_eq!(spec.model_type, "my_lm");
    let scen = Scenario {
        model: ModelChoice::Custom(Box::new(spec)),
        ..Scenario::default()
    };
    let e = estimate(&scen).expect("estimates");
    assert!(e.warnings[0].contains("`my_lm` is not one Headroom models exactly"));
    // No max_position_embeddings: the positions are unknown, so no warning about them.
    assert_eq!(e.warnings.len(), 1, "{:?}", e.warnings);
    assert_eq!(e.parameters_confidence, Confidence::Assumed);
    assert!(
        e.components
            .iter()
            .all(|c| c.confidence != Confidence::Exact)
    );
    // The link carries the config and reads back the same approximate spec.
    assert_eq!(decode(&encode(&scen)).expect("decodes"), scen);
    let exact = estimate(&Scenario::default()).expect("estimates");
    assert_eq!(exact.parameters_confidence, Confidence::Exact);
}

#[test]
fn unknown_moe_config_counts_its_experts() {
    // Mixtral's layout under another name: transformers' num_parameters() of MixtralConfig()
    // with vocab_size 32000 is 46,702,792,704 (content/models/presets.toml, mixtral-8x7b).
    params(
        r#"{"model_type":"my_moe","hidden_size":4096,"num_hidden_layers":32,"num_attention_heads":32,
        "num_key_value_heads":8,"intermediate_size":14336,"vocab_size":32000,"num_local_experts":8,
        "num_experts_per_tok":2}"#,
        46_702_792_704,
    );
}

#[track_caller]
fn sized(id: &str) -> headroom_core::Estimate {
    let scen = decode(&format!("model={id}")).expect("decodes");
    estimate(&scen).expect("estimates")
}

#[test]
fn a_model_given_by_its_size_takes_the_nearest_presets_layout() {
    for (id, size, from) in [
        ("7b", 7e9, "Qwen2.5 7B"),
        ("8B", 8e9, "Llama 3.1 8B"),
        ("1.5b", 1.5e9, "Qwen2.5 1.5B"),
        ("70b", 70e9, "Llama 3.1 70B"),
        ("500m", 0.5e9, "Qwen2.5 0.5B"),
    ] {
        let e = sized(id);
        let total = e.parameters.total as f64;
        // Within half a layer of the size asked for.
        assert!((total / size - 1.0).abs() < 0.03, "{id}: {total}");
        assert_eq!(e.parameters_confidence, Confidence::Assumed);
        assert!(
            e.warnings[0].contains(&format!("layout of {from}")),
            "{id}: {:?}",
            e.warnings
        );
        assert_eq!(e.model, id.to_ascii_lowercase());
    }
    for bad in ["0.1b", "5000b"] {
        let scen = decode(&format!("model={bad}")).expect("decodes");
        let err = estimate(&scen).expect_err("out of range").to_string();
        assert!(
            err.contains("`model`: a model given by its size must have from 0.2b to 2000b"),
            "{err}"
        );
    }
}

/// A glm4_moe config with no routed experts is dense, and its link says so: the class default
/// (128 experts) used to come back on decoding (found by the fuzz harness's config target).
#[test]
fn a_dense_glm4_moe_config_round_trips_through_its_link() {
    let text = r#"{"model_type":"glm4_moe","hidden_size":512,"num_hidden_layers":4,
        "num_attention_heads":8,"num_key_value_heads":2,"head_dim":64,"intermediate_size":1024,
        "vocab_size":1000,"n_routed_experts":0}"#;
    let spec = parse_config_json(text).expect("parses");
    assert!(spec.moe.is_none());
    let scen = Scenario {
        model: ModelChoice::Custom(Box::new(spec)),
        ..Scenario::default()
    };
    assert_eq!(decode(&encode(&scen)).expect("decodes"), scen);
}

/// A Cohere 2 config with attention biases keeps them through its link (they were dropped:
/// found by the fuzz harness's config target).
#[test]
fn a_cohere2_config_keeps_its_attention_biases_through_its_link() {
    let text = r#"{"model_type":"cohere2","hidden_size":512,"num_hidden_layers":4,
        "num_attention_heads":8,"num_key_value_heads":2,"intermediate_size":1024,
        "vocab_size":1000,"attention_bias":true}"#;
    let spec = parse_config_json(text).expect("parses");
    assert!(spec.qkv_bias && spec.o_bias);
    let scen = Scenario {
        model: ModelChoice::Custom(Box::new(spec)),
        ..Scenario::default()
    };
    assert_eq!(decode(&encode(&scen)).expect("decodes"), scen);
}

/// DeepSeek-V2-Lite's one q_proj (`q_lora_rank: null`) and a gpt-oss config without a window
/// keep their layouts through a link (both are nulls, which a link writes as `null`).
#[test]
fn mla_and_gpt_oss_configs_round_trip_through_their_links() {
    for text in [
        r#"{"model_type":"deepseek_v2","hidden_size":512,"num_hidden_layers":4,"num_attention_heads":8,
            "intermediate_size":1024,"vocab_size":1000,"q_lora_rank":null,"kv_lora_rank":64,
            "qk_nope_head_dim":32,"qk_rope_head_dim":16,"v_head_dim":24,"mlp_bias":true,
            "first_k_dense_replace":1,"n_routed_experts":8,"moe_intermediate_size":64,"num_experts_per_tok":2}"#,
        r#"{"model_type":"gpt_oss","hidden_size":512,"num_hidden_layers":4,"num_attention_heads":8,
            "num_key_value_heads":2,"head_dim":64,"intermediate_size":256,"vocab_size":1000,
            "num_local_experts":4,"num_experts_per_tok":2,"sliding_window":null,"attention_bias":false}"#,
    ] {
        let spec = parse_config_json(text).expect("parses");
        let scen = Scenario {
            model: ModelChoice::Custom(Box::new(spec)),
            ..Scenario::default()
        };
        assert_eq!(decode(&encode(&scen)).expect("decodes"), scen, "{text}");
    }
}

/// DeepSeek's routers keep what sets their saved tensors through a link: DeepSeek-V2's
/// group-limited choice (whose mask is saved) and a GLM-4.5 router that does not normalize its
/// top-k (its config class normalizes by default). A router method DeepSeek-V2 does not have is
/// refused by name.
#[test]
fn deepseek_routers_round_trip_through_their_links() {
    use headroom_core::model::Router;
    let base = r#""hidden_size":512,"num_hidden_layers":4,"num_attention_heads":8,
        "num_key_value_heads":8,"intermediate_size":1024,"vocab_size":1000,"n_routed_experts":8,
        "moe_intermediate_size":64,"num_experts_per_tok":2,"first_k_dense_replace":0"#;
    for (extra, router, norm) in [
        (
            r#""model_type":"deepseek_v2","topk_method":"group_limited_greedy","n_group":2,"topk_group":1"#,
            Router::DeepseekV2 {
                group_limited: true,
            },
            false,
        ),
        (
            r#""model_type":"deepseek_v2""#,
            Router::DeepseekV2 {
                group_limited: false,
            },
            false,
        ),
        (
            r#""model_type":"glm4_moe","norm_topk_prob":false"#,
            Router::DeepseekV3,
            false,
        ),
        (r#""model_type":"deepseek_v3""#, Router::DeepseekV3, true),
    ] {
        let text = format!("{{{extra},{base}}}");
        let spec = parse_config_json(&text).expect("parses");
        let moe = spec.moe.clone().expect("MoE");
        assert_eq!((moe.router, moe.norm_topk), (router, norm), "{text}");
        let scen = Scenario {
            model: ModelChoice::Custom(Box::new(spec)),
            ..Scenario::default()
        };
        assert_eq!(decode(&encode(&scen)).expect("decodes"), scen, "{text}");
    }
    let bad = format!(r#"{{"model_type":"deepseek_v2","topk_method":"noaux_tc",{base}}}"#);
    let err = parse_config_json(&bad).expect_err("refused").to_string();
    assert!(
        err.contains("topk_method") && err.contains("group_limited_greedy"),
        "{err}"
    );
}

/// How many layers slide where the config decides it (transformers 5.23's `layer_types`
/// rules): Qwen2/Qwen3 from `max_window_layers` on, Qwen2-MoE's even layers below it,
/// SmolLM3's NoPE layers, EXAONE 4's pattern, an explicit `layer_types`; each keeps its count through a link, and
/// a `layer_types` of the wrong length is refused by name.
#[test]
fn sliding_layers_follow_the_config_and_round_trip() {
    let base = r#""hidden_size":512,"num_hidden_layers":8,"num_attention_heads":8,
        "num_key_value_heads":2,"intermediate_size":1024,"vocab_size":1000,
        "use_sliding_window":true,"sliding_window":256"#;
    for (extra, local) in [
        (r#""model_type":"qwen2","max_window_layers":5"#, Some(3)),
        (r#""model_type":"qwen3","max_window_layers":8"#, None),
        (r#""model_type":"qwen2""#, None),
        (r#""model_type":"qwen2_moe","max_window_layers":5"#, Some(3)),
        (r#""model_type":"smollm3""#, Some(2)),
        (
            r#""model_type":"smollm3","no_rope_layers":[1,0,1,0,1,0,1,1]"#,
            Some(3),
        ),
        (
            r#""model_type":"gpt_oss","num_local_experts":4,"num_experts_per_tok":2,
            "layer_types":["sliding_attention","sliding_attention","sliding_attention",
            "full_attention","full_attention","full_attention","full_attention","full_attention"]"#,
            Some(3),
        ),
        (r#""model_type":"mistral""#, Some(8)),
        // EXAONE 4: every layer i with (i + 1) % pattern != 0 slides (4 by default), or a
        // string of L and G repeated (Exaone4Config; its released configs' "LLLG").
        (r#""model_type":"exaone4""#, Some(6)),
        (
            r#""model_type":"exaone4","sliding_window_pattern":2"#,
            Some(4),
        ),
        (
            r#""model_type":"exaone4","sliding_window_pattern":"LLGLG""#,
            Some(5),
        ),
    ] {
        let text = format!("{{{extra},{base}}}");
        let spec = parse_config_json(&text).expect("parses");
        assert_eq!(spec.local_attention().map(|(_, n)| n), local, "{text}");
        let scen = Scenario {
            model: ModelChoice::Custom(Box::new(spec)),
            ..Scenario::default()
        };
        assert_eq!(decode(&encode(&scen)).expect("decodes"), scen, "{text}");
    }
    let bad = format!(r#"{{"model_type":"qwen2","layer_types":["sliding_attention"],{base}}}"#);
    let err = parse_config_json(&bad).expect_err("refused").to_string();
    assert!(err.contains("layer_types"), "{err}");
    for pattern in ["0", r#""LXG""#, r#""""#] {
        let bad =
            format!(r#"{{"model_type":"exaone4","sliding_window_pattern":{pattern},{base}}}"#);
        let err = parse_config_json(&bad).expect_err("refused").to_string();
        assert!(err.contains("sliding_window_pattern"), "{err}");
    }
}

/// Llama 4 (Maverick's alternating dense and MoE layers, NoPE layers listed, no chunking) and
/// Qwen3-Next (an irregular `layer_types`, a dense layer) keep their layouts through a link:
/// the parameter count of each config is transformers' `num_parameters()` (4,203,264 and
/// 4,447,080, measured on the meta device with transformers 5.23) before and after.
#[test]
fn llama4_and_qwen3_next_configs_round_trip_through_their_links() {
    for (text, params) in [
        (
            r#"{"model_type":"llama4_text","hidden_size":256,"intermediate_size":128,"intermediate_size_mlp":320,
            "num_hidden_layers":5,"num_attention_heads":4,"num_key_value_heads":2,"vocab_size":1000,
            "moe_layers":[0,3],"num_local_experts":4,"no_rope_layers":[1,0,0,1,1],"attention_chunk_size":null,
            "use_qk_norm":false}"#,
            4_203_264,
        ),
        (
            r#"{"model_type":"qwen3_next","hidden_size":256,"intermediate_size":320,"num_hidden_layers":6,
            "num_attention_heads":4,"num_key_value_heads":2,"head_dim":64,"vocab_size":1000,"linear_num_key_heads":2,
            "linear_num_value_heads":4,"linear_key_head_dim":32,"linear_value_head_dim":48,"linear_conv_kernel_dim":3,
            "num_experts":8,"num_experts_per_tok":2,"moe_intermediate_size":64,"shared_expert_intermediate_size":96,
            "mlp_only_layers":[1],"attention_bias":true,"layer_types":["linear_attention","full_attention",
            "full_attention","linear_attention","linear_attention","full_attention"]}"#,
            4_447_080,
        ),
    ] {
        let spec = parse_config_json(text).expect("parses");
        assert_eq!(
            headroom_core::model::inventory(&spec).total(),
            params,
            "{text}"
        );
        let scen = Scenario {
            model: ModelChoice::Custom(Box::new(spec)),
            ..Scenario::default()
        };
        assert_eq!(decode(&encode(&scen)).expect("decodes"), scen, "{text}");
    }
}

fn component(e: &headroom_core::estimate::Estimate, id: &str) -> u64 {
    e.components
        .iter()
        .find(|c| c.id == id)
        .unwrap_or_else(|| panic!("a {id} component"))
        .bytes
}

/// FSDP with LoRA reduce-scatters only the parameters that have gradients (FSDP2's
/// `foreach_reduce` takes each parameter's `.grad`; under transformers' Trainer FSDP1 wraps each
/// adapter Linear as its own unit, peft's `fsdp_auto_wrap_policy`): in a layer's backward its
/// adapters' unsharded gradients in bf16 (the policy gathers them in bf16) beside the previous
/// layer's reduce-scatter input, bf16 as accelerate's policy reduces, fp32 with `reduce32`
/// (measured: tests/reference/test_fsdp.py). Llama 3.1 8B, r = 16 on all seven Linears:
/// 16 x (in + out) summed, 1,310,720 parameters, x (2 + 2) B, or x (2 + 4) B.
#[test]
fn fsdp_with_lora_reduces_only_the_adapters_gradients() {
    let e = estimate(&decode("method=lora&gpus=2&dp=fsdp&seq=2048").expect("decodes"))
        .expect("estimates");
    let r = 16;
    let adapters: u64 = [
        (4096, 4096),
        (4096, 1024),
        (4096, 1024),
        (4096, 4096),
        (4096, 14336),
        (4096, 14336),
        (14336, 4096),
    ]
    .iter()
    .map(|(i, o)| r * (i + o))
    .sum();
    assert_eq!(adapters, 1_310_720);
    assert_eq!(component(&e, "comm_buffers"), adapters * (2 + 2));
    let fp32 =
        estimate(&decode("method=lora&gpus=2&dp=fsdp&seq=2048&reduce32=1").expect("decodes"))
            .expect("estimates");
    assert_eq!(component(&fp32, "comm_buffers"), adapters * (2 + 4));
}

/// FSDP gathers a QLoRA layer as stored: its 4-bit Linears packed (half a byte a weight, the
/// bytes `bnb_4bit_quant_storage` holds them in), the norms and the adapters in 16 bits (FSDP2's
/// param_dtype; the LoRA case measured in tests/reference/test_fsdp.py); the running and the
/// prefetched layer, beside the root module's unsharded embeddings, lm_head and final norm.
/// The NF4 quantization state is no parameter: every rank keeps all of it.
#[test]
fn fsdp_gathers_qlora_layers_packed_and_keeps_the_nf4_state_whole() {
    let q = estimate(&decode("method=qlora&gpus=2&dp=fsdp&seq=2048").expect("decodes"))
        .expect("estimates");
    let linears: u64 = 4096 * (4096 + 1024 + 1024 + 4096) + 3 * 4096 * 14336;
    let layer = linears / 2 + 2 * 4096 * 2 + 1_310_720 * 2;
    let outside = (2 * 128_256 * 4096 + 4096) * 2;
    assert_eq!(component(&q, "gathered_params"), 2 * layer + outside);
    // Weights: the packed codes and 16-bit tensors halved over 2 ranks, the state whole.
    let one = estimate(&decode("method=qlora&seq=2048").expect("decodes")).expect("estimates");
    let blocks = |n: u64| n.div_ceil(64);
    // absmax, its own absmax and offset, and the two fp32 code books (16 NF4 levels, 256 of the
    // absmax's dynamic map) bitsandbytes copies into every quantization state.
    let per_matrix = |n: u64| blocks(n) + blocks(n).div_ceil(256) * 4 + 4 + (16 + 256) * 4;
    let matrices = [
        4096 * 4096,
        4096 * 1024,
        4096 * 1024,
        4096 * 4096,
        4096 * 14336,
        4096 * 14336,
        14336 * 4096,
    ];
    let state: u64 = 32 * matrices.iter().map(|&n| per_matrix(n)).sum::<u64>();
    let adapters = 32 * 1_310_720 * 4;
    let frozen = one.bytes.weights - state - adapters;
    assert_eq!(
        q.bytes.weights,
        frozen.div_ceil(2) + state + (adapters / 2),
        "sharded frozen weights and adapters, the NF4 state on every rank"
    );
}

/// The base's load dtype and peft's kbit preparation are LoRA settings: links carry them, and
/// an fp32 base with a pure 16-bit precision is refused by name.
#[test]
fn lora_base_kbit_and_dropout_round_trip_and_are_checked() {
    let s = decode("method=qlora&base=fp32&kbit=1&lora_dropout=1&targets=qv").expect("decodes");
    assert!(s.lora.kbit && s.lora.dropout);
    assert_eq!(decode(&encode(&s)).expect("round trip"), s);
    let err = decode("method=lora&base=fp32&precision=bf16")
        .expect_err("an fp32 base under pure bf16")
        .to_string();
    assert!(err.contains("base"), "{err}");
    // Under full training the LoRA settings are not written.
    assert!(!encode(&decode("base=fp32&kbit=1").expect("decodes")).contains("base"));
}

/// FSDP1 and the fp32 reduce are FSDP settings: a link that sets them elsewhere is refused by
/// name; on FSDP they change what a layer's backward holds (FSDP1: the flat gradient only, no
/// reduce-scatter input kept; fp32 reduce: a 4-byte reduce-scatter input beside the 2-byte
/// unsharded gradients). Llama 3.1 8B's layer: 4096 x (4096 + 1024 + 1024 + 4096) attention,
/// 3 x 4096 x 14336 MLP and two 4096 norms, 218,112,000 parameters.
#[test]
fn fsdp1_and_reduce32_are_fsdp_settings() {
    for (link, field) in [
        ("gpus=2&dp=zero3&fsdp1=1", "fsdp1"),
        ("gpus=2&dp=ddp&reduce32=1", "reduce32"),
        ("gpus=2&dp=fsdp&precision=bf16&reduce32=1", "reduce32"),
    ] {
        let err = decode(link).expect_err(link).to_string();
        assert!(err.contains(&format!("`{field}`")), "{link}: {err}");
    }
    let layer: u64 = 218_112_000;
    let comm = |link: &str| {
        component(
            &estimate(&decode(link).expect("decodes")).expect("estimates"),
            "comm_buffers",
        )
    };
    // Full training over 8 ranks: the layer's gradients are whole while its backward runs (the
    // default policy reduces in bf16; FSDP1's fp32 cast adds its 1/8 fp32 shard).
    assert_eq!(comm("gpus=8&dp=fsdp&method=full"), layer * (2 + 2));
    assert_eq!(
        comm("gpus=8&dp=fsdp&method=full&reduce32=1"),
        layer * (2 + 4)
    );
    assert_eq!(comm("gpus=8&dp=fsdp&method=full&fsdp1=1"), layer * 2);
    assert_eq!(
        comm("gpus=8&dp=fsdp&method=full&fsdp1=1&reduce32=1"),
        layer * (2 + 4) + (layer * 4).div_ceil(8)
    );
}

/// A position table too long is refused by the key the config gives it: GPT-2's `n_positions`,
/// OPT's `max_position_embeddings` (its table has two rows more; it has no `n_positions`, which
/// the property test caught the message naming).
#[test]
fn a_position_table_too_long_is_refused_by_its_own_key() {
    for (text, key) in [
        (
            r#"{"model_type":"opt","max_position_embeddings":1099511627776}"#,
            "max_position_embeddings",
        ),
        (
            r#"{"model_type":"gpt2","n_positions":1099511627776}"#,
            "n_positions",
        ),
    ] {
        let e = parse_config_json(text).expect_err("too long").to_string();
        assert!(e.contains(&format!("`{key}`")), "{text}: {e}");
    }
}
