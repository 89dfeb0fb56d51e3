//! What every term of a step needs (degrees, tokens, rates, the inventory and the model
//! states), computed once per step.

use std::borrow::Cow;

use crate::catalog::Gpu;
use crate::confidence::Confidence;
use crate::dtype::DType;
use crate::model::ModelSpec;
use crate::model::params::ParamInventory;
use crate::scenario::{Attention, Method, Scenario};
use crate::sdpa::Backend;
use crate::states::{ModelStates, model_states};

use super::TimeAssumptions;
use super::flops::{TokenFlops, token_flops_of};
use super::rates::{DEFAULT_GEMM_CEILING, DEFAULT_GEMM_HALF_N, Rates};

/// The scenario's shapes, degrees and rates, derived once so that no term derives them again
/// (the inventory and the model states are the expensive ones).
pub(super) struct Cx<'a> {
    pub spec: &'a ModelSpec,
    pub gpu: &'a Gpu,
    pub scen: &'a Scenario,
    pub a: &'a TimeAssumptions,
    pub inv: Cow<'a, ParamInventory>,
    pub tf: TokenFlops,
    pub st: Cow<'a, ModelStates>,
    /// One dense layer's saved bytes without checkpointing (what activation offload moves).
    pub layer_bytes: u64,
    /// Whether attention materializes the s x s scores (eager, SDPA's math kernel).
    pub quadratic: bool,
    /// The kernel SDPA runs for this scenario on this GPU (`crate::sdpa::for_scenario`).
    pub sdpa: Backend,
    /// Tensor, pipeline and context-parallel degrees, and the ranks gradients are reduced
    /// over (data x context parallel; at least 1).
    pub tp: u64,
    pub pp: u64,
    pub cp: u64,
    pub dp: u64,
    /// Model-parallel ranks a layer's matmuls are split over: tp·pp.
    pub mp: f64,
    /// Micro-batch, this GPU's tokens of a sequence (seq / cp) and micro-batches per step.
    pub b: f64,
    pub s: f64,
    pub m: f64,
    /// Tokens one GPU of a data-parallel replica processes per optimizer step (its seq / cp
    /// share of every sequence).
    pub tokens: f64,
    /// Decoder layers (at least 1).
    pub layers: f64,
    /// Checkpointed layers (their forward runs twice).
    pub ck: f64,
    /// Bytes of the 16-bit dtype, and of an activation element.
    pub half: f64,
    pub act_bytes: f64,
    /// Dense peak of the compute dtype, TFLOP/s.
    pub peak: f64,
    /// Fraction of peak the matmuls run at, the FLOP/s that gives, how sure that is and why.
    pub eff: f64,
    pub rate: f64,
    /// The fp8 dense peak, TFLOP/s, and the FLOP/s converted Linears run at with fp8
    /// (`crate::fp8::gemm_factor` of the same efficiency).
    pub fp8_peak: f64,
    pub fp8_rate: f64,
    /// The share of fp8's gain GEMMs of this size get (`crate::fp8::size_factor`).
    pub fp8_gain: f64,
    pub eff_conf: Confidence,
    pub eff_text: String,
    /// HBM bandwidth, bytes per second.
    pub hbm: f64,
    /// Host-to-device and device-to-host bandwidths, GB/s, and how sure they are.
    pub h2d: f64,
    pub d2h: f64,
    pub link_conf: Confidence,
}

impl<'a> Cx<'a> {
    pub fn new(
        spec: &'a ModelSpec,
        inv: &'a ParamInventory,
        gpu: &'a Gpu,
        scen: &'a Scenario,
        rates: &Rates,
        a: &'a TimeAssumptions,
    ) -> Self {
        let st = model_states(spec, inv, gpu, scen);
        // Only activation offload without checkpointing reads a layer's saved bytes.
        let checkpointed = scen.checkpointing.checkpointed_layers(spec.layers) > 0;
        let layer_bytes = if scen.offload_activations && !checkpointed {
            let sh = crate::activations::Shape::from_scenario(spec, gpu, scen);
            crate::activations::total(&crate::activations::layer(spec, &sh))
        } else {
            0
        };
        let parts = Prepared {
            inv: Cow::Borrowed(inv),
            st: Cow::Owned(st),
            layer_bytes,
        };
        Self::with(spec, gpu, scen, rates, a, parts)
    }

