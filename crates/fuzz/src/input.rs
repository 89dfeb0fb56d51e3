//! Structured inputs: generated values that render to the text a link, a `config.json`, a
//! scenario file, a calibration file or a guide would carry. Built from the real vocabulary
//! (link keys, option words, preset and GPU ids, config keys, metric names) so most inputs get
//! past the first parser and reach the arithmetic, with raw text mixed in for the parsers.

use bolero::generator::TypeGenerator;
use headroom_core::catalog::{GpuCatalog, PresetCatalog};
use headroom_core::codec::KEYS;
use std::fmt::Write;
use std::sync::OnceLock;

/// Option words any link field might take beside the enums' own (`enum_words`, every enum's
/// `ALL`): checkpointing's, which is no enum, and the spellings of a switch; indexes past the end
/// reach preset and GPU ids.
const WORDS: &[&str] = &[
    "none",
    "full",
    "every:2",
    "every:1024",
    "every:0",
    "selective",
    "true",
    "false",
    "on",
    "off",
    "",
    "1",
    "0",
];

/// Keys of Hugging Face configs the parser reads, and a few it must ignore.
pub const CONFIG_KEYS: &[&str] = &[
    "model_type",
    "architectures",
    "vocab_size",
    "hidden_size",
    "n_embd",
    "d_model",
    "num_hidden_layers",
    "n_layer",
    "num_layers",
    "num_attention_heads",
    "n_head",
    "num_key_value_heads",
    "head_dim",
    "intermediate_size",
    "ffn_dim",
    "n_inner",
    "max_position_embeddings",
    "n_positions",
    "word_embed_proj_dim",
    "tie_word_embeddings",
    "num_experts",
    "num_local_experts",
    "num_experts_per_tok",
    "moe_intermediate_size",
    "shared_expert_intermediate_size",
    "decoder_sparse_step",
    "mlp_only_layers",
    "sliding_window",
    "rope_scaling",
    "torch_dtype",
    "text_config",
    "attention_bias",
    "mlp_bias",
    "hidden_act",
    "attention_dropout",
    "hidden_dropout",
    "resid_pdrop",
    "attn_pdrop",
    "embd_pdrop",
    "final_logit_softcapping",
    "query_pre_attn_scalar",
    "do_layer_norm_before",
    "q_lora_rank",
    "kv_lora_rank",
    "mm_tokens_per_image",
    "spatial_merge_size",
    "vision_feature_layer",
    "multimodal_projector_bias",
    "vision_config",
    "intermediate_size_mlp",
    "interleave_moe_layer_step",
    "moe_layers",
    "no_rope_layers",
    "no_rope_layer_interval",
    "attention_chunk_size",
    "use_qk_norm",
    "layer_types",
    "full_attention_interval",
    "linear_num_key_heads",
    "linear_num_value_heads",
    "linear_key_head_dim",
    "linear_value_head_dim",
    "linear_conv_kernel_dim",
    "text_config",
    "unknown_key",
];

/// `model_type` values: the core's supported ones and a few that are not.
fn model_types() -> &'static [&'static str] {
    static TYPES: OnceLock<Vec<&'static str>> = OnceLock::new();
    TYPES.get_or_init(|| {
        let unsupported = ["llama4", "qwen3_next", "", "unknown"];
        headroom_core::model::supported_model_types()
            .chain(unsupported)
            .collect()
    })
}

