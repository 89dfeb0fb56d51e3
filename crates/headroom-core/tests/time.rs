//! The time model: FLOPs against closed forms, recompute, LoRA, and step times against
//! published training throughputs (run with `--nocapture` to see the error table).

use headroom_core::GpuCatalog;
use headroom_core::calibration::schema::{Bandwidth, MatmulPoint, Measured, NativeReport};
use headroom_core::dtype::DType;
use headroom_core::estimate::resolve_model;
use headroom_core::model::{ModelSpec, parse_config_json};
use headroom_core::scenario::{
    Attention, Checkpointing, DataParallel, Method, ModelChoice, Optimizer, Precision, Scenario,
};
use headroom_core::time::{
    DEFAULT_FRAMEWORK_EFFICIENCY, Rates, StepTime, TimeAssumptions, recomputed_layers, step_time,
    step_time_with, token_flops,
};
use headroom_core::{Calibration, Confidence, analyze};

use crate::common;
use common::{measured_link, measured_on_gpu};

fn llama8b() -> (Scenario, ModelSpec) {
    let scen = Scenario::default();
    let (_, spec) = resolve_model(&scen).expect("preset");
    (scen, spec)
}

/// The step time with no calibration: the documented default rates.
fn uncalibrated(spec: &ModelSpec, gpu: &headroom_core::Gpu, scen: &Scenario) -> StepTime {
    step_time(spec, gpu, &Calibration::assumed(gpu), scen)
}

fn gpu(id: &str) -> headroom_core::Gpu {
    GpuCatalog::builtin().get(id).expect("gpu").clone()
}

/// Linear parameters of Llama 3.1 8B from its shapes (no inventory): the N of 6·N·T.
fn llama8b_linear_params(spec: &ModelSpec) -> (f64, f64) {
    let (h, q, kv, f, l, v) = (
        spec.hidden as f64,
        spec.q_dim() as f64,
        spec.kv_dim() as f64,
        spec.intermediate as f64,
        spec.layers as f64,
        spec.vocab as f64,
    );
    let layers = l * (h * (q + 2.0 * kv) + q * h + 3.0 * h * f);
    (layers, h * v)
}

#[track_caller]
fn close(a: f64, b: f64, rel: f64) {
    assert!(
        (a - b).abs() <= rel * b.abs(),
        "{a:.6e} vs {b:.6e} (rel {:.2e})",
        (a - b).abs() / b.abs()
    );
}

#[test]
fn dense_flops_are_6nt_plus_attention() {
    let (scen, spec) = llama8b();
    let t = uncalibrated(&spec, &gpu("h100-sxm-80gb"), &scen);
    let (n_layers, n_head) = llama8b_linear_params(&spec);
    let tokens = 4096.0;
    let (s, q, l) = (4096.0, spec.q_dim() as f64, spec.layers as f64);
    // SDPA runs the causal half: forward 2·s·q·L per token (Q·Kᵀ and P·V, 2·s·q each, halved),
    // backward 2.5x forward (FlashAttention-2 recomputes Q·Kᵀ).
    let attn_fwd = 2.0 * s * q * l;
    let expect = 6.0 * (n_layers + n_head) * tokens + 3.5 * attn_fwd * tokens;
    close(t.hardware_flops_per_gpu, expect, 1e-12);
    // MFU's model FLOPs: 6·N·T + 3x causal attention forward (no flash recompute).
    close(
        t.model_flops_per_gpu,
        6.0 * (n_layers + n_head) * tokens + 3.0 * attn_fwd * tokens,
        1e-12,
    );
    // Eager computes the whole s x s matrix, 2x in backward.
    let eager = Scenario {
        attention: Attention::Eager,
        ..scen.clone()
    };
    let te = uncalibrated(&spec, &gpu("h100-sxm-80gb"), &eager);
    close(
        te.hardware_flops_per_gpu,
        6.0 * (n_layers + n_head) * tokens + 3.0 * 2.0 * attn_fwd * tokens,
        1e-12,
    );
    assert!(te.term("eager_softmax").is_some());
}

#[test]
fn full_recompute_adds_one_forward_of_every_layer() {
    let (scen, spec) = llama8b();
    let g = gpu("h100-sxm-80gb");
    let base = uncalibrated(&spec, &g, &scen);
    let full = Scenario {
        checkpointing: Checkpointing::Full,
        ..scen.clone()
    };
    let t = uncalibrated(&spec, &g, &full);
    let (n_layers, n_head) = llama8b_linear_params(&spec);
    let tokens = 4096.0;
    let attn_fwd = 2.0 * 4096.0 * spec.q_dim() as f64 * spec.layers as f64;
    // 8·N_layers·T (the 8·N·T of Korthikanti et al.'s 96 vs 72) + 6·N_head·T (lm_head is
    // outside the checkpointed layers) + attention 1 + 2.5 + 1 forward.
    let expect = 8.0 * n_layers * tokens + 6.0 * n_head * tokens + 4.5 * attn_fwd * tokens;
    close(t.hardware_flops_per_gpu, expect, 1e-12);
    // The fused kernel's attention (forward, backward and the recomputed forward) is its own
    // term, at the kernel's rate; the recompute term holds the layers' matmuls.
    let recomputed = t.term("recompute").expect("recompute term").flops;
    close(recomputed, 2.0 * n_layers * tokens, 1e-12);
    let attention = t.term("attention").expect("attention term").flops;
    close(attention, 4.5 * attn_fwd * tokens, 1e-12);
    close(
        t.hardware_flops_per_gpu - base.hardware_flops_per_gpu,
        (2.0 * n_layers + attn_fwd) * tokens,
        1e-9,
    );
    // Model FLOPs (MFU) do not count recompute; hardware FLOPs (HFU) do.
    close(t.model_flops_per_gpu, base.model_flops_per_gpu, 1e-12);
    assert!(t.hfu > t.mfu && t.step_seconds > base.step_seconds);
}

