"""The live tensor bytes of one steady-state FSDP training step on one rank, on CPU with
PyTorch's fake process group: the figure the core reports as `bytes.peak_tensors` for
`--gpus N --dp fsdp` (and `--fsdp1`).

FSDP2 wraps the model as the FSDP2 export does: `fully_shard` on every decoder layer and on the
model (the root unit: embeddings, final norm, lm_head), with
`MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=...)` under an amp precision (fp32
parameters; the reduce dtype as the scenario says) and no policy in pure bf16. FSDP1 wraps it as accelerate does for transformers'
Trainer (`FullyShardedDataParallel` with the decoder layer class as its transformer wrap
policy, peft's `fsdp_auto_wrap_policy` under LoRA, FULL_SHARD, BACKWARD_PRE, flat parameters
(`use_orig_params=False`), `limit_all_gathers`, and under amp accelerate's
`MixedPrecision(param_dtype=bf16, reduce_dtype=bf16, buffer_dtype=bf16)`). The fake group moves
no data, but every collective gets its real buffers; FSDP2 holds its all-gather outputs and
reduce-scatter inputs by Python references (`_fsdp_param_group.py`: `all_gather_state`,
`reduce_scatter_states`) and FSDP1 frees its unsharded parameters and gradients when its hooks
run (`_runtime_utils.py`), neither depending on the device, so the allocation order is the one
a GPU's allocator sees at the allocated level. The events are read as measure_peak.py reads them (the CPU profiler's
allocation events, one intra-op thread), from a base of this rank's parameter shards, AdamW's
sharded states and the two int64 inputs.

    python measure_fsdp_peak.py SCENARIO_JSON [TRACE.json.gz]

SCENARIO_JSON: {"config" (or "model": a file of content/models), "world", "batch", "seq",
"precision" (bf16 | amp-bf16), "checkpointing" (none | full), "method" (full | lora | qlora),
"rank", "targets", "fsdp" (1 | 2), "reduce" under amp (fp32 | compute: the policy's reduce
dtype; compute is accelerate's, whose runs also autocast the forward; FSDP1 defaults to compute,
FSDP2 to fp32), "device" (cpu | cuda), and on CUDA "cap" (bytes the caching allocator may
reserve), "accum" (micro-batches a step), "dropout" (LoRA's), "offload" (FSDP1's
`CPUOffload(offload_params=True)`, as accelerate's `fsdp_offload_params`)}.
Prints JSON: on CPU the peak, its phase, each marked segment's start and peak; on CUDA
(`measure_cuda`) the allocated, reserved and device levels of each phase of four steps, on one
GPU standing for one rank of `world` (no NCCL buffers: the fake group launches no kernels), and
with TRACE the caching allocator's every action with its stream (FSDP2 gathers and reduces on
streams of its own).

QLoRA (`method` qlora, FSDP1 only) quantizes every Linear but the lm_head to bitsandbytes' NF4
with `bnb_4bit_quant_storage=bfloat16`, as peft's FSDP-QLoRA recipe loads it, so that FSDP
flattens the packed weights with the bf16 parameters of their layer.
"""
import gzip
import json
import pathlib
import sys
import time

import torch
import torch.distributed as dist
import transformers
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.profiler import ProfilerActivity, profile
from torch.testing._internal.distributed.fake_pg import FakeStore

from measure_peak import _mark, peak_of
from measure_peft import TARGETS
from measure_saved import quant_state_bytes


MODELS = pathlib.Path(__file__).parent.parent.parent / "content" / "models"


def config_of(sc):
    """The scenario's HF config: inline, or a catalog model's file (its load-time keys dropped)."""
    if "config" in sc:
        return sc["config"]
    config = json.loads((MODELS / f"{sc['model']}.json").read_text())
    return {k: v for k, v in config.items() if k not in ("architectures", "torch_dtype", "dtype")}


