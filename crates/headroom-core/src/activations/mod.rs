//! Tensors saved for backward: one decoder layer's inventory, and the parts outside the layers.
//!
//! Each entry mirrors a tensor that autograd keeps in transformers 5.x (read from the modeling
//! code and checked byte for byte against `saved_tensors_hooks` on CPU, see `tests/reference`).
//! Storages count once: a view saved by two ops is one entry.
//!
//! This module holds the types ([`Saved`], [`Part`], [`Shape`], and the per-layer `Layout` and
//! `Inventory`) and the entry points; each operation's tensors are written in its own module:
//! `norms`, `linear` (a Linear's input, LoRA's and DoRA's), `attention`, `linear_attention`,
//! `mla`, `mlp`, `moe`, `gpt` (the LayerNorm layers), `outside` (outside the layers) and
//! `vision`. Each piece adds its tensors in forward order, and a layer is its pieces called in
//! that order.
//!
//! For an 8-bit base, `Saved::held` marks the inputs bitsandbytes' `MatMul8bitLt` keeps in its
//! context outside the hooks; a checkpointed layer keeps them and backward releases them only at
//! the layer's end (`Step::held`, `Step::released`).
//!
//! A Llama-like layer is its attention half plus its MLP side, and the dense and MoE layers compose
//! them. The other families reuse those halves: OLMo 2/3's post-norms and whole-projection q/k
//! norms; GLM-4's four norms, fused gate_up and per-layer interleaved RoPE; Cohere 2's parallel
//! block on one mean-centred norm; StarCoder2's Llama-style attention after a LayerNorm, with the
//! LayerNorm and plain MLP side it shares with GPT-2, NeoX and OPT; gpt-oss's eager attention with
//! per-head sinks; multi-head latent attention's latents, norms and expanded k/v; Llama 4's q/k L2
//! norm and NoPE temperature; Qwen3-Next's gated attention, zero-centred norms and gated DeltaNet
//! as transformers' torch fallback of the delta rule runs it (the fla kernel on GPUs does not, so
//! it is marked assumed). A trained vision tower's saved tensors (assumed) sit outside the layers
//! under `Part::Vision` and are kept to the end of backward.
//!
//! A model whose every layer is MoE reports its MoE layer as "one layer". A layer with the model's
//! other kind of attention (`layer_of`, `moe_layer_of`) has its own bytes in the step, and
//! autocast's weight copies are counted per kind of layer (`states::local::LayerCasts`). Each
//! `Saved` carries a `Part` tag (input norm, attention core, the s x s scores, output projection,
//! MLP side, RoPE, final norm...): the rules that depend on where a tensor is saved (what selective
//! recompute drops, what backward frees before the attention core, what the final norm's backward
//! releases) read the tag; the `what` text is for people only.
//!
//! int8 activation compression (`act_int8`, a what-if): `int8_compressed` turns each floating-point
//! saved tensor of a layer into int8 plus a 0-dim scale of its dtype. This is worked example 2's
//! `compress_activation` as a `saved_tensors_hooks` pair around each decoder layer, one packed copy
//! per storage, measured exactly in `tests/reference/test_act_int8.py`. The largest unpacked copy
//! sits above a layer's backward peak, and the pack and unpack passes are a memory-bound time term.
//! Refused with checkpointing and with `act_offload` (nested saved-tensor hooks).

mod attention;
mod gpt;
mod linear;
mod linear_attention;
mod mla;
mod mlp;
mod moe;
mod norms;
mod outside;
mod vision;

use serde::Serialize;

use crate::catalog::Gpu;
use crate::dtype::DType;
use crate::model::{Family, ModelSpec};
use crate::scenario::{Attention, Checkpointing, Method, Precision, Scenario, VisionTraining};
use crate::sdpa::{self, Backend};

