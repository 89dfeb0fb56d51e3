//! The allocator model against PyTorch's own: each trace recorded on an H200
//! (tests/reference/measure_allocator.py: every allocation and free of a real training run, from
//! an empty allocator) is replayed through `CachingAllocator`, which must reserve the same
//! segments in the same order, hold the same reserved and allocated bytes and reach the same
//! peaks at every phase the run marked, and fail where the run failed.

use std::collections::HashMap;
use std::io::Read;
use std::path::PathBuf;

use headroom_core::allocator::{AllocatorSettings, CachingAllocator};
use serde_json::Value;

fn trace(name: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/reference/gpu/h200/edge/traces")
        .join(name);
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&path).expect("trace file"))
        .read_to_string(&mut text)
        .expect("gzipped JSON");
    serde_json::from_str(&text).expect("trace JSON")
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
    let markers = t["markers"].as_array().expect("markers");
    let mut live = HashMap::new();
    let mut out = Replay::default();
    for (i, e) in events.iter().enumerate() {
        let (code, addr, size) = (
            e[0].as_str().expect("code"),
            e[1].as_u64().expect("address"),
            e[2].as_u64().expect("size"),
        );
        match code {
            "a" => {
                let a = alloc
                    .malloc(size)
                    .unwrap_or_else(|oom| panic!("event {i}: {oom:?}"));
                live.insert(addr, a);
            }
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
                let m = &markers[out.markers];
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
    out
}

/// Replays a trace and checks it; `blind`: how far the peaks may go without the driver's
/// addresses.
fn check_within(name: &str, blind: f64) -> Replay {
    let t = trace(name);
    let r = replay(&t, true);
    assert_eq!(
        r.markers,
        t["markers"].as_array().expect("markers").len(),
        "{name}: every mark reached"
    );
    assert_eq!(
        r.segments, r.measured_segments,
        "{name}: the segments reserved, in order"
    );
    assert!(r.mismatches.is_empty(), "{name}: {:#?}", r.mismatches);
    // Without the driver's addresses only ties between equal free blocks can go another way.
    let unplaced = replay(&t, false);
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