#[test]
fn every_k_recomputes_the_checkpointed_layers_only() {
    let (scen, spec) = llama8b();
    let g = gpu("h100-sxm-80gb");
    assert_eq!(recomputed_layers(Checkpointing::Every(3), 32), 11);
    assert_eq!(recomputed_layers(Checkpointing::Full, 32), 32);
    assert_eq!(recomputed_layers(Checkpointing::Selective, 32), 0);
    let full = uncalibrated(
        &spec,
        &g,
        &Scenario {
            checkpointing: Checkpointing::Full,
            ..scen.clone()
        },
    );
    let every3 = uncalibrated(
        &spec,
        &g,
        &Scenario {
            checkpointing: Checkpointing::Every(3),
            ..scen.clone()
        },
    );
    let per_layer = full.term("recompute").expect("term").flops / 32.0;
    close(
        every3.term("recompute").expect("term").flops,
        11.0 * per_layer,
        1e-12,
    );
    // Selective with fused attention recomputes nothing (flash already recomputes).
    let sel = uncalibrated(
        &spec,
        &g,
        &Scenario {
            checkpointing: Checkpointing::Selective,
            ..scen.clone()
        },
    );
    assert!(sel.term("recompute").is_none());
    // Selective with eager attention recomputes half of the attention forward (Q·Kᵀ, softmax).
    let eager = Scenario {
        attention: Attention::Eager,
        ..scen.clone()
    };
    let sel_eager = uncalibrated(
        &spec,
        &g,
        &Scenario {
            checkpointing: Checkpointing::Selective,
            ..eager.clone()
        },
    );
    let attn_full_fwd = 4.0 * 4096.0 * spec.q_dim() as f64 * spec.layers as f64 * 4096.0;
    close(
        sel_eager.term("recompute").expect("term").flops,
        0.5 * attn_full_fwd,
        1e-12,
    );
}

#[test]
fn lora_freezes_weight_gradients() {
    let (scen, spec) = llama8b();
    let lora = Scenario {
        method: Method::Lora,
        ..scen.clone()
    };
    let gpu = GpuCatalog::builtin().get(&scen.gpu).expect("gpu");
    let full = token_flops(&spec, gpu, &scen);
    let tf = token_flops(&spec, gpu, &lora);
    let (n_layers, n_head) = llama8b_linear_params(&spec);
    let (h, q, kv, f, l) = (
        spec.hidden as f64,
        spec.q_dim() as f64,
        spec.kv_dim() as f64,
        spec.intermediate as f64,
        spec.layers as f64,
    );
    // Adapters on all 7 Linears: r·(d_in + d_out) each.
    let r = lora.lora.rank as f64;
    let adapters = l * r * ((h + q) + 2.0 * (h + kv) + (q + h) + 2.0 * (h + f) + (f + h));
    close(tf.matmul_params, n_layers + n_head + adapters, 1e-12);
    close(tf.matmul_params_trainable, adapters, 1e-12);
    // Frozen: forward 2N, backward 2N (input grads only); adapters 6 per parameter.
    let total = tf.layer_matmul_forward
        + tf.layer_matmul_backward
        + tf.outside_forward
        + tf.outside_backward;
    close(total, 4.0 * (n_layers + n_head) + 6.0 * adapters, 1e-12);
    let full_total = full.layer_matmul_forward
        + full.layer_matmul_backward
        + full.outside_forward
        + full.outside_backward;
    close(full_total, 6.0 * (n_layers + n_head), 1e-12);
}

#[test]
fn moe_counts_active_experts_only() {
    let spec = parse_config_json(
        r#"{"model_type":"mixtral","vocab_size":32000,"hidden_size":4096,"intermediate_size":14336,
        "num_hidden_layers":32,"num_attention_heads":32,"num_key_value_heads":8,
        "num_local_experts":8,"num_experts_per_tok":2}"#,
    )
    .expect("mixtral parses");
    let scen = Scenario {
        model: ModelChoice::Custom(Box::new(spec.clone())),
        ..Scenario::default()
    };
    let gpu = GpuCatalog::builtin().get(&scen.gpu).expect("gpu");
    let tf = token_flops(&spec, gpu, &scen);
    let (h, q, kv, f, l, v) = (4096.0, 4096.0, 1024.0, 14336.0, 32.0, 32000.0);
    // Mixtral 8x7B: ~12.9B active parameters per token (Jiang et al. 2024).
    let active = l * (h * (q + 2.0 * kv) + q * h + 2.0 * 3.0 * h * f + h * 8.0) + h * v;
    close(tf.matmul_params, active, 1e-12);
}

/// Qwen3-Next 80B-A3B's softmax attention runs in 12 of its 48 layers (`layer_types`: three
/// gated DeltaNet layers, then one full-attention layer); the other 36 run the chunked delta
/// rule (chunks of 64, 32 value heads of 128, key heads of 128), whose products per token and
/// head are 4 x 64 x 128 + 3 x 64 x 128 + 6 x 128 x 128 FLOPs (k beta k^T, q k^T, the
/// triangular solve; the intra-chunk attention; the three products with the state).
#[test]
fn qwen3_next_attention_flops_count_its_full_attention_layers_only() {
    let scen = Scenario {
        model: ModelChoice::Preset("qwen3-next-80b-a3b".into()),
        seq: 4096,
        ..Scenario::default()
    };
    let (_, spec) = resolve_model(&scen).expect("preset");
    let gpu = GpuCatalog::builtin().get(&scen.gpu).expect("gpu");
    let tf = token_flops(&spec, gpu, &scen);
    // 16 heads x 256 (q width 4,096), causal: half of 4 x s x q width per softmax layer.
    let softmax = 4.0 * 4096.0 * 4096.0 * 12.0 / 2.0;
    let delta = (4.0 * 64.0 * 128.0 + 3.0 * 64.0 * 128.0 + 6.0 * 128.0 * 128.0) * 32.0 * 36.0;
    close(tf.attention_causal_forward, softmax + delta, 1e-12);
}

/// Llama 4 Scout (config.json: hidden 5,120, 40/8 heads of 128, 16 experts of 8,192, top-1, a
/// shared expert of 8,192, 48 MoE layers): its model FLOPs count the chosen expert (Meta's "17B
/// active", embeddings included), but transformers' Llama4TextMoe runs every token through all
/// 16 experts by bmm, which is what the GPU executes.
#[test]
fn llama4_executes_every_expert_and_counts_the_chosen_one() {
    let scen = Scenario {
        model: ModelChoice::Preset("llama-4-scout-17b-16e".into()),
        ..Scenario::default()
    };
    let (_, spec) = resolve_model(&scen).expect("preset");
    let gpu = GpuCatalog::builtin().get(&scen.gpu).expect("gpu");
    let tf = token_flops(&spec, gpu, &scen);
    let (h, q, kv, f, e, v, l) = (5120.0, 5120.0, 1024.0, 8192.0, 16.0, 202048.0, 48.0);
    let attention = 2.0 * h * q + 2.0 * h * kv;
    let expert = 3.0 * h * f;
    let router = h * e;
    close(
        tf.matmul_params,
        l * (attention + 2.0 * expert + router) + h * v,
        1e-12,
    );
    close(
        tf.layer_matmul_forward,
        2.0 * l * (attention + (1.0 + e) * expert + router),
        1e-12,
    );
}

