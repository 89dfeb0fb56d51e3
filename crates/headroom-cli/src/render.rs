//! Output: the documented JSON of each command, and plain-text tables for people.

use std::fmt::Write as _;

use headroom_core::Scenario;
use headroom_core::catalog::{Gpu, Preset};
use headroom_core::estimate::Estimate;
use headroom_core::fit::Fit;
use headroom_core::format::{bytes, count, signed_bytes};
use headroom_core::strategies::{NextSteps, Strategy};
use headroom_core::time::StepTime;
use serde_json::{Value, json};

/// The `estimate --format json` document (documented in README.md, "JSON output").
pub fn estimate_json(e: &Estimate, fit: &Fit, link: &str, t: &StepTime) -> Value {
    let mut out = json!({
        "schema": "headroom.estimate.v1",
        "model": e.model,
        "gpu": e.gpu,
        "parameters": e.parameters,
        "parameters_confidence": e.parameters_confidence,
        "bytes": e.bytes,
        "peak_phase": e.peak.phase,
        "peak": e.peak,
        "verdict": e.verdict,
        "fit": fit,
        "calibrated": e.calibrated,
        "attention": e.attention,
        "speed": speed_json(t),
        "warnings": e.warnings,
        "components": e.components,
        "timeline": e.timeline,
        "layer_inventory": e.layer_inventory.iter().map(|s| json!({
            "what": s.what, "elements": s.elements, "dtype": s.dtype, "copies": s.copies, "bytes": s.bytes(),
        })).collect::<Vec<_>>(),
        "link": format!("?{link}"),
    });
    if !e.fp8.is_empty() {
        out["fp8"] = json!(e.fp8);
    }
    if !e.context.is_empty() {
        out["context"] = json!(e.context);
    }
    if !e.vision.is_empty() {
        out["vision"] = json!(e.vision);
    }
    if !e.mtp.is_empty() {
        out["mtp"] = json!(e.mtp);
    }
    out
}

/// The step time of the scenario as estimated (time model; its assumptions named).
fn speed_json(t: &StepTime) -> Value {
    json!({
        "tokens_per_second": t.tokens_per_second,
        "tokens_per_second_per_gpu": t.tokens_per_second_per_gpu,
        "step_seconds": t.step_seconds,
        "band": band_json(t),
        "tokens_per_step": t.tokens_per_step,
        "mfu": t.mfu,
        "confidence": t.confidence,
        "assumptions": t.assumptions,
        "terms": t.terms,
    })
}

/// Where eight in ten measured steps fell around the model's (`StepTime::band`).
fn band_json(t: &StepTime) -> Value {
    let b = t.band();
    json!({
        "step_seconds": [b.step_seconds.0, b.step_seconds.1],
        "tokens_per_second": [b.tokens_per_second.0, b.tokens_per_second.1],
        "calibrated": b.calibrated,
    })
}

/// One line on the speed, with what it assumes.
pub fn speed_line(t: &StepTime) -> String {
    let a = &t.assumptions;
    let band = t.band();
    format!(
        "speed (time model, {}): {:.0} tokens/s ({:.0} per GPU; eight in ten measured runs within {:.0}-{:.0}), {:.3} s per step of {} tokens, MFU {:.1}%; assumed: framework efficiency {}, {} GPUs per node, {} GB/s between nodes",
        match t.confidence {
            headroom_core::estimate::Confidence::Calibrated => "calibrated",
            _ => "assumed efficiency",
        },
        t.tokens_per_second,
        t.tokens_per_second_per_gpu,
        band.tokens_per_second.0,
        band.tokens_per_second.1,
        t.step_seconds,
        t.tokens_per_step,
        t.mfu * 100.0,
        a.framework_efficiency,
        a.gpus_per_node,
        a.internode_gbs
    )
}

