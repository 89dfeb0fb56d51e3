//! Scenario <-> URL query: short, readable, versioned (`v=1`), only non-default fields written.
//!
//! Any string decodes to a scenario or to an error naming the field. Values are limited to
//! `[A-Za-z0-9._:~-]`, so nothing a link carries can become markup.

use serde_json::{Map, Value};

use crate::dtype::DType;
use crate::error::ScenarioError;
use crate::model::classes::{Bias, LocalRule, MoeRule, QkNorm, Window};
use crate::model::{Family, ModelSpec, Router, Vision, VisionKind};
use crate::scenario::{
    Attention, BaseDtype, Checkpointing, DataParallel, Fp8Recipe, Generator, LoraTargets, LossImpl,
    Method, ModelChoice, Offload, Optimizer, Precision, Scenario, SdpaKernel, Trainer,
    VisionTraining,
};

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
                            crate::scenario::shorten(v)
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
    crate::scenario::shorten(key)
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
                crate::scenario::shorten(v)
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
            format!("must be 0 or 1, found `{}`", crate::scenario::shorten(v)),
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

/// Hugging Face config keys that reproduce `spec` for its family (round-trips through
/// [`parse_config_json`]).
pub fn spec_to_config(spec: &ModelSpec) -> Map<String, Value> {
    match &spec.vision {
        Some(v) => multimodal_config(spec, v),
        None => text_config(spec),
    }
}

/// A multimodal wrapper's keys: its own, `text_config` (the text model's, as [`text_config`]
/// writes them) and `vision_config`.
fn multimodal_config(spec: &ModelSpec, v: &Vision) -> Map<String, Value> {
    let text = ModelSpec {
        vision: None,
        ..spec.clone()
    };
    let mut m = Map::new();
    let mut vc = Map::new();
    let mut put = |k: &str, x: Value| {
        vc.insert(k.to_string(), x);
    };
    let indices = |n: u64| Value::Array((0..n).map(Value::from).collect());
    put("hidden_size", v.hidden.into());
    put("intermediate_size", v.intermediate.into());
    put("patch_size", v.patch.into());
    match v.kind {
        VisionKind::Qwen25 | VisionKind::Qwen3 => {
            put("depth", v.layers.into());
            put("num_heads", v.heads.into());
            put("in_channels", v.channels.into());
            put("temporal_patch_size", v.temporal_patch.into());
            put("spatial_merge_size", v.merge.into());
            put("out_hidden_size", v.out_hidden.into());
            if v.kind == VisionKind::Qwen3 {
                put("num_position_embeddings", v.positions.into());
                put("deepstack_visual_indexes", indices(v.deepstack));
            }
        }
        VisionKind::Siglip | VisionKind::Pixtral | VisionKind::Llama4 => {
            put("num_hidden_layers", v.layers.into());
            put("num_attention_heads", v.heads.into());
            put("num_channels", v.channels.into());
            put("image_size", v.image_size.into());
            if v.kind == VisionKind::Siglip {
                put("vision_use_head", v.pooling_head.into());
            }
            if v.kind == VisionKind::Llama4 {
                put("pixel_shuffle_ratio", (1.0 / v.merge.max(1) as f64).into());
                put("projector_input_dim", v.projector_in.into());
                put("projector_output_dim", v.projector_out.into());
                put("vision_output_dim", v.vision_out.into());
            }
        }
    }
    m.insert("model_type".into(), v.wrapper().into());
    m.insert("tie_word_embeddings".into(), spec.tie_embeddings.into());
    match v.kind {
        VisionKind::Siglip => {
            m.insert("mm_tokens_per_image".into(), v.tokens_per_image.into());
        }
        VisionKind::Pixtral => {
            m.insert("spatial_merge_size".into(), v.merge.into());
            m.insert("multimodal_projector_bias".into(), v.projector_bias.into());
            if v.feature_layers > 1 {
                m.insert("vision_feature_layer".into(), indices(v.feature_layers));
            }
        }
        VisionKind::Qwen25 | VisionKind::Qwen3 | VisionKind::Llama4 => {}
    }
    m.insert("text_config".into(), Value::Object(text_config(&text)));
    m.insert("vision_config".into(), Value::Object(vc));
    m
}

