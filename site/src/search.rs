//! Client-side search over the site: guides (titles, summaries and, once fetched, their text),
//! GPUs, model presets, named scenarios and the main pages. Pure, with native tests; the header
//! component in `components/search.rs` draws it.

use headroom_core::catalog::{GpuCatalog, PresetCatalog};
use headroom_core::codec::named_scenarios;
use headroom_core::guide;

/// One thing search can find.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    pub kind: &'static str,
    pub title: String,
    /// A site path below the base (`/guides/x`).
    pub path: String,
    /// Text matched but not shown in full (summaries, guide text).
    pub body: String,
}

/// Everything searchable; `texts` gives a guide's plain text when it has been fetched.
pub fn items(texts: &dyn Fn(&str) -> Option<String>) -> Vec<Item> {
    let mut out = Vec::new();
    for (title, path) in [
        ("Calculator", "/"),
        ("Compare two scenarios", "/compare"),
        ("Calibration: measured GPU constants", "/calibration"),
        (
            "Worked examples: practitioners' claims checked",
            "/examples",
        ),
        ("Guides", "/guides"),
        ("GPUs", "/gpus"),
        ("Models", "/models"),
    ] {
        out.push(Item {
            kind: "page",
            title: title.into(),
            path: path.into(),
            body: String::new(),
        });
    }
    for e in guide::index() {
        let text = texts(e.slug).unwrap_or_default();
        out.push(Item {
            kind: "guide",
            title: e.title.into(),
            path: format!("/guides/{}", e.slug),
            body: format!("{} {text}", e.summary),
        });
    }
    for g in &GpuCatalog::builtin().gpus {
        out.push(Item {
            kind: "GPU",
            title: g.name.clone(),
            path: format!("/gpus/{}", g.id),
            body: format!("{} {} {}", g.id, g.aliases.join(" "), g.architecture),
        });
    }
    for p in &PresetCatalog::builtin().presets {
        out.push(Item {
            kind: "model",
            title: p.name.clone(),
            path: format!("/models/{}", p.id),
            body: format!("{} {}", p.id, p.hf_id),
        });
    }
    for n in named_scenarios() {
        out.push(Item {
            kind: "scenario",
            title: n.title.clone(),
            path: format!("/s/{}", n.id),
            body: n.description.clone(),
        });
    }
    out
}

/// One result: the item and, for a match in a guide's text, the words around it.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    pub item: Item,
    pub snippet: String,
}

/// The items whose title or text has a word starting with each word of `query`
/// (case-insensitive: "oom" finds "OOM" and "out-of-memory's oom", not "Headroom"), best first: title matches before text matches, at most `limit`. Case is folded for ASCII only: the
/// guides are English with no letter outside ASCII, and Unicode's case tables (`to_lowercase`)
/// were 9 KB of the first download's gzip.
pub fn search(items: &[Item], query: &str, limit: usize) -> Vec<Hit> {
    let words: Vec<String> = query
        .split_whitespace()
        .map(str::to_ascii_lowercase)
        .filter(|w| !w.is_empty())
        .take(8)
        .collect();
    if words.is_empty() {
        return Vec::new();
    }
    let mut scored: Vec<(usize, usize, Hit)> = items
        .iter()
        .enumerate()
        .filter_map(|(order, item)| {
            let title = item.title.to_ascii_lowercase();
            let body = item.body.to_ascii_lowercase();
            let mut score = 0;
            for w in &words {
                if word_start(&title, w).is_some() {
                    score += 3;
                } else if word_start(&body, w).is_some() {
                    score += 1;
                } else {
                    return None;
                }
            }
            let snippet = words
                .iter()
                .find(|w| word_start(&title, w).is_none())
                .and_then(|w| snippet(&item.body, &body, w))
                .unwrap_or_default();
            Some((
                score,
                order,
                Hit {
                    item: item.clone(),
                    snippet,
                },
            ))
        })
        .collect();
    scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    scored.into_iter().take(limit).map(|(_, _, h)| h).collect()
}

/// Where `word` first starts a word of `text`: at its start or after a character that is not an
/// ASCII letter or digit (so "8b" is found in "llama-3.1-8b", "oom" not in "headroom"; ASCII as
/// the case folding above: Unicode's alphanumeric tables cost the download 2.4 KB gzip).
fn word_start(text: &str, word: &str) -> Option<usize> {
    text.match_indices(word).map(|(i, _)| i).find(|&i| {
        !text[..i]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_ascii_alphanumeric())
    })
}

/// About 80 characters of `text` around the first `word` that starts a word (found in its
/// lowercase form).
fn snippet(text: &str, lower: &str, word: &str) -> Option<String> {
    let at = word_start(lower, word)?;
    // Lowercasing can change byte lengths outside ASCII: fall back to the start then.
    let at = if text.is_char_boundary(at) { at } else { 0 };
    let start = text[..at]
        .char_indices()
        .rev()
        .nth(40)
        .map_or(0, |(i, _)| i);
    let rest: String = text[start..].chars().take(100).collect();
    let rest = rest.split_whitespace().collect::<Vec<_>>().join(" ");
    Some(format!("{}{rest}…", if start > 0 { "…" } else { "" }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_guides_gpus_models_and_scenarios() {
        let all = items(&|_| None);
        let hit = |q: &str| search(&all, q, 5).first().map(|h| h.item.path.clone());
        assert_eq!(hit("h100 sxm").as_deref(), Some("/gpus/h100-sxm-80gb"));
        assert_eq!(hit("Llama 3.1 8B").as_deref(), Some("/models/llama-3.1-8b"));
        assert!(search(&all, "zzzz-nothing", 5).is_empty());
        // A word matches where a word starts: "oom" is not in "Headroom" (issue 34), and
        // every item here has "Headroom" nowhere else.
        let oom = Item {
            kind: "guide",
            title: "Leaks and OOM debugging".into(),
            path: "/guides/oom".into(),
            body: String::new(),
        };
        let headroom = Item {
            kind: "page",
            title: "Headroom".into(),
            path: "/".into(),
            body: "room for the step".into(),
        };
        let hits = search(&[headroom.clone(), oom.clone()], "oom", 5);
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].item.path, "/guides/oom");
        assert_eq!(search(&[headroom], "room", 5).len(), 1);
        assert!(search(&all, "   ", 5).is_empty());
        let guides = guide::index();
        if let Some(first) = guides.first() {
            assert_eq!(
                hit(first.title).as_deref(),
                Some(format!("/guides/{}", first.slug).as_str())
            );
        }
    }

    #[test]
    fn guide_text_is_searched_once_fetched_with_a_snippet() {
        let Some(first) = guide::index().first().copied() else {
            return;
        };
        let text = |slug: &str| {
            (slug == first.slug).then(|| "Some words about a quokkaword in the middle.".to_string())
        };
        let all = items(&text);
        let hits = search(&all, "quokkaword", 5);
        assert_eq!(hits.len(), 1);
        assert!(
            hits[0].snippet.contains("quokkaword"),
            "{}",
            hits[0].snippet
        );
    }
}
