//! The phases of one step in order (forward, loss, backward, optimizer), each pushing the live
//! tensor bytes of its points onto the timeline.
//!
//! GRPO's generation comes first on the timeline. Gradient accumulation replays the micro-batch
//! with all gradients held.

use crate::scenario::LayerPlan;

use super::component_ids::ComponentId::*;
use super::step::Step;
use super::timeline::{At, Live, Timeline};
use super::types::Phase;

/// What the forward leaves alive for the later phases.
pub(super) struct Forward {
    /// Saved activations of every layer (and outside them), times the in-flight micro-batches.
    pub acts: u64,
    /// Autocast weight copies still saved for backward (checkpointed layers' excluded).
    pub cache: u64,
    /// Autocast's whole cache, alive until the forward's autocast region exits.
    pub autocast: u64,
    /// Of `acts`, one micro-batch's saved tensors outside the layers (on the GPU).
    pub outside: u64,
}

impl Forward {
    /// `live` plus the saved activations.
    fn acts(&self, live: Live) -> Live {
        with_acts(live, self.acts, self.outside)
    }
}

/// `live` plus saved activations `acts`, of which `outside` (one micro-batch's saved tensors
/// outside the layers) count as the outside-layers component.
fn with_acts(live: Live, acts: u64, outside: u64) -> Live {
    live.with(OutsideLayers, outside)
        .with(Activations, acts - outside)
}

/// Alive from the step's start: weights, optimizer states, master weights, inputs, buckets.
#[cfg_attr(target_arch = "wasm32", inline(never))]
fn base(s: &Step) -> Live {
    let st = &s.st;
    let live = Live::default()
        .with(Weights, st.weights)
        .with(OptimizerStates, st.optimizer.device)
        .with(MasterWeights, st.master_weights)
        .with(Inputs, s.inputs)
        .with(CommBuffers, st.persistent_comm())
        .with(Vllm, s.vllm_held());
    debug_assert_eq!(live.total(), s.base);
    live
}

/// What stays alive after the loss, as the CLI reports it.
pub(super) struct Loss {
    /// Saved activations, saved autocast copies and the loss's kept buffers.
    pub retained: u64,
}

/// The end of backward.
pub(super) struct Backward {
    /// Live bytes once every gradient exists.
    pub end: Live,
}

/// Writes the whole step onto a timeline.
pub(super) fn run(s: &Step) -> (Timeline, Forward, Loss) {
    // At most two points per layer in forward and in backward, a few more around them, and
    // all of it again for the micro-batches after the first.
    let passes = if s.scen.grad_accum > 1 { 2 } else { 1 };
    let mut tl = Timeline::with_capacity(passes * (4 * s.layers as usize + 12));
    tl.push(
        Phase::Start,
        "step start: weights, optimizer states, inputs",
        base(s),
    );
    if s.generation.kv_cache > 0 {
        tl.push(
            Phase::Forward,
            "generation: the completions' KV cache, prefill or scoring pass",
            base(s)
                .with(KvCache, s.generation.kv_cache)
                .with(ForwardTemporaries, s.generation.working),
        );
    }
    if let Some(engine) = &s.vllm {
        if engine.colocated() {
            tl.push(
                Phase::Forward,
                "generation in vLLM: its weights, KV cache and working memory",
                base(s).with(Vllm, engine.while_generating() - s.vllm_held()),
            );
        }
        tl.push(
            Phase::Forward,
            "scoring: the no-grad log-probability passes over the completions",
            base(s).with(ForwardTemporaries, s.generation.working),
        );
    }
    let micro_batch_start = tl.points.len();
    let fwd = forward(s, &mut tl);
    let loss = loss(s, &fwd, &mut tl);
    let bwd = backward(s, &fwd, &mut tl);
    if s.scen.grad_accum > 1 {
        tl.accumulated_pass(micro_batch_start, s.st.gradients);
    }
    optimizer(s, &bwd, &mut tl);
    (tl, fwd, loss)
}

/// Whether to draw the point after layer `i` (every layer up to 48, else about 24 of them).
fn sampled(i: u64, layers: u64) -> bool {
    layers <= 48 || i.is_multiple_of((layers / 24).max(1))
}

