"""Measures PyTorch's caching allocator on a real GPU: what the reserved and device levels are
made of, for the allocator simulator and the verdict at the edge (issue 30).

    python3 measure_allocator.py trace PRESET_JSON OUT.json.gz   one run's allocator trace
    python3 measure_allocator.py boundary OUT.json [--deadline S] the fit-boundary runs, capped
    python3 measure_allocator.py varlen OUT.json [--deadline S]   dynamic padding, step by step
    python3 measure_allocator.py dynamic SPEC_JSON OUT.json      variable lengths from step one
    python3 measure_allocator.py timing OUT.json [--deadline S]   step times and kernel times
    python3 measure_allocator.py launch OUT.json [--deadline S]   launch-bound steps, kernel counts
    python3 measure_allocator.py launchmid OUT.json [--deadline S] between launch- and GPU-bound
    python3 measure_allocator.py hostphases OUT.json [--deadline S] phases' wall times and kernels

- `trace`: one real-size run (measure_gpu.run_preset's scenario tuple) recorded from the
  process's first allocation with `torch.cuda.memory._record_memory_history` (no stacks), three
  steps. Written compact: each allocator action as [code, address, size] (codes below), the
  measured phase levels, and the segments at the end. A fresh process per trace, so the trace
  starts from an empty allocator.
- `boundary`: runs at the verdict's edge (the largest micro-batch Headroom says fits and one
  more) with the allocator capped to a smaller card's memory (set_per_process_memory_fraction),
  under the allocator setting the process was started with (PYTORCH_CUDA_ALLOC_CONF).
- `varlen`: a few hundred steps with dynamic padding (each micro-batch padded to its longest
  sample; lengths drawn from a log-normal like chat fine-tuning data, cut at the sequence
  length): allocated, reserved and segments after every step, against the same run at one shape.
- `dynamic`: one run over variable lengths from its first step (ms-swift's benchmark data as a
  log-normal, samples over the sequence length dropped), each step's levels, optionally traced.
- `timing`: step times over sizes, methods, checkpointing and shapes, eager and compiled, and
  torch.profiler's CUDA kernel time per kind for some of them (issue 33).
- `launch`: the same at 64 tokens (LAUNCH), where the host's cost per kernel sets the step time.
"""
import gzip
import json
import os
import sys
import time

import measure_gpu

# Trace action codes: the allocator's TraceEntry actions.
CODES = {"alloc": "a", "free_requested": "r", "free_completed": "f", "segment_alloc": "s", "segment_free": "S",
         "segment_map": "m", "segment_unmap": "u", "oom": "o", "snapshot": "n"}

H100_CAP = 85017493504 - 801112064  # h100-sxm-80gb's capacity less the core's context and cuBLAS
RTX4090_CAP = 25757220864 - 524288000  # rtx-4090-24gb, likewise
RTX4080_CAP = 17171480576 - 524288000  # rtx-4080-16gb, likewise

# (scenario as measure_gpu.run_preset takes it): the core's largest fitting micro-batch and one more.
BOUNDARY = [
    # Llama 3.2 1B amp, checkpointed: the H100 ran out at 16 (the core says 17 fit).
    *[("llama-3.2-1b", "amp-bf16", "sdpa", "full", b, 2048, "full", 0, "", "off", False, {}, {"cap": H100_CAP})
      for b in (16, 14, 12)],
    # Llama 3.1 8B bf16 checkpointed: the core says 4 fits with 0.5% to spare.
    *[("llama-3.1-8b", "bf16", "sdpa", "full", b, 4096, "full", 0, "", "off", False, {}, {"cap": H100_CAP})
      for b in (4, 3)],
    # QLoRA of Llama 3.1 8B on a 24 GB card: with prepare_model_for_kbit_training 3 fits, without 4.
    *[("llama-3.1-8b", "amp-bf16", "sdpa", "full", b, 2048, "qlora", 16, "all", "off", False, {},
       {"cap": RTX4090_CAP, "kbit": True}) for b in (3, 4)],
    *[("llama-3.1-8b", "amp-bf16", "sdpa", "full", b, 2048, "qlora", 16, "all", "off", False, {},
       {"cap": RTX4090_CAP}) for b in (4, 5)],
    # LoRA of Llama 3.2 3B on a 16 GB card, checkpointed: 2 fits.
    *[("llama-3.2-3b", "amp-bf16", "sdpa", "full", b, 2048, "lora", 16, "all", "off", False, {},
       {"cap": RTX4080_CAP}) for b in (2, 3)],
    # LoRA of Llama 3.2 1B on an fp32 base under amp, 16 GB: 1 fits; the 16-bit base beside it.
    *[("llama-3.2-1b", "amp-bf16", "sdpa", "none", b, 2048, "lora", 16, "all", "off", False, {},
       {"cap": RTX4080_CAP, "base": "fp32"}) for b in (1, 2)],
    ("llama-3.2-1b", "amp-bf16", "sdpa", "none", 2, 2048, "lora", 16, "all", "off", False, {}, {"cap": RTX4080_CAP}),
]

