//! The step time of a run over variable lengths (dynamic padding): each micro-batch is padded
//! to its longest sample, so its time follows that length, and the step's time is the mean over
//! the micro-batches' padded lengths (`estimate::padding::step_lengths`, weighted quantiles of
//! the longest of `micro_batch` samples). Throughput counts the samples' own tokens, padding
//! left out: what a dataset of N tokens takes to train on. With the allocator replay (feature
//! `replay`, which the site leaves out of its download, as it leaves out dynamic padding's
//! replay), a step of one shape otherwise: the longest, `seq`.

#[cfg(feature = "replay")]
use crate::confidence::Confidence;
use crate::scenario::Scenario;
#[cfg(feature = "replay")]
use crate::scenario::padding;

use super::StepTime;
#[cfg(feature = "replay")]
use super::TimeTerm;

/// `time` of `scen`, averaged over its micro-batches' padded lengths when its samples' lengths
/// vary (`len_mean` > 0); `time(scen)` itself otherwise.
pub(super) fn over_lengths(scen: &Scenario, time: &dyn Fn(&Scenario) -> StepTime) -> StepTime {
    #[cfg(feature = "replay")]
    if scen.len_mean > 0 {
        return mean_over_lengths(scen, time);
    }
    time(scen)
}

/// [`over_lengths`] of a run over variable lengths.
#[cfg(feature = "replay")]
fn mean_over_lengths(scen: &Scenario, time: &dyn Fn(&Scenario) -> StepTime) -> StepTime {
    let points = padding::step_lengths(scen);
    let Some(&(first, _)) = points.first() else {
        return time(scen);
    };
    let shape = |seq: u32| Scenario {
        seq,
        len_mean: 0,
        len_sd: 0,
        drop_long: false,
        ..scen.clone()
    };
    let times: Vec<StepTime> = points.iter().map(|&(seq, _)| time(&shape(seq))).collect();
    // The formulas shown are those of the median micro-batch (the points rise with length).
    let mut cumulative = 0.0;
    let at_median = points
        .iter()
        .position(|p| {
            cumulative += p.1;
            cumulative >= 0.5
        })
        .unwrap_or(0);
    let median = points[at_median].0;
    let mut mean = times[at_median].clone();
    mean.terms = mean.terms.into_iter().map(zeroed).collect();
    let (mut hardware, mut model, mut efficiency, mut step) = (0.0, 0.0, 0.0, 0.0);
    let mut confidence = Confidence::Calibrated;
    for (one, &(_, w)) in times.into_iter().zip(&points) {
        hardware += w * one.hardware_flops_per_gpu;
        model += w * one.model_flops_per_gpu;
        efficiency += w * one.matmul_efficiency;
        step += w * one.step_seconds;
        if one.confidence == Confidence::Assumed {
            confidence = Confidence::Assumed;
        }
        for t in one.terms {
            add_term(&mut mean.terms, t, w);
        }
    }
    let last = points.last().map_or(first, |p| p.0);
    for t in mean.terms.iter_mut().filter(|t| !t.formula.is_empty()) {
        t.formula = format!(
            "mean over {} padded micro-batch lengths ({first} to {last} tokens, dynamic padding); at the median {median}: {}",
            points.len(),
            t.formula
        );
    }
    let tokens = f64::from(scen.sequences())
        * padding::mean_kept_length(scen)
        * f64::from(scen.grad_accum)
        * f64::from(scen.data_parallel().max(1));
    let peak = mean.peak_tflops * 1e12;
    let gpus = f64::from(scen.gpus.max(1));
    StepTime {
        hardware_flops_per_gpu: hardware,
        model_flops_per_gpu: model,
        matmul_efficiency: efficiency,
        step_seconds: step,
        tokens_per_step: tokens as u64,
        tokens_per_second: tokens / step,
        tokens_per_second_per_gpu: tokens / step / gpus,
        mfu: model / (step * peak),
        hfu: hardware / (step * peak),
        confidence,
        ..mean
    }
}

/// Adds `w` times `t` to the term of the same id in `terms`, or appends it so weighted.
#[cfg(feature = "replay")]
fn add_term(terms: &mut Vec<TimeTerm>, t: TimeTerm, w: f64) {
    let at = match terms.iter().position(|x| x.id == t.id) {
        Some(i) => i,
        None => {
            terms.push(zeroed(t.clone()));
            terms.len() - 1
        }
    };
    let x = &mut terms[at];
    x.seconds += w * t.seconds;
    x.exposed_seconds += w * t.exposed_seconds;
    x.flops += w * t.flops;
    x.bytes += (w * t.bytes as f64) as u64;
}

/// `t` with its seconds, FLOPs and bytes at zero (its names and text kept), to sum into.
#[cfg(feature = "replay")]
fn zeroed(t: TimeTerm) -> TimeTerm {
    TimeTerm {
        seconds: 0.0,
        exposed_seconds: 0.0,
        flops: 0.0,
        bytes: 0,
        ..t
    }
}
