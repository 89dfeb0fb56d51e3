//! Ready-to-run configuration (issue 6, item 4), checked against the tools' documentation:
//! the DeepSpeed JSON uses only keys of DeepSpeed's configuration page and its batch identity,
//! the TrainingArguments use only fields and `optim` names of transformers 5.23 (the Python
//! reference suite, tests/reference/test_export.py, checks them against the installed
//! package too), and each worked example's best plan exports what the plan says.

use headroom_core::codec::named_scenarios;
use headroom_core::estimate::resolve;
use headroom_core::export::{
    CHECKED_WITH, Target, deepspeed_config, export, export_all, not_expressed, offered,
    trainer_kwargs,
};
use headroom_core::plan::{PlanOptions, plan};
use headroom_core::scenario::{Checkpointing, DataParallel, Offload, Precision};
use headroom_core::{Scenario, ScenarioError};
use serde_json::Value;

/// Top-level keys documented at https://www.deepspeed.ai/docs/config-json/ ("Batch Size
/// Related Parameters", "Optimizer Parameters", "FP16/BFLOAT16 training options", "Gradient
/// Clipping", "ZeRO Optimizations for FP16 Training", "Logging").
const DS_TOP: &[&str] = &[
    "train_batch_size",
    "train_micro_batch_size_per_gpu",
    "gradient_accumulation_steps",
    "optimizer",
    "scheduler",
    "fp16",
    "bf16",
    "gradient_clipping",
    "zero_optimization",
    "zero_allow_untested_optimizer",
    "zero_force_ds_cpu_optimizer",
    "steps_per_print",
    "wall_clock_breakdown",
    "activation_checkpointing",
];
/// `zero_optimization` keys from the same page.
const DS_ZERO: &[&str] = &[
    "stage",
    "allgather_partitions",
    "allgather_bucket_size",
    "overlap_comm",
    "reduce_scatter",
    "reduce_bucket_size",
    "contiguous_gradients",
    "offload_param",
    "offload_optimizer",
    "stage3_max_live_parameters",
    "stage3_max_reuse_distance",
    "stage3_prefetch_bucket_size",
    "stage3_param_persistence_threshold",
    "sub_group_size",
    "stage3_gather_16bit_weights_on_model_save",
];
/// `offload_optimizer` / `offload_param` keys ("device": cpu | nvme | none).
const DS_OFFLOAD: &[&str] = &[
    "device",
    "nvme_path",
    "pin_memory",
    "buffer_count",
    "buffer_size",
    "max_in_cpu",
    "ratio",
    "fast_init",
];
/// `fp16` keys (dynamic loss scaling when `loss_scale` is 0).
const DS_FP16: &[&str] = &[
    "enabled",
    "auto_cast",
    "loss_scale",
    "initial_scale_power",
    "loss_scale_window",
    "hysteresis",
    "consecutive_hysteresis",
    "min_loss_scale",
];

/// `dataclasses.fields(transformers.TrainingArguments)` of transformers 5.23 that exports may
/// use (a subset; tests/reference/test_export.py compares with the installed package).
const TRAINING_ARGUMENTS: &[&str] = &[
    "output_dir",
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "max_grad_norm",
    "bf16",
    "fp16",
    "optim",
    "activation_checkpointing",
    "activation_checkpointing_kwargs",
    "use_liger_kernel",
    "fsdp",
    "fsdp_config",
    "deepspeed",
    "learning_rate",
    "adam_beta1",
    "adam_beta2",
    "adam_epsilon",
    "weight_decay",
];
/// transformers 5.23 `OptimizerNames` values the exports use.
const OPTIM_NAMES: &[&str] = &[
    "adamw_torch",
    "adamw_torch_fused",
    "adamw_bnb_8bit",
    "paged_adamw_8bit",
    "lion_32bit",
    "adafactor",
    "sgd",
];

fn keys_within(v: &Value, allowed: &[&str], what: &str) {
    let Some(m) = v.as_object() else {
        panic!("{what} is not an object: {v}");
    };
    for k in m.keys() {
        assert!(
            allowed.contains(&k.as_str()),
            "{what}: undocumented key `{k}`"
        );
    }
}

