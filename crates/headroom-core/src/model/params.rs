//! The parameter inventory of a model: every weight tensor, its shape and where it sits.
//!
//! Counts equal transformers' `model.num_parameters()` for the same config: tied embeddings
//! count once, biases and norms are included, MoE counts every expert.
//!
//! Each tensor has a `Scope`: the model, every layer, dense or MoE layers, softmax- or
//! linear-attention layers. A vision tower's tensors are listed outside the layers
//! (`Scope::Model`), a tower layer's tensors as one entry with `copies` equal to its layer count,
//! their names prefixed `vision:` (`ParamTensor::is_vision`); they are never LoRA-adapted,
//! quantized or fp8-converted.

use serde::Serialize;

use super::spec::{Family, LinearAttention, Mla, MlpKind, ModelSpec, NormKind, Vision, VisionKind};

/// Where a parameter tensor lives, which decides how many copies exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// Once per model (embeddings, final norm, lm_head).
    Model,
    /// Once in every decoder layer.
    Layer,
    /// Once in every layer with a dense MLP.
    DenseLayer,
    /// Once in every layer with a sparse (MoE) MLP.
    SparseLayer,
    /// Once in every layer with softmax attention, where some layers have linear attention
    /// instead (Qwen3-Next); elsewhere attention tensors are `Layer`'s.
    AttentionLayer,
    /// Once in every layer with linear attention (Qwen3-Next's gated DeltaNet).
    LinearAttentionLayer,
}

/// One parameter tensor (or a stack of identical ones, e.g. the experts of a layer).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ParamTensor {
    /// Module path as in transformers, with `*` for the layer index.
    pub name: String,
    /// Input features of a Linear (columns of its weight); 1 for vectors and embeddings' rows.
    pub d_in: u64,
    /// Output features (rows), or the length of a vector.
    pub d_out: u64,
    /// Identical copies inside the scope (experts of a layer).
    pub copies: u64,
    pub scope: Scope,
    /// The Linear module name LoRA targets by (`q_proj`, `c_attn`, ...), if it is one.
    pub linear: Option<&'static str>,
    /// Whether this is a matrix that quantization (QLoRA) replaces.
    pub quantizable: bool,
}

impl ParamTensor {
    pub fn numel(&self) -> u64 {
        self.d_in * self.d_out * self.copies
    }

    /// Whether the tensor belongs to a multimodal wrapper's vision tower or projector (what
    /// the scenario's `vision` setting freezes or trains).
    pub fn is_vision(&self) -> bool {
        self.name.starts_with(VISION_PREFIX)
    }

    /// Whether the tensor is a MoE layer's routed experts' (`Builder::experts`): one fused
    /// parameter of all experts in transformers 5.x, not an `nn.Linear` per expert.
    pub fn is_expert(&self) -> bool {
        self.name.contains(".experts.*.")
    }
}

/// The prefix of every vision-side tensor's name in the inventory.
const VISION_PREFIX: &str = "vision:";

/// Every parameter tensor of a model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ParamInventory {
    pub tensors: Vec<ParamTensor>,
    pub dense_layers: u64,
    pub sparse_layers: u64,
    /// Layers with linear attention (Qwen3-Next), 0 elsewhere.
    pub linear_layers: u64,
}

impl ParamInventory {
    /// How many times a tensor of `scope` occurs in the whole model.
    pub fn multiplicity(&self, scope: Scope) -> u64 {
        match scope {
            Scope::Model => 1,
            Scope::Layer => self.dense_layers + self.sparse_layers,
            Scope::DenseLayer => self.dense_layers,
            Scope::SparseLayer => self.sparse_layers,
            Scope::AttentionLayer => self.dense_layers + self.sparse_layers - self.linear_layers,
            Scope::LinearAttentionLayer => self.linear_layers,
        }
    }

    /// Parameters of the vision tower and projector (0 for a text-only model).
    pub fn vision(&self) -> u64 {
        self.sum_where(ParamTensor::is_vision)
    }

    /// Total parameters, equal to transformers' `num_parameters()`.
    pub fn total(&self) -> u64 {
        self.tensors
            .iter()
            .map(|t| t.numel() * self.multiplicity(t.scope))
            .sum()
    }

    /// Parameters of the tensors that `keep` selects, over all layers.
    pub fn sum_where(&self, keep: impl Fn(&ParamTensor) -> bool) -> u64 {
        self.tensors
            .iter()
            .filter(|t| keep(t))
            .map(|t| t.numel() * self.multiplicity(t.scope))
            .sum()
    }

    /// Parameters of one decoder layer (the largest kind when MoE and dense layers mix).
    pub fn per_layer(&self) -> u64 {
        self.per_layer_where(|_| true)
    }

