//! torchtitan 0.3's configuration of a plan: a Python module holding one config function
//! (`headroom_plan`), which torchtitan's trainer loads by name (`--module torchtitan_plan
//! --config headroom_plan`). torchtitan 0.3 reads no TOML: its commit 9810191b ("Config System
//! Refactor: TOML to Python Dataclass Registry") made each job a function returning
//! `Trainer.Config`, as its own `models/*/config_registry.py` are.
//!
//! It is offered for the plans torchtitan runs as estimated: full training of a model one of its
//! flavors builds (their parameter counts checked against the presets on the meta device by
//! `tests/reference/test_torchtitan.py`), FSDP2 (torchtitan wraps every layer with
//! `fully_shard` even on one data rank, so no other data parallelism is its) with tensor,
//! pipeline (1F1B) and context parallelism, no or full activation checkpointing, compile, fp8 rowwise (torchao),
//! transformers-style cross-entropy (`.float()` then `cross_entropy`, as torchtitan's
//! `cross_entropy_loss` does) and AdamW. What torchtitan decides itself is written out: its
//! flex attention saves what SDPA's flash kernel saves (the output and the log-sum-exp);
//! forward and backward are captured as one CUDA graph unless `disable_cuda_graphs`, so the
//! plan's CUDA-graph setting is written; FSDP2 reduces in fp32 (`mixed_precision_reduce` has no
//! other value in 0.3).

use crate::model::ModelSpec;
use crate::scenario::{
    Attention, Checkpointing, DataParallel, Fp8Recipe, LossImpl, Method, ModelChoice, Offload,
    Optimizer, Precision, Scenario, SdpaKernel, Trainer,
};

use super::common::{comment_lines, summary};
use super::launch::nodes;

/// A preset torchtitan builds as one of its flavors.
pub(crate) struct Flavor {
    pub preset: &'static str,
    /// torchtitan's model module (`torchtitan.models.<module>`).
    pub module: &'static str,
    pub flavor: &'static str,
    /// The Hugging Face repository whose tokenizer `hf_assets_path` names.
    pub hf_dir: &'static str,
    /// A mixture of experts: read by the importer, not exported (torchtitan's token dispatch
    /// is not the layer Headroom estimates).
    pub moe: bool,
}

/// torchtitan 0.3's flavors (`llama3_configs`, `qwen3_configs`, `deepseekv3_configs`) that are
/// presets here; the dense ones' parameter counts are checked on the meta device
/// (tests/reference/test_torchtitan.py). The importer reads a job's model with it too.
pub(crate) const FLAVORS: &[Flavor] = &[
    flavor("llama-3.2-1b", "llama3", "1B", "Llama-3.2-1B", false),
    flavor("llama-3.2-3b", "llama3", "3B", "Llama-3.2-3B", false),
    flavor("llama-3.1-8b", "llama3", "8B", "Llama-3.1-8B", false),
    flavor("llama-3.1-70b", "llama3", "70B", "Llama-3.1-70B", false),
    flavor("llama-3.1-405b", "llama3", "405B", "Llama-3.1-405B", false),
    flavor("qwen3-8b", "qwen3", "8B", "Qwen3-8B", false),
    flavor("qwen3-30b-a3b", "qwen3", "30B-A3B", "Qwen3-30B-A3B", true),
    flavor("deepseek-v3", "deepseek_v3", "671B", "DeepSeek-V3", true),
];

const fn flavor(
    preset: &'static str,
    module: &'static str,
    flavor: &'static str,
    hf_dir: &'static str,
    moe: bool,
) -> Flavor {
    Flavor {
        preset,
        module,
        flavor,
        hf_dir,
        moe,
    }
}

/// The module's name: the file is saved as `torchtitan_plan.py`.
const MODULE: &str = "torchtitan_plan";

