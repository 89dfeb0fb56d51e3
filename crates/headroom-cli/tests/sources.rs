//! Where a scenario comes from: a named scenario or a file, then a link's fields on top, then
//! flags, through the built binary.

use std::process::Command;

/// The CLI's estimate JSON for `args`.
fn estimate_json(args: &[&str]) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_headroom"))
        .args(["estimate", "--format", "json"])
        .args(args)
        .output()
        .expect("running headroom");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON")
}

/// The share link the CLI prints in its JSON for `args`.
fn link_of(args: &[&str]) -> String {
    estimate_json(args)["link"]
        .as_str()
        .expect("a link")
        .to_string()
}

#[test]
fn a_link_applies_on_top_of_a_named_scenario_and_flags_on_top_of_both() {
    let named = link_of(&["--named", "qwen2.5-0.5b-a10g"]);
    assert!(named.contains("gpu=a10g-24gb"), "{named}");
    let both = link_of(&["--named", "qwen2.5-0.5b-a10g", "--link", "accum=4"]);
    assert_eq!(
        both,
        format!("{named}&accum=4"),
        "the named scenario is kept"
    );
    let flags = link_of(&[
        "--named",
        "qwen2.5-0.5b-a10g",
        "--link",
        "accum=4",
        "--accum",
        "2",
    ]);
    assert!(flags.ends_with("accum=2"), "{flags}");
    // Alone, a link is its own scenario on top of the defaults.
    assert_eq!(
        link_of(&["--link", "?v=1&model=gpt2&batch=2"]),
        "?v=1&model=gpt2&batch=2"
    );
}

#[test]
fn a_bad_link_field_is_named() {
    let out = Command::new(env!("CARGO_BIN_EXE_headroom"))
        .args([
            "estimate",
            "--named",
            "qwen2.5-0.5b-a10g",
            "--link",
            "batch=0",
        ])
        .output()
        .expect("running headroom");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--link") && err.contains("batch"), "{err}");
}

/// The path of a config from the import corpus (`crates/headroom-core/tests/import_configs`).
fn corpus(file: &str) -> String {
    format!(
        "{}/../headroom-core/tests/import_configs/{file}",
        env!("CARGO_MANIFEST_DIR")
    )
}

#[test]
fn an_imported_config_applies_before_a_link_and_flags() {
    // LLaMA-Factory's LoRA example: Llama 3 8B (as Llama 3.1 8B), rank 8 on every linear
    // layer, 2048 tokens, micro-batch 1, accumulation 8, bf16.
    let link = link_of(&["--import", &corpus("llamafactory/llama3_lora_sft.yaml")]);
    for part in ["seq=2048", "method=lora", "rank=8", "accum=8"] {
        assert!(link.contains(part), "{part} in {link}");
    }
    let over = link_of(&[
        "--import",
        &corpus("llamafactory/llama3_lora_sft.yaml"),
        "--rank",
        "64",
    ]);
    assert!(over.contains("rank=64"), "{over}");
    // The estimate's JSON carries what became of each key.
    let doc = estimate_json(&["--import", &corpus("axolotl/qlora-fsdp-70b.yaml")]);
    assert_eq!(doc["import"]["framework"], "axolotl");
    let notes = doc["import"]["notes"].as_array().expect("notes");
    assert!(
        notes
            .iter()
            .any(|n| n["key"] == "fsdp_config.fsdp_use_orig_params"
                && n["outcome"] == "not-expressed")
    );
}

#[test]
fn an_import_that_cannot_be_read_says_why() {
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_headroom"))
            .args(["estimate"])
            .args(args)
            .output()
            .expect("running headroom");
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    // Qwen3 32B is not a preset and the file names no local config.json.
    let e = run(&["--import", &corpus("axolotl/32b-qlora.yaml")]);
    assert!(e.contains("Qwen/Qwen3-32B") && e.contains("--model"), "{e}");
    let dir = std::env::temp_dir().join("headroom-import-test");
    std::fs::create_dir_all(&dir).expect("dir");
    let bad = dir.join("bad.yaml");
    std::fs::write(&bad, "base_model: x\nmicro_batch_size: [1, 2]\n").expect("write");
    let e = run(&["--import", bad.to_str().expect("utf-8")]);
    assert!(
        e.contains("`micro_batch_size`: expected a whole number"),
        "{e}"
    );
    // With --model the same file estimates.
    let ok = link_of(&[
        "--import",
        &corpus("axolotl/32b-qlora.yaml"),
        "--model",
        "qwen3-8b",
    ]);
    assert!(ok.contains("method=qlora"), "{ok}");
}
