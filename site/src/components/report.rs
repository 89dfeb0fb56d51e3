//! The results of one analysis: verdict, headline numbers, breakdown, layer tensors (the
//! strategy table and next steps: `strategies.rs`).
//! Every component can show its formula, source and confidence.
//!
//! The breakdown's "At the peak" column reads `Peaks::parts`.

use headroom_core::Analysis;
use headroom_core::catalog::GpuCatalog;
use headroom_core::estimate::{Component, Lifetime};
use headroom_core::format;
use yew::prelude::*;

use super::num::Bytes;

#[derive(Properties, PartialEq)]
pub struct AnalysisProps {
    pub analysis: std::rc::Rc<Analysis>,
    /// Number of GPUs (for the verdict's wording).
    pub gpus: u32,
    /// The analysis used the built-in calibration even where the user loaded one (embeds): the
    /// worker's strategy table must too.
    #[prop_or_default]
    pub builtin: bool,
}

pub fn gpu_name(id: &str) -> String {
    GpuCatalog::builtin()
        .get(id)
        .map_or_else(|_| id.to_string(), |g| g.name.clone())
}

/// A custom model as the page names it: its type and shape.
pub fn custom_label(spec: &headroom_core::model::ModelSpec) -> String {
    format!(
        "Custom {} ({} layers, hidden {})",
        spec.model_type, spec.layers, spec.hidden
    )
}

/// A model's name as people know it: the preset's name, or the id the estimate carries.
pub fn model_name(id: &str) -> String {
    match id {
        "custom" => "Your config.json".into(),
        _ => headroom_core::catalog::PresetCatalog::builtin()
            .get(id)
            .map_or_else(|_| id.to_string(), |p| p.name.clone()),
    }
}

/// Fits or not, the headroom, and what would fit.
#[component]
pub fn Verdict(props: &AnalysisProps) -> Html {
    let e = &props.analysis.estimate;
    let v = &e.verdict;
    let class = if v.fits {
        "verdict fits"
    } else {
        "verdict oom"
    };
    let gpu = gpu_name(&v.gpu);
    let per = if props.gpus > 1 { " per GPU" } else { "" };
    // The model is named, so an answer never reads as another model's.
    let headline = if v.fits {
        format!("{}: fits on {} x {gpu}", model_name(&e.model), props.gpus)
    } else {
        format!(
            "{}: does not fit on {} x {gpu}",
            model_name(&e.model),
            props.gpus
        )
    };
    // What fits, when the page asked for it.
    let fit = props.analysis.fit.map(|fit| {
        let max_batch = fit
            .max_micro_batch
            .map_or_else(|| "none (not even 1)".to_string(), |b| b.to_string());
        let max_seq = fit
            .max_seq
            .map_or_else(|| "none (not even 1 token)".to_string(), |s| s.to_string());
        html! {
            <dl class="fit">
                <div><dt>{ "Largest micro-batch that fits" }</dt>
                     <dd id="max-batch">{ max_batch }</dd></div>
                <div><dt>{ "Longest sequence that fits" }</dt>
                     <dd id="max-seq">{ max_seq }</dd></div>
            </dl>
        }
    });
    html! {
        <section class={class} id="verdict" aria-live="polite" data-fits={v.fits.to_string()}>
            <h2>{ headline }</h2>
            <p class="verdict-line">
                { "Peak " }<Bytes bytes={e.peak.device} id="peak-device"/>{ per }
                { " of " }<Bytes bytes={v.capacity} id="capacity"/>
                // Headroom can be positive where the run fails on something else (host RAM,
                // vLLM refusing to start): the figure says which way the memory goes.
                { if v.headroom >= 0 { " — headroom " } else { " — short by " } }
                <span class="num" id="headroom" data-bytes={v.headroom.to_string()}>
                    { format::bytes(v.headroom.unsigned_abs()) }
                </span>
                { format!(" ({:.1}%)", v.headroom_percent.abs()) }
            </p>
            <p class="verdict-line">
                { if e.peak.at == e.peak.phase.label() {
                    format!("The peak is in the {}.", e.peak.phase.label())
                } else {
                    format!("The peak is in the {} ({}).", e.peak.phase.label(), e.peak.at)
                } }
                // Which level the verdict judges, and why that one (content/help.toml).
                { " " }{ crate::help::page("verdict_level") }
            </p>
            if v.host_per_node > 0 {
                <p class={classes!("verdict-line", (!v.host_fits).then_some("no-fit"))} id="host-line">
                    { format!("Host (CPU) RAM for offloading: {} per GPU, {} per node{}.",
                        format::bytes(e.bytes.host), format::bytes(v.host_per_node),
                        if v.host_ram == 0 { crate::help::page("host_ram_unset") }
                        else if v.host_fits { format!(", within the node's {}", format::bytes(v.host_ram)) }
                        else { format!(": more than the node's {}", format::bytes(v.host_ram)) }) }
                </p>
            }
            if v.margin > 0 {
                <p class="verdict-line">{ format!("Safety margin: {} kept free.", format::bytes(v.margin)) }</p>
            }
            if v.tight {
                <p class="notice" role="note" id="tight">{ crate::help::page("tight_note") }</p>
            }
            <p class="verdict-line">{ format!("Attention: {}.", e.attention) }</p>
            if !e.vision.is_empty() {
                <p class="verdict-line" id="vision">{ format!("Images: {}.", e.vision) }</p>
            }
            if !e.fp8.is_empty() {
                <p class="verdict-line" id="fp8">{ format!("fp8: {}.", e.fp8) }</p>
            }
            if !e.mtp.is_empty() {
                <p class="verdict-line" id="mtp">{ format!("Multi-token prediction: {}.", e.mtp) }</p>
            }
            if !e.context.is_empty() {
                <p class="verdict-line" id="sequence">{ e.context.clone() }</p>
            }
            if v.fits {
                <p class="verdict-line" id="speed">{ speed_line(&props.analysis.time) }</p>
            }
            { for e.warnings.iter().map(|w| html! { <p class="notice" role="note">{ w.clone() }</p> }) }
            { for fit }
            <super::strategies::NextStep analysis={props.analysis.clone()} gpus={props.gpus} builtin={props.builtin}/>
        </section>
    }
}

