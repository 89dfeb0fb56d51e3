//! Which kernel `scaled_dot_product_attention` runs on a GPU, and why: a pure reading of
//! PyTorch's dispatch rules (aten/src/ATen/native/transformers/cuda/sdp_utils.cpp,
//! `select_sdp_backend`), for the training call transformers makes (dense 4-D inputs,
//! `is_causal=True`, no mask, q/k/v requiring grad, GQA through `enable_gqa`; in sliding-window
//! and chunked layers past their window, a mask instead, with k and v repeated:
//! [`masked_local_layers`]).
//!
//! What each kernel saves for backward (the autograd formulas of
//! `_scaled_dot_product_{flash,efficient,cudnn}_attention` in derivatives.yaml, shapes from
//! torch/_meta_registrations.py) is in `activations/attention.rs`; this module only picks.
//!
//! Assumed: PyTorch 2.9 or later built with CUDA 13 and cuDNN 9.15 or later (the wheels'
//! bundle; cuDNN goes first on sm90 and sm100 there), deterministic algorithms off, and the
//! default backends all enabled. ROCm's AOTriton rules are simplified (see `choose`).
//!
//! Checked on a real GPU: on an H100 with torch 2.11.0+cu130 and cuDNN 9.19,
//! `torch._fused_sdp_choice` for the causal call over dtype, head width (64 to 512), dropout
//! and GQA picks what `choose` says in all 96 cases (tests/reference/gpu/gpu_presets.json,
//! which also holds masks and narrower value heads, 648 cases in all), and the kernel that ran
//! in each of the reference suite's scenarios (its autograd node) is the one the core assumed
//! (tests/reference/test_gpu_measured.py).
//!
//! How many layers slide follows the config class's default `layer_types`, or
//! `ModelSpec::sliding_layers` where the config decides (its `layer_types`, Qwen2/Qwen3's
//! `max_window_layers`, Qwen2-MoE's and SmolLM3's rules); those layers past their window get
//! transformers' mask, which flash refuses, and their own kernel (`Shape::sdpa_local`,
//! `activations::attention::window_mask`). Flash also refuses MLA's value heads when they are
//! narrower than q/k's. SDPA for gpt-oss is flagged: transformers has no SDPA path for it.
//! transformers' own `flash_attention_2/3` and `flex_attention` (attention `flash2`, `flash3`,
//! `flex`) are taken to save what the flash kernel saves (assumed), with where each cannot run. The
//! user may also force a kernel; the reason is kept either way.

use crate::catalog::Gpu;
use crate::dtype::DType;
use crate::model::ModelSpec;
use crate::scenario::{Attention, Scenario, SdpaKernel};

/// A kernel SDPA can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Flash,
    Efficient,
    Cudnn,
    Math,
}

impl Backend {
    pub const fn label(self) -> &'static str {
        match self {
            Backend::Flash => "flash",
            Backend::Efficient => "memory-efficient",
            Backend::Cudnn => "cuDNN",
            Backend::Math => "math",
        }
    }
}

/// The kernel assumed for a scenario, why, and whether PyTorch could run it at all (a kernel
/// forced by the user may not be: PyTorch then stops with "No available kernel").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    pub backend: Backend,
    pub why: String,
    pub runnable: bool,
}

/// What the choice depends on.
#[derive(Debug, Clone, Copy)]
pub struct Inputs {
    /// Compute capability, major and minor (8.0 for A100); 0.0 when unknown.
    pub sm: (u32, u32),
    pub amd: bool,
    /// dtype of q, k, v as SDPA sees them (autocast casts them to the compute dtype).
    pub dtype: DType,
    pub head_dim: u64,
    /// Width of a value head: `head_dim` but for multi-head latent attention.
    pub v_head_dim: u64,
    pub dropout: f64,
    /// Fewer key/value heads than query heads, handed to SDPA as such (`enable_gqa=True`,
    /// what transformers does without a padding mask): the memory-efficient kernel refuses it.
    pub gqa: bool,
    /// An `attn_mask` is passed (a sliding-window or chunked layer at a length that needs
    /// one): the flash kernel takes none.
    pub mask: bool,
}

impl Inputs {
    pub fn new(gpu: &Gpu, dtype: DType, head_dim: u64, dropout: f64) -> Self {
        Inputs {
            sm: gpu.sm(),
            amd: gpu.vendor != "nvidia",
            dtype,
            head_dim,
            v_head_dim: head_dim,
            dropout,
            gqa: false,
            mask: false,
        }
    }
}

