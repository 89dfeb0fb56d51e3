//! Time of one training step: FLOPs, host-device transfers and communication per GPU, turned
//! into step time, tokens per second, MFU and time to train on N tokens.
//!
//! Pure and deterministic like the rest of the core (no clock, no IO). FLOPs are `f64` (a
//! step's FLOPs can exceed `u64` for extreme inputs); bytes are `u64`.
//!
//! Conventions (each term also carries its own formula and source):
//! - A matrix multiply of an `m x k` by a `k x n` matrix is `2mkn` FLOPs. Backward of a Linear
//!   is two such multiplies (input gradient and weight gradient), hence the familiar
//!   `6·N·T` for dense training (Kaplan et al. 2020, "Scaling Laws for Neural Language
//!   Models", §2.1; Hoffmann et al. 2022, Chinchilla, App. F; EleutherAI "Transformer Math
//!   101"). A frozen weight (LoRA, QLoRA) needs no weight gradient: `4·N·T`.
//! - Attention scores and values: `2·s·d` FLOPs per token per layer each, `d` = heads x
//!   head_dim (Korthikanti et al. 2022, arXiv 2205.05198, §5 and App. A; Narayanan et al.
//!   2021, arXiv 2104.04473, §5.1). Eager attention computes the whole `s x s` matrix; fused
//!   (Flash/SDPA) kernels skip the masked half of a causal mask (Dao 2023, FlashAttention-2,
//!   §4.1 counts causal as half) and recompute `Q·Kᵀ` in backward (five matmuls in backward
//!   against two in forward: backward = 2.5x forward).
//! - Recompute: full checkpointing runs one extra forward of each checkpointed layer
//!   (Chen et al. 2016; Korthikanti et al. 2022 §4: `72·B·s·L·h²` becomes `96·...`).
//!
//! Layout: [`step_time_with`] derives what every term needs once (`cx.rs`), then pushes the
//! terms kind by kind (`compute.rs`, `memory.rs`, `transfer.rs`, `comm.rs`) onto one list
//! (`terms.rs`) and sums them (`summary.rs`); a run over variable lengths is the mean of its
//! padded micro-batches' steps (`padded.rs`); `band.rs` gives the spread measured runs fell in
//! around it. FLOPs per token are `flops.rs`; measured and
//! default rates are `rates.rs`.
//!
//! The scenario may set the framework efficiency, the GPUs per node and the inter-node bandwidth
//! (`Runtime`, link keys `eff`, `node`, `ib`), read by `TimeAssumptions::for_scenario` and carried
//! on `StepTime::assumptions` for the surfaces that name them. Where a calibration exists, its
//! measured matmul curve and host link are used: `step_time(spec, gpu, cal, scen)` takes the
//! calibration the estimate takes, so every surface that passes one (`analyze_with`, strategies,
//! planner, guides, CLI, site) times with it. `step_time_of(spec, inv, gpu, cal, scen)` gives the
//! same figures with the inventory given and the terms' text left out (their formulas are closures,
//! run only when shown): it is what the planner and the strategy table's rows time. The framework
//! factor of Megatron-style runs was fitted on two published runs and is checked on twelve held out
//! in `tests/time.rs`.

mod attention;
mod band;
mod comm;
mod compute;
mod cx;
mod elementwise;
mod flops;
mod launch;
mod memory;
mod padded;
mod rates;
mod summary;
mod terms;
mod transfer;

use serde::Serialize;

use crate::calibration::Calibration;
use crate::catalog::Gpu;
use crate::confidence::Confidence;
use crate::model::{ModelSpec, ParamInventory};
use crate::scenario::{Checkpointing, Scenario};