    /// Parameters of the tensors `keep` selects in one decoder layer (of the kind with the
    /// most parameters, as [`ParamInventory::per_layer`] picks it).
    pub fn per_layer_where(&self, keep: impl Fn(&ParamTensor) -> bool) -> u64 {
        let scoped = |scope: Scope| -> (u64, u64) {
            self.tensors
                .iter()
                .filter(|t| t.scope == scope)
                .fold((0, 0), |(all, kept), t| {
                    (all + t.numel(), kept + if keep(t) { t.numel() } else { 0 })
                })
        };
        // Of the two kinds of attention (Qwen3-Next), the one with more parameters.
        let full = scoped(Scope::AttentionLayer);
        let linear = if self.linear_layers > 0 {
            scoped(Scope::LinearAttentionLayer)
        } else {
            (0, 0)
        };
        let common = scoped(Scope::Layer).1 + if linear.0 > full.0 { linear.1 } else { full.1 };
        let dense = if self.dense_layers > 0 {
            scoped(Scope::DenseLayer)
        } else {
            (0, 0)
        };
        let sparse = if self.sparse_layers > 0 {
            scoped(Scope::SparseLayer)
        } else {
            (0, 0)
        };
        common
            + if sparse.0 > dense.0 {
                sparse.1
            } else {
                dense.1
            }
    }

    /// Parameters outside the decoder layers (embeddings, final norm, lm_head).
    pub fn outside_layers(&self) -> u64 {
        self.scoped(Scope::Model)
    }

    /// The largest tensor outside the decoder layers (an embedding or lm_head).
    pub fn largest_outside(&self) -> u64 {
        self.tensors
            .iter()
            .filter(|t| t.scope == Scope::Model)
            .map(ParamTensor::numel)
            .max()
            .unwrap_or(0)
    }

    fn scoped(&self, scope: Scope) -> u64 {
        self.tensors
            .iter()
            .filter(|t| t.scope == scope)
            .map(ParamTensor::numel)
            .sum()
    }

    /// The largest single tensor (DeepSpeed ZeRO-3 gathers at least this much at once).
    pub fn largest_tensor(&self) -> u64 {
        self.tensors
            .iter()
            .map(|t| t.d_in * t.d_out)
            .max()
            .unwrap_or(0)
    }

    /// Linear layers LoRA can target, each with (d_in, d_out, copies per layer).
    pub fn linears(&self) -> impl Iterator<Item = &ParamTensor> {
        self.tensors.iter().filter(|t| t.linear.is_some())
    }
}

struct Builder {
    tensors: Vec<ParamTensor>,
}

impl Builder {
    /// A MoE layer's router: a Linear(h, experts) that is neither LoRA-targeted nor quantized.
    fn router(&mut self, name: String, h: u64, experts: u64) {
        self.push(ParamTensor {
            name,
            d_in: h,
            d_out: experts,
            copies: 1,
            scope: Scope::SparseLayer,
            linear: None,
            quantizable: false,
        });
    }

    fn linear(
        &mut self,
        scope: Scope,
        name: &'static str,
        path: &str,
        d_in: u64,
        d_out: u64,
        bias: bool,
    ) {
        self.push(ParamTensor {
            name: format!("{path}.weight"),
            d_in,
            d_out,
            copies: 1,
            scope,
            linear: Some(name),
            quantizable: true,
        });
        if bias {
            self.vector(scope, &format!("{path}.bias"), d_out);
        }
    }

    fn experts(&mut self, path: &str, experts: u64, hidden: u64, inter: u64) {
        for (name, d_in, d_out) in [
            ("gate_proj", hidden, inter),
            ("up_proj", hidden, inter),
            ("down_proj", inter, hidden),
        ] {
            self.push(ParamTensor {
                name: format!("{path}.experts.*.{name}.weight"),
                d_in,
                d_out,
                copies: experts,
                scope: Scope::SparseLayer,
                linear: Some(name),
                // transformers 5.x fuses the experts into 3-D parameters, which bitsandbytes
                // (nn.Linear modules only) leaves in the load dtype under QLoRA (measured on
                // CPU: tests/reference/test_peft.py).
                quantizable: false,
            });
        }
    }

    fn vector(&mut self, scope: Scope, name: &str, len: u64) {
        self.push(ParamTensor {
            name: name.to_string(),
            d_in: 1,
            d_out: len,
            copies: 1,
            scope,
            linear: None,
            quantizable: false,
        });
    }

    fn norm(&mut self, scope: Scope, name: &str, len: u64, kind: NormKind) {
        self.vector(scope, &format!("{name}.weight"), len);
        if kind == NormKind::LayerNorm {
            self.vector(scope, &format!("{name}.bias"), len);
        }
    }

    fn embedding(&mut self, name: &str, rows: u64, dim: u64) {
        self.push(ParamTensor {
            name: name.to_string(),
            d_in: dim,
            d_out: rows,
            copies: 1,
            scope: Scope::Model,
            linear: None,
            quantizable: false,
        });
    }

    fn push(&mut self, t: ParamTensor) {
        self.tensors.push(t);
    }
}

