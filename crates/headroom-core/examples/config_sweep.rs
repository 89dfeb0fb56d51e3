//! A byte-for-byte check for refactors of the config parser and the link writer that must
//! change nothing: parses thousands of `config.json`s and writes, for each, the spec, its link
//! form, whether the link gives the same spec back, its layer class and local attention.
//!
//! The configs are every supported `model_type` (and two it does not model) with each of the
//! variants below (keys that switch a class's traits: biases, windows, rotary share, q/k norms,
//! experts, layer kinds, wrappers' sub-configs...), and every preset's and published table's
//! `config.json` with the first [`PRESET_VARIANTS`] of them. `examples/sweep.rs` is the check
//! for estimates; this one reaches the configs no preset has.
//!
//! ```text
//! cargo run --release -p headroom-core --example config_sweep -- /tmp/configs_before.txt
//! (make the change)
//! cargo run --release -p headroom-core --example config_sweep -- /tmp/configs_after.txt
//! cmp /tmp/configs_before.txt /tmp/configs_after.txt
//! ```

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use headroom_core::Scenario;
use headroom_core::codec::{decode_pairs, encode_spec};
use headroom_core::model::{parse_config_json, supported_model_types};
use headroom_core::scenario::ModelChoice;
use serde_json::{Map, Value};

/// Keys merged into each config.
const VARIANTS: &[&str] = &[
    r#"{}"#,
    r#"{"attention_bias":true}"#,
    r#"{"attention_bias":false}"#,
    r#"{"qkv_bias":false}"#,
    r#"{"sliding_window":null}"#,
    r#"{"sliding_window":1024}"#,
    r#"{"use_sliding_window":true,"sliding_window":2048}"#,
    r#"{"use_sliding_window":true,"sliding_window":2048,"max_window_layers":3}"#,
    r#"{"partial_rotary_factor":0.5}"#,
    r#"{"partial_rotary_factor":2.0}"#,
    r#"{"use_qk_norm":true}"#,
    r#"{"mlp_bias":true}"#,
    r#"{"head_dim":96}"#,
    r#"{"num_key_value_heads":4}"#,
    r#"{"layer_types":["sliding_attention","full_attention","sliding_attention","full_attention"],"num_hidden_layers":4}"#,
    r#"{"layer_types":["linear_attention","full_attention","linear_attention","full_attention"],"num_hidden_layers":4}"#,
    r#"{"num_nextn_predict_layers":1}"#,
    r#"{"norm_topk_prob":true}"#,
    r#"{"num_local_experts":4,"num_experts_per_tok":2}"#,
    r#"{"num_experts":0}"#,
    r#"{"topk_method":"group_limited_greedy"}"#,
    r#"{"q_lora_rank":null}"#,
    r#"{"tie_word_embeddings":true}"#,
    r#"{"no_rope_layers":[1,1,0,1],"num_hidden_layers":4}"#,
    r#"{"moe_layers":[1],"num_hidden_layers":4}"#,
    r#"{"interleave_moe_layer_step":2}"#,
    r#"{"hidden_size":512,"num_attention_heads":8,"intermediate_size":1024,"num_hidden_layers":4,"vocab_size":1000}"#,
    r#"{"hidden_act":"gelu"}"#,
    r#"{"text_config":{"hidden_size":512,"num_attention_heads":8,"num_hidden_layers":2}}"#,
    r#"{"vision_config":{"hidden_size":256,"num_hidden_layers":2}}"#,
    r#"{"decoder_sparse_step":2,"mlp_only_layers":[0]}"#,
    r#"{"attention_chunk_size":null}"#,
    r#"{"full_attention_interval":2}"#,
    r#"{"n_shared_experts":0}"#,
    r#"{"first_k_dense_replace":0}"#,
    r#"{"rope_scaling":{"type":"linear"}}"#,
    r#"{"n_embd":256,"n_layer":2,"n_head":4}"#,
    r#"{"use_parallel_residual":false}"#,
    r#"{"do_layer_norm_before":false,"word_embed_proj_dim":128}"#,
    r#"{"use_bias":false}"#,
    r#"{"rotary_pct":0.5}"#,
    r#"{"n_inner":100}"#,
    r#"{"hidden_size":4096,"num_attention_heads":32,"num_hidden_layers":32,"intermediate_size":11008,"vocab_size":32000}"#,
];

/// How many of [`VARIANTS`] each preset's config is tried with.
const PRESET_VARIANTS: usize = 25;

/// `model_type`s the core does not model: read as an approximate Llama layout, or refused.
const UNSUPPORTED: &[&str] = &["unknown_x", "falcon"];

fn object(text: &str) -> Map<String, Value> {
    match serde_json::from_str(text) {
        Ok(Value::Object(m)) => m,
        _ => panic!("a variant is a JSON object: {text}"),
    }
}

/// Every `.json` config with a `model_type` under `dir`, in name order.
fn configs_in(dir: &Path) -> Vec<Map<String, Value>> {
    let mut paths: Vec<_> = std::fs::read_dir(dir)
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    paths.sort();
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            out.extend(configs_in(&p));
        } else if p.extension().is_some_and(|e| e == "json")
            && let Ok(Value::Object(m)) =
                serde_json::from_str(&std::fs::read_to_string(&p).expect("a config file reads"))
            && m.contains_key("model_type")
        {
            out.push(m);
        }
    }
    out
}

fn write_one(out: &mut impl Write, config: &Map<String, Value>) -> std::io::Result<()> {
    let line = Value::Object(config.clone()).to_string();
    match parse_config_json(&line) {
        Ok(spec) => {
            let link = encode_spec(&spec);
            let back = decode_pairs(Scenario::default(), &[("cfg".to_string(), link.clone())]);
            let same = match back.map(|s| s.model) {
                Ok(ModelChoice::Custom(b)) => (*b == spec).to_string(),
                Ok(_) => "preset".to_string(),
                Err(e) => format!("decode error {e}"),
            };
            writeln!(
                out,
                "{line}\n  {spec:?}\n  {link}\n  {} {} {:?} {same}\n",
                headroom_core::export::layer_class(&spec),
                spec.is_gpt_oss(),
                spec.local_attention()
            )
        }
        Err(e) => writeln!(out, "{line}\n  ERR {e}\n"),
    }
}

fn main() -> std::io::Result<()> {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "/tmp/config_sweep.txt".into());
    let mut out = BufWriter::new(File::create(&path)?);
    let variants: Vec<_> = VARIANTS.iter().map(|v| object(v)).collect();
    let mut n = 0;
    for model_type in supported_model_types().chain(UNSUPPORTED.iter().copied()) {
        for v in &variants {
            let mut c = Map::new();
            c.insert("model_type".into(), model_type.into());
            c.extend(v.clone());
            write_one(&mut out, &c)?;
            n += 1;
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = configs_in(&root.join("content/models"));
    files.extend(configs_in(&root.join("tests/reference/published_configs")));
    for config in &files {
        write_one(&mut out, config)?;
        n += 1;
        for v in &variants[..PRESET_VARIANTS] {
            let mut c = config.clone();
            c.extend(v.clone());
            write_one(&mut out, &c)?;
            n += 1;
        }
    }
    out.flush()?;
    println!("{path}: {n} configs");
    Ok(())
}
