//! Ready-to-run configuration for a scenario (a plan): a DeepSpeed JSON, Hugging Face
//! `TrainingArguments`, an accelerate config, an FSDP2 script, the torchrun command and the
//! environment. A setting a target cannot express (tensor parallelism in the Trainer, say) is
//! said in a comment of the output, or in [`Export::notes`] for JSON, never dropped silently;
//! a plan a target cannot run as estimated (another sharding, tensor parallelism) is not
//! offered for it ([`offered`]). Each file states the library versions it was checked with.
//!
//! Names follow the tools' documentation: DeepSpeed's configuration JSON
//! (<https://www.deepspeed.ai/docs/config-json/>), transformers' `TrainingArguments` and
//! `OptimizerNames` (transformers 5.23, `training_args.py`), accelerate's config file
//! (`accelerate config`; transformers' "Accelerate" docs page), PyTorch's FSDP2
//! (`torch.distributed.fsdp.fully_shard`, `MixedPrecisionPolicy`, `CPUOffloadPolicy`).

mod accelerate;
mod common;
mod deepspeed;
mod fsdp2;
mod hf_yaml;
mod launch;
mod model;
mod names;
mod offer;
pub(crate) mod torchtitan;
mod trainer;
mod trl;
mod versions;

use serde::Serialize;

use crate::error::ScenarioError;
use crate::model::ModelSpec;
use crate::scenario::Scenario;

pub use deepspeed::deepspeed_config;
pub use names::{layer_class, model_path};
pub use offer::{not_expressed, offered};
pub use torchtitan::TORCHTITAN_VERSION;
pub use trainer::trainer_kwargs;
pub use trl::num_generations;
pub use versions::{CHECKED_WITH, checked_with_line};

use accelerate::accelerate_text;
use fsdp2::fsdp2_text;
use launch::{env_text, torchrun_text};
use trainer::trainer_text;

/// What to export.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Target {
    DeepSpeed,
    Trainer,
    Accelerate,
    Fsdp2,
    Torchrun,
    Axolotl,
    LlamaFactory,
    Torchtitan,
    Env,
}

impl Target {
    pub const ALL: [Target; 9] = [
        Target::DeepSpeed,
        Target::Trainer,
        Target::Accelerate,
        Target::Fsdp2,
        Target::Torchrun,
        Target::Axolotl,
        Target::LlamaFactory,
        Target::Torchtitan,
        Target::Env,
    ];

    pub const fn id(self) -> &'static str {
        match self {
            Target::DeepSpeed => "deepspeed",
            Target::Trainer => "trainer",
            Target::Accelerate => "accelerate",
            Target::Fsdp2 => "fsdp2",
            Target::Torchrun => "torchrun",
            Target::Axolotl => "axolotl",
            Target::LlamaFactory => "llamafactory",
            Target::Torchtitan => "torchtitan",
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
            Target::Axolotl => "axolotl.yaml",
            Target::LlamaFactory => "llamafactory.yaml",
            Target::Torchtitan => "torchtitan_plan.py",
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
                        crate::error::shorten(s),
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
        Target::Axolotl => hf_yaml::axolotl_text(spec, scen),
        Target::LlamaFactory => hf_yaml::llamafactory_text(spec, scen),
        Target::Torchtitan => torchtitan::torchtitan_text(spec, scen),
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
