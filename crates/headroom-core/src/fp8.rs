//! fp8 training as torchao's float8 and Transformer Engine do it: which Linears are converted,
//! what the casts and saved copies cost in memory and in time, and what stays in 16 bits.
//!
//! torchao (`torchao/float8/float8_linear.py`, `matmul_with_hp_or_float8_args`) casts a
//! converted Linear's input and weight to fp8 just before the forward matmul, and its output
//! gradient, weight and input again before the two backward matmuls. Autograd saves the
//! high-precision input and weight (`ctx.save_for_backward(input_hp, weight_hp_t)`), so the
//! saved activations, the weights, the gradients and the optimizer states are those of bf16
//! training; what fp8 adds is the cast copies while a matmul runs, and what it saves is the
//! matmuls' time and, with FSDP2's fp8 all-gather, half of the gathered Linear weights.
//!
//! torchao converts decoder `nn.Linear`s whose dimensions are divisible by 16; not the lm_head, not
//! stacked MoE experts. The fp8 operand copies while a converted Linear runs are layer temporaries;
//! FSDP2's fp8 all-gather applies to tensorwise. Time: the cast traffic, and the converted matmuls
//! at the fp8 peak times a GEMM share fitted on torchao's Llama 3 8B benchmark, the gain falling
//! off for small GEMMs as measured on an H100 (`size_factor`). The casts cost one fused pass when
//! compiled (`Runtime::compiled`: `compile` or CUDA graphs) or under Transformer Engine, and
//! torchao's eager kernels otherwise (`cast_bytes_per_element`, fitted on an H200's eager runs).
//! `tests/reference/test_fp8.py` checks that saved tensors, weights and states are bf16 training's.
//! Refused where the GPU has no fp8 (`estimate::check_fp8`), with 16-bit fp16, with fp32 and with
//! LoRA.
//!
//! Transformer Engine (`fp8 = te`, accelerate's TE backend; read from TE's source, assumed):
//! `Shape::te_fp8` makes each converted Linear save an fp8 copy of its input
//! (`activations::linear::te_linear_inputs`, one per Linear, routers excepted). `states::local`
//! counts each `te.Linear`'s fp8 weight copy (`te_weight_copy_bytes`: both layouts on Ada and
//! Hopper, one on Blackwell) instead of autocast's, the untied lm_head's too
//! (`te_converts_lm_head`, with its fp8 input); the copy is kept to its layer's backward
//! (`Step::kept_copies`; a checkpointed layer makes it again in its recompute). The delayed-scaling
//! state sits beside the weights.

use crate::catalog::Gpu;
use crate::model::ModelSpec;
use crate::model::params::{ParamInventory, ParamTensor, Scope};
use crate::scenario::{Fp8Recipe, Scenario};

/// Bytes per weight element of the fp8 copy a `te.Linear` keeps from its forward to its
/// backward under Transformer Engine's per-tensor recipes: both layouts (rowwise for the
/// forward GEMM, the transpose for the input-gradient GEMM) on Ada and Hopper, one on
/// Blackwell, whose GEMMs take fp8 operands in any layout (TE's `non_tn_fp8_gemm_supported()`:
/// compute capability major 10 or more; `pytorch/csrc/extensions/util.cpp`). Without weight
/// caching (`is_first_microbatch`, which accelerate never passes) the copy is made again each
/// forward (TE `module/linear.py`; read, not measured).
pub fn te_weight_copy_bytes(gpu: &Gpu) -> u64 {
    if gpu.sm().0 >= 10 { 1 } else { 2 }
}

/// Transformer Engine's `DelayedScaling` state per `te.Linear`: forward amax history
/// `[amax_history_len = 1024, 3]` and backward `[1024, 2]` in fp32, and five fp32 scales
/// (TE `fp8.py`, `recipe.py`: 12,288 + 8,192 + 20 bytes).
pub const TE_DELAYED_STATE_BYTES: u64 = 1024 * 3 * 4 + 1024 * 2 * 4 + 5 * 4;

/// Whether the decoder layers' Linears are `te.Linear`s: `fp8=te` on a model whose Linears are
/// `nn.Linear` with dimensions multiples of 16, which accelerate's `convert_model` swaps (GPT-2's
/// `Conv1D`s are no `nn.Linear`, and stay).
pub fn te_converts(spec: &ModelSpec, scen: &Scenario) -> bool {
    scen.fp8 == Fp8Recipe::Te
        && !spec.class().traits.conv1d
        && spec.hidden.is_multiple_of(16)
        && spec.intermediate.is_multiple_of(16)
}