/// The SDPA kernel of a scenario on `gpu` (PyTorch's pick, or the forced one), with why.
/// Under autocast SDPA runs in the autocast dtype; the attention dropout is the config's
/// unless the scenario overrides it.
pub fn for_scenario(spec: &ModelSpec, gpu: &Gpu, scen: &Scenario) -> Choice {
    kernels(spec, gpu, scen).scenario
}

/// A scenario's SDPA kernels: the one it reports ([`for_scenario`]: the unmasked layers', or
/// every layer's when all are masked, with the reasons for both kinds), and the masked local
/// layers' where transformers masks them ([`masked_local_layers`]).
#[derive(Debug, Clone)]
pub struct Kernels {
    pub scenario: Choice,
    pub local: Option<Backend>,
}

/// [`Kernels`] of a scenario, each kernel chosen once.
pub fn kernels(spec: &ModelSpec, gpu: &Gpu, scen: &Scenario) -> Kernels {
    let mut c = for_layers(spec, gpu, scen, false);
    let Some((window, n)) = masked_local_layers(spec, scen) else {
        return Kernels {
            scenario: c,
            local: None,
        };
    };
    let local = for_layers(spec, gpu, scen, true);
    let local_backend = local.backend;
    let kind = if spec.llama4.is_some() {
        "chunked"
    } else {
        "sliding-window"
    };
    if n == spec.layers {
        c = Choice {
            why: format!(
                "{}; every layer is {kind} (window {window} <= seq), so transformers passes a \
                 mask, which SDPA saves",
                local.why
            ),
            ..local
        };
    } else {
        // A kernel forced on every layer that the masked ones cannot run makes the whole
        // scenario one PyTorch refuses.
        c.runnable = c.runnable && local.runnable;
        c.why = format!(
            "{}; {n} of {} layers are {kind} (window {window} <= seq): transformers passes them \
             a mask, which SDPA saves, and they run the {} kernel ({})",
            c.why,
            spec.layers,
            local.backend.label(),
            local.why
        );
    }
    Kernels {
        scenario: c,
        local: Some(local_backend),
    }
}

/// The layers that get an attention mask from transformers under SDPA, as (window, how
/// many): the local layers ([`ModelSpec::local_attention`]) once the sequence reaches their
/// window (`_ignore_causal_mask_sdpa` in transformers' masking_utils keeps `is_causal` only
/// below it). None with transformers' own kernels (flash-attn and flex take the window as an
/// argument) and with eager attention (which builds its masks outside the layers).
fn masked_local_layers(spec: &ModelSpec, scen: &Scenario) -> Option<(u64, u64)> {
    let (window, n) = spec.local_attention()?;
    (scen.attention == Attention::Sdpa && u64::from(scen.seq_local()) >= window && n > 0)
        .then_some((window, n))
}

/// Whether transformers hands SDPA the key/value heads as they are (`use_gqa_in_sdpa`:
/// `enable_gqa=True` when no mask is passed and k and v share a head width of at most 256);
/// otherwise `repeat_kv` copies them to every query head first.
pub fn sdpa_takes_gqa(spec: &ModelSpec, masked: bool) -> bool {
    !masked && spec.head_dim <= 256 && spec.v_dim() / spec.heads == spec.head_dim
}

/// The kernel of the layers with (`masked`) or without an attention mask.
fn for_layers(spec: &ModelSpec, gpu: &Gpu, scen: &Scenario, masked: bool) -> Choice {
    let dropout = scen.dropout.unwrap_or(spec.dropout.attention);
    let precision = crate::states::activation_precision(scen);
    let mut x = Inputs::new(gpu, precision.compute_dtype(), spec.head_dim, dropout);
    x.v_head_dim = spec.v_dim() / spec.heads;
    x.gqa = spec.kv_heads < spec.heads && sdpa_takes_gqa(spec, masked);
    x.mask = masked;
    match scen.attention {
        Attention::Flash2 | Attention::Flash3 if spec.llama4.is_some() => {
            // Llama4PreTrainedModel sets `_supports_flash_attn = False`: transformers refuses
            // attn_implementation="flash_attention_2"/"_3".
            let mut c = transformers_kernel(scen.attention, &x);
            c.runnable = false;
            c.why = "not what transformers runs: Llama 4 has no flash-attn implementation \
                     (its chunked layers need sdpa, eager or flex)"
                .into();
            c
        }
        Attention::Flash2 | Attention::Flash3 | Attention::Flex => {
            transformers_kernel(scen.attention, &x)
        }
        Attention::Sdpa if spec.is_gpt_oss() => {
            // GptOssPreTrainedModel sets `_supports_sdpa = False`: transformers refuses
            // attn_implementation="sdpa" (and runs eager when none is given).
            let mut c = choose(scen.sdpa, &x);
            c.runnable = false;
            c.why = "not what transformers runs: gpt-oss has no SDPA attention (its sinks need \
                     eager, flash3 or flex)"
                .into();
            c
        }
        _ => choose(scen.sdpa, &x),
    }
}