def build(sc):
    torch.manual_seed(0)
    cfg = transformers.AutoConfig.for_model(**config_of(sc))
    amp = sc["precision"].startswith("amp")
    # Full training keeps fp32 parameters under amp; LoRA loads its base in 16 bits either way.
    dtype = torch.float32 if amp and sc["method"] == "full" else torch.bfloat16
    with torch.device(sc.get("device", "cpu")):
        model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa", dtype=dtype)
    if sc["method"] == "qlora":
        from measure_gpu import quantize_4bit

        quantize_4bit(model, torch.bfloat16, storage=torch.bfloat16)
    if sc["method"] in ("lora", "qlora"):
        import peft

        rank = sc["rank"]
        lora = peft.LoraConfig(r=rank, lora_alpha=2 * rank, target_modules=TARGETS[sc["targets"]],
                               lora_dropout=sc.get("dropout", 0.0),
                               task_type="CAUSAL_LM")
        model = peft.get_peft_model(model, lora)
    model.train()
    if sc["checkpointing"] == "full":
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if sc["method"] != "full":
            model.enable_input_require_grads()
    base = model.get_base_model() if sc["method"] != "full" else model
    reduce = torch.bfloat16 if reduce_in_compute(sc) else torch.float32
    if sc.get("fsdp", 2) == 1:
        return fsdp1(model, base, amp, sc["method"] != "full", reduce, sc.get("device", "cpu"),
                     sc.get("offload", False)), base
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=reduce) if amp else MixedPrecisionPolicy()
    for layer in base.model.layers:
        fully_shard(layer, mp_policy=mp)
    fully_shard(model, mp_policy=mp)
    return model, base


def reduce_in_compute(sc):
    """Whether the policy reduces in the compute dtype (accelerate's), not fp32."""
    return sc.get("reduce", "compute" if sc.get("fsdp", 2) == 1 else "fp32") == "compute"


def fsdp1(model, base, amp, lora, reduce, device, offload=False):
    """`model` wrapped as accelerate wraps it for the Trainer (FSDP1)."""
    import functools

    from torch.distributed.fsdp import BackwardPrefetch, CPUOffload, MixedPrecision, ShardingStrategy
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy

    layer_class = type(base.model.layers[0])
    if lora:
        from peft.utils.other import fsdp_auto_wrap_policy

        policy = fsdp_auto_wrap_policy(model)
    else:
        policy = functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={layer_class})
    bf16 = torch.bfloat16
    mp = MixedPrecision(param_dtype=bf16, reduce_dtype=reduce, buffer_dtype=bf16) if amp else None
    wrapped = FSDP(model, auto_wrap_policy=policy, mixed_precision=mp, sharding_strategy=ShardingStrategy.FULL_SHARD,
                   backward_prefetch=BackwardPrefetch.BACKWARD_PRE, use_orig_params=False, limit_all_gathers=True,
                   device_id=torch.device(device), cpu_offload=CPUOffload(offload_params=offload))
    if amp:
        # accelerate keeps the trained flat parameters in fp32 under a mixed-precision policy.
        for unit in FSDP.fsdp_modules(wrapped):
            flat = getattr(unit, "_flat_param", None)
            if flat is not None and flat.requires_grad and flat.dtype != torch.float32:
                flat.data = flat.data.to(torch.float32)
                unit._handle._orig_param_dtype = torch.float32
    return wrapped


def measure(sc):
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=sc["world"])
    torch.set_num_threads(1)
    model, base = build(sc)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-4, foreach=True)
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(config_of(sc)["vocab_size"], (sc["batch"], sc["seq"]), generator=gen)
    labels = ids.clone()
    lm_head = base.get_output_embeddings()
    lm_head.register_forward_pre_hook(lambda m, a: _mark("loss"))
    for i, layer in enumerate(base.model.layers):
        layer.register_forward_pre_hook(lambda m, a, i=i: _mark(f"forward:layer {i + 1}"))
        layer.register_full_backward_pre_hook(lambda m, g, i=i: _mark(f"backward:layer {i + 1}"))

    # The Trainer runs accelerate's forward under autocast with a mixed precision (the runs
    # reducing in the compute dtype stand for it); torchtitan's runs none.
    autocast = sc["precision"].startswith("amp") and reduce_in_compute(sc)

    def step():
        _mark("forward")
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            loss = model(input_ids=ids, labels=labels).loss
        _mark("backward")
        loss.backward()
        _mark("optimizer")
        opt.step()
        opt.zero_grad(set_to_none=True)

    step()
    local = lambda t: t.to_local() if hasattr(t, "to_local") else t
    storages = lambda ts: sum(local(t).untyped_storage().nbytes() for t in ts)
    weights = storages(model.parameters())
    states = storages(v for s in opt.state.values() for k, v in s.items() if k != "step")
    # QLoRA's quantization states: module attributes (FSDP1's flat parameters replaced the
    # Params4bit that held them), neither sharded nor gathered.
    weights += sum(quant_state_bytes(m) for m in model.modules())
    inputs = storages((ids, labels))
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    r = peak_of(prof, weights + states + inputs)
    r.update(weights=weights, optimizer_states=states)
    return r


