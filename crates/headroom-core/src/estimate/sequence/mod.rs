//! The step as PyTorch's caching allocator sees it: the prepared step written out as an ordered
//! list of allocations and frees, replayed through [`crate::allocator`] over three steps; its
//! reserved high-water mark is the reserved level, where the slack fraction only scaled the
//! transient bytes.
//!
//! What decides reserved is which blocks are cached free when a large request arrives, so the
//! sequence keeps each tensor that reaches the large pool as its own request, in the order a
//! transformers training step makes it (read from the H200's allocator traces,
//! tests/reference/gpu/h200/edge/traces): the weights at load; per layer the tensors its
//! forward saves, in forward order, the residual stream between layers, and the largest
//! transient; the loss's logits, their fp32 upcast and log_softmax; backward in reverse, each
//! saved tensor's gradient beside it, the layer's parameter gradients allocated as backward
//! reaches them (the Trainer's `zero_grad(set_to_none=True)` frees them after every step, so
//! each step allocates them again among the activations' freed blocks); the optimizer's states
//! at the first step and its foreach temporaries at every step. The second and third steps
//! start from the cache the first left, which is where a checkpointed run's reserved grows.
//!
//! Modelled for what the traces cover: one GPU or FSDP's data-parallel ranks ([`fsdp`] for
//! FSDP2, [`fsdp1`] for FSDP1's flat parameters),
//! dense decoder layers, transformers' loss, eager. Everything else keeps the slack fraction
//! ([`supported`] says which). A sliding-window model's two kinds of layer (Gemma 2 and 3,
//! Command R7B, OLMo 3, Qwen2's window layers) are each written with their own saved tensors
//! (`Step::saved_of`); no GPU trace of such a model was recorded, so for them the chain is
//! checked only against the estimate's allocated level (`tests/allocator_sequence.rs`).
//!
//! Behind the `replay` feature (on by default, off in the site's build).
//! `levels::Runtime::simulate` replays it within the card: its high-water mark is reserved for
//! every estimate and every planner check, and a failure while the tensors' peak is under the card
//! is named fragmentation. Also modelled: torchao's fp8 casts and QLoRA's dequantized weights as
//! backward transients; not QLoRA under kbit, not FSDP's offload, not other parallelism. Where the
//! replay does not apply, the calibrated slack fraction stands, fitted by calibrate with
//! `Calibration::replay` off. `tests/allocator_sequence.rs` checks it against the traces, and its
//! own allocated peak against the estimate's (570 scenarios, QLoRA, FSDP1 and FSDP2 among them).

mod fsdp;
mod fsdp1;

use crate::activations::{Part, Saved};
use crate::allocator::{Allocation, AllocatorSettings, CachingAllocator};
use crate::catalog::Gpu;
use crate::dtype::DType;
use crate::model::Scope;
use crate::scenario::{Fp8Recipe, LayerPlan, LossImpl, Method, Scenario, Trainer};
use std::borrow::Cow;

use super::step::Step;
use fsdp::{Fsdp2, Units};
use fsdp1::Fsdp1;

/// Steps replayed: the first fills the cache, the second may grow it, the third repeats the
/// second (every committed trace reached its reserved peak by the second step).
const STEPS: usize = 3;

/// Whether the step's sequence is modelled (else the slack fraction stands).
pub(super) fn supported(s: &Step) -> bool {
    let scen = s.scen;
    (scen.gpus == 1 || fsdp_replayed(s))
        && scen.parallel.tensor == 1
        && scen.parallel.pipeline == 1
        && s.spec.moe.is_none()
        && s.spec.linear_attention.is_none()
        && scen.trainer == Trainer::Sft
        && scen.loss == LossImpl::Hf
        && !scen.runtime.compiled()
        && !scen.keep_logits
        && !scen.act_int8
        // An 8-bit base's held inputs and int8 working sets are not written out.
        && scen.method != Method::Int8
        && !s.offload
        && s.st.optimizer.paged == 0
        && s.generation.kv_cache == 0
        && ((s.st.comm_buffers == 0 && s.st.gather_transient == 0) || fsdp_replayed(s))
        // What a layer's backward adds beside its saved tensors is written out as transients
        // for torchao's fp8 casts and QLoRA's dequantized weights (see `layer_backward`), not
        // for int8's and cp's copies.
        && (s.backward_extra == 0 || torchao_fp8(s) || qlora_replayed(s))
        && s.spec.mtp_trained == 0
        && s.inv.vision() == 0
        // Selective recompute drops part of a layer's saved tensors: not written out here.
        && (0..s.layers).all(|i| s.plan(i) != LayerPlan::Selective)
}

