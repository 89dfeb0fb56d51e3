//! No input crashes the core: a deterministic sweep of scenarios over every preset and every
//! option (parallelism, offload, methods, checkpointing) must estimate without a panic or an
//! overflow (tests build with overflow checks), and give coherent peaks.

use headroom_core::catalog::{GpuCatalog, PresetCatalog};
use headroom_core::codec::{KEYS, decode_pairs, field_value};
use headroom_core::{Scenario, analyze, estimate};

/// A small deterministic generator (64-bit LCG), so failures reproduce.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[(self.next() % xs.len() as u64) as usize]
    }
}

fn random_pairs(r: &mut Lcg, models: &[&str], gpus: &[&str]) -> Vec<(String, String)> {
    let mut p = vec![
        ("model", r.pick(models).to_string()),
        ("gpu", r.pick(gpus).to_string()),
        ("batch", r.pick(&["1", "2", "3", "8", "64"]).to_string()),
        (
            "seq",
            r.pick(&["1", "7", "512", "2048", "8192", "131072"])
                .to_string(),
        ),
        (
            "method",
            r.pick(&["full", "full", "lora", "qlora"]).to_string(),
        ),
        ("rank", r.pick(&["1", "16", "256"]).to_string()),
        ("targets", r.pick(&["attn", "all"]).to_string()),
        (
            "precision",
            r.pick(&["fp32", "bf16", "fp16", "amp-bf16", "amp-fp16"])
                .to_string(),
        ),
        (
            "optimizer",
            r.pick(&[
                "adamw",
                "adamw-forloop",
                "adamw-fused",
                "adamw8bit",
                "paged-adamw8bit",
                "lion",
                "adafactor",
                "sgd",
                "sgd-momentum",
                "adam-mini",
            ])
            .to_string(),
        ),
        ("attention", r.pick(&["eager", "sdpa"]).to_string()),
        (
            "ckpt",
            r.pick(&["none", "full", "every:2", "every:3", "selective"])
                .to_string(),
        ),
        ("act_offload", r.pick(&["0", "1"]).to_string()),
        ("loss", r.pick(&["hf", "fused"]).to_string()),
        ("keep_logits", r.pick(&["0", "1"]).to_string()),
        ("expandable", r.pick(&["0", "1"]).to_string()),
        ("graphs", r.pick(&["0", "1"]).to_string()),
        ("compile", r.pick(&["0", "1"]).to_string()),
        ("ds_bf16", r.pick(&["0", "1"]).to_string()),
        (
            "fp8",
            r.pick(&["off", "off", "tensorwise", "rowwise"]).to_string(),
        ),
    ];
    let tp = r.pick(&["1", "1", "2", "8"]);
    let pp = r.pick(&["1", "1", "4", "16"]);
    let dp = r.pick(&["1", "2", "8", "64"]);
    let gpus = tp.parse::<u32>().unwrap_or(1)
        * pp.parse::<u32>().unwrap_or(1)
        * dp.parse::<u32>().unwrap_or(1);
    p.push(("gpus", gpus.to_string()));
    p.push(("tp", tp.to_string()));
    p.push(("pp", pp.to_string()));
    if tp != "1" {
        p.push(("sp", r.pick(&["0", "1"]).to_string()));
    }
    let strategy = r.pick(&["ddp", "zero1", "zero2", "zero3", "fsdp"]);
    p.push(("dp", strategy.to_string()));
    if strategy != "ddp" {
        p.push(("opt_offload", r.pick(&["none", "cpu", "nvme"]).to_string()));
    }
    if matches!(strategy, "zero3" | "fsdp") {
        p.push(("param_offload", r.pick(&["none", "cpu"]).to_string()));
    }
    if r.next().is_multiple_of(4) {
        p.push(("dropout", r.pick(&["0", "0.1", "0.5"]).to_string()));
    }
    // Context parallelism on top of the others' GPUs; packing with a varlen kernel.
    let mut set = |key: &'static str, value: String| {
        p.retain(|(k, _)| *k != key);
        p.push((key, value));
    };
    let cp = r.pick(&["1", "1", "1", "2", "4"]);
    if cp != "1" {
        set("cp", cp.to_string());
        set("attention", "sdpa".to_string());
        set("gpus", (gpus * cp.parse::<u32>().unwrap_or(1)).to_string());
    } else if r.next().is_multiple_of(4) {
        set("attention", r.pick(&["flash2", "flex"]).to_string());
        set("packing", "1".to_string());
        set("doc_len", r.pick(&["100", "1024", "100000"]).to_string());
    } else if r.next().is_multiple_of(4) {
        // Dynamic padding (never with packing).
        set(
            "len_mean",
            r.pick(&["1", "400", "3234", "100000"]).to_string(),
        );
        set("len_sd", r.pick(&["0", "300", "2548"]).to_string());
        set("drop_long", r.pick(&["0", "1"]).to_string());
    }
    p.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

