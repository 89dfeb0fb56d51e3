"""The planner's exports (`headroom plan --export ...`) against the installed tools.

For the best plan of every worked example (named scenarios ex0-..ex4-): the TrainingArguments
keywords are fields of `dataclasses.fields(transformers.TrainingArguments)` with the types they
declare, `optim` is one of transformers' `OptimizerNames`, and `TrainingArguments(**kwargs)`
constructs for real (on CPU: `use_cpu=True`; `deepspeed=` needs the deepspeed package, so the
DeepSpeed JSON is instead run through transformers' own TrainingArguments-vs-DeepSpeed check and
accelerate's DeepSpeedPlugin); the FSDP arguments build accelerate's FSDP plugin as Trainer does;
the torchrun command's flags parse into the same TrainingArguments; the FSDP2 script parses and
every name it imports from torch exists; the accelerate YAML loads with accelerate's own loader
(`load_config_from_file`, which rejects unknown keys), goes through `accelerate launch`'s
argument handling, and its launch environment builds accelerate's DeepSpeed/FSDP plugin; the
DeepSpeed JSON satisfies DeepSpeed's batch identity. Run by scripts/test.sh with HEADROOM_BIN
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
from accelerate.commands.config.config_args import ClusterConfig, load_config_from_file
from accelerate.commands.launch import _validate_launch_command, launch_command_parser
from accelerate.utils import (DeepSpeedPlugin, DistributedType, FullyShardedDataParallelPlugin,
                              PrecisionType)
from accelerate.utils import launch as accelerate_launch
from accelerate.utils.deepspeed import HfDeepSpeedConfig
from torch.distributed.fsdp import CPUOffloadPolicy
from transformers.integrations.deepspeed import HfTrainerDeepSpeedConfig
from transformers.training_args import OptimizerNames

HERE = pathlib.Path(__file__).parent
ROOT = HERE.parent.parent
BIN = os.environ.get("HEADROOM_BIN", str(ROOT / "target" / "debug" / "headroom"))
SCENARIOS = sorted(p.stem for p in (ROOT / "content" / "scenarios").glob("ex*.toml"))
FIELDS = {f.name for f in dataclasses.fields(transformers.TrainingArguments)}

# The distributed types the planner may write (accelerate's DistributedType has more: TPU, ...).
DISTRIBUTED_TYPES = {DistributedType.NO, DistributedType.MULTI_GPU, DistributedType.DEEPSPEED,
                     DistributedType.FSDP}


# Worked examples whose own recipe has no plan that keeps the training: example 2's 8-bit
# AdamW on one 24 GB GPU (its states cannot be offloaded: offload steps AdamW on the CPU), so
# their best plan is the best of the plans that change the training.
TRAINING_ONLY = {"ex2-7b-24gb-8bit"}


def plan_args(named):
    extra = ["--allow-training-changes"] if named in TRAINING_ONLY else []
    return [BIN, "plan", "--named", named, *extra]


def export(named, target):
    training = ["--training"] if named in TRAINING_ONLY else []
    out = subprocess.run(
        [*plan_args(named), "--export", target, *training],
        capture_output=True, text=True, check=True,
    )
    return out.stdout


MODEL_TYPES = ["llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gemma",
               "gemma2", "gemma3", "phi3", "gpt2", "gpt_neox", "opt", "granite", "smollm3", "olmo2",
               "olmo3", "glm4", "cohere2", "starcoder2", "granitemoe", "glm4_moe", "gpt_oss",
               "deepseek_v2", "deepseek_v3"]


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


def best_plan(named):
    plan = json.loads(subprocess.run([*plan_args(named), "--format", "json"],
                                     capture_output=True, text=True, check=True).stdout)
    plans = plan["planning"]["training_plans" if named in TRAINING_ONLY else "plans"]
    return plans[0]["scenario"]


def data_parallel(best):
    return best["gpus"] // (best["parallel"]["tensor"] * best["parallel"]["pipeline"])


def construct_training_arguments(kw):
    """`TrainingArguments(**kw)` for real, on this CPU-only machine.

    `use_cpu=True` is added: without it, `bf16=True` raises "Your setup doesn't support bf16/gpu"
    here since there is no GPU. With it, bf16 and fp16 construct as exported (CPU autocast), so
    neither is flipped and the caller asserts they come through unchanged. `deepspeed` is left
    out: with it, __post_init__ builds transformers' HfTrainerDeepSpeedConfig, which requires the
    deepspeed package (not installed; it also sets a process-wide ZeRO-3 weakref that would leak
    into the other reference tests). The DeepSpeed JSON is checked against these arguments with
    transformers' own check instead (TrainerDeepSpeedConfig below).
    """
    return transformers.TrainingArguments(
        **{**{k: v for k, v in kw.items() if k != "deepspeed"}, "use_cpu": True})


class TrainerDeepSpeedConfig(HfDeepSpeedConfig):
    """transformers' HfTrainerDeepSpeedConfig on accelerate's config class.

    transformers' class derives from `object` when the deepspeed package is missing
    (integrations/deepspeed.py), so its methods are borrowed unchanged. `trainer_config_process`
    is what `TrainingArguments(deepspeed=...)` runs: it records every DeepSpeed value that differs
    from the arguments (batch sizes, accumulation, clipping, optimizer lr/betas/eps/weight_decay,
    fp16/bf16), and Trainer raises on them in `trainer_config_finalize`.
    """
    fill_match = HfTrainerDeepSpeedConfig.fill_match
    fill_only = HfTrainerDeepSpeedConfig.__dict__["fill_only"]
    is_auto = HfTrainerDeepSpeedConfig.is_auto
    trainer_config_process = HfTrainerDeepSpeedConfig.trainer_config_process

    def __init__(self, config):
        super().__init__(config)
        self._dtype = None
        self.mismatches = []


@pytest.mark.parametrize("named", SCENARIOS)
def test_training_arguments(named, tmp_path, monkeypatch):
    kw = trainer_kwargs(export(named, "trainer"))
    assert set(kw) <= FIELDS, set(kw) - FIELDS
    assert kw["optim"] in {o.value for o in OptimizerNames}
    # Each value has the type its field declares (construction below coerces some, e.g. optim).
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

    monkeypatch.chdir(tmp_path)  # output_dir="out" is relative
    args = construct_training_arguments(kw)
    # __post_init__ keeps what was asked (it resets nothing silently, e.g. mixed precision).
    assert args.per_device_train_batch_size == kw["per_device_train_batch_size"]
    assert args.gradient_accumulation_steps == kw["gradient_accumulation_steps"]
    assert args.max_grad_norm == kw["max_grad_norm"]
    assert (args.bf16, args.fp16) == (kw.get("bf16", False), kw.get("fp16", False))
    assert args.optim == OptimizerNames(kw["optim"])
    assert args.activation_checkpointing == kw.get("activation_checkpointing", False)
    assert (args.fsdp_plugin_args is None) == ("fsdp" not in kw)
    if "fsdp" in kw:
        # Trainer builds accelerate's FSDP plugin from exactly these (trainer.py:
        # FullyShardedDataParallelPlugin(**self.args.fsdp_plugin_args)).
        plugin = FullyShardedDataParallelPlugin(**args.fsdp_plugin_args)
        fc = kw["fsdp_config"]
        assert plugin.fsdp_version == fc["version"]
        assert plugin.transformer_cls_names_to_wrap == fc["transformer_layer_cls_to_wrap"]
        assert plugin.reshard_after_forward == fc["reshard_after_forward"]
        assert plugin.activation_checkpointing == fc["activation_checkpointing"]
        # FSDP2: CPUOffloadPolicy to offload, OffloadPolicy() (a no-op) otherwise.
        assert isinstance(plugin.cpu_offload, CPUOffloadPolicy) == fc["cpu_offload"]
    if "deepspeed" in kw:
        assert kw["deepspeed"] == "ds_config.json"  # the file the DeepSpeed export is saved as
        ds = json.loads(export(named, "deepspeed"))
        # The world DeepSpeed's train_batch_size is written for: the plan's data-parallel GPUs
        # (with tensor/pipeline parallelism, which Trainer does not do, the notes point
        # elsewhere). On this machine args.world_size is 1.
        dp = data_parallel(best_plan(named))
        view = types.SimpleNamespace(
            **{f.name: getattr(args, f.name) for f in dataclasses.fields(args)}, world_size=dp)
        hf = TrainerDeepSpeedConfig(ds)
        hf.trainer_config_process(view)
        assert hf.mismatches == [], "\n".join(hf.mismatches)
        # What TrainingArguments builds next: accelerate's DeepSpeedPlugin on that config.
        plugin = DeepSpeedPlugin(hf_ds_config=hf)
        assert plugin.zero_stage == ds["zero_optimization"]["stage"]
        assert plugin.gradient_accumulation_steps == args.gradient_accumulation_steps


@pytest.mark.parametrize("named", SCENARIOS)
def test_torchrun_flags_are_training_arguments(named, tmp_path, monkeypatch):
    text = export(named, "torchrun")
    cmd = " ".join(l for l in text.splitlines() if not l.startswith(("#", "export "))).replace("\\", " ")
    argv = shlex.split(cmd)
    assert argv[0] == "torchrun"
    assert any(a.startswith("--nproc_per_node=") for a in argv)
    script = argv.index("train.py")
    flags = [a[2:] for a in argv[script + 1:] if a.startswith("--")]
    assert flags and set(flags) <= FIELDS, set(flags) - FIELDS
    # HfArgumentParser (what transformers' example scripts use) reads them back, and the
    # TrainingArguments they make equal the trainer export's in every field it sets.
    ns = transformers.HfArgumentParser(transformers.TrainingArguments).parse_args(argv[script + 1:])
    kw = trainer_kwargs(export(named, "trainer"))
    assert ns.deepspeed == kw.get("deepspeed")
    monkeypatch.chdir(tmp_path)
    from_flags = construct_training_arguments(vars(ns))
    from_kwargs = construct_training_arguments(kw)
    for k in kw:
        if k != "deepspeed":
            assert getattr(from_flags, k) == getattr(from_kwargs, k), k
    assert from_flags.fsdp_plugin_args == from_kwargs.fsdp_plugin_args


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
def test_accelerate_config(named, tmp_path, monkeypatch):
    text = export(named, "accelerate")
    path = tmp_path / "accelerate_config.yaml"
    path.write_text(text)
    raw = yaml.safe_load(text)
    # accelerate's own loader: a LOCAL_MACHINE file becomes a ClusterConfig; a key that is not
    # one of its fields raises ValueError, and distributed_type becomes a DistributedType.
    cfg = load_config_from_file(str(path))
    assert type(cfg) is ClusterConfig
    assert cfg.distributed_type in DISTRIBUTED_TYPES
    # `accelerate launch` copies each fsdp_config/deepspeed_config key onto its own arguments
    # with setattr, unchecked (commands/launch.py): a key that is not a launch flag is ignored.
    parser = launch_command_parser()
    launch_flags = set(vars(parser.parse_args(["train.py"])))
    for section in ("fsdp_config", "deepspeed_config"):
        assert set(raw.get(section, {})) <= launch_flags, (section, set(raw[section]) - launch_flags)

    # `accelerate launch --config_file accelerate_config.yaml train.py` up to the launch: its
    # argument checks, the environment it hands the script, and the plugin the script's
    # Accelerator builds from that environment (what the YAML's values turn into).
    (tmp_path / "ds_config.json").write_text(export(named, "deepspeed"))
    monkeypatch.chdir(tmp_path)
    args, defaults, mp_from_config = _validate_launch_command(
        parser.parse_args(["--config_file", str(path), "train.py"]))
    best = best_plan(named)
    assert args.num_processes == best["gpus"]
    assert args.mixed_precision in {p.value for p in PrecisionType}
    kw = trainer_kwargs(export(named, "trainer"))
    ds = json.loads(export(named, "deepspeed"))
    if cfg.distributed_type == DistributedType.DEEPSPEED:
        assert args.use_deepspeed
        # As launch_command does before deepspeed_launcher (which itself needs deepspeed).
        fields = list(defaults.deepspeed_config) + (["mixed_precision"] if mp_from_config else [])
        args.deepspeed_fields_from_accelerate_config = ",".join(fields)
        _, env = accelerate_launch.prepare_deepspeed_cmd_env(args)
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        # Reads ds_config.json; raises if the YAML also sets what the file must carry (mixed
        # precision, accumulation, clipping, ZeRO stage, offload).
        plugin = DeepSpeedPlugin()
        zero = ds["zero_optimization"]
        assert plugin.zero_stage == zero["stage"]
        # accelerate turns the flag off, with a warning, unless the stage is 3.
        assert plugin.zero3_init_flag == raw["deepspeed_config"]["zero3_init_flag"]
        assert plugin.offload_optimizer_device == zero.get("offload_optimizer", {}).get("device", "none")
        assert plugin.offload_param_device == zero.get("offload_param", {}).get("device", "none")
        assert plugin.deepspeed_config["train_micro_batch_size_per_gpu"] == kw["per_device_train_batch_size"]
    else:
        # Mixed precision comes from the YAML: the trainer export's.
        assert args.mixed_precision == ("bf16" if kw.get("bf16") else "fp16" if kw.get("fp16") else "no")
        if cfg.distributed_type == DistributedType.NO:
            _, env = accelerate_launch.prepare_simple_launcher_cmd_env(args)
        else:
            env = accelerate_launch.prepare_multi_gpu_env(args)
        assert env["ACCELERATE_MIXED_PRECISION"] == args.mixed_precision
    if cfg.distributed_type == DistributedType.FSDP:
        assert args.use_fsdp and env["ACCELERATE_USE_FSDP"] == "true"
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        plugin = FullyShardedDataParallelPlugin()
        assert plugin.fsdp_version == 2
        (cls,) = plugin.transformer_cls_names_to_wrap
        assert layer_class_exists(cls), cls
        # The same FSDP2 setup as the trainer export's fsdp_config.
        fc = kw["fsdp_config"]
        assert [cls] == fc["transformer_layer_cls_to_wrap"]
        assert plugin.reshard_after_forward == fc["reshard_after_forward"]
        assert plugin.activation_checkpointing == fc["activation_checkpointing"]
        # FSDP2: CPUOffloadPolicy to offload, OffloadPolicy() (a no-op) otherwise.
        assert isinstance(plugin.cpu_offload, CPUOffloadPolicy) == fc["cpu_offload"]
    assert cfg.num_processes * ds["train_micro_batch_size_per_gpu"] * ds["gradient_accumulation_steps"] >= ds["train_batch_size"]


@pytest.mark.parametrize("named", SCENARIOS)
def test_deepspeed_json_batch_identity(named):
    ds = json.loads(export(named, "deepspeed"))
    best = best_plan(named)
    dp = data_parallel(best)
    # DeepSpeed: train_batch_size = micro-batch per GPU x accumulation x data-parallel GPUs.
    assert ds["train_batch_size"] == ds["train_micro_batch_size_per_gpu"] * ds["gradient_accumulation_steps"] * dp
    assert ds["train_micro_batch_size_per_gpu"] == best["micro_batch"]


@pytest.mark.parametrize("named", SCENARIOS)
def test_env_exports(named):
    for line in export(named, "env").splitlines():
        if line and not line.startswith("#"):
            assert re.fullmatch(r"export [A-Z_]+=[A-Za-z0-9_:,.]+", line), line


def _one_preset_per_model_type():
    import tomllib
    models = ROOT / "content" / "models"
    seen = {}
    for p in tomllib.loads((models / "presets.toml").read_text())["preset"]:
        t = json.loads((models / f"{p['id']}.json").read_text())["model_type"]
        seen.setdefault(t, p["id"])
    return sorted(seen.values())


@pytest.mark.parametrize("preset", _one_preset_per_model_type())
def test_each_architectures_layer_class_exists(preset):
    """The decoder-layer class an FSDP2 export wraps is transformers' own, for every model_type."""
    # DeepSeek-V3's 671B parameters need more than 8 H100s even sharded (1.3 TB of bf16 weights).
    gpus = "64" if preset == "deepseek-v3" else "8"
    out = subprocess.run([BIN, "plan", "--model", preset, "--gpus", gpus, "--gpu", "h100-sxm-80gb",
                          "--export", "fsdp2"], capture_output=True, text=True, check=True).stdout
    m = re.search(r"\b(\w+(?:DecoderLayer|Block|Layer))\b", out)
    assert m and layer_class_exists(m.group(1)), out[:400]
