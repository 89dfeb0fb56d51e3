//! Ready-to-run configuration for a scenario (a plan): a DeepSpeed JSON, Hugging Face
//! `TrainingArguments`, an accelerate config, an FSDP2 script, the torchrun command and the
//! environment. A setting a target cannot express (tensor parallelism in the Trainer, say) is
//! said in a comment of the output, or in [`Export::notes`] for JSON, never dropped silently.
//!
//! Names follow the tools' documentation: DeepSpeed's configuration JSON
//! (<https://www.deepspeed.ai/docs/config-json/>), transformers' `TrainingArguments` and
//! `OptimizerNames` (transformers 5.23, `training_args.py`), accelerate's config file
//! (`accelerate config`; transformers' "Accelerate" docs page), PyTorch's FSDP2
//! (`torch.distributed.fsdp.fully_shard`, `MixedPrecisionPolicy`, `CPUOffloadPolicy`).

use serde::Serialize;
use serde_json::{Value, json};

use crate::catalog::PresetCatalog;
use crate::error::ScenarioError;
use crate::model::ModelSpec;
use crate::scenario::{
    Attention, Checkpointing, DataParallel, LossImpl, Method, ModelChoice, Offload, Optimizer,
    Precision, Scenario,
};

/// What to export.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Target {
    DeepSpeed,
    Trainer,
    Accelerate,
    Fsdp2,
    Torchrun,
    Env,
}

impl Target {
    pub const ALL: [Target; 6] = [
        Target::DeepSpeed,
        Target::Trainer,
        Target::Accelerate,
        Target::Fsdp2,
        Target::Torchrun,
        Target::Env,
    ];

    pub const fn id(self) -> &'static str {
        match self {
            Target::DeepSpeed => "deepspeed",
            Target::Trainer => "trainer",
            Target::Accelerate => "accelerate",
            Target::Fsdp2 => "fsdp2",
            Target::Torchrun => "torchrun",
            Target::Env => "env",
        }
    }

    /// The file a practitioner saves it as (the other outputs refer to these names).
    pub const fn file_name(self) -> &'static str {
        match self {
            Target::DeepSpeed => "ds_config.json",
            Target::Trainer => "training_args.py",
            Target::Accelerate => "accelerate_config.yaml",
            Target::Fsdp2 => "train_fsdp2.py",
            Target::Torchrun => "launch.sh",
            Target::Env => "env.sh",
        }
    }

    pub fn parse(field: &str, s: &str) -> Result<Self, ScenarioError> {
        Target::ALL
            .into_iter()
            .find(|t| t.id() == s)
            .ok_or_else(|| {
                ScenarioError::invalid(
                    field,
                    format!(
                        "unknown export target `{}`; allowed: {}",
                        crate::scenario::shorten(s),
                        Target::ALL.map(Target::id).join(", ")
                    ),
                )
            })
    }
}

/// One exported file.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Export {
    pub target: Target,
    pub file_name: &'static str,
    pub text: String,
    /// Settings of the scenario this target cannot express (also written as comments in the
    /// text, except in JSON, which has none).
    pub notes: Vec<String>,
}

/// GPUs per node assumed by the launch commands (the time model's default: 8-GPU servers).
const GPUS_PER_NODE: u32 = 8;

/// Model id for `from_pretrained`: the preset's Hub id; a placeholder for custom configs and
/// for the stand-ins of the worked examples, which are not published models.
pub fn model_path(scen: &Scenario) -> String {
    if let ModelChoice::Preset(id) = &scen.model
        && let Ok(p) = PresetCatalog::builtin().get(id)
        && !p.name.contains("not a published model")
    {
        return p.hf_id.clone();
    }
    "path/to/your/model".into()
}