/// transformers' own fused implementations. What they save is taken as the flash kernel's
/// (q, k, v, output, the fp32 logsumexp; flash-attn's `_flash_attn_forward` and
/// flex_attention's `flex_attention_backward` inputs): assumed, as neither runs on this CPU.
/// Where each runs: flash-attn 2 needs Ampere or later (sm80+) and fp16/bf16 with a head
/// dimension up to 256; flash-attn 3 is built for Hopper (sm90); flex_attention compiles with
/// Triton, which needs sm70 or later.
fn transformers_kernel(attention: Attention, x: &Inputs) -> Choice {
    let half = matches!(x.dtype, DType::Bf16 | DType::F16);
    let refusal = match attention {
        Attention::Flash2 if x.amd || x.sm < (8, 0) => {
            Some("flash-attn 2 needs an NVIDIA GPU of compute capability 8.0 or later")
        }
        Attention::Flash3 if x.amd || x.sm.0 != 9 => {
            Some("flash-attn 3 is built for Hopper (compute capability 9.0)")
        }
        Attention::Flash2 | Attention::Flash3 if !half => {
            Some("flash-attn runs fp16 and bf16 only")
        }
        Attention::Flash2 | Attention::Flash3 if x.head_dim > 256 => {
            Some("flash-attn takes head dimensions up to 256")
        }
        Attention::Flex if !x.amd && x.sm < (7, 0) => {
            Some("Triton needs compute capability 7.0 or later")
        }
        _ => None,
    };
    let what = attention.hf_name();
    Choice {
        backend: Backend::Flash,
        runnable: refusal.is_none(),
        why: match refusal {
            None => {
                format!("transformers' {what}; saved tensors taken as the flash kernel's (assumed)")
            }
            Some(r) => format!("transformers' {what}, which cannot run here: {r}"),
        },
    }
}

/// Whether attention materializes the (batch, heads, s, s) scores: eager attention, or SDPA
/// running its math kernel (PyTorch's pick when no fused kernel takes the inputs, or forced).
pub fn materializes_scores(spec: &ModelSpec, gpu: &Gpu, scen: &Scenario) -> bool {
    match scen.attention {
        Attention::Eager => true,
        _ => for_scenario(spec, gpu, scen).backend == Backend::Math,
    }
}

/// The kernel PyTorch picks (`Auto`), or the one the user forces, with the reason.
pub fn choose(kernel: SdpaKernel, x: &Inputs) -> Choice {
    let forced = match kernel {
        SdpaKernel::Auto => None,
        SdpaKernel::Flash => Some(Backend::Flash),
        SdpaKernel::Efficient => Some(Backend::Efficient),
        SdpaKernel::Cudnn => Some(Backend::Cudnn),
        SdpaKernel::Math => Some(Backend::Math),
    };
    if let Some(b) = forced {
        let refusal = refuses(b, x);
        return Choice {
            backend: b,
            runnable: refusal.is_none(),
            why: match refusal {
                None => "forced".into(),
                Some(r) => format!("forced, but PyTorch would refuse it here: {r}"),
            },
        };
    }
    let order: &[Backend] = if prefers_cudnn(x) {
        &[Backend::Cudnn, Backend::Flash, Backend::Efficient]
    } else {
        &[Backend::Flash, Backend::Efficient]
    };
    let mut skipped = Vec::new();
    for &b in order {
        match refuses(b, x) {
            None => {
                let why = if skipped.is_empty() {
                    first_reason(b, x)
                } else {
                    skipped.join("; ")
                };
                return Choice {
                    backend: b,
                    why,
                    runnable: true,
                };
            }
            Some(r) => skipped.push(format!("no {}: {r}", b.label())),
        }
    }
    Choice {
        backend: Backend::Math,
        why: skipped.join("; "),
        runnable: true,
    }
}