/// The next steps of a setup that does not fit, one line each (`strategies::next_steps`, as the
/// page's verdict offers them): the fastest single change that fits and trains the same thing,
/// and the fastest that fits at all when that one changes the training and is faster.
pub fn next_steps_lines(n: &NextSteps) -> String {
    let line = |lead: &str, r: &Strategy| {
        format!(
            "{lead}: {} ({}{}): peak {}, speed {} ({} tokens/s); ?{}\n",
            r.technique,
            r.change,
            if r.changes_training {
                ", changes what is trained"
            } else {
                ""
            },
            bytes(r.peak_device),
            speed_change(r.speed_change),
            tokens_per_second(r.tokens_per_second),
            r.link
        )
    };
    match (n.same_training, n.fastest) {
        (None, None) => "next: no single change fits; `headroom plan` combines them\n".into(),
        (Some(s), f) => {
            let mut out = line("next, training the same thing", s);
            if let Some(f) = f {
                out += &line("faster", f);
            }
            out
        }
        (None, Some(f)) => line("next", f),
    }
}

/// [`next_steps_lines`] as JSON: each step a strategy-table row, or null.
pub fn next_steps_json(n: &NextSteps) -> Value {
    json!({ "same_training": n.same_training, "fastest": n.fastest })
}

pub fn estimate_table(
    e: &Estimate,
    fit: &Fit,
    link: &str,
    scen: &Scenario,
    t: &StepTime,
) -> String {
    let mut s = String::new();
    let v = &e.verdict;
    let _ = writeln!(
        s,
        "{} on {} x {}: micro-batch {}, sequence {}, {}, {}",
        e.model,
        scen.gpus,
        e.gpu,
        scen.micro_batch,
        scen.seq,
        scen.precision.label(),
        scen.optimizer.label()
    );
    let _ = writeln!(
        s,
        "parameters: {} total, {} trainable",
        count(e.parameters.total),
        count(e.parameters.trainable)
    );
    use headroom_core::scenario::Trainer;
    let reference = if scen.ref_precompute {
        "log-probabilities precomputed"
    } else if scen.reference_copy() {
        "a frozen copy of the model"
    } else {
        "the base model, adapters disabled"
    };
    if scen.trainer == Trainer::Dpo {
        let _ = writeln!(
            s,
            "objective: {} ({} pairs per micro-batch: {} sequences in one forward; reference: {reference})",
            scen.trainer.label(),
            scen.micro_batch,
            scen.sequences(),
        );
    }
    if scen.trainer.full_logits() {
        let _ = writeln!(
            s,
            "objective: {} ({} pairs per micro-batch: {} sequences in one forward; no reference model; the loss reads the full logits)",
            scen.trainer.label(),
            scen.micro_batch,
            scen.sequences(),
        );
    }
    if scen.trainer == Trainer::Kto {
        let _ = writeln!(
            s,
            "objective: {} ({} samples per micro-batch, and no-grad passes over as many mismatched KL completions; reference: {reference})",
            scen.trainer.label(),
            scen.micro_batch,
        );
    }
    if scen.trainer.generates() {
        let _ = writeln!(
            s,
            "objective: {} ({} completions per micro-batch of {} tokens{}, generated {} at a time by {}; reference: {})",
            scen.trainer.label(),
            scen.micro_batch,
            scen.seq,
            if scen.prompt > 0 {
                format!(", {} of them the prompt", scen.prompt)
            } else {
                String::new()
            },
            u64::from(scen.micro_batch) * u64::from(scen.grad_accum),
            scen.generator.label(),
            if scen.kl { reference } else { "none (beta 0)" }
        );
    }
    if !e.vision.is_empty() {
        let _ = writeln!(s, "images: {}", e.vision);
    }
    if !e.mtp.is_empty() {
        let _ = writeln!(s, "mtp: {}", e.mtp);
    }
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "{:<44} {:>12} {:>12}  {:<10} {:<10} confidence",
        "component", "bytes", "at peak", "lifetime", "level"
    );
    for c in &e.components {
        if c.bytes == 0 {
            continue;
        }
        // What of it is live at the tensor peak (the column sums to the peak's tensors).
        let at_peak = e
            .peak
            .parts
            .iter()
            .find(|p| p.id.id() == c.id)
            .map_or_else(String::new, |p| bytes(p.bytes));
        let _ = writeln!(
            s,
            "{:<44} {:>12} {:>12}  {:<10} {:<10} {}",
            c.name,
            bytes(c.bytes),
            at_peak,
            c.lifetime.id(),
            c.level.id(),
            c.confidence.id()
        );
    }
    let _ = writeln!(s, "\npeak ({}: {})", e.peak.phase.label(), e.peak.at);
    let _ = writeln!(
        s,
        "  tensors    {:>12}   (torch.cuda.max_memory_allocated, live tensors)",
        bytes(e.peak.tensors)
    );
    let _ = writeln!(
        s,
        "  allocated  {:>12}   (+ 512 B rounding, cuBLAS workspaces)",
        bytes(e.peak.allocated)
    );
    let _ = writeln!(
        s,
        "  reserved   {:>12}   (torch.cuda.max_memory_reserved)",
        bytes(e.peak.reserved)
    );
    let _ = writeln!(
        s,
        "  device     {:>12}   (nvidia-smi: + CUDA context, NCCL, paged memory)",
        bytes(e.peak.device)
    );
    let mut margin = if v.margin > 0 {
        format!(", safety margin {} kept free", bytes(v.margin))
    } else {
        String::new()
    };
    if !v.fits && v.host_fits && v.headroom >= v.margin as i64 {
        // The memory fits; what stops the run is among the warnings (vLLM refusing to start).
        margin.push_str(", but the run cannot start: see the warnings");
    }
    let _ = writeln!(
        s,
        // The level the verdict judges, as the page's verdict says: the allocator failing to
        // reserve a segment is what stops a run.
        "\n{} on {} ({} usable; judged at the device level): headroom {} ({:.1}%){margin}",
        if v.fits { "FITS" } else { "DOES NOT FIT" },
        v.gpu,
        bytes(v.capacity),
        signed_bytes(v.headroom),
        v.headroom_percent
    );
    if v.host_per_node > 0 {
        let _ = writeln!(
            s,
            "host RAM: {} per GPU, {} per node{}",
            bytes(e.bytes.host),
            bytes(v.host_per_node),
            if v.host_ram == 0 {
                " (unchecked: --host-ram)".to_string()
            } else if v.host_fits {
                format!(", within {}", bytes(v.host_ram))
            } else {
                format!(", MORE than the node's {}", bytes(v.host_ram))
            }
        );
    }
    if v.tight {
        let _ = writeln!(
            s,
            "tight: under 5% to spare while the runtime constants are assumed; consider --margin"
        );
    }
    let show = |x: Option<u32>| x.map_or("none".to_string(), |n| n.to_string());
    let _ = writeln!(
        s,
        "largest micro-batch that fits: {}; longest sequence: {}",
        show(fit.max_micro_batch),
        show(fit.max_seq)
    );
    if !e.calibrated {
        let _ = writeln!(
            s,
            "runtime constants are assumed defaults (no calibration for this GPU yet)"
        );
    }
    let _ = writeln!(s, "attention: {}", e.attention);
    if !e.fp8.is_empty() {
        let _ = writeln!(s, "fp8: {}", e.fp8);
    }
    if !e.context.is_empty() {
        let _ = writeln!(s, "sequence: {}", e.context);
    }
    if v.fits {
        let _ = writeln!(s, "{}", speed_line(t));
    }
    for w in &e.warnings {
        let _ = writeln!(s, "warning: {w}");
    }
    let _ = writeln!(s, "link: ?{link}");
    s
}

