//! Per-layer saved bytes against bytes measured from real transformers 5.23 / torch 2.15 code
//! with `saved_tensors_hooks` (each storage once, parameters and autocast weight casts
//! excluded). Configs: llama (hidden 192, intermediate 512, 6 heads, 2 kv heads, vocab 3000)
//! and gpt2 (n_embd 192, 6 heads, vocab 3000, dropouts 0), batch 2, sequence 64. The figures
//! are CUDA-equivalent: CPU LayerNorm keeps mean/rstd in bf16 where CUDA keeps fp32, so the
//! gpt2 bf16 figure adds 2 x 128 x 2 B per LayerNorm to the CPU measurement (1,478,656 B).
//! The live suite (tests/reference) re-measures these on every run. The SDPA rows are also
//! what an H100 measured (torch 2.11, transformers 5.17; tests/reference/gpu/gpu_small.json):
//! the CPU figures plus the CUDA kernel's RNG tensors, 16 B a layer for cuDNN.

use headroom_core::model::parse_config_json;
use headroom_core::scenario::{Attention, ModelChoice, Precision, Scenario};

const LLAMA: &str = r#"{"model_type":"llama","vocab_size":3000,"hidden_size":192,"intermediate_size":512,
"num_hidden_layers":4,"num_attention_heads":6,"num_key_value_heads":2,"tie_word_embeddings":false}"#;
const GPT2: &str = r#"{"model_type":"gpt2","n_embd":192,"n_layer":4,"n_head":6,"vocab_size":3000,
"n_positions":1024,"attn_pdrop":0.0,"resid_pdrop":0.0,"embd_pdrop":0.0}"#;

/// cuDNN's philox seed and offset (two int64), which SDPA's CUDA kernel saves and CPU's
/// kernel does not (measured on an H100).
const CUDNN_RNG: u64 = 16;

#[track_caller]
fn check(config: &str, precision: Precision, attention: Attention, expect: u64) {
    let spec = parse_config_json(config).expect("config parses");
    let scen = Scenario {
        model: ModelChoice::Custom(Box::new(spec)),
        micro_batch: 2,
        seq: 64,
        precision,
        attention,
        ..Scenario::default()
    };
    // One steady decoder layer's saved tensors, through the public estimate.
    let got = headroom_core::estimate(&scen)
        .expect("estimates")
        .bytes
        .activations_per_layer;
    assert_eq!(got, expect, "{precision:?} {attention:?}");
}

#[test]
fn llama_bf16_sdpa() {
    check(LLAMA, Precision::Bf16, Attention::Sdpa, 1_052_688);
}

#[test]
fn llama_fp32_eager() {
    check(LLAMA, Precision::Fp32, Attention::Eager, 2_229_248);
}

#[test]
fn llama_amp_bf16_sdpa_without_weight_casts() {
    // 2,084,864 B measured, of which 786,432 B are autocast's bf16 weight copies.
    check(
        LLAMA,
        Precision::AmpBf16,
        Attention::Sdpa,
        2_084_864 - 786_432 + CUDNN_RNG,
    );
}

#[test]
fn gpt2_fp32_eager() {
    check(GPT2, Precision::Fp32, Attention::Eager, 2_951_168);
}

#[test]
fn gpt2_bf16_sdpa() {
    check(
        GPT2,
        Precision::Bf16,
        Attention::Sdpa,
        1_478_656 + 2 * 2 * 128 * 2 + CUDNN_RNG,
    );
}

// The step's live-byte peak (`peak_tensors`) and its phase against real torch 2.15 /
// transformers 5.23 on CPU: AdamW foreach, two steps, the second measured with the profiler's
// allocator events (tests/reference/measure_peak.py). Within 1%.

#[track_caller]
fn check_peak(
    config: &str,
    scen: Scenario,
    measured: u64,
    phase: headroom_core::Phase,
) -> headroom_core::Estimate {
    let spec = parse_config_json(config).expect("config parses");
    let scen = Scenario {
        model: ModelChoice::Custom(Box::new(spec)),
        ..scen
    };
    let e = headroom_core::estimate(&scen).expect("estimates");
    let got = e.bytes.peak_tensors;
    let err = (got as f64 - measured as f64) / measured as f64;
    assert!(
        err.abs() <= 0.01,
        "peak_tensors {got}, measured {measured} ({:+.2}%)",
        100.0 * err
    );
    assert_eq!(e.peak.phase, phase);
    e
}

#[test]
fn llama_bf16_eager_long_sequence_peaks_in_loss_backward() {
    check_peak(
        LLAMA,
        Scenario {
            micro_batch: 1,
            seq: 512,
            precision: Precision::Bf16,
            attention: Attention::Eager,
            ..Scenario::default()
        },
        91_244_712,
        headroom_core::Phase::Backward,
    );
}

#[test]
fn llama_amp_checkpointed_peaks_in_the_loss() {
    // autocast's cache holds every layer's bf16 weights until the loss is computed, the
    // checkpointed layers' too.
    check_peak(
        LLAMA,
        Scenario {
            micro_batch: 4,
            seq: 128,
            precision: Precision::AmpBf16,
            attention: Attention::Sdpa,
            checkpointing: headroom_core::scenario::Checkpointing::Full,
            ..Scenario::default()
        },
        55_398_440,
        headroom_core::Phase::Loss,
    );
}

