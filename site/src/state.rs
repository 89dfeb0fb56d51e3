//! The calculator's state: the scenario, drafts of inputs that do not parse yet, and messages.
//!
//! Pure (no browser), so its rules have native tests: an edit goes through the core's codec;
//! a valid one replaces the scenario, an invalid one keeps the old scenario and names the
//! problem next to the field.

use std::collections::BTreeMap;
use std::rc::Rc;

use headroom_core::Scenario;
use headroom_core::codec::decode_pairs;
use headroom_core::model::ModelSpec;
use headroom_core::scenario::ModelChoice;
use yew::Reducible;

#[derive(Debug, Clone, PartialEq, Default)]
pub struct CalcState {
    pub scenario: Scenario,
    /// Text typed into a field that did not parse (shown instead of the scenario's value).
    pub drafts: BTreeMap<String, String>,
    /// One message per field whose draft did not parse.
    pub field_errors: BTreeMap<String, String>,
    /// Messages about the link the page was opened with.
    pub link_errors: Vec<String>,
}

/// What can happen to the state.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// A field (by link key) was set to a value, as typed.
    Edit(String, String),
    /// A custom model from a pasted, uploaded or fetched config.json.
    CustomModel(Box<ModelSpec>),
    /// A whole new scenario (a named scenario, say).
    Replace(Scenario),
    /// An input the page could not use (a config.json the core refuses): the scenario keeps
    /// its last readable value and the results stand dimmed until it is fixed.
    Refused(String, String),
    DismissLinkErrors,
}

impl CalcState {
    pub fn new(scenario: Scenario, link_errors: Vec<String>) -> Self {
        CalcState {
            scenario,
            link_errors,
            ..Default::default()
        }
    }

    /// The state after `action`.
    pub fn apply(&self, action: Action) -> CalcState {
        let mut next = self.clone();
        match action {
            Action::Edit(key, value) => {
                let trimmed = value.trim();
                // The codec reads an empty dropout as "the config's own".
                let result =
                    decode_pairs(self.scenario.clone(), &[(key.clone(), trimmed.to_string())]);
                match result {
                    Ok(s) => {
                        next.scenario = s;
                        next.drafts.remove(&key);
                        next.field_errors.remove(&key);
                    }
                    Err(e) => {
                        next.drafts.insert(key.clone(), value);
                        next.field_errors.insert(key, e.to_string());
                    }
                }
            }
            Action::CustomModel(spec) => {
                next.scenario.model = ModelChoice::Custom(spec);
                next.drafts.remove("model");
                next.field_errors.remove("model");
            }
            Action::Replace(s) => {
                next = CalcState::new(s, Vec::new());
            }
            Action::Refused(key, message) => {
                next.field_errors.insert(key, message);
            }
            Action::DismissLinkErrors => next.link_errors.clear(),
        }
        next
    }
}

impl Reducible for CalcState {
    type Action = Action;

    fn reduce(self: Rc<Self>, action: Action) -> Rc<Self> {
        Rc::new(self.apply(action))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edit(s: &CalcState, k: &str, v: &str) -> CalcState {
        s.apply(Action::Edit(k.into(), v.into()))
    }

    #[test]
    fn a_valid_edit_changes_the_scenario() {
        let s = edit(&CalcState::default(), "batch", "8");
        assert_eq!(s.scenario.micro_batch, 8);
        assert!(s.drafts.is_empty() && s.field_errors.is_empty());
    }

    #[test]
    fn an_invalid_edit_keeps_the_scenario_and_names_the_field() {
        let s = edit(&CalcState::default(), "batch", "0");
        assert_eq!(s.scenario, Scenario::default());
        assert_eq!(s.drafts.get("batch").map(String::as_str), Some("0"));
        let msg = s.field_errors.get("batch").expect("an error for batch");
        assert!(msg.contains("batch") && msg.contains("1 to"), "{msg}");
        // Fixing it clears the message.
        let fixed = edit(&s, "batch", "2");
        assert!(fixed.field_errors.is_empty());
        assert_eq!(fixed.scenario.micro_batch, 2);
    }

    #[test]
    fn a_refused_config_is_an_error_until_a_model_is_readable() {
        let s = CalcState::default().apply(Action::Refused("model".into(), "bad".into()));
        assert_eq!(s.scenario, Scenario::default());
        assert!(s.field_errors.contains_key("model"));
        let fixed = edit(&s, "model", "gpt2");
        assert!(fixed.field_errors.is_empty());
    }

    #[test]
    fn empty_dropout_means_the_configs_own() {
        let s = edit(&CalcState::default(), "dropout", "0.1");
        assert_eq!(s.scenario.dropout, Some(0.1));
        assert_eq!(edit(&s, "dropout", " ").scenario.dropout, None);
    }
}