# Step-time grid: (scenario, profile?). Sizes from 124M to 8B, full and LoRA, checkpointing,
# micro-batch and sequence, eager and compiled.
TIMING = [
    (("gpt2", "bf16", "sdpa", "none", 8, 1024, "full", 0, ""), True),
    (("gpt2", "bf16", "sdpa", "none", 32, 1024, "full", 0, ""), False),
    (("qwen2.5-0.5b", "bf16", "sdpa", "none", 8, 2048, "full", 0, ""), False),
    (("llama-3.2-1b", "bf16", "sdpa", "none", 4, 2048, "full", 0, ""), True),
    (("llama-3.2-1b", "bf16", "sdpa", "full", 4, 2048, "full", 0, ""), False),
    (("llama-3.2-1b", "bf16", "sdpa", "none", 4, 2048, "full", 0, "", "off", True), False),
    (("llama-3.2-1b", "bf16", "sdpa", "none", 1, 8192, "full", 0, ""), False),
    (("llama-3.2-3b", "bf16", "sdpa", "none", 2, 4096, "lora", 16, "all"), True),
    (("llama-3.1-8b", "bf16", "sdpa", "none", 2, 2048, "lora", 16, "all"), False),
    (("llama-3.1-8b", "bf16", "sdpa", "full", 2, 4096, "full", 0, ""), True),
]


def _now_levels(torch):
    return {"allocated": torch.cuda.memory_allocated(), "reserved": torch.cuda.memory_reserved(),
            "max_allocated": torch.cuda.max_memory_allocated(), "max_reserved": torch.cuda.max_memory_reserved()}


def part_trace(sc, path, steps=3):
    """One run from an empty allocator with every allocator action recorded."""
    import torch

    torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python", max_entries=4_000_000)
    markers = []

    def mark(step, phase):
        torch.cuda.synchronize()
        snap = torch.cuda.memory._snapshot()  # leaves a 'snapshot' action in the trace: the marker
        markers.append({"step": step, "phase": phase, "events": len(snap["device_traces"][0]), **_now_levels(torch)})
        torch.cuda.reset_peak_memory_stats()

    run = measure_gpu.run_preset(sc, steps=steps, on_phase=mark)
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    events = [[CODES.get(e["action"], e["action"]), e.get("addr", 0), e.get("size", 0)] for e in snap["device_traces"][0]]
    segments = [{"address": s["address"], "total_size": s["total_size"], "allocated_size": s["allocated_size"],
                 "segment_type": s.get("segment_type"), "is_expandable": s.get("is_expandable", False),
                 "blocks": [[b["size"], b.get("requested_size", 0), b["state"]] for b in s["blocks"]]}
                for s in snap["segments"]]
    stats = torch.cuda.memory_stats()
    out = {"scenario": sc, "run": run, "environment": measure_gpu.environment(),
           "allocator": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
           "allocator_settings": snap.get("allocator_settings"), "markers": markers,
           "num_alloc_retries": stats.get("num_alloc_retries"), "num_ooms": stats.get("num_ooms"),
           "segments": segments, "events": events}
    with gzip.open(path, "wt") as f:
        json.dump(out, f, separators=(",", ":"))
    measure_gpu.log(f"trace {sc[:7]}: {len(events)} events, {len(segments)} segments")


def part_boundary(deadline, only=None):
    """BOUNDARY's runs, or those at the indices `only` names."""
    return measure_gpu.part_presets(deadline, [sc for i, sc in enumerate(BOUNDARY) if only is None or i in only])


def _lengths(n, seq, rng):
    """Sample lengths of chat fine-tuning data: log-normal, median 400 tokens, a long tail, cut
    at the sequence length (the trainer's max_length)."""
    return [max(16, min(seq, int(rng.lognormvariate(6.0, 0.9)))) for _ in range(n)]


