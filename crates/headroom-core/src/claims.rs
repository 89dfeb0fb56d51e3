//! The worked examples' claims (`content/claims/ex*.toml`), checked by the core.
//!
//! Each claim names a named scenario (plus optional link-style overrides) and a metric: a field
//! of the CLI's JSON (`bytes.weights`, `parameters.total`, `verdict.capacity`, `fit.*`, ...) or
//! a component id; `+` sums several, and one `/field` divides the sum. [`evaluate`] analyzes
//! each claim's scenario with [`analyze_only`] and returns one [`Row`] per claim: the claim, the
//! figure Headroom computes, the difference and the verdict the file states. The claims pages
//! of the site and the snapshot test (`tests/worked_examples.rs`) both call it.
//!
//! A note's figures are live: `{{metric}}` (or `{{metric @ change}}`, `{{metric | GB}}` for
//! decimal gigabytes) is computed from the claim's scenario like the Headroom column, so the
//! explanation cannot drift from it. A verdict that would change if Headroom's assumed figures
//! (components of confidence `assumed`) were anywhere from zero to twice their value must be
//! `unverified`: an assumption never marks a claim right or wrong.
//!
//! Pure: the input is text (JSON, as `build.rs` embeds the files, or TOML with the `toml`
//! feature); the embedded files are [`embedded`].
//!
//! The claims are embedded under the `embedded-claims` feature, which the CLI and the tests turn on
//! and the site leaves off: its examples pages fetch `content/claims.json` (written by
//! `site/pages.sh`) and read it with `parse_bundle`. A note may not write out a byte figure its
//! quote does not state. The assumed part is `metrics::assumed_part`.

use std::borrow::Borrow;
use std::fmt::Display;

use serde_json::{Map, Value};
use thiserror::Error;

use crate::analysis::{Analysis, What, analyze_only};
use crate::codec::{NamedScenario, decode_pairs, query_pairs};
use crate::error::ScenarioError;
use crate::scenario::Scenario;

pub use crate::metrics::{Unit, eval_metric, metric_unit};

/// A claim is `right` when Headroom's figure is within this fraction of the claimed one
/// (relative to Headroom's figure), `wrong` when it is further.
pub const RIGHT_WITHIN: f64 = 0.10;

/// The fields a `[[claim]]` may have.
pub const FIELDS: &[&str] = &[
    "quote",
    "scenario",
    "overrides",
    "metric",
    "claimed",
    "verdict",
    "note",
];

/// The fields a claims file may have besides `[[claim]]`.
pub const FILE_FIELDS: &[&str] = &["title", "summary", "claim"];

/// What the file says of a claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Headroom's figure is within [`RIGHT_WITHIN`] of the claim.
    Right,
    /// Off by more than [`RIGHT_WITHIN`].
    Wrong,
    /// Right about part of it; the note says which.
    Partly,
    /// The verdict would rest on a figure Headroom only assumes; the note says which and why.
    Unverified,
}

impl Verdict {
    pub fn id(self) -> &'static str {
        match self {
            Verdict::Right => "right",
            Verdict::Wrong => "wrong",
            Verdict::Partly => "partly",
            Verdict::Unverified => "unverified",
        }
    }

    fn parse(s: &str) -> Option<Verdict> {
        match s {
            "right" => Some(Verdict::Right),
            "wrong" => Some(Verdict::Wrong),
            "partly" => Some(Verdict::Partly),
            "unverified" => Some(Verdict::Unverified),
            _ => None,
        }
    }
}

/// One claim as the file states it.
#[derive(Debug, Clone, PartialEq)]
pub struct Claim {
    pub quote: String,
    pub scenario: String,
    /// Link-style fields on top of the scenario (`batch=64&seq=512`), or empty.
    pub overrides: String,
    pub metric: String,
    pub claimed: f64,
    pub verdict: Verdict,
    /// The explanation with its live figures (see [`NotePart`]).
    pub note: Vec<NotePart>,
}

