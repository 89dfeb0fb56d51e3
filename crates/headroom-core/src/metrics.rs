//! Metrics: the scalar figures of an analysis a claim or a guide names (`bytes.weights`,
//! `peak.device`, `time.step_seconds`, a component id, sums and one ratio), their units, labels
//! and how they read.

use crate::analysis::Analysis;
use crate::estimate::ComponentId;

/// How a metric's value reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Bytes,
    /// A count (parameters, a micro-batch).
    Count,
    /// A quotient, such as bytes per parameter.
    Ratio,
    /// Seconds (one optimizer step).
    Seconds,
    /// Tokens per second.
    TokensPerSecond,
    /// A fraction shown as a percentage (MFU).
    Fraction,
    /// Already a percentage (`verdict.headroom_percent`).
    Percent,
}

/// The unit of a metric: a quotient, a count (`parameters.*`, `fit.*`), a time figure, or bytes.
pub fn metric_unit(metric: &str) -> Unit {
    let m = metric.trim();
    if m.contains('/') {
        return Unit::Ratio;
    }
    match m {
        "time.step_seconds" => Unit::Seconds,
        "time.tokens_per_second" | "time.tokens_per_second_per_gpu" => Unit::TokensPerSecond,
        "time.mfu" | "time.hfu" => Unit::Fraction,
        "verdict.headroom_percent" => Unit::Percent,
        "verdict.fits" | "time.tokens_per_step" => Unit::Count,
        _ if m.starts_with("parameters.") || m.starts_with("fit.") => Unit::Count,
        _ => Unit::Bytes,
    }
}

/// A metric's value as people read it: `14.96 GiB`, `8.03B`, `0.533 s`, `7,679 tok/s`, `37.4%`.
pub fn display(unit: Unit, v: f64) -> String {
    match unit {
        Unit::Bytes if v < 0.0 => crate::format::signed_bytes(v.round() as i64),
        Unit::Bytes => crate::format::bytes(v.round() as u64),
        Unit::Count => crate::format::grouped(v.round().max(0.0) as u64),
        Unit::Ratio => format!("{v:.2}"),
        Unit::Seconds if v < 1.0 => format!("{:.0} ms", v * 1e3),
        Unit::Seconds => format!("{v:.2} s"),
        Unit::TokensPerSecond => format!(
            "{} tok/s",
            crate::format::grouped(v.round().max(0.0) as u64)
        ),
        Unit::Fraction => format!("{:.1}%", v * 100.0),
        Unit::Percent => format!("{v:.1}%"),
    }
}

/// A column heading for a metric: a short name for the known fields, component names from the
/// estimate, and the metric itself otherwise (sums and ratios).
pub fn label(a: Option<&Analysis>, metric: &str) -> String {
    let m = metric.trim();
    let known = match m {
        "parameters.total" => "Parameters",
        "parameters.trainable" => "Trainable parameters",
        "parameters.per_gpu" => "Parameters per GPU",
        "bytes.weights" => "Weights",
        "bytes.gradients" => "Gradients",
        "bytes.optimizer_states" => "Optimizer states",
        "bytes.activations_per_layer" => "Activations per layer",
        "bytes.attention_scores_per_layer" => "Attention s x s tensors per layer",
        "bytes.attention_core_per_layer" => "Attention kernel's tensors per layer",
        "bytes.retained_after_forward" => "Held after forward",
        "bytes.peak_tensors" | "peak.tensors" => "Peak (tensors)",
        "bytes.peak_allocated" | "peak.allocated" => "Peak (allocated)",
        "bytes.peak_reserved" | "peak.reserved" => "Peak (reserved)",
        "bytes.peak_device" | "peak.device" => "Peak on the device",
        "bytes.host" => "Host memory",
        "bytes.nvme" => "NVMe",
        "verdict.capacity" => "GPU capacity",
        "verdict.headroom" => "Headroom",
        "verdict.headroom_percent" => "Headroom (%)",
        "verdict.fits" => "Fits",
        "fit.max_micro_batch" => "Largest micro-batch",
        "fit.max_seq" => "Longest sequence",
        "time.step_seconds" => "Step time",
        "time.tokens_per_second" => "Tokens/s",
        "time.tokens_per_second_per_gpu" => "Tokens/s per GPU",
        "time.tokens_per_step" => "Tokens per step",
        "time.mfu" => "MFU",
        "time.hfu" => "HFU",
        _ => "",
    };
    if !known.is_empty() {
        return known.into();
    }
    if let Some((num, den)) = m.rsplit_once('/') {
        let num = num.trim().trim_start_matches('(').trim_end_matches(')');
        // The labels are ASCII: folding only ASCII keeps Unicode's case tables out of the site.
        return format!(
            "({}) per {}",
            label(a, num),
            label(a, den).to_ascii_lowercase()
        );
    }
    if m.contains('+') {
        return m
            .split('+')
            .map(|t| label(a, t))
            .collect::<Vec<_>>()
            .join(" + ");
    }
    let id = m.strip_prefix("components.").unwrap_or(m);
    a.and_then(|a| a.estimate.components.iter().find(|c| c.id == id))
        .map(|c| c.name.clone())
        .unwrap_or_else(|| m.to_string())
}

