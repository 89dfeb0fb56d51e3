//! Hugging Face `TrainingArguments`: the keyword arguments and the Python file that passes
//! them.

use serde_json::{Value, json};

use crate::model::ModelSpec;
use crate::scenario::{
    Attention, Checkpointing, DataParallel, LossImpl, Offload, Optimizer, Precision, Scenario,
};

use super::Target;
use super::common::{comment_lines, common_notes, py, summary};
use super::deepspeed::{
    DS_ADAMW_BETAS, DS_ADAMW_EPS, DS_ADAMW_LR, DS_ADAMW_WEIGHT_DECAY, ds_adamw_block,
};
use super::names::layer_class;

/// transformers' `optim` name (`OptimizerNames`) and a note when the scenario's optimizer has
/// none or needs more than the name.
fn optim_name(o: Optimizer) -> (&'static str, Option<&'static str>) {
    match o {
        Optimizer::AdamW => ("adamw_torch", None),
        Optimizer::AdamWForLoop => (
            "adamw_torch",
            Some(
                "the for-loop AdamW has no optim name: pass torch.optim.AdamW(..., foreach=False) through Trainer(optimizers=...)",
            ),
        ),
        Optimizer::AdamWFused => ("adamw_torch_fused", None),
        Optimizer::AdamW8bit => ("adamw_bnb_8bit", None),
        Optimizer::PagedAdamW8bit => ("paged_adamw_8bit", None),
        Optimizer::Lion => ("lion_32bit", None),
        Optimizer::Adafactor => ("adafactor", None),
        Optimizer::Sgd => ("sgd", None),
        Optimizer::SgdMomentum => (
            "sgd",
            Some(
                "SGD with momentum: pass torch.optim.SGD(..., momentum=0.9) through Trainer(optimizers=...)",
            ),
        ),
        Optimizer::AdamMini => (
            "adamw_torch",
            Some(
                "Adam-mini has no optim name in transformers: pass adam_mini.Adam_mini(...) through Trainer(optimizers=...)",
            ),
        ),
    }
}

