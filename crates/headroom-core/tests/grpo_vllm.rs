//! GRPO (and RLOO, at the end) generating with vLLM as TRL runs it (`gen=colocate|server`): vLLM's budget is
//! `gpu_memory_utilization` x the GPU's total memory (vLLM's V1 GPU worker); a colocated
//! engine holds its weights and KV cache beside the trainer unless it sleeps; vLLM refuses to
//! start when its KV cache cannot hold one `max_model_len` sequence, or when the GPU has less
//! than its budget free once the trainer's model is loaded.

use headroom_core::catalog::GpuCatalog;
use headroom_core::codec::{decode, encode};
use headroom_core::estimate::{Estimate, Phase};
use headroom_core::import::import;
use headroom_core::{analyze, estimate};

/// Llama 3.1 8B LoRA on an H100, 4 completions of 256 + 768 tokens per GPU.
const BASE: &str = "model=llama-3.1-8b&gpu=h100-sxm-80gb&precision=bf16&ckpt=full&method=lora\
                    &trainer=grpo&batch=4&seq=1024&prompt=256";

fn est(link: &str) -> Estimate {
    estimate(&decode(link).expect("decodes")).expect("estimates")
}

fn h100_total() -> u64 {
    GpuCatalog::builtin()
        .get("h100-sxm-80gb")
        .expect("h100")
        .total_bytes
}

/// The last value an import gave link field `key`.
fn last_value<'a>(got: &'a headroom_core::import::Imported, key: &str) -> Option<&'a str> {
    got.pairs
        .iter()
        .rev()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

fn vllm_bytes(e: &Estimate) -> u64 {
    e.components
        .iter()
        .find(|c| c.id == "vllm")
        .map_or(0, |c| c.bytes)
}

/// The largest device level over the training phases (after generation and scoring).
fn training_peak(e: &Estimate) -> u64 {
    e.timeline
        .iter()
        .filter(|p| {
            !p.label.starts_with("generation")
                && !p.label.starts_with("scoring")
                && p.phase != Phase::Start
        })
        .map(|p| p.allocated)
        .max()
        .expect("points")
}

/// Llama 3.1 8B's context is 131,072 tokens; its KV cache takes 32 layers x 2 x 8 heads x 128 x
/// 2 B = 128 KiB a token, so one such sequence needs 16 GiB (vLLM's own startup check), more
/// than TRL's default colocated budget (30% of an H100) leaves after the 16 GB of weights.
#[test]
fn vllm_refuses_a_context_its_kv_cache_cannot_hold_and_names_the_fix() {
    let e = est(&format!("{BASE}&gen=colocate"));
    assert!(!e.verdict.fits);
    let w = e
        .warnings
        .iter()
        .find(|w| w.contains("vLLM cannot start"))
        .expect("a warning");
    // vLLM's own figure: "16.0 GiB KV cache is needed" for one such sequence.
    assert!(
        w.contains("max_model_len 131072 needs 16.0 GiB") && w.contains("vllm_len"),
        "{w}"
    );
    // Its budget, 30% of the card, is what the engine takes while it generates.
    assert_eq!(vllm_bytes(&e), h100_total() * 30 / 100);
    // The cheapest fix the strategy table offers is that context, which changes no byte.
    let a = analyze(&decode(&format!("{BASE}&gen=colocate")).expect("decodes")).expect("analyzes");
    let fix = a
        .strategies
        .as_ref()
        .expect("the strategy table")
        .iter()
        .find(|s| s.recommended)
        .expect("a recommended change");
    assert_eq!(fix.id, "vllm_len");
    assert!(fix.link.contains("vllm_len=1024"), "{}", fix.link);
    // With max_model_len set to the sequence, it starts.
    let ok = est(&format!("{BASE}&gen=colocate&vllm_len=1024"));
    assert!(ok.verdict.fits, "{:?}", ok.warnings);
    assert!(!ok.warnings.iter().any(|w| w.contains("vLLM")));
}

/// Colocated, the engine's weights and KV cache stay beside the trainer's step (its profile
/// share is working memory): the training phases carry them, unless the engine sleeps; a
/// server leaves the training GPU to the trainer, as transformers' generate between steps does.
#[test]
fn a_colocated_engine_holds_its_budget_beside_training_unless_it_sleeps() {
    let awake = est(&format!("{BASE}&gen=colocate&vllm_len=1024"));
    let asleep = est(&format!("{BASE}&gen=colocate&vllm_len=1024&vllm_sleep=1"));
    let server = est(&format!("{BASE}&gen=server&vllm_len=1024"));
    let hf = est(BASE);
    let budget = h100_total() * 30 / 100;
    let held = training_peak(&awake) - training_peak(&asleep);
    // Held while training: the budget less the profile run's working share.
    assert!(held < budget && held > budget / 2, "{held} of {budget}");
    assert_eq!(training_peak(&asleep), training_peak(&server));
    assert_eq!(training_peak(&server), training_peak(&hf));
    // Asleep, the engine's budget comes back only while it generates.
    let generating = asleep
        .timeline
        .iter()
        .find(|p| p.label.starts_with("generation in vLLM"))
        .expect("the generation point");
    assert!(generating.allocated >= budget);
    // A server holds nothing on the training GPU.
    assert_eq!(vllm_bytes(&server), 0);
    assert!(server.verdict.fits);
}

