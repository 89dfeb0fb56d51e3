//! The model: a preset, a size alone (`7b`: the typical layout of that size), or a custom
//! `config.json` pasted, uploaded or fetched from the Hub.

use std::rc::Rc;

use headroom_core::catalog::PresetCatalog;
use headroom_core::model::parse_config_json;
use headroom_core::scenario::ModelChoice;
use yew::prelude::*;

use crate::fields::model_options;
use crate::state::{Action, CalcState};

#[derive(Properties, PartialEq)]
pub struct PickerProps {
    pub state: Rc<CalcState>,
    pub dispatch: Callback<Action>,
    pub id_prefix: AttrValue,
}

const CUSTOM: &str = "__custom";

/// Parses config text into the scenario's model, or returns the message to show.
fn apply_config(text: &str, dispatch: &Callback<Action>) -> Result<(), String> {
    let spec = parse_config_json(text).map_err(|e| {
        let message = format!("This config cannot be used: {e}");
        dispatch.emit(Action::Refused("model".into(), message.clone()));
        message
    })?;
    crate::dom::edit_started();
    dispatch.emit(Action::CustomModel(Box::new(spec)));
    Ok(())
}

/// Puts a model given by its size (`7b`) into the scenario, or returns the message to show,
/// as [`apply_config`] does for a config.
fn apply_size(text: &str, dispatch: &Callback<Action>) -> Result<String, String> {
    let id = size_id(text).inspect_err(|e| {
        dispatch.emit(Action::Refused("model".into(), e.clone()));
    })?;
    crate::dom::edit_started();
    dispatch.emit(Action::Edit("model".into(), id.clone()));
    Ok(id)
}

/// The value of the text input behind `r` (empty when it is not mounted).
fn input_text(r: &NodeRef) -> String {
    r.cast::<web_sys::HtmlInputElement>()
        .map(|i| i.value())
        .unwrap_or_default()
}

/// Checks a size such as `7b` or `500m`; the id to put in the scenario, or the message.
fn size_id(text: &str) -> Result<String, String> {
    let id = text.trim().to_ascii_lowercase();
    match PresetCatalog::builtin().sized(&id) {
        Some(Ok(_)) => Ok(id),
        Some(Err(e)) => Err(e.to_string()),
        None => Err(format!(
            "`{}` is not a size: write the parameter count as 7b, 1.5b or 500m.",
            headroom_core::scenario::shorten(text.trim())
        )),
    }
}

/// The select's label for a model given by its size.
fn size_label(id: &str) -> String {
    format!(
        "A {} model (typical layout of that size)",
        id.to_ascii_uppercase()
    )
}