    /// The context from what the estimate already prepared for the same scenario.
    pub fn with(
        spec: &'a ModelSpec,
        gpu: &'a Gpu,
        scen: &'a Scenario,
        rates: &Rates,
        a: &'a TimeAssumptions,
        parts: Prepared<'a>,
    ) -> Self {
        let Prepared {
            inv,
            st,
            layer_bytes,
        } = parts;
        // SDPA's kernel, chosen once here: whether attention materializes the scores (eager,
        // or SDPA's math kernel, as `sdpa::materializes_scores` says) and a fused kernel's rate
        // (`attention::kernel_rate`) both read it.
        let sdpa = crate::sdpa::for_scenario(spec, gpu, scen).backend;
        let quadratic = scen.attention == Attention::Eager || sdpa == Backend::Math;
        let tf = token_flops_of(spec, &inv, scen, quadratic);
        let tp = scen.parallel.tensor.max(1) as u64;
        let pp = scen.parallel.pipeline.max(1) as u64;
        let cp = scen.context().max(1) as u64;
        let dp = scen.shard_ranks().max(1) as u64;
        let b = scen.sequences() as f64;
        let s = scen.seq_local() as f64;
        let m = scen.grad_accum.max(1) as f64;
        let half = scen.precision.half_dtype().bytes() as f64;
        let act_bytes = if scen.precision.compute_dtype() == DType::F32 {
            4.0
        } else {
            half
        };
        let peak = peak_tflops(gpu, scen.precision.compute_dtype());
        // fp8 matmuls run at the GPU's fp8 peak (the compute dtype's where it has none: the
        // estimate refuses fp8 there, `estimate::check_fp8`).
        let fp8_peak = gpu.dense_tflops.fp8.unwrap_or(peak).max(1e-3);
        // The GEMMs' square-equivalent size: the cube root of M·K·N for a typical projection
        // (M = tokens of a micro-batch, K = hidden, N = hidden / tp), since a GEMM's efficiency
        // tracks its work per tile wave; few tokens or a narrow TP shard make it small.
        let n = libm::cbrt(b * s * spec.hidden as f64 * (spec.hidden as f64 / tp as f64)).max(1.0);
        let (gemm_eff, measured_gemm) = rates.gemm_efficiency(n);
        let eff = (gemm_eff * a.framework_efficiency).clamp(1e-3, 1.0);
        // Formula text only (`Terms::text`): a build without the `time-text` feature skips it.
        let eff_text = if !cfg!(feature = "time-text") {
            String::new()
        } else if measured_gemm {
            format!(
                "measured cuBLAS curve at n = {n:.0} ({gemm_eff:.2}, {}) x framework {:.2}",
                rates.source, a.framework_efficiency
            )
        } else {
            format!(
                "{DEFAULT_GEMM_CEILING}·n/(n + {DEFAULT_GEMM_HALF_N}) at n = {n:.0} ({gemm_eff:.2}) x framework {:.2}",
                a.framework_efficiency
            )
        };
        let rate = peak * 1e12 * eff;
        let fp8_gain = crate::fp8::size_factor(n);
        Cx {
            spec,
            gpu,
            scen,
            a,
            tf,
            st,
            tp,
            pp,
            cp,
            dp,
            mp: (tp * pp) as f64,
            b,
            s,
            m,
            tokens: b * s * m,
            layers: spec.layers.max(1) as f64,
            ck: scen.checkpointing.checkpointed_layers(spec.layers) as f64,
            half,
            act_bytes,
            peak,
            eff,
            rate,
            fp8_peak,
            // Converted Linears run at the fp8 peak times the recipe's GEMM share
            // (`crate::fp8::gemm_factor`) when large, at the compute dtype's rate when small
            // (`crate::fp8::size_factor`: no gain measured up to n = 2,048 on an H100).
            fp8_rate: rate
                + (fp8_peak * 1e12 * eff * crate::fp8::gemm_factor(scen.fp8) - rate) * fp8_gain,
            fp8_gain,
            eff_conf: confidence(measured_gemm),
            eff_text,
            hbm: gpu.memory_bandwidth_gbs.max(1.0) * 1e9,
            h2d: rates.host_to_device_gbs.unwrap_or(gpu.host_link_gbs),
            d2h: rates.device_to_host_gbs.unwrap_or(gpu.host_link_gbs),
            link_conf: confidence(rates.host_to_device_gbs.is_some()),
            inv,
            layer_bytes,
            quadratic,
            sdpa,
        }
    }

    /// How many of tensor `t` one token meets per layer, on average over the layers: the
    /// share of layers holding it, times the copies a token passes through (its top-k
    /// experts' of an expert's tensor).
    pub fn used_per_layer(&self, t: &crate::model::ParamTensor) -> f64 {
        let top_k = self.spec.moe.as_ref().map_or(1, |m| m.top_k);
        let used = if t.copies > 1 { t.copies.min(top_k) } else { 1 };
        super::flops::layer_count(&self.inv, t.scope) / self.layers * used as f64
    }

