"""FSDP2 against the core on PyTorch's fake process group (CPU, two ranks), wrapped as the FSDP2
export wraps it (one unit a decoder layer, and the root unit):

- the step's peak (measure_fsdp_peak.py): what is gathered, unsharded and reduce-scattered
  when, for full training and LoRA, with and without the export's mixed-precision policy, and
  under FSDP1 as accelerate wraps it;
- with LoRA adapters under the policy, the collectives one step runs (measure_fsdp.py): each
  reduce-scatter's input, one layer's adapter gradients only, in fp32 (of the core's
  `comm_buffers`, beside the adapters' unsharded bf16 gradients), and what is gathered: the
  running and the prefetched layer, frozen weights and adapters in bf16, beside the root's
  embeddings, lm_head and final norm (the core's `gathered_params`).
"""
import json

import pytest

import prewarmed
from test_saved_bytes import CONFIGS, HERE, predict


@pytest.mark.parametrize("targets", ["all", "attn", "qv"])
def test_fsdp2_lora_collectives(targets, tmp_path):
    config = CONFIGS["llama"]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    run = prewarmed.run(HERE / "measure_fsdp.py", [str(path), "2", targets, "8"], cwd=HERE, check=True)
    calls = json.loads(run.stdout.strip().splitlines()[-1])
    p = predict(config, 2, 64, "amp-bf16", "sdpa", "none", False,
                ["--gpus", "2", "--dp", "fsdp", "--method", "lora", "--rank", "8", "--targets", targets,
                 "--base", "16bit", "--reduce32"])
    comps = {c["id"]: c["bytes"] for c in p["components"]}
    layers = config["num_hidden_layers"]
    # One reduce-scatter per layer (the root unit trains nothing), each of its adapters only,
    # in fp32; the core's line adds the adapters' unsharded bf16 gradients (half as many bytes).
    assert len(calls["reduce_scatter"]) == layers
    (reduce_input,) = set(calls["reduce_scatter"])
    assert comps["comm_buffers"] == reduce_input + reduce_input // 2
    # The root unit is gathered first; each layer in forward and again in backward.
    root, per_layer = calls["all_gather"][0], set(calls["all_gather"][1:])
    assert len(per_layer) == 1 and len(calls["all_gather"]) == 1 + 2 * layers
    assert comps["gathered_params"] == 2 * per_layer.pop() + root


def fsdp_flags(sc):
    """The CLI flags of a measure_fsdp_peak.py scenario's parallelism, method and options: `--gpus
    world --dp fsdp`, FSDP1 and the reduce dtype as the run set them, the adapters' base in bf16
    as the script loads it."""
    flags = ["--gpus", str(sc["world"]), "--dp", "fsdp", "--method", sc["method"]]
    if sc["method"] != "full":
        flags += ["--rank", str(sc["rank"]), "--targets", sc["targets"], "--base", "16bit"]
    if sc["fsdp"] == 1:
        flags.append("--fsdp1")
    if sc.get("reduce") == "fp32" and sc["precision"].startswith("amp"):
        flags.append("--reduce32")
    if sc.get("accum", 1) > 1:
        flags += ["--accum", str(sc["accum"])]
    if sc.get("dropout"):
        flags.append("--lora-dropout")
    if sc.get("offload"):
        flags += ["--offload-params", "cpu"]
    return flags


# The step's live tensor bytes on one rank (measure_fsdp_peak.py: the fake process group on
# CPU), against the core's `peak_tensors`. FSDP2 wrapped one unit a layer: Llama (untied) and
# Qwen2 (tied embeddings), full training and LoRA on all linear layers, pure bf16 (no policy:
# LoRA's fp32 adapters gathered in fp32) and amp-bf16 (bf16 parameters, the reduce-scatter in
# fp32 as torchtitan sets it: `--reduce32`), with and without checkpointing. On Llama also:
# FSDP2 as transformers' Trainer runs it through accelerate (the policy reduces in bf16, the
# core's default, and the forward autocasts), FSDP1 (`--fsdp1`) as accelerate wraps it for the
# Trainer (the same policy and autocast under amp), and FSDP1 reducing in fp32 (as PyTorch's
# FSDP recipes set it); and QLoRA under FSDP1 as peft's FSDP-QLoRA recipe runs it (bitsandbytes'
# NF4 stored as bf16, flattened with the layer's bf16 parameters; the quantization states stay
# whole on every rank).
def _cases():
    grid = [(prec, ckpt, method) for prec in ("bf16", "amp-bf16") for ckpt in ("none", "full")
            for method in ("full", "lora")]
    amp = [g for g in grid if g[0] == "amp-bf16"]
    # (FSDP1 with an fp32 reduce and no autocast cannot run peft's adapters: their inputs are cast
    # to the fp32 shard's dtype outside the unit, its weights are bf16 inside.)
    return ([("fsdp2", "fp32", fam) + g for fam in ("llama", "qwen2") for g in grid]
            + [("fsdp2", "compute", "llama") + g for g in amp]
            + [("fsdp1", "compute", "llama") + g for g in grid]
            + [("fsdp1", "fp32", "llama") + g for g in amp if g[2] == "full"]
            + [("fsdp1", "compute", "llama", prec, ckpt, "qlora") for prec in ("bf16", "amp-bf16")
               for ckpt in ("none", "full")])


PEAK_CASES = _cases()


@pytest.mark.parametrize("fsdp,reduce,fam,prec,ckpt,method", PEAK_CASES, ids=["-".join(c) for c in PEAK_CASES])
def test_fsdp_step_peak(fsdp, reduce, fam, prec, ckpt, method):
    config = CONFIGS[fam]
    scenario = {"config": config, "world": 2, "batch": 2, "seq": 64, "precision": prec, "checkpointing": ckpt,
                "method": method, "rank": 8, "targets": "all", "fsdp": int(fsdp[-1]), "reduce": reduce}
    run = prewarmed.run(HERE / "measure_fsdp_peak.py", [json.dumps(scenario)], cwd=HERE, check=True)
    measured = json.loads(run.stdout.strip().splitlines()[-1])
    p = predict(config, 2, 64, prec, "sdpa", ckpt, False, fsdp_flags(scenario))
    assert p["bytes"]["weights"] == measured["weights"]
    assert p["bytes"]["optimizer_states"] == measured["optimizer_states"]
    error = (p["bytes"]["peak_tensors"] - measured["peak"]) / measured["peak"]
    # Without checkpointing within about a kilobyte (the loss's scalars); with it the core is
    # up to 0.2% under (unexplained: 15 to 20 kB of the loss phase or the first layer's
    # backward on these shapes, LoRA's and Qwen2's).
    assert abs(error) < (0.0001 if ckpt == "none" else 0.0025), (measured["peak"], p["bytes"]["peak_tensors"])