/// FSDP (2, or 1's flat parameters) over data-parallel ranks alone, its parameters on the GPU,
/// with the default allocator (expandable segments are modelled on the default stream only),
/// not QLoRA (its dequantized weights in backward are not written out), and adapters on a
/// 16-bit base only: no FSDP run with an fp32 frozen base was measured, and on the one
/// published (peft's Llama-2-70B LoRA under FSDP1, 72-80 GB on 80 GB H100s,
/// tests/reference/published.toml) the replay reserves 91 GB, past the card, where the slack
/// fraction's 76.6 GB agrees.
fn fsdp_replayed(s: &Step) -> bool {
    let scen = s.scen;
    s.st.fsdp.is_some()
        && (scen.method == Method::Full || scen.lora.base == crate::scenario::BaseDtype::Half)
        && scen.parallel.context == 1
        && scen.parallel.expert == 1
        && scen.parallel.offload_params == crate::scenario::Offload::None
        && scen.parallel.offload_optimizer == crate::scenario::Offload::None
        && !scen.runtime.expandable_segments
        && (scen.method != Method::Qlora || qlora_replayed(s))
        && s.generation.kv_cache == 0
}

/// QLoRA as bitsandbytes runs it without `prepare_model_for_kbit_training`: replayed with each
/// Linear's dequantized weight a transient of its backward. Against the H200's runs the replay
/// reserves what they did where the slack fraction was 8-12% under (Llama 3.1 8B on a 24 GB cap
/// at 4 x 2,048: 23.50 GiB both, slack fraction -11.6%; FSDP1's QLoRA recipe: +2.7%, +1.4%,
/// +7.0% where it said -8.3%, +5.1%, -7.7%). With kbit's fp32 norms and upcasts the no-grad
/// forward's transients are not the saved tensors the replay writes for them (it reserved 32.1
/// GiB where the traced run reserved 29.6, and failed a 24 GB run that trained), so kbit keeps
/// the slack fraction.
fn qlora_replayed(s: &Step) -> bool {
    let scen = s.scen;
    scen.method == Method::Qlora
        && !scen.lora.kbit
        && !scen.act_int8
        && scen.parallel.context == 1
        && scen.fp8 == Fp8Recipe::Off
}

/// torchao's float8 training alone adds to a layer's backward (its casts of each matmul's
/// operands, `fp8::backward_cast_bytes`).
fn torchao_fp8(s: &Step) -> bool {
    let scen = s.scen;
    matches!(scen.fp8, Fp8Recipe::Tensorwise | Fp8Recipe::Rowwise)
        && scen.method != Method::Qlora
        && !scen.act_int8
        && scen.parallel.context == 1
}

/// The high-water marks of three steps replayed.
#[derive(Debug, Clone, Copy)]
pub struct Replayed {
    pub reserved: u64,
    /// The replay's own allocated peak: the estimate's allocated level where the sequence
    /// holds every tensor the estimate counts (tests/allocator_sequence.rs checks it).
    pub allocated: u64,
}

/// The high-water marks of three steps, or the request that failed within the settings'
/// limit. `workspaces`: cuBLAS's, allocated by the first matmul and kept.
///
/// Whether a checkpointed step still finds a whole logits block free in its second step can
/// turn on where a few hundred optimizer states land among the freed activation blocks: on
/// the H200's trace 1 (Llama 3.2 1B, amp, checkpointed, 16 x 2048) the replay reserves 68.2
/// GiB where the run reserved 83.3, with the same segments otherwise (27 x 16, 48 x 64, 5-6 x
/// 256, 13-14 x 512 MiB, one 8 GiB and three, not four, 16 GiB logits blocks). Replaying the
/// states as equal pieces instead gives 83.9 there, but over the 41 runs of the H100
/// calibration the per-parameter sizes PyTorch makes are better (reserved |error| median
/// 0.64% against 1.19%, max 13.3% against 20.5%), so the replay keeps to them.
pub(super) fn replay(
    s: &Step,
    settings: AllocatorSettings,
    workspaces: u64,
) -> Result<Replayed, u64> {
    replay_steps(&[s; STEPS], settings, workspaces)
}

/// The run's replay: three steps of its one shape, or under dynamic padding its `records`
/// ([`crate::scenario::padding::records`]) in order, the first and the last twice (the first's second
/// step places what the optimizer's states displaced; the last repeats as a run's later
/// steps do).
pub(super) fn replay_run(
    s: &Step,
    gpu: &Gpu,
    records: &[u32],
    settings: AllocatorSettings,
    workspaces: u64,
) -> Result<Replayed, u64> {
    let (Some(&first), Some(&last)) = (records.first(), records.last()) else {
        return replay(s, settings, workspaces);
    };
    let mut lengths = vec![first];
    lengths.extend(records);
    lengths.push(last);
    replay_lengths(s, gpu, &lengths, settings, workspaces)
}

