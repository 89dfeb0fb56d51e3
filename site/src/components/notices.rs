//! Messages about the link the page was opened with (each names the field that was wrong).

use yew::prelude::*;

#[derive(Properties, PartialEq)]
pub struct LinkErrorsProps {
    pub errors: Vec<String>,
    pub on_dismiss: Callback<()>,
}

#[component]
pub fn LinkErrors(props: &LinkErrorsProps) -> Html {
    if props.errors.is_empty() {
        return html! {};
    }
    let dismiss = props.on_dismiss.reform(|_: MouseEvent| ());
    html! {
        <div class="notice" role="alert" id="link-errors">
            <p><strong>{ "Part of this link could not be used." }</strong>
               { " The rest of the scenario is shown:" }</p>
            <ul>{ for props.errors.iter().map(|e| html! { <li>{ e }</li> }) }</ul>
            <button type="button" class="link-button" onclick={dismiss}>{ "Dismiss" }</button>
        </div>
    }
}
