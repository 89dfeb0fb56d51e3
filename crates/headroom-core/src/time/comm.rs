//! Communication terms (data, tensor and pipeline parallelism) and the pipeline bubble, each
//! hidden behind the compute it overlaps with.
//!
//! Expert parallelism's all-to-alls are among the terms. The compute terms return the busy seconds
//! communication overlaps. Ring collectives across servers use the NICs of all the group's GPUs on
//! a server (`Cx::ring_gbs`); point-to-point sends use one GPU's (`Cx::own_link_gbs`).

use crate::scenario::DataParallel;

use super::compute::Busy;
use super::cx::Cx;
use super::terms::{Terms, ring_seconds};

/// What data parallelism moves, and when.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DpTraffic {
    /// The all-reduce volume of the gradients once per step (DDP, which skips the sync during
    /// accumulation; ZeRO-1's reduce-scatter plus all-gather moves the same).
    OncePerStep,
    /// The same volume at every micro-batch (ZeRO-2 scatters gradients as they are made).
    EachMicroBatch,
    /// Parameters gathered for forward and again for backward, gradients reduce-scattered, at
    /// every micro-batch (ZeRO-3, FSDP): 1.5x the all-reduce volume.
    Sharded,
}

impl DpTraffic {
    fn of(data: DataParallel) -> (Self, &'static str) {
        match data {
            DataParallel::Ddp => (DpTraffic::OncePerStep, "all-reduce of gradients"),
            DataParallel::Zero1 => (
                DpTraffic::OncePerStep,
                "reduce-scatter grads + all-gather params",
            ),
            DataParallel::Zero2 => (
                DpTraffic::EachMicroBatch,
                "reduce-scatter grads each micro-batch + all-gather params",
            ),
            DataParallel::Zero3 | DataParallel::Fsdp => (
                DpTraffic::Sharded,
                "all-gather fwd + all-gather bwd + reduce-scatter",
            ),
        }
    }

    /// Ring passes over the bytes, as the formula shows it (`2·(n−1)/n` for an all-reduce).
    fn factor(self) -> f64 {
        match self {
            DpTraffic::Sharded => 3.0,
            _ => 2.0,
        }
    }

    fn per_micro_batch(self) -> bool {
        self != DpTraffic::OncePerStep
    }
}

/// Pushes the communication terms and the pipeline bubble.
pub(super) fn terms(cx: &Cx, busy: &Busy, terms: &mut Terms) {
    let (tp, pp, dp, m) = (cx.tp, cx.pp, cx.dp, cx.m);
    if dp > 1 {
        data_parallel(cx, busy, terms);
    }
    if cx.scen.parallel.expert > 1 {
        expert_parallel(cx, terms);
    }
    if tp > 1 {
        // Megatron: two all-reduces of b·s·h per layer in forward, two in backward (and two in
        // each recomputed forward); sequence parallelism swaps them for reduce-scatter +
        // all-gather of the same volume (Korthikanti et al. 2022 §4.2.2).
        let per = cx.activation_bytes();
        let recomputed_local = cx.ck / pp as f64;
        let count = (4.0 * cx.layers_local() + 2.0 * recomputed_local) * m;
        let g = cx.ring_gbs(tp, 1);
        terms.comm(
            "tensor_parallel",
            "tensor parallel all-reduces of activations",
            ring_seconds(per * count, tp, 2.0, g),
            0.0,
            || format!(
                "(4 per layer + 2 per recomputed layer) x b·s·h x 2(t−1)/t, t = {tp}, at {g:.0} GB/s; on the critical path"
            ),
            "Shoeybi et al. 2019 (Megatron-LM) §3; Korthikanti et al. 2022 §4.2",
        );
    }
    if cx.cp > 1 {
        context_parallel(cx, terms);
    }
    if pp > 1 {
        // Point-to-point activations at each stage boundary, forward and backward.
        let per = cx.activation_bytes() / tp as f64;
        let g = cx.own_link_gbs(tp * dp * 2);
        let moved = per * 2.0 * m;
        terms.comm(
            "pipeline_p2p",
            "pipeline sends between stages",
            (moved, moved / (g * 1e9)),
            0.0,
            || format!("2 x b·s·h/t x {m} micro-batches at {g:.0} GB/s"),
            "Narayanan et al. 2021 §2.2",
        );
        // 1F1B bubble: (p−1)/(v·m) of the compute of m micro-batches, i.e. the idle fraction
        // (p−1)/(v·m + p−1) of the pipelined part (Narayanan et al. 2021 §2.2, eq. 1 and §2.2.2).
        let v = cx.a.virtual_stages.max(1) as f64;
        terms.idle(
            "pipeline_bubble",
            "pipeline bubble",
            busy.all() * (pp - 1) as f64 / (v * m),
            || {
                format!(
                    "compute x (p−1)/(v·m) = x {}/({v}·{m}): idle fraction (p−1)/(v·m+p−1)",
                    pp - 1
                )
            },
            "Narayanan et al. 2021 (arXiv 2104.04473) §2.2",
        );
    }
}

