//! The breakdown: one line per component, each with its formula, source and confidence. What
//! never changes for a component (name, lifetime, phase, level, source) is a table keyed by
//! [`ComponentId`]; the list only says which are present and their bytes and formulas.

use crate::calibration::{Calibration, CalibrationSource};
use crate::format::bytes;
use crate::scenario::Checkpointing;

use super::component_ids::{ComponentId, Src, Sure};
use super::labels::Lifetime;
use super::levels::{Runtime, slack_fraction};
use super::step::Step;
use super::timeline::Live;
use super::types::{Component, Confidence};

/// Bytes of the saved tensors of `items` at `part`.
fn part_bytes_of(items: &[crate::activations::Saved], part: crate::activations::Part) -> u64 {
    items
        .iter()
        .filter(|i| i.part == part)
        .map(crate::activations::Saved::bytes)
        .sum()
}

/// Byte counts the phases computed that the breakdown reports.
pub(super) struct Totals {
    /// Saved activations of all layers (times the in-flight micro-batches).
    pub activations: u64,
    /// Autocast weight copies saved for backward.
    pub autocast_cache: u64,
    /// Reserved minus allocated at the peak.
    pub reserved_slack: u64,
    /// Offloaded activations' pinned host copies.
    pub host_activations: u64,
    /// Each component's largest live bytes over the step (the live-only lines' bytes).
    pub live_max: Live,
}

/// Collects components, filling in each one's metadata.
struct Parts<'a> {
    out: Vec<Component>,
    s: &'a Step<'a>,
    cal: &'a Calibration,
}

impl Parts<'_> {
    fn add(&mut self, id: ComponentId, bytes: u64, formula: impl Into<String>) {
        self.add_as(id, bytes, formula, id.meta().sure);
    }

    /// Adds a component whose confidence in this scenario is `sure` rather than its table's.
    fn add_as(&mut self, id: ComponentId, bytes: u64, formula: impl Into<String>, sure: Sure) {
        let meta = id.meta();
        let confidence = match sure {
            Sure::Exact => Confidence::Exact,
            Sure::Assumed => Confidence::Assumed,
            Sure::Runtime if self.cal.is_measured() => Confidence::Calibrated,
            Sure::Runtime => Confidence::Assumed,
        };
        let source_key = match meta.source {
            Src::Text => ("component", meta.id),
            Src::Optimizer => (
                "optimizer",
                crate::optimizer::source_key(self.s.scen.optimizer),
            ),
            Src::Calibration => ("", ""),
        };
        let source = match meta.source {
            Src::Text | Src::Optimizer => {
                crate::catalog::source_text(source_key.0, source_key.1).to_string()
            }
            Src::Calibration => match &self.cal.source {
                CalibrationSource::Assumed => {
                    "documented default, not measured on this GPU".to_string()
                }
                CalibrationSource::Measured { file, measured_on } => {
                    format!("measured by calibrate: {file} ({measured_on})")
                }
            },
        };
        self.out.push(Component {
            id: meta.id,
            name: meta.name.to_string(),
            bytes,
            lifetime: meta.lifetime,
            phase: meta.phase,
            level: meta.level,
            formula: formula.into(),
            source,
            source_key,
            confidence,
        });
    }

    /// Adds the component only when it holds bytes in this scenario.
    fn add_nonzero(&mut self, id: ComponentId, bytes: u64, formula: impl Into<String>) {
        if bytes > 0 {
            self.add(id, bytes, formula);
        }
    }
}

/// The breakdown of one estimate, in display order.
pub(super) fn list(s: &Step, cal: &Calibration, rt: &Runtime, totals: &Totals) -> Vec<Component> {
    let mut p = Parts {
        out: Vec::new(),
        s,
        cal,
    };
    model_state_lines(&mut p);
    activation_lines(&mut p, totals);
    transient_lines(&mut p, totals);
    runtime_lines(&mut p, rt, totals);
    p.out
}

/// Weights, gradients, optimizer states and the inputs.
fn model_state_lines(p: &mut Parts) {
    use ComponentId::*;
    let s = p.s;
    let (st, scen) = (&s.st, s.scen);
    let tokens = scen.sequences() as u64 * scen.seq_local() as u64;
    p.add(Weights, st.weights, st.weights_formula.clone());
    p.add(Gradients, st.gradients, st.gradients_formula.clone());
    p.add(
        OptimizerStates,
        st.optimizer.device,
        st.optimizer_formula.clone(),
    );
    p.add_nonzero(
        MasterWeights,
        st.master_weights,
        "4 B/param master + 4 B/param fp32 gradients, partitioned",
    );
    p.add_nonzero(
        PagedStates,
        st.optimizer.paged,
        "8-bit states of tensors >= 1e5 elements, in CUDA managed memory",
    );
    p.add(
        Inputs,
        s.inputs,
        format!("2 x {tokens} tokens x 8 B (int64)"),
    );
}