/// Steps padded to `lengths` tokens in order, each prepared as the scenario at that length.
pub(super) fn replay_lengths(
    s: &Step,
    gpu: &Gpu,
    lengths: &[u32],
    settings: AllocatorSettings,
    workspaces: u64,
) -> Result<Replayed, u64> {
    let shapes: Vec<Scenario> = lengths
        .iter()
        .map(|&seq| Scenario {
            seq,
            len_mean: 0,
            ..s.scen.clone()
        })
        .collect();
    let steps: Vec<Step> = shapes
        .iter()
        .map(|scen| Step::prepare_with(s.spec, Cow::Borrowed(&*s.inv), gpu, scen))
        .collect();
    let order: Vec<&Step> = steps.iter().collect();
    replay_steps(&order, settings, workspaces)
}

/// [`replay`] over steps of their own shapes, in order (dynamic padding's records,
/// [`crate::scenario::padding`]): the first loads the model and makes the optimizer's states; each then
/// runs as its prepared step says.
pub(super) fn replay_steps(
    steps: &[&Step],
    settings: AllocatorSettings,
    workspaces: u64,
) -> Result<Replayed, u64> {
    let Some(&first) = steps.first() else {
        return Ok(Replayed {
            reserved: 0,
            allocated: 0,
        });
    };
    let mut r = Replay {
        alloc: CachingAllocator::new(settings),
        failed: None,
    };
    let loaded = Model::new(first);
    let mut units = loaded.units();
    let weights = loaded.load(&mut r);
    let workspaces = r.get(workspaces);
    let inputs = r.get(first.inputs);
    let mut states: Vec<Allocation> = Vec::new();
    for (step, s) in steps.iter().enumerate() {
        let model = Model::new(s);
        let mut grads = Vec::new();
        for micro in 0..s.scen.grad_accum.clamp(1, 2) {
            let acc = micro > 0;
            let fwd = model.forward(&mut r, &mut units);
            let lm = model.loss_forward(&mut r, fwd.last);
            if let Some(u) = units.as_mut() {
                u.root_post_forward(&mut r);
            }
            model.backward(&mut r, fwd, lm, &mut grads, acc, &mut units);
        }
        if step == 0 {
            model.states(&mut r, &mut states);
        }
        model.optimizer_step(&mut r);
        r.put_all(grads);
        if let Some(requested) = r.failed {
            return Err(requested);
        }
    }
    drop((weights, workspaces, inputs, states));
    Ok(Replayed {
        reserved: r.alloc.peak_reserved(),
        allocated: r.alloc.peak_allocated(),
    })
}

/// The allocator and the request that failed, if one did (nothing is asked after it).
struct Replay {
    alloc: CachingAllocator,
    failed: Option<u64>,
}

impl Replay {
    fn get(&mut self, bytes: u64) -> Option<Allocation> {
        self.get_on(0, bytes)
    }

    /// A request on a side stream (0: the default stream).
    fn get_on(&mut self, stream: u64, bytes: u64) -> Option<Allocation> {
        if bytes == 0 || self.failed.is_some() {
            return None;
        }
        match self.alloc.malloc_on(stream, bytes) {
            Ok(a) => Some(a),
            Err(oom) => {
                self.failed = Some(oom.requested);
                None
            }
        }
    }

    fn put(&mut self, a: Option<Allocation>) {
        if let Some(a) = a {
            self.alloc.free(a);
        }
    }

    /// Freed by its owner while another stream still uses it (`record_stream`): counted free
    /// now, reusable once `put` follows.
    fn defer(&mut self, a: Option<Allocation>) -> Option<Allocation> {
        if let Some(a) = a {
            self.alloc.free_requested(a);
        }
        a
    }

    fn put_all(&mut self, v: Vec<Allocation>) {
        for a in v {
            self.alloc.free(a);
        }
    }

    /// `bytes` split into `n` requests (a tensor list: one per tensor).
    fn get_split(&mut self, bytes: u64, n: u64, into: &mut Vec<Allocation>) {
        let n = n.max(1);
        for k in 0..n {
            let part = bytes / n + u64::from(k < bytes % n);
            into.extend(self.get(part));
        }
    }
}

/// What the forward leaves for the loss and backward.
struct Forward {
    /// Per layer, what it keeps: its saved tensors, or a checkpoint's input.
    kept: Vec<Vec<Allocation>>,
    /// Per layer, autocast weight casts kept to its backward.
    casts: Vec<Vec<Allocation>>,
    /// Autocast's casts of checkpointed layers, freed when the autocast region exits.
    cache: Vec<Allocation>,
    /// RoPE's tables, kept to the first layer's backward.
    rope: Vec<Allocation>,
    /// The eager mask a checkpointed model keeps for the recomputes, to the first layer's
    /// backward (`Temporaries::ckpt_mask`).
    mask: Option<Allocation>,
    /// The final norm's and lm_head's saved tensors, freed after lm_head's backward.
    outside: Vec<Allocation>,
    /// The last hidden state (the final norm's output).
    last: Option<Allocation>,
    /// What only transformers' KV cache holds of each layer's keys and values (the model's
    /// output keeps it until the loss is computed).
    kv_cache: Vec<Allocation>,
}