/// Whether accelerate makes the lm_head a `te.Linear` too (`fp8=te`): `convert_model` swaps
/// every `nn.Linear` whose dimensions are multiples of 16, the lm_head included (the model's
/// last child). A tied lm_head is left out here: the swap gives it a weight of its own
/// (untying it), which Headroom does not model.
pub fn te_converts_lm_head(spec: &ModelSpec, scen: &Scenario) -> bool {
    te_converts(spec, scen)
        && !spec.tie_embeddings
        && spec.vocab.is_multiple_of(16)
        && spec.lm_head_width().is_multiple_of(16)
}

/// Whether torchao converts this parameter's Linear: the decoder layers' `nn.Linear`s whose
/// both dimensions are multiples of 16 (`torch._scaled_mm`'s requirement; torchtitan's and
/// torchao's own module filters skip the others). The lm_head stays in bf16 (torchtitan
/// leaves the output layer out), and so do stacked MoE experts (transformers' grouped
/// experts are parameters, not `nn.Linear`s; torchao converts them only with its prototype
/// MoE training).
pub fn converts(t: &ParamTensor) -> bool {
    t.linear.is_some()
        && t.scope != Scope::Model
        && t.copies == 1
        && t.d_in.is_multiple_of(16)
        && t.d_out.is_multiple_of(16)
}

/// Parameters of one decoder layer that are fp8 Linears (the largest layer kind), before
/// tensor parallelism.
pub fn converted_per_layer(inv: &ParamInventory) -> u64 {
    inv.per_layer_where(converts)
}

/// What fp8 does to this scenario on `gpu`, one line for the report ("" without fp8).
pub fn describe(inv: &ParamInventory, scen: &Scenario, gpu: &Gpu) -> String {
    let grads = match scen.fp8 {
        Fp8Recipe::Off => return String::new(),
        Fp8Recipe::Te => return describe_te(inv, gpu),
        Fp8Recipe::Tensorwise => {
            "e4m3 inputs and weights, e5m2 output gradients, one scale per tensor"
        }
        Fp8Recipe::Rowwise => "e4m3 inputs, weights and gradients, one scale per row",
    };
    let all = inv.sum_where(|t| t.linear.is_some() && t.scope != Scope::Model);
    let converted = inv.sum_where(converts);
    let gather =
        if scen.fp8.fp8_all_gather() && scen.parallel.data == crate::scenario::DataParallel::Fsdp {
            "; FSDP2 gathers them in fp8"
        } else {
            ""
        };
    let experts = if inv
        .tensors
        .iter()
        .any(|t| t.linear.is_some() && t.copies > 1)
    {
        "; MoE experts stay bf16 (stacked parameters, not nn.Linear: torchao converts them \
         only in its prototype MoE training)"
    } else {
        ""
    };
    let casts = if scen.runtime.compiled() {
        "; casts fused by torch.compile"
    } else {
        "; casts run eagerly (no torch.compile): an H200 took 1.6-2.1x as long per step as in \
         bf16 that way, and torch.compile fuses them"
    };
    format!(
        "torchao {}: matmuls in fp8 for {:.1}% of the decoder layers' Linear weights \
         ({grads}){gather}{experts}{casts}; the lm_head, saved tensors, weights and optimizer \
         states as in bf16",
        scen.fp8.id(),
        100.0 * converted as f64 / all.max(1) as f64
    )
}

/// The Transformer Engine line: what `te.Linear` keeps, and where the figures come from.
fn describe_te(inv: &ParamInventory, gpu: &Gpu) -> String {
    let all = inv.sum_where(|t| t.linear.is_some() && t.scope != Scope::Model);
    let converted = inv.sum_where(converts);
    let copy = match te_weight_copy_bytes(gpu) {
        1 => "1 byte per weight: one layout, as on Blackwell",
        _ => "2 bytes per weight: both layouts, as on Ada and Hopper",
    };
    format!(
        "Transformer Engine, delayed scaling (accelerate's TE backend: nn.Linear -> te.Linear, \
         HYBRID e4m3/e5m2, amax history 1024): te.Linear for {:.1}% of the decoder layers' \
         Linear weights; each saves its input in fp8 (1 byte, one copy per Linear) and keeps an \
         fp8 copy of its weight ({copy}) until its backward, plus {} of scaling state per Linear; \
         the untied lm_head is one too where its dimensions are multiples of 16 (a tied one, \
         which the swap unties, is not modelled); routers and stacked MoE experts stay in 16 \
         bits. Read from TE's source, not measured",
        100.0 * converted as f64 / all.max(1) as f64,
        crate::format::bytes(TE_DELAYED_STATE_BYTES),
    )
}

