//! One estimate: the components, the timeline of one training step, the peaks at three levels
//! (tensors, allocator, device) and the verdict for the chosen GPU.

use serde::Serialize;

use crate::activations::{self, Saved, Shape};
use crate::calibration::Calibration;
use crate::catalog::{Gpu, GpuCatalog, PresetCatalog};
use crate::dtype::DType;
use crate::error::ScenarioError;
use crate::loss::{LossMemory, loss_memory};
use crate::model::{Family, MlpKind, ModelSpec, NormKind, inventory};
use crate::scenario::{
    Attention, Checkpointing, Method, ModelChoice, Optimizer, Precision, Scenario,
};
use crate::states::{ModelStates, model_states};

/// How sure a number is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Confidence {
    /// Follows from shapes and dtypes; checked against real PyTorch where covered.
    Exact,
    /// Measured on this GPU by `calibrate`.
    Calibrated,
    /// A documented default or a modelling assumption.
    Assumed,
}

/// Whether a component lives all step long or only for part of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Lifetime {
    Persistent,
    Transient,
}

/// A phase of one training step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Start,
    Forward,
    Loss,
    Backward,
    Optimizer,
}

impl Phase {
    pub fn label(self) -> &'static str {
        match self {
            Phase::Start => "step start",
            Phase::Forward => "forward",
            Phase::Loss => "loss",
            Phase::Backward => "backward",
            Phase::Optimizer => "optimizer step",
        }
    }
}

/// The level a component is counted at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// Live tensor bytes (`torch.cuda.max_memory_allocated`).
    Tensors,
    /// Allocator overheads within `max_memory_allocated` / `max_memory_reserved`.
    Allocator,
    /// Outside PyTorch's allocator: visible to nvidia-smi only.
    Device,
}

/// One line of the breakdown.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Component {
    pub id: &'static str,
    pub name: String,
    pub bytes: u64,
    pub lifetime: Lifetime,
    /// The phase in which it is largest or allocated.
    pub phase: Phase,
    pub level: Level,
    pub formula: String,
    pub source: String,
    pub confidence: Confidence,
}

/// One point of the step timeline.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TimelinePoint {
    pub phase: Phase,
    pub label: String,
    pub tensors: u64,
    pub allocated: u64,
    pub reserved: u64,
    pub device: u64,
}

/// Peaks at each level and where the tensor peak happens.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Peaks {
    pub tensors: u64,
    pub allocated: u64,
    pub reserved: u64,
    pub device: u64,
    pub phase: Phase,
    pub at: String,
}

/// Fits or not on the chosen GPU.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    pub gpu: String,
    pub capacity: u64,
    pub fits: bool,
    /// Capacity minus the device-level peak (negative when it does not fit).
    pub headroom: i64,
    pub headroom_percent: f64,
}

/// Parameter counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ParamCounts {
    pub total: u64,
    pub trainable: u64,
    /// Held by one GPU after tensor/pipeline splitting (before ZeRO-3/FSDP sharding).
    pub per_gpu: u64,
}

/// The headline byte counts (the CLI's `bytes` object).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct KeyBytes {
    pub weights: u64,
    pub gradients: u64,
    pub optimizer_states: u64,
    /// One steady decoder layer's saved tensors (parameters excluded), without checkpointing.
    pub activations_per_layer: u64,
    /// Everything alive after forward and loss beyond weights, gradients, optimizer states and
    /// input ids: saved activations, autocast weight copies, logits if kept, loss buffers.
    pub retained_after_forward: u64,
    pub peak_tensors: u64,
    pub peak_allocated: u64,
    pub peak_reserved: u64,
    pub peak_device: u64,
    /// Pinned host memory for offloaded activations or states, and NVMe bytes.
    pub host: u64,
    pub nvme: u64,
}

/// The full result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Estimate {
    pub model: String,
    pub gpu: String,
    pub parameters: ParamCounts,
    pub bytes: KeyBytes,
    pub peak: Peaks,
    pub verdict: Verdict,
    pub components: Vec<Component>,
    pub timeline: Vec<TimelinePoint>,
    /// The saved tensors of one decoder layer, for the "why" view.
    pub layer_inventory: Vec<Saved>,
    pub calibrated: bool,
    /// What makes the scenario questionable though it can be estimated (a sequence longer than
    /// the model's positions, say), one sentence each.
    pub warnings: Vec<String>,
}

/// Sentences about a scenario that can be estimated but may not be what the user meant.
fn warnings(spec: &ModelSpec, scen: &Scenario) -> Vec<String> {
    let seq = u64::from(scen.seq);
    let mut out = Vec::new();
    if spec.position_embeddings > 0 && seq > spec.position_embeddings {
        out.push(format!(
            "The model's learned position table has {} rows: sequences of {seq} tokens cannot run \
             (the estimate is for the shapes as given).",
            spec.position_embeddings
        ));
    } else if spec.max_positions > 0 && seq > spec.max_positions {
        out.push(format!(
            "{seq} tokens is longer than the model's max_position_embeddings ({}): it needs RoPE \
             scaling or long-context training to be useful.",
            spec.max_positions
        ));
    }
    out
}

/// Resolves the model of a scenario through the preset catalog.
pub fn resolve_model(scen: &Scenario) -> Result<(String, ModelSpec), ScenarioError> {
    match &scen.model {
        ModelChoice::Preset(id) => {
            let p = PresetCatalog::builtin().get(id)?;
            Ok((p.id.clone(), p.spec.clone()))
        }
        ModelChoice::Custom(spec) => Ok(("custom".into(), (**spec).clone())),
    }
}

/// What a scenario needs before any formula runs: its model, its GPU and that GPU's runtime
/// constants, from the built-in catalogs.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub name: String,
    pub spec: ModelSpec,
    pub gpu: &'static Gpu,
    pub calibration: Calibration,
}

