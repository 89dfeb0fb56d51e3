//! The tensors one GPU holds before any data-parallel sharding: its share of every parameter
//! (after TP and PP), what trains (the weights, or LoRA's adapters), autocast's weight copies
//! and the allocator's rounding.
//!
//! Under LoRA and QLoRA: the base in its load dtype, the adapters, the `modules_to_save` copies,
//! autocast's casts of an fp32 frozen base, and QLoRA's NF4 bytes with its quantization state.

use crate::dtype::DType;
use crate::model::{ModelSpec, ParamInventory, ParamTensor, Scope};
use crate::optimizer::TrainTensor;
use crate::scenario::{Method, Scenario, VisionTraining};

use super::placement::Placement;
use super::{lora_adapts, nf4_bytes};

/// One GPU's tensors before sharding.
#[derive(Debug, Default)]
pub(super) struct Local {
    pub params: u64,
    pub weights: u64,
    /// Of `weights`, QLoRA's quantization state (absmax and its own quantization): not a
    /// parameter, so FSDP does not shard it and every rank keeps all of it.
    pub quant_state: u64,
    /// Extra bytes of 512-byte rounding over the weights.
    pub rounding: u64,
    /// What trains, as the optimizer sees it.
    pub train: Vec<TrainTensor>,
    /// Trainable parameters in one decoder layer, and outside the layers.
    pub layer_trainable: u64,
    pub outside_trainable: u64,
    /// Of `outside_trainable`, peft's `modules_to_save` copies (LoRA), trained in the
    /// weights' dtype rather than the adapters'.
    pub saved_modules: u64,
    /// Autocast's 16-bit copies of trainable Linear weights: one layer's, and outside.
    pub cache_layer: u64,
    pub cache_outside: u64,
    /// The same copies of one layer of each kind (`LayerCasts`), where layers differ.
    pub cache_kinds: LayerCasts,
    /// Weight copies a layer makes in each forward and keeps to its backward when it saves its
    /// tensors (no cache holds them), one layer's of each kind: Transformer Engine's fp8 copies
    /// (`fp8=te`, `crate::fp8::te_weight_copy_bytes`), and autocast's 16-bit casts of an fp32
    /// frozen base's Linear weights under LoRA (autocast caches only weights that require grad;
    /// the matmul saves the cast to compute its input's gradient).
    pub kept_copy_kinds: LayerCasts,
    /// Of one layer's casts, those of the Linears that read the layer's input (frozen weights'
    /// and adapters'): what the first layer does not keep when its input needs no gradient.
    pub input_casts: u64,
}

/// Autocast's 16-bit weight copies of one decoder layer, by the scope of their tensors: what
/// every layer has, what a dense or a MoE layer adds, and what a layer with softmax or with
/// linear attention adds (Qwen3-Next). A layer's copies are `LayerCasts::of`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct LayerCasts {
    pub common: u64,
    pub dense: u64,
    pub sparse: u64,
    pub attention: u64,
    pub linear_attention: u64,
}

impl LayerCasts {
    /// A layer's copies: MoE or dense, with softmax attention (`softmax`) or linear attention.
    pub fn of(&self, moe: bool, softmax: bool) -> u64 {
        self.common
            + if moe { self.sparse } else { self.dense }
            + if softmax {
                self.attention
            } else {
                self.linear_attention
            }
    }
}

/// What every tensor of the loop shares.
struct Cx<'a> {
    spec: &'a ModelSpec,
    scen: &'a Scenario,
    place: &'a Placement,
    /// The weights' dtype.
    dtype: DType,
    /// DeepSpeed's mixed precision: 16-bit weights, fp32 masters in the optimizer.
    ds_mixed: bool,
    /// Bytes per weight of a `te.Linear`'s kept fp8 copy on this GPU.
    te_copy_bytes: u64,
}

impl Cx<'_> {
    /// Whether autocast casts fp32 parameters for their matmuls. Not when FSDP or DeepSpeed
    /// runs the layers on 16-bit parameters (`super::runs_16bit`): nothing is cast or cached.
    fn autocast_casts(&self) -> bool {
        self.scen.precision.is_autocast() && !super::runs_16bit(self.scen)
    }
}

