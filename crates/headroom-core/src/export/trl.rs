//! TRL's objectives in `training_args.py`: the config class's own settings beside the
//! Trainer's, the rows each trainer reads, GRPO's and RLOO's reward, the trainer call.
//!
//! From TRL 1.16 (`trainer/base_config.py`, `dpo_config.py`, `kto_config.py`, `grpo_config.py`,
//! `rloo_config.py`, `experimental/orpo`, `experimental/cpo`): every config defaults to bf16
//! autocast and gradient checkpointing, so the script states both; the trainers tokenize their
//! own rows (`processing_class`) and build the reference model themselves (a copy loaded from
//! the policy's path for a full fine-tune, the adapters switched off under LoRA, none with
//! `precompute_ref_log_probs` or GRPO's `beta=0`), as the estimate assumed.

use serde_json::{Value, json};

use crate::scenario::{Generator, Scenario, Trainer};

/// TRL's default completions per prompt (`num_generations`), used where the generation batch
/// divides by it.
const DEFAULT_GENERATIONS: u32 = 8;

/// GRPO's `num_generations`: TRL's default 8 where the generation batch (per-device batch x
/// processes x accumulation, `generation_batch_size`) divides by it, else its largest divisor
/// from 7 down to 2 (TRL refuses a batch that splits a prompt's group, and fewer than 2). `None`
/// when the batch is 1: GRPO cannot run it. The memory does not depend on it: every GPU
/// generates its `micro_batch x grad_accum` completions whatever their grouping.
pub fn num_generations(scen: &Scenario) -> Option<u32> {
    let batch = scen.micro_batch * scen.data_parallel() * scen.grad_accum;
    (2..=DEFAULT_GENERATIONS)
        .rev()
        .find(|n| batch.is_multiple_of(*n))
}

/// The objective's own keyword arguments (after the Trainer's), and the fields of each JSON
/// line it reads.
pub(super) fn config_kwargs(scen: &Scenario) -> Vec<(&'static str, Value)> {
    let mut kw = Vec::new();
    if scen.trainer.generates() {
        let completion = if scen.prompt > 0 {
            scen.seq - scen.prompt
        } else {
            scen.seq
        };
        kw.push(("max_completion_length", json!(completion)));
        if let Some(n) = num_generations(scen) {
            kw.push(("num_generations", json!(n)));
        }
        // A reference model only with a KL term: GRPO's beta 0.04 (DeepSeekMath's), RLOO's own
        // default 0.05; 0 loads none.
        let beta = match (scen.kl, scen.trainer) {
            (false, _) => 0.0,
            (true, Trainer::Rloo) => 0.05,
            (true, _) => 0.04,
        };
        kw.push(("beta", json!(beta)));
        if scen.generator != Generator::Hf {
            kw.push(("use_vllm", json!(true)));
            kw.push(("vllm_mode", json!(scen.generator.id())));
            if scen.vllm_util > 0 && scen.generator == Generator::Colocate {
                kw.push((
                    "vllm_gpu_memory_utilization",
                    json!(f64::from(scen.vllm_util) / 100.0),
                ));
            }
            if scen.vllm_len > 0 {
                kw.push(("vllm_max_model_length", json!(scen.vllm_len)));
            }
            if scen.vllm_sleep {
                kw.push(("vllm_enable_sleep_mode", json!(true)));
            }
        }
    } else {
        // Prompt and completion together, each of chosen and rejected.
        kw.push(("max_length", json!(scen.seq)));
        if scen.trainer.preference() && scen.ref_precompute {
            kw.push(("precompute_ref_log_probs", json!(true)));
        }
        if scen.trainer == Trainer::Simpo {
            kw.push(("loss_type", json!("simpo")));
        }
    }
    kw
}

