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

use serde::Serialize;

use crate::calibration::schema::NativeReport;
use crate::catalog::Gpu;
use crate::dtype::DType;
use crate::estimate::Confidence;
use crate::model::ModelSpec;
use crate::model::params::{ParamInventory, Scope, inventory};
use crate::scenario::{
    Attention, Checkpointing, DataParallel, LossImpl, Method, Offload, Optimizer, Scenario,
};
use crate::states::model_states;

/// Square GEMM size at which the default cuBLAS efficiency curve reaches half its ceiling.
/// Why: cuBLAS needs enough 128x256 tiles to fill every SM in several waves; an H100 has 132
/// SMs, an A100 108, so below n ≈ 1–2k square problems leave SMs idle or run one wave.
pub const DEFAULT_GEMM_HALF_N: f64 = 256.0;
/// Ceiling of the default cuBLAS bf16 efficiency (fraction of dense peak) for large square
/// GEMMs. Why: public cuBLAS benchmarks reach ~750 of 989 TFLOP/s on H100 SXM (0.76) and
/// ~250–270 of 312 on A100 (0.80–0.87) at n = 8192; 0.80 sits between them.
pub const DEFAULT_GEMM_CEILING: f64 = 0.80;
/// End-to-end fraction of GEMM throughput a training framework sustains on its matrix
/// multiplies (kernel launches, small elementwise kernels between GEMMs, layout copies,
/// stragglers). FITTED on two rows of Narayanan et al. 2021 Table 1 (the 1.7B and 7.5B GPT
/// models on A100, the rows without pipeline parallelism, whose unpublished schedule would
/// otherwise enter the fit) and on nothing else; the other eight rows, Korthikanti et al. 2022
/// and Llama 3 405B on H100 are held out (`tests/time.rs` redoes the fit and prints the table).
pub const DEFAULT_FRAMEWORK_EFFICIENCY: f64 = 0.68;

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
}

impl Default for TimeAssumptions {
    fn default() -> Self {
        TimeAssumptions {
            gpus_per_node: 8,
            internode_gbs: 50.0,
            link_efficiency: 0.8,
            nvme_gbs: 3.0,
            host_memory_gbs: 25.0,
            virtual_stages: 1,
            framework_efficiency: DEFAULT_FRAMEWORK_EFFICIENCY,
        }
    }
}

/// Measured rates that replace the defaults: the runtime [`crate::Calibration`] carries only
/// memory constants, so the matmul curve and copy bandwidths come from the calibration file's
/// `native` report ([`Rates::from_native`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Rates {
    /// (square size n, fraction of the catalog's dense peak) sorted by n; empty: default curve.
    pub gemm_curve: Vec<(u64, f64)>,
    /// Pinned host-to-device bandwidth, GB/s.
    pub host_to_device_gbs: Option<f64>,
    /// Pinned device-to-host bandwidth, GB/s.
    pub device_to_host_gbs: Option<f64>,
    /// Where the rates come from, for formulas shown to people.
    pub source: String,
}

impl Rates {
    /// No measurement: the default curve and the catalog's host link.
    pub fn assumed() -> Self {
        Rates {
            gemm_curve: Vec::new(),
            host_to_device_gbs: None,
            device_to_host_gbs: None,
            source: "assumed".into(),
        }
    }

    /// The matmul curve for `dtype` and the pinned copy bandwidths of a calibration file.
    pub fn from_native(report: &NativeReport, dtype: DType, file: &str) -> Self {
        let name = dtype.torch_name().trim_start_matches("torch.");
        let mut curve: Vec<(u64, f64)> = report
            .matmul
            .iter()
            .filter(|p| p.dtype == name || p.dtype == format!("{dtype:?}").to_lowercase())
            .filter_map(|p| {
                p.efficiency
                    .filter(|e| e.is_finite() && *e > 0.0)
                    .map(|e| (p.n, e))
            })
            .collect();
        curve.sort_by_key(|p| p.0);
        let bw = |kind: &str| {
            report
                .bandwidth
                .iter()
                .find(|b| b.kind == kind)
                .map(|b| b.gb_per_s.median)
                .filter(|x| x.is_finite() && *x > 0.0)
        };
        Rates {
            gemm_curve: curve,
            host_to_device_gbs: bw("host_to_device_pinned"),
            device_to_host_gbs: bw("device_to_host_pinned"),
            source: format!("measured ({file})"),
        }
    }

