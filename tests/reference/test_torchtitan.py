"""The torchtitan export (`headroom plan --export torchtitan`) read by torchtitan 0.3 itself.

torchtitan 0.3 configures a job as a Python function returning `Trainer.Config` (its
`models/*/config_registry.py`); Headroom writes one (`torchtitan_plan.py`, function
`headroom_plan`). Here each exported plan is loaded as torchtitan's trainer loads it
(`ConfigManager().parse_args(["--module", "torchtitan_plan", "--config", "headroom_plan"])`, which
runs tyro and the config's own validation), its degrees are checked by torchtitan's
`ParallelDims` over the plan's GPUs, every setting is compared with the plan Headroom estimated
(batch, accumulation as torchtitan derives it, sequence, degrees, checkpointing, compile, CUDA
graphs, mixed precision, offload, optimizer, loss), and the model is built from the config on the
meta device: its parameters must be the preset's as Headroom counts them, and with fp8 the
decoder layers' Linears (not the output projection) must be torchao's Float8Linear.

torchtitan and the modules its trainer imports are installed without their declared
dependencies (tests/reference/requirements-nodeps.txt). Its float8 converter refuses to build
without an SM89 GPU unless emulating; the check of the GPU is answered yes here (the converter's
swap is what is checked, not the kernels).
"""
import importlib
import json
import pathlib
import re
import subprocess
import sys

import pytest
import torch

import published

torchtitan = pytest.importorskip("torchtitan")

from torchtitan.components.loss import CrossEntropyLoss  # noqa: E402
from torchtitan.config import ConfigManager  # noqa: E402
from torchtitan.distributed.activation_checkpoint import FullAC  # noqa: E402
from torchtitan.distributed.parallel_dims import ParallelDims  # noqa: E402

BIN = published.BIN

# Settings the planner keeps as given, so that each case's plans are the setup written here.
KEEP = ["--keep", "dp,tp,ckpt,batch,loss,precision,offload,act_offload"]

CASES = {
    # Issue 32's example: a 70B full fine-tune on 8 A100s, FSDP2 kept (the planner picks TP,
    # micro-batch, checkpointing and CPU offload).
    "llama-3.1-70b-8xa100": ["--model", "llama-3.1-70b", "--gpu", "a100-sxm4-80gb", "--gpus", "8", "--seq", "4096",
                             "--dp", "fsdp", "--reduce32", "--keep", "dp"],
    "llama-3.2-1b-pp2-fp8-compile": ["--model", "llama-3.2-1b", "--gpu", "h100-sxm-80gb", "--gpus", "8", "--dp", "fsdp",
                                     "--reduce32", "--pp", "2", "--accum", "4", "--batch", "2", "--fp8", "rowwise",
                                     "--compile", *KEEP],
    "qwen3-8b-cp2-graphs": ["--model", "qwen3-8b", "--gpu", "h100-sxm-80gb", "--gpus", "8", "--dp", "fsdp", "--reduce32",
                            "--cp", "2", "--checkpointing", "full", "--optimizer", "adamw-fused", "--cuda-graphs",
                            *KEEP],
    "llama-3.1-8b-tp2-sp": ["--model", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--gpus", "8", "--dp", "fsdp",
                            "--reduce32", "--tp", "2", "--sp", "--checkpointing", "full", "--optimizer", "adamw-forloop",
                            "--accum", "2", *KEEP],
    "llama-3.2-3b-fp32-1gpu": ["--model", "llama-3.2-3b", "--gpu", "h100-sxm-80gb", "--dp", "fsdp", "--precision", "fp32",
                               "--checkpointing", "full", *KEEP],
}

# The export's (and the importer's) table of torchtitan flavors, read from its one source.
SOURCE = pathlib.Path(__file__).parent.parent.parent / "crates/headroom-core/src/export/torchtitan.rs"
FLAVORS = re.findall(r'flavor\("([^"]+)", "([^"]+)", "([^"]+)", "[^"]+", (?:true|false)\)', SOURCE.read_text())

IMPLEMENTATION = {"AdamWFused": "fused", "AdamW": "foreach", "AdamWForLoop": "for-loop"}


