//! Sharing: copy the page's link, and copy the iframe code that embeds a view of it.

use headroom_core::Scenario;
use yew::prelude::*;

use crate::dom;
use crate::query::{View, embed_query};

#[derive(Properties, PartialEq)]
pub struct ShareProps {
    pub scenario: Scenario,
}

/// The HTML to paste into another page: the iframe, then `script`, the few lines that let it
/// resize itself (content/help.toml's `embed_script`, fetched with the page's prose rather than
/// carried in the first download).
pub fn embed_snippet(src: &str, view: View, script: &str) -> String {
    let src = src
        .replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;");
    format!(
        "<iframe src=\"{src}\" title=\"Headroom: {}\" loading=\"lazy\" \
         style=\"width:100%;border:0\" height=\"640\"></iframe>\n{script}",
        view.label()
    )
}

#[component]
pub fn Share(props: &ShareProps) -> Html {
    let status = use_state(String::new);
    let view = use_state(|| View::Calculator);
    let copy = |text: String, what: &'static str, status: UseStateHandle<String>| {
        wasm_bindgen_futures::spawn_local(async move {
            status.set(match dom::copy_text(&text).await {
                Ok(()) => format!("{what} copied."),
                Err(e) => format!("Could not copy: {e}."),
            });
        });
    };
    let on_copy_link = {
        let status = status.clone();
        Callback::from(move |_: MouseEvent| {
            let href = web_sys::window()
                .and_then(|w| w.location().href().ok())
                .unwrap_or_default();
            copy(href, "Link", status.clone());
        })
    };
    let snippet = embed_snippet(
        &dom::absolute_url(&format!("/embed?{}", embed_query(&props.scenario, *view))),
        *view,
        &crate::help::page("embed_script"),
    );
    let on_copy_embed = {
        let (status, snippet) = (status.clone(), snippet.clone());
        Callback::from(move |_: MouseEvent| copy(snippet.clone(), "Embed code", status.clone()))
    };
    let on_view = {
        let view = view.clone();
        Callback::from(move |e: Event| {
            if let Some(sel) = e.target_dyn_into::<web_sys::HtmlSelectElement>()
                && let Some(v) = View::ALL.iter().find(|v| v.id() == sel.value())
            {
                view.set(*v);
            }
        })
    };
    html! {
        <div class="share">
            <button type="button" id="copy-link" onclick={on_copy_link}>{ "Copy link" }</button>
            <details class="embed-code">
                <summary>{ "Embed" }</summary>
                <div class="embed-panel">
                    <label for="embed-view">{ "Embed" }</label>
                    <select id="embed-view" onchange={on_view}>
                        { for View::ALL.iter().map(|v| html! {
                            <option value={v.id()} selected={*v == *view}>{ v.label() }</option>
                        }) }
                    </select>
                    <textarea id="embed-snippet" readonly=true rows="5" aria-label="Embed code"
                              value={snippet}/>
                    <button type="button" id="copy-embed" onclick={on_copy_embed}>{ "Copy embed code" }</button>
                    <p class="help">{ crate::help::page("embed_help") }</p>
                </div>
            </details>
            <span class="status" role="status" id="share-status">{ (*status).clone() }</span>
        </div>
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_snippet_frames_the_link_and_listens_for_its_height() {
        // content/help.toml's line, a TOML literal string (site/pages.sh reads it with tomllib).
        let script = include_str!("../../../content/help.toml")
            .lines()
            .find_map(|l| l.strip_prefix("embed_script = '"))
            .and_then(|l| l.strip_suffix('\''))
            .expect("an embed_script line");
        let s = super::embed_snippet(
            "https://example.org/embed?v=1&view=timeline",
            super::View::Timeline,
            script,
        );
        assert!(s.starts_with("<iframe src=\"https://example.org/embed?v=1&amp;view=timeline\""));
        assert!(s.contains("headroom!==\"resize\"") && s.contains("d.height+\"px\""));
    }
}
