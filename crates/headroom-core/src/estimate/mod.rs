//! One estimate: the components, the timeline of one training step, the peaks at three levels
//! (tensors, allocator, device) and the verdict for the chosen GPU.
//!
//! The estimate runs in phases over one prepared step, each in its own file:
//! `step.rs` prepares (model states, saved tensors, loss, temporaries, each layer's
//! checkpointing plan); `schedule.rs` walks forward, loss, backward and the optimizer onto a
//! timeline; `levels.rs` raises it to the allocator and device levels and takes the peaks;
//! `host.rs` counts offloaded activations; `components.rs` writes the breakdown. Each timeline
//! point keeps what it is made of (`timeline::Live`, bytes per component), so the tensor peak
//! lists its parts (`Peaks::parts`).
//!
//! Each point's `timeline::Live` sums to the point's tensor bytes; its label is kept as data
//! (`timeline::Label`) and written out only for the estimate. `Peaks::parts` sums exactly to
//! `peak.tensors`; `tests/peak_parts.rs` checks that, and that no part exceeds its component's
//! line, over the named scenarios and their variants. What no other line counts (a layer's
//! temporaries, gradients in flight, the KV cache) has three live-only lines whose bytes are their
//! largest value over the step.
//!
//! `memory_with(spec, inv, gpu, cal, scen)` runs the same phases to the peaks and the verdict only
//! (no breakdown, labels or sentences), with the parameter inventory given. The planner, `fit` and
//! the strategy table's rows use it to check many setups of one model; a property test and the
//! planner fuzz target check that it equals the estimate.
//!
//! `resolve` refuses what the GPU cannot compute, naming the field, the GPU and what it allows: fp8
//! without fp8 tensor cores (`check_fp8`), and bf16 (as the precision, which LoRA, QLoRA, DPO and
//! GRPO compute in, or as LoRA's `adapter`) before compute capability 8.0 (`check_dtypes`: the T4
//! and V100, `Gpu::has_bf16`). The planner, its ladder, the strategy table and the site's GPU pages
//! propose the fp16 form there instead (`Precision::for_gpu`).
//!
//! `check_images`: a multimodal model's image tokens (`images` per sample times tokens per image)
//! are part of `seq`, the sequence the text model sees, and a shorter `seq` is refused.
//! `describe_vision` says so in each estimate (`Estimate::vision`: the CLI's `images:` line and
//! JSON key, a line beside the site's verdict). The time model adds the tower's forward (and, when
//! trained, backward) FLOPs per patch.

mod backward;
mod component_ids;
mod components;
mod host;
mod kv_cache;
mod labels;
mod levels;
mod schedule;
#[cfg(feature = "replay")]
mod sequence;
#[cfg(feature = "replay")]
pub use sequence::Replayed;
mod step;
mod timeline;
mod types;

pub use crate::scenario::padding;
pub use component_ids::ComponentId;
pub use types::{
    Component, Confidence, Estimate, KeyBytes, Level, Lifetime, LivePart, Memory, ParamCounts,
    Peaks, Phase, TIGHT_PERCENT, TimelinePoint, Verdict,
};

use crate::activations::{Part, Saved};
use crate::calibration::Calibration;
use crate::catalog::{Gpu, GpuCatalog, PresetCatalog};
use crate::error::ScenarioError;
use crate::model::{ModelSpec, ParamInventory};
use crate::scenario::{Attention, ModelChoice, Scenario};
use crate::sdpa;
use crate::time::{Prepared, StepTime, step_time_prepared};
use std::borrow::Cow;

use components::Totals;
use levels::Runtime;
use step::Step;