/// Builds the inventory of `spec`, module by module as transformers lays it out.
pub fn inventory(spec: &ModelSpec) -> ParamInventory {
    let mut b = Builder {
        tensors: Vec::new(),
    };
    match spec.family {
        Family::Llama
        | Family::Gemma
        | Family::Phi3
        | Family::Olmo2
        | Family::Glm4
        | Family::Cohere2 => {
            llama_like_attention(&mut b, spec);
            llama_like_norms(&mut b, spec);
            llama_like_mlp(&mut b, spec);
            b.norm(Scope::Model, "model.norm", spec.hidden, NormKind::RmsNorm);
        }
        Family::Starcoder2 => starcoder2(&mut b, spec),
        Family::Gpt2 => gpt2(&mut b, spec),
        Family::GptNeox => gpt_neox(&mut b, spec),
        Family::Opt => opt(&mut b, spec),
    }
    if !spec.tie_embeddings {
        b.push(ParamTensor {
            name: "lm_head.weight".into(),
            d_in: spec.lm_head_width(),
            d_out: spec.vocab,
            copies: 1,
            scope: Scope::Model,
            linear: None,
            quantizable: false,
        });
    }
    if let Some(v) = &spec.vision {
        vision(&mut b, v);
    }
    mtp_modules(&mut b, spec);
    let sparse = spec.moe.as_ref().map_or(0, |m| m.sparse_layers);
    ParamInventory {
        tensors: b.tensors,
        dense_layers: spec.layers - sparse,
        sparse_layers: sparse,
        linear_layers: spec.linear_attention.as_ref().map_or(0, |la| la.layers),
    }
}

/// A Llama-like layer's attention: the embedding, the projections (MLA, fused or separate,
/// gated), linear attention, sinks and q/k norms.
fn llama_like_attention(b: &mut Builder, spec: &ModelSpec) {
    let h = spec.hidden;
    let (q, kv) = (spec.q_dim(), spec.kv_dim());
    let l = Scope::Layer;
    // Attention's tensors: in every layer, or in the softmax-attention layers of a model whose
    // other layers have linear attention.
    let a = if spec.linear_attention.is_some() {
        Scope::AttentionLayer
    } else {
        Scope::Layer
    };
    b.embedding("model.embed_tokens.weight", spec.vocab, h);
    if let Some(m) = &spec.mla {
        mla(b, spec, m);
    } else if spec.family == Family::Phi3 {
        b.linear(
            l,
            "qkv_proj",
            "self_attn.qkv_proj",
            h,
            q + 2 * kv,
            spec.qkv_bias,
        );
    } else {
        // Qwen3-Next's q_proj also gives a sigmoid gate on the attention output.
        let qw = if spec.gated_attention() { 2 * q } else { q };
        b.linear(a, "q_proj", "self_attn.q_proj", h, qw, spec.qkv_bias);
        b.linear(a, "k_proj", "self_attn.k_proj", h, kv, spec.qkv_bias);
        b.linear(a, "v_proj", "self_attn.v_proj", h, kv, spec.qkv_bias);
    }
    if let Some(la) = &spec.linear_attention {
        gated_delta_net(b, h, la, spec.deltanet_projections() == 4);
    }
    b.linear(
        a,
        "o_proj",
        "self_attn.o_proj",
        spec.v_dim(),
        h,
        spec.o_bias,
    );
    if spec.is_gpt_oss() {
        // One learned sink logit per head, joined to the scores before the softmax.
        b.vector(l, "self_attn.sinks", spec.heads);
    }
    let whole = spec.class().traits.qk_norm == crate::model::classes::QkNorm::Whole;
    if spec.qk_norm {
        // OLMo 2, OLMoE and MiniMax-M2 normalize the whole projection, the others each head.
        let (qn, kn) = if whole {
            (q, kv)
        } else {
            (spec.head_dim, spec.head_dim)
        };
        b.vector(a, "self_attn.q_norm.weight", qn);
        b.vector(a, "self_attn.k_norm.weight", kn);
    }
}

/// A Llama-like layer's norms, by the names each family gives them.
fn llama_like_norms(b: &mut Builder, spec: &ModelSpec) {
    let h = spec.hidden;
    let l = Scope::Layer;
    // Cohere 2's one norm per layer has a weight and no bias, as an RMSNorm's. OLMo 2 has
    // no input norm (OLMoE's and MiniMax-M2's whole-projection q/k norms do not make them
    // OLMo 2's: their layer norms are Llama's).
    let norm_names: &[&str] = if spec.family == Family::Cohere2 {
        &["input_layernorm"]
    } else if spec.family == Family::Olmo2 {
        &["post_attention_layernorm", "post_feedforward_layernorm"]
    } else if spec.family == Family::Glm4 {
        &[
            "input_layernorm",
            "post_self_attn_layernorm",
            "post_attention_layernorm",
            "post_mlp_layernorm",
        ]
    } else if spec.norms_per_layer == 4 {
        &[
            "input_layernorm",
            "post_attention_layernorm",
            "pre_feedforward_layernorm",
            "post_feedforward_layernorm",
        ]
    } else {
        &["input_layernorm", "post_attention_layernorm"]
    };
    for n in norm_names {
        b.norm(l, n, h, NormKind::RmsNorm);
    }
}