/// A piece of a claim's note: text, or a figure computed from the claim's scenario.
#[derive(Debug, Clone, PartialEq)]
pub enum NotePart {
    Text(String),
    /// `{{metric}}`, `{{metric @ change}}` (link fields on top of the claim's scenario), with
    /// `| GB` for bytes in decimal gigabytes (as the documents write them).
    Value {
        metric: String,
        change: String,
        decimal: bool,
    },
}

/// Splits a note into text and `{{...}}` figures.
pub fn parse_note(note: &str) -> Result<Vec<NotePart>, String> {
    let mut parts = Vec::new();
    let mut rest = note;
    while let Some(start) = rest.find("{{") {
        if start > 0 {
            parts.push(NotePart::Text(rest[..start].to_string()));
        }
        let end = rest[start..]
            .find("}}")
            .ok_or("an unclosed {{ (write figures as {{metric}})")?;
        let inner = &rest[start + 2..start + end];
        let (inner, decimal) = match inner.split_once('|') {
            Some((m, "GB" | " GB")) => (m, true),
            Some((_, f)) => return Err(format!("`{{{{{inner}}}}}`: unknown format `{f}` (GB)")),
            None => (inner, false),
        };
        let (metric, change) = inner.split_once('@').unwrap_or((inner, ""));
        if metric.trim().is_empty() {
            return Err("an empty {{}}: name a metric".into());
        }
        parts.push(NotePart::Value {
            metric: metric.trim().to_string(),
            change: change.trim().to_string(),
            decimal,
        });
        rest = &rest[start + end + 2..];
    }
    if rest.contains("}}") {
        return Err("a }} without {{".into());
    }
    if !rest.is_empty() {
        parts.push(NotePart::Text(rest.to_string()));
    }
    Ok(parts)
}

/// The byte figures written out in a text (`1.5 GB`, `13.6GB`, `0.34 GiB`): a note may write
/// only those its claim's quote has (the document's own words); the rest are `{{...}}`.
pub fn literal_byte_figures(text: &str) -> Vec<String> {
    const UNITS: [&str; 8] = ["KiB", "MiB", "GiB", "TiB", "KB", "MB", "GB", "TB"];
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        // A figure starts after a non-alphanumeric, or after the `x` of `8x80 GB`.
        let after_times = i >= 2 && b[i - 1] == b'x' && b[i - 2].is_ascii_digit();
        let starts =
            b[i].is_ascii_digit() && (i == 0 || !b[i - 1].is_ascii_alphanumeric() || after_times);
        if !starts {
            i += 1;
            continue;
        }
        let mut j = i;
        while j < b.len() && (b[j].is_ascii_digit() || b[j] == b'.' || b[j] == b',') {
            j += 1;
        }
        let num_end = j;
        if j < b.len() && b[j] == b' ' {
            j += 1;
        }
        let unit = UNITS.iter().find(|u| {
            text[j..].starts_with(*u)
                && !text[j + u.len()..].starts_with(|c: char| c.is_ascii_alphanumeric())
        });
        if let Some(u) = unit {
            out.push(format!(
                "{} {u}",
                text[i..num_end].trim_end_matches(['.', ','])
            ));
            i = j + u.len();
        } else {
            i = num_end.max(i + 1);
        }
    }
    out
}

impl Claim {
    pub fn unit(&self) -> Unit {
        metric_unit(&self.metric)
    }

    /// The short link of the claim's scenario with its overrides (`/s/<id>?batch=1`), below
    /// the site's base.
    pub fn link(&self) -> String {
        if self.overrides.is_empty() {
            format!("/s/{}", self.scenario)
        } else {
            format!("/s/{}?{}", self.scenario, self.overrides)
        }
    }
}

/// One worked example's claims file.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimFile {
    /// The file stem (`ex2`).
    pub id: String,
    /// A title for the page (empty when the file has none).
    pub title: String,
    /// One line on the example.
    pub summary: String,
    pub claims: Vec<Claim>,
}