fn check_deepspeed(id: &str, s: &Scenario) {
    let (v, notes) = deepspeed_config(s);
    keys_within(&v, DS_TOP, id);
    let zero = &v["zero_optimization"];
    keys_within(zero, DS_ZERO, id);
    for off in ["offload_optimizer", "offload_param"] {
        if let Some(o) = zero.get(off) {
            keys_within(o, DS_OFFLOAD, id);
            assert!(matches!(o["device"].as_str(), Some("cpu" | "nvme")), "{id}");
        }
    }
    if let Some(f) = v.get("fp16") {
        keys_within(f, DS_FP16, id);
    }
    // DeepSpeed's documented identity: train_batch_size = train_micro_batch_size_per_gpu x
    // gradient_accumulation_steps x number of (data-parallel) GPUs.
    let tb = v["train_batch_size"].as_u64().unwrap_or(0);
    let mb = v["train_micro_batch_size_per_gpu"].as_u64().unwrap_or(0);
    let ga = v["gradient_accumulation_steps"].as_u64().unwrap_or(0);
    assert_eq!(tb, mb * ga * s.data_parallel() as u64, "{id}");
    assert_eq!(
        (mb, ga),
        (s.micro_batch as u64, s.grad_accum as u64),
        "{id}"
    );
    let stage = zero["stage"].as_u64().unwrap_or(99);
    let want = match s.parallel.data {
        DataParallel::Ddp => 0,
        DataParallel::Zero1 => 1,
        DataParallel::Zero2 => 2,
        DataParallel::Zero3 | DataParallel::Fsdp => 3,
    };
    assert_eq!(stage, want, "{id}");
    assert_eq!(
        zero.get("offload_optimizer").is_some(),
        s.parallel.offload_optimizer != Offload::None && stage > 0,
        "{id}"
    );
    assert_eq!(
        zero.get("offload_param").is_some(),
        s.parallel.offload_params != Offload::None && stage == 3,
        "{id}"
    );
    let bf16 = v
        .get("bf16")
        .is_some_and(|b| b["enabled"] == Value::Bool(true));
    let fp16 = v
        .get("fp16")
        .is_some_and(|b| b["enabled"] == Value::Bool(true));
    assert_eq!(
        bf16,
        matches!(s.precision, Precision::AmpBf16 | Precision::Bf16),
        "{id}"
    );
    assert_eq!(
        fp16,
        matches!(s.precision, Precision::AmpFp16 | Precision::Fp16),
        "{id}"
    );
    if s.parallel.tensor > 1 {
        assert!(
            notes.iter().any(|n| n.contains("tensor parallelism")),
            "{id}"
        );
    }
}