pub use band::{ASSUMED_BAND, Band, CALIBRATED_BAND, band_factors, indistinct_from_first};
pub(crate) use cx::Prepared;
pub use elementwise::{COMPILED_SHARE_OF_EAGER, EAGER_BANDWIDTH_SHARE, FUSED_BANDWIDTH_SHARE};
pub use flops::{TokenFlops, token_flops};
pub use launch::{
    BACKWARD_KERNELS_PER_FORWARD, GENERATE_HOST_SECONDS_PER_KERNEL, HOST_SECONDS_PER_KERNEL,
    StepKernels,
};
pub use rates::{DEFAULT_GEMM_CEILING, DEFAULT_GEMM_HALF_N, Rates};

/// The share of a step the GPU spends running the kernels the time model counts (matmuls at
/// the GEMM curve, attention at its kernel's rate, the elementwise, loss and optimizer
/// kernels at their bandwidth); the rest is launch gaps, Python and synchronization. It
/// divides the matmul and attention terms. MEASURED, not fitted to step times: on the four
/// transformers steps profiled on the H200 (tests/reference/gpu/h200/edge/timing.json: GPT-2,
/// Llama 3.2 1B, Llama 3.2 3B LoRA, Llama 3.1 8B; eager, torch 2.11) the kernels filled 0.87,
/// 0.93, 0.96 and 0.97 of the step; their mean, 0.93 (`tests/time.rs` recomputes it). Until
/// 2026-11-26 the factor was 0.68, fitted on two Megatron-LM rows while elementwise work,
/// attention's own rate and every NIC of a node were missing; Megatron-style runs with fused
/// kernels fit 0.72 now (`eff=72`, `tests/time.rs` `MEGATRON_FRAMEWORK_EFFICIENCY`).
pub const DEFAULT_FRAMEWORK_EFFICIENCY: f64 = 0.93;

/// The assumptions that no scenario field carries, each with a documented default.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TimeAssumptions {
    /// GPUs per server: groups larger than this cross the inter-node network.
    pub gpus_per_node: u32,
    /// Inter-node bandwidth per GPU and direction, GB/s. Default 50: one 400 Gb/s NIC per GPU
    /// (DGX H100 / Grand Teton: eight ConnectX-7 per eight GPUs; Llama 3 paper §3.3.1).
    pub internode_gbs: f64,
    /// Fraction of a link's per-direction bandwidth NCCL's ring sustains (bus bandwidth).
    /// Default 0.8: nccl-tests on DGX A100/H100 report ~80% of NVLink per-direction bandwidth.
    pub link_efficiency: f64,
    /// NVMe read/write bandwidth per GPU, GB/s (ZeRO-Infinity's NVMe tier). Default 3:
    /// a node's RAID of NVMe drives (~25 GB/s, Rajbhandari et al. 2021 §7) shared by 8 GPUs.
    pub nvme_gbs: f64,
    /// Host memory bandwidth available to one GPU's CPU optimizer, GB/s. Default 25: a
    /// two-socket server's ~200 GB/s DRAM bandwidth shared by 8 GPUs' processes.
    pub host_memory_gbs: f64,
    /// Pipeline virtual stages per GPU (Megatron's interleaved 1F1B). Default 1 (plain 1F1B).
    pub virtual_stages: u32,
    /// The framework factor (see [`DEFAULT_FRAMEWORK_EFFICIENCY`]).
    pub framework_efficiency: f64,
    /// Whether the framework runs fused elementwise kernels without torch.compile
    /// (Megatron-LM's fused norms, bias-GELU and bias-dropout-add). Default false: the
    /// transformers loops Headroom's exports run are eager unless compiled.
    pub fused_kernels: bool,
}

impl TimeAssumptions {
    /// The defaults with the scenario's own GPUs per node, inter-node bandwidth and framework
    /// efficiency where it sets them (`Runtime`: 0 keeps a default).
    pub fn for_scenario(scen: &Scenario) -> Self {
        let r = &scen.runtime;
        let d = TimeAssumptions::default();
        TimeAssumptions {
            gpus_per_node: r.gpus_per_node(),
            internode_gbs: if r.internode_gbs == 0 {
                d.internode_gbs
            } else {
                f64::from(r.internode_gbs)
            },
            framework_efficiency: if r.efficiency == 0 {
                d.framework_efficiency
            } else {
                f64::from(r.efficiency) / 100.0
            },
            ..d
        }
    }
}