/// transformers' decoder-layer class per `model_type` (what FSDP wraps, one unit per layer).
pub fn layer_class(spec: &ModelSpec) -> &'static str {
    match spec.model_type.as_str() {
        "llama" => "LlamaDecoderLayer",
        "mistral" => "MistralDecoderLayer",
        "mixtral" => "MixtralDecoderLayer",
        "qwen2" => "Qwen2DecoderLayer",
        "qwen2_moe" => "Qwen2MoeDecoderLayer",
        "qwen3" => "Qwen3DecoderLayer",
        "qwen3_moe" => "Qwen3MoeDecoderLayer",
        "gemma" => "GemmaDecoderLayer",
        "gemma2" => "Gemma2DecoderLayer",
        "gemma3_text" => "Gemma3DecoderLayer",
        "phi3" => "Phi3DecoderLayer",
        "gpt2" => "GPT2Block",
        "gpt_neox" => "GPTNeoXLayer",
        "opt" => "OPTDecoderLayer",
        _ => "DecoderLayer",
    }
}

/// Python expression of the decoder layers' list in a transformers `*ForCausalLM`.
fn layers_expr(spec: &ModelSpec) -> &'static str {
    match spec.model_type.as_str() {
        "gpt2" => "model.transformer.h",
        "gpt_neox" => "model.gpt_neox.layers",
        "opt" => "model.model.decoder.layers",
        _ => "model.model.layers",
    }
}

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

/// The AdamW hyperparameters of the DeepSpeed JSON's `optimizer` block (placeholders to set):
/// learning rate, betas, epsilon, weight decay. The trainer export passes the same values as
/// `learning_rate`, `adam_beta1`/`adam_beta2`, `adam_epsilon` and `weight_decay`:
/// `TrainingArguments(deepspeed=...)` checks the block against them and Trainer raises on a
/// mismatch (transformers' `HfTrainerDeepSpeedConfig.trainer_config_process`).
const DS_ADAMW_LR: f64 = 1e-4;
const DS_ADAMW_BETAS: [f64; 2] = [0.9, 0.95];
const DS_ADAMW_EPS: f64 = 1e-8;
const DS_ADAMW_WEIGHT_DECAY: f64 = 0.1;

/// Whether the DeepSpeed JSON carries an `optimizer` block: offloaded AdamW states are stepped
/// by DeepSpeed's CPU AdamW.
fn ds_adamw_block(scen: &Scenario) -> bool {
    scen.parallel.offload_optimizer != Offload::None
        && matches!(
            scen.optimizer,
            Optimizer::AdamW | Optimizer::AdamWForLoop | Optimizer::AdamWFused
        )
}

fn zero_stage(dp: DataParallel) -> u8 {
    match dp {
        DataParallel::Ddp => 0,
        DataParallel::Zero1 => 1,
        DataParallel::Zero2 => 2,
        // FSDP full sharding shards what ZeRO-3 shards.
        DataParallel::Zero3 | DataParallel::Fsdp => 3,
    }
}

/// Settings no launcher or config here can express, shared by every target.
fn common_notes(scen: &Scenario) -> Vec<String> {
    let mut n = Vec::new();
    let p = &scen.parallel;
    if p.tensor > 1 {
        n.push(format!(
            "tensor parallelism {}{}: not a DeepSpeed/Trainer/accelerate setting; use Megatron-LM (--tensor-model-parallel-size {}{}) or torch.distributed.tensor.parallel.parallelize_module on a 2-D device mesh",
            p.tensor,
            if p.sequence { " with sequence parallelism" } else { "" },
            p.tensor,
            if p.sequence { " --sequence-parallel" } else { "" },
        ));
    }
    if p.pipeline > 1 {
        n.push(format!(
            "pipeline parallelism {}: use Megatron-LM (--pipeline-model-parallel-size {}) or torch.distributed.pipelining",
            p.pipeline, p.pipeline
        ));
    }
    if scen.checkpointing == Checkpointing::Selective {
        n.push("selective recompute (attention internals only) has no transformers switch; Megatron-LM: --recompute-granularity selective".into());
    }
    if scen.parallel.offload_optimizer == Offload::Nvme
        || scen.parallel.offload_params == Offload::Nvme
    {
        n.push("NVMe offload: set nvme_path in ds_config.json to a fast local disk".into());
    }
    if scen.precision == Precision::Bf16 || scen.precision == Precision::Fp16 {
        n.push(format!(
            "pure {}: load the model with dtype=torch.{} (weights, gradients and optimizer states in 16 bits); no autocast flag",
            scen.precision.id(),
            if scen.precision == Precision::Bf16 { "bfloat16" } else { "float16" }
        ));
    }
    match scen.method {
        Method::Full => {}
        Method::Lora => n.push(format!(
            "LoRA: model = peft.get_peft_model(model, peft.LoraConfig(r={}, target_modules={}))",
            scen.lora.rank,
            lora_targets(scen)
        )),
        Method::Qlora => n.push(format!(
            "QLoRA: load with quantization_config=BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type=\"nf4\", bnb_4bit_compute_dtype=torch.{}), then peft.prepare_model_for_kbit_training and LoraConfig(r={}, target_modules={})",
            if scen.precision.half_dtype() == crate::dtype::DType::F16 { "float16" } else { "bfloat16" },
            scen.lora.rank,
            lora_targets(scen)
        )),
    }
    if scen.runtime.cuda_graphs {
        n.push("CUDA graphs: torch.compile(model, mode=\"reduce-overhead\")".into());
    }
    if scen.keep_logits {
        n.push("the scenario keeps the outputs (logits) alive through backward: keep only outputs.loss in the loop".into());
    }
    n
}

