//! A training framework's config file read as a scenario: axolotl and LLaMA-Factory YAML, TRL's
//! and transformers' training arguments (YAML or JSON), a DeepSpeed JSON, an accelerate config,
//! a torchtitan TOML.
//!
//! The format is recognized from the keys. Each key that changes memory or time becomes link
//! fields (`codec::FIELDS`), so an import is checked, shared and overridden like a link; each
//! default the framework applies to a key the file leaves out is said; each key Headroom cannot
//! express is named with why; keys with no effect on a step's memory or time are listed as such,
//! and keys none of this knows are listed as unknown, never dropped silently. The facts are from
//! each framework's source at the versions named in [`Framework::version`].
//!
//! `yaml.rs` reads the YAML subset configs are written in; there is one reader per framework,
//! `hf_args.rs` for the `TrainingArguments` keys TRL and LLaMA-Factory share, and `deepspeed.rs`
//! also for a `deepspeed:` file the caller reads. The precision rule (`set_precision`) combines
//! autocast, the load dtype and an fp32 upcast of trainable weights. Pure: referenced files come
//! through a callback; the CLI's `--import` reads them.

mod accelerate;
mod axolotl;
mod deepspeed;
mod hf_args;
mod llamafactory;
mod torchtitan;
mod trl;
pub mod yaml;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::catalog::PresetCatalog;

/// The frameworks whose configs are read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Framework {
    Axolotl,
    LlamaFactory,
    Trl,
    DeepSpeed,
    Accelerate,
    Torchtitan,
}

impl Framework {
    pub const ALL: [Framework; 6] = [
        Framework::Axolotl,
        Framework::LlamaFactory,
        Framework::Trl,
        Framework::DeepSpeed,
        Framework::Accelerate,
        Framework::Torchtitan,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Framework::Axolotl => "axolotl YAML",
            Framework::LlamaFactory => "LLaMA-Factory YAML",
            Framework::Trl => "TRL / transformers training arguments",
            Framework::DeepSpeed => "DeepSpeed JSON",
            Framework::Accelerate => "accelerate config",
            Framework::Torchtitan => "torchtitan TOML",
        }
    }

    /// The version whose source the mapping was read from (its defaults are these).
    pub fn version(self) -> &'static str {
        match self {
            Framework::Axolotl => "axolotl 0.21 (main of 2026-11)",
            Framework::LlamaFactory => "LLaMA-Factory 0.9.5 (main of 2026-11)",
            Framework::Trl => "TRL 1.16, transformers 5.23",
            Framework::DeepSpeed => "DeepSpeed 0.19",
            Framework::Accelerate => "accelerate 1.15",
            Framework::Torchtitan => "torchtitan 0.3",
        }
    }
}

/// What became of one key of the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// Read into the link fields named in the note.
    Mapped,
    /// Not in the file: the framework's default, which the note names, is used.
    Default,
    /// Changes memory or time, but Headroom cannot express it: the note says what is assumed.
    NotExpressed,
    /// No effect on one training step's memory or time (data, logging, schedules, saving).
    NoEffect,
    /// Not a key this importer knows for the format.
    Unknown,
}

/// One key of the file (dotted for nested keys) and what became of it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Note {
    pub key: String,
    /// The value as written (shortened), empty for a default.
    pub value: String,
    pub outcome: Outcome,
    /// The link fields it set (`method=qlora`), or why it is not expressed.
    pub text: String,
}

/// A config file read as link fields.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Imported {
    pub framework: Framework,
    /// The model as the file names it (a Hub id or a path), when it names one.
    pub model: Option<String>,
    /// The key that names it (`base_model`, `model_name_or_path`, ...).
    pub model_key: Option<String>,
    /// The preset that model resolved to; `None` when it is not a preset (the caller reads
    /// the config.json from the path, fetches it from the Hub, or asks for it).
    pub preset: Option<String>,
    /// Link fields (key, value) in the order they were set; applied on the default scenario
    /// (or a base) with `codec::decode_pairs`.
    pub pairs: Vec<(String, String)>,
    pub notes: Vec<Note>,
}