/// Validates a scenario and resolves its model, GPU and calibration (the one place every
/// surface does this: `estimate`, `analyze`, the CLI and the site).
pub fn resolve(scen: &Scenario) -> Result<Resolved, ScenarioError> {
    scen.validate()?;
    let (name, spec) = resolve_model(scen)?;
    let gpu = GpuCatalog::builtin().get(&scen.gpu)?;
    Ok(Resolved {
        name,
        spec,
        gpu,
        calibration: Calibration::for_gpu(gpu),
    })
}

/// Estimates a scenario with the built-in catalogs and the GPU's calibration.
pub fn estimate(scen: &Scenario) -> Result<Estimate, ScenarioError> {
    let r = resolve(scen)?;
    Ok(Estimate {
        model: r.name,
        ..estimate_with(&r.spec, r.gpu, &r.calibration, scen)
    })
}

const MIB: u64 = 1 << 20;

/// Estimates with explicit model, GPU and calibration (the pure core of everything else).
/// `model` is left empty: the caller that resolved the model names it.
pub fn estimate_with(spec: &ModelSpec, gpu: &Gpu, cal: &Calibration, scen: &Scenario) -> Estimate {
    let inv = inventory(spec);
    let st = model_states(spec, &inv, scen);
    let sh = Shape::from_scenario(spec, scen);
    let t = sh.tokens();
    let stream = activations::stream_dtype(&sh);
    let compute = scen.precision.compute_dtype();
    let pp = scen.parallel.pipeline as u64;

    // Saved activations per layer (dense and MoE layers), then what checkpointing keeps.
    let dense_items = activations::layer(spec, &sh);
    let dense_full = activations::total(&dense_items);
    let moe_full = if spec.moe.is_some() {
        activations::total(&activations::moe_layer(spec, &sh))
    } else {
        0
    };
    let sparse_frac = spec.moe.as_ref().map_or(0, |m| m.sparse_layers);
    let layer_full = |i: u64| -> u64 {
        // Sparse layers are the last `sparse_layers` when some are dense (mlp_only_layers).
        if spec.moe.is_some() && i >= spec.layers - sparse_frac {
            moe_full
        } else {
            dense_full
        }
    };
    let ckpt_input = activations::checkpoint_input(spec, &sh);
    let attention_s2: u64 = dense_items
        .iter()
        .filter(|s| {
            s.what.contains("softmax")
                || s.what.contains("probabilities")
                || s.what.contains("dropout mask (saved by dropout)")
        })
        .map(Saved::bytes)
        .sum();
    let kept = |i: u64| -> u64 {
        match scen.checkpointing {
            Checkpointing::None => layer_full(i),
            Checkpointing::Full => ckpt_input,
            Checkpointing::Every(k) => {
                if i.is_multiple_of(k as u64) {
                    ckpt_input
                } else {
                    layer_full(i)
                }
            }
            Checkpointing::Selective => layer_full(i) - attention_s2,
        }
    };
    let layers = st.layers_local;
    // In-flight micro-batches on the first pipeline stage (1F1B keeps up to pp of them).
    let in_flight = pp.min(scen.grad_accum as u64).max(1);
    let offload = scen.offload_activations;
    let on_gpu = |bytes: u64| if offload { 0 } else { bytes };

    let outside_items = activations::outside_layers(spec, &sh);
    let outside = activations::total(&outside_items);
    let lm = loss_memory(
        spec,
        t,
        scen.parallel.tensor as u64,
        compute,
        scen.loss,
        scen.keep_logits,
        sh.b,
    );

    // Inputs: input_ids and labels (int64), counted at step start.
    let inputs = 2 * t * 8;
    let weights = st.weights;
    let states = st.optimizer.device + st.master_weights;
    let base = weights + states + inputs + st.comm_buffers;

    // Forward-only temporaries alive for the whole model forward.
    let eager_mask = if scen.attention == Attention::Eager {
        sh.b * sh.s * sh.s * stream.bytes()
    } else {
        0
    };
    let embed_out = if stream == DType::F32 {
        0
    } else {
        t * spec.hidden * stream.bytes()
    };
    let fwd_model_tmp = eager_mask + embed_out;
    // Reentrant checkpointing saves every tensor argument of a checkpointed layer
    // (CheckpointFunction.forward: ctx.save_for_backward), the eager causal mask included: it
    // then lives until the first layer's backward instead of ending with the forward.
    let ckpt_mask = if matches!(
        scen.checkpointing,
        Checkpointing::Full | Checkpointing::Every(_)
    ) {
        eager_mask
    } else {
        0
    };
    // Inside one layer: the largest unsaved temporary (eager scores before softmax, or the
    // fp32 normalized tensor before its cast).
    let heads_local = spec.heads / (scen.parallel.tensor as u64).min(spec.heads);
    let layer_fwd_tmp = match scen.attention {
        Attention::Eager => sh.b * heads_local * sh.s * sh.s * compute.bytes(),
        Attention::Sdpa => t * spec.hidden * 4,
    };
    // Backward of one layer: activation gradients in flight (MLP: the product's grad and the
    // two factor grads; eager attention: probability and score grads) and the residual grad.
    let f_local = spec.intermediate / scen.parallel.tensor as u64;
    let mlp_bwd = 3 * t * f_local * compute.bytes();
    let attn_bwd = match scen.attention {
        Attention::Eager => sh.b * heads_local * sh.s * sh.s * (4 + 4 + compute.bytes()),
        Attention::Sdpa => {
            t * (spec.q_dim() + 2 * spec.kv_dim()) / scen.parallel.tensor as u64 * compute.bytes()
                + t * spec.q_dim() * 4
        }
    };
    let layer_bwd_tmp = mlp_bwd.max(attn_bwd) + t * spec.hidden * stream.bytes();
    let residual_grad = t * spec.hidden * stream.bytes();
    let bwd = LayerBackward::new(spec, scen, &sh, &dense_items, st.autocast_cache_per_layer);
    // transformers' decoder models return a KV cache in training too (`use_cache` defaults to
    // True; `DynamicLayer.update` keeps the key/value tensors themselves). It lives as long as
    // the outputs: through the loss, and to the end of the step when the loop keeps `outputs`.
    let kv = kv_cache(spec, scen, &sh);
    let kv_unsaved = kv.unsaved * layers;

    let mut tl = Timeline::default();
    tl.push(
        Phase::Start,
        "step start: weights, optimizer states, inputs",
        base,
    );
    let micro_batch_start = tl.points.len();
    // Forward.
    let cache_layer = st.autocast_cache_per_layer;
    let mut acts = on_gpu(outside.min(outside)); // RoPE tables etc. are saved up front
    let gather = st.gather_transient;
    let mut cache = 0u64;
    // autocast's cache holds every cast weight until the autocast region exits (after the
    // loss), a checkpointed layer's too: `cached_cast` does not look at grad mode
    // (aten/src/ATen/autocast_mode.cpp), so the no_grad forward of reentrant checkpointing
    // fills it as well; only the non-checkpointed layers' casts are also saved for backward.
    let mut fwd_cache = 0u64;
    for i in 0..layers {
        let full_i = layer_full(i);
        let recompute_free = kept(i) != full_i;
        let inner = if recompute_free {
            ckpt_input.max(full_i / 4)
        } else {
            full_i
        };
        let during = base
            + acts * in_flight
            + fwd_cache
            + fwd_model_tmp
            + gather
            + on_gpu(inner)
            + layer_fwd_tmp
            + kv.unsaved * i;
        tl.push(Phase::Forward, format!("layer {} forward", i + 1), during);
        acts += on_gpu(kept(i));
        // A checkpointed layer runs without saving its weight casts, and autocast's cache
        // is cleared when the forward's autocast region exits.
        if !recompute_free {
            cache += cache_layer;
        }
        fwd_cache += cache_layer;
        if i + 1 == layers || layers <= 48 || i % (layers / 24).max(1) == 0 {
            tl.push(
                Phase::Forward,
                format!("after layer {}", i + 1),
                base + acts * in_flight + fwd_cache + fwd_model_tmp + gather + kv.unsaved * (i + 1),
            );
        }
    }
    let acts_total = acts * in_flight;
    cache += st.autocast_cache_outside;
    fwd_cache += st.autocast_cache_outside;
    // The loss.
    // `LlamaForCausalLM.forward` (and the other *ForCausalLM) holds `outputs.last_hidden_state`
    // while lm_head and the loss run; under autocast it is the fp32 final norm output, which
    // nothing saves (lm_head saves its bf16 cast), otherwise it is lm_head's saved input.
    let last_hidden = if scen.precision.is_autocast() {
        t * spec.hidden * stream.bytes()
    } else {
        0
    };
    let before_loss = base + acts_total + fwd_cache + gather + last_hidden + ckpt_mask;
    tl.push(
        Phase::Loss,
        "logits and loss (fp32 upcast, log_softmax)",
        before_loss + lm.forward_peak + kv_unsaved,
    );
    let retained = acts_total + cache + lm.retained;
    // (`retained_after_forward` stays the saved-tensor count of tests/reference/measure_saved.py,
    // which does not see the checkpointed mask; the timeline carries it.)
    tl.push(
        Phase::Loss,
        "after loss",
        base + retained + gather + ckpt_mask,
    );
    // Backward: loss, lm_head, then layers last to first.
    // With `outputs` kept, the logits and the whole KV cache stay alive to the end of the step
    // (of the cache, what attention does not save itself is extra while backward runs).
    let kept_logits = if scen.keep_logits { lm.logits } else { 0 };
    let kept_kv = if scen.keep_logits { kv_unsaved } else { 0 };
    let backward_base = base + acts_total + cache + gather + kept_kv + ckpt_mask;
    tl.push(
        Phase::Backward,
        "loss backward (fp32 logit gradients)",
        backward_base + lm.backward_peak,
    );
    let lm_head_w = spec.vocab * spec.hidden / scen.parallel.tensor as u64;
    let lm_grad_tmp = if scen.precision.is_autocast() {
        lm_head_w * compute.bytes()
    } else {
        0
    };
    let outside_grads = st.outside_grad_bytes;
    // lm_head's backward (MmBackward0): the logits' gradient (cast back to the logits' dtype by
    // the fp32 upcast's ToCopyBackward0), lm_head's weight gradient and its input gradient.
    // Only lm_head's gradient exists yet: the embedding's comes after the first layer
    // (EmbeddingBackward0 is the last node), and the final norm's right after lm_head.
    let lm_grad = outside_grads.min(bwd.lm_head_grad);
    let norm_grad = outside_grads
        .saturating_sub(lm_grad)
        .min(bwd.final_norm_grad);
    tl.push(
        Phase::Backward,
        "lm_head backward",
        backward_base
            + kept_logits
            + lm.grad_logits
            + t * spec.hidden * compute.bytes()
            + lm_grad
            + lm_grad_tmp,
    );
    // After the final norm's backward: its saved tensors and lm_head's input are released (the
    // RoPE tables and the embedding dropout mask stay until the first layer / the embedding).
    let outside_freed = on_gpu(
        outside_items
            .iter()
            .filter(|s| !s.what.contains("RoPE") && !s.what.contains("embedding dropout"))
            .map(Saved::bytes)
            .sum::<u64>(),
    );
    let after_lm = backward_base - st.autocast_cache_outside - outside_freed
        + lm_grad
        + norm_grad
        + kept_logits
        + residual_grad;
    tl.grads_now += lm_grad + norm_grad;
    let mut live = after_lm;
    let shares_input =
        matches!(spec.family, Family::Gpt2 | Family::GptNeox | Family::Opt) || stream == DType::F32;
    let mut kv_released = 0u64;
    let recompute_free = |i: u64| kept(i) != layer_full(i);
    // GPT-2 with SDPA: the contiguous k and v that SDPA saves come from the KV cache
    // (`DynamicLayer.update` concatenates), which gradient checkpointing turns off
    // (`use_cache=False`); the recomputed layer saves views of c_attn's output instead.
    let gpt2_cache_copies = if spec.family == Family::Gpt2 && scen.attention == Attention::Sdpa {
        2 * t * spec.q_dim() / scen.parallel.tensor as u64 * compute.bytes()
    } else {
        0
    };
    for i in (0..layers).rev() {
        let full_i = layer_full(i);
        let checkpointed = kept(i) != full_i && kept(i) == ckpt_input;
        // Reentrant checkpointing reruns the layer's forward inside backward: everything it
        // saves is allocated again, except the kept input when the first norm saves the input
        // itself (fp32 stream or LayerNorm: the detached input shares its storage).
        // The recompute runs inside backward, outside `save_on_cpu`'s forward context: its
        // saved tensors are on the GPU even when activations are offloaded.
        let recompute = if checkpointed {
            full_i
                .saturating_sub(if shares_input { kept(i) } else { 0 })
                .saturating_sub(gpt2_cache_copies)
        } else {
            on_gpu(full_i).saturating_sub(on_gpu(kept(i)))
        };
        // Its autocast weight copies: saved since the forward (cleared from autocast's cache
        // when the forward's region exited), or cast again by a checkpointed layer's recompute
        // (checkpoint restores the autocast state); either way released by this backward.
        let recompute = recompute + if recompute_free(i) { cache_layer } else { 0 };
        // Offloaded saves come back to the GPU for this layer's backward: all of them, or only
        // the checkpointed layer's input.
        let offload_back = match (offload, checkpointed) {
            (false, _) => 0,
            (true, true) => kept(i),
            (true, false) => full_i,
        };
        let inner = if spec.moe.is_some() && i >= spec.layers - sparse_frac {
            // MoE layers: the routed experts' backward is not modelled op by op (assumed).
            layer_bwd_tmp + st.layer_grad_bytes
        } else {
            bwd.peak(st.layer_grad_bytes)
        };
        let during = live + recompute + offload_back + inner + gather / 2;
        tl.push(Phase::Backward, format!("layer {} backward", i + 1), during);
        if scen.keep_logits {
            kv_released += kv.saved;
        }
        live = live + st.layer_grad_bytes + if scen.keep_logits { kv.saved } else { 0 }
            - on_gpu(kept(i)) * in_flight
            - if recompute_free(i) { 0 } else { cache_layer }
            - if i == 0 { ckpt_mask } else { 0 };
        tl.grads_now += st.layer_grad_bytes;
        if i == 0 || layers <= 48 || i % (layers / 24).max(1) == 0 {
            tl.push(
                Phase::Backward,
                format!("after layer {} backward", i + 1),
                live,
            );
        }
    }
    tl.grads_now = st.gradients;
    // EmbeddingBackward0 (embedding_dense_backward) writes a fresh vocab x hidden gradient
    // while the embedding output's gradient is alive. With tied embeddings lm_head's gradient
    // waited in the weight's input buffer (its AccumulateGrad runs once both arrived), and the
    // engine adds the two out of place (torch/csrc/autograd/input_buffer.cpp: lm_head's is a
    // transposed view, not stealable): two fresh vocab x hidden tensors beside the first.
    let end_backward = base + st.gradients + kept_logits + kept_kv + kv_released;
    tl.push(
        Phase::Backward,
        "embedding backward",
        end_backward
            + if spec.tie_embeddings {
                2 * bwd.lm_head_grad
            } else {
                residual_grad
            },
    );
    tl.push(
        Phase::Backward,
        "end of backward: all gradients",
        end_backward,
    );
    if scen.grad_accum > 1 {
        tl.accumulated_pass(micro_batch_start, st.gradients);
    }
    tl.push(
        Phase::Optimizer,
        "optimizer step",
        end_backward + st.optimizer.step_transient,
    );
    tl.push(Phase::Optimizer, "after zero_grad", base);

    // Levels: allocated adds 512-byte rounding and cuBLAS workspaces; reserved adds the
    // allocator's slack over transient bytes; device adds the context, NCCL, paged states.
    let workspaces = cal.cublas_workspace_bytes * cal.cublas_workspaces;
    let slack_frac = if scen.runtime.expandable_segments {
        cal.reserved_slack_fraction_expandable
    } else {
        cal.reserved_slack_fraction
    };
    let persistent = weights + states;
    let nccl = if scen.gpus > 1 { cal.nccl_bytes } else { 0 };
    let paged = st.optimizer.paged;
    let graph_pool = if scen.runtime.cuda_graphs {
        acts_total
    } else {
        0
    };
    let rounding = st.rounding_overhead;
    let device_extra = cal.cuda_context_bytes + nccl + paged + graph_pool;
    let mut points = Vec::with_capacity(tl.points.len());
    for (phase, label, tensors) in tl.points {
        let allocated = tensors + rounding + workspaces;
        let transient = allocated.saturating_sub(persistent);
        let reserved = round_up(allocated + (transient as f64 * slack_frac) as u64, 2 * MIB);
        points.push(TimelinePoint {
            phase,
            label,
            tensors,
            allocated,
            reserved,
            device: reserved + device_extra,
        });
    }
    let peak_point = points
        .iter()
        .fold(None::<&TimelinePoint>, |best, p| match best {
            Some(b) if b.tensors >= p.tensors => Some(b),
            _ => Some(p),
        })
        .cloned()
        .unwrap_or(TimelinePoint {
            phase: Phase::Start,
            label: String::new(),
            tensors: 0,
            allocated: 0,
            reserved: 0,
            device: 0,
        });
    let max_of = |f: fn(&TimelinePoint) -> u64| points.iter().map(f).max().unwrap_or(0);
    let peak = Peaks {
        tensors: peak_point.tensors,
        allocated: max_of(|p| p.allocated),
        reserved: max_of(|p| p.reserved),
        device: max_of(|p| p.device),
        phase: peak_point.phase,
        at: peak_point.label.clone(),
    };
    let capacity = gpu.total_bytes;
    let headroom = capacity as i64 - peak.device as i64;
    let verdict = Verdict {
        gpu: gpu.id.clone(),
        capacity,
        fits: headroom >= 0,
        headroom,
        headroom_percent: (headroom as f64 / capacity as f64 * 1000.0).round() / 10.0,
    };

    // Host memory: offloaded states, and save_on_cpu's pinned copies (each save copied, pinned
    // blocks rounded up to a power of two by the caching host allocator).
    // A checkpointed layer saves only its input (the rest is recomputed in backward, on the
    // GPU), so only that goes to the host.
    let host_acts = if offload {
        let full_layer: u64 = dense_items
            .iter()
            .map(|s| s.elements * s.dtype.bytes())
            .map(u64::next_power_of_two)
            .sum();
        let per_layer = |i: u64| {
            if kept(i) == layer_full(i) {
                full_layer
            } else if kept(i) == ckpt_input {
                ckpt_input.next_power_of_two()
            } else {
                full_layer.saturating_sub(attention_s2)
            }
        };
        (0..layers).map(per_layer).sum::<u64>() * in_flight
    } else {
        0
    };
    let act_per_layer_no_ckpt = dense_full;
    let bytes = KeyBytes {
        weights,
        gradients: st.gradients,
        optimizer_states: states + paged,
        activations_per_layer: act_per_layer_no_ckpt,
        retained_after_forward: retained,
        peak_tensors: peak.tensors,
        peak_allocated: peak.allocated,
        peak_reserved: peak.reserved,
        peak_device: peak.device,
        host: st.host_bytes + host_acts,
        nvme: st.nvme_bytes,
    };
    let components = components(ComponentInputs {
        spec,
        scen,
        st: &st,
        cal,
        lm: &lm,
        acts_total,
        act_layer: dense_full,
        kept_layer: kept(layers.saturating_sub(1) / 2),
        outside,
        cache,
        inputs,
        workspaces,
        rounding,
        reserved_slack: peak.reserved - peak.allocated,
        nccl,
        graph_pool,
        layer_bwd_tmp: if spec.moe.is_some() {
            layer_bwd_tmp + st.layer_grad_bytes
        } else {
            bwd.peak(st.layer_grad_bytes)
        },
        layer_bwd_exact: spec.moe.is_none(),
        fwd_model_tmp,
        host_acts,
    });
    Estimate {
        model: String::new(),
        gpu: gpu.id.clone(),
        parameters: ParamCounts {
            total: st.params_total,
            trainable: st.params_trainable,
            per_gpu: st.params_local,
        },
        bytes,
        peak,
        verdict,
        components,
        timeline: points,
        layer_inventory: dense_items,
        calibrated: cal.is_measured(),
        warnings: warnings(spec, scen),
    }
}