/// Every word of the scenario's named enums (`ALL`), so a new option word is generated the day it
/// is added, and the adapters' dtypes.
fn enum_words() -> Vec<String> {
    use headroom_core::scenario as sc;
    fn ids<T: Copy>(all: &[T], id: fn(T) -> &'static str) -> impl Iterator<Item = String> + '_ {
        all.iter().map(move |&x| id(x).to_string())
    }
    ids(sc::Precision::ALL, sc::Precision::id)
        .chain(ids(sc::Optimizer::ALL, sc::Optimizer::id))
        .chain(ids(sc::Attention::ALL, sc::Attention::id))
        .chain(ids(sc::SdpaKernel::ALL, sc::SdpaKernel::id))
        .chain(ids(sc::Fp8Recipe::ALL, sc::Fp8Recipe::id))
        .chain(ids(sc::VisionTraining::ALL, sc::VisionTraining::id))
        .chain(ids(sc::LossImpl::ALL, sc::LossImpl::id))
        .chain(ids(sc::DataParallel::ALL, sc::DataParallel::id))
        .chain(ids(sc::Offload::ALL, sc::Offload::id))
        .chain(ids(sc::Method::ALL, sc::Method::id))
        .chain(ids(sc::BaseDtype::ALL, sc::BaseDtype::id))
        .chain(ids(sc::LoraTargets::ALL, sc::LoraTargets::id))
        .chain(ids(sc::Trainer::ALL, sc::Trainer::id))
        .chain(ids(sc::Generator::ALL, sc::Generator::id))
        .chain(
            headroom_core::codec::ADAPTER_DTYPES
                .iter()
                .map(|(id, _)| id.to_string()),
        )
        .collect()
}

/// Every option word, then every preset id, then every GPU id.
fn vocabulary() -> &'static [String] {
    static V: OnceLock<Vec<String>> = OnceLock::new();
    V.get_or_init(|| {
        let mut v: Vec<String> = WORDS.iter().map(|w| w.to_string()).collect();
        for w in enum_words() {
            if !v.contains(&w) {
                v.push(w);
            }
        }
        v.extend(
            PresetCatalog::builtin()
                .presets
                .iter()
                .map(|p| p.id.clone()),
        );
        v.extend(GpuCatalog::builtin().gpus.iter().map(|g| g.id.clone()));
        v
    })
}

/// For each link key, the vocabulary words a link may give it (found by decoding each word
/// under each key once), so generated links mostly get past the decoder.
fn valid_words(key: &str) -> &'static [String] {
    static BY_KEY: OnceLock<Vec<Vec<String>>> = OnceLock::new();
    let all = BY_KEY.get_or_init(|| {
        KEYS.iter()
            .map(|k| {
                vocabulary()
                    .iter()
                    .filter(|w| {
                        let pair = [(k.to_string(), w.to_string())];
                        headroom_core::codec::decode_pairs(Default::default(), &pair).is_ok()
                    })
                    .cloned()
                    .collect()
            })
            .collect()
    });
    let i = KEYS.iter().position(|k| *k == key).unwrap_or(0);
    if all[i].is_empty() {
        vocabulary()
    } else {
        &all[i]
    }
}

fn pick<T: AsRef<str>>(xs: &[T], i: impl Into<usize>) -> &str {
    xs[i.into() % xs.len()].as_ref()
}

/// A number as a person, a tool or an attacker might write it.
#[derive(Debug, Clone, TypeGenerator)]
pub enum Number {
    Small(u8),
    Count(u32),
    Huge(u64),
    Signed(i64),
    Float(f64),
    PowerOfTwo(u8),
}

impl Number {
    fn render(&self) -> String {
        match self {
            Number::Small(n) => n.to_string(),
            Number::Count(n) => n.to_string(),
            Number::Huge(n) => n.to_string(),
            Number::Signed(n) => n.to_string(),
            Number::Float(x) => x.to_string(),
            Number::PowerOfTwo(p) => 1u128.checked_shl(u32::from(*p)).unwrap_or(0).to_string(),
        }
    }
}

/// One value of a link field.
#[derive(Debug, Clone, TypeGenerator)]
pub enum Value {
    /// A word this key accepts on its own (a preset for `model`, `lora` for `method`, ...).
    Valid(u16),
    Word(u16),
    Number(Number),
    Every(Number),
    Text(String),
    /// A `cfg=` model: a `model_type` and `key:value` pairs, joined by `~`.
    Config(u8, Vec<(u8, Number)>),
}

