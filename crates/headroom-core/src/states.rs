//! Model states per GPU: weights, gradients, optimizer states and master weights, after
//! LoRA/QLoRA, tensor/pipeline splits and DDP/ZeRO/FSDP sharding, plus what goes to the host.

use crate::dtype::DType;
use crate::model::{ModelSpec, ParamInventory, Scope};
use crate::optimizer::{StateBytes, TrainTensor, state_bytes};
use crate::scenario::{DataParallel, LoraTargets, Method, Offload, Precision, Scenario};

/// Per-GPU bytes of everything that is not an activation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelStates {
    pub params_total: u64,
    pub params_trainable: u64,
    /// Parameters held by this GPU (after TP/PP), before ZeRO-3/FSDP sharding.
    pub params_local: u64,
    pub weights: u64,
    pub weights_formula: String,
    pub gradients: u64,
    pub gradients_formula: String,
    pub optimizer: StateBytes,
    pub optimizer_formula: String,
    /// fp32 master weights (DeepSpeed mixed precision keeps them in the optimizer).
    pub master_weights: u64,
    /// DDP gradient buckets or ZeRO's reduce buckets, allocated once and kept.
    pub comm_buffers: u64,
    pub comm_formula: String,
    /// Unsharded parameters gathered for the running and the prefetched unit (ZeRO-3, FSDP).
    pub gather_transient: u64,
    /// Autocast's cached 16-bit copies of the trainable Linear weights (per layer, and lm_head).
    pub autocast_cache_per_layer: u64,
    pub autocast_cache_outside: u64,
    /// Trainable parameters of one decoder layer on this GPU (for the backward timeline).
    pub layer_grad_bytes: u64,
    /// Gradient bytes outside layers (embeddings, lm_head, final norm).
    pub outside_grad_bytes: u64,
    /// Host memory for offloaded states (pinned CPU RAM), and NVMe bytes.
    pub host_bytes: u64,
    pub nvme_bytes: u64,
    /// Decoder layers on this GPU (pipeline stage).
    pub layers_local: u64,
    /// Extra bytes of 512-byte rounding over the persistent tensors (allocated level).
    pub rounding_overhead: u64,
}

/// bitsandbytes NF4 with double quantization: packed 4-bit codes, 8-bit absmax per 64 weights,
/// fp32 absmax per 256 blocks and one fp32 offset (`functional.py::quantize_4bit`).
pub fn nf4_bytes(numel: u64) -> u64 {
    let blocks = numel.div_ceil(64);
    numel.div_ceil(2) + blocks + blocks.div_ceil(256) * 4 + 4
}

fn round512(bytes: u64) -> u64 {
    bytes.div_ceil(512) * 512
}