/// What the loss keeps for its backward.
struct LossKept {
    log_softmax: Option<Allocation>,
    labels: Option<Allocation>,
    head_cast: Option<Allocation>,
}

/// The step's sizes, read from the prepared step.
struct Model<'s, 'a> {
    s: &'s Step<'a>,
    /// One residual-stream tensor, and one in the compute dtype.
    residual: u64,
    hidden_compute: u64,
    /// Parameter tensors per layer and their elements (trainable ones get gradients).
    layer_tensors: Vec<u64>,
    outside_tensors: Vec<u64>,
    /// Elements of each Linear weight in a layer.
    layer_linears: Vec<u64>,
    /// Bytes per trained element of a gradient as backward makes it, and a layer's adapters'
    /// gradients: unsharded under FSDP (reduce-scattered in the layer's post-backward).
    grad_per_element: f64,
    adapter_grad_bytes: u64,
}

impl<'s, 'a> Model<'s, 'a> {
    fn new(s: &'s Step<'a>) -> Self {
        let h = s.spec.hidden;
        let residual = s.t * h * s.stream.bytes();
        let hidden_compute = s.t * h * s.compute.bytes();
        let inv = &s.inv;
        let per = |scope: Scope| -> Vec<u64> {
            inv.tensors
                .iter()
                .filter(|t| (t.scope == Scope::Model) == (scope == Scope::Model))
                .map(|t| t.numel())
                .collect()
        };
        let layer_tensors = per(Scope::Layer);
        let st = &s.st;
        let (grad_per_element, adapter_grad_bytes) = match st.fsdp {
            Some(f) => (
                f.layer_grads as f64 / layer_tensors.iter().sum::<u64>().max(1) as f64,
                f.layer_grads,
            ),
            None => (
                st.gradients as f64 / st.params_trainable.max(1) as f64,
                st.layer_grad_bytes,
            ),
        };
        Model {
            s,
            residual,
            hidden_compute,
            layer_tensors,
            outside_tensors: per(Scope::Model),
            layer_linears: inv
                .tensors
                .iter()
                .filter(|t| t.scope != Scope::Model && t.linear.is_some())
                .map(|t| t.numel())
                .collect(),
            grad_per_element,
            adapter_grad_bytes,
        }
    }

    /// FSDP's units where the replay models them.
    fn units(&self) -> Option<Box<dyn Units>> {
        let s = self.s;
        let f = s.st.fsdp.filter(|_| fsdp_replayed(s))?;
        let (layer_sharded, root_sharded) = (s.st.layer_grad_bytes, s.st.outside_grad_bytes);
        if f.flat {
            Some(Box::new(Fsdp1::new(f, layer_sharded, root_sharded)))
        } else {
            Some(Box::new(Fsdp2::new(
                f,
                &self.layer_tensors,
                &self.outside_tensors,
                layer_sharded,
                root_sharded,
            )))
        }
    }

    /// The weights as the model was loaded: one request per tensor.
    /// QLoRA's 4-bit Linears are their packed data (half a byte a weight; this rank's shard of
    /// it under FSDP) and their small quantization state (`states::nf4_bytes`, whole on every
    /// rank); every other tensor gets an equal share per element of the rest.
    fn load(&self, r: &mut Replay) -> Vec<Allocation> {
        let mut out = Vec::new();
        let layers = self.s.layers;
        let shards = self.s.st.fsdp.map_or(1, |f| f.shards.max(1));
        let packed_bytes = |n: u64| n.div_ceil(2).div_ceil(shards);
        let state_bytes = |n: u64| crate::states::nf4_bytes(n) - n.div_ceil(2);
        let quantized = |t: &crate::model::ParamTensor| {
            self.s.scen.method == Method::Qlora && t.quantizable && t.scope != Scope::Model
        };
        let inv = &self.s.inv;
        let packed: u64 = inv
            .tensors
            .iter()
            .filter(|t| quantized(t))
            .map(|t| packed_bytes(t.numel()) + state_bytes(t.numel()))
            .sum::<u64>()
            * layers;
        let plain_elements: u64 = inv
            .tensors
            .iter()
            .filter(|t| !quantized(t))
            .map(|t| t.numel() * if t.scope == Scope::Model { 1 } else { layers })
            .sum();
        let per_element =
            self.s.st.weights.saturating_sub(packed) as f64 / plain_elements.max(1) as f64;
        let mut one = |r: &mut Replay, t: &crate::model::ParamTensor| {
            if quantized(t) {
                let n = t.numel();
                out.extend(r.get(packed_bytes(n)));
                out.extend(r.get(state_bytes(n)));
            } else {
                out.extend(r.get((t.numel() as f64 * per_element) as u64));
            }
        };
        for t in inv.tensors.iter().filter(|t| t.scope == Scope::Model) {
            one(r, t);
        }
        for _ in 0..layers {
            for t in inv.tensors.iter().filter(|t| t.scope != Scope::Model) {
                one(r, t);
            }
        }
        out
    }

