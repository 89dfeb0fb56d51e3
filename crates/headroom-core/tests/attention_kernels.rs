//! SDPA's kernel through the public surface: the one PyTorch would pick on each catalog GPU
//! (rules read from aten/src/ATen/native/transformers/cuda/sdp_utils.cpp, see `sdpa.rs`), what
//! each saves, and per-layer bytes measured at full size on fake CUDA tensors
//! (tests/reference/test_cuda_fake.py, torch 2.15 / transformers 5.23).

use headroom_core::estimate;
use headroom_core::scenario::{Attention, ModelChoice, Precision, Scenario, SdpaKernel};

fn scenario(model: &str, gpu: &str, precision: Precision, seq: u32) -> Scenario {
    Scenario {
        model: ModelChoice::Preset(model.into()),
        gpu: gpu.into(),
        precision,
        seq,
        micro_batch: 1,
        ..Scenario::default()
    }
}

fn layer_bytes(scen: &Scenario) -> u64 {
    estimate(scen)
        .expect("estimates")
        .layer_inventory
        .iter()
        .map(|s| s.bytes())
        .sum()
}

#[test]
fn the_default_kernel_is_pytorchs_pick_for_the_gpu_and_dtype() {
    let line = |gpu: &str, p: Precision| {
        estimate(&scenario("llama-3.1-8b", gpu, p, 4096))
            .expect("estimates")
            .attention
    };
    // T4 (sm75): no bf16 at all, so amp-bf16 is refused there, naming the field (PyTorch's
    // kernel rule for bf16 on sm75, math, stays in `sdpa.rs`'s unit tests). fp16 runs the
    // memory-efficient kernel there, for a model without grouped-query attention
    // (memory-efficient refuses enable_gqa).
    let refused = estimate(&scenario(
        "llama-3.1-8b",
        "t4-16gb",
        Precision::AmpBf16,
        4096,
    ))
    .expect_err("bf16 on a T4")
    .to_string();
    assert!(
        refused.starts_with("`precision`: amp-bf16 needs bf16") && refused.contains("t4-16gb"),
        "{refused}"
    );
    let t4_fp16 = estimate(&scenario("llama-2-7b", "t4-16gb", Precision::AmpFp16, 4096))
        .expect("estimates")
        .attention;
    assert!(
        t4_fp16.starts_with("SDPA, memory-efficient kernel"),
        "{t4_fp16}"
    );
    // A100: flash for 16-bit inputs. fp32 goes to memory-efficient (flash takes fp16/bf16
    // only), unless the model has grouped-query attention, which memory-efficient refuses
    // (enable_gqa): math (measured on an H100 for the same rule: Llama-like fp32 layers).
    assert!(line("a100-sxm4-80gb", Precision::AmpBf16).starts_with("SDPA, flash kernel"));
    let fp32_gqa = line("a100-sxm4-80gb", Precision::Fp32);
    assert!(
        fp32_gqa.starts_with("SDPA, math kernel") && fp32_gqa.contains("enable_gqa"),
        "{fp32_gqa}"
    );
    let mha = estimate(&scenario(
        "llama-2-7b",
        "a100-sxm4-80gb",
        Precision::Fp32,
        4096,
    ))
    .expect("estimates")
    .attention;
    assert!(mha.starts_with("SDPA, memory-efficient kernel"), "{mha}");
    // H100 (sm90) puts cuDNN first with the CUDA 13 wheels' cuDNN.
    assert!(line("h100-sxm-80gb", Precision::AmpBf16).starts_with("SDPA, cuDNN kernel"));
}

