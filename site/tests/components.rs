//! Component tests in headless Chromium (wasm-bindgen-test): components mounted alone, checked
//! through the DOM they produce. Run by scripts/test.sh with
//! `cargo test -p headroom-site --target wasm32-unknown-unknown`.
#![cfg(target_arch = "wasm32")]

use std::rc::Rc;
use std::time::Duration;

use headroom_core::analyze;
use headroom_site::charts::ChartKind;
use headroom_site::components::chart::{Chart, ChartProps};
use headroom_site::components::form::ScenarioForm;
use headroom_site::components::notices::{LinkErrors, LinkErrorsProps};
use headroom_site::components::report::{AnalysisProps, Verdict};
use headroom_site::state::CalcState;
use wasm_bindgen::JsCast;
use wasm_bindgen_test::*;
use yew::prelude::*;

wasm_bindgen_test_configure!(run_in_browser);

fn root() -> web_sys::Element {
    let document = web_sys::window()
        .and_then(|w| w.document())
        .expect("a document");
    let div = document.create_element("div").expect("a div");
    document
        .body()
        .expect("a body")
        .append_child(&div)
        .expect("appended");
    div
}

async fn settle() {
    yew::platform::time::sleep(Duration::from_millis(30)).await;
}

fn analysis(query: &str) -> Rc<headroom_core::Analysis> {
    let scen = headroom_core::codec::decode(query).expect("a valid link");
    Rc::new(analyze(&scen).expect("it analyzes"))
}

#[wasm_bindgen_test]
async fn the_verdict_says_whether_it_fits() {
    let div = root();
    let a = analysis(
        "model=llama-3.1-8b&gpu=rtx-4090-24gb&method=lora&precision=bf16&seq=2048&ckpt=full",
    );
    let fits = a.estimate.verdict.fits;
    yew::Renderer::<Verdict>::with_root_and_props(
        div.clone(),
        AnalysisProps {
            analysis: a,
            gpus: 1,
            builtin: false,
        },
    )
    .render();
    settle().await;
    let html = div.inner_html();
    assert!(fits);
    // The headline names the model it is for.
    assert!(html.contains("Llama 3.1 8B: fits on 1 x"), "{html}");
    assert!(
        div.query_selector("#peak-device[data-bytes]")
            .ok()
            .flatten()
            .is_some()
    );

    let div = root();
    let a = analysis("model=llama-3.1-8b");
    yew::Renderer::<Verdict>::with_root_and_props(
        div.clone(),
        AnalysisProps {
            analysis: a,
            gpus: 1,
            builtin: false,
        },
    )
    .render();
    settle().await;
    assert!(
        div.inner_html().contains("Llama 3.1 8B: does not fit"),
        "{}",
        div.inner_html()
    );
}

#[wasm_bindgen_test]
async fn link_messages_are_text_never_markup() {
    let div = root();
    let hostile =
        "<img src=x onerror=\"window.__pwned=1\"><script>window.__pwned=1</script>".to_string();
    yew::Renderer::<LinkErrors>::with_root_and_props(
        div.clone(),
        LinkErrorsProps {
            errors: vec![hostile.clone()],
            on_dismiss: Callback::noop(),
        },
    )
    .render();
    settle().await;
    assert!(div.query_selector("img, script").ok().flatten().is_none());
    assert!(div.text_content().unwrap_or_default().contains(&hostile));
}

/// The rows the worker sends, rendered as the page renders its answer.
#[derive(Properties, PartialEq)]
struct RowsProps {
    rows: Rc<Vec<headroom_core::strategies::Strategy>>,
}

#[component]
fn Rows(props: &RowsProps) -> Html {
    headroom_site::components::strategies::table(&props.rows)
}

#[wasm_bindgen_test]
async fn the_strategy_table_has_a_row_per_technique() {
    let div = root();
    let a = analysis("model=llama-3.1-8b");
    let rows = a.strategies.clone().expect("asked for");
    let n = rows.len();
    assert!(n > 3);
    // As the worker sends them (strategies::wire), read back.
    let sent = headroom_core::strategies::wire::to_lines(&rows);
    let rows = headroom_core::strategies::wire::from_lines(&sent).expect("reads back");
    yew::Renderer::<Rows>::with_root_and_props(
        div.clone(),
        RowsProps {
            rows: Rc::new(rows),
        },
    )
    .render();
    settle().await;
    let rows = div
        .query_selector_all("#strategy-table tbody tr")
        .expect("rows");
    assert_eq!(rows.length() as usize, n);
}

