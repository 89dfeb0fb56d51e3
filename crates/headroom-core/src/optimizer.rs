//! Optimizer state bytes per trainable tensor, and the transient memory of `optimizer.step()`.

use crate::dtype::DType;
use crate::scenario::Optimizer;

/// A trainable tensor as the optimizer sees it.
#[derive(Debug, Clone, Copy)]
pub struct TrainTensor {
    pub rows: u64,
    pub cols: u64,
    /// Copies of this shape (layers x experts).
    pub count: u64,
    pub dtype: DType,
}

impl TrainTensor {
    fn numel(&self) -> u64 {
        self.rows * self.cols
    }
}

/// State bytes of an optimizer over a set of tensors.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StateBytes {
    /// Allocated by PyTorch's caching allocator on the GPU.
    pub device: u64,
    /// bitsandbytes paged buffers: CUDA managed memory, invisible to `memory_allocated`.
    pub paged: u64,
    /// The step's extra transient (foreach intermediates, for-loop temporaries).
    pub step_transient: u64,
}

/// bitsandbytes keeps 32-bit states for tensors under `min_8bit_size` (4096 elements).
const BNB_MIN_8BIT: u64 = 4096;
/// bitsandbytes 8-bit optimizers quantize in blocks of 256 with one fp32 absmax per block.
const BNB_BLOCK: u64 = 256;
/// Paged optimizers page only tensors of at least 1e5 elements.
const BNB_MIN_PAGED: u64 = 100_000;

/// State bytes per tensor for `opt`, plus the step transient.
pub fn state_bytes(opt: Optimizer, tensors: &[TrainTensor]) -> StateBytes {
    let mut out = StateBytes::default();
    let mut total_numel_bytes = 0u64;
    let mut largest_bytes = 0u64;
    for t in tensors {
        let n = t.numel();
        let e = t.dtype.bytes();
        total_numel_bytes += n * e * t.count;
        largest_bytes = largest_bytes.max(n * e);
        let per = match opt {
            // exp_avg and exp_avg_sq, zeros_like(param); `step` is a CPU scalar unless fused.
            Optimizer::AdamW | Optimizer::AdamWForLoop => 2 * n * e,
            Optimizer::AdamWFused => 2 * n * e + 4,
            Optimizer::AdamW8bit | Optimizer::PagedAdamW8bit => {
                if n < BNB_MIN_8BIT {
                    2 * n * 4
                } else {
                    2 * n + 2 * n.div_ceil(BNB_BLOCK) * 4
                }
            }
            Optimizer::Lion | Optimizer::SgdMomentum => n * e,
            Optimizer::Sgd => 0,
            // Factored second moment: a row and a column vector per matrix, full for vectors.
            Optimizer::Adafactor => {
                if t.rows > 1 && t.cols > 1 {
                    (t.rows + t.cols) * 4
                } else {
                    n * 4
                }
            }
            // Adam-mini: m in full; v is one value per output row (per block).
            Optimizer::AdamMini => n * e + t.rows.max(1) * 4,
        };
        let paged = opt == Optimizer::PagedAdamW8bit && n >= BNB_MIN_PAGED;
        if paged {
            out.paged += per * t.count;
        } else {
            out.device += per * t.count;
        }
    }
    out.step_transient = match opt {
        // _foreach_sqrt(exp_avg_sqs) materializes one tensor list of all states.
        Optimizer::AdamW => total_numel_bytes,
        // exp_avg_sq.sqrt() and the division by the bias correction, one tensor at a time.
        Optimizer::AdamWForLoop => 2 * largest_bytes,
        // Lion's sign(update) and Adafactor's update/row-column temporaries, per tensor.
        Optimizer::Lion => largest_bytes,
        Optimizer::Adafactor => 2 * largest_bytes,
        Optimizer::AdamMini => largest_bytes,
        Optimizer::AdamWFused
        | Optimizer::AdamW8bit
        | Optimizer::PagedAdamW8bit
        | Optimizer::Sgd
        | Optimizer::SgdMomentum => 0,
    };
    out
}

/// The formula behind `state_bytes`, for people.
pub fn formula(opt: Optimizer) -> &'static str {
    match opt {
        Optimizer::AdamW | Optimizer::AdamWForLoop | Optimizer::AdamWFused => {
            "2 x trainable params x bytes(param dtype) (exp_avg, exp_avg_sq)"
        }
        Optimizer::AdamW8bit | Optimizer::PagedAdamW8bit => {
            "2 B/param + 2 fp32 absmax per 256-element block; fp32 states for tensors < 4096 elements"
        }
        Optimizer::Lion => "1 x trainable params x bytes(param dtype) (momentum)",
        Optimizer::SgdMomentum => "1 x trainable params x bytes(param dtype) (momentum buffer)",
        Optimizer::Sgd => "no state",
        Optimizer::Adafactor => {
            "4 x (rows + cols) per matrix, 4 B/param for vectors (factored second moment, beta1 = None)"
        }
        Optimizer::AdamMini => "m: 1 x params x bytes(param dtype); v: one fp32 per output row",
    }
}

/// Where the numbers come from: the optimizer's line in content/sources.toml's `[optimizer]`
/// table.
pub fn source_key(opt: Optimizer) -> &'static str {
    match opt {
        Optimizer::AdamW | Optimizer::AdamWForLoop | Optimizer::AdamWFused => "adamw",
        Optimizer::AdamW8bit | Optimizer::PagedAdamW8bit => "adamw8bit",
        Optimizer::Lion => "lion",
        Optimizer::Sgd | Optimizer::SgdMomentum => "sgd",
        Optimizer::Adafactor => "adafactor",
        Optimizer::AdamMini => "adam_mini",
    }
}
