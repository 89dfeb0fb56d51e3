//! A page per GPU and per model preset (and their lists), for readers and search engines that
//! land on "Llama 3.1 8B memory" or "what fits on an L4": the catalog's facts, and what three
//! common training recipes need, computed live by the core.

use headroom_core::catalog::{Gpu, GpuCatalog, Preset, PresetCatalog};
use headroom_core::codec::{self, decode};
use headroom_core::format;
use headroom_core::{Estimate, estimate};
use yew::prelude::*;

use crate::dom::{set_page, set_title};

/// Three recipes most people start from: full fine-tuning in mixed bf16 with AdamW, LoRA and
/// QLoRA (rank 16, all linear layers), each at micro-batch 1 with 2048-token sequences and
/// checkpointing every layer.
const RECIPES: [(&str, &str); 3] = [
    (
        "Full fine-tune (AMP bf16, AdamW)",
        "precision=amp-bf16&ckpt=full&seq=2048",
    ),
    (
        "LoRA (bf16 base)",
        "method=lora&precision=bf16&ckpt=full&seq=2048",
    ),
    (
        "QLoRA (4-bit base)",
        "method=qlora&precision=bf16&ckpt=full&seq=2048",
    ),
];

/// A recipe's estimate on one GPU and its link. On a GPU without bf16 (T4, V100), which the
/// core refuses to train in bf16, the recipe runs in fp16, as the planner would propose it there.
fn recipe(model: &str, gpu: &str, query: &str) -> Option<(Estimate, String)> {
    let mut scen = decode(&format!("model={model}&gpu={gpu}&{query}")).ok()?;
    scen.precision = scen.precision.for_gpu(GpuCatalog::builtin().get(gpu).ok()?);
    Some((estimate(&scen).ok()?, codec::encode(&scen)))
}

#[derive(Properties, PartialEq)]
struct FitsWithProps {
    /// The link of a recipe that does not fit.
    link: String,
}

/// What makes a recipe that does not fit fit on the same GPUs without changing the training:
/// the planner's ladder (its cheapest path, one change at a time, each step on a stack that
/// runs it), as "what" and its link. The on-demand worker computes it (the planner is not in
/// the page's bundle); nothing shows until it answers, or if no path fits.
#[component]
fn FitsWith(props: &FitsWithProps) -> Html {
    let fix = use_state(|| None::<(String, String)>);
    {
        let fix = fix.clone();
        use_effect_with(props.link.clone(), move |link| {
            let link = link.clone();
            wasm_bindgen_futures::spawn_local(async move {
                if let Ok([what, to]) = crate::worker_client::request(&["path", &link])
                    .await
                    .as_deref()
                {
                    fix.set(Some((what.clone(), to.clone())));
                }
            });
        });
    }
    let base = crate::dom::base_path();
    match &*fix {
        Some((what, link)) => html! {
            <span class="fits-with">{ "fits with " }
                <a href={format!("{base}/?{link}")}>{ what }</a></span>
        },
        None => html! {},
    }
}

/// A cell: the device peak, whether it fits, a link to the calculator on that scenario, and
/// for a recipe that does not fit, the changes that make it fit.
fn fit_cell(result: Option<(Estimate, String)>) -> Html {
    let base = crate::dom::base_path();
    match result {
        Some((e, link)) => {
            let fits = e.verdict.fits;
            html! {
                <td class={classes!("num", if fits { "fits" } else { "no-fit" })}
                    data-value={e.peak.device.to_string()}>
                    <a href={format!("{base}/?{link}")}>
                        { format::bytes(e.peak.device) }{ if fits { " ✓" } else { " ✗" } }
                    </a>
                    if !fits {
                        <FitsWith link={link.clone()}/>
                    }
                </td>
            }
        }
        None => html! { <td>{ "–" }</td> },
    }
}

/// The recipes' column headers on `g`'s page: their bf16 reads fp16 where the GPU has no bf16
/// (its figures are the fp16 runs, `recipe`).
fn recipe_headers(g: &Gpu) -> Html {
    use headroom_core::scenario::Precision;
    let half = if Precision::Bf16.for_gpu(g) == Precision::Bf16 {
        "bf16"
    } else {
        "fp16"
    };
    html! { { for RECIPES.iter().map(|(label, _)| html! {
        <th scope="col">{ label.replace("bf16", half) }</th>
    }) } }
}