/// The scenario's speed from the time model, with the assumptions it rests on.
fn speed_line(t: &headroom_core::time::StepTime) -> String {
    let a = &t.assumptions;
    let (slow, fast) = t.band().tokens_per_second;
    format!(
        "Speed (time model{}): {} tok/s ({} to {} in eight of ten measured steps), {:.2} s per optimizer step, MFU {:.0}%. Assumed: {:.0}% of the GPU's matmul peak reached by the framework, {} GPUs per node, {:.0} GB/s between nodes (Advanced overheads sets them).",
        if t.confidence == headroom_core::estimate::Confidence::Calibrated {
            ", calibrated"
        } else {
            ""
        },
        super::num::grouped(t.tokens_per_second.round() as u64),
        super::num::grouped(slow.round() as u64),
        super::num::grouped(fast.round() as u64),
        t.step_seconds,
        t.mfu * 100.0,
        a.framework_efficiency * 100.0,
        a.gpus_per_node,
        a.internode_gbs
    )
}

/// A one-line verdict that stays at the bottom of a phone's screen while the inputs scroll.
#[component]
pub fn VerdictBar(props: &AnalysisProps) -> Html {
    let e = &props.analysis.estimate;
    let v = &e.verdict;
    html! {
        <div class={classes!("verdict-bar", (!v.fits).then_some("oom"))} aria-hidden="true">
            <span>
                <strong>{ if v.fits { "Fits" } else { "Does not fit" } }</strong>
                { format!(": peak {} of {}", format::bytes(e.peak.device), format::bytes(v.capacity)) }
            </span>
            <a href="#verdict">{ "Details" }</a>
        </div>
    }
}

