//! End-to-end tests of the release build in headless Chromium: short links, inputs and the
//! URL, malformed and hostile links, the embed layout and its resize message, phone width.
//! The numbers on the page are compared with the `headroom` CLI's for the same scenario.

use std::time::Duration;

use headroom_e2e::Site;
use headroom_e2e::server::StaticServer;
use headroom_e2e::webdriver::{Driver, Session};
use headroom_e2e::{cli_json, dist_sub_dir, repo_root};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(20);

use headroom_e2e::site_server as server;

#[track_caller]
/// The speed line beside the verdict shows the CLI's tokens per second for the same scenario.
fn assert_speed_matches(s: &Session, cli: &serde_json::Value, context: &str) {
    let tps = cli["speed"]["tokens_per_second"]
        .as_f64()
        .expect("a speed")
        .round() as u64;
    let grouped = headroom_core::format::grouped(tps);
    let speed = s.js(
        "return document.getElementById('speed').textContent",
        json!([]),
    );
    assert!(
        speed
            .as_str()
            .is_some_and(|t| t.contains(&format!("{grouped} tok/s"))),
        "{context}: {speed} vs {tps}"
    );
    // And the band measured steps fell in (issue 33 §2), the CLI's too.
    let band = &cli["speed"]["band"]["tokens_per_second"];
    let [low, high] = [0, 1]
        .map(|i| headroom_core::format::grouped(band[i].as_f64().expect("a band").round() as u64));
    assert!(
        speed
            .as_str()
            .is_some_and(|t| t.contains(&format!("tok/s ({low} to {high} in eight"))),
        "{context}: {speed} vs band {low} to {high}"
    );
}

/// The page's headline numbers equal the CLI's JSON for the same scenario.
fn assert_numbers_match(s: &Session, cli: &serde_json::Value) {
    for (id, key) in [
        ("peak-device", "peak_device"),
        ("peak-reserved", "peak_reserved"),
        ("peak-allocated", "peak_allocated"),
        ("peak-tensors", "peak_tensors"),
        ("weights", "weights"),
        ("gradients", "gradients"),
        ("optimizer-states", "optimizer_states"),
        ("activations-per-layer", "activations_per_layer"),
        ("retained", "retained_after_forward"),
    ] {
        assert_eq!(
            s.bytes_of(id),
            cli["bytes"][key].as_u64().expect("a byte count"),
            "{id} on the page vs bytes.{key} from the CLI"
        );
    }
    // The breakdown's "At the peak" column is what is live at the tensor peak: it sums to the
    // page's peak of live tensors, which its totals row repeats.
    let column = s.js(
        "return [...document.querySelectorAll('#breakdown-table tbody td.at-peak [data-bytes]')]\
         .map(e => e.getAttribute('data-bytes'))",
        json!([]),
    );
    let column: u64 = column
        .as_array()
        .expect("a list")
        .iter()
        .map(|v| {
            v.as_str()
                .and_then(|b| b.parse::<u64>().ok())
                .expect("a byte count")
        })
        .sum();
    assert_eq!(column, s.bytes_of("peak-tensors"), "the At the peak column");
    assert_eq!(s.bytes_of("breakdown-peak"), s.bytes_of("peak-tensors"));
    let params = s.js(
        "return document.getElementById('params-total').getAttribute('data-count')",
        json!([]),
    );
    assert_eq!(
        params.as_str(),
        Some(cli["parameters"]["total"].to_string().as_str())
    );
    let max_batch = s.js(
        "return document.getElementById('max-batch').textContent",
        json!([]),
    );
    match cli["fit"]["max_micro_batch"].as_u64() {
        Some(b) => assert_eq!(max_batch.as_str(), Some(b.to_string().as_str())),
        None => assert!(max_batch.as_str().unwrap_or("").starts_with("none")),
    }
}

/// Waits for the model picker's message and returns it.
fn model_message(s: &Session, what: &str) -> serde_json::Value {
    s.wait_for(
        "const e = document.getElementById('model-message'); return e && e.textContent",
        WAIT,
        what,
    )
}

#[test]
fn a_named_short_link_shows_the_clis_numbers() {
    let site = Site::start();
    let s = site.desktop();
    for id in [
        "llama-3.1-8b-lora-4090",
        "mistral-7b-qlora-t4",
        "qwen2.5-0.5b-a10g",
    ] {
        s.goto(&site.url(&format!("/s/{id}")));
        s.wait_ready();
        assert_numbers_match(&s, &cli_json(&["estimate", "--named", id]));
        let title = s.js(
            "return document.querySelector('.named h1').textContent",
            json!([]),
        );
        assert!(
            title.as_str().is_some_and(|t| !t.is_empty()),
            "{id}: no title"
        );
        assert!(
            s.url().ends_with(&format!("/s/{id}")),
            "the short link stays until a change"
        );
    }
}