/// The trainer's model is on the GPU when vLLM starts: a full fine-tune's fp32 weights of
/// Llama 3.1 8B (32 GB) leave an A100 40GB less free than a 30% budget.
#[test]
fn vllm_refuses_to_start_where_the_trainers_model_leaves_less_than_its_budget() {
    let e = est(
        "model=llama-3.1-8b&gpu=a100-sxm4-40gb&precision=amp-bf16&ckpt=full&method=full\
         &trainer=grpo&batch=1&seq=1024&prompt=256&gen=colocate&vllm_len=1024",
    );
    assert!(!e.verdict.fits);
    assert!(
        e.warnings
            .iter()
            .any(|w| w.contains("free once the trainer's model is loaded")),
        "{:?}",
        e.warnings
    );
}

/// Decoding in vLLM reads the weights once per step for every completion at once, where
/// transformers' generate pays the host's launches per token: the same step is faster.
#[test]
fn vllm_generates_faster_than_transformers_generate() {
    let time = |link: &str| {
        analyze(&decode(link).expect("decodes"))
            .expect("analyzes")
            .time
            .step_seconds
    };
    let hf = time(BASE);
    let colocated = time(&format!("{BASE}&gen=colocate&vllm_len=1024"));
    assert!(colocated < hf, "{colocated} vs {hf}");
}

#[test]
fn vllm_settings_round_trip_and_are_refused_by_name() {
    let scen = decode(&format!(
        "{BASE}&gen=colocate&vllm_util=45&vllm_len=2048&vllm_sleep=1"
    ))
    .expect("decodes");
    assert_eq!(decode(&encode(&scen)), Ok(scen));
    let refused = |link: &str, field: &str| {
        let e = decode(link).expect_err("refused").to_string();
        assert!(e.contains(field), "{link}: {e}");
    };
    refused("model=llama-3.1-8b&gen=colocate&vllm_len=1024", "gen");
    refused(&format!("{BASE}&vllm_util=40"), "vllm_util");
    refused(&format!("{BASE}&gen=server&vllm_sleep=1"), "vllm_sleep");
    refused(&format!("{BASE}&gen=colocate&vllm_len=512"), "vllm_len");
    refused(&format!("{BASE}&gen=colocate&vllm_util=101"), "vllm_util");
}

/// TRL's GRPOConfig keys (`use_vllm`, `vllm_mode`, `vllm_gpu_memory_utilization`,
/// `vllm_max_model_length`, `vllm_enable_sleep_mode`) become the link's vLLM fields.
#[test]
fn grpo_configs_vllm_keys_import() {
    let text = r#"{
        "model_name_or_path": "Qwen/Qwen2.5-7B",
        "per_device_train_batch_size": 8,
        "num_generations": 8,
        "max_completion_length": 768,
        "use_vllm": true,
        "vllm_mode": "colocate",
        "vllm_gpu_memory_utilization": 0.35,
        "vllm_max_model_length": 2048,
        "vllm_enable_sleep_mode": true
    }"#;
    let got = import(text, Some("grpo.json"), &|_| None).expect("imports");
    let pair = |k: &str| last_value(&got, k);
    assert_eq!(pair("trainer"), Some("grpo"));
    assert_eq!(pair("gen"), Some("colocate"));
    assert_eq!(pair("vllm_util"), Some("35"));
    assert_eq!(pair("vllm_len"), Some("2048"));
    assert_eq!(pair("vllm_sleep"), Some("1"));
    let bad = text.replace("\"colocate\"", "\"remote\"");
    let e = import(&bad, Some("grpo.json"), &|_| None).expect_err("refused");
    assert!(e.to_string().contains("vllm_mode"), "{e}");
}

/// axolotl passes its `vllm:` block's `gpu_memory_utilization` (default 0.9) to a colocated
/// engine and `trl.vllm_enable_sleep_mode` with it (`core/trainers/grpo/__init__.py`).
#[test]
fn axolotls_vllm_keys_import() {
    let text = "base_model: Qwen/Qwen2.5-7B\n\
                rl: grpo\n\
                trl:\n  use_vllm: true\n  vllm_mode: colocate\n  vllm_enable_sleep_mode: true\n  max_completion_length: 512\n\
                vllm:\n  gpu_memory_utilization: 0.5\n\
                micro_batch_size: 4\n\
                sequence_len: 1024\n";
    let got = import(text, Some("grpo.yaml"), &|_| None).expect("imports");
    let pair = |k: &str| last_value(&got, k);
    assert_eq!(pair("gen"), Some("colocate"));
    assert_eq!(pair("vllm_util"), Some("50"));
    assert_eq!(pair("vllm_sleep"), Some("1"));
    // Without the block, axolotl's default 0.9.
    let default = text.replace("vllm:\n  gpu_memory_utilization: 0.5\n", "");
    let got = import(&default, Some("grpo.yaml"), &|_| None).expect("imports");
    assert!(got.pairs.iter().any(|(k, v)| k == "vllm_util" && v == "90"));
}