fn round_up(x: u64, to: u64) -> u64 {
    x.div_ceil(to) * to
}

#[derive(Default)]
struct Timeline {
    points: Vec<(Phase, String, u64)>,
    /// Per point, the accumulated gradients its bytes include (`grads_now` when pushed).
    held: Vec<u64>,
    /// Gradients accumulated so far in this micro-batch's backward.
    grads_now: u64,
}

impl Timeline {
    fn push(&mut self, phase: Phase, label: impl Into<String>, tensors: u64) {
        self.points.push((phase, label.into(), tensors));
        self.held.push(self.grads_now);
    }

    /// Gradient accumulation: the micro-batches after the first run the same forward, loss and
    /// backward while the whole gradient from the earlier ones stays allocated (`zero_grad`
    /// runs only after the optimizer step; AccumulateGrad adds each new gradient into it in
    /// place). Appends that pass: each point of the first micro-batch (from `first`) with the
    /// gradients it held replaced by all of them.
    fn accumulated_pass(&mut self, first: usize, gradients: u64) {
        for j in first..self.points.len() {
            let (phase, label, tensors) = self.points[j].clone();
            let held = self.held[j];
            self.points.push((
                phase,
                format!("next micro-batches: {label}"),
                tensors.saturating_sub(held) + gradients,
            ));
            self.held.push(gradients);
        }
    }
}