#[test]
fn a_first_visit_opens_on_a_question_it_answers_with_starting_points_and_a_next_step() {
    let site = Site::start();
    let s = site.open("/");
    // The empty link opens on LoRA of an 8B model on one 24 GB card, which fits.
    assert_numbers_match(
        &s,
        &cli_json(&["estimate", "--named", "llama-3.1-8b-lora-4090"]),
    );
    let first = s.js(
        "return [document.querySelector('#verdict h2').textContent, document.querySelectorAll('nav.starts a').length, document.getElementById('next-step').textContent]",
        json!([]),
    );
    assert!(
        first[0]
            .as_str()
            .is_some_and(|h| h.starts_with("Llama 3.1 8B") && h.contains("fits on 1 x")),
        "{first}"
    );
    assert_eq!(first[1], json!(4), "four starting points");
    // The speed of the setup, beside the verdict, is the CLI's (issue 16 §3).
    let cli = cli_json(&["estimate", "--named", "llama-3.1-8b-lora-4090"]);
    assert_speed_matches(&s, &cli, "the first visit");
    assert!(
        first[2].as_str().is_some_and(|t| t.starts_with("Next:")),
        "{first}"
    );
    // Each starting point is a named scenario that analyzes.
    let hrefs = s.js(
        "return [...document.querySelectorAll('nav.starts a')].map(a => a.getAttribute('href'))",
        json!([]),
    );
    for h in hrefs.as_array().expect("a list") {
        let id = h
            .as_str()
            .and_then(|h| h.rsplit('/').next())
            .expect("an id");
        assert!(
            !cli_json(&["estimate", "--named", id])["bytes"].is_null(),
            "{id}"
        );
    }
    // A setup that does not fit shows the change that makes it fit, applied in one click: the
    // fastest that trains the same thing and, beside it, the faster one that changes the
    // training, as the CLI prints them (the worker computes the strategy table they come from).
    s.goto(&site.url("/?v=1"));
    s.wait_ready();
    s.wait_for(
        "return !!document.getElementById('apply-next') || document.getElementById('next-step').textContent.startsWith('No single')",
        WAIT,
        "the next steps",
    );
    let cli = cli_json(&["estimate", "--link", "?v=1"]);
    let hrefs = s.js(
        "return ['apply-next', 'apply-fastest'].map(id => { const a = document.getElementById(id); return a && a.getAttribute('href'); })",
        json!([]),
    );
    for (i, key) in ["same_training", "fastest"].into_iter().enumerate() {
        let want = cli["next"][key]["link"]
            .as_str()
            .expect("the CLI's next step");
        assert!(
            hrefs[i]
                .as_str()
                .is_some_and(|h| h.ends_with(&format!("?{want}"))),
            "{key}: {hrefs} against {want}"
        );
    }
    let next = s.js(
        "const a = document.getElementById('apply-next'); return [document.getElementById('next-step').textContent, a && a.getAttribute('href')]",
        json!([]),
    );
    assert!(
        next[0]
            .as_str()
            .is_some_and(|t| t.starts_with("Next") || t.starts_with("No single change")),
        "{next}"
    );
    if let Some(href) = next[1].as_str() {
        s.click(&s.find("#apply-next"));
        s.wait_for(
            "return document.getElementById('verdict').getAttribute('data-fits') === 'true'",
            WAIT,
            "the applied change fits",
        );
        assert!(
            s.url().ends_with(href.trim_start_matches('/'))
                || s.url().contains(href.split('?').nth(1).unwrap_or("")),
            "{href}"
        );
    }
}

#[test]
fn changing_inputs_updates_the_link_and_the_numbers() {
    let site = Site::start();
    // `v=1` alone is the default scenario (an empty link opens on a first-visit question).
    let s = site.open("/?v=1");
    assert_numbers_match(&s, &cli_json(&["estimate"]));
    let history_before = s.js("return history.length", json!([]));

    let batch = s.find("#f-batch");
    s.clear(&batch);
    s.type_text(&batch, "3");
    s.wait_for(
        "return location.search.includes('batch=3')",
        WAIT,
        "batch=3 in the URL",
    );
    assert_numbers_match(&s, &cli_json(&["estimate", "--batch", "3"]));

    // A select: checkpointing, then the GPU.
    s.select("f-ckpt", "full");
    s.wait_for(
        "return location.search.includes('ckpt=full')",
        WAIT,
        "ckpt=full",
    );
    s.select("f-gpu", "a100-sxm4-80gb");
    s.wait_for(
        "return location.search.includes('gpu=a100-sxm4-80gb')",
        WAIT,
        "gpu in URL",
    );
    assert_numbers_match(
        &s,
        &cli_json(&[
            "estimate",
            "--batch",
            "3",
            "--checkpointing",
            "full",
            "--gpu",
            "a100-sxm4-80gb",
        ]),
    );
    // Replace, not push: typing must not fill the history.
    let length = s.js("return history.length", json!([]));
    assert_eq!(length, history_before, "the URL is replaced, not pushed");

    // An invalid value keeps the last good scenario and says what is wrong next to the field.
    s.clear(&batch);
    s.type_text(&batch, "0");
    let msg = s.wait_for(
        "const e = document.getElementById('f-batch-error'); return e && e.textContent",
        WAIT,
        "an error under the batch field",
    );
    assert!(msg.as_str().is_some_and(|m| m.contains("batch")), "{msg}");
    assert!(
        s.url().contains("batch=3"),
        "the last valid scenario stays in the link"
    );

    // The link reproduces the scenario in a fresh window.
    let link = s.url();
    let other = site.desktop();
    other.goto(&link);
    other.wait_ready();
    assert_numbers_match(
        &other,
        &cli_json(&[
            "estimate",
            "--batch",
            "3",
            "--checkpointing",
            "full",
            "--gpu",
            "a100-sxm4-80gb",
        ]),
    );
}

#[test]
fn a_malformed_link_names_the_field_and_shows_defaults_for_the_rest() {
    let site = Site::start();
    let s = site.open("/?v=1&batch=lots&precision=fp64&seq=1024&bogus=1&dp=zero3&tp=3");
    let notice = s
        .js(
            "return document.getElementById('link-errors').textContent",
            json!([]),
        )
        .as_str()
        .unwrap_or_default()
        .to_string();
    for field in ["`batch`", "`precision`", "`bogus`", "`gpus`"] {
        assert!(notice.contains(field), "{field} not named in: {notice}");
    }
    let seq = s.js("return document.getElementById('f-seq').value", json!([]));
    assert_eq!(seq, json!("1024"));
    assert_numbers_match(
        &s,
        &cli_json(&["estimate", "--seq", "1024", "--dp", "zero3"]),
    );

    // An unknown named scenario and an unknown page also answer with a message.
    s.goto(&site.url("/s/no-such-scenario"));
    s.wait_ready();
    let notice = s.js(
        "return document.getElementById('link-errors').textContent",
        json!([]),
    );
    assert!(
        notice
            .as_str()
            .is_some_and(|t| t.contains("no-such-scenario"))
    );
    s.goto(&site.url("/no/such/page"));
    s.wait_for(
        "return document.querySelector('main h1')",
        WAIT,
        "the not-found page",
    );
}

