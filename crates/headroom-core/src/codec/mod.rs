//! Scenario <-> URL query: short, readable, versioned (`v=1`), only non-default fields written.
//!
//! Any string decodes to a scenario or to an error naming the field. Values are limited to
//! `[A-Za-z0-9._:~-]`, so nothing a link carries can become markup.
//!
//! `FIELDS`, one row per link field with how it reads and writes a scenario, is the only list of
//! link fields: `KEYS`, `encode`, decoding, `field_value`, the CLI's flags and the site's inputs
//! derive from it or are tested against it. For pages, `decode_lenient` names each bad field and
//! leaves it at its default, and `field_value` gives each field's value for forms.

use crate::dtype::DType;
use crate::error::ScenarioError;
use crate::scenario::{
    Attention, BaseDtype, Checkpointing, DataParallel, Fp8Recipe, Generator, LoraTargets, LossImpl,
    Method, ModelChoice, Offload, Optimizer, Precision, Scenario, SdpaKernel, Trainer,
    VisionTraining,
};

mod named;
mod spec;

pub use named::*;
use spec::decode_spec;
pub use spec::{encode_spec, spec_to_config};

/// The codec version written into every link.
pub const VERSION: u32 = 1;

/// One link field: its key, how it reads from a scenario and how it is written into one. The
/// table [`FIELDS`] is the only list of link fields: [`KEYS`], [`encode`], [`decode_pairs`],
/// [`field_value`], the CLI's flags and the site's inputs all derive from or are checked against it.
#[derive(Debug)]
pub struct Field {
    /// The link key.
    pub key: &'static str,
    /// A switch (`0`/`1`; `true`/`false` also read).
    pub switch: bool,
    /// The value as a link writes it (`custom` for `model` of a custom config, empty for a
    /// dropout left at the config's values or for `cfg` of a preset).
    pub get: fn(&Scenario) -> String,
    /// Whether a link carries the field for this scenario at all: the LoRA fields only with
    /// LoRA, `model` only for a preset, `cfg` only for a custom config.
    carried: fn(&Scenario) -> bool,
    /// Applies a value (not yet validated as a whole scenario).
    set: fn(&mut Scenario, &str) -> Result<(), ScenarioError>,
}

impl Field {
    /// The field with link key `key`.
    pub fn find(key: &str) -> Option<&'static Field> {
        FIELDS.iter().find(|f| f.key == key)
    }

    /// Whether [`encode`] writes this field for `scen`: always `v`; otherwise when the link
    /// carries it and its value differs from the default scenario's.
    fn written(&self, scen: &Scenario, default: &Scenario) -> bool {
        self.key == "v" || ((self.carried)(scen) && (self.get)(scen) != (self.get)(default))
    }
}

fn always(_: &Scenario) -> bool {
    true
}

/// GRPO generating with vLLM (colocated or on a server).
fn uses_vllm(s: &Scenario) -> bool {
    s.trainer.generates() && s.generator != Generator::Hf
}

fn packing(s: &Scenario) -> bool {
    s.packing
}

fn padded(s: &Scenario) -> bool {
    s.len_mean > 0
}

fn lora(s: &Scenario) -> bool {
    s.method != Method::Full
}

/// The adapters' dtypes a link names: peft's default fp32 (`autocast_adapter_dtype=True`), or
/// the base's 16 bits (`autocast_adapter_dtype=False`).
pub const ADAPTER_DTYPES: &[(&str, DType)] = &[
    ("fp32", DType::F32),
    ("bf16", DType::Bf16),
    ("fp16", DType::F16),
];

fn adapter_id(d: DType) -> &'static str {
    ADAPTER_DTYPES
        .iter()
        .find(|(_, x)| *x == d)
        .map_or("fp32", |(id, _)| id)
}

fn bit(b: bool) -> String {
    if b { "1" } else { "0" }.to_string()
}

macro_rules! number {
    ($key:literal, $($f:ident).+) => {
        number!($key, always, $($f).+)
    };
    ($key:literal, $carried:expr, $($f:ident).+) => {
        Field {
            key: $key,
            switch: false,
            get: |s| s.$($f).+.to_string(),
            carried: $carried,
            set: |s, v| {
                s.$($f).+ = num($key, v)?;
                Ok(())
            },
        }
    };
}

