//! The worked examples' claims (`content/claims/ex*.toml`), evaluated by the core.
//!
//! Each claim names a named scenario (plus optional link-style overrides) and a metric of the
//! CLI's JSON (`bytes.weights`, `parameters.total`, `verdict.capacity`, ...) or a component id;
//! this test computes every one, checks its verdict against the figure, and compares the table
//! with the committed `content/claims/SNAPSHOT.md`, so a core change that moves a number in a
//! worked example shows up in review. `UPDATE_SNAPSHOTS=1` rewrites the snapshot.
#![cfg(feature = "toml")]

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use headroom_core::codec::{NamedScenario, decode_pairs, named_scenarios, query_pairs};
use headroom_core::{Analysis, analyze};
use serde_json::{Value, json};

/// A claim is `right` when Headroom's figure is within this fraction of the claimed one
/// (relative to Headroom's figure), `wrong` when it is further.
const RIGHT_WITHIN: f64 = 0.10;

const FIELDS: &[&str] = &[
    "quote",
    "scenario",
    "overrides",
    "metric",
    "claimed",
    "verdict",
    "note",
];

fn claims_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../content/claims")
}

/// `ex0.toml` .. in name order, as (stem, text).
fn claim_files() -> Vec<(String, String)> {
    let mut files: Vec<(String, String)> = fs::read_dir(claims_dir())
        .expect("content/claims/ exists")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .map(|p| {
            let stem = p.file_stem().and_then(|s| s.to_str()).expect("a file name");
            let text = fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (stem.to_string(), text)
        })
        .collect();
    files.sort();
    files
}

struct Claim {
    quote: String,
    scenario: String,
    overrides: String,
    metric: String,
    claimed: f64,
    verdict: String,
}

fn parse_claims(file: &str, text: &str) -> Result<Vec<Claim>, String> {
    let doc: Value = toml::from_str(text).map_err(|e| format!("{file}: does not parse: {e}"))?;
    let list = doc
        .get("claim")
        .and_then(Value::as_array)
        .ok_or_else(|| format!("{file}: no [[claim]] entries"))?;
    let mut out = Vec::new();
    for (i, c) in list.iter().enumerate() {
        let at = format!("{file}, claim {}", i + 1);
        let table = c.as_object().ok_or_else(|| format!("{at}: not a table"))?;
        if let Some(k) = table.keys().find(|k| !FIELDS.contains(&k.as_str())) {
            return Err(format!(
                "{at}: unknown field `{k}` (known: {})",
                FIELDS.join(", ")
            ));
        }
        let text = |k: &str, required: bool| -> Result<String, String> {
            match table.get(k) {
                Some(Value::String(s)) if !required || !s.trim().is_empty() => Ok(s.clone()),
                None if !required => Ok(String::new()),
                _ => Err(format!("{at}: `{k}` must be a non-empty string")),
            }
        };
        let claimed = table
            .get("claimed")
            .and_then(Value::as_f64)
            .ok_or_else(|| format!("{at}: `claimed` must be a number"))?;
        let verdict = text("verdict", true)?;
        if !["right", "wrong", "partly"].contains(&verdict.as_str()) {
            return Err(format!(
                "{at}: verdict `{verdict}` is not one of right, wrong, partly"
            ));
        }
        text("note", true)?;
        out.push(Claim {
            quote: text("quote", true)?,
            scenario: text("scenario", true)?,
            overrides: text("overrides", false)?,
            metric: text("metric", true)?,
            claimed,
            verdict,
        });
    }
    Ok(out)
}

/// The fields a metric may name: the CLI's JSON (`headroom estimate --format json`) without the
/// lists; components are looked up by id.
fn metric_doc(a: &Analysis) -> Value {
    let e = &a.estimate;
    json!({
        "parameters": e.parameters,
        "bytes": e.bytes,
        "peak": e.peak,
        "verdict": e.verdict,
        "fit": a.fit,
    })
}