    /// Decoder layers on one pipeline stage.
    pub fn layers_local(&self) -> f64 {
        (self.spec.layers as f64 / self.pp as f64).ceil()
    }

    /// Bytes of one micro-batch's `b·s·h` activation.
    pub fn activation_bytes(&self) -> f64 {
        self.b * self.s * self.spec.hidden as f64 * self.act_bytes
    }

    /// Trainable parameters on one model-parallel rank (before data-parallel sharding).
    pub fn trainable_local(&self) -> f64 {
        (self.st.params_trainable as f64 / self.mp).max(0.0)
    }

    /// Bytes of one gradient element: the parameters' dtype, or the adapters' under LoRA.
    pub fn grad_dtype_bytes(&self) -> f64 {
        if self.scen.method == Method::Full {
            self.scen.precision.param_dtype().bytes() as f64
        } else {
            self.scen.lora.adapter_dtype.bytes() as f64
        }
    }

    /// Per-direction bandwidth of one GPU's NVLink (its host link where it has none), GB/s.
    fn nvlink_gbs(&self) -> f64 {
        if self.gpu.peer_link_gbs > 0.0 {
            // Catalog peer bandwidths are both directions together (NVLink 4: 900 = 2 x 450).
            self.gpu.peer_link_gbs / 2.0
        } else {
            self.gpu.host_link_gbs
        }
    }

    /// Bus bandwidth, GB/s, of a ring collective (all-reduce, all-gather, reduce-scatter) over
    /// `size` ranks spaced `stride` apart. Ranks are laid out tensor-innermost, then context,
    /// data and pipeline (Megatron's default order), so a group crosses servers when it spans
    /// more than one. Across servers NCCL runs one ring per channel and spreads the channels
    /// over the NICs of the GPUs it uses (one NIC per GPU on rail-optimized HGX/DGX servers):
    /// each ring crosses a server boundary once, so the group's inter-node bandwidth per rank
    /// is the NICs of its ranks on one server together, `r x internode_gbs` for `r` ranks per
    /// server, up to NVLink's (NCCL rings and channels: Jeaugey, NCCL 2.x GTC talks; DGX H100
    /// all-reduce bus bandwidth across nodes ~ 8 x 50 GB/s in nccl-tests). A group with one
    /// rank per server (data parallel across tensor-parallel servers) gets one NIC.
    pub fn ring_gbs(&self, size: u64, stride: u64) -> f64 {
        let node = self.a.gpus_per_node.max(1) as u64;
        let nvlink = self.nvlink_gbs();
        let raw = if size.saturating_mul(stride) > node {
            let per_node = (node / stride.max(1)).clamp(1, size.max(1));
            (self.a.internode_gbs * per_node as f64).min(nvlink)
        } else {
            nvlink
        };
        raw * self.a.link_efficiency
    }

    /// Bandwidth, GB/s, of one GPU's own sends to ranks up to `span` ranks away (pipeline
    /// point-to-point, a context-parallel ring's neighbour, an all-to-all's share): every GPU
    /// moves its own bytes, so across servers it has its own NIC only.
    pub fn own_link_gbs(&self, span: u64) -> f64 {
        let node = self.a.gpus_per_node.max(1) as u64;
        let nvlink = self.nvlink_gbs();
        let raw = if span > node {
            self.a.internode_gbs.min(nvlink)
        } else {
            nvlink
        };
        raw * self.a.link_efficiency
    }
}

/// What the time model shares with the estimate of the same scenario: the parameter
/// inventory, the model states and one layer's saved bytes, computed once for both.
pub(crate) struct Prepared<'a> {
    pub inv: Cow<'a, ParamInventory>,
    pub st: Cow<'a, ModelStates>,
    pub layer_bytes: u64,
}

fn confidence(measured: bool) -> Confidence {
    if measured {
        Confidence::Calibrated
    } else {
        Confidence::Assumed
    }
}

fn peak_tflops(gpu: &Gpu, dtype: DType) -> f64 {
    let t = &gpu.dense_tflops;
    let v = match dtype {
        DType::Bf16 => t.bf16.or(t.fp16),
        DType::F16 => t.fp16.or(t.bf16),
        // PyTorch's default for fp32 matmuls is full fp32 (allow_tf32 is off since 1.12).
        _ => t.fp32,
    };
    v.or(t.fp32).unwrap_or(1.0).max(1e-3)
}