    /// cuBLAS efficiency (fraction of dense peak) of a square GEMM of size `n`, and whether it
    /// was measured. Measured curves interpolate linearly in log n and clamp at their ends.
    pub fn gemm_efficiency(&self, n: f64) -> (f64, bool) {
        let c = &self.gemm_curve;
        if c.is_empty() {
            return (DEFAULT_GEMM_CEILING * n / (n + DEFAULT_GEMM_HALF_N), false);
        }
        let (first, last) = (c[0], c[c.len() - 1]);
        if n <= first.0 as f64 {
            return (first.1, true);
        }
        if n >= last.0 as f64 {
            return (last.1, true);
        }
        for w in c.windows(2) {
            let (a, b) = (w[0], w[1]);
            if n <= b.0 as f64 {
                let t = (n.ln() - (a.0 as f64).ln()) / ((b.0 as f64).ln() - (a.0 as f64).ln());
                return (a.1 + t * (b.1 - a.1), true);
            }
        }
        (last.1, true)
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

/// FLOPs per token of one model's matrix multiplies (whole model, before any splitting).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TokenFlops {
    /// Forward FLOPs per token of every Linear in the decoder layers (active experts only).
    pub layer_matmul_forward: f64,
    /// Backward FLOPs per token of those Linears (input and, where trainable, weight grads).
    pub layer_matmul_backward: f64,
    /// Forward FLOPs per token of Linears outside the layers (lm_head, OPT projections).
    pub outside_forward: f64,
    pub outside_backward: f64,
    /// Attention score and value matmuls per token over all layers, forward, as executed
    /// (full s x s for eager, the causal half for fused kernels).
    pub attention_forward: f64,
    /// Their backward (2x forward, 2.5x for fused kernels that recompute Q·Kᵀ).
    pub attention_backward: f64,
    /// Forward attention FLOPs per token with a causal mask's half only (model FLOPs).
    pub attention_causal_forward: f64,
    /// Parameters taking part in matrix multiplies per token (N of 6·N·T), and the
    /// trainable ones among them.
    pub matmul_params: f64,
    pub matmul_params_trainable: f64,
}

fn layer_count(inv: &ParamInventory, scope: Scope) -> f64 {
    match scope {
        Scope::Model => 1.0,
        Scope::Layer => (inv.dense_layers + inv.sparse_layers) as f64,
        Scope::DenseLayer => inv.dense_layers as f64,
        Scope::SparseLayer => inv.sparse_layers as f64,
    }
}

/// Matrix-multiply FLOPs per token of `spec` trained as `scen` says, from the parameter
/// inventory (`model/params.rs`).
pub fn token_flops(spec: &ModelSpec, scen: &Scenario) -> TokenFlops {
    let inv = inventory(spec);
    let full = scen.method == Method::Full;
    let r = scen.lora.rank as f64;
    let mut f = TokenFlops {
        layer_matmul_forward: 0.0,
        layer_matmul_backward: 0.0,
        outside_forward: 0.0,
        outside_backward: 0.0,
        attention_forward: 0.0,
        attention_backward: 0.0,
        attention_causal_forward: 0.0,
        matmul_params: 0.0,
        matmul_params_trainable: 0.0,
    };
    let top_k = spec.moe.as_ref().map_or(1, |m| m.top_k);
    for t in &inv.tensors {
        // Matrices that multiply activations: every Linear and the MoE router; embeddings are
        // lookups (no FLOPs); vectors (norms, biases) are elementwise.
        let is_router = t.name == "mlp.gate.weight";
        if t.linear.is_none() && !is_router {
            continue;
        }
        // Each token passes through top_k of the experts' copies (Fedus et al. 2021).
        let active = if t.copies > 1 { top_k.min(t.copies) } else { 1 } as f64;
        let n = t.d_in as f64 * t.d_out as f64 * active * layer_count(&inv, t.scope);
        let fwd = 2.0 * n;
        // Input gradient always (earlier layers or adapters need it); weight gradient only
        // when the weight trains.
        let mut bwd = if full { 4.0 * n } else { 2.0 * n };
        let mut fwd_total = fwd;
        f.matmul_params += n;
        if full {
            f.matmul_params_trainable += n;
        }
        if !full && t.linear.is_some() && crate::states::lora_adapts(scen, t) {
            // x·A (d_in x r) then ·B (r x d_out): 2r(d_in + d_out) forward, twice that back.
            let a = r * (t.d_in + t.d_out) as f64 * active * layer_count(&inv, t.scope);
            fwd_total += 2.0 * a;
            bwd += 4.0 * a;
            f.matmul_params += a;
            f.matmul_params_trainable += a;
        }
        if t.scope == Scope::Model {
            f.outside_forward += fwd_total;
            f.outside_backward += bwd;
        } else {
            f.layer_matmul_forward += fwd_total;
            f.layer_matmul_backward += bwd;
        }
    }
    // lm_head: tied models have no separate tensor in the inventory, but still multiply.
    let head_dim = if spec.family == crate::model::Family::Opt {
        spec.embed_proj_dim
    } else {
        spec.hidden
    };
    let head = head_dim as f64 * spec.vocab as f64;
    f.outside_forward += 2.0 * head;
    // The lm_head weight trains in full training (tied or not); LoRA freezes it.
    f.outside_backward += if full { 4.0 * head } else { 2.0 * head };
    f.matmul_params += head;
    if full {
        f.matmul_params_trainable += head;
    }
    // Attention: Q·Kᵀ and P·V, 2·s·d each per token per layer, over the whole s x s matrix
    // (Korthikanti et al. 2022 App. A). A sliding window bounds the keys a query sees.
    let s = scen.seq as f64;
    let keys = spec.sliding_window.map_or(s, |w| s.min(w as f64));
    let full_matrix = 4.0 * keys * spec.q_dim() as f64 * spec.layers as f64;
    // Causal: on average a query sees half the keys (s/2 for a full window).
    let causal = if keys < s {
        full_matrix * (1.0 - keys / (2.0 * s))
    } else {
        full_matrix / 2.0
    };
    f.attention_causal_forward = causal;
    match scen.attention {
        Attention::Eager => {
            // Eager multiplies the whole s x s matrix and masks afterwards, window or not.
            let eager = 4.0 * s * spec.q_dim() as f64 * spec.layers as f64;
            f.attention_forward = eager;
            f.attention_backward = 2.0 * eager;
        }
        Attention::Sdpa => {
            f.attention_forward = causal;
            f.attention_backward = 2.5 * causal;
        }
    }
    f
}

/// Layers whose forward runs twice under `ckpt` (checkpointed layers), of `layers`.
pub fn recomputed_layers(ckpt: Checkpointing, layers: u64) -> u64 {
    ckpt.checkpointed_layers(layers)
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

/// Ring collective time: each GPU sends `factor·(n−1)/n·bytes` at `gbs` GB/s.
fn ring_seconds(bytes: f64, n: u64, factor: f64, gbs: f64) -> (f64, f64) {
    if n <= 1 || bytes <= 0.0 {
        return (0.0, 0.0);
    }
    let moved = factor * (n - 1) as f64 / n as f64 * bytes;
    (moved, moved / (gbs.max(1e-3) * 1e9))
}

/// The step time of `scen` with the default assumptions and no measured rates.
pub fn step_time(spec: &ModelSpec, gpu: &Gpu, scen: &Scenario) -> StepTime {
    step_time_with(
        spec,
        gpu,
        scen,
        &Rates::assumed(),
        &TimeAssumptions::default(),
    )
}

/// The step time of `scen` on `gpu` with measured `rates` and explicit assumptions.
pub fn step_time_with(
    spec: &ModelSpec,
    gpu: &Gpu,
    scen: &Scenario,
    rates: &Rates,
    a: &TimeAssumptions,
) -> StepTime {
    let tf = token_flops(spec, scen);
    let tp = scen.parallel.tensor.max(1) as u64;
    let pp = scen.parallel.pipeline.max(1) as u64;
    let dp = scen.data_parallel().max(1) as u64;
    let mp = (tp * pp) as f64;
    let b = scen.micro_batch as f64;
    let s = scen.seq as f64;
    let m = scen.grad_accum.max(1) as f64;
    // Tokens one data-parallel replica processes per optimizer step.
    let tokens = b * s * m;
    let layers = spec.layers.max(1) as f64;
    let half = scen.precision.half_dtype().bytes() as f64;
    let act_bytes = if scen.precision.compute_dtype() == DType::F32 {
        4.0
    } else {
        half
    };
    let peak = peak_tflops(gpu, scen.precision.compute_dtype());
    // The GEMMs' square-equivalent size: the cube root of M·K·N for a typical projection
    // (M = tokens of a micro-batch, K = hidden, N = hidden / tp), since a GEMM's efficiency
    // tracks its work per tile wave; few tokens or a narrow TP shard make it small.
    let n = (b * s * spec.hidden as f64 * (spec.hidden as f64 / tp as f64))
        .cbrt()
        .max(1.0);
    let (gemm_eff, measured_gemm) = rates.gemm_efficiency(n);
    let eff = (gemm_eff * a.framework_efficiency).clamp(1e-3, 1.0);
    let rate = peak * 1e12 * eff;
    let eff_conf = if measured_gemm {
        Confidence::Calibrated
    } else {
        Confidence::Assumed
    };
    let eff_text = if measured_gemm {
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
    let mut terms: Vec<TimeTerm> = Vec::new();
    let mut compute = |id: &'static str, name: &str, flops: f64, formula: String, source: &str| {
        let seconds = flops / rate;
        terms.push(TimeTerm {
            id,
            name: name.to_string(),
            kind: TermKind::Compute,
            flops,
            bytes: 0,
            seconds,
            exposed_seconds: seconds,
            formula: format!("{formula}; at {peak} TFLOP/s x {eff:.3} ({eff_text})"),
            source: source.to_string(),
            confidence: eff_conf,
        });
    };

    // Per GPU: layers split over pipeline stages, each matmul split over tensor ranks.
    let fwd_layers = (tf.layer_matmul_forward + tf.attention_forward) * tokens / mp;
    let fwd_outside = tf.outside_forward * tokens / mp;
    let bwd =
        (tf.layer_matmul_backward + tf.attention_backward + tf.outside_backward) * tokens / mp;
    compute(
        "forward",
        "forward matrix multiplies",
        fwd_layers + fwd_outside,
        format!(
            "(2·N_linear + 2·h·V + attention {:.3e}/token) x {tokens:.0} tokens / (tp·pp = {mp})",
            tf.attention_forward
        ),
        "2 FLOPs per multiply-add (Kaplan et al. 2020 §2.1); attention per Korthikanti et al. 2022 App. A",
    );
    compute(
        "backward",
        "backward matrix multiplies",
        bwd,
        format!(
            "input grads 2·N + weight grads 2·N_trainable + attention x{} x {tokens:.0} tokens / {mp}",
            if scen.attention == Attention::Sdpa {
                "2.5 (Q·Kᵀ recomputed)"
            } else {
                "2"
            }
        ),
        "backward = 2x forward (Kaplan et al. 2020; EleutherAI Transformer Math 101); FlashAttention-2 (Dao 2023) backward 5 matmuls",
    );
    let ck = recomputed_layers(scen.checkpointing, spec.layers) as f64;
    let per_layer_fwd = (tf.layer_matmul_forward + tf.attention_forward) / layers;
    let recompute = match scen.checkpointing {
        Checkpointing::Selective if scen.attention == Attention::Eager => {
            // Korthikanti's selective recompute reruns Q·Kᵀ and softmax (P·V's output is not
            // needed by backward): half the eager attention forward.
            0.5 * tf.attention_forward * tokens / mp
        }
        // Fused attention already recomputes in backward: selective adds nothing.
        Checkpointing::Selective => 0.0,
        _ => ck * per_layer_fwd * tokens / mp,
    };
    if recompute > 0.0 {
        compute(
            "recompute",
            "recompute under checkpointing",
            recompute,
            match scen.checkpointing {
                Checkpointing::Selective => "0.5 x eager attention forward (Q·Kᵀ, softmax)".into(),
                c => format!(
                    "{ck:.0} checkpointed layers ({}) x one layer forward x {tokens:.0} tokens / {mp}",
                    c.id()
                ),
            },
            "one extra forward per checkpointed layer (Chen et al. 2016; Korthikanti et al. 2022 §4-5)",
        );
    }
    let hbm = gpu.memory_bandwidth_gbs.max(1.0) * 1e9;
    let mut memory = |id: &'static str, name: &str, bytes: f64, formula: String, source: &str| {
        let seconds = bytes / hbm;
        terms.push(TimeTerm {
            id,
            name: name.to_string(),
            kind: TermKind::Memory,
            flops: 0.0,
            bytes: bytes as u64,
            seconds,
            exposed_seconds: seconds,
            formula: format!("{formula} / {} GB/s HBM", gpu.memory_bandwidth_gbs),
            source: source.to_string(),
            confidence: Confidence::Assumed,
        });
    };
    if scen.attention == Attention::Eager {
        // Memory-bound softmax on the s x s scores: HF eager writes scores (2), adds the mask
        // (2 + 2), softmax in fp32 (read 2, write 4, read 4 to cast, write 2), P·V reads 2:
        // ~20 bytes per score forward, about twice that backward; recompute adds a forward.
        let passes = 60.0 + if ck > 0.0 { 20.0 * ck / layers } else { 0.0 };
        let scores = spec.heads as f64 * s * s * b * layers * m / mp;
        memory(
            "eager_softmax",
            "eager attention's s x s softmax traffic",
            scores * passes,
            format!("heads·s²·b·L x {passes:.0} bytes (20 forward, 40 backward)"),
            "transformers eager_attention_forward (fp32 softmax); assumed pass count",
        );
    }
    let loss_bytes = match scen.loss {
        // logits half (write 2, read 2), fp32 upcast (write 4), log_softmax (read 4, write 4),
        // backward (read 4 x 2, write 4, cast write 2): ~30 bytes per logit.
        LossImpl::Hf => 30.0,
        // Liger's fused linear cross-entropy keeps chunks on chip mostly: ~8 bytes per logit.
        LossImpl::Fused => 8.0,
    };
    // The loss runs on the last pipeline stage; averaged per GPU like the matmuls.
    memory(
        "loss",
        "cross-entropy over the logits",
        b * s * m * spec.vocab as f64 * loss_bytes / mp,
        format!("b·s·V x {loss_bytes} bytes per logit"),
        "transformers ForCausalLMLoss (fp32 upcast); Liger fused linear cross-entropy",
    );
    let inv = inventory(spec);
    if scen.method == Method::Qlora {
        // bitsandbytes' MatMul4Bit dequantizes each NF4 weight to 16 bits for every use: in
        // forward, again for the input gradient in backward, and once more per recomputed
        // (checkpointed) layer. Each use reads the 4-bit weight (0.5 B) and writes the 16-bit
        // copy (2 B) that the matmul then reads in place of a stored 16-bit weight.
        let quantized: f64 = inv
            .tensors
            .iter()
            .filter(|t| t.quantizable && t.scope != Scope::Model)
            .map(|t| t.numel() as f64 * layer_count(&inv, t.scope))
            .sum();
        let uses = 2.0 + ck / layers.max(1.0);
        memory(
            "dequantize_4bit",
            "QLoRA: NF4 weights dequantized for every use",
            quantized * 2.5 * uses * m / mp,
            format!(
                "{quantized:.3e} NF4 weights x 2.5 bytes x {uses:.2} uses per micro-batch x {m:.0}"
            ),
            "bitsandbytes MatMul4Bit (dequantize_4bit in forward and backward); assumed bytes per use",
        );
    }
    let st = model_states(spec, &inv, scen);
    let opt_on_gpu = scen.parallel.offload_optimizer == Offload::None;
    let pass = match scen.optimizer {
        // foreach AdamW runs ~6 elementwise kernels over the states; fused does one pass.
        Optimizer::AdamWFused => 1.0,
        Optimizer::Sgd => 1.0,
        _ => 2.0,
    };
    // The step reads and writes only the weights that train: all of them in full training, the
    // adapters with LoRA/QLoRA (a frozen base is never touched; the adapters' bytes equal their
    // gradients', same dtype).
    let updated_weights = if scen.method == Method::Full {
        st.weights
    } else {
        st.gradients
    };
    let opt_traffic = 2.0 * (st.optimizer.device + st.optimizer.paged + st.master_weights) as f64
        + st.gradients as f64
        + 2.0 * updated_weights as f64;
    if opt_on_gpu {
        memory(
            "optimizer",
            "optimizer step",
            pass * opt_traffic,
            format!(
                "{pass} x (2 x states + 2 x weights + gradients) = {pass} x {opt_traffic:.3e} bytes"
            ),
            "elementwise update, memory-bound (optimizer.rs state bytes)",
        );
    }

    // Transfers: host link (pinned copies), NVMe.
    let h2d = rates.host_to_device_gbs.unwrap_or(gpu.host_link_gbs);
    let d2h = rates.device_to_host_gbs.unwrap_or(gpu.host_link_gbs);
    let link_conf = if rates.host_to_device_gbs.is_some() {
        Confidence::Calibrated
    } else {
        Confidence::Assumed
    };
    let mut transfer = |id: &'static str,
                        name: &str,
                        bytes: f64,
                        gbs: f64,
                        formula: String,
                        source: &str,
                        conf| {
        let seconds = bytes / (gbs.max(1e-3) * 1e9);
        terms.push(TimeTerm {
            id,
            name: name.to_string(),
            kind: TermKind::Transfer,
            flops: 0.0,
            bytes: bytes as u64,
            seconds,
            // Assumed not overlapped: save_on_cpu copies on the compute stream, and ZeRO's
            // offload waits for the CPU step before the next forward.
            exposed_seconds: seconds,
            formula: format!("{formula} at {gbs:.1} GB/s"),
            source: source.to_string(),
            confidence: conf,
        });
    };
    if scen.offload_activations {
        // Saved tensors of every local layer go to the host in forward and back in backward;
        // under checkpointing only each layer's input (b·s·h) is saved.
        let per_layer = if ck > 0.0 {
            b * s * spec.hidden as f64 * act_bytes
        } else {
            let sh = crate::activations::Shape::from_scenario(spec, scen);
            crate::activations::total(&crate::activations::layer(spec, &sh)) as f64
        };
        // Both directions: out in forward (device to host), back in backward.
        let bytes = 2.0 * per_layer * (spec.layers as f64 / pp as f64).ceil() * m;
        transfer(
            "offload_activations",
            "activation offload (save_on_cpu)",
            bytes,
            // Harmonic mean: half the bytes at each direction's bandwidth.
            2.0 / (1.0 / d2h + 1.0 / h2d),
            format!(
                "saved bytes/layer x {} layers x {m} micro-batches, out and back",
                spec.layers.div_ceil(pp)
            ),
            "torch.autograd.graph.save_on_cpu(pin_memory=True)",
            link_conf,
        );
    }
    let params_local = st.params_local as f64;
    let trainable_local = (st.params_trainable as f64 / mp).max(0.0);
    let grad_dtype = if scen.method == Method::Full {
        scen.precision.param_dtype().bytes() as f64
    } else {
        scen.lora.adapter_dtype.bytes() as f64
    };
    let param_dtype = scen.precision.param_dtype().bytes() as f64;
    match scen.parallel.offload_optimizer {
        Offload::None => {}
        target => {
            // ZeRO-Offload: gradients to the host, updated 16-bit parameters back, per step
            // (Ren et al. 2021, §4.1); the CPU runs Adam over fp32 states.
            let shard = trainable_local / dp as f64;
            let bytes = shard * (grad_dtype + half);
            transfer(
                "offload_optimizer_link",
                "optimizer offload: gradients out, parameters back",
                bytes,
                h2d.min(d2h),
                format!("trainable/dp x ({grad_dtype} + {half}) bytes"),
                "ZeRO-Offload (Ren et al. 2021) data flow",
                link_conf,
            );
            let cpu_bytes = shard * 28.0;
            transfer(
                "offload_optimizer_cpu",
                "optimizer step on the CPU",
                cpu_bytes,
                a.host_memory_gbs,
                "trainable/dp x 28 bytes (read p, g, m, v; write p, m, v in fp32)".into(),
                "CPU Adam is memory-bound; host bandwidth per GPU assumed",
                Confidence::Assumed,
            );
            if target == Offload::Nvme {
                transfer(
                    "offload_optimizer_nvme",
                    "optimizer states from and to NVMe",
                    shard * 24.0,
                    a.nvme_gbs,
                    "trainable/dp x 12 bytes (p, m, v fp32) read and written".into(),
                    "ZeRO-Infinity (Rajbhandari et al. 2021)",
                    Confidence::Assumed,
                );
            }
        }
    }
    match scen.parallel.offload_params {
        Offload::None => {}
        target => {
            // Parameters come back for every micro-batch's forward and backward.
            let bytes = params_local / dp as f64 * half * 2.0 * m;
            let (gbs, what) = if target == Offload::Nvme {
                (a.nvme_gbs, "NVMe")
            } else {
                (h2d, "host link")
            };
            transfer(
                "offload_params",
                "parameter offload: fetch for forward and backward",
                bytes,
                gbs,
                format!("params/dp x {half} bytes x 2 x {m} micro-batches over the {what}"),
                "ZeRO-3 offload / ZeRO-Infinity parameter fetch",
                if target == Offload::Nvme {
                    Confidence::Assumed
                } else {
                    link_conf
                },
            );
        }
    }

    // Communication. Ranks are laid out tensor-innermost, then data, then pipeline (Megatron's
    // default order), so a group crosses servers when its span exceeds a server.
    let node = a.gpus_per_node.max(1) as u64;
    let nvlink = if gpu.peer_link_gbs > 0.0 {
        // Catalog peer bandwidths are both directions together (NVLink 4: 900 = 2 x 450).
        gpu.peer_link_gbs / 2.0
    } else {
        gpu.host_link_gbs
    };
    let bw = |span: u64| {
        let raw = if span > node {
            a.internode_gbs.min(nvlink)
        } else {
            nvlink
        };
        raw * a.link_efficiency
    };
    let backward_seconds: f64 = terms
        .iter()
        .filter(|t| t.id == "backward")
        .map(|t| t.seconds)
        .sum();
    let forward_seconds: f64 = terms
        .iter()
        .filter(|t| t.id == "forward" || t.id == "recompute")
        .map(|t| t.seconds)
        .sum();
    let compute_seconds: f64 = terms
        .iter()
        .filter(|t| {
            matches!(
                t.id,
                "forward" | "backward" | "recompute" | "eager_softmax" | "loss"
            )
        })
        .map(|t| t.seconds)
        .sum();
    let mut comm = |id: &'static str,
                    name: &str,
                    moved: f64,
                    secs: f64,
                    window: f64,
                    formula: String,
                    source: &str| {
        if moved <= 0.0 {
            return;
        }
        terms.push(TimeTerm {
            id,
            name: name.to_string(),
            kind: TermKind::Communication,
            flops: 0.0,
            bytes: moved as u64,
            seconds: secs,
            exposed_seconds: (secs - window).max(0.0),
            formula,
            source: source.to_string(),
            confidence: Confidence::Assumed,
        });
    };
    if dp > 1 {
        let span = dp * tp;
        let g = bw(span);
        let grads = trainable_local * grad_dtype;
        let (factor, per_micro, what) = match scen.parallel.data {
            // DDP all-reduces once per step (no_sync during accumulation).
            DataParallel::Ddp => (2.0, false, "all-reduce of gradients"),
            // ZeRO-1: reduce-scatter + all-gather of updated params = all-reduce volume.
            DataParallel::Zero1 => (2.0, false, "reduce-scatter grads + all-gather params"),
            // ZeRO-2 reduces (scatters) gradients at every micro-batch.
            DataParallel::Zero2 => (
                2.0,
                true,
                "reduce-scatter grads each micro-batch + all-gather params",
            ),
            // ZeRO-3 / FSDP: all-gather params in forward and backward, reduce-scatter grads.
            DataParallel::Zero3 | DataParallel::Fsdp => (
                3.0,
                true,
                "all-gather fwd + all-gather bwd + reduce-scatter",
            ),
        };
        let reps = if per_micro { m } else { 1.0 };
        let bytes = if factor == 3.0 {
            // Gathers move all local parameters (frozen included) in the dtype the model
            // holds them in, twice; the scatter moves the gradients once.
            params_local * param_dtype * 2.0 + grads
        } else {
            grads * 2.0
        };
        let (moved, secs) = ring_seconds(bytes * reps, dp, 1.0, g);
        // Overlap: buckets reduce while backward continues (DDP, ZeRO), and ZeRO-3/FSDP
        // prefetch the next unit's parameters during compute: communication hides behind the
        // compute it overlaps with, all of it at best (the exposed part is what exceeds it).
        let window = if per_micro {
            (forward_seconds + backward_seconds) * if factor == 3.0 { 1.0 } else { 0.5 }
        } else {
            backward_seconds / m
        };
        comm(
            "data_parallel",
            &format!("data parallel ({what})"),
            moved,
            secs,
            window,
            format!(
                "{factor}·(n−1)/n x {:.3e} bytes x {reps} over n = {dp} at {g:.0} GB/s; overlapped with {}",
                bytes / factor,
                if per_micro {
                    "forward + backward"
                } else {
                    "the last micro-batch's backward"
                }
            ),
            "ring all-reduce 2(n−1)/n (Patarasuk & Yuan 2009); ZeRO 1/2 = DDP volume, ZeRO-3 = 1.5x (Rajbhandari et al. 2020 §7)",
        );
    }
    if tp > 1 {
        // Megatron: two all-reduces of b·s·h per layer in forward, two in backward (and two in
        // each recomputed forward); sequence parallelism swaps them for reduce-scatter +
        // all-gather of the same volume (Korthikanti et al. 2022 §4.2.2).
        let per = b * s * spec.hidden as f64 * act_bytes;
        let layers_local = (spec.layers as f64 / pp as f64).ceil();
        let recomputed_local = ck / pp as f64;
        let count = (4.0 * layers_local + 2.0 * recomputed_local) * m;
        let g = bw(tp);
        let (moved, secs) = ring_seconds(per * count, tp, 2.0, g);
        comm(
            "tensor_parallel",
            "tensor parallel all-reduces of activations",
            moved,
            secs,
            0.0,
            format!(
                "(4 per layer + 2 per recomputed layer) x b·s·h x 2(t−1)/t, t = {tp}, at {g:.0} GB/s; on the critical path"
            ),
            "Shoeybi et al. 2019 (Megatron-LM) §3; Korthikanti et al. 2022 §4.2",
        );
    }
    if pp > 1 {
        // Point-to-point activations at each stage boundary, forward and backward.
        let per = b * s * spec.hidden as f64 * act_bytes / tp as f64;
        let g = bw(tp * dp * 2);
        let moved = per * 2.0 * m;
        comm(
            "pipeline_p2p",
            "pipeline sends between stages",
            moved,
            moved / (g * 1e9),
            0.0,
            format!("2 x b·s·h/t x {m} micro-batches at {g:.0} GB/s"),
            "Narayanan et al. 2021 §2.2",
        );
        // 1F1B bubble: (p−1)/(v·m) of the compute of m micro-batches, i.e. the idle fraction
        // (p−1)/(v·m + p−1) of the pipelined part (Narayanan et al. 2021 §2.2, eq. 1 and §2.2.2).
        let v = a.virtual_stages.max(1) as f64;
        let bubble = compute_seconds * (pp - 1) as f64 / (v * m);
        terms.push(TimeTerm {
            id: "pipeline_bubble",
            name: "pipeline bubble".into(),
            kind: TermKind::Idle,
            flops: 0.0,
            bytes: 0,
            seconds: bubble,
            exposed_seconds: bubble,
            formula: format!(
                "compute x (p−1)/(v·m) = x {}/({v}·{m}): idle fraction (p−1)/(v·m+p−1)",
                pp - 1
            ),
            source: "Narayanan et al. 2021 (arXiv 2104.04473) §2.2".into(),
            confidence: Confidence::Exact,
        });
    }

    let step_seconds: f64 = terms
        .iter()
        .map(|t| t.exposed_seconds)
        .sum::<f64>()
        .max(1e-12);
    let hardware_flops: f64 = terms.iter().map(|t| t.flops).sum();
    // Model FLOPs: what the model needs, no recompute, causal attention counted once:
    // 2·N fwd + 2·N input grads + 2·N_trainable weight grads + 3x causal attention forward
    // (forward 1 + backward 2; flash's 2.5x backward includes a recompute MFU leaves out).
    let model_per_token = 4.0 * tf.matmul_params
        + 2.0 * tf.matmul_params_trainable
        + 3.0 * tf.attention_causal_forward;
    let model_flops = model_per_token * tokens / mp;
    let tokens_per_step = (scen.micro_batch as u64)
        .saturating_mul(scen.seq as u64)
        .saturating_mul(scen.grad_accum as u64)
        .saturating_mul(dp);
    let tokens_per_second = tokens_per_step as f64 / step_seconds;
    let gpus = scen.gpus.max(1) as f64;
    let peak_flops = peak * 1e12;
    let confidence = if terms
        .iter()
        .filter(|t| t.exposed_seconds > 0.05 * step_seconds)
        .all(|t| t.confidence != Confidence::Assumed)
    {
        Confidence::Calibrated
    } else {
        Confidence::Assumed
    };
    StepTime {
        hardware_flops_per_gpu: hardware_flops,
        model_flops_per_gpu: model_flops,
        peak_tflops: peak,
        matmul_efficiency: eff,
        step_seconds,
        tokens_per_step,
        tokens_per_second,
        tokens_per_second_per_gpu: tokens_per_second / gpus,
        mfu: model_flops / (step_seconds * peak_flops),
        hfu: hardware_flops / (step_seconds * peak_flops),
        confidence,
        terms,
    }
}
