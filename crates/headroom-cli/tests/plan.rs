//! `headroom plan`: the table, the JSON document, the exports and the flag errors, through the
//! built binary.

use std::process::{Command, Output};

fn headroom(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_headroom"))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running headroom: {e}"))
}

fn stdout(args: &[&str]) -> String {
    let out = headroom(args);
    assert!(
        out.status.success(),
        "headroom {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn json_has_plans_that_fit_and_a_ladder_that_ends_fitting() {
    let text = stdout(&[
        "plan",
        "--named",
        "ex3-llama-3.2-1b-4xa10g-zero2",
        "--tokens",
        "10B",
        "--price-per-gpu-hour",
        "1.5",
        "--format",
        "json",
    ]);
    let v: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON: {e}"));
    assert_eq!(v["schema"], "headroom.plan.v1");
    let p = &v["planning"];
    assert_eq!(p["global_batch"], 512);
    let best = &p["plans"][0];
    assert_eq!(best["fits"], true);
    let cost = &best["cost"];
    assert_eq!(cost["tokens"], 1e10);
    // money = price x GPU-hours, as the flags asked.
    let (hours, money) = (
        cost["gpu_hours"].as_f64().unwrap_or(0.0),
        cost["money"].as_f64().unwrap_or(0.0),
    );
    assert!(hours > 0.0 && (money - 1.5 * hours).abs() < 1e-6 * money);
    let ladder = p["ladder"].as_array().cloned().unwrap_or_default();
    assert!(ladder.len() >= 2);
    assert_eq!(ladder[0]["fits"], false);
    assert_eq!(ladder[ladder.len() - 1]["fits"], true);
}

#[test]
fn table_lists_plans_and_ladder() {
    let t = stdout(&["plan", "--named", "ex0-366m-t4-fp32-baseline"]);
    assert!(t.contains("Plans that fit and train the same thing"));
    assert!(t.contains("Ladder from the scenario as given"));
    assert!(t.contains("plan 1: ?v=1&"));
}

#[test]
fn exports_print_each_target() {
    // ZeRO-2 kept: its fastest plan is DeepSpeed's.
    let ds = stdout(&[
        "plan",
        "--named",
        "ex3-llama-3.2-1b-4xa10g-zero2",
        "--keep",
        "dp",
        "--export",
        "deepspeed",
    ]);
    let v: serde_json::Value = serde_json::from_str(&ds).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(v["train_batch_size"], 512);
    let run = stdout(&[
        "plan",
        "--named",
        "ex3-llama-3.2-1b-4xa10g-zero2",
        "--export",
        "torchrun",
    ]);
    // It runs the plan's own Trainer script unless told another.
    assert!(run.contains("torchrun --nproc_per_node=4 --nnodes=1 \"${SCRIPT:-training_args.py}\""));
    let env = stdout(&[
        "plan",
        "--named",
        "ex1-512m-4x44gb-ladder",
        "--export",
        "env",
    ]);
    assert!(env.contains("export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"));
    for target in ["trainer", "accelerate"] {
        assert!(!stdout(&["plan", "--export", target]).trim().is_empty());
    }
    // The default scenario's best plan is DeepSpeed ZeRO-2: the FSDP2 script would run another
    // plan, so it is refused, naming the targets that can (issue 16 §1), when the plans are
    // any stack's ...
    let out = headroom(&["plan", "--stack", "runs", "--export", "fsdp2"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot be written as train_fsdp2.py") && err.contains("deepspeed, trainer"),
        "{err}"
    );
    // ... while an export without --stack ranks the plans its stack runs (issue 34 §2).
    let own = stdout(&["plan", "--export", "fsdp2"]);
    assert!(
        own.contains("fully_shard") || own.contains("DistributedDataParallel"),
        "{own}"
    );
    // With FSDP2 kept, it is offered and asserts the plan's batch.
    let f = stdout(&[
        "plan",
        "--model",
        "llama-3.1-8b",
        "--gpu",
        "h100-sxm-80gb",
        "--gpus",
        "8",
        "--dp",
        "fsdp",
        "--keep",
        "dp,offload,tp",
        "--export",
        "fsdp2",
    ]);
    assert!(f.contains("assert MICRO_BATCH * ACCUMULATION * data_parallel == GLOBAL_BATCH"));
}

#[test]
fn bad_flags_exit_2_naming_the_flag() {
    for (args, field) in [
        (vec!["plan", "--global-batch", "0"], "`global_batch`"),
        (vec!["plan", "--global-batch", "x"], "`global_batch`"),
        (vec!["plan", "--target-seq", "0"], "`seq`"),
        (vec!["plan", "--tokens", "many"], "`tokens`"),
        (
            vec!["plan", "--tokens", "1e9", "--price-per-gpu-hour", "-1"],
            "`price_per_gpu_hour`",
        ),
        (
            vec!["plan", "--price-per-gpu-hour", "2"],
            "`price_per_gpu_hour`",
        ),
        (vec!["plan", "--export", "megatron"], "`export`"),
        (vec!["plan", "--keep", "tp,everything"], "`keep`"),
        (vec!["plan", "--export", "env", "--pick", "999"], "`pick`"),
        (
            vec!["plan", "--gpus", "4", "--global-batch", "6"],
            "`global_batch`",
        ),
    ] {
        let out = headroom(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(field), "{args:?}: {err}");
    }
}

/// Each plan says whether the time model can tell it from the first (their bands overlap: the
/// slower one's tokens/s times high/low of `time::ASSUMED_BAND` reaches the first's; an A10G has
/// no calibration), and the table names those plans.
#[test]
fn plans_within_the_time_models_spread_of_the_first_are_marked() {
    let args = ["plan", "--named", "ex3-llama-3.2-1b-4xa10g-zero2"];
    let v: serde_json::Value =
        serde_json::from_str(&stdout(&[&args[..], &["--format", "json"]].concat())).expect("JSON");
    let (low, high) = headroom_core::time::ASSUMED_BAND;
    assert_eq!(v["band"], serde_json::json!([low, high]));
    let plans = v["planning"]["plans"].as_array().expect("plans");
    let first = plans[0]["tokens_per_second"].as_f64().expect("tokens/s");
    assert_eq!(plans[0]["within_spread_of_first"], true);
    let mut close = 0;
    for p in plans {
        let tps = p["tokens_per_second"].as_f64().expect("tokens/s");
        let within = p["within_spread_of_first"].as_bool().expect("bool");
        assert_eq!(within, tps * high / low >= first, "{p}");
        close += usize::from(within);
    }
    let table = stdout(&args);
    if close > 1 {
        assert!(table.contains(&format!("Plans 1-{close}: within the time model's spread")));
    }
}