fn check_trainer(id: &str, s: &Scenario) {
    let r = resolve(s).unwrap_or_else(|e| panic!("{id}: {e}"));
    let (kw, notes) = trainer_kwargs(&r.spec, s);
    for (k, _) in &kw {
        assert!(
            TRAINING_ARGUMENTS.contains(k),
            "{id}: `{k}` is no TrainingArguments field"
        );
    }
    let get = |k: &str| kw.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone());
    assert_eq!(
        get("per_device_train_batch_size"),
        Some(Value::from(s.micro_batch))
    );
    assert_eq!(
        get("gradient_accumulation_steps"),
        Some(Value::from(s.grad_accum))
    );
    let optim = get("optim").and_then(|v| v.as_str().map(String::from));
    assert!(
        optim.as_deref().is_some_and(|o| OPTIM_NAMES.contains(&o)),
        "{id}: optim {optim:?}"
    );
    match s.checkpointing {
        Checkpointing::Full if s.parallel.data == DataParallel::Fsdp => {
            assert_eq!(
                get("fsdp_config").map(|c| c["activation_checkpointing"].clone()),
                Some(Value::Bool(true))
            );
        }
        Checkpointing::Full => assert_eq!(get("activation_checkpointing"), Some(Value::Bool(true))),
        Checkpointing::Every(k) => assert_eq!(
            get("activation_checkpointing_kwargs").map(|c| c["every_n_layers"].clone()),
            Some(Value::from(k))
        ),
        Checkpointing::Selective => {
            assert!(notes.iter().any(|n| n.contains("selective")), "{id}")
        }
        Checkpointing::None => assert_eq!(get("activation_checkpointing"), None),
    }
    match s.parallel.data {
        DataParallel::Ddp => assert!(get("deepspeed").is_none() && get("fsdp").is_none()),
        DataParallel::Fsdp => assert_eq!(get("fsdp"), Some(Value::Bool(true))),
        _ => {
            assert_eq!(get("deepspeed"), Some(Value::from("ds_config.json")));
            // transformers checks ds_config.json's optimizer params against these arguments
            // (HfTrainerDeepSpeedConfig.trainer_config_process) and Trainer raises on a
            // mismatch; without the block, the arguments keep transformers' defaults.
            let (ds, _) = deepspeed_config(s);
            let p = &ds["optimizer"]["params"];
            let expect = |v: &Value| (!p.is_null()).then(|| v.clone());
            assert_eq!(get("learning_rate"), expect(&p["lr"]), "{id}");
            assert_eq!(get("adam_beta1"), expect(&p["betas"][0]), "{id}");
            assert_eq!(get("adam_beta2"), expect(&p["betas"][1]), "{id}");
            assert_eq!(get("adam_epsilon"), expect(&p["eps"]), "{id}");
            assert_eq!(get("weight_decay"), expect(&p["weight_decay"]), "{id}");
        }
    }
    if s.parallel.tensor > 1 {
        assert!(
            notes.iter().any(|n| n.contains("tensor parallelism")),
            "{id}"
        );
    }
}

#[test]
fn worked_examples_best_plans_export_what_the_plan_says() {
    let mut checked = 0;
    for n in named_scenarios()
        .into_iter()
        .filter(|n| n.id.starts_with("ex"))
    {
        let p =
            plan(&n.scenario, &PlanOptions::default()).unwrap_or_else(|e| panic!("{}: {e}", n.id));
        for pl in p.plans.iter().take(3).chain(std::iter::once(&p.input)) {
            check_deepspeed(&n.id, &pl.scenario);
            check_trainer(&n.id, &pl.scenario);
            let r = resolve(&pl.scenario).unwrap_or_else(|e| panic!("{e}"));
            let all = export_all(&r.spec, &pl.scenario);
            assert_eq!(all.len(), Target::ALL.len());
            for e in &all {
                assert!(!e.text.trim().is_empty(), "{}: {:?}", n.id, e.target);
            }
            let text = |t: Target| {
                all.iter()
                    .find(|e| e.target == t)
                    .map(|e| e.text.clone())
                    .unwrap_or_default()
            };
            let nodes = pl.scenario.gpus.div_ceil(8).max(1);
            assert!(
                text(Target::Torchrun).contains(&format!(
                    "--nproc_per_node={} --nnodes={nodes}",
                    pl.scenario.gpus / nodes
                )),
                "{}",
                n.id
            );
            assert_eq!(
                text(Target::Env).contains("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"),
                pl.scenario.runtime.expandable_segments,
                "{}",
                n.id
            );
            let f = text(Target::Fsdp2);
            // The FSDP2 script is offered for DDP and FSDP2 plans only (a ZeRO plan is
            // DeepSpeed's), and it asserts the plan's batch against the world size.
            let fsdp2 = offered(&pl.scenario).contains(&Target::Fsdp2);
            if fsdp2 {
                assert!(
                    f.contains(&format!("GLOBAL_BATCH = {}", pl.scenario.global_batch())),
                    "{}",
                    n.id
                );
            }
            if fsdp2 && pl.scenario.parallel.data == DataParallel::Fsdp {
                assert!(f.contains("fully_shard(layer"), "{}", n.id);
                assert_eq!(
                    f.contains("CPUOffloadPolicy(pin_memory=True)"),
                    pl.scenario.parallel.offload_params != Offload::None
                        || pl.scenario.parallel.offload_optimizer != Offload::None,
                    "{}",
                    n.id
                );
            }
            let a = text(Target::Accelerate);
            assert!(
                a.contains(&format!("num_processes: {}", pl.scenario.gpus)),
                "{}",
                n.id
            );
            checked += 1;
        }
    }
    assert!(checked >= 40, "{checked}");
}

