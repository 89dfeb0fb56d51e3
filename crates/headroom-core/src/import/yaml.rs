//! The part of YAML that training configs are written in, read into a JSON tree: block
//! mappings and sequences by indentation, flow sequences and mappings (`[a, b]`, `{k: v}`),
//! quoted and plain scalars with YAML 1.1's booleans (as PyYAML, which these frameworks load
//! with, reads them), comments, `---`, and block scalars (`|`, `>`) kept as text.
//!
//! Anchors, aliases, tags and multi-document files are refused with the line they are on, never
//! guessed: a config that uses them is rare, and a wrong value would be worse than a message.

use std::borrow::Cow;

use serde_json::{Map, Number, Value};

/// A line of the file with its indentation and its text without the comment.
struct Line<'a> {
    number: usize,
    /// `usize::MAX` for a block scalar's text, which belongs to the line before it.
    indent: usize,
    text: Cow<'a, str>,
}

/// Reads `text` as YAML; the message names the line that could not be read.
pub fn parse(text: &str) -> Result<Value, String> {
    let mut lines = Vec::new();
    let raw: Vec<&str> = text.lines().collect();
    let mut i = 0;
    while i < raw.len() {
        let line = raw[i];
        let number = i + 1;
        i += 1;
        if line.contains('\t') && line.trim_start().starts_with('\t') {
            return Err(format!("line {number}: tabs cannot indent YAML"));
        }
        let stripped = strip_comment(line);
        let trimmed = stripped.trim_end();
        if trimmed.trim().is_empty() || trimmed == "---" || trimmed == "..." {
            continue;
        }
        if trimmed.trim_start().starts_with("%") {
            continue;
        }
        let indent = trimmed.len() - trimmed.trim_start().len();
        let body = trimmed.trim_start();
        // A block scalar: the more indented lines after it are its text.
        if let Some(head) = block_scalar_head(body) {
            let mut block = Vec::new();
            while i < raw.len() {
                let next = raw[i];
                let next_indent = next.len() - next.trim_start().len();
                if !next.trim().is_empty() && next_indent <= indent {
                    break;
                }
                block.push(next.trim());
                i += 1;
            }
            lines.push(Line {
                number,
                indent,
                text: Cow::Borrowed(head),
            });
            lines.push(Line {
                number,
                indent: usize::MAX,
                text: Cow::Owned(block.join("\n")),
            });
            continue;
        }
        lines.push(Line {
            number,
            indent,
            text: Cow::Borrowed(body),
        });
    }
    if lines.is_empty() {
        return Ok(Value::Object(Map::new()));
    }
    let mut pos = 0;
    let value = block(&lines, &mut pos, lines[0].indent)?;
    if pos < lines.len() {
        return Err(format!(
            "line {}: unexpected indentation",
            lines[pos].number
        ));
    }
    Ok(value)
}

/// `key: |` or `key: >-` (or `- |`): the line without its block indicator.
fn block_scalar_head(body: &str) -> Option<&str> {
    let end = body.trim_end();
    for ind in ["|", "|-", "|+", ">", ">-", ">+"] {
        if let Some(head) = end.strip_suffix(ind)
            && (head.ends_with(": ") || head == "- ")
        {
            return Some(head.trim_end());
        }
    }
    None
}

/// The line without a `#` comment (a `#` that starts the line or follows a space, outside
/// quotes).
fn strip_comment(line: &str) -> &str {
    let mut quote: Option<char> = None;
    let mut prev = ' ';
    for (i, c) in line.char_indices() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if (c == '\'' || c == '"') && [' ', ':', '[', ',', '-'].contains(&prev) => {
                quote = Some(c)
            }
            None if c == '#' && (prev == ' ' || i == 0) => return &line[..i],
            None => {}
        }
        prev = c;
    }
    line
}

/// The block at `indent` starting at `lines[*pos]`: a sequence if it starts with `- `, else a
/// mapping (or a lone scalar).
fn block(lines: &[Line], pos: &mut usize, indent: usize) -> Result<Value, String> {
    let first = &lines[*pos];
    if first.indent == usize::MAX {
        *pos += 1;
        return Ok(Value::String(first.text.to_string()));
    }
    if first.text == "-" || first.text.starts_with("- ") {
        return sequence(lines, pos, indent);
    }
    if split_key(&first.text).is_none() {
        *pos += 1;
        return scalar_or_flow(&first.text, first.number);
    }
    mapping(lines, pos, indent)
}