/// RLOO as TRL 1.16's RLOOTrainer runs it (`trainer=rloo`): GRPO's generation and training
/// step, but its `_generate_and_score_completions` always scores the completions with the
/// policy (`old_per_token_logps`, a no-grad pass over prompt and completion) and, with a KL
/// term, with the reference too; GRPO (transformers' generate, one generation per step)
/// scores only through the reference. Memory: the pass's working set joins the generation
/// point without a KL term; time: one more pass.
#[test]
fn rloo_always_scores_its_completions_with_the_policy() {
    let grpo = BASE.replace("method=lora", "method=full");
    let rloo = grpo.replace("trainer=grpo", "trainer=rloo");
    let generation = |e: &Estimate| {
        e.timeline
            .iter()
            .find(|p| p.label.starts_with("generation:"))
            .expect("a generation point")
            .tensors
    };
    let (g, r) = (est(&grpo), est(&rloo));
    assert!(generation(&r) >= generation(&g));
    // With a KL term both run a pass of the same size: the same generation point.
    let (gk, rk) = (est(&format!("{grpo}&kl=1")), est(&format!("{rloo}&kl=1")));
    assert_eq!(generation(&gk), generation(&rk));
    // The reference copy of a full fine-tune only with a KL term, as GRPO's.
    assert_eq!(r.bytes.weights, g.bytes.weights);
    assert_eq!(rk.bytes.weights, gk.bytes.weights);
    assert!(rk.bytes.weights > r.bytes.weights);
    // One more pass of 2 x parameters x tokens on the generation's clock.
    let time = |link: &str| {
        analyze(&decode(link).expect("decodes"))
            .expect("analyzes")
            .time
            .term("generation")
            .expect("generation")
            .seconds
    };
    let extra = time(&rloo) - time(&grpo);
    assert!(extra > 0.0);
    assert!((time(&format!("{rloo}&kl=1")) - time(&format!("{grpo}&kl=1")) - extra).abs() < 1e-9);
    let scen = decode(&format!("{rloo}&kl=1")).expect("decodes");
    assert_eq!(decode(&encode(&scen)), Ok(scen));
}

/// TRL's configs name their trainer by their own keys (TRL 1.16): RLOOConfig's
/// `normalize_advantages` and `reward_clip_range`, whose `beta` defaults to 0.05 (a reference
/// model); KTOConfig's `desirable_weight` and `undesirable_weight`. axolotl's `rl: kto` and
/// LLaMA-Factory's `stage: kto` run KTOTrainer.
#[test]
fn rloo_and_kto_configs_import_as_their_trainers() {
    let rloo = r#"{"model_name_or_path": "Qwen/Qwen2.5-7B", "num_generations": 2,
        "max_completion_length": 512, "normalize_advantages": true}"#;
    let got = import(rloo, Some("rloo.json"), &|_| None).expect("imports");
    assert_eq!(last_value(&got, "trainer"), Some("rloo"));
    assert_eq!(last_value(&got, "kl"), Some("1"));
    let off = rloo.replace(
        "\"normalize_advantages\"",
        "\"beta\": 0.0, \"normalize_advantages\"",
    );
    let got = import(&off, Some("rloo.json"), &|_| None).expect("imports");
    assert_eq!(last_value(&got, "kl"), None);
    let kto = r#"{"model_name_or_path": "Qwen/Qwen2.5-7B", "desirable_weight": 1.0,
        "precompute_ref_log_probs": true, "max_length": 2048}"#;
    let got = import(kto, Some("kto.json"), &|_| None).expect("imports");
    assert_eq!(last_value(&got, "trainer"), Some("kto"));
    assert_eq!(last_value(&got, "ref_precompute"), Some("1"));
    let axolotl = "base_model: Qwen/Qwen2.5-7B\nrl: kto\nmicro_batch_size: 2\n";
    let got = import(axolotl, Some("axolotl.yaml"), &|_| None).expect("imports");
    assert_eq!(last_value(&got, "trainer"), Some("kto"));
    let lf = "model_name_or_path: Qwen/Qwen2.5-7B\nstage: kto\nfinetuning_type: lora\n\
              per_device_train_batch_size: 2\n";
    let got = import(lf, Some("llamafactory.yaml"), &|_| None).expect("imports");
    assert_eq!(last_value(&got, "trainer"), Some("kto"));
}
