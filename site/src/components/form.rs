//! The scenario's inputs, grouped; each edit is sent by link key and checked by the core.

use std::rc::Rc;

use headroom_core::codec::field_value;
use wasm_bindgen::JsCast;
use yew::prelude::*;

use super::model_picker::ModelPicker;
use crate::fields::{Control, Field, GROUPS};
use crate::state::{Action, CalcState};

#[derive(Properties, PartialEq)]
pub struct FormProps {
    pub state: Rc<CalcState>,
    pub dispatch: Callback<Action>,
    /// Prefix of element ids, so two forms can share a page (comparison).
    #[prop_or(AttrValue::from("f"))]
    pub id_prefix: AttrValue,
    /// Open every group (the full calculator) or only the first ones (comparison).
    #[prop_or(true)]
    pub open_defaults: bool,
}

fn target_value(e: &Event) -> Option<String> {
    let target = e.target()?;
    if let Some(i) = target.dyn_ref::<web_sys::HtmlInputElement>() {
        if i.type_() == "checkbox" {
            return Some(if i.checked() { "1" } else { "0" }.into());
        }
        return Some(i.value());
    }
    target
        .dyn_ref::<web_sys::HtmlSelectElement>()
        .map(web_sys::HtmlSelectElement::value)
}

/// One input: its label, control, help and error. The guides' calculator blocks draw their
/// inputs with it too, so a field reads and validates the same everywhere.
pub fn field_input(
    field: &Field,
    state: &CalcState,
    dispatch: &Callback<Action>,
    id_prefix: &str,
) -> Html {
    if !(field.shown)(&state.scenario) {
        return html! {};
    }
    let id = format!("{id_prefix}-{}", field.key);
    let key = field.key.to_string();
    let value = state
        .drafts
        .get(field.key)
        .cloned()
        .or_else(|| field_value(&state.scenario, field.key))
        .unwrap_or_default();
    // A link may name its GPU by an alias (`gpu=h100-sxm`, as the CLI writes it): the select
    // shows the catalog entry it resolves to, not the list's first.
    let alias = |g: &&headroom_core::catalog::Gpu| g.aliases.contains(&value);
    let value = match headroom_core::catalog::GpuCatalog::builtin()
        .gpus
        .iter()
        .find(alias)
    {
        Some(g) if field.key == "gpu" => g.id.clone(),
        _ => value,
    };
    let error = state.field_errors.get(field.key);
    let err_id = format!("{id}-error");
    let help_id = format!("{id}-help");
    let describedby = if error.is_some() {
        format!("{help_id} {err_id}")
    } else {
        help_id.clone()
    };
    let dispatch = dispatch.clone();
    let on_value = Callback::from(move |e: Event| {
        if let Some(v) = target_value(&e) {
            crate::dom::edit_started();
            dispatch.emit(Action::Edit(key.clone(), v));
        }
    });
    let on_input = {
        let on_value = on_value.clone();
        Callback::from(move |e: InputEvent| on_value.emit(e.into()))
    };
    let control = match field.control {
        Control::Select(options) => html! {
            <select id={id.clone()} onchange={on_value} aria-describedby={describedby}>
                { for options(&state.scenario).into_iter().map(|(v, label)| {
                    let selected = v == value;
                    html! { <option value={v} {selected}>{ label }</option> }
                }) }
            </select>
        },
        Control::Number { min, max, step } => html! {
            <input id={id.clone()} type="number" inputmode="decimal" value={value}
                   min={min.to_string()} max={max.to_string()} step={step.to_string()}
                   oninput={on_input} aria-invalid={error.is_some().to_string()}
                   aria-describedby={describedby}
                   placeholder={if field.key == "dropout" { "config's" } else { "" }}/>
        },
        Control::Check => html! {
            <input id={id.clone()} type="checkbox" checked={value == "1"} onchange={on_value}
                   aria-describedby={describedby}/>
        },
    };
    let check = matches!(field.control, Control::Check);
    html! {
        <div class={classes!("field", check.then_some("check"))} data-key={field.key}>
            if check {
                { control }
                <label for={id.clone()}>{ field.label }</label>
            } else {
                <label for={id.clone()}>{ field.label }</label>
                { control }
            }
            <p class="help" id={help_id}>{ crate::help::text(field.key) }</p>
            if let Some(msg) = error {
                <p class="field-error" id={err_id} role="alert">{ msg }</p>
            }
        </div>
    }
}

#[component]
pub fn ScenarioForm(props: &FormProps) -> Html {
    html! {
        <form class="scenario-form" onsubmit={Callback::from(|e: SubmitEvent| e.prevent_default())}
              aria-label="Training scenario">
            <fieldset class="group" id={format!("{}-group-model", props.id_prefix)}>
                <legend>{ "Model" }</legend>
                <ModelPicker state={props.state.clone()} dispatch={props.dispatch.clone()}
                             id_prefix={props.id_prefix.clone()}/>
            </fieldset>
            <super::import::ImportBox dispatch={props.dispatch.clone()} id_prefix={props.id_prefix.clone()}
                                      gpu={props.state.scenario.gpu.clone()} gpus={props.state.scenario.gpus}/>
            { for GROUPS.iter().map(|g| {
                html! {
                    <details class="group" open={g.open && props.open_defaults}
                             id={format!("{}-group-{}", props.id_prefix, g.id)}>
                        <summary>{ g.title }</summary>
                        { for g.fields.iter().map(|f| field_input(f, &props.state, &props.dispatch, &props.id_prefix)) }
                    </details>
                }
            }) }
        </form>
    }
}