/// The largest converted Linear of a layer as (d_in, d_out), for the cast copies it makes.
fn largest_linear(inv: &ParamInventory) -> Option<(u64, u64)> {
    inv.tensors
        .iter()
        .filter(|t| converts(t))
        .max_by_key(|t| t.d_in * t.d_out)
        .map(|t| (t.d_in, t.d_out))
}

/// Bytes of the fp8 copies alive while one converted Linear's forward matmul runs: its input
/// (`tokens x d_in`) and its weight (`d_in x d_out / tp`), one byte each, plus their fp32
/// scales (one per tensor, or one per row for the rowwise recipe). 0 without fp8.
pub fn forward_cast_bytes(inv: &ParamInventory, scen: &Scenario, tokens: u64, tp: u64) -> u64 {
    let Some((d_in, d_out)) = largest_linear(inv).filter(|_| scen.fp8.is_on()) else {
        return 0;
    };
    let d_out = d_out.div_ceil(tp.max(1));
    if scen.fp8 == Fp8Recipe::Te {
        // The input's rowwise copy for the forward GEMM, freed after it (its other layout is
        // saved; the weight's copy is kept to backward: both counted elsewhere).
        return tokens * d_in + scales(scen.fp8, 0);
    }
    tokens * d_in + d_in * d_out + scales(scen.fp8, tokens + d_out)
}

/// Bytes of the fp8 copies alive in one converted Linear's backward: the output gradient
/// cast twice (one layout per matmul), the weight again for the input gradient and the input
/// again for the weight gradient, one byte each, plus scales. 0 without fp8.
pub fn backward_cast_bytes(inv: &ParamInventory, scen: &Scenario, tokens: u64, tp: u64) -> u64 {
    let Some((d_in, d_out)) = largest_linear(inv).filter(|_| scen.fp8.is_on()) else {
        return 0;
    };
    let d_out = d_out.div_ceil(tp.max(1));
    if scen.fp8 == Fp8Recipe::Te {
        // The output gradient cast in both layouts; the input and the weight were saved in fp8.
        return 2 * tokens * d_out + scales(scen.fp8, 0);
    }
    2 * tokens * d_out + d_in * d_out + tokens * d_in + scales(scen.fp8, 3 * tokens + d_in)
}

/// fp32 scales: one per tensor (tensorwise) or one per row of each cast (rowwise).
fn scales(recipe: Fp8Recipe, rows: u64) -> u64 {
    match recipe {
        Fp8Recipe::Off => 0,
        Fp8Recipe::Tensorwise | Fp8Recipe::Te => 4 * 4,
        Fp8Recipe::Rowwise => 4 * rows,
    }
}

/// HBM bytes the casts move per token of a converted Linear with `d_in` inputs and `d_out`
/// outputs, forward and backward together: each cast reads the 16-bit tensor twice (its
/// absolute maximum, then the scaled copy) and writes one byte per element; the input is cast
/// in forward and again for the weight gradient, the output gradient once per backward matmul.
pub const CAST_BYTES_PER_ELEMENT: f64 = 5.0;

/// HBM bytes per cast element when torchao's casts run eagerly (no torch.compile), each as
/// separate kernels. Counted from the kernels, a cast moves 33 bytes per element: `abs` (read
/// 2, write 2) and `max` (read 2) for the absolute maximum, the fp32 upcast (read 2, write 4),
/// the multiply by the scale (read 4, write 4), the saturating clamp (read 4, write 4) and the
/// fp8 cast (read 4, write 1) (`torchao/float8/float8_scaling_utils.py`, `float8_utils.py`).
/// Measured, it costs about twice that at the catalog's bandwidth: small elementwise kernels
/// run below it, and each Linear launches a dozen of them through the tensor subclass. Fitted
/// on an H200 (torch 2.11, torchao 0.18; Llama 3.2 1B, Llama 3.1 8B and Qwen2.5 1.5B, 8,192 to
/// 32,768 tokens per step; tests/reference/gpu/h200/gpu_presets_fp8.json): eager fp8 steps
/// took 1.57 to 2.08 times as long as the same steps in bf16, and with 62 bytes the time
/// model's ratios are within 3.3% of those six (one constant fitted on them; refitted from 64
/// on 2026-11-26, when attention got its kernel's rate and the eager elementwise kernels a
/// term of their own, both of which lengthen the bf16 steps it is a ratio of).
pub const EAGER_CAST_BYTES_PER_ELEMENT: f64 = 62.0;

