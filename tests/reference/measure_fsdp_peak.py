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

    python measure_fsdp_peak.py SCENARIO_JSON

SCENARIO_JSON: {"config", "world", "batch", "seq", "precision" (bf16 | amp-bf16),
"checkpointing" (none | full), "method" (full | lora), "rank", "targets", "fsdp" (1 | 2),
"reduce" under amp (fp32 | compute: the policy's reduce dtype; compute is accelerate's, whose
runs also autocast the forward; FSDP1 defaults to compute, FSDP2 to fp32)}. Prints JSON: the
peak, its phase, each marked segment's start and peak.
"""
import json
import sys

import torch
import torch.distributed as dist
import transformers
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.profiler import ProfilerActivity, profile
from torch.testing._internal.distributed.fake_pg import FakeStore

from measure_peak import _mark, peak_of
from measure_peft import TARGETS


def build(sc):
    torch.manual_seed(0)
    cfg = transformers.AutoConfig.for_model(**sc["config"])
    amp = sc["precision"].startswith("amp")
    # Full training keeps fp32 parameters under amp; LoRA loads its base in 16 bits either way.
    dtype = torch.float32 if amp and sc["method"] == "full" else torch.bfloat16
    model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa", dtype=dtype)
    if sc["method"] == "lora":
        import peft

        rank = sc["rank"]
        lora = peft.LoraConfig(r=rank, lora_alpha=2 * rank, target_modules=TARGETS[sc["targets"]],
                               task_type="CAUSAL_LM")
        model = peft.get_peft_model(model, lora)
    model.train()
    if sc["checkpointing"] == "full":
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if sc["method"] == "lora":
            model.enable_input_require_grads()
    base = model.get_base_model() if sc["method"] == "lora" else model
    reduce = torch.bfloat16 if reduce_in_compute(sc) else torch.float32
    if sc.get("fsdp", 2) == 1:
        return fsdp1(model, base, amp, sc["method"] == "lora", reduce), base
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=reduce) if amp else MixedPrecisionPolicy()
    for layer in base.model.layers:
        fully_shard(layer, mp_policy=mp)
    fully_shard(model, mp_policy=mp)
    return model, base


def reduce_in_compute(sc):
    """Whether the policy reduces in the compute dtype (accelerate's), not fp32."""
    return sc.get("reduce", "compute" if sc.get("fsdp", 2) == 1 else "fp32") == "compute"


def fsdp1(model, base, amp, lora, reduce):
    """`model` wrapped as accelerate wraps it for the Trainer (FSDP1)."""
    import functools

    from torch.distributed.fsdp import BackwardPrefetch, MixedPrecision, ShardingStrategy
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
                   device_id=torch.device("cpu"))
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
    ids = torch.randint(sc["config"]["vocab_size"], (sc["batch"], sc["seq"]), generator=gen)
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
    inputs = storages((ids, labels))
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    r = peak_of(prof, weights + states + inputs)
    r.update(weights=weights, optimizer_states=states)
    return r


if __name__ == "__main__":
    print(json.dumps(measure(json.loads(sys.argv[1]))))