impl Imported {
    /// The notes with this outcome.
    pub fn with(&self, outcome: Outcome) -> impl Iterator<Item = &Note> {
        self.notes.iter().filter(move |n| n.outcome == outcome)
    }

    /// The notes as text, grouped by outcome: a `# title` line before each group's
    /// `key = value: what became of it` lines; the keys with no effect last, on one line.
    pub fn report(&self) -> Vec<String> {
        let mut lines = Vec::new();
        for (outcome, title) in [
            (Outcome::Mapped, "Read"),
            (
                Outcome::Default,
                "The framework's defaults for keys the file leaves out",
            ),
            (
                Outcome::NotExpressed,
                "Not expressed (what is assumed instead)",
            ),
            (Outcome::Unknown, "Not known to the importer"),
        ] {
            let notes: Vec<_> = self.with(outcome).collect();
            if notes.is_empty() {
                continue;
            }
            lines.push(format!("# {title}"));
            for n in notes {
                let value = if n.value.is_empty() {
                    String::new()
                } else {
                    format!(" = {}", n.value)
                };
                lines.push(format!("{}{value}: {}", n.key, n.text));
            }
        }
        let quiet: Vec<&str> = self
            .with(Outcome::NoEffect)
            .map(|n| n.key.as_str())
            .collect();
        if !quiet.is_empty() {
            lines.push("# No effect on memory or time".into());
            lines.push(quiet.join(", "));
        }
        lines
    }
}

/// Why a file could not be imported; the message names the key (or line) and what is allowed.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct ImportError(pub String);

fn bad(key: &str, message: impl std::fmt::Display) -> ImportError {
    ImportError(format!("`{key}`: {message}"))
}

/// Reads a config file and resolves its model to a preset ([`read`], then [`resolve`]).
pub fn import(
    text: &str,
    file_name: Option<&str>,
    read_file: &dyn Fn(&str) -> Option<String>,
) -> Result<Imported, ImportError> {
    let mut imported = read(text, file_name, read_file)?;
    resolve(&mut imported);
    Ok(imported)
}

/// Reads a config file into link fields, leaving its model unresolved (no catalog needed: the
/// site runs this apart from its first download). `file_name` (its name or path) helps tell
/// YAML, JSON and TOML apart; `read_file` reads a file the config refers to (a DeepSpeed JSON
/// named by `deepspeed:`), relative to it, or returns `None` (the site cannot read the user's
/// files: the note says so).
pub fn read(
    text: &str,
    file_name: Option<&str>,
    read_file: &dyn Fn(&str) -> Option<String>,
) -> Result<Imported, ImportError> {
    let tree = parse_tree(text, file_name)?;
    let Value::Object(map) = tree else {
        return Err(ImportError(
            "the file is not a mapping of keys to values (a YAML, JSON or TOML config)".into(),
        ));
    };
    let framework = detect(&map)?;
    let mut out = Out::new(framework, read_file);
    match framework {
        Framework::Axolotl => axolotl::read(map, &mut out)?,
        Framework::LlamaFactory => llamafactory::read(map, &mut out)?,
        Framework::Trl => trl::read(map, &mut out)?,
        Framework::DeepSpeed => deepspeed::read(map, "", &mut out)?,
        Framework::Accelerate => accelerate::read(map, &mut out)?,
        Framework::Torchtitan => torchtitan::read(map, &mut out)?,
    }
    fsdp_defaults(&mut out);
    Ok(out.finish())
}

/// FSDP's version where the file leaves it to the framework: accelerate (and axolotl, which
/// launches through it) runs FSDP1 unless told `fsdp_version: 2` (`FullyShardedDataParallelPlugin`:
/// `FSDP_VERSION`, default 1); transformers' Trainer runs FSDP2 (`fsdp_config["version"]`,
/// default 2 in transformers 5), the core's default. All of them reduce the gradients in the
/// compute dtype under a mixed precision (accelerate's `set_mixed_precision`: `reduce_dtype` =
/// `param_dtype`), also the core's default; torchtitan's fp32 reduce is read by its importer.
fn fsdp_defaults(out: &mut Out) {
    let accelerate = matches!(out.framework, Framework::Accelerate | Framework::Axolotl);
    if accelerate && out.get("dp") == Some("fsdp") && out.get("fsdp1").is_none() {
        out.default(
            "fsdp_version",
            &[("fsdp1", "1")],
            "accelerate runs FSDP1 unless fsdp_version is 2",
        );
    }
}