/// Ring attention's key/value traffic: in each layer's forward every rank passes `cp − 1`
/// chunks of keys and values (b·(s/cp)·(k + v) per chunk) to the next rank while it attends to
/// the chunk it holds; backward passes the key/value chunks again and their gradients the other
/// way (twice the forward's volume); a recomputed layer runs the forward's ring again. Each send
/// overlaps with the attention of the chunk already there, so only what exceeds the attention's
/// compute is exposed (PyTorch `_templated_ring_attention`; Liu et al. 2023, Ring Attention,
/// arXiv 2310.01889 §3; Megatron-LM / Transformer Engine `AttnFuncWithCPAndKVP2P`).
fn context_parallel(cx: &Cx, terms: &mut Terms) {
    let (cp, tp, m) = (cx.cp, cx.tp, cx.m);
    let chunk = crate::context::kv_chunk_bytes(cx.spec, cx.scen) as f64;
    let recomputed_local = cx.ck / cx.pp as f64;
    let passes = 3.0 * cx.layers_local() + recomputed_local;
    let moved = chunk * (cp - 1) as f64 * passes * m;
    // Ranks are laid out tensor-innermost, then context (Megatron's tp-cp-ep-dp-pp order).
    let g = cx.own_link_gbs(tp * cp);
    let seconds = moved / (g * 1e9);
    // The attention compute each send hides behind: forward, backward and recomputed
    // attention of this GPU's tokens.
    let tf = &cx.tf;
    let attention_flops =
        (tf.attention_forward * (1.0 + cx.ck / cx.layers) + tf.attention_backward) * cx.tokens
            / cx.mp;
    let window = attention_flops / cx.rate;
    terms.comm(
        "context_parallel",
        "context parallel ring (keys and values)",
        (moved, seconds),
        window,
        || format!(
            "(cp−1) x b·(s/cp)·(k+v) = {} x {chunk:.3e} bytes x (1 forward + 2 backward + recomputed) x {:.1} layers x {m:.0} micro-batches at {g:.0} GB/s; overlapped with attention compute ({window:.3e} s)",
            cp - 1,
            cx.layers_local()
        ),
        "PyTorch context_parallel (_templated_ring_attention); Liu et al. 2023 (Ring Attention, arXiv 2310.01889) §3; Megatron-LM --context-parallel-size",
    );
}