/// The decoder layers' saved activations and what is saved outside them.
fn activation_lines(p: &mut Parts, totals: &Totals) {
    use ComponentId::*;
    let s = p.s;
    let (st, scen, spec) = (&s.st, s.scen, s.spec);
    let ckpt_note = match scen.checkpointing {
        Checkpointing::None => String::new(),
        other => format!(
            "; with checkpointing ({}) a layer keeps {}",
            other.label(),
            bytes(s.kept(s.layers.saturating_sub(1) / 2))
        ),
    };
    let offloaded = if scen.offload_activations {
        "; offloaded to pinned host memory by save_on_cpu"
    } else {
        ""
    };
    // Llama 4's NoPE layers and Qwen3-Next's full-attention layers save their own bytes; the
    // gated DeltaNet layers are estimated as transformers' torch fallback runs them.
    let kinds = match (&spec.llama4, &spec.linear_attention) {
        (Some(_), _) if spec.other_attention_layers() > 0 => format!(
            "; {} NoPE layers (no q/k norm) save their own",
            spec.other_attention_layers()
        ),
        (_, Some(la)) => format!(
            "; {} gated DeltaNet layers as transformers' torch fallback saves them (checked on \
             CPU; on GPUs flash-linear-attention's Triton kernel runs and saves differently: \
             assumed), {} full-attention layers their own",
            la.layers,
            spec.other_attention_layers()
        ),
        _ => String::new(),
    };
    // A trained vision tower's saved tensors (outside the layers, counted in both lines) are
    // an assumed inventory.
    let vision = part_bytes_of(&s.outside, crate::activations::Part::Vision);
    // ... and so are the gated DeltaNet layers' (transformers' torch fallback, not the fla kernel).
    let deltanet = spec.linear_attention.is_some();
    let sure = |id: ComponentId| {
        if vision > 0 || (deltanet && matches!(id, Activations)) {
            Sure::Assumed
        } else {
            id.meta().sure
        }
    };
    p.add_as(
        Activations,
        totals.activations,
        format!(
            "{} per layer x {} layers{kinds}{ckpt_note}{offloaded}",
            bytes(s.dense_bytes),
            st.layers_local
        ),
        sure(Activations),
    );
    p.add_as(
        OutsideLayers,
        s.outside_bytes,
        if vision > 0 {
            format!(
                "saved once per step outside the decoder layers, of which the trained vision \
                 tower and projector {} ({} images, assumed)",
                bytes(vision),
                u64::from(scen.sequences()) * u64::from(scen.images)
            )
        } else {
            "saved once per step outside the decoder layers".to_string()
        },
        sure(OutsideLayers),
    );
}

/// The logits, the loss, the layers' transients, the optimizer step's and the sharded
/// runs' buffers.
fn transient_lines(p: &mut Parts, totals: &Totals) {
    use ComponentId::*;
    let s = p.s;
    let (st, scen, spec) = (&s.st, s.scen, s.spec);
    let tokens = scen.sequences() as u64 * scen.seq_local() as u64;
    p.add_nonzero(
        AutocastCache,
        totals.autocast_cache,
        if crate::fp8::te_converts(s.spec, s.scen) {
            "Transformer Engine's fp8 weight copies (2 B x each te.Linear's weight, both \
             layouts, kept to its layer's backward) and autocast's 2 B copies of the other \
             trainable Linear weights"
        } else {
            "2 B x trainable Linear weights: cached on first use, saved for backward"
        },
    );
    p.add(
        Logits,
        s.lm.logits,
        format!(
            "{tokens} tokens x {} vocab x {} B",
            spec.vocab,
            s.compute.bytes()
        ),
    );
    let (forward, backward) = loss_formulas(scen);
    p.add(LossForward, s.lm.forward_peak, forward);
    p.add(LossBackward, s.lm.backward_peak, backward);
    layer_backward(p);
    live_only(p, &totals.live_max);
    p.add_nonzero(
        ForwardTemporaries,
        s.tmp.model_forward,
        "eager causal mask b x s x s and the 16-bit embedding output, alive for the whole model forward",
    );
    p.add_nonzero(
        OptimizerStep,
        st.optimizer.step_transient,
        "foreach: one tensor list the size of the states (sqrt of exp_avg_sq)",
    );
    p.add_nonzero(CommBuffers, st.comm_buffers, st.comm_formula.clone());
    // FSDP's come and go with its units (`ModelStates::persistent_comm`).
    if st.fsdp.is_some()
        && let Some(c) = p.out.last_mut().filter(|c| c.id == "comm_buffers")
    {
        c.lifetime = Lifetime::Transient;
    }
    p.add_nonzero(
        GatheredParams,
        st.gather_transient,
        "running + prefetched layer in 16 bits (and FSDP's root module)",
    );
}

