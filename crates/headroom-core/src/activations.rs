//! Tensors saved for backward: one decoder layer's inventory, and the parts outside the layers.
//!
//! Each entry mirrors a tensor that autograd keeps in transformers 5.x (read from the modeling
//! code and checked byte for byte against `saved_tensors_hooks` on CPU, see `tests/reference`).
//! Storages count once: a view saved by two ops is one entry.

use serde::Serialize;

use crate::catalog::Gpu;
use crate::dtype::DType;
use crate::model::{Family, Mla, ModelSpec, Moe, NormKind, Router, Vision, VisionKind};
use crate::scenario::{Attention, Checkpointing, Method, Precision, Scenario, VisionTraining};
use crate::sdpa::{self, Backend};

/// One saved tensor (or a group of identical ones), with what keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Saved {
    /// What it is and which op saves it, e.g. "q/k/v input (saved by q_proj, k_proj, v_proj)".
    /// For people only: no arithmetic reads it (arithmetic reads `part`).
    pub what: String,
    pub elements: u64,
    pub dtype: DType,
    /// Identical tensors (e.g. autocast's per-linear input casts).
    pub copies: u64,
    /// Where in the layer (or outside it) the tensor is saved.
    #[serde(skip)]
    pub part: Part,
}

/// Where a saved tensor sits in the forward, in order. Rules that depend on where a tensor is
/// saved (what selective recompute drops, what backward frees before the attention core, what
/// the final norm's backward releases) read this tag, never the display text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Part {
    /// The layer's first norm.
    #[default]
    InputNorm,
    /// The inputs of the attention's input projections.
    AttentionInputs,
    /// Per-head q/k norms (Qwen3, Gemma 3).
    QkNorm,
    /// What attention saves apart from the s x s matrix: q, k, v, output, logsumexp, RNG.
    AttentionCore,
    /// Eager attention's s x s tensors: softmax output, probabilities, dropout mask.
    AttentionScores,
    /// The attention output projection's input.
    OutputProjection,
    /// The residual dropout mask after attention.
    AttentionResidualDropout,
    /// The norm(s) between attention and the MLP.
    MlpNorm,
    /// The MLP (or the routed experts) and any norm after it.
    Mlp,
    /// The residual dropout mask after the MLP.
    MlpResidualDropout,
    /// Outside the layers: RoPE's cos and sin, kept until the first layer's backward.
    Rope,
    /// Outside the layers: the embedding dropout mask, kept until the embedding's backward.
    EmbeddingDropout,
    /// Outside the layers: the final norm's saved tensors.
    FinalNorm,
    /// Outside the layers: lm_head's input.
    LmHeadInput,
    /// Outside the layers: a trained vision tower's and projector's saved tensors, kept
    /// until the end of backward (the tower runs first in forward, so last in backward).
    Vision,
}

impl Part {
    /// Eager attention's quadratic tensors: what selective recompute drops.
    pub fn is_attention_scores(self) -> bool {
        self == Part::AttentionScores
    }

    /// Saved after the attention core: backward runs the layer in reverse, so it frees these
    /// before it reaches the attention core.
    pub fn is_after_attention(self) -> bool {
        matches!(
            self,
            Part::OutputProjection
                | Part::AttentionResidualDropout
                | Part::MlpNorm
                | Part::Mlp
                | Part::MlpResidualDropout
        )
    }

    /// Outside the layers and released by the final norm's backward (everything but the RoPE
    /// tables and the embedding dropout mask, which live until the first layer / embedding).
    pub fn is_released_after_final_norm(self) -> bool {
        matches!(self, Part::FinalNorm | Part::LmHeadInput)
    }
}

impl Saved {
    pub fn bytes(&self) -> u64 {
        self.elements * self.dtype.bytes() * self.copies
    }
}

/// The inputs of the activation formulas, derived once from a scenario.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// Sequences in the micro-batch.
    pub b: u64,
    /// Tokens per sequence on this GPU: `seq / cp` under context parallelism (sequence
    /// parallelism splits it further inside the layer).
    pub s: u64,
    /// Tensor-parallel degree: head and intermediate dimensions are split by it.
    pub tp: u64,
    /// Whether sequence parallelism also splits the hidden-size tensors.
    pub sp: bool,
    pub precision: Precision,
    /// The residual stream's dtype (`crate::states::stream_dtype`).
    pub stream: DType,
    /// Whether the decoder layers' Linears are bitsandbytes 4-bit (QLoRA): `Linear4bit` casts
    /// its input to the compute dtype and its output back to the input's dtype, and saves
    /// nothing but its packed weight.
    pub four_bit: bool,
    pub attention: Attention,
    /// The kernel SDPA runs (read only with `Attention::Sdpa`): in the layers without a mask
    /// (in every layer when all of them are masked).
    pub sdpa: Backend,
    /// Whether the local layers (`ModelSpec::local_attention`) get an attention mask under SDPA
    /// (`sdpa::kernels`), and the kernel they then run (flash takes no mask).
    pub local_mask: bool,
    pub sdpa_local: Backend,
    pub attention_dropout: f64,
    pub residual_dropout: f64,
    pub embedding_dropout: f64,
    /// Whether the base weights train (false for LoRA and QLoRA).
    pub base_trainable: bool,
    /// Whether the decoder layers' Linears are Transformer Engine's `te.Linear`s (`fp8=te`),
    /// which save their input in fp8, one copy each (`crate::fp8::te_converts`).
    pub te_fp8: bool,
    /// Whether the lm_head is a `te.Linear` too (`crate::fp8::te_converts_lm_head`).
    pub te_lm_head: bool,
    /// LoRA rank when adapters are present.
    pub lora_rank: Option<u64>,
    /// The adapters' dtype (peft's `autocast_adapter_dtype`: fp32 by default).
    pub adapter: DType,
    /// peft's `lora_dropout` > 0: each adapted Linear's own dropped copy and mask.
    pub lora_dropout: bool,
    /// Whether the lm_head trains: in full training, or as peft's `modules_to_save` copy.
    pub lm_head_trained: bool,
    /// DoRA (peft's `use_dora`): what each adapted Linear keeps for its magnitude.
    pub dora: bool,
    /// Whether the adapters also sit on the MLP's Linears (`all-linear`), not only on the
    /// attention projections: a frozen Linear without an adapter saves nothing.
    pub lora_mlp: bool,
    /// How many of q, k and v carry adapters (`LoraTargets::qkv_adapted`), and whether the
    /// attention's output projection does.
    pub lora_qkv: u64,
    pub lora_o: bool,
    /// Whether transformers' KV cache is on in the forward (`use_cache`, the configs' default
    /// and what `model(input_ids, labels=...)` does in training; gradient checkpointing turns
    /// it off). `DynamicLayer.update` concatenates k and v into fresh tensors, which attention
    /// then saves instead of views of a fused qkv output.
    pub kv_cache: bool,
    /// Images in the micro-batch (a multimodal model's; 0 otherwise).
    pub images: u64,
    /// Whether the vision tower trains (it saves nothing when frozen).
    pub vision_trained: bool,
    /// Whether gradient checkpointing covers the vision tower's blocks (transformers'
    /// `gradient_checkpointing_enable` checkpoints every `GradientCheckpointingLayer`, the
    /// vision blocks included: with `ckpt=full`).
    pub vision_checkpointed: bool,
}

impl Shape {
    pub fn from_scenario(spec: &ModelSpec, gpu: &Gpu, scen: &Scenario) -> Self {
        // The override sets the probability of the dropouts the model's code has, and adds
        // none (Llama-like layers have no residual dropout to turn on).
        let p = |cfg: f64, site: bool| {
            if site {
                scen.dropout.unwrap_or(cfg)
            } else {
                cfg
            }
        };
        let kernels = sdpa::kernels(spec, gpu, scen);
        Shape {
            sdpa: kernels.scenario.backend,
            local_mask: kernels.local.is_some(),
            sdpa_local: kernels.local.unwrap_or(kernels.scenario.backend),
            b: scen.micro_batch as u64,
            s: scen.seq_local() as u64,
            tp: scen.parallel.tensor as u64,
            sp: scen.parallel.sequence,
            precision: crate::states::activation_precision(scen),
            stream: crate::states::stream_dtype(scen),
            four_bit: scen.method == Method::Qlora,
            attention: scen.attention,
            attention_dropout: p(spec.dropout.attention, true),
            residual_dropout: p(spec.dropout.residual, spec.family.has_residual_dropout()),
            embedding_dropout: p(spec.dropout.embedding, spec.family.has_embedding_dropout()),
            base_trainable: scen.method == Method::Full,
            te_fp8: crate::fp8::te_converts(spec, scen),
            te_lm_head: crate::fp8::te_converts_lm_head(spec, scen),
            lora_rank: (scen.method != Method::Full).then_some(scen.lora.rank as u64),
            adapter: scen.lora.adapter_dtype,
            lora_dropout: scen.lora.dropout,
            dora: scen.method != Method::Full && scen.lora.dora,
            lm_head_trained: scen.method == Method::Full
                || (scen.lora.save_embeddings && !spec.tie_embeddings),
            lora_mlp: scen.lora.targets.mlp_adapted(),
            lora_qkv: scen.lora.targets.qkv_adapted(),
            lora_o: scen.lora.targets.output_adapted(),
            kv_cache: scen.checkpointing == Checkpointing::None,
            images: if spec.vision.is_some() {
                scen.micro_batch as u64 * scen.images as u64
            } else {
                0
            },
            vision_trained: scen.vision == VisionTraining::Trained && scen.method == Method::Full,
            vision_checkpointed: scen.checkpointing == Checkpointing::Full,
        }
    }

    /// Whether attention runs as plain matmuls and a softmax (eager attention, SDPA's math
    /// kernel): it materializes the s x s scores, and writes its output as (batch, heads, seq,
    /// dim), so that transformers' `transpose(1, 2).contiguous()` copies it.
    pub fn quadratic(&self) -> bool {
        quadratic(self.attention, self.sdpa)
    }

    /// Tokens in the micro-batch.
    pub fn tokens(&self) -> u64 {
        self.b * self.s
    }

    /// dtype of the residual stream: the weights' dtype in full training (fp32 under
    /// autocast), the base's load dtype under LoRA/QLoRA.
    pub fn stream(&self) -> DType {
        self.stream
    }

    /// The output widths of the adapted ones of q (width `q`), k and v (width `kv`), in that
    /// order (`lora_qkv` of them: all three, q and v, or none).
    pub fn adapted_qkv_widths(&self, q: u64, kv: u64) -> Vec<u64> {
        match self.lora_qkv {
            3 => vec![q, kv, kv],
            2 => vec![q, kv],
            _ => Vec::new(),
        }
    }

    /// dtype of a decoder-layer Linear's output: the compute dtype, but the input's for a
    /// QLoRA model's 4-bit Linears (bitsandbytes `Linear4bit.forward` casts its result back
    /// to the input's dtype, autocast or not).
    fn linear_out(&self) -> DType {
        if self.four_bit {
            self.stream
        } else {
            self.compute()
        }
    }

    /// dtype of matrix-multiply outputs.
    fn compute(&self) -> DType {
        self.precision.compute_dtype()
    }

    fn amp(&self) -> bool {
        self.precision.is_autocast()
    }
}

/// Eager attention, or SDPA running `kernel` = math: the s x s scores are materialized.
fn quadratic(attention: Attention, kernel: Backend) -> bool {
    attention == Attention::Eager || kernel == Backend::Math
}

/// One layer's dimensions on this GPU, derived once: tokens, the hidden-size tensors (split by
/// TP only with sequence parallelism), heads and the q/k/v widths after TP.
#[derive(Debug, Clone, Copy)]
struct Layout {
    /// Tokens in the micro-batch.
    t: u64,
    /// Elements of one hidden-size tensor on this GPU.
    th: u64,
    /// Hidden width on this GPU (split only under sequence parallelism).
    h_local: u64,
    /// Tokens a norm sees (split by sequence parallelism).
    norm_tokens: u64,
    /// Query heads and key/value heads on this GPU, and the query heads per key/value head.
    heads: u64,
    groups: u64,
    /// q width and k/v width on this GPU.
    q: u64,
    kv: u64,
    /// v width on this GPU before any repetition (narrower than k's under multi-head latent
    /// attention), and the attention output's width (o_proj's input).
    v: u64,
    o: u64,
    /// Attention scores of the micro-batch: b x heads x s x s.
    scores: u64,
    /// Whether the layer has the model's other kind of attention
    /// (`ModelSpec::is_other_attention`: Llama 4's NoPE layers, Qwen3-Next's full attention,
    /// the full layers among sliding-window ones).
    other: bool,
    /// Whether SDPA gets a window mask in this layer (a local layer at a length that needs
    /// one), and the kernel the layer runs.
    masked: bool,
    kernel: Backend,
}

