//! Data parallelism: what DDP, ZeRO 1/2/3 and FSDP2 keep of the local tensors on each GPU,
//! and what offload moves to the host or NVMe. Each byte count keeps its formula beside it.
//!
//! Under FSDP only the adapters' gradients are sharded with LoRA, QLoRA's weights are gathered
//! packed and the NF4 state sits on every rank. `FsdpBuffers` holds the root's and one layer's
//! gathers, the unsharded gradients and the reduce-scatter inputs, FSDP2's or FSDP1's (`flat`);
//! `estimate/schedule.rs` places them phase by phase as PyTorch allocates and frees them.

use crate::model::ParamInventory;
use crate::optimizer::StateBytes;
use crate::scenario::{Method, Offload, Precision, Scenario};

use super::placement::Placement;

/// DeepSpeed's default `reduce_bucket_size` (elements): with `contiguous_gradients` ZeRO 2/3
/// keep one reduce buffer of this many gradient elements (or all of them, if fewer).
const ZERO_REDUCE_BUCKET_ELEMENTS: u64 = 500_000_000;
/// DeepSpeed's pinned swap buffers for NVMe offload (assumed: 4 fp32 buffers of 1e8 elements).
const NVME_SWAP_BUFFER_BYTES: u64 = 4 * 100_000_000 * 4;

/// Bytes and the formula that explains them, kept together so a step edits both.
#[derive(Debug, Clone, Default)]
pub(super) struct Explained {
    pub bytes: u64,
    pub formula: String,
}

impl Explained {
    pub fn new(bytes: u64, formula: String) -> Self {
        Explained { bytes, formula }
    }

    /// Split over the data-parallel ranks; `note` follows "/ N GPUs" in the formula.
    fn sharded(&mut self, p: &Placement, note: &str) {
        self.bytes = p.shard(self.bytes);
        self.formula = format!("{} / {} GPUs{note}", self.formula, p.dp);
    }
}

/// Per-GPU states as sharding leaves them.
#[derive(Debug, Default)]
pub(super) struct Sharded {
    pub weights: Explained,
    pub gradients: Explained,
    pub optimizer: StateBytes,
    pub optimizer_formula: String,
    /// fp32 master weights and DeepSpeed's fp32 gradient partition.
    pub master: u64,
    pub comm: Explained,
    /// Unsharded parameters gathered for the running and the prefetched unit.
    pub gather: u64,
    /// FSDP's units phase by phase.
    pub fsdp: Option<super::FsdpBuffers>,
    pub host: u64,
    pub nvme: u64,
    /// Whether each GPU keeps only its partition of the gradients (ZeRO-2/3, FSDP).
    pub grads_sharded: bool,
}

/// DDP: every GPU keeps everything; without `gradient_as_bucket_view` the reducer's buckets
/// are a second copy of the gradients.
pub(super) fn ddp(s: &mut Sharded, scen: &Scenario, p: &Placement) {
    if p.dp > 1 && !scen.parallel.grad_bucket_view {
        s.comm = Explained::new(
            s.gradients.bytes,
            "DDP gradient buckets: one more copy of all gradients (gradient_as_bucket_view=False)"
                .into(),
        );
    }
}

/// The facts ZeRO's stages and FSDP need beyond the local tensors.
pub(super) struct Facts<'a> {
    pub scen: &'a Scenario,
    pub inv: &'a ParamInventory,
    pub place: &'a Placement,
    /// Parameters this GPU trains, and the bytes of each of their gradients.
    pub trainable: u64,
    pub grad_bytes: u64,
    /// The weights' bytes per element.
    pub weight_bytes: u64,
    /// Trainable parameters of one decoder layer on this GPU (LoRA: its adapters).
    pub layer_trainable: u64,
    /// Trainable parameters outside the layers on this GPU (embeddings, lm_head, final norm;
    /// LoRA: peft's `modules_to_save` copies).
    pub outside_trainable: u64,
    /// QLoRA's quantization state on this GPU (in the weights; not a parameter).
    pub quant_state: u64,
}

impl Facts<'_> {
    /// The largest decoder layer's parameters on this GPU (after TP): the unit ZeRO-3 and FSDP
    /// gather.
    fn largest_layer(&self) -> u64 {
        let ep = self.place.ep;
        if ep <= 1 {
            return self.inv.per_layer().div_ceil(self.place.tp);
        }
        // Under EP a layer holds its experts' 1/ep share.
        let experts = self.inv.per_layer_where(super::placement::is_expert);
        (self.inv.per_layer() - experts + experts.div_ceil(ep)).div_ceil(self.place.tp)
    }
}