fn forward(s: &Step, tl: &mut Timeline) -> Forward {
    let layers = s.layers;
    let gather = s.st.gathered_in_forward();
    let kv = s.kv.unsaved;
    let fixed = base(s)
        .with(ForwardTemporaries, s.tmp.model_forward)
        .with(GatheredParams, gather);
    // RoPE tables etc. are saved up front.
    let outside = s.on_gpu(s.outside_bytes);
    let mut acts = outside;
    let mut cache = 0u64;
    // autocast's cache holds every cast weight until the autocast region exits (after the
    // loss), a checkpointed layer's too: `cached_cast` does not look at grad mode
    // (aten/src/ATen/autocast_mode.cpp), so the no_grad forward of reentrant checkpointing
    // fills it as well; only the non-checkpointed layers' casts are also saved for backward.
    let mut autocast = 0u64;
    // The saved activations so far, times the in-flight micro-batches.
    let saved = |acts: u64| with_acts(fixed, acts * s.in_flight, outside);
    for i in 0..layers {
        let full = s.full(i);
        let keeps = s.plan(i) == LayerPlan::Saved;
        // A recomputed layer's forward saves only what it keeps; its internals are transient.
        let inner = s.on_gpu(if keeps {
            full
        } else {
            (s.ckpt_input + s.held(i)).max(full / 4)
        });
        let kept = inner.min(s.on_gpu(s.kept(i)));
        let during = saved(acts)
            .with(AutocastCache, cache)
            .with(LayerTransients, autocast - cache)
            .with(Activations, kept)
            .with(LayerTransients, inner - kept + s.tmp.layer_forward)
            .with(KvCache, kv * i);
        tl.push(Phase::Forward, At::LayerForward(i + 1), during);
        acts += s.on_gpu(s.kept(i));
        // A checkpointed layer runs without saving its weight casts, and autocast's cache
        // is cleared when the forward's autocast region exits.
        // Transformer Engine's fp8 weight copies are saved by a layer that keeps its tensors
        // and are not kept at all by a checkpointed one (no cache holds them).
        if keeps {
            cache += s.kept_casts(i);
            autocast += s.kept_copies(i);
        }
        autocast += s.casts(i);
        if i + 1 == layers || sampled(i, layers) {
            tl.push(
                Phase::Forward,
                At::AfterLayer(i + 1),
                saved(acts)
                    .with(AutocastCache, cache)
                    .with(LayerTransients, autocast - cache)
                    .with(KvCache, kv * (i + 1)),
            );
        }
    }
    Forward {
        acts: acts * s.in_flight,
        cache: cache + s.st.autocast_cache_outside,
        autocast: autocast + s.st.autocast_cache_outside,
        outside,
    }
}

fn loss(s: &Step, fwd: &Forward, tl: &mut Timeline) -> Loss {
    let gather = s.st.gathered_at_loss();
    // `LlamaForCausalLM.forward` (and the other *ForCausalLM) holds
    // `outputs.last_hidden_state` while lm_head and the loss run; under autocast it is the fp32
    // final norm output, which nothing saves (lm_head saves its bf16 cast), otherwise it is
    // lm_head's saved input.
    let last_hidden = if crate::states::activation_precision(s.scen).is_autocast() {
        s.t * s.spec.hidden * s.stream.bytes()
    } else {
        0
    };
    // Of autocast's cache, the checkpointed layers' casts are not saved for backward.
    let before_loss = fwd
        .acts(base(s))
        .with(AutocastCache, fwd.cache)
        .with(LayerTransients, fwd.autocast - fwd.cache)
        .with(GatheredParams, gather)
        .with(GradientsInFlight, last_hidden)
        .with(ForwardTemporaries, s.tmp.ckpt_mask);
    use crate::scenario::Trainer;
    tl.push(
        Phase::Loss,
        if s.scen.reference_forward() {
            "TRL's log-probability head, then the reference forward"
        } else if s.scen.trainer.full_logits() {
            "logits, the chosen NLL and the log-probabilities"
        } else if s.scen.trainer != Trainer::Sft {
            "TRL's log-probability head"
        } else {
            "logits and loss (fp32 upcast, log_softmax)"
        },
        before_loss
            .with(LossForward, s.lm.forward_peak)
            .with(KvCache, s.kv.unsaved * s.layers),
    );
    // Alive after forward and loss: the saved tensors, the KV cache, the loss's buffers and,
    // under reentrant checkpointing with eager attention, the causal mask the checkpoints
    // keep (GPT-2 passes it positionally, so `save_for_backward` holds it; Llama-like layers
    // get it as a keyword, held by the checkpoint's `run_function` closure: alive either way).
    let retained = fwd.acts + fwd.cache + s.lm.retained + s.tmp.ckpt_mask;
    tl.push(
        Phase::Loss,
        "after loss",
        fwd.acts(base(s))
            .with(AutocastCache, fwd.cache)
            .with(LossForward, s.lm.retained)
            .with(ForwardTemporaries, s.tmp.ckpt_mask)
            .with(GatheredParams, gather),
    );
    Loss { retained }
}