pub fn fit_table(fit: &Fit, scen: &Scenario) -> String {
    let show = |x: Option<u32>| x.map_or("none fits".to_string(), |n| n.to_string());
    format!(
        "largest micro-batch at sequence {}: {}\nlongest sequence at micro-batch {}: {}\n",
        scen.seq,
        show(fit.max_micro_batch),
        scen.micro_batch,
        show(fit.max_seq)
    )
}

/// A speed change for people: `-12.3%`, `+95.0%`, `same` within half a percent.
pub fn speed_change(change: f64) -> String {
    if !change.is_finite() || change.abs() < 0.005 {
        "same".into()
    } else {
        format!("{:+.1}%", change * 100.0)
    }
}

/// Tokens per second with thousands separators: `3,450`.
pub fn tokens_per_second(tps: f64) -> String {
    let n = if tps.is_finite() && tps > 0.0 {
        tps.round() as u64
    } else {
        0
    };
    let digits = n.to_string();
    let mut out = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

pub fn strategies_table(rows: &[Strategy], now: &Estimate) -> String {
    let mut s = format!(
        "now: {} at the device level on {} ({})",
        bytes(now.peak.device),
        now.gpu,
        if now.verdict.fits {
            "fits"
        } else {
            "does not fit"
        }
    );
    // Every row's rate is relative to the same current rate: recover it from the first.
    if let Some(r) = rows.first()
        && r.speed_change > -1.0
    {
        let _ = write!(
            s,
            ", {} tokens/s",
            tokens_per_second(r.tokens_per_second / (1.0 + r.speed_change))
        );
    }
    s.push_str("\n\n");
    let _ = writeln!(
        s,
        "{:<44} {:<72} {:>10} {:>10}  {:<4} {:>8} {:>10}",
        "technique", "change", "peak", "saves", "fits", "speed", "tokens/s"
    );
    for r in rows {
        let _ = writeln!(
            s,
            "{:<44} {:<72} {:>10} {:>10}  {:<4} {:>8} {:>10}{}",
            r.technique,
            if r.changes_training {
                format!("{} *", r.change)
            } else {
                r.change.clone()
            },
            bytes(r.peak_device),
            signed_bytes(r.saved),
            if r.fits { "yes" } else { "no" },
            speed_change(r.speed_change),
            tokens_per_second(r.tokens_per_second),
            if r.recommended {
                "  <- fastest that fits without changing the training"
            } else {
                ""
            }
        );
    }
    if rows.iter().any(|r| r.changes_training) {
        s.push_str("\n* changes what is trained or how it updates, not only how it runs\n");
    }
    s
}

pub fn models_json(presets: &[Preset]) -> Value {
    Value::Array(
        presets
            .iter()
            .map(|p| {
                json!({
                    "id": p.id, "name": p.name, "hf_id": p.hf_id, "source": p.source,
                    "parameters_total": p.parameters_total, "model_type": p.spec.model_type,
                    "summary": p.spec.summary(),
                })
            })
            .collect(),
    )
}

pub fn models_table(presets: &[Preset]) -> String {
    let mut s = format!(
        "{:<22} {:<28} {:>10}  {}\n",
        "id", "name", "params", "architecture"
    );
    for p in presets {
        let _ = writeln!(
            s,
            "{:<22} {:<28} {:>10}  {}",
            p.id,
            p.name,
            count(p.parameters_total),
            p.spec.summary()
        );
    }
    s
}

pub fn gpus_table(gpus: &[Gpu]) -> String {
    let mut s = format!(
        "{:<18} {:<30} {:>12} {:>10} {:>10}\n",
        "id", "name", "memory", "bf16 TF/s", "HBM GB/s"
    );
    for g in gpus {
        let tf = g
            .dense_tflops
            .bf16
            .or(g.dense_tflops.fp16)
            .or(g.dense_tflops.fp32)
            .unwrap_or(0.0);
        let _ = writeln!(
            s,
            "{:<18} {:<30} {:>12} {:>10.1} {:>10.0}",
            g.id,
            g.name,
            bytes(g.total_bytes),
            tf,
            g.memory_bandwidth_gbs
        );
    }
    s
}

/// An imported config's keys: what each became, grouped by outcome (the core's report).
pub fn import_table(i: &headroom_core::import::Imported) -> String {
    let mut s = format!(
        "imported: {} (mapping read from {})\n",
        i.framework.name(),
        i.framework.version()
    );
    for line in i.report() {
        match line.strip_prefix("# ") {
            Some(title) => s.push_str(&format!("  {title}:\n")),
            None => s.push_str(&format!("    {line}\n")),
        }
    }
    s.push('\n');
    s
}

/// One line per outcome with the keys' names (for commands that print no import table).
pub fn import_summary(i: &headroom_core::import::Imported) -> String {
    use headroom_core::import::Outcome;
    let mut s = format!("imported {}:", i.framework.name());
    for (outcome, title) in [
        (Outcome::NotExpressed, "not expressed"),
        (Outcome::Unknown, "unknown"),
    ] {
        let keys: Vec<_> = i.with(outcome).map(|n| n.key.as_str()).collect();
        if !keys.is_empty() {
            s.push_str(&format!(" {title}: {};", keys.join(", ")));
        }
    }
    s.push_str(" (`headroom estimate --import` lists every key)\n");
    s
}