/// Resolves the model the file names to a preset: the `model` field first among the pairs and
/// a note first among the notes; a model that is not a preset is said to need its config.json.
pub fn resolve(imported: &mut Imported) {
    let (Some(name), Some(key), None) = (&imported.model, &imported.model_key, &imported.preset)
    else {
        return;
    };
    let value = Value::String(name.clone());
    let note = |outcome, text: &str| Note {
        key: key.clone(),
        value: show(&value),
        outcome,
        text: text.to_string(),
    };
    let mut notes = Vec::new();
    match resolve_preset(name) {
        Some(id) => {
            notes.push(note(Outcome::Mapped, &format!("model={id}")));
            if let Some(why) = TWINS
                .iter()
                .find(|(n, p, _)| *n == normalize(name) && *p == id)
                .map(|t| t.2)
            {
                notes.push(note(Outcome::NotExpressed, why));
            }
            imported.pairs.retain(|(k, _)| k != "model");
            imported.pairs.insert(0, ("model".into(), id.clone()));
            imported.preset = Some(id);
        }
        None => notes.push(note(
            Outcome::Mapped,
            "not a preset: its config.json is needed (a local path is read; otherwise give \
             --model path/to/config.json, or the page fetches it from the Hub)",
        )),
    }
    imported.notes.splice(0..0, notes);
}

/// The file as a JSON tree: JSON when it starts with `{`, TOML when named `.toml` or shaped
/// like TOML (a `[table]` line), else YAML.
fn parse_tree(text: &str, file_name: Option<&str>) -> Result<Value, ImportError> {
    let trimmed = text.trim_start();
    let ext = file_name
        .and_then(|n| n.rsplit('.').next())
        .map(str::to_ascii_lowercase);
    if trimmed.starts_with('{') || ext.as_deref() == Some("json") {
        return serde_json::from_str(text).map_err(|e| ImportError(format!("JSON: {e}")));
    }
    let toml_like = text.lines().any(|l| {
        let l = l.trim();
        l.starts_with('[') && l.ends_with(']') && !l.contains(',') && l.len() > 2
    });
    if ext.as_deref() == Some("toml") || (toml_like && !text.contains(": ")) {
        return toml_tree(text);
    }
    yaml::parse(text).map_err(|e| ImportError(format!("YAML: {e}")))
}

#[cfg(feature = "toml")]
fn toml_tree(text: &str) -> Result<Value, ImportError> {
    let table: toml::Table = toml::from_str(text).map_err(|e| ImportError(format!("TOML: {e}")))?;
    serde_json::to_value(table).map_err(|e| ImportError(format!("TOML: {e}")))
}

#[cfg(not(feature = "toml"))]
fn toml_tree(_text: &str) -> Result<Value, ImportError> {
    Err(ImportError(
        "TOML configs (torchtitan) are read by the command-line tool: `headroom estimate --import FILE`"
            .into(),
    ))
}

/// The framework a config is for, from keys only it uses.
fn detect(map: &Map<String, Value>) -> Result<Framework, ImportError> {
    let has = |k: &str| map.contains_key(k);
    if has("job")
        && (has("training") || has("parallelism") || has("model") && map["model"].is_object())
    {
        return Ok(Framework::Torchtitan);
    }
    if has("compute_environment") || has("distributed_type") && has("num_processes") {
        return Ok(Framework::Accelerate);
    }
    if has("base_model") || has("micro_batch_size") || has("sequence_len") {
        return Ok(Framework::Axolotl);
    }
    if has("finetuning_type") || has("stage") && has("model_name_or_path") || has("cutoff_len") {
        return Ok(Framework::LlamaFactory);
    }
    if has("zero_optimization")
        || has("train_micro_batch_size_per_gpu")
        || (has("bf16") || has("fp16")) && map.values().any(|v| v.get("enabled").is_some())
    {
        return Ok(Framework::DeepSpeed);
    }
    if has("model_name_or_path") || has("per_device_train_batch_size") || has("output_dir") {
        return Ok(Framework::Trl);
    }
    Err(ImportError(
        "not a config this reads: expected axolotl (base_model, micro_batch_size), LLaMA-Factory \
         (model_name_or_path with stage or finetuning_type), TRL or transformers training \
         arguments (model_name_or_path, per_device_train_batch_size), DeepSpeed \
         (zero_optimization), accelerate (compute_environment, distributed_type) or torchtitan \
         ([job] with [training] or [parallelism])"
            .into(),
    ))
}

