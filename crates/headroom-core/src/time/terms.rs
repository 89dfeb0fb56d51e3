//! The list a step's terms are pushed onto: one method per kind of term, each owning how that
//! kind turns work (FLOPs, bytes) into seconds and what its formula and confidence say.

use crate::confidence::Confidence;

use super::cx::Cx;
use super::{TermKind, TimeTerm};

/// Where a transfer goes, which sets its bandwidth and how sure that bandwidth is.
#[derive(Clone, Copy)]
pub(super) enum Via {
    /// The host link (pinned copies) at this many GB/s: measured when the rates say so.
    HostLink(f64),
    /// Host memory, for the CPU optimizer step (assumed bandwidth per GPU).
    HostMemory,
    /// NVMe (assumed bandwidth per GPU).
    Nvme,
}

/// The terms of one step, in the order they are pushed (the order every surface shows).
pub(super) struct Terms<'c, 'a> {
    cx: &'c Cx<'a>,
    pub list: Vec<TimeTerm>,
    /// Whether the terms carry their text (name, formula, source). The planner times
    /// thousands of setups and reads only the figures, so it leaves the text out; the
    /// formulas are closures for that reason, run only when the text is wanted.
    text: bool,
}

impl<'c, 'a> Terms<'c, 'a> {
    pub fn new(cx: &'c Cx<'a>, text: bool) -> Self {
        Terms {
            cx,
            list: Vec::new(),
            text,
        }
    }

    /// `make()` when the terms carry their text, else an empty string (no allocation).
    fn text(&self, make: impl FnOnce() -> String) -> String {
        // Without the `time-text` feature (the site's build) no term carries text, so the
        // compiler drops every formula's code and strings from the download.
        if cfg!(feature = "time-text") && self.text {
            make()
        } else {
            String::new()
        }
    }

    /// Matrix multiplies at the efficiency-scaled peak, `fp8_flops` of them at the fp8 rate
    /// (`crate::fp8`); returns their seconds.
    pub fn compute(
        &mut self,
        id: &'static str,
        name: &str,
        (flops, fp8_flops): (f64, f64),
        formula: impl FnOnce() -> String,
        source: &str,
    ) -> f64 {
        let cx = self.cx;
        let fp8_flops = fp8_flops.min(flops);
        let seconds = (flops - fp8_flops) / cx.rate
            + if fp8_flops > 0.0 {
                fp8_flops / cx.fp8_rate
            } else {
                0.0
            };
        let fp8 = || {
            if fp8_flops <= 0.0 {
                return String::new();
            }
            format!(
                "; {fp8_flops:.3e} of them in fp8 ({}) at {} TFLOP/s x {:.3} x {:.2}, with {:.2} of \
                 fp8's gain over the compute dtype at this GEMM size",
                cx.scen.fp8.id(),
                cx.fp8_peak,
                cx.eff,
                crate::fp8::gemm_factor(cx.scen.fp8),
                cx.fp8_gain
            )
        };
        self.list.push(TimeTerm {
            id,
            name: self.text(|| name.to_string()),
            kind: TermKind::Compute,
            flops,
            bytes: 0,
            seconds,
            exposed_seconds: seconds,
            formula: self.text(|| {
                format!(
                    "{}; at {} TFLOP/s x {:.3} ({}){}",
                    formula(),
                    cx.peak,
                    cx.eff,
                    cx.eff_text,
                    fp8()
                )
            }),
            source: self.text(|| source.to_string()),
            confidence: cx.eff_conf,
        });
        seconds
    }

    /// A fused attention kernel's FLOPs at its own rate (`rate` FLOP/s: the kernel's fraction
    /// of the dense peak times the framework factor); returns their seconds.
    pub fn attention(
        &mut self,
        flops: f64,
        rate: f64,
        kernel: super::attention::Kernel,
        formula: impl FnOnce() -> String,
    ) -> f64 {
        let seconds = flops / rate.max(1.0);
        let name = "fused attention kernels";
        let source = || kernel.describe().1.to_string();
        self.assumed_compute("attention", name, (flops, seconds), formula, source)
    }

    /// Time kernels spend beyond their FLOPs' rate (no FLOPs of its own, so MFU and HFU are
    /// unchanged); returns the seconds.
    pub fn stall(
        &mut self,
        id: &'static str,
        name: &str,
        seconds: f64,
        formula: impl FnOnce() -> String,
        source: &str,
    ) -> f64 {
        self.assumed_compute(id, name, (0.0, seconds), formula, || source.to_string())
    }

    /// A whole extra pass of `flops` taking `seconds` (a DPO reference forward).
    pub fn extra_pass(
        &mut self,
        id: &'static str,
        name: &str,
        (flops, seconds): (f64, f64),
        formula: impl FnOnce() -> String,
        source: &str,
    ) -> f64 {
        self.assumed_compute(id, name, (flops, seconds), formula, || source.to_string())
    }