def part_varlen(deadline, sc=("llama-3.2-1b", "bf16", "sdpa", "none", 8, 2048, "full", 0, ""), steps=300):
    """One model, a fixed shape for five steps, then `steps` steps padded per micro-batch."""
    import random

    import torch
    import transformers

    model_id, prec, attn, ckpt, batch, seq = sc[:6]
    config = json.loads((measure_gpu.MODELS / f"{model_id}.json").read_text())
    config = {k: v for k, v in config.items() if k not in ("architectures", "torch_dtype", "dtype")}
    cfg = transformers.AutoConfig.for_model(**config)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation=attn, dtype=torch.bfloat16)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, foreach=True)
    rng = random.Random(0)
    rows = []

    def step(length, tag):
        ids = torch.randint(cfg.vocab_size, (batch, length), device="cuda")
        torch.cuda.reset_peak_memory_stats()
        t = time.time()
        model(input_ids=ids, labels=ids).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        st = torch.cuda.memory_stats()
        rows.append({"tag": tag, "length": length, "seconds": round(time.time() - t, 4), **_now_levels(torch),
                     "segments": st.get("segment.all.current"), "large_segments": st.get("segment.large_pool.current"),
                     "inactive_split_bytes": st.get("inactive_split_bytes.all.current"),
                     "retries": st.get("num_alloc_retries")})

    for _ in range(5):
        step(seq, "fixed")
    # The fixed shape's steps are kept only as the reserved level they leave.
    fixed = {"reserved": torch.cuda.memory_reserved()}
    del rows[:]
    for _ in range(steps):
        if time.time() > deadline:
            break
        step(max(_lengths(batch, seq, rng)), "padded")
    return {"scenario": sc, "fixed": fixed, "steps": rows,
            "allocator": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")}


# The lengths of ms-swift's benchmark dataset (cls-fudan-news-zh: 3234 +- 2548 tokens, min 91,
# max 19548; docs/source_en/LLM/Benchmark.md at cdb169b78) as a log-normal with that mean and
# spread: mu = ln(mean) - sigma^2 / 2, sigma^2 = ln(1 + (sd / mean)^2).
FUDAN_MU, FUDAN_SIGMA, FUDAN_MIN = 7.8400, 0.6949, 91


def fudan_lengths(steps, batch, seq, seed=0):
    """Each step's padded length: the longest of `batch` samples drawn from FUDAN, where a sample
    longer than `seq` is dropped and drawn again (swift's truncation_strategy 'delete')."""
    import random

    rng = random.Random(seed)

    def sample():
        while True:
            n = int(rng.lognormvariate(FUDAN_MU, FUDAN_SIGMA))
            if FUDAN_MIN <= n <= seq:
                return n

    return [max(sample() for _ in range(batch)) for _ in range(steps)]


def part_dynamic(spec, path):
    """One run over variable lengths from the process's first step (issue 30's dynamic padding;
    ms-swift's benchmark runs): `spec` = {"scenario": run_preset's tuple, "steps": N, "seed": S,
    "trace": bool}. Every step's phase levels and its segment count; with `trace`, the allocator's
    actions as part_trace records them."""
    import torch

    sc = list(spec["scenario"]) + [None] * (13 - len(spec["scenario"]))
    defaults = ["off", False, {}, {}]
    sc[9:13] = [v if v is not None else d for v, d in zip(sc[9:13], defaults)]
    lengths = fudan_lengths(spec["steps"], sc[4], sc[5], spec.get("seed", 0))
    sc[12] = {**sc[12], "lengths": lengths}
    if spec.get("seconds"):
        sc[12]["deadline"] = time.time() + spec["seconds"]
    if spec.get("trace"):
        part_trace(tuple(sc), path, steps=len(lengths))
        return
    per_step = []

    def mark(step, phase):
        if phase == "optimizer" and torch.cuda.is_available():
            st = torch.cuda.memory_stats()
            per_step.append({"step": step, "segments": st.get("segment.all.current"),
                             "large_segments": st.get("segment.large_pool.current"),
                             "inactive_split_bytes": st.get("inactive_split_bytes.all.current"),
                             "retries": st.get("num_alloc_retries")})

    t0 = time.time()
    run = measure_gpu.run_preset(tuple(sc), on_phase=mark)
    out = {"measured_on": time.strftime("%Y-%m-%d"), "environment": measure_gpu.environment(),
           "allocator": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""), "spec": spec, "lengths": lengths,
           "run": run, "per_step": per_step, "seconds": round(time.time() - t0, 1)}
    with open(path, "w") as f:
        json.dump(out, f, separators=(",", ":"), default=str)
    measure_gpu.log(f"dynamic {sc[:8]}: {run.get('status')} peak reserved {run.get('peak_reserved')}")


