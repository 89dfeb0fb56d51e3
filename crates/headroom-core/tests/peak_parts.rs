//! What is live at the tensor peak (`Peaks::parts`): for every named scenario and variants of
//! it (checkpointing, accumulation, offload, ZeRO-3, LoRA, kept outputs, ...), the parts sum
//! to the peak exactly and none is more than its line in the breakdown.

use headroom_core::codec::{decode_pairs, named_scenarios, query_pairs};
use headroom_core::estimate::{Level, Phase};

/// Changes applied to each named scenario (those a scenario refuses are skipped).
const VARIANTS: &[&str] = &[
    "",
    "ckpt=full",
    "ckpt=selective&attention=eager",
    "ckpt=every:2",
    "accum=4",
    "accum=4&ckpt=full",
    "act_offload=1",
    "act_offload=1&ckpt=full",
    "gpus=8&dp=zero3",
    "gpus=8&dp=zero3&accum=2",
    "gpus=8&dp=fsdp",
    "gpus=4&dp=zero2&opt_offload=cpu",
    "method=lora",
    "method=qlora",
    "keep_logits=1",
    "keep_logits=1&accum=2",
    "attention=eager",
    "precision=amp-bf16",
    "precision=fp32",
    "loss=fused",
    "gpus=4&pp=2&accum=4",
    "gpus=2&tp=2",
    "graphs=1",
];

#[test]
fn the_peak_parts_sum_to_the_peak_and_stay_within_their_lines() {
    let mut checked = 0;
    let mut phases = Vec::new();
    let mut ids = Vec::new();
    for n in named_scenarios() {
        for v in VARIANTS {
            let Ok(scen) = decode_pairs(n.scenario.clone(), &query_pairs(v).expect("pairs")) else {
                continue;
            };
            let Ok(e) = headroom_core::estimate(&scen) else {
                continue;
            };
            let at = format!("{} + `{v}`", n.id);
            let parts = &e.peak.parts;
            assert!(!parts.is_empty(), "{at}: no parts");
            let sum: u64 = parts.iter().map(|p| p.bytes).sum();
            assert_eq!(sum, e.peak.tensors, "{at}: parts {parts:?}");
            for p in parts {
                assert!(p.bytes > 0, "{at}: {p:?}");
                let line = e
                    .components
                    .iter()
                    .find(|c| c.id == p.id.id())
                    .unwrap_or_else(|| panic!("{at}: {:?} has no line", p.id));
                assert_eq!(line.level, Level::Tensors, "{at}: {:?}", p.id);
                assert!(
                    p.bytes <= line.bytes,
                    "{at}: {:?} holds {} at the peak, its line {}",
                    p.id,
                    p.bytes,
                    line.bytes
                );
            }
            checked += 1;
            if !phases.contains(&e.peak.phase) {
                phases.push(e.peak.phase);
            }
            for p in parts {
                if !ids.contains(&p.id) {
                    ids.push(p.id);
                }
            }
        }
    }
    assert!(checked > 200, "only {checked} scenarios estimated");
    // The peaks fall in the loss, the backward and the optimizer step (seldom in the forward:
    // the loss's point holds all a forward point does but the model forward's temporaries),
    // and the parts name most components.
    for phase in [Phase::Loss, Phase::Backward, Phase::Optimizer] {
        assert!(
            phases.contains(&phase),
            "no peak in the {phase:?}: {phases:?}"
        );
    }
    assert!(ids.len() >= 15, "{ids:?}");
}

/// The peak's parts are in display order, each component once.
#[test]
fn the_peak_parts_follow_the_breakdown_order() {
    let e = headroom_core::estimate(&headroom_core::Scenario::default()).expect("estimates");
    let order: Vec<usize> = e
        .peak
        .parts
        .iter()
        .map(|p| {
            headroom_core::estimate::ComponentId::ALL
                .iter()
                .position(|&c| c == p.id)
                .expect("an id")
        })
        .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{order:?}");
}