fn tf(v: Option<f64>) -> String {
    v.map_or_else(|| "–".into(), |v| format!("{v}"))
}

/// The memory line: nvidia-smi's total, or what CUDA reports where a calibration measured it
/// (the figure the verdict uses).
fn memory_fact(g: &Gpu) -> String {
    let usable = headroom_core::Calibration::for_gpu(g).capacity(g);
    if usable < g.total_bytes {
        format!(
            "{} GB {} ({} usable as CUDA reports it, measured; nvidia-smi shows {})",
            g.memory_gb,
            g.memory_type,
            format::bytes(usable),
            format::bytes(g.total_bytes)
        )
    } else {
        format!(
            "{} GB {} ({} usable)",
            g.memory_gb,
            g.memory_type,
            format::bytes(g.total_bytes)
        )
    }
}

fn gpu_facts(g: &Gpu) -> Html {
    let t = &g.dense_tflops;
    html! {
        <dl class="facts">
            <div><dt>{ "Memory" }</dt><dd>{ memory_fact(g) }</dd></div>
            <div><dt>{ "Bandwidth" }</dt><dd>{ format!("{} GB/s", g.memory_bandwidth_gbs) }</dd></div>
            <div><dt>{ "Dense bf16 / fp16 / tf32" }</dt><dd>{ format!("{} / {} / {} TFLOP/s", tf(t.bf16), tf(t.fp16), tf(t.tf32)) }</dd></div>
            <div><dt>{ "Architecture" }</dt><dd>{ format!("{} ({}), compute capability {}", g.architecture, g.vendor, g.compute_capability) }</dd></div>
            <div><dt>{ "Host link" }</dt><dd>{ format!("{} ({} GB/s)", g.host_link, g.host_link_gbs) }</dd></div>
            if !g.peer_link.is_empty() {
                <div><dt>{ "GPU-to-GPU link" }</dt><dd>{ format!("{} ({} GB/s)", g.peer_link, g.peer_link_gbs) }</dd></div>
            }
        </dl>
    }
}

#[component]
pub fn GpuList() -> Html {
    set_title("GPUs");
    let base = crate::dom::base_path();
    html! {
        <main class="page narrow" id="main">
            <h1>{ "GPUs" }</h1>
            <p class="lede">{ crate::help::page("gpus_lede") }</p>
            <ul class="catalog-list">
                { for GpuCatalog::builtin().gpus.iter().map(|g| html! {
                    <li><a href={format!("{base}/gpus/{}", g.id)}>{ g.name.clone() }</a>
                        { format!(" · {}", format::bytes(g.total_bytes)) }</li>
                }) }
            </ul>
        </main>
    }
}

#[derive(Properties, PartialEq)]
pub struct IdProps {
    pub id: AttrValue,
}

fn missing(what: &str, list: &str) -> Html {
    set_title(&format!("No such {what}"));
    html! {
        <main class="page narrow" id="main">
            <h1>{ format!("No such {what}") }</h1>
            <p><a href={format!("{}/{list}", crate::dom::base_path())}>{ format!("See the {list}") }</a></p>
        </main>
    }
}

#[component]
pub fn GpuPage(props: &IdProps) -> Html {
    let Ok(g) = GpuCatalog::builtin().get(&props.id) else {
        return missing("GPU", "gpus");
    };
    set_page(
        &format!("{}: what fits for training", g.name),
        Some(&crate::help::page("gpu_meta").replacen("{}", &g.name, 1)),
    );
    let mut presets: Vec<&Preset> = PresetCatalog::builtin().presets.iter().collect();
    presets.sort_by_key(|p| p.parameters_total);
    let base = crate::dom::base_path();
    html! {
        <main class="page" id="main">
            <h1>{ g.name.clone() }</h1>
            { gpu_facts(g) }
            <h2>{ "What fits on one" }</h2>
            <p class="help">{ crate::help::page("gpu_fits") }</p>
            <div class="table-wrap">
                <table class="calc-table" id="fits-table">
                    <thead><tr><th scope="col">{ "Model" }</th>{ recipe_headers(g) }</tr></thead>
                    <tbody>
                        { for presets.iter().map(|p| html! {
                            <tr>
                                <th scope="row"><a href={format!("{base}/models/{}", p.id)}>{ p.name.clone() }</a></th>
                                { for RECIPES.iter().map(|(_, q)| fit_cell(recipe(&p.id, &g.id, q))) }
                            </tr>
                        }) }
                    </tbody>
                </table>
            </div>
        </main>
    }
}