# First match wins: attention before GEMMs (cuDNN's SDPA kernels are named "..._sdpa_sm90_...").
KINDS = [("attention", ("flash", "fmha", "attention", "sdpa", "cudnn")),
         ("gemm", ("gemm", "cutlass", "nvjet", "xmma", "cublas", "matmul", "sm90_")),
         ("optimizer", ("multi_tensor", "adam")),
         ("loss", ("log_softmax", "nll_loss", "cross_entropy")),
         ("copy", ("copy", "memcpy", "memset", "fill")),
         ("reduce", ("reduce",)),
         ("elementwise", ("elementwise", "vectorized", "triton"))]

# Launch-bound steps (issue 33): one sequence of 64 tokens, where the GPU waits on Python and the
# dispatcher, so the step's wall time over its kernel count is the host's cost per kernel; eager
# and SDPA, under autocast and not, full and LoRA (peft's extra ops), a GPT-2 with its biases.
LAUNCH = [
    (("qwen2.5-0.5b", "amp-bf16", "eager", "none", 1, 64, "full", 0, ""), True),
    (("qwen2.5-0.5b", "bf16", "sdpa", "none", 1, 64, "full", 0, ""), True),
    (("llama-3.2-1b", "bf16", "sdpa", "none", 1, 64, "full", 0, ""), True),
    (("llama-3.2-1b", "bf16", "sdpa", "full", 1, 64, "full", 0, ""), True),
    (("llama-3.2-1b", "bf16", "sdpa", "none", 1, 64, "lora", 16, "all"), True),
    (("llama-3.2-1b", "amp-bf16", "sdpa", "none", 1, 64, "lora", 16, "all", "off", False, {}, {"base": "fp32"}), True),
    (("gpt2", "amp-bf16", "sdpa", "none", 1, 64, "full", 0, ""), True),
]

# Between the two regimes (issue 33): shapes where the host's launches and the GPU's kernels
# take comparable time, to check the launch floor's max(host, GPU) where neither dominates.
LAUNCH_MID = [
    (("qwen2.5-0.5b", "bf16", "sdpa", "none", 1, 512, "full", 0, ""), False),
    (("qwen2.5-0.5b", "bf16", "sdpa", "none", 2, 1024, "full", 0, ""), False),
    (("qwen2.5-0.5b", "amp-bf16", "eager", "none", 1, 512, "full", 0, ""), False),
    (("qwen2.5-0.5b", "amp-bf16", "eager", "none", 2, 1024, "full", 0, ""), False),
    (("llama-3.2-1b", "bf16", "sdpa", "none", 1, 1024, "lora", 16, "all"), False),
    (("llama-3.2-1b", "bf16", "sdpa", "none", 1, 4096, "lora", 16, "all"), False),
    (("llama-3.2-1b", "bf16", "sdpa", "none", 2, 1024, "full", 0, ""), False),
    (("gpt2", "amp-bf16", "sdpa", "none", 4, 512, "full", 0, ""), False),
    (("gpt2-large", "amp-bf16", "sdpa", "none", 2, 1024, "full", 0, ""), False),
]


def _kind(name):
    low = name.lower()
    for kind, keys in KINDS:
        if any(k in low for k in keys):
            return kind
    return "other"


