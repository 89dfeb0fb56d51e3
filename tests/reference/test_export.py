"""The planner's exports (`headroom plan --export ...`) against the installed tools.

For the best plan of every worked example (named scenarios ex0-..ex4-): the TrainingArguments
keywords are fields of `dataclasses.fields(transformers.TrainingArguments)`, `optim` is one of
transformers' `OptimizerNames`, and the arguments construct on CPU (DeepSpeed and FSDP need
their packages and GPUs, so `deepspeed`/`fsdp*` are checked by name only); the torchrun
command's flags are TrainingArguments fields too; the FSDP2 script parses and every name it
imports from torch exists; the accelerate YAML loads and uses documented keys; the DeepSpeed
JSON loads and satisfies DeepSpeed's batch identity. Run by scripts/test.sh with HEADROOM_BIN
pointing at the CLI.
"""
import ast
import dataclasses
import enum
import importlib
import inspect
import json
import os
import pathlib
import re
import shlex
import subprocess
import types
import typing

import pytest
import transformers
import yaml
from transformers.training_args import OptimizerNames

HERE = pathlib.Path(__file__).parent
ROOT = HERE.parent.parent
BIN = os.environ.get("HEADROOM_BIN", str(ROOT / "target" / "debug" / "headroom"))
SCENARIOS = sorted(p.stem for p in (ROOT / "content" / "scenarios").glob("ex*.toml"))
FIELDS = {f.name for f in dataclasses.fields(transformers.TrainingArguments)}

# accelerate is not installed here: its config file's keys as `accelerate config` writes them
# (accelerate's ClusterConfig, commands/config/config_args.py) and as transformers' docs page
# "Accelerate" shows for FSDP2 (fsdp_version 2 ... fsdp_transformer_layer_cls_to_wrap).
ACCELERATE_TOP = {
    "compute_environment", "distributed_type", "mixed_precision", "use_cpu", "debug",
    "num_processes", "machine_rank", "num_machines", "gpu_ids", "main_process_ip",
    "main_process_port", "rdzv_backend", "same_network", "main_training_function",
    "enable_cpu_affinity", "deepspeed_config", "fsdp_config", "downcast_bf16",
}
ACCELERATE_FSDP = {
    "fsdp_version", "fsdp_auto_wrap_policy", "fsdp_transformer_layer_cls_to_wrap",
    "fsdp_reshard_after_forward", "fsdp_offload_params", "fsdp_activation_checkpointing",
    "fsdp_cpu_ram_efficient_loading", "fsdp_state_dict_type", "fsdp_sync_module_states",
    "fsdp_use_orig_params", "fsdp_min_num_params",
}
ACCELERATE_DEEPSPEED = {
    "deepspeed_config_file", "zero3_init_flag", "deepspeed_multinode_launcher",
    "deepspeed_hostfile", "zero_stage", "offload_optimizer_device", "offload_param_device",
    "gradient_accumulation_steps", "gradient_clipping", "zero3_save_16bit_model",
}
DISTRIBUTED_TYPES = {"NO", "MULTI_GPU", "DEEPSPEED", "FSDP", "MEGATRON_LM"}


def export(named, target):
    out = subprocess.run(
        [BIN, "plan", "--named", named, "--export", target],
        capture_output=True, text=True, check=True,
    )
    return out.stdout


MODEL_TYPES = ["llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gemma",
               "gemma2", "gemma3", "phi3", "gpt2", "gpt_neox", "opt"]


def layer_class_exists(name):
    """Whether a decoder-layer class of that name is in one of transformers' modeling modules."""
    for t in MODEL_TYPES:
        mod = importlib.import_module(f"transformers.models.{t}.modeling_{t}")
        if hasattr(mod, name):
            return True
    return False