/// What an import has set so far: link fields and notes.
pub(crate) struct Out<'a> {
    framework: Framework,
    model: Option<String>,
    model_key: Option<String>,
    preset: Option<String>,
    pairs: Vec<(String, String)>,
    notes: Vec<Note>,
    read_file: &'a dyn Fn(&str) -> Option<String>,
}

impl<'a> Out<'a> {
    fn new(framework: Framework, read_file: &'a dyn Fn(&str) -> Option<String>) -> Self {
        Out {
            framework,
            model: None,
            model_key: None,
            preset: None,
            pairs: Vec::new(),
            notes: Vec::new(),
            read_file,
        }
    }

    /// Sets link field `field` to `value` (replacing an earlier value) without a note.
    fn pair(&mut self, field: &str, value: impl Into<String>) {
        let value = value.into();
        if let Some(p) = self.pairs.iter_mut().find(|(k, _)| k == field) {
            p.1 = value;
        } else {
            self.pairs.push((field.to_string(), value));
        }
    }

    /// The value set for a link field so far.
    fn get(&self, field: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, _)| k == field)
            .map(|(_, v)| v.as_str())
    }

    fn note(&mut self, key: &str, value: &Value, outcome: Outcome, text: impl Into<String>) {
        self.notes.push(Note {
            key: key.to_string(),
            value: show(value),
            outcome,
            text: text.into(),
        });
    }

    /// Sets link fields; returns them as a note says them (`method=qlora, kbit=0`).
    fn set(&mut self, fields: &[(&str, &str)]) -> String {
        for (f, v) in fields {
            self.pair(f, *v);
        }
        fields
            .iter()
            .map(|(f, v)| format!("{f}={v}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// `key` (as written, `value`) set these link fields.
    fn mapped(&mut self, key: &str, value: &Value, fields: &[(&str, &str)]) {
        let text = self.set(fields);
        self.note(key, value, Outcome::Mapped, text);
    }

    /// `key` is absent: the framework's default `fields`, said in `why`.
    fn default(&mut self, key: &str, fields: &[(&str, &str)], why: &str) {
        let set = self.set(fields);
        let text = if set.is_empty() {
            why.to_string()
        } else {
            format!("{set}: {why}")
        };
        self.note(key, &Value::Null, Outcome::Default, text);
    }

    fn not_expressed(&mut self, key: &str, value: &Value, why: impl Into<String>) {
        self.note(key, value, Outcome::NotExpressed, why);
    }

    fn no_effect(&mut self, key: &str, value: &Value) {
        self.note(key, value, Outcome::NoEffect, "");
    }

    /// The model the file names: a preset when it is one (or an exact architecture twin).
    fn model(&mut self, key: &str, value: &Value) -> Result<(), ImportError> {
        let name = value
            .as_str()
            .ok_or_else(|| bad(key, "expected a model id or path (text)"))?;
        self.model = Some(name.to_string());
        self.model_key = Some(key.to_string());
        Ok(())
    }

    /// Keys left in `map` (under `prefix`): those in `no_effect` are listed as such, the rest
    /// as unknown.
    fn rest(&mut self, map: Map<String, Value>, prefix: &str, no_effect: &[&str]) {
        for (k, v) in map {
            let key = format!("{prefix}{k}");
            if no_effect.contains(&k.as_str()) || v.is_null() {
                self.no_effect(&key, &v);
            } else {
                self.note(
                    &key,
                    &v,
                    Outcome::Unknown,
                    "not read: check whether it changes memory or time",
                );
            }
        }
    }

    /// Reads a referenced file (`deepspeed: path`) as a DeepSpeed config into this import.
    fn deepspeed_file(&mut self, key: &str, value: &Value) -> Result<(), ImportError> {
        match value {
            Value::Object(map) => deepspeed::read(map.clone(), &format!("{key}."), self),
            Value::String(path) => match (self.read_file)(path) {
                Some(text) => match parse_tree(&text, Some(path))? {
                    Value::Object(map) => deepspeed::read(map, &format!("{key}."), self),
                    _ => Err(bad(key, "the DeepSpeed file is not a JSON object")),
                },
                None => {
                    self.not_expressed(
                        key,
                        value,
                        "the DeepSpeed file could not be read here: its ZeRO stage and offload \
                         are not applied (import that file too, or set --dp and --opt-offload)",
                    );
                    // DeepSpeed is used: at least its data parallelism.
                    Ok(())
                }
            },
            _ => Err(bad(
                key,
                "expected a path to a DeepSpeed JSON or its contents",
            )),
        }
    }

    /// The `deepspeed` key of training arguments (a path or the config inline), then a note
    /// that the GPUs are the launcher's when the file shards but does not count them. True
    /// when ZeRO-3 shards the parameters.
    fn deepspeed_key(&mut self, map: &mut Map<String, Value>) -> Result<bool, ImportError> {
        if let Some(v) = map.remove("deepspeed") {
            self.deepspeed_file("deepspeed", &v)?;
        }
        if self.get("dp").is_some() && self.get("gpus").is_none() {
            self.default(
                "gpus",
                &[],
                "the number of GPUs is set at launch (torchrun, accelerate, deepspeed), not in \
                 this file: the scenario's --gpus is kept",
            );
        }
        Ok(self.get("dp") == Some("zero3"))
    }

    fn finish(self) -> Imported {
        Imported {
            framework: self.framework,
            model: self.model,
            model_key: self.model_key,
            preset: self.preset,
            pairs: self.pairs,
            notes: self.notes,
        }
    }
}

/// The value as a note shows it: text without quotes, the rest as JSON, shortened.
fn show(v: &Value) -> String {
    let s = match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    crate::error::shorten(&s)
}

/// The preset a Hub id or local path names: its Hub id, or the same name without an owner, a
/// `Meta-` prefix or a chat-tuning suffix (an instruct model has its base model's shapes).
pub fn resolve_preset(name: &str) -> Option<String> {
    let catalog = PresetCatalog::builtin();
    if let Ok(p) = catalog.get(name) {
        return Some(p.id.clone());
    }
    let wanted = normalize(name);
    catalog
        .presets
        .iter()
        .filter(|p| !p.name.contains("not a published model"))
        .find(|p| normalize(&p.hf_id) == wanted || p.id == wanted)
        .map(|p| p.id.clone())
        .or_else(|| {
            TWINS
                .iter()
                .find(|(n, _, _)| *n == wanted)
                .map(|(_, p, _)| p.to_string())
        })
}

/// Models with no preset of their own whose shapes equal a preset's (normalized name, preset,
/// what differs). Llama 3 and 3.1 share every shape and the 128,256-token vocabulary
/// (their config.json files differ in `rope_scaling` and `max_position_embeddings` only).
const TWINS: &[(&str, &str, &str)] = &[
    (
        "llama-3-8b",
        "llama-3.1-8b",
        "Llama 3 8B is estimated as Llama 3.1 8B: the same shapes and vocabulary (only the \
         RoPE scaling and the context length differ, which change no memory)",
    ),
    (
        "llama-3-70b",
        "llama-3.1-70b",
        "Llama 3 70B is estimated as Llama 3.1 70B: the same shapes and vocabulary (only the \
         RoPE scaling and the context length differ, which change no memory)",
    ),
];

/// A model name's last path component, lower case, without `meta-` and the suffixes that
/// name a chat tuning of the same architecture.
fn normalize(name: &str) -> String {
    let last = name
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or(name)
        .to_ascii_lowercase();
    let mut s = last.strip_prefix("meta-").unwrap_or(&last).to_string();
    for suffix in [
        "-hf",
        "-fp16",
        "-bf16",
        "-instruct",
        "-chat",
        "-it",
        "-base",
    ] {
        if let Some(t) = s.strip_suffix(suffix) {
            s = t.to_string();
        }
    }
    s
}

// Keys read into link fields, shared by the frameworks' readers.

/// A whole-number key into link field `field`; absent: the framework's `default` (value, why)
/// when it has one.
fn number(
    map: &mut Map<String, Value>,
    out: &mut Out,
    key: &str,
    field: &str,
    default: Option<(&str, &str)>,
) -> Result<(), ImportError> {
    match map.remove(key) {
        Some(v) if !v.is_null() => {
            let n = as_u32(key, &v)?;
            out.mapped(key, &v, &[(field, &n.to_string())]);
        }
        _ => {
            if let Some((value, why)) = default {
                out.default(key, &[(field, value)], why);
            }
        }
    }
    Ok(())
}

/// A boolean key into an on/off link field (`use_dora` -> `dora=1`); absent: nothing.
fn switch(
    map: &mut Map<String, Value>,
    out: &mut Out,
    key: &str,
    field: &str,
) -> Result<(), ImportError> {
    if let Some((on, v)) = take_bool(map, key)? {
        out.mapped(key, &v, &[(field, if on { "1" } else { "0" })]);
    }
    Ok(())
}

/// peft's `lora_dropout` probability as the on/off `lora_dropout` field (any p > 0 keeps a
/// dropped copy and a mask); absent: the framework's default (value, why).
fn dropout(
    map: &mut Map<String, Value>,
    out: &mut Out,
    default: (&str, &str),
) -> Result<(), ImportError> {
    match map.remove("lora_dropout") {
        Some(v) => {
            let p = as_f64("lora_dropout", &v)?;
            let on = if p > 0.0 { "1" } else { "0" };
            out.mapped("lora_dropout", &v, &[("lora_dropout", on)]);
        }
        None => out.default("lora_dropout", &[("lora_dropout", default.0)], default.1),
    }
    Ok(())
}

/// `gradient_checkpointing`: on or off, or axolotl's `offload` modes (the checkpointed inputs
/// kept in CPU memory); absent: the framework's default (on, whose default).
fn checkpointing(
    map: &mut Map<String, Value>,
    out: &mut Out,
    default: (bool, &str),
) -> Result<(), ImportError> {
    let key = "gradient_checkpointing";
    match map.remove(key) {
        Some(v) if v.as_str().is_some_and(|s| s.starts_with("offload")) => {
            out.mapped(key, &v, &[("ckpt", "full"), ("act_offload", "1")]);
        }
        Some(v) => {
            let on = as_bool(key, &v)?;
            out.mapped(key, &v, &[("ckpt", if on { "full" } else { "none" })]);
        }
        None => {
            let on = if default.0 { "full" } else { "none" };
            out.default(key, &[("ckpt", on)], default.1);
        }
    }
    Ok(())
}

/// A boolean key, removed, with its value as written.
fn take_bool(
    map: &mut Map<String, Value>,
    key: &str,
) -> Result<Option<(bool, Value)>, ImportError> {
    map.remove(key)
        .map(|v| as_bool(key, &v).map(|b| (b, v)))
        .transpose()
}

// Value readers: each names the key on a wrong type.

fn as_bool(key: &str, v: &Value) -> Result<bool, ImportError> {
    match v {
        Value::Bool(b) => Ok(*b),
        Value::Null => Ok(false),
        Value::String(s) if s.eq_ignore_ascii_case("true") => Ok(true),
        Value::String(s) if s.eq_ignore_ascii_case("false") => Ok(false),
        _ => Err(bad(
            key,
            format!("expected true or false, found {}", show(v)),
        )),
    }
}

fn as_u32(key: &str, v: &Value) -> Result<u32, ImportError> {
    let n = match v {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse::<u64>().ok(),
        _ => None,
    };
    n.and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| bad(key, format!("expected a whole number, found {}", show(v))))
}

/// TRL's `vllm_mode` as the link's `gen`.
fn vllm_mode(key: &str, v: &Value) -> Result<&'static str, ImportError> {
    match v.as_str() {
        Some("colocate") => Ok("colocate"),
        Some("server") => Ok("server"),
        _ => Err(bad(key, "must be \"colocate\" or \"server\"")),
    }
}