impl Layout {
    fn new(spec: &ModelSpec, sh: &Shape) -> Self {
        let t = sh.tokens();
        let tp = sh.tp;
        let th = if sh.sp {
            t * spec.hidden / tp
        } else {
            t * spec.hidden
        };
        let heads = spec.heads / tp.min(spec.heads);
        let kv_heads = (spec.kv_heads / tp).max(1);
        Layout {
            t,
            th,
            h_local: th / t.max(1),
            norm_tokens: if sh.sp { t / tp } else { t },
            heads,
            groups: heads / kv_heads,
            q: heads * spec.head_dim,
            kv: kv_heads * spec.head_dim,
            v: match &spec.mla {
                Some(m) => heads * m.v_head_dim,
                None => kv_heads * spec.head_dim,
            },
            o: spec.v_dim() / spec.heads * heads,
            scores: sh.b * heads * sh.s * sh.s,
            other: false,
            masked: false,
            kernel: sh.sdpa,
        }
    }

    /// [`Shape::quadratic`] for this layer's kernel.
    fn quadratic(&self, sh: &Shape) -> bool {
        quadratic(sh.attention, self.kernel)
    }

    /// The layout of a layer with the model's other kind of attention (`other`) or not.
    fn of(spec: &ModelSpec, sh: &Shape, other: bool) -> Self {
        let masked = sh.local_mask && !other;
        Layout {
            other,
            masked,
            kernel: if masked { sh.sdpa_local } else { sh.sdpa },
            ..Layout::new(spec, sh)
        }
    }
}

/// Collects saved tensors of one scope, in forward order; `at` sets the part the next
/// entries belong to.
#[derive(Debug, Default)]
struct Inventory {
    items: Vec<Saved>,
    part: Part,
}

impl Inventory {
    fn at(&mut self, part: Part) -> &mut Self {
        self.part = part;
        self
    }

    fn add(&mut self, what: impl Into<String>, elements: u64, dtype: DType) {
        self.add_n(what, elements, dtype, 1);
    }

    fn add_n(&mut self, what: impl Into<String>, elements: u64, dtype: DType, copies: u64) {
        if elements > 0 && copies > 0 {
            self.items.push(Saved {
                what: what.into(),
                elements,
                dtype,
                copies,
                part: self.part,
            });
        }
    }
}

/// Saved tensors of one decoder layer (a dense one; MoE layers use `moe_layer`).
pub fn layer(spec: &ModelSpec, sh: &Shape) -> Vec<Saved> {
    layer_of(spec, sh, false)
}

/// [`layer`], or a dense layer with the model's other kind of attention when `other`
/// (`ModelSpec::is_other_attention`).
pub fn layer_of(spec: &ModelSpec, sh: &Shape, other: bool) -> Vec<Saved> {
    let mut inv = Inventory::default();
    let l = Layout::of(spec, sh, other);
    match spec.family {
        Family::Cohere2 => {
            // Attention and the MLP both read the one norm's output (parallel block).
            llama_attention(&mut inv, spec, sh, &l);
            inv.at(Part::Mlp);
            gated_mlp(&mut inv, spec, sh, spec.intermediate / sh.tp);
        }
        Family::Llama | Family::Gemma | Family::Phi3 | Family::Olmo2 | Family::Glm4 => {
            llama_attention(&mut inv, spec, sh, &l);
            llama_mlp_side(&mut inv, spec, sh, &l, |inv| {
                gated_mlp(inv, spec, sh, spec.intermediate / sh.tp)
            });
        }
        Family::Gpt2 | Family::GptNeox | Family::Opt => gpt_layer(&mut inv, spec, sh, &l),
        Family::Starcoder2 => {
            llama_attention(&mut inv, spec, sh, &l);
            plain_mlp_side(&mut inv, spec, sh, &l);
        }
    }
    inv.items
}

/// native_layer_norm saves its input and the fp32 mean and rstd per token.
fn layer_norm(inv: &mut Inventory, name: &str, sh: &Shape, l: &Layout) {
    inv.add(
        format!("{name}: input (saved by layer_norm)"),
        l.th,
        sh.stream(),
    );
    inv.add(format!("{name}: mean and rstd, fp32"), 2 * l.t, DType::F32);
}

/// Saved tensors of one MoE layer (tokens spread evenly over experts: an assumption).
pub fn moe_layer(spec: &ModelSpec, sh: &Shape) -> Vec<Saved> {
    moe_layer_of(spec, sh, false)
}

/// [`moe_layer`], with the model's other kind of attention when `other`.
pub fn moe_layer_of(spec: &ModelSpec, sh: &Shape, other: bool) -> Vec<Saved> {
    let mut inv = Inventory::default();
    let l = Layout::of(spec, sh, other);
    llama_attention(&mut inv, spec, sh, &l);
    llama_mlp_side(&mut inv, spec, sh, &l, |inv| moe_mlp(inv, spec, sh));
    inv.items
}

/// Bytes of `items`.
/// The saved tensors as an int8 pack hook leaves them (the worked example's
/// `compress_activation`, a `torch.autograd.graph.saved_tensors_hooks` pack around each decoder
/// layer): every floating-point tensor becomes int8 plus its scale, a 0-dim tensor of its own
/// dtype (`tensor.abs().max() / 127`); masks, indices and RNG state stay as they are.
pub fn int8_compressed(items: Vec<Saved>) -> Vec<Saved> {
    let mut out = Vec::with_capacity(items.len() * 2);
    for s in items {
        if !matches!(s.dtype, DType::F32 | DType::Bf16 | DType::F16) {
            out.push(s);
            continue;
        }
        out.push(Saved {
            what: format!("{} (int8)", s.what),
            elements: s.elements,
            dtype: DType::I8,
            copies: s.copies,
            part: s.part,
        });
        out.push(Saved {
            what: format!("its scale ({})", s.dtype.torch_name()),
            elements: 1,
            dtype: s.dtype,
            copies: s.copies,
            part: s.part,
        });
    }
    out
}

pub fn total(items: &[Saved]) -> u64 {
    items.iter().map(Saved::bytes).sum()
}

/// The RMSNorm of Llama-like models: `w * (x.float() * rsqrt(mean(x^2) + eps)).to(x.dtype)`
/// (OLMo 2 applies `w` before the cast back, Gemma `1 + w` in fp32).
fn rms_norm(inv: &mut Inventory, name: &str, t: u64, h: u64, sh: &Shape, family: Family) {
    rms_norm_of(inv, name, (t, h, sh.stream()), sh, family);
}

/// The family whose RMSNorm a model's norms follow: gpt-oss applies the weight in fp32 before
/// the cast back (`(self.weight * hidden_states).to(input_dtype)`), as OLMo 2 does.
fn norm_family(spec: &ModelSpec) -> Family {
    if spec.is_gpt_oss() {
        Family::Olmo2
    } else {
        spec.family
    }
}

/// [`rms_norm`] of a tensor of `t` x `h` in `stream`: a norm after attention or the MLP
/// (Gemma 2/3, GLM-4) reads the projection's output, in the compute dtype under autocast.
fn rms_norm_of(
    inv: &mut Inventory,
    name: &str,
    (t, h, stream): (u64, u64, DType),
    sh: &Shape,
    family: Family,
) {
    // x.to(float32) is a copy unless x is already fp32; pow and mul save it.
    let what = if stream == DType::F32 {
        "input (saved by pow, mul)"
    } else {
        "fp32 copy of the input (saved by pow, mul)"
    };
    inv.add(format!("{name}: {what}"), t * h, DType::F32);
    inv.add(format!("{name}: rsqrt of the variance"), t, DType::F32);
    if family == Family::Gemma {
        // Gemma: (x * rsqrt) * (1 + w) in fp32; the product's fp32 input is saved.
        inv.add(
            format!("{name}: normalized input, fp32 (saved by mul with 1 + weight)"),
            t * h,
            DType::F32,
        );
        // `1.0 + self.weight.float()` is a new fp32 tensor, which the product saves for the
        // input's gradient (found on fake CUDA; tests/reference/test_cuda_fake.py).
        inv.add(
            format!("{name}: 1 + weight, fp32 (saved by mul)"),
            h,
            DType::F32,
        );
    } else if sh.base_trainable {
        // weight * x_normed saves x_normed because the weight trains: in the input dtype, or
        // in fp32 where the weight is applied before the cast back (OLMo 2).
        let dtype = if family == Family::Olmo2 {
            DType::F32
        } else {
            stream
        };
        inv.add(
            format!("{name}: normalized input (saved by mul with weight)"),
            t * h,
            dtype,
        );
    }
}

/// Cohere 2's norm: `(w.float() * ((x - mean) * rsqrt(var + eps))).to(x.dtype)`, x in fp32:
/// `x - mean` is computed twice (for the variance and for the product), pow saves one and mul
/// the other with the rsqrt; the weight's product saves the normalized input (when the weight
/// trains) and the weight's fp32 copy (a bf16 weight's).
fn cohere_norm(inv: &mut Inventory, name: &str, (t, h): (u64, u64), sh: &Shape) {
    inv.add_n(
        format!("{name}: centred input, fp32, computed twice (saved by pow and by mul)"),
        t * h,
        DType::F32,
        2,
    );
    inv.add(format!("{name}: rsqrt of the variance"), t, DType::F32);
    if sh.base_trainable {
        inv.add(
            format!("{name}: normalized input, fp32 (saved by mul with weight)"),
            t * h,
            DType::F32,
        );
    }
    if sh.stream() != DType::F32 {
        inv.add(
            format!("{name}: weight cast to fp32 (saved by mul)"),
            h,
            DType::F32,
        );
    }
}

/// An MLP Linear's input (routers and experts included): as [`linear_inputs`], except that
/// under LoRA on the attention projections only the frozen Linear has no adapter and saves
/// nothing (measured on an H100: Mistral 7B with attention-only adapters).
fn mlp_linear_inputs(inv: &mut Inventory, what: &str, elements: u64, consumers: u64, sh: &Shape) {
    if sh.base_trainable || sh.lora_mlp {
        linear_inputs(inv, what, elements, consumers, sh);
    }
}

/// A router's input: as [`mlp_linear_inputs`], never Transformer Engine's.
fn router_inputs(inv: &mut Inventory, elements: u64, sh: &Shape) {
    if sh.base_trainable || sh.lora_mlp {
        plain_linear_inputs(inv, "router input", elements, 1, sh);
    }
}

/// An MLP Linear's adapter input under LoRA (nothing with attention-only adapters).
fn mlp_lora_inputs(inv: &mut Inventory, what: &str, elements: u64, consumers: u64, sh: &Shape) {
    if sh.lora_mlp {
        lora_inputs(inv, what, elements, consumers, sh);
    }
}

/// A Linear's input as autograd keeps it: one tensor shared by the Linears that read it, or
/// under autocast one cast copy per Linear (autocast caches only weight casts).
fn linear_inputs(inv: &mut Inventory, what: &str, elements: u64, consumers: u64, sh: &Shape) {
    if sh.te_fp8 {
        return te_linear_inputs(inv, what, elements, consumers);
    }
    plain_linear_inputs(inv, what, elements, consumers, sh);
}

/// A `te.Linear`'s input under Transformer Engine's fp8 (`_Linear.forward`): each Linear casts
/// it to fp8 and saves that copy (after its forward GEMM only the layout its weight-gradient
/// GEMM reads, one byte per element) with its fp32 `scale_inv`: one per Linear, as autocast's
/// casts are (TE `module/linear.py`, `prepare_for_saving`; read, not measured).
fn te_linear_inputs(inv: &mut Inventory, what: &str, elements: u64, consumers: u64) {
    inv.add_n(
        format!("{what}, fp8 copy (saved by each te.Linear)"),
        elements,
        DType::F8,
        consumers,
    );
    inv.add_n("its fp8 scale_inv, fp32", 1, DType::F32, consumers);
}

/// The saved tensor of a Linear's output that the next Linear reads (the down projection's
/// input): itself, or under Transformer Engine the next `te.Linear`'s fp8 copy.
fn next_linear_input(inv: &mut Inventory, what: &str, elements: u64, dtype: DType, sh: &Shape) {
    if sh.te_fp8 && sh.base_trainable {
        te_linear_inputs(inv, what, elements, 1);
    } else {
        inv.add(what, elements, dtype);
    }
}

/// [`linear_inputs`] of a Linear Transformer Engine leaves alone (a router: its expert count is
/// no multiple of 16 in most models, and accelerate stops converting at such a module).
fn plain_linear_inputs(inv: &mut Inventory, what: &str, elements: u64, consumers: u64, sh: &Shape) {
    if !sh.base_trainable {
        return lora_inputs(inv, what, elements, consumers, sh);
    }
    if sh.amp() {
        inv.add_n(
            format!(
                "{what}, cast to {} by autocast (one per Linear)",
                sh.compute().torch_name()
            ),
            elements,
            sh.compute(),
            consumers,
        );
    } else {
        inv.add(
            format!("{what} (saved by the Linear)"),
            elements,
            sh.stream(),
        );
    }
}