/// Computes the model states of `scen` for `spec`.
pub fn model_states(spec: &ModelSpec, inv: &ParamInventory, scen: &Scenario) -> ModelStates {
    let tp = scen.parallel.tensor as u64;
    let pp = scen.parallel.pipeline as u64;
    let dp = scen.data_parallel().max(1) as u64;
    let layers_local = spec.layers.div_ceil(pp);
    let p = scen.precision;
    let zero = match scen.parallel.data {
        DataParallel::Zero1 => 1,
        DataParallel::Zero2 => 2,
        DataParallel::Zero3 => 3,
        _ => 0,
    };
    let fsdp = scen.parallel.data == DataParallel::Fsdp && dp > 1;
    // DeepSpeed trains a 16-bit model and keeps fp32 master weights in its optimizer.
    let ds_mixed = zero > 0 && p != Precision::Fp32;
    let full = scen.method == Method::Full;

    // Weight dtype of the (base) model.
    let base_dtype = if ds_mixed {
        p.half_dtype()
    } else if full {
        p.param_dtype()
    } else if p == Precision::Fp32 {
        DType::F32
    } else {
        p.half_dtype()
    };

    // Per-layer and outside parameters on this GPU: TP splits matrices and the vocabulary;
    // a pipeline stage holds its layers and (the first) the embeddings.
    let share = |t: &crate::model::ParamTensor| -> u64 {
        let split = if t.d_in > 1 && t.d_out > 1 { tp } else { 1 };
        (t.d_in * t.d_out * t.copies).div_ceil(split)
    };
    let mut weights = 0u64;
    let mut train: Vec<TrainTensor> = Vec::new();
    let mut layer_trainable = 0u64;
    let mut outside_trainable = 0u64;
    let mut params_local = 0u64;
    let mut rounding = 0u64;
    let mut cache_layer = 0u64;
    let mut cache_outside = 0u64;
    let dense_local = (inv.dense_layers * layers_local).div_ceil(spec.layers);
    let sparse_local = layers_local - dense_local.min(layers_local);
    let adapters = !full;
    let adapter_targets = |name: &str| match scen.lora.targets {
        LoraTargets::AllLinear => true,
        LoraTargets::Attention => matches!(
            name,
            "q_proj"
                | "k_proj"
                | "v_proj"
                | "o_proj"
                | "qkv_proj"
                | "c_attn"
                | "query_key_value"
                | "out_proj"
        ),
    };
    for t in &inv.tensors {
        let count = match t.scope {
            Scope::Model => 1,
            Scope::Layer => layers_local,
            Scope::DenseLayer => dense_local,
            Scope::SparseLayer => sparse_local,
        };
        if count == 0 {
            continue;
        }
        let n = share(t);
        params_local += n * count;
        let quantized = scen.method == Method::Qlora && t.quantizable && t.scope != Scope::Model;
        let bytes_one = if quantized {
            nf4_bytes(n)
        } else {
            n * base_dtype.bytes()
        };
        weights += bytes_one * count;
        rounding += (round512(bytes_one) - bytes_one) * count;
        let in_layer = t.scope != Scope::Model;
        if full {
            train.push(TrainTensor {
                rows: t.d_out,
                cols: n / t.d_out.max(1),
                count,
                dtype: base_dtype,
            });
            if in_layer {
                layer_trainable += n * (count / layers_local.max(1)).max(1);
            } else {
                outside_trainable += n;
            }
            // Autocast caches a 16-bit copy of each fp32 trainable weight a Linear uses.
            if p.is_autocast()
                && !ds_mixed
                && (t.linear.is_some()
                    || t.name == "lm_head.weight"
                    || (spec.tie_embeddings
                        && t.scope == Scope::Model
                        && t.name.ends_with("embed_tokens.weight")))
            {
                let bytes = n * p.half_dtype().bytes();
                if in_layer {
                    cache_layer += bytes * (count / layers_local.max(1)).max(1);
                } else {
                    cache_outside += bytes;
                }
            }
        } else if let Some(name) = t.linear
            && adapters
            && in_layer
            && adapter_targets(name)
        {
            // LoRA A (r x d_in) and B (d_out x r), fp32 by PEFT's default, per copy.
            let r = scen.lora.rank as u64;
            let d_in = if tp > 1 { t.d_in.div_ceil(tp) } else { t.d_in };
            let a = r * d_in;
            let b = t.d_out * r;
            let per_layer = (a + b) * t.copies;
            let dt = scen.lora.adapter_dtype;
            train.push(TrainTensor {
                rows: r,
                cols: d_in,
                count: count * t.copies,
                dtype: dt,
            });
            train.push(TrainTensor {
                rows: t.d_out,
                cols: r,
                count: count * t.copies,
                dtype: dt,
            });
            weights += per_layer * count * dt.bytes();
            layer_trainable += per_layer;
            params_local += per_layer * count;
        }
    }
    let trainable_local: u64 = train.iter().map(|t| t.rows * t.cols * t.count).sum();
    let train_dtype = if full {
        base_dtype
    } else {
        scen.lora.adapter_dtype
    };
    let grad_dtype = train_dtype;

    // Optimizer states: over fp32 masters under DeepSpeed mixed precision.
    let state_tensors: Vec<TrainTensor> = if ds_mixed {
        train
            .iter()
            .map(|t| TrainTensor {
                dtype: DType::F32,
                ..*t
            })
            .collect()
    } else {
        train.clone()
    };
    let mut optimizer = state_bytes(scen.optimizer, &state_tensors);
    let master = if ds_mixed { trainable_local * 4 } else { 0 };
    // DeepSpeed also keeps an fp32 gradient partition (its estimator: 2 + 4 + 4 + 8 = 18 B/param).
    let ds_fp32_grads = if ds_mixed { trainable_local * 4 } else { 0 };

    let grads_full = trainable_local * grad_dtype.bytes();
    let mut gradients = grads_full;
    let mut comm_buffers = 0;
    let mut comm_formula = String::new();
    let mut gather = 0;
    let mut host = 0;
    let mut nvme = 0;
    let shard = |x: u64| x.div_ceil(dp);
    let mut master_dev = master;
    let mut weights_formula = format!(
        "{} params x {} B ({}){}",
        params_local,
        base_dtype.bytes(),
        base_dtype.torch_name(),
        if scen.method == Method::Qlora {
            ", NF4 + double-quant for the layers' Linears (0.516 B/param)"
        } else {
            ""
        }
    );
    let mut gradients_formula = format!(
        "{trainable_local} trainable params x {} B ({})",
        grad_dtype.bytes(),
        grad_dtype.torch_name()
    );
    let mut optimizer_formula = crate::optimizer::formula(scen.optimizer).to_string();
    let largest_layer = inv.per_layer().div_ceil(tp);
    match scen.parallel.data {
        DataParallel::Ddp => {
            if dp > 1 && !scen.parallel.grad_bucket_view {
                comm_buffers = grads_full;
                comm_formula = "DDP gradient buckets: one more copy of all gradients (gradient_as_bucket_view=False)".into();
            }
        }
        _ if zero > 0 => {
            optimizer.device = shard(optimizer.device);
            optimizer.paged = shard(optimizer.paged);
            optimizer.step_transient = shard(optimizer.step_transient);
            master_dev = shard(master) + shard(ds_fp32_grads);
            optimizer_formula = format!(
                "({optimizer_formula}) / {dp} GPUs, + fp32 master weights and fp32 gradient partition / {dp}"
            );
            if zero >= 2 {
                gradients = shard(grads_full);
                gradients_formula = format!("{gradients_formula} / {dp} GPUs");
                // contiguous_gradients: an ipg buffer of reduce_bucket_size (5e8) elements.
                comm_buffers = 500_000_000u64.min(trainable_local) * grad_dtype.bytes();
                comm_formula =
                    "ZeRO reduce bucket: min(reduce_bucket_size 5e8, params) x grad bytes".into();
            }
            if zero == 3 {
                weights = shard(weights);
                weights_formula = format!("{weights_formula} / {dp} GPUs");
                // The running and the prefetched layer are gathered in 16 bits.
                gather = 2 * largest_layer * base_dtype.bytes();
            }
            if scen.parallel.offload_optimizer != Offload::None {
                let off = optimizer.device + optimizer.paged + master_dev;
                optimizer.device = 0;
                optimizer.paged = 0;
                optimizer.step_transient = 0;
                master_dev = 0;
                match scen.parallel.offload_optimizer {
                    Offload::Cpu => host += off,
                    _ => {
                        nvme += off;
                        // DeepSpeed's pinned swap buffers (assumed: 4 x 1e8-element fp32 buffers).
                        host += 4 * 100_000_000 * 4;
                    }
                }
                optimizer_formula = format!(
                    "{optimizer_formula}; offloaded to {}",
                    scen.parallel.offload_optimizer.id()
                );
            }
            if zero == 3 && scen.parallel.offload_params != Offload::None {
                match scen.parallel.offload_params {
                    Offload::Cpu => host += weights,
                    _ => nvme += weights,
                }
                weights = 0;
                weights_formula = format!(
                    "parameters offloaded to {}",
                    scen.parallel.offload_params.id()
                );
            }
        }
        _ => {
            if fsdp {
                weights = shard(weights);
                gradients = shard(grads_full);
                optimizer.device = shard(optimizer.device);
                optimizer.paged = shard(optimizer.paged);
                optimizer.step_transient = shard(optimizer.step_transient);
                weights_formula = format!("{weights_formula} / {dp} GPUs (FSDP2 shards)");
                gradients_formula = format!("{gradients_formula} / {dp} GPUs");
                optimizer_formula = format!("({optimizer_formula}) / {dp} GPUs");
                // Unsharded compute-dtype copies of the running and prefetched layer, and the
                // root module (embeddings, lm_head) kept unsharded after forward.
                let unit = largest_layer * p.compute_dtype().bytes();
                gather = 2 * unit + inv.outside_layers().div_ceil(tp) * p.compute_dtype().bytes();
                comm_buffers = largest_layer * (p.compute_dtype().bytes() + 4);
                comm_formula =
                    "FSDP2 reduce-scatter: one layer's unsharded gradients + fp32 reduce copy"
                        .into();
                if scen.parallel.offload_params == Offload::Cpu {
                    host += weights + gradients + optimizer.device;
                    weights = 0;
                    gradients = 0;
                    optimizer.device = 0;
                    optimizer.step_transient = 0;
                }
                if scen.parallel.offload_optimizer == Offload::Cpu {
                    host += optimizer.device;
                    optimizer.device = 0;
                    optimizer.step_transient = 0;
                }
            }
        }
    }
    let layer_grad_bytes = if gradients == grads_full {
        layer_trainable * grad_dtype.bytes()
    } else {
        shard(layer_trainable * grad_dtype.bytes())
    };
    let outside_grad_bytes = if gradients == grads_full {
        outside_trainable * grad_dtype.bytes()
    } else {
        shard(outside_trainable * grad_dtype.bytes())
    };
    // Gradients and Adam's two states round like the weights they mirror.
    let rounding_overhead = rounding * (1 + u64::from(full) * 3);
    ModelStates {
        params_total: inv.total(),
        params_trainable: if full {
            inv.total()
        } else {
            trainable_full(spec, inv, scen)
        },
        params_local,
        weights,
        weights_formula,
        gradients,
        gradients_formula,
        optimizer,
        optimizer_formula,
        master_weights: master_dev,
        comm_buffers,
        comm_formula,
        gather_transient: gather,
        autocast_cache_per_layer: cache_layer,
        autocast_cache_outside: cache_outside,
        layer_grad_bytes,
        outside_grad_bytes,
        host_bytes: host,
        nvme_bytes: nvme,
        layers_local,
        rounding_overhead,
    }
}

