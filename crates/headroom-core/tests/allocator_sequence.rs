//! Reserved from the step replayed through the allocator model (`estimate::sequence`), against
//! the reserved peaks the H200 recorded in its allocator traces (tests/reference/gpu/h200/
//! edge/traces, measure_allocator.py: each run from an empty allocator on the uncapped card,
//! torch 2.11, transformers 5.17). Only the runs the replay models and that ran uncapped: every
//! such trace is here (ten of sixteen; the others ran capped, compiled or QLoRA), and each
//! error is printed (`cargo test -- --nocapture`).
//!
//! The slack fraction gave, in this order: -13.9%, -2.9%, -8.5%, -9.5%, -2.5%, -13.2%, -8.1%,
//! and for the eager Qwen and fp32-base LoRA runs (traces 3, 12, 11) -0.3%, +1.0%, -1.0%. The
//! replay: -18.1% (the run's second step made a fourth 16 GiB logits segment the replay does
//! not: see estimate/sequence/mod.rs), -0.3%, +0.1%, +0.4%, -0.1%, -7.0% (LoRA with expandable
//! segments, whose real run reserved more than with the default allocator), +4.8% (LoRA on an
//! fp32 base under autocast, checkpointed: its backward's fp32 MLP-sized tensors are not
//! written out op by op), -0.5%, +0.1%, +1.0%. (The LoRA traces 4, 16 and 11 were +0.5%, +5.1%
//! and +1.3% until 2026-11-29, when the replay stopped writing each layer's adapter gradients
//! twice.)
use crate::common;

use headroom_core::codec::{decode_pairs, query_pairs};
use headroom_core::{Scenario, estimate};

/// (trace, the run as a link, the largest error allowed at the reserved level, %).
const RUNS: &[(u32, &str, f64)] = &[
    (
        1,
        "model=llama-3.2-1b&precision=amp-bf16&ckpt=full&batch=16&seq=2048&method=full",
        // A known miss (estimate/sequence/mod.rs says why): one 16 GiB logits segment fewer.
        19.0,
    ),
    (
        2,
        "model=llama-3.2-1b&precision=bf16&ckpt=none&batch=8&seq=2048&method=full",
        2.0,
    ),
    (
        4,
        "model=llama-3.1-8b&precision=bf16&ckpt=full&batch=4&seq=4096&method=lora&rank=16&targets=all",
        2.0,
    ),
    (
        6,
        "model=llama-3.2-1b&precision=amp-bf16&ckpt=full&batch=16&seq=2048&method=full&expandable=1",
        2.0,
    ),
    (
        7,
        "model=llama-3.2-1b&precision=bf16&ckpt=none&batch=8&seq=2048&method=full&expandable=1",
        2.0,
    ),
    (
        13,
        "model=llama-3.1-8b&precision=bf16&ckpt=full&batch=4&seq=4096&method=lora&rank=16&targets=all&expandable=1",
        8.0,
    ),
    (
        16,
        "model=llama-3.1-8b&precision=amp-bf16&ckpt=full&batch=4&seq=4096&method=lora&rank=16&targets=all&base=fp32",
        6.0,
    ),
    (
        3,
        "model=qwen2.5-0.5b&precision=amp-bf16&attention=eager&ckpt=none&batch=4&seq=1024&method=full",
        2.0,
    ),
    (
        12,
        "model=qwen2.5-0.5b&precision=amp-bf16&attention=eager&ckpt=none&batch=4&seq=1024&method=full&expandable=1",
        2.0,
    ),
    (
        11,
        "model=llama-3.2-1b&precision=amp-bf16&ckpt=none&batch=1&seq=2048&method=lora&rank=16&targets=all&base=fp32",
        6.0,
    ),
];

fn measured_reserved(n: u32) -> u64 {
    let t = common::h200_trace("edge", &format!("trace{n}.json.gz"));
    t["markers"]
        .as_array()
        .expect("markers")
        .iter()
        .map(|m| m["max_reserved"].as_u64().expect("max_reserved"))
        .max()
        .expect("a marker")
}