def profile_step(sc):
    """torch.profiler over one step after measure_gpu.run_preset's: CUDA kernel time by kind."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    kinds_of_step = {}

    def on_extra(run_step):
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            run_step()
            torch.cuda.synchronize()
        kinds, count, top = {}, {}, {}
        for e in prof.key_averages():
            t = getattr(e, "device_time_total", None)
            if t is None:
                t = getattr(e, "cuda_time_total", 0)
            if not t:
                continue
            k = _kind(e.key)
            kinds[k] = kinds.get(k, 0) + t
            count[k] = count.get(k, 0) + e.count
            top[e.key[:120]] = (t, e.count)
        kinds_of_step["kernel_us"] = {k: round(v, 1) for k, v in kinds.items()}
        kinds_of_step["kernel_count"] = count
        kinds_of_step["top"] = sorted(([k, round(t, 1), c] for k, (t, c) in top.items()), key=lambda r: -r[1])[:40]

    out = measure_gpu.run_preset(sc, extra_step=on_extra)
    out["profile"] = kinds_of_step
    return out


def host_phases(sc, repeats=5):
    """One run's phases apart (issue 33's host cost): each phase's wall time between
    synchronizations (median of `repeats` steps; at these sizes the GPU idles most of it, so it
    is the host's time) and, in one more step, the kernels each phase launched (a profiler
    session per phase)."""
    import statistics

    import torch
    from torch.profiler import ProfilerActivity, profile

    out = {}
    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)

    def on_extra(run_step):
        forward_loss, backward, optimizer_step = run_step.phases
        walls = {"forward+loss": [], "backward": [], "optimizer": []}
        for _ in range(repeats):
            sync()
            t0 = time.perf_counter()
            loss = forward_loss()
            sync()
            t1 = time.perf_counter()
            backward(loss)
            del loss
            sync()
            t2 = time.perf_counter()
            optimizer_step()
            sync()
            t3 = time.perf_counter()
            walls["forward+loss"].append(t1 - t0)
            walls["backward"].append(t2 - t1)
            walls["optimizer"].append(t3 - t2)
        out["phase_seconds"] = {k: round(statistics.median(v), 5) for k, v in walls.items()}
        counts, kernel_us = {}, {}

        def profiled(name, fn):
            with profile(activities=[ProfilerActivity.CUDA if torch.cuda.is_available() else ProfilerActivity.CPU]) as prof:
                result = fn()
                sync()
            n = t = 0
            for e in prof.key_averages():
                dt = getattr(e, "device_time_total", None)
                if dt is None:
                    dt = getattr(e, "cuda_time_total", 0)
                if dt:
                    n += e.count
                    t += dt
            counts[name], kernel_us[name] = n, round(t, 1)
            return result

        loss = profiled("forward+loss", forward_loss)
        profiled("backward", lambda: backward(loss))
        del loss
        profiled("optimizer", optimizer_step)
        out["phase_kernels"], out["phase_kernel_us"] = counts, kernel_us

    row = measure_gpu.run_preset(sc, extra_step=on_extra)
    row.update(out)
    return row


def part_host_phases(deadline):
    return _each_run(deadline, [(sc, False) for sc, _ in LAUNCH + LAUNCH_MID], lambda sc, _prof: host_phases(sc),
                     lambda row: f"{row.get('phase_seconds')} {row.get('phase_kernels')}", margin=10)


def part_timing(deadline, runs=TIMING):
    return _each_run(deadline, runs, lambda sc, prof: profile_step(sc) if prof else measure_gpu.run_preset(sc),
                     lambda row: f"t={row.get('median_step_seconds')} ({row['wall_seconds']} s)")


def _each_run(deadline, runs, measure, summary, margin=15):
    """`measure(scenario, profile?)` for each run while `margin` seconds are left, an error
    recorded and the next run going on; what a run leaves freed before the next."""
    import gc

    import torch

    rows = []
    for sc, prof in runs:
        if deadline - time.time() < margin:
            rows.append({"scenario": sc, "status": "skipped"})
            continue
        t0 = time.time()
        try:
            row = measure(sc, prof)
        except Exception as e:  # noqa: BLE001
            row = {"scenario": sc, "status": "error", "error": f"{type(e).__name__}: {str(e)[:300]}"}
        gc.collect()
        torch.cuda.empty_cache()
        row["wall_seconds"] = round(time.time() - t0, 1)
        measure_gpu.log(f"  {sc[:7]}: {row.get('status')} {summary(row)}")
        rows.append(row)
    return rows


def main(argv):
    what = argv[1]
    if what == "trace":
        part_trace(tuple(json.loads(argv[2])), argv[3])
        return 0
    if what == "dynamic":
        part_dynamic(json.loads(argv[2]), argv[3])
        return 0
    path = argv[2]
    deadline = time.time() + (float(argv[argv.index("--deadline") + 1]) if "--deadline" in argv else 300)
    fn = {"boundary": part_boundary, "varlen": part_varlen, "timing": part_timing,
          "launch": lambda d: part_timing(d, LAUNCH), "launchmid": lambda d: part_timing(d, LAUNCH_MID), "hostphases": part_host_phases}[what]
    if "--only" in argv:
        only = {int(i) for i in argv[argv.index("--only") + 1].split(",")}
        fn = lambda d, f=fn: f(d, only)  # noqa: E731
    result = {"measured_on": time.strftime("%Y-%m-%d"), "environment": measure_gpu.environment(),
              "allocator": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")}
    t0 = time.time()
    try:
        result[what] = fn(deadline)
    except Exception:  # noqa: BLE001
        import traceback

        result[what] = {"error": traceback.format_exc()[-2000:]}
    result["seconds"] = round(time.time() - t0, 1)
    with open(path, "w") as f:
        json.dump(result, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