/// A vLLM `gpu_memory_utilization` (a fraction in (0, 1]) as the link's percent.
fn vllm_util_percent(key: &str, v: &Value) -> Result<u32, ImportError> {
    let util = as_f64(key, v)?;
    if !(util > 0.0 && util <= 1.0) {
        return Err(bad(key, "must be a fraction in (0, 1]"));
    }
    Ok(libm::round(util * 100.0).max(1.0) as u32)
}

fn as_f64(key: &str, v: &Value) -> Result<f64, ImportError> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    }
    .ok_or_else(|| bad(key, format!("expected a number, found {}", show(v))))
}

fn as_str<'v>(key: &str, v: &'v Value) -> Result<&'v str, ImportError> {
    v.as_str()
        .ok_or_else(|| bad(key, format!("expected text, found {}", show(v))))
}

/// A list of names: a YAML/JSON list, or one string of names separated by commas or spaces.
fn as_names(key: &str, v: &Value) -> Result<Vec<String>, ImportError> {
    match v {
        Value::Array(items) => items
            .iter()
            .map(|i| as_str(key, i).map(str::to_string))
            .collect(),
        Value::String(s) => Ok(s
            .split([',', ' '])
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()),
        _ => Err(bad(
            key,
            format!("expected a list of names, found {}", show(v)),
        )),
    }
}

