//! The scenario grid the PyTorch probe trains: small models built with transformers'
//! `from_config` (no downloads) across precision, optimizer, attention, checkpointing, batch,
//! sequence, LoRA and the allocator setting; and each scenario as the core's [`Scenario`].

pub use headroom_core::calibration::schema::{ProbeLora, ProbeScenario};
use headroom_core::model::ModelSpec;
use headroom_core::{Scenario, ScenarioError};
use serde_json::{Value, json};

/// The model configs of the grid (Hugging Face `config.json` fields), by name.
pub fn model_configs() -> Vec<(&'static str, Value)> {
    vec![
        (
            "llama-s",
            json!({"model_type": "llama", "vocab_size": 32000, "hidden_size": 512,
                   "intermediate_size": 1408, "num_hidden_layers": 4, "num_attention_heads": 8,
                   "num_key_value_heads": 4, "max_position_embeddings": 8192,
                   "tie_word_embeddings": false}),
        ),
        (
            "llama-m",
            json!({"model_type": "llama", "vocab_size": 32000, "hidden_size": 1024,
                   "intermediate_size": 2816, "num_hidden_layers": 8, "num_attention_heads": 16,
                   "num_key_value_heads": 8, "max_position_embeddings": 8192,
                   "tie_word_embeddings": false}),
        ),
        (
            "llama-l",
            json!({"model_type": "llama", "vocab_size": 32000, "hidden_size": 2048,
                   "intermediate_size": 5632, "num_hidden_layers": 16, "num_attention_heads": 16,
                   "num_key_value_heads": 8, "max_position_embeddings": 8192,
                   "tie_word_embeddings": false}),
        ),
        (
            "llama-xl",
            json!({"model_type": "llama", "vocab_size": 32000, "hidden_size": 4096,
                   "intermediate_size": 11008, "num_hidden_layers": 32, "num_attention_heads": 32,
                   "num_key_value_heads": 32, "max_position_embeddings": 8192,
                   "tie_word_embeddings": false}),
        ),
        (
            "qwen2-m",
            json!({"model_type": "qwen2", "vocab_size": 64000, "hidden_size": 896,
                   "intermediate_size": 4864, "num_hidden_layers": 8, "num_attention_heads": 14,
                   "num_key_value_heads": 2, "max_position_embeddings": 8192,
                   "tie_word_embeddings": true}),
        ),
        (
            "mistral-s",
            json!({"model_type": "mistral", "vocab_size": 32000, "hidden_size": 768,
                   "intermediate_size": 2048, "num_hidden_layers": 6, "num_attention_heads": 12,
                   "num_key_value_heads": 4, "max_position_embeddings": 8192,
                   "sliding_window": null, "tie_word_embeddings": false}),
        ),
        (
            "gpt2-m",
            json!({"model_type": "gpt2", "vocab_size": 50257, "n_embd": 768, "n_layer": 12,
                   "n_head": 12, "n_positions": 4096}),
        ),
    ]
}

/// A grid scenario the core cannot take.
#[derive(Debug, thiserror::Error)]
#[error("scenario {id}: {source}")]
pub struct GridError {
    pub id: String,
    pub source: ScenarioError,
}

/// The core's model and scenario for a probe scenario on `gpu_id`, errors naming the scenario.
pub fn core_scenario(s: &ProbeScenario, gpu_id: &str) -> Result<(ModelSpec, Scenario), GridError> {
    s.to_core(gpu_id).map_err(|source| GridError {
        id: s.id.clone(),
        source,
    })
}

struct Spec<'a> {
    model: &'a str,
    precision: &'a str,
    optimizer: &'a str,
    attention: &'a str,
    ckpt: &'a str,
    batch: u32,
    seq: u32,
    lora: Option<(u32, &'a str)>,
    expandable: bool,
}

const BASE: Spec<'static> = Spec {
    model: "llama-m",
    precision: "amp-bf16",
    optimizer: "adamw",
    attention: "sdpa",
    ckpt: "none",
    batch: 2,
    seq: 1024,
    lora: None,
    expandable: false,
};