fn first_reason(b: Backend, x: &Inputs) -> String {
    match b {
        Backend::Cudnn => format!("first on sm{}{} with cuDNN 9.15+", x.sm.0, x.sm.1),
        _ => "first that runs".into(),
    }
}

/// sm90 and sm100 put cuDNN first (`check_prefer_cudnn_attention`, CUDA 13 wheels).
fn prefers_cudnn(x: &Inputs) -> bool {
    !x.amd && (x.sm.0 == 9 || x.sm.0 == 10)
}

fn half(d: DType) -> bool {
    matches!(d, DType::Bf16 | DType::F16)
}

/// Why kernel `b` cannot run these inputs, or None.
fn refuses(b: Backend, x: &Inputs) -> Option<String> {
    let sm = x.sm.0 * 10 + x.sm.1.min(9);
    let d = x.head_dim;
    match b {
        Backend::Math => None,
        _ if x.amd => {
            // ROCm: flash and memory-efficient share AOTriton; simplified to its dtypes.
            (b == Backend::Cudnn)
                .then(|| "ROCm has no cuDNN".into())
                .or_else(|| (b == Backend::Flash && !half(x.dtype)).then(|| "fp32 inputs".into()))
        }
        Backend::Flash => {
            if x.mask {
                // check_for_attn_mask: flash takes no attn_mask.
                Some("an attention mask (flash takes none)".into())
            } else if !(80..=121).contains(&sm) {
                Some(format!("sm{sm} is below sm80"))
            } else if !half(x.dtype) {
                Some(format!("{} inputs (fp16/bf16 only)", x.dtype.torch_name()))
            } else if d > 256 {
                Some(format!("head_dim {d} > 256"))
            } else if x.v_head_dim != d {
                // check_head_dim_size_flash: q, k and v must share their last dimension
                // (multi-head latent attention's value heads are narrower).
                Some(format!(
                    "value head_dim {} differs from head_dim {d}",
                    x.v_head_dim
                ))
            } else if matches!(sm, 86..=89 | 120..=121)
                && !(d <= 192 || (x.dropout == 0.0 && d > 224))
            {
                Some(format!("no backward for head_dim {d} on sm{sm}"))
            } else {
                None
            }
        }
        Backend::Efficient => {
            let align = match (sm >= 80, half(x.dtype), sm >= 70) {
                (true, true, _) | (false, true, true) => 8,
                (true, false, _) => 4,
                _ => 1,
            };
            if !(50..=121).contains(&sm) {
                Some(format!("sm{sm} is outside sm50..sm121"))
            } else if sm < 80 && x.dtype == DType::Bf16 {
                Some("bf16 needs sm80".into())
            } else if x.gqa {
                // check_grouped_query_attention_support: only flash and cuDNN take
                // enable_gqa with fewer key/value heads (measured: fp32 Llama-like layers
                // with GQA run the math kernel on an H100).
                Some("grouped-query attention (enable_gqa) is flash and cuDNN only".into())
            } else if !d.is_multiple_of(align) || !x.v_head_dim.is_multiple_of(align) {
                Some(format!("head_dim {d} not a multiple of {align}"))
            } else {
                None
            }
        }
        Backend::Cudnn => {
            let sm9x = x.sm.0 == 9 || x.sm.0 == 10;
            if !(80..=121).contains(&sm) {
                Some(format!("sm{sm} is below sm80"))
            } else if !half(x.dtype) {
                Some(format!("{} inputs (fp16/bf16 only)", x.dtype.torch_name()))
            } else if !d.is_multiple_of(8) || !x.v_head_dim.is_multiple_of(8) {
                Some(format!("head_dim {d} not a multiple of 8"))
            } else if !(d <= 128 || (sm9x && d <= 256)) || x.v_head_dim > d {
                // Measured on an H100 (cuDNN 9.19): every multiple of 8 up to 256, value
                // heads narrower than q/k's and any dropout take cuDNN; 512 does not.
                Some(format!("no backward for head_dim {d}"))
            } else {
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::GpuCatalog;

    fn pick(gpu: &str, dtype: DType, d: u64, p: f64) -> Backend {
        let g = GpuCatalog::builtin().get(gpu).expect("catalog gpu");
        choose(SdpaKernel::Auto, &Inputs::new(g, dtype, d, p)).backend
    }

    // Each case is one of sdp_utils.cpp's rules on a catalog GPU.
    #[test]
    fn defaults_follow_pytorchs_dispatch() {
        // T4 (sm75): no flash (sm80+), bf16 not on memory-efficient below sm80: math.
        assert_eq!(pick("t4-16gb", DType::Bf16, 128, 0.0), Backend::Math);
        assert_eq!(pick("t4-16gb", DType::F16, 128, 0.0), Backend::Efficient);
        assert_eq!(pick("t4-16gb", DType::F32, 64, 0.0), Backend::Efficient);
        // A100: flash for 16-bit, memory-efficient for fp32 (flash is fp16/bf16 only).
        assert_eq!(
            pick("a100-sxm4-80gb", DType::Bf16, 128, 0.0),
            Backend::Flash
        );
        assert_eq!(
            pick("a100-sxm4-80gb", DType::F32, 128, 0.0),
            Backend::Efficient
        );
        // H100 (measured, torch 2.11 + cuDNN 9.19): cuDNN first for every head_dim up to 256
        // and with dropout; 512 goes to memory-efficient.
        assert_eq!(pick("h100-sxm-80gb", DType::Bf16, 128, 0.0), Backend::Cudnn);
        assert_eq!(pick("h100-sxm-80gb", DType::Bf16, 160, 0.0), Backend::Cudnn);
        assert_eq!(pick("h100-sxm-80gb", DType::Bf16, 256, 0.0), Backend::Cudnn);
        assert_eq!(pick("h100-sxm-80gb", DType::Bf16, 128, 0.1), Backend::Cudnn);
        assert_eq!(
            pick("h100-sxm-80gb", DType::Bf16, 512, 0.0),
            Backend::Efficient
        );
        // RTX 4090 (sm89): flash has no backward for head_dim in (192, 224].
        assert_eq!(
            pick("rtx-4090-24gb", DType::Bf16, 200, 0.0),
            Backend::Efficient
        );
        assert_eq!(pick("rtx-4090-24gb", DType::Bf16, 256, 0.0), Backend::Flash);
    }

    // Measured on an H100: with GQA (fewer key/value heads) fp32 and head_dim 512 have no
    // fused kernel left (memory-efficient refuses enable_gqa) and run math.
    #[test]
    fn grouped_query_attention_rules_out_memory_efficient() {
        let g = GpuCatalog::builtin()
            .get("h100-sxm-80gb")
            .expect("catalog gpu");
        let gqa = |dtype, d| {
            let mut x = Inputs::new(g, dtype, d, 0.0);
            x.gqa = true;
            choose(SdpaKernel::Auto, &x).backend
        };
        assert_eq!(gqa(DType::F32, 128), Backend::Math);
        assert_eq!(gqa(DType::Bf16, 512), Backend::Math);
        assert_eq!(gqa(DType::Bf16, 128), Backend::Cudnn);
        assert_eq!(
            pick("h100-sxm-80gb", DType::F32, 128, 0.0),
            Backend::Efficient
        );
    }

    // A sliding-window or chunked layer past its window gets a mask: flash takes none. On an
    // H100 cuDNN takes it (measured: the bool and float mask rows of gpu_presets.json pick as
    // the causal ones do), on an A100 the memory-efficient kernel does.
    #[test]
    fn a_mask_rules_out_flash() {
        let masked = |gpu: &str| {
            let g = GpuCatalog::builtin().get(gpu).expect("catalog gpu");
            let mut x = Inputs::new(g, DType::Bf16, 128, 0.0);
            x.mask = true;
            choose(SdpaKernel::Auto, &x).backend
        };
        assert_eq!(masked("a100-sxm4-80gb"), Backend::Efficient);
        assert_eq!(masked("h100-sxm-80gb"), Backend::Cudnn);
        assert_eq!(masked("t4-16gb"), Backend::Math);
    }

    #[test]
    fn forced_kernels_say_when_pytorch_refuses_them() {
        let t4 = GpuCatalog::builtin().get("t4-16gb").expect("catalog gpu");
        let c = choose(SdpaKernel::Flash, &Inputs::new(t4, DType::F16, 64, 0.0));
        assert_eq!(c.backend, Backend::Flash);
        assert!(!c.runnable && c.why.contains("sm75"), "{c:?}");
        let m = choose(SdpaKernel::Math, &Inputs::new(t4, DType::F16, 64, 0.0));
        assert!(m.runnable);
    }
}