def run_json(*args):
    out = subprocess.run([BIN, *args, "--format", "json"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def torchtitan_plans(case):
    """(1-based pick, plan) of each plan the export offers torchtitan for."""
    plans = run_json("plan", *CASES[case])["planning"]["plans"]
    return [(i + 1, p) for i, p in enumerate(plans) if "torchtitan" in p["targets"]]


def load(text, tmp_path, monkeypatch):
    """The exported module loaded as torchtitan's trainer loads a job."""
    (tmp_path / "torchtitan_plan.py").write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "torchtitan_plan", raising=False)
    import torchtitan.components.quantization.float8 as float8
    monkeypatch.setattr(float8, "has_cuda_capability", lambda major, minor: True)
    # The rowwise converter sets an inductor flag for the process; restored after the test so
    # that the compiled-run tests in this worker see inductor's own default.
    import torch._inductor.config as inductor
    monkeypatch.setattr(inductor, "emulate_precision_casts", inductor.emulate_precision_casts)
    return ConfigManager().parse_args(["--module", "torchtitan_plan", "--config", "headroom_plan"])


def test_every_case_has_a_plan_torchtitan_runs():
    for case in CASES:
        assert torchtitan_plans(case), f"{case}: no plan offers torchtitan"


def test_a_plan_torchtitan_cannot_run_is_refused_by_name():
    # LoRA: torchtitan's trainer runs full training.
    out = subprocess.run([BIN, "plan", "--model", "llama-3.1-8b", "--method", "lora", "--dp", "fsdp", "--reduce32",
                          "--export", "torchtitan"], capture_output=True, text=True)
    assert out.returncode != 0
    assert "cannot be written as torchtitan_plan.py" in out.stderr and "full pre-training" in out.stderr, out.stderr


@pytest.mark.parametrize("case", sorted(CASES))
def test_torchtitans_own_config_manager_reads_the_plan(case, tmp_path, monkeypatch):
    pick, plan = torchtitan_plans(case)[0]
    sc = plan["scenario"]
    text = subprocess.run([BIN, "plan", *CASES[case], "--export", "torchtitan", "--pick", str(pick)],
                          capture_output=True, text=True, check=True).stdout
    cfg = load(text, tmp_path, monkeypatch)
    par = sc["parallel"]
    tp, pp, cp = par["tensor"], par["pipeline"], par.get("context", 1) or 1
    dims = ParallelDims.from_config(cfg.parallelism, world_size=sc["gpus"])
    dp = sc["gpus"] // (tp * pp * cp)
    assert (dims.dp_shard, dims.dp_replicate, dims.tp, dims.pp, dims.cp, dims.ep) == (dp, 1, tp, pp, cp, 1)
    if tp > 1:
        assert cfg.parallelism.enable_sequence_parallel == par["sequence"]

    tr = cfg.training
    assert tr.seq_len == sc["seq"]
    # torchtitan's accumulation: global batch over local batch times the batch mesh (dp).
    accum = tr.global_batch_size // (tr.local_batch_size * dp)
    if pp > 1:
        # A rank's local batch is split into pipeline micro-batches of the plan's micro-batch.
        assert cfg.parallelism.pipeline_parallel_schedule == "1F1B"
        assert cfg.parallelism.pipeline_parallel_microbatch_size == sc["micro_batch"]
        assert (tr.local_batch_size, accum) == (sc["micro_batch"] * sc["grad_accum"], 1)
    else:
        assert (tr.local_batch_size, accum) == (sc["micro_batch"], sc["grad_accum"])
    assert tr.dtype == "float32"
    assert tr.mixed_precision_param == {"AmpBf16": "bfloat16", "Fp32": "float32"}[sc["precision"]]
    assert tr.mixed_precision_reduce == "float32"
    assert tr.enable_cpu_offload == (par["offload_params"] == "Cpu")
    assert tr.disable_cuda_graphs == (not sc["runtime"].get("cuda_graphs", False))

    ckpt = sc["checkpointing"]
    if ckpt == "Full":
        assert isinstance(cfg.activation_checkpoint, FullAC.Config)
    else:
        assert ckpt == "None" and cfg.activation_checkpoint is None
    assert cfg.compile.enable == sc["runtime"].get("compile", False)
    if cfg.compile.enable:
        assert set(cfg.compile.components) == {"model", "loss"}
    assert isinstance(cfg.loss, CrossEntropyLoss.Config)
    assert cfg.optimizer.implementation == IMPLEMENTATION[sc["optimizer"]]

    with torch.device("meta"):
        model = cfg.model_spec.model.build()
    est = run_json("estimate", "--no-replay", "--link", plan["link"])
    assert sum(p.numel() for p in model.parameters()) == est["parameters"]["total"]
    if sc["fp8"] == "Rowwise":
        from torchao.float8.float8_linear import Float8Linear
        converted = [n for n, m in model.named_modules() if isinstance(m, Float8Linear)]
        layers = len(model.layers)
        # torchtitan fuses q, k and v into one Linear (wqkv): with wo, w1, w2, w3, five a layer.
        assert len(converted) == 5 * layers, converted[:8]
        assert all(n.startswith("layers.") for n in converted)


def test_the_flavor_table_is_read():
    assert len(FLAVORS) >= 8, FLAVORS


@pytest.mark.parametrize("preset,module,flavor", FLAVORS, ids=[f[0] for f in FLAVORS])
def test_each_flavor_builds_the_presets_parameters(preset, module, flavor):
    """torchtitan's flavor, built on the meta device, has the preset's parameters as Headroom
    counts them (the importer reads a job's model with this table; the export writes it)."""
    spec = importlib.import_module(f"torchtitan.models.{module}").model_registry(flavor)
    with torch.device("meta"):
        model = spec.model.build()
    est = run_json("estimate", "--no-replay", "--model", preset)
    assert sum(p.numel() for p in model.parameters()) == est["parameters"]["total"]