/// A Llama-like layer's feed-forward: dense, Llama 4's, or routed experts with their
/// shared expert and gate.
fn llama_like_mlp(b: &mut Builder, spec: &ModelSpec) {
    let h = spec.hidden;
    let f = spec.intermediate;
    let dense = Scope::DenseLayer;
    if spec.llama4.is_some() {
        llama4_feed_forward(b, spec);
    } else if spec.fused_gate_up() {
        b.linear(
            dense,
            "gate_up_proj",
            "mlp.gate_up_proj",
            h,
            2 * f,
            spec.mlp_bias,
        );
    } else {
        b.linear(dense, "gate_proj", "mlp.gate_proj", h, f, spec.mlp_bias);
        b.linear(dense, "up_proj", "mlp.up_proj", h, f, spec.mlp_bias);
    }
    if spec.llama4.is_none() {
        b.linear(dense, "down_proj", "mlp.down_proj", f, h, spec.mlp_bias);
    }
    if spec.llama4.is_some() {
        // Written by `llama4_feed_forward`.
    } else if let Some(m) = &spec.moe {
        let s = Scope::SparseLayer;
        let oss = spec.is_gpt_oss();
        let router = if oss { "mlp.router" } else { "mlp.gate" };
        b.router(format!("{router}.weight"), h, m.experts);
        b.experts("mlp", m.experts, h, m.expert_intermediate);
        if oss {
            // GptOssTopKRouter has a bias, and every expert a bias on its fused
            // gate_up output and on its down projection.
            b.vector(s, "mlp.router.bias", m.experts);
            for (name, len) in [
                ("mlp.experts.gate_up_proj_bias", 2 * m.expert_intermediate),
                ("mlp.experts.down_proj_bias", h),
            ] {
                b.push(ParamTensor {
                    name: name.into(),
                    d_in: 1,
                    d_out: len,
                    copies: m.experts,
                    scope: s,
                    linear: None,
                    quantizable: false,
                });
            }
        }
        if m.shared_intermediate > 0 {
            let si = m.shared_intermediate;
            // Only DeepSeek-V2's shared experts read `mlp_bias` (false for the others).
            let bias = spec.mlp_bias;
            b.linear(s, "gate_proj", "mlp.shared_expert.gate_proj", h, si, bias);
            b.linear(s, "up_proj", "mlp.shared_expert.up_proj", h, si, bias);
            b.linear(s, "down_proj", "mlp.shared_expert.down_proj", si, h, bias);
        }
        if m.shared_gate {
            b.push(ParamTensor {
                name: "mlp.shared_expert_gate.weight".into(),
                d_in: h,
                d_out: 1,
                copies: 1,
                scope: s,
                linear: None,
                quantizable: false,
            });
        }
    }
}

/// StarCoder 2: LayerNorms and a plain two-Linear MLP.
fn starcoder2(b: &mut Builder, spec: &ModelSpec) {
    let h = spec.hidden;
    let (q, kv) = (spec.q_dim(), spec.kv_dim());
    let f = spec.intermediate;
    let l = Scope::Layer;
    let norm = NormKind::LayerNorm;
    b.embedding("model.embed_tokens.weight", spec.vocab, h);
    b.norm(l, "input_layernorm", h, norm);
    b.linear(l, "q_proj", "self_attn.q_proj", h, q, spec.qkv_bias);
    b.linear(l, "k_proj", "self_attn.k_proj", h, kv, spec.qkv_bias);
    b.linear(l, "v_proj", "self_attn.v_proj", h, kv, spec.qkv_bias);
    b.linear(l, "o_proj", "self_attn.o_proj", q, h, spec.o_bias);
    b.norm(l, "post_attention_layernorm", h, norm);
    b.linear(l, "c_fc", "mlp.c_fc", h, f, spec.mlp_bias);
    b.linear(l, "c_proj", "mlp.c_proj", f, h, spec.mlp_bias);
    b.norm(Scope::Model, "model.norm", h, norm);
}

/// GPT-2: learned positions, fused qkv (Conv1D), LayerNorms.
fn gpt2(b: &mut Builder, spec: &ModelSpec) {
    let h = spec.hidden;
    let f = spec.intermediate;
    let l = Scope::Layer;
    b.embedding("transformer.wte.weight", spec.vocab, h);
    b.embedding("transformer.wpe.weight", spec.position_embeddings, h);
    b.norm(l, "ln_1", h, NormKind::LayerNorm);
    b.linear(l, "c_attn", "attn.c_attn", h, 3 * h, true);
    b.linear(l, "c_proj", "attn.c_proj", h, h, true);
    b.norm(l, "ln_2", h, NormKind::LayerNorm);
    b.linear(l, "c_fc", "mlp.c_fc", h, f, true);
    b.linear(l, "c_proj", "mlp.c_proj", f, h, true);
    b.norm(Scope::Model, "transformer.ln_f", h, NormKind::LayerNorm);
}