#[test]
#[cfg_attr(
    not(feature = "inventory-text"),
    ignore = "finds its row by label; the labels are empty without inventory-text"
)]
fn the_math_kernel_saves_the_whole_probability_matrix_in_fp32() {
    // Llama 3.1 8B, seq 1024: 32 heads x 1024 x 1024 fp32 softmax output per layer. The math
    // kernel forced on an A100 (this test ran on a T4 in bf16, which is now refused: the T4
    // has no bf16).
    let math = Scenario {
        sdpa: SdpaKernel::Math,
        ..scenario("llama-3.1-8b", "a100-sxm4-80gb", Precision::AmpBf16, 1024)
    };
    let e = estimate(&math).expect("estimates");
    let softmax = e
        .layer_inventory
        .iter()
        .find(|s| s.what.contains("softmax output"))
        .expect("a softmax row");
    assert_eq!(softmax.bytes(), 32 * 1024 * 1024 * 4);
    // The same run with PyTorch's pick on an A100 (flash) keeps no s x s tensor: far less per
    // layer.
    let flash = Scenario {
        sdpa: SdpaKernel::Auto,
        ..math.clone()
    };
    assert!(layer_bytes(&flash) + 128 * 1024 * 1024 <= layer_bytes(&math));
}

#[test]
fn one_layer_matches_fake_cuda_at_full_size_per_kernel() {
    // (preset, precision, kernel, seq, dropout, bytes of one layer on fake CUDA plus the
    // kernel's RNG tensors, which fake tensors cannot place: 24 B for flash, 16 B for
    // memory-efficient and cuDNN, none for math; measured on an H100)
    let cases = [
        (
            "llama-3.1-8b",
            Precision::Bf16,
            SdpaKernel::Flash,
            4096,
            None,
            822_640_664,
        ),
        (
            "llama-3.1-8b",
            Precision::Bf16,
            SdpaKernel::Efficient,
            1000,
            None,
            200_843_088,
        ),
        (
            "llama-3.1-8b",
            Precision::Bf16,
            SdpaKernel::Cudnn,
            4096,
            None,
            822_640_656,
        ),
        (
            "llama-3.1-8b",
            Precision::Bf16,
            SdpaKernel::Math,
            1024,
            None,
            377_495_552,
        ),
        // Llama has attention dropout only: the override adds no residual dropout.
        (
            "llama-3.1-8b",
            Precision::Bf16,
            SdpaKernel::Math,
            1024,
            Some(0.1),
            545_267_712,
        ),
        (
            "llama-3.1-8b",
            Precision::AmpBf16,
            SdpaKernel::Flash,
            2048,
            None,
            495_206_424,
        ),
        // Qwen3's per-head q/k norms keep an fp32 rsqrt per head.
        (
            "qwen3-8b",
            Precision::AmpBf16,
            SdpaKernel::Cudnn,
            2048,
            None,
            524_894_224,
        ),
    ];
    for (model, precision, kernel, seq, dropout, want) in cases {
        let scen = Scenario {
            sdpa: kernel,
            dropout,
            gpu: "h100-sxm-80gb".into(),
            ..scenario(model, "h100-sxm-80gb", precision, seq)
        };
        assert_eq!(
            layer_bytes(&scen),
            want,
            "{model} {precision:?} {kernel:?} seq {seq} dropout {dropout:?}"
        );
    }
}

#[test]
fn a_forced_kernel_pytorch_would_refuse_is_estimated_with_a_warning() {
    let scen = Scenario {
        sdpa: SdpaKernel::Flash,
        ..scenario("llama-3.1-8b", "t4-16gb", Precision::AmpFp16, 1024)
    };
    let e = estimate(&scen).expect("estimates");
    assert!(
        e.warnings
            .iter()
            .any(|w| w.contains("flash") && w.contains("refuse") && w.contains("sm75")),
        "{:?}",
        e.warnings
    );
}

#[test]
fn eager_attention_is_unchanged_by_the_kernel_setting() {
    let base = Scenario {
        attention: Attention::Eager,
        ..scenario("llama-3.1-8b", "a100-sxm4-80gb", Precision::AmpBf16, 1024)
    };
    let forced = Scenario {
        sdpa: SdpaKernel::Math,
        ..base.clone()
    };
    assert_eq!(layer_bytes(&base), layer_bytes(&forced));
    assert!(
        estimate(&base)
            .expect("estimates")
            .attention
            .starts_with("eager")
    );
}

