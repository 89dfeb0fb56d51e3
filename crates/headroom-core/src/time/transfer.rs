//! Transfer terms: activations, optimizer work and parameters offloaded to the host or NVMe.

use crate::scenario::Offload;

use super::cx::Cx;
use super::terms::{Terms, Via};

/// Pushes the offload terms, none of which overlap compute.
pub(super) fn terms(cx: &Cx, terms: &mut Terms) {
    let (spec, scen) = (cx.spec, cx.scen);
    let (pp, dp, m, half) = (cx.pp, cx.dp as f64, cx.m, cx.half);
    if scen.offload_activations {
        // Saved tensors of every local layer go to the host in forward and back in backward;
        // under checkpointing only each layer's input (b·s·h) is saved.
        let per_layer = if cx.ck > 0.0 {
            cx.activation_bytes()
        } else {
            cx.layer_bytes as f64
        };
        // Both directions: out in forward (device to host), back in backward.
        let bytes = 2.0 * per_layer * cx.layers_local() * m;
        terms.transfer(
            "offload_activations",
            "activation offload (save_on_cpu)",
            bytes,
            // Harmonic mean: half the bytes at each direction's bandwidth.
            Via::HostLink(2.0 / (1.0 / cx.d2h + 1.0 / cx.h2d)),
            || {
                format!(
                    "saved bytes/layer x {} layers x {m} micro-batches, out and back",
                    spec.layers.div_ceil(pp)
                )
            },
            "torch.autograd.graph.save_on_cpu(pin_memory=True)",
        );
    }
    match scen.parallel.offload_optimizer {
        Offload::None => {}
        target => {
            // ZeRO-Offload: gradients to the host, updated 16-bit parameters back, per step
            // (Ren et al. 2021, §4.1); the CPU runs Adam over fp32 states.
            let shard = cx.trainable_local() / dp;
            let grad_dtype = cx.grad_dtype_bytes();
            terms.transfer(
                "offload_optimizer_link",
                "optimizer offload: gradients out, parameters back",
                shard * (grad_dtype + half),
                Via::HostLink(cx.h2d.min(cx.d2h)),
                || format!("trainable/dp x ({grad_dtype} + {half}) bytes"),
                "ZeRO-Offload (Ren et al. 2021) data flow",
            );
            terms.transfer(
                "offload_optimizer_cpu",
                "optimizer step on the CPU",
                shard * 28.0,
                Via::HostMemory,
                || "trainable/dp x 28 bytes (read p, g, m, v; write p, m, v in fp32)".into(),
                "CPU Adam is memory-bound; host bandwidth per GPU assumed",
            );
            if target == Offload::Nvme {
                terms.transfer(
                    "offload_optimizer_nvme",
                    "optimizer states from and to NVMe",
                    shard * 24.0,
                    Via::Nvme,
                    || "trainable/dp x 12 bytes (p, m, v fp32) read and written".into(),
                    "ZeRO-Infinity (Rajbhandari et al. 2021)",
                );
            }
        }
    }
    match scen.parallel.offload_params {
        Offload::None => {}
        target => {
            // Parameters come back for every micro-batch's forward and backward.
            let bytes = cx.st.params_local as f64 / dp * half * 2.0 * m;
            let (via, what) = if target == Offload::Nvme {
                (Via::Nvme, "NVMe")
            } else {
                (Via::HostLink(cx.h2d), "host link")
            };
            terms.transfer(
                "offload_params",
                "parameter offload: fetch for forward and backward",
                bytes,
                via,
                || format!("params/dp x {half} bytes x 2 x {m} micro-batches over the {what}"),
                "ZeRO-3 offload / ZeRO-Infinity parameter fetch",
            );
        }
    }
}