impl Default for TimeAssumptions {
    fn default() -> Self {
        TimeAssumptions {
            gpus_per_node: crate::scenario::GPUS_PER_NODE,
            internode_gbs: 50.0,
            link_efficiency: 0.8,
            nvme_gbs: 3.0,
            host_memory_gbs: 25.0,
            virtual_stages: 1,
            framework_efficiency: DEFAULT_FRAMEWORK_EFFICIENCY,
            fused_kernels: false,
        }
    }
}

/// What a term is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TermKind {
    /// Matrix multiplies at the efficiency-scaled peak.
    Compute,
    /// Memory-bound kernels at the HBM bandwidth.
    Memory,
    /// Host-device or NVMe transfers.
    Transfer,
    /// Collective communication between GPUs.
    Communication,
    /// Idle time (the pipeline bubble).
    Idle,
}

/// One term of the step time.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TimeTerm {
    pub id: &'static str,
    pub name: String,
    pub kind: TermKind,
    /// FLOPs per GPU per optimizer step (0 for transfers).
    pub flops: f64,
    /// Bytes moved per GPU per optimizer step (0 for compute).
    pub bytes: u64,
    /// Seconds the term takes on its own.
    pub seconds: f64,
    /// Seconds it adds to the step after overlap.
    pub exposed_seconds: f64,
    pub formula: String,
    pub source: String,
    pub confidence: Confidence,
}

/// One optimizer step's time on one GPU, and what follows from it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepTime {
    pub terms: Vec<TimeTerm>,
    /// FLOPs one GPU executes per optimizer step (recompute and flash's recompute included).
    pub hardware_flops_per_gpu: f64,
    /// Model FLOPs per GPU (MFU's numerator): 6·N·T (4·N·T for frozen weights plus
    /// 2·N_trainable·T) plus causal attention, without any recompute.
    pub model_flops_per_gpu: f64,
    /// Dense peak of the compute dtype, TFLOP/s.
    pub peak_tflops: f64,
    /// Fraction of peak the matrix multiplies are assumed to run at.
    pub matmul_efficiency: f64,
    pub step_seconds: f64,
    /// Tokens per optimizer step over all GPUs.
    pub tokens_per_step: u64,
    pub tokens_per_second: f64,
    pub tokens_per_second_per_gpu: f64,
    /// Model FLOPs utilization (PaLM, Chowdhery et al. 2022, App. B).
    pub mfu: f64,
    /// Hardware FLOPs utilization (recompute counted).
    pub hfu: f64,
    /// The weakest confidence of the terms that matter (over 5% of the step).
    pub confidence: Confidence,
    /// The assumptions it was timed with (the scenario's where it sets them), for surfaces
    /// that name them.
    #[serde(skip)]
    pub assumptions: TimeAssumptions,
}

impl StepTime {
    /// Seconds to train on `tokens` tokens at this step's throughput (no failures, no restarts).
    pub fn seconds_for_tokens(&self, tokens: f64) -> f64 {
        if self.tokens_per_second > 0.0 {
            tokens / self.tokens_per_second
        } else {
            f64::INFINITY
        }
    }

    /// GPU-hours to train on `tokens` tokens on `gpus` GPUs.
    pub fn gpu_hours_for_tokens(&self, tokens: f64, gpus: u32) -> f64 {
        self.seconds_for_tokens(tokens) * gpus as f64 / 3600.0
    }

    /// The term with `id`, if present.
    pub fn term(&self, id: &str) -> Option<&TimeTerm> {
        self.terms.iter().find(|t| t.id == id)
    }
}

/// Layers whose forward runs twice under `ckpt` (checkpointed layers), of `layers`.
pub fn recomputed_layers(ckpt: Checkpointing, layers: u64) -> u64 {
    ckpt.checkpointed_layers(layers)
}