/// Backward: loss, lm_head, then layers last to first, then the embedding.
fn backward(s: &Step, fwd: &Forward, tl: &mut Timeline) -> Backward {
    // With `outputs` kept, the logits and the whole KV cache stay alive to the end of the step
    // (of the cache, what attention does not save itself is extra while backward runs).
    let kept_logits = if s.scen.keep_logits { s.lm.logits } else { 0 };
    let kept_kv = if s.scen.keep_logits {
        s.kv.unsaved * s.layers
    } else {
        0
    };
    let after_lm = head_backward(s, fwd, tl, kept_logits, kept_kv);
    let kv_released = layers_backward(s, tl, after_lm);
    let end = embedding_backward(s, tl, kept_logits, kept_kv + kv_released);
    Backward { end }
}

/// The loss's and lm_head's backward and the final norm's: what is live when the last layer's
/// backward starts.
fn head_backward(
    s: &Step,
    fwd: &Forward,
    tl: &mut Timeline,
    kept_logits: u64,
    kept_kv: u64,
) -> Live {
    let st = &s.st;
    let gather = st.gathered_in_backward();
    let backward_base = fwd
        .acts(base(s))
        .with(AutocastCache, fwd.cache)
        .with(GatheredParams, gather)
        .with(KvCache, kept_kv)
        .with(ForwardTemporaries, s.tmp.ckpt_mask);
    tl.push(
        Phase::Backward,
        if s.scen.trainer.full_logits() {
            "logit gradients of the log-probabilities and NLL"
        } else if s.scen.trainer != crate::scenario::Trainer::Sft {
            "log-probability head backward (fp32 gradients)"
        } else {
            "loss backward (fp32 logit gradients)"
        },
        backward_base.with(LossBackward, s.lm.backward_peak),
    );
    let lm_head_w = s.spec.vocab * s.spec.hidden / s.scen.parallel.tensor as u64;
    // Only a trained lm_head (or embedding tied to it) gets a weight gradient: autograd skips
    // a frozen weight's (LoRA, QLoRA), so nothing is cast back.
    let lm_grad_tmp = if crate::states::activation_precision(s.scen).is_autocast()
        && s.st.outside_grad_bytes > 0
    {
        lm_head_w * s.compute.bytes()
    } else {
        0
    };
    // lm_head's backward (MmBackward0): the logits' gradient (cast back to the logits' dtype
    // by the fp32 upcast's ToCopyBackward0), lm_head's weight gradient and its input gradient.
    // Only lm_head's gradient exists yet: the embedding's comes after the first layer
    // (EmbeddingBackward0 is the last node), and the final norm's right after lm_head.
    // Under FSDP they are the root unit's unsharded gradients, in flight to their shards: the
    // root's reduce-scatter runs only when the whole backward is done.
    let (lm_grad, norm_grad, root_in_flight) = if st.fsdp.is_some() {
        (0, 0, s.bwd.lm_head_grad + s.bwd.final_norm_grad)
    } else {
        let lm_grad = st.outside_grad_bytes.min(s.bwd.lm_head_grad);
        let norm_grad = st
            .outside_grad_bytes
            .saturating_sub(lm_grad)
            .min(s.bwd.final_norm_grad);
        (lm_grad, norm_grad, 0)
    };
    tl.push(
        Phase::Backward,
        "lm_head backward",
        backward_base
            .with(Logits, kept_logits)
            .with(
                GradientsInFlight,
                s.lm.grad_logits
                    + s.t * s.spec.hidden * s.compute.bytes()
                    + lm_grad_tmp
                    + s.bwd.lm_head_grad.min(root_in_flight),
            )
            .with(Gradients, lm_grad),
    );
    // After the final norm's backward: its saved tensors and lm_head's input are released
    // (the RoPE tables and the embedding dropout mask stay until the first layer / the
    // embedding).
    let outside_freed = s.on_gpu(
        s.outside
            .iter()
            .filter(|x| x.part.is_released_after_final_norm())
            .map(|x| x.bytes())
            .sum::<u64>(),
    );
    let after_lm = backward_base
        .less(AutocastCache, st.autocast_cache_outside)
        .less(OutsideLayers, outside_freed)
        .with(Gradients, lm_grad + norm_grad)
        .with(Logits, kept_logits)
        .with(GradientsInFlight, s.tmp.residual_grad + root_in_flight);
    tl.grads_now += lm_grad + norm_grad;
    after_lm
}