macro_rules! choice {
    ($key:literal, $ty:ident, $($f:ident).+) => {
        choice!($key, always, $ty, $($f).+)
    };
    ($key:literal, $carried:expr, $ty:ident, $($f:ident).+) => {
        Field {
            key: $key,
            switch: false,
            get: |s| s.$($f).+.id().to_string(),
            carried: $carried,
            set: |s, v| {
                s.$($f).+ = $ty::parse($key, v)?;
                Ok(())
            },
        }
    };
}

macro_rules! switch {
    ($key:literal, $($f:ident).+) => {
        switch!($key, always, $($f).+)
    };
    ($key:literal, $carried:expr, $($f:ident).+) => {
        Field {
            key: $key,
            switch: true,
            get: |s| bit(s.$($f).+),
            carried: $carried,
            set: |s, v| {
                s.$($f).+ = flag($key, v)?;
                Ok(())
            },
        }
    };
}

/// Every link field, in the order links write them.
pub const FIELDS: &[Field] = &[
    Field {
        key: "v",
        switch: false,
        get: |_| VERSION.to_string(),
        carried: always,
        set: |_, v| {
            let version: u32 = num("v", v)?;
            if version != VERSION {
                return Err(ScenarioError::invalid(
                    "v",
                    format!(
                        "link version {version} is not known; this page reads version {VERSION}"
                    ),
                ));
            }
            Ok(())
        },
    },
    Field {
        key: "model",
        switch: false,
        get: |s| match &s.model {
            ModelChoice::Preset(id) => id.clone(),
            ModelChoice::Custom(_) => "custom".into(),
        },
        carried: |s| matches!(s.model, ModelChoice::Preset(_)),
        set: |s, v| {
            s.model = ModelChoice::Preset(v.to_ascii_lowercase());
            Ok(())
        },
    },
    Field {
        key: "cfg",
        switch: false,
        get: |s| match &s.model {
            ModelChoice::Preset(_) => String::new(),
            ModelChoice::Custom(spec) => encode_spec(spec),
        },
        carried: |s| matches!(s.model, ModelChoice::Custom(_)),
        set: |s, v| {
            s.model = ModelChoice::Custom(Box::new(decode_spec(v)?));
            Ok(())
        },
    },
    Field {
        key: "gpu",
        switch: false,
        get: |s| s.gpu.clone(),
        carried: always,
        set: |s, v| {
            s.gpu = v.to_ascii_lowercase();
            Ok(())
        },
    },
    number!("gpus", gpus),
    number!("batch", micro_batch),
    number!("seq", seq),
    number!("accum", grad_accum),
    choice!("method", Method, method),
    number!("rank", lora, lora.rank),
    choice!("targets", lora, LoraTargets, lora.targets),
    choice!("base", lora, BaseDtype, lora.base),
    Field {
        key: "adapter",
        switch: false,
        get: |s| adapter_id(s.lora.adapter_dtype).into(),
        carried: lora,
        set: |s, v| {
            s.lora.adapter_dtype = ADAPTER_DTYPES
                .iter()
                .find(|(id, _)| *id == v)
                .map(|(_, d)| *d)
                .ok_or_else(|| {
                    ScenarioError::invalid(
                        "adapter",
                        format!(
                            "unknown adapter dtype `{}`; allowed: fp32, bf16, fp16",
                            crate::error::shorten(v)
                        ),
                    )
                })?;
            Ok(())
        },
    },
    // Carried with LoRA's other settings (it changes nothing under plain LoRA).
    switch!("kbit", lora, lora.kbit),
    switch!("lora_dropout", lora, lora.dropout),
    switch!("save_embeddings", lora, lora.save_embeddings),
    switch!("dora", lora, lora.dora),
    choice!("precision", Precision, precision),
    choice!("fp8", Fp8Recipe, fp8),
    choice!("optimizer", Optimizer, optimizer),
    choice!("vision", VisionTraining, vision),
    number!("images", images),
    number!("mtp", mtp),
    choice!("attention", Attention, attention),
    choice!("sdpa", SdpaKernel, sdpa),
    // After the attention fields: the site applies a link's fields in this order, checking the
    // scenario after each, and packing needs a varlen attention (flash2, flash3, flex).
    switch!("packing", packing),
    number!("doc_len", packing, doc_len),
    number!("len_mean", len_mean),
    number!("len_sd", padded, len_sd),
    switch!("drop_long", padded, drop_long),
    Field {
        key: "dropout",
        switch: false,
        // Empty is "the config's own dropout probabilities", which links leave out.
        get: |s| s.dropout.map(format_prob).unwrap_or_default(),
        carried: always,
        set: |s, v| {
            s.dropout = if v.is_empty() {
                None
            } else {
                let p: f64 = v
                    .parse()
                    .map_err(|_| ScenarioError::invalid("dropout", "must be a number in [0, 1)"))?;
                // To the 4 decimals a link writes, so a link and its re-encoding agree
                // (2.6e-246 was read as itself and written as 0; found by the fuzz harness).
                Some(libm::round(p * 1e4) / 1e4)
            };
            Ok(())
        },
    },
    choice!("ckpt", Checkpointing, checkpointing),
    switch!("act_offload", offload_activations),
    switch!("act_int8", act_int8),
    choice!("loss", LossImpl, loss),
    choice!("trainer", Trainer, trainer),
    switch!("ref_precompute", |s| s.trainer.preference(), ref_precompute),
    number!("prompt", |s| s.trainer.generates(), prompt),
    switch!("kl", |s| s.trainer.generates(), kl),
    choice!("gen", |s| s.trainer.generates(), Generator, generator),
    number!("vllm_util", uses_vllm, vllm_util),
    number!("vllm_len", uses_vllm, vllm_len),
    switch!(
        "vllm_sleep",
        |s| uses_vllm(s) && s.generator == Generator::Colocate,
        vllm_sleep
    ),
    switch!("keep_logits", keep_logits),
    choice!("dp", DataParallel, parallel.data),
    number!("tp", parallel.tensor),
    number!("pp", parallel.pipeline),
    number!("ep", parallel.expert),
    number!("cp", parallel.context),
    switch!("sp", parallel.sequence),
    choice!("opt_offload", Offload, parallel.offload_optimizer),
    choice!("param_offload", Offload, parallel.offload_params),
    switch!("bucket_view", parallel.grad_bucket_view),
    switch!("ds_bf16", parallel.ds_bf16_states),
    switch!("fsdp1", parallel.fsdp1),
    switch!("reduce32", parallel.reduce32),
    switch!("expandable", runtime.expandable_segments),
    switch!("graphs", runtime.cuda_graphs),
    switch!("compile", runtime.compile),
    number!("margin", runtime.margin),
    number!("host_ram", runtime.host_ram),
    number!("node", runtime.gpus_per_node),
    number!("ib", runtime.internode_gbs),
    number!("eff", runtime.efficiency),
];