/// Under LoRA the frozen base Linear saves nothing (its weight is a parameter); the adapter
/// path `lora_B(lora_A(x))` saves lora_A's input and lora_B's (lora_A's output). peft casts x
/// to the adapters' dtype first (`_cast_input_dtype`); under autocast lora_A then casts it to
/// the compute dtype (autocast caches weight casts only), and lora_A's output is in that
/// dtype. Each cast, and lora_dropout, makes one copy per adapted Linear; an x that needs
/// none is saved as itself, one tensor for the Linears that read it. Checked against peft on
/// CPU for every combination of precision, base, adapter dtype and dropout
/// (tests/reference/test_peft.py).
fn lora_inputs(inv: &mut Inventory, what: &str, elements: u64, consumers: u64, sh: &Shape) {
    lora_adapter_inputs(inv, what, elements, consumers, sh, false);
}

/// [`lora_inputs`] of an input that something else already saves (`saved`): lora_A's copy
/// of it is counted, the input itself is not again.
fn lora_adapter_inputs(
    inv: &mut Inventory,
    what: &str,
    elements: u64,
    consumers: u64,
    sh: &Shape,
    saved: bool,
) {
    let Some(r) = sh.lora_rank else { return };
    if consumers == 0 {
        return;
    }
    let tokens = sh.tokens();
    if sh.lora_dropout {
        // nn.Dropout on the (cast) input: CUDA's fused dropout keeps a bool mask, and its
        // output is a new tensor per adapted Linear.
        inv.add_n(
            format!("{what}: lora_dropout mask (per adapted Linear)"),
            elements,
            DType::Bool,
            consumers,
        );
    }
    // What lora_A computes in: autocast's dtype, else the adapters'.
    let a = sh.adapter;
    let e = if sh.amp() { sh.compute() } else { a };
    // A copy per adapted Linear where peft casts x to the adapters' dtype, autocast casts
    // that to its own, or dropout drops it out; otherwise lora_A saves x itself.
    let copied = sh.lora_dropout || a != sh.stream() || e != a;
    if copied {
        let how = if sh.lora_dropout {
            "dropped-out"
        } else if e != a {
            "autocast's"
        } else {
            "peft's"
        };
        inv.add_n(
            format!(
                "{what}: {how} {} copy for lora_A (per adapted Linear)",
                e.torch_name()
            ),
            elements,
            e,
            consumers,
        );
    } else if !saved {
        inv.add(format!("{what} (saved by lora_A)"), elements, e);
    }
    inv.add_n("lora_A output (saved by lora_B)", tokens * r, e, consumers);
}

/// What DoRA keeps for each adapted Linear of input width `d_in` and output width in `outs`
/// (peft's `DoraLinearLayer.forward`): the magnitude's gradient needs the base's output and the
/// adapters' output (both multiplied by the per-output scale), and the scale's own division
/// keeps the detached column norms. With lora_dropout peft computes the base's output again
/// from the dropped-out input, `F.linear(x, weight)`, which keeps the weight cast to the
/// adapters' dtype as well. Written from peft 0.21's code (Llama-like layers); checked on CPU
/// in tests/reference/test_peft.py.
fn dora_outputs(
    inv: &mut Inventory,
    what: &str,
    (d_in, base_out): (u64, DType),
    outs: &[u64],
    sh: &Shape,
) {
    let t = sh.tokens();
    let a = sh.adapter;
    let e = if sh.amp() { sh.compute() } else { a };
    for &w in outs {
        if sh.lora_dropout {
            inv.add(
                format!("{what}: DoRA's base output (dropped input)"),
                t * w,
                e,
            );
            inv.add(
                format!("{what}: DoRA's {} weight cast", a.torch_name()),
                w * d_in,
                a,
            );
        } else {
            inv.add(format!("{what}: DoRA's base output"), t * w, base_out);
        }
        inv.add(format!("{what}: DoRA's adapters' output"), t * w, e);
        inv.add_n(format!("{what}: DoRA's norms and scales"), w, a, 3);
    }
}

/// A Llama-like layer's first half: the input norm, the attention projections' inputs, RoPE
/// (and q/k norms), the attention core, the output projection's input and its residual
/// dropout.
fn llama_attention(inv: &mut Inventory, spec: &ModelSpec, sh: &Shape, l: &Layout) {
    let Layout { t, th, q, kv, .. } = *l;
    let c = sh.compute();
    let olmo = spec.family == Family::Olmo2;
    inv.at(Part::InputNorm);
    if spec.norm == NormKind::LayerNorm {
        layer_norm(inv, "input_layernorm", sh, l);
    } else if spec.family == Family::Cohere2 {
        cohere_norm(inv, "input_layernorm", (l.norm_tokens, l.h_local), sh);
    } else if spec.gated_attention() {
        let (nt, h) = (l.norm_tokens, l.h_local);
        zero_centred_norm(inv, "input_layernorm", (nt * h, nt * h, h), sh, sh.stream());
    } else if !olmo {
        let (nt, h) = (l.norm_tokens, l.h_local);
        rms_norm(inv, "input_layernorm", nt, h, sh, norm_family(spec));
    }
    inv.at(Part::AttentionInputs);
    if let Some(la) = &spec.linear_attention
        && !l.other
    {
        return gated_delta_net(inv, sh, l, la);
    }
    // Attention projections. With sequence parallelism a column-parallel linear saves its
    // sequence-sharded input and all-gathers it again in backward (Korthikanti et al. 2022,
    // §4.2.2; Megatron's LinearWithGradAccumulationAndAsyncCommunication), so it saves `th`.
    // Under LoRA only the adapted projections keep anything (`lora_qkv` of q, k, v).
    let qkv = if sh.base_trainable { 3 } else { sh.lora_qkv };
    if spec.family == Family::Phi3 {
        linear_inputs(inv, "qkv_proj input", th, qkv.min(1), sh);
    } else if spec.family == Family::Cohere2 {
        // q/k/v and the MLP's gate/up read the same norm output (parallel block); with
        // attention-only adapters only the three projections keep an adapter copy.
        let readers = if sh.base_trainable || sh.lora_mlp {
            qkv + 2
        } else {
            qkv
        };
        linear_inputs(inv, "q/k/v_proj and gate/up_proj input", th, readers, sh);
    } else if let Some(m) = &spec.mla {
        mla_projections(inv, spec, sh, l, m);
    } else {
        linear_inputs(inv, "q/k/v_proj input", th, qkv, sh);
        if sh.dora && !sh.base_trainable {
            let adapted = sh.adapted_qkv_widths(q, kv);
            dora_outputs(
                inv,
                "q/k/v_proj",
                (th / t.max(1), sh.linear_out()),
                &adapted,
                sh,
            );
        }
    }
    // RoPE: q * cos + rotate_half(q) * sin. Under autocast cos/sin are fp32, so q and k become
    // fp32; the rotated q, k and v are what attention saves.
    if spec.gated_attention() {
        // Qwen3-Next's q_norm and k_norm: zero-centred RMSNorms over each head. q is a view of
        // q_proj's output (query and gate side by side), so in fp32, where `.float()` returns
        // the view, pow and mul keep the whole output.
        let q_in = if c == DType::F32 { 2 * t * q } else { t * q };
        let d = spec.head_dim;
        inv.at(Part::QkNorm);
        zero_centred_norm(inv, "q_norm", (q_in, t * q, d), sh, c);
        zero_centred_norm(inv, "k_norm", (t * kv, t * kv, d), sh, c);
    } else if spec.qk_norm && olmo {
        // OLMo 2: RMSNorm over the whole q and k projections, the weight applied in fp32.
        inv.at(Part::QkNorm).add(
            "q_norm/k_norm: fp32 inputs (saved by pow, mul)",
            t * (q + kv),
            DType::F32,
        );
        inv.add("q_norm/k_norm: rsqrt of the variance", 2 * t, DType::F32);
        if sh.base_trainable {
            inv.add(
                "q_norm/k_norm: normalized, fp32 (saved by mul with weight)",
                t * (q + kv),
                DType::F32,
            );
        }
    } else if spec.qk_norm && spec.family == Family::Gemma {
        // Gemma 3's q_norm/k_norm are Gemma's RMSNorm per head: the fp32 input (a copy of
        // the 16-bit projection output), the rsqrt, and (x * rsqrt) * (1 + w) in fp32, which
        // saves the fp32 normalized input and each norm's 1 + w (found on fake CUDA).
        inv.at(Part::QkNorm).add(
            "q_norm/k_norm: fp32 inputs and fp32 normalized inputs (saved by pow, mul)",
            2 * t * (q + kv),
            DType::F32,
        );
        inv.add(
            "q_norm/k_norm: rsqrt of the variance (one per head)",
            t * (q + kv) / spec.head_dim,
            DType::F32,
        );
        inv.add(
            "q_norm/k_norm: 1 + weight, fp32 (saved by mul)",
            2 * spec.head_dim,
            DType::F32,
        );
    } else if spec.qk_norm {
        // Per-head RMSNorm on q and k before RoPE (Qwen3): fp32 input + normalized.
        let per = if c == DType::F32 { 2 } else { 1 };
        inv.at(Part::QkNorm).add(
            "q_norm/k_norm: fp32 inputs and normalized outputs",
            (t * (q + kv)) * per,
            DType::F32,
        );
        // The rsqrt of each head's variance, fp32, saved by the normalizing mul (found at
        // full size on fake CUDA: tests/reference/test_cuda_fake.py).
        inv.add(
            "q_norm/k_norm: rsqrt of the variance (one per head)",
            t * (q + kv) / spec.head_dim,
            DType::F32,
        );
        if c != DType::F32 {
            inv.add("q_norm/k_norm: normalized outputs", t * (q + kv), c);
        }
    }
    if let Some(l4) = &spec.llama4 {
        llama4_qk(inv, (l4, spec.head_dim), sh, l);
    }
    if spec.family == Family::Glm4 {
        // GLM-4's apply_rotary_pos_emb interleaves cos and sin afresh in every layer
        // (`repeat_interleave`), and its multiplies save those copies, not the shared tables.
        let rope = sh.stream();
        inv.add(
            "RoPE cos and sin, interleaved in this layer (saved by RoPE's multiplies)",
            2 * sh.s * spec.rotary_dim(),
            rope,
        );
    }
    inv.at(Part::AttentionCore);
    match sh.attention {
        Attention::Sdpa | Attention::Flash2 | Attention::Flash3 | Attention::Flex
            if l.kernel == Backend::Math =>
        {
            math_attention(inv, sh, l)
        }
        Attention::Sdpa | Attention::Flash2 | Attention::Flash3 | Attention::Flex => {
            // Flash/efficient kernels: q, k, v, output and the fp32 logsumexp; no s x s.
            // Under autocast SDPA casts the fp32 rotated q and k to the compute dtype.
            if repeats_kv(spec, sh, l) {
                // transformers' repeat_kv copies k and v to every query head (no enable_gqa
                // with a mask or wide heads): SDPA saves the copies (measured on CPU for Llama
                // 4's chunked layers).
                inv.add("q after RoPE (saved by SDPA)", t * q, c);
                inv.add(
                    "k after RoPE, repeated to all heads (repeat_kv; saved by SDPA)",
                    t * kv * l.groups,
                    c,
                );
                inv.add(
                    "v repeated to all heads (repeat_kv; saved by SDPA)",
                    t * kv * l.groups,
                    c,
                );
            } else if spec.family == Family::Phi3 {
                // q and k rotated (new tensors); v a view of the fused output, or with the KV
                // cache on the cache's concatenated copy (found on fake CUDA).
                inv.add("q, k (rotated) (saved by SDPA)", t * (q + kv), c);
                if sh.kv_cache {
                    inv.add(
                        "v concatenated into the KV cache (use_cache; saved by SDPA)",
                        t * kv,
                        c,
                    );
                } else {
                    inv.add(
                        "fused qkv output, kept by the v view (saved by SDPA)",
                        t * (q + 2 * kv),
                        c,
                    );
                }
            } else if let Some(m) = &spec.mla {
                inv.add(
                    "q, unrotated and rotated parts joined (saved by SDPA)",
                    t * q,
                    c,
                );
                inv.add("k expanded from the latent (saved by SDPA)", t * kv, c);
                // v is a view of kv_b_proj's output (16-bit already under autocast, so not
                // cast): SDPA keeps that whole storage, the unrotated k's columns too.
                inv.add(
                    "kv_b_proj output, kept by the v view (saved by SDPA)",
                    t * l.heads * (m.qk_nope_head_dim + m.v_head_dim),
                    c,
                );
            } else {
                inv.add("q after RoPE (saved by SDPA)", t * q, c);
                inv.add("k after RoPE (saved by SDPA)", t * kv, c);
                inv.add("v (saved by SDPA)", t * kv, c);
            }
            window_mask(inv, spec, sh, l);
            sdpa_outputs(inv, sh, l);
        }
        Attention::Eager if spec.is_gpt_oss() => sink_attention(inv, sh, l),
        Attention::Eager => {
            // Eager: matmul(q, k^T) saves q and the repeated k; softmax saves its fp32 output,
            // which is cast back to the query dtype (fp32 under autocast, where matmul then
            // casts it) and saved by matmul(probs, v) with the repeated v.
            let grouped = l.groups > 1;
            inv.add("q after RoPE (saved by matmul q k^T)", t * q, c);
            let k_what = if grouped {
                "k repeated to all heads (saved by matmul q k^T)"
            } else {
                "k after RoPE (saved by matmul q k^T)"
            };
            inv.add(k_what, t * kv * l.groups, c);
            // Llama 4's softmax runs in the scores' dtype: the residual stream's (its mask,
            // in the stream's dtype, promotes the 16-bit scores under autocast).
            let probs = if spec.llama4.is_some() {
                sh.stream()
            } else {
                DType::F32
            };
            inv.at(Part::AttentionScores).add(
                if probs == DType::F32 {
                    "softmax output, fp32 (saved by softmax)"
                } else {
                    "softmax output (saved by softmax)"
                },
                l.scores,
                probs,
            );
            if !eager_dropout(inv, sh, l, sh.compute()) && c != probs {
                inv.add(
                    "probabilities cast to the compute dtype (saved by matmul probs v)",
                    l.scores,
                    c,
                );
            }
            // (Multi-head latent attention's v is a strided view, which matmul copies.)
            let v_what = if grouped {
                "v repeated to all heads (saved by matmul probs v)"
            } else {
                "v (saved by matmul probs v)"
            };
            inv.at(Part::AttentionCore)
                .add(v_what, t * l.v * l.groups, c);
        }
    }
    // attn_output.transpose(1, 2).contiguous(): the fused kernels already write their output
    // in (batch, seq, heads, dim) layout, so o_proj saves a view of it; eager's and the math
    // kernel's matmul output is (batch, heads, seq, dim) and the transpose makes a copy that
    // o_proj saves.
    // A q that reaches the kernel heads-first makes the transpose copy too (`q_heads_first`).
    inv.at(Part::OutputProjection);
    if spec.gated_attention() {
        // Qwen3-Next multiplies the attention output by sigmoid(gate) before o_proj: the
        // sigmoid of the gate half of q_proj's output and the contiguous attention output (a
        // copy where the kernel wrote it heads first, else the fused kernel's own output) are
        // saved by the product, which o_proj saves in turn.
        inv.add("output gate sigmoid (saved by the product)", t * l.o, c);
        if l.quadratic(sh) || q_heads_first(spec, l) {
            inv.add(
                "contiguous attention output (saved by the gate's product)",
                t * l.o,
                c,
            );
        }
        linear_inputs(inv, "o_proj input (gated attention output)", t * l.o, 1, sh);
    } else if !sh.base_trainable && !sh.lora_o {
        // A frozen o_proj without an adapter keeps nothing.
    } else if !sh.base_trainable && !l.quadratic(sh) && !q_heads_first(spec, l) {
        // LoRA: the fused kernel's output, which the kernel saves, is o_proj's input as it is
        // (the transpose makes no copy): lora_A keeps only the copies it casts.
        lora_adapter_inputs(
            inv,
            "o_proj input (the kernel's output)",
            t * l.o,
            1,
            sh,
            true,
        );
    } else if l.quadratic(sh) || !sh.base_trainable || q_heads_first(spec, l) {
        linear_inputs(
            inv,
            "o_proj input (contiguous attention output)",
            t * l.o,
            1,
            sh,
        );
    } else if sh.te_fp8 {
        // The kernel's output is o_proj's input, saved by the kernel; a te.Linear saves its
        // own fp8 copy of it besides.
        te_linear_inputs(inv, "o_proj input (the kernel's output)", t * l.o, 1);
    }
    if sh.dora && !sh.base_trainable && sh.lora_o {
        // Its input is attention's output, in the compute dtype, which a 4-bit Linear returns.
        dora_outputs(inv, "o_proj", (l.o, sh.compute()), &[l.h_local], sh);
    }
    residual_dropout(inv, sh, l, Part::AttentionResidualDropout);
}