/// The keyword arguments of a TRL objective's config: the Trainer's, with bf16 and
/// checkpointing stated where they are off (TRL's configs turn both on by default), then the
/// objective's own ([`config_kwargs`]).
pub(super) fn trl_kwargs(
    mut kw: Vec<(&'static str, Value)>,
    scen: &Scenario,
) -> Vec<(&'static str, Value)> {
    let has = |kw: &[(&str, Value)], k: &str| kw.iter().any(|(name, _)| *name == k);
    if !has(&kw, "bf16") && !has(&kw, "fp16") {
        kw.push(("bf16", json!(false)));
    }
    if !has(&kw, "activation_checkpointing") {
        kw.push(("activation_checkpointing", json!(false)));
    }
    kw.extend(config_kwargs(scen));
    kw
}

/// The fields of one JSON line, as TRL's docs name the dataset formats: a preference pair, an
/// unpaired preference, or a prompt alone.
fn row_fields(trainer: Trainer) -> &'static str {
    if trainer.generates() {
        "{\"prompt\": ...}"
    } else if trainer == Trainer::Kto {
        "{\"prompt\": ..., \"completion\": ..., \"label\": true or false}"
    } else {
        "{\"prompt\": ..., \"chosen\": ..., \"rejected\": ...}"
    }
}

/// The header's line on what to fill in.
pub(super) fn fill_in_line(scen: &Scenario) -> String {
    let reward = if scen.trainer.generates() {
        ", and the reward function (reward below)"
    } else {
        ""
    };
    format!(
        "# What to fill in: your data (HEADROOM_DATA, JSON lines of {}){reward}.\n",
        row_fields(scen.trainer)
    )
}

/// TRL's imports for the objective: its config and trainer classes.
pub(super) fn imports(scen: &Scenario) -> String {
    let (module, stem) = scen.trainer.trl_class();
    format!(
        "from transformers import AutoTokenizer\nfrom {module} import {stem}Config, {stem}Trainer\n"
    )
}

/// The rows, the reward where the trainer generates, and the trainer's construction and run.
pub(super) fn run_code(scen: &Scenario, trainer_class: &str) -> String {
    let stem = scen.trainer.trl_class().1;
    // TRL 1.16 cuts a pair or an unpaired row to max_length; GRPO's and RLOO's prompts it does
    // not cut (their generation caps only the completion).
    let lengths = if scen.trainer.generates() {
        format!(
            "{stem}Trainer generates up to max_completion_length tokens per prompt; it does not cut\n# prompts: ones longer than the plan's {} tokens make a larger step than estimated.",
            if scen.prompt > 0 {
                scen.prompt
            } else {
                scen.seq
            }
        )
    } else {
        format!(
            "{stem}Trainer tokenizes them and cuts each to max_length\n# (shorter rows use less memory than estimated)."
        )
    };
    let mut t = format!(
        "\n# Your data: a JSON-lines file of {} records; {lengths}\nDATA = os.environ.get(\"HEADROOM_DATA\", \"train.jsonl\")\n\n\ndef train_dataset():\n    from datasets import load_dataset\n\n    return load_dataset(\"json\", data_files=DATA, split=\"train\")\n\n",
        row_fields(scen.trainer),
    );
    let reward = if scen.trainer.generates() {
        t.push_str("\n# Your reward: one float per completion (TRL passes the prompts, the completions and the\n# dataset's other columns). This one, a placeholder to replace, prefers completions of about 200\n# characters; the memory and time estimates do not depend on it.\ndef reward(prompts, completions, **kwargs):\n    return [-abs(len(c) - 200) / 200 for c in completions]\n\n");
        ", reward_funcs=reward"
    } else {
        ""
    };
    t.push_str(&format!(
        "\ntokenizer = AutoTokenizer.from_pretrained(MODEL)\nif tokenizer.pad_token is None:\n    tokenizer.pad_token = tokenizer.eos_token\ntrainer = {trainer_class}(model=model, args=args, train_dataset=train_dataset(), processing_class=tokenizer{reward})\ntrainer.train()\n"
    ));
    t
}
