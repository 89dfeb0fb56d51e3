"""FSDP2 (`fully_shard`) over a LoRA model on PyTorch's fake process group, on CPU: the sizes of
the collectives one training step runs, recorded at `torch.distributed`'s entry points that
FSDP2 calls (`all_gather_single`, `reduce_scatter_single`). The fake group moves no data, but
each call gets its real buffers, so their sizes are FSDP2's own. Prints JSON.

    python measure_fsdp.py CONFIG_JSON WORLD_SIZE TARGETS RANK
"""
import json
import sys

import peft
import torch
import torch.distributed as dist
import transformers
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.testing._internal.distributed.fake_pg import FakeStore

from measure_peft import TARGETS


def main(config_path, world, targets, rank):
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world)
    calls = {"reduce_scatter": [], "all_gather": []}
    reduce_scatter, all_gather = dist.reduce_scatter_single, dist.all_gather_single

    def rec_reduce_scatter(output, input, *a, **k):
        calls["reduce_scatter"].append(input.numel() * input.element_size())
        return reduce_scatter(output, input, *a, **k)

    def rec_all_gather(output, input, *a, **k):
        calls["all_gather"].append(output.numel() * output.element_size())
        return all_gather(output, input, *a, **k)

    dist.reduce_scatter_single, dist.all_gather_single = rec_reduce_scatter, rec_all_gather
    config = json.loads(open(config_path).read())
    torch.manual_seed(0)
    cfg = transformers.AutoConfig.for_model(**config)
    model = transformers.AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
    lora = peft.LoraConfig(r=rank, lora_alpha=2 * rank, target_modules=TARGETS[targets], task_type="CAUSAL_LM")
    model = peft.get_peft_model(model, lora)
    # bf16 compute, fp32 gradient reduction (torchtitan's policy: the core's reduce32), one
    # unit a layer.
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for layer in model.get_base_model().model.layers:
        fully_shard(layer, mp_policy=mp)
    fully_shard(model, mp_policy=mp)
    ids = torch.randint(config["vocab_size"], (2, 64))
    model(input_ids=ids, labels=ids).loss.backward()
    print(json.dumps(calls))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]))
