//! Inline Markdown of a guide: code, bold, italic, links and live values (`{{metric}}`).

/// One inline element. Text is plain (the site renders it as text, never as markup).
#[derive(Debug, Clone, PartialEq)]
pub enum Inline {
    Text(String),
    Code(String),
    Bold(String),
    Italic(String),
    /// `href` is `https://...`, `http://...`, a site path (`/guides/x`) or an anchor (`#x`).
    Link {
        text: String,
        href: String,
    },
    /// `{{metric}}` or `{{metric @ query}}`: the metric for the calculator block `block` (the
    /// nearest above), with the reader's inputs and `change` applied.
    Value {
        metric: String,
        change: String,
        block: usize,
    },
}

/// Parses one paragraph's (or list item's) text. `block` is the calculator block live values
/// refer to (`None` when there is none above).
pub fn parse_inline(text: &str, block: Option<usize>) -> Result<Vec<Inline>, String> {
    let mut out = Vec::new();
    let mut plain = String::new();
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        let (item, used) = match c {
            '`' => match rest[1..].find('`') {
                Some(end) => (Inline::Code(rest[1..1 + end].to_string()), end + 2),
                None => return Err(format!("unclosed `code` in `{}`", short(text))),
            },
            '*' if rest.starts_with("**") => match rest[2..].find("**") {
                Some(end) => (Inline::Bold(rest[2..2 + end].to_string()), end + 4),
                None => return Err(format!("unclosed **bold** in `{}`", short(text))),
            },
            '*' if rest.len() > 1 && !rest[1..].starts_with(' ') => match rest[1..].find('*') {
                Some(end) => (Inline::Italic(rest[1..1 + end].to_string()), end + 2),
                None => return Err(format!("unclosed *italic* in `{}`", short(text))),
            },
            '!' if rest.starts_with("![") => {
                return Err("images are not allowed in guides".into());
            }
            '[' => match link(rest) {
                Some((text, href, used)) => {
                    check_href(&href)?;
                    (Inline::Link { text, href }, used)
                }
                None => {
                    plain.push(c);
                    rest = &rest[1..];
                    continue;
                }
            },
            '{' if rest.starts_with("{{") => {
                let end = rest
                    .find("}}")
                    .ok_or_else(|| format!("unclosed {{{{value}}}} in `{}`", short(text)))?;
                let inner = &rest[2..end];
                let (metric, change) = match inner.split_once('@') {
                    Some((m, q)) => (m.trim(), q.trim()),
                    None => (inner.trim(), ""),
                };
                let block = block.ok_or_else(|| {
                    format!("the value {{{{{inner}}}}} has no calculator block above it")
                })?;
                if metric.is_empty() {
                    return Err("an empty {{}} value: name a metric".into());
                }
                (
                    Inline::Value {
                        metric: metric.to_string(),
                        change: change.to_string(),
                        block,
                    },
                    end + 2,
                )
            }
            _ => {
                plain.push(c);
                rest = &rest[c.len_utf8()..];
                continue;
            }
        };
        if !plain.is_empty() {
            out.push(Inline::Text(std::mem::take(&mut plain)));
        }
        out.push(item);
        rest = &rest[used..];
    }
    if !plain.is_empty() {
        out.push(Inline::Text(plain));
    }
    Ok(out)
}

/// `[text](href)` at the start of `s`: the text, the href and the bytes used.
fn link(s: &str) -> Option<(String, String, usize)> {
    let close = s.find("](")?;
    let text = &s[1..close];
    if text.contains('[') {
        return None;
    }
    let end = s[close + 2..].find(')')?;
    let href = &s[close + 2..close + 2 + end];
    Some((text.to_string(), href.trim().to_string(), close + 3 + end))
}

/// Links go to the web over http(s), to a page of the site, or to an anchor; nothing else
/// (no `javascript:`, no `data:`), so a guide cannot run code in the reader's browser.
fn check_href(href: &str) -> Result<(), String> {
    let ok = href.starts_with("https://")
        || href.starts_with("http://")
        || (href.starts_with('/') && !href.starts_with("//"))
        || href.starts_with('#');
    let clean = !href
        .chars()
        .any(|c| c.is_whitespace() || c == '"' || c == '<' || c == '>');
    if ok && clean && href.len() > 1 {
        Ok(())
    } else {
        Err(format!(
            "link `{}`: links start with https://, http://, / (a page of the site) or # (an anchor)",
            short(href)
        ))
    }
}

/// Appends the plain words of `inlines` to `out` (for search).
pub(crate) fn push_plain(out: &mut String, inlines: &[Inline]) {
    for i in inlines {
        match i {
            Inline::Text(t) | Inline::Code(t) | Inline::Bold(t) | Inline::Italic(t) => {
                out.push_str(t)
            }
            Inline::Link { text, .. } => out.push_str(text),
            Inline::Value { .. } => {}
        }
    }
}

fn short(s: &str) -> String {
    crate::error::shorten(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_each_element() {
        let v = parse_inline(
            "A `b` **c** *d* [e](/guides/f) {{peak.device @ batch=2}} 2 * 3 [not a link",
            Some(1),
        )
        .expect("parses");
        assert_eq!(v[1], Inline::Code("b".into()));
        assert_eq!(v[3], Inline::Bold("c".into()));
        assert_eq!(v[5], Inline::Italic("d".into()));
        assert_eq!(
            v[7],
            Inline::Link {
                text: "e".into(),
                href: "/guides/f".into()
            }
        );
        assert_eq!(
            v[9],
            Inline::Value {
                metric: "peak.device".into(),
                change: "batch=2".into(),
                block: 1
            }
        );
        assert_eq!(v[10], Inline::Text(" 2 * 3 [not a link".into()));
    }

    #[test]
    fn hostile_links_are_refused() {
        for href in [
            "javascript:alert(1)",
            "data:text/html,x",
            "//evil.example",
            "/a b",
        ] {
            let e = parse_inline(&format!("[x]({href})"), None).expect_err(href);
            assert!(e.contains("links start with"), "{e}");
        }
        assert!(parse_inline("`open", None).is_err());
        assert!(parse_inline("{{peak.device}}", None).is_err());
    }
}