    /// One saved tensor's requests (its identical copies each their own).
    fn get_saved(&self, r: &mut Replay, x: &Saved, into: &mut Vec<Allocation>) {
        for _ in 0..x.copies {
            into.extend(r.get(x.elements * x.dtype.bytes()));
        }
    }

    /// Whether the first norm saves the residual itself (fp32 stream or LayerNorm), so the
    /// stream is one of the layer's saved tensors rather than a tensor of its own.
    fn stream_is_saved(&self) -> bool {
        self.s.recompute_shares_input()
    }

    /// One layer's forward: its saved tensors in order with the residual adds between them and
    /// the largest transient at the MLP. Returns what it saves and the new residual.
    fn layer_forward(
        &self,
        r: &mut Replay,
        i: u64,
        residual: Option<Allocation>,
        keep: bool,
    ) -> (Vec<Allocation>, Option<Allocation>) {
        let mut saved = Vec::new();
        let mut residual = residual;
        if !keep && self.stream_is_saved() {
            // The checkpoint keeps the layer's input, the stream the norm would have saved.
            saved.extend(r.get(self.s.ckpt_input));
        }
        let mut transient: Option<Allocation> = None;
        let mut window: Vec<Allocation> = Vec::new();
        let mut last_part = None;
        for x in self.s.saved_of(i) {
            if last_part != Some(x.part) {
                // The residual adds: after attention's output projection and after the MLP.
                if last_part == Some(Part::OutputProjection) && !self.stream_is_saved() {
                    let next = r.get(self.residual);
                    r.put(residual.take());
                    residual = next;
                }
                if x.part == Part::Mlp {
                    transient = r.get(self.s.tmp.layer_forward);
                }
                last_part = Some(x.part);
            }
            if keep {
                self.get_saved(r, x, &mut saved);
            } else {
                // Without grad nothing is saved: each tensor lives until the next few ops.
                self.get_saved(r, x, &mut window);
                while window.len() > 3 {
                    let a = window.remove(0);
                    r.put(Some(a));
                }
            }
        }
        r.put(transient);
        r.put_all(window);
        if !self.stream_is_saved() {
            let next = r.get(self.residual);
            if keep {
                r.put(residual);
            } else {
                // The checkpoint keeps its input.
                saved.extend(residual);
            }
            residual = next;
        }
        (saved, residual)
    }

    fn forward(&self, r: &mut Replay, units: &mut Option<Box<dyn Units>>) -> Forward {
        let s = self.s;
        if let Some(u) = units.as_mut() {
            u.gather_root(r);
        }
        let mut rope = Vec::new();
        let mut outside = Vec::new();
        let mut residual = r.get(self.residual);
        for x in s.outside.iter().filter(|x| x.part == Part::Rope) {
            self.get_saved(r, x, &mut rope);
        }
        let mask = r.get(s.tmp.ckpt_mask);
        let mut kept = Vec::new();
        let mut casts = Vec::new();
        let mut cache = Vec::new();
        let mut kv_cache = Vec::new();
        for i in 0..s.layers {
            let keep = s.plan(i) != LayerPlan::Checkpointed;
            // autocast's cached casts of the trainable weights, and the copies no cache holds
            // (an fp32 frozen base's casts, Transformer Engine's fp8 copies).
            let mut layer_casts = Vec::new();
            self.per_linear(r, s.casts(i), &mut layer_casts);
            let mut copies = Vec::new();
            self.per_linear(r, s.kept_copies(i), &mut copies);
            kv_cache.extend(r.get(s.kv.unsaved));
            if let Some(u) = units.as_mut() {
                u.gather_layer(r);
            }
            let (saved, next) = self.layer_forward(r, i, residual, keep);
            if let Some(u) = units.as_mut() {
                u.reshard_layer(r);
            }
            residual = next;
            kept.push(saved);
            if keep {
                // Both saved for the layer's backward.
                layer_casts.extend(copies);
                casts.push(layer_casts);
            } else {
                // Without grad nothing saves the copies; the cache keeps its casts until the
                // autocast region exits.
                r.put_all(copies);
                casts.push(Vec::new());
                cache.extend(layer_casts);
            }
        }
        for x in s.outside.iter().filter(|x| x.part != Part::Rope) {
            self.get_saved(r, x, &mut outside);
        }
        // The final norm's output, held by the model's output while the head runs.
        let last = r.get(self.hidden_compute);
        r.put(residual);
        Forward {
            kept,
            casts,
            cache,
            rope,
            mask,
            outside,
            last,
            kv_cache,
        }
    }

