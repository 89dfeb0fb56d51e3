//! End-to-end tests of the guides, the GPU and model pages, search and in-place navigation in
//! headless Chromium, on the release build. Every guide is opened; its blocks' figures are
//! compared with the `headroom` CLI for the same scenario, and an input is changed to see the
//! figures follow. Every worked example's short links open their scenario.

use std::time::Duration;

use headroom_e2e::Site;
use headroom_e2e::server::StaticServer;
use headroom_e2e::webdriver::{Driver, Session};
use headroom_e2e::{cli_json, repo_root};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(20);

use headroom_e2e::site_server as server;

/// The guides' slugs and their number of calculator blocks, read from `content/guides/`.
fn guides() -> Vec<(String, usize)> {
    let dir = repo_root().join("content/guides");
    let mut out: Vec<(String, usize)> = std::fs::read_dir(&dir)
        .expect("content/guides")
        .filter_map(|e| {
            let p = e.ok()?.path();
            let stem = p.file_stem()?.to_str()?.to_string();
            if p.extension()? != "md" || stem.chars().any(|c| c.is_ascii_uppercase()) {
                return None;
            }
            let text = std::fs::read_to_string(&p).ok()?;
            Some((
                stem,
                text.lines()
                    .filter(|l| l.trim_end() == "```headroom")
                    .count(),
            ))
        })
        .collect();
    out.sort();
    out
}

/// Where a guide's figures come from in the CLI's JSON: `peak.*`, `bytes.*`, `parameters.*`.
fn cli_value(doc: &Value, metric: &str) -> Option<f64> {
    let (group, field) = metric.split_once('.')?;
    doc.get(group)?.get(field)?.as_f64()
}

/// Waits until the guide on the page has its text and blocks.
fn wait_guide(s: &Session, what: &str) {
    s.wait_for(
        "const a = document.querySelector('article.guide'); return a && a.dataset.ready === 'true'",
        WAIT,
        what,
    );
}

/// Opens a guide and waits for its text and blocks.
fn open_guide(s: &Session, srv: &StaticServer, slug: &str) {
    s.goto(&srv.url(&format!("/guides/{slug}")));
    wait_guide(s, &format!("the guide {slug} to load"));
}

#[test]
fn every_guide_opens_with_live_blocks_equal_to_the_cli() {
    let site = Site::start();
    let s = site.desktop();
    let all = guides();
    assert!(all.len() >= 10, "the ten guide topics: {all:?}");
    let mut compared = 0;
    for (slug, blocks) in &all {
        open_guide(&s, &site.server, slug);
        let state = s.js(
            "return [document.querySelectorAll('.calc-block').length, \
                     document.querySelectorAll('.calc-block .notice.error, .live.error').length, \
                     document.querySelectorAll('.toc li').length, \
                     document.querySelector('.guide-nav [aria-current=page]')?.getAttribute('href') || '', \
                     document.title]",
            json!([]),
        );
        assert_eq!(state[0], json!(blocks), "{slug}: one figure per block");
        assert_eq!(
            state[1],
            json!(0),
            "{slug}: a block or value failed to evaluate"
        );
        assert!(state[2].as_u64() > Some(2), "{slug}: a table of contents");
        assert!(
            state[3]
                .as_str()
                .is_some_and(|h| h.ends_with(slug.as_str())),
            "{slug}: nav"
        );
        assert!(
            state[4].as_str().is_some_and(|t| t.ends_with("Headroom")),
            "{slug}: title"
        );
        // Cells naming a CLI field carry exactly the CLI's number for the row's scenario.
        let cells = s.js(
            "return [...document.querySelectorAll('table.calc-table tbody tr')].flatMap(tr => { \
               const a = tr.querySelector('th a'); if (!a) return []; \
               const q = new URL(a.href).search.slice(1); \
               return [...tr.querySelectorAll('td[data-metric]')].map(td => [q, td.dataset.metric, td.dataset.value]); \
             }).filter(c => /^(peak|bytes|parameters)\\./.test(c[1]) && !c[1].includes('+') && !c[1].includes('/')).slice(0, 3)",
            json!([]),
        );
        for c in cells.as_array().expect("an array") {
            let (link, metric, value) = (
                c[0].as_str().unwrap_or(""),
                c[1].as_str().unwrap_or(""),
                c[2].as_str(),
            );
            let cli = cli_json(&["estimate", "--link", link]);
            let want =
                cli_value(&cli, metric).unwrap_or_else(|| panic!("{metric} in the CLI JSON"));
            let got: f64 = value.and_then(|v| v.parse().ok()).expect("a value");
            assert_eq!(got, want, "{slug}: {metric} for {link}");
            compared += 1;
        }
    }
    assert!(compared >= 5, "compared {compared} cells with the CLI");
}

