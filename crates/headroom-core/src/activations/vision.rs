//! A trained vision tower's and its projector's saved tensors.

use super::{Inventory, Shape};
use crate::dtype::DType;
use crate::model::{Vision, VisionKind};

/// A trained vision tower's saved tensors for the micro-batch's images: per ViT layer its
/// norms, the q/k/v input, what memory-efficient or flash SDPA keeps (q, k, v, output,
/// logsumexp: no patches x patches matrix) and its MLP; then the projector's inputs. Under
/// autocast the 16-bit casts of each Linear's input are saved, the residual stream staying
/// fp32 (the weights' casts are the autocast cache's). Written from the modeling code
/// (`modeling_siglip.py`, `modeling_qwen2_5_vl.py`, `modeling_qwen3_vl.py`,
/// `modeling_pixtral.py`, `modeling_llama4.py`). SigLIP's and Llama 4's layers match
/// `saved_tensors_hooks` on CPU in bf16 and amp-bf16 with SDPA (`tests/reference/
/// test_vision.py`; CPU's LayerNorm keeps bf16 statistics where CUDA keeps fp32; Llama 4's
/// RoPE saves only its constant table); the other towers' layers and every projector are
/// assumed (Qwen-VL's RoPE tables and windowed attention, Pixtral's block-diagonal mask and
/// the convolution's input are left out), so the estimate marks these bytes assumed. With
/// checkpointing, each block keeps its input only.
pub(super) fn vision_tower(inv: &mut Inventory, v: &Vision, sh: &Shape) {
    let n = sh.images * v.patches_per_image();
    let (h, f, l) = (v.hidden, v.intermediate, v.layers);
    let (c, stream) = (sh.compute(), sh.stream());
    if sh.vision_checkpointed {
        inv.add_n(
            what!("vision tower: each checkpointed block's input"),
            n * h,
            stream,
            l,
        );
    } else {
        let layer_norm = matches!(
            v.kind,
            VisionKind::Siglip | VisionKind::Qwen3 | VisionKind::Llama4
        );
        // Two norms per block: a LayerNorm keeps its input and fp32 mean and rstd; an RMSNorm
        // (transformers' upcasting one) an fp32 copy, the rsqrt and the normalized input.
        if layer_norm {
            inv.add_n(
                what!("vision tower: LayerNorm inputs"),
                n * h,
                stream,
                2 * l,
            );
            inv.add_n(
                what!("vision tower: LayerNorm mean and rstd"),
                2 * n,
                DType::F32,
                2 * l,
            );
        } else {
            inv.add_n(
                what!("vision tower: RMSNorm fp32 inputs"),
                n * h,
                DType::F32,
                2 * l,
            );
            inv.add_n(what!("vision tower: RMSNorm rsqrt"), n, DType::F32, 2 * l);
            inv.add_n(
                what!("vision tower: RMSNorm normalized inputs"),
                n * h,
                stream,
                2 * l,
            );
        }
        // Autocast casts the norm's output once per Linear that reads it: q, k, v separately
        // (SigLIP, Pixtral) or one fused qkv (Qwen-VL); without autocast one tensor is shared.
        let fused = matches!(v.kind, VisionKind::Qwen25 | VisionKind::Qwen3);
        let casts = |k: u64| if sh.amp() { k } else { 1 };
        let qkv_in = casts(if fused { 1 } else { 3 });
        inv.add_n(what!("vision tower: q/k/v input"), n * h, c, qkv_in * l);
        inv.add_n(
            what!("vision tower: SDPA's q, k, v and output"),
            4 * n * h,
            c,
            l,
        );
        inv.add_n(
            what!("vision tower: SDPA's logsumexp"),
            n * v.heads,
            DType::F32,
            l,
        );
        // SDPA's flash and memory-efficient kernels lay their output out as (batch, patches,
        // heads, dim): `transpose(1, 2).contiguous()` is a view, and the output projection
        // saves SDPA's output itself (measured on CPU).
        let gated = matches!(v.kind, VisionKind::Qwen25 | VisionKind::Pixtral);
        if gated {
            // gate and up read the norm's output (two casts under autocast); the activation
            // keeps the gate's output, the product its two inputs, down_proj the product.
            inv.add_n(what!("vision tower: MLP input"), n * h, c, casts(2) * l);
            inv.add_n(
                what!("vision tower: gated MLP intermediates"),
                n * f,
                c,
                4 * l,
            );
        } else {
            inv.add_n(what!("vision tower: MLP input"), n * h, c, l);
            inv.add_n(
                what!("vision tower: GELU input and output"),
                n * f,
                c,
                2 * l,
            );
        }
    }
    // The projector: its norm's input (the tower's output) and merged input, then the two
    // Linears' inputs over the image tokens (Gemma 3: one matmul after pooling).
    let merged = n / (v.merge * v.merge).max(1);
    inv.add_n(
        what!("projector: tower output and merged input"),
        n * h,
        c,
        2,
    );
    let width = match v.kind {
        VisionKind::Siglip => 0,
        VisionKind::Pixtral => v.out_hidden,
        VisionKind::Qwen25 | VisionKind::Qwen3 => h * v.merge * v.merge,
        // Llama 4's adapter: each of its two GELUs keeps its input and output.
        VisionKind::Llama4 => v.projector_in + v.projector_out,
    };
    inv.add_n(what!("projector: hidden activations"), merged * width, c, 2);
}