/// peft's `target_modules` as Headroom's `targets`: the named sets it models, `None` for any
/// other list (the note names it).
fn lora_targets(names: &[String]) -> Option<&'static str> {
    let mut set: Vec<&str> = names.iter().map(String::as_str).collect();
    set.sort_unstable();
    set.dedup();
    let is = |want: &[&str]| {
        let mut w = want.to_vec();
        w.sort_unstable();
        set == w
    };
    if set == ["all-linear"] || set == ["all"] {
        return Some("all");
    }
    if is(&["q_proj", "v_proj"]) {
        Some("qv")
    } else if is(&["q_proj", "k_proj", "v_proj"]) {
        Some("qkv")
    } else if is(&["q_proj", "k_proj", "v_proj", "o_proj"]) {
        Some("attn")
    } else if is(&["gate_proj", "up_proj", "down_proj"]) {
        Some("mlp")
    } else if is(&[
        "q_proj",
        "k_proj",
        "v_proj",
        "o_proj",
        "gate_proj",
        "up_proj",
        "down_proj",
    ]) {
        Some("all")
    } else {
        None
    }
}

/// Sets `targets` from a list of module names, or says which set was assumed.
fn targets(out: &mut Out, key: &str, v: &Value) -> Result<(), ImportError> {
    let names = as_names(key, v)?;
    match lora_targets(&names) {
        Some(t) => out.mapped(key, v, &[("targets", t)]),
        None => out.not_expressed(
            key,
            v,
            "Headroom's adapter sets are qv, qkv, attn (q, k, v, o), mlp (gate, up, down) and \
             all: this list is none of them, so the scenario keeps its own targets",
        ),
    }
    Ok(())
}

