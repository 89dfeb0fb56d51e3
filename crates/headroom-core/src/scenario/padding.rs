//! Dynamic padding: which step shapes a run over variable sample lengths reaches, for the
//! allocator replay and for the time model.
//!
//! Padded to its longest sample, each micro-batch has its own length. PyTorch's caching
//! allocator keeps every block it reserved; a shorter step reuses the cached blocks of a longer
//! one, but a step longer than every earlier one (a record) needs blocks larger than any cached
//! and reserves new segments for them, keeping the old ones. So reserved grows at each record
//! and at no other step: measured on an H200 from a run's first step
//! (tests/reference/gpu/h200/varlen: Qwen-1 1.8B LoRA, checkpointed, max_length 2048, records
//! at 875, 1,099, 1,217, 1,611, 2,043 and 2,047 tokens reserved 5.50, 7.37, 9.44, 12.17, 15.65 and
//! 19.13 GiB, where the allocated peak stayed 7.2 GiB; other steps left reserved unchanged).
//! Replaying the record lengths in order through the allocator model gives the run's reserved.
//!
//! Which records a run meets is chance. The lengths are drawn log-normal with the stated mean
//! and spread; a step's padded length is the longest of its micro-batch's samples. Over `n`
//! micro-batches the expected number of records is the harmonic number H(n) (about ln n +
//! 0.58), and the j-th record's `-ln(1 - G(length))` (G the step length's distribution) is a
//! sum of j unit exponentials, whose median is about j - 1/3: the replay takes the records at
//! those medians, over [`HORIZON`] micro-batches. Runs with other first steps differ: three
//! seeds of the same run met 2, 3 and 5 records in their first 50 steps.
//!
//! `sequence::replay_run` replays those shapes in order, each its own prepared step, where one
//! shape would run three steps. `tests/padding.rs` checks each record's level against fourteen H200
//! runs over variable lengths (`tests/reference/gpu/h200/varlen/`). For the time model it gives a
//! micro-batch's padded length at 32 weighted quantiles and the kept samples' mean length
//! (`step_lengths`, `mean_kept_length`).

use crate::scenario::Scenario;

/// Micro-batches whose records are replayed (a run of a few hours; reserved keeps growing
/// slowly, with the logarithm of the steps, as records get rarer).
pub const HORIZON: u64 = 1000;

/// The log-normal's parameters (mu, sigma) for a mean and standard deviation in tokens.
fn log_normal(mean: f64, sd: f64) -> (f64, f64) {
    let var = libm::log(1.0 + (sd / mean) * (sd / mean));
    (libm::log(mean) - var / 2.0, var.sqrt())
}

/// The standard normal's distribution function.
fn normal_cdf(z: f64) -> f64 {
    0.5 * libm::erfc(-z / std::f64::consts::SQRT_2)
}

/// The standard normal's quantile (P. J. Acklam's rational approximation, relative error below
/// 1.2e-9 over (0, 1)).
fn probit(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969683028665376e1,
        2.209460984245205e2,
        -2.759285104469687e2,
        1.383_577_518_672_69e2,
        -3.066479806614716e1,
        2.506628277459239,
    ];
    const B: [f64; 5] = [
        -5.447609879822406e1,
        1.615858368580409e2,
        -1.556989798598866e2,
        6.680131188771972e1,
        -1.328068155288572e1,
    ];
    const C: [f64; 6] = [
        -7.784894002430293e-3,
        -3.223964580411365e-1,
        -2.400758277161838,
        -2.549732539343734,
        4.374664141464968,
        2.938163982698783,
    ];
    const D: [f64; 4] = [
        7.784695709041462e-3,
        3.224671290700398e-1,
        2.445134137142996,
        3.754408661907416,
    ];
    let p = p.clamp(1e-300, 1.0 - 1e-16);
    let tail = |q: f64| {
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    if p < 0.02425 {
        tail((-2.0 * libm::log(p)).sqrt())
    } else if p > 1.0 - 0.02425 {
        -tail((-2.0 * libm::log(1.0 - p)).sqrt())
    } else {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    }
}

