//! What the norms save: LayerNorm, the Llama-like families' RMSNorms, Cohere 2's norm and
//! Qwen3-Next's zero-centred RMSNorm.

use super::{Inventory, Layout, Shape};
use crate::dtype::DType;
use crate::model::{Family, ModelSpec};

/// native_layer_norm saves its input and the fp32 mean and rstd per token.
pub(super) fn layer_norm(inv: &mut Inventory, name: &str, sh: &Shape, l: &Layout) {
    inv.add(
        what!("{name}: input (saved by layer_norm)"),
        l.th,
        sh.stream(),
    );
    inv.add(what!("{name}: mean and rstd, fp32"), 2 * l.t, DType::F32);
}

/// The RMSNorm of Llama-like models: `w * (x.float() * rsqrt(mean(x^2) + eps)).to(x.dtype)`
/// (OLMo 2 applies `w` before the cast back, Gemma `1 + w` in fp32).
pub(super) fn rms_norm(
    inv: &mut Inventory,
    name: &str,
    t: u64,
    h: u64,
    sh: &Shape,
    family: Family,
) {
    rms_norm_of(inv, name, (t, h, sh.stream()), sh, family);
}

/// The family whose RMSNorm a model's norms follow: OLMo 2's (the weight applied in fp32
/// before the cast back) where the class's norms do so, gpt-oss's too; Llama's for EXAONE 4,
/// whose layout is OLMo 2's but whose norms cast first.
pub(super) fn norm_family(spec: &ModelSpec) -> Family {
    if spec.class().traits.norm_weight_fp32 {
        Family::Olmo2
    } else if spec.family == Family::Olmo2 {
        Family::Llama
    } else {
        spec.family
    }
}

/// [`rms_norm`] of a tensor of `t` x `h` in `stream`: a norm after attention or the MLP
/// (Gemma 2/3, GLM-4) reads the projection's output, in the compute dtype under autocast.
pub(super) fn rms_norm_of(
    inv: &mut Inventory,
    name: &str,
    (t, h, stream): (u64, u64, DType),
    sh: &Shape,
    family: Family,
) {
    // x.to(float32) is a copy unless x is already fp32; pow and mul save it.
    let what = if stream == DType::F32 {
        label!("input (saved by pow, mul)")
    } else {
        label!("fp32 copy of the input (saved by pow, mul)")
    };
    inv.add(what!("{name}: {what}"), t * h, DType::F32);
    inv.add(what!("{name}: rsqrt of the variance"), t, DType::F32);
    if family == Family::Gemma {
        // Gemma: (x * rsqrt) * (1 + w) in fp32; the product's fp32 input is saved.
        inv.add(
            what!("{name}: normalized input, fp32 (saved by mul with 1 + weight)"),
            t * h,
            DType::F32,
        );
        // `1.0 + self.weight.float()` is a new fp32 tensor, which the product saves for the
        // input's gradient (found on fake CUDA; tests/reference/test_cuda_fake.py).
        inv.add(
            what!("{name}: 1 + weight, fp32 (saved by mul)"),
            h,
            DType::F32,
        );
    } else if sh.base_trainable {
        // weight * x_normed saves x_normed because the weight trains: in the input dtype, or
        // in fp32 where the weight is applied before the cast back (OLMo 2).
        let dtype = if family == Family::Olmo2 {
            DType::F32
        } else {
            stream
        };
        inv.add(
            what!("{name}: normalized input (saved by mul with weight)"),
            t * h,
            dtype,
        );
    }
}

/// Cohere 2's norm: `(w.float() * ((x - mean) * rsqrt(var + eps))).to(x.dtype)`, x in fp32:
/// `x - mean` is computed twice (for the variance and for the product), pow saves one and mul
/// the other with the rsqrt; the weight's product saves the normalized input (when the weight
/// trains) and the weight's fp32 copy (a bf16 weight's).
pub(super) fn cohere_norm(inv: &mut Inventory, name: &str, (t, h): (u64, u64), sh: &Shape) {
    inv.add_n(
        what!("{name}: centred input, fp32, computed twice (saved by pow and by mul)"),
        t * h,
        DType::F32,
        2,
    );
    inv.add(what!("{name}: rsqrt of the variance"), t, DType::F32);
    if sh.base_trainable {
        inv.add(
            what!("{name}: normalized input, fp32 (saved by mul with weight)"),
            t * h,
            DType::F32,
        );
    }
    if sh.stream() != DType::F32 {
        inv.add(
            what!("{name}: weight cast to fp32 (saved by mul)"),
            h,
            DType::F32,
        );
    }
}

/// Qwen3-Next's RMSNorm (`Qwen3NextRMSNorm`): `(x.float() * rsqrt) * (1.0 + weight.float())`,
/// all fp32: the fp32 input (a copy unless `dtype` is fp32) saved by pow and mul, the rsqrt of
/// each row's variance, `1 + weight` (saved by the product) and, when the weight trains, the
/// normalized input. `(input, normalized, weight)`: the elements of the saved input (more
/// than the normalized ones where the input is a view of a wider output), of the normalized
/// tensor, and of the weight (one row's width).
pub(super) fn zero_centred_norm(
    inv: &mut Inventory,
    name: &str,
    (input, normalized, weight): (u64, u64, u64),
    sh: &Shape,
    dtype: DType,
) {
    let what = if dtype == DType::F32 {
        label!("input (saved by pow, mul)")
    } else {
        label!("fp32 copy of the input (saved by pow, mul)")
    };
    inv.add(what!("{name}: {what}"), input, DType::F32);
    inv.add(
        what!("{name}: rsqrt of the variance"),
        normalized / weight.max(1),
        DType::F32,
    );
    inv.add(
        what!("{name}: 1 + weight, fp32 (saved by the product)"),
        weight,
        DType::F32,
    );
    if sh.base_trainable {
        inv.add(
            what!("{name}: normalized input, fp32 (saved by the product with 1 + weight)"),
            normalized,
            DType::F32,
        );
    }
}
