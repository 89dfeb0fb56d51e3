//! Page URLs: a scenario's link fields (the core's codec) plus the page's own fields.
//!
//! The page's own fields are `view` (which part an embed shows) and, on the comparison page,
//! scenario B's fields prefixed `b.` (only those that differ from A). Decoding is lenient:
//! a bad field is reported and left at its default, never a blank page.

use headroom_core::Scenario;
use headroom_core::codec::{KEYS, decode_lenient, encode, encode_spec, field_value, query_pairs};
use headroom_core::scenario::ModelChoice;

/// What an embed shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    Calculator,
    Breakdown,
    Timeline,
    Strategies,
}

impl View {
    pub const ALL: [View; 4] = [
        View::Calculator,
        View::Breakdown,
        View::Timeline,
        View::Strategies,
    ];

    pub fn id(self) -> &'static str {
        match self {
            View::Calculator => "calculator",
            View::Breakdown => "breakdown",
            View::Timeline => "timeline",
            View::Strategies => "strategies",
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            View::Calculator => "all results (no inputs)",
            View::Breakdown => "the memory breakdown",
            View::Timeline => "the step timeline chart",
            View::Strategies => "the strategy table",
        }
    }
}

/// A page's query, decoded.
#[derive(Debug, Clone, PartialEq)]
pub struct PageQuery {
    pub scenario: Scenario,
    /// Scenario B of a comparison (A with B's `b.` fields applied).
    pub other: Scenario,
    pub view: View,
    /// One message per field that could not be used, naming it.
    pub errors: Vec<String>,
}

const B_PREFIX: &str = "b.";

/// Decodes a page query on top of `base` (the defaults, or a named scenario).
pub fn parse(query: &str, base: Scenario) -> PageQuery {
    let mut errors = Vec::new();
    let pairs = match query_pairs(query) {
        Ok(p) => p,
        Err(e) => {
            errors.push(format!("Link {e}; the defaults are shown."));
            Vec::new()
        }
    };
    let mut view = View::Calculator;
    let mut a_pairs = Vec::new();
    let mut b_pairs = Vec::new();
    for (k, v) in pairs {
        if k == "view" {
            match View::ALL.iter().find(|x| x.id() == v) {
                Some(found) => view = *found,
                None => errors.push(format!(
                    "Link field `view`: unknown view; allowed: {}.",
                    View::ALL.map(View::id).join(", ")
                )),
            }
        } else if let Some(rest) = k.strip_prefix(B_PREFIX) {
            b_pairs.push((rest.to_string(), v));
        } else {
            a_pairs.push((k, v));
        }
    }
    let (scenario, a_errors) = decode_lenient(base, &a_pairs);
    let (other, b_errors) = decode_lenient(scenario.clone(), &b_pairs);
    for e in a_errors {
        errors.push(format!("Link field {e}. The default is used instead."));
    }
    for e in b_errors {
        errors.push(format!(
            "Link field (scenario B) {e}. A's value is used instead."
        ));
    }
    PageQuery {
        scenario,
        other,
        view,
        errors,
    }
}

/// The query of the calculator for `scen` (without `?`).
pub fn calculator_query(scen: &Scenario) -> String {
    encode(scen)
}

/// The query of a comparison: A's fields, then B's differences prefixed `b.`.
pub fn compare_query(a: &Scenario, b: &Scenario) -> String {
    let mut q = encode(a);
    for (k, v) in diff_pairs(a, b) {
        q.push('&');
        q.push_str(B_PREFIX);
        q.push_str(&k);
        q.push('=');
        q.push_str(&v);
    }
    q
}

/// The query of an embed of `view` for `scen`.
pub fn embed_query(scen: &Scenario, view: View) -> String {
    format!("{}&view={}", encode(scen), view.id())
}

/// Link fields whose values differ between `a` and `b`, as `b`'s values.
pub fn diff_pairs(a: &Scenario, b: &Scenario) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if a.model != b.model {
        match &b.model {
            ModelChoice::Preset(id) => out.push(("model".to_string(), id.clone())),
            ModelChoice::Custom(spec) => out.push(("cfg".to_string(), encode_spec(spec))),
        }
    }
    for key in KEYS
        .iter()
        .filter(|k| !matches!(**k, "v" | "model" | "cfg"))
    {
        let (va, vb) = (field_value(a, key), field_value(b, key));
        if va != vb
            && let Some(v) = vb
        {
            // An empty dropout is the config's own, which the codec reads back.
            out.push((key.to_string(), v));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_link_has_no_errors() {
        let q = parse("?v=1&batch=4&view=timeline", Scenario::default());
        assert!(q.errors.is_empty(), "{:?}", q.errors);
        assert_eq!(q.scenario.micro_batch, 4);
        assert_eq!(q.view, View::Timeline);
        assert_eq!(q.other, q.scenario);
    }

    #[test]
    fn bad_fields_are_named_and_defaults_kept() {
        let q = parse("?batch=lots&view=everything&seq=512", Scenario::default());
        assert_eq!(q.scenario.seq, 512);
        assert_eq!(q.errors.len(), 2, "{:?}", q.errors);
        assert!(q.errors.iter().any(|e| e.contains("`view`")));
        assert!(q.errors.iter().any(|e| e.contains("`batch`")));
    }

    #[test]
    fn a_comparison_round_trips() {
        let a = parse("?batch=2&seq=2048", Scenario::default()).scenario;
        let b = parse(
            "?batch=2&seq=2048&ckpt=full&optimizer=adamw8bit",
            Scenario::default(),
        )
        .scenario;
        let q = compare_query(&a, &b);
        assert!(
            q.contains("b.ckpt=full") && q.contains("b.optimizer=adamw8bit"),
            "{q}"
        );
        let back = parse(&q, Scenario::default());
        assert_eq!((back.scenario, back.other), (a, b));
    }

    #[test]
    fn a_broken_escape_falls_back_to_defaults_with_a_message() {
        let q = parse("?batch=%G1", Scenario::default());
        assert_eq!(q.scenario, Scenario::default());
        assert_eq!(q.errors.len(), 1);
    }
}