impl Value {
    fn render(&self, key: &str) -> String {
        match self {
            Value::Valid(i) => pick(valid_words(key), *i).to_string(),
            Value::Word(i) => pick(vocabulary(), *i).to_string(),
            Value::Number(n) => n.render(),
            Value::Every(n) => format!("every:{}", n.render()),
            Value::Text(t) => t.clone(),
            Value::Config(model_type, pairs) => {
                let mut s = format!("model_type:{}", pick(model_types(), *model_type));
                for (k, v) in pairs {
                    let _ = write!(s, "~{}:{}", pick(CONFIG_KEYS, *k), v.render());
                }
                s
            }
        }
    }
}

/// One link field: usually a word its key accepts, sometimes any generated value.
#[derive(Debug, Clone, TypeGenerator)]
pub struct Field {
    pub key: u8,
    pub word: u16,
    /// Below 200 (about 4 in 5), the field holds a word its key accepts; else `value`.
    pub odd: u8,
    pub value: Value,
}

impl Field {
    fn key(&self) -> &'static str {
        pick(KEYS, self.key)
    }

    fn value(&self) -> String {
        if self.odd < 200 {
            Value::Valid(self.word).render(self.key())
        } else {
            self.value.render(self.key())
        }
    }
}

/// What may follow a link's fields: an unknown key or raw text.
#[derive(Debug, Clone, TypeGenerator)]
pub enum Noise {
    RawKey(String),
    Tail(String),
}

/// A share link: known keys (by index) with generated values, and raw text around them.
#[derive(Debug, Clone, TypeGenerator)]
pub struct Link {
    #[generator(bolero::produce::<Vec<Field>>().with().len(0usize..6))]
    pub fields: Vec<Field>,
    /// From 232 up (about 1 link in 10), `noise` follows the fields.
    pub noisy: u8,
    pub noise: Noise,
}

impl Link {
    pub fn render(&self) -> String {
        let mut s = self
            .fields
            .iter()
            .map(|f| format!("{}={}", f.key(), f.value()))
            .collect::<Vec<_>>()
            .join("&");
        match &self.noise {
            _ if self.noisy < 232 => {}
            Noise::RawKey(k) => s.push_str(&format!("&{k}=1")),
            Noise::Tail(t) => s.push_str(t),
        }
        s
    }

    /// The link's fields as `(key, value)` pairs, as a guide reader's inputs arrive.
    pub fn pairs(&self) -> Vec<(String, String)> {
        self.fields
            .iter()
            .map(|f| (f.key().to_string(), f.value()))
            .collect()
    }
}

/// A JSON value, nested as deep as the generator goes (bolero bounds the depth).
#[derive(Debug, Clone, TypeGenerator)]
pub enum Json {
    Null,
    Bool(bool),
    Number(Number),
    Text(String),
    Word(u8),
    Array(Vec<Json>),
    Object(Vec<(u8, Json)>),
    /// An array or object nested this many levels (up to 65,535) around a number.
    Deep(u16, bool),
}

impl Json {
    pub fn render(&self, keys: &[&str]) -> String {
        let mut out = String::new();
        self.write(keys, &mut out);
        out
    }

    /// How many arrays and objects the value nests (a scalar: 0).
    pub fn depth(&self) -> usize {
        match self {
            Json::Array(xs) => 1 + xs.iter().map(Json::depth).max().unwrap_or(0),
            Json::Object(kv) => 1 + kv.iter().map(|(_, v)| v.depth()).max().unwrap_or(0),
            Json::Deep(depth, _) => usize::from(*depth),
            _ => 0,
        }
    }

