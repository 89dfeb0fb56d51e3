//! Levels, peaks and the verdict: the timeline's live tensor bytes raised to what the caching
//! allocator holds (allocated, reserved) and what the device shows, then the maxima.

use crate::calibration::Calibration;
use crate::catalog::Gpu;
use crate::scenario::Scenario;

use super::step::Step;
use super::timeline::Timeline;
use super::types::{Peaks, Phase, TimelinePoint, Verdict};

const MIB: u64 = 1 << 20;

/// The runtime's additions at each level, from the calibration (measured or assumed).
pub(super) struct Runtime {
    /// cuBLAS workspaces (allocated through the caching allocator).
    pub workspaces: u64,
    /// Reserved minus allocated, as a fraction of the transient bytes.
    pub slack_fraction: f64,
    /// Bytes that never change during the step (weights and optimizer states).
    persistent: u64,
    /// The 512-byte rounding of the persistent tensors.
    pub rounding: u64,
    /// NCCL's buffers (more than one GPU), paged optimizer states, the CUDA graph pool.
    pub nccl: u64,
    pub graph_pool: u64,
    /// Everything outside the allocator: the CUDA context plus the three above.
    device_extra: u64,
}

impl Runtime {
    pub fn new(s: &Step, cal: &Calibration, saved_activations: u64) -> Self {
        let scen = s.scen;
        let nccl = if scen.gpus > 1 { cal.nccl_bytes } else { 0 };
        // Assumed: the captured region's high-water mark is the saved activations.
        let graph_pool = if scen.runtime.cuda_graphs {
            saved_activations
        } else {
            0
        };
        Runtime {
            workspaces: cal.cublas_workspace_bytes * cal.cublas_workspaces,
            slack_fraction: slack_fraction(cal, scen),
            persistent: s.st.weights + s.st.optimizer.device + s.st.master_weights,
            rounding: s.st.rounding_overhead,
            nccl,
            graph_pool,
            device_extra: cal.cuda_context_bytes + nccl + s.st.optimizer.paged + graph_pool,
        }
    }

    /// Allocated adds 512-byte rounding and cuBLAS workspaces; reserved adds the allocator's
    /// slack over transient bytes; device adds the context, NCCL, paged states.
    pub fn levels(&self, tl: Timeline) -> Vec<TimelinePoint> {
        tl.points
            .into_iter()
            .map(|(phase, label, tensors)| {
                let allocated = tensors + self.rounding + self.workspaces;
                let transient = allocated.saturating_sub(self.persistent);
                let reserved = round_up(
                    allocated + (transient as f64 * self.slack_fraction) as u64,
                    2 * MIB,
                );
                TimelinePoint {
                    phase,
                    label,
                    tensors,
                    allocated,
                    reserved,
                    device: reserved + self.device_extra,
                }
            })
            .collect()
    }
}

/// The allocator's slack fraction for the scenario's allocator setting.
pub(super) fn slack_fraction(cal: &Calibration, scen: &Scenario) -> f64 {
    if scen.runtime.expandable_segments {
        cal.reserved_slack_fraction_expandable
    } else {
        cal.reserved_slack_fraction
    }
}

/// The maximum of each level; the tensor peak's point (the first, on ties) names the phase.
pub(super) fn peaks(points: &[TimelinePoint]) -> Peaks {
    let at = points
        .iter()
        .fold(None::<&TimelinePoint>, |best, p| match best {
            Some(b) if b.tensors >= p.tensors => Some(b),
            _ => Some(p),
        });
    let max_of = |f: fn(&TimelinePoint) -> u64| points.iter().map(f).max().unwrap_or(0);
    Peaks {
        tensors: at.map_or(0, |p| p.tensors),
        allocated: max_of(|p| p.allocated),
        reserved: max_of(|p| p.reserved),
        device: max_of(|p| p.device),
        phase: at.map_or(Phase::Start, |p| p.phase),
        at: at.map_or(String::new(), |p| p.label.clone()),
    }
}

/// Fits when the device-level peak is within the GPU's memory.
pub(super) fn verdict(gpu: &Gpu, peak: &Peaks) -> Verdict {
    let capacity = gpu.total_bytes;
    let headroom = capacity as i64 - peak.device as i64;
    Verdict {
        gpu: gpu.id.clone(),
        capacity,
        fits: headroom >= 0,
        headroom,
        headroom_percent: (headroom as f64 / capacity as f64 * 1000.0).round() / 10.0,
    }
}

fn round_up(x: u64, to: u64) -> u64 {
    x.div_ceil(to) * to
}
