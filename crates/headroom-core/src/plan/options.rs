//! What the user asks of the planner besides the scenario: the target, the settings to keep,
//! the cost inputs, and their validation.

use serde::Serialize;

use crate::error::ScenarioError;
use crate::export::{Target, not_expressed};
use crate::scenario::{DataParallel, MAX_SEQ, Scenario};

/// Settings the user keeps as in the scenario (the changes the planner may not make), e.g. the
/// tensor-parallel degree when the training runs under the Trainer, which has no tensor
/// parallelism.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Keep {
    pub dp: bool,
    pub tp: bool,
    /// Optimizer and parameter offload.
    pub offload: bool,
    pub ckpt: bool,
    /// Micro-batch (and so the accumulation).
    pub batch: bool,
    pub loss: bool,
    pub act_offload: bool,
    pub precision: bool,
}

impl Keep {
    /// The names `parse` accepts.
    pub const NAMES: [&'static str; 8] = [
        "dp",
        "tp",
        "offload",
        "ckpt",
        "batch",
        "loss",
        "act_offload",
        "precision",
    ];

    /// Parses a comma-separated list of [`Keep::NAMES`].
    pub fn parse(field: &str, s: &str) -> Result<Keep, ScenarioError> {
        let mut k = Keep::default();
        for name in s.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let flag = match name {
                "dp" => &mut k.dp,
                "tp" => &mut k.tp,
                "offload" => &mut k.offload,
                "ckpt" => &mut k.ckpt,
                "batch" => &mut k.batch,
                "loss" => &mut k.loss,
                "act_offload" => &mut k.act_offload,
                "precision" => &mut k.precision,
                _ => {
                    return Err(ScenarioError::invalid(
                        field,
                        format!(
                            "unknown setting `{}`; allowed: {}",
                            crate::error::shorten(name),
                            Keep::NAMES.join(", ")
                        ),
                    ));
                }
            };
            *flag = true;
        }
        Ok(k)
    }

    /// Whether a change of `field` (a link key, as in [`Change`](super::Change)) is allowed.
    pub fn allows(&self, field: &str) -> bool {
        !match field {
            "dp" => self.dp,
            "tp" | "sp" | "ep" => self.tp,
            "opt_offload" | "param_offload" => self.offload,
            "ckpt" => self.ckpt,
            "batch" | "accum" => self.batch,
            "loss" => self.loss,
            "act_offload" => self.act_offload,
            "precision" => self.precision,
            _ => false,
        }
    }
}

/// The training stack the plans must run on. A stack runs a plan when a file Headroom writes for
/// it expresses the plan as estimated ([`not_expressed`]): the offer rules of the exports are the
/// planner's rules, so every plan listed can be exported for the stack asked.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub enum Stack {
    /// Every plan, also those no file expresses (tensor parallelism with ZeRO, selective
    /// recompute: Megatron-LM's settings, which only `env.sh` carries).
    Any,
    /// Plans at least one stack runs.
    #[default]
    Runs,
    /// Plans this export's file runs: the Trainer (with accelerate, DeepSpeed or FSDP), a
    /// DeepSpeed JSON, the FSDP2 script, axolotl, LLaMA-Factory or torchtitan ([`Stack::STACKS`],
    /// which users pick from), or accelerate's config or launch.sh (the CLI's `--export`).
    Only(Target),
}

impl Stack {
    /// The stacks a user picks from, each by the export that writes its file (accelerate's
    /// config and launch.sh are launchers of the Trainer's script; env.sh runs nothing by itself).
    pub const STACKS: [Target; 6] = [
        Target::Trainer,
        Target::DeepSpeed,
        Target::Fsdp2,
        Target::Axolotl,
        Target::LlamaFactory,
        Target::Torchtitan,
    ];

    /// The names `parse` accepts.
    pub fn names() -> Vec<&'static str> {
        let mut n = vec!["runs", "any"];
        n.extend(Stack::STACKS.map(Target::id));
        n
    }

    pub fn id(self) -> &'static str {
        match self {
            Stack::Any => "any",
            Stack::Runs => "runs",
            Stack::Only(t) => t.id(),
        }
    }

    /// `runs`, `any` or a stack's export id.
    pub fn parse(field: &str, s: &str) -> Result<Stack, ScenarioError> {
        match s.trim() {
            "any" => Ok(Stack::Any),
            "runs" => Ok(Stack::Runs),
            t => Stack::STACKS
                .into_iter()
                .find(|x| x.id() == t)
                .map(Stack::Only)
                .ok_or_else(|| {
                    ScenarioError::invalid(
                        field,
                        format!(
                            "unknown stack `{}`; allowed: {}",
                            crate::error::shorten(t),
                            Stack::names().join(", ")
                        ),
                    )
                }),
        }
    }

    /// The stacks that run `s` as estimated, by export id.
    pub fn running(s: &Scenario) -> Vec<&'static str> {
        Stack::STACKS
            .into_iter()
            .filter(|&t| not_expressed(s, t).is_none())
            .map(Target::id)
            .collect()
    }

    /// `s` as this stack runs it: `s` itself, or `s` with the settings the stack fixes (the
    /// dtype FSDP reduces gradients in: fp32 in torchtitan 0.3, the compute dtype under
    /// accelerate's policy); `None` when the stack does not run it either way.
    pub fn run_as(self, s: &Scenario) -> Option<Scenario> {
        let runs = |t: Target, x: &Scenario| not_expressed(x, t).is_none();
        match self {
            Stack::Any => Some(s.clone()),
            Stack::Only(t) => [s.clone(), fixed_by(t, s)].into_iter().find(|x| runs(t, x)),
            Stack::Runs => {
                if Stack::STACKS.iter().any(|&t| runs(t, s)) {
                    return Some(s.clone());
                }
                Stack::STACKS.into_iter().find_map(|t| {
                    let x = fixed_by(t, s);
                    runs(t, &x).then_some(x)
                })
            }
        }
    }
}