#[test]
fn communication_offload_and_bubble_terms() {
    let (scen, spec) = llama8b();
    let g = gpu("h100-sxm-80gb");
    let ddp = Scenario {
        gpus: 8,
        ..scen.clone()
    };
    let t = uncalibrated(&spec, &g, &ddp);
    let dp = t.term("data_parallel").expect("dp term");
    // Ring all-reduce of fp32 gradients (amp keeps fp32 weights): 2·(n−1)/n·4·N bytes.
    close(
        dp.bytes as f64,
        2.0 * 7.0 / 8.0 * 4.0 * 8_030_261_248.0,
        1e-6,
    );
    let z3 = Scenario {
        gpus: 8,
        parallel: headroom_core::scenario::Parallel {
            data: DataParallel::Zero3,
            ..scen.parallel
        },
        ..scen.clone()
    };
    let t3 = uncalibrated(&spec, &g, &z3);
    // ZeRO-3: 1.5x DDP's volume (two all-gathers and one reduce-scatter).
    close(
        t3.term("data_parallel").expect("term").bytes as f64,
        1.5 * dp.bytes as f64,
        1e-6,
    );
    // Tokens per step and per second scale with data parallelism.
    assert_eq!(t.tokens_per_step, 8 * 4096);
    let single = uncalibrated(&spec, &g, &scen);
    assert!(t.tokens_per_second > 6.0 * single.tokens_per_second);
    // Pipeline bubble: (p−1)/m of the compute, i.e. idle fraction (p−1)/(m+p−1).
    let pipe = Scenario {
        gpus: 4,
        grad_accum: 8,
        parallel: headroom_core::scenario::Parallel {
            pipeline: 4,
            ..scen.parallel
        },
        ..scen.clone()
    };
    let tp = uncalibrated(&spec, &g, &pipe);
    let compute: f64 = tp
        .terms
        .iter()
        .filter(|x| {
            matches!(
                x.id,
                "forward" | "backward" | "attention" | "loss" | "elementwise"
            )
        })
        .map(|x| x.seconds)
        .sum();
    close(
        tp.term("pipeline_bubble").expect("bubble").seconds,
        compute * 3.0 / 8.0,
        1e-12,
    );
    // Activation offload moves bytes over the host link.
    let off = uncalibrated(
        &spec,
        &g,
        &Scenario {
            offload_activations: true,
            ..scen.clone()
        },
    );
    let o = off.term("offload_activations").expect("offload term");
    assert!(o.bytes > 0 && o.seconds > 0.0);
    // Time to train: tokens / tokens per second.
    close(
        single.seconds_for_tokens(1e9),
        1e9 / single.tokens_per_second,
        1e-12,
    );
    close(
        t.gpu_hours_for_tokens(1e9, 8),
        t.seconds_for_tokens(1e9) * 8.0 / 3600.0,
        1e-12,
    );
}

#[test]
fn a_measured_curve_replaces_the_default_efficiency() {
    let (scen, spec) = llama8b();
    let g = gpu("h100-sxm-80gb");
    let m = |v: f64, unit: &str| Measured {
        unit: unit.into(),
        method: "test".into(),
        reps: 5,
        median: v,
        min: v,
        max: v,
        q1: v,
        q3: v,
    };
    let point = |n: u64, e: f64| MatmulPoint {
        dtype: "bfloat16".into(),
        n,
        tflops: m(e * 989.4, "tflops"),
        efficiency: Some(e),
    };
    let report = NativeReport {
        backend: "test".into(),
        context_bytes: m(5e8, "bytes"),
        granularity_minimum_bytes: 2 << 20,
        granularity_recommended_bytes: 2 << 20,
        cublas_handle_bytes: m(0.0, "bytes"),
        cublas_first_gemm_bytes: m(0.0, "bytes"),
        matmul: vec![point(1024, 0.4), point(8192, 0.6)],
        matmul_unsupported: Vec::new(),
        bandwidth: vec![Bandwidth {
            kind: "host_to_device_pinned".into(),
            bytes: 1 << 30,
            gb_per_s: m(25.0, "gb_per_s"),
        }],
        bandwidth_failed: Vec::new(),
    };
    let rates = Rates::from_native(&report, DType::Bf16, "h100-test.json");
    assert_eq!(rates.gemm_curve, vec![(1024, 0.4), (8192, 0.6)]);
    // Log-linear between the points: n = 4096 is two thirds of the way from 1024 to 8192.
    close(
        rates.gemm_efficiency(4096.0).0,
        0.4 + 0.2 * 2.0 / 3.0,
        1e-12,
    );
    assert_eq!(rates.gemm_efficiency(100.0).0, 0.4);
    let a = TimeAssumptions::default();
    let t = step_time_with(&spec, &g, &scen, &rates, &a);
    close(
        t.matmul_efficiency,
        (0.4 + 0.2 * 2.0 / 3.0) * DEFAULT_FRAMEWORK_EFFICIENCY,
        1e-12,
    );
    assert_eq!(
        t.term("forward").expect("term").confidence,
        Confidence::Calibrated
    );
    let d = uncalibrated(&spec, &g, &scen);
    assert_eq!(
        d.term("forward").expect("term").confidence,
        Confidence::Assumed
    );
    assert_eq!(d.confidence, Confidence::Assumed);
}

#[test]
fn analysis_carries_the_step_time() {
    let a = analyze(&Scenario::default()).expect("analysis");
    println!(
        "default (Llama 3.1 8B, 1 x H100, b 1, s 4096): step {:.3} s, {:.0} tokens/s, MFU {:.1}%",
        a.time.step_seconds,
        a.time.tokens_per_second,
        a.time.mfu * 100.0
    );
    for t in &a.time.terms {
        println!("  {:<12} {:.4} s  {}", t.id, t.exposed_seconds, t.formula);
    }
    assert!(a.time.step_seconds > 0.0 && a.time.mfu > 0.1 && a.time.mfu < 0.7);
    let json = serde_json::to_value(&a.time).expect("serializes");
    // Formulas travel with the `time-text` feature (the CLI's; the site leaves it off).
    assert_eq!(
        json["terms"][0]["formula"]
            .as_str()
            .is_some_and(|s| !s.is_empty()),
        cfg!(feature = "time-text")
    );
}

// ---------------------------------------------------------------------------------------------
// Published throughputs.

/// One published training run and its reported per-GPU throughput.
struct Published {
    name: String,
    /// Whether this row chose `MEGATRON_FRAMEWORK_EFFICIENCY` (fit) or is held out.
    fit: bool,
    scen: Scenario,
    spec: ModelSpec,
    assumptions: TimeAssumptions,
    /// The publication's FLOPs per step over all GPUs, in its own convention.
    flops_per_step: f64,
    /// Reported TFLOP/s per GPU in that convention.
    tflops: f64,
    source: &'static str,
}