#[component]
pub fn ModelList() -> Html {
    set_title("Models");
    let base = crate::dom::base_path();
    let mut presets: Vec<&Preset> = PresetCatalog::builtin().presets.iter().collect();
    presets.sort_by_key(|p| p.parameters_total);
    html! {
        <main class="page narrow" id="main">
            <h1>{ "Models" }</h1>
            <p class="lede">{ crate::help::page("models_lede") }</p>
            <ul class="catalog-list">
                { for presets.iter().map(|p| html! {
                    <li><a href={format!("{base}/models/{}", p.id)}>{ p.name.clone() }</a>
                        { format!(" · {} parameters", format::count(p.parameters_total)) }</li>
                }) }
            </ul>
        </main>
    }
}

#[component]
pub fn ModelPage(props: &IdProps) -> Html {
    let Ok(p) = PresetCatalog::builtin().get(&props.id) else {
        return missing("model", "models");
    };
    set_page(
        &format!("{}: GPU memory to train and fine-tune", p.name),
        Some(&crate::help::page("model_meta").replacen("{}", &p.name, 1)),
    );
    let s = &p.spec;
    let mut gpus: Vec<&Gpu> = GpuCatalog::builtin().gpus.iter().collect();
    gpus.sort_by_key(|g| g.total_bytes);
    // The smallest single GPU each recipe fits on (catalog order by memory).
    let smallest = |q: &str| {
        gpus.iter().find_map(|g| {
            let (e, link) = recipe(&p.id, &g.id, q)?;
            e.verdict.fits.then(|| (g.name.clone(), g.id.clone(), link))
        })
    };
    let base = crate::dom::base_path();
    html! {
        <main class="page" id="main">
            <h1>{ p.name.clone() }</h1>
            <dl class="facts">
                <div><dt>{ "Parameters" }</dt><dd>{ format!("{} ({})", crate::components::num::grouped(p.parameters_total), format::count(p.parameters_total)) }</dd></div>
                <div><dt>{ "Architecture" }</dt><dd>{ format!("{}: {} layers, hidden {}, {} heads ({} key/value), MLP {}", s.model_type, s.layers, s.hidden, s.heads, s.kv_heads, s.intermediate) }</dd></div>
                <div><dt>{ "Vocabulary" }</dt><dd>{ crate::components::num::grouped(s.vocab) }</dd></div>
                <div><dt>{ "Config" }</dt><dd><a href={format!("https://huggingface.co/{}", p.hf_id)} rel="noopener">{ p.hf_id.clone() }</a></dd></div>
            </dl>
            <h2>{ "Memory to train it on one GPU" }</h2>
            <p class="help">{ crate::help::page("model_recipes") }</p>
            <div class="table-wrap">
                <table class="calc-table" id="recipes-table">
                    <thead><tr><th scope="col">{ "Recipe" }</th><th scope="col">{ "Peak on an H100" }</th><th scope="col">{ "Smallest GPU that fits" }</th></tr></thead>
                    <tbody>
                        { for RECIPES.iter().map(|(label, q)| html! {
                            <tr>
                                <th scope="row">{ *label }</th>
                                { fit_cell(recipe(&p.id, "h100-sxm-80gb", q)) }
                                { match smallest(q) {
                                    Some((name, id, link)) => html! {
                                        <td><a href={format!("{base}/gpus/{id}")}>{ name }</a>
                                            { " · " }<a href={format!("{base}/?{link}")}>{ "open" }</a></td>
                                    },
                                    None => html! { <td>{ "none alone: shard it over several GPUs" }</td> },
                                } }
                            </tr>
                        }) }
                    </tbody>
                </table>
            </div>
            <p><a class="button-like" href={format!("{base}/?model={}", p.id)}>{ "Open in the calculator" }</a></p>
        </main>
    }
}
