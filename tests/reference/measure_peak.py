"""Measures the live tensor bytes of one steady-state training step of a real transformers
model on CPU, and its peak: the figure the core reports as `bytes.peak_tensors`.

Method
------
Two full training steps run (forward with the HF loss via `labels`, `loss.backward()`,
`torch.optim.AdamW(foreach=True).step()`, `zero_grad(set_to_none=True)`). The second one, in
which the optimizer states already exist, runs under

    torch.profiler.profile(activities=[ProfilerActivity.CPU], profile_memory=True)

which records every allocation and free of PyTorch's CPU allocator (c10's
`ProfiledCPUMemoryReporter`) as an `Allocation` event with a signed `alloc_size`. Sorted by
time and accumulated, they give the bytes allocated since the step began, including what
kernels allocate internally, as `torch.cuda.memory_allocated` does on a GPU (without its
512-byte rounding, which the core counts at the allocator level, not in `peak_tensors`).

The step begins with exactly what the core's "step start" counts, each summed by storage:
the weights (parameters), AdamW's `exp_avg` and `exp_avg_sq` (its `step` counters are CPU
scalars on CUDA too), `input_ids` and `labels` (two int64 tensors), no gradients (set to
None). So

    live(t) = weights + states + inputs + sum of alloc_size of the events up to t

and the peak is its maximum over the step. Module buffers (RoPE's `inv_freq`) are allocated
before the step and never freed during it: they are left out, as the core leaves them out.
The step must end where it began (everything it allocated freed); `residual` checks that.

The phase of each event is read from markers: the forward starts at the model call, the loss
at lm_head's forward pre-hook (the core counts the logits in the loss phase), the backward at
`loss.backward()`, the optimizer at `opt.step()` (zero_grad included).

`keep_logits` means the loop holds the model's `outputs` (and so the logits) until the step
ends, as `outputs = model(...); outputs.loss.backward(); opt.step()` does.

The method is checked on tensors of known sizes by `validate()` (run by the test suite).

The run uses one intra-op thread (restored afterwards): several times faster on a small shared
machine, and without per-thread kernel scratch buffers.

`detail=True` adds marks at each decoder layer's forward and backward and at lm_head's
backward (module hooks; not with reentrant checkpointing, whose recompute they misorder), so
the suite can compare the core's per-layer backward points too.

CPU against CUDA
----------------
The measured figure is CPU's. Where CUDA allocates differently at the compared points,
`cuda_corrections` adds the difference, each a named correction with its reason (see its
docstring). CPU matrix products' scratch buffers are left out where they are read (`walk`):
oneDNN's bf16 GEMM on a CPU without native bf16 instructions allocates an fp32 copy of each
output inside `aten::mm` and frees it there, which lands on a layer's backward peak and on the
logits; a CPU with them allocates nothing (the figures were first measured on one). Known
CPU-only allocations that are not corrected because they never coincide with a compared point
(they are freed within the op that makes them): the internal buffers of CPU's flash-attention
backward (`_scaled_dot_product_flash_attention_for_cpu_backward`), where a layer's MLP side
sets its backward peak in every scenario.
"""
import json

import torch
from torch._C._profiler import _EventType
from torch.profiler import ProfilerActivity, profile, record_function

from measure_saved import LAYER_NORM_FAMILIES, build, decoder_layers

PHASES = ("forward", "loss", "backward", "optimizer")


# Matrix products whose CPU kernels may allocate and free a scratch buffer inside the call
# (oneDNN/MKL's bf16 GEMM without native bf16 instructions: an fp32 copy of the output, 2x its
# bytes). cuBLAS writes the output in place with a workspace it keeps, so such a pair is CPU-only.
MATMUL_OPS = frozenset(("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::_addmm_activation"))


def _matmul_scratch(op):
    """The pointers a CPU matrix-product op allocates and frees again within itself."""
    sizes = {}
    for c in op.children:
        if c.tag == _EventType.Allocation and str(c.extra_fields.device).split(":")[0] == "cpu":
            sizes.setdefault(c.extra_fields.ptr, []).append(c.extra_fields.alloc_size)
    return {ptr for ptr, s in sizes.items() if any(x > 0 for x in s) and any(x < 0 for x in s)}