/// The layers' backward, last to first, from `live`; returns the KV cache's bytes the layers
/// released to the step's end (kept outputs only).
fn layers_backward(s: &Step, tl: &mut Timeline, mut live: Live) -> u64 {
    let st = &s.st;
    let mut kv_released = 0u64;
    for i in (0..s.layers).rev() {
        let during = layer_backward_moment(s, i, live);
        tl.push(Phase::Backward, At::LayerBackward(i + 1), during);
        if s.scen.keep_logits {
            kv_released += s.kv.saved;
        }
        let released_cache = if s.plan(i) == LayerPlan::Saved {
            s.kept_casts(i)
        } else {
            0
        };
        if let Some(f) = st.fsdp {
            // After its post-backward: its reduce-scatter input replaces the previous one's
            // (FSDP2; FSDP1 holds none), and the first layer leaves only the root gathered.
            live = live
                .less(CommBuffers, live.get(CommBuffers))
                .with(CommBuffers, if f.flat { 0 } else { f.layer_reduce })
                .less(GatheredParams, if i == 0 { f.layer } else { 0 });
        }
        live = live
            .with(Gradients, st.layer_grad_bytes)
            .with(KvCache, if s.scen.keep_logits { s.kv.saved } else { 0 })
            .less(Activations, s.on_gpu(s.released(i)) * s.in_flight)
            .less(AutocastCache, released_cache)
            .less(ForwardTemporaries, if i == 0 { s.tmp.ckpt_mask } else { 0 });
        tl.grads_now += st.layer_grad_bytes;
        if i == 0 || sampled(i, s.layers) {
            tl.push(Phase::Backward, At::AfterLayerBackward(i + 1), live);
        }
    }
    kv_released
}

/// What is live while layer `i` runs its backward from `live`: its transients, and what FSDP
/// or ZeRO-3 gather beside them.
fn layer_backward_moment(s: &Step, i: u64, live: Live) -> Live {
    let st = &s.st;
    let gather = st.gathered_in_backward();
    match st.fsdp {
        // FSDP1: beside the prefetched layer, the layer's backward, then its flat gradient
        // (`SplitWithSizesBackward0` concatenates its parameters' gradients, alive until
        // then, once the layer's activations are released), and when the reduce dtype
        // differs, its post-backward: the layer's parameters freed, the flat gradient's
        // cast copy and the sharded output in the reduce dtype.
        Some(f) if f.flat => {
            let prefetched = if i > 0 { f.layer } else { 0 };
            let compute = layer_backward_transients(s, i, live).with(GatheredParams, prefetched);
            let done = live
                .less(Activations, s.on_gpu(s.released(i)) * s.in_flight)
                .with(GatheredParams, prefetched);
            let flat = done
                .with(GradientsInFlight, f.layer_grads)
                .with(CommBuffers, f.layer_grads);
            let cast = done.less(GatheredParams, f.layer).with(
                CommBuffers,
                f.layer_grads + f.layer_reduce + f.layer_reduce.div_ceil(f.shards),
            );
            larger(larger(compute, flat), cast)
        }
        // FSDP2: the layer's unsharded parameters beside the next one's prefetched
        // all-gather output (none before the first layer); its unsharded gradients are
        // the layer's backward's own (`Step::layer_backward`).
        Some(f) if i > 0 => layer_backward_transients(s, i, live).with(GatheredParams, f.layer),
        // The first layer prefetches nothing, but its copy-out writes the unsharded
        // parameters while its all-gather output is still alive.
        Some(f) => larger(
            layer_backward_transients(s, i, live),
            live.with(GatheredParams, f.layer),
        ),
        // ZeRO-3 gathers the layer's weights again beside the running and prefetched.
        None => layer_backward_transients(s, i, live).with(LayerTransients, gather / 2),
    }
}

