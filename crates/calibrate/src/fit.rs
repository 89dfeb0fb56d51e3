//! Fits the core's runtime constants to measured training steps, using the core itself as the
//! model: whatever `estimate_with` computes, the constants are chosen so its three peaks
//! (allocated, reserved, device) match the measurements of the training part of the grid.

pub use headroom_core::calibration::schema::{ErrorTable, LevelError, Levels, WorkspaceProbe};
use headroom_core::model::ModelSpec;
use headroom_core::{Calibration, Gpu, Scenario, estimate_with};

use crate::stats::median;

const MIB: f64 = (1u64 << 20) as f64;

/// One measured scenario, ready for the core.
#[derive(Debug, Clone)]
pub struct Sample {
    pub id: String,
    pub spec: ModelSpec,
    pub scenario: Scenario,
    pub measured: Levels,
}

/// The core's peaks for `s` with `cal`.
pub fn predict(s: &Sample, gpu: &Gpu, cal: &Calibration) -> Levels {
    let e = estimate_with(&s.spec, gpu, cal, &s.scenario);
    Levels {
        allocated: e.bytes.peak_allocated,
        reserved: e.bytes.peak_reserved,
        device: e.bytes.peak_device,
    }
}

/// The fitted constants and a sentence per constant saying where each came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Fitted {
    pub calibration: Calibration,
    pub notes: Vec<(String, String)>,
}

/// Fits workspaces (allocated level), both slack fractions (reserved level) and the context
/// (device level), in that order, on `train`, starting from `start` (usually the defaults).
pub fn fit(
    train: &[Sample],
    gpu: &Gpu,
    start: &Calibration,
    probe: Option<WorkspaceProbe>,
) -> Fitted {
    let mut cal = start.clone();
    let mut notes = Vec::new();
    let n = train.len();
    if n == 0 {
        for f in [
            "cublas_workspace_bytes",
            "reserved_slack_fraction",
            "reserved_slack_fraction_expandable",
            "cuda_context_bytes",
        ] {
            notes.push((
                f.to_string(),
                "not fitted: no measured training scenarios".into(),
            ));
        }
        return Fitted {
            calibration: cal,
            notes,
        };
    }

    // 1. Workspaces: the allocated peak moves one for one with them, so the median residual
    //    with none is their total.
    let mut none = cal.clone();
    none.cublas_workspaces = 0;
    let residuals: Vec<f64> = train
        .iter()
        .map(|s| s.measured.allocated as f64 - predict(s, gpu, &none).allocated as f64)
        .collect();
    let total = median(&residuals).max(0.0);
    let count = probe
        .map_or(cal.cublas_workspaces, |p| p.count)
        .clamp(1, 64);
    cal.cublas_workspaces = count;
    cal.cublas_workspace_bytes = round_to((total / count as f64) as u64, 512);
    notes.push((
        "cublas_workspace_bytes".into(),
        format!(
            "median allocated-peak residual with no workspaces over {n} training scenarios ({:.1} MiB), split over {count} workspaces{}",
            total / MIB,
            match probe {
                Some(p) => format!(
                    " (count from the workspace probe, which measured {:.1} MiB each)",
                    p.bytes as f64 / MIB
                ),
                None => " (the default count)".into(),
            }
        ),
    ));
    notes.push((
        "cublas_workspaces".into(),
        match probe {
            Some(_) => {
                "counted by the workspace probe (allocations after a forward and backward)".into()
            }
            None => "default (no workspace probe)".into(),
        },
    ));

    // 2. Slack fractions: one-dimensional searches on the reserved peak's relative error.
    for expandable in [false, true] {
        let rows: Vec<&Sample> = train
            .iter()
            .filter(|s| s.scenario.runtime.expandable_segments == expandable)
            .collect();
        let field = if expandable {
            "reserved_slack_fraction_expandable"
        } else {
            "reserved_slack_fraction"
        };
        if rows.is_empty() {
            notes.push((
                field.into(),
                "not fitted: no training scenarios with this allocator setting; default kept"
                    .into(),
            ));
            continue;
        }
        // The slack fraction stands in for the allocator replay where the core cannot replay
        // a step: fitted here with the replay off, on every run.
        let err = |f: f64| {
            let mut c = cal.clone();
            c.replay = false;
            set_slack(&mut c, expandable, f);
            rows.iter()
                .map(|s| rel_err(predict(s, gpu, &c).reserved, s.measured.reserved).abs())
                .sum::<f64>()
                / rows.len() as f64
        };
        let best = search(&err, 0.0, 1.0);
        set_slack(&mut cal, expandable, best);
        notes.push((
            field.into(),
            format!(
                "minimizes the mean relative error of the reserved peak over {} training scenarios{}",
                rows.len(),
                if expandable { " with expandable_segments:True" } else { " with the default allocator" }
            ),
        ));
    }

    // 3. Context: device = reserved + context (one GPU, no NCCL), both measured, so the
    //    median of their difference: a runtime constant, whatever the core predicts reserved.
    let residuals: Vec<f64> = train
        .iter()
        .map(|s| s.measured.device as f64 - s.measured.reserved as f64)
        .collect();
    let ctx = median(&residuals).max(0.0);
    cal.cuda_context_bytes = round_to(ctx as u64, 1 << 20);
    notes.push((
        "cuda_context_bytes".into(),
        format!("median of the measured device level (process memory in NVML) minus the measured reserved peak over {n} training scenarios"),
    ));
    Fitted {
        calibration: cal,
        notes,
    }
}

