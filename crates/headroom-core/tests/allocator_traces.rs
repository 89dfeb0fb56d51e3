//! The allocator model against PyTorch's own: each trace recorded on an H200
//! (tests/reference/measure_allocator.py: every allocation and free of a real training run, from
//! an empty allocator) is replayed through `CachingAllocator`, which must reserve the same
//! segments in the same order, hold the same reserved and allocated bytes and reach the same
//! peaks at every phase the run marked, and fail where the run failed. The FSDP traces
//! (tests/reference/measure_fsdp_peak.py on the same H200, one GPU as one rank of a fake process
//! group) keep each action's stream: FSDP gathers and reduces on streams of its own.

use crate::common;

use std::collections::HashMap;

use headroom_core::allocator::{AllocatorSettings, CachingAllocator};
use serde_json::Value;

fn trace(name: &str) -> Value {
    trace_in("edge", name)
}

fn trace_in(dir: &str, name: &str) -> Value {
    common::h200_trace(dir, name)
}

/// What a replay found, beside what the run measured.
#[derive(Debug, Default)]
struct Replay {
    segments: Vec<u64>,
    measured_segments: Vec<u64>,
    /// (marker, what differs) at each phase mark.
    mismatches: Vec<String>,
    /// The peak reserved's relative error at each mark.
    peak_reserved_errors: Vec<f64>,
    markers: usize,
    oom: Option<(u64, bool)>,
    /// Reserved and allocated when the trace ends.
    end: (u64, u64),
}

/// Replays a trace; `driver_addresses`: the new segments placed where cudaMalloc placed them
/// (without: each above the last, as when the core generates the sequence itself).
fn replay(t: &Value, driver_addresses: bool) -> Replay {
    let limit = t["scenario"].get(12).and_then(|o| o["cap"].as_u64());
    let expandable_segments = t["allocator"]
        .as_str()
        .is_some_and(|a| a.contains("expandable_segments:True"));
    let mut alloc = CachingAllocator::new(AllocatorSettings {
        limit,
        expandable_segments,
        ..AllocatorSettings::default()
    });
    let events = t["events"].as_array().expect("events");
    if driver_addresses {
        alloc.place_segments_at(
            events
                .iter()
                .filter(|e| e[0] == "s")
                .map(|e| e[1].as_u64().expect("address")),
        );
    }
    let no_markers = Vec::new();
    let markers = t["markers"].as_array().unwrap_or(&no_markers);
    // A marker's levels: its own, or (FSDP traces) those of the run's phase it ends.
    let levels = |k: usize| {
        let m = &markers[k];
        if m.get("reserved").is_some() {
            m
        } else {
            &t["run"]["phases"][k]
        }
    };
    let mut live = HashMap::new();
    let mut out = Replay::default();
    for (i, e) in events.iter().enumerate() {
        let (code, addr, size) = (
            e[0].as_str().expect("code"),
            e[1].as_u64().expect("address"),
            e[2].as_u64().expect("size"),
        );
        // The stream, where the trace keeps it (0: the default stream).
        let stream = e.get(3).and_then(Value::as_u64).unwrap_or(0);
        match code {
            "a" => {
                let a = alloc
                    .malloc_on(stream, size)
                    .unwrap_or_else(|oom| panic!("event {i}: {oom:?}"));
                live.insert(addr, a);
            }
            // PyTorch counts a block free when its owner frees it (free_requested) and reuses it
            // when the streams that used it are done (free_completed, at once where none did).
            "r" => alloc.free_requested(*live.get(&addr).expect("a live allocation")),
            "f" => alloc.free(live.remove(&addr).expect("a live allocation")),
            "s" | "m" => out.measured_segments.push(size),
            // The first of a run of segment releases not caused by a failing request: the run
            // called empty_cache. (Releases before an 'o' are the allocator's own retry.)
            "S" | "u" if !matches!(events[i - 1][0].as_str(), Some("S" | "u")) => {
                let next = events[i..]
                    .iter()
                    .find(|e| !matches!(e[0].as_str(), Some("S" | "u")))
                    .expect("an event after");
                if next[0] != "o" {
                    alloc.empty_cache();
                }
            }
            "o" => {
                let failed = alloc.malloc(size).is_err();
                out.oom = Some((size, failed));
                break;
            }
            "n" => {
                let m = levels(out.markers);
                let got = [
                    alloc.reserved(),
                    alloc.allocated(),
                    alloc.peak_reserved(),
                    alloc.peak_allocated(),
                ];
                let want = ["reserved", "allocated", "max_reserved", "max_allocated"]
                    .map(|k| m[k].as_u64().expect("a level"));
                out.peak_reserved_errors
                    .push(got[2] as f64 / want[2] as f64 - 1.0);
                if got != want {
                    out.mismatches.push(format!(
                        "step {} {}: reserved, allocated, peaks {got:?}, measured {want:?}",
                        m["step"], m["phase"]
                    ));
                }
                alloc.reset_peaks();
                out.markers += 1;
            }
            _ => {}
        }
    }
    out.segments = alloc.segment_sizes().to_vec();
    out.end = (alloc.reserved(), alloc.allocated());
    out
}