#[test]
fn a_sweep_of_scenarios_never_panics_and_stays_coherent() {
    let models: Vec<&str> = PresetCatalog::builtin()
        .presets
        .iter()
        .map(|p| p.id.as_str())
        .collect();
    let gpus: Vec<&str> = GpuCatalog::builtin()
        .gpus
        .iter()
        .map(|g| g.id.as_str())
        .collect();
    let mut r = Lcg(0x5eed);
    let mut estimated = 0;
    for _ in 0..1500 {
        let pairs = random_pairs(&mut r, &models, &gpus);
        let Ok(scen) = decode_pairs(Scenario::default(), &pairs) else {
            continue; // An invalid combination is rejected with a message: that is fine.
        };
        let e = match estimate(&scen) {
            // fp8 on a GPU without fp8 tensor cores is refused once the GPU is known.
            Err(err) if err.to_string().contains("no fp8 tensor cores") => continue,
            // bf16 (the precision or LoRA's adapters) on a GPU without it (T4, V100).
            Err(err) if err.to_string().contains("needs bf16, which") => continue,
            // Expert parallelism on a model without (enough) experts, refused once it is known.
            Err(err) if err.to_string().contains("`ep`") => continue,
            // Context parallelism on a sliding-window model or SDPA's math kernel.
            Err(err) if err.to_string().contains("choose cp 1") => continue,
            // A multimodal model's image tokens longer than seq are refused once the model is
            // known (`estimate::check_images`).
            Err(err) if err.to_string().contains("image tokens") => continue,
            r => r.unwrap_or_else(|err| panic!("{pairs:?}: {err}")),
        };
        let b = &e.bytes;
        assert!(
            b.peak_tensors <= b.peak_allocated
                && b.peak_allocated <= b.peak_reserved
                && b.peak_reserved <= b.peak_device,
            "levels out of order for {pairs:?}: {b:?}"
        );
        assert!(
            b.weights <= b.peak_tensors,
            "weights above the peak for {pairs:?}"
        );
        estimated += 1;
    }
    assert!(
        estimated >= 500,
        "only {estimated} valid scenarios: widen the generator"
    );
}

#[test]
fn named_scenarios_and_presets_analyze() {
    for n in headroom_core::codec::named_scenarios() {
        analyze(&n.scenario).unwrap_or_else(|e| panic!("{}: {e}", n.id));
    }
    for p in &PresetCatalog::builtin().presets {
        let scen = decode_pairs(Scenario::default(), &[("model".into(), p.id.clone())])
            .expect("a preset id is a valid model");
        analyze(&scen).unwrap_or_else(|e| panic!("{}: {e}", p.id));
    }
}

#[test]
fn every_named_scenario_file_parses() {
    // named_scenarios() skips files that fail; count the files to catch one that does.
    let files = headroom_core::catalog::embedded::SCENARIO_FILES;
    assert_eq!(headroom_core::codec::named_scenarios().len(), files.len());
    assert!(files.len() >= 5);
    for n in headroom_core::codec::named_scenarios() {
        // Every field of a named scenario survives the trip through a link.
        let link = headroom_core::codec::encode(&n.scenario);
        assert_eq!(
            headroom_core::codec::decode(&link).as_ref(),
            Ok(&n.scenario),
            "{}",
            n.id
        );
        assert!(
            KEYS.iter()
                .all(|k| field_value(&n.scenario, k).is_some() || matches!(*k, "v" | "cfg"))
        );
    }
}
