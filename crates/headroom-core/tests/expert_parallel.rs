//! Expert parallelism (`ep`): the experts of each MoE layer split over data-parallel ranks,
//! tokens exchanged by all-to-all. Checked against the parameter inventory (whose counts equal
//! transformers' `num_parameters()`) and the time model's formula.

use headroom_core::codec::decode;
use headroom_core::estimate::resolve;
use headroom_core::model::{Scope, inventory};
use headroom_core::{analyze, estimate};

/// Parameters in the stacked experts of all MoE layers (each layer's `copies` experts).
fn expert_params(link: &str) -> u64 {
    let spec = resolve(&decode(link).expect("decodes"))
        .expect("resolves")
        .spec;
    let inv = inventory(&spec);
    inv.tensors
        .iter()
        .filter(|t| t.copies > 1 && t.scope == Scope::SparseLayer)
        .map(|t| t.numel() * inv.multiplicity(t.scope))
        .sum()
}

fn component(link: &str, id: &str) -> u64 {
    let e = estimate(&decode(link).expect("decodes")).expect("estimates");
    e.components
        .iter()
        .find(|c| c.id == id)
        .map_or(0, |c| c.bytes)
}

/// DDP keeps every parameter on every rank; with `ep = 2` each rank holds half of the experts:
/// its bf16 weights shrink by exactly half the experts' bytes (60 experts of Qwen1.5-MoE-A2.7B
/// in 24 layers), and so do its gradients.
#[test]
fn ddp_with_ep_holds_a_share_of_the_experts() {
    let base = "model=qwen1.5-moe-a2.7b&gpu=h100-sxm-80gb&gpus=2&precision=bf16&optimizer=sgd";
    let experts = expert_params(base);
    assert!(experts > 0);
    for id in ["weights", "gradients"] {
        let one = component(base, id);
        let two = component(&format!("{base}&ep=2"), id);
        assert_eq!(one - two, experts / 2 * 2, "{id}");
    }
}

/// Under FSDP2 every parameter is sharded over all data-parallel ranks anyway: with EP the
/// experts are split over `ep` ranks and sharded over the other `dp / ep`, the same bytes per
/// GPU (to the rounding of the shards).
#[test]
fn fsdp_with_ep_shards_the_same_bytes() {
    let base = "model=mixtral-8x7b&gpu=h100-sxm-80gb&gpus=8&dp=fsdp&ckpt=full";
    for ep in [2, 4, 8] {
        for id in ["weights", "gradients", "optimizer_states"] {
            let a = component(base, id) as i64;
            let b = component(&format!("{base}&ep={ep}"), id) as i64;
            assert!((a - b).abs() <= 64, "ep={ep} {id}: {a} vs {b}");
        }
    }
}

/// The all-to-all term moves (4 per MoE layer + 2 per recomputed one) x b·s·k·h x (e−1)/e
/// bytes per micro-batch, and exists only with `ep > 1`.
#[test]
fn all_to_all_traffic_follows_the_formula() {
    let base = "model=mixtral-8x7b&gpu=h100-sxm-80gb&gpus=8&dp=fsdp&ckpt=full&batch=1&seq=4096";
    let term = |link: &str| {
        analyze(&decode(link).expect("decodes"))
            .expect("analyzes")
            .time
            .terms
            .into_iter()
            .find(|t| t.id == "expert_parallel")
    };
    assert!(term(base).is_none());
    let t = term(&format!("{base}&ep=4")).expect("an all-to-all term");
    // Mixtral: 32 MoE layers, top-2, hidden 4096, bf16 activations; every layer recomputed.
    let per = 4096u64 * 2 * 4096 * 2;
    let want = per * (4 * 32 + 2 * 32) * 3 / 4;
    assert_eq!(t.bytes, want);
}

#[test]
fn refusals_name_ep() {
    for (link, says) in [
        ("model=llama-3.1-8b&gpus=2&ep=2", "has none"),
        ("model=mixtral-8x7b&gpus=16&ep=16", "8 experts"),
        ("model=mixtral-8x7b&gpus=4&ep=8", "data-parallel degree 4"),
    ] {
        let err = decode(link)
            .and_then(|s| estimate(&s))
            .expect_err(link)
            .to_string();
        assert!(err.contains("`ep`") && err.contains(says), "{link}: {err}");
    }
}
