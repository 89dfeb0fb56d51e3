//! "Import your training config": a framework's config (axolotl, LLaMA-Factory, TRL, DeepSpeed,
//! accelerate) pasted or uploaded becomes the calculator's scenario, with every key's fate
//! listed. The reading runs in the on-demand worker (`worker.rs`), so its parsers and the
//! frameworks' tables are not part of the page's first download.

use headroom_core::codec::{decode_lenient, query_pairs};
use headroom_core::scenario::Scenario;
use yew::prelude::*;

use crate::state::Action;

#[derive(Properties, PartialEq)]
pub struct ImportProps {
    pub dispatch: Callback<Action>,
    pub id_prefix: AttrValue,
    /// The GPU chosen on the page, and how many: a config names neither (accelerate's
    /// num_processes aside), so the import keeps them.
    pub gpu: AttrValue,
    pub gpus: u32,
}

/// What the worker answered, applied to the default scenario on the page's GPUs; the message
/// and the report to show.
fn applied(
    answer: &[String],
    (gpu, gpus): (&str, u32),
    dispatch: &Callback<Action>,
) -> ((bool, String), Vec<String>) {
    let [query, unresolved, framework, report @ ..] = answer else {
        return ((false, "The import answered nothing.".into()), Vec::new());
    };
    let base = Scenario {
        gpu: gpu.to_string(),
        gpus,
        ..Scenario::default()
    };
    let (scen, errors) = match query_pairs(query) {
        Ok(pairs) => decode_lenient(base, &pairs),
        Err(e) => (base, vec![e]),
    };
    crate::dom::edit_started();
    dispatch.emit(Action::Replace(scen));
    let mut message = format!("Read as {framework}.");
    let mut ok = errors.is_empty();
    if !unresolved.is_empty() {
        ok = false;
        message.push(' ');
        message.push_str(&crate::help::page("import_unresolved").replacen("{}", unresolved, 1));
    }
    for e in errors {
        message.push_str(&format!(" {e}."));
    }
    ((ok, message), report.to_vec())
}

#[component]
pub fn ImportBox(props: &ImportProps) -> Html {
    let text_ref = use_node_ref();
    let message = use_state(|| None::<(bool, String)>);
    let report = use_state(Vec::<String>::new);
    let p = &props.id_prefix;
    let (text_id, file_id) = (format!("{p}-import-text"), format!("{p}-import-file"));

    // Reads `text` (a file called `name`) in the worker, then applies it.
    let run = {
        let (dispatch, message, report, gpu, gpus) = (
            props.dispatch.clone(),
            message.clone(),
            report.clone(),
            props.gpu.clone(),
            props.gpus,
        );
        Callback::from(move |(text, name): (String, String)| {
            let (dispatch, message, report, gpu) = (
                dispatch.clone(),
                message.clone(),
                report.clone(),
                gpu.clone(),
            );
            message.set(Some((true, "Reading ...".into())));
            wasm_bindgen_futures::spawn_local(async move {
                match crate::worker_client::request(&["import", &text, &name]).await {
                    Ok(answer) => {
                        let (m, lines) = applied(&answer, (&gpu, gpus), &dispatch);
                        message.set(Some(m));
                        report.set(lines);
                    }
                    Err(e) => {
                        message.set(Some((false, format!("This config cannot be read: {e}"))));
                        report.set(Vec::new());
                    }
                }
            });
        })
    };
    let on_read = {
        let (run, text_ref) = (run.clone(), text_ref.clone());
        Callback::from(move |_: MouseEvent| {
            let text = text_ref
                .cast::<web_sys::HtmlTextAreaElement>()
                .map(|t| t.value())
                .unwrap_or_default();
            run.emit((text, "pasted.yaml".into()));
        })
    };
    let on_file = {
        let (run, message) = (run.clone(), message.clone());
        Callback::from(move |e: Event| {
            let Some(file) = e
                .target_dyn_into::<web_sys::HtmlInputElement>()
                .and_then(|i| i.files())
                .and_then(|f| f.get(0))
            else {
                return;
            };
            let (run, message) = (run.clone(), message.clone());
            wasm_bindgen_futures::spawn_local(async move {
                let text = wasm_bindgen_futures::JsFuture::from(file.text()).await;
                match text.ok().and_then(|t| t.as_string()) {
                    Some(t) if t.len() <= 1_000_000 => run.emit((t, file.name())),
                    _ => message.set(Some((
                        false,
                        "The file could not be read as a config (text, under 1 MB).".into(),
                    ))),
                }
            });
        })
    };
    html! {
        <details class="group import-box" id={format!("{p}-group-import")}>
            <summary>{ "Import your training config" }</summary>
            <label for={text_id.clone()}>{ crate::help::page("import_label") }</label>
            <textarea id={text_id} ref={text_ref} rows="5" spellcheck="false"
                      placeholder={"base_model: meta-llama/Llama-3.1-8B\nadapter: qlora\nsequence_len: 4096"}/>
            <div class="row">
                <button type="button" id={format!("{p}-import-read")} onclick={on_read}>{ "Read config" }</button>
                <label class="file-label" for={file_id.clone()}>{ "or upload a file" }</label>
                <input id={file_id} type="file" accept=".yaml,.yml,.json,.toml" onchange={on_file}/>
            </div>
            if let Some((ok, text)) = &*message {
                <p class={if *ok { "help" } else { "field-error" }} role="status" id={format!("{p}-import-status")}>{ text }</p>
            }
            if !report.is_empty() {
                <ul class="import-report" id={format!("{p}-import-report")}>
                    { for report.iter().map(|line| match line.strip_prefix("# ") {
                        Some(title) => html! { <li class="title">{ title }</li> },
                        None => html! { <li>{ line }</li> },
                    }) }
                </ul>
            }
        </details>
    }
}
