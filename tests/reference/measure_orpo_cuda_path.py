"""The loss phase of TRL 1.16's ORPO / CPO / SimPO on the path CUDA runs, emulated on CPU.

    /work/main/.venv/bin/python tests/reference/measure_orpo_cuda_path.py [--json OUT] [--detail]
    /work/main/.venv/bin/python tests/reference/measure_orpo_cuda_path.py --check OUT

On a CUDA device with triton, `trl.trainer.utils.selective_log_softmax` (trainer/utils.py:572-574)
does not take the per-row loop: `_supports_trl_loss_kernel` (utils.py:510-535) holds and it calls
`_fused_logprob_entropy` = `trl.kernels.logprob_entropy.selective_log_softmax_and_entropy`
(utils.py:69-70), an autograd Function (`_LogProbEntropyFunction`, kernels/logprob_entropy.py:146-246)
whose allocations are explicit:
  forward : logprobs, entropy, log_z, expected_logit = 4 x empty(logits.shape[:-1], fp32) (:165-168);
            save_for_backward(logits, index, log_z, expected_logit, row_mask) (:192); returns (logprobs, entropy).
  backward: grad_logits = empty_like(logits, memory_format=contiguous_format) (:208);
            grad_logprobs.contiguous() (:216) (grad_entropy is None: set_materialize_grads(False), :191, :217-218).

For the run only, this script patches trl.trainer.utils' module globals (selective_log_softmax looks
the three names up there at call time; the trainers bind only `selective_log_softmax` itself at
import, orpo_trainer.py:55-60, cpo_trainer.py:59, and that function's globals are utils'):
  is_triton_available        -> lambda: True
  _supports_trl_loss_kernel  -> the same checks without the device-type check
  _fused_logprob_entropy     -> `_EmulatedLogProbEntropy.apply`: a CPU autograd Function making
                                exactly the kernel's allocations. Its values are computed with plain
                                torch ops under no_grad, one sequence at a time, writing into the
                                preallocated outputs, inside record_function("emul:compute"); every
                                allocation made and freed inside such a region is dropped from the
                                timeline (the kernel computes in registers: no tensor). The dropped
                                transient is at most ~3 x T*V*4 bytes (one sequence in fp32).
CPU-only transient also dropped: `aten::mean` of a bf16 tensor on CPU sums an fp32 copy
(the metrics `logits/chosen|rejected .detach().mean()`); CUDA's reduction accumulates in fp32
registers without a copy. Allocations made and freed inside a (top-level) aten::mean are dropped.
The events dropped are reported as `dropped_*` so the correction is visible. `scatter_add_` (bf16
gather backward on CPU) no longer occurs: the gather is gone with the fused path (checked: the
timeline's op names are scanned for it, `cpu_only_ops`).

Everything else is measure_orpo_cpu.py's method (real trainers, tiny Llama, the trainer's own
collator, compute_loss + backward, profiler live bytes relative to lm_head's pre-hook).
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
from torch._C._profiler import _EventType  # noqa: E402
from torch.profiler import ProfilerActivity, profile, record_function  # noqa: E402

from measure_peak import walk  # noqa: E402
from measure_orpo_cpu import _mark, build_model, build_trainer, cli, loss_phase, marked_step, timeline, word_tokenizer  # noqa: E402

EMUL_CALLS = {"forward": 0, "backward": 0}


class _EmulatedLogProbEntropy(torch.autograd.Function):
    """CPU stand-in for trl.kernels.logprob_entropy._LogProbEntropyFunction (same allocations)."""

    @staticmethod
    def forward(ctx, logits, index, temperature, row_mask):
        EMUL_CALLS["forward"] += 1
        logprobs = torch.empty(logits.shape[:-1], device=logits.device, dtype=torch.float32)
        entropy = torch.empty_like(logprobs)
        log_z = torch.empty_like(logprobs)
        expected_logit = torch.empty_like(logprobs)
        with torch.no_grad(), record_function("emul:compute"):
            lg3 = logits.reshape(-1, logits.shape[-1]) if logits.ndim < 3 else logits  # ndim<=2: views
            lg3 = lg3 if lg3.ndim == 3 else lg3.unsqueeze(0)
            idx3 = index.reshape(lg3.shape[:-1])
            outs = [t.view(lg3.shape[:-1]) for t in (logprobs, entropy, log_z, expected_logit)]
            for b in range(lg3.shape[0]):
                x = lg3[b].float() / temperature
                lz = torch.logsumexp(x, dim=-1)
                p = torch.softmax(x, dim=-1)
                el = (p * x).sum(-1)
                outs[0][b].copy_(x.gather(-1, idx3[b].unsqueeze(-1)).squeeze(-1) - lz)
                outs[1][b].copy_(lz - el)
                outs[2][b].copy_(lz)
                outs[3][b].copy_(el)
                del x, lz, p, el
                if row_mask is not None:
                    m = row_mask.reshape(lg3.shape[:-1])[b] == 0
                    for o in outs:
                        o[b].masked_fill_(m, 0.0)
                    del m
            del lg3, idx3, outs
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(logits, index, log_z, expected_logit, row_mask)
        ctx.temperature = temperature
        return logprobs, entropy

    @staticmethod
    def backward(ctx, grad_logprobs, grad_entropy):
        EMUL_CALLS["backward"] += 1
        logits, index, log_z, expected_logit, row_mask = ctx.saved_tensors
        grad_logits = torch.empty_like(logits, memory_format=torch.contiguous_format)
        has_lp, has_ent = grad_logprobs is not None, grad_entropy is not None
        grad_logprobs = log_z if grad_logprobs is None else grad_logprobs.contiguous()
        grad_entropy = expected_logit if grad_entropy is None else grad_entropy.contiguous()
        with torch.no_grad(), record_function("emul:compute"):
            shp = logits.shape[:-1]
            B = shp[0] if len(shp) == 2 else 1
            lg3 = logits if logits.ndim == 3 else logits.reshape(B, -1, logits.shape[-1])
            g3 = grad_logits.view(lg3.shape)
            idx3, lz3, el3 = (t.reshape(lg3.shape[:-1]) for t in (index, log_z, expected_logit))
            glp3, gen3 = grad_logprobs.reshape(lg3.shape[:-1]), grad_entropy.reshape(lg3.shape[:-1])
            for b in range(lg3.shape[0]):
                x = lg3[b].float() / ctx.temperature
                p = torch.exp(x - lz3[b].unsqueeze(-1))
                g = torch.zeros_like(x)
                if has_lp:
                    g -= p * glp3[b].unsqueeze(-1)
                    g.scatter_add_(-1, idx3[b].unsqueeze(-1), glp3[b].unsqueeze(-1))
                if has_ent:
                    g -= p * (x - el3[b].unsqueeze(-1)) * gen3[b].unsqueeze(-1)
                g /= ctx.temperature
                if row_mask is not None:
                    g.masked_fill_((row_mask.reshape(lg3.shape[:-1])[b] == 0).unsqueeze(-1), 0.0)
                g3[b].copy_(g)
                del x, p, g
            del lg3, g3, idx3, lz3, el3, glp3, gen3
        return grad_logits, None, None, None


def _supports_no_device(logits, index=None, row_mask=None):
    """trl.trainer.utils._supports_trl_loss_kernel (utils.py:510-535) without the device-type check."""
    supported = (logits.dtype in (torch.float16, torch.bfloat16, torch.float32) and 1 <= logits.ndim <= 3
                 and logits.stride(-1) == 1 and logits.shape[-1] > 0)
    if index is not None:
        supported = (supported and index.shape == logits.shape[:-1] and index.dtype in (torch.int32, torch.int64)
                     and index.device == logits.device)
    if row_mask is not None:
        supported = (supported and index is not None and row_mask.shape == index.shape
                     and row_mask.dtype in (torch.bool, torch.int32, torch.int64) and row_mask.device == logits.device)
    return supported


class patched_cuda_path:
    """Context manager: trl.trainer.utils takes the fused-kernel branch on CPU, with the emulation."""

    def __enter__(self):
        import trl.trainer.utils as U

        self.U = U
        self.saved = {k: getattr(U, k, None) for k in ("is_triton_available", "_supports_trl_loss_kernel",
                                                       "_fused_logprob_entropy")}
        U.is_triton_available = lambda: True
        U._supports_trl_loss_kernel = _supports_no_device
        U._fused_logprob_entropy = _EmulatedLogProbEntropy.apply
        return self

    def __exit__(self, *exc):
        for k, v in self.saved.items():
            if v is None:
                delattr(self.U, k)
            else:
                setattr(self.U, k, v)


DROP_REGIONS = ("emul:compute", "aten::mean")
CPU_ONLY_OPS = ("aten::scatter_add_", "aten::scatter_add")


def _events(prof):
    """Allocation events (time, size, ptr, parent op, dropped-region or None) and marks."""
    allocs, marks, regions, ops = [], [], [], set()
    for node, parent in walk(prof):
        if node.tag == _EventType.Allocation:
            if str(node.extra_fields.device).split(":")[0] == "cpu":
                allocs.append((node.start_time_ns, node.extra_fields.alloc_size, node.extra_fields.ptr,
                               parent.name if parent else "?"))
        else:
            if node.name in CPU_ONLY_OPS:
                ops.add((node.start_time_ns, node.name))
            if node.name.startswith("mark:"):
                marks.append((node.start_time_ns, node.name[5:]))
            elif node.name in DROP_REGIONS:
                regions.append((node.start_time_ns, node.end_time_ns, node.name))
    allocs.sort(key=lambda e: e[0])
    # drop (alloc, free) pairs that both lie inside one drop region (outermost regions suffice)
    regions.sort()
    dropped = set()
    dropped_bytes = {}
    for t0, t1, name in regions:
        open_ = {}
        for i, (t, size, ptr, _) in enumerate(allocs):
            if t < t0:
                continue
            if t > t1:
                break
            if size > 0:
                open_[ptr] = i
            elif ptr in open_:
                j = open_.pop(ptr)
                if j not in dropped:
                    dropped.update((i, j))
                    key = name.split(":")[0] if name.startswith("emul") else name
                    dropped_bytes[key] = max(dropped_bytes.get(key, 0), allocs[j][1])
    kept = [a for i, a in enumerate(allocs) if i not in dropped]
    emul = [(t0, t1) for t0, t1, nm in regions if nm.startswith("emul")]
    outside = sorted({nm for t, nm in ops if not any(t0 <= t <= t1 for t0, t1 in emul)})
    return kept, sorted(marks), dropped_bytes, outside


def measure(kind, precision, n, s_target, vocab, detail=False):
    tok = word_tokenizer(vocab)
    model = build_model(vocab, precision)
    prompt_len = 4
    chosen_len = s_target - prompt_len - 1
    rejected_len = max(1, chosen_len - 3)
    trainer = build_trainer(kind, model, tok, n, prompt_len, chosen_len, rejected_len, vocab)
    batch = trainer._prepare_inputs(next(iter(trainer.get_train_dataloader())))
    lm_head = model.get_output_embeddings()
    state = {}

    def post(m, a, out):
        state["logits_fn"] = out.grad_fn
        state["logits"] = (list(out.shape), str(out.dtype).replace("torch.", ""))
        out.register_hook(lambda g: _mark("dlogits"))

    hooks = [lm_head.register_forward_pre_hook(lambda m, a: _mark("loss")), lm_head.register_forward_hook(post)]

    step = marked_step(trainer, model, batch, state)

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with patched_cuda_path():
            EMUL_CALLS.update(forward=0, backward=0)
            step(False)
            with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=False) as prof:
                step(True)
            calls = dict(EMUL_CALLS)
    finally:
        torch.set_num_threads(threads)
        for h in hooks:
            h.remove()
    assert calls == {"forward": 2, "backward": 2}, calls  # warm-up + measured step took the fused path
    allocs, marks, dropped, cpu_ops = _events(prof)
    times = {name: t for t, name in marks}
    series, L0, figures = loss_phase(allocs, times)
    s = int(max(batch["chosen_input_ids"].shape[1], batch["rejected_input_ids"].shape[1]))
    r = {"kind": kind, "precision": precision, "n": n, "s": s, "vocab": vocab, "logits": state["logits"],
         **figures, "dropped_max_alloc": dropped, "cpu_only_ops_seen": cpu_ops, "saved": state["saved"]}
    if detail:
        r["explain"] = explain(allocs, times)
        r["timeline"] = timeline(series, marks, times, L0)
    return r


def explain(allocs, times):
    """Small-tensor bookkeeping at loss_end, dlogits and the forward peak: allocations made after the
    "loss" mark still live, and allocations made before it (in the step) freed since; (bytes, op)."""
    out = {}
    t_loss = times["loss"]
    for point in ("loss_end", "dlogits"):
        t_pt = times[point]
        live, born = {}, {}
        for t, size, ptr, op in allocs:
            if t >= t_pt:
                break
            if size > 0:
                live[ptr] = (t, size, op)
            elif ptr in live:
                t0, sz, op0 = live.pop(ptr)
                if t0 < t_loss <= t:
                    born.setdefault("freed_pre_loss", []).append((sz, op0))
        out[point] = {"new_live": sorted(((sz, op) for t0, sz, op in live.values() if t0 >= t_loss), reverse=True),
                      "freed_pre_loss": sorted(born.get("freed_pre_loss", []), reverse=True)}
    return out


def formulas(kind, precision, n, s, V):
    """Byte-exact (on this CPU run) formulas of the CUDA fused-kernel path (the committed runs:
    cpu/orpo_cuda_path.json; the core's terms: loss::full_logits_head, test_orpo_loss.py).

    N = 2n, T = s-1, c = logits dtype bytes. Big terms: L = N*s*V*c (logits), H = n*T*V*c (chosen
    shifted half), S = n*s*V*c (chosen half, unshifted). copy = [n >= 2] (`.contiguous()` of
    all_logits[:n][..., :-1, :] copies; a no-op for n = 1). Small terms: int64/bool/fp32 per-token and
    per-sequence tensors listed in the report; `tgt` = the CE target kept by NllLossBackward
    (n >= 2: the contiguous [n,T] int64 copy; n = 1: a view of the whole [N,s] int64 labels tensor).
    """
    c = 4 if precision == "fp32" else 2
    N, T = 2 * n, s - 1
    L, H, S = N * s * V * c, n * T * V * c, n * s * V * c
    copy = 1 if n >= 2 else 0
    tgt = 8 * n * T if n >= 2 else 8 * N * s
    base = {"orpo": 24 * n + 12, "cpo-sigmoid": -18 * n + 44, "simpo": -2 * n + 44}[kind]
    retained = L + H + 2 * n * s + base + c + tgt
    if n >= 2:   # peak inside the CE: copy + log_softmax output (+ labels [N,s] i64, target copy, nll out, total_weight)
        fwd = L + copy * H + H + 16 * n * s + 8 * n * T + 2 * c
    else:        # n = 1: no copy; the peak lands in get_batch_logps among small tensors (fitted, see report)
        fwd = L + H + 74 * s + {"orpo": -34, "cpo-sigmoid": -58, "simpo": -34}[kind] + 2 * c
    # last SliceBackward of the CE branch: buffered dlogits L + [n,s,V] slice grad S + fresh [N,s,V] zeros L
    bwd = 2 * L + S - 32 * n * s + 8
    return {"retained": retained, "forward_peak": fwd, "backward_peak": bwd}


def check(paths):
    rows = []
    for path in paths:
        for r in json.load(open(path)):
            f = formulas(r["kind"], r["precision"], r["n"], r["s"], r["vocab"])
            for k in ("retained", "forward_peak", "backward_peak"):
                rows.append((r["kind"], r["precision"], r["n"], r["s"], k, r[k], f[k], r[k] - f[k]))
    print("| trainer | dtype | n | s | figure | measured | formula | diff |")
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(str(x) for x in row) + " |")
    return rows


def main():
    cli(measure, check, kinds="orpo,cpo-sigmoid,simpo",
        shapes=",".join(f"{n}x{s}" for n in (1, 2, 3) for s in (16, 33, 64)))


if __name__ == "__main__":
    main()
