//! A calculator block: `key: value` lines inside a ```` ```headroom ```` fence.

use crate::codec::{KEYS, query_pairs};

/// How a block shows its figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    Summary,
    Table,
    Grid,
    Bars,
    Timeline,
    Breakdown,
}

impl View {
    const ALL: [(&'static str, View); 6] = [
        ("summary", View::Summary),
        ("table", View::Table),
        ("grid", View::Grid),
        ("bars", View::Bars),
        ("timeline", View::Timeline),
        ("breakdown", View::Breakdown),
    ];

    pub fn id(self) -> &'static str {
        View::ALL
            .iter()
            .find(|(_, v)| *v == self)
            .map_or("", |(id, _)| id)
    }
}

/// A change a row or column applies: its label and its link-style query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub label: String,
    pub query: String,
}

/// One calculator block, as written.
#[derive(Debug, Clone, PartialEq)]
pub struct Block {
    /// The first line of the block in the file (for messages).
    pub line: usize,
    pub scenario: String,
    /// Link-style changes on the named scenario.
    pub set: String,
    /// Link keys the reader may change.
    pub inputs: Vec<String>,
    pub view: View,
    pub rows: Vec<Change>,
    pub cols: Vec<Change>,
    /// `table`: one column per metric.
    pub columns: Vec<String>,
    /// `grid`: the cell's metric.
    pub metric: String,
    /// `summary` and `bars`: the metrics shown.
    pub metrics: Vec<String>,
    pub caption: String,
}

const KEYS_ALLOWED: [&str; 10] = [
    "scenario", "set", "inputs", "view", "rows", "cols", "columns", "metric", "metrics", "caption",
];

impl Block {
    /// Parses the lines between the fences; `first` is the file line of `lines[0]`.
    pub fn parse(lines: &[&str], first: usize) -> Result<Block, (usize, String)> {
        let mut b = Block {
            line: first.saturating_sub(1),
            scenario: String::new(),
            set: String::new(),
            inputs: Vec::new(),
            view: View::Summary,
            rows: Vec::new(),
            cols: Vec::new(),
            columns: Vec::new(),
            metric: String::new(),
            metrics: Vec::new(),
            caption: String::new(),
        };
        let mut view = None;
        let mut seen = Vec::new();
        for (i, raw) in lines.iter().enumerate() {
            let at = first + i;
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (key, value) = line
                .split_once(':')
                .ok_or((at, format!("block line `{line}` is not `key: value`")))?;
            let (key, value) = (key.trim(), value.trim());
            if !KEYS_ALLOWED.contains(&key) {
                return Err((
                    at,
                    format!(
                        "unknown block key `{key}`; allowed: {}",
                        KEYS_ALLOWED.join(", ")
                    ),
                ));
            }
            if seen.contains(&key) {
                return Err((at, format!("block key `{key}` appears twice")));
            }
            seen.push(key);
            match key {
                "scenario" => b.scenario = value.to_string(),
                "set" => {
                    check_query(value).map_err(|m| (at, format!("set: {m}")))?;
                    b.set = value.to_string();
                }
                "inputs" => {
                    b.inputs = list(value);
                    for k in &b.inputs {
                        if !KEYS.contains(&k.as_str()) || k == "v" || k == "cfg" {
                            return Err((
                                at,
                                format!(
                                    "unknown input `{k}`; inputs are link keys: {}",
                                    KEYS[1..].join(", ")
                                ),
                            ));
                        }
                    }
                }
                "view" => {
                    view = Some(View::ALL.iter().find(|(id, _)| *id == value).map(|(_, v)| *v).ok_or(
                        (at, format!(
                            "unknown view `{value}`; allowed: summary, table, grid, bars, timeline, breakdown"
                        )),
                    )?);
                }
                "rows" => b.rows = changes(value).map_err(|m| (at, format!("rows: {m}")))?,
                "cols" => b.cols = changes(value).map_err(|m| (at, format!("cols: {m}")))?,
                "columns" => b.columns = list(value),
                "metric" => b.metric = value.to_string(),
                "metrics" => b.metrics = list(value),
                _ => b.caption = value.to_string(),
            }
        }
        let at = b.line;
        b.view = view.ok_or((at, "a block needs `view:`".to_string()))?;
        if b.scenario.is_empty() {
            return Err((at, "a block needs `scenario:` (a named scenario id)".into()));
        }
        let need = |ok: bool, what: &str| {
            if ok {
                Ok(())
            } else {
                Err((at, format!("view `{}` needs {what}", b.view.id())))
            }
        };
        match b.view {
            View::Summary => need(!b.metrics.is_empty(), "`metrics:`")?,
            View::Table => need(
                !b.rows.is_empty() && !b.columns.is_empty(),
                "`rows:` and `columns:`",
            )?,
            View::Grid => need(
                !b.rows.is_empty() && !b.cols.is_empty() && !b.metric.is_empty(),
                "`rows:`, `cols:` and `metric:`",
            )?,
            View::Bars => need(
                !b.rows.is_empty() && (1..=2).contains(&b.metrics.len()),
                "`rows:` and one or two `metrics:`",
            )?,
            View::Timeline | View::Breakdown => {}
        }
        Ok(b)
    }

