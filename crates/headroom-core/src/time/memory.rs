//! Memory-bound terms at the HBM bandwidth: eager attention's softmax, the loss, QLoRA's
//! dequantization and the optimizer step.

use crate::dtype::DType;
use crate::model::params::Scope;
use crate::scenario::{LossImpl, Method, Offload, Optimizer};

use super::compute::Busy;
use super::cx::Cx;
use super::flops::layer_count;
use super::terms::Terms;

/// Pushes the memory-bound terms, and records in `busy` those that run inside forward and
/// backward (softmax, loss), which communication can overlap like the matmuls.
pub(super) fn terms(cx: &Cx, terms: &mut Terms, busy: &mut Busy) {
    let (spec, scen) = (cx.spec, cx.scen);
    let (b, s, m, mp, ck, layers) = (cx.b, cx.s, cx.m, cx.mp, cx.ck, cx.layers);
    if cx.quadratic {
        // Memory-bound softmax on the s x s scores: HF eager writes scores (2), adds the mask
        // (2 + 2), softmax in fp32 (read 2, write 4, read 4 to cast, write 2), P·V reads 2:
        // ~20 bytes per score forward, about twice that backward; recompute adds a forward.
        // (SDPA's math kernel moves fp32 scores through the same steps: assumed alike.)
        let passes = 60.0 + if ck > 0.0 { 20.0 * ck / layers } else { 0.0 };
        let scores = spec.heads as f64 * s * s * b * layers * m / mp;
        busy.softmax = terms.memory(
            "eager_softmax",
            "eager attention's s x s softmax traffic",
            scores * passes,
            || format!("heads·s²·b·L x {passes:.0} bytes (20 forward, 40 backward)"),
            "transformers eager_attention_forward (fp32 softmax); assumed pass count",
        );
    }
    let loss_bytes = match scen.loss {
        // logits half (write 2, read 2), fp32 upcast (write 4), log_softmax (read 4, write 4),
        // backward (read 4 x 2, write 4, cast write 2): ~30 bytes per logit.
        LossImpl::Hf => 30.0,
        // Liger's fused linear cross-entropy keeps chunks on chip mostly: ~8 bytes per logit.
        LossImpl::Fused => 8.0,
    };
    // The loss runs on the last pipeline stage; averaged per GPU like the matmuls. Each
    // trained multi-token prediction module has a loss of its own over the same tokens.
    let heads = 1.0 + spec.mtp_trained as f64;
    busy.loss = terms.memory(
        "loss",
        "cross-entropy over the logits",
        b * s * m * spec.vocab as f64 * loss_bytes * heads / mp,
        || {
            if spec.mtp_trained == 0 {
                format!("b·s·V x {loss_bytes} bytes per logit")
            } else {
                format!("b·s·V x {loss_bytes} bytes per logit x {heads:.0} heads (MTP)")
            }
        },
        "transformers ForCausalLMLoss (fp32 upcast); Liger fused linear cross-entropy",
    );
    if scen.fp8.is_on() {
        // The casts: an absolute maximum and a scaled copy per fp8 operand, memory-bound
        // (`crate::fp8::cast_traffic`), fused or eager (`crate::fp8::cast_bytes_per_element`);
        // checkpointed layers cast their inputs and weights again.
        let per_element = crate::fp8::cast_bytes_per_element(scen);
        let (per_token, per_micro) = crate::fp8::cast_traffic(&cx.inv, per_element);
        let how = if per_element == crate::fp8::CAST_BYTES_PER_ELEMENT {
            "fp8 casts per matmul operand (input, weight, output gradient), fused (Transformer Engine's kernels, or torchao compiled): assumed 5 bytes per cast element"
        } else {
            "torchao float8_linear.py: input, weight, output gradient cast per matmul, eagerly (no torch.compile): bytes per cast element fitted on an H200"
        };
        let again = 1.0 + 0.25 * ck / layers.max(1.0);
        terms.memory(
            "fp8_casts",
            "fp8 casts (scales and fp8 copies of matmul operands)",
            (per_token * b * s + per_micro) * again * m / mp,
            || format!(
                "({per_token:.3e} bytes/token x b·s + {per_micro:.3e} bytes of weights) x {again:.2} x {m:.0} micro-batches"
            ),
            how,
        );
    }
    if scen.act_int8 {
        // The pack hook reads each saved element twice (its absolute maximum, then the scaled
        // copy) and writes one byte; the unpack reads the byte and writes the element back.
        let sh = crate::activations::Shape::from_scenario(spec, cx.gpu, scen);
        let per_layer: f64 = crate::activations::layer(spec, &sh)
            .iter()
            .filter(|s| matches!(s.dtype, DType::F32 | DType::Bf16 | DType::F16))
            .map(|s| (s.elements * s.copies) as f64 * (3.0 * s.dtype.bytes() as f64 + 2.0))
            .sum();
        terms.memory(
            "act_int8",
            "int8 activation compression (pack and unpack)",
            per_layer * cx.layers_local() * m,
            || format!(
                "{per_layer:.3e} bytes per layer (3 x element bytes + 2 per saved element) x {:.0} layers x {m:.0} micro-batches",
                cx.layers_local()
            ),
            "worked example 2's compress_activation as a saved_tensors_hooks pair; assumed memory-bound passes",
        );
    }
    if scen.method == Method::Qlora {
        // bitsandbytes' MatMul4Bit dequantizes each NF4 weight to 16 bits for every use: in
        // forward, again for the input gradient in backward, and once more per recomputed
        // (checkpointed) layer. Each use reads the 4-bit weight (0.5 B) and writes the 16-bit
        // copy (2 B) that the matmul then reads in place of a stored 16-bit weight.
        let quantized = layer_weights(cx, |t| t.quantizable);
        let uses = 2.0 + ck / layers.max(1.0);
        terms.memory(
            "dequantize_4bit",
            "QLoRA: NF4 weights dequantized for every use",
            quantized * 2.5 * uses * m / mp,
            || format!(
                "{quantized:.3e} NF4 weights x 2.5 bytes x {uses:.2} uses per micro-batch x {m:.0}"
            ),
            "bitsandbytes MatMul4Bit (dequantize_4bit in forward and backward); assumed bytes per use",
        );
    }
    if scen.method == Method::Int8 {
        int8_passes(cx, terms);
    }
    if scen.method != Method::Full
        && scen.precision.is_autocast()
        && !crate::states::runs_16bit(scen)
        && crate::states::weight_dtype(scen, crate::states::deepspeed_mixed(scen))
            != scen.precision.compute_dtype()
    {
        // An fp32 frozen base under autocast: each forward casts every Linear weight it runs
        // to 16 bits (no cache: the weights need no gradient), a checkpointed layer's again in
        // its recompute; backward reuses the saved casts. Each cast reads 4 B and writes 2 B.
        let cast = layer_weights(cx, |t| {
            t.linear.is_some() && !(scen.method.quantized_base() && t.quantizable)
        });
        let uses = 1.0 + ck / layers.max(1.0);
        terms.memory(
            "frozen_casts",
            "LoRA: the fp32 base's weights cast to 16 bits in every forward",
            cast * 6.0 * uses * m / mp,
            || format!("{cast:.3e} weights x 6 B x {uses:.2} x {m:.0}"),
            "autocast's uncached casts of frozen weights",
        );
    }
    if scen.method != Method::Full && scen.lora.dora {
        // DoRA's column norms in every forward (and recompute): per adapted Linear the base
        // weight cast to the adapters' dtype, the adapters' product, its scaled copy and the
        // sum written, and the sum read by the norm: five passes over d_out x d_in elements in
        // the adapters' dtype (`DoraLinearLayer.get_weight_norm`; assumed passes).
        let adapted = layer_weights(cx, |t| {
            t.linear.is_some() && crate::states::lora_adapts(cx.spec, scen, t)
        });
        let a = scen.lora.adapter_dtype.bytes() as f64;
        let uses = 1.0 + ck / layers.max(1.0);
        terms.memory(
            "dora_norms",
            "DoRA: the weights' column norms in every forward",
            adapted * 5.0 * a * uses * m / mp,
            || format!("{adapted:.3e} weights x 5 x {a:.0} B x {uses:.2} x {m:.0}"),
            "peft's DoraLinearLayer.get_weight_norm; assumed passes",
        );
    }
    if scen.parallel.offload_optimizer == Offload::None {
        optimizer(cx, terms);
    }
}

