//! Errors of the core, each naming the field that was wrong and what is allowed.

use thiserror::Error;

/// `s` cut to its first 40 characters (with "..." when cut), for echoing input in a message.
pub fn shorten(s: &str) -> String {
    let mut out: String = s.chars().take(40).collect();
    if s.chars().count() > 40 {
        out.push_str("...");
    }
    out
}

/// A JSON value as an error message shows it (callers shorten it): a number or boolean as
/// JSON writes it, a string quoted, a list or an object by its kind. Written out rather than
/// serialized: serde_json's writer was in the calculator's download only for these messages.
pub fn shown_json(v: &serde_json::Value) -> String {
    use serde_json::Value;
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => format!("\"{s}\""),
        Value::Array(_) => "a list".into(),
        Value::Object(_) => "an object".into(),
    }
}

/// A model description (a Hugging Face `config.json`) that the core cannot use.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ConfigError {
    #[error("config.json is not valid JSON: {0}")]
    Json(String),
    #[error("config.json must be a JSON object")]
    NotAnObject,
    #[error("config.json has no `model_type`; supported: {supported}")]
    MissingModelType { supported: String },
    #[error(
        "model_type `{found}` is not one Headroom models exactly, and its config lacks {missing}, \
         needed to estimate it as the closest known layout (modelled exactly: {supported})"
    )]
    MissingKeys {
        found: String,
        missing: String,
        // Filled by the caller, so this module depends on no other.
        supported: Box<str>,
    },
    #[error("field `{field}` must be {expected}, found {found}")]
    BadField {
        field: String,
        expected: String,
        found: String,
    },
    #[error("field `{field}`: {message}")]
    Inconsistent { field: String, message: String },
}

/// A content file (GPU catalog, presets, calibration, named scenario) that does not parse.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ContentError {
    #[error("{file}: {message}")]
    Parse { file: String, message: String },
    #[error("{file}: field `{field}` {message}")]
    Field {
        file: String,
        field: String,
        message: String,
    },
}

/// A scenario that cannot be estimated: an input out of range or an unknown name.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ScenarioError {
    #[error("`{field}`: {message}")]
    Invalid { field: String, message: String },
    #[error("unknown {what} `{found}`; known: {known}")]
    Unknown {
        what: &'static str,
        found: String,
        known: String,
    },
    #[error(transparent)]
    Config(#[from] ConfigError),
}

impl ScenarioError {
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        ScenarioError::Invalid {
            field: field.into(),
            message: message.into(),
        }
    }
}