/// The keys of a text-only model (or of a wrapper's text model).
fn text_config(spec: &ModelSpec) -> Map<String, Value> {
    let t = spec.class().traits;
    let mut m = Map::new();
    let mut put = |k: &str, v: Value| {
        m.insert(k.to_string(), v);
    };
    put("model_type", Value::from(spec.model_type.clone()));
    put("vocab_size", spec.vocab.into());
    put("tie_word_embeddings", spec.tie_embeddings.into());
    match spec.family {
        Family::Gpt2 => {
            put("n_embd", spec.hidden.into());
            put("n_layer", spec.layers.into());
            put("n_head", spec.heads.into());
            put("n_inner", spec.intermediate.into());
            put("n_positions", spec.max_positions.into());
            put("activation_function", spec.activation.clone().into());
            put("attn_pdrop", spec.dropout.attention.into());
            put("resid_pdrop", spec.dropout.residual.into());
            put("embd_pdrop", spec.dropout.embedding.into());
        }
        _ => {
            put("hidden_size", spec.hidden.into());
            put("num_hidden_layers", spec.layers.into());
            put("num_attention_heads", spec.heads.into());
            put("num_key_value_heads", spec.kv_heads.into());
            put("head_dim", spec.head_dim.into());
            put("intermediate_size", spec.intermediate.into());
            put("max_position_embeddings", spec.max_positions.into());
            put("attention_dropout", spec.dropout.attention.into());
            if spec.rotary_fraction != 1.0 && t.rotary_key {
                put("partial_rotary_factor", spec.rotary_fraction.into());
            }
            if matches!(spec.family, Family::Opt) {
                put("ffn_dim", spec.intermediate.into());
                put("word_embed_proj_dim", spec.embed_proj_dim.into());
                put("do_layer_norm_before", spec.final_norm.into());
                put("enable_bias", spec.qkv_bias.into());
                put("dropout", spec.dropout.residual.into());
                put("activation_function", spec.activation.clone().into());
            } else if matches!(spec.family, Family::Gemma) {
                put("hidden_activation", spec.activation.clone().into());
                put("attention_bias", spec.qkv_bias.into());
            } else {
                put("hidden_act", spec.activation.clone().into());
            }
            if matches!(spec.family, Family::GptNeox) {
                put("attention_bias", spec.qkv_bias.into());
                put("hidden_dropout", spec.dropout.residual.into());
                // Found by the config fuzz target: without it a link turned Pythia-style
                // sequential residuals (`use_parallel_residual: false`) into parallel ones.
                put("use_parallel_residual", spec.parallel_residual.into());
            }
            if spec.family == Family::Starcoder2 {
                put("use_bias", spec.qkv_bias.into());
                put("residual_dropout", spec.dropout.residual.into());
                put("embedding_dropout", spec.dropout.embedding.into());
            }
            if spec.family == Family::Phi3 {
                put("resid_pdrop", spec.dropout.residual.into());
                put("embd_pdrop", spec.dropout.embedding.into());
            }
            // Cohere 2 reads `attention_bias` for q, k, v and o alike; a Cohere 2 config's
            // biases were dropped from its link before (found by the fuzz harness).
            if spec.family == Family::Cohere2
                || matches!(
                    t.bias,
                    Bias::Key {
                        key: "attention_bias",
                        o: false,
                        ..
                    }
                )
            {
                put("attention_bias", spec.qkv_bias.into());
            }
            if t.qk_norm == QkNorm::Key {
                put("use_qk_norm", spec.qk_norm.into());
            }
            if spec.is_gpt_oss() {
                put("attention_bias", spec.qkv_bias.into());
                if spec.sliding_window.is_none() {
                    put("sliding_window", Value::Null);
                }
            }
            if spec.mtp_modules > 0 {
                put("num_nextn_predict_layers", spec.mtp_modules.into());
            }
            if let Some(mla) = &spec.mla {
                put("attention_bias", spec.qkv_bias.into());
                put("mlp_bias", spec.mlp_bias.into());
                put(
                    "q_lora_rank",
                    match mla.q_lora_rank {
                        0 => Value::Null,
                        r => r.into(),
                    },
                );
                put("kv_lora_rank", mla.kv_lora_rank.into());
                put("qk_nope_head_dim", mla.qk_nope_head_dim.into());
                put("qk_rope_head_dim", mla.qk_rope_head_dim.into());
                put("v_head_dim", mla.v_head_dim.into());
            }
            if matches!(spec.family, Family::Llama | Family::Olmo2) {
                // An approximate layout is read as Llama's (`model::hf`), mlp_bias included;
                // multi-head latent attention's biases are written with its keys.
                if t.bias == Bias::UseBias {
                    put("use_bias", spec.qkv_bias.into());
                } else if matches!(t.bias, Bias::Separate { .. }) {
                    put("attention_bias", spec.qkv_bias.into());
                    put("attention_out_bias", spec.o_bias.into());
                    put("mlp_bias", spec.mlp_bias.into());
                } else if t.mlp_bias_key && spec.mla.is_none() {
                    put("attention_bias", spec.o_bias.into());
                    put("mlp_bias", spec.mlp_bias.into());
                } else if spec.o_bias {
                    // The other Llama-like types read `attention_bias` too (q, k, v and o); a
                    // Qwen3-MoE config's biases were dropped from its link before (found by
                    // the fuzz harness). Written only when set, so other links are unchanged.
                    put("attention_bias", true.into());
                }
                // Qwen2's fixed bias is written too, as links always had it.
                if matches!(
                    t.bias,
                    Bias::Fixed(true)
                        | Bias::Key {
                            key: "qkv_bias",
                            ..
                        }
                ) {
                    put("qkv_bias", spec.qkv_bias.into());
                }
                if t.residual_dropout {
                    put("residual_dropout", spec.dropout.residual.into());
                }
                if spec.sliding_window.is_none() && matches!(t.window, Window::NullDisables(_)) {
                    put("sliding_window", Value::Null);
                }
            }
            // Every family that reads a window (Llama-like, Phi-3, ...): a Phi-3 config's
            // window was dropped from its link before (found by the fuzz harness).
            if let Some(w) = spec.sliding_window {
                put("sliding_window", w.into());
                put("use_sliding_window", true.into());
                // Where the config decided how many layers slide: Qwen2/Qwen3's and Qwen2-MoE's
                // rule by `max_window_layers`, the others by listing the layers.
                if let Some(n) = spec.sliding_layers {
                    match t.local_rule {
                        LocalRule::FromMaxWindow => {
                            put("max_window_layers", (spec.layers - n).into())
                        }
                        LocalRule::EvenBelowMaxWindow => put("max_window_layers", (2 * n).into()),
                        LocalRule::Layout | LocalRule::NopeLayers => {
                            let kinds = (0..spec.layers).map(|i| {
                                Value::from(if i < n {
                                    "sliding_attention"
                                } else {
                                    "full_attention"
                                })
                            });
                            put("layer_types", Value::Array(kinds.collect()));
                        }
                    }
                }
            }
            if let Some(l4) = &spec.llama4 {
                llama4_keys(spec, l4, &mut put);
            } else if let Some(la) = &spec.linear_attention {
                put_layer_types(spec.layers, la.layers, &mut put);
                put("linear_num_key_heads", la.key_heads.into());
                put("linear_num_value_heads", la.value_heads.into());
                put("linear_key_head_dim", la.key_head_dim.into());
                put("linear_value_head_dim", la.value_head_dim.into());
                put("linear_conv_kernel_dim", la.conv_kernel.into());
            }
            if spec.llama4.is_some() {
                // Written by `llama4_keys`.
            } else if let Some(moe) = &spec.moe {
                if let MoeRule::Uniform { norm_topk, .. } = t.moe {
                    put("num_local_experts", moe.experts.into());
                    if norm_topk.is_none() && moe.norm_topk {
                        put("norm_topk_prob", true.into());
                    }
                } else {
                    put("num_experts", moe.experts.into());
                    put("moe_intermediate_size", moe.expert_intermediate.into());
                    put(
                        "shared_expert_intermediate_size",
                        moe.shared_intermediate.into(),
                    );
                    // Sparse layers are written as the dense ones listed first.
                    let dense: Vec<Value> = (0..spec.layers - moe.sparse_layers)
                        .map(Value::from)
                        .collect();
                    put("mlp_only_layers", Value::Array(dense));
                    // Written where it differs from the config class's default: true for
                    // DeepSeek-V3 and GLM-4.5, false for the others.
                    if moe.norm_topk != (moe.router == Router::DeepseekV3) {
                        put("norm_topk_prob", moe.norm_topk.into());
                    }
                    if moe.router
                        == (Router::DeepseekV2 {
                            group_limited: true,
                        })
                    {
                        put("topk_method", "group_limited_greedy".into());
                    }
                }
                put("num_experts_per_tok", moe.top_k.into());
            } else if matches!(t.moe, MoeRule::Routed(_)) {
                // A GLM-4.5 (or DeepSeek) config with no routed experts is dense; its link
                // must say so, or the class default (128 experts) comes back (found by the
                // fuzz harness).
                put("num_experts", 0.into());
            }
        }
    }
    m
}

