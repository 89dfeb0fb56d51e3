//! What the integration tests that read committed GPU measurements share: the file readers
//! (JSON, and the H200's gzipped allocator traces) and the link of a measured run's scenario
//! tuple (`measure_gpu.py`'s [model, precision, attention, ckpt, batch, seq, method, rank,
//! targets, ...]).

// Each test binary that includes this module uses part of it.
#![allow(dead_code)]

/// A committed measurement file under tests/reference/gpu/.
pub fn measured_on_gpu(name: &str) -> serde_json::Value {
    let path = format!(
        "{}/../../tests/reference/gpu/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).expect("JSON")
}

/// The link of a measured run on `gpu`: its model, precision, attention, checkpointing, batch
/// and sequence, and its LoRA rank and targets where it trained LoRA.
pub fn measured_link(sc: &serde_json::Value, gpu: &str) -> String {
    let s = |i: usize| sc[i].to_string().trim_matches('"').to_string();
    let method = match s(6).as_str() {
        "lora" => format!("&method=lora&rank={}&targets={}", s(7), s(8)),
        _ => String::new(),
    };
    // The options (the thirteenth field): the LoRA base's load dtype.
    let base = match sc[12]["base"].as_str() {
        Some(b) => format!("&base={b}"),
        None => String::new(),
    };
    format!(
        "model={}&gpu={gpu}&precision={}&attention={}&ckpt={}&batch={}&seq={}{method}{base}",
        s(0),
        s(1),
        s(2),
        s(3),
        s(4),
        s(5)
    )
}

/// An allocator trace under tests/reference/gpu/h200/ (`dir/traces/name`), unpacked.
pub fn h200_trace(dir: &str, name: &str) -> serde_json::Value {
    use std::io::Read;
    let path = format!(
        "{}/../../tests/reference/gpu/h200/{dir}/traces/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut text = String::new();
    flate2::read::GzDecoder::new(
        std::fs::File::open(&path).unwrap_or_else(|e| panic!("{path}: {e}")),
    )
    .read_to_string(&mut text)
    .expect("gzipped JSON");
    serde_json::from_str(&text).expect("trace JSON")
}
