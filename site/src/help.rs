//! The form's help text and the prose of the pages other than the calculator (its `[page]`
//! table): `content/help.toml`, fetched as `content/help.json` (site/pages.sh) with the rest of
//! the content instead of carried in the first download (2.4 KB gzip of help text, 1.8 KB of
//! page prose).

use std::cell::RefCell;

use serde_json::Value;

thread_local! {
    // Read as a `Value`, which the core's parsers already bring into the download (a map type
    // of its own would add its deserializer).
    static HELP: RefCell<Value> = const { RefCell::new(Value::Null) };
}

/// Installs the fetched file (field key -> text). A file that does not read leaves the form
/// without help, which it can do without.
pub fn install(json: &str) {
    if let Ok(value) = serde_json::from_str(json) {
        HELP.with(|h| *h.borrow_mut() = value);
    }
}

/// The help of the field with this key, or nothing before the file is in.
pub fn text(key: &str) -> String {
    HELP.with(|h| h.borrow()[key].as_str().unwrap_or_default().to_string())
}

/// The page prose with this key (`content/help.toml`'s `[page]` table), or nothing before the
/// file is in (pages render once it is: `app::use_content`).
pub fn page(key: &str) -> String {
    text_at(&["page", key])
}

/// The text at `path` in the fetched file, or nothing before it is in.
fn text_at(path: &[&str]) -> String {
    HELP.with(|h| {
        let help = h.borrow();
        path.iter()
            .fold(&*help, |v, k| &v[*k])
            .as_str()
            .unwrap_or_default()
            .to_string()
    })
}

/// A breakdown figure's source (`Component::source`), which this build leaves out of the core:
/// its line of content/sources.toml, folded into the fetched file as `sources` (site/pages.sh).
pub fn source(c: &headroom_core::estimate::Component) -> String {
    if !c.source.is_empty() {
        return c.source.clone();
    }
    let (table, key) = c.source_key;
    text_at(&["sources", table, key])
}

/// A guide's summary (its front matter's), which this build leaves out of the guide index:
/// folded into the fetched file as `guides` (site/pages.sh).
pub fn guide_summary(slug: &str) -> String {
    text_at(&["guides", slug])
}