/// GPT-NeoX (Pythia): fused query_key_value and LayerNorms.
fn gpt_neox(b: &mut Builder, spec: &ModelSpec) {
    let h = spec.hidden;
    let f = spec.intermediate;
    let l = Scope::Layer;
    b.embedding("gpt_neox.embed_in.weight", spec.vocab, h);
    b.norm(l, "input_layernorm", h, NormKind::LayerNorm);
    b.norm(l, "post_attention_layernorm", h, NormKind::LayerNorm);
    b.linear(
        l,
        "query_key_value",
        "attention.query_key_value",
        h,
        3 * h,
        spec.qkv_bias,
    );
    b.linear(l, "dense", "attention.dense", h, h, spec.o_bias);
    b.linear(l, "dense_h_to_4h", "mlp.dense_h_to_4h", h, f, true);
    b.linear(l, "dense_4h_to_h", "mlp.dense_4h_to_h", f, h, true);
    b.norm(
        Scope::Model,
        "gpt_neox.final_layer_norm",
        h,
        NormKind::LayerNorm,
    );
}

/// OPT: learned positions, an optional projection of the embedding, LayerNorms.
fn opt(b: &mut Builder, spec: &ModelSpec) {
    let h = spec.hidden;
    let f = spec.intermediate;
    let l = Scope::Layer;
    let p = spec.embed_proj_dim;
    b.embedding("model.decoder.embed_tokens.weight", spec.vocab, p);
    b.embedding(
        "model.decoder.embed_positions.weight",
        spec.position_embeddings,
        h,
    );
    if p != h {
        b.linear(
            Scope::Model,
            "project_out",
            "model.decoder.project_out",
            h,
            p,
            false,
        );
        b.linear(
            Scope::Model,
            "project_in",
            "model.decoder.project_in",
            p,
            h,
            false,
        );
    }
    for (name, path) in [
        ("q_proj", "self_attn.q_proj"),
        ("k_proj", "self_attn.k_proj"),
        ("v_proj", "self_attn.v_proj"),
        ("out_proj", "self_attn.out_proj"),
    ] {
        b.linear(l, name, path, h, h, spec.qkv_bias);
    }
    b.norm(l, "self_attn_layer_norm", h, NormKind::LayerNorm);
    b.linear(l, "fc1", "fc1", h, f, spec.mlp_bias);
    b.linear(l, "fc2", "fc2", f, h, spec.mlp_bias);
    b.norm(l, "final_layer_norm", h, NormKind::LayerNorm);
    // OPT-350m (post-norm layers) has no final layer norm.
    if spec.final_norm {
        b.norm(
            Scope::Model,
            "model.decoder.final_layer_norm",
            h,
            NormKind::LayerNorm,
        );
    }
}

/// What each trained multi-token prediction module adds beside its decoder layer (counted with
/// the layers): `enorm` on the next token's embedding, `hnorm` on the previous depth's hidden
/// state, `eh_proj` (a Linear of 2h -> h without bias) on their concatenation, and its
/// `shared_head.norm`; the embedding and the lm_head are the model's (DeepSeek-V3's
/// README_WEIGHTS.md: 11.5B unique parameters per module; vLLM's `deepseek_mtp.py`).
fn mtp_modules(b: &mut Builder, spec: &ModelSpec) {
    let (h, n) = (spec.hidden, spec.mtp_trained);
    if n == 0 {
        return;
    }
    for (name, d_in) in [
        ("mtp.enorm.weight", 1),
        ("mtp.hnorm.weight", 1),
        ("mtp.eh_proj.weight", 2 * h),
        ("mtp.shared_head.norm.weight", 1),
    ] {
        b.push(ParamTensor {
            name: name.into(),
            d_in,
            d_out: h,
            copies: n,
            scope: Scope::Model,
            linear: None,
            quantizable: false,
        });
    }
}

/// Llama 4's feed-forward modules (`Llama4TextDecoderLayer.feed_forward`): a dense layer's
/// `Llama4TextMLP` of `intermediate_size_mlp`; a MoE layer's router (a Linear without bias),
/// the experts' stacked `gate_up_proj` (experts x hidden x 2 intermediate) and `down_proj`, and
/// the shared expert, a `Llama4TextMLP` of `intermediate_size`.
fn llama4_feed_forward(b: &mut Builder, spec: &ModelSpec) {
    let (h, f, dense) = (spec.hidden, spec.intermediate, Scope::DenseLayer);
    b.linear(dense, "gate_proj", "feed_forward.gate_proj", h, f, false);
    b.linear(dense, "up_proj", "feed_forward.up_proj", h, f, false);
    b.linear(dense, "down_proj", "feed_forward.down_proj", f, h, false);
    let Some(m) = &spec.moe else { return };
    let s = Scope::SparseLayer;
    b.router("feed_forward.router.weight".into(), h, m.experts);
    b.experts("feed_forward", m.experts, h, m.expert_intermediate);
    let si = m.shared_intermediate;
    b.linear(
        s,
        "gate_proj",
        "feed_forward.shared_expert.gate_proj",
        h,
        si,
        false,
    );
    b.linear(
        s,
        "up_proj",
        "feed_forward.shared_expert.up_proj",
        h,
        si,
        false,
    );
    b.linear(
        s,
        "down_proj",
        "feed_forward.shared_expert.down_proj",
        si,
        h,
        false,
    );
}