/// A claims file or claim that cannot be used, naming the file, the claim and the field.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ClaimError {
    #[error("{file}: {message}")]
    Parse { file: String, message: String },
    #[error("{at}: field `{field}` {message}")]
    Field {
        at: String,
        field: String,
        message: String,
    },
    #[error("{at}: unknown scenario `{found}` (named scenarios: {known})")]
    UnknownScenario {
        at: String,
        found: String,
        known: String,
    },
    #[error("{at}: `overrides` `{overrides}`: {error}")]
    Overrides {
        at: String,
        overrides: String,
        error: ScenarioError,
    },
    #[error("{at}: the scenario does not analyze: {message}")]
    Analyze { at: String, message: String },
    #[error("{at}: `metric` {message}")]
    Metric { at: String, message: String },
}

/// Parses a claims file; `id` is its stem (`ex2`), used in messages as `content/claims/<id>.toml`.
pub fn parse_file(id: &str, text: &str) -> Result<ClaimFile, ClaimError> {
    let file = format!("content/claims/{id}.toml");
    let doc: Map<String, Value> =
        crate::catalog::parse_content(&file, text).map_err(|e| ClaimError::Parse {
            file: file.clone(),
            message: e.to_string(),
        })?;
    parse_doc(id, file, &doc)
}

/// A claims file already parsed into its table; `file` names it in messages.
fn parse_doc(id: &str, file: String, doc: &Map<String, Value>) -> Result<ClaimFile, ClaimError> {
    if let Some(k) = doc.keys().find(|k| !FILE_FIELDS.contains(&k.as_str())) {
        return Err(ClaimError::Field {
            at: file,
            field: k.clone(),
            message: format!("is not known (known: {})", FILE_FIELDS.join(", ")),
        });
    }
    let top = |k: &str| doc.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let list = doc
        .get("claim")
        .and_then(Value::as_array)
        .filter(|l| !l.is_empty())
        .ok_or_else(|| ClaimError::Field {
            at: file.clone(),
            field: "claim".into(),
            message: "must be a non-empty list of [[claim]] tables".into(),
        })?;
    let claims = list
        .iter()
        .enumerate()
        .map(|(i, c)| parse_claim(&format!("{file}, claim {}", i + 1), c))
        .collect::<Result<_, _>>()?;
    Ok(ClaimFile {
        id: id.to_string(),
        title: top("title"),
        summary: top("summary"),
        claims,
    })
}

fn parse_claim(at: &str, c: &Value) -> Result<Claim, ClaimError> {
    let bad = |field: &str, message: &str| ClaimError::Field {
        at: at.to_string(),
        field: field.to_string(),
        message: message.to_string(),
    };
    let table = c
        .as_object()
        .ok_or_else(|| bad("claim", "must be a table"))?;
    if let Some(k) = table.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(bad(
            k,
            &format!("is not known (known: {})", FIELDS.join(", ")),
        ));
    }
    let text = |k: &str, required: bool| -> Result<String, ClaimError> {
        match table.get(k) {
            Some(Value::String(s)) if !required || !s.trim().is_empty() => Ok(s.clone()),
            None if !required => Ok(String::new()),
            _ => Err(bad(k, "must be a non-empty string")),
        }
    };
    let claimed = table
        .get("claimed")
        .and_then(Value::as_f64)
        .ok_or_else(|| bad("claimed", "must be a number"))?;
    let verdict = text("verdict", true)?;
    let verdict = Verdict::parse(&verdict)
        .ok_or_else(|| bad("verdict", "must be one of right, wrong, partly, unverified"))?;
    let note = parse_note(&text("note", true)?).map_err(|m| bad("note", &m))?;
    let quote = text("quote", true)?;
    let quoted = literal_byte_figures(&quote);
    for part in &note {
        if let NotePart::Text(t) = part
            && let Some(f) = literal_byte_figures(t)
                .into_iter()
                .find(|f| !quoted.contains(f))
        {
            return Err(bad(
                "note",
                &format!(
                    "writes the figure `{f}`, which the quote does not: write Headroom's \
                     figures as {{{{metric}}}} so they are computed"
                ),
            ));
        }
    }
    Ok(Claim {
        quote,
        scenario: text("scenario", true)?,
        overrides: text("overrides", false)?,
        metric: text("metric", true)?,
        claimed,
        verdict,
        note,
    })
}