/// Sentences about a scenario that can be estimated but may not be what the user meant.
fn warnings(spec: &ModelSpec, kernel: &sdpa::Choice, scen: &Scenario) -> Vec<String> {
    let seq = u64::from(scen.seq);
    let mut out: Vec<String> = spec.approximate.iter().cloned().collect();
    if scen.attention == Attention::Sdpa && !kernel.runnable {
        out.push(format!(
            "SDPA's {} kernel is {} (the estimate is for it as given).",
            kernel.backend.label(),
            kernel.why
        ));
    } else if !kernel.runnable {
        out.push(format!("{} (the estimate is for it as given).", kernel.why));
    }
    if scen.parallel.ds_bf16_states && !crate::states::ds_bf16_states(scen) {
        out.push(
            "ds_bf16 (DeepSpeed's bf16 master weights, gradients and optimizer states) applies \
             to ZeRO stages 1-3 with bf16 or amp-bf16 precision: ignored here."
                .into(),
        );
    }
    if scen.method.quantized_base() && spec.moe.is_some() {
        out.push(
            "bitsandbytes quantizes nn.Linear modules only: transformers 5.x's fused MoE experts \
             stay in the load dtype (bitsandbytes issue 1849), as estimated; Unsloth's loader \
             quantizes them."
                .into(),
        );
    }
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

/// What offloading pins on the host, per node, when the scenario does not state its RAM.
fn host_warning(v: &Verdict, scen: &Scenario) -> Option<String> {
    (v.host_per_node > 0 && v.host_ram == 0).then(|| {
        format!(
            "Offloading pins {} of host RAM per node ({} GPUs on a node): set host_ram (GiB per \
             node) to check it.",
            crate::format::bytes(v.host_per_node),
            scen.gpus.min(scen.runtime.gpus_per_node())
        )
    })
}

/// A block larger than the room left under the peak, with the default allocator: a request no
/// cached block can serve needs a segment of its own, and what the steps before left cached in
/// smaller free blocks can take that room. Measured on an H100: Llama 3.2 1B, amp-bf16, 16 x
/// 2048 tokens asked for one 15.66 GiB block (its fp32 logits) with 17.3 GiB cached in smaller
/// ones and stopped at 68.3 GiB of 79.2, where Headroom predicts 72.3 GiB; with expandable
/// segments it trained (tests/reference/gpu). A warning, not the verdict: runs in the same
/// position also fit (Qwen2.5 1.5B with an 18.5 GiB block and 4.8 GiB to spare).
fn fragmentation_warning(v: &Verdict, block: u64, scen: &Scenario, rt: &Runtime) -> Option<String> {
    // (The site builds without the replay: `cfg!` drops this text from its download.)
    if let Some(request) = rt.fragmented.filter(|_| cfg!(feature = "replay")) {
        let fix = if scen.runtime.expandable_segments {
            "a shorter sequence or a smaller micro-batch leaves it room"
        } else {
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (expandable) lets it map pages \
             into the gaps instead"
        };
        return Some(format!(
            "Out of memory on fragmentation: the step's tensors fit, but replayed through \
             PyTorch's caching allocator its free memory is split and a request of {} finds \
             no block to hold it; {fix}.",
            crate::format::bytes(request)
        ));
    }
    let room = u64::try_from(v.headroom).unwrap_or(0);
    // Kept where the replay fits the step too: whether the cache holds the block in one piece
    // can turn on details the replay does not have (estimate/sequence/mod.rs).
    (v.fits && !scen.runtime.expandable_segments && block > room).then(|| {
        let what = match scen.loss {
            crate::scenario::LossImpl::Hf => "the fp32 logits",
            crate::scenario::LossImpl::Fused => "a chunk of the fused loss",
        };
        format!(
            "The largest single allocation, {what} ({}), is larger than the {} left under the \
             peak: if the blocks earlier steps leave cached cannot hold it in one piece \
             (fragmentation), the run stops short of this peak (seen on an H100). \
             PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (expandable) avoids that.",
            crate::format::bytes(block),
            crate::format::bytes(room)
        )
    })
}

/// The bytes of a layer's saved tensors at one part.
fn part_bytes(saved: &[Saved], part: Part) -> u64 {
    saved
        .iter()
        .filter(|s| s.part == part)
        .map(Saved::bytes)
        .sum()
}

/// The attention kernel assumed, and why (SDPA's kernel from `crate::sdpa`).
fn attention_line(c: &sdpa::Choice, scen: &Scenario) -> String {
    match scen.attention {
        Attention::Eager => "eager (s x s scores saved)".into(),
        Attention::Sdpa => {
            format!("SDPA, {} kernel: {}", c.backend.label(), c.why)
        }
        _ => c.why.clone(),
    }
}

/// Resolves the model of a scenario through the preset catalog.
pub fn resolve_model(scen: &Scenario) -> Result<(String, ModelSpec), ScenarioError> {
    match &scen.model {
        ModelChoice::Preset(id) => {
            let catalog = PresetCatalog::builtin();
            match catalog.sized(id) {
                Some(spec) => Ok((id.clone(), spec?)),
                None => catalog.get(id).map(|p| (p.id.clone(), p.spec.clone())),
            }
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
    // A preset and a config from a link were checked when they were parsed; a spec given
    // directly (a scenario file's) was not. Every model must respect the bounds before any
    // formula runs.
    if matches!(scen.model, ModelChoice::Custom(_)) {
        crate::bounds::check_model(&spec)
            .map_err(|e| ScenarioError::invalid("cfg", e.to_string()))?;
    }
    // The trained multi-token prediction modules join the model's layers from here on.
    let spec = spec
        .with_mtp(u64::from(scen.mtp))
        .map_err(|e| ScenarioError::invalid("mtp", e))?;
    let gpu = GpuCatalog::builtin().get(&scen.gpu)?;
    check_fp8(gpu, scen)?;
    check_dtypes(gpu, scen)?;
    check_expert_parallel(&spec, scen)?;
    check_lora(&spec, scen)?;
    if scen.method == crate::scenario::Method::Int8 && spec.moe.is_some() {
        // Its experts' inputs, routed copies that 8-bit experts would hold, are not written.
        return Err(ScenarioError::invalid(
            "method",
            "lora8 is not modelled for MoE models: choose lora or qlora",
        ));
    }
    check_context(&spec, gpu, scen)?;
    check_images(&spec, scen)?;
    crate::bounds::check_scale(&spec, gpu, scen)?;
    Ok(Resolved {
        name,
        spec,
        gpu,
        calibration: Calibration::for_gpu(gpu),
    })
}

/// A multimodal model's image tokens are part of `seq` (the sequence the text model sees):
/// the images of a sample must leave room in it, or `seq` is refused (naming the images).
/// Nothing to check for a text-only model.
pub fn check_images(spec: &ModelSpec, scen: &Scenario) -> Result<(), ScenarioError> {
    let Some(v) = &spec.vision else {
        return Ok(());
    };
    let tokens = u64::from(scen.images) * v.tokens_per_image();
    if tokens > u64::from(scen.seq) {
        let px = v.image_px();
        return Err(ScenarioError::invalid(
            "seq",
            format!(
                "{} is shorter than the sample's image tokens: {} images of {} tokens each \
                 ({px} x {px} px) need {tokens}, and seq counts them too (lower images or raise \
                 seq)",
                scen.seq,
                scen.images,
                v.tokens_per_image(),
            ),
        ));
    }
    Ok(())
}

/// One line on a multimodal model's images and vision tower: how many of `seq`'s tokens are
/// image tokens, and whether the tower trains. Empty for a text-only model.
pub fn describe_vision(
    spec: &ModelSpec,
    inv: &crate::model::ParamInventory,
    scen: &Scenario,
) -> String {
    let Some(v) = &spec.vision else {
        return String::new();
    };
    let px = v.image_px();
    let per = v.tokens_per_image();
    let tokens = u64::from(scen.images) * per;
    let assumed = match v.kind {
        crate::model::VisionKind::Siglip => "the size SigLIP takes",
        crate::model::VisionKind::Llama4 => "one tile; larger images add tiles",
        _ => "assumed",
    };
    format!(
        "{} images per sample x {per} tokens ({px} x {px} px, {assumed}) = {tokens} of the \
         sequence's {} tokens; {} vision tower and projector ({} parameters) {}",
        scen.images,
        scen.seq,
        v.name(),
        crate::format::count(inv.vision()),
        match scen.vision {
            crate::scenario::VisionTraining::Frozen => "frozen: weights only",
            crate::scenario::VisionTraining::Trained => {
                "trained: gradients, optimizer states and saved activations"
            }
        }
    )
}

/// One line on the trained multi-token prediction modules: their parameters (a decoder layer
/// and each module's projection and norms) and their losses. Empty when none train.
pub fn describe_mtp(spec: &ModelSpec, inv: &crate::model::ParamInventory) -> String {
    let n = spec.mtp_trained;
    if n == 0 {
        return String::new();
    }
    // A module's layer is the model's largest kind (a MoE layer in DeepSeek-V3 and GLM-4.5).
    let params = inv.sum_where(|t| t.name.starts_with("mtp.")) + n * inv.per_layer();
    format!(
        "{n} multi-token prediction module{} trained, as Megatron-LM's --mtp-num-layers trains \
         them: {} parameters beside the model's (a decoder layer, eh_proj and three norms \
         each; the embedding and lm_head shared), and one more loss over the vocabulary each \
         (transformers builds none)",
        if n == 1 { "" } else { "s" },
        crate::format::count(params),
    )
}

/// fp8 matmuls need fp8 tensor cores: compute capability 8.9 or later (Ada, Hopper,
/// Blackwell), which the catalog records as an fp8 throughput.
pub fn check_fp8(gpu: &Gpu, scen: &Scenario) -> Result<(), ScenarioError> {
    if scen.fp8.is_on() && gpu.dense_tflops.fp8.is_none() {
        return Err(ScenarioError::invalid(
            "fp8",
            format!(
                "the {} (compute capability {}) has no fp8 tensor cores; fp8 training needs 8.9 \
                 or later (Ada, Hopper, Blackwell)",
                gpu.name, gpu.compute_capability
            ),
        ));
    }
    Ok(())
}

/// bf16 needs a GPU that computes in it (compute capability 8.0 on, Ampere): the T4 (7.5) and
/// the V100 (7.0) have no bf16 tensor cores, and PyTorch's autocast refuses bf16 there, so a
/// scenario that trains in bf16 on them is refused rather than estimated as if it ran. The
/// precision covers every path that computes in it (full training, LoRA's and QLoRA's compute
/// dtype, DPO and GRPO); LoRA's adapters have their own dtype (`adapter`). Each message names
/// the field, the GPU and what the GPU allows.
pub fn check_dtypes(gpu: &Gpu, scen: &Scenario) -> Result<(), ScenarioError> {
    use crate::dtype::DType;
    use crate::scenario::{Method, Precision};
    if gpu.has_bf16() {
        return Ok(());
    }
    let lacks = |field: &str, what: &str, allowed: &[&str]| {
        ScenarioError::invalid(
            field,
            format!(
                "{what} needs bf16, which {} (compute capability {}) lacks; allowed on this \
                 GPU: {}",
                gpu.id,
                gpu.compute_capability,
                allowed.join(", ")
            ),
        )
    };
    if scen.precision.compute_dtype() == DType::Bf16 {
        let allowed: Vec<&str> = Precision::ALL
            .iter()
            .filter(|p| p.compute_dtype() != DType::Bf16)
            .map(|p| p.id())
            .collect();
        return Err(lacks("precision", scen.precision.id(), &allowed));
    }
    if scen.method != Method::Full && scen.lora.adapter_dtype == DType::Bf16 {
        return Err(lacks("adapter", "adapter dtype bf16", &["fp32", "fp16"]));
    }
    Ok(())
}

/// Expert parallelism needs experts to split: a MoE model whose expert count `ep` divides.
pub fn check_expert_parallel(spec: &ModelSpec, scen: &Scenario) -> Result<(), ScenarioError> {
    let ep = u64::from(scen.parallel.expert);
    if ep <= 1 {
        return Ok(());
    }
    match &spec.moe {
        None => Err(ScenarioError::invalid(
            "ep",
            "expert parallelism splits a MoE model's experts; this model has none (ep must be 1)",
        )),
        Some(m) if !m.experts.is_multiple_of(ep) => Err(ScenarioError::invalid(
            "ep",
            format!(
                "ep must divide the model's {} experts per layer, found {ep}",
                m.experts
            ),
        )),
        Some(_) => Ok(()),
    }
}

/// What peft 0.21 refuses on the fused experts it adapts (`ParamWrapper`: a converted MoE
/// class under adapters on the MLP, `states::lora_adapts`): lora_dropout, whose input it cannot
/// factor out of the folded weight, and DoRA.
pub fn check_lora(spec: &ModelSpec, scen: &Scenario) -> Result<(), ScenarioError> {
    if scen.method == crate::scenario::Method::Full
        || !spec.peft_converts_moe()
        || !scen.lora.targets.mlp_adapted()
    {
        return Ok(());
    }
    let refused = |field: &str, option: &str| {
        Err(ScenarioError::invalid(
            field,
            format!(
                "peft adapts this MoE model's fused experts as parameters (ParamWrapper), which refuse {option}: turn it off, or target the attention only (targets=attn)"
            ),
        ))
    };
    if scen.lora.dropout {
        return refused("lora_dropout", "lora_dropout");
    }
    if scen.lora.dora {
        return refused("dora", "DoRA");
    }
    Ok(())
}

/// Context parallelism's rules that need the model and the GPU: ring attention in PyTorch's
/// `context_parallel` runs SDPA's fused kernels with a plain causal mask, so no sliding window
/// and no math kernel.
pub fn check_context(spec: &ModelSpec, gpu: &Gpu, scen: &Scenario) -> Result<(), ScenarioError> {
    if scen.context() <= 1 {
        return Ok(());
    }
    if let Some(w) = spec.sliding_window {
        return Err(ScenarioError::invalid(
            "cp",
            format!(
                "the model has sliding-window attention ({w} tokens), which ring attention \
                 (torch's context_parallel: is_causal only) does not split: choose cp 1"
            ),
        ));
    }
    let kernel = sdpa::for_scenario(spec, gpu, scen);
    if kernel.backend == sdpa::Backend::Math {
        return Err(ScenarioError::invalid(
            "cp",
            format!(
                "SDPA would run its math kernel here ({}), which has no ring version: choose cp 1",
                kernel.why
            ),
        ));
    }
    Ok(())
}

/// Estimates a scenario with the built-in catalogs and the GPU's calibration.
pub fn estimate(scen: &Scenario) -> Result<Estimate, ScenarioError> {
    let r = resolve(scen)?;
    Ok(Estimate {
        model: r.name,
        ..estimate_with(&r.spec, r.gpu, &r.calibration, scen)
    })
}

/// The allocator replay of a scenario without a limit, where the replay models its step (else
/// None): for tests and diagnostics, whose check is that its allocated peak is the estimate's.
#[cfg(feature = "replay")]
pub fn replay(scen: &Scenario) -> Result<Option<sequence::Replayed>, ScenarioError> {
    let records = padding::records(scen, padding::HORIZON);
    replay_with(scen, |step, gpu, settings, workspaces| {
        sequence::replay_run(step, gpu, &records, settings, workspaces)
    })
}

/// The allocator replay of steps padded to `lengths` tokens in order (a run over variable
/// lengths, as measured), without a limit, where the replay models the step (else None).
#[cfg(feature = "replay")]
pub fn replay_lengths(
    scen: &Scenario,
    lengths: &[u32],
) -> Result<Option<sequence::Replayed>, ScenarioError> {
    replay_with(scen, |step, gpu, settings, workspaces| {
        sequence::replay_lengths(step, gpu, lengths, settings, workspaces)
    })
}

/// `replay` on the scenario's prepared step with the default allocator settings (expandable
/// segments as the scenario says) and its GPU's cuBLAS workspaces.
#[cfg(feature = "replay")]
fn replay_with(
    scen: &Scenario,
    replay: impl FnOnce(
        &Step,
        &Gpu,
        crate::allocator::AllocatorSettings,
        u64,
    ) -> Result<sequence::Replayed, u64>,
) -> Result<Option<sequence::Replayed>, ScenarioError> {
    let r = resolve(scen)?;
    let step = Step::prepare(&r.spec, r.gpu, scen);
    if !sequence::supported(&step) {
        return Ok(None);
    }
    let settings = crate::allocator::AllocatorSettings {
        expandable_segments: scen.runtime.expandable_segments,
        ..Default::default()
    };
    let workspaces = r.calibration.cublas_workspace_bytes * r.calibration.cublas_workspaces;
    Ok(replay(&step, r.gpu, settings, workspaces).ok())
}

/// Estimates with explicit model, GPU and calibration (the pure core of everything else).
/// `model` is left empty: the caller that resolved the model names it.
pub fn estimate_with(spec: &ModelSpec, gpu: &Gpu, cal: &Calibration, scen: &Scenario) -> Estimate {
    finish(Step::prepare(spec, gpu, scen), gpu, cal)
}

/// The device peak and the verdict of a scenario (what [`estimate_with`] gives as
/// `peak.device` and `verdict`), without the breakdown, the labelled timeline and the sentences
/// an estimate carries: the planner checks many setups and needs only this. `inv` is the
/// model's parameter inventory (`crate::model::inventory(spec)`), built once by a caller that
/// checks many scenarios of one model.
pub fn memory_with(
    spec: &ModelSpec,
    inv: &ParamInventory,
    gpu: &Gpu,
    cal: &Calibration,
    scen: &Scenario,
) -> Memory {
    let w = walk(
        &Step::prepare_with(spec, Cow::Borrowed(inv), gpu, scen),
        gpu,
        cal,
    );
    Memory {
        peak_device: w.peak.device,
        verdict: w.verdict,
    }
}

/// The estimate and the step time of one scenario, with the parameter inventory, the model
/// states and the layer's saved bytes prepared once for both (as `analyze` needs them).
pub fn estimate_and_time(
    spec: &ModelSpec,
    gpu: &Gpu,
    cal: &Calibration,
    scen: &Scenario,
) -> (Estimate, StepTime) {
    let step = Step::prepare(spec, gpu, scen);
    let parts = Prepared {
        inv: Cow::Borrowed(&*step.inv),
        st: Cow::Borrowed(&step.st),
        layer_bytes: step.dense_bytes,
    };
    let time = step_time_prepared(spec, gpu, cal, scen, parts);
    (finish(step, gpu, cal), time)
}

/// The step walked onto its timeline and raised to every level, with the peaks and the
/// verdict: what a full estimate and the planner's memory check both need.
struct Walked {
    points: Vec<levels::Point>,
    /// Per point, what its tensor bytes are made of.
    parts: Vec<timeline::Live>,
    fwd: schedule::Forward,
    loss: schedule::Loss,
    runtime: Runtime,
    peak: Peaks,
    host_activations: u64,
    verdict: Verdict,
    /// Why vLLM would refuse to start (GRPO generating with vLLM), if it would.
    vllm_problem: Option<String>,
}

fn walk(step: &Step, gpu: &Gpu, cal: &Calibration) -> Walked {
    let (mut timeline, fwd, loss) = schedule::run(step);
    let parts = std::mem::take(&mut timeline.parts);
    let mut runtime = Runtime::new(step, cal);
    #[cfg_attr(not(feature = "replay"), allow(unused_mut))]
    let mut points = runtime.levels(timeline);
    #[cfg(feature = "replay")]
    runtime.simulate(step, gpu, cal.capacity(gpu), &mut points);
    let peak = levels::peaks(&points);
    let host_activations = host::offloaded_activations(step);
    // Dynamic padding's cached growth is released before a request fails: the verdict judges
    // the run without it.
    let mut verdict = levels::verdict(
        gpu,
        cal.capacity(gpu),
        peak.device.saturating_sub(runtime.padding_growth),
        step.scen,
        step.st.host_bytes + host_activations,
    );
    let vllm_problem = vllm_problem(step, gpu, cal);
    if vllm_problem.is_some() {
        // The run stops before its first step, whatever its steps would need.
        verdict.fits = false;
        verdict.tight = false;
    }
    Walked {
        points,
        parts,
        fwd,
        loss,
        runtime,
        peak,
        host_activations,
        verdict,
        vllm_problem,
    }
}

/// Why vLLM would refuse to start: on a colocated GPU, the memory free once the trainer has
/// loaded its model (and a KL term's reference copy) against vLLM's budget; its KV cache
/// against one sequence of `max_model_len`, colocated or on a server.
fn vllm_problem(step: &Step, gpu: &Gpu, cal: &Calibration) -> Option<String> {
    let engine = step.vllm.as_ref()?;
    let loaded = step.st.weights + step.st.reference_weights + cal.cuda_context_bytes;
    engine.start_problem(gpu.total_bytes.saturating_sub(loaded))
}

/// Runs the phases over a prepared step and assembles the estimate.
fn finish(step: Step, gpu: &Gpu, cal: &Calibration) -> Estimate {
    let (spec, scen) = (step.spec, step.scen);
    let Walked {
        points,
        parts,
        fwd,
        loss,
        runtime,
        mut peak,
        host_activations,
        verdict,
        vllm_problem,
    } = walk(&step, gpu, cal);
    let kernel = sdpa::for_scenario(spec, gpu, scen);
    let st = &step.st;
    let totals = Totals {
        activations: fwd.acts,
        autocast_cache: fwd.cache,
        // The graph pool's idle reservation is its own component.
        reserved_slack: (peak.reserved - runtime.graph_pool).saturating_sub(peak.allocated),
        host_activations,
        live_max: parts
            .iter()
            .fold(timeline::Live::default(), |m, p| m.max(p)),
    };
    let mut components = components::list(&step, cal, &runtime, &totals);
    // The tensor peak's point: the first with the most tensor bytes, as `peaks` takes it.
    if let Some(i) = points.iter().position(|p| p.tensors == peak.tensors) {
        peak.parts = parts[i]
            .parts()
            .into_iter()
            .map(|(id, bytes)| LivePart { id, bytes })
            .collect();
    }
    // Qwen3-Next's gated DeltaNet layers are modelled as transformers' torch fallback saves
    // them (exact on CPU); GPUs run flash-linear-attention's kernel, which saves differently.
    // Transformer Engine's saved fp8 copies are read from its source, not measured.
    let te = crate::fp8::te_converts(spec, scen);
    if spec.linear_attention.is_some() || te {
        for c in &mut components {
            if c.id == "activations" || (te && c.id == "autocast_cache") {
                c.confidence = Confidence::Assumed;
            }
        }
    }
    // An approximate layout's shapes are assumed, so nothing that follows from them is exact.
    let sure = if spec.approximate.is_some() {
        for c in &mut components {
            if c.confidence == Confidence::Exact {
                c.confidence = Confidence::Assumed;
            }
        }
        Confidence::Assumed
    } else {
        Confidence::Exact
    };
    // A model whose every layer is MoE (Mixtral, gpt-oss) has no dense layer: one layer is a
    // MoE layer there.
    let all_sparse = spec.dense_layers() == 0 && !step.moe.is_empty();
    let bytes = KeyBytes {
        weights: st.weights,
        gradients: st.gradients,
        optimizer_states: st.optimizer.device + st.master_weights + st.optimizer.paged,
        activations_per_layer: if all_sparse {
            crate::activations::total(&step.moe)
        } else {
            step.dense_bytes
        },
        attention_scores_per_layer: part_bytes(&step.dense, Part::AttentionScores),
        attention_core_per_layer: part_bytes(&step.dense, Part::AttentionCore),
        retained_after_forward: loss.retained,
        peak_tensors: peak.tensors,
        peak_allocated: peak.allocated,
        peak_reserved: peak.reserved,
        peak_device: peak.device,
        host: st.host_bytes + host_activations,
        nvme: st.nvme_bytes,
    };
    let warnings = warnings(spec, &kernel, scen)
        .into_iter()
        .chain(vllm_problem)
        .chain(host_warning(&verdict, scen))
        .chain(fragmentation_warning(
            &verdict,
            step.lm.largest_block,
            scen,
            &runtime,
        ))
        .collect();
    Estimate {
        model: String::new(),
        gpu: gpu.id.clone(),
        parameters: ParamCounts {
            total: st.params_total,
            trainable: st.params_trainable,
            per_gpu: st.params_local,
        },
        parameters_confidence: sure,
        bytes,
        peak,
        verdict,
        components,
        timeline: points.iter().map(levels::Point::shown).collect(),
        calibrated: cal.is_measured(),
        attention: attention_line(&kernel, scen),
        fp8: crate::fp8::describe(&step.inv, scen, gpu),
        context: crate::context::describe(spec, scen),
        vision: describe_vision(spec, &step.inv, scen),
        mtp: describe_mtp(spec, &step.inv),
        warnings,
        layer_inventory: if all_sparse { step.moe } else { step.dense },
    }
}
