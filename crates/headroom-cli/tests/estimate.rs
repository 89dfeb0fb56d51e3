//! `headroom estimate` through the built binary: a GPU's missing dtypes refused by name, and
//! `--model` given a Hub id as the page's import takes it.

use std::process::{Command, Output};

fn headroom(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_headroom"))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running headroom: {e}"))
}

/// The run fails (exit code 2) and its message, on stderr, contains each of `says`.
#[track_caller]
fn refused(args: &[&str], says: &[&str]) {
    let out = headroom(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert!(out.stdout.is_empty(), "{args:?} printed an estimate");
    for s in says {
        assert!(err.contains(s), "{args:?}: `{s}` not in: {err}");
    }
}

/// The run succeeds; its stdout.
#[track_caller]
fn stdout(args: &[&str]) -> String {
    let out = headroom(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stderr.is_empty(),
        "{args:?}: said more than the estimate"
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_t4_refuses_bf16_by_name() {
    // The default precision is amp-bf16: the T4 (sm75) has no bf16.
    refused(
        &[
            "estimate",
            "--model",
            "llama-3.1-8b",
            "--gpu",
            "t4-16gb",
            "--method",
            "qlora",
        ],
        &[
            "`precision`: amp-bf16 needs bf16, which t4-16gb (compute capability 7.5) lacks",
            "allowed on this GPU: fp32, fp16, amp-fp16",
        ],
    );
    refused(
        &["plan", "--gpu", "v100-sxm2-32gb", "--precision", "bf16"],
        &["`precision`: bf16 needs bf16", "v100-sxm2-32gb"],
    );
    // In fp16, as the T4 computes, the same run estimates.
    let t = stdout(&[
        "estimate",
        "--model",
        "llama-3.1-8b",
        "--gpu",
        "t4-16gb",
        "--method",
        "qlora",
        "--precision",
        "amp-fp16",
    ]);
    assert!(t.contains("fp16 autocast"), "{t}");
}

#[test]
fn a_hub_id_names_its_preset() {
    let json = |model: &str| {
        let text = stdout(&[
            "estimate",
            "--model",
            model,
            "--gpu",
            "rtx-4090-24gb",
            "--method",
            "lora",
            "--format",
            "json",
        ]);
        let v: serde_json::Value =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON: {e}"));
        v
    };
    let hub = json("Qwen/Qwen2.5-7B");
    let preset = json("qwen2.5-7b");
    assert_eq!(hub, preset);
    // An instruct model's id names its base model's preset, as on the page.
    assert_eq!(json("Qwen/Qwen2.5-7B-Instruct"), preset);
}

#[test]
fn a_hub_id_that_is_no_preset_says_how_to_give_its_config() {
    refused(
        &[
            "estimate",
            "--model",
            "someone/unknown-model",
            "--gpu",
            "l4",
        ],
        &[
            "--model: `someone/unknown-model` is not a preset",
            "--model path/to/config.json",
        ],
    );
    let out = headroom(&["estimate", "--model", "someone/unknown-model"]);
    assert!(!String::from_utf8_lossy(&out.stderr).contains("link field"));
}

/// A setup that does not fit ends with what to do next, as the page's verdict offers it: full
/// fine-tuning of Llama 3.1 8B under amp-bf16 needs 16 bytes a parameter of model states (128 GB)
/// on one 80 GB H100. Keeping the training, only offloading the optimizer's states fits (at
/// CPU-Adam speed); pure bf16, which changes the training, fits faster: both are offered, each
/// with a link that the estimate then calls a fit. A setup that fits has no such lines.
#[test]
fn a_setup_that_does_not_fit_gets_both_next_steps() {
    let args = [
        "estimate",
        "--model",
        "llama-3.1-8b",
        "--gpu",
        "h100-sxm",
        "--method",
        "full",
    ];
    let text = stdout(&args);
    let same = text
        .lines()
        .find(|l| l.starts_with("next, training the same thing: "))
        .unwrap_or_else(|| panic!("no next step in:\n{text}"));
    let faster = text
        .lines()
        .find(|l| l.starts_with("faster: "))
        .unwrap_or_else(|| panic!("no faster step in:\n{text}"));
    assert!(same.contains("CPU optimizer offload"), "{same}");
    assert!(faster.contains("changes what is trained"), "{faster}");
    for line in [same, faster] {
        let link = line.rsplit_once("; ?").expect("a link").1;
        let after = stdout(&["estimate", "--link", link]);
        assert!(after.contains("\nFITS on "), "{link}:\n{after}");
    }
    let mut json = args.to_vec();
    json.extend(["--format", "json"]);
    let doc: serde_json::Value = serde_json::from_str(&stdout(&json)).expect("json");
    let (s, f) = (&doc["next"]["same_training"], &doc["next"]["fastest"]);
    assert_eq!(s["changes_training"], false);
    assert_eq!(f["changes_training"], true);
    assert!(f["tokens_per_second"].as_f64() > s["tokens_per_second"].as_f64());

    let fits = stdout(&["estimate", "--model", "llama-3.2-1b", "--gpu", "h100-sxm"]);
    assert!(
        fits.contains("\nFITS on ") && !fits.contains("\nnext"),
        "{fits}"
    );
}