/// The embedding's backward and, under FSDP, the root's gradients: the end of backward.
fn embedding_backward(s: &Step, tl: &mut Timeline, kept_logits: u64, kept_kv: u64) -> Live {
    let st = &s.st;
    // EmbeddingBackward0 (embedding_dense_backward) writes a fresh vocab x hidden gradient
    // while the embedding output's gradient is alive. With tied embeddings lm_head's gradient
    // waited in the weight's input buffer (its AccumulateGrad runs once both arrived), and the
    // engine adds the two out of place (torch/csrc/autograd/input_buffer.cpp: lm_head's is a
    // transposed view, not stealable): two fresh vocab x hidden tensors beside the first.
    let end = base(s)
        .with(Gradients, st.gradients)
        .with(Logits, kept_logits)
        .with(KvCache, kept_kv);
    let in_flight = if s.spec.tie_embeddings {
        2 * s.bwd.lm_head_grad
    } else {
        s.tmp.residual_grad
    };
    match st.fsdp {
        None => {
            tl.grads_now = st.gradients;
            tl.push(
                Phase::Backward,
                "embedding backward",
                end.with(GradientsInFlight, in_flight),
            )
        }
        // FSDP: the root's gradients are still unsharded, its parameters gathered and the
        // first layer's reduce-scatter input held, until the root's post-backward frees them
        // and reduce-scatters the root's gradients through a copy in the reduce dtype.
        Some(f) => {
            // (With the parameters offloaded the sharded gradients are on the host.)
            let sharded_root = st.outside_grad_bytes.min(end.get(Gradients));
            let layers_only = end
                .less(Gradients, sharded_root)
                .with(GradientsInFlight, f.root_grads);
            tl.grads_now = layers_only.get(Gradients);
            tl.push(
                Phase::Backward,
                "embedding backward",
                layers_only
                    .with(GatheredParams, f.root)
                    .with(CommBuffers, if f.flat { 0 } else { f.layer_reduce })
                    .with(GradientsInFlight, in_flight),
            );
            if f.flat {
                tl.push(
                    Phase::Backward,
                    "FSDP1: the root's flat gradient",
                    layers_only
                        .with(GatheredParams, f.root)
                        .with(GradientsInFlight, f.root_grads),
                );
                if f.root_reduce > 0 {
                    tl.push(
                        Phase::Backward,
                        "FSDP1: the root's gradient cast to the reduce dtype",
                        layers_only.with(
                            GradientsInFlight,
                            f.root_reduce + f.root_reduce.div_ceil(f.shards),
                        ),
                    );
                }
            } else {
                tl.push(
                    Phase::Backward,
                    "FSDP: the root's reduce-scatter",
                    layers_only.with(CommBuffers, f.root_reduce),
                );
            }
        }
    }
    tl.grads_now = st.gradients;
    tl.push(Phase::Backward, "end of backward: all gradients", end);
    end
}

/// The moment with more live bytes (the first on a tie).
fn larger(a: Live, b: Live) -> Live {
    if b.total() > a.total() { b } else { a }
}

/// What layer `i`'s backward allocates above the live bytes before it: a checkpointed layer's
/// recompute (or the rest of a selectively recomputed one), offloaded saves coming back, its
/// autocast weight copies, and the backward's own peak, on top of `live`.
fn layer_backward_transients(s: &Step, i: u64, live: Live) -> Live {
    let full = s.full(i);
    let plan = s.plan(i);
    // Reentrant checkpointing reruns the layer's forward inside backward: everything it saves
    // is allocated again, except the kept input when the first norm saves the input itself.
    // The recompute runs inside backward, outside `save_on_cpu`'s forward context: its saved
    // tensors are on the GPU even when activations are offloaded.
    let recompute = if plan == LayerPlan::Checkpointed {
        let shared = if s.recompute_shares_input() {
            s.ckpt_input
        } else {
            0
        };
        // (The layer's inventory is already without transformers' KV cache, which
        // checkpointing turns off: `Shape::kv_cache`.) What 8-bit Linears hold is kept from
        // the forward; the recompute's own contexts go with the recomputed graph.
        full.saturating_sub(shared + s.held(i))
    } else {
        s.on_gpu(full).saturating_sub(s.on_gpu(s.kept(i)))
    };
    // Its autocast weight copies: saved since the forward (cleared from autocast's cache when
    // the forward's region exited), or cast again by a checkpointed layer's recompute
    // (checkpoint restores the autocast state); either way released by this backward.
    let casts = if plan == LayerPlan::Saved {
        0
    } else {
        s.casts(i) + s.kept_copies(i)
    };
    // Offloaded saves come back to the GPU for this layer's backward: all of them, or only
    // the checkpointed layer's input.
    let offload_back = match (s.offload, plan == LayerPlan::Checkpointed) {
        (false, _) => 0,
        (true, true) => s.kept(i),
        (true, false) => full,
    };
    // A dense layer of a MoE model may pass the line (a MoE layer's): the rest is transient.
    let peak = s.layer_backward(i);
    let line = peak.min(s.layer_backward_line());
    live.with(
        LayerTransients,
        recompute + casts + offload_back + peak - line,
    )
    .with(LayerBackward, line)
}

fn optimizer(s: &Step, bwd: &Backward, tl: &mut Timeline) {
    tl.push(
        Phase::Optimizer,
        "optimizer step",
        bwd.end.with(OptimizerStep, s.st.optimizer.step_transient),
    );
    tl.push(Phase::Optimizer, "after zero_grad", base(s));
}