/// Replays a trace and checks it; `blind`: how far the peaks may go without the driver's
/// addresses.
fn check_within(name: &str, blind: f64) -> Replay {
    check_trace(&trace(name), name, blind)
}

fn check_trace(t: &Value, name: &str, blind: f64) -> Replay {
    let r = replay(t, true);
    assert_eq!(
        r.markers,
        t["markers"].as_array().map_or(0, Vec::len),
        "{name}: every mark reached"
    );
    assert_eq!(
        r.segments, r.measured_segments,
        "{name}: the segments reserved, in order"
    );
    assert!(r.mismatches.is_empty(), "{name}: {:#?}", r.mismatches);
    // Without the driver's addresses only ties between equal free blocks can go another way.
    let unplaced = replay(t, false);
    assert_eq!(
        unplaced.oom, r.oom,
        "{name}: the same failure without addresses"
    );
    let worst = unplaced
        .peak_reserved_errors
        .iter()
        .fold(0.0f64, |m, e| m.max(e.abs()));
    assert!(
        worst <= blind,
        "{name}: peak reserved without addresses off by {worst:e}"
    );
    r
}

/// Most traces: within 0.6% without the driver's addresses (measured: 0.01% on trace 3, 0.58%
/// at trace 8's failure, exact on the rest).
fn check(name: &str) -> Replay {
    check_within(name, 0.006)
}

#[test]
fn llama_3_2_1b_checkpointed_amp_reserves_what_the_h200_reserved() {
    // Reserved 89.4 GB for 70.8 GB allocated: the 26% the slack fraction could not see.
    assert_eq!(check("trace1.json.gz").oom, None);
}

#[test]
fn llama_3_2_1b_bf16_reserves_what_the_h200_reserved() {
    check("trace2.json.gz");
}

#[test]
fn qwen2_5_0_5b_eager_amp_reserves_what_the_h200_reserved() {
    check("trace3.json.gz");
}

#[test]
fn llama_3_1_8b_lora_checkpointed_reserves_what_the_h200_reserved() {
    check("trace4.json.gz");
}

#[test]
fn capped_at_an_h100_the_checkpointed_1b_run_fails_where_the_h100_failed() {
    // The same run as trace 1 with the allocator held to the H100's 80 GB: PyTorch released
    // its cache and still could not find 15.66 GiB, 64.6 GB allocated; so does the model.
    let r = check("trace5.json.gz");
    assert_eq!(r.oom, Some((16_810_770_432, true)));
}

#[test]
fn capped_at_an_h100_llama_3_1_8b_in_bf16_fails_on_its_fp32_logits_as_measured() {
    // Llama 3.1 8B, bf16, checkpointed, 4 x 4,096: 74.85 GiB allocated at most, yet with the
    // allocator held to the H100's 80 GB the second step's fp32 logits (7.83 GiB) found no room.
    let r = check("trace8.json.gz");
    assert_eq!(r.oom.map(|o| o.1), Some(true));
}

#[test]
fn qlora_on_the_gpu_reserves_what_the_h200_reserved() {
    // Quantizing on the GPU frees 193 segments (empty_cache) that are reserved again where the
    // driver chose: without those addresses the ties go otherwise and reserved ends 3.1% above
    // (3.65% in the first forward).
    check_within("trace10.json.gz", 0.037);
}

#[test]
fn lora_on_an_fp32_base_reserves_what_the_h200_reserved() {
    check("trace11.json.gz");
}

#[test]
fn with_expandable_segments_the_checkpointed_1b_run_maps_what_the_h200_mapped() {
    // 81.5 GB mapped where the default allocator reserved 89.4 GB for the same run (trace 1).
    check("trace6.json.gz");
}

#[test]
fn with_expandable_segments_llama_3_2_1b_bf16_maps_what_the_h200_mapped() {
    check("trace7.json.gz");
}

