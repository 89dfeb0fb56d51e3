//! DPO as TRL 1.16's DPOTrainer runs it (`trainer=dpo`; KTO at the end): chosen and rejected
//! sequences in one forward, no logits (TRL's tiled fused LM head), a reference model's weights for a full
//! fine-tune (none under LoRA, whose adapters are disabled for the reference), a reference
//! forward in every step unless its log-probabilities are precomputed.

use headroom_core::codec::{decode, encode};
use headroom_core::{analyze, estimate};

const BASE: &str = "model=llama-3.1-8b&gpu=h100-sxm-80gb&precision=bf16&seq=1024&ckpt=full";

fn est(link: &str) -> headroom_core::estimate::Estimate {
    estimate(&decode(link).expect("decodes")).expect("estimates")
}

/// Each pair is two sequences of one forward: a layer saves what SFT's layer saves at twice
/// the micro-batch, and the model's inputs double with it.
#[test]
fn a_pair_is_two_sequences_of_one_forward() {
    let dpo = est(&format!("{BASE}&batch=2&trainer=dpo"));
    let sft = est(&format!("{BASE}&batch=4"));
    assert_eq!(
        dpo.bytes.activations_per_layer,
        sft.bytes.activations_per_layer
    );
    assert!(dpo.bytes.activations_per_layer > 0);
    // Twice SFT's at the pairs' count, but for the attention kernel's RNG state (16 B a layer).
    let half = est(&format!("{BASE}&batch=2"));
    assert_eq!(
        2 * half.bytes.activations_per_layer - sft.bytes.activations_per_layer,
        16
    );
}

/// A full fine-tune holds a frozen reference copy of the weights (TRL loads it in the policy's
/// dtype and shards it as the policy under ZeRO-3 and FSDP); LoRA disables its adapters for the
/// reference instead, and precomputed log-probabilities need no reference model at all.
#[test]
fn the_reference_model_is_a_copy_only_for_a_full_fine_tune() {
    let sft = est(&format!("{BASE}&batch=1"));
    let full = est(&format!("{BASE}&batch=1&trainer=dpo"));
    assert_eq!(full.bytes.weights, 2 * sft.bytes.weights);
    let pre = est(&format!("{BASE}&batch=1&trainer=dpo&ref_precompute=1"));
    assert_eq!(pre.bytes.weights, sft.bytes.weights);
    let lora = est(&format!("{BASE}&batch=1&method=lora&trainer=dpo"));
    let lora_sft = est(&format!("{BASE}&batch=1&method=lora"));
    assert_eq!(lora.bytes.weights, lora_sft.bytes.weights);
    // Sharded with the policy: 8-way FSDP holds an eighth of each copy.
    let fsdp = est(&format!("{BASE}&batch=1&trainer=dpo&gpus=8&dp=fsdp"));
    let fsdp_sft = est(&format!("{BASE}&batch=1&gpus=8&dp=fsdp"));
    assert_eq!(fsdp.bytes.weights, 2 * fsdp_sft.bytes.weights);
    // The reference copy is never updated: the optimizer state is the policy's alone.
    assert_eq!(full.bytes.optimizer_states, sft.bytes.optimizer_states);
}

/// TRL's fused head keeps no logits: at 2 x 1,024 tokens of a 128,256-word vocabulary the
/// SFT step's fp32 logits alone are 1 GiB, the DPO head's tile 256 MiB (4,096 x 32,768 bf16,
/// `trl/kernels/chunked_logprob.py`), so a LoRA DPO step (whose peak is the loss's) at the
/// same sequences peaks lower.
#[test]
fn the_fused_head_keeps_no_logits() {
    let dpo = est(&format!(
        "{BASE}&batch=1&method=lora&trainer=dpo&ref_precompute=1"
    ));
    let sft = est(&format!("{BASE}&batch=2&method=lora"));
    assert!(
        dpo.bytes.peak_allocated < sft.bytes.peak_allocated,
        "{} vs {}",
        dpo.bytes.peak_allocated,
        sft.bytes.peak_allocated
    );
    // What each head keeps to backward, beside the same checkpointed layer inputs: TRL's the
    // hidden states' compact copy (2,048 x 4,096 bf16), the targets (int64) and two fp32
    // vectors per token; transformers' loss its fp32 log_softmax output, the shifted labels
    // and two fp32 scalars.
    let t = 2 * 1024_u64;
    let trl = t * 4096 * 2 + t * 8 + t * 4 * 2;
    let hf = t * 128_256 * 4 + t * 8 + 8;
    assert_eq!(
        sft.bytes.retained_after_forward - dpo.bytes.retained_after_forward,
        hf - trl
    );
}