#[test]
fn llama_fp32_small_batch_peaks_in_the_optimizer_step() {
    check_peak(
        LLAMA,
        Scenario {
            micro_batch: 2,
            seq: 64,
            precision: Precision::Fp32,
            attention: Attention::Eager,
            ..Scenario::default()
        },
        54_533_904,
        headroom_core::Phase::Optimizer,
    );
}

#[test]
fn gpt2_kept_outputs_hold_logits_and_kv_cache_to_the_step_end() {
    let e = check_peak(
        GPT2,
        Scenario {
            micro_batch: 2,
            seq: 64,
            precision: Precision::Bf16,
            attention: Attention::Eager,
            keep_logits: true,
            ..Scenario::default()
        },
        26_699_144,
        headroom_core::Phase::Backward,
    );
    // The optimizer step with kept outputs, measured 26,687,758 B.
    let opt = e
        .timeline
        .iter()
        .find(|p| p.label == "optimizer step")
        .expect("optimizer point")
        .tensors;
    assert!(
        (opt as f64 - 26_687_758.0).abs() <= 0.01 * 26_687_758.0,
        "{opt}"
    );
}

// gpt-oss (hidden 192, 6 heads, 2 kv heads, head_dim 32, 4 experts of 160, top-2, window 32)
// and DeepSeek-V3's dense layer (q_lora_rank 48, kv_lora_rank 32, q/k heads 16 + 8, value
// heads 24), batch 2, sequence 64, measured as above (tests/reference/test_saved_bytes.py).
const GPT_OSS: &str = r#"{"model_type":"gpt_oss","vocab_size":3000,"hidden_size":192,"intermediate_size":160,
"num_hidden_layers":4,"num_attention_heads":6,"num_key_value_heads":2,"head_dim":32,"num_local_experts":4,
"num_experts_per_tok":2,"sliding_window":32}"#;
const DEEPSEEK_V3: &str = r#"{"model_type":"deepseek_v3","vocab_size":3000,"hidden_size":192,"intermediate_size":512,
"num_hidden_layers":4,"num_attention_heads":6,"num_key_value_heads":6,"q_lora_rank":48,"kv_lora_rank":32,
"qk_nope_head_dim":16,"qk_rope_head_dim":8,"v_head_dim":24,"first_k_dense_replace":4}"#;

#[test]
fn gpt_oss_fp32_eager_sinks_and_grouped_experts() {
    check(GPT_OSS, Precision::Fp32, Attention::Eager, 2_742_288);
}

#[test]
fn gpt_oss_bf16_eager() {
    check(GPT_OSS, Precision::Bf16, Attention::Eager, 1_576_464);
}

#[test]
fn deepseek_v3_dense_layer_bf16_sdpa() {
    check(DEEPSEEK_V3, Precision::Bf16, Attention::Sdpa, 1_213_456);
}

// Llama 4 (every layer MoE, 4 experts of 160 top-1, the middle layer with RoPE and the q/k L2
// norm) and Qwen3-Next (the middle layer a gated DeltaNet layer: 2 key heads of 32, 4 value
// heads of 24; 4 experts of 64, top-2, a shared expert of 96), batch 2, sequence 64, measured as
// above (tests/reference/test_saved_bytes.py; transformers' torch fallback of the delta rule).
const LLAMA4: &str = r#"{"model_type":"llama4_text","vocab_size":3000,"hidden_size":192,"intermediate_size":160,
"intermediate_size_mlp":384,"num_hidden_layers":4,"num_attention_heads":6,"num_key_value_heads":2,"head_dim":32,
"num_local_experts":4,"num_experts_per_tok":1}"#;
const QWEN3_NEXT: &str = r#"{"model_type":"qwen3_next","vocab_size":3000,"hidden_size":192,"intermediate_size":384,
"num_hidden_layers":4,"num_attention_heads":6,"num_key_value_heads":2,"head_dim":32,"linear_num_key_heads":2,
"linear_num_value_heads":4,"linear_key_head_dim":32,"linear_value_head_dim":24,"num_experts":4,
"num_experts_per_tok":2,"moe_intermediate_size":64,"shared_expert_intermediate_size":96}"#;

#[test]
fn llama4_bf16_sdpa_l2_norm_and_every_expert() {
    check(LLAMA4, Precision::Bf16, Attention::Sdpa, 1_880_080);
}

#[test]
fn llama4_amp_eager_softmax_in_the_stream_dtype() {
    check(LLAMA4, Precision::AmpBf16, Attention::Eager, 2_728_960);
}

#[test]
fn qwen3_next_bf16_gated_delta_net_layer() {
    check(QWEN3_NEXT, Precision::Bf16, Attention::Sdpa, 2_630_096);
}

#[test]
fn qwen3_next_amp_gated_delta_net_layer() {
    check(QWEN3_NEXT, Precision::AmpBf16, Attention::Sdpa, 3_105_232);
}
