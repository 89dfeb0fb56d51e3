//! The structural combinations of a search space for one target, each with its allowed
//! micro-batches and its speed bound.

use crate::scenario::{Checkpointing, DataParallel, MAX_GRAD_ACCUM, Offload, Precision, Scenario};

use super::batch::with_batch;
use super::eval::Ctx;
use super::{Keep, SearchSpace, Stack};

/// One structural combination: its scenario (micro-batch and accumulation unset), the allowed
/// micro-batches (ascending) and the tokens per second at each (only at the largest without
/// pipeline parallelism, see [`speed_grows_with_micro_batch`]).
pub(super) struct Combo {
    pub(super) scen: Scenario,
    pub(super) per_replica: u64,
    pub(super) micro_batches: Vec<u32>,
    pub(super) speeds: Vec<f64>,
    pub(super) bound: f64,
}

/// Without pipeline parallelism the time model's throughput never falls as the micro-batch
/// grows at a fixed global batch: larger matrix multiplies run at a higher efficiency, fewer
/// micro-batches mean fewer ZeRO-3/FSDP gathers, and everything else scales with the tokens
/// (checked over the worked examples' search spaces in the planner's tests). The largest
/// micro-batch that fits is then the fastest, and only it needs timing. A pipeline's bubble
/// shrinks with more micro-batches, so there every micro-batch is timed.
fn speed_grows_with_micro_batch(s: &Scenario) -> bool {
    s.parallel.pipeline <= 1
}

/// The scenario's own value when the user keeps it, else every value of the space.
fn pick<T: Copy>(kept: bool, own: T, all: &[T]) -> Vec<T> {
    if kept { vec![own] } else { all.to_vec() }
}

/// Every structural combination of `space` (for one recipe) on top of `base` that `stack` runs,
/// each as the stack runs it.
pub(super) fn combos(
    ctx: &Ctx,
    base: &Scenario,
    global_batch: u64,
    space: &SearchSpace,
    keep: &Keep,
    stack: Stack,
) -> Vec<Combo> {
    let mut out = Vec::new();
    // The pipeline and context-parallel degrees are the scenario's: tensor parallelism and
    // the data-parallel ranks share what they leave.
    let pp = base.parallel.pipeline.max(1) * base.context();
    let node = base.runtime.gpus_per_node();
    let mut precisions = vec![base.precision];
    if base.precision == Precision::Fp32 && !keep.precision {
        // Autocast keeps fp32 weights and states: the same training, in half the activations.
        precisions.push(ctx.half_precision(false));
    }
    // Each kept setting takes the scenario's value instead of the space's values.
    let bp = &base.parallel;
    let tps = pick(keep.tp, bp.tensor, space.tensor_parallel);
    let dps = pick(keep.dp, bp.data, space.data_parallel);
    let offloads = pick(
        keep.offload,
        (bp.offload_optimizer, bp.offload_params),
        space.offload,
    );
    let ckpts = pick(keep.ckpt, base.checkpointing, space.checkpointing);
    // TRL's trainers score log-probabilities through their own fused head, which reads no
    // loss setting: the loss is not a choice there.
    let trl_head = base.trainer != crate::scenario::Trainer::Sft;
    let losses = pick(keep.loss || trl_head, base.loss, space.loss);
    let acts = pick(
        keep.act_offload,
        base.offload_activations,
        space.offload_activations,
    );
    let own_sharding = (bp.data, bp.offload_optimizer, bp.offload_params);
    for tp in tps {
        if (tp > node && tp != bp.tensor)
            || !base.gpus.is_multiple_of(tp * pp)
            || !ctx.spec.heads.is_multiple_of(tp as u64)
            || !ctx.spec.kv_heads.max(1).is_multiple_of(tp as u64)
        {
            continue;
        }
        let d = (base.gpus / (tp * pp)) as u64;
        if !global_batch.is_multiple_of(d) {
            continue;
        }
        let per = global_batch / d;
        let eps = expert_degrees(ctx, base, keep, d);
        let micro_batches = micro_batches(base, per, space, keep);
        if micro_batches.is_empty() {
            continue;
        }
        for &precision in &precisions {
            for &dp in &dps {
                for &(oo, op) in &offloads {
                    // The rules below drop dominated alternatives, never the scenario's own.
                    let own = (dp, oo, op) == own_sharding;
                    if !own && dominated(base, d, dp, (oo, op)) {
                        continue;
                    }
                    for (&ck, &ep) in ckpts.iter().flat_map(|c| eps.iter().map(move |e| (c, e))) {
                        for &loss in &losses {
                            for &act in &acts {
                                if act && ck != Checkpointing::None && !keep.act_offload {
                                    continue;
                                }
                                // FSDP's own settings (FSDP1, the fp32 reduce) go with it.
                                let fsdp = dp == DataParallel::Fsdp;
                                let s = Scenario {
                                    precision,
                                    checkpointing: ck,
                                    loss,
                                    offload_activations: act,
                                    parallel: crate::scenario::Parallel {
                                        data: dp,
                                        tensor: tp,
                                        sequence: if keep.tp { bp.sequence } else { tp > 1 },
                                        offload_optimizer: oo,
                                        offload_params: op,
                                        expert: ep,
                                        fsdp1: bp.fsdp1 && fsdp,
                                        reduce32: bp.reduce32 && fsdp && precision.is_autocast(),
                                        ..base.parallel
                                    },
                                    ..base.clone()
                                };
                                let Some(s) = stack.run_as(&s) else {
                                    continue;
                                };
                                if with_batch(&s, per, micro_batches[0]).validate().is_err() {
                                    continue;
                                }
                                let timed: &[u32] = if speed_grows_with_micro_batch(&s) {
                                    &micro_batches[micro_batches.len() - 1..]
                                } else {
                                    &micro_batches
                                };
                                let speeds: Vec<f64> = timed
                                    .iter()
                                    .map(|&b| ctx.time(&with_batch(&s, per, b)).tokens_per_second)
                                    .collect();
                                let bound = speeds.iter().copied().fold(0.0, f64::max);
                                out.push(Combo {
                                    scen: s,
                                    per_replica: per,
                                    micro_batches: micro_batches.clone(),
                                    speeds,
                                    bound,
                                });
                            }
                        }
                    }
                }
            }
        }
    }
    out
}