/// Whether the estimate's reserved level came from the replay.
fn replayed(e: &headroom_core::Estimate) -> bool {
    e.components
        .iter()
        .any(|c| c.id == "reserved_slack" && c.formula.contains("replayed"))
}

#[test]
fn the_replayed_step_reserves_what_the_h200_reserved() {
    let mut failures = Vec::new();
    for &(n, link, within) in RUNS {
        let link = if link.contains("attention=") {
            format!("{link}&gpu=h200-141gb&optimizer=adamw")
        } else {
            format!("{link}&gpu=h200-141gb&optimizer=adamw&attention=sdpa")
        };
        let scen = decode_pairs(Scenario::default(), &query_pairs(&link).expect("query"))
            .expect("valid link");
        let e = estimate(&scen).expect("estimates");
        let want = measured_reserved(n);
        let err = 100.0 * (e.peak.reserved as f64 / want as f64 - 1.0);
        println!(
            "trace {n}: reserved {:.2} GiB, measured {:.2} GiB ({err:+.1}%)",
            e.peak.reserved as f64 / (1u64 << 30) as f64,
            want as f64 / (1u64 << 30) as f64
        );
        // Replayed, not the slack fraction.
        assert!(replayed(&e), "trace {n}: reserved not replayed");
        if err.abs() > within {
            failures.push(format!("trace {n}: {err:+.1}% (allowed {within}%)"));
        }
    }
    assert!(failures.is_empty(), "{failures:?}");
}

/// FSDP replayed (`estimate::sequence::fsdp` and `fsdp1`) against the four FSDP runs the H200
/// traced on the fake process group (tests/reference/gpu/h200/fsdp/traces; one GPU standing for
/// one rank, its peaks over the steps after the first). With the slack fraction the core said
/// -4.2%, -20.1%, -14.1% and -21.3%: the side streams' segments and the default stream's
/// checkpointed backward were not there. FSDP1's 1B run was -18.9% (its second step cut a fourth
/// 8 GiB logits block the replay did not) until AdamW's states under FSDP1 became one tensor per
/// flat parameter, as the trace shows its first step making them: -1.4%.
#[test]
fn fsdp_replayed_reserves_what_the_h200_reserved() {
    let runs = [
        (
            "fsdp_trace3",
            "model=llama-3.2-1b&precision=amp-bf16&ckpt=none&batch=4&seq=2048&method=full&gpus=2&dp=fsdp&reduce32=1",
            2.0,
        ),
        (
            "fsdp_p2_trace4",
            "model=llama-3.1-8b&precision=bf16&ckpt=full&batch=2&seq=4096&method=full&gpus=8&dp=fsdp",
            2.0,
        ),
        (
            "fsdp_p2_trace6",
            "model=llama-3.1-8b&precision=amp-bf16&ckpt=full&batch=4&seq=2048&method=lora&rank=16&targets=all&base=16bit&gpus=2&dp=fsdp",
            2.0,
        ),
        (
            "fsdp_p2_trace5",
            "model=llama-3.2-1b&precision=amp-bf16&ckpt=full&batch=8&seq=2048&method=full&gpus=2&dp=fsdp&fsdp1=1",
            2.0,
        ),
    ];
    let mut failures = Vec::new();
    for (name, link, within) in runs {
        let link = format!("{link}&gpu=h200-141gb&optimizer=adamw&attention=sdpa");
        let scen = decode_pairs(Scenario::default(), &query_pairs(&link).expect("query"))
            .expect("valid link");
        let e = estimate(&scen).expect("estimates");
        assert!(replayed(&e), "{name}: reserved not replayed");
        let t = common::h200_trace("fsdp", &format!("{name}.json.gz"));
        let want = t["run"]["peak_reserved"].as_u64().expect("peak_reserved");
        let err = 100.0 * (e.peak.reserved as f64 / want as f64 - 1.0);
        println!(
            "{name}: reserved {:.2} GiB, measured {:.2} GiB ({err:+.1}%)",
            e.peak.reserved as f64 / (1u64 << 30) as f64,
            want as f64 / (1u64 << 30) as f64
        );
        if err.abs() > within {
            failures.push(format!("{name}: {err:+.1}% (allowed {within}%)"));
        }
    }
    assert!(failures.is_empty(), "{failures:?}");
}