fn set_slack(c: &mut Calibration, expandable: bool, f: f64) {
    if expandable {
        c.reserved_slack_fraction_expandable = f;
    } else {
        c.reserved_slack_fraction = f;
    }
}

fn round_to(x: u64, to: u64) -> u64 {
    (x + to / 2) / to * to
}

/// Relative error of a prediction (positive: over-estimate).
pub fn rel_err(predicted: u64, measured: u64) -> f64 {
    if measured == 0 {
        return 0.0;
    }
    (predicted as f64 - measured as f64) / measured as f64
}

/// Coarse-to-fine grid search for the minimum of `f` on `[lo, hi]`, to a step of 1e-4.
pub fn search(f: &dyn Fn(f64) -> f64, lo: f64, hi: f64) -> f64 {
    let (mut lo, mut hi) = (lo, hi);
    let mut best = lo;
    for _ in 0..4 {
        let step = (hi - lo) / 20.0;
        let mut best_err = f64::INFINITY;
        for i in 0..=20 {
            let x = lo + step * i as f64;
            let e = f(x);
            if e < best_err {
                best_err = e;
                best = x;
            }
        }
        let (l, h) = ((best - step).max(lo), (best + step).min(hi));
        lo = l;
        hi = h;
    }
    (best * 10_000.0).round() / 10_000.0
}