#[test]
fn hostile_links_inject_nothing() {
    let site = Site::start();
    let s = site.desktop();
    let payloads = [
        "%3Cimg%20src%3Dx%20onerror%3D%22window.__pwned%3D1%22%3E",
        "%3Cscript%3Ewindow.__pwned%3D1%3C%2Fscript%3E",
        "%22%3E%3Csvg%20onload%3Dwindow.__pwned%3D1%3E",
        "javascript%3Awindow.__pwned%3D1",
    ];
    let keys = headroom_core_keys();
    for p in payloads {
        // Every field at once, the payload as a key, and in an embed's view.
        let mut q: Vec<String> = keys.iter().map(|k| format!("{k}={p}")).collect();
        q.push(format!("{p}=1"));
        q.push(format!("b.batch={p}"));
        for path in ["/", "/compare", "/embed"] {
            let url = site.url(&format!("{path}?{}&view={p}", q.join("&")));
            s.goto(&url);
            s.wait_ready();
            let verdict = s.js(
                "return window.__pwned === undefined && !document.querySelector('img[src=x], svg[onload], script:not([src]):not([type])')",
                json!([]),
            );
            assert_eq!(verdict, json!(true), "{path} with {p}: markup got through");
            let notice = s.js("return !!document.getElementById('link-errors')", json!([]));
            assert_eq!(notice, json!(true), "{path} with {p}: no message");
        }
        s.goto(&site.url(&format!("/s/{p}")));
        s.wait_ready();
        assert_eq!(
            s.js("return window.__pwned === undefined", json!([])),
            json!(true)
        );
    }
}

#[test]
fn absurd_links_are_answered_quickly_and_the_page_stays_usable() {
    // Each is refused by a bound (bounds.rs) with the field's name: a config whose parser
    // would loop ten million times, dimensions near 2^64 that overflowed u64, a step past the
    // 1 EiB scale bound, a LoRA rank that does not fit the field.
    let cases = [
        (
            "cfg=model_type:llama~num_hidden_layers:10000000",
            "num_hidden_layers",
        ),
        ("cfg=model_type:gpt2~n_embd:18446744073709551615", "n_embd"),
        (
            "model=llama-3.1-405b&batch=65536&seq=4194304&attention=eager",
            "seq",
        ),
        ("method=lora&rank=1152921504606846976", "rank"),
    ];
    let site = Site::start();
    let s = site.desktop();
    for (query, field) in cases {
        for path in ["/", "/compare", "/embed"] {
            let started = std::time::Instant::now();
            s.goto(&site.url(&format!("{path}?v=1&{query}")));
            s.wait_ready();
            let text = s.js(
                "const e = document.getElementById('link-errors') || document.getElementById('estimate-error'); \
                 return e ? e.textContent : document.querySelector('main').textContent",
                json!([]),
            );
            let text = text.as_str().unwrap_or_default();
            assert!(
                text.contains(field),
                "{path}?{query}: `{field}` not named in: {text}"
            );
            // Answered within the wait, not after a hang (the page's own work is bounded).
            assert!(
                started.elapsed() < WAIT,
                "{path}?{query}: took {:?}",
                started.elapsed()
            );
        }
        // A guide whose first block takes the model, batch and sequence from the page's
        // scenario: it answers (figures, or a message naming the field), without a hang.
        let started = std::time::Instant::now();
        s.goto(&site.url(&format!("/guides/activations-checkpointing?v=1&{query}")));
        s.wait_ready();
        let block = s.wait_for(
            "const b = document.querySelector('.calc-block'); \
             return b && (b.querySelector('[data-value]') || b.querySelector('.notice.error')) \
               ? b.textContent : null",
            WAIT,
            "the guide's first block to answer",
        );
        let block = block.as_str().unwrap_or_default();
        assert!(
            started.elapsed() < WAIT,
            "guide ?{query}: took {:?}",
            started.elapsed()
        );
        if query.contains("seq=4194304") {
            assert!(
                block.contains("seq"),
                "guide ?{query}: `seq` not named in: {block}"
            );
        }
        // The calculator still takes an edit and answers it.
        s.goto(&site.url(&format!("/?v=1&{query}")));
        s.wait_ready();
        let batch = s.find("#f-batch");
        s.clear(&batch);
        s.type_text(&batch, "2");
        s.wait_for(
            "return location.search.includes('batch=2')",
            WAIT,
            "the page to take an edit after an absurd link",
        );
    }
}

/// The link keys, from the core's codec, so this test covers every field it knows.
fn headroom_core_keys() -> Vec<String> {
    headroom_core::codec::KEYS
        .iter()
        .map(|k| k.to_string())
        .collect()
}

#[test]
fn the_embed_has_no_chrome_and_resizes_its_frame() {
    let srv = server();
    let driver = Driver::start();
    let s = driver.session(1000, 800);
    s.goto(&srv.url("/embed?view=timeline&batch=2"));
    s.wait_ready();
    let layout = s.js(
        "return [!!document.querySelector('.site-header'), !!document.querySelector('#chart-timeline img[src^=\"data:image/svg+xml\"]'), document.querySelector('main').dataset.view]",
        json!([]),
    );
    assert_eq!(layout, json!([false, true, "timeline"]));

    // A plain host page with the embed snippet: the frame starts 50 px high and must grow.
    s.goto(&srv.url("/embed-test.html"));
    let height = s.wait_for(
        "const f = document.getElementById('frame'); const h = parseInt(f.style.height || '0'); return h > 200 && h",
        WAIT,
        "the frame to take its content's height",
    );
    assert!(height.as_u64().is_some_and(|h| h > 200), "{height}");
}