def walk(prof):
    """(node, parent) over the profiler's event tree, without CPU matrix products' scratch
    allocations: whether a CPU's GEMM uses one depends on its instruction set (present on an
    AVX-512 machine without AVX512-BF16, absent with it), and CUDA has none."""
    stack = [(n, None) for n in prof.profiler.kineto_results.experimental_event_tree()]
    while stack:
        node, parent = stack.pop()
        scratch = _matmul_scratch(node) if node.name in MATMUL_OPS else ()
        stack.extend((c, node) for c in node.children
                     if not (scratch and c.tag == _EventType.Allocation and c.extra_fields.ptr in scratch))
        yield node, parent


def _allocations(prof, device="cpu"):
    """(time_ns, signed bytes) of every allocator event on `device`, in time order."""
    out = []
    for node, _ in walk(prof):
        if node.tag == _EventType.Allocation and str(node.extra_fields.device).split(":")[0] == device:
            out.append((node.start_time_ns, node.extra_fields.alloc_size))
    out.sort(key=lambda e: e[0])
    return out


def _marks(prof):
    """(start time, name) of each `mark:<phase>[:<point>]` record_function, in time order."""
    marks = []
    stack = list(prof.profiler.kineto_results.experimental_event_tree())
    while stack:
        node = stack.pop()
        stack.extend(node.children)
        if node.name.startswith("mark:"):
            marks.append((node.start_time_ns, node.name[5:]))
    return sorted(marks)


def _mark(phase):
    with record_function(f"mark:{phase}"):
        pass


def peak_of(prof, base, device="cpu"):
    """Walks the events: the peak, the phase it is in, the bytes per phase, the residual."""
    bounds = _marks(prof)
    live = base
    peak, peak_phase = base, "start"
    phase_peak, segments = {}, []
    k = -1
    for t, size in _allocations(prof, device):
        while k + 1 < len(bounds) and t >= bounds[k + 1][0]:
            k += 1
            segments.append([bounds[k][1], live, live])
        live += size
        phase = bounds[k][1].split(":")[0] if k >= 0 else "start"
        if k >= 0:
            segments[-1][2] = max(segments[-1][2], live)
        if live > phase_peak.get(phase, 0):
            phase_peak[phase] = live
        if live > peak:
            peak, peak_phase = live, phase
    return {"peak": peak, "phase": peak_phase, "phase_peaks": phase_peak, "residual": live - base,
            "segments": segments}


def validate():
    """Known sizes: 4,000 + 6,000 allocated, 4,000 freed, 800 allocated, then 6,000 freed:
    peak 10,000 above the base, in phase "forward"; 800 left at the end."""
    base_tensor = torch.ones(1000)  # allocated before profiling: part of the base
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=False) as prof:
        _mark("forward")
        a = torch.empty(1000, dtype=torch.float32)
        b = torch.empty(3000, dtype=torch.bfloat16)
        del a
        c = torch.empty(10, 10, dtype=torch.float64)
        _mark("backward")
        del b
    r = peak_of(prof, base_tensor.nbytes)
    del c
    return r


def measure_step(config, batch, seq, precision, attention, checkpointing="none", keep_logits=False,
                 detail=False, device="cpu"):
    """The step's peak. On `device="cuda"` (a real GPU: measure_gpu.py) the events are the
    CUDA caching allocator's (block sizes, rounded to 512 B), with no corrections, and
    `cuda_max_allocated` cross-checks the peak with torch.cuda.max_memory_allocated."""
    # One intra-op thread: on a small shared CI machine, 2+ threads oversubscribe and run
    # several times slower; one thread also leaves out per-thread kernel scratch buffers that
    # a GPU does not have. Restored afterwards.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _measure_step(config, batch, seq, precision, attention, checkpointing, keep_logits, detail, device)
    finally:
        torch.set_num_threads(threads)