struct ComponentInputs<'a> {
    spec: &'a ModelSpec,
    scen: &'a Scenario,
    st: &'a ModelStates,
    cal: &'a Calibration,
    lm: &'a LossMemory,
    acts_total: u64,
    act_layer: u64,
    kept_layer: u64,
    outside: u64,
    cache: u64,
    inputs: u64,
    workspaces: u64,
    rounding: u64,
    reserved_slack: u64,
    nccl: u64,
    graph_pool: u64,
    layer_bwd_tmp: u64,
    layer_bwd_exact: bool,
    fwd_model_tmp: u64,
    host_acts: u64,
}

const SRC_HF: &str =
    "transformers 5.23 modeling code; checked with saved_tensors_hooks on CPU (tests/reference)";
const SRC_ALLOC: &str =
    "PyTorch c10/cuda/CUDACachingAllocator.cpp (512 B rounding, 2/20 MiB segments)";

fn components(c: ComponentInputs) -> Vec<Component> {
    let ComponentInputs {
        spec,
        scen,
        st,
        cal,
        lm,
        ..
    } = c;
    let assumed_or_cal = if cal.is_measured() {
        Confidence::Calibrated
    } else {
        Confidence::Assumed
    };
    let cal_src = match &cal.source {
        crate::calibration::CalibrationSource::Assumed => {
            "documented default (see calibration.rs); run `calibrate` to measure".to_string()
        }
        crate::calibration::CalibrationSource::Measured { file, measured_on } => {
            format!("measured by calibrate: {file} ({measured_on})")
        }
    };
    let mut v = Vec::new();
    let mut push = |id: &'static str,
                    name: &str,
                    bytes: u64,
                    lifetime: Lifetime,
                    phase: Phase,
                    level: Level,
                    formula: String,
                    source: &str,
                    confidence: Confidence| {
        v.push(Component {
            id,
            name: name.to_string(),
            bytes,
            lifetime,
            phase,
            level,
            formula,
            source: source.to_string(),
            confidence,
        });
    };
    use Lifetime::*;
    push(
        "weights",
        "Weights",
        st.weights,
        Persistent,
        Phase::Start,
        Level::Tensors,
        st.weights_formula.clone(),
        "parameter inventory of the config (equals transformers num_parameters); bitsandbytes quantize_4bit for NF4",
        Confidence::Exact,
    );
    push(
        "gradients",
        "Gradients",
        st.gradients,
        Transient,
        Phase::Backward,
        Level::Tensors,
        st.gradients_formula.clone(),
        "one gradient per trainable parameter, in its dtype; freed by zero_grad(set_to_none=True)",
        Confidence::Exact,
    );
    push(
        "optimizer_states",
        "Optimizer states",
        st.optimizer.device,
        Persistent,
        Phase::Start,
        Level::Tensors,
        st.optimizer_formula.clone(),
        crate::optimizer::source(scen.optimizer),
        Confidence::Exact,
    );
    if st.master_weights > 0 {
        push(
            "master_weights",
            "fp32 master weights and gradient partition",
            st.master_weights,
            Persistent,
            Phase::Start,
            Level::Tensors,
            "4 B/param master + 4 B/param fp32 gradients, partitioned".into(),
            "DeepSpeed estimate_zero2_model_states_mem_needs: 18 = 2 + 4 + 4 + 8 B/param",
            Confidence::Exact,
        );
    }
    if st.optimizer.paged > 0 {
        push(
            "paged_states",
            "Paged optimizer states (managed memory)",
            st.optimizer.paged,
            Persistent,
            Phase::Start,
            Level::Device,
            "8-bit states of tensors >= 1e5 elements, in CUDA managed memory".into(),
            "bitsandbytes get_state_buffer: paged buffers bypass the caching allocator",
            Confidence::Exact,
        );
    }
    push(
        "inputs",
        "Input ids and labels",
        c.inputs,
        Persistent,
        Phase::Start,
        Level::Tensors,
        format!(
            "2 x {} tokens x 8 B (int64)",
            scen.micro_batch as u64 * scen.seq as u64
        ),
        "int64 token ids",
        Confidence::Exact,
    );
    let ckpt_note = match scen.checkpointing {
        Checkpointing::None => String::new(),
        other => format!(
            "; with checkpointing ({}) a layer keeps {} B",
            other.label(),
            c.kept_layer
        ),
    };
    push(
        "activations",
        "Saved activations (all layers)",
        c.acts_total,
        Transient,
        Phase::Forward,
        Level::Tensors,
        format!(
            "{} B per layer x {} layers{}{}",
            c.act_layer,
            st.layers_local,
            ckpt_note,
            if scen.offload_activations {
                "; offloaded to pinned host memory by save_on_cpu"
            } else {
                ""
            }
        ),
        SRC_HF,
        Confidence::Exact,
    );
    push(
        "outside_layers",
        "RoPE tables, final norm, lm_head input",
        c.outside,
        Transient,
        Phase::Forward,
        Level::Tensors,
        "saved once per step outside the decoder layers".into(),
        SRC_HF,
        Confidence::Exact,
    );
    if c.cache > 0 {
        push(
            "autocast_cache",
            "Autocast 16-bit weight copies",
            c.cache,
            Transient,
            Phase::Forward,
            Level::Tensors,
            "2 B x trainable Linear weights: cached on first use, saved for backward".into(),
            "aten/src/ATen/autocast_mode.cpp cached_cast",
            Confidence::Exact,
        );
    }
    push(
        "logits",
        "Logits",
        lm.logits,
        Transient,
        Phase::Loss,
        Level::Tensors,
        format!(
            "{} tokens x {} vocab x {} B",
            scen.micro_batch as u64 * scen.seq as u64,
            spec.vocab,
            scen.precision.compute_dtype().bytes()
        ),
        "lm_head output; freed after the loss unless the loop keeps `outputs`",
        Confidence::Exact,
    );
    push(
        "loss_forward",
        "Loss forward (fp32 upcast + log_softmax)",
        lm.forward_peak,
        Transient,
        Phase::Loss,
        Level::Tensors,
        "logits + 4 B x N x V upcast + 4 B x N x V log_softmax output".into(),
        "transformers loss_utils.ForCausalLMLoss: logits.float(); cross_entropy = log_softmax + nll_loss",
        Confidence::Exact,
    );
    push(
        "loss_backward",
        "Loss backward buffers",
        lm.backward_peak,
        Transient,
        Phase::Backward,
        Level::Tensors,
        "nll_loss and log_softmax gradients (fp32, N x V each) + the saved log_softmax output"
            .into(),
        "PyTorch nll_loss_backward / _log_softmax_backward_data",
        Confidence::Exact,
    );
    push(
        "layer_backward",
        "One layer's backward peak above its saved tensors",
        c.layer_bwd_tmp,
        Transient,
        Phase::Backward,
        Level::Tensors,
        if c.layer_bwd_exact {
            "max of: MLP output projection's weight gradient + 2 (1 for gelu) x tokens x intermediate gradients in flight; \
             MLP/norm/o_proj gradients - their released saved tensors + attention's in-flight gradients (eager: 2 x b x heads x s^2 in softmax's dtype)"
                .into()
        } else {
            "MoE layer: all its gradients + the largest activation gradients in flight (assumed)"
                .into()
        },
        "autograd engine node order and release_variables (torch/csrc/autograd/engine.cpp); checked against the CPU allocator (tests/reference/test_step_peak.py)",
        if c.layer_bwd_exact {
            Confidence::Exact
        } else {
            Confidence::Assumed
        },
    );
    if c.fwd_model_tmp > 0 {
        push("forward_temporaries", "Forward temporaries (mask, embeddings)", c.fwd_model_tmp, Transient, Phase::Forward, Level::Tensors, "eager causal mask b x s x s and the 16-bit embedding output, alive for the whole model forward".into(), SRC_HF, Confidence::Exact);
    }
    if st.optimizer.step_transient > 0 {
        push(
            "optimizer_step",
            "Optimizer step temporaries",
            st.optimizer.step_transient,
            Transient,
            Phase::Optimizer,
            Level::Tensors,
            "foreach: one tensor list the size of the states (sqrt of exp_avg_sq)".into(),
            "torch.optim docs: foreach uses ~sizeof(params) more peak memory",
            Confidence::Exact,
        );
    }
    if st.comm_buffers > 0 {
        push(
            "comm_buffers",
            "Communication buckets",
            st.comm_buffers,
            Persistent,
            Phase::Backward,
            Level::Tensors,
            st.comm_formula.clone(),
            "torch reducer.hpp bucket_cap_mb 25 / DeepSpeed zero config reduce_bucket_size 5e8",
            Confidence::Assumed,
        );
    }
    if st.gather_transient > 0 {
        push(
            "gathered_params",
            "Gathered (unsharded) parameters",
            st.gather_transient,
            Transient,
            Phase::Forward,
            Level::Tensors,
            "running + prefetched layer in 16 bits (and FSDP's root module)".into(),
            "fully_shard docstring; DeepSpeed stage3 prefetch",
            Confidence::Assumed,
        );
    }
    push(
        "rounding",
        "Allocator rounding (512 B blocks)",
        c.rounding,
        Persistent,
        Phase::Start,
        Level::Allocator,
        "each persistent tensor rounded up to a multiple of 512 B".into(),
        SRC_ALLOC,
        Confidence::Exact,
    );
    push(
        "cublas_workspace",
        "cuBLAS workspaces",
        c.workspaces,
        Persistent,
        Phase::Forward,
        Level::Allocator,
        format!(
            "{} workspaces x {} B (forward and autograd threads)",
            cal.cublas_workspaces, cal.cublas_workspace_bytes
        ),
        "aten/src/ATen/cuda/CublasHandlePool.cpp: 32 MiB on sm90, 8 MiB + 128 KiB otherwise",
        assumed_or_cal,
    );
    push(
        "reserved_slack",
        "Allocator slack (reserved - allocated)",
        c.reserved_slack,
        Transient,
        Phase::Backward,
        Level::Allocator,
        format!(
            "{:.0}% of transient bytes{}",
            100.0
                * if scen.runtime.expandable_segments {
                    cal.reserved_slack_fraction_expandable
                } else {
                    cal.reserved_slack_fraction
                },
            if scen.runtime.expandable_segments {
                " (expandable_segments)"
            } else {
                ""
            }
        ),
        &cal_src,
        assumed_or_cal,
    );
    push(
        "cuda_context",
        "CUDA context",
        cal.cuda_context_bytes,
        Persistent,
        Phase::Start,
        Level::Device,
        "driver context, kernels loaded lazily (CUDA >= 11.7)".into(),
        &cal_src,
        assumed_or_cal,
    );
    if c.nccl > 0 {
        push(
            "nccl",
            "NCCL buffers",
            c.nccl,
            Persistent,
            Phase::Start,
            Level::Device,
            "communicator buffers per process".into(),
            &cal_src,
            assumed_or_cal,
        );
    }
    if c.graph_pool > 0 {
        push(
            "cuda_graph_pool",
            "CUDA graph private pool",
            c.graph_pool,
            Persistent,
            Phase::Forward,
            Level::Device,
            "the captured region's high-water mark, held apart from the default pool".into(),
            "PyTorch CUDA graphs notes: private pools keep their high-water mark",
            Confidence::Assumed,
        );
    }
    if st.host_bytes + c.host_acts > 0 {
        push(
            "host",
            "Host (CPU) memory",
            st.host_bytes + c.host_acts,
            Persistent,
            Phase::Start,
            Level::Device,
            "offloaded states and save_on_cpu pinned copies (power-of-two blocks); not GPU memory"
                .into(),
            "DeepSpeed ZeRO-Offload; torch.autograd.graph.save_on_cpu; CachingHostAllocator",
            Confidence::Assumed,
        );
    }
    let _ = Optimizer::AdamW;
    let _ = Precision::Fp32;
    v
}

