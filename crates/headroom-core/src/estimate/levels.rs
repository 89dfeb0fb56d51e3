//! Levels, peaks and the verdict: the timeline's live tensor bytes raised to what the caching
//! allocator holds (allocated, reserved) and what the device shows, then the maxima.
//!
//! The CUDA graph pool is modelled from `cudagraph_trees.py`: the compiled forward's and backward's
//! reserved high-water mark stays reserved, so the eager optimizer step's temporaries come on top
//! of it.

#[cfg(feature = "replay")]
use crate::allocator::AllocatorSettings;
use crate::calibration::Calibration;
use crate::catalog::Gpu;
use crate::scenario::Scenario;

use super::step::Step;
use super::timeline::{Label, Timeline};
use super::types::{Peaks, Phase, TimelinePoint, Verdict};

const MIB: u64 = 1 << 20;

/// One timeline point at every level, its label not yet written out (see [`Point::shown`]).
#[derive(Debug, Clone, Copy)]
pub(super) struct Point {
    pub phase: Phase,
    pub label: Label,
    pub tensors: u64,
    pub allocated: u64,
    pub reserved: u64,
    pub device: u64,
}

impl Point {
    /// The point as the estimate shows it, its label written out.
    pub fn shown(&self) -> TimelinePoint {
        TimelinePoint {
            phase: self.phase,
            label: self.label.to_string(),
            tensors: self.tensors,
            allocated: self.allocated,
            reserved: self.reserved,
            device: self.device,
        }
    }
}

/// The runtime's additions at each level, from the calibration (measured or assumed).
pub(super) struct Runtime {
    /// cuBLAS workspaces (allocated through the caching allocator).
    pub workspaces: u64,
    /// Reserved minus allocated, as a fraction of the transient bytes.
    pub slack_fraction: f64,
    /// Bytes that never change during the step (weights and optimizer states).
    persistent: u64,
    /// The gradients, alive from backward through the optimizer step.
    gradients: u64,
    /// The 512-byte rounding of the persistent tensors.
    pub rounding: u64,
    /// NCCL's buffers (more than one GPU).
    pub nccl: u64,
    /// Whether forward and backward replay as CUDA graphs (torch.compile `reduce-overhead`).
    graphs: bool,
    /// What the graphs' private pool adds to the device peak, set by [`Runtime::levels`].
    pub graph_pool: u64,
    /// Everything outside the allocator: the CUDA context, NCCL, paged optimizer states.
    device_extra: u64,
    /// Whether reserved comes from replaying the step through the allocator model
    /// ([`super::sequence`]) rather than from the slack fraction.
    pub simulated: bool,
    /// Whether the calibration lets the replay stand in for the slack fraction.
    #[cfg_attr(not(feature = "replay"), allow(dead_code))]
    replay: bool,
    /// A request the replay could not place within the GPU although the tensors' peak fits:
    /// the step fails on fragmentation (its bytes).
    pub fragmented: Option<u64>,
    /// Under dynamic padding, what the records' cached segments add to reserved over one step
    /// of `seq` tokens: cache the allocator releases and retries with before a request fails, so
    /// the verdict leaves it out.
    pub padding_growth: u64,
    /// Under dynamic padding, the record lengths the replay ran ([`crate::scenario::padding::records`]).
    #[cfg(feature = "replay")]
    padding_records: Vec<u32>,
}

impl Runtime {
    pub fn new(s: &Step, cal: &Calibration) -> Self {
        let scen = s.scen;
        let nccl = if scen.gpus > 1 { cal.nccl_bytes } else { 0 };
        Runtime {
            workspaces: cal.cublas_workspace_bytes * cal.cublas_workspaces,
            slack_fraction: slack_fraction(cal, scen),
            persistent: s.st.weights + s.st.optimizer.device + s.st.master_weights,
            gradients: s.st.gradients,
            rounding: s.st.rounding_overhead,
            nccl,
            graphs: scen.runtime.cuda_graphs,
            graph_pool: 0,
            device_extra: cal.cuda_context_bytes + nccl + s.st.optimizer.paged,
            simulated: false,
            replay: cal.replay,
            fragmented: None,
            padding_growth: 0,
            #[cfg(feature = "replay")]
            padding_records: Vec::new(),
        }
    }

    /// The record lengths the replay ran under dynamic padding (none where nothing replayed).
    pub fn padding_records(&self) -> &[u32] {
        #[cfg(feature = "replay")]
        return &self.padding_records;
        #[cfg(not(feature = "replay"))]
        return &[];
    }

    /// Reserved from the allocator model where it models the step: its high-water mark over
    /// three steps, run within what the card leaves the allocator (its capacity less what
    /// lives outside the allocator), as PyTorch frees its cache and retries before it fails.
    /// The estimate and the planner's checks both replay (a few milliseconds natively), so a
    /// plan's figures are its estimate's.
    #[cfg(feature = "replay")]
    pub fn simulate(&mut self, s: &Step, gpu: &Gpu, capacity: u64, points: &mut [Point]) {
        if !self.replay || self.graphs || !super::sequence::supported(s) {
            return;
        }
        let allocated = points.iter().map(|p| p.allocated).max().unwrap_or(0);
        let settings = |limit| AllocatorSettings {
            limit,
            expandable_segments: s.scen.runtime.expandable_segments,
            ..AllocatorSettings::default()
        };
        // The card's own limit, not the margin: the margin is what the verdict keeps free of
        // what the run reserves on this card.
        let limit = capacity.saturating_sub(self.device_extra);
        let records = crate::scenario::padding::records(s.scen, crate::scenario::padding::HORIZON);
        let run =
            |settings| super::sequence::replay_run(s, gpu, &records, settings, self.workspaces);
        let reserved = match run(settings(Some(limit))) {
            Ok(r) => r.reserved,
            Err(requested) => {
                // What the step reserves where nothing stops it, shown as its need.
                if allocated <= limit {
                    self.fragmented = Some(requested);
                }
                match run(settings(None)) {
                    Ok(r) => r.reserved,
                    Err(_) => return,
                }
            }
        };
        if !records.is_empty()
            && let Ok(one) = super::sequence::replay(s, settings(Some(limit)), self.workspaces)
        {
            self.padding_growth = reserved.saturating_sub(one.reserved);
        }
        self.padding_records = records;
        self.simulated = true;
        for p in points {
            p.reserved = round_up(p.allocated, 2 * MIB).max(reserved);
            p.device = p.reserved + self.device_extra;
        }
    }

