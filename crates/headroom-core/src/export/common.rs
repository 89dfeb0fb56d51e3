//! What every target writes: the plan's one-line summary, and the notes for settings no
//! launcher or config here can express.

use crate::scenario::{Checkpointing, LoraTargets, Method, Offload, Precision, Scenario};
use serde_json::Value;

/// Settings no launcher or config here can express, shared by every target.
pub(super) fn common_notes(scen: &Scenario) -> Vec<String> {
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
    n.extend(python_notes(scen));
    if scen.mtp > 0 {
        n.push(format!(
            "multi-token prediction ({} module{}): transformers builds none (it drops their weights); Megatron-LM: --mtp-num-layers {}",
            scen.mtp,
            if scen.mtp == 1 { "" } else { "s" },
            scen.mtp
        ));
    }
    if let Some(lines) = sdpa_switches(scen) {
        n.push(format!(
            "SDPA kernel as estimated: {}",
            lines.lines().collect::<Vec<_>>().join("; ")
        ));
    }
    if scen.keep_logits {
        n.push("the scenario keeps the outputs (logits) alive through backward: keep only outputs.loss in the loop".into());
    }
    n
}

/// How the Python targets build what the estimate assumed (the dtype to load, peft's adapters,
/// the QLoRA quantization, DPO's trainer, compile); the YAML targets write these as keys.
pub(super) fn python_notes(scen: &Scenario) -> Vec<String> {
    let mut n = Vec::new();
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
        Method::Qlora | Method::Int8 => {
            let quantization = if scen.method == Method::Int8 {
                "8-bit base: load with quantization_config=BitsAndBytesConfig(load_in_8bit=True)"
                    .to_string()
            } else {
                format!(
                    "QLoRA: load with quantization_config=BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type=\"nf4\", bnb_4bit_compute_dtype=torch.{})",
                    if scen.precision.half_dtype() == crate::dtype::DType::F16 {
                        "float16"
                    } else {
                        "bfloat16"
                    },
                )
            };
            n.push(format!(
                "{quantization}, {}then LoraConfig(r={}, target_modules={})",
                if scen.lora.kbit {
                    "then peft.prepare_model_for_kbit_training (as estimated), "
                } else {
                    "without peft.prepare_model_for_kbit_training (as estimated), "
                },
                scen.lora.rank,
                lora_targets(scen)
            ))
        }
    }
    if scen.method != Method::Full && scen.lora.dropout {
        n.push("lora_dropout=0.05 (any value above 0, as estimated)".into());
    }
    if scen.method != Method::Full && scen.lora.save_embeddings {
        n.push(
            "modules_to_save=[\"embed_tokens\", \"lm_head\"] in the LoraConfig, as estimated"
                .into(),
        );
    }
    if scen.method != Method::Full && scen.lora.base == crate::scenario::BaseDtype::Fp32 {
        n.push("LoRA base loaded with dtype=torch.float32, as estimated".into());
    }
    let (module, name) = scen.trainer.trl_class();
    if scen.trainer.preference() {
        n.push(format!(
            "{name}: {module}.{name}Trainer, {name}Config(per_device_train_batch_size={}, max_length={}{})",
            scen.micro_batch,
            scen.seq,
            if scen.ref_precompute {
                ", precompute_ref_log_probs=True"
            } else {
                ""
            }
        ));
    }
    if scen.trainer.full_logits() {
        n.push(format!(
            "{}: {module}.{name}Trainer, {name}Config(per_device_train_batch_size={}, max_length={}{})",
            scen.trainer.label(),
            scen.micro_batch,
            scen.seq,
            if scen.trainer == crate::scenario::Trainer::Simpo {
                ", loss_type=\"simpo\""
            } else {
                ""
            }
        ));
    }
    if scen.trainer.generates() {
        n.push(grpo_config(scen));
    }
    if scen.runtime.cuda_graphs {
        n.push("CUDA graphs: torch.compile(model, mode=\"reduce-overhead\")".into());
    } else if scen.runtime.compile {
        n.push("torch.compile: model = torch.compile(model), after any fp8 conversion (it fuses torchao's casts)".into());
    }
    n
}

