//! A guide's Markdown, fetched from `content/guides/<slug>.md` next to the app (Trunk copies the
//! folder) and kept for the session, so search and revisits do not fetch again.

use std::cell::RefCell;
use std::collections::BTreeMap;

use headroom_core::guide;
use wasm_bindgen::JsCast;

thread_local! {
    static CACHE: RefCell<BTreeMap<String, String>> = const { RefCell::new(BTreeMap::new()) };
}

/// The slugs of the embedded guide index (the only ones the site fetches).
pub fn known(slug: &str) -> bool {
    guide::index().iter().any(|e| e.slug == slug)
}

/// The text of a guide already fetched this session.
pub fn cached(slug: &str) -> Option<String> {
    CACHE.with(|c| c.borrow().get(slug).cloned())
}

/// Fetches a guide's Markdown (once per session).
pub async fn fetch(slug: &str) -> Result<String, String> {
    if !known(slug) {
        return Err(format!(
            "There is no guide `{}`.",
            headroom_core::scenario::shorten(slug)
        ));
    }
    if let Some(text) = cached(slug) {
        return Ok(text);
    }
    let failed =
        || "The guide could not be loaded (offline?). Reload the page to try again.".to_string();
    let window = web_sys::window().ok_or_else(failed)?;
    let url = format!("{}/content/guides/{slug}.md", crate::dom::base_path());
    let response = wasm_bindgen_futures::JsFuture::from(window.fetch_with_str(&url))
        .await
        .map_err(|_| failed())?;
    let response: web_sys::Response = response.dyn_into().map_err(|_| failed())?;
    if !response.ok() {
        return Err(failed());
    }
    let text = wasm_bindgen_futures::JsFuture::from(response.text().map_err(|_| failed())?)
        .await
        .map_err(|_| failed())?
        .as_string()
        .ok_or_else(failed)?;
    CACHE.with(|c| c.borrow_mut().insert(slug.to_string(), text.clone()));
    Ok(text)
}
