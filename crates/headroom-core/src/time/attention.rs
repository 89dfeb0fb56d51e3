//! The rate a fused attention kernel runs at: its own fraction of the dense peak, which is
//! not the GEMM curve's (a flash kernel interleaves two small matmuls with a softmax per
//! tile, and on Hopper only kernels written for its tensor-core instructions reach GEMM rates).
//!
//! The rates are by kernel and GPU generation, from FlashAttention-2's and -3's papers and the
//! H200's profiled cuDNN kernels, scaled by sequence length. Eager and math attention stay on the
//! GEMM curve.

use crate::catalog::Gpu;
use crate::scenario::{Attention, Scenario};
use crate::sdpa::Backend;

/// A fused attention kernel's forward-plus-backward throughput on long sequences as a
/// fraction of the GPU's dense 16-bit peak (head dimension 128), and which kernel it is;
/// [`KernelRate::at_span`] scales it to a sequence length.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct KernelRate {
    pub kernel: Kernel,
    pub efficiency: f64,
}

/// The fused kernels with a rate of their own, by the figure's source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kernel {
    Fa2Ampere,
    Fa2Hopper,
    Fa3Hopper,
    Flex,
    Efficient,
    CudnnHopper,
}

impl Kernel {
    /// The kernel's name and where its rate comes from: formula text only, so a build
    /// without the time terms' text (the site's) leaves these strings out.
    pub fn describe(self) -> (&'static str, &'static str) {
        match self {
            Kernel::Fa2Ampere => (
                "FlashAttention-2",
                "FlashAttention-2: forward 50-73% of A100 peak, backward lower (Dao 2023, §4.1)",
            ),
            Kernel::Fa2Hopper => (
                "FlashAttention-2",
                "FlashAttention-2 on Hopper: 35% of peak (Shah et al. 2024, FlashAttention-3, abstract)",
            ),
            Kernel::Fa3Hopper => (
                "flash-attn 3",
                "FlashAttention-3: forward 75% of H100 peak, backward 1.5-1.75x FA2 (Shah et al. 2024)",
            ),
            Kernel::Flex => (
                "flex_attention",
                "FlexAttention at 90% (forward) and 85% (backward) of FlashAttention-2 (PyTorch blog, 2024)",
            ),
            Kernel::Efficient => (
                "SDPA memory-efficient",
                "xformers' CUTLASS kernel at about 0.6x FlashAttention-2 (Dao 2023, Figures 4-6)",
            ),
            Kernel::CudnnHopper => (
                "SDPA cuDNN",
                "cuDNN SDPA measured on the H200 with torch 2.11's profiler (tests/reference/gpu/h200/edge/timing.json)",
            ),
        }
    }
}

/// Tokens per sequence at which a flash-style kernel runs at half its long-sequence rate: the
/// grid has one block per 128 query rows, so short sequences leave SMs idle and the causal
/// diagonal's partial tiles weigh more. FlashAttention-2's benchmarks (Dao 2023, Figures 4-7)
/// rise from about half their 16k-token throughput at 512 tokens to within 10% of it at 4k.
pub(super) const HALF_RATE_SPAN: f64 = 512.0;

/// FlashAttention-2 on Ampere and Ada. Dao 2023 (arXiv 2307.08691), abstract and §4.1: the
/// forward reaches 50-73% of an A100's peak, the backward less; forward + backward at head
/// dimension 128 on long sequences about 0.6.
const FA2_AMPERE: f64 = 0.60;
/// FlashAttention-2 on Hopper: "only 35% utilization on the H100" (Shah et al. 2024,
/// FlashAttention-3, arXiv 2407.08608, abstract): it uses none of Hopper's wgmma or TMA.
const FA2_HOPPER: f64 = 0.35;
/// FlashAttention-3 on Hopper: forward up to 740 TFLOP/s (75% of the H100's peak), backward
/// 1.5-1.75x FlashAttention-2's (Shah et al. 2024, abstract and §4.1): forward + backward,
/// dominated by the backward, about 0.55.
const FA3_HOPPER: f64 = 0.55;
/// cuDNN's fused SDPA on Hopper (PyTorch's first choice there): measured on the H200 with
/// torch 2.11's profiler (tests/reference/gpu/h200/edge/timing.json, 2026-11-26), head
/// dimension 128 at 4096 tokens, forward + backward with cuDNN's helper kernels: 0.46 (Llama
/// 3.1 8B) and 0.51 (Llama 3.2 3B) of the dense peak, 0.49 on average, i.e. 0.55 on long
/// sequences by [`HALF_RATE_SPAN`]; `tests/time.rs` recomputes them from that file.
pub(super) const CUDNN_HOPPER: f64 = 0.55;
/// PyTorch's memory-efficient kernel (xformers' CUTLASS FMHA): about 0.6x FlashAttention-2's
/// speed in Dao 2023's benchmarks (Figures 4-6, "xformers" against "FlashAttention-2").
const EFFICIENT_OF_FA2: f64 = 0.6;
/// flex_attention: "90% of FlashAttention2's performance in the forward pass and 85% in the
/// backward pass" (PyTorch blog, "FlexAttention", August 2024): 0.87 of its rate.
const FLEX_OF_FA2: f64 = 0.87;

/// The fused kernel a scenario's attention runs and its rate, or None where attention's
/// FLOPs are plain matmuls (eager, SDPA's math kernel: timed on the GEMM curve with the
/// softmax as a memory term) or nothing was published for the GPU (AMD: the GEMM curve).
pub(super) fn kernel_rate(gpu: &Gpu, scen: &Scenario, sdpa: Backend) -> Option<KernelRate> {
    if gpu.vendor != "nvidia" {
        return None;
    }
    let hopper = gpu.sm().0 >= 9;
    let (fa2_kernel, fa2) = if hopper {
        (Kernel::Fa2Hopper, FA2_HOPPER)
    } else {
        (Kernel::Fa2Ampere, FA2_AMPERE)
    };
    let (kernel, efficiency) = match scen.attention {
        Attention::Eager => return None,
        Attention::Flash2 => (fa2_kernel, fa2),
        Attention::Flash3 if hopper => (Kernel::Fa3Hopper, FA3_HOPPER),
        Attention::Flash3 => (fa2_kernel, fa2),
        Attention::Flex => (Kernel::Flex, fa2 * FLEX_OF_FA2),
        Attention::Sdpa => match sdpa {
            Backend::Math => return None,
            // PyTorch's flash backend is FlashAttention-2's code.
            Backend::Flash => (fa2_kernel, fa2),
            Backend::Efficient => (Kernel::Efficient, fa2 * EFFICIENT_OF_FA2),
            Backend::Cudnn if hopper => (Kernel::CudnnHopper, CUDNN_HOPPER),
            Backend::Cudnn => (fa2_kernel, fa2),
        },
    };
    Some(KernelRate { kernel, efficiency })
}

impl KernelRate {
    /// The fraction of the peak at `span` tokens per sequence (a packed document's length
    /// where documents are packed; a context-parallel rank's share).
    pub fn at_span(&self, span: f64) -> f64 {
        self.efficiency * span / (span + HALF_RATE_SPAN)
    }
}