def measure_cuda(sc, trace=None, steps=4):
    """One rank's step on a real GPU: the levels at the end of each phase (forward and loss,
    backward, optimizer) of `steps` steps, each phase's allocated and reserved high-water marks,
    and the device's use (the CUDA context and library workspaces included)."""
    from measure_allocator import CODES, _now_levels
    from measure_gpu import environment

    torch.cuda.set_device(0)
    total = torch.cuda.get_device_properties(0).total_memory
    if "cap" in sc:
        torch.cuda.set_per_process_memory_fraction(sc["cap"] / total)
    if trace:
        torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python", max_entries=4_000_000)

    def used():
        free, tot = torch.cuda.mem_get_info()
        return tot - free

    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=sc["world"])
    base_used = used()
    t0 = time.time()
    model, base = build(sc)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-4, foreach=True)
    gen = torch.Generator(device="cuda").manual_seed(1)
    ids = torch.randint(config_of(sc)["vocab_size"], (sc["batch"], sc["seq"]), device="cuda", generator=gen)
    torch.cuda.synchronize()
    torch.cuda.empty_cache()  # what building and sharding left cached: a sharded load keeps none
    autocast = sc["precision"].startswith("amp") and reduce_in_compute(sc)
    local = lambda t: t.to_local() if hasattr(t, "to_local") else t
    out = {"scenario": sc, "environment": environment(), "status": "ok", "total_memory": total,
           "used_before_model": base_used, "build_seconds": round(time.time() - t0, 2), "phases": [],
           "step_seconds": []}

    markers = []

    def phase(step, name):
        torch.cuda.synchronize()
        if trace:  # a 'snapshot' action in the trace marks where the phase ends
            events = len(torch.cuda.memory._snapshot()["device_traces"][0])
            markers.append({"step": step, "phase": name, "events": events})
        out["phases"].append({"step": step, "phase": name, **_now_levels(torch), "device": used()})
        torch.cuda.reset_peak_memory_stats()

    try:
        for step in range(1, steps + 1):
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            t = time.time()
            for micro in range(sc.get("accum", 1)):
                with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
                    loss = model(input_ids=ids, labels=ids).loss
                phase(step, "forward+loss" if micro == 0 else f"forward+loss {micro + 1}")
                loss.backward()
                del loss
                phase(step, "backward" if micro == 0 else f"backward {micro + 1}")
            opt.step()
            opt.zero_grad(set_to_none=True)
            phase(step, "optimizer")
            out["step_seconds"].append(round(time.time() - t, 4))
            if step == 1:
                out["weights"] = sum(local(p).untyped_storage().nbytes() for p in model.parameters())
                out["optimizer_states"] = sum(local(v).untyped_storage().nbytes() for s in opt.state.values()
                                              for k, v in s.items() if k != "step")
    except torch.OutOfMemoryError as e:
        out["status"] = "oom"
        out["error"] = str(e).splitlines()[0][:400]
    stats = torch.cuda.memory_stats()
    out["alloc_retries"] = int(stats.get("num_alloc_retries", 0))
    out["num_ooms"] = int(stats.get("num_ooms", 0))
    # The steady state: the steps after the first (whose optimizer states are created in it).
    steady = [p for p in out["phases"] if p["step"] > 1]
    if steady:
        out["peak_allocated"] = max(p["max_allocated"] for p in steady)
        out["peak_reserved"] = max(p["max_reserved"] for p in steady)
        out["peak_device"] = max(p["device"] + p["max_reserved"] - p["reserved"] for p in steady)
    if trace:
        snap = torch.cuda.memory._snapshot()
        torch.cuda.memory._record_memory_history(enabled=None)
        events = [[CODES.get(e["action"], e["action"]), e.get("addr", 0), e.get("size", 0), e.get("stream", 0)]
                  for e in snap["device_traces"][0]]
        segments = [{"address": s["address"], "total_size": s["total_size"], "allocated_size": s["allocated_size"],
                     "stream": s.get("stream", 0), "segment_type": s.get("segment_type")} for s in snap["segments"]]
        with gzip.open(trace, "wt") as f:
            json.dump({"scenario": sc, "run": out, "markers": markers, "allocator_settings": snap.get("allocator_settings"),
                       "segments": segments, "events": events}, f, separators=(",", ":"))
    return out


if __name__ == "__main__":
    scenario = json.loads(sys.argv[1])
    if scenario.get("device", "cpu") == "cuda":
        print(json.dumps(measure_cuda(scenario, sys.argv[2] if len(sys.argv) > 2 else None)))
    else:
        print(json.dumps(measure(scenario)))