/// The headline numbers, each with what it means.
#[component]
pub fn KeyNumbers(props: &AnalysisProps) -> Html {
    let e = &props.analysis.estimate;
    let b = &e.bytes;
    let row = |id: &'static str, label: &'static str, bytes: u64, note: &str| {
        html! {
            <tr><th scope="row">{ label }</th>
                <td><Bytes bytes={bytes} id={id}/></td>
                <td class="note">{ note }</td></tr>
        }
    };
    html! {
        <section class="card" aria-labelledby="key-title">
            <h2 id="key-title">{ "Where the memory goes" }</h2>
            <p class="params">
                { format!("{} parameters ({} trainable, {} per GPU before sharding). ",
                    format::count(e.parameters.total), format::count(e.parameters.trainable),
                    format::count(e.parameters.per_gpu)) }
                <span id="params-total" data-count={e.parameters.total.to_string()}>
                    { format!("Exactly {}.", super::num::grouped(e.parameters.total)) }
                </span>
            </p>
            <table class="numbers">
                <tbody>
                    { row("weights", "Weights", b.weights, "per GPU, after LoRA/QLoRA and sharding") }
                    { row("gradients", "Gradients", b.gradients, "of the trainable parameters") }
                    { row("optimizer-states", "Optimizer states", b.optimizer_states, "incl. fp32 master weights where kept") }
                    { row("activations-per-layer", "Activations, one layer", b.activations_per_layer, &layer_note(&props.analysis.link)) }
                    { row("retained", "Alive after forward + loss", b.retained_after_forward, "saved activations, weight copies, loss buffers") }
                    { row("peak-tensors", "Peak, live tensors", b.peak_tensors, "torch.cuda.max_memory_allocated") }
                    { row("peak-allocated", "Peak, allocated", b.peak_allocated, "with 512-byte rounding and cuBLAS workspaces") }
                    { row("peak-reserved", "Peak, reserved", b.peak_reserved, "torch.cuda.max_memory_reserved") }
                    { row("peak-device", "Peak, device", b.peak_device, "nvidia-smi: reserved + CUDA context + NCCL") }
                    if b.host > 0 { { row("host", "Host (CPU) memory", b.host, "offloaded states or activations") } }
                    if b.nvme > 0 { { row("nvme", "NVMe", b.nvme, "ZeRO-Infinity offload") } }
                </tbody>
            </table>
            if !e.calibrated {
                <p class="note">{ crate::help::page("defaults_note") }</p>
            }
        </section>
    }
}

/// What "Activations, one layer" is under the scenario's checkpointing (from its link).
fn layer_note(link: &str) -> String {
    use headroom_core::scenario::Checkpointing as C;
    match headroom_core::codec::decode(link).map(|s| s.checkpointing) {
        Ok(C::Selective) => {
            "without checkpointing (selective recompute drops the s x s scores)".into()
        }
        Ok(c @ (C::Full | C::Every(_))) => format!(
            "without checkpointing; checkpointed layers ({}) keep only their input",
            c.label()
        ),
        _ => "tensors autograd saves, no checkpointing".into(),
    }
}

/// What a confidence means, for people (content/help.toml's `[page]` table).
fn confidence_help(c: headroom_core::Confidence) -> String {
    use headroom_core::Confidence::{Assumed, Calibrated, Exact};
    match c {
        Exact => crate::help::page("confidence_exact"),
        Calibrated => crate::help::page("confidence_calibrated"),
        Assumed => crate::help::page("confidence_assumed"),
    }
}

/// One row of the breakdown with its explanation on demand, and its bytes live at the peak.
fn component_row(c: &Component, at_peak: Option<u64>) -> Html {
    let (conf, conf_help) = (c.confidence.id(), confidence_help(c.confidence));
    let life = c.lifetime.id();
    html! {
        <tr class={classes!("component", life)} data-id={c.id}>
            <th scope="row">
                <details class="why">
                    <summary>{ &c.name }</summary>
                    <dl>
                        <dt>{ "Formula" }</dt><dd><code>{ &c.formula }</code></dd>
                        <dt>{ "Source" }</dt><dd>{ crate::help::source(c) }</dd>
                        <dt>{ "Confidence" }</dt><dd>{ format!("{conf}: {conf_help}") }</dd>
                        <dt>{ "Level" }</dt><dd>{ c.level.id() }</dd>
                    </dl>
                </details>
            </th>
            <td><Bytes bytes={c.bytes}/></td>
            <td class="at-peak">{ for at_peak.map(|b| html! { <Bytes bytes={b}/> }) }</td>
            <td>{ life }</td>
            <td>{ c.phase.label() }</td>
            <td><span class={classes!("badge", conf)} title={conf_help}>{ conf }</span></td>
        </tr>
    }
}