impl Published {
    /// Step seconds the publication implies.
    fn seconds(&self) -> f64 {
        self.flops_per_step / (self.tflops * 1e12 * self.scen.gpus as f64)
    }
}

fn gpt(h: u64, layers: u64, heads: u64) -> ModelSpec {
    parse_config_json(&format!(
        r#"{{"model_type":"gpt2","n_embd":{h},"n_layer":{layers},"n_head":{heads},"vocab_size":51200,"n_positions":2048}}"#
    ))
    .expect("gpt config")
}

fn megatron_scen(
    spec: &ModelSpec,
    gpus: u32,
    tp: u32,
    pp: u32,
    batch: u32,
    ckpt: Checkpointing,
    sp: bool,
) -> Scenario {
    let base = Scenario::default();
    let dp = gpus / (tp * pp);
    Scenario {
        model: ModelChoice::Custom(Box::new(spec.clone())),
        gpu: "a100-sxm4-80gb".into(),
        gpus,
        micro_batch: 1,
        seq: 2048,
        grad_accum: batch / dp,
        // Megatron keeps fp16 weights and gradients (fp32 master copies in the optimizer), so
        // its data-parallel all-reduce moves 2 bytes per parameter.
        precision: Precision::Fp16,
        optimizer: Optimizer::AdamWFused,
        // Megatron's fused softmax kernels, modelled as fused attention (see the report).
        attention: Attention::Sdpa,
        checkpointing: ckpt,
        parallel: headroom_core::scenario::Parallel {
            data: DataParallel::Ddp,
            tensor: tp,
            pipeline: pp,
            sequence: sp,
            ..base.parallel
        },
        ..base
    }
}

/// (hidden, heads, layers, tp, pp, gpus, global batch, TFLOP/s per GPU).
type MegatronRow = (u64, u64, u64, u32, u32, u32, u32, f64);

/// Narayanan et al. 2021 ("Efficient Large-Scale Language Model Training on GPU Clusters
/// Using Megatron-LM", SC21, arXiv 2104.04473), Table 1: GPT models on Selene (DGX A100 80GB,
/// eight 200 Gb/s HDR links per node), seq 2048, vocab 51200, full recompute, achieved
/// TFLOP/s per GPU counted as 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h)).
///
/// Verified (2026-11-22) against a full-text transcription of arXiv 2104.04473 stored in the
/// public GitHub index (`read_file` id 63285939983; its repository and path are not reported
/// by the index), §5.1 Table 1: all ten rows match in every column used here (hidden, heads,
/// layers, TP, PP, GPUs, batch, teraFLOP/s per GPU; the paper's % of peak column reads 44, 44,
/// 46, 43, 44, 45, 47, 50, 52, 52). The first and last rows (1.7B: 24/2304/24/1/1/32/512/137;
/// 1008.0B: 160/25600/128/8/64/3072/3072/163) were also read off the table image by a second,
/// independent note in the same index (id 69859008478). Same source: equation (3) is the FLOP
/// count above and "assumes activation recomputation" (§5.1); Selene nodes have 8 80-GB A100s
/// and eight 200 Gb/s HDR InfiniBand HCAs, peak 312 TFLOP/s in 16-bit (§5); the runs use "the
/// interleaved pipeline schedule with the scatter/gather optimization" (§5.1). Not published:
/// the number of model chunks per GPU (so plain 1F1B, v = 1, is kept), the micro-batch size
/// (1 assumed), and whether mixed precision means fp16 or bf16 (fp16 assumed, Megatron's 2021
/// default).
fn megatron_2021() -> Vec<Published> {
    let rows: [MegatronRow; 10] = [
        (2304, 24, 24, 1, 1, 32, 512, 137.0),
        (3072, 32, 30, 2, 1, 64, 512, 138.0),
        (4096, 32, 36, 4, 1, 128, 512, 142.0),
        (6144, 48, 40, 8, 1, 256, 1024, 135.0),
        (8192, 64, 48, 8, 2, 512, 1536, 138.0),
        (10240, 80, 60, 8, 4, 1024, 1792, 140.0),
        (12288, 96, 80, 8, 8, 1536, 2304, 148.0),
        (16384, 128, 96, 8, 16, 1920, 2160, 155.0),
        (20480, 128, 105, 8, 35, 2520, 2520, 163.0),
        (25600, 160, 128, 8, 64, 3072, 3072, 163.0),
    ];
    rows.iter()
        .enumerate()
        .map(|(i, &(h, a, l, tp, pp, gpus, batch, tflops))| {
            let spec = gpt(h, l, a);
            let (hf, lf, bf) = (h as f64, l as f64, batch as f64);
            let flops = 96.0
                * bf
                * 2048.0
                * lf
                * hf
                * hf
                * (1.0 + 2048.0 / (6.0 * hf) + 51200.0 / (16.0 * lf * hf));
            Published {
                name: format!(
                    "Megatron-LM 2021 Table 1, {:.1}B, {gpus} A100",
                    headroom_core::model::inventory(&spec).total() as f64 / 1e9
                ),
                // Only the 1.7B and 7.5B rows fit the framework factor: without pipeline
                // parallelism, so the interleaved schedule (its chunk count unpublished) does
                // not enter the fit. Every other row is held out.
                fit: i == 0 || i == 2,
                scen: megatron_scen(&spec, gpus, tp, pp, batch, Checkpointing::Full, false),
                spec,
                assumptions: TimeAssumptions {
                    internode_gbs: 25.0,
                    // Megatron-LM's fused kernels (layer norm, bias-GELU, bias-dropout-add).
                    fused_kernels: true,
                    ..TimeAssumptions::default()
                },
                flops_per_step: flops,
                tflops,
                source: "Narayanan et al. 2021, Table 1",
            }
        })
        .collect()
}

/// Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer Models",
/// arXiv 2205.05198), abstract and §6.3: the 530B GPT on 2240 A100s (TP 8, PP 35, 8-way data
/// parallelism), MFU 54.2% with selective recompute + sequence parallelism, 42.1% with full
/// recompute. Model FLOPs: 72·B·s·l·h²·(1 + s/(6h) + V/(12·l·h)). Held out.
///
/// Verified (2026-11-22) against a full-text transcription of arXiv 2205.05198 stored in the
/// public GitHub index (`read_file` id 69442322288; repository and path not reported by the
/// index): the abstract gives 54.2% on 2240 A100s, "29% faster than the 42.1% we achieve using
/// recomputation"; Table 3 gives the 530B configuration (128 heads, hidden 20480, 105 layers,
/// TP 8, PP 35, 280 GPUs, global batch 280, micro-batch 1); §6.3 scales it to 8-way data
/// parallelism (2240 GPUs, batch multiplied by 8, so 2240) where the iteration goes from
/// 37.83 s to 39.15 s and MFU from 56.0% to 54.2%, with no overlap of the gradient all-reduce;
/// §6 states "the interleaving schedule with three interleaving stages" for the 175B and 530B
/// models (hence `virtual_stages: 3`), s = 2048, v = 51200, Selene DGX A100 80GB with eight
/// 200 Gb/s HDR HCAs per node; Appendix A, equation (7), is the model-FLOPs formula above.
/// Table 5 itself has no 2240-GPU row (its 530B row is 56.0% MFU on 280 GPUs, 49.05 s full
/// recompute vs 37.83 s). The 42.1% is given only in the abstract, without its own
/// configuration; the same one (without sequence parallelism, the Table 5 baseline) is assumed.
fn korthikanti_2022() -> Vec<Published> {
    let spec = gpt(20480, 105, 128);
    let (h, l, b) = (20480.0_f64, 105.0_f64, 2240.0_f64);
    let flops =
        72.0 * b * 2048.0 * l * h * h * (1.0 + 2048.0 / (6.0 * h) + 51200.0 / (12.0 * l * h));
    [
        (
            "Korthikanti 2022, 530B, full recompute",
            Checkpointing::Full,
            false,
            0.421,
        ),
        (
            "Korthikanti 2022, 530B, selective + SP",
            Checkpointing::Selective,
            true,
            0.542,
        ),
    ]
    .into_iter()
    .map(|(name, ckpt, sp, mfu)| Published {
        name: name.to_string(),
        fit: false,
        scen: megatron_scen(&spec, 2240, 8, 35, 2240, ckpt, sp),
        spec: spec.clone(),
        assumptions: TimeAssumptions {
            internode_gbs: 25.0,
            // §6: three interleaving stages for the 530B model.
            virtual_stages: 3,
            fused_kernels: true,
            ..TimeAssumptions::default()
        },
        flops_per_step: flops,
        tflops: mfu * 312.0,
        source: "Korthikanti et al. 2022, abstract, §6.3",
    })
    .collect()
}

/// Dubey et al. 2024 ("The Llama 3 Herd of Models", arXiv 2407.21783), Table 4: Llama 3 405B
/// pretraining on H100 (Grand Teton, 400 Gb/s RoCE per GPU), seq 8192, TP 8, PP 16, BF16:
/// 8192 GPUs (DP 64, 32 sequences per DP rank) 430 TFLOP/s, 43% MFU; 16384 GPUs (DP 128, 16
/// per rank) 400 TFLOP/s, 41%. The paper uses an interleaved schedule whose number of virtual
/// stages it does not publish: 4 is assumed here. FLOPs are counted as our MFU counts them
/// (6·N·T + causal attention); the paper defines MFU only by citing Chowdhery et al. (PaLM),
/// whose Appendix B counts 6·N + 12·L·H·Q·T per token, i.e. the full, non-causal attention
/// matrix. Under that reading the published FLOPs would be ~4% higher (the errors below ~4
/// points less negative); which one Meta applied is not stated, so this convention is kept.
/// Held out. The 128K-context row (context parallelism 16) is left out: the scenario has no CP.
///
/// Verified (2026-11-22) against transcriptions of arXiv 2407.21783 stored in the public GitHub
/// index (`read_file` ids 70888892482, from the arXiv HTML, and 34692787445, from the PDF, p. 10;
/// repositories and paths not reported by the index), §3.3.2 Table 4: GPUs | TP | CP | PP | DP |
/// Seq. Len. | Batch size/DP | Tokens/Batch | TFLOPs/GPU | BF16 MFU reads 8,192 | 8 | 1 | 16 | 64
/// | 8,192 | 32 | 16M | 430 | 43% and 16,384 | 8 | 1 | 16 | 128 | 8,192 | 16 | 16M | 400 | 41%,
/// both as used here. (The 128K row's DP reads 4 in the HTML and 8 in other transcriptions;
/// 16,384 / (8·16·16) = 4.) Same section: DP is FSDP sharding optimizer states and gradients,
/// with weights not resharded after forward (modelled as ZeRO-1: the same reduce-scatter plus
/// all-gather volume per step); an interleaved schedule with V stages per rank, V unpublished;
/// 8K-token pre-training "without activation checkpointing" (the default `None` here).
/// §3.3.1 (also summarised at https://ai-papers.xuzou.cn/papers/llama3_2024): Grand Teton
/// servers of 8 H100 80GB, 400 Gb/s RoCE between GPUs. Not published: sequence parallelism
/// (assumed on, with TP 8).
fn llama3() -> Vec<Published> {
    let base = Scenario {
        model: ModelChoice::Preset("llama-3.1-405b".into()),
        ..Scenario::default()
    };
    let (_, spec) = resolve_model(&base).expect("405b preset");
    [(8192u32, 32u32, 430.0), (16384, 16, 400.0)]
        .into_iter()
        .map(|(gpus, per_dp, tflops)| {
            let scen = Scenario {
                gpus,
                micro_batch: 1,
                seq: 8192,
                grad_accum: per_dp,
                precision: Precision::Bf16,
                optimizer: Optimizer::AdamWFused,
                parallel: headroom_core::scenario::Parallel {
                    data: DataParallel::Zero1,
                    tensor: 8,
                    pipeline: 16,
                    sequence: true,
                    ..base.parallel
                },
                ..base.clone()
            };
            let t = step_time_with(
                &spec,
                &gpu("h100-sxm-80gb"),
                &scen,
                &Rates::assumed(),
                &TimeAssumptions {
                    virtual_stages: 4,
                    fused_kernels: true,
                    ..TimeAssumptions::default()
                },
            );
            Published {
                name: format!("Llama 3 405B, {gpus} H100"),
                fit: false,
                flops_per_step: t.model_flops_per_gpu * gpus as f64,
                scen,
                spec: spec.clone(),
                assumptions: TimeAssumptions {
                    virtual_stages: 4,
                    fused_kernels: true,
                    ..TimeAssumptions::default()
                },
                tflops,
                source: "Dubey et al. 2024, Table 4",
            }
        })
        .collect()
}

fn predict(p: &Published, framework: f64) -> StepTime {
    let g = gpu(&p.scen.gpu);
    p.scen.validate().expect("published scenario is valid");
    step_time_with(
        &p.spec,
        &g,
        &p.scen,
        &Rates::assumed(),
        &TimeAssumptions {
            framework_efficiency: framework,
            ..p.assumptions.clone()
        },
    )
}

/// Signed error of the predicted per-GPU throughput against the published one.
fn error(p: &Published, framework: f64) -> f64 {
    p.seconds() / predict(p, framework).step_seconds - 1.0
}