#[test]
fn the_comparison_page_reads_both_scenarios_from_its_link() {
    let site = Site::start();
    let s = site.open("/compare?v=1&batch=2&b.ckpt=full&b.optimizer=adamw8bit");
    let values = s.js(
        "return [document.getElementById('a-ckpt').value, document.getElementById('b-ckpt').value, document.getElementById('b-optimizer').value, document.getElementById('b-batch').value]",
        json!([]),
    );
    assert_eq!(values, json!(["none", "full", "adamw8bit", "2"]));
    let cli_a = cli_json(&["estimate", "--batch", "2"]);
    let cli_b = cli_json(&[
        "estimate",
        "--batch",
        "2",
        "--checkpointing",
        "full",
        "--optimizer",
        "adamw8bit",
    ]);
    let cells = s.js(
        "return [...document.querySelectorAll('#compare-table tr[data-id=peak-device] td')].map(td => td.dataset.value || null)",
        json!([]),
    );
    assert_eq!(
        cells,
        json!([
            cli_a["bytes"]["peak_device"].to_string(),
            cli_b["bytes"]["peak_device"].to_string(),
            null
        ])
    );
}

#[test]
fn the_page_fits_a_phone_screen() {
    let srv = server();
    let driver = Driver::start();
    let s = driver.phone_session(390, 844);
    s.goto(&srv.url("/s/llama-3.1-8b-lora-4090"));
    s.wait_ready();
    assert_eq!(s.js("return window.innerWidth", json!([])), json!(390));
    let bar = s.js(
        "const b = document.querySelector('.verdict-bar'); const r = b.getBoundingClientRect(); return getComputedStyle(b).display !== 'none' && r.bottom <= window.innerHeight + 1 && b.textContent",
        json!([]),
    );
    assert!(
        bar.as_str().is_some_and(|t| t.starts_with("Fits")),
        "the verdict stays in view: {bar}"
    );
    let overflow = s.js(
        "return document.documentElement.scrollWidth - window.innerWidth",
        json!([]),
    );
    assert!(
        overflow.as_i64().is_some_and(|o| o <= 0),
        "wider than the screen by {overflow} px"
    );
    let fonts_ok = s.js(
        "return [...document.querySelectorAll('input, select, button')].every(e => parseFloat(getComputedStyle(e).fontSize) >= 13)",
        json!([]),
    );
    assert_eq!(fonts_ok, json!(true), "inputs are readable at phone width");
    s.screenshot(&repo_root().join("target/e2e/phone.png"));
    // The layer's saved tensors, once their labels have come from the worker, fit their card
    // at 390 px without scrolling sideways (issue 34).
    s.js(
        "document.querySelector('details.inventory').open = true",
        json!([]),
    );
    s.wait_for(
        "return [...document.querySelectorAll('details.inventory tbody th')].every(t => t.textContent !== '…')",
        WAIT,
        "the inventory's labels",
    );
    let inventory = s.js(
        "const w = document.querySelector('details.inventory .table-wrap'); return [w.scrollWidth, w.clientWidth]",
        json!([]),
    );
    assert!(
        inventory[0]
            .as_i64()
            .zip(inventory[1].as_i64())
            .is_some_and(|(t, w)| t <= w + 1),
        "the inventory at 390 px: {inventory}"
    );
    // The strategy table and the planner's plans fit the screen at 390 px and their card at
    // 1400 px: nothing wider than its box, nothing clipped (issue 17 §7).
    let fits_its_box = "const t = document.querySelector(arguments[0]); const w = t.closest('.table-wrap') || t.parentElement; return [t.scrollWidth, w.clientWidth]";
    for (session, width) in [(&s, 390), (&driver.session(1400, 1000), 1400)] {
        session.goto(&srv.url("/?v=1"));
        session.wait_ready();
        // The worker's strategy table and next steps move the page when they arrive: click
        // once they are in.
        session.wait_for(
            "return !!document.getElementById('strategy-table') && !!document.getElementById('apply-next')",
            WAIT,
            &format!("the strategy table at {width} px"),
        );
        session.click(&session.find("#planner-open"));
        session.wait_for(
            "return document.querySelectorAll('#planner-plans tr[data-plan]').length > 0",
            WAIT,
            &format!("plans at {width} px"),
        );
        for table in ["#strategy-table", "#planner-plans"] {
            let r = session.js(fits_its_box, json!([table]));
            assert!(
                r[0].as_i64()
                    .zip(r[1].as_i64())
                    .is_some_and(|(t, w)| t <= w + 1),
                "{table} at {width} px: {r}"
            );
        }
        let overflow = session.js(
            "return document.documentElement.scrollWidth - window.innerWidth",
            json!([]),
        );
        assert!(
            overflow.as_i64().is_some_and(|o| o <= 0),
            "{width} px: {overflow}"
        );
    }
    let desktop = driver.session(1280, 900);
    desktop.goto(&srv.url("/s/llama-3.1-8b-lora-4090"));
    desktop.wait_ready();
    desktop.screenshot(&repo_root().join("target/e2e/desktop.png"));
}