/// One decoder layer's backward, from the autograd nodes transformers' layers record (reverse
/// order; each node frees its saved tensors once it ran, `release_variables` in
/// torch/csrc/autograd/engine.cpp; AccumulateGrad steals a fresh gradient as `.grad`). Two
/// points set a dense layer's backward peak above its start (saved tensors, incoming gradient):
/// - the MLP's output side: the output projection's weight gradient, then the product's (or
///   the activation's) input gradients while the incoming one replaced the freed projection
///   input: `dW_out + n x T x f` (n = 2 for act(gate) * up, gelu_new's last product and ReLU,
///   whose saved output is freed only after it ran; 1 for gelu/gelu_tanh). Under autocast the
///   output projection's bf16 weight copy is released by then;
/// - the attention core: the MLP, second norm and output projection gradients have
///   accumulated while their saved tensors were released; eager attention then holds the
///   probabilities' and the scores' gradients (both in softmax's dtype: fp32 in Llama-like
///   models, `softmax(..., dtype=float32)`) and v's gradient; the 16-bit copy of the
///   probabilities that matmul saved is freed by then (MmBackward ran). SDPA holds q/k/v's
///   gradients and the flash kernel's fp32 dq accumulator (assumed from its CUDA code).
///
/// Checked against the CPU allocator's events in tests/reference/test_step_peak.py.
struct LayerBackward {
    lm_head_grad: u64,
    final_norm_grad: u64,
    mlp_out: u64,
    before_attention_grads: u64,
    before_attention_freed: u64,
    attention_inflight: u64,
}