/// Qwen3-Next's gated DeltaNet (`Qwen3NextGatedDeltaNet`): in_proj_qkvz (q, k, v and the
/// output gate z), in_proj_ba (beta and the decay's input per value head), a depthwise conv1d
/// without bias over q, k and v, `dt_bias` and `A_log` per value head, the gated RMSNorm over
/// one value head, and out_proj. Qwen3.5's (`split`) has the same widths in four projections:
/// in_proj_qkv, in_proj_z, in_proj_b and in_proj_a.
fn gated_delta_net(b: &mut Builder, h: u64, la: &LinearAttention, split: bool) {
    let s = Scope::LinearAttentionLayer;
    let (kd, vd, nv) = (la.key_dim(), la.value_dim(), la.value_heads);
    if split {
        b.linear(
            s,
            "in_proj_qkv",
            "linear_attn.in_proj_qkv",
            h,
            2 * kd + vd,
            false,
        );
        b.linear(s, "in_proj_z", "linear_attn.in_proj_z", h, vd, false);
        b.linear(s, "in_proj_b", "linear_attn.in_proj_b", h, nv, false);
        b.linear(s, "in_proj_a", "linear_attn.in_proj_a", h, nv, false);
    } else {
        let qkvz = 2 * kd + 2 * vd;
        b.linear(
            s,
            "in_proj_qkvz",
            "linear_attn.in_proj_qkvz",
            h,
            qkvz,
            false,
        );
        b.linear(s, "in_proj_ba", "linear_attn.in_proj_ba", h, 2 * nv, false);
    }
    b.push(ParamTensor {
        name: "linear_attn.conv1d.weight".into(),
        d_in: la.conv_kernel,
        d_out: 2 * kd + vd,
        copies: 1,
        scope: s,
        linear: None,
        quantizable: false,
    });
    b.vector(s, "linear_attn.dt_bias", la.value_heads);
    b.vector(s, "linear_attn.A_log", la.value_heads);
    b.vector(s, "linear_attn.norm.weight", la.value_head_dim);
    b.linear(s, "out_proj", "linear_attn.out_proj", vd, h, false);
}

/// Multi-head latent attention's projections (`DeepseekV3Attention`): q through q_a_proj, its
/// RMSNorm and q_b_proj (or one q_proj when `q_lora_rank` is null); k and v through one
/// compressed latent plus the shared rotated k (`kv_a_proj_with_mqa`), its RMSNorm and
/// `kv_b_proj`. `attention_bias` puts biases on q_a_proj and kv_a_proj_with_mqa (and o_proj),
/// never on the projections up to the heads.
fn mla(b: &mut Builder, spec: &ModelSpec, m: &Mla) {
    let (l, h) = (Scope::Layer, spec.hidden);
    let bias = spec.qkv_bias;
    if m.q_lora_rank > 0 {
        let r = m.q_lora_rank;
        b.linear(l, "q_a_proj", "self_attn.q_a_proj", h, r, bias);
        b.norm(l, "self_attn.q_a_layernorm", r, NormKind::RmsNorm);
        b.linear(l, "q_b_proj", "self_attn.q_b_proj", r, spec.q_dim(), false);
    } else {
        b.linear(l, "q_proj", "self_attn.q_proj", h, spec.q_dim(), false);
    }
    b.linear(
        l,
        "kv_a_proj_with_mqa",
        "self_attn.kv_a_proj_with_mqa",
        h,
        m.kv_lora_rank + m.qk_rope_head_dim,
        bias,
    );
    b.norm(
        l,
        "self_attn.kv_a_layernorm",
        m.kv_lora_rank,
        NormKind::RmsNorm,
    );
    b.linear(
        l,
        "kv_b_proj",
        "self_attn.kv_b_proj",
        m.kv_lora_rank,
        spec.heads * (m.qk_nope_head_dim + m.v_head_dim),
        false,
    );
}

/// A multimodal wrapper's vision tower and projector, module by module as transformers 5.23
/// builds them (`modeling_siglip.py` + `Gemma3MultiModalProjector`, `modeling_qwen2_5_vl.py`,
/// `modeling_qwen3_vl.py`, `modeling_pixtral.py` + `Mistral3MultiModalProjector`). Every
/// tensor sits outside the decoder layers (`Scope::Model`), a vision layer's tensors as one
/// entry with `copies` = the tower's layers; none is a Linear LoRA adapts or QLoRA quantizes
/// (the recipes' `target_modules` name the language model's projections).
fn vision(b: &mut Builder, v: &Vision) {
    let mut put = |name: &str, d_in: u64, d_out: u64, copies: u64| {
        b.push(ParamTensor {
            name: format!("{VISION_PREFIX}{name}"),
            d_in,
            d_out,
            copies,
            scope: Scope::Model,
            linear: None,
            quantizable: false,
        });
    };
    match v.kind {
        VisionKind::Siglip => siglip_tower(&mut put, v),
        VisionKind::Qwen25 | VisionKind::Qwen3 => qwen_vl_tower(&mut put, v),
        VisionKind::Pixtral => pixtral_tower(&mut put, v),
        VisionKind::Llama4 => llama4_tower(&mut put, v),
    }
}