#[test]
fn a_pasted_config_is_estimated_and_travels_in_the_link() {
    let site = Site::start();
    let s = site.open("/?v=1");
    // A small real-shaped Llama config (the reference suite's), pasted as a reader would.
    let config = r#"{"model_type": "llama", "vocab_size": 3000, "hidden_size": 192, "intermediate_size": 512, "num_hidden_layers": 4, "num_attention_heads": 6, "num_key_value_heads": 2, "tie_word_embeddings": false}"#;
    s.select("f-model", "__custom");
    let area = s.find("#f-config-text");
    s.type_text(&area, config);
    s.click(&s.find(".custom-config button"));
    s.wait_for(
        "return location.search.includes('cfg=')",
        WAIT,
        "cfg= in the URL",
    );
    let path =
        std::env::temp_dir().join(format!("headroom-e2e-config-{}.json", std::process::id()));
    std::fs::write(&path, config).expect("a temp file");
    let cli = cli_json(&["estimate", "--model", path.to_str().expect("a UTF-8 path")]);
    let _ = std::fs::remove_file(&path);
    assert_numbers_match(&s, &cli);
    // The link alone reproduces the custom model.
    let other = site.desktop();
    other.goto(&s.url());
    other.wait_ready();
    assert_numbers_match(&other, &cli);

    // A broken config gets a message naming what is wrong, and the scenario stays.
    s.clear(&area);
    s.type_text(&area, r#"{"model_type": "llama", "hidden_size": "big"}"#);
    s.click(&s.find(".custom-config button"));
    let msg = model_message(&s, "a message about the config");
    assert!(
        msg.as_str().is_some_and(|m| m.contains("hidden_size")),
        "{msg}"
    );
    assert_numbers_match(&s, &cli);
    // The results stand dimmed and say which model they are still for (issue 17 §4).
    let stale = s.js(
        "const r = document.querySelector('.results'); const n = document.getElementById('stale-notice'); return [r.classList.contains('stale'), n && n.textContent]",
        json!([]),
    );
    assert_eq!(stale[0], json!(true), "{stale}");
    assert!(
        stale[1].as_str().is_some_and(|t| t.contains("still for")),
        "{stale}"
    );
    // A readable model clears it.
    s.select("f-model", "gpt2");
    s.wait_for(
        "return !document.querySelector('.results').classList.contains('stale')",
        WAIT,
        "the results undimmed",
    );
}

#[test]
fn fetching_from_the_hub_without_a_network_says_so() {
    let site = Site::start();
    let s = site.open("/");
    s.select("f-model", "__custom");
    let id = s.find("#f-hub-id");
    // A malformed id is refused before any request.
    s.type_text(&id, "not an id");
    s.click(&s.find("#f-hub-id + button"));
    let msg = model_message(&s, "a message about the id");
    assert!(
        msg.as_str().is_some_and(|m| m.contains("owner/name")),
        "{msg}"
    );
    // These machines reach no Hub: the page must say so (on a networked machine the public
    // config loads instead; both are acceptable answers, a blank or stuck page is not).
    s.clear(&id);
    s.type_text(&id, "Qwen/Qwen2.5-0.5B");
    s.click(&s.find("#f-hub-id + button"));
    let msg = s.wait_for(
        "const e = document.getElementById('model-message'); const t = e && e.textContent; return t && !t.startsWith('Fetching') && t",
        Duration::from_secs(40),
        "the fetch to end",
    );
    let text = msg.as_str().unwrap_or_default();
    assert!(
        text.contains("Could not reach the Hugging Face Hub") || text.contains("from the Hub"),
        "{text}"
    );
}

#[test]
fn the_site_works_offline_once_loaded() {
    // Its own server and driver: the server is stopped mid-test while the browser goes on.
    let srv = server();
    let driver = Driver::start();
    let s = driver.session(1280, 900);
    let url = srv.url("/s/mistral-7b-qlora-t4");
    s.goto(&url);
    s.wait_ready();
    s.wait_for(
        "return navigator.serviceWorker && navigator.serviceWorker.controller !== null",
        WAIT,
        "the service worker to take control",
    );
    // A second load goes through the worker, which keeps each file it serves.
    s.goto(&url);
    s.wait_ready();
    let expected = s.bytes_of("peak-device");
    drop(srv);
    s.goto(&url);
    s.wait_ready();
    assert_eq!(
        s.bytes_of("peak-device"),
        expected,
        "the page works with the server gone"
    );
}

#[test]
fn a_build_for_a_sub_path_works_there_with_deep_links() {
    let dist = dist_sub_dir();
    assert!(
        dist.join("index.html").is_file(),
        "no sub-path build at {}: run `trunk build --release --public-url /headroom/ --dist target/dist-sub` (scripts/test.sh does)",
        dist.display()
    );
    let srv = StaticServer::start_at(&dist, "/headroom/").expect("a local server");
    let driver = Driver::start();
    let s = driver.session(1280, 900);
    s.goto(&srv.url("/s/mistral-7b-qlora-t4?batch=2"));
    s.wait_ready();
    let title = s.js(
        "return document.querySelector('.named h1').textContent",
        json!([]),
    );
    assert_eq!(title, json!("Mistral 7B, QLoRA on a free-tier T4"));
    assert_numbers_match(
        &s,
        &cli_json(&["estimate", "--named", "mistral-7b-qlora-t4", "--batch", "2"]),
    );
    let links = s.js(
        "return [...document.querySelectorAll('header a')].every(a => new URL(a.href).pathname.startsWith('/headroom/'))",
        json!([]),
    );
    assert_eq!(
        links,
        json!(true),
        "every header link stays under the sub-path"
    );
    // An edit rewrites the address under the sub-path too.
    s.select("f-ckpt", "selective");
    s.wait_for(
        "return location.pathname === '/headroom/' && location.search.includes('ckpt=selective')",
        WAIT,
        "the edited link under /headroom/",
    );
}

/// The fixture made by calibrate's fake backend (a well-formed file for an H100).
fn calibration_fixture() -> std::path::PathBuf {
    // Chromedriver takes only canonical paths for uploads.
    repo_root()
        .join(
            "crates/headroom-core/tests/fixtures/calibration/h100-sxm-80gb-cuda13.0-torch2.11.json",
        )
        .canonicalize()
        .expect("the fixture exists")
}

/// A published calibration's page: its constants come with the app, its measured training
/// steps (the rows, left out of the app's download) are fetched from `content/calibration/`.
#[test]
fn a_published_calibration_shows_its_measured_rows_fetched_next_to_the_app() {
    let site = Site::start();
    let s = site.desktop();
    s.goto(&site.url("/calibration/h100-sxm-80gb-cuda13.0-torch2.11"));
    s.wait_ready();
    let rows = s.wait_for(
        "const n = document.querySelectorAll('#calibration-rows tr[data-id]').length; return n >= 42 ? n : null",
        WAIT,
        "the 42 measured training steps",
    );
    assert_eq!(rows, json!(42));
    let note = s.js(
        "return document.getElementById('calibration-rows-note')",
        json!([]),
    );
    assert_eq!(
        note,
        json!(null),
        "no loading or failure note once the rows are in"
    );
    // How each constant was found comes from the fetched file (the embedded copy leaves it out).
    let source = s.js(
        "const r = document.querySelector('#constants-table tr[data-id=\"reserved_slack_fraction\"]'); return r ? r.lastElementChild.textContent : null",
        json!([]),
    );
    assert!(
        source
            .as_str()
            .is_some_and(|t| t.contains("mean relative error")),
        "{source}"
    );
}

/// The published calibrations reach the calculator though the app's download leaves them out
/// (it fetches `content/calibrations.json` before its first page): on each GPU with a committed
/// file the page says it is calibrated and shows the CLI's figures, speed included (the CLI
/// embeds the same files).
#[test]
fn the_fetched_calibrations_give_the_clis_figures_on_each_calibrated_gpu() {
    let mut gpus: Vec<String> = std::fs::read_dir(repo_root().join("content/calibration"))
        .expect("content/calibration/ reads")
        .filter_map(|e| {
            let path = e.expect("a directory entry").path();
            let file: serde_json::Value = match path.extension() {
                Some(ext) if ext == "json" => {
                    serde_json::from_str(&std::fs::read_to_string(&path).ok()?).ok()?
                }
                _ => return None,
            };
            Some(file["gpu_id"].as_str()?.to_string())
        })
        .collect();
    gpus.sort();
    gpus.dedup();
    assert!(!gpus.is_empty(), "no published calibration");
    let site = Site::start();
    let s = site.desktop();
    // A model that fits on one of each, so the page shows its speed.
    for gpu in &gpus {
        s.goto(&site.url(&format!("/?gpu={gpu}&model=llama-3.2-1b")));
        s.wait_ready();
        let cli = cli_json(&["estimate", "--gpu", gpu, "--model", "llama-3.2-1b"]);
        assert_numbers_match(&s, &cli);
        let source = s.js(
            "const e = document.getElementById('calibration-note'); return e && e.getAttribute('data-source')",
            json!([]),
        );
        assert_eq!(source, json!("builtin"), "{gpu}: the calibration note");
        assert_speed_matches(&s, &cli, gpu);
    }
}

#[test]
fn a_loaded_calibration_file_is_shown_and_used_by_the_calculator() {
    let site = Site::start();
    let s = site.desktop();
    let calc = site.url("/?gpu=h100-sxm-80gb");
    s.goto(&calc);
    s.wait_ready();
    let before = s.bytes_of("peak-device");
    assert_eq!(
        before,
        cli_json(&["estimate", "--gpu", "h100-sxm-80gb"])["bytes"]["peak_device"]
            .as_u64()
            .expect("a byte count"),
        "without a file the page equals the CLI"
    );

    // The list page: the published files (or the sentence saying there are none) and the loader.
    s.goto(&site.url("/calibration"));
    s.wait_ready();
    let listed = s.js(
        "return !!(document.getElementById('no-calibrations') || document.getElementById('calibration-files'))",
        json!([]),
    );
    assert_eq!(listed, json!(true));
    let nav = s.js(
        "return [...document.querySelectorAll('.site-header nav a')].some(a => a.textContent === 'Calibration')",
        json!([]),
    );
    assert_eq!(nav, json!(true), "Calibration in the header");
    let fixture = calibration_fixture();
    s.type_text(
        &s.find("#calibration-file"),
        fixture.to_str().expect("a UTF-8 path"),
    );
    let fitted = s.wait_for(
        "const e = document.querySelector('#constants-table tr[data-id=cuda_context_bytes] td[data-value]'); return e && e.getAttribute('data-value')",
        WAIT,
        "the loaded file's constants",
    );
    assert_eq!(fitted, json!("636485632"));
    assert!(s.url().ends_with("/calibration/yours"), "{}", s.url());
    s.wait_for(
        "const c = document.querySelector('#chart-efficiency img[src^=\"data:image/svg+xml\"]'); return c && c.complete && c.naturalWidth >= 280",
        WAIT,
        "the efficiency chart",
    );
    // The whole page, a window at a time.
    for i in 0..4 {
        s.js("window.scrollTo(0, arguments[0])", json!([i * 850]));
        s.screenshot(&repo_root().join(format!("target/e2e/calibration-desktop-{i}.png")));
    }
    s.js("window.scrollTo(0, 0)", json!([]));
    let phone = site.driver.phone_session(390, 844);
    phone.goto(&site.url("/calibration"));
    phone.wait_ready();
    phone.type_text(
        &phone.find("#calibration-file"),
        fixture.to_str().expect("a UTF-8 path"),
    );
    phone.wait_for(
        "return document.getElementById('constants-table')",
        WAIT,
        "the page at phone width",
    );
    let overflow = phone.js(
        "return document.documentElement.scrollWidth - window.innerWidth",
        json!([]),
    );
    assert!(
        overflow.as_i64().is_some_and(|o| o <= 0),
        "wider than the screen by {overflow} px"
    );
    for (i, id) in [
        "calibration-report",
        "constants-table",
        "chart-efficiency",
        "calibration-rows",
    ]
    .iter()
    .enumerate()
    {
        phone.js(
            "document.getElementById(arguments[0]).scrollIntoView()",
            json!([id]),
        );
        phone.screenshot(&repo_root().join(format!("target/e2e/calibration-phone-{i}.png")));
    }

    // The calculator on that GPU now uses the file (kept for the tab across page loads).
    s.goto(&calc);
    s.wait_ready();
    let note = s.wait_for(
        "const e = document.getElementById('calibration-note'); return e && e.textContent",
        WAIT,
        "the calibration note",
    );
    let note = note.as_str().unwrap_or_default();
    assert!(
        note.contains(
            "Runtime constants from your calibration file h100-sxm-80gb-cuda13.0-torch2.11.json, measured 2026-11-22"
        ),
        "{note}"
    );
    let after = s.bytes_of("peak-device");
    // The fitted context is 112,197,632 bytes larger than the default and the slack larger;
    // the two workspaces are 9,724,928 bytes smaller.
    assert!(
        after >= before + 112_197_632 - 9_724_928,
        "peak device {before} -> {after}"
    );
    let defaults_note = s.js(
        "return document.body.textContent.includes('are documented defaults')",
        json!([]),
    );
    assert_eq!(
        defaults_note,
        json!(false),
        "no 'defaults' note with a file"
    );
    s.screenshot(&repo_root().join("target/e2e/calibration-calculator.png"));
    // Another GPU keeps its own constants.
    s.goto(&site.url("/?gpu=a100-sxm4-80gb"));
    s.wait_ready();
    assert_eq!(
        s.js(
            "return !!document.getElementById('calibration-note')",
            json!([])
        ),
        json!(false)
    );

    // A malformed file: a message naming the field, and the page stays.
    let bad = std::env::temp_dir().join(format!("headroom-e2e-cal-{}.json", std::process::id()));
    let text = std::fs::read_to_string(&fixture)
        .expect("the fixture")
        .replacen(
            "\"cuda_context_bytes\": 636485632",
            "\"cuda_context_bytes\": \"lots\"",
            1,
        );
    std::fs::write(&bad, text).expect("a temp file");
    s.goto(&site.url("/calibration"));
    s.wait_ready();
    s.type_text(
        &s.find("#calibration-file"),
        bad.to_str().expect("a UTF-8 path"),
    );
    let msg = s.wait_for(
        "const e = document.getElementById('calibration-error'); return e && e.textContent",
        WAIT,
        "a message about the file",
    );
    let _ = std::fs::remove_file(&bad);
    s.screenshot(&repo_root().join("target/e2e/calibration-bad-file.png"));
    assert!(
        msg.as_str()
            .is_some_and(|m| m.contains("constants.cuda_context_bytes")),
        "{msg}"
    );
}

#[test]
fn each_worked_example_checks_its_claims_with_the_clis_figures() {
    use headroom_core::claims;
    // The examples pages fetch their claims (content/claims.json) after the app's first frame.
    let claims_in = |s: &headroom_e2e::webdriver::Session| {
        s.wait_ready();
        s.wait_for(
            "return document.querySelector('main[data-ready=\"true\"]') !== null",
            std::time::Duration::from_secs(30),
            "the worked examples' claims",
        );
    };
    let site = Site::start();
    let s = site.open("/examples");
    claims_in(&s);
    assert_eq!(
        s.js(
            "return document.querySelectorAll('#examples > li').length",
            json!([])
        ),
        json!(5)
    );
    for n in 0..5 {
        // The copy the core embeds (checked equal to content/claims/ex<n>.toml by the core's
        // worked_examples test).
        let file = claims::embedded()
            .into_iter()
            .filter_map(Result::ok)
            .find(|f| f.id == format!("ex{n}"))
            .expect("a claims file");
        s.goto(&site.url(&format!("/examples/{n}")));
        claims_in(&s);
        let rows = s.js(
            "return document.querySelectorAll('#claims tbody tr.claim').length",
            json!([]),
        );
        assert_eq!(
            rows,
            json!(file.claims.len()),
            "example {n}: one row per claim"
        );
        let errors = s.js(
            "return document.querySelectorAll('#claims .notice').length",
            json!([]),
        );
        assert_eq!(errors, json!(0), "example {n}: every claim evaluates");
        // Each row's Why is the note with its figures computed by the core, as the CLI would.
        let named = headroom_core::codec::named_scenarios();
        for (i, r) in claims::evaluate(&file, &named).into_iter().enumerate() {
            let note = s.js(
                "return document.querySelector('#claim-' + arguments[0] + ' .note').textContent",
                json!([i + 1]),
            );
            let r = r.expect("evaluates");
            assert!(!r.note.contains("{{"), "example {n}, claim {}", i + 1);
            assert_eq!(note, json!(r.note), "example {n}, claim {}", i + 1);
        }
        // Each row's verdict and scenario link are the file's.
        for (i, c) in file.claims.iter().enumerate() {
            let row = s.js(
                "const r = document.getElementById(arguments[0]); return r && [r.querySelector('.tag').textContent, r.querySelector('.scenario-link').getAttribute('href')]",
                json!([format!("claim-{}", i + 1)]),
            );
            assert_eq!(
                row,
                json!([c.verdict.id(), c.link()]),
                "example {n}, claim {}",
                i + 1
            );
        }
    }

    // Example 2, claims 2 and 6: Headroom's figure is the CLI's for the same scenario.
    s.goto(&site.url("/examples/2"));
    claims_in(&s);
    let value = |id: &str| {
        s.js(
            "return document.querySelector('#' + arguments[0] + ' .computed').getAttribute('data-value')",
            json!([id]),
        )
        .as_str()
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("no data-value in #{id}"))
    };
    let cli = cli_json(&["estimate", "--named", "ex2-7b-fp32-a100"]);
    assert_eq!(
        value("claim-2"),
        cli["bytes"]["weights"].as_u64().expect("bytes")
    );
    let cli = cli_json(&[
        "estimate",
        "--named",
        "ex2-7b-fp32-a100",
        "--precision",
        "bf16",
    ]);
    assert_eq!(
        value("claim-6"),
        cli["bytes"]["weights"].as_u64().expect("bytes")
    );
    let link = s.js(
        "return document.querySelector('#claim-6 .scenario-link').getAttribute('href')",
        json!([]),
    );
    assert_eq!(link, json!("/s/ex2-7b-fp32-a100?precision=bf16"));

    // A phone shows each claim as a card, no wider than the screen.
    let phone = site.driver.phone_session(390, 844);
    phone.goto(&site.url("/examples/0"));
    claims_in(&phone);
    let overflow = phone.js(
        "return document.documentElement.scrollWidth - window.innerWidth",
        json!([]),
    );
    assert!(
        overflow.as_i64().is_some_and(|o| o <= 0),
        "wider than the screen by {overflow} px"
    );
    phone.screenshot(&repo_root().join("target/e2e/example-0-phone.png"));
    s.goto(&site.url("/examples/0"));
    claims_in(&s);
    s.screenshot(&repo_root().join("target/e2e/example-0-desktop.png"));
}