/// The reference forward costs one more forward of the same sequences, and tokens per step
/// count both sequences of each pair.
#[test]
fn the_reference_forward_is_one_more_forward() {
    let a = analyze(&decode(&format!("{BASE}&batch=1&trainer=dpo")).expect("decodes"))
        .expect("analyzes");
    let pre =
        analyze(&decode(&format!("{BASE}&batch=1&trainer=dpo&ref_precompute=1")).expect("decodes"))
            .expect("analyzes");
    let r = a
        .time
        .term("reference_forward")
        .expect("a reference forward");
    assert!(r.seconds > 0.0 && r.flops > 0.0);
    assert!(pre.time.term("reference_forward").is_none());
    assert!(
        (a.time.step_seconds - pre.time.step_seconds - r.seconds).abs() < 1e-9,
        "{} {} {}",
        a.time.step_seconds,
        pre.time.step_seconds,
        r.seconds
    );
    assert_eq!(a.time.tokens_per_step, 2 * 1024);
}

#[test]
fn dpo_settings_round_trip_and_are_refused_by_name_where_trl_cannot_run_them() {
    let scen = decode(&format!("{BASE}&trainer=dpo&ref_precompute=1")).expect("decodes");
    assert_eq!(decode(&encode(&scen)), Ok(scen));
    assert!(!encode(&decode(BASE).expect("decodes")).contains("trainer"));
    let refused = |link: &str, field: &str| {
        let e = decode(link).expect_err("refused").to_string();
        assert!(e.contains(field), "{e}");
    };
    refused(&format!("{BASE}&trainer=dpo&tp=2&gpus=2"), "trainer");
    refused(&format!("{BASE}&trainer=ppo"), "trainer");
    refused(&format!("{BASE}&ref_precompute=1"), "ref_precompute");
}

/// KTO as TRL 1.16's KTOTrainer runs it (`trainer=kto`): unpaired samples, so a micro-batch of
/// b samples is one forward of b sequences (DPO's is 2b), and the same reference model rules.
#[test]
fn a_kto_sample_is_one_sequence_with_dpos_reference_rules() {
    let kto = est(&format!("{BASE}&batch=4&trainer=kto"));
    let sft = est(&format!("{BASE}&batch=4"));
    let dpo = est(&format!("{BASE}&batch=2&trainer=dpo"));
    assert_eq!(
        kto.bytes.activations_per_layer,
        sft.bytes.activations_per_layer
    );
    assert_eq!(
        kto.bytes.activations_per_layer,
        dpo.bytes.activations_per_layer
    );
    // A full fine-tune's reference copy, none with precomputed log-probabilities or LoRA.
    assert_eq!(kto.bytes.weights, 2 * sft.bytes.weights);
    let pre = est(&format!("{BASE}&batch=4&trainer=kto&ref_precompute=1"));
    assert_eq!(pre.bytes.weights, sft.bytes.weights);
    let lora = est(&format!("{BASE}&batch=4&method=lora&trainer=kto"));
    let lora_sft = est(&format!("{BASE}&batch=4&method=lora"));
    assert_eq!(lora.bytes.weights, lora_sft.bytes.weights);
}