/// The share of samples no longer than `seq` (1 with one shape or no spread below it).
pub fn kept_share(scen: &Scenario) -> f64 {
    if scen.len_mean == 0 {
        return 1.0;
    }
    if scen.len_sd == 0 {
        return if scen.len_mean <= scen.seq { 1.0 } else { 0.0 };
    }
    let (mu, sigma) = log_normal(scen.len_mean as f64, scen.len_sd as f64);
    normal_cdf((libm::log(scen.seq as f64) - mu) / sigma)
}

/// Whether fewer than one sample in 10,000 is at most `seq` long (a setting that drops the
/// longer ones would keep none): `seq` below the distribution's 0.01% quantile, in log space
/// so the site's validation needs no error function.
pub fn almost_none_kept(scen: &Scenario) -> bool {
    if scen.len_mean == 0 || scen.len_sd == 0 {
        return scen.len_mean > scen.seq;
    }
    let (mu, sigma) = log_normal(scen.len_mean as f64, scen.len_sd as f64);
    // probit(1e-4) = -3.7190.
    libm::log(scen.seq as f64) < mu - 3.719_016 * sigma
}

/// The sample length at quantile `u` of what the trainer keeps: a longer sample cut to `seq`,
/// or dropped (the quantile then ranges over the kept samples only).
fn sample_quantile(scen: &Scenario, u: f64) -> f64 {
    let seq = scen.seq as f64;
    if scen.len_sd == 0 {
        return (scen.len_mean as f64).min(seq);
    }
    let (mu, sigma) = log_normal(scen.len_mean as f64, scen.len_sd as f64);
    let u = if scen.drop_long {
        u * kept_share(scen)
    } else {
        u
    };
    libm::exp(mu + sigma * probit(u)).min(seq)
}

/// Points of the midpoint rule over a distribution's quantiles: enough that the mean step
/// time and the mean kept length move by well under 1% with more (checked in the tests).
pub const TIME_POINTS: u32 = 32;

/// A micro-batch's padded length (the longest of its `micro_batch` samples) at
/// [`TIME_POINTS`] quantiles with their weights (summing to 1), rounded to tokens: the shapes
/// whose weighted mean time is a variable-length run's step time. The quantiles crowd towards
/// the top (`u = 1 - (1 - v)^2` over the midpoints `v`), where the long tail's few steps take
/// the most time. Empty with one shape (`len_mean` 0).
pub fn step_lengths(scen: &Scenario) -> Vec<(u32, f64)> {
    if scen.len_mean == 0 {
        return Vec::new();
    }
    let batch = scen.micro_batch.max(1) as f64;
    let n = TIME_POINTS as f64;
    let points: Vec<(u32, f64)> = (0..TIME_POINTS)
        .map(|k| {
            let v = (k as f64 + 0.5) / n;
            let u = 1.0 - (1.0 - v) * (1.0 - v);
            let length = libm::round(sample_quantile(scen, libm::pow(u, 1.0 / batch)))
                .clamp(1.0, scen.seq as f64) as u32;
            (length, 2.0 * (1.0 - v))
        })
        .collect();
    let total: f64 = points.iter().map(|p| p.1).sum();
    points.into_iter().map(|(l, w)| (l, w / total)).collect()
}

/// The mean length of a kept sample in tokens (cut to `seq`, or over the samples not
/// dropped): the real tokens a sequence carries, padding left out. `seq` with one shape.
pub fn mean_kept_length(scen: &Scenario) -> f64 {
    if scen.len_mean == 0 {
        return scen.seq as f64;
    }
    let n = 8 * TIME_POINTS;
    (0..n)
        .map(|k| sample_quantile(scen, (k as f64 + 0.5) / n as f64))
        .sum::<f64>()
        / n as f64
}