/// `TrainingArguments` keyword arguments (name, value) and the notes they cannot carry.
pub fn trainer_kwargs(
    spec: &ModelSpec,
    scen: &Scenario,
) -> (Vec<(&'static str, Value)>, Vec<String>) {
    let mut notes = common_notes(scen);
    let mut kw: Vec<(&'static str, Value)> = vec![
        ("output_dir", json!("out")),
        ("per_device_train_batch_size", json!(scen.micro_batch)),
        ("gradient_accumulation_steps", json!(scen.grad_accum)),
        ("max_grad_norm", json!(1.0)),
    ];
    match scen.precision {
        Precision::AmpBf16 | Precision::Bf16 => kw.push(("bf16", json!(true))),
        Precision::AmpFp16 | Precision::Fp16 => kw.push(("fp16", json!(true))),
        Precision::Fp32 => {}
    }
    let (optim, note) = optim_name(scen.optimizer);
    kw.push(("optim", json!(optim)));
    notes.extend(note.map(String::from));
    let fsdp = scen.parallel.data == DataParallel::Fsdp;
    // transformers 5.23 names it `activation_checkpointing` (`gradient_checkpointing` is its
    // deprecated alias); `every_n_layers` checkpoints one layer in k.
    match scen.checkpointing {
        // With FSDP, FSDP's own checkpointing (fsdp_config) avoids a redundant all-gather in
        // backward (transformers warns about the training argument there).
        Checkpointing::Full if fsdp => {}
        Checkpointing::Full => {
            kw.push(("activation_checkpointing", json!(true)));
            kw.push((
                "activation_checkpointing_kwargs",
                json!({"use_reentrant": false}),
            ));
        }
        Checkpointing::Every(k) => {
            kw.push(("activation_checkpointing", json!(true)));
            kw.push((
                "activation_checkpointing_kwargs",
                json!({"every_n_layers": k, "use_reentrant": false}),
            ));
        }
        Checkpointing::None | Checkpointing::Selective => {}
    }
    if scen.loss == LossImpl::Fused {
        kw.push(("use_liger_kernel", json!(true)));
    }
    match scen.parallel.data {
        DataParallel::Ddp => {}
        DataParallel::Fsdp => {
            let offload = scen.parallel.offload_params != Offload::None
                || scen.parallel.offload_optimizer != Offload::None;
            kw.push(("fsdp", json!(true)));
            kw.push((
                "fsdp_config",
                json!({
                    "version": if scen.parallel.fsdp1 { 1 } else { 2 },
                    "auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
                    "transformer_layer_cls_to_wrap": [layer_class(spec)],
                    "reshard_after_forward": true,
                    "cpu_offload": offload,
                    "activation_checkpointing": scen.checkpointing == Checkpointing::Full,
                    // Rank 0 alone reads the checkpoint; the others build on the meta device
                    // and receive their shards (transformers' is_fsdp_enabled path).
                    "cpu_ram_efficient_loading": true,
                }),
            ));
        }
        _ => {
            kw.push(("deepspeed", json!(Target::DeepSpeed.file_name())));
            if ds_adamw_block(scen) {
                // ds_config.json's AdamW block: transformers checks these against it.
                kw.push(("learning_rate", json!(DS_ADAMW_LR)));
                kw.push(("adam_beta1", json!(DS_ADAMW_BETAS[0])));
                kw.push(("adam_beta2", json!(DS_ADAMW_BETAS[1])));
                kw.push(("adam_epsilon", json!(DS_ADAMW_EPS)));
                kw.push(("weight_decay", json!(DS_ADAMW_WEIGHT_DECAY)));
                notes.push("optimizer: ds_config.json's AdamW steps the offloaded states (optim is not used); learning_rate, adam_beta1/adam_beta2, adam_epsilon and weight_decay repeat its placeholders: change both together (transformers rejects a mismatch)".into());
            }
        }
    }
    if fsdp && scen.parallel.offload_optimizer != scen.parallel.offload_params {
        notes.push("FSDP2 offloads parameters, gradients and optimizer states together (CPUOffloadPolicy); optimizer-only offload needs DeepSpeed ZeRO".into());
    }
    if scen.offload_activations {
        notes.push("activation offload: training_args.py's OffloadingTrainer runs compute_loss inside torch.autograd.graph.save_on_cpu(pin_memory=True)".into());
    }
    if scen.attention != Attention::Sdpa {
        notes.push(format!(
            "attention: from_pretrained(..., attn_implementation=\"{}\")",
            scen.attention.hf_name()
        ));
    }
    (kw, notes)
}

pub(super) fn trainer_text(spec: &ModelSpec, scen: &Scenario) -> (String, Vec<String>) {
    let (kw, notes) = trainer_kwargs(spec, scen);
    let sft = scen.trainer == crate::scenario::Trainer::Sft;
    let (module, stem) = scen.trainer.trl_class();
    let mut t = format!("# Headroom plan: {}\n", summary(scen));
    t.push_str(&format!("# {}\n", super::checked_with_line()));
    if sft {
        t.push_str(
            "# Your data is the one thing to fill in: HEADROOM_DATA (train_dataset below).\n",
        );
    } else {
        t.push_str(&format!(
            "# Trains with TRL {}'s {module}.{stem}Trainer (the reference suite trains this script two steps on CPU, tiny model).\n",
            super::versions::TRL_VERSION
        ));
        t.push_str(&super::trl::fill_in_line(scen));
    }
    t.push_str(&format!(
        "# Dry run, no GPU and no weights: HEADROOM_DRY_RUN=path/to/config.json python {} (builds the model on the\n# meta device, applies LoRA, prints a JSON report and exits).\n",
        Target::Trainer.file_name()
    ));
    t.push_str(&comment_lines(&notes, "# "));
    t.push_str(super::common::script_imports(scen));
    t.push_str(&if sft {
        "from transformers import AutoTokenizer, DataCollatorForLanguageModeling, Trainer, TrainingArguments\n".to_string()
    } else {
        super::trl::imports(scen)
    });
    t.push_str(&super::model::imports(scen));
    t.push_str(&format!(
        "\nMODEL = \"{}\"\n",
        super::names::model_path(scen)
    ));
    // The Trainer's activation_checkpointing argument (or FSDP's own) turns checkpointing on.
    t.push_str(&super::model::build_model_code(scen, false));
    t.push_str(super::model::report_code());
    t.push_str("\n\nif DRY_RUN:\n    print(json.dumps(model_report(build_model(on_meta=True))))\n    raise SystemExit(0)\n\n");
    let (config, kw) = if sft {
        ("TrainingArguments".to_string(), kw)
    } else {
        (format!("{stem}Config"), super::trl::trl_kwargs(kw, scen))
    };
    t.push_str(&format!("args = {config}(\n"));
    for (k, v) in &kw {
        t.push_str(&format!("    {k}={},\n", py(v)));
    }
    t.push_str(")\n");
    t.push_str("# After TrainingArguments: under ZeRO-3 transformers then builds the model already partitioned.\nmodel = build_model()\n");
    let collator = if scen.packing {
        t.push_str(&super::common::packing_code(scen));
        "data_collator"
    } else {
        // Padded to the longest row of each micro-batch; labels are the inputs, padding left
        // out of the loss.
        "DataCollatorForLanguageModeling(tokenizer, mlm=False)"
    };
    let base = if sft {
        "Trainer".to_string()
    } else {
        format!("{stem}Trainer")
    };
    let trainer_class = if scen.offload_activations {
        t.push_str(&format!("\n\nclass OffloadingTrainer({base}):\n    \"\"\"Saved activations go to pinned host memory during the forward (save_on_cpu), as estimated.\"\"\"\n\n    def compute_loss(self, model, inputs, *a, **kw):\n        with torch.autograd.graph.save_on_cpu(pin_memory=True):\n            return super().compute_loss(model, inputs, *a, **kw)\n\n"));
        "OffloadingTrainer".to_string()
    } else {
        base
    };
    if sft {
        t.push_str(&data_code(scen.seq));
        t.push_str(&format!(
            "\ntokenizer = AutoTokenizer.from_pretrained(MODEL)\nif tokenizer.pad_token is None:\n    tokenizer.pad_token = tokenizer.eos_token\ntrainer = {trainer_class}(model=model, args=args, train_dataset=train_dataset(tokenizer), data_collator={collator})\ntrainer.train()\n"
        ));
    } else {
        t.push_str(&super::trl::run_code(scen, &trainer_class));
    }
    (t, notes)
}

/// The script's data: a JSON-lines file of `{"text": ...}` records (`HEADROOM_DATA`), tokenized
/// and cut to the plan's sequence length. Rows shorter than it make smaller steps than the
/// estimate, which assumed every row full.
fn data_code(seq: u32) -> String {
    format!(
        "\n# Your data: a JSON-lines file of {{\"text\": ...}} records, each cut to the plan's {seq} tokens (shorter rows\n# use less memory than estimated). Replace train_dataset for another source.\nDATA = os.environ.get(\"HEADROOM_DATA\", \"train.jsonl\")\nSEQ = {seq}\n\n\ndef train_dataset(tokenizer):\n    from datasets import load_dataset\n\n    rows = load_dataset(\"json\", data_files=DATA, split=\"train\")\n    return rows.map(lambda b: tokenizer(b[\"text\"], truncation=True, max_length=SEQ),\n                    batched=True, remove_columns=rows.column_names)\n\n"
    )
}