/// A field of the CLI's JSON (`headroom estimate --format json`) as a metric reads it.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Leaf {
    Number(f64),
    /// `null` (no micro-batch fits, say).
    Null,
    /// A string field (`peak.phase`, `verdict.gpu`).
    Text,
    /// A field of a part the analysis was not asked to compute (`fit.*` without the fit).
    NotComputed,
}

/// The scalar fields a metric may name: those of the CLI's JSON (`parameters.*`, `bytes.*`,
/// `peak.*`, `verdict.*`, `fit.*`) and `time.*` from the analysis' step time (which the CLI's
/// JSON does not print). Read directly rather than through serde so the site carries no
/// serializer; a test checks this table against the serialized JSON, field by field.
fn json_field(a: &Analysis, name: &str) -> Option<Leaf> {
    let e = &a.estimate;
    let (p, b, k, v) = (&e.parameters, &e.bytes, &e.peak, &e.verdict);
    let n = |x: u64| Some(Leaf::Number(x as f64));
    let opt = |x: Option<u32>| Some(x.map_or(Leaf::Null, |x| Leaf::Number(f64::from(x))));
    match name.split_once('.')? {
        ("parameters", f) => match f {
            "total" => n(p.total),
            "trainable" => n(p.trainable),
            "per_gpu" => n(p.per_gpu),
            _ => None,
        },
        ("bytes", f) => match f {
            "weights" => n(b.weights),
            "gradients" => n(b.gradients),
            "optimizer_states" => n(b.optimizer_states),
            "activations_per_layer" => n(b.activations_per_layer),
            "attention_scores_per_layer" => n(b.attention_scores_per_layer),
            "attention_core_per_layer" => n(b.attention_core_per_layer),
            "retained_after_forward" => n(b.retained_after_forward),
            "peak_tensors" => n(b.peak_tensors),
            "peak_allocated" => n(b.peak_allocated),
            "peak_reserved" => n(b.peak_reserved),
            "peak_device" => n(b.peak_device),
            "host" => n(b.host),
            "nvme" => n(b.nvme),
            _ => None,
        },
        ("peak", f) => match f {
            "tensors" => n(k.tensors),
            "allocated" => n(k.allocated),
            "reserved" => n(k.reserved),
            "device" => n(k.device),
            "phase" | "at" => Some(Leaf::Text),
            _ => None,
        },
        ("verdict", f) => match f {
            "capacity" => n(v.capacity),
            "fits" => Some(Leaf::Number(f64::from(u8::from(v.fits)))),
            "headroom" => Some(Leaf::Number(v.headroom as f64)),
            "headroom_percent" => Some(Leaf::Number(v.headroom_percent)),
            "margin" => n(v.margin),
            "tight" => Some(Leaf::Number(f64::from(u8::from(v.tight)))),
            "host_per_node" => n(v.host_per_node),
            "host_ram" => n(v.host_ram),
            "host_fits" => Some(Leaf::Number(f64::from(u8::from(v.host_fits)))),
            "gpu" => Some(Leaf::Text),
            _ => None,
        },
        ("fit", f) => {
            let fit = a.fit.as_ref();
            let not_computed = || Some(Leaf::NotComputed);
            match f {
                "max_micro_batch" => fit.map_or_else(not_computed, |x| opt(x.max_micro_batch)),
                "max_seq" => fit.map_or_else(not_computed, |x| opt(x.max_seq)),
                _ => None,
            }
        }
        ("time", f) => {
            let t = &a.time;
            let x = match f {
                "step_seconds" => t.step_seconds,
                "tokens_per_second" => t.tokens_per_second,
                "tokens_per_second_per_gpu" => t.tokens_per_second_per_gpu,
                "tokens_per_step" => t.tokens_per_step as f64,
                "mfu" => t.mfu,
                "hfu" => t.hfu,
                _ => return None,
            };
            Some(Leaf::Number(x))
        }
        _ => None,
    }
}

fn field(a: &Analysis, name: &str) -> Result<f64, String> {
    let name = name.trim();
    let id = name.strip_prefix("components.").unwrap_or(name);
    if let Some(c) = a.estimate.components.iter().find(|c| c.id == id) {
        return Ok(c.bytes as f64);
    }
    // A component this scenario does not have (no autocast cache in pure bf16, no host memory
    // without offload) holds no bytes: 0, not an error, so a table can compare settings.
    if ComponentId::parse(id).is_some() {
        return Ok(0.0);
    }
    match json_field(a, name) {
        Some(Leaf::Number(x)) => Ok(x),
        Some(Leaf::Null) => Err(format!("names `{name}`, which has no value here (null)")),
        Some(Leaf::Text) => Err(format!("names `{name}`, which is not a number")),
        Some(Leaf::NotComputed) => Err(format!(
            "names `{name}`, which this analysis did not compute (see `analysis::What`)"
        )),
        None => {
            let components: Vec<&str> = a.estimate.components.iter().map(|c| c.id).collect();
            Err(format!(
                "names `{name}`: not a JSON field (parameters.*, bytes.*, peak.*, verdict.*, \
                 fit.*, time.*) nor a component id ({})",
                components.join(", ")
            ))
        }
    }
}

