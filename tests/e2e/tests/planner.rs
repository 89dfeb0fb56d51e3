//! End-to-end test of the planner panel in the release build: the plans, the ladder and the
//! exported configuration on the page equal the `headroom plan` CLI's for the same scenario.

use std::time::Duration;

use headroom_e2e::Site;
use headroom_e2e::webdriver::Session;
use headroom_e2e::{cli_json, cli_path};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(20);
const NAMED: &str = "ex3-llama-3.2-1b-4xa10g-zero2";

/// The CLI's raw output (an export is not JSON).
fn cli_text(args: &[&str]) -> String {
    let out = std::process::Command::new(cli_path())
        .args(args)
        .arg("--no-replay")
        .output()
        .unwrap_or_else(|e| panic!("running the CLI: {e}"));
    assert!(out.status.success(), "headroom {args:?} failed");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn text(s: &Session, css: &str) -> String {
    s.js(
        "const e = document.querySelector(arguments[0]); return e ? e.textContent : '';",
        json!([css]),
    )
    .as_str()
    .unwrap_or_default()
    .to_string()
}

#[test]
fn planner_panel_matches_the_cli() {
    let site = Site::start();
    let s = site.open(&format!("/s/{NAMED}"));
    // Nothing is computed until asked.
    assert_eq!(
        s.js(
            "return document.getElementById('planner-plans') === null",
            json!([])
        ),
        json!(true)
    );
    s.click(&s.find("#planner-open"));
    s.wait_for(
        "return document.querySelectorAll('#planner-plans tr[data-plan]').length",
        WAIT,
        "the ranked plans",
    );
    let cli = cli_json(&["plan", "--named", NAMED]);
    let plans = cli["planning"]["plans"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let rows = s.js(
        "return [...document.querySelectorAll('#planner-plans tr[data-plan]')].map(r => [r.cells[1].textContent, r.querySelector('a').getAttribute('href')])",
        json!([]),
    );
    let rows = rows.as_array().cloned().unwrap_or_default();
    assert_eq!(rows.len(), plans.len(), "plans on the page vs the CLI's");
    for (row, plan) in rows.iter().zip(&plans) {
        let tps = plan["tokens_per_second"].as_f64().unwrap_or(0.0).round() as u64;
        assert_eq!(
            row[0].as_str().map(|t| t.replace(',', "")),
            Some(tps.to_string())
        );
        let link = plan["link"].as_str().unwrap_or_default();
        assert!(
            row[1]
                .as_str()
                .is_some_and(|h| h.ends_with(&format!("/?{link}"))),
            "{row:?} vs {link}"
        );
    }
    // The ladder: as many steps as the CLI's, the last one fits.
    let ladder = cli["planning"]["ladder"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let fits = s.js(
        "return [...document.querySelectorAll('#planner-ladder li')].map(l => l.dataset.fits)",
        json!([]),
    );
    let fits = fits.as_array().cloned().unwrap_or_default();
    assert_eq!(fits.len(), ladder.len());
    assert_eq!(fits.last(), Some(&json!("true")));
    // Each plan's files as the CLI exports them (written by the on-demand worker, fetched on
    // the first request): a plan that keeps DeepSpeed as its ds_config.json, a selective
    // recompute plan offers only env.sh (no transformers target can express it, issue 16 §1),
    // and the fastest plan's torchrun command. The plans are found by what they change, not by
    // their rank, which follows the models.
    let link_of = |i: usize| plans[i]["link"].as_str().unwrap_or_default().to_string();
    let find = |want: &dyn Fn(&str) -> bool| (0..plans.len()).find(|&i| want(&link_of(i)));
    let pick =
        |i: usize| s.click(&s.find(&format!("#planner-plans tr[data-plan='{i}'] button.pick")));
    let shows = |target: &str, i: usize, parse: &dyn Fn(&str) -> String| {
        let want = parse(&cli_text(&[
            "plan",
            "--named",
            NAMED,
            "--export",
            target,
            "--pick",
            &(i + 1).to_string(),
        ]));
        let button = format!("button[data-target='{target}']");
        s.wait_for(
            &format!("return !!document.querySelector(\"{button}\")"),
            WAIT,
            "the plan's targets, from the worker",
        );
        s.click(&s.find(&button));
        let deadline = std::time::Instant::now() + WAIT;
        loop {
            if parse(&text(&s, "#planner-export")) == want {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "plan {}'s {target}: page shows {:?}, the CLI {want:?}",
                i + 1,
                text(&s, "#planner-export")
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let as_json = |t: &str| {
        serde_json::from_str::<serde_json::Value>(t)
            .map(|v| v.to_string())
            .unwrap_or_default()
    };
    // Each plan says which stacks run it, as the CLI's JSON lists them.
    let runs_on = s.js(
        "return [...document.querySelectorAll('#planner-plans tr[data-plan]')].map(r => r.cells[7].textContent)",
        json!([]),
    );
    for (shown, plan) in runs_on.as_array().into_iter().flatten().zip(&plans) {
        let ids: Vec<&str> = plan["runs_on"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str())
            .collect();
        assert!(
            !ids.is_empty(),
            "the default stack lists plans a stack runs"
        );
        assert_eq!(shown.as_str(), Some(ids.join(", ").as_str()));
    }
    let ds = find(&|l| l.contains("dp=zero")).expect("a plan that keeps DeepSpeed");
    pick(ds);
    shows("deepspeed", ds, &as_json);
    let plain = find(&|l| !l.contains("ckpt=selective")).expect("a plan torchrun runs");
    pick(plain);
    shows("torchrun", plain, &|t: &str| t.to_string());

    // Every plan, also those only env.sh carries (issue 34 §2): the CLI's --stack any.
    s.js(
        "const e = document.getElementById('planner-stack'); e.value = 'any'; e.dispatchEvent(new Event('change', {bubbles: true}));",
        json!([]),
    );
    let cli = cli_json(&["plan", "--named", NAMED, "--stack", "any"]);
    let plans = cli["planning"]["plans"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let links: Vec<String> = plans
        .iter()
        .map(|p| format!("/?{}", p["link"].as_str().unwrap_or_default()))
        .collect();
    s.wait_for(
        &format!(
            "const h = [...document.querySelectorAll('#planner-plans tr[data-plan] a')].map(a => a.getAttribute('href')); const want = {}; return h.length === want.length && h.every((x, i) => x.endsWith(want[i]))",
            json!(links)
        ),
        WAIT,
        "every plan, as the CLI's --stack any lists them",
    );
    let link_of = |i: usize| plans[i]["link"].as_str().unwrap_or_default().to_string();
    let find = |want: &dyn Fn(&str) -> bool| (0..plans.len()).find(|&i| want(&link_of(i)));
    let selective = find(&|l| l.contains("ckpt=selective")).expect("a selective recompute plan");
    pick(selective);
    let deadline = std::time::Instant::now() + WAIT;
    while s.js(
        "return [...document.querySelectorAll('button[data-target]')].map(b => b.dataset.target)",
        json!([]),
    ) != json!(["env"])
    {
        assert!(
            std::time::Instant::now() < deadline,
            "plan {} offers only env.sh",
            selective + 1
        );
        std::thread::sleep(Duration::from_millis(25));
    }
    assert!(text(&s, "#planner-not-offered").contains("selective recompute"));
    s.js(
        "const e = document.getElementById('planner-stack'); e.value = 'runs'; e.dispatchEvent(new Event('change', {bubbles: true}));",
        json!([]),
    );

    // The CLI's planning inputs on the page (issue 16 §2): a target global batch and tokens
    // to train give the CLI's plans, with their time to train.
    for (id, value) in [("#planner-batch", "64"), ("#planner-tokens", "1e9")] {
        let input = s.find(id);
        s.type_text(&input, value);
    }
    let cli = cli_json(&[
        "plan",
        "--named",
        NAMED,
        "--global-batch",
        "64",
        "--tokens",
        "1e9",
    ]);
    let best = cli["planning"]["plans"][0]["tokens_per_second"]
        .as_f64()
        .expect("a plan")
        .round() as u64;
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let row = s.js(
            "const r = document.querySelector('#planner-plans tr[data-plan=\\'0\\']'); return r ? [r.cells[1].textContent, r.cells[5].textContent] : null",
            json!([]),
        );
        let tps = row[0].as_str().map(|t| t.replace(',', ""));
        if tps == Some(best.to_string()) {
            assert!(
                row[1].as_str().is_some_and(|t| t.contains("GPU-h")),
                "{row}"
            );
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "plan 1 at global batch 64: {row} vs {best}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(text(&s, "#planner-summary").contains("global batch 64"));
}

/// A framework config pasted into "Import your training config" becomes the scenario (read in
/// the on-demand worker), as `headroom estimate --import` reads it, with every key's fate
/// listed; a config that cannot be read says why and leaves the scenario alone.
#[test]
fn an_imported_config_becomes_the_scenario() {
    let corpus = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../crates/headroom-core/tests/import_configs/llamafactory/llama3_lora_sft.yaml");
    let yaml = std::fs::read_to_string(&corpus).expect("the corpus file");
    let site = Site::start();
    let s = site.open("/");
    // A config names no GPU: the import keeps the page's.
    let gpu = s.js("return document.querySelector('#f-gpu').value", json!([]));
    let gpu = gpu.as_str().expect("the GPU field").to_string();
    let cli = cli_json(&[
        "estimate",
        "--import",
        corpus.to_str().expect("utf-8"),
        "--gpu",
        &gpu,
    ]);
    let want = cli["link"]
        .as_str()
        .expect("the CLI's link")
        .trim_start_matches('?')
        .to_string();
    s.click(&s.find("#f-group-import summary"));
    s.js(
        "const t = document.querySelector('#f-import-text'); t.value = arguments[0];",
        json!([yaml]),
    );
    s.click(&s.find("#f-import-read"));
    s.wait_for(
        "return location.search.includes('rank=8') && location.search.includes('accum=8')",
        WAIT,
        "the imported scenario in the link",
    );
    let search = s.js("return location.search.slice(1)", json!([]));
    assert_eq!(
        search.as_str(),
        Some(want.as_str()),
        "the page's link vs the CLI's"
    );
    // The first visit's heading described its own scenario: it is gone (issue 34).
    assert_eq!(
        s.js(
            "return document.querySelector('.named h1') === null",
            json!([])
        ),
        json!(true)
    );
    let report = text(&s, "#f-import-report");
    assert!(
        report.contains("lora_target = all: targets=all"),
        "{report}"
    );
    assert!(
        report.contains("Llama 3 8B is estimated as Llama 3.1 8B"),
        "{report}"
    );
    // Unreadable: named, and the scenario stays.
    s.js(
        "const t = document.querySelector('#f-import-text'); t.value = 'base_model: x\\nmicro_batch_size: many';",
        json!([]),
    );
    s.click(&s.find("#f-import-read"));
    s.wait_for(
        "const e = document.querySelector('#f-import-status'); return e && e.textContent.includes('micro_batch_size')",
        WAIT,
        "the refusal naming the key",
    );
    let after = s.js("return location.search.slice(1)", json!([]));
    assert_eq!(after.as_str(), Some(want.as_str()));
}

/// "What one layer saves for backward": the rows' labels are not in the page's download
/// (headroom-core's `inventory-text`); opening the table asks the on-demand worker for them,
/// and they are the CLI's, row by row, for the page's link.
#[test]
fn the_layer_inventory_labels_come_from_the_worker() {
    let site = Site::start();
    let link = "?model=llama-3.1-8b&gpu=h100-sxm-80gb&method=lora&precision=bf16&seq=2048";
    let s = site.open(&format!("/{link}"));
    s.click(&s.find("details.inventory summary"));
    s.wait_for(
        "const th = document.querySelector('details.inventory tbody th'); \
         return th !== null && th.textContent !== '…'",
        WAIT,
        "the labels from the worker",
    );
    let page = s.js(
        "return Array.from(document.querySelectorAll('details.inventory tbody th')).map(t => t.textContent)",
        json!([]),
    );
    let cli = cli_json(&["estimate", "--link", link]);
    let want: Vec<&str> = cli["layer_inventory"]
        .as_array()
        .expect("the CLI's inventory")
        .iter()
        .map(|r| r["what"].as_str().expect("a label"))
        .collect();
    let got: Vec<&str> = page
        .as_array()
        .expect("the page's rows")
        .iter()
        .map(|v| v.as_str().expect("text"))
        .collect();
    assert!(!want.is_empty());
    assert_eq!(got, want);
}
