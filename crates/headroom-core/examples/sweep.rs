//! A byte-for-byte check for refactors of the core that must change no number: estimates a
//! sweep of scenarios and writes each result, one line per scenario, to a file.
//!
//! The sweep is every model preset x three GPUs (an sm90, an sm80 and an sm75 part, so that
//! SDPA picks cuDNN, flash and memory-efficient kernels) x four precisions x full, LoRA and
//! QLoRA x three checkpointing modes x eager and SDPA attention, each with a micro-batch and
//! sequence and one extra option (LoRA targets, DoRA, TP, CP, packing, fp8, dropout, vision,
//! forced SDPA kernels, other attention implementations...) drawn by a fixed generator. Each
//! line is the scenario's link fields, then the `estimate` result's `Debug` (or its error) and
//! the step time's `Debug`, so a change to any number, label or saved tensor shows. Run it
//! before and after the change and compare the two files:
//!
//! ```text
//! cargo run --release -p headroom-core --example sweep -- /tmp/sweep_before.txt
//! (make the change)
//! cargo run --release -p headroom-core --example sweep -- /tmp/sweep_after.txt
//! cmp /tmp/sweep_before.txt /tmp/sweep_after.txt
//! ```

use std::collections::HashSet;
use std::fs::File;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::{BufWriter, Write};

use headroom_core::catalog::PresetCatalog;
use headroom_core::codec::decode_pairs;
use headroom_core::{Scenario, What, analyze_only, estimate};

const GPUS: &[&str] = &["h100-sxm-80gb", "a100-sxm4-80gb", "t4-16gb"];
const PRECISIONS: &[&str] = &["bf16", "fp32", "amp-bf16", "amp-fp16"];
const METHODS: &[&str] = &["full", "lora", "qlora"];
const CHECKPOINTING: &[&str] = &["none", "full", "selective"];
const ATTENTION: &[&str] = &["eager", "sdpa"];
/// Micro-batch and sequence length.
const SHAPES: &[(&str, &str)] = &[
    ("1", "512"),
    ("2", "2048"),
    ("1", "4096"),
    ("4", "256"),
    ("1", "100"),
];
/// One of these is added to each scenario (replacing a base field of the same key).
const EXTRAS: &[&[(&str, &str)]] = &[
    &[],
    &[("targets", "all")],
    &[("targets", "qv")],
    &[("targets", "qkv")],
    &[("targets", "mlp")],
    &[("dora", "1")],
    &[("dora", "1"), ("targets", "all")],
    &[("lora_dropout", "1")],
    &[("lora_dropout", "1"), ("dora", "1"), ("targets", "all")],
    &[("adapter", "bf16")],
    &[("base", "fp32")],
    &[("save_embeddings", "1")],
    &[("tp", "2"), ("gpus", "2")],
    &[("tp", "2"), ("sp", "1"), ("gpus", "2")],
    &[("cp", "2"), ("gpus", "2"), ("attention", "sdpa")],
    &[
        ("packing", "1"),
        ("doc_len", "1024"),
        ("attention", "flash2"),
    ],
    &[("attention", "flash2")],
    &[("attention", "flash3")],
    &[("attention", "flex")],
    &[("sdpa", "math")],
    &[("sdpa", "efficient")],
    &[("sdpa", "cudnn")],
    &[("sdpa", "flash")],
    &[("act_int8", "1")],
    &[("act_offload", "1")],
    &[("fp8", "te")],
    &[("fp8", "rowwise")],
    &[("dropout", "0.1")],
    &[("dropout", "0.1"), ("attention", "eager")],
    &[("compile", "1")],
    &[("vision", "trained"), ("images", "2")],
    &[("mtp", "1")],
    &[("loss", "fused")],
    &[("keep_logits", "1")],
    &[("ckpt", "every:2")],
    &[("ep", "2"), ("gpus", "2")],
    &[("pp", "2"), ("gpus", "2")],
    &[("dp", "zero3"), ("gpus", "8")],
];

/// A small deterministic generator (64-bit LCG), so the sweep is the same on every run.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) % n as u64) as usize
    }
}

/// Every scenario of the sweep, as link fields.
fn scenarios() -> Vec<Vec<(String, String)>> {
    let models: Vec<String> = PresetCatalog::builtin()
        .presets
        .iter()
        .map(|p| p.id.clone())
        .collect();
    let mut r = Lcg(0x5eed);
    let mut out = Vec::new();
    for model in &models {
        for gpu in GPUS {
            for precision in PRECISIONS {
                for method in METHODS {
                    for ckpt in CHECKPOINTING {
                        for attention in ATTENTION {
                            let (batch, seq) = SHAPES[r.below(SHAPES.len())];
                            let mut pairs: Vec<(&str, &str)> = vec![
                                ("model", model),
                                ("gpu", gpu),
                                ("precision", precision),
                                ("method", method),
                                ("ckpt", ckpt),
                                ("attention", attention),
                                ("batch", batch),
                                ("seq", seq),
                            ];
                            for &(key, value) in EXTRAS[r.below(EXTRAS.len())] {
                                pairs.retain(|(k, _)| *k != key);
                                pairs.push((key, value));
                            }
                            out.push(
                                pairs
                                    .into_iter()
                                    .map(|(k, v)| (k.to_string(), v.to_string()))
                                    .collect(),
                            );
                        }
                    }
                }
            }
        }
    }
    out
}

/// One scenario's line after its link fields: the estimate (or why there is none) and the
/// step time; and whether it was estimated.
fn result(pairs: &[(String, String)]) -> (String, bool) {
    let scen = match decode_pairs(Scenario::default(), pairs) {
        Ok(scen) => scen,
        Err(e) => return (format!("link refused: {e}"), false),
    };
    let (estimated, ok) = match estimate(&scen) {
        Ok(e) => (format!("{e:?}"), true),
        Err(e) => (format!("estimate refused: {e}"), false),
    };
    let time = match analyze_only(&scen, What::ESTIMATE, None) {
        Ok(a) => format!("{:?}", a.time),
        Err(e) => format!("analysis refused: {e}"),
    };
    (format!("{estimated}\t{time}"), ok)
}

fn main() -> std::io::Result<()> {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "sweep.txt".to_string());
    let mut file = BufWriter::new(File::create(&path)?);
    let mut distinct = HashSet::new();
    let mut estimated = 0;
    let all = scenarios();
    for pairs in &all {
        let link: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let (line, ok) = result(pairs);
        estimated += usize::from(ok);
        writeln!(file, "{}\t{line}", link.join("&"))?;
        // Results are long: count them by a hash of each.
        let mut h = DefaultHasher::new();
        line.hash(&mut h);
        distinct.insert(h.finish());
    }
    file.flush()?;
    println!(
        "{path}: {} scenarios, {estimated} estimated, {} distinct results",
        all.len(),
        distinct.len()
    );
    Ok(())
}
