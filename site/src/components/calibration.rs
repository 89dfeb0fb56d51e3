//! A calibration file shown in full (header, constants, efficiency chart, bandwidths, errors,
//! scenario rows), and the calculator's note on which runtime constants it uses. Every value
//! from the file is rendered as text.

use std::rc::Rc;

use headroom_core::calibration::schema::{Constants, ErrorTable, LevelError, Status};
use headroom_core::format;
use yew::prelude::*;

use crate::calibration_state::{CalibrationView, UserCalibration, builtin_for};
use crate::charts::calibration::{height, svg};
use crate::dom;

#[derive(Properties, PartialEq)]
pub struct CalibrationReportProps {
    pub view: Rc<CalibrationView>,
}

fn opt(s: &Option<String>) -> String {
    s.clone().unwrap_or_else(|| "not recorded".into())
}

fn pct(x: f64) -> String {
    format!("{x:.2}%")
}

/// One constant as people read it.
fn show(key: &str, c: &Constants) -> (String, String) {
    let bytes = |b: u64| (format::bytes(b), b.to_string());
    let frac = |f: f64| (pct(f * 100.0), f.to_string());
    match key {
        "cuda_context_bytes" => bytes(c.cuda_context_bytes),
        "cublas_workspace_bytes" => bytes(c.cublas_workspace_bytes),
        "cublas_workspaces" => (
            c.cublas_workspaces.to_string(),
            c.cublas_workspaces.to_string(),
        ),
        "reserved_slack_fraction" => frac(c.reserved_slack_fraction),
        "reserved_slack_fraction_expandable" => frac(c.reserved_slack_fraction_expandable),
        _ => bytes(c.nccl_bytes),
    }
}

const CONSTANTS: [(&str, &str); 6] = [
    ("cuda_context_bytes", "CUDA context"),
    ("cublas_workspace_bytes", "cuBLAS workspace (each)"),
    ("cublas_workspaces", "cuBLAS workspaces alive"),
    (
        "reserved_slack_fraction",
        "Allocator slack (share of transient bytes)",
    ),
    (
        "reserved_slack_fraction_expandable",
        "Allocator slack, expandable segments",
    ),
    ("nccl_bytes", "NCCL buffers (more than one GPU)"),
];

/// One table cell: its text, and optionally the exact value (`data-value`) behind it.
struct Cell {
    text: String,
    value: Option<String>,
    /// A link target (already checked) for the cell's text.
    href: Option<String>,
}

fn cell(text: impl Into<String>) -> Cell {
    Cell {
        text: text.into(),
        value: None,
        href: None,
    }
}

fn bytes_cell(b: u64) -> Cell {
    Cell {
        text: format::bytes(b),
        value: Some(b.to_string()),
        href: None,
    }
}

/// One row: its `data-id`, the header cell, the rest.
struct Row {
    id: String,
    cells: Vec<Cell>,
}

/// A cell's content: its text, as a link when it has one.
fn content(c: &Cell) -> Html {
    match &c.href {
        Some(h) => html! { <a href={h.clone()}>{ &c.text }</a> },
        None => html! { { &c.text } },
    }
}

fn td(c: &Cell) -> Html {
    html! { <td data-value={c.value.clone()}>{ content(c) }</td> }
}

/// A table built from rows of text (one code path for every table on the page keeps the
/// download small). The first cell of each row is its header.
fn table(id: &'static str, caption: &str, head: &[&str], rows: &[Row]) -> Html {
    html! {
        <div class="table-wrap">
            <table id={id}>
                if !caption.is_empty() { <caption>{ caption }</caption> }
                <thead><tr>{ for head.iter().map(|h| html! { <th scope="col">{ *h }</th> }) }</tr></thead>
                <tbody>
                { for rows.iter().map(|r| {
                    let (first, rest) = r.cells.split_first().map_or((None, &[][..]), |(a, b)| (Some(a), b));
                    html! {
                        <tr data-id={r.id.clone()}>
                            <th scope="row">{ first.map(content).unwrap_or_default() }</th>
                            { for rest.iter().map(td) }
                        </tr>
                    }
                }) }
                </tbody>
            </table>
        </div>
    }
}

fn level_cells(e: Option<&LevelError>, out: &mut Vec<Cell>) {
    match e {
        Some(e) => out.extend([
            cell(pct(e.mean_abs_pct)),
            cell(pct(e.max_abs_pct)),
            cell(format!("{:+.2}%", e.mean_signed_pct)),
        ]),
        None => out.extend((0..3).map(|_| cell("—"))),
    }
}

/// Reads one level of an error table.
type PickLevel = fn(&ErrorTable) -> &LevelError;