/// The framework factor of the published large-scale runs (Megatron-LM, Meta's Llama 3
/// stack: fused elementwise kernels, `TimeAssumptions::fused_kernels`), as a user of those
/// frameworks sets it (`eff=72`). FITTED on the two Megatron rows without pipeline
/// parallelism (`published_throughputs` redoes the fit); every other row is held out. The
/// default factor is another measurement: the share of a transformers loop's step its
/// kernels fill on the H200 (`DEFAULT_FRAMEWORK_EFFICIENCY`).
const MEGATRON_FRAMEWORK_EFFICIENCY: f64 = 0.72;

#[test]
fn published_throughputs() {
    let mut all = megatron_2021();
    all.extend(korthikanti_2022());
    all.extend(llama3());
    // The framework factor that fits the fitting rows best (least squared log error), searched
    // here so the constant is reproducible; it must equal the one documented for these runs.
    let fit_rows: Vec<&Published> = all.iter().filter(|p| p.fit).collect();
    let loss = |f: f64| -> f64 {
        fit_rows
            .iter()
            .map(|p| {
                let e = libm::log(1.0 + error(p, f));
                e * e
            })
            .sum::<f64>()
    };
    let best = (40..=100)
        .map(|i| i as f64 / 100.0)
        .min_by(|a, b| loss(*a).total_cmp(&loss(*b)))
        .expect("candidates");
    println!("fitted framework efficiency: {best:.2} (default {MEGATRON_FRAMEWORK_EFFICIENCY})");
    println!(
        "{:<44} {:>5} {:>11} {:>11} {:>8} {:>6}",
        "scenario", "set", "published", "model", "error %", "MFU"
    );
    let mut held_out = Vec::new();
    let mut fitted = Vec::new();
    for p in &all {
        let t = predict(p, MEGATRON_FRAMEWORK_EFFICIENCY);
        if std::env::var_os("HEADROOM_TIME_TERMS").is_some() {
            for x in &t.terms {
                println!(
                    "    {:<24} {:>9.4} s exposed {:>9.4} s",
                    x.id, x.seconds, x.exposed_seconds
                );
            }
        }
        let model_tflops = p.flops_per_step / (t.step_seconds * p.scen.gpus as f64) / 1e12;
        let e = error(p, MEGATRON_FRAMEWORK_EFFICIENCY);
        println!(
            "{:<44} {:>5} {:>7.0} TF/s {:>6.0} TF/s {:>+8.1} {:>5.1}%  ({})",
            p.name,
            if p.fit { "fit" } else { "held" },
            p.tflops,
            model_tflops,
            e * 100.0,
            t.mfu * 100.0,
            p.source
        );
        if p.fit {
            fitted.push(e.abs());
        } else {
            held_out.push(e.abs());
        }
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let max = |v: &[f64]| v.iter().cloned().fold(0.0, f64::max);
    println!(
        "fit rows: mean |error| {:.1}%, max {:.1}%; held-out rows: mean {:.1}%, max {:.1}%",
        mean(&fitted) * 100.0,
        max(&fitted) * 100.0,
        mean(&held_out) * 100.0,
        max(&held_out) * 100.0
    );
    assert!(
        (best - MEGATRON_FRAMEWORK_EFFICIENCY).abs() <= 0.011,
        "MEGATRON_FRAMEWORK_EFFICIENCY must be the fit: {best}"
    );
    // Bands (stated in the report): fit rows within 10%; held-out rows within 30%, mean 15%.
    // The model is pessimistic for the largest models: deep pipelines (plain 1F1B assumed
    // where the runs interleaved with an unpublished chunk count) and Korthikanti's 530B (PP
    // 35, three interleaving stages) are 12-17% slow (held-out mean 11.1%, max 17.2% since
    // collectives use all the NICs, attention its kernel's rate and elementwise work its own
    // term, 2026-11-26; 9.2% and 16.3% before).
    assert!(max(&fitted) < 0.10, "fit rows: max {}", max(&fitted));
    assert!(max(&held_out) < 0.30, "held-out: max {}", max(&held_out));
    assert!(mean(&held_out) < 0.15, "held-out: mean {}", mean(&held_out));
}

#[test]
fn extreme_inputs_stay_finite() {
    use headroom_core::scenario::{MAX_GRAD_ACCUM, MAX_MICRO_BATCH, MAX_SEQ, Offload, Parallel};
    let (scen, spec) = llama8b();
    for attention in [Attention::Sdpa, Attention::Eager] {
        let s = Scenario {
            gpus: 65_536,
            micro_batch: MAX_MICRO_BATCH,
            seq: MAX_SEQ,
            grad_accum: MAX_GRAD_ACCUM,
            attention,
            checkpointing: Checkpointing::Every(3),
            offload_activations: true,
            parallel: Parallel {
                data: DataParallel::Zero3,
                tensor: 8,
                pipeline: 8,
                offload_optimizer: Offload::Nvme,
                offload_params: Offload::Nvme,
                ..scen.parallel
            },
            ..scen.clone()
        };
        s.validate().expect("valid");
        let t = uncalibrated(&spec, &gpu("h100-sxm-80gb"), &s);
        assert!(t.step_seconds.is_finite() && t.step_seconds > 0.0);
        assert!(t.mfu.is_finite() && t.tokens_per_second.is_finite());
        assert!(
            t.terms
                .iter()
                .all(|x| x.seconds.is_finite() && x.seconds >= 0.0)
        );
    }
}

/// QLoRA computes what LoRA computes, and adds bitsandbytes' dequantization of every NF4 base
/// weight per use (forward and backward): 2.5 bytes per weight per use at HBM bandwidth. The
/// optimizer step touches the adapters only, whatever the base is stored in.
#[test]
fn qlora_pays_for_dequantization_and_the_frozen_base_is_never_updated() {
    let (scen, spec) = llama8b();
    let h100 = gpu("h100-sxm-80gb");
    let base = Scenario {
        precision: Precision::Bf16,
        ..scen
    };
    let lora = Scenario {
        method: Method::Lora,
        ..base.clone()
    };
    let qlora = Scenario {
        method: Method::Qlora,
        ..base.clone()
    };
    let (tl, tq) = (
        uncalibrated(&spec, &h100, &lora),
        uncalibrated(&spec, &h100, &qlora),
    );
    let term = |t: &StepTime, id: &str| {
        t.terms
            .iter()
            .filter(|x| x.id == id)
            .map(|x| x.exposed_seconds)
            .sum::<f64>()
    };
    // The base Linears of the decoder layers (embeddings and lm_head stay 16-bit).
    let (n_layers, _) = llama8b_linear_params(&spec);
    let dequant = term(&tq, "dequantize_4bit");
    close(
        dequant,
        n_layers * 2.5 * 2.0 / (h100.memory_bandwidth_gbs * 1e9 * DEFAULT_FRAMEWORK_EFFICIENCY),
        1e-9,
    );
    assert_eq!(term(&tl, "dequantize_4bit"), 0.0);
    // Same matmuls, same optimizer traffic: QLoRA is slower by exactly the dequantization.
    assert_eq!(term(&tl, "optimizer"), term(&tq, "optimizer"));
    close(tq.step_seconds - tl.step_seconds, dequant, 1e-9);
    assert!(tq.tokens_per_second < tl.tokens_per_second);
    // LoRA's optimizer step does not grow with the frozen base: far below full training's.
    let full = uncalibrated(&spec, &h100, &base);
    assert!(term(&tl, "optimizer") < term(&full, "optimizer") / 50.0);
}

/// The optimizer's implementations rank as practitioners measure them: fused (one pass) before
/// foreach (a few multi-tensor kernels) before the for-loop, which launches its 7 kernels for
/// each of Llama 3.1 8B's 291 parameter tensors (32 layers x 9 + embedding, final norm,
/// lm_head), at an assumed 6 µs each.
#[test]
fn for_loop_adamw_pays_a_launch_per_op_per_tensor() {
    let (scen, spec) = llama8b();
    let g = gpu(&scen.gpu);
    let time = |optimizer: Optimizer| {
        uncalibrated(
            &spec,
            &g,
            &Scenario {
                optimizer,
                ..scen.clone()
            },
        )
    };
    let (fused, foreach, for_loop) = (
        time(Optimizer::AdamWFused),
        time(Optimizer::AdamW),
        time(Optimizer::AdamWForLoop),
    );
    assert!(fused.step_seconds < foreach.step_seconds);
    let launches = for_loop
        .terms
        .iter()
        .find(|t| t.id == "optimizer_launches")
        .expect("a launch term");
    assert!(
        (launches.seconds - 291.0 * 7.0 * 6e-6).abs() < 1e-12,
        "{}",
        launches.seconds
    );
    assert!((for_loop.step_seconds - foreach.step_seconds - launches.seconds).abs() < 1e-9);
    assert!(foreach.terms.iter().all(|t| t.id != "optimizer_launches"));
}

/// Sharding ranks as DeepSpeed and FSDP2 schedule it: every ZeRO stage steps only its 1/dp
/// partition (so its optimizer step is the same at stages 1, 2 and 3, and shorter than DDP's
/// full one), and ZeRO-3's forward gathers hide only behind the forward, its backward gathers
/// and reduce-scatters only behind the backward: on 8 PCIe GPUs, where that traffic shows,
/// ZeRO-3 is slower than ZeRO-1 and ZeRO-2.
#[test]
fn zero_stages_rank_as_their_traffic_and_overlap_say() {
    let at = |dp: &str| {
        let s = headroom_core::codec::decode(&format!(
            "v=1&model=llama-3.2-1b&gpu=rtx-4090-24gb&gpus=8&precision=bf16&seq=2048&dp={dp}"
        ))
        .expect("decodes");
        analyze(&s).expect("analyzes").time
    };
    let opt = |t: &StepTime| {
        t.terms
            .iter()
            .find(|x| x.id == "optimizer")
            .map(|x| x.seconds)
    };
    let (ddp, z1, z2, z3) = (at("ddp"), at("zero1"), at("zero2"), at("zero3"));
    assert_eq!(opt(&z1), opt(&z2));
    assert_eq!(opt(&z2), opt(&z3));
    assert!(opt(&z1) < opt(&ddp));
    assert_eq!(z1.step_seconds, z2.step_seconds);
    assert!(
        z3.step_seconds > z2.step_seconds,
        "{} vs {}",
        z3.step_seconds,
        z2.step_seconds
    );
}

/// The H200's profiled transformers steps (tests/reference/gpu/h200/edge/timing.json): each
/// run's link, its measured step seconds and its profile (kernel time and count by class, the
/// top kernels by name).
fn profiled_h200_runs() -> Vec<(String, f64, serde_json::Value)> {
    runs_of("h200/edge/timing.json", "timing")
        .into_iter()
        .filter(|(_, _, profile)| !profile.is_null())
        .collect()
}

/// Each run of a committed H200 file's `key` list: its link, median step seconds and profile
/// (null where it was not profiled).
fn runs_of(file: &str, key: &str) -> Vec<(String, f64, serde_json::Value)> {
    let doc = measured_on_gpu(file);
    doc[key]
        .as_array()
        .expect("runs")
        .iter()
        .map(|run| {
            let link = measured_link(&run["scenario"], "h200-sxm-141gb");
            let step = run["median_step_seconds"].as_f64().expect("step seconds");
            (link, step, run["profile"].clone())
        })
        .collect()
}

/// The two measured constants under the default time model, recomputed from the H200's
/// profiles. The framework factor: the kernels' total time over the step's (0.87 GPT-2, 0.93
/// Llama 3.2 1B, 0.96 and 0.97), whose mean is `DEFAULT_FRAMEWORK_EFFICIENCY`. The eager
/// elementwise kernels' share of the HBM bandwidth: the bytes the core counts over the time of
/// the elementwise, copy and reduction kernels (and, with fp32 LoRA adapters, the adapters'
/// fp32 matmuls, whose bytes the core counts with them): 0.46 (1B), 0.52 (3B LoRA), 0.52 (8B
/// checkpointed), fitted as 0.5; GPT-2, whose layers differ, comes out at 0.68.
#[test]
fn the_h200_profiles_give_the_busy_share_and_the_elementwise_bandwidth() {
    let mut busy = Vec::new();
    let mut shares = Vec::new();
    for (link, step, profile) in profiled_h200_runs() {
        let class = |c: &str| profile["kernel_us"][c].as_f64().unwrap_or(0.0) * 1e-6;
        let kernels: f64 = profile["kernel_us"]
            .as_object()
            .expect("classes")
            .values()
            .map(|v| v.as_f64().expect("us") * 1e-6)
            .sum();
        busy.push(kernels / step);
        let fp32_adapters: f64 = profile["top"]
            .as_array()
            .expect("top kernels")
            .iter()
            .filter(|k| k[0].as_str().is_some_and(|n| n.contains("gemm_f32f32")))
            .map(|k| k[1].as_f64().expect("us") * 1e-6)
            .sum();
        let measured = class("elementwise") + class("copy") + class("reduce") + fp32_adapters;
        let scen = headroom_core::codec::decode(&link).expect("decodes");
        let a = analyze(&scen).expect("analyzes");
        let term = a.time.term("elementwise").expect("elementwise term");
        let hbm = gpu("h200-sxm-141gb").memory_bandwidth_gbs * 1e9;
        let share = term.bytes as f64 / measured / hbm;
        println!(
            "{link}: kernels {:.3} of the step; elementwise {:.3e} B in {measured:.4} s = {share:.2} of HBM",
            kernels / step,
            term.bytes as f64
        );
        if !link.contains("model=gpt2") {
            shares.push(share);
        }
    }
    let mean_busy = busy.iter().sum::<f64>() / busy.len() as f64;
    assert_eq!(busy.len(), 4);
    assert!(
        (mean_busy - DEFAULT_FRAMEWORK_EFFICIENCY).abs() < 0.01,
        "{busy:?}"
    );
    assert_eq!(shares.len(), 3);
    for s in &shares {
        assert!(
            (s / headroom_core::time::EAGER_BANDWIDTH_SHARE - 1.0).abs() < 0.10,
            "{shares:?}"
        );
    }
}

/// cuDNN's fused attention on Hopper, as profiled on the H200 (torch 2.11,
/// tests/reference/gpu/h200/edge/timing.json: each profiled step's kernels by name, time and
/// count). For the runs with head dimension 128 (Llama 3.2 3B LoRA, Llama 3.1 8B full with
/// checkpointing, both at 4096 tokens) the forward kernels (`flash_fprop`), the backward
/// (`flash_bprop`) and cuDNN's backward helpers (`cudnn::fusion::*`) ran 2·b·s²·q_dim causal
/// FLOPs per forward call and 2.5x that per backward call at 0.46 and 0.51 of the dense
/// peak; the core's attention term runs at the same fraction (before the framework factor)
/// within 10%.
#[test]
fn cudnn_attention_runs_at_the_rate_the_h200_profiled() {
    let h200 = gpu("h200-sxm-141gb");
    let peak = h200.dense_tflops.bf16.expect("bf16 peak") * 1e12;
    let mut checked = 0;
    for (link, _, profile) in profiled_h200_runs() {
        let scen = headroom_core::codec::decode(&link).expect("decodes");
        let (_, spec) = resolve_model(&scen).expect("resolves");
        if spec.head_dim != 128 {
            continue;
        }
        let top = profile["top"].as_array().expect("top kernels");
        let kernels = |pattern: &str| {
            top.iter()
                .filter(|k| k[0].as_str().is_some_and(|n| n.contains(pattern)))
                .map(|k| (k[1].as_f64().expect("us"), k[2].as_f64().expect("count")))
                .fold((0.0, 0.0), |(t, n), (dt, dn)| (t + dt, n + dn))
        };
        let (fwd_us, fwd_calls) = kernels("flash_fprop");
        let (bwd_us, bwd_calls) = kernels("flash_bprop");
        let (helper_us, _) = kernels("cudnn::fusion::");
        let per_call =
            2.0 * scen.micro_batch as f64 * scen.seq as f64 * scen.seq as f64 * spec.q_dim() as f64;
        let flops = per_call * (fwd_calls + 2.5 * bwd_calls);
        let measured = flops / ((fwd_us + bwd_us + helper_us) * 1e-6) / peak;
        let a = analyze(&scen).expect("analyzes");
        let term = a.time.term("attention").expect("fused attention term");
        let model = term.flops / term.seconds / peak / a.time.assumptions.framework_efficiency;
        println!("{link}: measured {measured:.3} of peak, core {model:.3}");
        assert!((0.44..0.54).contains(&measured), "{link}: {measured}");
        assert!(
            (model / measured - 1.0).abs() < 0.10,
            "{link}: {model} vs {measured}"
        );
        checked += 1;
    }
    assert_eq!(checked, 2);
}

/// Every profiled H200 step (the timing grid's four and the seven launch-bound steps of 64
/// tokens): its link, median step seconds and profile.
fn all_profiled_h200_runs() -> Vec<(String, f64, serde_json::Value)> {
    let mut out = profiled_h200_runs();
    out.extend(runs_of("h200/posttrain/launch.json", "launch"));
    out
}

fn profiled_kernels(profile: &serde_json::Value) -> f64 {
    profile["kernel_count"]
        .as_object()
        .expect("kernel counts")
        .values()
        .map(|v| v.as_f64().expect("count"))
        .sum()
}

/// The kernels the core counts per step against the profiler's count on all eleven profiled
/// H200 steps (GPT-2, Qwen2.5 0.5B eager and SDPA, Llama 3.2 1B with checkpointing and LoRA on
/// 16-bit and fp32 bases, Llama 3.2 3B LoRA, Llama 3.1 8B checkpointed): within 10% each (-5.0% to +7.0%).
#[test]
fn the_core_counts_the_kernels_the_profiler_counted() {
    let g = gpu("h200-sxm-141gb");
    let cal = Calibration::for_gpu(&g);
    let mut errors = Vec::new();
    for (link, _, profile) in all_profiled_h200_runs() {
        let scen = headroom_core::codec::decode(&link).expect("decodes");
        let (_, spec) = resolve_model(&scen).expect("resolves");
        let k = headroom_core::time::step_kernels(&spec, &g, &cal, &scen);
        let measured = profiled_kernels(&profile);
        let err = k.total() / measured - 1.0;
        println!(
            "{link}: core {:.0} ({:.1} per layer forward), profiler {measured:.0} ({:+.1}%)",
            k.total(),
            k.layer_forward,
            100.0 * err
        );
        errors.push((link, err));
    }
    assert_eq!(errors.len(), 11);
    for (link, err) in errors {
        assert!(err.abs() < 0.10, "{link}: {:+.1}%", 100.0 * err);
    }
}

/// `HOST_SECONDS_PER_KERNEL` is the median of the seven launch-bound steps' seconds per
/// profiled kernel (the GPU idle most of each step: its kernels fill 10-30% of it).
#[test]
fn the_host_cost_per_kernel_is_the_launch_bound_steps_median() {
    let doc = measured_on_gpu("h200/posttrain/launch.json");
    let mut per_kernel: Vec<f64> = doc["launch"]
        .as_array()
        .expect("runs")
        .iter()
        .map(|run| {
            let kernel_us: f64 = run["profile"]["kernel_us"]
                .as_object()
                .expect("kernel times")
                .values()
                .map(|v| v.as_f64().expect("us"))
                .sum();
            let step = run["median_step_seconds"].as_f64().expect("step");
            assert!(
                kernel_us * 1e-6 < 0.35 * step,
                "launch-bound: kernels fill under 35% of the step"
            );
            step / profiled_kernels(&run["profile"])
        })
        .collect();
    per_kernel.sort_by(f64::total_cmp);
    let median = per_kernel[per_kernel.len() / 2];
    println!("seconds per kernel: {per_kernel:?}");
    assert!(
        (median - headroom_core::time::HOST_SECONDS_PER_KERNEL).abs() < 0.05e-6,
        "{median}"
    );
}