def _measure_step(config, batch, seq, precision, attention, checkpointing, keep_logits, detail, device):
    model = build(config, precision, attention, checkpointing, device)
    params = list(model.parameters())
    opt = torch.optim.AdamW(params, lr=1e-4, foreach=True)
    vocab = config["vocab_size"]
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(vocab, (batch, seq), generator=gen).to(device)
    labels = ids.clone()
    amp = precision.startswith("amp")
    lm_head = model.get_output_embeddings()
    hooks = [lm_head.register_forward_pre_hook(lambda m, a: _mark("loss"))]
    if detail:
        # Finer marks for reading the timeline (not used by the comparison): each decoder
        # layer's forward and backward, lm_head's backward.
        for i, layer in enumerate(decoder_layers(model)):
            hooks.append(layer.register_forward_pre_hook(lambda m, a, i=i: _mark(f"forward:layer {i + 1}")))
            hooks.append(layer.register_full_backward_pre_hook(lambda m, g, i=i: _mark(f"backward:layer {i + 1}")))
        hooks.append(lm_head.register_full_backward_pre_hook(lambda m, g: _mark("backward:lm_head")))

    def step():
        _mark("forward")
        with torch.autocast(device, dtype=torch.bfloat16, enabled=amp):
            out = model(input_ids=ids, labels=labels)
        loss = out.loss
        if not keep_logits:
            del out
        _mark("backward")
        loss.backward()
        _mark("optimizer")
        opt.step()
        opt.zero_grad(set_to_none=True)
        del loss
        if keep_logits:
            del out

    step()
    storages = lambda ts: sum(t.untyped_storage().nbytes() for t in ts)
    weights = storages(params)
    states = storages(v for s in opt.state.values() for k, v in s.items() if k != "step")
    inputs = storages((ids, labels))
    base = weights + states + inputs
    cuda = device == "cuda"
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        start = torch.cuda.memory_allocated()
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=False) as prof:
        step()
    for h in hooks:
        h.remove()
    r = peak_of(prof, base, device)
    r.update(weights=weights, optimizer_states=states, inputs=inputs, layers=len(decoder_layers(model)))
    if cuda:
        torch.cuda.synchronize()
        r["cuda_max_allocated"] = base + torch.cuda.max_memory_allocated() - start
        r["cuda_residual"] = torch.cuda.memory_allocated() - start
        r["corrections"] = []
        return r
    fixes = cuda_corrections(config, batch, seq, precision, attention, checkpointing, r)
    r["raw_cpu_peak"] = r["peak"]
    r["peak"] += sum(f["bytes"] for f in fixes)
    r["corrections"] = fixes
    return r


def cuda_corrections(config, batch, seq, precision, attention, checkpointing, measured):
    """What CUDA allocates differently from the CPU run at the peak, in bytes (added to the
    CPU figure). Each entry names its reason; none is fitted."""
    out = []
    tokens = batch * seq
    if config["model_type"] in LAYER_NORM_FAMILIES and precision == "bf16" and measured["phase"] != "optimizer":
        # native_layer_norm: CPU keeps mean and rstd in the input dtype (bf16), CUDA in fp32
        # (as in measure_saved.cuda_corrections); they are alive at a forward/loss/backward peak
        # for every LayerNorm whose saved tensors are still held.
        per_norm = 2 * tokens * (4 - 2)
        n_layers = measured["layers"]
        held = 1 if checkpointing == "full" else 2 * n_layers + 1
        out.append({"why": "LayerNorm mean/rstd fp32 on CUDA, bf16 on CPU", "bytes": per_norm * held})
    return out


if __name__ == "__main__":
    import sys

    if len(sys.argv) == 1:
        print(json.dumps(validate()))
    else:
        args = sys.argv[1:]
        print(json.dumps(measure_step(json.loads(args[0]), int(args[1]), int(args[2]), *args[3:6],
                                      keep_logits=len(args) > 6 and args[6] == "keep"), default=str))