    /// Writes the value into one buffer: rendering each nested value to its own string and
    /// joining them copied every level again, which made the render, not the parser, the
    /// fuzz targets' main cost.
    fn write(&self, keys: &[&str], out: &mut String) {
        match self {
            Json::Null => out.push_str("null"),
            Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Json::Number(n) => out.push_str(&n.render()),
            Json::Text(t) => write_string(t, out),
            Json::Word(i) => write_string(pick(model_types(), *i), out),
            Json::Array(xs) => {
                out.push('[');
                for (i, x) in xs.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    x.write(keys, out);
                }
                out.push(']');
            }
            Json::Object(kv) => {
                write_object(kv.iter().map(|(k, v)| (pick(keys, *k), v)), keys, out)
            }
            Json::Deep(depth, obj) => {
                let (open, close) = if *obj { ("{\"a\":", "}") } else { ("[", "]") };
                let d = usize::from(*depth);
                out.push_str(&open.repeat(d));
                out.push('1');
                out.push_str(&close.repeat(d));
            }
        }
    }
}

/// A JSON string literal (escaped as serde_json escapes it).
fn write_string(s: &str, out: &mut String) {
    let _ = write!(out, "{}", serde_json::Value::from(s));
}

fn write_object<'a>(
    kv: impl Iterator<Item = (&'a str, &'a Json)>,
    keys: &[&str],
    out: &mut String,
) {
    out.push('{');
    for (i, (k, v)) in kv.enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_string(k, out);
        out.push(':');
        v.write(keys, out);
    }
    out.push('}');
}

fn object<'a>(kv: impl Iterator<Item = (&'a str, &'a Json)>, keys: &[&str]) -> String {
    let mut out = String::new();
    write_object(kv, keys, &mut out);
    out
}

/// A `config.json`: a real one (from `content/models/`) changed in generated places, a real
/// `model_type` with generated entries, or raw bytes.
#[derive(Debug, Clone, TypeGenerator)]
pub enum Config {
    Mutated {
        base: u8,
        #[generator(bolero::produce::<Vec<Mutation>>().with().len(0usize..4))]
        mutations: Vec<Mutation>,
    },
    Entries {
        model_type: u8,
        entries: Vec<(u8, Json)>,
    },
    Raw(Vec<u8>),
}

impl Config {
    /// The text the parser sees; bytes that are not UTF-8 arrive as the lossy conversion the
    /// CLI and the browser make of a file.
    pub fn render(&self) -> String {
        match self {
            Config::Mutated { base, mutations } => {
                let docs = real_configs();
                match docs.get(usize::from(*base) % docs.len().max(1)) {
                    Some(doc) => mutate(doc, mutations),
                    None => String::new(),
                }
            }
            Config::Entries {
                model_type,
                entries,
            } => {
                let mt = Json::Word(*model_type);
                let kv = std::iter::once(("model_type", &mt))
                    .chain(entries.iter().map(|(k, v)| (pick(CONFIG_KEYS, *k), v)));
                object(kv, CONFIG_KEYS)
            }
            Config::Raw(bytes) => String::from_utf8_lossy(bytes).into_owned(),
        }
    }
}

/// The model configs in `content/models/` (real `config.json` files), read once.
fn real_configs() -> &'static [serde_json::Value] {
    static DOCS: OnceLock<Vec<serde_json::Value>> = OnceLock::new();
    DOCS.get_or_init(|| {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../content/models");
        let mut paths: Vec<_> = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        paths.sort();
        paths
            .iter()
            .filter_map(|p| std::fs::read_to_string(p).ok())
            .filter_map(|t| serde_json::from_str(&t).ok())
            .collect()
    })
}

/// A change to one place of a real JSON document: the path walks objects by key index and
/// arrays by element index (bolero bounds its length).
#[derive(Debug, Clone, TypeGenerator)]
pub struct Mutation {
    pub path: Vec<u8>,
    pub edit: Edit,
}

/// What a mutation does where its path ends.
#[derive(Debug, Clone, TypeGenerator)]
pub enum Edit {
    Set(Json),
    Delete,
    /// A number there times 2^k (k < 64), as a typo or an attacker would scale it.
    Scale(u8),
    /// A small number there instead (0..=255).
    Small(u8),
}