/// The part of a metric's value that rests on figures Headroom only assumes (components of
/// confidence `assumed`: runtime constants without a calibration, the CUDA graph pool, bucket
/// and gather sizes): the assumed components a sum names, and for a peak every assumed
/// component of the levels it includes (tensors; allocated and reserved add the allocator's;
/// device adds the rest). A quotient's is its numerator's over the denominator. Other fields
/// (weights, states, activations, counts, times) follow from shapes: 0.
pub fn assumed_part(a: &Analysis, metric: &str) -> f64 {
    use crate::estimate::{Confidence, Level};
    // `reserved`: whether the peak is a reserved (or device) figure, which the allocator's
    // slack and the graph pool's idle blocks add to; allocated counts neither.
    let assumed = |upto: Level, reserved: bool| -> f64 {
        let rank = |l: Level| l as u8;
        a.estimate
            .components
            .iter()
            .filter(|c| c.confidence == Confidence::Assumed && rank(c.level) <= rank(upto))
            .filter(|c| reserved || !matches!(c.id, "reserved_slack" | "cuda_graph_pool"))
            .map(|c| c.bytes as f64)
            .sum()
    };
    let term = |name: &str| -> f64 {
        let name = name.trim();
        let id = name.strip_prefix("components.").unwrap_or(name);
        if let Some(c) = a.estimate.components.iter().find(|c| c.id == id) {
            return if c.confidence == Confidence::Assumed {
                c.bytes as f64
            } else {
                0.0
            };
        }
        match name {
            "peak.tensors" | "bytes.peak_tensors" => assumed(Level::Tensors, false),
            "peak.allocated" | "bytes.peak_allocated" => assumed(Level::Allocator, false),
            "peak.reserved" | "bytes.peak_reserved" => assumed(Level::Allocator, true),
            "peak.device" | "bytes.peak_device" => assumed(Level::Device, true),
            _ => 0.0,
        }
    };
    let (terms, den) = shape(metric);
    let den = match den {
        Some(d) => field(a, d).ok().filter(|d| *d != 0.0),
        None => Some(1.0),
    };
    let sum: f64 = terms.map(term).sum();
    den.map_or(0.0, |d| sum / d.abs())
}

/// A metric's parts: the summed terms of `a+b+c` or `(a+b)/d`, and the divisor if any.
fn shape(metric: &str) -> (impl Iterator<Item = &str>, Option<&str>) {
    let (num, den) = match metric.rsplit_once('/') {
        Some((n, d)) => (n, Some(d)),
        None => (metric, None),
    };
    let num = num.trim().trim_start_matches('(').trim_end_matches(')');
    (num.split('+'), den)
}

/// `a+b+c`, optionally `(a+b)/d`: the sum of fields, divided by one field.
pub fn eval_metric(a: &Analysis, metric: &str) -> Result<f64, String> {
    let (terms, den) = shape(metric);
    let mut sum = 0.0;
    for term in terms {
        sum += field(a, term)?;
    }
    match den {
        Some(d) => {
            let d = field(a, d)?;
            if d == 0.0 {
                return Err(format!("`{metric}` divides by zero"));
            }
            Ok(sum / d)
        }
        None => Ok(sum),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::analysis::analyze;
    use crate::codec::named_scenarios;
    use serde_json::{Value, json};

    /// Every scalar of the CLI's JSON (`parameters`, `bytes`, `peak`, `verdict`, `fit`) is a
    /// metric with the serialized value, and nothing else is.
    #[test]
    fn metrics_are_the_clis_json_fields() {
        for id in ["llama-3.1-8b-h100", "ex2-70b-zero3-8x80gb"] {
            let scen = named_scenarios()
                .into_iter()
                .find(|n| n.id == id)
                .expect("named")
                .scenario;
            let a = analyze(&scen).expect("analyzes");
            let e = &a.estimate;
            let doc = json!({
                "parameters": e.parameters, "bytes": e.bytes, "peak": e.peak,
                "verdict": e.verdict, "fit": a.fit,
            });
            let mut seen = 0;
            for (group, fields) in doc.as_object().expect("an object") {
                for (k, v) in fields.as_object().expect("an object") {
                    let name = format!("{group}.{k}");
                    if v.is_array() {
                        // `peak.parts`: a list, not a figure.
                        assert_eq!(json_field(&a, &name), None, "{name}");
                        continue;
                    }
                    let want = match v {
                        Value::Number(x) => Leaf::Number(x.as_f64().expect("a number")),
                        Value::Bool(b) => Leaf::Number(f64::from(u8::from(*b))),
                        Value::Null => Leaf::Null,
                        _ => Leaf::Text,
                    };
                    assert_eq!(json_field(&a, &name), Some(want), "{name}");
                    seen += 1;
                }
            }
            assert!(seen > 20);
            assert_eq!(json_field(&a, "bytes.nonsense"), None);
            assert_eq!(json_field(&a, "weights"), None);
        }
    }
}