fn sequence(lines: &[Line], pos: &mut usize, indent: usize) -> Result<Value, String> {
    let mut items = Vec::new();
    while *pos < lines.len() && lines[*pos].indent == indent {
        let line = &lines[*pos];
        let text: &str = &line.text;
        let rest = if text == "-" {
            ""
        } else if let Some(r) = text.strip_prefix("- ") {
            r.trim_start()
        } else {
            break;
        };
        if rest.is_empty() {
            *pos += 1;
            items.push(nested(lines, pos, indent)?);
        } else if split_key(rest).is_some() && !rest.starts_with('{') {
            // `- key: value` opens a mapping whose other keys line up with `key`.
            let inner = indent + (text.len() - rest.len());
            let mut inline = vec![Line {
                number: line.number,
                indent: inner,
                text: Cow::Borrowed(rest),
            }];
            let mut end = *pos + 1;
            while end < lines.len() && lines[end].indent > indent {
                inline.push(Line {
                    number: lines[end].number,
                    indent: lines[end].indent,
                    text: Cow::Borrowed(&lines[end].text),
                });
                end += 1;
            }
            let mut p = 0;
            items.push(mapping(&inline, &mut p, inner)?);
            if p < inline.len() {
                return Err(format!("line {}: unexpected indentation", inline[p].number));
            }
            *pos = end;
        } else {
            *pos += 1;
            items.push(scalar_or_flow(rest, line.number)?);
        }
    }
    Ok(Value::Array(items))
}

fn mapping(lines: &[Line], pos: &mut usize, indent: usize) -> Result<Value, String> {
    let mut map = Map::new();
    while *pos < lines.len() && lines[*pos].indent == indent {
        let line = &lines[*pos];
        let Some((key, rest)) = split_key(&line.text) else {
            return Err(format!(
                "line {}: expected `key: value`, found `{}`",
                line.number,
                crate::error::shorten(&line.text)
            ));
        };
        *pos += 1;
        let value = if rest.is_empty() {
            nested(lines, pos, indent)?
        } else {
            scalar_or_flow(rest, line.number)?
        };
        let key = unquote(key);
        if map.contains_key(&key) {
            return Err(format!("line {}: `{key}` is given twice", line.number));
        }
        map.insert(key, value);
    }
    Ok(Value::Object(map))
}

/// The value of a key or item whose text is on the following, more indented lines (a
/// sequence may also sit at the key's own indentation, as YAML allows); none: null.
fn nested(lines: &[Line], pos: &mut usize, indent: usize) -> Result<Value, String> {
    match lines.get(*pos) {
        Some(next) if next.indent > indent => block(lines, pos, next.indent),
        Some(next)
            if next.indent == indent && (next.text == "-" || next.text.starts_with("- ")) =>
        {
            sequence(lines, pos, indent)
        }
        _ => Ok(Value::Null),
    }
}

/// `key: rest` (the key plain or quoted); `None` when the text is not a mapping entry.
fn split_key(text: &str) -> Option<(&str, &str)> {
    if text.starts_with('[') || text.starts_with('{') {
        return None;
    }
    let search_from = if text.starts_with('"') || text.starts_with('\'') {
        let q = text.chars().next()?;
        text[1..].find(q)? + 2
    } else {
        0
    };
    let bytes = text.as_bytes();
    let mut i = search_from;
    while i < bytes.len() {
        if bytes[i] == b':' && (i + 1 == bytes.len() || bytes[i + 1] == b' ') {
            return Some((text[..i].trim(), text[i + 1..].trim()));
        }
        i += 1;
    }
    None
}

fn scalar_or_flow(text: &str, line: usize) -> Result<Value, String> {
    if text.starts_with('&') || text.starts_with('*') || text.starts_with('!') {
        return Err(format!(
            "line {line}: anchors, aliases and tags are not read; write the value out"
        ));
    }
    if text.starts_with('[') || text.starts_with('{') {
        let mut chars = Flow { text, at: 0, line };
        let v = chars.value()?;
        chars.skip_space();
        if chars.at != text.len() {
            return Err(format!("line {line}: text after the closing bracket"));
        }
        return Ok(v);
    }
    Ok(scalar(text))
}

/// A plain or quoted scalar as YAML 1.1 (PyYAML) types it.
fn scalar(text: &str) -> Value {
    let t = text.trim();
    if (t.starts_with('"') && t.ends_with('"') || t.starts_with('\'') && t.ends_with('\''))
        && t.len() >= 2
    {
        return Value::String(unquote(t));
    }
    match t {
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        "true" | "True" | "TRUE" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" => {
            return Value::Bool(true);
        }
        "false" | "False" | "FALSE" | "no" | "No" | "NO" | "off" | "Off" | "OFF" => {
            return Value::Bool(false);
        }
        _ => {}
    }
    let digits = t.replace('_', "");
    if let Ok(i) = digits.parse::<i64>() {
        return Value::Number(i.into());
    }
    // PyYAML's float needs a dot (1e-5 stays a string there; the frameworks then cast it):
    // either way it is a number to the importer.
    if digits.chars().any(|c| c.is_ascii_digit())
        && let Ok(f) = digits.parse::<f64>()
        && let Some(n) = Number::from_f64(f)
    {
        return Value::Number(n);
    }
    Value::String(t.to_string())
}

/// A quoted key or scalar without its quotes (`''` in single quotes, the common escapes in
/// double quotes).
fn unquote(t: &str) -> String {
    let t = t.trim();
    if t.len() >= 2 && t.starts_with('\'') && t.ends_with('\'') {
        return t[1..t.len() - 1].replace("''", "'");
    }
    if t.len() >= 2 && t.starts_with('"') && t.ends_with('"') {
        let mut out = String::new();
        let mut chars = t[1..t.len() - 1].chars();
        while let Some(c) = chars.next() {
            if c == '\\' {
                match chars.next() {
                    Some('n') => out.push('\n'),
                    Some('t') => out.push('\t'),
                    Some(other) => out.push(other),
                    None => {}
                }
            } else {
                out.push(c);
            }
        }
        return out;
    }
    t.to_string()
}

