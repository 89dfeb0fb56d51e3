//! The time model's assumptions a scenario may set (GPUs per node, inter-node bandwidth,
//! framework efficiency): each reaches every figure that depends on it, and 0 keeps the
//! documented default.

use headroom_core::analyze;
use headroom_core::codec::{decode, encode};
use headroom_core::export::{Target, export};
use headroom_core::time::{DEFAULT_FRAMEWORK_EFFICIENCY, TimeAssumptions};

fn analysis(link: &str) -> headroom_core::Analysis {
    analyze(&decode(link).expect("decodes")).expect("analyzes")
}

fn term(a: &headroom_core::Analysis, id: &str) -> f64 {
    a.time
        .terms
        .iter()
        .find(|t| t.id == id)
        .map_or(0.0, |t| t.seconds)
}

#[test]
fn defaults_are_the_documented_ones_and_links_omit_them() {
    let a = analysis("");
    assert_eq!(a.time.assumptions, TimeAssumptions::default());
    assert_eq!(a.time.assumptions.gpus_per_node, 8);
    assert_eq!(a.time.assumptions.internode_gbs, 50.0);
    assert_eq!(
        a.time.assumptions.framework_efficiency,
        DEFAULT_FRAMEWORK_EFFICIENCY
    );
    let s = decode("node=4&ib=100&eff=50").expect("decodes");
    assert_eq!(decode(&encode(&s)).expect("re-decodes"), s);
    assert!(!encode(&decode("").expect("default")).contains("node="));
}

/// The compute terms divide FLOPs by peak x GEMM efficiency x framework efficiency: halving the
/// framework efficiency doubles them exactly (the default curve is unchanged).
#[test]
fn efficiency_scales_the_compute_terms() {
    let base = "model=llama-3.1-8b&gpu=h100-sxm-80gb&batch=1&seq=4096";
    let (a, b) = (
        analysis(&format!("{base}&eff=60")),
        analysis(&format!("{base}&eff=30")),
    );
    for id in ["forward", "backward"] {
        let (x, y) = (term(&a, id), term(&b, id));
        assert!((y / x - 2.0).abs() < 1e-9, "{id}: {x} -> {y}");
    }
    assert_eq!(b.time.assumptions.framework_efficiency, 0.30);
}

/// 16 GPUs in ZeRO-3. One GPU per node: each ring crosses the network on that GPU's own NIC
/// (50 GB/s). Eight per node: NCCL's rings spread over all eight NICs, 8 x 50 = 400 GB/s per
/// rank. Sixteen per node (one NVLink domain): NVLink's 450 GB/s per direction. The
/// inter-node bandwidth sets the cross-node collective's seconds in proportion until NVLink
/// is the slower link.
#[test]
fn gpus_per_node_and_network_set_the_links() {
    let base = "model=llama-3.1-70b&gpu=h100-sxm-80gb&gpus=16&dp=zero3&ckpt=full";
    let comm = |extra: &str| term(&analysis(&format!("{base}&{extra}")), "data_parallel");
    let (one_nic, rails, inside) = (comm("node=1"), comm("node=8"), comm("node=16"));
    assert!(
        (one_nic / inside - 9.0).abs() < 1e-9,
        "{one_nic} / {inside}"
    );
    assert!(
        (rails / inside - 450.0 / 400.0).abs() < 1e-9,
        "{rails} / {inside}"
    );
    let slow = comm("node=8&ib=25");
    assert!((slow / rails - 2.0).abs() < 1e-9, "{slow} / {rails}");
    let fast = comm("node=8&ib=100");
    assert!((fast / inside - 1.0).abs() < 1e-9, "{fast} / {inside}");
}

/// Host RAM is checked per node: 8 GPUs offloading on nodes of 4 pin half as much per node.
#[test]
fn gpus_per_node_sets_host_ram_per_node_and_launch() {
    let base = "model=llama-3.1-8b&gpu=a100-sxm4-40gb&gpus=8&dp=zero3&opt_offload=cpu";
    let v8 = analysis(base).estimate.verdict;
    let v4 = analysis(&format!("{base}&node=4")).estimate.verdict;
    assert!(v8.host_per_node > 0);
    assert_eq!(v8.host_per_node, 2 * v4.host_per_node);
    let scen = decode(&format!("{base}&node=4")).expect("decodes");
    let spec = headroom_core::estimate::resolve(&scen)
        .expect("resolves")
        .spec;
    let launch = export(&spec, &scen, Target::Torchrun).text;
    assert!(
        launch.contains("--nnodes=2") && launch.contains("--nproc_per_node=4"),
        "{launch}"
    );
}

#[test]
fn out_of_range_assumptions_name_their_field() {
    for (link, field) in [
        ("node=73", "node"),
        ("ib=401", "ib"),
        ("eff=4", "eff"),
        ("eff=101", "eff"),
    ] {
        let err = decode(link)
            .and_then(|s| headroom_core::estimate(&s))
            .expect_err(link)
            .to_string();
        assert!(err.contains(field), "{link}: {err}");
    }
}