fn field(a: &Analysis, doc: &Value, name: &str) -> Result<f64, String> {
    let name = name.trim();
    let id = name.strip_prefix("components.").unwrap_or(name);
    if let Some(c) = a.estimate.components.iter().find(|c| c.id == id) {
        return Ok(c.bytes as f64);
    }
    let mut v = doc;
    for part in name.split('.') {
        v = v.get(part).ok_or_else(|| {
            let components: Vec<String> = a
                .estimate
                .components
                .iter()
                .map(|c| c.id.to_string())
                .collect();
            format!(
                "unknown metric `{name}`: not a JSON field (parameters.*, bytes.*, peak.*, \
                 verdict.*, fit.*) nor a component id ({})",
                components.join(", ")
            )
        })?;
    }
    match v {
        Value::Number(n) => n
            .as_f64()
            .ok_or_else(|| format!("`{name}` is not a number")),
        Value::Bool(b) => Ok(f64::from(u8::from(*b))),
        Value::Null => Err(format!("`{name}` has no value here (null)")),
        _ => Err(format!("`{name}` is not a number")),
    }
}

/// `a+b+c`, optionally `(a+b)/d`: the sum of fields, divided by one field.
fn eval_metric(a: &Analysis, metric: &str) -> Result<f64, String> {
    let doc = metric_doc(a);
    let (num, den) = match metric.rsplit_once('/') {
        Some((n, d)) => (n, Some(d)),
        None => (metric, None),
    };
    let num = num.trim().trim_start_matches('(').trim_end_matches(')');
    let mut sum = 0.0;
    for term in num.split('+') {
        sum += field(a, &doc, term)?;
    }
    match den {
        Some(d) => {
            let d = field(a, &doc, d)?;
            if d == 0.0 {
                return Err(format!("`{metric}` divides by zero"));
            }
            Ok(sum / d)
        }
        None => Ok(sum),
    }
}

fn is_bytes(metric: &str) -> bool {
    !metric.contains('/') && !metric.starts_with("parameters.") && !metric.starts_with("fit.")
}

fn thousands(n: f64) -> String {
    let digits = format!("{}", n.round() as i128);
    let (sign, digits) = digits
        .strip_prefix('-')
        .map_or(("", digits.as_str()), |d| ("-", d));
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    format!("{sign}{out}")
}

fn show(metric: &str, v: f64) -> String {
    if metric.contains('/') {
        format!("{v:.3}")
    } else if is_bytes(metric) {
        format!("{} B ({:.2} GiB)", thousands(v), v / f64::from(1u32 << 30))
    } else {
        thousands(v)
    }
}

fn cell(s: &str) -> String {
    s.replace('|', "\\|")
}