    /// Allocated adds 512-byte rounding and cuBLAS workspaces; reserved adds the allocator's
    /// slack over transient bytes and the CUDA graph pool's idle reservation; device adds the
    /// context, NCCL, paged states.
    pub fn levels(&mut self, tl: Timeline) -> Vec<Point> {
        let mut points: Vec<Point> = tl
            .points
            .into_iter()
            .map(|(phase, label, tensors)| {
                let allocated = tensors + self.rounding + self.workspaces;
                let transient = allocated.saturating_sub(self.persistent);
                let reserved = round_up(
                    allocated + (transient as f64 * self.slack_fraction) as u64,
                    2 * MIB,
                );
                Point {
                    phase,
                    label,
                    tensors,
                    allocated,
                    reserved,
                    device: reserved + self.device_extra,
                }
            })
            .collect();
        if self.graphs {
            let without = points.iter().map(|p| p.device).max().unwrap_or(0);
            let idle = self.graph_pool_idle(&points);
            for (p, idle) in points.iter_mut().zip(idle) {
                p.reserved += idle;
                p.device += idle;
            }
            let with = points.iter().map(|p| p.device).max().unwrap_or(0);
            self.graph_pool = with - without;
        }
        points
    }

    /// The CUDA graph pool's reserved but unused bytes at each point.
    ///
    /// PyTorch's CUDA graph trees (`torch/_inductor/cudagraph_trees.py`) allocate everything
    /// the compiled forward and backward create (saved activations, temporaries, the loss and
    /// the gradients the backward outputs) in one private pool of the caching allocator, which
    /// keeps the memory it reserved: after the first step the pool holds the forward and
    /// backward's reserved high-water mark for good. Inside the captured region that is what
    /// eager training reserves at its peak anyway; the optimizer step runs eagerly after it
    /// and cannot reuse the pool's free blocks, so its temporaries come on top of the pool,
    /// which still holds the gradients. The non-static inputs copied into the pool (token ids
    /// and labels, bytes per token) are left out; a warm-up or re-recording run, fragmentation
    /// inside the pool and a compiled optimizer are not modelled.
    fn graph_pool_idle(&self, points: &[Point]) -> Vec<u64> {
        let captured =
            |phase: Phase| matches!(phase, Phase::Forward | Phase::Loss | Phase::Backward);
        let base = self.persistent + self.rounding + self.workspaces;
        let in_pool = |p: &Point| match p.phase {
            ph if captured(ph) => p.reserved.saturating_sub(base),
            Phase::Optimizer => self.gradients,
            _ => 0,
        };
        let high_water = points
            .iter()
            .filter(|p| captured(p.phase))
            .map(in_pool)
            .max()
            .unwrap_or(0);
        points
            .iter()
            .map(|p| high_water.saturating_sub(in_pool(p)))
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
pub(super) fn peaks(points: &[Point]) -> Peaks {
    let at = points.iter().fold(None::<&Point>, |best, p| match best {
        Some(b) if b.tensors >= p.tensors => Some(b),
        _ => Some(p),
    });
    let max_of = |f: fn(&Point) -> u64| points.iter().map(f).max().unwrap_or(0);
    Peaks {
        tensors: at.map_or(0, |p| p.tensors),
        allocated: max_of(|p| p.allocated),
        reserved: max_of(|p| p.reserved),
        device: max_of(|p| p.device),
        phase: at.map_or(Phase::Start, |p| p.phase),
        at: at.map_or(String::new(), |p| p.label.to_string()),
        parts: Vec::new(),
    }
}

/// Fits when the device-level peak is within the GPU's memory (`capacity`: the calibration's
/// measured CUDA total, else the catalog's) less the scenario's margin, and what offloading
/// pins on the host within the node's RAM when the scenario states it.
pub(super) fn verdict(
    gpu: &Gpu,
    capacity: u64,
    device: u64,
    scen: &Scenario,
    host_per_gpu: u64,
) -> Verdict {
    let headroom = capacity as i64 - device as i64;
    let margin = capacity / 100 * u64::from(scen.runtime.margin);
    let headroom_percent = (headroom as f64 / capacity as f64 * 1000.0).round() / 10.0;
    let host_per_node =
        host_per_gpu.saturating_mul(u64::from(scen.gpus.min(scen.runtime.gpus_per_node())));
    let host_ram = u64::from(scen.runtime.host_ram) << 30;
    let host_fits = host_ram == 0 || host_per_node <= host_ram;
    let fits = headroom >= margin as i64 && host_fits;
    Verdict {
        gpu: gpu.id.clone(),
        capacity,
        fits,
        headroom,
        headroom_percent,
        margin,
        tight: fits && headroom_percent < super::types::TIGHT_PERCENT,
        host_per_node,
        host_ram,
        host_fits,
    }
}

fn round_up(x: u64, to: u64) -> u64 {
    x.div_ceil(to) * to
}