impl LayerBackward {
    fn new(
        spec: &ModelSpec,
        scen: &Scenario,
        sh: &Shape,
        items: &[Saved],
        autocast_cache_per_layer: u64,
    ) -> Self {
        let tp = scen.parallel.tensor as u64;
        let t = sh.tokens();
        let h = spec.hidden;
        let c = scen.precision.compute_dtype().bytes();
        let pb = activations::stream_dtype(sh).bytes();
        let full = scen.method == Method::Full;
        let trained = |x: u64| if full { x * pb } else { 0 };
        let f = spec.intermediate / tp;
        let q = spec.q_dim() / tp;
        let heads = spec.heads / tp.min(spec.heads);
        let norm_params = match spec.norm {
            NormKind::RmsNorm => h,
            NormKind::LayerNorm => 2 * h,
        };
        let amp = autocast_cache_per_layer > 0;
        let mats = crate::model::params::mlp_matrices(spec);
        let out_bias = if spec.mlp_bias { h } else { 0 };
        let n = match spec.mlp {
            MlpKind::Gated => 2,
            MlpKind::Plain if matches!(spec.activation.as_str(), "gelu_new" | "relu") => 2,
            MlpKind::Plain => 1,
        };
        let mlp_out = trained(h * f + out_bias) + n * t * f * c - if amp { h * f * c } else { 0 };
        let mlp_params = mats * h * f + if spec.mlp_bias { (mats - 1) * f + h } else { 0 };
        let post_norms = match spec.family {
            Family::Llama | Family::Gemma | Family::Phi3 => spec.norms_per_layer - 1,
            _ => 1,
        };
        let o_params = q * h + if spec.o_bias { h } else { 0 };
        let before_attention_grads = trained(mlp_params + post_norms * norm_params + o_params);
        let before_attention_freed = activations::freed_before_attention(items)
            + if amp { (mats * h * f + q * h) * c } else { 0 };
        let scores = sh.b * heads * sh.s * sh.s;
        let attention_inflight = match scen.attention {
            Attention::Eager => {
                let llama_like =
                    matches!(spec.family, Family::Llama | Family::Gemma | Family::Phi3);
                let soft = if llama_like { 4 } else { c };
                let cast_freed = if soft != c { scores * c } else { 0 };
                2 * scores * soft - cast_freed + t * q * c
            }
            Attention::Sdpa => {
                t * (spec.q_dim() + 2 * spec.kv_dim()) / tp * c + t * q * 4 + t * q * c
            }
        };
        LayerBackward {
            lm_head_grad: trained(spec.vocab.div_ceil(tp) * h),
            final_norm_grad: if spec.final_norm {
                trained(norm_params)
            } else {
                0
            },
            mlp_out,
            before_attention_grads,
            before_attention_freed,
            attention_inflight,
        }
    }