    /// transformers' loss: logits, their fp32 upcast, log_softmax; the upcast and logits
    /// freed, log_softmax and the shifted labels kept for backward.
    fn loss_forward(&self, r: &mut Replay, last: Option<Allocation>) -> LossKept {
        let s = self.s;
        let nv = s.t * s.spec.vocab;
        let head_cast = r.get(s.st.autocast_cache_outside);
        let logits = r.get(nv * s.compute.bytes());
        let padded = r.get(s.t * 8 + s.scen.sequences() as u64 * 8);
        let labels = r.get(s.t * 8);
        r.put(padded);
        let upcast = if s.compute == DType::F32 {
            None
        } else {
            r.get(nv * 4)
        };
        let log_softmax = r.get(nv * 4);
        r.put(upcast);
        r.put(logits);
        r.put(last);
        LossKept {
            log_softmax,
            labels,
            head_cast,
        }
    }

    /// Gradients of one half of a layer's parameters (`mlp`: the MLP's side, which backward
    /// reaches first), or their in-flight copies when accumulating.
    fn grads_of(
        &self,
        r: &mut Replay,
        tensors: &[u64],
        mlp: bool,
        into: &mut Vec<Allocation>,
        acc: bool,
    ) {
        let st = &self.s.st;
        if st.params_trainable == 0 {
            return;
        }
        let per = self.grad_per_element;
        if self.s.scen.method != Method::Full {
            return self.adapter_grads(r, mlp, into, acc);
        }
        for &n in tensors {
            let g = r.get((n as f64 * per) as u64);
            if acc {
                r.put(g);
            } else {
                into.extend(g);
            }
        }
    }

    /// Half a layer's adapter gradients: small tensors, one per adapter matrix (assumed: the
    /// layer's gradient bytes split evenly, seven on each side). Until 2026-11-29 each half
    /// wrote the whole layer's, so the replay held LoRA's gradients twice (on Mistral 7B's
    /// QLoRA at 1 x 512, 160 MiB above the estimate's allocated level).
    fn adapter_grads(&self, r: &mut Replay, mlp: bool, into: &mut Vec<Allocation>, acc: bool) {
        let bytes = self.adapter_grad_bytes;
        let half = if mlp { bytes / 2 } else { bytes - bytes / 2 };
        let mut g = Vec::new();
        r.get_split(half, 7, &mut g);
        if acc {
            r.put_all(g);
        } else {
            into.extend(g);
        }
    }