#[test]
fn deepspeed_json_is_json_and_offload_is_pinned() {
    let s = Scenario {
        gpus: 4,
        grad_accum: 8,
        parallel: headroom_core::scenario::Parallel {
            data: DataParallel::Zero3,
            offload_optimizer: Offload::Cpu,
            offload_params: Offload::Cpu,
            ..Scenario::default().parallel
        },
        ..Scenario::default()
    };
    let r = resolve(&s).unwrap_or_else(|e| panic!("{e}"));
    let e = export(&r.spec, &s, Target::DeepSpeed);
    let v: Value = serde_json::from_str(&e.text).unwrap_or_else(|e| panic!("not JSON: {e}"));
    assert_eq!(v["train_batch_size"], Value::from(32u64));
    assert_eq!(
        v["zero_optimization"]["offload_param"]["pin_memory"],
        Value::Bool(true)
    );
    assert_eq!(
        v["zero_optimization"]["offload_optimizer"]["device"],
        Value::from("cpu")
    );
    // Offloaded AdamW runs on DeepSpeed's CPU Adam (the `optimizer` block), whose params the
    // TrainingArguments repeat (transformers rejects a mismatch).
    assert_eq!(v["optimizer"]["type"], Value::from("AdamW"));
    let (kw, _) = trainer_kwargs(&r.spec, &s);
    let get = |k: &str| kw.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone());
    let p = &v["optimizer"]["params"];
    assert_eq!(get("learning_rate"), Some(p["lr"].clone()));
    assert_eq!(get("adam_beta2"), Some(p["betas"][1].clone()));
    assert_eq!(get("weight_decay"), Some(p["weight_decay"].clone()));
}

#[test]
fn unknown_export_target_names_the_field() {
    match Target::parse("export", "megatron") {
        Err(ScenarioError::Invalid { field, message }) => {
            assert_eq!(field, "export");
            assert!(message.contains(
                "deepspeed, trainer, accelerate, fsdp2, torchrun, axolotl, llamafactory, torchtitan, env"
            ));
        }
        other => panic!("{other:?}"),
    }
    for t in Target::ALL {
        assert_eq!(Target::parse("export", t.id()).ok(), Some(t));
    }
}

/// A forced SDPA kernel is what the estimate assumed, so the FSDP2 script leaves PyTorch only
/// that kernel (its global `torch.backends.cuda.enable_*_sdp` switches) and the other targets
/// say so; the automatic choice writes nothing. DeepSpeed's bf16 master/state options reach
/// its config.
#[test]
fn a_forced_sdpa_kernel_and_deepspeed_bf16_states_are_exported() {
    use headroom_core::scenario::SdpaKernel;
    let forced = Scenario {
        sdpa: SdpaKernel::Efficient,
        ..Scenario::default()
    };
    let r = resolve(&forced).unwrap_or_else(|e| panic!("{e}"));
    let script = export(&r.spec, &forced, Target::Fsdp2).text;
    assert!(script.contains("torch.backends.cuda.enable_mem_efficient_sdp(True)"));
    assert!(script.contains("torch.backends.cuda.enable_flash_sdp(False)"));
    let trainer = export(&r.spec, &forced, Target::Trainer).text;
    assert!(
        trainer.contains("enable_mem_efficient_sdp(True)"),
        "{trainer}"
    );
    let auto = export(&r.spec, &Scenario::default(), Target::Fsdp2).text;
    assert!(!auto.contains("enable_flash_sdp"));

    let ds = Scenario {
        gpus: 8,
        precision: Precision::Bf16,
        parallel: headroom_core::scenario::Parallel {
            data: DataParallel::Zero2,
            ds_bf16_states: true,
            ..Scenario::default().parallel
        },
        ..Scenario::default()
    };
    let v: Value = serde_json::from_str(&export(&r.spec, &ds, Target::DeepSpeed).text)
        .unwrap_or_else(|e| panic!("not JSON: {e}"));
    assert_eq!(
        v["bf16"]["bf16_master_weights_and_grads"],
        Value::Bool(true)
    );
    assert_eq!(v["bf16"]["bf16_optimizer_states"], Value::Bool(true));
}