/// KTOTrainer._compute_loss runs three no-grad forwards of the batch's sequences beside the
/// training one: the policy over the mismatched KL completions (`_compute_kl_logps`), then the
/// reference over the KL completions and over the batch. With precomputed reference
/// log-probabilities only the policy's KL pass is left.
#[test]
fn kto_runs_three_no_grad_forwards_or_one_with_precomputed_references() {
    let link = format!("{BASE}&batch=2&trainer=kto");
    let a = analyze(&decode(&link).expect("decodes")).expect("analyzes");
    let pre =
        analyze(&decode(&format!("{link}&ref_precompute=1")).expect("decodes")).expect("analyzes");
    let three = a.time.term("reference_forward").expect("no-grad passes");
    let one = pre.time.term("reference_forward").expect("the KL pass");
    assert!((three.seconds - 3.0 * one.seconds).abs() < 1e-9 * three.seconds);
    assert!((three.flops - 3.0 * one.flops).abs() < 1e-6 * three.flops);
    assert!(
        (a.time.step_seconds - pre.time.step_seconds - 2.0 * one.seconds).abs() < 1e-9,
        "{} {} {}",
        a.time.step_seconds,
        pre.time.step_seconds,
        one.seconds
    );
    // Unpaired: the tokens of a step are the samples' own.
    assert_eq!(a.time.tokens_per_step, 2 * 1024);
}

/// KTOTrainer refuses a per-device batch of 1 when it estimates its KL term (the default
/// loss): its KL completions are the batch's own completions shifted by one.
#[test]
fn kto_needs_two_samples_per_micro_batch() {
    let e = decode(&format!("{BASE}&batch=1&trainer=kto"))
        .expect_err("refused")
        .to_string();
    assert!(e.starts_with("`batch`"), "{e}");
    let scen = decode(&format!("{BASE}&batch=2&trainer=kto&ref_precompute=1")).expect("decodes");
    assert_eq!(decode(&encode(&scen)), Ok(scen));
}

/// TRL's trainers compute their log-probabilities through their own fused head whatever the
/// loss setting, so neither the planner nor the strategy table offers the fused loss for them
/// (it changed no byte, only the time model's loss term).
#[test]
fn trl_trainers_are_not_offered_a_fused_loss() {
    use headroom_core::plan::{PlanOptions, plan};
    use headroom_core::scenario::LossImpl;
    for trainer in ["dpo", "kto", "orpo", "simpo"] {
        let scen = decode(&format!(
            "model=qwen2.5-0.5b&gpu=h200-sxm-141gb&precision=bf16&seq=2048&batch=4&trainer={trainer}"
        ))
        .expect("decodes");
        let p = plan(&scen, &PlanOptions::default()).expect("plans");
        assert!(!p.plans.is_empty());
        assert!(p.plans.iter().all(|pl| pl.scenario.loss == LossImpl::Hf));
        let a = analyze(&scen).expect("analyzes");
        let table = a.strategies.expect("the strategy table");
        assert!(table.iter().all(|s| s.id != "fused_loss"));
    }
    // A supervised step still gets it.
    let sft = decode("model=qwen2.5-0.5b&gpu=h200-sxm-141gb&precision=bf16&seq=2048&batch=4")
        .expect("decodes");
    let table = analyze(&sft)
        .expect("analyzes")
        .strategies
        .expect("the table");
    assert!(table.iter().any(|s| s.id == "fused_loss"));
}

/// ORPO, CPO and SimPO (TRL 1.16's experimental ORPOTrainer and CPOTrainer): a pair is two
/// sequences of one forward as DPO's, but no reference model (neither its weights nor a
/// forward), no KV cache (`use_cache=False`), and the loss reads the full logits.
#[test]
fn orpo_cpo_and_simpo_are_pairs_without_a_reference_and_with_logits() {
    let sft = est(&format!("{BASE}&batch=4"));
    for trainer in ["orpo", "cpo", "simpo"] {
        let link = format!("{BASE}&batch=2&trainer={trainer}");
        let e = est(&link);
        // The layers save what SFT's save at twice the pairs.
        assert_eq!(
            e.bytes.activations_per_layer, sft.bytes.activations_per_layer,
            "{trainer}"
        );
        assert_eq!(e.bytes.weights, sft.bytes.weights, "{trainer}");
        let logits = e
            .components
            .iter()
            .find(|c| c.id == "logits")
            .expect("a logits line");
        // 4 sequences x 1,024 positions x 128,256 words x 2 B.
        assert_eq!(logits.bytes, 4 * 1024 * 128_256 * 2, "{trainer}");
        assert!(
            e.components
                .iter()
                .all(|c| c.id != "kv_cache" || c.bytes == 0),
            "{trainer}"
        );
        let a = analyze(&decode(&link).expect("decodes")).expect("analyzes");
        assert!(a.time.term("reference_forward").is_none(), "{trainer}");
        assert_eq!(
            encode(&decode(&link).expect("decodes")),
            encode(&decode(&link).expect("again"))
        );
    }
    // The same sequences with TRL's fused head (DPO with precomputed references) keep no
    // logits: ORPO's LoRA step (whose peak is the loss's) is the heavier.
    let dpo = est(&format!(
        "{BASE}&batch=2&method=lora&trainer=dpo&ref_precompute=1"
    ));
    let orpo = est(&format!("{BASE}&batch=2&method=lora&trainer=orpo"));
    assert!(orpo.bytes.peak_tensors > dpo.bytes.peak_tensors);
    // precompute_ref_log_probs is DPO's and KTO's: refused by name for ORPO.
    let err = decode(&format!("{BASE}&trainer=orpo&ref_precompute=1"))
        .and_then(|s| s.validate().map(|()| s))
        .expect_err("refused");
    assert!(err.to_string().contains("ref_precompute"), "{err}");
}