/// The torchtitan release the module is written for and checked with (its own `ConfigManager`
/// and model build in the reference suite; `tests/reference/requirements-nodeps.txt` pins it).
pub const TORCHTITAN_VERSION: &str = "0.3.0";

/// The dense flavor of the scenario's model, if torchtitan has one.
fn exported_flavor(scen: &Scenario) -> Option<&'static Flavor> {
    match &scen.model {
        ModelChoice::Preset(id) => FLAVORS.iter().find(|f| f.preset == id && !f.moe),
        ModelChoice::Custom(_) => None,
    }
}

fn optimizer_implementation(o: Optimizer) -> Option<&'static str> {
    match o {
        Optimizer::AdamWFused => Some("fused"),
        Optimizer::AdamW => Some("foreach"),
        Optimizer::AdamWForLoop => Some("for-loop"),
        _ => None,
    }
}

/// Why torchtitan 0.3 cannot run `scen` as estimated (checked before the rules the other
/// targets share, which refuse the parallelisms torchtitan has).
pub(super) fn refusal(scen: &Scenario) -> Option<String> {
    let p = &scen.parallel;
    let why = if exported_flavor(scen).is_none() {
        format!(
            "torchtitan builds its own flavors of a few models; of the dense presets: {}",
            FLAVORS
                .iter()
                .filter(|f| !f.moe)
                .map(|f| f.preset)
                .collect::<Vec<_>>()
                .join(", ")
        )
    } else if scen.method != Method::Full || scen.trainer != Trainer::Sft {
        "torchtitan's trainer runs full pre-training and fine-tuning, not adapters or preference and RL objectives".into()
    } else if scen.precision != Precision::AmpBf16 && scen.precision != Precision::Fp32 {
        "torchtitan trains fp32 parameters under FSDP2's bf16 mixed-precision policy, or in fp32; its full-bf16 mode keeps RoPE and the logits in fp32, which this plan does not".into()
    } else if p.data != DataParallel::Fsdp || p.fsdp1 {
        format!(
            "torchtitan 0.3 wraps every layer with FSDP2 (fully_shard; with one data rank it only installs the mixed-precision policy), which this plan's {} is not",
            if p.fsdp1 { "FSDP1" } else { p.data.label() }
        )
    } else if !p.reduce32 && scen.precision == Precision::AmpBf16 {
        "torchtitan 0.3 reduces FSDP2's gradients in fp32 only (mixed_precision_reduce); this plan reduces in bf16".into()
    } else if p.offload_params != p.offload_optimizer || p.offload_params == Offload::Nvme {
        "torchtitan offloads parameters, gradients and optimizer states together, to the CPU (training.enable_cpu_offload)".into()
    } else if matches!(
        scen.checkpointing,
        Checkpointing::Every(_) | Checkpointing::Selective
    ) {
        "torchtitan 0.3 checkpoints every layer whole (full), per op (selective: saves matmul outputs) or by a memory budget; not one layer in k nor attention's internals only".into()
    } else if scen.attention != Attention::Sdpa
        || !matches!(scen.sdpa, SdpaKernel::Auto | SdpaKernel::Flash)
    {
        "torchtitan's language models run flex attention, which saves what SDPA's flash kernel saves: eager, math and memory-efficient attention are other plans".into()
    } else if scen.loss != LossImpl::Hf {
        "torchtitan's ChunkedLossWrapper (8 sequence chunks) is another chunking than the fused linear cross-entropy estimated; its plain CrossEntropyLoss is the transformers-style loss".into()
    } else if optimizer_implementation(scen.optimizer).is_none() {
        format!(
            "torchtitan's optimizers here are AdamW (fused, foreach, for-loop), not {}",
            scen.optimizer.id()
        )
    } else if matches!(scen.fp8, Fp8Recipe::Tensorwise | Fp8Recipe::Te) {
        "torchtitan 0.3's float8 converter has the rowwise recipes only".into()
    } else if scen.runtime.cuda_graphs && p.pipeline > 1 {
        "torchtitan's CUDA graphs do not support pipeline parallelism yet".into()
    } else if scen.act_int8 {
        "int8 activation compression is a custom saved_tensors_hooks pair, not a torchtitan setting"
            .into()
    } else if scen.len_mean > 0 || scen.keep_logits || scen.offload_activations {
        "torchtitan's loader packs every row to seq_len and its loop keeps neither the logits nor saved tensors on the host".into()
    } else if scen.dropout.is_some_and(|d| d > 0.0) {
        "torchtitan's models have no dropout".into()
    } else {
        return None;
    };
    Some(why)
}