/// SigLIP (Gemma 3): patch and position embeddings, ViT blocks, the optional pooling head and
/// Gemma 3's projector.
fn siglip_tower(put: &mut impl FnMut(&str, u64, u64, u64), v: &Vision) {
    let (h, f) = (v.hidden, v.intermediate);
    let conv = v.channels * v.temporal_patch * v.patch * v.patch;
    let t = "vision_tower.encoder.layers.*";
    put("vision_tower.embeddings.patch_embedding.weight", conv, h, 1);
    put("vision_tower.embeddings.patch_embedding.bias", 1, h, 1);
    let side = v.image_size / v.patch.max(1);
    put(
        "vision_tower.embeddings.position_embedding.weight",
        h,
        side * side,
        1,
    );
    vit_blocks(put, v, t, ["layer_norm1", "layer_norm2"], "out_proj");
    put("vision_tower.post_layernorm.weight+bias", 2, h, 1);
    if v.pooling_head {
        // SiglipMultiheadAttentionPoolingHead: a probe, nn.MultiheadAttention (packed
        // in_proj with bias, out_proj), a LayerNorm and an MLP.
        put("vision_tower.head.probe", 1, h, 1);
        put("vision_tower.head.attention.in_proj_weight", h, 3 * h, 1);
        put("vision_tower.head.attention.in_proj_bias", 1, 3 * h, 1);
        put("vision_tower.head.attention.out_proj.weight", h, h, 1);
        put("vision_tower.head.attention.out_proj.bias", 1, h, 1);
        put("vision_tower.head.layernorm.weight+bias", 2, h, 1);
        put("vision_tower.head.mlp.fc1.weight", h, f, 1);
        put("vision_tower.head.mlp.fc1.bias", 1, f, 1);
        put("vision_tower.head.mlp.fc2.weight", f, h, 1);
        put("vision_tower.head.mlp.fc2.bias", 1, h, 1);
    }
    // Gemma3MultiModalProjector: an RMSNorm on the pooled patches and one matrix.
    put("multi_modal_projector.mm_soft_emb_norm.weight", 1, h, 1);
    put(
        "multi_modal_projector.mm_input_projection_weight",
        h,
        v.out_hidden,
        1,
    );
}

/// Qwen2.5-VL's and Qwen3-VL's vision blocks and patch mergers.
fn qwen_vl_tower(put: &mut impl FnMut(&str, u64, u64, u64), v: &Vision) {
    let (h, f, n) = (v.hidden, v.intermediate, v.layers);
    let conv = v.channels * v.temporal_patch * v.patch * v.patch;
    let q3 = v.kind == VisionKind::Qwen3;
    let t = "visual.blocks.*";
    put("visual.patch_embed.proj.weight", conv, h, 1);
    if q3 {
        put("visual.patch_embed.proj.bias", 1, h, 1);
        put("visual.pos_embed.weight", h, v.positions, 1);
    }
    // Qwen2.5-VL's block norms are RMSNorms (a weight), Qwen3-VL's LayerNorms.
    let norm = if q3 { 2 } else { 1 };
    put(&format!("{t}.norm1+norm2"), 2 * norm, h, n);
    put(&format!("{t}.attn.qkv.weight"), h, 3 * h, n);
    put(&format!("{t}.attn.qkv.bias"), 1, 3 * h, n);
    put(&format!("{t}.attn.proj.weight"), h, h, n);
    put(&format!("{t}.attn.proj.bias"), 1, h, n);
    if q3 {
        put(&format!("{t}.mlp.linear_fc1.weight"), h, f, n);
        put(&format!("{t}.mlp.linear_fc1.bias"), 1, f, n);
        put(&format!("{t}.mlp.linear_fc2.weight"), f, h, n);
        put(&format!("{t}.mlp.linear_fc2.bias"), 1, h, n);
    } else {
        for proj in ["gate_proj", "up_proj"] {
            put(&format!("{t}.mlp.{proj}.weight"), h, f, n);
            put(&format!("{t}.mlp.{proj}.bias"), 1, f, n);
        }
        put(&format!("{t}.mlp.down_proj.weight"), f, h, n);
        put(&format!("{t}.mlp.down_proj.bias"), 1, h, n);
    }
    // The patch merger: a norm, then merge^2 patches through two Linears (with biases)
    // to the text model's width; Qwen3-VL adds one merger per DeepStack layer, whose
    // LayerNorm runs after the merge (over merge^2 x hidden).
    let m = h * v.merge * v.merge;
    for (path, copies, norm_len) in [
        ("visual.merger", 1, h),
        ("visual.deepstack_merger_list.*", v.deepstack, m),
    ] {
        if copies == 0 {
            continue;
        }
        put(&format!("{path}.norm"), norm, norm_len, copies);
        put(&format!("{path}.fc1.weight"), m, m, copies);
        put(&format!("{path}.fc1.bias"), 1, m, copies);
        put(&format!("{path}.fc2.weight"), m, v.out_hidden, copies);
        put(&format!("{path}.fc2.bias"), 1, v.out_hidden, copies);
    }
}