/// Query keys in the order they are written (the keys of [`FIELDS`]).
pub const KEYS: &[&str] = &{
    let mut keys = [""; FIELDS.len()];
    let mut i = 0;
    while i < FIELDS.len() {
        keys[i] = FIELDS[i].key;
        i += 1;
    }
    keys
};

/// Encodes `scen` as a query string (without `?`): `v`, then every field the link carries whose
/// value differs from the default scenario's, in [`FIELDS`] order.
pub fn encode(scen: &Scenario) -> String {
    let d = Scenario::default();
    FIELDS
        .iter()
        .filter(|f| f.written(scen, &d))
        .map(|f| format!("{}={}", f.key, (f.get)(scen)))
        .collect::<Vec<_>>()
        .join("&")
}

fn format_prob(p: f64) -> String {
    let s = format!("{p:.4}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Decodes a query string (with or without a leading `?`, or a whole URL); missing keys take
/// defaults.
pub fn decode(query: &str) -> Result<Scenario, ScenarioError> {
    decode_pairs(Scenario::default(), &query_pairs(query)?)
}

/// Splits a query string (with or without a leading `?`, or a whole URL) into decoded pairs.
pub fn query_pairs(query: &str) -> Result<Vec<(String, String)>, ScenarioError> {
    let query = match query.split_once('?') {
        Some((_, q)) => q,
        None => query,
    };
    let query = query.split('#').next().unwrap_or("");
    let mut pairs = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (raw_key, raw_value) = pair.split_once('=').unwrap_or((pair, ""));
        let key = percent_decode(raw_key)
            .ok_or_else(|| ScenarioError::invalid("link", "a key has a broken %-escape"))?;
        let value = percent_decode(raw_value)
            .ok_or_else(|| ScenarioError::invalid(printable(&key), "broken %-escape"))?;
        pairs.push((key, value));
    }
    Ok(pairs)
}

/// Decodes as much of a link as is valid: each bad field is reported and left at its default,
/// the rest is kept. For pages, which must open on a scenario whatever the link holds.
///
/// Pairs are applied in the order links are written (`gpus` before `tp`, `dp` before
/// `opt_offload`), each followed by validation, so one field that breaks a combination is the
/// one reported and dropped.
pub fn decode_lenient(
    base: Scenario,
    pairs: &[(String, String)],
) -> (Scenario, Vec<ScenarioError>) {
    let mut ordered: Vec<&(String, String)> = pairs.iter().collect();
    ordered.sort_by_key(|(k, _)| KEYS.iter().position(|x| x == k).unwrap_or(usize::MAX));
    let mut scen = base;
    let mut errors = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for pair in ordered {
        if !seen.insert(pair.0.clone()) {
            errors.push(ScenarioError::invalid(
                printable(&pair.0),
                "appears twice; the first is used",
            ));
            continue;
        }
        match decode_pairs(scen.clone(), std::slice::from_ref(pair)) {
            Ok(next) => scen = next,
            Err(e) => errors.push(e),
        }
    }
    if let Err(e) = scen.validate() {
        // The base itself was invalid: fall back to the defaults entirely.
        errors.push(e);
        scen = Scenario::default();
    }
    (scen, errors)
}

/// A link key as it may be quoted back: characters outside `[A-Za-z0-9._:~-]` become `?`, so a
/// message never carries markup from a link; an empty key (`=1`, `&&`) is named as such.
pub fn printable(key: &str) -> String {
    if key.is_empty() {
        return "(no name)".to_string();
    }
    crate::error::shorten(key)
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._:~-".contains(c) {
                c
            } else {
                '?'
            }
        })
        .collect()
}