/// Collects the local tensors of `inv` with weights in `base_dtype`; a `te.Linear`'s kept fp8
/// weight copy is `te_copy_bytes` per weight (`crate::fp8::te_weight_copy_bytes`).
pub(super) fn local_tensors(
    spec: &ModelSpec,
    inv: &ParamInventory,
    scen: &Scenario,
    place: &Placement,
    (base_dtype, ds_mixed, te_copy_bytes): (DType, bool, u64),
) -> Local {
    let cx = Cx {
        spec,
        scen,
        place,
        dtype: base_dtype,
        ds_mixed,
        te_copy_bytes,
    };
    let full = scen.method == Method::Full;
    let mut l = Local::default();
    for t in &inv.tensors {
        let count = place.count(t.scope);
        if count == 0 {
            continue;
        }
        let n = place.share(t);
        l.params += n * count;
        let quantized = scen.method.quantized_base() && t.quantizable && t.scope != Scope::Model;
        let bytes_one = if quantized && scen.method == Method::Int8 {
            // `Int8Params`: int8 codes and one fp32 scale per output row (`SCB`, which
            // `Linear8bitLt.init_8bit_state` moves to the module's state: no parameter).
            let scales = t.d_out * t.copies * 4;
            l.quant_state += scales * count;
            n + scales
        } else if quantized {
            l.quant_state += (nf4_bytes(n) - n.div_ceil(2)) * count;
            nf4_bytes(n)
        } else if scen.method.quantized_base() && is_quantized_bias(inv, t) {
            // bitsandbytes casts a quantized Linear's bias, in place, to the dtype it computes
            // in: `Linear4bit.forward` to the compute dtype (measured on CPU: Qwen2's q/k/v
            // biases end bf16 after prepare_model_for_kbit_training made them fp32),
            // `Linear8bitLt.forward` to its input's, the residual stream's.
            n * if scen.method == Method::Int8 {
                crate::states::stream_dtype(scen).bytes()
            } else {
                scen.precision.half_dtype().bytes()
            }
        } else {
            n * base_dtype.bytes()
        };
        l.weights += bytes_one * count;
        l.rounding += (round512(bytes_one) - bytes_one) * count;
        // Each te.Linear's delayed-scaling state (amax histories and scales) sits beside its
        // weight for the whole run.
        if te_linear(&cx, t) {
            l.weights += crate::fp8::TE_DELAYED_STATE_BYTES * count;
        }
        // A frozen vision tower and projector keep their weights only, whatever the method.
        let frozen = t.is_vision() && scen.vision == VisionTraining::Frozen;
        if full && !frozen {
            trained_weight(&mut l, &cx, t, n, count);
            continue;
        }
        if !full && !quantized && !t.is_vision() {
            frozen_cast(&mut l, &cx, t, n, count);
        }
        if lora_adapts(spec, scen, t) {
            adapter(&mut l, &cx, t, count);
        }
        if scen.lora.save_embeddings
            && t.scope == Scope::Model
            && (t.name == "lm_head.weight" || is_token_embedding(&t.name))
        {
            module_to_save(&mut l, &cx, t, n);
        }
    }
    l
}

/// peft's `modules_to_save` copy of the token embedding or the lm_head: a second weight in the
/// base's dtype that trains (its gradient and optimizer states in that dtype: peft casts only
/// adapter layers to fp32), and under autocast the lm_head copy's cached cast.
fn module_to_save(l: &mut Local, cx: &Cx, t: &ParamTensor, n: u64) {
    l.train.push(TrainTensor {
        rows: t.d_out,
        cols: n / t.d_out.max(1),
        count: 1,
        dtype: cx.dtype,
    });
    l.weights += n * cx.dtype.bytes();
    l.rounding += round512(n * cx.dtype.bytes()) - n * cx.dtype.bytes();
    l.params += n;
    l.outside_trainable += n;
    l.saved_modules += n;
    let p = cx.scen.precision;
    if cx.autocast_casts() && t.name == "lm_head.weight" && cx.dtype != p.compute_dtype() {
        l.cache_outside += n * p.compute_dtype().bytes();
    }
}

/// A frozen base weight under LoRA/QLoRA that autocast casts for its Linear (an fp32 base
/// under amp): the cast is not cached (the weight needs no gradient) but the matmul saves it
/// for its input's gradient, so it lives from the layer's forward to its backward, like
/// Transformer Engine's copies; the lm_head's until the lm_head's backward. A frozen vision
/// tower's input needs no gradient: nothing of it is saved.
fn frozen_cast(l: &mut Local, cx: &Cx, t: &ParamTensor, n: u64, count: u64) {
    let p = cx.scen.precision;
    if !cx.autocast_casts() || cx.dtype == p.compute_dtype() || !used_by_linear(cx, t) {
        return;
    }
    // With a modules_to_save copy the forward runs the copy, not the frozen lm_head.
    if cx.scen.lora.save_embeddings && t.name == "lm_head.weight" {
        return;
    }
    let bytes = n * p.compute_dtype().bytes();
    if t.scope == Scope::Model {
        l.cache_outside += bytes;
    } else {
        let per_layer = per_layer(cx, count);
        *kind_of(&mut l.kept_copy_kinds, t.scope) += bytes * per_layer;
        if reads_layer_input(t) {
            l.input_casts += bytes * per_layer;
        }
    }
}