/// Every component: persistent first, then transient, largest first within each; beside each,
/// its bytes live at the tensor peak.
#[component]
pub fn BreakdownTable(props: &AnalysisProps) -> Html {
    let e = &props.analysis.estimate;
    let mut rows: Vec<&Component> = e.components.iter().filter(|c| c.bytes > 0).collect();
    let at_peak = |c: &Component| {
        e.peak
            .parts
            .iter()
            .find(|p| p.id.id() == c.id)
            .map(|p| p.bytes)
    };
    // The rows on the GPU (host memory is not).
    let sum: u64 = rows
        .iter()
        .filter(|c| c.level != headroom_core::estimate::Level::Host)
        .map(|c| c.bytes)
        .sum();
    // Host memory (not on the GPU) last.
    rows.sort_by_key(|c| {
        (
            c.level == headroom_core::estimate::Level::Host,
            c.lifetime == Lifetime::Transient,
            std::cmp::Reverse(c.bytes),
        )
    });
    html! {
        <div class="table-wrap">
            <table class="breakdown" id="breakdown-table">
                <caption>{ "Open a row for its formula, source and confidence." }</caption>
                <thead><tr><th scope="col">{ "Component" }</th><th scope="col">{ "Bytes" }</th>
                    <th scope="col">{ "At the peak" }</th>
                    <th scope="col">{ "Lifetime" }</th><th scope="col">{ "Phase" }</th>
                    <th scope="col">{ "Confidence" }</th></tr></thead>
                <tbody>{ for rows.into_iter().map(|c| component_row(c, at_peak(c))) }</tbody>
                <tfoot><tr><th scope="row">{ "Live tensors at the peak" }</th>
                    <td></td><td><Bytes bytes={e.peak.tensors} id="breakdown-peak"/></td></tr></tfoot>
            </table>
            <p class="note" id="breakdown-why">{ crate::help::page("breakdown_why").replacen("{}", &format::bytes(sum), 1) }</p>
        </div>
    }
}

/// Every tensor one decoder layer saves for backward. The rows' labels are not in the page's
/// download (headroom-core's `inventory-text`): the worker, which has them, answers them for the
/// scenario's link when the table is first opened, and again when the link changes while open.
#[component]
pub fn LayerInventory(props: &AnalysisProps) -> Html {
    let inv = &props.analysis.estimate.layer_inventory;
    let open = use_state(|| false);
    let labels = use_state(|| None::<(String, Vec<String>)>);
    {
        let labels = labels.clone();
        let wanted = (*open).then(|| props.analysis.link.clone());
        use_effect_with(wanted, move |wanted| {
            if let Some(link) = wanted.clone() {
                wasm_bindgen_futures::spawn_local(async move {
                    let got = crate::worker_client::request(&["labels", &link]).await;
                    labels.set(Some((link, got.unwrap_or_default())));
                });
            }
        });
    }
    let ontoggle = {
        let open = open.clone();
        Callback::from(move |e: Event| {
            let details: web_sys::HtmlDetailsElement = e.target_unchecked_into();
            open.set(details.open());
        })
    };
    let names: &[String] = match &*labels {
        Some((link, names)) if *link == props.analysis.link && names.len() == inv.len() => names,
        _ => &[],
    };
    html! {
        <details class="card inventory" {ontoggle}>
            <summary><h2>{ "What one layer saves for backward" }</h2></summary>
            <div class="table-wrap">
                <table>
                    <thead><tr><th scope="col">{ "Tensor" }</th><th scope="col">{ "Elements" }</th>
                        <th scope="col">{ "dtype" }</th><th scope="col">{ "Bytes" }</th></tr></thead>
                    <tbody>
                    { for inv.iter().enumerate().map(|(i, s)| html! {
                        <tr><th scope="row">{ names.get(i).map_or("…", String::as_str) }</th>
                            <td>{ super::num::grouped(s.elements * s.copies.max(1)) }</td>
                            <td>{ s.dtype.torch_name() }</td>
                            <td><Bytes bytes={s.bytes()}/></td></tr>
                    }) }
                    </tbody>
                </table>
            </div>
        </details>
    }
}