/// Pixtral (Mistral 3): its transformer and Mistral 3's projector.
fn pixtral_tower(put: &mut impl FnMut(&str, u64, u64, u64), v: &Vision) {
    let (h, f, n) = (v.hidden, v.intermediate, v.layers);
    let conv = v.channels * v.temporal_patch * v.patch * v.patch;
    let t = "vision_tower.transformer.layers.*";
    put("vision_tower.patch_conv.weight", conv, h, 1);
    put("vision_tower.ln_pre.weight", 1, h, 1);
    put(&format!("{t}.attention_norm+ffn_norm.weight"), 2, h, n);
    for proj in ["q_proj", "k_proj", "v_proj", "o_proj"] {
        put(&format!("{t}.attention.{proj}.weight"), h, h, n);
    }
    put(&format!("{t}.feed_forward.gate_proj.weight"), h, f, n);
    put(&format!("{t}.feed_forward.up_proj.weight"), h, f, n);
    put(&format!("{t}.feed_forward.down_proj.weight"), f, h, n);
    // Mistral3MultiModalProjector: an RMSNorm, the learned patch merger (merge^2
    // patches -> one, no bias), then two Linears to the text model's width.
    let th = v.out_hidden;
    put("multi_modal_projector.norm.weight", 1, h, 1);
    put(
        "multi_modal_projector.patch_merger.merging_layer.weight",
        h * v.merge * v.merge,
        h,
        1,
    );
    put(
        "multi_modal_projector.linear_1.weight",
        h * v.feature_layers,
        th,
        1,
    );
    put("multi_modal_projector.linear_2.weight", th, th, 1);
    if v.projector_bias {
        put("multi_modal_projector.linear_1.bias", 1, th, 1);
        put("multi_modal_projector.linear_2.bias", 1, th, 1);
    }
}

/// Llama 4's vision model, its pixel-shuffle adapter and projector.
fn llama4_tower(put: &mut impl FnMut(&str, u64, u64, u64), v: &Vision) {
    let (h, f) = (v.hidden, v.intermediate);
    let conv = v.channels * v.temporal_patch * v.patch * v.patch;
    // Llama4VisionModel: the unfolded patch Linear (no bias), a class token and one
    // learned position per patch and for it, LayerNorms before and after the encoder.
    let t = "vision_model.model.layers.*";
    put("vision_model.patch_embedding.linear.weight", conv, h, 1);
    put("vision_model.class_embedding", 1, h, 1);
    put(
        "vision_model.positional_embedding_vlm",
        h,
        v.patches_per_image(),
        1,
    );
    put("vision_model.layernorm_pre+post.weight+bias", 4, h, 1);
    let norms = ["input_layernorm", "post_attention_layernorm"];
    vit_blocks(put, v, t, norms, "o_proj");
    // Llama4VisionPixelShuffleMLP's two Linears (its fc1 reads `intermediate_size`,
    // the shuffled width) and Llama4MultiModalProjector's one, none with a bias.
    put(
        "vision_model.vision_adapter.mlp.fc1.weight",
        f,
        v.projector_in,
        1,
    );
    put(
        "vision_model.vision_adapter.mlp.fc2.weight",
        v.projector_out,
        v.projector_out,
        1,
    );
    put(
        "multi_modal_projector.linear_1.weight",
        v.vision_out,
        v.out_hidden,
        1,
    );
}

/// The blocks of a ViT with biases everywhere (SigLIP's, Llama 4's): two LayerNorms, q, k, v
/// and an output projection, and a two-Linear GELU MLP, under `t` (`...layers.*`).
fn vit_blocks(
    put: &mut impl FnMut(&str, u64, u64, u64),
    v: &Vision,
    t: &str,
    norms: [&str; 2],
    out: &str,
) {
    let (h, f, n) = (v.hidden, v.intermediate, v.layers);
    for norm in norms {
        put(&format!("{t}.{norm}.weight+bias"), 2, h, n);
    }
    for proj in ["q_proj", "k_proj", "v_proj", out] {
        put(&format!("{t}.self_attn.{proj}.weight"), h, h, n);
        put(&format!("{t}.self_attn.{proj}.bias"), 1, h, n);
    }
    put(&format!("{t}.mlp.fc1.weight"), h, f, n);
    put(&format!("{t}.mlp.fc1.bias"), 1, f, n);
    put(&format!("{t}.mlp.fc2.weight"), f, h, n);
    put(&format!("{t}.mlp.fc2.bias"), 1, h, n);
}

/// The MLP kind check used by the activation formulas (kept here so both read one place).
pub fn mlp_matrices(spec: &ModelSpec) -> u64 {
    match spec.mlp {
        MlpKind::Gated => 3,
        MlpKind::Plain => 2,
    }
}