/// Applies mutations to `doc` and renders it.
pub fn mutate(doc: &serde_json::Value, mutations: &[Mutation]) -> String {
    let mut doc = doc.clone();
    for m in mutations {
        apply(&mut doc, &m.path, &m.edit);
    }
    doc.to_string()
}

fn apply(at: &mut serde_json::Value, path: &[u8], edit: &Edit) {
    use serde_json::Value as V;
    if let Some((first, rest)) = path.split_first() {
        match at {
            V::Object(map) if !map.is_empty() => {
                let key = map.keys().nth(usize::from(*first) % map.len()).cloned();
                if let Some(key) = key {
                    if rest.is_empty() && matches!(edit, Edit::Delete) {
                        map.remove(&key);
                    } else if let Some(next) = map.get_mut(&key) {
                        apply(next, rest, edit);
                    }
                }
                return;
            }
            V::Array(xs) if !xs.is_empty() => {
                let i = usize::from(*first) % xs.len();
                if rest.is_empty() && matches!(edit, Edit::Delete) {
                    xs.remove(i);
                } else {
                    apply(&mut xs[i], rest, edit);
                }
                return;
            }
            _ => {}
        }
    }
    *at = match edit {
        // serde_json refuses text nested past 128 levels, so such a value is null without
        // rendering (a `Deep` one is up to 330 KB of text).
        Edit::Set(j) if j.depth() > 128 => V::Null,
        Edit::Set(j) => serde_json::from_str(&j.render(CONFIG_KEYS)).unwrap_or(V::Null),
        Edit::Delete => V::Null,
        Edit::Small(n) => V::from(*n),
        Edit::Scale(k) => match at.as_u64() {
            Some(n) => V::from(n.saturating_mul(1u64 << (k % 64))),
            None => at.clone(),
        },
    };
}

/// One line of a scenario file (TOML): a known link key with a generated value, quoted or
/// not, under `[scenario]`, or raw text.
#[derive(Debug, Clone, TypeGenerator)]
pub struct ScenarioFile {
    pub title: Option<String>,
    #[generator(bolero::produce::<Vec<(Field, bool)>>().with().len(0usize..8))]
    pub lines: Vec<(Field, bool)>,
    pub noise: Option<Noise>,
}

impl ScenarioFile {
    pub fn render(&self) -> String {
        let mut s = String::new();
        if let Some(t) = &self.title {
            let _ = writeln!(s, "title = {}", serde_json::Value::from(t.as_str()));
        }
        s.push_str("[scenario]\n");
        for (field, quoted) in &self.lines {
            let (k, v) = (field.key(), field.value());
            // Numbers and switches unquoted, as people write them.
            let v = if *quoted || v.parse::<f64>().is_err() && v != "true" && v != "false" {
                serde_json::Value::from(v).to_string()
            } else {
                v
            };
            let _ = writeln!(s, "{k} = {v}");
        }
        if let Some(Noise::RawKey(r) | Noise::Tail(r)) = &self.noise {
            s.push_str(r);
        }
        s
    }
}

/// Metric names a guide block may show.
const METRICS: &[&str] = &[
    "bytes.weights",
    "bytes.gradients",
    "bytes.optimizer_states",
    "bytes.activations_per_layer",
    "bytes.peak_device",
    "peak.device",
    "activations",
    "bytes.weights+bytes.optimizer_states",
    "bytes.peak_device/bytes.weights",
    "fit.max_micro_batch",
    "fit.max_seq",
    "time.tokens_per_second",
    "time.mfu",
    "verdict.headroom",
    "nonsense.metric",
];

const VIEWS: &[&str] = &["table", "grid", "bars", "summary", "timeline", "breakdown"];

/// A guide: front matter, then headings, paragraphs with live values, and calculator blocks
/// whose scenario, changes, inputs and metrics are generated; raw text in between.
#[derive(Debug, Clone, TypeGenerator)]
pub struct Guide {
    #[generator(bolero::produce::<Vec<GuidePart>>().with().len(0usize..6))]
    pub parts: Vec<GuidePart>,
}