/// Applies `key = value` pairs (link keys) on top of `base`, then validates.
pub fn decode_pairs(base: Scenario, pairs: &[(String, String)]) -> Result<Scenario, ScenarioError> {
    let mut s = base;
    let mut seen = std::collections::BTreeSet::new();
    for (key, value) in pairs {
        let (key, value) = (key.clone(), value.clone());
        let Some(field) = Field::find(&key) else {
            return Err(ScenarioError::invalid(
                printable(&key),
                format!("unknown link field; known: {}", KEYS.join(", ")),
            ));
        };
        if !seen.insert(key.clone()) {
            return Err(ScenarioError::invalid(&key, "appears twice"));
        }
        if value.len() > 2000
            || !value
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._:~-".contains(c))
        {
            return Err(ScenarioError::invalid(
                &key,
                "has characters a link field may not hold (allowed: letters, digits, . _ : ~ -)",
            ));
        }
        (field.set)(&mut s, &value)?;
    }
    s.validate()?;
    Ok(s)
}

fn num<T: std::str::FromStr>(key: &str, v: &str) -> Result<T, ScenarioError> {
    v.parse().map_err(|_| {
        ScenarioError::invalid(
            key,
            format!(
                "must be a whole number, found `{}`",
                crate::error::shorten(v)
            ),
        )
    })
}

fn flag(key: &str, v: &str) -> Result<bool, ScenarioError> {
    match v {
        "1" | "true" => Ok(true),
        "0" | "false" => Ok(false),
        _ => Err(ScenarioError::invalid(
            key,
            format!("must be 0 or 1, found `{}`", crate::error::shorten(v)),
        )),
    }
}

/// Decodes `%XX` escapes and `+`; `None` on a broken escape or invalid UTF-8.
fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// The value of one link field in `scen`, as a link writes it (`None` for `v`, `cfg` and
/// unknown keys; `custom` for the model of a custom config; an empty string for a dropout left
/// at the config's values, which decodes back to it). Forms show these, and send edits back
/// through [`decode_pairs`], so a form and a link validate alike.
pub fn field_value(scen: &Scenario, key: &str) -> Option<String> {
    Field::find(key)
        .filter(|f| !matches!(f.key, "v" | "cfg"))
        .map(|f| (f.get)(scen))
}