/// Whether q reaches a fused kernel laid out (batch, heads, seq, dim): a half-rotary q (GLM-4
/// and its MoE, multi-head latent attention) comes from `torch.cat` in that layout, and so
/// does RoPE's result when q is a slice of a fused qkv output (Phi-3, GPT-NeoX: the strided
/// view is not dense, and the elementwise ops write a contiguous result). The flash and cuDNN
/// kernels write their output in q's layout, so `transpose(1, 2).contiguous()` copies it
/// before the output projection; the memory-efficient kernel always writes (batch, seq, heads,
/// dim). Found on fake CUDA (tests/reference/test_cuda_fake.py).
fn q_heads_first(spec: &ModelSpec, l: &Layout) -> bool {
    let heads_first =
        spec.rotary_dim() < spec.head_dim || matches!(spec.family, Family::Phi3 | Family::GptNeox);
    heads_first && l.kernel != Backend::Efficient
}

/// Llama 4's RoPE layers L2-normalize q and k after RoPE (`Llama4TextL2Norm`, no weight:
/// `x.float()` saved by pow and mul, and the rsqrt per head), where `use_qk_norm`; its NoPE
/// layers scale q by a per-position temperature (`attn_temperature_tuning`), an fp32 vector of
/// the sequence's length that the multiply saves. RoPE itself (a complex multiply by the
/// shared `freqs_cis`) saves nothing of its own.
fn llama4_qk(
    inv: &mut Inventory,
    (l4, head_dim): (&crate::model::Llama4, u64),
    sh: &Shape,
    l: &Layout,
) {
    if !l.other && l4.qk_l2_norm {
        inv.at(Part::QkNorm).add(
            "q/k L2 norm: fp32 q and k (saved by pow, mul)",
            l.t * (l.q + l.kv),
            DType::F32,
        );
        inv.add(
            "q/k L2 norm: rsqrt per head (saved by mul)",
            l.t * (l.q + l.kv) / head_dim,
            DType::F32,
        );
    } else if l.other && l4.temperature_tuning {
        inv.at(Part::AttentionInputs).add(
            "attention temperature per position, fp32 (saved by mul with q)",
            sh.s,
            DType::F32,
        );
    }
}

/// Qwen3-Next's RMSNorm (`Qwen3NextRMSNorm`): `(x.float() * rsqrt) * (1.0 + weight.float())`,
/// all fp32: the fp32 input (a copy unless `dtype` is fp32) saved by pow and mul, the rsqrt of
/// each row's variance, `1 + weight` (saved by the product) and, when the weight trains, the
/// normalized input. `(input, normalized, weight)`: the elements of the saved input (more
/// than the normalized ones where the input is a view of a wider output), of the normalized
/// tensor, and of the weight (one row's width).
fn zero_centred_norm(
    inv: &mut Inventory,
    name: &str,
    (input, normalized, weight): (u64, u64, u64),
    sh: &Shape,
    dtype: DType,
) {
    let what = if dtype == DType::F32 {
        "input (saved by pow, mul)"
    } else {
        "fp32 copy of the input (saved by pow, mul)"
    };
    inv.add(format!("{name}: {what}"), input, DType::F32);
    inv.add(
        format!("{name}: rsqrt of the variance"),
        normalized / weight.max(1),
        DType::F32,
    );
    inv.add(
        format!("{name}: 1 + weight, fp32 (saved by the product)"),
        weight,
        DType::F32,
    );
    if sh.base_trainable {
        inv.add(
            format!("{name}: normalized input, fp32 (saved by the product with 1 + weight)"),
            normalized,
            DType::F32,
        );
    }
}

/// Qwen3-Next's gated DeltaNet (`Qwen3NextGatedDeltaNet`) as transformers runs it without the
/// fla and causal-conv1d kernels (its torch fallbacks, `torch_causal_conv1d_fn` and
/// `torch_chunk_gated_delta_rule`, which CPU runs): the depthwise conv1d over q, k and v, beta
/// and the decay, then the chunked delta rule in fp32 (chunks of 64, the sequence padded to
/// them): q and k L2-normalized, the chunk-local systems solved by `solve_triangular`, a
/// Python loop over the chunks carrying the recurrent state (each chunk's state and new values
/// saved); then the gated RMSNorm over each value head and out_proj. On GPUs the fla Triton
/// kernel runs instead and saves differently (assumed: not modelled; the torch path is what
/// is estimated).
fn gated_delta_net(
    inv: &mut Inventory,
    sh: &Shape,
    l: &Layout,
    la: &crate::model::LinearAttention,
) {
    const CHUNK: u64 = 64;
    let (t, c, x) = (l.t, sh.compute(), sh.stream());
    let f32 = DType::F32;
    let tp = sh.tp.max(1);
    let (hv, dk, dv) = (la.value_heads / tp, la.key_head_dim, la.value_head_dim);
    let (kd, vd) = (la.key_dim() / tp, la.value_dim() / tp);
    let conv = 2 * kd + vd;
    let chunks = sh.s.div_ceil(CHUNK);
    // Padded tokens over the micro-batch, and per value head.
    let tp_pad = sh.b * chunks * CHUNK;
    linear_inputs(inv, "in_proj_qkvz/in_proj_ba input", l.th, 2, sh);
    inv.add("q, k, v joined (saved by conv1d)", t * conv, c);
    inv.add(
        "conv1d output with its kernel - 1 extra positions (saved by silu)",
        sh.b * conv * (sh.s + la.conv_kernel - 1),
        c,
    );
    inv.add("beta (saved by sigmoid)", t * hv, c);
    if sh.base_trainable {
        inv.add(
            "exp(A_log), fp32 (saved by exp and the decay's product)",
            2 * hv,
            f32,
        );
        inv.add(
            "softplus output, fp32 (saved by the decay's product)",
            t * hv,
            f32,
        );
    }
    inv.add("a + dt_bias, fp32 (saved by softplus)", t * hv, f32);
    inv.at(Part::AttentionCore);
    inv.add_n(
        "q and k in fp32, per value head (saved by the L2 norm)",
        t * hv * dk,
        f32,
        2,
    );
    inv.add_n("L2 norm's rsqrt of q and of k", t * hv, f32, 2);
    inv.add(
        "beta in fp32, padded (saved by v * beta, k * beta)",
        tp_pad * hv,
        f32,
    );
    inv.add(
        "v in fp32, padded (saved by v * beta)",
        tp_pad * hv * dv,
        f32,
    );
    inv.add(
        "strictly upper mask of a chunk, bool",
        CHUNK * CHUNK,
        DType::Bool,
    );
    // Under autocast the matmuls run in the compute dtype: their fp32 operands are cast (each
    // cast saved), and (k beta) k^T and q k^T come out 16-bit.
    let amp = sh.amp();
    let mm = if amp { c } else { f32 };
    let (state, chunk_tokens) = (sh.b * hv * dk * dv, tp_pad * hv);
    inv.add_n(
        "pairwise decay and the triangular system (chunk x chunk)",
        chunk_tokens * CHUNK,
        f32,
        2,
    );
    inv.add_n(
        "(k beta) k^T and q k^T (chunk x chunk, saved by their products with the decay)",
        chunk_tokens * CHUNK,
        mm,
        2,
    );
    inv.add(
        "intra-chunk attention (chunk x chunk, saved by its matmul with v_new)",
        chunk_tokens * CHUNK,
        mm,
    );
    inv.add_n(
        "k normalized and padded, k * beta, q scaled, the solved k cumulative decay",
        chunk_tokens * dk,
        f32,
        4,
    );
    inv.add(
        "k decayed to the chunk's end (saved by k^T @ v_new)",
        chunk_tokens * dk,
        mm,
    );
    if amp {
        inv.add_n(
            "k^T (twice), k * beta and q scaled cast for their matmuls",
            chunk_tokens * dk,
            c,
            4,
        );
    } else if c == f32 && sh.s.is_multiple_of(CHUNK) {
        // In fp32 `.to(float32, memory_format=contiguous_format)` returns the transposed view
        // as it is, and so does F.pad with nothing to pad, so at::matmul's folding into bmm
        // copies k^T (twice), k * beta and q (padding makes them contiguous).
        inv.add_n(
            "k^T (twice), k * beta and q copied contiguous by matmul",
            chunk_tokens * dk,
            f32,
            4,
        );
    }
    inv.add(
        "new values (solved by solve_triangular)",
        chunk_tokens * dv,
        f32,
    );
    inv.add_n("exp of the cumulative decays", chunk_tokens, f32, 3);
    inv.add("exp of each chunk's total decay", sh.b * hv * chunks, f32);
    inv.add_n(
        "recurrent state entering each chunk (saved by the decay's product)",
        state,
        f32,
        chunks,
    );
    if amp {
        inv.add_n(
            "each chunk's state cast for k_cumdecay @ state and q @ state",
            state,
            c,
            2 * chunks,
        );
        inv.add_n(
            "each chunk's v_new cast for its two matmuls",
            chunk_tokens * dv,
            c,
            2,
        );
    } else {
        inv.add(
            "each chunk's v_new (saved by its matmuls)",
            chunk_tokens * dv,
            f32,
        );
    }
    if chunks > 1 && amp {
        // From the second chunk on the state carries gradients: q @ state and k_cumdecay @
        // state also save their q and k_cumdecay chunks, cast.
        inv.add_n(
            "the later chunks' decayed q and k_cumdecay, cast for their matmuls with the state",
            sh.b * hv * CHUNK * dk,
            c,
            2 * (chunks - 1),
        );
    } else if chunks > 1 {
        inv.add(
            "q decayed (saved by q @ state once the state carries gradients)",
            chunk_tokens * dk,
            f32,
        );
    }
    // The gated RMSNorm (`Qwen3NextRMSNormGated`) over each value head: fp32 input, rsqrt,
    // the normalized input cast back (saved by the weight's product, when the weight trains),
    // the fp32 gate z and its silu, and the weight's product (in the weight's dtype).
    inv.at(Part::OutputProjection);
    inv.add(
        "gated norm: fp32 copy of the input (saved by pow, mul)",
        t * vd,
        f32,
    );
    inv.add("gated norm: rsqrt of the variance", t * hv, f32);
    if sh.base_trainable {
        inv.add(
            "gated norm: normalized input (saved by the weight's product)",
            t * vd,
            c,
        );
    }
    inv.add("gated norm: z in fp32 (saved by silu)", t * vd, f32);
    inv.add("gated norm: silu(z) (saved by the product)", t * vd, f32);
    inv.add(
        "gated norm: weight * normalized (saved by the product)",
        t * vd,
        x,
    );
    linear_inputs(inv, "out_proj input", t * vd, 1, sh);
}