#[track_caller]
fn check_offered(parallel: headroom_core::scenario::Parallel, want: &[Target]) {
    let s = Scenario {
        gpus: 8,
        parallel,
        ..Scenario::default()
    };
    assert_eq!(offered(&s), want, "{parallel:?}");
    for t in Target::ALL {
        assert_eq!(not_expressed(&s, t).is_none(), want.contains(&t), "{t:?}");
    }
}

/// A plan a target cannot express is not offered for it (issue 16 §1): tensor parallelism in
/// no HF target, DeepSpeed only for ZeRO, the FSDP2 script only for DDP and FSDP2 with offload
/// all-or-nothing to the CPU (CPUOffloadPolicy), parameter offload only at ZeRO-3.
#[test]
fn targets_are_offered_only_for_plans_they_express() {
    use Target::*;
    let base = Scenario::default().parallel;
    let with = |data, opt, par| headroom_core::scenario::Parallel {
        data,
        offload_optimizer: opt,
        offload_params: par,
        ..base
    };
    let (n, c, v) = (Offload::None, Offload::Cpu, Offload::Nvme);
    // A full fine-tune with fp32 master weights: LLaMA-Factory upcasts its trainable weights
    // itself; axolotl loads them in bf16 and gets fp32 masters only from DeepSpeed.
    check_offered(
        with(DataParallel::Ddp, n, n),
        &[Trainer, Accelerate, Fsdp2, Torchrun, LlamaFactory, Env],
    );
    // Every target but the FSDP2 script writes a ZeRO plan.
    let zero = [
        DeepSpeed,
        Trainer,
        Accelerate,
        Torchrun,
        Axolotl,
        LlamaFactory,
        Env,
    ];
    check_offered(with(DataParallel::Zero2, c, n), &zero);
    check_offered(with(DataParallel::Zero3, v, v), &zero);
    check_offered(
        with(DataParallel::Fsdp, c, c),
        &[Trainer, Accelerate, Fsdp2, Torchrun, Env],
    );
    check_offered(with(DataParallel::Fsdp, c, n), &[Env]);
    check_offered(with(DataParallel::Fsdp, v, v), &[Env]);
    check_offered(
        headroom_core::scenario::Parallel {
            tensor: 4,
            data: DataParallel::Zero1,
            ..base
        },
        &[Env],
    );
}

/// Every export names the library versions the reference suite ran it with.
#[test]
fn every_export_names_the_versions_it_was_checked_with() {
    let s = Scenario {
        gpus: 4,
        parallel: headroom_core::scenario::Parallel {
            data: DataParallel::Zero2,
            ..Scenario::default().parallel
        },
        ..Scenario::default()
    };
    let r = resolve(&s).unwrap_or_else(|e| panic!("{e}"));
    for e in export_all(&r.spec, &s) {
        // The frameworks' YAML is checked by reading it back (tests/import.rs), not run by
        // the reference suite: each names the framework version its keys are from.
        if let Some(framework) = match e.target {
            Target::Axolotl => Some("axolotl 0.21"),
            Target::LlamaFactory => Some("LLaMA-Factory 0.9.5"),
            _ => None,
        } {
            assert!(e.text.contains(framework), "{:?}", e.target);
            assert!(
                e.text.contains("not run by the reference suite"),
                "{:?}",
                e.target
            );
            continue;
        }
        // torchtitan's module runs no transformers: it names torchtitan and torch.
        if e.target == Target::Torchtitan {
            assert!(
                e.text.contains("torchtitan 0.3.0") && e.text.contains("torch 2.15.0"),
                "{}",
                e.text
            );
            continue;
        }
        let said = if e.target == Target::DeepSpeed {
            e.notes.join("\n")
        } else {
            e.text.clone()
        };
        for (p, v) in CHECKED_WITH {
            assert!(
                said.contains(&format!("{p} {v}")),
                "{:?} lacks {p} {v}",
                e.target
            );
        }
    }
}