/// What the allocator, CUDA, NCCL and CUDA graphs hold, and the host's share.
fn runtime_lines(p: &mut Parts, rt: &Runtime, totals: &Totals) {
    use ComponentId::*;
    let (s, cal) = (p.s, p.cal);
    let (st, scen) = (&s.st, s.scen);
    p.add(
        Rounding,
        rt.rounding,
        "each persistent tensor rounded up to a multiple of 512 B",
    );
    p.add(
        CublasWorkspace,
        rt.workspaces,
        format!(
            "{} workspaces x {} (forward and autograd threads)",
            cal.cublas_workspaces,
            bytes(cal.cublas_workspace_bytes)
        ),
    );
    let expandable = if scen.runtime.expandable_segments {
        " (expandable_segments)"
    } else {
        ""
    };
    p.add(
        ReservedSlack,
        totals.reserved_slack,
        if cfg!(feature = "replay") && rt.simulated && !rt.padding_records().is_empty() {
            let records = rt.padding_records();
            format!(
                "the caching allocator's high-water mark over micro-batches padded to their \
                 longest sample, replayed{expandable}: the {} of {} micro-batches that are \
                 longer than all before them ({} tokens) keep their own segments, {} over one \
                 step of seq tokens (cache the allocator frees before a request would fail: the \
                 verdict leaves it out)",
                records.len(),
                crate::scenario::padding::HORIZON,
                records
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(", "),
                bytes(rt.padding_growth)
            )
        } else if cfg!(feature = "replay") && rt.simulated {
            format!(
                "the caching allocator's high-water mark over three steps, replayed{expandable}"
            )
        } else {
            format!(
                "{:.0}% of transient bytes{expandable}{}",
                100.0 * slack_fraction(cal, scen),
                if scen.len_mean > 0 {
                    "; one shape (the CLI replays dynamic padding)"
                } else {
                    ""
                }
            )
        },
    );
    p.add(
        CudaContext,
        cal.cuda_context_bytes,
        "driver context, kernels loaded lazily (CUDA >= 11.7)",
    );
    p.add_nonzero(Nccl, rt.nccl, "communicator buffers per process");
    p.add_nonzero(
        CudaGraphPool,
        rt.graph_pool,
        "the compiled forward and backward's high-water mark, held in the graphs' private pool, \
         which the eager optimizer step's temporaries cannot reuse",
    );
    p.add_nonzero(
        Host,
        st.host_bytes + totals.host_activations,
        "offloaded states and save_on_cpu pinned copies (power-of-two blocks); not GPU memory",
    );
}

/// What the loss's forward and backward peaks are made of, by how the scenario computes it
/// (`crate::loss`).
fn loss_formulas(scen: &crate::scenario::Scenario) -> (&'static str, &'static str) {
    use crate::scenario::{LossImpl, Trainer};
    if scen.trainer.full_logits() {
        return (
            "logits + the chosen half's log_softmax",
            "logit gradients + the chosen half's",
        );
    }
    if scen.trainer != Trainer::Sft {
        return (
            "TRL's tiled LM head, or the reference forward",
            "tile + fp32 gradients",
        );
    }
    match scen.loss {
        LossImpl::Fused => ("Liger: gradients + two fp32 chunks", "gradients held"),
        LossImpl::Hf if scen.runtime.compiled() => (
            "compiled: logits + fp32 logsumexp",
            "logits + fp32 gradient + cast",
        ),
        LossImpl::Hf => (
            "logits + 4 B x N x V upcast + 4 B x N x V log_softmax output",
            "nll_loss and log_softmax gradients (fp32, N x V each) + the saved log_softmax output",
        ),
    }
}

/// The live-only lines (what the timeline holds that no other line counts), each with its
/// largest value over the step (`max`).
fn live_only(p: &mut Parts, max: &Live) {
    use ComponentId::*;
    p.add_nonzero(
        LayerTransients,
        max.get(LayerTransients),
        "a layer forward's unsaved temporaries; in backward, its recomputed or reloaded saved \
         tensors, weight casts and gathered weights (largest moment)",
    );
    p.add_nonzero(
        GradientsInFlight,
        max.get(GradientsInFlight),
        "gradients of the logits, lm_head's input, the residual stream and the embedding; the \
         last hidden state during the loss (largest moment)",
    );
    p.add_nonzero(
        KvCache,
        max.get(KvCache),
        "key and value tensors the model returns beyond those attention saves",
    );
    if let Some(e) = &p.s.vllm {
        p.add_nonzero(Vllm, max.get(Vllm), crate::vllm::describe(e));
    }
}

/// One layer's backward peak: followed op by op for dense layers, assumed for MoE layers
/// (the routed experts' backward is not modelled op by op).
fn layer_backward(p: &mut Parts) {
    use ComponentId::LayerBackward;
    let s = p.s;
    if s.spec.moe.is_some() {
        p.add_as(
            LayerBackward,
            s.layer_backward_line(),
            "MoE layer: all its gradients + the largest activation gradients in flight (assumed)",
            Sure::Assumed,
        );
    } else {
        p.add(
            LayerBackward,
            s.layer_backward_line(),
            "max of: MLP output projection's weight gradient + 2 (1 for gelu) x tokens x intermediate gradients in flight; \
             MLP/norm/o_proj gradients - their released saved tensors + attention's in-flight gradients (eager: 2 x b x heads x s^2 in softmax's dtype)",
        );
    }
}