/// The time model's assumptions a link sets (issue 16 §3) are the ones the speed line names,
/// and the speed beside the verdict is the CLI's for the same link.
#[test]
fn the_speed_line_names_the_links_time_assumptions() {
    let link = "v=1&model=llama-3.2-1b&gpus=16&dp=fsdp&node=4&ib=100&eff=34";
    let site = Site::start();
    let s = site.open(&format!("/?{link}"));
    let cli = cli_json(&["estimate", "--link", &format!("?{link}")]);
    let tps = cli["speed"]["tokens_per_second"]
        .as_f64()
        .expect("a speed")
        .round() as u64;
    let speed = s.js(
        "return document.getElementById('speed').textContent",
        json!([]),
    );
    let text = speed.as_str().unwrap_or_default();
    for part in [
        format!("{} tok/s", headroom_core::format::grouped(tps)),
        "34% of the GPU's matmul peak".to_string(),
        "4 GPUs per node".to_string(),
        "100 GB/s between nodes".to_string(),
    ] {
        assert!(text.contains(&part), "{text:?} lacks {part:?}");
    }
}

#[test]
fn a_model_given_by_its_size_matches_the_cli_and_names_itself() {
    let site = Site::start();
    let s = site.open("/?v=1");
    s.select("f-model", "__custom");
    let size = s.find("#f-model-size");
    // Not a size: the message says how to write one, and the scenario stays.
    s.type_text(&size, "seven");
    s.click(&s.find("#f-model-size + button"));
    let msg = model_message(&s, "a message about the size");
    assert!(msg.as_str().is_some_and(|m| m.contains("7b")), "{msg}");
    s.clear(&size);
    s.type_text(&size, "7B");
    s.click(&s.find("#f-model-size + button"));
    s.wait_for(
        "return location.search.includes('model=7b')",
        WAIT,
        "model=7b in the URL",
    );
    assert_numbers_match(&s, &cli_json(&["estimate", "--model", "7b"]));
    // The link alone shows the size as the selected model, named as such.
    let other = site.desktop();
    other.goto(&s.url());
    other.wait_ready();
    let label = other.js(
        "const s = document.getElementById('f-model'); return s.options[s.selectedIndex].textContent",
        json!([]),
    );
    assert!(
        label.as_str().is_some_and(|l| l.starts_with("A 7B model")),
        "{label}"
    );
}