/// The step time of `scen` on `gpu` at the speed `cal` measured for the scenario's compute
/// dtype (the defaults where it measured nothing) and with the default assumptions: what every
/// surface shows. It takes the calibration the estimate takes, so no surface can time a step
/// with other rates than those its memory was calibrated with.
pub fn step_time(spec: &ModelSpec, gpu: &Gpu, cal: &Calibration, scen: &Scenario) -> StepTime {
    let rates = Rates::for_calibration(cal, scen.precision.compute_dtype());
    step_time_with(
        spec,
        gpu,
        scen,
        &rates,
        &TimeAssumptions::for_scenario(scen),
    )
}

/// [`step_time`]'s figures, with the model's parameter inventory given
/// (`crate::model::inventory` of `spec`): the planner and the strategy table time many
/// scenarios of one model, build the inventory once and read only the figures, so the terms'
/// names, formulas and sources are left empty (every number is the same).
pub fn step_time_of(
    spec: &ModelSpec,
    inv: &ParamInventory,
    gpu: &Gpu,
    cal: &Calibration,
    scen: &Scenario,
) -> StepTime {
    let rates = Rates::for_calibration(cal, scen.precision.compute_dtype());
    let a = TimeAssumptions::for_scenario(scen);
    padded::over_lengths(scen, &|s| {
        terms_of(cx::Cx::new(spec, inv, gpu, s, &rates, &a), false)
    })
}

/// The kernels one GPU launches in a step of `scen` (what the host's launch floor counts).
pub fn step_kernels(
    spec: &ModelSpec,
    gpu: &Gpu,
    cal: &Calibration,
    scen: &Scenario,
) -> StepKernels {
    let rates = Rates::for_calibration(cal, scen.precision.compute_dtype());
    let a = TimeAssumptions::for_scenario(scen);
    let inv = crate::model::inventory(spec);
    launch::step_kernels(&cx::Cx::new(spec, &inv, gpu, scen, &rates, &a))
}

/// The step time of `scen` on `gpu` with measured `rates` and explicit assumptions.
pub fn step_time_with(
    spec: &ModelSpec,
    gpu: &Gpu,
    scen: &Scenario,
    rates: &Rates,
    a: &TimeAssumptions,
) -> StepTime {
    let inv = crate::model::inventory(spec);
    padded::over_lengths(scen, &|s| {
        terms_of(cx::Cx::new(spec, &inv, gpu, s, rates, a), true)
    })
}

/// The step time from what the estimate of the same scenario prepared (`estimate::with_time`);
/// a run over variable lengths is timed afresh at each of its lengths.
pub(crate) fn step_time_prepared(
    spec: &ModelSpec,
    gpu: &Gpu,
    cal: &Calibration,
    scen: &Scenario,
    parts: Prepared,
) -> StepTime {
    if cfg!(feature = "replay") && scen.len_mean > 0 {
        // The parts were prepared for the longest shape; each length is its own step.
        return step_time(spec, gpu, cal, scen);
    }
    let rates = Rates::for_calibration(cal, scen.precision.compute_dtype());
    let a = TimeAssumptions::for_scenario(scen);
    terms_of(cx::Cx::with(spec, gpu, scen, &rates, &a, parts), true)
}

/// Builds the terms kind by kind over one context, then sums them.
/// `text`: whether the terms carry their names, formulas and sources.
fn terms_of(cx: cx::Cx, text: bool) -> StepTime {
    let mut terms = terms::Terms::new(&cx, text);
    let mut busy = compute::terms(&cx, &mut terms);
    memory::terms(&cx, &mut terms, &mut busy);
    elementwise::terms(&cx, &mut terms, &mut busy);
    if cx.scen.no_grad_forwards() > 0 {
        compute::reference_forward(&cx, &mut terms, &mut busy);
    }
    transfer::terms(&cx, &mut terms);
    comm::terms(&cx, &busy, &mut terms);
    launch::terms(&cx, &mut terms);
    summary::summary(&cx, terms.list)
}
