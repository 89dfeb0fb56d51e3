//! The guides (`content/guides/*.md`): a small Markdown subset with live calculator blocks,
//! parsed into a document the site renders and the tests evaluate.
//!
//! The format is specified in `content/guides/README.md`. Parsing is strict about what the
//! renderer cannot show (raw HTML, images, unknown block keys) so a guide never renders as
//! something other than what its author checked. Pure: the text comes in as a string.
//!
//! `inline.rs` reads code, emphasis, checked links and live values (`{{metric @ change}}`),
//! `block.rs` a calculator block's `key: value` lines, and `eval.rs` evaluates a block for the
//! reader's inputs (table, grid, bars, summary, timeline). `build.rs` embeds only the guide index
//! (the front matter); the tests read the text and the site fetches it.

mod block;
mod eval;
mod inline;

pub use block::{Block, Change, View};
pub use eval::{Cell, Evaluated, Row, base_scenario, evaluate, evaluate_value};
pub use inline::{Inline, parse_inline};

use thiserror::Error;

/// One guide as the index lists it (from its front matter, embedded at build time; the text
/// itself is read or fetched separately). `summary` is empty in a build without the
/// `guide-summaries` feature (the site, which fetches them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub slug: &'static str,
    pub title: &'static str,
    pub summary: &'static str,
    pub order: u32,
}

/// The guides in `content/guides/`, in reading order.
pub fn index() -> Vec<Entry> {
    crate::catalog::embedded::GUIDE_INDEX
        .iter()
        .map(|&(slug, title, summary, order)| Entry {
            slug,
            title,
            summary,
            order,
        })
        .collect()
}

/// A problem in a guide's text, with its line.
#[derive(Debug, Clone, PartialEq, Error)]
#[error("{slug}.md, line {line}: {message}")]
pub struct GuideError {
    pub slug: String,
    pub line: usize,
    pub message: String,
}

/// One parsed guide.
#[derive(Debug, Clone, PartialEq)]
pub struct Guide {
    pub slug: String,
    pub title: String,
    pub summary: String,
    pub order: u32,
    pub body: Vec<Node>,
}

/// A block-level element of a guide.
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    /// `##` (level 2) or `###` (level 3), with its anchor.
    Heading {
        level: u8,
        text: String,
        anchor: String,
    },
    Paragraph(Vec<Inline>),
    List {
        ordered: bool,
        items: Vec<Vec<Inline>>,
    },
    Quote(Vec<Inline>),
    /// A fenced code block shown verbatim.
    Code {
        lang: String,
        text: String,
    },
    /// A live calculator block; `index` counts blocks from 0 in the guide.
    Calc {
        index: usize,
        block: Block,
    },
}

/// One entry of a guide's table of contents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TocEntry {
    pub level: u8,
    pub text: String,
    pub anchor: String,
}

impl Guide {
    /// The `##` and `###` headings, in order.
    pub fn toc(&self) -> Vec<TocEntry> {
        self.body
            .iter()
            .filter_map(|n| match n {
                Node::Heading {
                    level,
                    text,
                    anchor,
                } => Some(TocEntry {
                    level: *level,
                    text: text.clone(),
                    anchor: anchor.clone(),
                }),
                _ => None,
            })
            .collect()
    }

    /// The calculator blocks, in order.
    pub fn blocks(&self) -> impl Iterator<Item = &Block> {
        self.body.iter().filter_map(|n| match n {
            Node::Calc { block, .. } => Some(block),
            _ => None,
        })
    }

    /// Every inline element of the guide's text (paragraphs, list items, quotes).
    pub fn inlines(&self) -> impl Iterator<Item = &Inline> {
        self.body
            .iter()
            .flat_map(|n| -> Box<dyn Iterator<Item = &Inline> + '_> {
                match n {
                    Node::Paragraph(v) | Node::Quote(v) => Box::new(v.iter()),
                    Node::List { items, .. } => Box::new(items.iter().flatten()),
                    _ => Box::new(std::iter::empty()),
                }
            })
    }

    /// Every link target (`href`) in the guide's text.
    pub fn links(&self) -> Vec<&str> {
        self.inlines()
            .filter_map(|i| match i {
                Inline::Link { href, .. } => Some(href.as_str()),
                _ => None,
            })
            .collect()
    }

    /// The guide's words as plain text, for search.
    pub fn plain_text(&self) -> String {
        let mut out = String::new();
        for n in &self.body {
            match n {
                Node::Heading { text, .. } => out.push_str(text),
                Node::Paragraph(v) | Node::Quote(v) => inline::push_plain(&mut out, v),
                Node::List { items, .. } => items.iter().for_each(|i| {
                    inline::push_plain(&mut out, i);
                    out.push(' ');
                }),
                Node::Code { text, .. } => out.push_str(text),
                Node::Calc { block, .. } => out.push_str(&block.caption),
            }
            out.push('\n');
        }
        out
    }
}

/// A heading's anchor: lowercase letters and digits, other runs of characters as one `-`.
pub fn anchor(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    out.trim_end_matches('-').to_string()
}