/// Errors of `cal`'s predictions on `rows`.
pub fn errors(rows: &[Sample], gpu: &Gpu, cal: &Calibration) -> ErrorTable {
    let preds: Vec<(Levels, Levels)> = rows
        .iter()
        .map(|s| (predict(s, gpu, cal), s.measured))
        .collect();
    let level = |pick: fn(&Levels) -> u64| {
        let e: Vec<f64> = preds
            .iter()
            .map(|(p, m)| 100.0 * rel_err(pick(p), pick(m)))
            .collect();
        let abs: Vec<f64> = e.iter().map(|x| x.abs()).collect();
        let n = e.len().max(1) as f64;
        LevelError {
            rows: e.len(),
            mean_abs_pct: round2(abs.iter().sum::<f64>() / n),
            median_abs_pct: round2(median(&abs)),
            max_abs_pct: round2(abs.iter().copied().fold(0.0, f64::max)),
            mean_signed_pct: round2(e.iter().sum::<f64>() / n),
        }
    };
    ErrorTable {
        allocated: level(|l| l.allocated),
        reserved: level(|l| l.reserved),
        device: level(|l| l.device),
    }
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // In tests a panic is the failure report.
mod tests {
    use super::*;
    use crate::grid::grid;
    use headroom_core::GpuCatalog;

    const MIB: u64 = 1 << 20;

    fn truth(gpu: &Gpu) -> Calibration {
        let mut c = Calibration::assumed(gpu);
        c.cuda_context_bytes = 611 * MIB;
        c.cublas_workspace_bytes = 32 * MIB;
        c.cublas_workspaces = 3;
        c.reserved_slack_fraction = 0.137;
        c.reserved_slack_fraction_expandable = 0.021;
        // The synthetic measurements' reserved level is the slack fraction's.
        c.replay = false;
        c
    }

    /// Synthetic measurements: the core's own predictions with known constants.
    fn synthetic(gpu: &Gpu, cal: &Calibration) -> Vec<Sample> {
        grid(false)
            .iter()
            .map(|p| {
                let (spec, scenario) = p.to_core(&gpu.id).unwrap();
                let mut s = Sample {
                    id: p.id.clone(),
                    spec,
                    scenario,
                    measured: Levels {
                        allocated: 0,
                        reserved: 0,
                        device: 0,
                    },
                };
                s.measured = predict(&s, gpu, cal);
                s
            })
            .collect()
    }

    #[test]
    fn fitting_recovers_known_constants() {
        let gpu = GpuCatalog::builtin().get("h100-sxm-80gb").unwrap();
        let t = truth(gpu);
        let rows = synthetic(gpu, &t);
        let train: Vec<Sample> = rows
            .iter()
            .enumerate()
            .filter(|(i, _)| !crate::grid::ProbeScenario::held_out(*i))
            .map(|(_, s)| s.clone())
            .collect();
        let probe = WorkspaceProbe {
            bytes: 32 * MIB,
            count: 3,
        };
        let f = fit(&train, gpu, &Calibration::assumed(gpu), Some(probe)).calibration;
        assert_eq!(f.cublas_workspaces, 3);
        assert_eq!(f.cublas_workspace_bytes, 32 * MIB);
        assert!((f.reserved_slack_fraction - 0.137).abs() < 0.003, "{f:?}");
        assert!(
            (f.reserved_slack_fraction_expandable - 0.021).abs() < 0.003,
            "{f:?}"
        );
        assert!(f.cuda_context_bytes.abs_diff(611 * MIB) <= 4 * MIB, "{f:?}");
        // Held-out rows: the fitted constants predict them (almost) exactly, the defaults do not.
        let held: Vec<Sample> = rows
            .iter()
            .enumerate()
            .filter(|(i, _)| crate::grid::ProbeScenario::held_out(*i))
            .map(|(_, s)| s.clone())
            .collect();
        // Compared as the synthetic rows were made: reserved by the slack fraction.
        let (mut f, mut assumed) = (f, Calibration::assumed(gpu));
        f.replay = false;
        assumed.replay = false;
        let after = errors(&held, gpu, &f);
        let before = errors(&held, gpu, &assumed);
        assert!(after.device.mean_abs_pct < 0.5, "{after:?}");
        assert!(after.device.mean_abs_pct < before.device.mean_abs_pct);
        assert_eq!(after.allocated.max_abs_pct, 0.0);
    }

    #[test]
    fn search_finds_a_minimum() {
        let x = search(&|x| (x - 0.3125).abs(), 0.0, 1.0);
        assert!((x - 0.3125).abs() < 2e-4, "{x}");
    }

    #[test]
    fn no_rows_keeps_the_start() {
        let gpu = GpuCatalog::builtin().get("a100-sxm4-80gb").unwrap();
        let start = Calibration::assumed(gpu);
        let f = fit(&[], gpu, &start, None);
        assert_eq!(f.calibration, start);
        assert!(f.notes.iter().all(|(_, n)| n.starts_with("not fitted")));
    }
}