/// Qwen3-Next's MoE (`Qwen3NextSparseMoeBlock`): the shared expert, the router (softmax over
/// all experts in fp32, top-k renormalized by a division) and the grouped_mm experts as
/// gpt-oss's run (tokens x top-k rows whatever the routing, in the weights' dtype, which
/// autocast leaves alone), and the shared expert's sigmoid gate. Under autocast the shared
/// expert's gate/up, the router and the shared gate each cast the input.
fn qwen3_next_moe(inv: &mut Inventory, spec: &ModelSpec, sh: &Shape, m: &Moe) {
    let (t, c, x) = (sh.tokens(), sh.compute(), sh.stream());
    let (h, f, si) = (
        spec.hidden,
        m.expert_intermediate / sh.tp,
        m.shared_intermediate / sh.tp,
    );
    let r = t * m.top_k;
    if sh.base_trainable {
        linear_inputs(
            inv,
            "shared expert gate/up, router and shared gate input",
            t * h,
            4,
            sh,
        );
    } else {
        mlp_lora_inputs(inv, "shared expert gate/up_proj input", t * h, 2, sh);
    }
    shared_expert_mlp(inv, t * si, c, sh);
    inv.add(
        "router probabilities, fp32 (saved by softmax)",
        t * m.experts,
        DType::F32,
    );
    inv.add(
        "router's top-k indices, int64 (saved by topk)",
        r,
        DType::I64,
    );
    inv.add(
        "top-k probabilities and their sum, fp32 (saved by the division)",
        r + t,
        DType::F32,
    );
    grouped_mm_dispatch(inv, (r, h, m.experts), 3, x, sh);
    inv.add(
        "gate_up output (saved by the activation and the product)",
        2 * r * f,
        x,
    );
    inv.add("activation output (saved by the product)", r * f, x);
    if sh.base_trainable {
        inv.add(
            "product act(gate) * up (saved by the down grouped_mm)",
            r * f,
            x,
        );
    }
    inv.add("routing weights in expert order (saved by mul)", r, c);
    inv.add(
        "down output (saved by mul with the routing weights)",
        r * h,
        x,
    );
    inv.add("shared gate's sigmoid (saved by the product)", t, c);
    inv.add(
        "shared expert output (saved by the product with its gate)",
        t * h,
        c,
    );
}

/// Multi-head latent attention's projections before the attention core
/// (`DeepseekV3Attention.forward`): q_a_proj (or q_proj) and kv_a_proj_with_mqa read the
/// norm's output; q_a_layernorm and kv_a_layernorm normalize the two latents, which q_b_proj
/// and kv_b_proj read.
fn mla_projections(inv: &mut Inventory, spec: &ModelSpec, sh: &Shape, l: &Layout, m: &Mla) {
    let (t, c) = (l.t, sh.compute());
    if m.q_lora_rank > 0 {
        let r = m.q_lora_rank;
        linear_inputs(inv, "q_a_proj/kv_a_proj_with_mqa input", l.th, 2, sh);
        rms_norm_of(inv, "q_a_layernorm", (t, r, c), sh, spec.family);
        linear_inputs(inv, "q_b_proj input (q_a_layernorm output)", t * r, 1, sh);
    } else {
        linear_inputs(inv, "q_proj/kv_a_proj_with_mqa input", l.th, 2, sh);
    }
    // kv_a_layernorm reads the latent columns of kv_a_proj_with_mqa's output, a view: its fp32
    // cast copies the view in 16-bit, but in fp32 `.to` returns the view, so pow and mul keep
    // the whole output (the shared rotated k's columns too).
    let kvr = m.kv_lora_rank;
    let (first, what) = if c == DType::F32 {
        (
            t * (kvr + m.qk_rope_head_dim),
            "kv_a_layernorm: kv_a_proj_with_mqa output, kept by its input view (saved by pow, mul)",
        )
    } else {
        (
            t * kvr,
            "kv_a_layernorm: fp32 copy of the input (saved by pow, mul)",
        )
    };
    inv.add(what, first, DType::F32);
    inv.add("kv_a_layernorm: rsqrt of the variance", t, DType::F32);
    if sh.base_trainable {
        inv.add(
            "kv_a_layernorm: normalized input (saved by mul with weight)",
            t * kvr,
            c,
        );
    }
    linear_inputs(
        inv,
        "kv_b_proj input (kv_a_layernorm output)",
        t * kvr,
        1,
        sh,
    );
}

/// gpt-oss's eager attention (`eager_attention_forward` in modeling_gpt_oss): each head's
/// sink logit is joined to the scores by `torch.cat`, the row maximum subtracted (max keeps
/// its int64 indices), and the softmax runs in the logits' dtype (the residual stream's: bf16
/// in bf16, fp32 under autocast, where the fp32 mask promotes them) over s + 1 columns; the
/// probabilities without the sink column are a view that matmul reads as it is, cast to v's
/// dtype first when they differ.
fn sink_attention(inv: &mut Inventory, sh: &Shape, l: &Layout) {
    let Layout { t, q, kv, .. } = *l;
    let c = sh.compute();
    let grouped = l.groups > 1;
    inv.add("q after RoPE (saved by matmul q k^T)", t * q, c);
    let k_what = if grouped {
        "k repeated to all heads (saved by matmul q k^T)"
    } else {
        "k after RoPE (saved by matmul q k^T)"
    };
    inv.add(k_what, t * kv * l.groups, c);
    let rows = sh.b * l.heads * sh.s;
    inv.add(
        "row maximum's indices, int64 (saved by max)",
        rows,
        DType::I64,
    );
    let logits = sh.stream();
    inv.at(Part::AttentionScores).add(
        "softmax output over the scores and the sink (saved by softmax)",
        rows * (sh.s + 1),
        logits,
    );
    if !eager_dropout(inv, sh, l, c) && logits != c {
        inv.add(
            "probabilities cast to the compute dtype (saved by matmul probs v)",
            l.scores,
            c,
        );
    }
    let v_what = if grouped {
        "v repeated to all heads (saved by matmul probs v)"
    } else {
        "v (saved by matmul probs v)"
    };
    inv.at(Part::AttentionCore)
        .add(v_what, t * l.v * l.groups, c);
}

/// A Llama-like layer's second half: the norm(s) around the MLP (Gemma 2/3 add one after
/// attention and one after the MLP), the MLP that `mlp` adds, and the residual dropout.
fn llama_mlp_side(
    inv: &mut Inventory,
    spec: &ModelSpec,
    sh: &Shape,
    l: &Layout,
    mlp: impl FnOnce(&mut Inventory),
) {
    let family = spec.family;
    let (nt, h) = (l.norm_tokens, l.h_local);
    if family == Family::Olmo2 {
        // OLMo 2 normalizes the attention output and the MLP output; the MLP reads the
        // residual stream itself.
        inv.at(Part::MlpNorm);
        rms_norm(inv, "post_attention_layernorm", nt, h, sh, family);
        inv.at(Part::Mlp);
        mlp(inv);
        rms_norm(inv, "post_feedforward_layernorm", nt, h, sh, family);
        return residual_dropout(inv, sh, l, Part::MlpResidualDropout);
    }
    // The norms after attention and after the MLP (Gemma 2/3, GLM-4) read a projection's
    // output, in the compute dtype.
    let four_norms = spec.norms_per_layer == 4;
    let post = (nt, h, sh.compute());
    inv.at(Part::MlpNorm);
    // (Named as Gemma 2 names them; GLM-4's are post_self_attn, post_attention, post_mlp.)
    if four_norms {
        rms_norm_of(inv, "post_attention_layernorm", post, sh, family);
    }
    let second = if four_norms {
        "pre_feedforward_layernorm"
    } else {
        "post_attention_layernorm"
    };
    if spec.gated_attention() {
        zero_centred_norm(inv, second, (nt * h, nt * h, h), sh, sh.stream());
    } else {
        rms_norm(inv, second, nt, h, sh, norm_family(spec));
    }
    inv.at(Part::Mlp);
    mlp(inv);
    if four_norms {
        rms_norm_of(inv, "post_feedforward_layernorm", post, sh, family);
    }
    residual_dropout(inv, sh, l, Part::MlpResidualDropout);
}

/// Whether transformers' SDPA path copies k and v to every query head before the call
/// (`sdpa::sdpa_takes_gqa`): grouped-query attention in a masked layer, or with heads wider
/// than 256. With one key/value head on the GPU `repeat_kv`'s reshape of the expanded
/// tensor is a view, and the kernel saves the head itself (fake CUDA: Gemma 3 1B).
fn repeats_kv(spec: &ModelSpec, sh: &Shape, l: &Layout) -> bool {
    sh.attention == Attention::Sdpa
        && l.groups > 1
        && l.kv > spec.head_dim
        && !sdpa::sdpa_takes_gqa(spec, l.masked)
}

/// A masked local layer's attention mask as SDPA saves it: transformers' boolean (batch, 1,
/// s, s) mask becomes a float one in q's dtype (`convert_boolean_attn_mask`, materialized
/// over the batch), which the fused kernels keep for backward as `attn_bias`; the
/// memory-efficient kernel pads its last dimension to a multiple of 16 (`preprocess_mask`)
/// and keeps the padded storage. The math kernel adds it in place and keeps nothing.
/// Measured on CPU and on an H100 (cuDNN): OLMo 3's sliding layers, Llama 4's chunked ones.
fn window_mask(inv: &mut Inventory, spec: &ModelSpec, sh: &Shape, l: &Layout) {
    if !l.masked || l.kernel == Backend::Math || sh.attention != Attention::Sdpa {
        return;
    }
    let cols = if l.kernel == Backend::Efficient {
        sh.s.div_ceil(16) * 16
    } else {
        sh.s
    };
    let what = if spec.llama4.is_some() {
        "chunked-attention mask in q's dtype (saved by SDPA)"
    } else {
        "sliding-window mask in q's dtype (saved by SDPA)"
    };
    inv.add(what, sh.b * sh.s * cols, sh.compute());
}

