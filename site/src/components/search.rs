//! The header's search box: results as the reader types, from the site's own content (the
//! guides' words, `content/guides/search.json`, written from each guide's plain text by
//! headroom-core's guides test, are fetched on first focus so their text is searchable too).

use std::cell::RefCell;
use std::collections::BTreeMap;

use yew::prelude::*;

use crate::search::{Hit, items, search};

thread_local! {
    /// Plain text of each guide, once fetched.
    static TEXTS: RefCell<BTreeMap<String, String>> = const { RefCell::new(BTreeMap::new()) };
}

fn text_of(slug: &str) -> Option<String> {
    TEXTS.with(|t| t.borrow().get(slug).cloned())
}

#[component]
pub fn Search() -> Html {
    let query = use_state(String::new);
    // Bumped as guide texts arrive, so open results update.
    let loaded = use_state(|| 0usize);
    let started = use_mut_ref(|| false);
    // Guide texts are fetched once, on the first focus or keystroke (focus events do not fire
    // in a window without the system's focus, so typing starts it too).
    let start_loading = {
        let loaded = loaded.clone();
        Callback::from(move |_: ()| {
            if std::mem::replace(&mut *started.borrow_mut(), true) {
                return;
            }
            let loaded = loaded.clone();
            let url = format!("{}/content/guides/search.json", crate::dom::base_path());
            wasm_bindgen_futures::spawn_local(async move {
                // Read as a JSON value, whose parser the app has anyway (a typed map's costs
                // 1.3 KB more gzip in the calculator's bundle).
                let json = crate::dom::fetch_text(&url).await.ok();
                let json = json.and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok());
                let texts = json.as_ref().and_then(serde_json::Value::as_object);
                let n = texts.map_or(0, |t| {
                    TEXTS.with(|m| {
                        let mut m = m.borrow_mut();
                        for (slug, text) in t {
                            m.insert(slug.clone(), text.as_str().unwrap_or("").to_string());
                        }
                    });
                    t.len()
                });
                loaded.set(n);
            });
        })
    };
    let onfocus = start_loading.reform(|_: FocusEvent| ());
    let oninput = {
        let query = query.clone();
        Callback::from(move |e: InputEvent| {
            start_loading.emit(());
            if let Some(i) = e.target_dyn_into::<web_sys::HtmlInputElement>() {
                query.set(i.value());
            }
        })
    };
    // What can be found changes only when guide texts arrive, not on every keystroke.
    let all = use_memo(*loaded, |_| items(&text_of));
    let hits: Vec<Hit> = if query.trim().is_empty() {
        Vec::new()
    } else {
        search(&all, &query, 10)
    };
    let base = crate::dom::base_path();
    let first = hits.first().map(|h| format!("{base}{}", h.item.path));
    let onsubmit = Callback::from(move |e: SubmitEvent| {
        e.prevent_default();
        if let Some(href) = &first {
            crate::dom::navigate(href);
        }
    });
    html! {
        <form class="search" role="search" {onsubmit} data-loaded={loaded.to_string()}>
            <input type="search" id="search" placeholder="Search guides, GPUs…"
                   aria-label="Search guides, GPUs, models and scenarios" autocomplete="off"
                   value={(*query).clone()} {oninput} {onfocus}/>
            if !query.trim().is_empty() {
                <ul class="search-results" id="search-results" aria-live="polite">
                    if hits.is_empty() {
                        <li class="none">{ "Nothing found." }</li>
                    }
                    { for hits.iter().map(|h| html! {
                        <li>
                            <a href={format!("{base}{}", h.item.path)}>
                                <span class="kind">{ h.item.kind }</span>{ h.item.title.clone() }
                            </a>
                            if !h.snippet.is_empty() { <p class="snippet">{ h.snippet.clone() }</p> }
                        </li>
                    }) }
                </ul>
            }
        </form>
    }
}