/// transformers' own implementations are choices too. What flash-attn and flex_attention save
/// is taken as the flash kernel's (assumed: neither runs on a CPU), so a layer saves what
/// SDPA's flash kernel saves; where each cannot run (flash-attn 2 before sm80, flash-attn 3
/// off Hopper, fp32 inputs) the estimate says so, and exports name the implementation.
#[test]
fn transformers_attention_implementations_are_choices() {
    let on = |gpu: &str, attention: Attention, precision: Precision| Scenario {
        attention,
        sdpa: SdpaKernel::Flash,
        ..scenario("llama-3.1-8b", gpu, precision, 4096)
    };
    // SDPA's flash kernel also keeps its RNG tensors (24 B), which flash-attn keeps with
    // dropout only.
    let flash = layer_bytes(&on("a100-sxm4-80gb", Attention::Sdpa, Precision::Bf16)) - 24;
    for a in [Attention::Flash2, Attention::Flex] {
        let s = on("a100-sxm4-80gb", a, Precision::Bf16);
        assert_eq!(layer_bytes(&s), flash, "{a:?}");
        let e = estimate(&s).expect("estimates");
        // No warning about the implementation (this tight fit gets the allocator's).
        assert!(
            e.warnings.iter().all(|w| w.contains("fragmentation")),
            "{a:?}: {:?}",
            e.warnings
        );
        assert!(e.attention.contains(a.hf_name()), "{}", e.attention);
    }
    let refused = |gpu: &str, a: Attention, p: Precision| {
        estimate(&on(gpu, a, p))
            .expect("estimates")
            .warnings
            .iter()
            .any(|w| w.contains("cannot run here"))
    };
    assert!(refused("t4-16gb", Attention::Flash2, Precision::Fp16));
    assert!(refused(
        "a100-sxm4-80gb",
        Attention::Flash3,
        Precision::Bf16
    ));
    assert!(!refused(
        "h100-sxm-80gb",
        Attention::Flash3,
        Precision::Bf16
    ));
    assert!(refused(
        "a100-sxm4-80gb",
        Attention::Flash2,
        Precision::Fp32
    ));
    assert!(!refused("t4-16gb", Attention::Flex, Precision::Fp16));
    let s = on("h100-sxm-80gb", Attention::Flash3, Precision::Bf16);
    let r = headroom_core::estimate::resolve(&s).expect("resolves");
    let script =
        headroom_core::export::export(&r.spec, &s, headroom_core::export::Target::Fsdp2).text;
    assert!(script.contains("attn_implementation=\"flash_attention_3\""));
}

/// Gemma 3 1B's sliding-window layers (22 of 26, window 512) get transformers' mask under SDPA
/// once the sequence reaches the window: the memory-efficient kernel runs them on an A100
/// (flash takes no mask) and saves the mask in bf16, b x s x s per layer (exact at full size on
/// fake CUDA, test_cuda_fake.py). Below the window nothing changes.
#[test]
#[cfg_attr(
    not(feature = "inventory-text"),
    ignore = "finds its row by label; the labels are empty without inventory-text"
)]
fn sliding_window_layers_save_sdpas_mask_past_their_window() {
    let at = |seq: u32| {
        let scen = Scenario {
            micro_batch: 4,
            ..scenario("gemma-3-1b-pt", "a100-sxm4-80gb", Precision::Bf16, seq)
        };
        estimate(&scen).expect("estimates")
    };
    let e = at(4096);
    assert!(
        e.attention.contains("22 of 26 layers are sliding-window")
            && e.attention.contains("memory-efficient"),
        "{}",
        e.attention
    );
    let mask = e
        .layer_inventory
        .iter()
        .find(|s| s.what.starts_with("sliding-window mask"))
        .expect("the mask in a sliding layer's inventory");
    assert_eq!(mask.bytes(), 4 * 4096 * 4096 * 2);
    let below = at(511);
    assert!(
        below
            .layer_inventory
            .iter()
            .all(|s| !s.what.starts_with("sliding-window mask")),
        "no mask below the window"
    );
}