#[derive(Debug, Clone, TypeGenerator)]
pub enum GuidePart {
    Heading(u8),
    Live { metric: u8, change: Link },
    Block(Block),
    Block2(Block),
    Raw(String),
}

#[derive(Debug, Clone, TypeGenerator)]
pub struct Block {
    pub scenario: u8,
    pub set: Link,
    #[generator(bolero::produce::<Vec<u8>>().with().len(0usize..3))]
    pub inputs: Vec<u8>,
    pub view: u8,
    #[generator(bolero::produce::<Vec<Link>>().with().len(1usize..4))]
    pub rows: Vec<Link>,
    #[generator(bolero::produce::<Vec<u8>>().with().len(1usize..4))]
    pub metrics: Vec<u8>,
}

impl Guide {
    pub fn render(&self, scenarios: &[String]) -> String {
        let mut s = String::from("---\ntitle: Fuzz\nsummary: Generated.\norder: 1\n---\n\n");
        for part in &self.parts {
            match part {
                GuidePart::Heading(level) => {
                    let hashes = "#".repeat(usize::from(level % 3) + 2);
                    let _ = writeln!(s, "{hashes} Heading {level}\n");
                }
                GuidePart::Live { metric, change } => {
                    let _ = writeln!(
                        s,
                        "Live: {{{{{} @ {}}}}}.\n",
                        pick(METRICS, *metric),
                        change.render()
                    );
                }
                GuidePart::Block(b) | GuidePart::Block2(b) => b.render_into(&mut s, scenarios),
                GuidePart::Raw(r) => {
                    let _ = writeln!(s, "{r}\n");
                }
            }
        }
        s
    }
}

/// Link keys a reader may change in a block (all but the version and a custom config).
fn input_keys() -> &'static [&'static str] {
    static K: OnceLock<Vec<&'static str>> = OnceLock::new();
    K.get_or_init(|| {
        KEYS.iter()
            .copied()
            .filter(|k| *k != "v" && *k != "cfg")
            .collect()
    })
}

impl Block {
    fn render_into(&self, s: &mut String, scenarios: &[String]) {
        let list = |ix: &[u8], xs: &[&str]| -> String {
            ix.iter()
                .map(|i| pick(xs, *i))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let rows: Vec<String> = self
            .rows
            .iter()
            .enumerate()
            .map(|(i, l)| format!("row {i} => {}", l.render().replace(['|', '\n'], " ")))
            .collect();
        let rows = rows.join(" | ");
        let _ = writeln!(s, "```headroom");
        if !scenarios.is_empty() {
            let _ = writeln!(s, "scenario: {}", pick(scenarios, self.scenario));
        }
        let set = self.set.render().replace('\n', " ");
        if !set.is_empty() {
            let _ = writeln!(s, "set: {set}");
        }
        if !self.inputs.is_empty() {
            let _ = writeln!(s, "inputs: {}", list(&self.inputs, input_keys()));
        }
        let _ = writeln!(s, "view: {}", pick(VIEWS, self.view));
        let _ = writeln!(s, "rows: {rows}");
        let _ = writeln!(s, "cols: {rows}");
        let _ = writeln!(s, "columns: {}", list(&self.metrics, METRICS));
        let _ = writeln!(s, "metric: {}", pick(METRICS, self.metrics[0]));
        let two = &self.metrics[..self.metrics.len().min(2)];
        let _ = writeln!(s, "metrics: {}", list(two, METRICS));
        let _ = writeln!(s, "caption: Generated.\n```\n");
    }
}

/// The framework configs of the import corpus (`crates/headroom-core/tests/import_configs`),
/// read once: (relative path, text).
pub fn import_corpus() -> &'static [(String, String)] {
    static CORPUS: OnceLock<Vec<(String, String)>> = OnceLock::new();
    CORPUS.get_or_init(|| {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../headroom-core/tests/import_configs");
        let mut files = Vec::new();
        for dir in std::fs::read_dir(&root).into_iter().flatten().flatten() {
            for f in std::fs::read_dir(dir.path())
                .into_iter()
                .flatten()
                .flatten()
            {
                if let Ok(text) = std::fs::read_to_string(f.path()) {
                    let name = f.path().strip_prefix(&root).map_or_else(
                        |_| f.path().display().to_string(),
                        |p| p.display().to_string(),
                    );
                    files.push((name, text));
                }
            }
        }
        files.sort();
        files
    })
}