/// `s` with the FSDP gradient-reduction dtype `stack` fixes: torchtitan 0.3 reduces in fp32
/// (`mixed_precision_reduce`, its only choice); accelerate's policy (the Trainer, axolotl,
/// LLaMA-Factory) in the compute dtype; the FSDP2 script writes either.
fn fixed_by(stack: Target, s: &Scenario) -> Scenario {
    let mut x = s.clone();
    let fsdp_amp = x.parallel.data == DataParallel::Fsdp && x.precision.is_autocast();
    match stack {
        Target::Torchtitan if fsdp_amp => {
            x.parallel.reduce32 = true;
            x.parallel.fsdp1 = false;
        }
        Target::Trainer
        | Target::Accelerate
        | Target::Torchrun
        | Target::Axolotl
        | Target::LlamaFactory
        | Target::DeepSpeed => {
            x.parallel.reduce32 = false;
        }
        _ => {}
    }
    x
}

/// What the user asks for besides the scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanOptions {
    /// Sequences per optimizer step over all GPUs; `None` keeps the scenario's.
    pub global_batch: Option<u64>,
    /// Sequence length; `None` keeps the scenario's.
    pub seq: Option<u32>,
    /// Also search recipes that change what is trained (precision of the weights, optimizer,
    /// LoRA/QLoRA); they are ranked in their own list.
    pub allow_training_changes: bool,
    /// Tokens to train on, for the time and GPU-hours of each plan.
    pub tokens: Option<f64>,
    /// Price of one GPU-hour, given by the user (Headroom keeps no price list).
    pub price_per_gpu_hour: Option<f64>,
    /// Plans kept per list.
    pub max_plans: usize,
    /// Settings kept as in the scenario.
    pub keep: Keep,
    /// The stack the plans must run on.
    pub stack: Stack,
}

impl Default for PlanOptions {
    fn default() -> Self {
        PlanOptions {
            global_batch: None,
            seq: None,
            allow_training_changes: false,
            tokens: None,
            price_per_gpu_hour: None,
            max_plans: 10,
            keep: Keep::default(),
            stack: Stack::default(),
        }
    }
}

/// Largest global batch accepted (more sequences per step than any published run uses).
pub const MAX_GLOBAL_BATCH: u64 = 1 << 30;
/// Largest token count accepted (100x the largest published pre-training runs).
pub const MAX_TOKENS: f64 = 1e15;

impl PlanOptions {
    /// Checks ranges; every message names the field as the CLI's flags do.
    pub fn validate(&self) -> Result<(), ScenarioError> {
        if let Some(g) = self.global_batch
            && !(1..=MAX_GLOBAL_BATCH).contains(&g)
        {
            return Err(ScenarioError::invalid(
                "global_batch",
                format!("must be an integer from 1 to {MAX_GLOBAL_BATCH}, found {g}"),
            ));
        }
        if let Some(s) = self.seq
            && !(1..=MAX_SEQ).contains(&s)
        {
            return Err(ScenarioError::invalid(
                "seq",
                format!("must be an integer from 1 to {MAX_SEQ}, found {s}"),
            ));
        }
        if let Some(t) = self.tokens
            && !(t.is_finite() && (1.0..=MAX_TOKENS).contains(&t))
        {
            return Err(ScenarioError::invalid(
                "tokens",
                format!("must be a number from 1 to {MAX_TOKENS:e}, found {t}"),
            ));
        }
        if let Some(p) = self.price_per_gpu_hour
            && !(p.is_finite() && (0.0..=1e6).contains(&p))
        {
            return Err(ScenarioError::invalid(
                "price_per_gpu_hour",
                format!("must be a number from 0 to 1000000, found {p}"),
            ));
        }
        if !(1..=1000).contains(&self.max_plans) {
            return Err(ScenarioError::invalid(
                "max_plans",
                format!(
                    "must be an integer from 1 to 1000, found {}",
                    self.max_plans
                ),
            ));
        }
        Ok(())
    }
}