fn lora_targets(scen: &Scenario) -> &'static str {
    match scen.lora.targets {
        crate::scenario::LoraTargets::AllLinear => "\"all-linear\"",
        crate::scenario::LoraTargets::Attention => {
            "[\"q_proj\", \"k_proj\", \"v_proj\", \"o_proj\"]"
        }
    }
}

/// DeepSpeed's configuration JSON for the scenario, with the notes it cannot carry.
pub fn deepspeed_config(scen: &Scenario) -> (Value, Vec<String>) {
    let mut notes = common_notes(scen);
    let p = &scen.parallel;
    let stage = zero_stage(p.data);
    if p.data == DataParallel::Fsdp {
        notes.push(
            "the plan shards with FSDP2; this is DeepSpeed's equivalent, ZeRO stage 3".into(),
        );
    }
    let mut zero = json!({
        "stage": stage,
        "overlap_comm": true,
        "contiguous_gradients": true,
        "reduce_bucket_size": 500_000_000u64,
    });
    if stage >= 1 && p.offload_optimizer != Offload::None {
        zero["offload_optimizer"] = offload_json(p.offload_optimizer);
    }
    if stage == 3 {
        zero["stage3_prefetch_bucket_size"] = json!(50_000_000u64);
        zero["stage3_param_persistence_threshold"] = json!(100_000u64);
        zero["stage3_gather_16bit_weights_on_model_save"] = json!(true);
        if p.offload_params != Offload::None {
            zero["offload_param"] = offload_json(p.offload_params);
        }
    }
    let mut cfg = json!({
        "train_batch_size": scen.global_batch(),
        "train_micro_batch_size_per_gpu": scen.micro_batch,
        "gradient_accumulation_steps": scen.grad_accum,
        "gradient_clipping": 1.0,
        "steps_per_print": 100,
        "zero_optimization": zero,
    });
    match scen.precision {
        Precision::AmpBf16 | Precision::Bf16 => cfg["bf16"] = json!({"enabled": true}),
        Precision::AmpFp16 | Precision::Fp16 => {
            // Dynamic loss scaling (loss_scale 0), DeepSpeed's documented default form.
            cfg["fp16"] = json!({
                "enabled": true,
                "loss_scale": 0,
                "initial_scale_power": 16,
                "loss_scale_window": 1000,
                "hysteresis": 2,
                "min_loss_scale": 1
            });
        }
        Precision::Fp32 => {}
    }
    if p.offload_optimizer != Offload::None {
        // Offloaded states are stepped on the CPU: DeepSpeed's CPU Adam for AdamW; any other
        // optimizer runs as a client optimizer, which DeepSpeed must be told to accept.
        if ds_adamw_block(scen) {
            cfg["optimizer"] = json!({
                "type": "AdamW",
                "params": {
                    "lr": DS_ADAMW_LR,
                    "betas": DS_ADAMW_BETAS,
                    "eps": DS_ADAMW_EPS,
                    "weight_decay": DS_ADAMW_WEIGHT_DECAY
                }
            });
            notes.push("optimizer: DeepSpeed's CPU AdamW steps the offloaded states; lr, betas, eps and weight_decay are placeholders to set (the trainer export repeats them as learning_rate, adam_beta1/adam_beta2, adam_epsilon and weight_decay: change both together, transformers rejects a mismatch)".into());
        } else {
            cfg["zero_force_ds_cpu_optimizer"] = json!(false);
            notes.push(format!(
                "optimizer {} runs as a client optimizer on offloaded states (zero_force_ds_cpu_optimizer false); it must have a CPU implementation",
                scen.optimizer.id()
            ));
        }
    } else if !matches!(
        scen.optimizer,
        Optimizer::AdamW | Optimizer::AdamWForLoop | Optimizer::AdamWFused
    ) {
        cfg["zero_allow_untested_optimizer"] = json!(true);
    }
    if scen.checkpointing != Checkpointing::None {
        notes.push(format!(
            "activation checkpointing ({}) is set in the model (TrainingArguments activation_checkpointing, or model.activation_checkpointing_enable()), not in ds_config.json",
            scen.checkpointing.label()
        ));
    }
    if scen.offload_activations {
        notes.push("activation offload: wrap the forward in torch.autograd.graph.save_on_cpu(pin_memory=True)".into());
    }
    if scen.loss == LossImpl::Fused {
        notes.push("fused linear cross-entropy: Liger kernels in the model (TrainingArguments use_liger_kernel=True)".into());
    }
    (cfg, notes)
}