def accepts(hint, value):
    """Whether `value` is an instance of the type `hint` (unions, Optional, Literal, dict, list)."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(accepts(a, value) for a in typing.get_args(hint))
    if origin is typing.Literal:
        return value in typing.get_args(hint)
    if origin is not None:
        return isinstance(value, origin)
    if hint is typing.Any:
        return True
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return value in {m.value for m in hint}
    if hint is type(None):
        return value is None
    return isinstance(value, hint)


def trainer_kwargs(text):
    tree = ast.parse(text)
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)
             and getattr(n.func, "id", None) == "TrainingArguments"]
    assert len(calls) == 1
    return {k.arg: ast.literal_eval(k.value) for k in calls[0].keywords}


@pytest.mark.parametrize("named", SCENARIOS)
def test_training_arguments(named, tmp_path):
    kw = trainer_kwargs(export(named, "trainer"))
    assert set(kw) <= FIELDS, set(kw) - FIELDS
    assert kw["optim"] in {o.value for o in OptimizerNames}
    # Each value has the type its field declares (constructing TrainingArguments needs
    # accelerate, which this CPU venv does not have: its device setup runs in __post_init__).
    hints = typing.get_type_hints(transformers.TrainingArguments)
    meta = {f.name: f.metadata for f in dataclasses.fields(transformers.TrainingArguments)}
    for k, v in kw.items():
        # `fsdp` is typed `str | None` but documented as a switch: "Pass `--fsdp` (or
        # `fsdp=True`) to turn FSDP on" (its argparse const is True).
        switch = meta[k].get("const") is True and v is True
        assert switch or accepts(hints[k], v), f"{k}={v!r} against {hints[k]}"
    if "fsdp_config" in kw:
        assert kw["fsdp_config"]["version"] == 2
        for cls in kw["fsdp_config"]["transformer_layer_cls_to_wrap"]:
            assert layer_class_exists(cls), cls


@pytest.mark.parametrize("named", SCENARIOS)
def test_torchrun_flags_are_training_arguments(named):
    text = export(named, "torchrun")
    cmd = " ".join(l for l in text.splitlines() if not l.startswith(("#", "export "))).replace("\\", " ")
    argv = shlex.split(cmd)
    assert argv[0] == "torchrun"
    assert any(a.startswith("--nproc_per_node=") for a in argv)
    script = argv.index("train.py")
    flags = [a[2:] for a in argv[script + 1:] if a.startswith("--")]
    assert flags and set(flags) <= FIELDS, set(flags) - FIELDS
    # HfArgumentParser (what transformers' example scripts use) reads them back; argparse
    # level only, since constructing TrainingArguments needs accelerate.
    ns = transformers.HfArgumentParser(transformers.TrainingArguments).parse_args(argv[script + 1:])
    kw = trainer_kwargs(export(named, "trainer"))
    assert ns.per_device_train_batch_size == kw["per_device_train_batch_size"]
    assert ns.gradient_accumulation_steps == kw["gradient_accumulation_steps"]
    assert str(getattr(ns.optim, "value", ns.optim)) == kw["optim"]


@pytest.mark.parametrize("named", SCENARIOS)
def test_fsdp2_script_parses_and_imports_exist(named):
    text = export(named, "fsdp2")
    tree = ast.parse(text)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module.startswith("torch"):
            mod = importlib.import_module(node.module)
            for alias in node.names:
                assert hasattr(mod, alias.name), f"{node.module}.{alias.name}"
    if "activation_checkpointing_enable(" in text:
        # transformers' own checkpointing switch, with every_n_layers for "every k-th layer".
        sig = inspect.signature(transformers.PreTrainedModel.activation_checkpointing_enable)
        assert {"activation_checkpointing_kwargs", "every_n_layers"} <= set(sig.parameters)
    if "fully_shard(" in text:
        from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard  # noqa: F401
        m = re.search(r"One FSDP unit per decoder layer \((\w+)\)", text)
        assert m and layer_class_exists(m.group(1)), text


@pytest.mark.parametrize("named", SCENARIOS)
def test_accelerate_yaml_keys(named):
    cfg = yaml.safe_load(export(named, "accelerate"))
    assert set(cfg) <= ACCELERATE_TOP, set(cfg) - ACCELERATE_TOP
    assert cfg["distributed_type"] in DISTRIBUTED_TYPES
    assert set(cfg.get("fsdp_config", {})) <= ACCELERATE_FSDP
    assert set(cfg.get("deepspeed_config", {})) <= ACCELERATE_DEEPSPEED
    if cfg["distributed_type"] == "FSDP":
        assert cfg["fsdp_config"]["fsdp_version"] == 2
        assert layer_class_exists(cfg["fsdp_config"]["fsdp_transformer_layer_cls_to_wrap"])
    ds = json.loads(export(named, "deepspeed"))
    assert cfg["num_processes"] * ds["train_micro_batch_size_per_gpu"] * ds["gradient_accumulation_steps"] >= ds["train_batch_size"]


@pytest.mark.parametrize("named", SCENARIOS)
def test_deepspeed_json_batch_identity(named):
    ds = json.loads(export(named, "deepspeed"))
    plan = json.loads(subprocess.run([BIN, "plan", "--named", named, "--format", "json"],
                                     capture_output=True, text=True, check=True).stdout)
    best = plan["planning"]["plans"][0]["scenario"]
    dp = best["gpus"] // (best["parallel"]["tensor"] * best["parallel"]["pipeline"])
    # DeepSpeed: train_batch_size = micro-batch per GPU x accumulation x data-parallel GPUs.
    assert ds["train_batch_size"] == ds["train_micro_batch_size_per_gpu"] * ds["gradient_accumulation_steps"] * dp
    assert ds["train_micro_batch_size_per_gpu"] == best["micro_batch"]


@pytest.mark.parametrize("named", SCENARIOS)
def test_env_exports(named):
    for line in export(named, "env").splitlines():
        if line and not line.startswith("#"):
            assert re.fullmatch(r"export [A-Z_]+=[A-Za-z0-9_:,.]+", line), line