#[component]
pub fn ModelPicker(props: &PickerProps) -> Html {
    let custom_open = use_state(|| matches!(props.state.scenario.model, ModelChoice::Custom(_)));
    let message = use_state(|| None::<(bool, String)>);
    let paste_ref = use_node_ref();
    let hub_ref = use_node_ref();
    let size_ref = use_node_ref();
    let busy = use_state(|| false);
    let p = &props.id_prefix;
    let (select_id, paste_id, file_id, hub_id, size_input_id) = (
        format!("{p}-model"),
        format!("{p}-config-text"),
        format!("{p}-config-file"),
        format!("{p}-hub-id"),
        format!("{p}-model-size"),
    );

    let current = match &props.state.scenario.model {
        ModelChoice::Preset(id) => id.clone(),
        ModelChoice::Custom(_) => CUSTOM.to_string(),
    };
    let on_select = {
        let (dispatch, custom_open) = (props.dispatch.clone(), custom_open.clone());
        Callback::from(move |e: Event| {
            let Some(sel) = e.target_dyn_into::<web_sys::HtmlSelectElement>() else {
                return;
            };
            let v = sel.value();
            if v == CUSTOM {
                custom_open.set(true);
            } else {
                crate::dom::edit_started();
                dispatch.emit(Action::Edit("model".into(), v));
            }
        })
    };
    let on_paste_apply = {
        let (dispatch, message, paste_ref) =
            (props.dispatch.clone(), message.clone(), paste_ref.clone());
        Callback::from(move |_: MouseEvent| {
            let text = paste_ref
                .cast::<web_sys::HtmlTextAreaElement>()
                .map(|t| t.value())
                .unwrap_or_default();
            message.set(Some(match apply_config(&text, &dispatch) {
                Ok(()) => (true, "Using the pasted config.".into()),
                Err(e) => (false, e),
            }));
        })
    };
    let on_file = {
        let (dispatch, message) = (props.dispatch.clone(), message.clone());
        Callback::from(move |e: Event| {
            let Some(input) = e.target_dyn_into::<web_sys::HtmlInputElement>() else {
                return;
            };
            let Some(file) = input.files().and_then(|f| f.get(0)) else {
                return;
            };
            if file.size() > 2_000_000.0 {
                message.set(Some((
                    false,
                    "That file is over 2 MB: a config.json is a few KB.".into(),
                )));
                return;
            }
            let (dispatch, message) = (dispatch.clone(), message.clone());
            wasm_bindgen_futures::spawn_local(async move {
                let text = wasm_bindgen_futures::JsFuture::from(file.text()).await;
                let text = text.ok().and_then(|t| t.as_string());
                message.set(Some(match text {
                    Some(t) => match apply_config(&t, &dispatch) {
                        Ok(()) => (true, format!("Using {}.", file.name())),
                        Err(e) => (false, e),
                    },
                    None => (false, "The file could not be read as text.".into()),
                }));
            });
        })
    };
    let on_size = {
        let (dispatch, message, size_ref) =
            (props.dispatch.clone(), message.clone(), size_ref.clone());
        Callback::from(move |_: MouseEvent| {
            message.set(Some(match apply_size(&input_text(&size_ref), &dispatch) {
                Ok(id) => (
                    true,
                    format!(
                        "Using the typical layout of a {} model.",
                        id.to_ascii_uppercase()
                    ),
                ),
                Err(e) => (false, e),
            }));
        })
    };
    let on_fetch = {
        let (dispatch, message, hub_ref, busy) = (
            props.dispatch.clone(),
            message.clone(),
            hub_ref.clone(),
            busy.clone(),
        );
        Callback::from(move |_: MouseEvent| {
            let id = input_text(&hub_ref);
            let (dispatch, message, busy) = (dispatch.clone(), message.clone(), busy.clone());
            busy.set(true);
            message.set(Some((true, format!("Fetching {} ...", id.trim()))));
            wasm_bindgen_futures::spawn_local(async move {
                let result = crate::hub::fetch_config(&id).await;
                busy.set(false);
                message.set(Some(match result {
                    Ok(text) => match apply_config(&text, &dispatch) {
                        Ok(()) => (
                            true,
                            format!("Using {}'s config.json from the Hub.", id.trim()),
                        ),
                        Err(e) => (false, e),
                    },
                    Err(e) => (false, e),
                }));
            });
        })
    };

    let mut options = model_options();
    // A link's `model=7b`: the size is the selected entry, named as such.
    if current != CUSTOM && options.iter().all(|(v, _)| *v != current) && size_id(&current).is_ok()
    {
        options.insert(0, (current.clone(), size_label(&current)));
    }
    let custom_label = if current == CUSTOM {
        match &props.state.scenario.model {
            ModelChoice::Custom(spec) => crate::components::report::custom_label(spec),
            ModelChoice::Preset(_) => String::new(),
        }
    } else {
        "Custom config.json ...".to_string()
    };
    html! {
        <div class="model-picker">
            <div class="field">
                <label for={select_id.clone()}>{ "Model" }</label>
                <select id={select_id} onchange={on_select}>
                    { for options.into_iter().map(|(v, label)| {
                        let selected = v == current;
                        html! { <option value={v} {selected}>{ label }</option> }
                    }) }
                    <option value={CUSTOM} selected={current == CUSTOM}>{ custom_label }</option>
                </select>
                <p class="help">{ crate::help::page("model_help") }</p>
            </div>
            if *custom_open {
                <div class="custom-config">
                    <label for={paste_id.clone()}>{ "Paste a config.json" }</label>
                    <textarea id={paste_id} ref={paste_ref} rows="4" spellcheck="false"
                              placeholder={"{\"model_type\": \"llama\", \"hidden_size\": 4096, ...}"}/>
                    <div class="row">
                        <button type="button" onclick={on_paste_apply}>{ "Use pasted config" }</button>
                        <label class="file-label" for={file_id.clone()}>{ "or upload a file" }</label>
                        <input id={file_id} type="file" accept=".json,application/json" onchange={on_file}/>
                    </div>
                    <label for={size_input_id.clone()}>{ crate::help::page("size_label") }</label>
                    <div class="row">
                        <input id={size_input_id} ref={size_ref} type="text" placeholder="7b"
                               autocomplete="off" spellcheck="false"/>
                        <button type="button" onclick={on_size}>{ "Use size" }</button>
                    </div>
                    <label for={hub_id.clone()}>{ "Or fetch from the Hugging Face Hub" }</label>
                    <div class="row">
                        <input id={hub_id} ref={hub_ref} type="text" placeholder="Qwen/Qwen2.5-7B"
                               autocomplete="off" spellcheck="false"/>
                        <button type="button" onclick={on_fetch} disabled={*busy}>{ "Fetch" }</button>
                    </div>
                </div>
            }
            if let Some((ok, text)) = &*message {
                <p class={if *ok { "help ok" } else { "field-error" }} role="status" id="model-message">{ text }</p>
            }
        </div>
    }
}
