//! Micro-batch and accumulation: the scenario retargeted to a global batch, and a combination
//! at a given micro-batch.

use crate::error::ScenarioError;
use crate::scenario::{MAX_GRAD_ACCUM, Scenario};

/// The scenario with the target applied: the sequence length, and the accumulation that gives
/// the global batch at the largest micro-batch not above the scenario's that divides it.
pub fn retarget(scen: &Scenario, global_batch: u64, seq: u32) -> Result<Scenario, ScenarioError> {
    let d = scen.data_parallel().max(1) as u64;
    if !global_batch.is_multiple_of(d) {
        let split = if scen.context() > 1 {
            "tp x pp x cp"
        } else {
            "tp x pp"
        };
        return Err(ScenarioError::invalid(
            "global_batch",
            format!(
                "must be a multiple of the data-parallel degree (gpus / ({split}) = {d}), found {global_batch}"
            ),
        ));
    }
    let per = global_batch / d;
    let b = (1..=scen.micro_batch.max(1) as u64)
        .rev()
        .find(|b| per.is_multiple_of(*b))
        .unwrap_or(1);
    let accum = per / b;
    if accum > MAX_GRAD_ACCUM as u64 {
        return Err(ScenarioError::invalid(
            "global_batch",
            format!(
                "needs {accum} accumulation steps at micro-batch {b} on {d} data-parallel GPUs; at most {MAX_GRAD_ACCUM}"
            ),
        ));
    }
    Ok(Scenario {
        seq,
        micro_batch: b as u32,
        grad_accum: accum as u32,
        ..scen.clone()
    })
}

pub(super) fn with_batch(s: &Scenario, per_replica: u64, b: u32) -> Scenario {
    Scenario {
        micro_batch: b,
        grad_accum: (per_replica / b as u64) as u32,
        ..s.clone()
    }
}