/// Llama 4's keys: the experts' width is its `intermediate_size` (the dense layers' is
/// `intermediate_size_mlp`), MoE layers listed last, NoPE layers by an interval where one gives
/// their number, else listed.
fn llama4_keys(spec: &ModelSpec, l4: &crate::model::Llama4, put: &mut impl FnMut(&str, Value)) {
    put("intermediate_size_mlp", spec.intermediate.into());
    if let Some(moe) = &spec.moe {
        put("intermediate_size", moe.expert_intermediate.into());
        put("num_local_experts", moe.experts.into());
        put("num_experts_per_tok", moe.top_k.into());
        let sparse = (spec.layers - moe.sparse_layers..spec.layers).map(Value::from);
        put("moe_layers", Value::Array(sparse.collect()));
    }
    match (1..=spec.layers + 1).find(|k| spec.layers / k == l4.nope_layers) {
        Some(k) => put("no_rope_layer_interval", k.into()),
        None => {
            let rope = (0..spec.layers).map(|i| Value::from(u64::from(i >= l4.nope_layers)));
            put("no_rope_layers", Value::Array(rope.collect()));
        }
    }
    put(
        "attention_chunk_size",
        l4.chunk.map_or(Value::Null, Value::from),
    );
    put("use_qk_norm", l4.qk_l2_norm.into());
    put("attn_temperature_tuning", l4.temperature_tuning.into());
}