/// ZeRO stage 1, 2 or 3 (DeepSpeed): states partitioned from stage 1, gradients from stage 2,
/// parameters at stage 3; optimizer and parameter offload.
pub(super) fn zero(stage: u8, s: &mut Sharded, f: &Facts, ds_fp32_grads: u64) {
    let (p, scen) = (f.place, f.scen);
    let dp = p.dp;
    s.optimizer.device = p.shard(s.optimizer.device);
    s.optimizer.paged = p.shard(s.optimizer.paged);
    s.optimizer.step_transient = p.shard(s.optimizer.step_transient);
    s.master = p.shard(s.master) + p.shard(ds_fp32_grads);
    let master = if super::ds_bf16_states(scen) {
        "bf16"
    } else {
        "fp32"
    };
    s.optimizer_formula = format!(
        "({}) / {dp} GPUs, + {master} master weights and {master} gradient partition / {dp}",
        s.optimizer_formula
    );
    if stage >= 2 {
        s.gradients.sharded(p, "");
        s.grads_sharded = true;
        // contiguous_gradients: an ipg buffer of reduce_bucket_size elements.
        s.comm = Explained::new(
            ZERO_REDUCE_BUCKET_ELEMENTS.min(f.trainable) * f.grad_bytes,
            "ZeRO reduce bucket: min(reduce_bucket_size 5e8, params) x grad bytes".into(),
        );
    }
    if stage == 3 {
        s.weights.sharded(p, "");
        // The running and the prefetched layer are gathered in 16 bits.
        s.gather = 2 * f.largest_layer() * f.weight_bytes;
    }
    if scen.parallel.offload_optimizer != Offload::None {
        let off = s.optimizer.device + s.optimizer.paged + s.master;
        s.optimizer = StateBytes {
            device: 0,
            paged: 0,
            step_transient: 0,
        };
        s.master = 0;
        match scen.parallel.offload_optimizer {
            Offload::Cpu => s.host += off,
            _ => {
                s.nvme += off;
                s.host += NVME_SWAP_BUFFER_BYTES;
            }
        }
        s.optimizer_formula = format!(
            "{}; offloaded to {}",
            s.optimizer_formula,
            scen.parallel.offload_optimizer.id()
        );
    }
    if stage == 3 && scen.parallel.offload_params != Offload::None {
        match scen.parallel.offload_params {
            Offload::Cpu => s.host += s.weights.bytes,
            _ => s.nvme += s.weights.bytes,
        }
        s.weights = Explained::new(
            0,
            format!(
                "parameters offloaded to {}",
                scen.parallel.offload_params.id()
            ),
        );
    }
}

