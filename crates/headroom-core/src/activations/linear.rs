//! What a Linear saves of its input: plainly, under autocast, under Transformer Engine's fp8,
//! and under LoRA and DoRA.

use super::{Inventory, Shape};
use crate::dtype::DType;

/// An MLP Linear's input (routers and experts included): as [`linear_inputs`], except that
/// under LoRA on the attention projections only the frozen Linear has no adapter and saves
/// nothing (measured on an H100: Mistral 7B with attention-only adapters).
pub(super) fn mlp_linear_inputs(
    inv: &mut Inventory,
    what: &str,
    elements: u64,
    consumers: u64,
    sh: &Shape,
) {
    inputs_if_adapted(inv, (what, elements, consumers), sh.lora_mlp, sh);
}

/// The input of Linears that under LoRA carry adapters only where `adapted` says: as
/// [`linear_inputs`] where they train or are adapted; frozen and bare, nothing (an 8-bit base's
/// still holds it).
pub(super) fn inputs_if_adapted(
    inv: &mut Inventory,
    (what, elements, consumers): (&str, u64, u64),
    adapted: bool,
    sh: &Shape,
) {
    if sh.base_trainable || adapted {
        linear_inputs(inv, what, elements, consumers, sh);
    } else if sh.held_inputs {
        held_linear_inputs(inv, what, elements, 0, sh);
    }
}

/// A router's input: as [`mlp_linear_inputs`], never Transformer Engine's.
pub(super) fn router_inputs(inv: &mut Inventory, elements: u64, sh: &Shape) {
    if sh.base_trainable {
        plain_linear_inputs(inv, label!("router input"), elements, 1, sh);
    }
}

/// An MLP Linear's adapter input under LoRA (nothing with attention-only adapters).
pub(super) fn mlp_lora_inputs(
    inv: &mut Inventory,
    what: &str,
    elements: u64,
    consumers: u64,
    sh: &Shape,
) {
    if sh.held_inputs {
        let adapted = if sh.lora_mlp { consumers } else { 0 };
        held_linear_inputs(inv, what, elements, adapted, sh);
    } else if sh.lora_mlp {
        lora_inputs(inv, what, elements, consumers, sh);
    }
}

/// One adapted Linear's input under LoRA, whatever the targets say of the MLP (a Qwen shared
/// expert's gate, which all-linear adapts where peft takes the MLP's names for the experts).
pub(super) fn adapted_linear_inputs(inv: &mut Inventory, what: &str, elements: u64, sh: &Shape) {
    if sh.held_inputs {
        held_linear_inputs(inv, what, elements, 1, sh);
    } else {
        lora_inputs(inv, what, elements, 1, sh);
    }
}

/// A Linear's input as autograd keeps it: one tensor shared by the Linears that read it, or
/// under autocast one cast copy per Linear (autocast caches only weight casts).
pub(super) fn linear_inputs(
    inv: &mut Inventory,
    what: &str,
    elements: u64,
    consumers: u64,
    sh: &Shape,
) {
    if sh.te_fp8 {
        return te_linear_inputs(inv, what, elements, consumers);
    }
    plain_linear_inputs(inv, what, elements, consumers, sh);
}

/// A `te.Linear`'s input under Transformer Engine's fp8 (`_Linear.forward`): each Linear casts
/// it to fp8 and saves that copy (after its forward GEMM only the layout its weight-gradient
/// GEMM reads, one byte per element) with its fp32 `scale_inv`: one per Linear, as autocast's
/// casts are (TE `module/linear.py`, `prepare_for_saving`; read, not measured).
pub(super) fn te_linear_inputs(inv: &mut Inventory, what: &str, elements: u64, consumers: u64) {
    inv.add_n(
        what!("{what}, fp8 copy (saved by each te.Linear)"),
        elements,
        DType::F8,
        consumers,
    );
    inv.add_n(what!("its fp8 scale_inv, fp32"), 1, DType::F32, consumers);
}