/// Qwen3-Next's layer kinds: by `full_attention_interval` where one gives the number of linear
/// layers, else listed (linear layers first).
fn put_layer_types(layers: u64, linear: u64, put: &mut impl FnMut(&str, Value)) {
    match (1..=layers + 1).find(|k| layers - layers / k == linear) {
        Some(k) => put("full_attention_interval", k.into()),
        None => {
            let kinds = (0..layers).map(|i| {
                Value::from(if i < linear {
                    "linear_attention"
                } else {
                    "full_attention"
                })
            });
            put("layer_types", Value::Array(kinds.collect()));
        }
    }
}

/// Config keys whose values are lists, written in a link as their items joined by dots
/// (`layer_types` holds names, the others indices).
const LIST_KEYS: [&str; 6] = [
    "mlp_only_layers",
    "moe_layers",
    "no_rope_layers",
    "layer_types",
    "deepstack_visual_indexes",
    "vision_feature_layer",
];

/// `key:value~key:value...` of the config keys; lists as `a.b.c`, null as `null`; a
/// multimodal wrapper's `text_config` and `vision_config` keys as `text_config.key:value`.
pub fn encode_spec(spec: &ModelSpec) -> String {
    let mut items = Vec::new();
    for (k, v) in spec_to_config(spec) {
        match v {
            Value::Object(inner) => {
                for (k2, v2) in inner {
                    items.push(format!("{k}.{k2}:{}", link_value(&v2)));
                }
            }
            other => items.push(format!("{k}:{}", link_value(&other))),
        }
    }
    items.join("~")
}