/// What fused attention (SDPA's flash, memory-efficient and cuDNN kernels) saves besides q,
/// k and v: the output, the fp32 logsumexp and the kernel's RNG tensors.
fn sdpa_outputs(inv: &mut Inventory, sh: &Shape, l: &Layout) {
    inv.add("attention output (saved by SDPA)", l.t * l.o, sh.compute());
    // The memory-efficient kernel pads the logsumexp's sequence to a multiple of 32
    // (`_efficient_attention_forward`; torch/_meta_registrations.py); flash keeps
    // (b, heads, s) and cuDNN (b, heads, s, 1).
    let (rows, what) = if l.kernel == Backend::Efficient {
        (
            sh.s.div_ceil(32) * 32,
            "logsumexp, sequence padded to 32 (saved by SDPA)",
        )
    } else {
        (sh.s, "logsumexp (saved by SDPA)")
    };
    inv.add(what, sh.b * l.heads * rows, DType::F32);
    if sh.attention == Attention::Sdpa {
        // SDPA's CUDA kernels return their philox seed and offset whether dropout is on or
        // not, and the backward keeps them: 16 B for cuDNN and memory-efficient, 24 B for
        // flash (`rng_state` and `unused`). Measured on an H100 (torch 2.11): each kernel
        // forced in turn, every layer's saved bytes exact with these.
        let (n, what) = if l.kernel == Backend::Flash {
            (
                3,
                "RNG state: rng_state and unused (saved by SDPA's flash kernel)",
            )
        } else {
            (2, "RNG state: philox seed and offset (saved by SDPA)")
        };
        inv.add(what, n, DType::I64);
    } else if sh.attention_dropout > 0.0 {
        // flash-attn regenerates the dropout mask from its saved RNG state (assumed).
        inv.add("dropout RNG state (saved by flash-attn)", 2, DType::I64);
    }
}

/// SDPA's math kernel (`_scaled_dot_product_attention_math`, the same composite on CUDA and
/// CPU): fp16/bf16 inputs are first cast to fp32 (PyTorch's default,
/// `allow_fp16_bf16_reduction_math_sdp(False)`), then q and k scaled by sqrt(scale) each
/// (new tensors, which the q k^T matmul saves, k repeated to all heads under GQA), the
/// softmax output, dropout's mask and dropped probabilities, and v (repeated under GQA) for
/// the probs v matmul, all fp32. No logsumexp. (Measured on CPU, where SDPA with dropout
/// runs this kernel: `tests/reference`.)
fn math_attention(inv: &mut Inventory, sh: &Shape, l: &Layout) {
    let c = DType::F32;
    inv.add("q scaled (saved by matmul q k^T, SDPA math)", l.t * l.q, c);
    inv.add(
        "k scaled, repeated to all heads (saved by matmul q k^T, SDPA math)",
        l.t * l.kv * l.groups,
        c,
    );
    inv.at(Part::AttentionScores)
        .add("softmax output (saved by softmax, SDPA math)", l.scores, c);
    eager_dropout(inv, sh, l, c);
    inv.at(Part::AttentionCore).add(
        "v, repeated to all heads (saved by matmul probs v, SDPA math)",
        l.t * l.v * l.groups,
        c,
    );
}

/// Eager attention's dropout on the probabilities: the mask and the dropped probabilities
/// (which matmul(probs, v) saves). Returns whether dropout is on.
fn eager_dropout(inv: &mut Inventory, sh: &Shape, l: &Layout, dtype: DType) -> bool {
    if sh.attention_dropout <= 0.0 {
        return false;
    }
    inv.add(
        "attention dropout mask (saved by dropout)",
        l.scores,
        DType::Bool,
    );
    inv.add(
        "dropped probabilities (saved by matmul probs v)",
        l.scores,
        dtype,
    );
    true
}

/// The residual dropout mask after attention or after the MLP.
fn residual_dropout(inv: &mut Inventory, sh: &Shape, l: &Layout, part: Part) {
    if sh.residual_dropout > 0.0 {
        let what = if part == Part::MlpResidualDropout {
            "residual dropout mask (MLP)"
        } else {
            "residual dropout mask (attention)"
        };
        inv.at(part).add(what, l.th, DType::Bool);
    }
}

/// act(gate(x)) * up(x) then down: the gate output (activation input), the activation
/// output and the up output (both saved by the product) and the product (down's input).
fn gated_mlp(inv: &mut Inventory, spec: &ModelSpec, sh: &Shape, f: u64) {
    let t = sh.tokens();
    // Linear outputs: the compute dtype, the stream's for QLoRA's 4-bit Linears.
    let c = sh.linear_out();
    // The sequence-sharded input with sequence parallelism, as for the attention projections.
    let th = if sh.sp {
        t * spec.hidden / sh.tp
    } else {
        t * spec.hidden
    };
    let fused = spec.fused_gate_up();
    if fused {
        mlp_linear_inputs(inv, "gate_up_proj input", th, 1, sh);
    } else if spec.family == Family::Cohere2 {
        // Counted with the attention projections, which read the same norm output.
    } else {
        mlp_linear_inputs(inv, "gate/up_proj input", th, 2, sh);
        if sh.dora && sh.lora_mlp && !sh.base_trainable {
            dora_outputs(inv, "gate/up_proj", (spec.hidden, c), &[f, f], sh);
        }
    }
    let what = if fused {
        "gate_up output (saved by the activation and the product)"
    } else {
        "gate output (saved by the activation)"
    };
    if fused {
        inv.add(what, 2 * t * f, c);
    } else {
        inv.add(what, t * f, c);
        inv.add("up output (saved by the product)", t * f, c);
    }
    inv.add("activation output (saved by the product)", t * f, c);
    if sh.base_trainable {
        next_linear_input(
            inv,
            "product act(gate) * up (saved by down_proj)",
            t * f,
            c,
            sh,
        );
    } else {
        mlp_lora_inputs(inv, "down_proj input", t * f, 1, sh);
        if sh.dora && sh.lora_mlp {
            dora_outputs(inv, "down_proj", (f, c), &[spec.hidden / sh.tp.max(1)], sh);
        }
    }
}

/// Routed experts: each token visits top-k experts; the router saves its logits and probs.
fn moe_mlp(inv: &mut Inventory, spec: &ModelSpec, sh: &Shape) {
    let Some(m) = &spec.moe else { return };
    if spec.is_gpt_oss() {
        return gpt_oss_moe(inv, spec, sh, m);
    }
    if spec.llama4.is_some() {
        return llama4_moe(inv, spec, sh, m);
    }
    if spec.gated_attention() {
        return qwen3_next_moe(inv, spec, sh, m);
    }
    let t = sh.tokens();
    let c = sh.compute();
    let routed = t * m.top_k;
    if m.router != Router::Softmax {
        deepseek_router(inv, spec, sh, m);
    } else {
        softmax_router(inv, spec, sh, m);
    }
    // transformers' grouped_mm experts (`integrations/moe.py`, the default on sm80+ and on
    // CPU): the routed rows sorted by expert, their orders and the rows per expert. Measured
    // on fake CUDA at full size (Mixtral, Qwen1.5/Qwen3-MoE, Granite-MoE: exact).
    inv.add_n(
        "routed rows' orders, int64 (saved by the gathers and the scatter back)",
        routed,
        DType::I64,
        3,
    );
    inv.add(
        "rows per expert, int32 (saved by grouped_mm)",
        m.experts,
        DType::I32,
    );
    // Each routed token carries its hidden state and the expert MLP intermediates. Autocast
    // has no rule for grouped_mm: under it the experts run in the weights' dtype, fp32 (as
    // gpt-oss's do; fake CUDA at full size: Mixtral and Qwen MoE 30-41% under before).
    let x = if sh.amp() { sh.stream() } else { c };
    inv.add(
        "tokens gathered per expert (saved by the experts' grouped_mm)",
        routed * spec.hidden,
        x,
    );
    let f = m.expert_intermediate / sh.tp;
    inv.add_n(
        "expert intermediates (gate, up, activation, product)",
        routed * f,
        x,
        4,
    );
    inv.add(
        "routing weights applied to expert outputs",
        routed * spec.hidden,
        x,
    );
    // Each routed row's weight, saved by its multiply: in the router's score dtype (Mixtral's
    // and DeepSeek's routers: fp32 but for DeepSeek-V3's under autocast); Granite casts it to
    // the hidden states' dtype (`type_as`: fp32 under autocast, fake CUDA at full size), the
    // others to the logits' dtype.
    let weight = match m.router {
        Router::Softmax if spec.model_type == "mixtral" => DType::F32,
        Router::Softmax if spec.model_type == "granitemoe" => sh.stream(),
        Router::Softmax => c,
        _ => deepseek_score_dtype(m, sh),
    };
    inv.add(
        "routing weight of each routed row (saved by mul)",
        routed,
        weight,
    );
    if m.shared_intermediate > 0 {
        gated_mlp(inv, spec, sh, m.shared_intermediate / sh.tp);
        if m.shared_gate {
            // sigmoid(shared_expert_gate(x)) * shared_expert(x): the product saves both; the
            // gate's Linear saves its own cast of x under autocast (fake CUDA, Qwen1.5-MoE at
            // full size: exact in bf16 and under autocast).
            if sh.amp() {
                mlp_linear_inputs(inv, "shared_expert_gate input", t * spec.hidden, 1, sh);
            }
            inv.add("shared expert gate output", t, c);
            inv.add(
                "shared expert output (saved by the gate's product)",
                t * spec.hidden,
                c,
            );
        }
    }
}

/// The generic router (`Router::Softmax`): a Linear in the compute dtype, a softmax, top-k.
fn softmax_router(inv: &mut Inventory, spec: &ModelSpec, sh: &Shape, m: &Moe) {
    let t = sh.tokens();
    let routed = t * m.top_k;
    // With Qwen2-MoE's gated shared expert in full-precision training the router reads the
    // same norm output the shared expert's Linears save (counted with them); under autocast
    // each Linear saves its own cast copy.
    if !(m.shared_gate && sh.base_trainable && !sh.amp()) {
        router_inputs(inv, t * spec.hidden, sh);
    }
    if spec.model_type == "granitemoe" {
        // GraniteMoeTopKGating: top-k of the logits first, then a softmax over those k.
        inv.add(
            "router's top-k probabilities, fp32 (saved by softmax over the top-k logits)",
            routed,
            DType::F32,
        );
    } else {
        inv.add(
            "router probabilities, fp32 (saved by softmax and topk)",
            t * m.experts,
            DType::F32,
        );
    }
    inv.add(
        "router's top-k indices, int64 (saved by topk)",
        routed,
        DType::I64,
    );
    if m.norm_topk {
        topk_division(
            inv,
            "top-k probabilities, fp32 (saved by their in-place division by the sum)",
            (t, m.top_k),
            DType::F32,
        );
    }
}

/// A router's `topk_weights /= topk_weights.sum(...)`: the in-place division saves the top-k
/// weights (`what`, in `dtype`) and their sum, fp32 (autocast runs `sum` in fp32).
fn topk_division(inv: &mut Inventory, what: &str, (t, k): (u64, u64), dtype: DType) {
    inv.add(what, t * k, dtype);
    inv.add("their sum, fp32 (saved by the division)", t, DType::F32);
}

/// DeepSeek's routers (`Router::DeepseekV2`, `Router::DeepseekV3`): `F.linear(x.float(),
/// weight.float())`. In 16-bit training both casts are copies: the Linear saves x's (t x h,
/// for the weight's gradient, when the weight trains) and the weight's (experts x h, for x's).
/// In fp32 both are the tensors themselves: x is the norm output the shared experts' Linears
/// save too (counted with them). Under autocast the Linear runs in 16 bits and saves its own
/// cast of x, as any Linear does. Then the scores (softmax or sigmoid, fp32, saved by it), the
/// top-k indices and, for DeepSeek-V2's group-limited choice, the mask of the groups kept.
/// DeepSeek-V3's group top-k and mask only choose the experts: autograd frees what they saved
/// when the forward ends (fake CUDA at full size, GLM-4.5-Air; tests/reference).
fn deepseek_router(inv: &mut Inventory, spec: &ModelSpec, sh: &Shape, m: &Moe) {
    let (t, h) = (sh.tokens(), spec.hidden);
    if sh.amp() {
        router_inputs(inv, t * h, sh);
    } else if sh.stream() != DType::F32 {
        if sh.base_trainable {
            inv.add(
                "router input's fp32 copy (saved by the fp32 Linear)",
                t * h,
                DType::F32,
            );
        }
        inv.add(
            "router weight's fp32 copy (saved by the fp32 Linear)",
            m.experts * h,
            DType::F32,
        );
    } else if sh.base_trainable && m.shared_intermediate == 0 {
        inv.add("router input (saved by the Linear)", t * h, DType::F32);
    }
    let score = deepseek_score_dtype(m, sh);
    let scores = match m.router {
        Router::DeepseekV3 => "router scores (saved by sigmoid)",
        _ => "router probabilities, fp32 (saved by softmax)",
    };
    inv.add(scores, t * m.experts, score);
    if m.router
        == (Router::DeepseekV2 {
            group_limited: true,
        })
    {
        inv.add(
            "mask of the experts outside the chosen groups, bool (saved by masked_fill)",
            t * m.experts,
            DType::Bool,
        );
    }
    inv.add(
        "router's top-k indices, int64 (saved by topk and gather)",
        t * m.top_k,
        DType::I64,
    );
    if m.norm_topk {
        topk_division(
            inv,
            "top-k scores (saved by their in-place division by the sum)",
            (t, m.top_k),
            score,
        );
    }
}