/// Expert-parallel degrees for an MoE model on `d` data-parallel ranks.
fn expert_degrees(ctx: &Ctx, base: &Scenario, keep: &Keep, d: u64) -> Vec<u32> {
    let bp = &base.parallel;
    // Expert parallelism for MoE models: degrees that divide the data-parallel ranks and
    // the experts (the scenario's own when the user keeps the model-parallel layout).
    let experts = ctx.spec.moe.as_ref().map_or(0, |m| m.experts);
    if experts == 0 {
        vec![1]
    } else if keep.tp {
        vec![bp.expert]
    } else {
        [1u32, 2, 4, 8]
            .into_iter()
            .filter(|&e| d.is_multiple_of(u64::from(e)) && experts.is_multiple_of(u64::from(e)))
            .collect()
    }
}

/// The micro-batches that divide a replica's `per` sequences (the scenario's own where the
/// user keeps it).
fn micro_batches(base: &Scenario, per: u64, space: &SearchSpace, keep: &Keep) -> Vec<u32> {
    // The trainer's smallest micro-batch (KTO's 2) bounds the candidates from below.
    let least = u64::from(base.trainer.min_micro_batch());
    if keep.batch {
        [base.micro_batch as u64]
            .into_iter()
            .filter(|b| per.is_multiple_of(*b) && per / b <= MAX_GRAD_ACCUM as u64)
            .map(|b| b as u32)
            .collect()
    } else {
        (0..31)
            .map(|k| 1u64 << k)
            .take_while(|b| *b <= per && *b <= space.max_micro_batch as u64)
            .filter(|b| *b >= least)
            .filter(|b| per.is_multiple_of(*b) && per / b <= MAX_GRAD_ACCUM as u64)
            .map(|b| b as u32)
            .collect()
    }
}

/// Whether a sharding and offload on `d` data-parallel ranks is dominated by another plan or
/// is no plan at all (never asked of the scenario's own).
fn dominated(base: &Scenario, d: u64, dp: DataParallel, (oo, op): (Offload, Offload)) -> bool {
    // One-way sharding shards nothing: on one data-parallel GPU, ZeRO and FSDP
    // are only worth their overhead for the offload they enable.
    if d == 1 && dp != DataParallel::Ddp && oo == Offload::None {
        return true;
    }
    // ZeRO-2 offloads the same states with the gradients sharded too, at the
    // same communication: ZeRO-1 with offload is never the better plan.
    if dp == DataParallel::Zero1 && oo != Offload::None {
        return true;
    }
    // FSDP2's CPUOffloadPolicy moves parameters, gradients and optimizer
    // states together: it has no optimizer-only offload.
    if dp == DataParallel::Fsdp && oo != op {
        return true;
    }
    // Offloaded optimizer states are stepped on the CPU (DeepSpeed replaces
    // the optimizer with its CPU Adam); bitsandbytes' 8-bit and paged
    // optimizers step CUDA tensors: no such pair is a plan (AdamW on the CPU
    // would change the training).
    if oo != Offload::None && base.optimizer.is_bitsandbytes() {
        return true;
    }
    false
}