/// The claims files compiled into the core (`content/claims/*.toml`), sorted by id; each one
/// parsed, or the error that says why not (the core's tests fail on one).
pub fn embedded() -> Vec<Result<ClaimFile, ClaimError>> {
    // Empty without the `embedded-claims` feature (the site): see [`parse_bundle`].
    crate::catalog::embedded::CLAIM_FILES
        .iter()
        .map(|(id, text)| parse_file(id, text))
        .collect()
}

/// The claims files of `content/claims.json` (what site/pages.sh writes for the site: an
/// object of file stem -> the file as JSON), each parsed as [`parse_file`] parses one.
pub fn parse_bundle(json: &str) -> Result<Vec<Result<ClaimFile, ClaimError>>, ClaimError> {
    let files: Map<String, Value> = serde_json::from_str(json).map_err(|e| ClaimError::Parse {
        file: "content/claims.json".into(),
        message: e.to_string(),
    })?;
    Ok(files
        .iter()
        .map(|(id, doc)| {
            let file = format!("content/claims/{id}.toml");
            // Read from the parsed value itself (writing it out to parse it again linked
            // serde_json's writer into the page for this alone).
            match doc.as_object() {
                Some(table) => parse_doc(id, file, table),
                None => Err(ClaimError::Parse {
                    file,
                    message: "must be a claims file's table".into(),
                }),
            }
        })
        .collect())
}

/// One claim checked: the claim, Headroom's figure and the difference.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub claim: Claim,
    /// Headroom's figure for the claim's metric.
    pub computed: f64,
    /// (claimed - computed) / computed; `None` when Headroom computes zero.
    pub difference: Option<f64>,
    /// The part of `computed` that rests on assumed figures ([`crate::metrics::assumed_part`]).
    pub assumed: f64,
    /// The note with its figures computed.
    pub note: String,
}

impl Row {
    /// Whether the claim is within [`RIGHT_WITHIN`] of Headroom's figure.
    pub fn within(&self) -> bool {
        self.difference.is_some_and(|d| d.abs() <= RIGHT_WITHIN)
    }

    /// Whether being within [`RIGHT_WITHIN`] would change if the assumed part of Headroom's
    /// figure were anywhere from zero to twice its value.
    pub fn rests_on_assumptions(&self) -> bool {
        let c = self.claim.claimed;
        if self.assumed <= 0.0 || c <= 0.0 {
            return false;
        }
        let (lo, hi) = (
            (self.computed - self.assumed).max(0.0),
            self.computed + self.assumed,
        );
        // Within at x when claimed / (1 + r) <= x <= claimed / (1 - r).
        let (a, b) = (c / (1.0 + RIGHT_WITHIN), c / (1.0 - RIGHT_WITHIN));
        let inside = lo >= a && hi <= b;
        let outside = hi < a || lo > b;
        !(inside || outside)
    }

    /// Whether the verdict the file states agrees with the figures: `unverified` exactly when
    /// the verdict rests on assumptions, otherwise `right` within [`RIGHT_WITHIN`], `wrong`
    /// outside it, `partly` either way.
    pub fn verdict_holds(&self) -> bool {
        if self.rests_on_assumptions() {
            return self.claim.verdict == Verdict::Unverified;
        }
        match self.claim.verdict {
            Verdict::Right => self.within(),
            Verdict::Wrong => !self.within(),
            Verdict::Partly => true,
            Verdict::Unverified => false,
        }
    }
}

