//! What the user asks of the planner besides the scenario: the target, the settings to keep,
//! the cost inputs, and their validation.

use serde::Serialize;

use crate::error::ScenarioError;
use crate::scenario::MAX_SEQ;

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