/// The module's text and its notes.
pub(super) fn torchtitan_text(_spec: &ModelSpec, scen: &Scenario) -> (String, Vec<String>) {
    let mut notes = vec![format!(
        "Checked with torchtitan {TORCHTITAN_VERSION} and torch {} (Headroom's reference suite parses this module with torchtitan's ConfigManager and builds its model on the meta device)",
        super::CHECKED_WITH
            .iter()
            .find(|(p, _)| *p == "torch")
            .map_or("", |(_, v)| v)
    )];
    notes.push(
        "torchtitan's text loader packs documents back to back into rows of seq_len tokens".into(),
    );
    let Some(&Flavor {
        module,
        flavor,
        hf_dir,
        ..
    }) = exported_flavor(scen)
    else {
        let why = refusal(scen).unwrap_or_default();
        return (format!("# Not offered for this plan: {why}\n"), vec![why]);
    };
    let p = &scen.parallel;
    // FSDP2 over the data ranks (and the context ranks, which torchtitan's mesh folds in).
    let shard = scen.data_parallel();
    // torchtitan splits a rank's local batch into pipeline micro-batches; without a pipeline,
    // accumulation follows from the global batch.
    let local_batch = if p.pipeline > 1 {
        scen.micro_batch * scen.grad_accum
    } else {
        scen.micro_batch
    };
    let mut t = String::new();
    t.push_str(&format!(
        "\"\"\"Headroom's plan as a torchtitan 0.3 job: {}.\n\n",
        summary(scen)
    ));
    let n = nodes(scen);
    let env = if scen.runtime.expandable_segments {
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
    } else {
        ""
    };
    t.push_str(&format!(
        "Save as {MODULE}.py and launch from its directory{}:\n    {env}PYTHONPATH=. torchrun --nnodes={n} --nproc_per_node={} -m torchtitan.train --module {MODULE} --config headroom_plan\n",
        if n > 1 { " on each node (with torchrun's rendezvous flags)" } else { "" },
        scen.gpus / n.max(1)
    ));
    t.push_str(
        "The dataset (c4 here) and the tokenizer's hf_assets_path are yours to set.\n\"\"\"\n",
    );
    t.push_str(&comment_lines(&notes, "# "));
    let mut imports = vec![
        "from torchtitan.components.loss import CrossEntropyLoss",
        "from torchtitan.components.optimizer import default_adamw",
        "from torchtitan.config import CompileConfig, ParallelismConfig, TrainingConfig",
        "from torchtitan.hf_datasets.text_datasets import HuggingFaceTextDataLoader",
        "from torchtitan.models.common.config_utils import decoder_vocab_size",
        "from torchtitan.trainer import Trainer",
    ];
    if scen.checkpointing == Checkpointing::Full {
        imports.push("from torchtitan.distributed.activation_checkpoint import FullAC");
    }
    if scen.fp8 == Fp8Recipe::Rowwise {
        imports.push("from torchtitan.components.quantization import Float8LinearConverter");
    }
    let registry = format!("from torchtitan.models.{module} import model_registry");
    imports.push(&registry);
    imports.sort_unstable();
    for i in imports {
        t.push_str(i);
        t.push('\n');
    }
    t.push_str("\n\ndef headroom_plan() -> Trainer.Config:\n");
    if scen.fp8 == Fp8Recipe::Rowwise {
        t.push_str(
            "    # torchao's float8 rowwise in the decoder layers' Linears (lm_head stays bf16).\n",
        );
        t.push_str(&format!(
            "    model_spec = model_registry(\"{flavor}\", converters=[Float8LinearConverter.Config(recipe_name=\"rowwise\", filter_fqns=[\"lm_head\"])])\n"
        ));
    } else {
        t.push_str(&format!("    model_spec = model_registry(\"{flavor}\")\n"));
    }
    let mp = if scen.precision == Precision::AmpBf16 {
        "bfloat16"
    } else {
        "float32"
    };
    let mut training = format!(
        "local_batch_size={local_batch},\n            global_batch_size={},\n            seq_len={},\n            mixed_precision_param=\"{mp}\",\n            disable_cuda_graphs={},\n",
        scen.global_batch(),
        scen.seq,
        py_bool(!scen.runtime.cuda_graphs)
    );
    if p.offload_params == Offload::Cpu {
        training.push_str("            enable_cpu_offload=True,\n");
    }
    let mut parallelism = format!(
        "data_parallel_shard_degree={shard},\n            data_parallel_replicate_degree=1,\n            tensor_parallel_degree={},\n            enable_sequence_parallel={},\n            context_parallel_degree={},\n            pipeline_parallel_degree={},\n",
        p.tensor,
        py_bool(p.sequence),
        scen.context(),
        p.pipeline
    );
    if p.pipeline > 1 {
        parallelism.push_str(&format!(
            "            pipeline_parallel_schedule=\"1F1B\",\n            pipeline_parallel_microbatch_size={},\n",
            scen.micro_batch
        ));
    }
    let ac = match scen.checkpointing {
        Checkpointing::Full => "FullAC.Config()",
        _ => "None",
    };
    let compile = if scen.runtime.compile {
        "CompileConfig(enable=True, components=[\"model\", \"loss\"])"
    } else {
        "CompileConfig(enable=False)"
    };
    let implementation = optimizer_implementation(scen.optimizer).unwrap_or("fused");
    t.push_str(&format!(
        "    optimizer = default_adamw(lr=3e-4)\n    optimizer.implementation = \"{implementation}\"\n    return Trainer.Config(\n        model_spec=model_spec,\n        hf_assets_path=\"./assets/hf/{hf_dir}\",\n        # The transformers-style loss over the whole logits (fp32 upcast), not the chunked wrapper.\n        loss=CrossEntropyLoss.Config(global_vocab_size=decoder_vocab_size(model_spec)),\n        optimizer=optimizer,\n        dataloader=HuggingFaceTextDataLoader.Config(dataset=\"c4\"),\n        training=TrainingConfig(\n            {training}        ),\n        parallelism=ParallelismConfig(\n            {parallelism}        ),\n        activation_checkpoint={ac},\n        compile={compile},\n    )\n"
    ));
    (t, notes)
}

fn py_bool(b: bool) -> &'static str {
    if b { "True" } else { "False" }
}

#[cfg(test)]
mod tests {
    use super::{FLAVORS, TORCHTITAN_VERSION};

    /// The version the module names is the one the reference suite installs.
    #[test]
    fn the_version_written_is_the_one_pinned() {
        let pins = include_str!("../../../../tests/reference/requirements-nodeps.txt");
        assert!(
            pins.lines()
                .any(|l| l.trim() == format!("torchtitan=={TORCHTITAN_VERSION}")),
            "{pins}"
        );
    }

    /// Every flavor names a preset (the tests embed the configs).
    #[cfg(feature = "embedded-configs")]
    #[test]
    fn every_flavor_is_a_preset() {
        let catalog = crate::catalog::PresetCatalog::builtin();
        for f in FLAVORS {
            assert!(
                catalog.get(f.preset).is_ok(),
                "{} is not a preset",
                f.preset
            );
        }
    }
}