#[test]
fn expandable_segments_reach_every_file_that_runs_the_plan() {
    // The allocator reads PYTORCH_CUDA_ALLOC_CONF once, at its first allocation: the scripts
    // set it before importing torch; accelerate's YAML has no field, so it says where it goes.
    let mut expandable = Scenario::default();
    expandable.runtime.expandable_segments = true;
    let r = resolve(&expandable).unwrap_or_else(|e| panic!("{e}"));
    let line = "os.environ.setdefault(\"PYTORCH_CUDA_ALLOC_CONF\", \"expandable_segments:True\")";
    for target in [Target::Trainer, Target::Fsdp2] {
        let text = export(&r.spec, &expandable, target).text;
        let (at, torch) = (text.find(line), text.find("import torch\n"));
        assert!(at.is_some() && at < torch, "{target:?}: {text}");
        let plain = export(&r.spec, &Scenario::default(), target).text;
        assert!(!plain.contains("PYTORCH_CUDA_ALLOC_CONF"), "{target:?}");
    }
    let yaml = export(&r.spec, &expandable, Target::Accelerate).text;
    assert!(
        yaml.contains("# PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"),
        "{yaml}"
    );
    for target in [Target::Env, Target::Torchrun] {
        let text = export(&r.spec, &expandable, target).text;
        assert!(
            text.contains("export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"),
            "{target:?}"
        );
    }
    // One GPU is "1 GPU".
    assert!(yaml.starts_with("# Headroom plan: 1 GPU, "), "{yaml}");
}

/// The file `target` writes for `s`.
fn text_of(s: &Scenario, target: Target) -> String {
    export(&resolve(s).expect("resolves").spec, s, target).text
}

fn link(q: &str) -> Scenario {
    headroom_core::codec::decode_pairs(
        Scenario::default(),
        &headroom_core::codec::query_pairs(q).expect("a query"),
    )
    .expect("a valid link")
}

/// torchtitan 0.3 (issue 32 item 2) runs the tensor, pipeline and context parallelism the
/// Hugging Face targets cannot write, for full training under FSDP2 of a model it has a flavor
/// of; every other plan is refused with the reason. torchtitan's own ConfigManager reads the
/// files (tests/reference/test_torchtitan.py).
#[test]
fn torchtitan_runs_the_parallel_plans_of_its_own_models() {
    let tp = link("model=llama-3.1-70b&gpus=8&dp=fsdp&reduce32=1&tp=4&sp=1&pp=2&ckpt=full&accum=4");
    assert_eq!(offered(&tp), vec![Target::Torchtitan, Target::Env]);
    let text = text_of(&tp, Target::Torchtitan);
    for line in [
        "model_spec = model_registry(\"70B\")",
        "from torchtitan.models.llama3 import model_registry",
        "data_parallel_shard_degree=1,",
        "tensor_parallel_degree=4,",
        "enable_sequence_parallel=True,",
        "pipeline_parallel_degree=2,",
        "pipeline_parallel_microbatch_size=1,",
        // A rank's local batch holds the pipeline's micro-batches: 1 x 4.
        "local_batch_size=4,",
        "global_batch_size=4,",
        "activation_checkpoint=FullAC.Config(),",
        "mixed_precision_param=\"bfloat16\",",
        "disable_cuda_graphs=True,",
        "--nproc_per_node=8 -m torchtitan.train --module torchtitan_plan --config headroom_plan",
    ] {
        assert!(text.contains(line), "{line} missing from:\n{text}");
    }
    for (q, why) in [
        ("model=qwen2.5-7b&dp=fsdp&reduce32=1", "flavors"),
        (
            "model=llama-3.1-8b&dp=fsdp&reduce32=1&method=lora",
            "not adapters",
        ),
        ("model=llama-3.1-8b&gpus=8&dp=zero3", "FSDP2"),
        ("model=llama-3.1-8b&gpus=8&dp=fsdp", "fp32 only"),
        ("model=llama-3.1-8b&dp=fsdp&precision=bf16", "full-bf16"),
        (
            "model=llama-3.1-8b&dp=fsdp&reduce32=1&ckpt=every:2",
            "one layer in k",
        ),
        (
            "model=llama-3.1-8b&dp=fsdp&reduce32=1&loss=fused",
            "ChunkedLossWrapper",
        ),
        (
            "model=llama-3.1-8b&dp=fsdp&reduce32=1&attention=eager",
            "flex attention",
        ),
        (
            "model=llama-3.1-8b&dp=fsdp&reduce32=1&fp8=tensorwise",
            "rowwise",
        ),
        (
            "model=llama-3.1-8b&dp=fsdp&reduce32=1&optimizer=adamw8bit",
            "AdamW",
        ),
    ] {
        let why_not = not_expressed(&link(q), Target::Torchtitan);
        assert!(
            why_not.as_deref().is_some_and(|w| w.contains(why)),
            "{q}: {why_not:?}"
        );
    }
}