/// The dtype of a DeepSeek router's scores and of the weights taken from them: fp32, but for
/// DeepSeek-V3's sigmoid under autocast, which reads the Linear's 16-bit logits (sigmoid is on
/// no autocast list; DeepSeek-V2's softmax asks for fp32).
fn deepseek_score_dtype(m: &Moe, sh: &Shape) -> DType {
    if m.router == Router::DeepseekV3 && sh.amp() {
        sh.compute()
    } else {
        DType::F32
    }
}

/// gpt-oss's MoE as transformers 5 runs it (`GptOssTopKRouter`, then the grouped_mm experts
/// of `integrations/moe.py`, its default): every token visits top-k experts, so the routed
/// rows (tokens x top-k, sorted by expert) have the same shapes whatever the routing. The
/// experts run in the weights' dtype (fp32 under autocast, which has no rule for grouped_mm);
/// the router's Linear is autocast's.
fn gpt_oss_moe(inv: &mut Inventory, spec: &ModelSpec, sh: &Shape, m: &Moe) {
    let (t, c, x) = (sh.tokens(), sh.compute(), sh.stream());
    let (h, f) = (spec.hidden, m.expert_intermediate / sh.tp);
    let r = t * m.top_k;
    router_inputs(inv, t * h, sh);
    inv.add(
        "router's top-k indices, int64 (saved by topk)",
        r,
        DType::I64,
    );
    inv.add("routing weights (saved by softmax over the top-k)", r, c);
    grouped_mm_dispatch(inv, (r, h, m.experts), 4, x, sh);
    inv.add("gate_up output with bias (saved by clamp)", 2 * r * f, x);
    inv.add_n(
        "clamped gate, its sigmoid, up + 1 and the gated gate (saved by the clamped SwiGLU)",
        r * f,
        x,
        4,
    );
    if sh.base_trainable {
        inv.add(
            "clamped SwiGLU output (saved by the down grouped_mm)",
            r * f,
            x,
        );
    }
    inv.add("routing weights in expert order (saved by mul)", r, c);
    inv.add(
        "down output with bias (saved by mul with the routing weights)",
        r * h,
        x,
    );
}

/// Llama 4's MoE (`Llama4TextMoe`): the router's top-k scores through a sigmoid, then every
/// token through every expert (`hidden_states.repeat(experts, 1)` times its score, zero for
/// the experts not chosen) by one bmm per projection, so the routed rows are experts x tokens
/// whatever the routing; and the shared expert, which reads the router's input. Under
/// autocast the router and the shared expert's gate/up each cast that input, and the bmm casts
/// the fp32 scored rows.
fn llama4_moe(inv: &mut Inventory, spec: &ModelSpec, sh: &Shape, m: &Moe) {
    let (t, c, x) = (sh.tokens(), sh.compute(), sh.stream());
    let (h, f, si) = (
        spec.hidden,
        m.expert_intermediate / sh.tp,
        m.shared_intermediate / sh.tp,
    );
    let rows = m.experts * t;
    if sh.base_trainable {
        linear_inputs(
            inv,
            "router and shared expert gate/up_proj input",
            t * h,
            3,
            sh,
        );
    } else {
        // The frozen router saves nothing; the shared expert's gate and up adapters do.
        mlp_lora_inputs(inv, "shared expert gate/up_proj input", t * h, 2, sh);
    }
    inv.add(
        "router's top-k indices, int64 (saved by topk and scatter)",
        t * m.top_k,
        DType::I64,
    );
    inv.add(
        "router scores, fp32 (saved by sigmoid)",
        t * m.experts,
        DType::F32,
    );
    inv.add("scores, one per expert and token (saved by mul)", rows, c);
    inv.add(
        "tokens repeated for every expert (saved by mul with the scores)",
        rows * h,
        x,
    );
    if sh.base_trainable {
        inv.add(
            "scored rows, in the compute dtype (saved by the gate_up bmm)",
            rows * h,
            c,
        );
    }
    inv.add(
        "experts' gate_up output (saved by the activation and the product)",
        2 * rows * f,
        c,
    );
    inv.add(
        "experts' activation output (saved by the product)",
        rows * f,
        c,
    );
    if sh.base_trainable {
        inv.add(
            "experts' product act(gate) * up (saved by the down bmm)",
            rows * f,
            c,
        );
    }
    shared_expert_mlp(inv, t * si, c, sh);
}

/// What a shared expert's gated MLP saves after its input (`elements` = tokens x its width):
/// the gate and up outputs, the activation's output and, when the weights train, the product
/// down_proj saves (LoRA's adapters save their own input instead).
fn shared_expert_mlp(inv: &mut Inventory, elements: u64, c: DType, sh: &Shape) {
    inv.add(
        "shared expert gate output (saved by the activation)",
        elements,
        c,
    );
    inv.add(
        "shared expert up output (saved by the product)",
        elements,
        c,
    );
    inv.add(
        "shared expert activation output (saved by the product)",
        elements,
        c,
    );
    if sh.base_trainable {
        next_linear_input(
            inv,
            "shared expert product act(gate) * up (saved by down_proj)",
            elements,
            c,
            sh,
        );
    } else {
        mlp_lora_inputs(inv, "shared expert down_proj input", elements, 1, sh);
    }
}

/// What transformers' grouped_mm experts save to route `r` token rows of width `h` to
/// `experts`: the rows' orders (`orders` int64 index tensors, for the gathers and the scatter
/// back), the rows per expert, and the gathered rows when the experts' weights train.
fn grouped_mm_dispatch(
    inv: &mut Inventory,
    (r, h, experts): (u64, u64, u64),
    orders: u64,
    x: DType,
    sh: &Shape,
) {
    inv.add_n(
        "routed rows' orders, int64 (saved by the gathers and the scatter back)",
        r,
        DType::I64,
        orders,
    );
    inv.add(
        "rows per expert, int32 (saved by grouped_mm)",
        experts,
        DType::I32,
    );
    if sh.base_trainable {
        inv.add("routed tokens, gathered (saved by grouped_mm)", r * h, x);
    }
}

/// GPT-2, GPT-NeoX and OPT: LayerNorm, fused or separate attention projections, plain MLP.
fn gpt_layer(inv: &mut Inventory, spec: &ModelSpec, sh: &Shape, l: &Layout) {
    let Layout { t, th, q, .. } = *l;
    let c = sh.compute();
    inv.at(Part::InputNorm);
    layer_norm(inv, "attention LayerNorm", sh, l);
    inv.at(Part::AttentionInputs);
    let fused_qkv = matches!(spec.family, Family::Gpt2 | Family::GptNeox);
    if fused_qkv {
        let fused = if sh.base_trainable {
            1
        } else {
            sh.lora_qkv.min(1)
        };
        linear_inputs(inv, "qkv input", th, fused, sh);
    } else {
        let qkv = if sh.base_trainable { 3 } else { sh.lora_qkv };
        linear_inputs(inv, "q/k/v_proj input", th, qkv, sh);
    }
    inv.at(Part::AttentionCore);
    match sh.attention {
        Attention::Sdpa | Attention::Flash2 | Attention::Flash3 | Attention::Flex
            if l.kernel == Backend::Math =>
        {
            math_attention(inv, sh, l)
        }
        Attention::Sdpa | Attention::Flash2 | Attention::Flash3 | Attention::Flex => {
            if spec.family == Family::Gpt2 {
                // q, k and v are transposed views of c_attn's output, and SDPA (flash and
                // efficient on CUDA, flash on CPU) saves its inputs as given: no copies of its
                // own. With transformers' KV cache on (`use_cache`: GPT-2's config default,
                // and what `model(input_ids, labels=...)` does in training),
                // `DynamicLayer.update` concatenates k and v into fresh tensors, which SDPA
                // then saves; q keeps the fused output. Gradient checkpointing turns the
                // cache off, and so does the Trainer (`TrainingArguments.use_cache` defaults
                // to False in transformers 5): k and v are then views of the fused output.
                inv.add(
                    "fused qkv output, kept by the q view (saved by SDPA)",
                    3 * t * q,
                    c,
                );
                if sh.kv_cache {
                    inv.add(
                        "k and v concatenated into the KV cache (use_cache; saved by SDPA)",
                        2 * t * q,
                        c,
                    );
                }
            } else if fused_qkv {
                // GPT-NeoX: q and k rotated (new tensors); v a view of the fused output, or
                // with the KV cache on the cache's concatenated copy (found on fake CUDA).
                inv.add("q and k after RoPE (saved by SDPA)", 2 * t * q, c);
                if sh.kv_cache {
                    inv.add(
                        "v concatenated into the KV cache (use_cache; saved by SDPA)",
                        t * q,
                        c,
                    );
                } else {
                    inv.add(
                        "fused qkv output, kept by the v view (saved by SDPA)",
                        3 * t * q,
                        c,
                    );
                }
            } else {
                inv.add("q, k, v (saved by SDPA)", 3 * t * q, c);
            }
            sdpa_outputs(inv, sh, l);
        }
        Attention::Eager => {
            if spec.family == Family::Gpt2 && sh.b == 1 {
                // q is a transposed view of c_attn's output. at::matmul folds (b, heads, s, d)
                // into (b * heads, s, d) for bmm: with b = 1 that is a view, so bmm saves the
                // whole fused output; with b > 1 it is a copy of q alone. Under autocast
                // c_attn's output is already in the compute dtype, so the same holds (fake
                // CUDA). k (from the KV cache's concatenation) is contiguous.
                inv.add(
                    "fused qkv output, kept by the q view (saved by matmul q k^T)",
                    3 * t * q,
                    c,
                );
                inv.add("k (saved by matmul q k^T)", t * q, c);
            } else {
                inv.add("q and k (saved by matmul q k^T)", 2 * t * q, c);
            }
            // GPT-2/NeoX/OPT eager attention calls softmax in the scores' own dtype (no fp32
            // upcast, unlike Llama), then casts to v's dtype, a no-op. Under CUDA autocast
            // softmax is on the fp32 list: it saves its fp32 output, and the cast back is a
            // new tensor, which the matmul with v saves when no dropout follows (measured on
            // an H100 and on fake CUDA: GPT-2, 4 B more per score than the 16-bit output).
            if sh.amp() {
                inv.at(Part::AttentionScores).add(
                    "softmax output, fp32 by autocast (saved by softmax)",
                    l.scores,
                    DType::F32,
                );
                if sh.attention_dropout <= 0.0 {
                    inv.add(
                        "probabilities cast to the compute dtype (saved by matmul probs v)",
                        l.scores,
                        c,
                    );
                }
            } else {
                inv.at(Part::AttentionScores)
                    .add("softmax output (saved by softmax)", l.scores, c);
            }
            eager_dropout(inv, sh, l, sh.compute());
            inv.at(Part::AttentionCore)
                .add("v (saved by matmul probs v)", t * q, c);
        }
    }
    inv.at(Part::OutputProjection);
    if l.quadratic(sh) || !sh.base_trainable || q_heads_first(spec, l) {
        let out = u64::from(sh.base_trainable || sh.lora_o);
        linear_inputs(inv, "attention output projection input", t * q, out, sh);
    }
    residual_dropout(inv, sh, l, Part::AttentionResidualDropout);
    plain_mlp_side(inv, spec, sh, l);
}