/// FSDP2 (`fully_shard`) and FSDP1 (flat parameters): parameters, gradients and states sharded;
/// the running and the prefetched unit gathered in the compute dtype; CPU offload of parameters
/// or the optimizer.
pub(super) fn fsdp(s: &mut Sharded, f: &Facts, precision: Precision) {
    let (p, scen) = (f.place, f.scen);
    // QLoRA's quantization state is no parameter: every rank keeps all of it.
    s.weights.bytes -= f.quant_state;
    s.weights.sharded(
        p,
        if scen.parallel.fsdp1 {
            " (FSDP1 flat-parameter shards)"
        } else {
            " (FSDP2 shards)"
        },
    );
    if f.quant_state > 0 {
        s.weights.bytes += f.quant_state;
        s.weights.formula = format!(
            "{}, + {} B of NF4 state on every rank",
            s.weights.formula, f.quant_state
        );
    }
    s.gradients.sharded(p, "");
    s.grads_sharded = true;
    s.optimizer.device = p.shard(s.optimizer.device);
    s.optimizer.paged = p.shard(s.optimizer.paged);
    s.optimizer.step_transient = p.shard(s.optimizer.step_transient);
    s.optimizer_formula = format!("({}) / {} GPUs", s.optimizer_formula, p.dp);
    // Unsharded compute-dtype copies of the running and prefetched layer, and the root module
    // (embeddings, lm_head) kept unsharded after forward.
    let c = precision.compute_dtype().bytes();
    let largest = f.largest_layer();
    // With torchao's fp8 all-gather the converted Linears arrive as fp8, one byte each.
    let fp8 = if scen.fp8.fp8_all_gather() {
        crate::fp8::converted_per_layer(f.inv)
            .div_ceil(p.tp)
            .min(largest)
    } else {
        0
    };
    // QLoRA's 4-bit Linears are gathered as they are stored, packed (half a byte a weight,
    // whatever `bnb_4bit_quant_storage` calls the elements); their quantization state is not
    // gathered (every rank has it).
    let packed = if scen.method == Method::Qlora {
        f.inv.per_layer_where(|t| t.quantizable).div_ceil(p.tp)
    } else {
        0
    };
    let packed = packed.min(largest - fp8);
    // LoRA's adapters are parameters of the layer's unit too, gathered beside the frozen
    // weights (measured on FSDP2's collectives: tests/reference/test_fsdp.py); under FSDP1
    // peft's `fsdp_auto_wrap_policy` makes each adapter Linear a unit of its own, gathered only
    // while it runs (small: left out).
    let adapters = if scen.method == Method::Full || scen.parallel.fsdp1 {
        0
    } else {
        f.layer_trainable
    };
    // A parameter is gathered in the compute dtype under the mixed-precision policy, else in
    // its own (a LoRA adapter's, fp32 by default); its unsharded gradient has the same dtype,
    // and the reduce-scatter's input is a copy in the reduce dtype (fp32 under the policy, as
    // the FSDP2 export writes it, else the gradient's).
    let gathered_grad = if precision.is_autocast() || scen.method == Method::Full {
        c
    } else {
        f.grad_bytes
    };
    let layer_gathered =
        (largest - fp8 - packed) * c + adapters * gathered_grad + fp8 + packed.div_ceil(2);
    let root = f.inv.outside_layers().div_ceil(p.tp) * c;
    s.gather = 2 * layer_gathered + root;
    // The reduce dtype: the gradient's (the compute dtype under the policy, as accelerate, the
    // Trainer and the FSDP2 export set it), or fp32 under the policy as torchtitan sets it
    // (`reduce32`).
    let reduce_bytes = if precision.is_autocast() && scen.parallel.reduce32 {
        4
    } else {
        gathered_grad
    };
    // FSDP1 reduce-scatters the flat gradient itself when it is in the reduce dtype (no copy),
    // else a cast copy of it.
    let flat = scen.parallel.fsdp1;
    let reduce = if flat && reduce_bytes == gathered_grad {
        0
    } else {
        reduce_bytes
    };
    // Copying the gradients in casts each one's rank chunks to the reduce dtype first
    // (`foreach_reduce_scatter_copy_in`): the largest tensor's chunk beside the input.
    let root_copy_in = if !flat && reduce != gathered_grad && f.outside_trainable > 0 {
        (f.inv.largest_outside() / p.tp).div_ceil(p.dp) * reduce
    } else {
        0
    };
    let fsdp = super::FsdpBuffers {
        root,
        layer: layer_gathered,
        layer_grads: f.layer_trainable * gathered_grad,
        layer_reduce: f.layer_trainable * reduce,
        root_grads: f.outside_trainable * gathered_grad,
        root_reduce: f.outside_trainable * reduce + root_copy_in,
        #[cfg(feature = "replay")]
        root_copy_in,
        flat,
        shards: p.dp,
        reduce_cast: reduce_bytes != f.grad_bytes,
        shard_cast: flat && precision.is_autocast() && f.weight_bytes != c,
    };
    s.fsdp = Some(fsdp);
    // In a layer's backward: its trained parameters' unsharded gradients, and FSDP2's previous
    // reduce-scatter input or FSDP1's cast copy (with its sharded output).
    let (bytes, held) = if flat {
        (
            fsdp.layer_grads + fsdp.layer_reduce + fsdp.layer_reduce.div_ceil(p.dp),
            "FSDP1: a layer's flat gradient",
        )
    } else {
        (
            fsdp.layer_grads + fsdp.layer_reduce,
            "FSDP2: a layer's unsharded gradients",
        )
    };
    s.comm = Explained::new(
        bytes,
        format!("{held} ({gathered_grad} B each), reduced in {reduce_bytes} B"),
    );
    if scen.parallel.offload_params == Offload::Cpu {
        // FSDP moves its (flat) parameters to the host; QLoRA's quantization states are module
        // attributes, not parameters, and stay on the GPU (measured: an 8B QLoRA under FSDP1's
        // CPUOffload, tests/reference/test_gpu_fsdp.py).
        s.host += s.weights.bytes - f.quant_state + s.gradients.bytes + s.optimizer.device;
        s.weights = Explained::new(
            f.quant_state,
            if f.quant_state > 0 {
                format!(
                    "parameters offloaded to cpu; the NF4 state ({} B) stays",
                    f.quant_state
                )
            } else {
                "parameters offloaded to cpu".to_string()
            },
        );
        s.gradients.bytes = 0;
        s.optimizer.device = 0;
        s.optimizer.step_transient = 0;
    }
    if scen.parallel.offload_optimizer == Offload::Cpu {
        s.host += s.optimizer.device;
        s.optimizer.device = 0;
        s.optimizer.step_transient = 0;
    }
}