/// HBM bytes per cast element for this scenario's recipe: one fused pass
/// ([`CAST_BYTES_PER_ELEMENT`]) with Transformer Engine (its own cast kernels) or with the model
/// compiled (inductor fuses torchao's casts); torchao's eager casts otherwise
/// ([`EAGER_CAST_BYTES_PER_ELEMENT`]). 0 without fp8.
pub fn cast_bytes_per_element(scen: &Scenario) -> f64 {
    match scen.fp8 {
        Fp8Recipe::Off => 0.0,
        Fp8Recipe::Te => CAST_BYTES_PER_ELEMENT,
        Fp8Recipe::Tensorwise | Fp8Recipe::Rowwise if scen.runtime.compiled() => {
            CAST_BYTES_PER_ELEMENT
        }
        Fp8Recipe::Tensorwise | Fp8Recipe::Rowwise => EAGER_CAST_BYTES_PER_ELEMENT,
    }
}

/// Cast traffic of the converted Linears per token (activations) and per micro-batch (the
/// weights, cast in forward and again in backward), over the whole model before splitting, at
/// `bytes_per_element` ([`cast_bytes_per_element`]).
pub fn cast_traffic(inv: &ParamInventory, bytes_per_element: f64) -> (f64, f64) {
    let mut per_token = 0.0;
    let mut per_micro_batch = 0.0;
    for t in inv.tensors.iter().filter(|t| converts(t)) {
        let n = inv.multiplicity(t.scope) as f64;
        per_token += n * bytes_per_element * (2.0 * t.d_in as f64 + 2.0 * t.d_out as f64);
        per_micro_batch += n * bytes_per_element * 2.0 * (t.d_in * t.d_out) as f64;
    }
    (per_token, per_micro_batch)
}

/// The share of fp8's doubled tensor-core peak that a recipe's GEMMs reach relative to bf16
/// GEMMs of the same shape, and where that figure comes from.
///
/// Fitted on torchao's published Llama 3 8B run (8 x H100, FSDP2, batch 1, sequence 8192,
/// torch.compile, per-op selective checkpointing: 6,150 tokens/s in bf16, 7,689.5 with
/// tensorwise fp8 and fp8 all-gather, 6,768 with rowwise;
/// pytorch/ao docs/source/workflows/training.md) when the time model had no elementwise term.
/// Tensorwise runs cuBLAS's fp8 GEMM; rowwise a CUTLASS kernel with per-row scales, which
/// reaches less of the peak. The shares (1.62x and 1.32x a bf16 GEMM) sit inside what the
/// H100 measured for `torch._scaled_mm` at n >= 4,096 (1.41-1.77x, [`size_factor`]) and are
/// kept; with the elementwise term (2026-11-26) the model gives that run 1.10x and 1.02x
/// where torchao measured 1.25x and 1.10x, because its bf16 step is 41% faster than
/// published (torchtitan's per-op selective checkpointing recomputes matmuls that Headroom's
/// `selective` does not, and fp8 would shorten them).
pub fn gemm_factor(recipe: Fp8Recipe) -> f64 {
    match recipe {
        Fp8Recipe::Off => 1.0,
        // Transformer Engine's per-tensor GEMMs are cuBLAS's fp8 GEMMs, as torchao's
        // tensorwise ones are: the same share is assumed.
        Fp8Recipe::Tensorwise | Fp8Recipe::Te => TENSORWISE_GEMM_FACTOR,
        Fp8Recipe::Rowwise => ROWWISE_GEMM_FACTOR,
    }
}

/// How much of fp8's gain a GEMM of square-equivalent size `n` (the time model's
/// `cbrt(M·K·N)`) gets: none up to n = 2,048, all from n = 4,096, linear in log2(n) between.
/// Measured on an H100 (torch 2.11, `torch._scaled_mm` against bf16 `mm`, square shapes;
/// tests/reference/gpu/gpu_presets_tf5.17.json): fp8 ran at 0.83-0.97x bf16 at n = 1,024 and
/// 2,048 (tensorwise and rowwise) and at 1.41-1.77x from 4,096 to 16,384. The end-to-end
/// factors ([`gemm_factor`]) were fitted at n = 5,160 (torchao's Llama 3 8B run), where all
/// of the gain applies.
pub fn size_factor(n: f64) -> f64 {
    (libm::log2(n.max(1.0)) - 11.0).clamp(0.0, 1.0)
}

/// See [`gemm_factor`].
pub const TENSORWISE_GEMM_FACTOR: f64 = 0.81;
/// See [`gemm_factor`].
pub const ROWWISE_GEMM_FACTOR: f64 = 0.66;

/// Where the fp8 speed figures come from, for the time model's formulas.
pub const SPEED_SOURCE: &str = "torchao float8 (float8_linear.py); GEMM share fitted on torchao's \
     Llama 3 8B 8 x H100 benchmark (docs/source/workflows/training.md)";
