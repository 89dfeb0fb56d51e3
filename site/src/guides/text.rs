//! A guide's Markdown, fetched from `content/guides/<slug>.md` next to the app (Trunk copies the
//! folder) and kept for the session, so search and revisits do not fetch again.

use std::cell::RefCell;
use std::collections::BTreeMap;

use headroom_core::guide;

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
    let url = format!("{}/content/guides/{slug}.md", crate::dom::base_path());
    let text = crate::dom::fetch_text(&url).await.map_err(|_| {
        "The guide could not be loaded (offline?). Reload the page to try again.".to_string()
    })?;
    CACHE.with(|c| c.borrow_mut().insert(slug.to_string(), text.clone()));
    Ok(text)
}