#[test]
fn with_expandable_segments_llama_3_1_8b_fits_under_the_h100_cap_as_measured() {
    // The run that failed on its logits under the default allocator (trace 8) trains.
    assert_eq!(check("trace9.json.gz").oom, None);
}

#[test]
fn with_expandable_segments_qwen2_5_0_5b_eager_maps_what_the_h200_mapped() {
    check("trace12.json.gz");
}

#[test]
fn with_expandable_segments_llama_3_1_8b_lora_maps_more_than_the_default_allocator_reserved() {
    // 55.30 GB mapped against 54.34 GB reserved without expandable segments (trace 4): they
    // are not always the smaller.
    check("trace13.json.gz");
}

#[test]
fn compiled_llama_3_2_1b_reserves_what_the_h200_reserved() {
    // torch.compile's first step compiles; inductor's forward and backward allocate and free
    // through the same caching allocator (trace 14, 2026-11-27).
    check("trace14.json.gz");
}

#[test]
fn compiled_llama_3_1_8b_of_8_layers_reserves_what_the_h200_reserved() {
    check("trace15.json.gz");
}

#[test]
fn checkpointed_amp_lora_on_an_fp32_base_reserves_what_the_h200_reserved() {
    // Exact with the driver's addresses; without them, ties between equal free blocks among
    // the checkpoints' many recomputed tensors go otherwise and the peak ends 1.36% off.
    check_within("trace16.json.gz", 0.014);
}

/// An FSDP trace (one rank of a fake process group on the H200, run_fsdp_on_gpu.sh): replayed
/// with each action on its stream, the same segments in order and the levels of every marked
/// phase; where the run marked none (the first call's two traces), the levels it ended with.
fn check_fsdp(name: &str, blind: f64) -> Replay {
    let t = trace_in("fsdp", name);
    let r = check_trace(&t, name, blind);
    let phases = t["run"]["phases"].as_array().expect("phases");
    let last = phases.last().expect("a phase");
    let want = ["reserved", "allocated"].map(|k| last[k].as_u64().expect("a level"));
    assert_eq!(
        [r.end.0, r.end.1],
        want,
        "{name}: reserved and allocated at the end"
    );
    r
}

#[test]
fn fsdp2_streams_keep_segments_of_their_own_as_the_h200_did() {
    // Llama 3.2 1B, full fine-tuning under FSDP2 (amp, fp32 reduce), 2 ranks: the all-gather
    // copy-in and all-gather streams held 0.74 and 2.33 GiB of segments the default stream could
    // not use, 37.13 GiB reserved for a 32.71 GiB allocated peak.
    check_fsdp("fsdp_trace3.json.gz", 0.006);
}

#[test]
fn fsdp1_checkpointed_reserves_what_the_h200_reserved() {
    // Llama 3.2 1B under FSDP1 as accelerate wraps it, checkpointed, 8 x 2048: 44.63 GiB
    // reserved for 32.31 allocated (the core's slack fraction says 35.12), its frees deferred
    // until the streams that used the blocks are done (free_requested, then free_completed).
    check_fsdp("fsdp_trace4.json.gz", 0.006);
    check_fsdp("fsdp_p2_trace5.json.gz", 0.006);
}

#[test]
fn fsdp2_checkpointed_8b_reserves_what_the_h200_reserved() {
    // Llama 3.1 8B, bf16, FSDP2 over 8 ranks, checkpointed, 2 x 4096, phases marked: 29.86 GiB
    // reserved for 22.03 allocated, of which 2.37 on the copy-in stream (the root's and a
    // layer's gather) and 1.93 on the reduce-scatter stream (each sharded gradient a segment).
    check_fsdp("fsdp_p2_trace4.json.gz", 0.006);
}

#[test]
fn fsdp2_lora_checkpointed_reserves_what_the_h200_reserved() {
    // Exact with the driver's addresses; without them ties between equal free blocks go
    // otherwise and the peak ends 0.85% off.
    check_fsdp("fsdp_p2_trace6.json.gz", 0.009);
}

#[test]
fn qwen2_lora_on_q_k_v_checkpointed_reserves_what_the_h200_reserved() {
    // Qwen-1 1.8B (as Qwen2) LoRA on q, k, v, amp, checkpointed, 875 tokens
    // (tests/reference/gpu/h200/varlen, 2026-11-28). Meant as a run over variable lengths, it
    // recorded its first step only: recording every action slowed it past its 14 s deadline.
    let name = "t1-q18-2048.json.gz";
    check_trace(&trace_in("varlen", name), name, 0.006);
}