    /// A compute term whose rate is assumed (not the calibration's GEMM curve).
    fn assumed_compute(
        &mut self,
        id: &'static str,
        name: &str,
        (flops, seconds): (f64, f64),
        formula: impl FnOnce() -> String,
        source: impl FnOnce() -> String,
    ) -> f64 {
        self.list.push(TimeTerm {
            id,
            name: self.text(|| name.to_string()),
            kind: TermKind::Compute,
            flops,
            bytes: 0,
            seconds,
            exposed_seconds: seconds,
            formula: self.text(formula),
            source: self.text(source),
            confidence: Confidence::Assumed,
        });
        seconds
    }

    /// Memory-bound kernels that reach `share` of the HBM bandwidth; returns their seconds. The
    /// framework factor is the share of a step the GPU spends in kernels: the idle rest
    /// stretches memory-bound kernels as it does matmuls.
    pub fn memory_at(
        &mut self,
        id: &'static str,
        name: &str,
        bytes: f64,
        share: f64,
        formula: impl FnOnce() -> String,
        source: &str,
    ) -> f64 {
        let framework = self.cx.a.framework_efficiency;
        let seconds = bytes / (self.cx.hbm * share * framework);
        self.list.push(TimeTerm {
            id,
            name: self.text(|| name.to_string()),
            kind: TermKind::Memory,
            flops: 0.0,
            bytes: bytes as u64,
            seconds,
            exposed_seconds: seconds,
            formula: self.text(|| {
                let reached = if share < 1.0 {
                    format!(" x {share}")
                } else {
                    String::new()
                };
                format!(
                    "{} / ({} GB/s HBM{reached} x framework {framework:.2})",
                    formula(),
                    self.cx.gpu.memory_bandwidth_gbs,
                )
            }),
            source: self.text(|| source.to_string()),
            confidence: Confidence::Assumed,
        });
        seconds
    }

    /// Memory-bound kernels at the HBM bandwidth; returns their seconds.
    pub fn memory(
        &mut self,
        id: &'static str,
        name: &str,
        bytes: f64,
        formula: impl FnOnce() -> String,
        source: &str,
    ) -> f64 {
        self.memory_at(id, name, bytes, 1.0, formula, source)
    }

    /// Host-device or NVMe traffic, none of it hidden: save_on_cpu copies on the compute
    /// stream, and ZeRO's offload waits for the CPU step before the next forward.
    pub fn transfer(
        &mut self,
        id: &'static str,
        name: &str,
        bytes: f64,
        via: Via,
        formula: impl FnOnce() -> String,
        source: &str,
    ) {
        let (gbs, confidence) = match via {
            Via::HostLink(gbs) => (gbs, self.cx.link_conf),
            Via::HostMemory => (self.cx.a.host_memory_gbs, Confidence::Assumed),
            Via::Nvme => (self.cx.a.nvme_gbs, Confidence::Assumed),
        };
        let seconds = bytes / (gbs.max(1e-3) * 1e9);
        self.list.push(TimeTerm {
            id,
            name: self.text(|| name.to_string()),
            kind: TermKind::Transfer,
            flops: 0.0,
            bytes: bytes as u64,
            seconds,
            exposed_seconds: seconds,
            formula: self.text(|| format!("{} at {gbs:.1} GB/s", formula())),
            source: self.text(|| source.to_string()),
            confidence,
        });
    }

    /// A collective moving `moved` bytes in `seconds`, hidden behind `window` seconds of
    /// compute; nothing when it moves nothing.
    pub fn comm(
        &mut self,
        id: &'static str,
        name: &str,
        (moved, seconds): (f64, f64),
        window: f64,
        formula: impl FnOnce() -> String,
        source: &str,
    ) {
        if moved <= 0.0 {
            return;
        }
        self.list.push(TimeTerm {
            id,
            name: self.text(|| name.to_string()),
            kind: TermKind::Communication,
            flops: 0.0,
            bytes: moved as u64,
            seconds,
            exposed_seconds: (seconds - window).max(0.0),
            formula: self.text(formula),
            source: self.text(|| source.to_string()),
            confidence: Confidence::Assumed,
        });
    }

    /// Time a GPU waits; exact given the terms it is a fraction of.
    pub fn idle(
        &mut self,
        id: &'static str,
        name: &str,
        seconds: f64,
        formula: impl FnOnce() -> String,
        source: &str,
    ) {
        self.list.push(TimeTerm {
            id,
            name: self.text(|| name.to_string()),
            kind: TermKind::Idle,
            flops: 0.0,
            bytes: 0,
            seconds,
            exposed_seconds: seconds,
            formula: self.text(formula),
            source: self.text(|| source.to_string()),
            confidence: Confidence::Exact,
        });
    }
}

/// Ring collective time: each GPU sends `factor·(n−1)/n·bytes` at `gbs` GB/s.
pub(super) fn ring_seconds(bytes: f64, n: u64, factor: f64, gbs: f64) -> (f64, f64) {
    if n <= 1 || bytes <= 0.0 {
        return (0.0, 0.0);
    }
    let moved = factor * (n - 1) as f64 / n as f64 * bytes;
    (moved, moved / (gbs.max(1e-3) * 1e9))
}
