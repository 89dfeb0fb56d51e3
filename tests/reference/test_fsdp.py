"""FSDP2 with LoRA adapters, against the core: the collectives one training step runs on
PyTorch's fake process group (measure_fsdp.py, CPU, two ranks), one unit a decoder layer and a
root unit, as the FSDP2 export wraps them.

Exact: the reduce-scatter's input, one layer's adapter gradients only, in fp32 (the core's
`comm_buffers`), and what is gathered: the running and the prefetched layer, frozen weights and
adapters in bf16, beside the root's embeddings, lm_head and final norm (the core's
`gathered_params`).
"""
import json
import subprocess
import sys

import pytest

from test_saved_bytes import CONFIGS, HERE, predict


@pytest.mark.parametrize("targets", ["all", "attn", "qv"])
def test_fsdp2_lora_collectives(targets, tmp_path):
    config = CONFIGS["llama"]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    run = subprocess.run([sys.executable, str(HERE / "measure_fsdp.py"), str(path), "2", targets, "8"],
                         capture_output=True, text=True, cwd=HERE, check=True)
    calls = json.loads(run.stdout.strip().splitlines()[-1])
    p = predict(config, 2, 64, "bf16", "sdpa", "none", False,
                ["--gpus", "2", "--dp", "fsdp", "--method", "lora", "--rank", "8", "--targets", targets])
    comps = {c["id"]: c["bytes"] for c in p["components"]}
    layers = config["num_hidden_layers"]
    # One reduce-scatter per layer (the root unit trains nothing), each of its adapters only.
    assert len(calls["reduce_scatter"]) == layers
    assert set(calls["reduce_scatter"]) == {comps["comm_buffers"]}
    # The root unit is gathered first; each layer in forward and again in backward.
    root, per_layer = calls["all_gather"][0], set(calls["all_gather"][1:])
    assert len(per_layer) == 1 and len(calls["all_gather"]) == 1 + 2 * layers
    assert comps["gathered_params"] == 2 * per_layer.pop() + root