#[test]
fn changing_a_blocks_input_changes_its_figures() {
    let site = Site::start();
    let s = site.desktop();
    open_guide(&s, &site.server, "optimizer-states");
    let figures = "return [...document.querySelector('.calc-block form.calc-inputs').closest('.calc-block').querySelectorAll('[data-value]')].map(e => e.dataset.value).join(',')";
    let before = s.js(figures, json!([]));
    let input = s.js(
        "const i = document.querySelector('.calc-block form.calc-inputs select, .calc-block form.calc-inputs input[type=number]'); return [i.id, i.tagName, i.value]",
        json!([]),
    );
    let (id, tag) = (
        input[0].as_str().expect("an id"),
        input[1].as_str().unwrap_or(""),
    );
    if tag == "SELECT" {
        let other = s.js(
            "const e = document.getElementById(arguments[0]); return [...e.options].map(o => o.value).find(v => v !== e.value)",
            json!([id]),
        );
        s.select(id, other.as_str().expect("another option"));
    } else {
        let el = s.find(&format!("#{id}"));
        s.clear(&el);
        s.type_text(&el, "2");
    }
    s.wait_for(
        &format!(
            "const now = (() => {{ {} }})(); return now !== {}",
            figures.trim_start_matches("return "),
            before
        ),
        WAIT,
        "the block's figures to follow the input",
    );
}

#[test]
fn gpu_and_model_pages_show_what_fits() {
    let site = Site::start();
    let s = site.open("/gpus/rtx-4090-24gb");
    let rows = s.js(
        "return document.querySelectorAll('#fits-table tbody tr').length",
        json!([]),
    );
    let presets = cli_json(&["models"]);
    let n = presets.as_array().map_or(0, Vec::len);
    assert_eq!(rows, json!(n), "a row per model preset");
    // The 8B full fine-tune cell equals the CLI's device peak for that scenario.
    let cell = s.js(
        "const tr = [...document.querySelectorAll('#fits-table tbody tr')].find(r => r.querySelector('th a').href.endsWith('/models/llama-3.1-8b')); \
         const td = tr.querySelector('td'); return [new URL(td.querySelector('a').href).search.slice(1), td.dataset.value]",
        json!([]),
    );
    let cli = cli_json(&["estimate", "--link", cell[0].as_str().expect("a link")]);
    assert_eq!(
        cell[1].as_str().and_then(|v| v.parse::<u64>().ok()),
        cli["peak"]["device"].as_u64()
    );
    s.goto(&site.url("/models/mistral-7b-v0.1"));
    s.wait_ready();
    let facts = s.js("return [document.querySelector('h1').textContent, document.querySelectorAll('#recipes-table tbody tr').length, document.title]", json!([]));
    assert_eq!(facts[1], json!(3));
    assert!(
        facts[2].as_str().is_some_and(|t| t.contains("Mistral")),
        "{facts}"
    );
    s.goto(&site.url("/gpus/no-such-gpu"));
    s.wait_ready();
    let h1 = s.js("return document.querySelector('h1').textContent", json!([]));
    assert_eq!(h1, json!("No such GPU"));
}

#[test]
fn search_finds_guide_text_and_each_bundle_keeps_its_pages() {
    let site = Site::start();
    let s = site.open("/");
    // A marker on the window survives in-place navigation and dies with a page load.
    s.js("window.__stay = 1; return true", json!([]));
    let input = s.find("#search");
    s.click(&input);
    s.type_text(&input, "h100 sxm");
    let first = s.wait_for(
        "const a = document.querySelector('#search-results a'); return a && a.getAttribute('href')",
        WAIT,
        "search results",
    );
    assert!(
        first
            .as_str()
            .is_some_and(|h| h.ends_with("/gpus/h100-sxm-80gb")),
        "{first}"
    );
    // Guide text (fetched on focus) is searchable: a phrase only the allocator guide explains.
    // Select all and type over it, as a person would (WebDriver's clear sets the value without
    // an input event, so the app would put its own value back).
    s.type_text(&input, "\u{E009}a\u{E000}expandable_segments");
    assert_eq!(
        s.js("return document.querySelector('#search').value", json!([])),
        json!("expandable_segments")
    );
    let hit = s.wait_for(
        "return [...document.querySelectorAll('#search-results a')].map(a => a.getAttribute('href')).find(h => h.includes('/guides/'))",
        WAIT,
        "a guide found by its text",
    );
    assert!(hit.as_str().is_some_and(|h| h.contains("/guides/")));
    // The calculator's page downloaded the calculator's bundle only.
    assert_eq!(s.js(LOADED_BUNDLES, json!([])), json!([true, false]));
    let link = s.find("#search-results a[href*='/guides/']");
    s.click(&link);
    wait_guide(&s, "the guide after a click");
    // A guide is not in the calculator's bundle: the link loads the page, which runs the whole
    // site's bundle and nothing else.
    assert_eq!(
        s.js("return window.__stay ?? null", json!([])),
        json!(null),
        "a page load"
    );
    assert_eq!(s.js(LOADED_BUNDLES, json!([])), json!([false, true]));
    // The whole site's bundle renders every page: its links navigate in place.
    s.js("window.__stay = 2; return true", json!([]));
    let calculator = s.find("nav[aria-label='Site'] a");
    s.click(&calculator);
    s.wait_for(
        "return !!document.querySelector('main.calc')",
        WAIT,
        "the calculator after a click",
    );
    assert_eq!(
        s.js("return window.__stay", json!([])),
        json!(2),
        "in place"
    );
    // The calculator sets no title of its own: the guide's is not left behind.
    assert_eq!(
        s.js("return document.title", json!([])),
        json!("Headroom: GPU memory for training language models")
    );
    // Back returns to the guide, still without a page load.
    s.js("history.back(); return true", json!([]));
    wait_guide(&s, "the guide after back");
    assert_eq!(s.js("return window.__stay", json!([])), json!(2));
}