/// The output projection's input, the attention output: as [`linear_inputs`], but an 8-bit
/// o_proj holds it in the dtype attention wrote it in (autocast's, where the residual stream
/// is fp32: `prepare_model_for_kbit_training` under amp), not the stream's.
pub(super) fn attention_output_inputs(
    inv: &mut Inventory,
    what: &str,
    elements: u64,
    consumers: u64,
    sh: &Shape,
) {
    if sh.held_inputs {
        held_linear_inputs_of(inv, what, (elements, sh.compute()), consumers, sh);
    } else {
        linear_inputs(inv, what, elements, consumers, sh);
    }
}

/// The saved tensor of a Linear's output that the next Linear reads (the down projection's
/// input): itself, or under Transformer Engine the next `te.Linear`'s fp8 copy.
pub(super) fn next_linear_input(
    inv: &mut Inventory,
    what: &str,
    elements: u64,
    dtype: DType,
    sh: &Shape,
) {
    if sh.te_fp8 && sh.base_trainable {
        te_linear_inputs(inv, what, elements, 1);
    } else {
        inv.add(what, elements, dtype);
    }
}

/// [`linear_inputs`] of a Linear Transformer Engine leaves alone (a router: its expert count is
/// no multiple of 16 in most models, and accelerate stops converting at such a module).
fn plain_linear_inputs(inv: &mut Inventory, what: &str, elements: u64, consumers: u64, sh: &Shape) {
    if sh.held_inputs {
        return held_linear_inputs(inv, what, elements, consumers, sh);
    }
    if !sh.base_trainable {
        return lora_inputs(inv, what, elements, consumers, sh);
    }
    if sh.amp() {
        inv.add_n(
            what!(
                "{what}, cast to {} by autocast (one per Linear)",
                sh.compute().torch_name()
            ),
            elements,
            sh.compute(),
            consumers,
        );
    } else {
        inv.add(what!("{what} (saved by the Linear)"), elements, sh.stream());
    }
}

/// Under LoRA the frozen base Linear saves nothing (its weight is a parameter); the adapter
/// path `lora_B(lora_A(x))` saves lora_A's input and lora_B's (lora_A's output). peft casts x
/// to the adapters' dtype first (`_cast_input_dtype`); under autocast lora_A then casts it to
/// the compute dtype (autocast caches weight casts only), and lora_A's output is in that
/// dtype. Each cast, and lora_dropout, makes one copy per adapted Linear; an x that needs
/// none is saved as itself, one tensor for the Linears that read it. Checked against peft on
/// CPU for every combination of precision, base, adapter dtype and dropout
/// (tests/reference/test_peft.py).
fn lora_inputs(inv: &mut Inventory, what: &str, elements: u64, consumers: u64, sh: &Shape) {
    lora_adapter_inputs(inv, what, elements, consumers, sh, false);
}

/// The input of an 8-bit base's Linears (bitsandbytes' `MatMul8bitLt`): the autograd context
/// keeps it as it is (`ctx.tensors = (CAt, subA, A)`, A a 2-D view of the input's storage) for
/// any Linear whose input needs a gradient, adapted or not; one tensor for the Linears that
/// read it, held outside `save_for_backward` ([`Saved::held`](super::Saved::held)). The
/// `consumers` of them that carry adapters add what LoRA keeps besides (never x itself
/// again). LLM.int8's outlier columns of the input (`subA`, kept too) depend on the data and
/// are not counted. Measured on CPU through the CUDA autograd function
/// (tests/reference/measure_int8.py).
fn held_linear_inputs(inv: &mut Inventory, what: &str, elements: u64, consumers: u64, sh: &Shape) {
    held_linear_inputs_of(inv, what, (elements, sh.stream()), consumers, sh);
}