/// Whether `t` is the bias of a Linear that bitsandbytes quantizes (QLoRA, 8-bit bases).
fn is_quantized_bias(inv: &ParamInventory, t: &ParamTensor) -> bool {
    t.scope != Scope::Model
        && t.name.strip_suffix(".bias").is_some_and(|path| {
            inv.tensors.iter().any(|w| {
                w.quantizable && w.scope == t.scope && w.name.strip_suffix(".weight") == Some(path)
            })
        })
}

/// Whether `t` is the weight of a Linear that reads the decoder layer's (normed) input: the
/// attention's input projections.
fn reads_layer_input(t: &ParamTensor) -> bool {
    t.linear
        .is_some_and(|n| super::INPUT_PROJECTIONS.contains(&n))
}

/// A weight that trains: the optimizer updates it, its gradient counts for its layer (or
/// outside the layers), and autocast caches a 16-bit copy when a Linear uses it.
fn trained_weight(l: &mut Local, cx: &Cx, t: &ParamTensor, n: u64, count: u64) {
    l.train.push(TrainTensor {
        rows: t.d_out,
        cols: n / t.d_out.max(1),
        count,
        dtype: cx.dtype,
    });
    let in_layer = t.scope != Scope::Model;
    // A layer's share: a dense/sparse-only tensor counts once per layer that has it.
    let per_layer = per_layer(cx, count);
    if in_layer {
        l.layer_trainable += n * per_layer;
    } else {
        l.outside_trainable += n;
    }
    // Autocast caches a 16-bit copy of each fp32 trainable weight a Linear uses (DeepSpeed's
    // mixed precision trains 16-bit weights: nothing to cast).
    let used_by_linear = used_by_linear(cx, t);
    if te_linear(cx, t) {
        // A te.Linear casts its weight to fp8 itself (no autocast copy) and keeps that copy
        // to its backward, as autocast's saved casts are kept.
        if in_layer {
            *kind_of(&mut l.kept_copy_kinds, t.scope) += n * cx.te_copy_bytes * per_layer;
        } else {
            // The lm_head's copy lives, like autocast's, until the lm_head's backward.
            l.cache_outside += n * cx.te_copy_bytes;
        }
        return;
    }
    let p = cx.scen.precision;
    if cx.autocast_casts() && !cx.ds_mixed && used_by_linear {
        let bytes = n * p.half_dtype().bytes();
        if in_layer {
            l.cache_layer += bytes * per_layer;
            *kind_of(&mut l.cache_kinds, t.scope) += bytes * per_layer;
        } else {
            l.cache_outside += bytes;
        }
    }
}

/// Whether autocast casts `t` for a matmul: a Linear's weight (gpt-oss's and Qwen3-Next's
/// grouped_mm experts excepted), a trained vision tower's matrices, the routers that are
/// Linears, the lm_head and a tied embedding.
fn used_by_linear(cx: &Cx, t: &ParamTensor) -> bool {
    // transformers 5.x runs the fused experts through grouped_mm, which autocast has no rule
    // for: they compute in their own dtype and no copy is cached (measured on CPU for gpt-oss,
    // tests/reference/test_saved_bytes.py, and under peft for Qwen3-MoE, Mixtral, OLMoE and
    // Qwen2-MoE on an fp32 base, tests/reference/test_peft.py). Llama 4's run through bmm,
    // which autocast casts.
    let grouped_experts = t.name.contains(".experts.") && cx.spec.llama4.is_none();
    // A trained vision tower's matrices run through Linear, conv or matmul, which autocast
    // casts (its position tables are lookups; norms, listed with their layers as matrices,
    // and biases are vectors).
    let vision_matrix =
        t.is_vision() && t.d_in > 1 && !t.name.contains("norm") && !t.name.contains("pos");
    // Llama 4's router is an nn.Linear (`Llama4Router`), Qwen3-Next's router an F.linear and its
    // shared expert's gate an nn.Linear: autocast casts their weights too.
    let router = (cx.spec.llama4.is_some() && t.name.ends_with("router.weight"))
        || (cx.spec.gated_attention()
            && matches!(
                t.name.as_str(),
                "mlp.gate.weight" | "mlp.shared_expert_gate.weight"
            ));
    (t.linear.is_some() && !grouped_experts)
        || vision_matrix
        || router
        || t.name == "lm_head.weight"
        || (cx.spec.tie_embeddings && t.scope == Scope::Model && is_token_embedding(&t.name))
}