/// The chart shown in `sel` inside `div`, once its image has loaded: the image and the SVG
/// text its `data:` URL holds.
async fn chart_svg(div: &web_sys::Element, sel: &str) -> (web_sys::HtmlImageElement, String) {
    let img: web_sys::HtmlImageElement = div
        .query_selector(sel)
        .ok()
        .flatten()
        .expect("a chart image")
        .unchecked_into();
    for _ in 0..100 {
        if img.complete() && img.natural_width() > 0 {
            break;
        }
        settle().await;
    }
    let src = img.src();
    let encoded = src
        .strip_prefix("data:image/svg+xml;charset=utf-8,")
        .unwrap_or_else(|| panic!("an SVG data URL: {}", &src[..60.min(src.len())]));
    let text = String::from(js_sys::decode_uri_component(encoded).expect("percent-encoded"));
    assert!(text.starts_with("<svg"), "{}", &text[..80.min(text.len())]);
    assert!(
        img.natural_width() >= 280 && img.natural_height() >= 200,
        "{}x{}",
        img.natural_width(),
        img.natural_height()
    );
    assert!(img.has_attribute("data-draw-ms"));
    (img, text)
}

#[wasm_bindgen_test]
async fn a_chart_is_drawn_as_an_svg_image() {
    let a = analysis("model=qwen2.5-0.5b&batch=2");
    for kind in [ChartKind::Timeline, ChartKind::Breakdown] {
        let div = root();
        yew::Renderer::<Chart>::with_root_and_props(
            div.clone(),
            ChartProps {
                kind,
                estimate: Rc::new(a.estimate.clone()),
                label: "a chart".into(),
                file_stem: "t".into(),
            },
        )
        .render();
        settle().await;
        let (img, text) = chart_svg(&div, &format!("#chart-{} img", kind.id())).await;
        assert_eq!(img.alt(), "a chart");
        // The PNG export draws the image on a canvas: the canvas must not be tainted.
        assert_eq!(headroom_site::dom::download_png("t.png", &img), Ok(()));
        match kind {
            ChartKind::Timeline => {
                let peak = format!(
                    "peak {:.1} GiB",
                    a.estimate.peak.device as f64 / (1u64 << 30) as f64
                );
                assert!(text.contains(&peak), "{peak} in the timeline");
            }
            ChartKind::Breakdown => {
                let biggest = a
                    .estimate
                    .components
                    .iter()
                    .max_by_key(|c| c.bytes)
                    .expect("components");
                // The chart escapes text as XML does.
                let name: String = biggest
                    .name
                    .chars()
                    .take(12)
                    .collect::<String>()
                    .replace('&', "&amp;")
                    .replace('<', "&lt;")
                    .replace('>', "&gt;")
                    .replace('"', "&quot;")
                    .replace('\'', "&apos;");
                assert!(text.contains(&name), "{name} in the breakdown");
            }
        }
    }
}

/// Holds a scenario in state and shows it, so the form's edits can be observed.
#[component]
fn FormHarness() -> Html {
    let state = use_reducer(CalcState::default);
    let dispatch = {
        let state = state.clone();
        Callback::from(move |a| state.dispatch(a))
    };
    html! {
        <>
            <ScenarioForm state={Rc::new((*state).clone())} dispatch={dispatch}/>
            <output id="batch-now">{ state.scenario.micro_batch }</output>
        </>
    }
}

#[wasm_bindgen_test]
async fn the_form_applies_valid_edits_and_names_invalid_ones() {
    let div = root();
    yew::Renderer::<FormHarness>::with_root(div.clone()).render();
    settle().await;
    let input: web_sys::HtmlInputElement = div
        .query_selector("#f-batch")
        .ok()
        .flatten()
        .expect("the batch input")
        .unchecked_into();
    let type_value = |v: &str| {
        input.set_value(v);
        let ev = web_sys::InputEvent::new("input").expect("an event");
        input.dispatch_event(&ev).expect("dispatched");
    };
    type_value("5");
    settle().await;
    let now = || {
        div.query_selector("#batch-now")
            .ok()
            .flatten()
            .and_then(|e| e.text_content())
    };
    assert_eq!(now().as_deref(), Some("5"));
    type_value("0");
    settle().await;
    assert_eq!(
        now().as_deref(),
        Some("5"),
        "an invalid value keeps the last good one"
    );
    let err = div
        .query_selector("#f-batch-error")
        .ok()
        .flatten()
        .expect("a message");
    assert!(err.text_content().unwrap_or_default().contains("batch"));
}

#[derive(Properties, PartialEq)]
struct ReportProps {
    view: Rc<headroom_site::calibration_state::CalibrationView>,
}