/// The presets [`the_replays_allocated_peak_is_the_estimates`] replays. (Until 2026-11-29 the
/// list named `mistral-7b`, which is no preset, so Mistral was never replayed here; with
/// `mistral-7b-v0.1` FSDP2's checkpointed steps over 8 ranks came out 2.2-3.4% under the
/// estimate, until the replay wrote the MLP's output side of each layer's backward as
/// `LayerBackward` counts it.)
const MODELS: [&str; 10] = [
    "llama-3.2-1b",
    "qwen2.5-0.5b",
    "mistral-7b-v0.1",
    "llama-3.1-8b",
    "gpt2",
    "qwen3-8b",
    "gemma-2-9b",
    "gemma-3-1b-pt",
    "command-r7b",
    "olmo-3-7b",
];

/// The replay holds every tensor the estimate counts, when the estimate counts it: its own
/// allocated peak is the estimate's allocated level (within 1%), over presets of the families
/// it models, each precision, checkpointing or not, full fine-tuning, LoRA and QLoRA, one GPU and
/// FSDP. Where it is
/// not, the sequence misses or double-counts a tensor, whatever reserved it then gives.
#[test]
fn the_replays_allocated_peak_is_the_estimates() {
    let mut worst: Vec<(f64, String)> = Vec::new();
    for model in MODELS {
        for precision in ["bf16", "amp-bf16", "fp32"] {
            for ckpt in ["none", "full"] {
                for method in [
                    "full",
                    "lora&targets=all",
                    "lora&targets=attn&base=fp32",
                    "full&fp8=tensorwise",
                    "full&fp8=rowwise",
                    "qlora&targets=all",
                    "full&attention=eager",
                ] {
                    for (batch, seq, dp) in [
                        (1, 512, ""),
                        (4, 2048, ""),
                        (4, 2048, "&gpus=8&dp=fsdp"),
                        (2, 2048, "&gpus=2&dp=fsdp&reduce32=1"),
                        (2, 2048, "&gpus=2&dp=fsdp&fsdp1=1"),
                    ] {
                        let link = format!(
                            "model={model}&gpu=h200-141gb&precision={precision}&ckpt={ckpt}&method={method}&batch={batch}&seq={seq}&optimizer=adamw{dp}"
                        );
                        let Ok(pairs) = query_pairs(&link) else {
                            continue;
                        };
                        let Ok(scen) = decode_pairs(Scenario::default(), &pairs) else {
                            continue;
                        };
                        let Ok(e) = estimate(&scen) else { continue };
                        let Ok(Some(r)) = headroom_core::estimate::replay(&scen) else {
                            continue;
                        };
                        let err = 100.0 * (r.allocated as f64 / e.peak.allocated as f64 - 1.0);
                        worst.push((err, link));
                    }
                }
            }
        }
    }
    // Every model above is replayed: the sliding-window ones (Gemma 2 and 3, Command R7B,
    // OLMo 3) with each layer's own saved tensors.
    for model in MODELS {
        assert!(
            worst
                .iter()
                .any(|(_, link)| link.starts_with(&format!("model={model}&"))),
            "{model} is never replayed"
        );
    }
    worst.sort_by(|a, b| b.0.abs().total_cmp(&a.0.abs()));
    for (err, link) in worst.iter().filter(|w| w.1.contains("dp=fsdp")).take(8) {
        println!("fsdp {err:+.2}% {link}");
    }
    for (err, link) in worst.iter().take(15) {
        println!("{err:+.2}% {link}");
    }
    println!("{} scenarios replayed", worst.len());
    // Small steps (1 x 512) are within 3%: what the replay holds beside the model states
    // differs by a few hundred MiB there; the larger ones within 1%.
    let off: Vec<_> = worst
        .iter()
        .filter(|(e, link)| e.abs() > if link.contains("seq=512") { 3.0 } else { 1.0 })
        .collect();
    assert!(
        off.is_empty(),
        "{} of {} off: {off:?}",
        off.len(),
        worst.len()
    );
}