/// Whether `s` is a valid guide slug (lowercase letters, digits, `-`).
pub fn valid_slug(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// Parses one guide. Every error names the line.
pub fn parse(slug: &str, text: &str) -> Result<Guide, GuideError> {
    let err = |line: usize, message: String| GuideError {
        slug: slug.to_string(),
        line,
        message,
    };
    if !valid_slug(slug) {
        return Err(err(
            0,
            "the file name must be lowercase letters, digits and `-`".into(),
        ));
    }
    let lines: Vec<&str> = text.lines().collect();
    let (front, body_start) = front_matter(&lines).map_err(|(l, m)| err(l, m))?;
    let title = front.get("title").cloned().unwrap_or_default();
    let summary = front.get("summary").cloned().unwrap_or_default();
    let order = front
        .get("order")
        .and_then(|o| o.parse::<u32>().ok())
        .ok_or_else(|| err(1, "front matter needs `order:` with a whole number".into()))?;
    if title.is_empty() || summary.is_empty() {
        return Err(err(1, "front matter needs `title:` and `summary:`".into()));
    }
    let body = parse_body(&lines, body_start).map_err(|(l, m)| err(l, m))?;
    Ok(Guide {
        slug: slug.to_string(),
        title,
        summary,
        order,
        body,
    })
}

type Located<T> = Result<T, (usize, String)>;

/// `---`, `key: value` lines, `---`; returns the fields and the first body line's index.
fn front_matter(lines: &[&str]) -> Located<(std::collections::BTreeMap<String, String>, usize)> {
    if lines.first().map(|l| l.trim()) != Some("---") {
        return Err((
            1,
            "a guide starts with front matter between `---` lines".into(),
        ));
    }
    let mut fields = std::collections::BTreeMap::new();
    for (i, line) in lines.iter().enumerate().skip(1) {
        if line.trim() == "---" {
            return Ok((fields, i + 1));
        }
        let (k, v) = line.split_once(':').ok_or((
            i + 1,
            format!("front matter line `{line}` is not `key: value`"),
        ))?;
        let k = k.trim();
        if !["title", "summary", "order"].contains(&k) {
            return Err((
                i + 1,
                format!("unknown front matter key `{k}`; allowed: title, summary, order"),
            ));
        }
        fields.insert(k.to_string(), v.trim().to_string());
    }
    Err((lines.len(), "front matter is not closed with `---`".into()))
}

fn parse_body(lines: &[&str], start: usize) -> Located<Vec<Node>> {
    let mut nodes = Vec::new();
    let mut para: Vec<&str> = Vec::new();
    let mut para_line = 0;
    let mut blocks = 0;
    let mut i = start;
    // The last calculator block above the current line: live values `{{...}}` refer to it.
    let mut last_block: Option<usize> = None;
    macro_rules! flush {
        () => {
            if !para.is_empty() {
                let text = para.join(" ");
                nodes.push(Node::Paragraph(
                    parse_inline(&text, last_block).map_err(|m| (para_line, m))?,
                ));
                para.clear();
            }
        };
    }
    while i < lines.len() {
        let line = lines[i];
        let t = line.trim_end();
        let lineno = i + 1;
        if let Some(fence) = t.strip_prefix("```") {
            flush!();
            let lang = fence.trim().to_string();
            let close = (i + 1..lines.len())
                .find(|&j| lines[j].trim_end() == "```")
                .ok_or((lineno, "this code block is not closed with ```".to_string()))?;
            let inner = &lines[i + 1..close];
            if lang == "headroom" {
                let block = Block::parse(inner, lineno + 1)?;
                nodes.push(Node::Calc {
                    index: blocks,
                    block,
                });
                last_block = Some(blocks);
                blocks += 1;
            } else {
                if lang.is_empty() {
                    return Err((
                        lineno,
                        "name the code block's language (```python, ```bash, ```text)".into(),
                    ));
                }
                nodes.push(Node::Code {
                    lang,
                    text: inner.join("\n"),
                });
            }
            i = close + 1;
            continue;
        }
        if t.trim().is_empty() {
            flush!();
        } else if let Some(h) = t.strip_prefix('#') {
            flush!();
            let level = 1 + h.chars().take_while(|&c| c == '#').count();
            // Headings are plain text: code spans lose their backticks (`outputs` reads outputs).
            let text = h.trim_start_matches('#').trim().replace('`', "");
            if !(2..=3).contains(&level) || text.is_empty() {
                return Err((
                    lineno,
                    "headings are `## Text` or `### Text` (the title comes from the front matter)"
                        .into(),
                ));
            }
            nodes.push(Node::Heading {
                level: level as u8,
                anchor: anchor(&text),
                text,
            });
        } else if let Some((ordered, _)) = list_item(t) {
            flush!();
            let mut items = Vec::new();
            while i < lines.len() {
                let Some((o, rest)) = list_item(lines[i].trim_end()) else {
                    // A continuation line (indented) joins the item above.
                    let l = lines[i];
                    if l.starts_with("  ") && !l.trim().is_empty() && !items.is_empty() {
                        let last: &mut String = items.last_mut().expect("an item");
                        last.push(' ');
                        last.push_str(l.trim());
                        i += 1;
                        continue;
                    }
                    break;
                };
                if o != ordered {
                    break;
                }
                items.push(rest.to_string());
                i += 1;
            }
            let items = items
                .iter()
                .map(|s| parse_inline(s, last_block).map_err(|m| (lineno, m)))
                .collect::<Result<Vec<_>, _>>()?;
            nodes.push(Node::List { ordered, items });
            continue;
        } else if let Some(q) = t.strip_prefix('>') {
            flush!();
            let mut text = vec![q.trim().to_string()];
            while i + 1 < lines.len() {
                match lines[i + 1].trim_end().strip_prefix('>') {
                    Some(q) => text.push(q.trim().to_string()),
                    None => break,
                }
                i += 1;
            }
            nodes.push(Node::Quote(
                parse_inline(&text.join(" "), last_block).map_err(|m| (lineno, m))?,
            ));
        } else if t.trim_start().starts_with('<') {
            return Err((lineno, "raw HTML is not allowed in guides".into()));
        } else if t.trim_start().starts_with('|') {
            return Err((
                lineno,
                "static tables are not allowed: use a calculator block (view: table)".into(),
            ));
        } else {
            if para.is_empty() {
                para_line = lineno;
            }
            para.push(t.trim());
        }
        i += 1;
    }
    flush!();
    Ok(nodes)
}

/// `- item` or `1. item`: whether it is ordered, and the item's text.
fn list_item(line: &str) -> Option<(bool, &str)> {
    if let Some(rest) = line.strip_prefix("- ") {
        return Some((false, rest.trim()));
    }
    let digits = line.bytes().take_while(u8::is_ascii_digit).count();
    if digits > 0 && line[digits..].starts_with(". ") {
        return Some((true, line[digits + 2..].trim()));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = "---\ntitle: T\nsummary: S\norder: 3\n---\n\n## First part\n\nSome *text* with `code`\nand a [link](/guides/x).\n\n- one\n- two\n  continued\n\n1. a\n2. b\n\n> quoted\n\n```python\nx = 1\n```\n\n```headroom\nscenario: llama-3.1-8b-h100\nview: summary\nmetrics: peak.device\n```\n\nPeak {{peak.device}}.\n\n### Sub part\n";

    #[test]
    fn parses_the_subset() {
        let g = parse("t", DOC).expect("parses");
        assert_eq!(
            (g.title.as_str(), g.summary.as_str(), g.order),
            ("T", "S", 3)
        );
        let toc = g.toc();
        assert_eq!(toc.len(), 2);
        assert_eq!(toc[0].anchor, "first-part");
        assert_eq!(toc[1].level, 3);
        assert_eq!(g.links(), vec!["/guides/x"]);
        assert_eq!(g.blocks().count(), 1);
        let list = g.body.iter().find_map(|n| match n {
            Node::List {
                ordered: false,
                items,
            } => Some(items.clone()),
            _ => None,
        });
        assert_eq!(list.expect("a list").len(), 2);
        let value = g.inlines().find_map(|i| match i {
            Inline::Value { metric, block, .. } => Some((metric.clone(), *block)),
            _ => None,
        });
        assert_eq!(value, Some(("peak.device".into(), 0)));
        assert!(g.plain_text().contains("quoted"));
    }

    #[test]
    fn rejects_what_the_renderer_cannot_show() {
        let body = |b: &str| format!("---\ntitle: T\nsummary: S\norder: 1\n---\n{b}\n");
        for (text, want) in [
            ("<div>x</div>", "raw HTML"),
            ("| a | b |", "static tables"),
            ("# Title", "headings"),
            ("```\nx\n```", "language"),
            ("```python\nx", "not closed"),
            (
                "A value {{peak.device}} before any block.",
                "no calculator block above",
            ),
            ("![img](x.png)", "images"),
        ] {
            let e = parse("t", &body(text)).expect_err(text);
            assert!(e.message.contains(want), "{text}: {e}");
        }
        let e = parse("t", "---\ntitle: T\norder: 1\n---\n").expect_err("no summary");
        assert!(e.message.contains("summary"), "{e}");
        let e =
            parse("t", "---\ntitle: T\nsummary: S\norder: 1\nauthor: x\n---\n").expect_err("key");
        assert!(e.message.contains("author"), "{e}");
        assert!(parse("Bad_Slug", DOC).is_err());
    }

    #[test]
    fn headings_are_plain_text() {
        let g = parse(
            "t",
            "---\ntitle: T\nsummary: S\norder: 1\n---\n## Keeping `outputs` alive\n",
        )
        .expect("parses");
        assert_eq!(g.toc()[0].text, "Keeping outputs alive");
        assert_eq!(g.toc()[0].anchor, "keeping-outputs-alive");
    }

    #[test]
    fn anchors_are_stable() {
        assert_eq!(
            anchor("ZeRO-3 and FSDP: per-GPU tables"),
            "zero-3-and-fsdp-per-gpu-tables"
        );
        assert_eq!(anchor("  Why?  "), "why");
    }
}
