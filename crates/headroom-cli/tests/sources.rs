//! Where a scenario comes from: a named scenario or a file, then a link's fields on top, then
//! flags, through the built binary.

use std::process::Command;

/// The share link the CLI prints in its JSON for `args`.
fn link_of(args: &[&str]) -> String {
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
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    doc["link"].as_str().expect("a link").to_string()
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