/// Which bundles the page fetched: `[the calculator's, the whole site's]`.
const LOADED_BUNDLES: &str = "const names = performance.getEntriesByType('resource').map(e => e.name); \
     return [names.some(n => /headroom-site-[0-9a-f]+_bg\\.wasm$/.test(n)), \
     names.some(n => n.endsWith('headroom-docs_bg.wasm'))]";

#[test]
fn every_worked_example_short_link_opens_its_scenario() {
    let site = Site::start();
    let s = site.desktop();
    let dir = repo_root().join("content/scenarios");
    let mut ids: Vec<String> = std::fs::read_dir(dir)
        .expect("scenarios")
        .filter_map(|e| e.ok()?.path().file_stem()?.to_str().map(str::to_string))
        .filter(|id| id.starts_with("ex"))
        .collect();
    ids.sort();
    assert!(ids.len() >= 5);
    for id in &ids {
        s.goto(&site.url(&format!("/s/{id}")));
        s.wait_ready();
        let cli = cli_json(&["estimate", "--named", id]);
        assert_eq!(
            s.bytes_of("peak-device"),
            cli["peak"]["device"].as_u64().expect("a peak"),
            "/s/{id}"
        );
    }
}

#[test]
fn a_guide_reads_at_phone_width() {
    let srv = server();
    let driver = Driver::start();
    let s = driver.phone_session(390, 844);
    open_guide(&s, &srv, "zero-fsdp-offload");
    let overflow = s.js(
        "return document.documentElement.scrollWidth - document.documentElement.clientWidth",
        json!([]),
    );
    assert!(
        overflow.as_i64() <= Some(0),
        "the page scrolls sideways by {overflow} px"
    );
    if let Some(dir) = std::env::var_os("HEADROOM_SCREENSHOTS") {
        s.screenshot(&std::path::Path::new(&dir).join("guide-phone.png"));
    }
}

#[test]
fn guides_work_under_a_sub_path() {
    let dist = headroom_e2e::dist_sub_dir();
    assert!(
        dist.join("content/guides").is_dir(),
        "no sub-path build at {}",
        dist.display()
    );
    let srv = StaticServer::start_at(&dist, "/headroom/").expect("a local server");
    let driver = Driver::start();
    let s = driver.session(1280, 900);
    open_guide(&s, &srv, "memory-timeline");
    let state = s.js(
        "return [document.querySelectorAll('.calc-block').length, \
                 [...document.querySelectorAll('.guide a[href^=\"/\"]')].every(a => a.getAttribute('href').startsWith('/headroom/'))]",
        json!([]),
    );
    assert!(state[0].as_u64() > Some(0), "blocks render: {state}");
    assert_eq!(state[1], json!(true), "site links keep the sub-path");
}

/// The build has an index.html per page with that page's title (site/pages.sh), and such a
/// copy opens its page.
#[test]
fn every_page_has_its_own_head_and_opens() {
    let dist = headroom_e2e::dist_dir();
    let title_of = |path: &str| {
        let html = std::fs::read_to_string(dist.join(path).join("index.html"))
            .unwrap_or_else(|e| panic!("{path}/index.html: {e}"));
        let start = html.find("<title>").expect("a title") + "<title>".len();
        html[start..start + html[start..].find("</title>").expect("closed")].to_string()
    };
    for (slug, _) in guides() {
        let text = std::fs::read_to_string(repo_root().join(format!("content/guides/{slug}.md")))
            .expect("guide");
        let title = text
            .lines()
            .find_map(|l| l.strip_prefix("title: "))
            .expect("title");
        assert_eq!(
            title_of(&format!("guides/{slug}")),
            format!("{title} · Headroom")
        );
    }
    for g in cli_json(&["gpus"]).as_array().expect("gpus") {
        let (id, name) = (
            g["id"].as_str().expect("id"),
            g["name"].as_str().expect("name"),
        );
        assert!(
            title_of(&format!("gpus/{id}")).starts_with(name),
            "gpus/{id}"
        );
    }
    for m in cli_json(&["models"]).as_array().expect("models") {
        let (id, name) = (
            m["id"].as_str().expect("id"),
            m["name"].as_str().expect("name"),
        );
        assert!(
            title_of(&format!("models/{id}")).starts_with(name),
            "models/{id}"
        );
    }
    assert!(title_of("s/ex2-405b-128xh100").starts_with("Example 2"));
    let site = Site::start();
    let s = site.open("/gpus/t4-16gb/");
    let h1 = s.js(
        "return document.querySelector('main h1').textContent",
        json!([]),
    );
    assert_eq!(h1, json!("NVIDIA Tesla T4 16GB"));
}