#[test]
fn worked_example_claims_match_the_snapshot() {
    let named: Vec<NamedScenario> = named_scenarios();
    let files = claim_files();
    let mut errors = Vec::new();
    for n in 0..5 {
        if !files.iter().any(|(stem, _)| *stem == format!("ex{n}")) {
            errors.push(format!("content/claims/ex{n}.toml is missing"));
        }
        if !named.iter().any(|s| s.id.starts_with(&format!("ex{n}-"))) {
            errors.push(format!("no named scenario content/scenarios/ex{n}-*.toml"));
        }
    }

    let mut table = String::from(
        "# Worked examples: the documents' claims against Headroom\n\n\
         Generated by `crates/headroom-core/tests/worked_examples.rs` from `content/claims/ex*.toml`;\n\
         do not edit. Difference = (claimed - Headroom) / Headroom. Rewrite with\n\
         `UPDATE_SNAPSHOTS=1 cargo test -p headroom-core --test worked_examples`.\n",
    );
    for (stem, text) in &files {
        let file = format!("content/claims/{stem}.toml");
        let claims = match parse_claims(&file, text) {
            Ok(c) => c,
            Err(e) => {
                errors.push(e);
                continue;
            }
        };
        let _ = write!(
            table,
            "\n## {stem}\n\n| # | claim | scenario | metric | claimed | Headroom | difference | verdict |\n\
             |---|---|---|---|---|---|---|---|\n"
        );
        for (i, c) in claims.iter().enumerate() {
            let at = format!("{file}, claim {} (`{}`)", i + 1, c.quote);
            if stem.starts_with("ex") && !c.scenario.starts_with(&format!("{stem}-")) {
                errors.push(format!(
                    "{at}: scenario `{}` is not one of this example's (`{stem}-...`)",
                    c.scenario
                ));
            }
            let Some(base) = named.iter().find(|s| s.id == c.scenario) else {
                let ids: Vec<&str> = named.iter().map(|s| s.id.as_str()).collect();
                errors.push(format!(
                    "{at}: unknown scenario `{}` (named scenarios: {})",
                    c.scenario,
                    ids.join(", ")
                ));
                continue;
            };
            let scen = match query_pairs(&c.overrides)
                .and_then(|pairs| decode_pairs(base.scenario.clone(), &pairs))
            {
                Ok(s) => s,
                Err(e) => {
                    errors.push(format!("{at}: overrides `{}`: {e}", c.overrides));
                    continue;
                }
            };
            let analysis = match analyze(&scen) {
                Ok(a) => a,
                Err(e) => {
                    errors.push(format!("{at}: the scenario does not analyze: {e}"));
                    continue;
                }
            };
            let computed = match eval_metric(&analysis, &c.metric) {
                Ok(v) => v,
                Err(e) => {
                    errors.push(format!("{at}: {e}"));
                    continue;
                }
            };
            let off = if computed == 0.0 {
                None
            } else {
                Some((c.claimed - computed) / computed)
            };
            let within = off.is_some_and(|d| d.abs() <= RIGHT_WITHIN);
            match c.verdict.as_str() {
                "right" if !within => errors.push(format!(
                    "{at}: marked right, but Headroom computes {} against {} claimed",
                    show(&c.metric, computed),
                    show(&c.metric, c.claimed)
                )),
                "wrong" if within => errors.push(format!(
                    "{at}: marked wrong, but Headroom computes {}, within {:.0}% of the {} claimed",
                    show(&c.metric, computed),
                    RIGHT_WITHIN * 100.0,
                    show(&c.metric, c.claimed)
                )),
                _ => {}
            }
            let scenario = if c.overrides.is_empty() {
                format!("`{}`", c.scenario)
            } else {
                format!("`{}` + `{}`", c.scenario, c.overrides)
            };
            let _ = writeln!(
                table,
                "| {} | {} | {} | `{}` | {} | {} | {} | {} |",
                i + 1,
                cell(&c.quote),
                cell(&scenario),
                cell(&c.metric),
                show(&c.metric, c.claimed),
                show(&c.metric, computed),
                off.map_or("n/a".into(), |d| format!("{:+.1}%", d * 100.0)),
                c.verdict
            );
        }
    }
    assert!(
        errors.is_empty(),
        "worked-example claims:\n  {}",
        errors.join("\n  ")
    );

    let path = claims_dir().join("SNAPSHOT.md");
    if std::env::var("UPDATE_SNAPSHOTS").is_ok_and(|v| v == "1") {
        fs::write(&path, &table).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        return;
    }
    let committed = fs::read_to_string(&path)
        .unwrap_or_default()
        .replace("\r\n", "\n");
    if committed != table {
        let first = committed
            .lines()
            .zip(table.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| committed.lines().count().min(table.lines().count()));
        panic!(
            "content/claims/SNAPSHOT.md is out of date (first difference at line {}):\n  \
             committed: {}\n  computed:  {}\nIf the change is intended, rewrite it with \
             `UPDATE_SNAPSHOTS=1 cargo test -p headroom-core --test worked_examples` and review \
             the diff.",
            first + 1,
            committed.lines().nth(first).unwrap_or("(end of file)"),
            table.lines().nth(first).unwrap_or("(end of file)")
        );
    }
}