/// The MLP side of a LayerNorm layer (GPT-2, GPT-NeoX, OPT, StarCoder2): the norm, a plain
/// MLP and its residual dropout.
fn plain_mlp_side(inv: &mut Inventory, spec: &ModelSpec, sh: &Shape, l: &Layout) {
    let Layout { t, th, .. } = *l;
    let f = spec.intermediate / sh.tp;
    let c = sh.compute();
    inv.at(Part::MlpNorm);
    if spec.parallel_residual {
        // GPT-NeoX's parallel residual: the MLP's LayerNorm reads the layer's input, which
        // the attention LayerNorm saved already.
        inv.add("MLP LayerNorm: mean and rstd, fp32", 2 * l.t, DType::F32);
    } else {
        layer_norm(inv, "MLP LayerNorm", sh, l);
    }
    inv.at(Part::Mlp);
    mlp_linear_inputs(inv, "MLP input", th, 1, sh);
    match spec.activation.as_str() {
        // GPT-2's gelu_new is written out in Python: 0.5 * x * (1 + tanh(...(x + 0.044715 x^3))):
        // pow saves x, tanh saves its output, the last product saves both factors. Under
        // CUDA autocast `pow` is on the fp32 list (autocast_mode.cpp; CPU's lists lack it):
        // pow saves an fp32 copy of x, and the fp32 x^3 promotes tanh's input, its output
        // and 1 + tanh to fp32; 0.5 * x stays in the compute dtype (found on fake CUDA:
        // tests/reference/test_cuda_fake.py).
        "gelu_new" if sh.amp() => {
            inv.add(
                "MLP up output, fp32 copy by autocast (saved by pow)",
                t * f,
                DType::F32,
            );
            inv.add_n(
                "gelu_new: tanh output and 1 + tanh, fp32 (saved by tanh, mul)",
                t * f,
                DType::F32,
                2,
            );
            inv.add("gelu_new: 0.5 * x (saved by mul)", t * f, c);
        }
        "gelu_new" => {
            inv.add("MLP up output (saved by pow)", t * f, c);
            inv.add_n(
                "gelu_new: tanh output, 0.5 * x and 1 + tanh (saved by tanh, mul)",
                t * f,
                c,
                3,
            );
        }
        "relu" => {
            // ReLU's output is also the down projection's input (one storage; under autocast
            // it is already in the compute dtype, so the Linear's cast returns it as is).
            let what = if sh.base_trainable {
                "ReLU output (saved by relu and by the down projection)"
            } else {
                "ReLU output (saved by relu)"
            };
            inv.add(what, t * f, c);
        }
        _ => inv.add("MLP up output (saved by gelu)", t * f, c),
    }
    if sh.base_trainable {
        if spec.activation != "relu" {
            next_linear_input(
                inv,
                "activation output (saved by the down projection)",
                t * f,
                c,
                sh,
            );
        }
    } else {
        mlp_lora_inputs(inv, "down projection input", t * f, 1, sh);
    }
    if sh.residual_dropout > 0.0 {
        inv.at(Part::MlpResidualDropout)
            .add("residual dropout mask (MLP)", th, DType::Bool);
    }
}

/// Saved tensors outside the decoder layers: RoPE tables, the final norm, lm_head's input.
pub fn outside_layers(spec: &ModelSpec, sh: &Shape) -> Vec<Saved> {
    let mut inv = Inventory::default();
    let t = sh.tokens();
    let h = spec.hidden;
    if spec.llama4.is_some() {
        // Llama 4's `freqs_cis`: (1, s, head_dim / 2) complex64 whatever the precision, saved
        // by every RoPE layer's complex multiply.
        inv.at(Part::Rope).add(
            "RoPE freqs_cis, complex64 (saved by every RoPE layer's multiply)",
            sh.s * spec.head_dim,
            DType::F32,
        );
    } else if spec.is_rotary() && spec.family != Family::Glm4 {
        // cos and sin, (1, s, head_dim) in the stream dtype, saved by RoPE's multiplies.
        // OLMo 3's rotary embedding returns them in fp32 whatever the model's dtype, one pair
        // per kind of layer (its sliding and full layers rotate with their own tables; traced
        // on CPU, kept by the checkpoints' closures too).
        let olmo3 = spec.model_type == "olmo3";
        // They are cast to the hidden states' dtype: the stream's (fp32 under autocast in full
        // training, the base's under LoRA).
        let rope = if olmo3 { DType::F32 } else { sh.stream() };
        let pairs =
            if olmo3 && spec.local_attention().is_some() && spec.other_attention_layers() > 0 {
                2
            } else {
                1
            };
        inv.at(Part::Rope).add_n(
            "RoPE cos and sin (saved by every layer's RoPE)",
            2 * sh.s * spec.rotary_dim(),
            rope,
            pairs,
        );
    }
    match spec.norm {
        NormKind::RmsNorm if spec.family == Family::Cohere2 => {
            inv.at(Part::FinalNorm);
            cohere_norm(&mut inv, "final norm", (t, h), sh);
        }
        NormKind::RmsNorm if spec.gated_attention() => {
            inv.at(Part::FinalNorm);
            zero_centred_norm(&mut inv, "final norm", (t * h, t * h, h), sh, sh.stream());
        }
        NormKind::RmsNorm => {
            if spec.final_norm {
                inv.at(Part::FinalNorm);
                rms_norm(&mut inv, "final norm", t, h, sh, norm_family(spec));
            }
        }
        NormKind::LayerNorm => {
            if sh.embedding_dropout > 0.0 {
                inv.at(Part::EmbeddingDropout)
                    .add("embedding dropout mask", t * h, DType::Bool);
            }
            if spec.final_norm {
                inv.at(Part::FinalNorm);
                inv.add("final LayerNorm input", t * h, sh.stream());
                inv.add("final LayerNorm mean and rstd, fp32", 2 * t, DType::F32);
            }
        }
    }
    if let Some(v) = &spec.vision
        && sh.vision_trained
        && sh.images > 0
    {
        inv.at(Part::Vision);
        vision_tower(&mut inv, v, sh);
    }
    // Each trained multi-token prediction module: its two input norms, the concatenation
    // eh_proj saves, its head's norm and the lm_head's input again (its decoder layer is
    // counted with the layers).
    for _ in 0..spec.mtp_trained {
        inv.at(Part::FinalNorm);
        let family = norm_family(spec);
        rms_norm(
            &mut inv,
            "MTP enorm (next token's embedding)",
            t,
            h,
            sh,
            family,
        );
        rms_norm(
            &mut inv,
            "MTP hnorm (previous depth's hidden state)",
            t,
            h,
            sh,
            family,
        );
        let cat = if sh.amp() { sh.compute() } else { sh.stream() };
        inv.add(
            "MTP eh_proj input (the two norms concatenated)",
            2 * t * h,
            cat,
        );
        rms_norm(&mut inv, "MTP head norm", t, h, sh, family);
        inv.at(Part::LmHeadInput);
        inv.add("MTP lm_head input", t * h, cat);
    }
    // lm_head's input when the lm_head (or the tied embedding) trains.
    inv.at(Part::LmHeadInput);
    if sh.te_lm_head {
        te_linear_inputs(&mut inv, "lm_head input", t * h, 1);
    } else if sh.base_trainable || !spec.tie_embeddings {
        // A frozen lm_head (LoRA) needs no weight gradient, so its matmul keeps only the
        // weight (or under autocast the weight's cast, `states::local::frozen_cast`); a
        // trained one (full training, peft's modules_to_save copy) keeps its input: under
        // autocast the input's cast, which a 16-bit stream does not need.
        if sh.amp() && sh.lm_head_trained && sh.stream() != sh.compute() {
            inv.add("lm_head input, cast by autocast", t * h, sh.compute());
        } else if sh.lm_head_trained {
            inv.add("lm_head input (final norm output)", t * h, sh.stream());
        }
    }
    inv.items
}

/// A trained vision tower's saved tensors for the micro-batch's images: per ViT layer its
/// norms, the q/k/v input, what memory-efficient or flash SDPA keeps (q, k, v, output,
/// logsumexp: no patches x patches matrix) and its MLP; then the projector's inputs. Under
/// autocast the 16-bit casts of each Linear's input are saved, the residual stream staying
/// fp32 (the weights' casts are the autocast cache's). Written from the modeling code
/// (`modeling_siglip.py`, `modeling_qwen2_5_vl.py`, `modeling_qwen3_vl.py`,
/// `modeling_pixtral.py`, `modeling_llama4.py`). SigLIP's and Llama 4's layers match
/// `saved_tensors_hooks` on CPU in bf16 and amp-bf16 with SDPA (`tests/reference/
/// test_vision.py`; CPU's LayerNorm keeps bf16 statistics where CUDA keeps fp32; Llama 4's
/// RoPE saves only its constant table); the other towers' layers and every projector are
/// assumed (Qwen-VL's RoPE tables and windowed attention, Pixtral's block-diagonal mask and
/// the convolution's input are left out), so the estimate marks these bytes assumed. With
/// checkpointing, each block keeps its input only.
fn vision_tower(inv: &mut Inventory, v: &Vision, sh: &Shape) {
    let n = sh.images * v.patches_per_image();
    let (h, f, l) = (v.hidden, v.intermediate, v.layers);
    let (c, stream) = (sh.compute(), sh.stream());
    if sh.vision_checkpointed {
        inv.add_n(
            "vision tower: each checkpointed block's input",
            n * h,
            stream,
            l,
        );
    } else {
        let layer_norm = matches!(
            v.kind,
            VisionKind::Siglip | VisionKind::Qwen3 | VisionKind::Llama4
        );
        // Two norms per block: a LayerNorm keeps its input and fp32 mean and rstd; an RMSNorm
        // (transformers' upcasting one) an fp32 copy, the rsqrt and the normalized input.
        if layer_norm {
            inv.add_n("vision tower: LayerNorm inputs", n * h, stream, 2 * l);
            inv.add_n(
                "vision tower: LayerNorm mean and rstd",
                2 * n,
                DType::F32,
                2 * l,
            );
        } else {
            inv.add_n(
                "vision tower: RMSNorm fp32 inputs",
                n * h,
                DType::F32,
                2 * l,
            );
            inv.add_n("vision tower: RMSNorm rsqrt", n, DType::F32, 2 * l);
            inv.add_n(
                "vision tower: RMSNorm normalized inputs",
                n * h,
                stream,
                2 * l,
            );
        }
        // Autocast casts the norm's output once per Linear that reads it: q, k, v separately
        // (SigLIP, Pixtral) or one fused qkv (Qwen-VL); without autocast one tensor is shared.
        let fused = matches!(v.kind, VisionKind::Qwen25 | VisionKind::Qwen3);
        let casts = |k: u64| if sh.amp() { k } else { 1 };
        let qkv_in = casts(if fused { 1 } else { 3 });
        inv.add_n("vision tower: q/k/v input", n * h, c, qkv_in * l);
        inv.add_n("vision tower: SDPA's q, k, v and output", 4 * n * h, c, l);
        inv.add_n("vision tower: SDPA's logsumexp", n * v.heads, DType::F32, l);
        // SDPA's flash and memory-efficient kernels lay their output out as (batch, patches,
        // heads, dim): `transpose(1, 2).contiguous()` is a view, and the output projection
        // saves SDPA's output itself (measured on CPU).
        let gated = matches!(v.kind, VisionKind::Qwen25 | VisionKind::Pixtral);
        if gated {
            // gate and up read the norm's output (two casts under autocast); the activation
            // keeps the gate's output, the product its two inputs, down_proj the product.
            inv.add_n("vision tower: MLP input", n * h, c, casts(2) * l);
            inv.add_n("vision tower: gated MLP intermediates", n * f, c, 4 * l);
        } else {
            inv.add_n("vision tower: MLP input", n * h, c, l);
            inv.add_n("vision tower: GELU input and output", n * f, c, 2 * l);
        }
    }
    // The projector: its norm's input (the tower's output) and merged input, then the two
    // Linears' inputs over the image tokens (Gemma 3: one matmul after pooling).
    let merged = n / (v.merge * v.merge).max(1);
    inv.add_n("projector: tower output and merged input", n * h, c, 2);
    let width = match v.kind {
        VisionKind::Siglip => 0,
        VisionKind::Pixtral => v.out_hidden,
        VisionKind::Qwen25 | VisionKind::Qwen3 => h * v.merge * v.merge,
        // Llama 4's adapter: each of its two GELUs keeps its input and output.
        VisionKind::Llama4 => v.projector_in + v.projector_out,
    };
    inv.add_n("projector: hidden activations", merged * width, c, 2);
}

/// Bytes of a layer's saved tensors that its backward frees before it reaches the attention
/// core: everything from the second norm on (the MLP side), the attention output projection's
/// input (and, under LoRA, its adapter's saved tensors) and the attention residual dropout mask. Backward runs the layer in reverse, so these
/// are released (each node drops its saved tensors once it ran) while the MLP, norm and output
/// projection gradients accumulate (torch/csrc/autograd/engine.cpp, `release_variables`).
pub fn freed_before_attention(items: &[Saved]) -> u64 {
    items
        .iter()
        .filter(|s| s.part.is_after_attention())
        .map(Saved::bytes)
        .sum()
}

/// Bytes of eager attention's s x s tensors in `items` (what selective recompute drops).
pub fn attention_scores(items: &[Saved]) -> u64 {
    items
        .iter()
        .filter(|s| s.part.is_attention_scores())
        .map(Saved::bytes)
        .sum()
}

/// Bytes of the layer input that checkpointing keeps per checkpointed layer.
pub fn checkpoint_input(spec: &ModelSpec, sh: &Shape) -> u64 {
    let h_local = if sh.sp {
        spec.hidden / sh.tp
    } else {
        spec.hidden
    };
    sh.tokens() * h_local * sh.stream().bytes()
}