/// LoRA parameters over the whole model (as PEFT's `print_trainable_parameters` counts them).
fn trainable_full(spec: &ModelSpec, inv: &ParamInventory, scen: &Scenario) -> u64 {
    let single = Scenario {
        parallel: crate::scenario::Parallel {
            tensor: 1,
            pipeline: 1,
            ..scen.parallel
        },
        gpus: 1,
        ..scen.clone()
    };
    model_states_params_only(spec, inv, &single)
}

/// Whether LoRA puts an adapter on this Linear: decoder layers only, all Linears or the
/// attention projections (PEFT's `target_modules`). The time model uses the same rule.
pub(crate) fn lora_adapts(scen: &Scenario, t: &crate::model::ParamTensor) -> bool {
    t.scope != Scope::Model
        && match scen.lora.targets {
            LoraTargets::AllLinear => true,
            LoraTargets::Attention => matches!(
                t.linear,
                Some(
                    "q_proj"
                        | "k_proj"
                        | "v_proj"
                        | "o_proj"
                        | "qkv_proj"
                        | "c_attn"
                        | "query_key_value"
                        | "out_proj"
                )
            ),
        }
}

fn model_states_params_only(spec: &ModelSpec, inv: &ParamInventory, scen: &Scenario) -> u64 {
    let r = scen.lora.rank as u64;
    let _ = spec;
    inv.linears()
        .filter(|t| lora_adapts(scen, t))
        .map(|t| {
            let layers = match t.scope {
                Scope::Layer => inv.dense_layers + inv.sparse_layers,
                Scope::DenseLayer => inv.dense_layers,
                Scope::SparseLayer => inv.sparse_layers,
                Scope::Model => 1,
            };
            r * (t.d_in + t.d_out) * t.copies * layers
        })
        .sum()
}