fn errors_rows(before: Option<&ErrorTable>, after: Option<&ErrorTable>) -> Vec<Row> {
    let levels: [(&str, &str, PickLevel); 3] = [
        ("allocated", "Allocated (max_memory_allocated)", |t| {
            &t.allocated
        }),
        ("reserved", "Reserved (max_memory_reserved)", |t| {
            &t.reserved
        }),
        ("device", "Device (nvidia-smi)", |t| &t.device),
    ];
    levels
        .iter()
        .map(|(id, label, get)| {
            let mut cells = vec![cell(*label)];
            level_cells(before.map(get), &mut cells);
            level_cells(after.map(get), &mut cells);
            Row {
                id: (*id).to_string(),
                cells,
            }
        })
        .collect()
}

/// Everything in one calibration file (a function, not a component: it keeps no state, and
/// each component costs download size).
pub fn report(v: &Rc<CalibrationView>) -> Html {
    let f = &v.file;
    let m = &f.machine;
    let base = dom::base_path();
    let gpu = v.gpu_name.clone().unwrap_or_else(|| f.gpu_id.clone());
    let before = f.torch.held_out_before.as_ref();
    let after = f.torch.held_out_after.as_ref();
    let facts = [
        (
            "GPU",
            format!(
                "{} ({}, compute capability {}, {} SMs)",
                m.gpu_name, f.gpu_id, m.compute_capability, m.multiprocessors
            ),
        ),
        (
            "Driver",
            format!(
                "{} (CUDA {})",
                opt(&m.driver_version),
                m.driver_cuda_version
            ),
        ),
        (
            "CUDA",
            format!("{}; cuBLAS {}", f.software.cuda, opt(&m.cublas_version)),
        ),
        (
            "PyTorch",
            format!(
                "{} (CUDA {}), transformers {}",
                opt(&f.software.torch),
                opt(&f.software.torch_cuda),
                opt(&f.software.transformers)
            ),
        ),
        ("Measured on", f.measured_on.clone()),
        (
            "Mode",
            format!("{} run, stack {}", f.mode, f.software.stack),
        ),
    ];
    let constants: Vec<Row> = CONSTANTS
        .iter()
        .map(|(key, label)| {
            let (fitted, raw) = show(key, &f.constants);
            let source = f
                .constants_source
                .get(*key)
                .cloned()
                .unwrap_or_else(|| "not stated".into());
            Row {
                id: (*key).to_string(),
                cells: vec![
                    cell(format!("{label} ({key})")),
                    Cell {
                        text: fitted,
                        value: Some(raw),
                        href: None,
                    },
                    cell(show(key, &f.defaults).0),
                    cell(source),
                ],
            }
        })
        .collect();
    let native = &f.native;
    let mut measured: Vec<Row> = Vec::new();
    measured.extend(native.bandwidth.iter().map(|b| Row {
        id: b.kind.clone(),
        cells: vec![
            cell(format!(
                "{} ({})",
                b.kind.replace('_', " "),
                format::bytes(b.bytes)
            )),
            cell(format!("{:.1} GB/s", b.gb_per_s.median)),
            // 0 runs: the embedded copy, whose spreads wait for the fetched file.
            cell(match b.gb_per_s.reps {
                0 => "…".into(),
                _ => format!("{:.1} to {:.1}", b.gb_per_s.min, b.gb_per_s.max),
            }),
            cell(match b.gb_per_s.reps {
                0 => "…".into(),
                n => n.to_string(),
            }),
        ],
    }));
    measured.extend(native.bandwidth_failed.iter().map(|b| Row {
        id: b.dtype.clone(),
        cells: vec![
            cell(b.dtype.replace('_', " ")),
            cell(format!("failed: {}", b.reason)),
        ],
    }));
    let err = |e: Option<f64>| cell(e.map_or_else(|| "—".to_string(), |e| format!("{e:+.2}%")));
    let rows: Vec<Row> = v
        .rows
        .iter()
        .map(|r| {
            let measured = match (&r.measured, r.status) {
                (Some(m), Status::Ok) => bytes_cell(m.device),
                (_, Status::Oom) => cell("out of memory"),
                (_, Status::Error) => cell("error"),
                _ => cell("skipped"),
            };
            Row {
                id: r.id.clone(),
                cells: vec![
                    Cell {
                        text: r.id.clone(),
                        value: None,
                        href: r.link.as_ref().map(|q| format!("{base}/?{q}")),
                    },
                    cell(if r.held_out { "held out" } else { "fit" }),
                    measured,
                    bytes_cell(r.predicted_after.device),
                    err(r.device_error_after),
                    err(r.device_error_before),
                ],
            }
        })
        .collect();
    let torch = &f.torch;
    let notes: Vec<String> = v
        .fake
        .then(|| crate::help::page("calibration_fake"))
        .into_iter()
        .chain(v.gpu_name.is_none().then(|| format!(
            "The GPU id `{}` is not in Headroom's catalog, so no calculator scenario can use this file.",
            f.gpu_id
        )))
        .collect();
    let section = |id: &'static str, title: &str, help: String, body: Html| {
        html! {
            <section class="card" id={id}>
                <h2>{ title }</h2>
                if !help.is_empty() { <p class="help">{ help }</p> }
                { body }
            </section>
        }
    };
    html! {
        <article class="calibration" id="calibration-report" data-gpu={f.gpu_id.clone()}>
            <header class="card">
                <h1>{ format!("Calibration: {gpu}") }</h1>
                <p class="help">{ format!("From {}", v.name) }</p>
                <dl class="facts">
                    { for facts.iter().map(|(k, val)| html! { <div><dt>{ *k }</dt><dd>{ val }</dd></div> }) }
                </dl>
                { for notes.iter().map(|n| html! { <p class="notice" role="note">{ n }</p> }) }
            </header>
            { section("constants", "Runtime constants",
                crate::help::page("calibration_constants"),
                table("constants-table", "", &["Constant", "Fitted", "Default", "How it was found"], &constants)) }
            { section("matmul", "Matrix multiply throughput",
                crate::help::page("calibration_matmul"),
                html! {
                    <>
                        <EfficiencyChart view={v.clone()}/>
                        { for native.matmul_unsupported.iter().map(|u| html! {
                            <p class="help">{ format!("{} not measured: {}", u.dtype, u.reason) }</p>
                        }) }
                    </>
                }) }
            { section("native", "Copy bandwidth",
                format!("Allocation granularity {} (recommended {}).",
                    format::bytes(native.granularity_minimum_bytes), format::bytes(native.granularity_recommended_bytes)),
                table("bandwidth-table", "", &["Copy", "Median", "Range", "Runs"], &measured)) }
            { section("accuracy", "Predicted versus measured",
                if torch.status == "measured" {
                    format!("{} training scenarios in PyTorch ({} ran, {} out of memory, {} errors); {} fitted the constants, {} were held out. Device memory: {}.",
                        torch.scenarios, torch.ok, torch.oom, torch.errors, torch.train_rows, torch.held_out_rows, opt(&torch.device_method))
                } else {
                    format!("No PyTorch training steps ({}): {}", torch.status, opt(&torch.reason))
                },
                html! {
                    <>
                        if before.is_some() || after.is_some() {
                            { table("calibration-errors",
                                &crate::help::page("calibration_errors"),
                                &["Level", "Mean, defaults", "Max, defaults", "Signed, defaults", "Mean, fitted", "Max, fitted", "Signed, fitted"],
                                &errors_rows(before, after)) }
                        }
                        if !rows.is_empty() {
                            { table("calibration-rows",
                                &crate::help::page("calibration_rows"),
                                &["Scenario", "Split", "Measured", "Predicted", "Error", "Error with defaults"], &rows) }
                        }
                    </>
                }) }
        </article>
    }
}