/// [`held_linear_inputs`] of an input in `dtype`.
fn held_linear_inputs_of(
    inv: &mut Inventory,
    what: &str,
    (elements, dtype): (u64, DType),
    consumers: u64,
    sh: &Shape,
) {
    inv.add_held(
        what!("{what} (held by the 8-bit Linears' contexts)"),
        elements,
        dtype,
    );
    lora_adapter_inputs(inv, what, elements, consumers, sh, true);
}

/// Whether lora_A saves its input x itself (no cast and no dropout makes a copy of it): see
/// [`lora_adapter_inputs`].
pub(crate) fn lora_saves_input_itself(sh: &Shape) -> bool {
    let a = sh.adapter;
    let e = if sh.amp() { sh.compute() } else { a };
    !(sh.lora_dropout || a != sh.stream() || e != a)
}

/// [`lora_inputs`] of an input that something else already saves (`saved`): lora_A's copy
/// of it is counted, the input itself is not again.
pub(super) fn lora_adapter_inputs(
    inv: &mut Inventory,
    what: &str,
    elements: u64,
    consumers: u64,
    sh: &Shape,
    saved: bool,
) {
    let Some(r) = sh.lora_rank else { return };
    if consumers == 0 {
        return;
    }
    let tokens = sh.tokens();
    if sh.lora_dropout {
        // nn.Dropout on the (cast) input: CUDA's fused dropout keeps a bool mask, and its
        // output is a new tensor per adapted Linear.
        inv.add_n(
            what!("{what}: lora_dropout mask (per adapted Linear)"),
            elements,
            DType::Bool,
            consumers,
        );
    }
    // What lora_A computes in: autocast's dtype, else the adapters'.
    let a = sh.adapter;
    let e = if sh.amp() { sh.compute() } else { a };
    // A copy per adapted Linear where peft casts x to the adapters' dtype, autocast casts
    // that to its own, or dropout drops it out; otherwise lora_A saves x itself.
    let copied = !lora_saves_input_itself(sh);
    if copied {
        let how = if sh.lora_dropout {
            label!("dropped-out")
        } else if e != a {
            label!("autocast's")
        } else {
            label!("peft's")
        };
        inv.add_n(
            what!(
                "{what}: {how} {} copy for lora_A (per adapted Linear)",
                e.torch_name()
            ),
            elements,
            e,
            consumers,
        );
    } else if !saved {
        inv.add(what!("{what} (saved by lora_A)"), elements, e);
    }
    inv.add_n(
        what!("lora_A output (saved by lora_B)"),
        tokens * r,
        e,
        consumers,
    );
}

/// What DoRA keeps for each adapted Linear of input width `d_in` and output width in `outs`
/// (peft's `DoraLinearLayer.forward`): the magnitude's gradient needs the base's output and the
/// adapters' output (both multiplied by the per-output scale), and the scale's own division
/// keeps the detached column norms. With lora_dropout peft computes the base's output again
/// from the dropped-out input, `F.linear(x, weight)`, which keeps the weight cast to the
/// adapters' dtype as well. Written from peft 0.21's code (Llama-like layers); checked on CPU
/// in tests/reference/test_peft.py.
pub(super) fn dora_outputs(
    inv: &mut Inventory,
    what: &str,
    (d_in, base_out): (u64, DType),
    outs: &[u64],
    sh: &Shape,
) {
    let t = sh.tokens();
    let a = sh.adapter;
    let e = if sh.amp() { sh.compute() } else { a };
    for &w in outs {
        if sh.lora_dropout {
            inv.add(
                what!("{what}: DoRA's base output (dropped input)"),
                t * w,
                e,
            );
            inv.add(
                what!("{what}: DoRA's {} weight cast", a.torch_name()),
                w * d_in,
                a,
            );
        } else {
            inv.add(what!("{what}: DoRA's base output"), t * w, base_out);
        }
        inv.add(what!("{what}: DoRA's adapters' output"), t * w, e);
        inv.add_n(what!("{what}: DoRA's norms and scales"), w, a, 3);
    }
}
