//! int8 activation compression (`act_int8`, worked example 2's `compress_activation`): each
//! saved floating-point tensor of a layer becomes int8 plus one scale of its dtype; masks and
//! indices stay. The bytes are measured against PyTorch in `tests/reference/test_act_int8.py`;
//! here, what it does to the rest of the estimate.

use headroom_core::codec::decode;
use headroom_core::{analyze, estimate};

const BASE: &str = "model=llama-3.1-8b&gpu=h100-sxm-80gb&batch=1&seq=4096&precision=bf16";

/// Every bf16 element becomes one byte (plus 2-byte scales), every fp32 one a byte (plus
/// 4-byte scales): the layer's bytes follow from its uncompressed inventory exactly.
#[test]
fn a_layer_packs_to_one_byte_per_element_plus_scales() {
    let plain = estimate(&decode(BASE).expect("decodes")).expect("estimates");
    let packed =
        estimate(&decode(&format!("{BASE}&act_int8=1")).expect("decodes")).expect("estimates");
    let want: u64 = plain
        .layer_inventory
        .iter()
        .map(|s| match s.dtype {
            headroom_core::dtype::DType::F32
            | headroom_core::dtype::DType::Bf16
            | headroom_core::dtype::DType::F16 => (s.elements + s.dtype.bytes()) * s.copies,
            _ => s.bytes(),
        })
        .sum();
    assert_eq!(packed.bytes.activations_per_layer, want);
    assert!(packed.bytes.activations_per_layer * 2 < plain.bytes.activations_per_layer + 1_000_000);
    assert!(packed.bytes.peak_tensors < plain.bytes.peak_tensors);
    // Weights, gradients and optimizer states are not activations.
    assert_eq!(packed.bytes.weights, plain.bytes.weights);
    assert_eq!(packed.bytes.optimizer_states, plain.bytes.optimizer_states);
}

/// The pack and unpack passes cost time (a memory-bound term), and the strategy table offers
/// the what-if as a change to the training.
#[test]
fn it_costs_time_and_changes_the_training() {
    let a = analyze(&decode(&format!("{BASE}&act_int8=1")).expect("decodes")).expect("analyzes");
    assert!(
        a.time
            .terms
            .iter()
            .any(|t| t.id == "act_int8" && t.seconds > 0.0)
    );
    // At micro-batch 4 the activations set the peak, so packing them lowers it.
    let b =
        analyze(&decode(&BASE.replace("batch=1", "batch=4")).expect("decodes")).expect("analyzes");
    let row = b
        .strategies
        .as_ref()
        .expect("strategies")
        .iter()
        .find(|r| r.id == "act_int8")
        .expect("an act_int8 row");
    assert!(row.changes_training && row.saved > 0, "{row:?}");
}

#[test]
fn nested_hooks_are_refused_naming_the_field() {
    for link in ["act_int8=1&act_offload=1", "act_int8=1&ckpt=full"] {
        let err = decode(link).expect_err(link).to_string();
        assert!(err.contains("act_int8"), "{link}: {err}");
    }
}