/// `modules_to_save`: a trained copy of the embeddings and lm_head is expressible.
fn modules_to_save(
    map: &mut Map<String, Value>,
    out: &mut Out,
    key: &str,
) -> Result<(), ImportError> {
    let Some(value) = map.remove(key) else {
        return Ok(());
    };
    let v = &value;
    let names = as_names(key, v)?;
    let mut set: Vec<&str> = names.iter().map(String::as_str).collect();
    set.sort_unstable();
    if set.is_empty() {
        out.no_effect(key, v);
    } else if set == ["embed_tokens", "lm_head"] {
        out.mapped(key, v, &[("save_embeddings", "1")]);
    } else {
        out.not_expressed(
            key,
            v,
            "only embed_tokens together with lm_head is modelled (save_embeddings)",
        );
    }
    Ok(())
}

/// transformers' `optim` names (and axolotl's `optimizer`) as Headroom's optimizers.
fn optimizer(out: &mut Out, key: &str, v: &Value) -> Result<(), ImportError> {
    let name = as_str(key, v)?;
    let mapped = match name {
        "adamw_torch" | "adamw_hf" | "adamw" | "AdamW" | "adam" | "Adam" => Some("adamw"),
        "adamw_torch_fused" => Some("adamw-fused"),
        "adamw_bnb_8bit" | "adamw_8bit" | "bnb_adamw_8bit" => Some("adamw8bit"),
        "paged_adamw_8bit" => Some("paged-adamw8bit"),
        "adafactor" => Some("adafactor"),
        "sgd" => Some("sgd"),
        "lion_32bit" | "lion" => Some("lion"),
        "adam_mini" | "adam-mini" => Some("adam-mini"),
        _ => None,
    };
    match mapped {
        Some(o) => out.mapped(key, v, &[("optimizer", o)]),
        None => out.not_expressed(
            key,
            v,
            "not one of Headroom's optimizers (adamw foreach/for-loop/fused, 8-bit and paged \
             8-bit AdamW, Lion, Adafactor, SGD, Adam-mini): the scenario keeps its own",
        ),
    }
    Ok(())
}