    fn backward(
        &self,
        r: &mut Replay,
        fwd: Forward,
        lm: LossKept,
        grads: &mut Vec<Allocation>,
        acc: bool,
        units: &mut Option<Box<dyn Units>>,
    ) {
        let s = self.s;
        let nv = s.t * s.spec.vocab;
        if let Some(u) = units.as_mut() {
            u.prefetch_last(r);
        }
        let Forward {
            mut kept,
            mut casts,
            cache,
            rope,
            mask,
            outside,
            kv_cache,
            ..
        } = fwd;
        // The model's output (its KV cache) is dropped once the loss is computed, and the
        // autocast region exits: the checkpointed layers' casts go.
        r.put_all(kv_cache);
        r.put_all(cache);
        // nll_loss's and log_softmax's backward in fp32, then the cast back to the logits' dtype.
        let nll = r.get(nv * 4);
        let lsm = r.get(nv * 4);
        r.put(nll);
        r.put(lm.log_softmax);
        r.put(lm.labels);
        let grad_logits = if s.compute == DType::F32 {
            lsm
        } else {
            let g = r.get(nv * s.compute.bytes());
            r.put(lsm);
            g
        };
        // lm_head's backward: its weight's gradient (when trained) and its input's. Under
        // autocast the weight's gradient is first the matmul's in the compute dtype, cast to the
        // fp32 weight by the weight cast's ToCopyBackward0, a node of its own that autograd runs
        // once MmBackward0 has released the logits' gradient: the fp32 gradient takes a block
        // freed by it (on the H200's trace 1, the 16-bit logits' 7.8 GiB segment, as the run's
        // allocator placed it; the free blocks AdamW's first step then finds are the run's to the
        // largest five, though its reserved level still differs: see [`replay`]).
        let trains_outside = s.st.outside_grad_bytes > 0;
        let head_grad = s.bwd.lm_head_grad.min(s.st.outside_grad_bytes);
        let autocast_head = units.is_none()
            && trains_outside
            && crate::states::activation_precision(s.scen).is_autocast();
        let mut head_matmul = None;
        match units.as_mut() {
            // Unsharded, made afresh by every micro-batch.
            Some(u) if trains_outside => u.root_grads().make(r, s.bwd.lm_head_grad),
            None if autocast_head => {
                head_matmul = r.get(s.spec.vocab * s.spec.hidden * s.compute.bytes());
            }
            None if trains_outside && !acc => grads.extend(r.get(head_grad)),
            _ => {}
        }
        let input_grad = r.get(self.hidden_compute);
        r.put(grad_logits);
        if head_matmul.is_some() {
            if !acc {
                grads.extend(r.get(head_grad));
            }
            r.put(head_matmul);
        }
        r.put(lm.head_cast);
        let mut residual_grad = r.get(self.residual);
        r.put(input_grad);
        r.put_all(outside);
        for i in (0..s.layers).rev() {
            let layer_kept = kept.pop().unwrap_or_default();
            let mut layer_casts = casts.pop().unwrap_or_default();
            if let Some(u) = units.as_mut() {
                u.unshard_for_backward(r, i > 0);
            }
            let saved = if s.plan(i) == LayerPlan::Checkpointed {
                // The recompute: the layer's casts and its forward again, saving this time.
                self.per_linear(r, s.casts(i) + s.kept_copies(i), &mut layer_casts);
                let (saved, out) = self.layer_forward(r, i, None, true);
                r.put(out);
                r.put_all(layer_kept);
                saved
            } else {
                layer_kept
            };
            residual_grad = match units.as_mut() {
                Some(u) => {
                    let mut unsharded = Vec::new();
                    let next =
                        self.layer_backward(r, i, saved, residual_grad, &mut unsharded, false);
                    u.layer_post_backward(r, unsharded, grads, acc);
                    next
                }
                None => self.layer_backward(r, i, saved, residual_grad, grads, acc),
            };
            r.put_all(layer_casts);
        }
        r.put_all(rope);
        r.put(mask);
        // The embedding's gradient (when trained), then the residual gradient goes.
        match units.as_mut() {
            Some(u) => {
                if trains_outside {
                    let rest = u.root_grads().rest();
                    u.root_grads().make(r, rest);
                }
                r.put(residual_grad);
                u.root_post_backward(r, grads, acc);
            }
            None => {
                if trains_outside && !acc {
                    let rest =
                        s.st.outside_grad_bytes - s.bwd.lm_head_grad.min(s.st.outside_grad_bytes);
                    grads.extend(r.get(rest));
                }
                r.put(residual_grad);
            }
        }
    }

    /// One layer's backward: through its saved tensors in reverse, each one's gradient made
    /// beside it and the tensor freed once its op's backward ran; the layer's parameter
    /// gradients as the backward reaches the MLP and the attention; a new residual gradient.
    /// At the two points that set a layer's backward peak ([`super::backward::LayerBackward`],
    /// checked op by op against PyTorch's allocator), the MLP's output side and the attention
    /// core, what that peak holds above the gradients flowing here is asked for and freed at
    /// once: without it the replay's layer backward was up to 0.39 GiB leaner than the
    /// estimate's (Mistral 7B, 4 x 2,048), which showed once FSDP sharded the model states.
    fn layer_backward(
        &self,
        r: &mut Replay,
        i: u64,
        mut saved: Vec<Allocation>,
        residual_grad: Option<Allocation>,
        grads: &mut Vec<Allocation>,
        acc: bool,
    ) -> Option<Allocation> {
        let s = self.s;
        let layer = &self.layer_tensors;
        let half = layer.len() / 2;
        let (sizes, parts): (Vec<u64>, Vec<Part>) = s
            .saved_of(i)
            .iter()
            .flat_map(|x| {
                std::iter::repeat_n((x.elements * x.dtype.bytes(), x.part), x.copies as usize)
            })
            .filter(|&(b, _)| b > 0)
            .unzip();
        // The activation gradients in flight, with their bytes.
        let mut flowing: Vec<(Allocation, u64)> = Vec::new();
        let n = saved.len().min(sizes.len());
        // Where the attention core's backward runs: its last saved tensor.
        let attention_core = parts[..n].iter().rposition(|&p| p == Part::AttentionCore);
        // fp8: a converted Linear's operand casts while its backward matmuls run (the largest,
        // in the MLP's and in the attention's backward).
        let casts = |r: &mut Replay| {
            let c = r.get(s.backward_extra);
            r.put(c);
        };
        for k in (0..n).rev() {
            if k == n / 2 {
                // Past the MLP: its weights' gradients.
                self.grads_of(r, &layer[half..], true, grads, acc);
                casts(r);
            }
            if let Some(g) = r.get(sizes[k]) {
                flowing.push((g, sizes[k]));
            }
            // The two points that set the layer's backward peak, as `LayerBackward` counts them
            // (with fp8's operand casts or QLoRA's dequantized weight): the MLP's output side
            // (the output projection's weight gradient and the product's input gradients) and
            // the attention core (q, k and v's gradients and the kernel's accumulator, or
            // eager's probabilities' and scores' gradients), beside what is still saved.
            let peak = if k + 1 == n {
                Some(s.bwd.mlp_out())
            } else if attention_core == Some(k) {
                Some(s.bwd.attention_inflight())
            } else {
                None
            };
            if let Some(peak) = peak {
                // What it holds above the gradients flowing here, asked for and freed.
                let held: u64 = flowing.iter().map(|&(_, bytes)| bytes).sum();
                let extra = r.get((peak + s.backward_extra).saturating_sub(held));
                r.put(extra);
            }
            while flowing.len() > 2 {
                let (a, _) = flowing.remove(0);
                r.put(Some(a));
            }
            if let Some(a) = saved.pop() {
                r.put(Some(a));
            }
        }
        self.grads_of(r, &layer[..half], false, grads, acc);
        r.put_all(saved);
        let next = r.get(self.residual);
        r.put_all(flowing.into_iter().map(|(a, _)| a).collect());
        r.put(residual_grad);
        next
    }