/// Values an edited config line may take: the vocabulary of the frameworks' keys, with the
/// shapes YAML, JSON and TOML parsers stumble on.
const IMPORT_VALUES: &[&str] = &[
    "true",
    "false",
    "auto",
    "null",
    "~",
    "0",
    "1",
    "-1",
    "8",
    "4096",
    "1e-5",
    "1.0e-5",
    "99999999999999999999",
    "bf16",
    "fp16",
    "no",
    "FSDP",
    "DEEPSPEED",
    "MULTI_GPU",
    "qlora",
    "lora",
    "full",
    "dpo",
    "grpo",
    "kto",
    "[q_proj, v_proj]",
    "[all-linear]",
    "all",
    "[full_shard, auto_wrap]",
    "offload",
    "{stage: 3}",
    "\"quoted: value\"",
    "'it''s'",
    "[",
    "{",
    "|",
    "&anchor x",
    "*alias",
    "!tag x",
    "é",
    "\t",
    "meta-llama/Llama-3.1-8B",
    "Qwen/Qwen2.5-7B",
    "path/to/model",
    "flash_attention_2",
    "sdpa",
    "eager",
    "paged_adamw_8bit",
];

/// One edit of a config: drop a line, set a line's value, or add a line.
#[derive(Debug, Clone, TypeGenerator)]
pub enum ImportEdit {
    Drop(u16),
    Value(u16, u8),
    Insert(u16, u8, u8),
    Raw(u16, String),
}

/// A corpus config (by index) with generated edits.
#[derive(Debug, Clone, TypeGenerator)]
pub struct ImportConfig {
    pub file: u8,
    #[generator(bolero::produce::<Vec<ImportEdit>>().with().len(0usize..6))]
    pub edits: Vec<ImportEdit>,
}

impl ImportConfig {
    /// The edited text and the file's name (its extension tells the formats apart).
    pub fn render(&self) -> (String, String) {
        let corpus = import_corpus();
        let (name, text) = &corpus[usize::from(self.file) % corpus.len().max(1)];
        let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
        let value = |v: u8| IMPORT_VALUES[usize::from(v) % IMPORT_VALUES.len()];
        for edit in &self.edits {
            let n = lines.len().max(1);
            match edit {
                ImportEdit::Drop(i) if !lines.is_empty() => {
                    lines.remove(usize::from(*i) % n);
                }
                ImportEdit::Value(i, v) if !lines.is_empty() => {
                    let line = &mut lines[usize::from(*i) % n];
                    // Keep the key and its separator (`: `, ` = `, `": `), change the value.
                    let cut = [": ", " = ", "\": "]
                        .iter()
                        .filter_map(|s| line.find(s).map(|p| p + s.len()))
                        .min();
                    if let Some(cut) = cut {
                        line.truncate(cut);
                        line.push_str(value(*v));
                    }
                }
                ImportEdit::Insert(i, k, v) => {
                    let key = KEYS[usize::from(*k) % KEYS.len()];
                    let at = usize::from(*i) % (lines.len() + 1);
                    lines.insert(at, format!("{key}: {}", value(*v)));
                }
                ImportEdit::Raw(i, raw) => {
                    let at = usize::from(*i) % (lines.len() + 1);
                    lines.insert(at, raw.clone());
                }
                _ => {}
            }
        }
        (lines.join("\n"), name.clone())
    }
}
