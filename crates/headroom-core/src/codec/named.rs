//! Named scenarios (`content/scenarios/*.toml`): their files parsed with the link's rules, and
//! the set the site installs at run time.

use serde_json::{Map, Value};

use super::{decode_pairs, printable};
use crate::error::ScenarioError;
use crate::scenario::Scenario;

/// A named scenario file (`content/scenarios/*.toml`): a title, a description and the
/// scenario's fields under `[scenario]`, with the same keys as links.
#[derive(Debug, Clone, PartialEq)]
pub struct NamedScenario {
    pub id: String,
    pub title: String,
    pub description: String,
    pub scenario: Scenario,
}

/// Parses a scenario file (TOML, or JSON as the core embeds them); `id` is its file stem.
/// Values may be strings, integers, floats or booleans; they are checked exactly like link fields.
pub fn parse_scenario_file(id: &str, text: &str) -> Result<NamedScenario, ScenarioError> {
    let file = format!("{id}.toml");
    let table: Map<String, Value> = crate::catalog::parse_content(&file, text)
        .map_err(|e| ScenarioError::invalid(file.clone(), e.to_string()))?;
    scenario_from_table(id, &table)
}

/// A scenario file already parsed into its table.
fn scenario_from_table(
    id: &str,
    table: &Map<String, Value>,
) -> Result<NamedScenario, ScenarioError> {
    let text_field = |k: &str| {
        table
            .get(k)
            .and_then(|v| v.as_str())
            .unwrap_or("")
            .to_string()
    };
    let fields = match table.get("scenario") {
        Some(Value::Object(t)) => t.clone(),
        Some(_) => return Err(ScenarioError::invalid("scenario", "must be a table")),
        None => Map::new(),
    };
    let pairs = field_pairs(&fields)?;
    Ok(NamedScenario {
        id: id.to_string(),
        title: text_field("title"),
        description: text_field("description"),
        scenario: decode_pairs(Scenario::default(), &pairs)?,
    })
}

/// Converts a scenario table's values to link-style strings.
pub fn field_pairs(fields: &Map<String, Value>) -> Result<Vec<(String, String)>, ScenarioError> {
    fields
        .iter()
        .map(|(k, v)| {
            let s = match v {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                Value::Bool(b) => if *b { "1" } else { "0" }.to_string(),
                _ => {
                    return Err(ScenarioError::invalid(
                        printable(k),
                        "must be a string, number or boolean",
                    ));
                }
            };
            Ok((k.clone(), s))
        })
        .collect()
}

/// The named scenarios installed at run time (the site's fetched `content/scenarios.json`).
static INSTALLED_NAMED: std::sync::OnceLock<Vec<NamedScenario>> = std::sync::OnceLock::new();

/// Installs the named scenarios from a JSON object of id to scenario file (what site/pages.sh
/// writes as `content/scenarios.json`), each checked as the embedded files are; a file that
/// does not parse is an error naming it. A build with the files embedded keeps its own; a
/// second install is ignored.
pub fn install_named_scenarios(json: &str) -> Result<(), crate::ContentError> {
    let bad = |message: String| crate::ContentError::Parse {
        file: "content/scenarios.json".into(),
        message,
    };
    let value: Value = serde_json::from_str(json).map_err(|e| bad(e.to_string()))?;
    let map = value
        .as_object()
        .ok_or_else(|| bad("must be an object of id to scenario file".into()))?;
    let named = map
        .iter()
        .map(|(id, v)| {
            let table = v
                .as_object()
                .ok_or_else(|| bad(format!("{id}: must be a scenario file's table")))?;
            scenario_from_table(id, table).map_err(|e| bad(format!("{id}: {e}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let _ = INSTALLED_NAMED.set(named);
    Ok(())
}

/// Whether the named scenarios are in: embedded, or installed.
pub fn named_scenarios_ready() -> bool {
    !crate::catalog::embedded::SCENARIO_FILES.is_empty() || INSTALLED_NAMED.get().is_some()
}

/// The named scenarios compiled into the core (or installed), parsed once, sorted by id (files
/// that fail to parse are reported by the core's tests, never shown).
fn parsed_named() -> &'static [NamedScenario] {
    static PARSED: std::sync::OnceLock<Vec<NamedScenario>> = std::sync::OnceLock::new();
    let embedded = crate::catalog::embedded::SCENARIO_FILES;
    if embedded.is_empty() {
        return INSTALLED_NAMED.get().map_or(&[], Vec::as_slice);
    }
    PARSED.get_or_init(|| {
        embedded
            .iter()
            .filter_map(|(id, text)| parse_scenario_file(id, text).ok())
            .collect()
    })
}

/// The named scenarios compiled into the core (an owned copy; see [`named_scenario`] for one).
pub fn named_scenarios() -> Vec<NamedScenario> {
    parsed_named().to_vec()
}

/// The named scenario `id`, without copying the others (pages, guide blocks and the CLI look
/// one up by id on every use).
pub fn named_scenario(id: &str) -> Option<&'static NamedScenario> {
    parsed_named().iter().find(|n| n.id == id)
}