/// The frameworks' ORPO and SimPO come in as the trainers TRL runs them with, and go out as
/// their own keys; CPO's sigmoid loss, which axolotl and LLaMA-Factory do not run, is refused
/// for their files by name.
#[test]
fn orpo_and_simpo_import_and_export() {
    use headroom_core::estimate::resolve;
    use headroom_core::export::{Target, export, not_expressed};
    use headroom_core::import::import;
    let none = |_: &str| None;
    let trainer_of = |text: &str, file: &str| {
        let got = import(text, Some(file), &none).unwrap_or_else(|e| panic!("{e}"));
        got.pairs
            .iter()
            .rev()
            .find(|(k, _)| k == "trainer")
            .map(|(_, v)| v.clone())
            .expect("a trainer")
    };
    for rl in ["orpo", "simpo"] {
        let text = format!(
            "base_model: Qwen/Qwen2.5-0.5B\nrl: {rl}\nsequence_len: 1024\nmicro_batch_size: 2\n"
        );
        assert_eq!(trainer_of(&text, "axolotl.yaml"), rl);
    }
    let lf = "model_name_or_path: Qwen/Qwen2.5-0.5B\nstage: dpo\npref_loss: simpo\nfinetuning_type: lora\ncutoff_len: 1024\n";
    assert_eq!(trainer_of(lf, "llamafactory.yaml"), "simpo");
    // TRL's CPOConfig by its own keys; SimPO is its loss_type.
    let simpo = "model_name_or_path: Qwen/Qwen2.5-0.5B\nloss_type: simpo\nsimpo_gamma: 0.5\nmax_length: 1024\n";
    assert_eq!(trainer_of(simpo, "trl.yaml"), "simpo");
    let cpo = "model_name_or_path: Qwen/Qwen2.5-0.5B\ncpo_alpha: 1.0\nmax_length: 1024\n";
    assert_eq!(trainer_of(cpo, "trl.yaml"), "cpo");
    // Out: axolotl's rl, LLaMA-Factory's DPO stage with its pref_loss.
    let scen = decode("model=qwen2.5-0.5b&gpu=h100-sxm-80gb&batch=2&seq=1024&trainer=orpo")
        .expect("decodes");
    let spec = resolve(&scen).expect("resolves").spec;
    let axolotl = export(&spec, &scen, Target::Axolotl).text;
    assert!(axolotl.contains("rl: orpo\n"), "{axolotl}");
    let lf = export(&spec, &scen, Target::LlamaFactory).text;
    assert!(
        lf.contains("stage: dpo\n") && lf.contains("pref_loss: orpo\n"),
        "{lf}"
    );
    let cpo = decode("model=qwen2.5-0.5b&gpu=h100-sxm-80gb&batch=2&seq=1024&trainer=cpo")
        .expect("decodes");
    for target in [Target::Axolotl, Target::LlamaFactory] {
        let why = not_expressed(&cpo, target).expect("refused");
        assert!(why.contains("CPO"), "{why}");
    }
}