/// Elements of the decoder layers' tensors that `keep` selects, over every layer that has them.
/// An 8-bit base's memory passes (bitsandbytes' `MatMul8bitLt`, read from its code; bytes per
/// element assumed one read and one write per kernel). Each forward of an 8-bit Linear, a
/// checkpointed layer's recompute included, casts its input to fp16 (unless it is fp16), tests
/// it for outliers (`abs`, `>=`), quantizes its rows to int8, and the matmul's int32 result is
/// dequantized to fp16 and cast to the input's dtype; each backward dequantizes the int8 weight
/// to the input's dtype (`CB.to(dtype_A)`, then the in-place scale) for the input's gradient.
fn int8_passes(cx: &Cx, terms: &mut Terms) {
    let (b, s, m, mp, ck, layers) = (cx.b, cx.s, cx.m, cx.mp, cx.ck, cx.layers);
    let a = crate::states::stream_dtype(cx.scen).bytes() as f64;
    let cast = if a == 2.0 && cx.scen.precision.half_dtype() == crate::dtype::DType::F16 {
        0.0
    } else {
        a + 2.0
    };
    let sum = |f: fn(&crate::model::ParamTensor) -> u64| -> f64 {
        let inv = &cx.inv;
        inv.tensors
            .iter()
            .filter(|t| t.scope != Scope::Model && t.quantizable)
            .map(|t| f(t) as f64 * layer_count(inv, t.scope))
            .sum()
    };
    let (ins, outs) = (sum(|t| t.d_in), sum(|t| t.d_out));
    let weights = layer_weights(cx, |t| t.quantizable);
    let uses = 1.0 + ck / layers.max(1.0);
    // Per token: the input's cast, abs (2 + 2), >= (2 + 1) and quantization (2 + 1); the
    // output's int32 write (4), dequantization (4 + 2) and cast (2 + a unless fp16).
    let per_token = ins * (cast + 10.0) + outs * (10.0 + if cast > 0.0 { 2.0 + a } else { 0.0 });
    let forward = b * s * per_token * uses;
    // Per weight: the int8 read, the copy's write and the scale's read and write.
    let backward = weights * (1.0 + 3.0 * a);
    terms.memory(
        "int8_matmul",
        "8-bit base: inputs quantized, outputs dequantized, weights dequantized in backward",
        (forward + backward) * m / mp,
        || format!(
            "{b:.0} x {s:.0} tokens x ({ins:.3e} input x {:.0} B + {outs:.3e} output elements) x {uses:.2} uses + {weights:.3e} weights x {:.0} B, x {m:.0} micro-batches",
            cast + 10.0,
            1.0 + 3.0 * a
        ),
        "bitsandbytes MatMul8bitLt (int8_vectorwise_quant, int8_mm_dequant, CB.to in backward); assumed one pass per kernel",
    );
}