/// A flow collection on one line.
struct Flow<'a> {
    text: &'a str,
    at: usize,
    line: usize,
}

impl Flow<'_> {
    fn skip_space(&mut self) {
        while self.text[self.at..].starts_with(' ') {
            self.at += 1;
        }
    }

    fn value(&mut self) -> Result<Value, String> {
        self.skip_space();
        let rest = &self.text[self.at..];
        if rest.starts_with('[') {
            self.at += 1;
            let mut items = Vec::new();
            loop {
                self.skip_space();
                if self.text[self.at..].starts_with(']') {
                    self.at += 1;
                    return Ok(Value::Array(items));
                }
                items.push(self.value()?);
                self.skip_space();
                self.separator(']')?;
            }
        }
        if rest.starts_with('{') {
            self.at += 1;
            let mut map = Map::new();
            loop {
                self.skip_space();
                if self.text[self.at..].starts_with('}') {
                    self.at += 1;
                    return Ok(Value::Object(map));
                }
                let key = self.atom(&[':'])?;
                if !self.text[self.at..].starts_with(':') {
                    return Err(format!(
                        "line {}: expected `:` in a flow mapping",
                        self.line
                    ));
                }
                self.at += 1;
                let value = self.value()?;
                map.insert(unquote(&key), value);
                self.skip_space();
                self.separator('}')?;
            }
        }
        let atom = self.atom(&[',', ']', '}'])?;
        Ok(scalar(&atom))
    }

    fn separator(&mut self, close: char) -> Result<(), String> {
        match self.text[self.at..].chars().next() {
            Some(',') => {
                self.at += 1;
                Ok(())
            }
            Some(c) if c == close => Ok(()),
            _ => Err(format!(
                "line {}: expected `,` or `{close}` in a flow collection",
                self.line
            )),
        }
    }

    /// A scalar up to one of `stops` (quotes kept for `scalar` to remove).
    fn atom(&mut self, stops: &[char]) -> Result<String, String> {
        self.skip_space();
        let rest = &self.text[self.at..];
        if let Some(q) = rest.chars().next().filter(|c| *c == '"' || *c == '\'') {
            let end = rest[1..]
                .find(q)
                .ok_or_else(|| format!("line {}: unclosed quote", self.line))?;
            self.at += end + 2;
            return Ok(rest[..end + 2].to_string());
        }
        let end = rest
            .find(|c| stops.contains(&c))
            .ok_or_else(|| format!("line {}: unclosed flow collection", self.line))?;
        self.at += end;
        Ok(rest[..end].trim().to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::parse;
    use serde_json::json;

    #[test]
    fn reads_the_shapes_configs_use() {
        let text = "\
base_model: meta-llama/Llama-3.2-1B  # the model
load_in_4bit: true
lora_target_modules:
  - q_proj
  - 'v_proj'
fsdp: [full_shard, auto_wrap]
fsdp_config:
  fsdp_offload_params: false
  inline: {a: 1, b: \"x, y\"}
datasets:
  - path: tatsu-lab/alpaca
    type: alpaca
learning_rate: 2e-4
lr: 0.0002
special_tokens:
chat_template: |
  {{ bos }}
  # not a comment
seed: 42
";
        let v = parse(text).expect("parses");
        assert_eq!(
            v,
            json!({
                "base_model": "meta-llama/Llama-3.2-1B",
                "load_in_4bit": true,
                "lora_target_modules": ["q_proj", "v_proj"],
                "fsdp": ["full_shard", "auto_wrap"],
                "fsdp_config": {"fsdp_offload_params": false, "inline": {"a": 1, "b": "x, y"}},
                "datasets": [{"path": "tatsu-lab/alpaca", "type": "alpaca"}],
                "learning_rate": 0.0002,
                "lr": 0.0002,
                "special_tokens": null,
                "chat_template": "{{ bos }}\n# not a comment",
                "seed": 42
            })
        );
    }

    #[test]
    fn sequences_at_the_keys_indentation() {
        let v = parse("a:\n- 1\n- 2\nb: x\n").expect("parses");
        assert_eq!(v, json!({"a": [1, 2], "b": "x"}));
    }

    #[test]
    fn refuses_what_it_cannot_read_with_the_line() {
        assert_eq!(
            parse("a: 1\na: 2\n").expect_err("refused"),
            "line 2: `a` is given twice"
        );
        assert!(
            parse("a: &x 1\n")
                .expect_err("refused")
                .starts_with("line 1:")
        );
        assert!(parse("a: [1, 2\n").expect_err("refused").contains("line 1"));
        assert!(
            parse("a:\n  b: 1\n c: 2\n")
                .expect_err("refused")
                .contains("line 3")
        );
    }
}