fn offload_json(o: Offload) -> Value {
    match o {
        Offload::Nvme => json!({"device": "nvme", "nvme_path": "/local_nvme", "pin_memory": true}),
        _ => json!({"device": "cpu", "pin_memory": true}),
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
                    "version": 2,
                    "auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
                    "transformer_layer_cls_to_wrap": [layer_class(spec)],
                    "reshard_after_forward": true,
                    "cpu_offload": offload,
                    "activation_checkpointing": scen.checkpointing == Checkpointing::Full,
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
        notes.push("activation offload: subclass Trainer and run compute_loss inside torch.autograd.graph.save_on_cpu(pin_memory=True)".into());
    }
    if scen.attention == Attention::Eager {
        notes.push("eager attention: from_pretrained(..., attn_implementation=\"eager\")".into());
    }
    (kw, notes)
}

/// A JSON value as a Python literal.
fn py(v: &Value) -> String {
    match v {
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Null => "None".into(),
        Value::Array(a) => format!("[{}]", a.iter().map(py).collect::<Vec<_>>().join(", ")),
        Value::Object(m) => format!(
            "{{{}}}",
            m.iter()
                .map(|(k, v)| format!("{}: {}", Value::String(k.clone()), py(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        other => other.to_string(),
    }
}

fn comment_lines(notes: &[String], prefix: &str) -> String {
    notes.iter().map(|n| format!("{prefix}{n}\n")).collect()
}

fn summary(scen: &Scenario) -> String {
    format!(
        "{} GPUs, micro-batch {} x accumulation {} x {} data-parallel = global batch {} of {} tokens; {}, {}, {}",
        scen.gpus,
        scen.micro_batch,
        scen.grad_accum,
        scen.data_parallel(),
        scen.global_batch(),
        scen.seq,
        scen.precision.id(),
        scen.parallel.data.label(),
        scen.optimizer.id()
    )
}

fn trainer_text(spec: &ModelSpec, scen: &Scenario) -> (String, Vec<String>) {
    let (kw, notes) = trainer_kwargs(spec, scen);
    let mut t = format!("# Headroom plan: {}\n", summary(scen));
    t.push_str(&format!(
        "# Sequences of {} tokens: set max_length in your tokenization or collator.\n",
        scen.seq
    ));
    t.push_str(&comment_lines(&notes, "# "));
    t.push_str("from transformers import TrainingArguments\n\nargs = TrainingArguments(\n");
    for (k, v) in &kw {
        t.push_str(&format!("    {k}={},\n", py(v)));
    }
    t.push_str(")\n");
    (t, notes)
}

fn accelerate_text(spec: &ModelSpec, scen: &Scenario) -> (String, Vec<String>) {
    let mut notes = common_notes(scen);
    let p = &scen.parallel;
    let nodes = nodes(scen.gpus);
    let mut t = format!("# Headroom plan: {}\n", summary(scen));
    t.push_str("compute_environment: LOCAL_MACHINE\n");
    let ty = match p.data {
        DataParallel::Fsdp => "FSDP",
        DataParallel::Ddp if scen.gpus == 1 => "'NO'",
        DataParallel::Ddp => "MULTI_GPU",
        _ => "DEEPSPEED",
    };
    t.push_str(&format!("distributed_type: {ty}\n"));
    match p.data {
        DataParallel::Fsdp => {
            let offload = p.offload_params != Offload::None || p.offload_optimizer != Offload::None;
            if p.offload_optimizer != p.offload_params {
                notes.push("FSDP2 offloads parameters, gradients and optimizer states together (fsdp_offload_params); optimizer-only offload needs DeepSpeed ZeRO".into());
            }
            t.push_str("fsdp_config:\n  fsdp_version: 2\n");
            t.push_str("  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP\n");
            t.push_str(&format!(
                "  fsdp_transformer_layer_cls_to_wrap: {}\n",
                layer_class(spec)
            ));
            t.push_str("  fsdp_reshard_after_forward: true\n");
            t.push_str(&format!("  fsdp_offload_params: {offload}\n"));
            t.push_str(&format!(
                "  fsdp_activation_checkpointing: {}\n",
                scen.checkpointing == Checkpointing::Full
            ));
            t.push_str("  fsdp_cpu_ram_efficient_loading: true\n");
            t.push_str("  fsdp_state_dict_type: SHARDED_STATE_DICT\n");
        }
        DataParallel::Ddp => {}
        _ => {
            t.push_str("deepspeed_config:\n");
            t.push_str(&format!(
                "  deepspeed_config_file: {}\n",
                Target::DeepSpeed.file_name()
            ));
            t.push_str(&format!("  zero3_init_flag: {}\n", zero_stage(p.data) == 3));
            if nodes > 1 {
                t.push_str("  deepspeed_multinode_launcher: standard\n");
            }
        }
    }
    let mixed = match scen.precision {
        Precision::AmpBf16 | Precision::Bf16 => "bf16",
        Precision::AmpFp16 | Precision::Fp16 => "fp16",
        Precision::Fp32 => "'no'",
    };
    if ty == "DEEPSPEED" {
        // accelerate refuses mixed_precision beside a deepspeed_config_file: the file sets it.
        t.push_str("# mixed precision, batch sizes and accumulation come from ds_config.json\n");
    } else {
        t.push_str(&format!("mixed_precision: {mixed}\n"));
    }
    t.push_str(&format!("num_machines: {nodes}\n"));
    t.push_str(&format!("num_processes: {}\n", scen.gpus));
    t.push_str("machine_rank: 0\n");
    if nodes > 1 {
        t.push_str("main_process_ip: 10.0.0.1  # the first node's address\n");
        t.push_str("main_process_port: 29500\n");
    }
    t.push_str("main_training_function: main\n");
    t.push_str("rdzv_backend: static\n");
    t.push_str("same_network: true\n");
    t.push_str("use_cpu: false\n");
    if scen.checkpointing == Checkpointing::Full && p.data != DataParallel::Fsdp {
        notes.push("activation checkpointing: activation_checkpointing=True in TrainingArguments (or model.activation_checkpointing_enable())".into());
    }
    if scen.offload_activations {
        notes.push("activation offload: run the forward inside torch.autograd.graph.save_on_cpu(pin_memory=True)".into());
    }
    let mut out = t;
    out.push_str(&comment_lines(&notes, "# "));
    (out, notes)
}

fn nodes(gpus: u32) -> u32 {
    if gpus > GPUS_PER_NODE {
        gpus.div_ceil(GPUS_PER_NODE)
    } else {
        1
    }
}

fn fsdp2_text(spec: &ModelSpec, scen: &Scenario) -> (String, Vec<String>) {
    let mut notes = common_notes(scen);
    let p = &scen.parallel;
    let (param_dtype, autocast) = match scen.precision {
        Precision::AmpBf16 => (Some("torch.bfloat16"), true),
        Precision::AmpFp16 => (Some("torch.float16"), true),
        Precision::Bf16 => (Some("torch.bfloat16"), false),
        Precision::Fp16 => (Some("torch.float16"), false),
        Precision::Fp32 => (None, false),
    };
    let load_dtype = match scen.precision {
        Precision::Bf16 => "torch.bfloat16",
        Precision::Fp16 => "torch.float16",
        _ => "torch.float32",
    };
    match p.data {
        DataParallel::Zero1 | DataParallel::Zero2 => notes.push(format!(
            "the plan uses DeepSpeed {}; FSDP2's closest form keeps parameters gathered between forward and backward (reshard_after_forward=False, ZeRO-2-like)",
            p.data.label()
        )),
        DataParallel::Zero3 => notes.push("the plan uses DeepSpeed ZeRO-3; FSDP2 full sharding (reshard_after_forward=True) shards the same states".into()),
        _ => {}
    }
    let offload = p.offload_params != Offload::None || p.offload_optimizer != Offload::None;
    if offload && p.offload_optimizer != p.offload_params {
        notes.push("FSDP2's CPUOffloadPolicy offloads parameters, gradients and optimizer states together; optimizer-only offload needs DeepSpeed ZeRO".into());
    }
    let mut t = format!("# Headroom plan: {}\n", summary(scen));
    t.push_str(&format!(
        "# Launch: torchrun --nproc_per_node={} {}\n",
        scen.gpus.min(GPUS_PER_NODE),
        Target::Fsdp2.file_name()
    ));
    t.push_str(&comment_lines(&notes, "# "));
    t.push_str("import os\n\nimport torch\nimport torch.distributed as dist\n");
    if p.data == DataParallel::Ddp {
        t.push_str("from torch.nn.parallel import DistributedDataParallel\n");
    } else {
        t.push_str("from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard\n");
    }
    t.push_str("from transformers import AutoModelForCausalLM\n\n");
    t.push_str(&format!(
        "MODEL = \"{}\"\nMICRO_BATCH = {}\nACCUMULATION = {}\nSEQ = {}\n\n",
        model_path(scen),
        scen.micro_batch,
        scen.grad_accum,
        scen.seq
    ));
    t.push_str("dist.init_process_group(\"nccl\")\nlocal_rank = int(os.environ[\"LOCAL_RANK\"])\ntorch.cuda.set_device(local_rank)\n\n");
    let attn = if scen.attention == Attention::Eager {
        "eager"
    } else {
        "sdpa"
    };
    if scen.loss == LossImpl::Fused {
        t.push_str(
            "# Fused linear cross-entropy (chunked logits): Liger's kernels patch the model.\n",
        );
        t.push_str("from liger_kernel.transformers import AutoLigerKernelForCausalLM\n\n");
        t.push_str(&format!(
            "model = AutoLigerKernelForCausalLM.from_pretrained(MODEL, dtype={load_dtype}, attn_implementation=\"{attn}\")\n"
        ));
    } else {
        t.push_str(&format!(
            "model = AutoModelForCausalLM.from_pretrained(MODEL, dtype={load_dtype}, attn_implementation=\"{attn}\")\n"
        ));
    }
    // transformers 5.23: activation_checkpointing_enable (gradient_checkpointing_enable is its
    // deprecated alias); every_n_layers checkpoints one decoder layer in k.
    match scen.checkpointing {
        Checkpointing::Full => t.push_str("model.activation_checkpointing_enable(activation_checkpointing_kwargs={\"use_reentrant\": False})\n"),
        Checkpointing::Every(k) => t.push_str(&format!(
            "model.activation_checkpointing_enable(activation_checkpointing_kwargs={{\"use_reentrant\": False}}, every_n_layers={k})\n"
        )),
        _ => {}
    }
    if p.data == DataParallel::Ddp {
        t.push_str("model = DistributedDataParallel(model.cuda(), device_ids=[local_rank])\n");
    } else {
        let mp = match param_dtype {
            Some(d) => format!("MixedPrecisionPolicy(param_dtype={d}, reduce_dtype=torch.float32)"),
            None => "MixedPrecisionPolicy()".into(),
        };
        t.push_str(&format!("mp = {mp}\n"));
        let off = if offload {
            "CPUOffloadPolicy(pin_memory=True)"
        } else {
            "None"
        };
        let reshard = if matches!(p.data, DataParallel::Zero1 | DataParallel::Zero2) {
            "False"
        } else {
            "True"
        };
        t.push_str(&format!(
            "kwargs = dict(mp_policy=mp, reshard_after_forward={reshard})\n"
        ));
        // fully_shard moves each unit's parameters to the GPU as it shards them (kept on
        // the CPU under CPUOffloadPolicy), so the whole model never sits on one GPU.
        if offload {
            t.push_str(&format!("kwargs[\"offload_policy\"] = {off}\n"));
        }
        t.push_str(&format!(
            "# One FSDP unit per decoder layer ({}), then the root.\nfor layer in {}:\n    fully_shard(layer, **kwargs)\nfully_shard(model, **kwargs)\n",
            layer_class(spec),
            layers_expr(spec)
        ));
    }
    let (opt_line, opt_note) = match scen.optimizer {
        Optimizer::AdamW => ("torch.optim.AdamW(model.parameters(), lr=1e-4)", None),
        Optimizer::AdamWForLoop => (
            "torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False)",
            None,
        ),
        Optimizer::AdamWFused => (
            "torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)",
            None,
        ),
        Optimizer::AdamW8bit => (
            "bnb.optim.AdamW8bit(model.parameters(), lr=1e-4)",
            Some("import bitsandbytes as bnb"),
        ),
        Optimizer::PagedAdamW8bit => (
            "bnb.optim.PagedAdamW8bit(model.parameters(), lr=1e-4)",
            Some("import bitsandbytes as bnb"),
        ),
        Optimizer::Lion => (
            "bnb.optim.Lion(model.parameters(), lr=1e-5)",
            Some("import bitsandbytes as bnb"),
        ),
        Optimizer::Adafactor => (
            "transformers.optimization.Adafactor(model.parameters(), lr=1e-4, relative_step=False, scale_parameter=False)",
            Some("import transformers.optimization"),
        ),
        Optimizer::Sgd => ("torch.optim.SGD(model.parameters(), lr=1e-2)", None),
        Optimizer::SgdMomentum => (
            "torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)",
            None,
        ),
        Optimizer::AdamMini => (
            "Adam_mini(model.named_parameters(), lr=1e-4)",
            Some("from adam_mini import Adam_mini"),
        ),
    };
    if let Some(imp) = opt_note {
        t.push_str(&format!("{imp}\n"));
    }
    t.push_str(&format!("optimizer = {opt_line}\n\n"));
    t.push_str("\ndef train_step(micro_batches):\n    \"\"\"One optimizer step over ACCUMULATION micro-batches of MICRO_BATCH x SEQ tokens.\"\"\"\n");
    t.push_str("    for i, batch in enumerate(micro_batches):\n");
    t.push_str("        last = i == ACCUMULATION - 1\n");
    if p.data == DataParallel::Ddp {
        t.push_str("        model.require_backward_grad_sync = last\n");
    } else {
        t.push_str("        model.set_requires_gradient_sync(last)\n");
    }
    let mut indent = "        ".to_string();
    // FSDP2's MixedPrecisionPolicy is its autocast (bf16 compute over fp32 shards); DDP needs
    // torch.autocast.
    if autocast && p.data == DataParallel::Ddp {
        t.push_str(&format!(
            "{indent}with torch.autocast(\"cuda\", dtype={}):\n",
            param_dtype.unwrap_or("torch.bfloat16")
        ));
        indent.push_str("    ");
    }
    if scen.offload_activations {
        t.push_str(&format!(
            "{indent}with torch.autograd.graph.save_on_cpu(pin_memory=True):\n"
        ));
        indent.push_str("    ");
    }
    t.push_str(&format!(
        "{indent}loss = model(**batch).loss / ACCUMULATION\n"
    ));
    t.push_str("        loss.backward()\n");
    t.push_str("    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n");
    t.push_str("    optimizer.step()\n    optimizer.zero_grad(set_to_none=True)\n");
    if scen.precision == Precision::AmpFp16 {
        notes.push("fp16 autocast: add a gradient scaler (torch.amp.GradScaler, or ShardedGradScaler with FSDP)".into());
        t.push_str("# fp16 autocast needs a loss scaler: torch.amp.GradScaler (ShardedGradScaler with FSDP).\n");
    }
    (t, notes)
}

fn env_vars(scen: &Scenario) -> Vec<(&'static str, &'static str, &'static str)> {
    let mut v = Vec::new();
    if scen.runtime.expandable_segments {
        v.push((
            "PYTORCH_CUDA_ALLOC_CONF",
            "expandable_segments:True",
            "the caching allocator grows segments instead of stranding freed blocks (less fragmentation)",
        ));
    }
    if scen.parallel.tensor > 1 {
        v.push((
            "CUDA_DEVICE_MAX_CONNECTIONS",
            "1",
            "Megatron-LM's requirement with tensor/sequence parallelism: kernels run in issue order so communication overlaps compute",
        ));
    }
    v
}

fn env_text(scen: &Scenario) -> String {
    let vars = env_vars(scen);
    let mut t = format!("# Headroom plan: {}\n", summary(scen));
    if vars.is_empty() {
        t.push_str("# No environment variables needed for this plan.\n");
    }
    for (k, v, why) in vars {
        t.push_str(&format!("# {why}\nexport {k}={v}\n"));
    }
    t
}

fn torchrun_text(spec: &ModelSpec, scen: &Scenario) -> (String, Vec<String>) {
    let mut notes = common_notes(scen);
    let nodes = nodes(scen.gpus);
    let per_node = scen.gpus / nodes;
    if per_node * nodes != scen.gpus {
        notes.push(format!(
            "{} GPUs do not split evenly over {nodes} nodes of {GPUS_PER_NODE}: adjust --nnodes and --nproc_per_node",
            scen.gpus
        ));
    }
    let mut t = format!("# Headroom plan: {}\n", summary(scen));
    t.push_str(&comment_lines(&notes, "# "));
    for (k, v, _) in env_vars(scen) {
        t.push_str(&format!("export {k}={v}\n"));
    }
    let mut cmd = format!("torchrun --nproc_per_node={per_node} --nnodes={nodes}");
    if nodes > 1 {
        cmd.push_str(
            " --node_rank=$NODE_RANK --rdzv_backend=c10d --rdzv_endpoint=$MASTER_ADDR:29500",
        );
    }
    cmd.push_str(" train.py");
    // The script's arguments are TrainingArguments fields (HfArgumentParser), as in
    // transformers' example scripts.
    let (kw, _) = trainer_kwargs(spec, scen);
    for (k, v) in kw {
        match v {
            Value::Bool(true) => cmd.push_str(&format!(" \\\n  --{k}")),
            Value::Bool(false) => {}
            Value::String(s) if s.contains(' ') => cmd.push_str(&format!(" \\\n  --{k} \"{s}\"")),
            Value::String(s) => cmd.push_str(&format!(" \\\n  --{k} {s}")),
            Value::Object(_) | Value::Array(_) => cmd.push_str(&format!(" \\\n  --{k} '{v}'")),
            other => cmd.push_str(&format!(" \\\n  --{k} {other}")),
        }
    }
    t.push_str(&cmd);
    t.push('\n');
    (t, notes)
}

/// The export of `scen` for `target`.
pub fn export(spec: &ModelSpec, scen: &Scenario, target: Target) -> Export {
    let (text, notes) = match target {
        Target::DeepSpeed => {
            let (v, notes) = deepspeed_config(scen);
            (
                serde_json::to_string_pretty(&v).unwrap_or_default() + "\n",
                notes,
            )
        }
        Target::Trainer => trainer_text(spec, scen),
        Target::Accelerate => accelerate_text(spec, scen),
        Target::Fsdp2 => fsdp2_text(spec, scen),
        Target::Torchrun => torchrun_text(spec, scen),
        Target::Env => (env_text(scen), Vec::new()),
    };
    Export {
        target,
        file_name: target.file_name(),
        text,
        notes,
    }
}

/// Every target's export.
pub fn export_all(spec: &ModelSpec, scen: &Scenario) -> Vec<Export> {
    Target::ALL
        .into_iter()
        .map(|t| export(spec, scen, t))
        .collect()
}