    /// The optimizer's states, made at its first step: two per trainable tensor (AdamW's
    /// moments; other optimizers' states split alike), each the size of its parameter's share.
    fn states(&self, r: &mut Replay, into: &mut Vec<Allocation>) {
        let st = &self.s.st;
        self.per_trainable(r, st.optimizer.device + st.master_weights, 2, into);
    }

    /// foreach temporaries: one list of tensors, one per parameter, as large as the states'
    /// share the optimizer says, made and freed.
    fn optimizer_step(&self, r: &mut Replay) {
        let mut tmp = Vec::new();
        self.per_trainable(r, self.s.st.optimizer.step_transient, 1, &mut tmp);
        r.put_all(tmp);
    }

    /// A layer's weight casts: `bytes` over its Linears in proportion to their weights.
    fn per_linear(&self, r: &mut Replay, bytes: u64, into: &mut Vec<Allocation>) {
        if self.layer_linears.iter().sum::<u64>() == 0 {
            return r.get_split(bytes, 7, into);
        }
        for b in split(bytes, &self.layer_linears) {
            into.extend(r.get(b));
        }
    }

    /// `bytes` over the trainable tensors in proportion to their elements, `copies` requests
    /// each (a full fine-tune: every parameter; LoRA: its adapter matrices, split evenly). Under
    /// FSDP1 the optimizer sees one flat parameter per unit (the root's and each layer's shard),
    /// so a full fine-tune's states and temporaries are one request per unit: on the H200's 1B
    /// trace (`fsdp_p2_trace5`) AdamW's first step makes 2 x 16 layer states of 116 MiB and
    /// the root's two of 501 MiB, which land in the freed logits blocks and split them.
    fn per_trainable(&self, r: &mut Replay, bytes: u64, copies: u64, into: &mut Vec<Allocation>) {
        let layers = self.s.layers;
        if self.s.scen.method != Method::Full {
            return r.get_split(bytes, 14 * layers * copies, into);
        }
        let flat = self.s.st.fsdp.is_some_and(|f| f.flat);
        let units = |t: &[u64]| vec![t.iter().sum::<u64>()];
        let (outside, layer) = if flat {
            (units(&self.outside_tensors), units(&self.layer_tensors))
        } else {
            (self.outside_tensors.clone(), self.layer_tensors.clone())
        };
        let total = outside.iter().sum::<u64>() + layers * layer.iter().sum::<u64>();
        if total == 0 {
            return;
        }
        let per_element = bytes as f64 / total as f64 / copies as f64;
        let tensors = outside.iter().chain((0..layers).flat_map(|_| layer.iter()));
        for &n in tensors {
            for _ in 0..copies {
                into.extend(r.get((n as f64 * per_element) as u64));
            }
        }
    }
}

/// `bytes` over tensors in proportion to their elements (a request each; one request where
/// there are no elements).
fn split(bytes: u64, tensors: &[u64]) -> Vec<u64> {
    let total: u64 = tensors.iter().sum();
    if total == 0 {
        return vec![bytes];
    }
    let per_element = bytes as f64 / total as f64;
    tensors
        .iter()
        .map(|&n| (n as f64 * per_element) as u64)
        .collect()
}