/// TRL's objectives (issue 31 §4): training_args.py builds TRL 1.16's trainer with its config
/// class; the FSDP2 script, a supervised loop, refuses them; GRPO needs whole groups of at
/// least two completions (GRPOConfig.__post_init__), so `num_generations` is TRL's default 8
/// where the generation batch divides by it, else its largest divisor, and a batch of one is
/// not written. tests/reference/test_export.py runs these scripts on CPU.
#[test]
fn trl_objectives_are_written_as_trl_runs_them() {
    let dpo = link("model=llama-3.2-1b&trainer=dpo&method=lora&batch=2");
    assert_eq!(
        not_expressed(&dpo, Target::Fsdp2).as_deref(),
        Some(
            "the FSDP2 script's loop trains the supervised objective; DPO (TRL) is TRL's DPOTrainer, which training_args.py builds"
        )
    );
    let text = text_of(&dpo, Target::Trainer);
    for line in [
        "from trl import DPOConfig, DPOTrainer",
        "args = DPOConfig(",
        // TRL's configs turn checkpointing on by default: the plan's "off" is written.
        "    activation_checkpointing=False,",
        "    max_length=4096,",
        "trainer = DPOTrainer(model=model, args=args, train_dataset=train_dataset(), processing_class=tokenizer)",
    ] {
        assert!(text.contains(line), "{line:?} missing:\n{text}");
    }
    assert!(!text.contains("TrainingArguments("), "{text}");

    // An fp32 plan states bf16=False (TRL's default is bf16 autocast).
    let fp32 = link("model=llama-3.2-1b&trainer=orpo&precision=fp32&batch=2");
    let text = text_of(&fp32, Target::Trainer);
    assert!(text.contains("    bf16=False,"), "{text}");
    assert!(text.contains("from trl.experimental.orpo import ORPOConfig, ORPOTrainer"));

    for (q, generations) in [
        ("batch=8", Some(8)),
        ("batch=4&accum=4", Some(8)),
        ("batch=3&gpus=2", Some(6)),
        ("batch=5", Some(5)),
        ("batch=1&accum=2", Some(2)),
        ("batch=1", None),
    ] {
        let s = link(&format!(
            "model=llama-3.2-1b&trainer=grpo&prompt=512&kl=1&{q}"
        ));
        assert_eq!(
            headroom_core::export::num_generations(&s),
            generations,
            "{q}"
        );
        let refused = not_expressed(&s, Target::Trainer);
        assert_eq!(refused.is_some(), generations.is_none(), "{q}: {refused:?}");
        if let Some(n) = generations {
            let text = text_of(&s, Target::Trainer);
            assert!(text.contains(&format!("    num_generations={n},")), "{q}");
            assert!(text.contains("    beta=0.04,"), "{q}");
            assert!(text.contains("    max_completion_length=3584,"), "{q}");
            assert!(text.contains("reward_funcs=reward"), "{q}");
        }
    }
}