fn layer_weights(cx: &Cx, keep: impl Fn(&crate::model::ParamTensor) -> bool) -> f64 {
    let inv = &cx.inv;
    inv.tensors
        .iter()
        .filter(|t| t.scope != Scope::Model && keep(t))
        .map(|t| t.numel() as f64 * layer_count(inv, t.scope))
        .sum()
}

/// The optimizer step on the GPU: an elementwise pass (or a few) over states and weights.
fn optimizer(cx: &Cx, terms: &mut Terms) {
    let st = &cx.st;
    let pass = match cx.scen.optimizer {
        // foreach AdamW runs ~6 elementwise kernels over the states; fused does one pass.
        Optimizer::AdamWFused => 1.0,
        Optimizer::Sgd => 1.0,
        _ => 2.0,
    };
    // The step reads and writes only the weights that train: all of them in full training, the
    // adapters with LoRA/QLoRA (a frozen base is never touched; the adapters' bytes equal their
    // gradients', same dtype).
    let updated_weights = if cx.scen.method == Method::Full {
        st.weights - st.reference_weights
    } else {
        st.gradients
    };
    // ZeRO 1 and 2 keep full weights (and ZeRO-1 full gradients) but each GPU steps only its
    // partition (DeepSpeed's `single_partition_of_fp32_groups`, then an all-gather of the
    // updated weights): the step reads and writes 1/dp of them, as ZeRO-3 and FSDP do.
    // The shares of the gradients and weights held that the step touches (ZeRO-2's gradients
    // are already its partition).
    use crate::scenario::DataParallel::{Zero1, Zero2};
    let dp = cx.dp as f64;
    let (grad_share, weight_share) = match cx.scen.parallel.data {
        Zero1 => (1.0 / dp, 1.0 / dp),
        Zero2 => (1.0, 1.0 / dp),
        _ => (1.0, 1.0),
    };
    let opt_traffic = 2.0 * (st.optimizer.device + st.optimizer.paged + st.master_weights) as f64
        + st.gradients as f64 * grad_share
        + 2.0 * updated_weights as f64 * weight_share;
    terms.memory(
        "optimizer",
        "optimizer step",
        pass * opt_traffic,
        || {
            format!(
                "{pass} x (2 x states + 2 x weights + gradients) = {pass} x {opt_traffic:.3e} bytes"
            )
        },
        "elementwise update, memory-bound (optimizer.rs state bytes)",
    );
    if cx.scen.optimizer == Optimizer::AdamWForLoop {
        for_loop_launches(cx, terms);
    }
}