/// PyTorch's global switches that leave SDPA only the kernel the scenario forces (the estimate
/// assumed it; without them PyTorch picks by its own rules): `None` under eager attention or
/// the automatic choice.
pub fn sdpa_switches(scen: &Scenario) -> Option<String> {
    use crate::scenario::{Attention, SdpaKernel};
    if scen.attention != Attention::Sdpa || scen.sdpa == SdpaKernel::Auto {
        return None;
    }
    let on = |k: SdpaKernel| if scen.sdpa == k { "True" } else { "False" };
    Some(format!(
        "torch.backends.cuda.enable_flash_sdp({})\ntorch.backends.cuda.enable_mem_efficient_sdp({})\n\
         torch.backends.cuda.enable_cudnn_sdp({})\ntorch.backends.cuda.enable_math_sdp({})\n",
        on(SdpaKernel::Flash),
        on(SdpaKernel::Efficient),
        on(SdpaKernel::Cudnn),
        on(SdpaKernel::Math)
    ))
}

/// peft's `target_modules` for the scenario's targets, as Python (Llama-like module names).
pub(super) fn lora_targets(scen: &Scenario) -> &'static str {
    match scen.lora.targets {
        LoraTargets::AllLinear => "\"all-linear\"",
        LoraTargets::Attention => "[\"q_proj\", \"k_proj\", \"v_proj\", \"o_proj\"]",
        LoraTargets::Qv => "[\"q_proj\", \"v_proj\"]",
        LoraTargets::Qkv => "[\"q_proj\", \"k_proj\", \"v_proj\"]",
        LoraTargets::Mlp => "[\"gate_proj\", \"up_proj\", \"down_proj\"]",
    }
}

pub(super) fn comment_lines(notes: &[String], prefix: &str) -> String {
    notes.iter().map(|n| format!("{prefix}{n}\n")).collect()
}

/// The Python scripts' imports up to torch, with the allocator setting the plan assumes set
/// before torch starts CUDA (the caching allocator reads it once, at its first allocation).
pub(super) fn script_imports(scen: &Scenario) -> &'static str {
    if scen.runtime.expandable_segments {
        "import json\nimport os\n\nos.environ.setdefault(\"PYTORCH_CUDA_ALLOC_CONF\", \"expandable_segments:True\")\n\nimport torch\n"
    } else {
        "import json\nimport os\n\nimport torch\n"
    }
}

pub(super) fn summary(scen: &Scenario) -> String {
    format!(
        "{} GPU{}, micro-batch {} x accumulation {} x {} data-parallel = global batch {} of {} tokens; {}, {}, {}",
        scen.gpus,
        if scen.gpus == 1 { "" } else { "s" },
        scen.micro_batch,
        scen.grad_accum,
        scen.data_parallel(),
        scen.global_batch(),
        scen.seq,
        scen.precision.id(),
        if scen.parallel.fsdp1 {
            "FSDP1 (flat parameters)"
        } else {
            scen.parallel.data.label()
        },
        scen.optimizer.id()
    )
}

/// Sequence packing as estimated: transformers' `DataCollatorWithFlattening` puts whole
/// documents back to back with `position_ids` restarting at each, which the flash and flex
/// attention implementations read as document bounds (no padding, no attention across
/// documents).
pub(super) fn packing_code(scen: &Scenario) -> String {
    format!(
        "# Packing, as estimated: whole documents back to back (about {} tokens each, {} per row of\n# the estimate), no padding; position_ids restart at each document and {} attends within it.\nfrom transformers import DataCollatorWithFlattening\n\ndata_collator = DataCollatorWithFlattening(return_position_ids=True)\n",
        scen.attention_span(),
        scen.seq,
        scen.attention.hf_name()
    )
}

/// TRL's `GRPOConfig` as the estimate assumed it: completions per GPU, their length, the KL
/// term, and where they are generated (the keywords training_args.py passes, `trl.rs`).
fn grpo_config(scen: &Scenario) -> String {
    use crate::scenario::Generator;
    let args: Vec<String> = [(
        "per_device_train_batch_size",
        serde_json::json!(scen.micro_batch),
    )]
    .into_iter()
    .chain(super::trl::config_kwargs(scen))
    .map(|(k, v)| format!("{k}={}", py(&v)))
    .collect();
    let (module, name) = scen.trainer.trl_class();
    let mut line = format!(
        "{name}: {module}.{name}Trainer, {name}Config({})",
        args.join(", ")
    );
    if scen.generator == Generator::Server {
        let util = match scen.vllm_util {
            0 => String::new(),
            u => format!(" --gpu_memory_utilization {}", f64::from(u) / 100.0),
        };
        let len = match scen.vllm_len {
            0 => String::new(),
            n => format!(" --max_model_len {n}"),
        };
        line.push_str(&format!(
            "; the server on a GPU of its own: trl vllm-serve --model MODEL{util}{len}"
        ));
    }
    line
}

/// A JSON value as a Python literal.
pub(super) fn py(v: &Value) -> String {
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