    /// Every metric the block evaluates.
    pub fn all_metrics(&self) -> Vec<&str> {
        let mut out: Vec<&str> = self.columns.iter().map(String::as_str).collect();
        out.extend(self.metrics.iter().map(String::as_str));
        if !self.metric.is_empty() {
            out.push(&self.metric);
        }
        out
    }
}

fn list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

/// `label => query | label => query | query`.
fn changes(value: &str) -> Result<Vec<Change>, String> {
    value
        .split('|')
        .map(|item| {
            let (label, query) = match item.split_once("=>") {
                Some((l, q)) => (l.trim().to_string(), q.trim().to_string()),
                None => (item.trim().to_string(), item.trim().to_string()),
            };
            check_query(&query)?;
            if label.is_empty() {
                return Err("an empty row or column".into());
            }
            Ok(Change { label, query })
        })
        .collect()
}

/// The keys of a change are link keys (values are checked when the block is evaluated).
fn check_query(q: &str) -> Result<(), String> {
    for (k, _) in query_pairs(q).map_err(|e| e.to_string())? {
        if !KEYS.contains(&k.as_str()) {
            return Err(format!(
                "unknown link field `{}`",
                crate::error::shorten(&k)
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Block, (usize, String)> {
        let lines: Vec<&str> = text.lines().collect();
        Block::parse(&lines, 10)
    }

    #[test]
    fn parses_a_table() {
        let b = parse(
            "scenario: s\nset: batch=2\ninputs: batch, seq\nview: table\nrows: A => precision=fp32 | precision=bf16\ncolumns: peak.device, bytes.weights\ncaption: c",
        )
        .expect("parses");
        assert_eq!(b.view, View::Table);
        assert_eq!(b.inputs, vec!["batch", "seq"]);
        assert_eq!(b.rows[0].label, "A");
        assert_eq!(b.rows[1].label, "precision=bf16");
        assert_eq!(b.all_metrics(), vec!["peak.device", "bytes.weights"]);
    }

    #[test]
    fn names_what_is_wrong() {
        for (text, want) in [
            ("scenario: s\nview: pie", "unknown view"),
            ("scenario: s\nview: table\ncolumns: a", "needs `rows:`"),
            (
                "scenario: s\nview: summary\nmetrics: a\ninputs: nonsense",
                "unknown input",
            ),
            (
                "scenario: s\nview: summary\nmetrics: a\ncolour: red",
                "unknown block key",
            ),
            ("view: summary\nmetrics: a", "needs `scenario:`"),
            (
                "scenario: s\nview: table\nrows: x => bogus=1\ncolumns: a",
                "unknown link field",
            ),
            ("scenario: s\nscenario: t\nview: timeline", "twice"),
        ] {
            let (_, m) = parse(text).expect_err(text);
            assert!(m.contains(want), "{text}: {m}");
        }
    }
}