/// Kernels the for-loop AdamW (`foreach=False`, torch/optim/adam.py `_single_tensor_adam`)
/// launches per parameter tensor: lerp_ of the first moment, mul_ and addcmul_ of the second,
/// sqrt, div, add_ of eps, addcdiv_ into the weight (weight decay's mul_ beside): 7, each
/// dispatched by Python and the eager runtime. foreach batches all tensors into a few
/// multi-tensor kernels and fused runs one, so only the for-loop pays this per tensor.
const FOR_LOOP_KERNELS_PER_TENSOR: f64 = 7.0;

/// The host-side cost of one eager op (Python, dispatcher and launch), during which the GPU
/// waits when kernels are this small. Assumed: 6 µs, the order PyTorch's eager mode measures.
const EAGER_OP_SECONDS: f64 = 6e-6;

/// The for-loop optimizer's launch overhead: its kernels per trainable tensor of this GPU.
fn for_loop_launches(cx: &Cx, terms: &mut Terms) {
    let inv = &cx.inv;
    let count =
        |t: &crate::model::ParamTensor| (t.copies.max(1) * inv.multiplicity(t.scope)) as f64;
    // Full training updates every tensor; LoRA two adapters per adapted Linear (taken as all
    // of them: an upper bound with attention-only targets). Pipeline stages split the layers.
    let tensors = if cx.scen.method == Method::Full {
        inv.tensors.iter().map(count).sum::<f64>()
    } else {
        2.0 * inv.linears().map(count).sum::<f64>()
    } / f64::from(cx.scen.parallel.pipeline.max(1));
    let seconds = tensors * FOR_LOOP_KERNELS_PER_TENSOR * EAGER_OP_SECONDS;
    terms.idle(
        "optimizer_launches",
        "for-loop optimizer: one launch per op per tensor",
        seconds,
        || {
            format!(
                "{tensors:.0} tensors x {FOR_LOOP_KERNELS_PER_TENSOR} kernels x {:.0} µs",
                EAGER_OP_SECONDS * 1e6
            )
        },
        "torch/optim/adam.py _single_tensor_adam; assumed eager op cost",
    );
    if let Some(t) = terms.list.last_mut() {
        t.confidence = crate::confidence::Confidence::Assumed;
    }
}