/// Gradient (and, when sharded, parameter) traffic between data-parallel replicas.
fn data_parallel(cx: &Cx, busy: &Busy, terms: &mut Terms) {
    let (tp, dp, m) = (cx.tp, cx.dp, cx.m);
    let g = cx.ring_gbs(dp, tp);
    let grads = cx.trainable_local() * cx.grad_dtype_bytes();
    let (traffic, what) = DpTraffic::of(cx.scen.parallel.data);
    let factor = traffic.factor();
    let per_micro = traffic.per_micro_batch();
    let reps = if per_micro { m } else { 1.0 };
    let bytes = if traffic == DpTraffic::Sharded {
        // Gathers move all local parameters (frozen included) in the dtype the model holds
        // them in, twice; the scatter moves the gradients once.
        let param_dtype = cx.scen.precision.param_dtype().bytes() as f64;
        // FSDP2 with torchao's fp8 all-gather gathers the converted Linears in fp8.
        let fp8 = if cx.scen.fp8.fp8_all_gather() && cx.scen.parallel.data == DataParallel::Fsdp {
            (cx.inv.sum_where(crate::fp8::converts) as f64 / cx.mp).min(cx.st.params_local as f64)
        } else {
            0.0
        };
        (cx.st.params_local as f64 * param_dtype - fp8 * (param_dtype - 1.0)) * 2.0 + grads
    } else {
        grads * 2.0
    };
    // Overlap, as DeepSpeed and FSDP2 schedule it: gradient buckets reduce while backward
    // continues (DDP and ZeRO-1 at the last micro-batch; ZeRO-2 at every one); ZeRO-3/FSDP
    // prefetch the next unit's parameters, the forward's gathers during the forward and the
    // backward's gathers and gradient reduce-scatters during the backward (recompute
    // included). Each part hides behind the compute of its own pass, all of it at best: what
    // exceeds it is exposed, and one pass's slack cannot hide the other's traffic.
    let backward = busy.backward + busy.recompute;
    let (moved, seconds) = ring_seconds(bytes * reps, dp, 1.0, g);
    let window = match traffic {
        DpTraffic::OncePerStep => busy.backward / m,
        DpTraffic::EachMicroBatch => backward,
        DpTraffic::Sharded => {
            // The forward moves one of the three passes (a gather of the parameters).
            let param_bytes = (bytes - grads) / 2.0;
            let forward_part = seconds * param_bytes / bytes.max(1.0);
            let exposed = (forward_part - busy.forward).max(0.0)
                + (seconds - forward_part - backward).max(0.0);
            seconds - exposed
        }
    };
    // The name is text only: a build without the time terms' text (the site's) skips it.
    let name = if cfg!(feature = "time-text") {
        format!("data parallel ({what})")
    } else {
        String::new()
    };
    terms.comm(
        "data_parallel",
        &name,
        (moved, seconds),
        window,
        || format!(
            "{factor}·(n−1)/n x {:.3e} bytes x {reps} over n = {dp} at {g:.0} GB/s; overlapped with {}",
            bytes / factor,
            if per_micro {
                "forward + backward"
            } else {
                "the last micro-batch's backward"
            }
        ),
        "ring all-reduce 2(n−1)/n (Patarasuk & Yuan 2009); ZeRO 1/2 = DDP volume, ZeRO-3 = 1.5x (Rajbhandari et al. 2020 §7)",
    );
}

/// Expert parallelism's all-to-alls: every MoE layer sends each token's top-k copies to the
/// ranks holding their experts and brings the outputs back (dispatch and combine), in forward
/// and again in backward, and twice more in a recomputed layer; a rank keeps 1/ep of the
/// traffic local. On the critical path: the experts wait for their tokens.
fn expert_parallel(cx: &Cx, terms: &mut Terms) {
    let Some(moe) = cx.spec.moe.as_ref() else {
        return;
    };
    let ep = u64::from(cx.scen.parallel.expert);
    let sparse = moe.sparse_layers as f64 * cx.layers_local() / cx.layers;
    let recomputed = sparse * cx.ck / cx.layers;
    let count = (4.0 * sparse + 2.0 * recomputed) * cx.m;
    let per = cx.b * cx.s * moe.top_k as f64 * cx.spec.hidden as f64 * cx.act_bytes;
    let g = cx.own_link_gbs(ep * cx.tp);
    let moved = per * count * (ep - 1) as f64 / ep as f64;
    terms.comm(
        "expert_parallel",
        "expert parallel all-to-alls (dispatch and combine)",
        (moved, moved / (g * 1e9)),
        0.0,
        || format!(
            "(4 per MoE layer + 2 per recomputed one) x b·s·k·h x (e−1)/e, e = {ep}, k = {}, at {g:.0} GB/s; on the critical path",
            moe.top_k
        ),
        "GShard (Lepikhin et al. 2020) §2.2 all-to-all dispatch/combine; Megatron-LM MoE token dispatcher",
    );
}