/// The matmul efficiency curves as an SVG image (the page's width decides its size).
#[component]
pub fn EfficiencyChart(props: &CalibrationReportProps) -> Html {
    let img = use_node_ref();
    let size_tick = super::chart::use_resize_tick();
    {
        let img = img.clone();
        use_effect_with((props.view.clone(), size_tick), move |(view, _)| {
            if let Some(i) = img.cast::<web_sys::HtmlImageElement>() {
                super::chart::show_svg(&i, height, |width, dark| {
                    svg(&view.file.native.matmul, dark, width)
                });
            }
            dom::frame_done();
        });
    }
    let (curves, unit) = crate::charts::calibration::curves(&props.view.file.native.matmul);
    let dtypes: Vec<&str> = curves.iter().map(|c| c.dtype.as_str()).collect();
    html! {
        <figure class="chart" id="chart-efficiency">
            <div class="canvas-box">
                <img ref={img} role="img"
                     alt={format!("Matrix multiply throughput in {unit} against size, for {}", dtypes.join(", "))}/>
            </div>
        </figure>
    }
}

/// Which runtime constants the calculator uses: the user's file, a built-in calibration, or
/// (said by the key numbers) the documented defaults.
pub fn calibration_note(gpu: &str, user: Option<&UserCalibration>) -> Html {
    let base = dom::base_path();
    if let Some(u) = user.filter(|u| u.for_gpu(gpu).is_some()) {
        return html! {
            <p class="cal-note yours" id="calibration-note" data-source="yours">
                { format!("Runtime constants from your calibration file {}, measured {}. ", u.view.name, u.view.file.measured_on) }
                <a href={format!("{base}/calibration/yours")}>{ "See it" }</a>
            </p>
        };
    }
    match builtin_for(gpu) {
        Some((file, date)) => html! {
            <p class="cal-note" id="calibration-note" data-source="builtin">
                { format!("Runtime constants calibrated on {date}. ") }
                <a href={format!("{base}/calibration/{file}")}>{ "See the calibration" }</a>
            </p>
        },
        None => html! {},
    }
}