/// Evaluates every claim of a file against the named scenarios, with [`analyze_only`] (what fits
/// included).
pub fn evaluate(file: &ClaimFile, named: &[NamedScenario]) -> Vec<Result<Row, ClaimError>> {
    // A claim names the estimate, the time model or what fits, never the strategy table.
    evaluate_with(file, named, |s| analyze_only(s, What::FIT, None))
}

/// [`evaluate`] with the caller's analysis (the site passes the one its calculator uses, so
/// its download carries one copy of the analysis).
pub fn evaluate_with<A, E>(
    file: &ClaimFile,
    named: &[NamedScenario],
    analyze: impl Fn(&Scenario) -> Result<A, E>,
) -> Vec<Result<Row, ClaimError>>
where
    A: Borrow<Analysis>,
    E: Display,
{
    file.claims
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let at = format!("content/claims/{}.toml, claim {}", file.id, i + 1);
            evaluate_claim(&at, c, named, &analyze)
        })
        .collect()
}

/// Evaluates one claim; `at` names it in errors.
pub fn evaluate_claim<A, E>(
    at: &str,
    claim: &Claim,
    named: &[NamedScenario],
    analyze: impl Fn(&Scenario) -> Result<A, E>,
) -> Result<Row, ClaimError>
where
    A: Borrow<Analysis>,
    E: Display,
{
    let base = named
        .iter()
        .find(|s| s.id == claim.scenario)
        .ok_or_else(|| ClaimError::UnknownScenario {
            at: at.to_string(),
            found: claim.scenario.clone(),
            known: named
                .iter()
                .map(|s| s.id.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        })?;
    let with = |scen: Scenario, overrides: &str| {
        query_pairs(overrides)
            .and_then(|pairs| decode_pairs(scen, &pairs))
            .map_err(|error| ClaimError::Overrides {
                at: at.to_string(),
                overrides: overrides.to_string(),
                error,
            })
    };
    let run = |scen: &Scenario| {
        analyze(scen).map_err(|e| ClaimError::Analyze {
            at: at.to_string(),
            message: e.to_string(),
        })
    };
    let metric = |a: &Analysis, m: &str| {
        eval_metric(a, m).map_err(|message| ClaimError::Metric {
            at: at.to_string(),
            message,
        })
    };
    let scen = with(base.scenario.clone(), &claim.overrides)?;
    let analysis = run(&scen)?;
    let computed = metric(analysis.borrow(), &claim.metric)?;
    let difference = (computed != 0.0).then(|| (claim.claimed - computed) / computed);
    let mut note = String::new();
    for part in &claim.note {
        match part {
            NotePart::Text(t) => note.push_str(t),
            NotePart::Value {
                metric: m,
                change,
                decimal,
            } => {
                let v = if change.is_empty() {
                    metric(analysis.borrow(), m)?
                } else {
                    metric(run(&with(scen.clone(), change)?)?.borrow(), m)?
                };
                note.push_str(&match metric_unit(m) {
                    Unit::Bytes if *decimal => crate::format::gigabytes(v),
                    unit => crate::metrics::display(unit, v),
                });
            }
        }
    }
    Ok(Row {
        claim: claim.clone(),
        computed,
        difference,
        assumed: crate::metrics::assumed_part(analysis.borrow(), &claim.metric),
        note,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::named_scenarios;
    use serde_json::json;

    const ONE: &str = r#"{"title":"T","summary":"S","claim":[{"quote":"q","scenario":"llama-3.1-8b-h100","metric":"bytes.weights","claimed":16000000000,"verdict":"right","note":"n"}]}"#;

    fn with(claim_field: &str, value: Value) -> String {
        let mut doc: Value = serde_json::from_str(ONE).expect("json");
        doc["claim"][0][claim_field] = value;
        doc.to_string()
    }

    fn row(text: &str) -> Result<Row, ClaimError> {
        let file = parse_file("t", text).expect("parses");
        evaluate(&file, &named_scenarios()).remove(0)
    }

    #[test]
    fn a_claim_is_evaluated_with_the_core() {
        let file = parse_file("t", ONE).expect("parses");
        assert_eq!((file.title.as_str(), file.summary.as_str()), ("T", "S"));
        let r = row(ONE).expect("evaluates");
        let scen = named_scenarios()
            .into_iter()
            .find(|n| n.id == "llama-3.1-8b-h100")
            .expect("named")
            .scenario;
        let weights = crate::analyze(&scen)
            .expect("analyzes")
            .estimate
            .bytes
            .weights;
        assert_eq!(r.computed, weights as f64);
        assert_eq!(r.claim.link(), "/s/llama-3.1-8b-h100");
        assert_eq!(r.claim.unit(), Unit::Bytes);
        assert!(r.difference.is_some());
    }

    #[test]
    fn overrides_apply_and_travel_in_the_link() {
        let text = with("overrides", json!("batch=3"));
        let r = row(&text).expect("evaluates");
        assert_eq!(r.claim.link(), "/s/llama-3.1-8b-h100?batch=3");
        let r = row(&with("metric", json!("(bytes.weights)/parameters.total"))).expect("ok");
        assert_eq!(r.claim.unit(), Unit::Ratio);
        assert!(r.computed > 0.0);
    }

    #[test]
    fn a_bad_metric_is_named() {
        let e = row(&with("metric", json!("bytes.nonsense"))).expect_err("an error");
        assert!(matches!(e, ClaimError::Metric { .. }), "{e}");
        let msg = e.to_string();
        assert!(
            msg.contains("t.toml, claim 1") && msg.contains("bytes.nonsense"),
            "{msg}"
        );
    }

    #[test]
    fn an_unknown_scenario_is_named() {
        let e = row(&with("scenario", json!("no-such"))).expect_err("an error");
        assert!(
            matches!(&e, ClaimError::UnknownScenario { found, .. } if found == "no-such"),
            "{e}"
        );
        assert!(
            e.to_string().contains("llama-3.1-8b-h100"),
            "lists the known ones"
        );
    }

    #[test]
    fn a_bad_override_is_named() {
        let e = row(&with("overrides", json!("batch=zero"))).expect_err("an error");
        assert!(matches!(e, ClaimError::Overrides { .. }), "{e}");
        assert!(e.to_string().contains("batch"), "{e}");
        let e = row(&with("overrides", json!("nosuchfield=1"))).expect_err("an error");
        assert!(e.to_string().contains("nosuchfield"), "{e}");
    }

    #[test]
    fn bad_fields_are_named() {
        for (field, value, named) in [
            ("verdict", json!("maybe"), "verdict"),
            ("claimed", json!("lots"), "claimed"),
            ("quote", json!(""), "quote"),
            ("colour", json!("red"), "colour"),
        ] {
            let e = parse_file("t", &with(field, value)).expect_err("an error");
            assert!(
                matches!(&e, ClaimError::Field { field, .. } if field == named),
                "{field}: {e}"
            );
        }
        assert!(matches!(
            parse_file("t", "{\"claim\": []}"),
            Err(ClaimError::Field { .. })
        ));
        assert!(matches!(
            parse_file("t", "{not json"),
            Err(ClaimError::Parse { .. })
        ));
    }

    #[test]
    fn a_notes_figures_are_computed_from_the_claims_scenario() {
        let text = with(
            "note",
            json!(
                "Weights {{bytes.weights}}, {{bytes.weights | GB}}; at batch 2 the peak is {{peak.tensors @ batch=2}}."
            ),
        );
        let r = row(&text).expect("evaluates");
        let a = |q: &str| {
            let scen = named_scenarios()
                .into_iter()
                .find(|n| n.id == "llama-3.1-8b-h100")
                .expect("named")
                .scenario;
            let scen = decode_pairs(scen, &query_pairs(q).expect("pairs")).expect("decodes");
            crate::analyze(&scen).expect("analyzes").estimate
        };
        let (one, two) = (a(""), a("batch=2"));
        let want = format!(
            "Weights {}, {}; at batch 2 the peak is {}.",
            crate::format::bytes(one.bytes.weights),
            crate::format::gigabytes(one.bytes.weights as f64),
            crate::format::bytes(two.peak.tensors)
        );
        assert_eq!(r.note, want);
        assert!(r.note.contains(" GB;"), "{}", r.note);
        // A bad figure is named like any other metric.
        let e = row(&with("note", json!("{{bytes.nonsense}}"))).expect_err("an error");
        assert!(e.to_string().contains("bytes.nonsense"), "{e}");
    }

    #[test]
    fn a_note_may_not_write_headrooms_figures_out() {
        assert_eq!(
            literal_byte_figures("1.46 GB and 4 B each, 13.6GB, 0.34 GiB, 8x80 GB, v2GB"),
            ["1.46 GB", "13.6 GB", "0.34 GiB", "80 GB"]
        );
        // The quote's own figures may be repeated; others must be live values.
        let ok = with("note", json!("Not 16 GB: {{bytes.weights}}."));
        let ok = {
            let mut d: Value = serde_json::from_str(&ok).expect("json");
            d["claim"][0]["quote"] = json!("The weights take 16 GB.");
            d.to_string()
        };
        assert!(parse_file("t", &ok).is_ok());
        let e =
            parse_file("t", &with("note", json!("They take 14.96 GiB."))).expect_err("an error");
        assert!(
            matches!(&e, ClaimError::Field { field, message, .. } if field == "note" && message.contains("14.96 GiB")),
            "{e}"
        );
        for bad in ["{{bytes.weights", "{{ }}", "x }}", "{{bytes.weights | TB}}"] {
            assert!(parse_note(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_verdict_that_rests_on_an_assumed_figure_must_be_unverified() {
        let claim = parse_file("t", ONE).expect("parses").claims.remove(0);
        let at = |claimed: f64, computed: f64, assumed: f64, verdict: Verdict| Row {
            claim: Claim {
                claimed,
                verdict,
                ..claim.clone()
            },
            computed,
            difference: Some((claimed - computed) / computed),
            assumed,
            note: String::new(),
        };
        // 1.5 against an assumed 66: from 0 to 132 the claim could be right or wrong.
        assert!(at(1.5, 66.0, 66.0, Verdict::Unverified).verdict_holds());
        assert!(!at(1.5, 66.0, 66.0, Verdict::Wrong).verdict_holds());
        // 6 against 17.7 with 0.5 assumed: wrong whatever the assumption.
        assert!(!at(6.0, 17.7, 0.5, Verdict::Wrong).rests_on_assumptions());
        assert!(at(6.0, 17.7, 0.5, Verdict::Wrong).verdict_holds());
        assert!(!at(6.0, 17.7, 0.5, Verdict::Unverified).verdict_holds());
        // 20 against 20.5 with 0.2 assumed: right whatever it is; with 3 assumed, unverified.
        assert!(at(20.0, 20.5, 0.2, Verdict::Right).verdict_holds());
        assert!(at(20.0, 20.5, 3.0, Verdict::Unverified).verdict_holds());
    }

    // (The site's build embeds none: its pages fetch them, `parse_bundle`.)
    #[cfg(feature = "embedded-claims")]
    #[test]
    fn the_embedded_claims_parse_and_evaluate() {
        let named = named_scenarios();
        let files = embedded();
        assert_eq!(files.len(), 5);
        for f in files {
            let f = f.expect("parses");
            assert!(!f.title.is_empty(), "{}: a title", f.id);
            for r in evaluate(&f, &named) {
                let r = r.expect("evaluates");
                assert!(r.verdict_holds(), "{:?}", r.claim.quote);
            }
        }
    }
}