/// Hosts the calibration page's report (a plain function on the site).
#[component]
fn Report(props: &ReportProps) -> Html {
    headroom_site::components::calibration::report(&props.view)
}

const CALIBRATION_FIXTURE: &str = include_str!(
    "../../crates/headroom-core/tests/fixtures/calibration/h100-sxm-80gb-cuda13.0-torch2.11.json"
);

#[wasm_bindgen_test]
async fn a_calibration_file_shows_its_constants_rows_and_chart() {
    use headroom_site::calibration_state::view;
    let div = root();
    let v = Rc::new(view("fixture.json", CALIBRATION_FIXTURE).expect("the fixture reads"));
    let first_row = v.rows[0].id.clone();
    // The page's prose is fetched (content/help.toml as help.json): the fake file's note, its line.
    let fake = include_str!("../../content/help.toml")
        .lines()
        .find_map(|l| l.strip_prefix("calibration_fake = \""))
        .and_then(|l| l.strip_suffix('"'))
        .expect("a calibration_fake line");
    headroom_site::help::install(
        &serde_json::json!({ "page": { "calibration_fake": fake } }).to_string(),
    );
    yew::Renderer::<Report>::with_root_and_props(div.clone(), ReportProps { view: v }).render();
    settle().await;
    let cell = |sel: &str| {
        div.query_selector(sel)
            .ok()
            .flatten()
            .and_then(|e| e.text_content())
            .unwrap_or_default()
    };
    // The fitted context (636,485,632 bytes = 607 MiB) next to the 500 MiB default.
    let fitted = div
        .query_selector("#constants-table tr[data-id=cuda_context_bytes] td[data-value]")
        .ok()
        .flatten()
        .and_then(|e| e.get_attribute("data-value"));
    assert_eq!(fitted.as_deref(), Some("636485632"));
    let row = cell("#constants-table tr[data-id=cuda_context_bytes]");
    assert!(
        row.contains("500.0 MiB") || row.contains("500 MiB"),
        "{row}"
    );
    assert!(row.contains("median device-level residual"), "{row}");
    assert!(
        cell("#constants-table tr[data-id=reserved_slack_fraction]").contains("14.23%"),
        "the slack as a percentage"
    );
    // Each scenario row links to the calculator with its scenario.
    let rows = div
        .query_selector_all("#calibration-rows tbody tr")
        .expect("rows");
    assert_eq!(rows.length(), 12);
    let link = div
        .query_selector("#calibration-rows tbody tr th a")
        .ok()
        .flatten()
        .and_then(|a| a.get_attribute("href"))
        .unwrap_or_default();
    assert!(link.contains("/?v=1") && link.contains("cfg="), "{link}");
    assert!(cell("#calibration-rows tbody tr").contains(&first_row));
    assert!(cell("#calibration-errors tr[data-id=device]").contains("5.19%"));
    assert!(cell("#calibration-report").contains("fake backend"));
    let (_, text) = chart_svg(&div, "#chart-efficiency img").await;
    assert!(text.contains("bf16"), "a curve per dtype");
}

#[wasm_bindgen_test]
async fn a_hostile_calibration_file_renders_as_text() {
    use headroom_site::calibration_state::view;
    let hostile = "<img src=x onerror=\\\"window.__pwned=1\\\">";
    let text = CALIBRATION_FIXTURE.replacen(
        "\"gpu_name\": \"NVIDIA H100 80GB HBM3\"",
        &format!("\"gpu_name\": \"{hostile}\""),
        1,
    );
    let v = Rc::new(view("hostile.json", &text).expect("still a valid file"));
    let div = root();
    yew::Renderer::<Report>::with_root_and_props(div.clone(), ReportProps { view: v }).render();
    settle().await;
    // The chart is drawn once its box is laid out: wait for it (on a loaded machine one settle
    // is not always enough), then check that it is the only image.
    chart_svg(&div, "#chart-efficiency img").await;
    // The only image is the chart's, an SVG data URL (an image runs nothing).
    let imgs = div.query_selector_all("img").expect("images");
    for i in 0..imgs.length() {
        let img: web_sys::HtmlImageElement = imgs.get(i).expect("an image").unchecked_into();
        assert!(
            img.src().starts_with("data:image/svg+xml")
                && img.closest("#chart-efficiency").ok().flatten().is_some(),
            "{}",
            img.outer_html()
        );
    }
    assert!(
        js_sys::Reflect::get(&js_sys::global(), &"__pwned".into()).is_ok_and(|v| v.is_undefined())
    );
    assert!(
        div.text_content()
            .unwrap_or_default()
            .contains("<img src=x")
    );
}