use attention::llama_attention;
use gpt::gpt_layer;
pub(crate) use linear::lora_saves_input_itself;
use mlp::{gated_mlp, llama_mlp_side, plain_mlp_side};
use moe::moe_mlp;
pub use outside::outside_layers;

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
    /// Held by an 8-bit Linear's autograd context (`MatMul8bitLt`'s `ctx.tensors`), not saved
    /// through autograd's hooks: checkpointing does not drop it, and it lives until the graph
    /// is freed at the end of backward.
    #[serde(skip)]
    pub held: bool,
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
    /// Whether the decoder layers' Linears are bitsandbytes-quantized (QLoRA's 4-bit, an 8-bit
    /// base): `Linear4bit` casts its input to the compute dtype and its output back to the
    /// input's dtype, and saves nothing but its packed weight; `MatMul8bitLt` returns its
    /// input's dtype too.
    pub quantized_base: bool,
    /// An 8-bit base (`Method::Int8`): each `MatMul8bitLt` whose input needs a gradient keeps
    /// that input in its context (`ctx.tensors`), adapted or not (tests/reference/measure_int8.py).
    pub held_inputs: bool,
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
    /// attention projections: a frozen Linear without an adapter saves nothing. peft takes a
    /// converted MoE class's `gate_proj`, `up_proj` and `down_proj` for its fused experts'
    /// (`states::lora_adapts`): its shared experts' and dense layers' Linears stay bare.
    pub lora_mlp: bool,
    /// Whether peft adapts the MoE layers' fused experts (`ParamWrapper`: each forward folds
    /// the adapters into a copy of the whole expert stack, which grouped_mm saves) and their
    /// router (the weight likewise), and whether its adapters sit on every nn.Linear
    /// (all-linear: a Qwen shared expert's gate, a gated DeltaNet's projections, which the
    /// other targets do not name): `states::peft_reach`.
    pub lora_experts: bool,
    pub lora_router: bool,
    pub lora_all_linear: bool,
    /// The routed experts on this GPU (expert parallelism divides them).
    pub local_experts: u64,
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
        let lora = scen.method != Method::Full;
        let reach = crate::states::peft_reach(spec, scen.lora.targets);
        Shape {
            sdpa: kernels.scenario.backend,
            local_mask: kernels.local.is_some(),
            sdpa_local: kernels.local.unwrap_or(kernels.scenario.backend),
            b: scen.sequences() as u64,
            s: scen.seq_local() as u64,
            tp: scen.parallel.tensor as u64,
            sp: scen.parallel.sequence,
            precision: crate::states::activation_precision(scen),
            stream: crate::states::stream_dtype(scen),
            quantized_base: scen.method.quantized_base(),
            held_inputs: scen.method == Method::Int8,
            attention: scen.attention,
            attention_dropout: p(spec.dropout.attention, true),
            residual_dropout: p(spec.dropout.residual, spec.has_residual_dropout()),
            embedding_dropout: p(spec.dropout.embedding, spec.family.has_embedding_dropout()),
            base_trainable: scen.method == Method::Full,
            te_fp8: crate::fp8::te_converts(spec, scen),
            te_lm_head: crate::fp8::te_converts_lm_head(spec, scen),
            lora_rank: (scen.method != Method::Full).then_some(scen.lora.rank as u64),
            // FSDP's mixed-precision policy gathers the adapters in the compute dtype too, and
            // DeepSpeed casts them with the module.
            adapter: if crate::states::runs_16bit(scen) {
                scen.precision.compute_dtype()
            } else {
                scen.lora.adapter_dtype
            },
            lora_dropout: scen.lora.dropout,
            dora: scen.method != Method::Full && scen.lora.dora,
            lm_head_trained: scen.method == Method::Full
                || (scen.lora.save_embeddings && !spec.tie_embeddings),
            lora_mlp: scen.lora.targets.mlp_adapted() && !reach.mlp_names_taken,
            lora_experts: lora && reach.experts,
            lora_router: lora && reach.router,
            lora_all_linear: lora && reach.all_linear,
            local_experts: spec
                .moe
                .as_ref()
                .map_or(0, |m| m.experts / u64::from(scen.parallel.expert.max(1))),
            lora_qkv: scen.lora.targets.qkv_adapted(),
            lora_o: scen.lora.targets.output_adapted(),
            kv_cache: scen.checkpointing == Checkpointing::None && scen.trainer.use_cache(),
            images: if spec.vision.is_some() {
                scen.sequences() as u64 * scen.images as u64
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
    pub(super) fn linear_out(&self) -> DType {
        if self.quantized_base {
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
                held: false,
            });
        }
    }

    /// A tensor an 8-bit Linear's autograd context holds ([`Saved::held`]).
    fn add_held(&mut self, what: impl Into<String>, elements: u64, dtype: DType) {
        self.add(what, elements, dtype);
        if let Some(last) = self.items.last_mut() {
            last.held = true;
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

/// The residual dropout mask after attention or after the MLP (both halves of every layer
/// kind add it).
fn residual_dropout(inv: &mut Inventory, sh: &Shape, l: &Layout, part: Part) {
    if sh.residual_dropout > 0.0 {
        let what = if part == Part::MlpResidualDropout {
            label!("residual dropout mask (MLP)")
        } else {
            label!("residual dropout mask (attention)")
        };
        inv.at(part).add(what, l.th, DType::Bool);
    }
}

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
            what: what!("{} (int8)", s.what),
            elements: s.elements,
            dtype: DType::I8,
            copies: s.copies,
            part: s.part,
            held: s.held,
        });
        out.push(Saved {
            what: what!("its scale ({})", s.dtype.torch_name()),
            elements: 1,
            dtype: s.dtype,
            copies: s.copies,
            part: s.part,
            held: s.held,
        });
    }
    out
}

/// Bytes of `items`.
pub fn total(items: &[Saved]) -> u64 {
    items.iter().map(Saved::bytes).sum()
}

/// Bytes of a layer's saved tensors that its backward frees before it reaches the attention
/// core: everything from the second norm on (the MLP side), the attention output projection's
/// input (and, under LoRA, its adapter's saved tensors) and the attention residual dropout
/// mask. Backward runs the layer in reverse, so these are released (each node drops its saved
/// tensors once it ran) while the MLP, norm and output projection gradients accumulate
/// (torch/csrc/autograd/engine.cpp, `release_variables`).
pub fn freed_before_attention(items: &[Saved]) -> u64 {
    items
        .iter()
        .filter(|s| s.part.is_after_attention() && !s.held)
        .map(Saved::bytes)
        .sum()
}

/// Bytes of `items` held by 8-bit Linears' autograd contexts ([`Saved::held`]).
pub fn held(items: &[Saved]) -> u64 {
    items.iter().filter(|s| s.held).map(Saved::bytes).sum()
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