/// transformers' `attn_implementation` names as Headroom's attention.
fn attention(out: &mut Out, key: &str, v: &Value) -> Result<(), ImportError> {
    let name = as_str(key, v)?;
    let mapped: &[(&str, &str)] = match name {
        "eager" => &[("attention", "eager")],
        "sdpa" => &[("attention", "sdpa")],
        "flash_attention_2" | "fa2" => &[("attention", "flash2")],
        "flash_attention_3" | "fa3" => &[("attention", "flash3")],
        "flex_attention" => &[("attention", "flex")],
        _ => {
            out.not_expressed(
                key,
                v,
                "not one of eager, sdpa, flash_attention_2, flash_attention_3, flex_attention",
            );
            return Ok(());
        }
    };
    out.mapped(key, v, mapped);
    Ok(())
}

/// Sets `precision` (and `base` for adapters) from the autocast the arguments ask for, the dtype
/// the weights are loaded in, and whether the framework upcasts trainable weights to fp32.
/// `why` says where the load dtype came from.
fn set_precision(
    out: &mut Out,
    adapters: bool,
    half: hf_args::Half,
    load: Option<hf_args::Half>,
    upcast_trainable: bool,
    why: &str,
) {
    use hf_args::Half;
    // DeepSpeed's bf16 / fp16 modes keep fp32 master weights and states whatever the load dtype.
    let deepspeed = matches!(out.get("dp"), Some("zero1" | "zero2" | "zero3"));
    let upcast_trainable = upcast_trainable || deepspeed;
    let why = if deepspeed && !adapters {
        format!("{why}; DeepSpeed keeps fp32 master weights")
    } else {
        why.to_string()
    };
    let loaded = load.map(Half::word).unwrap_or("fp32");
    let (fields, text): (Vec<(&str, &str)>, String) = match (half, load) {
        (Half::None, Some(h)) if h != Half::None && (adapters || !upcast_trainable) => (
            vec![("precision", h.word())],
            format!("weights loaded in {loaded}, no autocast"),
        ),
        (Half::None, _) => (
            vec![("precision", "fp32")],
            "fp32 weights, no autocast".into(),
        ),
        (h, load) => {
            let amp = if h == Half::Fp16 {
                "amp-fp16"
            } else {
                "amp-bf16"
            };
            let sixteen = load.is_some_and(|l| l != Half::None);
            if adapters {
                (
                    vec![
                        ("precision", amp),
                        ("base", if sixteen { "16bit" } else { "fp32" }),
                    ],
                    format!("{} autocast; the frozen base loaded in {loaded}", h.word()),
                )
            } else if sixteen && !upcast_trainable {
                (
                    vec![("precision", h.word())],
                    format!(
                        "{} autocast over weights loaded in {loaded}: 16-bit weights, gradients \
                         and optimizer states",
                        h.word()
                    ),
                )
            } else {
                (
                    vec![("precision", amp)],
                    format!("{} autocast over fp32 trainable weights", h.word()),
                )
            }
        }
    };
    let set = out.set(&fields);
    out.notes.push(Note {
        key: "precision".into(),
        value: String::new(),
        outcome: Outcome::Mapped,
        text: format!("{set}: {text} ({why})"),
    });
}

#[cfg(test)]
mod tests;