    /// The layer's backward peak above its start (its gradients as this GPU keeps them).
    fn peak(&self, layer_grads: u64) -> u64 {
        let attention = (self.before_attention_grads.min(layer_grads) + self.attention_inflight)
            .saturating_sub(self.before_attention_freed);
        self.mlp_out.max(attention)
    }
}

/// The KV cache transformers returns in training (Llama-like families; off under gradient
/// checkpointing, which sets `use_cache=False`): bytes per layer, split into what attention
/// saves anyway (the same storages) and what only the cache holds: the un-repeated k and v of
/// eager attention with grouped heads, and under autocast the fp32 k after RoPE (fp32 cos/sin
/// promote it; SDPA and matmul save bf16 casts).
#[derive(Debug, Clone, Copy, Default)]
struct KvCache {
    saved: u64,
    unsaved: u64,
}

fn kv_cache(spec: &ModelSpec, scen: &Scenario, sh: &Shape) -> KvCache {
    let llama_like = matches!(spec.family, Family::Llama | Family::Gemma | Family::Phi3);
    if scen.checkpointing != Checkpointing::None {
        return KvCache::default();
    }
    let tp = scen.parallel.tensor as u64;
    if spec.family == Family::Gpt2 {
        // `DynamicLayer.update` concatenates: contiguous k and v, which attention saves.
        let c = scen.precision.compute_dtype().bytes();
        return KvCache {
            saved: 2 * sh.tokens() * spec.q_dim() / tp * c,
            unsaved: 0,
        };
    }
    if !llama_like {
        return KvCache::default();
    }
    let kv = (spec.kv_heads / tp).max(1) * spec.head_dim * sh.tokens();
    let c = scen.precision.compute_dtype().bytes();
    let amp = scen.precision.is_autocast();
    let grouped = spec.heads > spec.kv_heads;
    let eager = scen.attention == Attention::Eager;
    let k = kv * if amp { 4 } else { c };
    let v = kv * c;
    let k_unsaved = amp || (eager && grouped);
    let v_unsaved = eager && grouped;
    let unsaved = if k_unsaved { k } else { 0 } + if v_unsaved { v } else { 0 };
    KvCache {
        saved: k + v - unsaved,
        unsaved,
    }
}
