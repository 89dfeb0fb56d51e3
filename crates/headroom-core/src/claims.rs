//! The worked examples' claims (`content/claims/ex*.toml`), checked by the core.
//!
//! Each claim names a named scenario (plus optional link-style overrides) and a metric: a field
//! of the CLI's JSON (`bytes.weights`, `parameters.total`, `verdict.capacity`, `fit.*`, ...) or
//! a component id; `+` sums several, and one `/field` divides the sum. [`evaluate`] analyzes
//! each claim's scenario with [`analyze_only`] and returns one [`Row`] per claim: the claim, the
//! figure Headroom computes, the difference and the verdict the file states. The claims pages
//! of the site and the snapshot test (`tests/worked_examples.rs`) both call it.
//!
//! Pure: the input is text (JSON, as `build.rs` embeds the files, or TOML with the `toml`
//! feature); the embedded files are [`embedded`].

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
}

impl Verdict {
    pub fn id(self) -> &'static str {
        match self {
            Verdict::Right => "right",
            Verdict::Wrong => "wrong",
            Verdict::Partly => "partly",
        }
    }

    fn parse(s: &str) -> Option<Verdict> {
        match s {
            "right" => Some(Verdict::Right),
            "wrong" => Some(Verdict::Wrong),
            "partly" => Some(Verdict::Partly),
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
    pub note: String,
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
        .ok_or_else(|| bad("verdict", "must be one of right, wrong, partly"))?;
    Ok(Claim {
        quote: text("quote", true)?,
        scenario: text("scenario", true)?,
        overrides: text("overrides", false)?,
        metric: text("metric", true)?,
        claimed,
        verdict,
        note: text("note", true)?,
    })
}

/// The claims files compiled into the core (`content/claims/*.toml`), sorted by id; each one
/// parsed, or the error that says why not (the core's tests fail on one).
pub fn embedded() -> Vec<Result<ClaimFile, ClaimError>> {
    crate::catalog::embedded::CLAIM_FILES
        .iter()
        .map(|(id, text)| parse_file(id, text))
        .collect()
}

/// One claim checked: the claim, Headroom's figure and the difference.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub claim: Claim,
    /// Headroom's figure for the claim's metric.
    pub computed: f64,
    /// (claimed - computed) / computed; `None` when Headroom computes zero.
    pub difference: Option<f64>,
}

impl Row {
    /// Whether the claim is within [`RIGHT_WITHIN`] of Headroom's figure.
    pub fn within(&self) -> bool {
        self.difference.is_some_and(|d| d.abs() <= RIGHT_WITHIN)
    }

    /// Whether the verdict the file states agrees with the figures (`partly` always does).
    pub fn verdict_holds(&self) -> bool {
        match self.claim.verdict {
            Verdict::Right => self.within(),
            Verdict::Wrong => !self.within(),
            Verdict::Partly => true,
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
    let scen = query_pairs(&claim.overrides)
        .and_then(|pairs| decode_pairs(base.scenario.clone(), &pairs))
        .map_err(|error| ClaimError::Overrides {
            at: at.to_string(),
            overrides: claim.overrides.clone(),
            error,
        })?;
    let analysis = analyze(&scen).map_err(|e| ClaimError::Analyze {
        at: at.to_string(),
        message: e.to_string(),
    })?;
    let computed =
        eval_metric(analysis.borrow(), &claim.metric).map_err(|message| ClaimError::Metric {
            at: at.to_string(),
            message,
        })?;
    let difference = (computed != 0.0).then(|| (claim.claimed - computed) / computed);
    Ok(Row {
        claim: claim.clone(),
        computed,
        difference,
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
