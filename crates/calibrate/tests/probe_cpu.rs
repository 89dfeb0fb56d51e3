//! The shipped probe script, run for real on CPU (all memory figures 0) where a python with torch
//! and transformers exists: catches Python errors without a GPU. Set CALIBRATE_TEST_PYTHON, or
//! keep the repository's `.venv` (scripts/setup.sh makes one).

use calibrate::grid::{ProbeLora, ProbeScenario};
use calibrate::probe::{PythonTrainer, Stack, Status, Trainer};
use serde_json::json;

fn python() -> Option<std::path::PathBuf> {
    if let Some(p) = std::env::var_os("CALIBRATE_TEST_PYTHON") {
        return Some(p.into());
    }
    let venv = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin/python");
    let ok = std::process::Command::new(&venv)
        .args(["-c", "import torch, transformers"])
        .output()
        .is_ok_and(|o| o.status.success());
    ok.then_some(venv)
}

/// A two-layer Llama config small enough to train on CPU in a moment.
fn tiny_llama() -> serde_json::Value {
    json!({"model_type": "llama", "vocab_size": 500, "hidden_size": 32,
        "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "max_position_embeddings": 64})
}

fn tiny(id: &str, config: serde_json::Value, precision: &str, optimizer: &str) -> ProbeScenario {
    ProbeScenario {
        id: id.into(),
        model: "tiny".into(),
        config,
        batch: 2,
        seq: 16,
        precision: precision.into(),
        optimizer: optimizer.into(),
        attention: "sdpa".into(),
        checkpointing: "none".into(),
        lora: None,
        expandable_segments: false,
    }
}

#[test]
fn the_probe_script_trains_on_cpu() {
    let Some(py) = python() else {
        eprintln!("no python with torch and transformers: probe script not exercised");
        return;
    };
    let llama = tiny_llama();
    let gpt2 = json!({"model_type": "gpt2", "vocab_size": 500, "n_embd": 32, "n_layer": 2,
        "n_head": 4, "n_positions": 64});
    let mut a = tiny("llama-amp-ckpt", llama.clone(), "amp-bf16", "adamw");
    a.checkpointing = "full".into();
    let mut b = tiny("gpt2-eager-fp16", gpt2, "amp-fp16", "sgd-momentum");
    b.attention = "eager".into();
    let c = tiny("llama-bf16-fused", llama.clone(), "bf16", "adamw-fused");
    let mut d = tiny("llama-lora", llama.clone(), "bf16", "adamw");
    d.lora = Some(ProbeLora {
        rank: 4,
        targets: "all".into(),
    });
    let mut e = tiny("llama-expandable", llama.clone(), "fp32", "sgd");
    e.expandable_segments = true;
    // A tiny model, so the failure comes from the optimizer, not from building a 7B default.
    let bad = tiny("bad-optimizer", llama, "fp32", "nope");
    let scenarios = vec![a, b, c, d, e, bad];

    let mut t = PythonTrainer::new(&py, "cpu").expect("temp files");
    // Without CUDA the stack check says why (and the real run would skip the PyTorch part).
    let why = t.stack().expect_err("no CUDA here");
    assert!(
        why.to_string().contains("CUDA") || why.to_string().contains("torch"),
        "{why}"
    );
    let stack = Stack::default(); // no peft: LoRA is skipped, as on a machine without it
    let mut ticks = 0;
    let out = t
        .run(&scenarios, &stack, &mut |_| ticks += 1)
        .expect("probe runs");
    assert_eq!(ticks, scenarios.len());
    let ids: Vec<&str> = out.rows.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(
        ids,
        scenarios.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(),
        "grid order"
    );
    for r in &out.rows[..3] {
        assert_eq!(r.status, Status::Ok, "{}: {:?}", r.id, r.error);
        assert_eq!(r.phases.len(), 6, "{}", r.id);
    }
    assert_eq!(out.rows[3].status, Status::Skipped);
    assert_eq!(out.rows[4].status, Status::Ok, "{:?}", out.rows[4].error);
    assert_eq!(out.rows[5].status, Status::Error);
    assert!(
        out.rows[5].error.as_deref().unwrap_or("").contains("nope"),
        "{:?}",
        out.rows[5].error
    );
}

#[test]
fn the_probe_scripts_measuring_path_runs_with_simulated_counters() {
    let Some(py) = python() else {
        eprintln!("no python with torch and transformers: probe script not exercised");
        return;
    };
    let llama = tiny_llama();
    let ok = tiny("llama-ok", llama.clone(), "amp-bf16", "adamw");
    let bad = tiny("llama-bad", llama, "fp32", "nope");
    let mut t = PythonTrainer::new(&py, "cpu")
        .expect("temp files")
        .simulating_stats();
    let out = t
        .run(&[ok, bad], &Stack::default(), &mut |_| {})
        .expect("probe runs");
    let r = &out.rows[0];
    assert_eq!(r.status, Status::Ok, "{:?}", r.error);
    assert_eq!(r.phases.len(), 6);
    assert!(r.allocated > 0 && r.reserved > 0 && r.device > 0, "{r:?}");
    assert!(r.allocated_before > 0);
    assert_eq!(r.device_method.as_deref(), Some("simulated"));
    // The peak is the largest per-phase maximum, and device adds what was freed after it.
    let max_alloc = r.phases.iter().map(|p| p.max_allocated).max();
    assert_eq!(Some(r.allocated), max_alloc);
    let dev = r
        .phases
        .iter()
        .map(|p| p.device + p.max_reserved - p.reserved)
        .max();
    assert_eq!(Some(r.device), dev);
    assert_eq!(out.rows[1].status, Status::Error);
    assert!(out.rows[1].phases.is_empty());
}