/// The padded lengths at which a run over variable lengths reserves more (its records, in
/// order), over `draws` micro-batches; empty with one shape (`len_mean` 0).
pub fn records(scen: &Scenario, draws: u64) -> Vec<u32> {
    if scen.len_mean == 0 {
        return Vec::new();
    }
    let expected = (1..=draws.max(1)).map(|k| 1.0 / k as f64).sum::<f64>();
    let count = (expected.round() as u64).max(1);
    let batch = scen.micro_batch.max(1) as f64;
    let mut out: Vec<u32> = Vec::new();
    for j in 1..=count {
        let j = j as f64;
        // The median of a Gamma(j, 1) variable (j - 1/3 + 8/(405 j)), as a quantile of the
        // step's length, then of one sample's (the longest of `batch`).
        let gamma = j - 1.0 / 3.0 + 8.0 / (405.0 * j);
        let step_quantile = 1.0 - libm::exp(-gamma);
        let length = libm::round(sample_quantile(scen, libm::pow(step_quantile, 1.0 / batch)))
            .clamp(1.0, scen.seq as f64) as u32;
        if out.last().is_none_or(|&last| length > last) {
            out.push(length);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn padded(mean: u32, sd: u32, seq: u32, batch: u32, drop: bool) -> Scenario {
        Scenario {
            seq,
            micro_batch: batch,
            len_mean: mean,
            len_sd: sd,
            drop_long: drop,
            ..Scenario::default()
        }
    }

    #[test]
    fn probit_inverts_the_normal_distribution() {
        for p in [1e-6f64, 0.01, 0.1, 0.3, 0.5, 0.7, 0.9, 0.99, 1.0 - 1e-6] {
            let tail = p.min(1.0 - p);
            assert!((normal_cdf(probit(p)) - p).abs() < 5e-8 * tail, "{p}");
        }
        // Tables: the 97.5% quantile is 1.959964.
        assert!((probit(0.975) - 1.959_964).abs() < 1e-6);
    }

    #[test]
    fn one_shape_has_no_records() {
        assert!(records(&Scenario::default(), HORIZON).is_empty());
    }

    /// H(1000) = 7.49: seven records, rising; the last one near the top of what is kept.
    #[test]
    fn records_rise_towards_the_longest_kept_sample() {
        // ms-swift's benchmark data (3234 +- 2548 tokens), long samples dropped at 2048.
        let r = records(&padded(3234, 2548, 2048, 1, true), HORIZON);
        assert_eq!(r.len(), 7, "{r:?}");
        assert!(r.windows(2).all(|w| w[0] < w[1]), "{r:?}");
        assert!(r[0] > 1000 && r[0] < 1600, "{r:?}");
        assert!(
            *r.last().expect("a record") > 2030 && *r.last().expect("a record") < 2048,
            "{r:?}"
        );
    }

    /// Cut at seq, 62% of these samples are seq long: the second record is seq and the last.
    #[test]
    fn cut_samples_reach_seq_and_stop() {
        let r = records(&padded(3234, 2548, 2048, 1, false), HORIZON);
        assert_eq!(r, vec![2048], "{r:?}");
        let short = records(&padded(400, 300, 4096, 1, false), HORIZON);
        assert!(
            short.len() > 3 && *short.last().expect("a record") < 4096,
            "{short:?}"
        );
    }

    /// The replay's reserved grows with the sum of the records' lengths (each adds its own
    /// logits-sized blocks): the median records' sum against the mean over 2,000 simulated runs
    /// (a xorshift generator and Box-Muller normals). It is 0.4% to 13.4% under here: a whole
    /// number of records stands for H(n) of them (7 for 7.49 at 1,000 steps, 4 for 4.50 at 50).
    #[test]
    fn the_median_records_sum_as_simulated_runs_do() {
        for (scen, n) in [
            (padded(3234, 2548, 2048, 1, true), 50),
            (padded(3234, 2548, 2048, 1, true), 1000),
            (padded(3234, 2548, 4096, 1, true), 1000),
            (padded(400, 300, 4096, 1, false), 1000),
            (padded(400, 300, 4096, 4, false), 1000),
        ] {
            let mut sample = simulated_samples(&scen);
            let runs = 2000;
            let mut total = 0.0;
            for _ in 0..runs {
                let mut longest = 0.0;
                for _ in 0..n {
                    let step = (0..scen.micro_batch).map(|_| sample()).fold(0.0, f64::max);
                    if step > longest {
                        total += step;
                        longest = step;
                    }
                }
            }
            let simulated = total / runs as f64;
            let median: f64 = records(&scen, n).iter().map(|&l| l as f64).sum();
            let err = median / simulated - 1.0;
            assert!(
                err.abs() < 0.15,
                "{n} steps: {median} against {simulated} ({err:+.3})"
            );
        }
    }

    /// Sample lengths drawn as a trainer meets them (a xorshift generator and Box-Muller
    /// normals; longer samples cut to `seq` or drawn again when dropped).
    fn simulated_samples(scen: &Scenario) -> impl FnMut() -> f64 {
        let (mu, sigma) = log_normal(scen.len_mean as f64, scen.len_sd as f64);
        let (seq, drop) = (scen.seq as f64, scen.drop_long);
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut uniform = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            ((state >> 11) as f64 + 0.5) / (1u64 << 53) as f64
        };
        move || loop {
            let z = (-2.0 * libm::log(uniform())).sqrt()
                * libm::cos(2.0 * std::f64::consts::PI * uniform());
            let x = libm::round(libm::exp(mu + sigma * z));
            if x <= seq {
                return x;
            }
            if !drop {
                return seq;
            }
        }
    }

    /// The time model's quadrature against 200,000 simulated micro-batches: the mean padded
    /// length (the mean of `step_lengths`) and the mean kept length within 1%, and the mean
    /// square of the padded length (attention's quadratic term) within 2%.
    #[test]
    fn time_points_average_as_simulated_micro_batches_do() {
        for scen in [
            padded(3234, 2548, 512, 1, true),
            padded(3234, 2548, 2048, 1, true),
            padded(3234, 2548, 8192, 1, true),
            padded(3234, 2548, 2048, 8, true),
            padded(400, 300, 4096, 4, false),
            padded(1200, 900, 2048, 1, false),
        ] {
            let mut sample = simulated_samples(&scen);
            let n = 200_000;
            let (mut len, mut step, mut square) = (0.0, 0.0, 0.0);
            for _ in 0..n {
                let mut longest: f64 = 0.0;
                for _ in 0..scen.micro_batch {
                    let x = sample();
                    len += x;
                    longest = longest.max(x);
                }
                step += longest;
                square += longest * longest;
            }
            let n = n as f64;
            let points = step_lengths(&scen);
            assert_eq!(points.len(), TIME_POINTS as usize);
            let mean =
                |f: &dyn Fn(f64) -> f64| points.iter().map(|&(l, w)| w * f(l as f64)).sum::<f64>();
            let what = format!(
                "{} +- {} at {} x {}",
                scen.len_mean, scen.len_sd, scen.micro_batch, scen.seq
            );
            let e = mean(&|l| l) / (step / n) - 1.0;
            assert!(e.abs() < 0.01, "padded length {what}: {e:+.4}");
            let e = mean(&|l| l * l) / (square / n) - 1.0;
            assert!(e.abs() < 0.02, "its square {what}: {e:+.4}");
            let e = mean_kept_length(&scen) / (len / (n * scen.micro_batch as f64)) - 1.0;
            assert!(e.abs() < 0.01, "kept length {what}: {e:+.4}");
        }
        assert!(step_lengths(&Scenario::default()).is_empty());
        assert_eq!(
            mean_kept_length(&Scenario::default()),
            Scenario::default().seq as f64
        );
    }

    /// A micro-batch of four is padded to the longest of four samples: longer records.
    #[test]
    fn larger_micro_batches_pad_longer() {
        let one = records(&padded(400, 300, 4096, 1, false), HORIZON);
        let four = records(&padded(400, 300, 4096, 4, false), HORIZON);
        assert!(four[0] > one[0], "{one:?} {four:?}");
    }

    #[test]
    fn kept_share_is_the_distribution_below_seq() {
        let s = padded(3234, 2548, 2048, 1, true);
        // ln 2048 = 7.625, mu = 7.840, sigma = 0.695: z = -0.310, 37.8%.
        assert!((kept_share(&s) - 0.378).abs() < 0.002, "{}", kept_share(&s));
        assert_eq!(kept_share(&Scenario::default()), 1.0);
        // The validation's shortcut agrees with the distribution at its threshold.
        assert!((probit(1e-4) + 3.719_016).abs() < 1e-5);
        let none = padded(100_000, 1000, 2048, 1, true);
        assert!(almost_none_kept(&none) && kept_share(&none) < 1e-4);
        assert!(!almost_none_kept(&s));
    }
}