fn link_value(v: &Value) -> String {
    match v {
        Value::Array(items) => items
            .iter()
            .map(|i| match i {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .collect::<Vec<_>>()
            .join("."),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn decode_spec(v: &str) -> Result<ModelSpec, ScenarioError> {
    let mut m = Map::new();
    let mut nested: [(&str, Map<String, Value>); 2] =
        [("text_config", Map::new()), ("vision_config", Map::new())];
    for item in v.split('~') {
        let (k, raw) = item.split_once(':').ok_or_else(|| {
            ScenarioError::invalid(
                "cfg",
                format!("`{}` is not key:value", crate::scenario::shorten(item)),
            )
        })?;
        let (section, k) = match k.split_once('.') {
            Some((p, rest)) if nested.iter().any(|(n, _)| *n == p) => (Some(p), rest),
            _ => (None, k),
        };
        let value = if k == "layer_types" {
            // Names (checked by the config parser).
            let items = raw.split('.').filter(|x| !x.is_empty()).map(Value::from);
            Value::Array(items.collect())
        } else if LIST_KEYS.contains(&k) && !(k == "vision_feature_layer" && raw.starts_with('-')) {
            let items: Result<Vec<Value>, _> = raw
                .split('.')
                .filter(|x| !x.is_empty())
                .map(|x| x.parse::<u64>().map(Value::from))
                .collect();
            Value::Array(items.map_err(|_| {
                ScenarioError::invalid("cfg", format!("{k} must be numbers separated by dots"))
            })?)
        } else if raw == "null" {
            Value::Null
        } else if raw == "true" || raw == "false" {
            Value::Bool(raw == "true")
        } else if let Ok(n) = raw.parse::<u64>() {
            Value::from(n)
        } else if let Ok(f) = raw.parse::<f64>() {
            Value::from(f)
        } else {
            Value::from(raw.to_string())
        };
        match nested.iter_mut().find(|(n, _)| Some(*n) == section) {
            Some((_, inner)) => {
                inner.insert(k.to_string(), value);
            }
            None => {
                m.insert(k.to_string(), value);
            }
        }
    }
    for (name, inner) in nested {
        if !inner.is_empty() {
            m.insert(name.to_string(), Value::Object(inner));
        }
    }
    // Read as a value, not re-printed and re-parsed: serde_json's text parser can land one ulp
    // off (8.421026719040053e-47 came back as ...052e-47; found by the fuzz harness).
    crate::model::from_config_value(&Value::Object(m)).map_err(ScenarioError::from)
}

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
            parse_scenario_file(id, &v.to_string()).map_err(|e| bad(format!("{id}: {e}")))
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

/// The value of one link field in `scen`, as a link writes it (`None` for `v`, `cfg` and
/// unknown keys; `custom` for the model of a custom config; an empty string for a dropout left
/// at the config's values, which decodes back to it). Forms show these, and send edits back
/// through [`decode_pairs`], so a form and a link validate alike.
pub fn field_value(scen: &Scenario, key: &str) -> Option<String> {
    Field::find(key)
        .filter(|f| !matches!(f.key, "v" | "cfg"))
        .map(|f| (f.get)(scen))
}