/// GRPO with vLLM colocated (issue 31): the page shows the CLI's figures and why vLLM would not
/// start (Llama 3.1 8B's whole context does not fit the KV cache of TRL's default budget);
/// setting vLLM's max_model_len to the sequence makes it fit, as the CLI says.
#[test]
fn a_colocated_vllm_that_cannot_start_says_why_and_its_fix_fits() {
    let link = "v=1&model=llama-3.1-8b&gpu=h100-sxm-80gb&batch=4&seq=1024&method=lora\
                &precision=bf16&ckpt=full&trainer=grpo&prompt=256&gen=colocate";
    let site = Site::start();
    let s = site.open(&format!("/?{link}"));
    assert_numbers_match(&s, &cli_json(&["estimate", "--link", &format!("?{link}")]));
    let verdict = s.js(
        "const v = document.getElementById('verdict'); return [v.getAttribute('data-fits'), v.textContent]",
        json!([]),
    );
    assert_eq!(verdict[0], "false", "{verdict}");
    let text = verdict[1].as_str().unwrap_or_default();
    assert!(
        text.contains("vLLM cannot start") && text.contains("max_model_len 131072"),
        "{text}"
    );
    let len = s.find("#f-vllm_len");
    s.clear(&len);
    s.type_text(&len, "1024");
    s.wait_for(
        "return document.getElementById('verdict').getAttribute('data-fits') === 'true'",
        WAIT,
        "the verdict to fit with vllm_len=1024",
    );
    assert_numbers_match(
        &s,
        &cli_json(&["estimate", "--link", &format!("?{link}&vllm_len=1024")]),
    );
}