/// Of `count` copies of a tensor on this GPU, those in one layer: a dense/sparse-only tensor
/// counts once per layer that has it.
fn per_layer(cx: &Cx, count: u64) -> u64 {
    (count / cx.place.layers_local.max(1)).max(1)
}

/// The entry of a layer's copies that a tensor of `scope` adds to.
fn kind_of(kinds: &mut LayerCasts, scope: Scope) -> &mut u64 {
    match scope {
        Scope::DenseLayer => &mut kinds.dense,
        Scope::SparseLayer => &mut kinds.sparse,
        Scope::AttentionLayer => &mut kinds.attention,
        Scope::LinearAttentionLayer => &mut kinds.linear_attention,
        Scope::Layer | Scope::Model => &mut kinds.common,
    }
}

/// Whether `t` is a `te.Linear`'s weight (`fp8=te`: a decoder-layer Linear accelerate converts,
/// or the lm_head where it converts that too).
fn te_linear(cx: &Cx, t: &ParamTensor) -> bool {
    crate::fp8::te_converts(cx.spec, cx.scen) && crate::fp8::converts(t)
        || t.name == "lm_head.weight" && crate::fp8::te_converts_lm_head(cx.spec, cx.scen)
}

/// The input token embedding, which a tied `lm_head` uses as its Linear weight (GPT-2's
/// `wte`, NeoX's `embed_in`, the rest's `embed_tokens`). Its autocast copy was measured on an
/// H100 for GPT-2 (tests/reference/test_gpu_measured.py).
fn is_token_embedding(name: &str) -> bool {
    ["embed_tokens.weight", "wte.weight", "embed_in.weight"]
        .iter()
        .any(|e| name.ends_with(e))
}

/// LoRA's A (r x d_in) and B (d_out x r) on an adapted Linear, in the adapters' dtype (fp32 by
/// PEFT's default), per copy.
fn adapter(l: &mut Local, cx: &Cx, t: &ParamTensor, count: u64) {
    let r = cx.scen.lora.rank as u64;
    let d_in = if cx.place.tp > 1 {
        t.d_in.div_ceil(cx.place.tp)
    } else {
        t.d_in
    };
    // Fused experts' gate and up share one adapter of twice the rank (`super::adapter_dims`).
    let d_out = super::adapter_dims(t).1;
    // DoRA adds a magnitude per output (`lora_magnitude_vector`, in the adapters' dtype).
    let magnitude = if cx.scen.lora.dora { d_out } else { 0 };
    let per_layer = super::adapter_params(cx.scen, d_in, d_out) * t.copies;
    let dtype = cx.scen.lora.adapter_dtype;
    if magnitude > 0 {
        l.train.push(TrainTensor {
            rows: magnitude,
            cols: 1,
            count: count * t.copies,
            dtype,
        });
    }
    l.train.push(TrainTensor {
        rows: r,
        cols: d_in,
        count: count * t.copies,
        dtype,
    });
    l.train.push(TrainTensor {
        rows: d_out,
        cols: r,
        count: count * t.copies,
        dtype,
    });
    l.weights += per_layer * count * dtype.bytes();
    l.layer_trainable += per_layer;
    l.params += per_layer * count;
    // Autocast caches the 16-bit casts of the adapters (leaves that require grad) until the
    // forward ends, and lora_A/lora_B save them for backward.
    // (Fused experts' adapters are cast to the base weight's dtype outside autocast: their
    // copies are the layer's activations, `activations::moe`.)
    let p = cx.scen.precision;
    if cx.autocast_casts() && dtype != p.compute_dtype() && !t.is_expert() {
        // (DoRA's magnitude divides, no matmul: autocast leaves it alone.)
        let cast = per_layer - magnitude * t.copies;
        let bytes = cast * self::per_layer(cx, count) * p.compute_dtype().bytes();
        l.cache_layer += bytes;
        *kind_of(&mut l.cache_kinds, t.scope) += bytes;
        if reads_layer_input(t) {
            l.input_casts += bytes;
        }
    }
}

fn round512(bytes: u64) -> u64 {
    bytes.div_ceil(512) * 512
}