/// The full grid (at least 40 scenarios), or a small subset for `--quick`.
pub fn grid(quick: bool) -> Vec<ProbeScenario> {
    let mut specs: Vec<Spec> = Vec::new();
    // Each family at three precisions.
    for model in ["llama-m", "qwen2-m", "mistral-s", "gpt2-m"] {
        for precision in ["amp-bf16", "bf16", "fp32"] {
            specs.push(Spec {
                model,
                precision,
                ..BASE
            });
        }
    }
    // One factor at a time around the base.
    specs.push(Spec {
        attention: "eager",
        ..BASE
    });
    specs.push(Spec {
        ckpt: "full",
        ..BASE
    });
    specs.push(Spec {
        ckpt: "full",
        attention: "eager",
        ..BASE
    });
    for optimizer in ["adamw-fused", "adamw-forloop", "sgd", "sgd-momentum"] {
        specs.push(Spec { optimizer, ..BASE });
    }
    specs.push(Spec {
        precision: "amp-fp16",
        ..BASE
    });
    // A larger model, where the runtime constants matter less relatively and slack more.
    for (precision, ckpt, batch, seq, expandable) in [
        ("amp-bf16", "none", 1, 2048, false),
        ("bf16", "none", 4, 2048, false),
        ("amp-bf16", "full", 8, 4096, false),
        ("fp32", "none", 1, 1024, false),
        ("amp-bf16", "none", 1, 2048, true),
        ("bf16", "none", 4, 2048, true),
    ] {
        specs.push(Spec {
            model: "llama-l",
            precision,
            ckpt,
            batch,
            seq,
            expandable,
            ..BASE
        });
    }
    // Batch and sequence sweep on the small model.
    for (batch, seq) in [(1, 512), (4, 512), (8, 2048), (16, 4096), (2, 8192)] {
        specs.push(Spec {
            model: "llama-s",
            batch,
            seq,
            ..BASE
        });
    }
    // LoRA (PEFT).
    specs.push(Spec {
        lora: Some((16, "attn")),
        ..BASE
    });
    specs.push(Spec {
        model: "qwen2-m",
        precision: "bf16",
        lora: Some((64, "all")),
        ..BASE
    });
    specs.push(Spec {
        lora: Some((16, "all")),
        ckpt: "full",
        ..BASE
    });
    specs.push(Spec {
        model: "llama-l",
        precision: "bf16",
        batch: 4,
        seq: 4096,
        lora: Some((16, "all")),
        ..BASE
    });
    // expandable_segments:True.
    specs.push(Spec {
        expandable: true,
        ..BASE
    });
    specs.push(Spec {
        model: "qwen2-m",
        precision: "bf16",
        expandable: true,
        ..BASE
    });
    specs.push(Spec {
        model: "gpt2-m",
        attention: "eager",
        expandable: true,
        ..BASE
    });
    specs.push(Spec {
        model: "llama-s",
        batch: 16,
        seq: 4096,
        expandable: true,
        ..BASE
    });
    // GPT-2 variants.
    specs.push(Spec {
        model: "gpt2-m",
        attention: "eager",
        ..BASE
    });
    specs.push(Spec {
        model: "gpt2-m",
        ckpt: "full",
        ..BASE
    });
    // Too large for most GPUs: the probe must record an OOM and go on.
    specs.push(Spec {
        model: "llama-xl",
        precision: "fp32",
        attention: "eager",
        batch: 4,
        seq: 4096,
        ..BASE
    });

    let configs = model_configs();
    let all: Vec<ProbeScenario> = specs
        .iter()
        .map(|s| {
            let config = configs
                .iter()
                .find(|(name, _)| *name == s.model)
                .map(|(_, c)| c.clone())
                .unwrap_or(Value::Null);
            let mut id = format!(
                "{}/{}/{}/{}/ckpt-{}/b{}/s{}",
                s.model, s.precision, s.optimizer, s.attention, s.ckpt, s.batch, s.seq
            );
            if let Some((r, t)) = s.lora {
                id.push_str(&format!("/lora-{t}-r{r}"));
            }
            if s.expandable {
                id.push_str("/expandable");
            }
            ProbeScenario {
                id,
                model: s.model.to_string(),
                config,
                batch: s.batch,
                seq: s.seq,
                precision: s.precision.to_string(),
                optimizer: s.optimizer.to_string(),
                attention: s.attention.to_string(),
                checkpointing: s.ckpt.to_string(),
                lora: s.lora.map(|(rank, t)| ProbeLora {
                    rank,
                    targets: t.to_string(),
                }),
                expandable_segments: s.expandable,
            }
        })
        .collect();
    if quick {
        // Enough to fit every constant: both allocator settings land in the training part.
        all.into_iter()
            .enumerate()
            .filter(|(i, s)| i % 4 == 0 || (s.expandable_segments && i % 2 == 0))
            .map(|(_, s)| s)
            .collect()
    } else {
        all
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // In tests a panic is the failure report.
mod tests {
    use super::*;

    #[test]
    fn grid_is_large_unique_and_every_scenario_reaches_the_core() {
        let g = grid(false);
        assert!(g.len() >= 40, "{} scenarios", g.len());
        let mut ids: Vec<&str> = g.iter().map(|s| s.id.as_str()).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), g.len(), "scenario ids are unique");
        for s in &g {
            let (_, scen) = s.to_core("h100-sxm-80gb").unwrap();
            assert_eq!(scen.micro_batch, s.batch);
        }
        let q = grid(true);
        assert!(q.len() >= 8 && q.len() < g.len());
        assert!(q.iter().any(|s| s.expandable_segments));
    }
}
