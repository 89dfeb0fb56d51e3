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
import sys
import types
import typing

import pytest
import torch
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

import prewarmed

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
    # Every plan, as the tests were written for: plan 1 of the whole list and its offered files.
    return [BIN, "plan", "--named", named, "--stack", "any", *extra]


def export(named, target):
    """The best plan's export for `target`; pytest.skip-free: a target the plan does not offer is
    checked to be refused by the CLI, and the caller gets None."""
    training = ["--training"] if named in TRAINING_ONLY else []
    out = subprocess.run(
        [*plan_args(named), "--export", target, *training],
        capture_output=True, text=True,
    )
    if target not in best_targets(named):
        # A target that would run another plan is not offered (issue 16 §1): the CLI refuses it
        # and says why.
        assert out.returncode != 0 and "cannot be written as" in out.stderr, (target, out.stderr)
        return None
    assert out.returncode == 0, out.stderr
    return out.stdout


def best_targets(named):
    plan = json.loads(subprocess.run([*plan_args(named), "--format", "json"],
                                     capture_output=True, text=True, check=True).stdout)
    plans = plan["planning"]["training_plans" if named in TRAINING_ONLY else "plans"]
    return plans[0]["targets"]


MODEL_TYPES = ["llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gemma",
               "gemma2", "gemma3", "phi3", "gpt2", "gpt_neox", "opt", "granite", "smollm3", "olmo2",
               "olmo3", "glm4", "cohere2", "starcoder2", "granitemoe", "glm4_moe", "gpt_oss",
               "deepseek_v2", "deepseek_v3", "qwen2_5_vl", "qwen3_vl", "mistral3", "llama4",
               "qwen3_next", "qwen3_5", "qwen3_5_moe"]


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
    text = export(named, "trainer")
    if text is None:
        return
    kw = trainer_kwargs(text)
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
    if text is None:
        return
    cmd = " ".join(l for l in text.splitlines() if not l.startswith(("#", "export "))).replace("\\", " ")
    argv = shlex.split(cmd)
    assert argv[0] == "torchrun"
    assert any(a.startswith("--nproc_per_node=") for a in argv)
    # The plan's Trainer script by default (SCRIPT overrides it).
    script = argv.index("${SCRIPT:-training_args.py}")
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
    if text is None:
        return
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
    if text is None:
        return
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
    ds_text = export(named, "deepspeed")  # offered for ZeRO plans only
    if ds_text is not None:
        (tmp_path / "ds_config.json").write_text(ds_text)
    monkeypatch.chdir(tmp_path)
    args, defaults, mp_from_config = _validate_launch_command(
        parser.parse_args(["--config_file", str(path), "train.py"]))
    best = best_plan(named)
    assert args.num_processes == best["gpus"]
    assert args.mixed_precision in {p.value for p in PrecisionType}
    kw = trainer_kwargs(export(named, "trainer"))
    ds = json.loads(ds_text) if ds_text is not None else None
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
    if ds is not None:
        assert cfg.num_processes * ds["train_micro_batch_size_per_gpu"] * ds["gradient_accumulation_steps"] == ds["train_batch_size"]
    else:
        assert cfg.num_processes * kw["per_device_train_batch_size"] * kw["gradient_accumulation_steps"] == best["micro_batch"] * best["grad_accum"] * data_parallel(best)


@pytest.mark.parametrize("named", SCENARIOS)
def test_deepspeed_json_batch_identity(named):
    text = export(named, "deepspeed")
    if text is None:
        return
    ds = json.loads(text)
    best = best_plan(named)
    dp = data_parallel(best)
    # DeepSpeed: train_batch_size = micro-batch per GPU x accumulation x data-parallel GPUs.
    assert ds["train_batch_size"] == ds["train_micro_batch_size_per_gpu"] * ds["gradient_accumulation_steps"] * dp
    assert ds["train_micro_batch_size_per_gpu"] == best["micro_batch"]


@pytest.mark.parametrize("named", SCENARIOS)
def test_env_exports(named):
    for line in export(named, "env").splitlines():  # env.sh is offered for every plan
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
def test_each_architectures_layer_class_exists(preset, tmp_path):
    """The decoder-layer class an FSDP2 export wraps is transformers' own, for every model_type."""
    # The fastest plan of a large or MoE model may be DeepSpeed's, tensor- or expert-parallel,
    # which the FSDP2 script does not write (gemma-2-9b, qwen3-30b-a3b, mistral-small-3.1-24b):
    # then FSDP2 without tensor or expert parallelism (`--keep tp` keeps tp = ep = 1), and for
    # the largest (DeepSeek-V3's 671B, Mixtral, GLM-4.5-Air, Llama 4 Scout) on 64 GPUs in bf16.
    base = [BIN, "plan", "--model", preset, "--gpu", "h100-sxm-80gb", "--export", "fsdp2"]
    attempts = [["--gpus", "8"], ["--gpus", "8", "--dp", "fsdp", "--keep", "tp,dp"],
                ["--gpus", "64", "--precision", "bf16", "--dp", "fsdp", "--keep", "tp,dp"]]
    for extra in attempts:
        run = subprocess.run([*base, *extra], capture_output=True, text=True)
        if run.returncode == 0:
            break
    if run.returncode != 0:
        # DeepSeek-V3: one MoE layer is 11B parameters, so FSDP2 without expert parallelism
        # gathers more than an H100 holds on any number of GPUs. The layer class depends on the
        # model_type only: the same config with two layers and eight experts.
        config = json.loads((ROOT / "content" / "models" / f"{preset}.json").read_text())
        config.update(num_hidden_layers=2, first_k_dense_replace=1, n_routed_experts=8, n_group=1,
                      topk_group=1, num_experts_per_tok=2)
        small = tmp_path / "config.json"
        small.write_text(json.dumps(config))
        run = subprocess.run([BIN, "plan", "--model", str(small), "--gpu", "h100-sxm-80gb", "--gpus", "8",
                              "--export", "fsdp2"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    out = run.stdout
    m = re.search(r"\b(\w+(?:DecoderLayer|Block|Layer))\b", out)
    assert m and layer_class_exists(m.group(1)), out[:400]


# --- Dry runs (issue 16 §1): each export is run, not only parsed ---------------------------------
#
# The FSDP2 script and training_args.py carry a dry run (HEADROOM_DRY_RUN=config.json): the model
# is built as the export builds it, on the meta device from the preset's config.json (no weights),
# LoRA applied by peft, and the FSDP2 wrapping done for every rank through PyTorch's fake process
# group; the script asserts its batch arithmetic against the world size and prints what it built.
# Those figures are compared with the estimate of the same plan (`headroom estimate --link`): the
# `weights` component's bytes, the trainable-parameter count in the `gradients` formula. bitsandbytes
# (QLoRA's 4-bit weights, 8-bit optimizers) and Liger's kernels need CUDA: their configuration is
# built and checked, the quantized bytes are not.

# Scenarios beyond the worked examples, as CLI flags for `headroom plan`: LoRA, QLoRA, FSDP2 with
# and without offload, ZeRO-2 and ZeRO-3 with optimizer and parameter offload.
KEEP = ["--keep", "dp,offload,tp"]
DRY_CASES = {
    **{n: ["--named", n] for n in SCENARIOS},
    "lora-4090": ["--named", "llama-3.1-8b-lora-4090"],
    "qlora-t4": ["--named", "mistral-7b-qlora-t4"],
    "lora8-4090": ["--named", "llama-3.1-8b-lora-4090", "--method", "lora8"],
    "lora-fsdp2-2gpu": ["--named", "llama-3.1-8b-lora-4090", "--gpus", "2", "--dp", "fsdp", *KEEP],
    "fsdp2-8xh100": ["--model", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--gpus", "8", "--dp", "fsdp", *KEEP],
    "fsdp2-offload-4xa10g": ["--model", "llama-3.2-3b", "--gpu", "a10g-24gb", "--gpus", "4", "--dp", "fsdp",
                             "--opt-offload", "cpu", "--param-offload", "cpu", *KEEP],
    "zero2-optoffload-4xa100": ["--model", "llama-3.1-8b", "--gpu", "a100-sxm4-40gb", "--gpus", "4", "--dp", "zero2",
                                "--opt-offload", "cpu", "--precision", "amp-bf16", *KEEP],
    "zero3-offload-8xa100": ["--model", "llama-3.1-8b", "--gpu", "a100-sxm4-40gb", "--gpus", "8", "--dp", "zero3",
                             "--opt-offload", "cpu", "--param-offload", "cpu", "--precision", "amp-bf16", *KEEP],
    "zero3-4xa10g": ["--named", "ex3-llama-3.2-1b-4xa10g-zero3", *KEEP],
    # fp8 (torchao): only the FSDP2 script writes it; tensorwise with FSDP2's fp8 all-gather, and
    # rowwise on one GPU.
    "fp8-fsdp2-8xh100": ["--model", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--gpus", "8", "--dp", "fsdp",
                         "--fp8", "tensorwise", "--ckpt", "full", *KEEP],
    "fp8-rowwise-1xh100": ["--model", "llama-3.2-1b", "--gpu", "h100-sxm-80gb", "--fp8", "rowwise", *KEEP],
}


def case_plan(case):
    # Every plan (the list the cases were chosen on): plan 1 of it and its files.
    args = [*DRY_CASES[case], "--stack", "any"]
    named = args[1] if args[0] == "--named" else None
    extra = ["--allow-training-changes"] if named in TRAINING_ONLY else []
    out = json.loads(subprocess.run([BIN, "plan", *args, *extra, "--format", "json"],
                                    capture_output=True, text=True, check=True).stdout)
    plans = out["planning"]["training_plans" if named in TRAINING_ONLY else "plans"]
    assert plans, f"{case}: no plan fits"
    return plans[0], [*args, *extra, *(["--training"] if named in TRAINING_ONLY else [])]


def case_export(args, target):
    return subprocess.run([BIN, "plan", *args, "--export", target],
                          capture_output=True, text=True, check=True).stdout


def components(link):
    est = json.loads(subprocess.run([BIN, "estimate", "--link", link, "--format", "json"],
                                    capture_output=True, text=True, check=True).stdout)
    return {c["id"]: c for c in est["components"]}


def model_config(scenario):
    (preset,) = scenario["model"].values()
    path = ROOT / "content" / "models" / f"{preset}.json"
    assert path.exists(), path
    return path


def dry_run(text, config, tmp_path, name):
    script = tmp_path / name
    script.write_text(text)
    # As `python script` would, forked from a process that has imported torch and transformers.
    out = prewarmed.run(script, env={**os.environ, "HEADROOM_DRY_RUN": str(config)}, cwd=tmp_path, timeout=600)
    assert out.returncode == 0, out.stderr[-4000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def trainable_in_formula(c):
    """The trainable-parameter count the estimate's `gradients` formula starts with."""
    m = re.match(r"(\d+) trainable params", c["formula"])
    return int(m.group(1)) if m else None


def check_model_side(rep, sc, comps, config, rep_sharded):
    """What every dry run builds, against the estimate: LoRA, checkpointing, dtypes and bytes.

    `rep_sharded`: the report is one FSDP2 rank's shards (the script's dry run), not the whole
    model (training_args.py, which the Trainer shards later)."""
    layers = transformers.AutoConfig.from_pretrained(str(config)).num_hidden_layers
    total = sum(rep["param_bytes_by_dtype"].values())
    dp = data_parallel(sc)
    data = sc["parallel"]["data"]
    assert rep["devices"] == ["meta"]
    if sc["method"] in ("Lora", "Qlora", "Int8"):
        assert rep["lora"]["r"] == sc["lora"]["rank"] and rep["lora"]["modules"] > 0, rep["lora"]
    else:
        assert rep.get("lora") is None
    if sc["method"] == "Qlora":
        q = rep["quantization"]
        assert (q["load_in_4bit"], q["bnb_4bit_quant_type"], q["bnb_4bit_use_double_quant"]) == (True, "nf4", True), q
    if sc["method"] == "Int8":
        q = rep["quantization"]
        assert (q["load_in_8bit"], q["load_in_4bit"]) == (True, False), q
    # The trainable parameters the estimate counts (its formula names the whole model's).
    n = trainable_in_formula(comps["gradients"])
    if n is not None:
        assert rep["trainable_params"] * (dp if rep_sharded else 1) == n, (rep["trainable_params"], n)
    # The weights' bytes as estimated, per GPU: FSDP2 shards them over the data-parallel ranks
    # (ZeRO-3 pads each partition, QLoRA's NF4 bytes need bitsandbytes: neither compared here).
    w = comps["weights"]["bytes"]
    if sc["method"] not in ("Qlora", "Int8") and w > 0 and data != "Zero3":
        want = w * dp if data == "Fsdp" and not rep_sharded else w
        assert total == want, (rep["param_bytes_by_dtype"], w, comps["weights"]["formula"])
    # The weights' dtype the estimate names.
    m = re.search(r"\((float32|bfloat16|float16)\)", comps["weights"]["formula"])
    if m and sc["method"] == "Full":
        assert set(rep["param_bytes_by_dtype"]) == {f"torch.{m.group(1)}"}, rep["param_bytes_by_dtype"]
    return layers


@pytest.mark.parametrize("case", sorted(DRY_CASES))
def test_fsdp2_script_dry_run(case, tmp_path):
    best, args = case_plan(case)
    if "fsdp2" not in best["targets"]:
        out = subprocess.run([BIN, "plan", *args, "--export", "fsdp2"], capture_output=True, text=True)
        assert out.returncode != 0 and "cannot be written as train_fsdp2.py" in out.stderr, out.stderr
        return
    sc = best["scenario"]
    config = model_config(sc)
    rep = dry_run(case_export(args, "fsdp2"), config, tmp_path, "train_fsdp2.py")
    dp = data_parallel(sc)
    # The batch the plan was estimated for: micro-batch x accumulation x data-parallel ranks.
    assert (rep["world_size"], rep["data_parallel"]) == (sc["gpus"], dp)
    assert (rep["micro_batch"], rep["accumulation"]) == (sc["micro_batch"], sc["grad_accum"])
    assert rep["global_batch"] == sc["micro_batch"] * sc["grad_accum"] * dp
    fsdp = sc["parallel"]["data"] == "Fsdp"
    comps = components(best["link"])
    # FSDP2's shards are this rank's: the estimate's per-GPU bytes.
    layers = check_model_side(rep, sc, comps, config, rep_sharded=fsdp)
    ck = sc["checkpointing"]
    want = layers if ck == "Full" else -(-layers // ck["Every"]) if isinstance(ck, dict) else 0
    assert rep["checkpointed_layers"] == want, (ck, rep["checkpointed_layers"])
    if fsdp:
        assert rep["fsdp_units"] == layers + 1
        half = {"AmpBf16": "torch.bfloat16", "Bf16": "torch.bfloat16", "AmpFp16": "torch.float16",
                "Fp16": "torch.float16", "Fp32": "None"}[sc["precision"]]
        assert rep["mp_param_dtype"] == half
        offload = sc["parallel"]["offload_params"] != "None"
        assert rep["offload"] == ("CPUOffloadPolicy" if offload else "NoneType")
        if offload:
            assert comps["weights"]["bytes"] == 0  # the estimate keeps them on the host too
    else:
        assert rep["autocast"] == sc["precision"].startswith("Amp")
    if rep["optimizer"] is not None:
        # The scenario's own optimizer class (bitsandbytes' are built on CPU too since the
        # reference venv installs it for test_peft.py).
        want = {"AdamW8bit": "AdamW8bit", "PagedAdamW8bit": "PagedAdamW8bit", "Lion": "Lion",
                "Adafactor": "Adafactor", "Sgd": "SGD", "SgdMomentum": "SGD"}.get(sc["optimizer"], "AdamW")
        assert rep["optimizer"] == want, (rep["optimizer"], sc["optimizer"])
    check_fp8(rep, sc, best["link"], config)


def check_fp8(rep, sc, link, config):
    """fp8 plans: torchao converted the Linears the estimate says it converts (its share of the
    decoder layers' Linear weights, printed to 0.1%), and nothing without fp8."""
    if sc.get("fp8", "Off") == "Off":
        assert "fp8_linear_params" not in rep
        return
    est = json.loads(subprocess.run([BIN, "estimate", "--link", link, "--format", "json"],
                                    capture_output=True, text=True, check=True).stdout)
    share = float(re.search(r"fp8 for ([\d.]+)% of the decoder layers' Linear weights", est["fp8"]).group(1))
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(
            transformers.AutoConfig.from_pretrained(str(config)))
    decoder = sum(m.weight.numel() for n, m in model.named_modules()
                  if isinstance(m, torch.nn.Linear) and not n.endswith("lm_head"))
    assert rep["fp8_linear_params"] > 0
    assert round(100 * rep["fp8_linear_params"] / decoder, 1) == share, (rep["fp8_linear_params"], decoder, share)


class DataParallelMpu:
    """What DeepSpeed asks an `mpu` for: the data-parallel world size."""

    def __init__(self, dp):
        self.dp = dp

    def get_data_parallel_world_size(self):
        return self.dp


@pytest.mark.parametrize("case", sorted(DRY_CASES))
def test_trainer_dry_run_and_deepspeed_start_up(case, tmp_path, monkeypatch):
    best, args = case_plan(case)
    sc = best["scenario"]
    for target in ("trainer", "deepspeed"):
        if target not in best["targets"]:
            out = subprocess.run([BIN, "plan", *args, "--export", target], capture_output=True, text=True)
            assert out.returncode != 0 and "cannot be written as" in out.stderr, out.stderr
    if "trainer" not in best["targets"]:
        return
    text = case_export(args, "trainer")
    config = model_config(sc)
    rep = dry_run(text, config, tmp_path, "training_args.py")
    comps = components(best["link"])
    check_model_side(rep, sc, comps, config, rep_sharded=False)
    kw = trainer_kwargs(text)
    dp = data_parallel(sc)
    assert kw["per_device_train_batch_size"] * kw["gradient_accumulation_steps"] * dp == \
        sc["micro_batch"] * sc["grad_accum"] * dp
    # Precision flags as the plan's precision.
    p = sc["precision"]
    assert (kw.get("bf16", False), kw.get("fp16", False)) == (p in ("Bf16", "AmpBf16"), p in ("Fp16", "AmpFp16"))
    ck = sc["checkpointing"]
    fsdp = sc["parallel"]["data"] == "Fsdp"
    if fsdp:
        assert kw["fsdp_config"]["activation_checkpointing"] == (ck == "Full")
        assert kw["fsdp_config"]["cpu_offload"] == (sc["parallel"]["offload_params"] != "None")
        assert kw["fsdp_config"]["cpu_ram_efficient_loading"] is True
    else:
        assert kw.get("activation_checkpointing", False) == (ck != "None")
    if "deepspeed" not in best["targets"]:
        assert "deepspeed" not in kw
        return
    # DeepSpeed's own start-up check of ds_config.json for the plan's data-parallel world: batch
    # identity (train_batch_size = micro x accumulation x world), ZeRO and offload sections
    # (pydantic models that reject unknown keys), precision.
    import deepspeed.runtime.config as dsc

    ds = json.loads(case_export(args, "deepspeed"))
    monkeypatch.setattr(dsc.dist, "get_rank", lambda *a, **k: 0)
    cfg = dsc.DeepSpeedConfig(ds, mpu=DataParallelMpu(dp))
    assert cfg.world_size == dp
    assert (cfg.train_batch_size, cfg.train_micro_batch_size_per_gpu, cfg.gradient_accumulation_steps) == \
        (sc["micro_batch"] * sc["grad_accum"] * dp, sc["micro_batch"], sc["grad_accum"])
    stage = {"Zero1": 1, "Zero2": 2, "Zero3": 3}[sc["parallel"]["data"]]
    assert cfg.zero_optimization_stage == stage
    off = {"None": None, "Cpu": "cpu", "Nvme": "nvme"}
    opt = cfg.zero_config.offload_optimizer
    par = cfg.zero_config.offload_param
    # The devices are a str enum, stored as plain strings (use_enum_values).
    device = lambda o: None if o is None or str(getattr(o.device, "value", o.device)) == "none" \
        else str(getattr(o.device, "value", o.device))
    assert device(opt) == off[sc["parallel"]["offload_optimizer"]], opt
    assert device(par) == off[sc["parallel"]["offload_params"]], par
    assert (cfg.bfloat16_config.enabled, cfg.float16_config.enabled) == \
        (p in ("Bf16", "AmpBf16"), p in ("Fp16", "AmpFp16"))
    # transformers' TrainingArguments-vs-DeepSpeed check for the same world (Trainer raises on
    # any mismatch).
    monkeypatch.chdir(tmp_path)
    args_ = construct_training_arguments(kw)
    view = types.SimpleNamespace(
        **{f.name: getattr(args_, f.name) for f in dataclasses.fields(args_)}, world_size=dp)
    hf = TrainerDeepSpeedConfig(ds)
    hf.trainer_config_process(view)
    assert hf.mismatches == [], "\n".join(hf.mismatches)


@pytest.mark.parametrize("dp", ["ddp", "fsdp"])
def test_transformer_engine_goes_through_accelerates_launch(dp, tmp_path, monkeypatch):
    """fp8=te as accelerate's config writes it: `accelerate launch` reads mixed_precision fp8
    and the fp8_config keys onto its `--fp8_*` arguments, and hands the script the environment
    its TERecipeKwargs reads (TE itself is not installed here, so the recipe object is not
    built): HYBRID, 1024 amax values, most_recent, the recipe Headroom estimates."""
    from accelerate.utils.dataclasses import AmaxComputeAlgorithm, FP8Format
    from accelerate.utils.launch import setup_fp8_env

    link = f"model=llama-3.2-1b&gpu=h100&gpus=8&precision=bf16&fp8=te&dp={dp}&ckpt=full"
    out = subprocess.run([BIN, "plan", "--link", link, "--keep", "dp,ckpt,precision", "--export", "accelerate"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    path = tmp_path / "accelerate_config.yaml"
    path.write_text(out.stdout)
    assert type(load_config_from_file(str(path))) is ClusterConfig
    monkeypatch.chdir(tmp_path)
    args, _, _ = _validate_launch_command(launch_command_parser().parse_args(["--config_file", str(path), "train.py"]))
    assert args.mixed_precision == "fp8"
    env = setup_fp8_env(args, {})
    assert env["ACCELERATE_FP8_BACKEND"] == "TE"
    assert env["ACCELERATE_FP8_FORMAT"] in typing.get_args(FP8Format) and env["ACCELERATE_FP8_FORMAT"] == "HYBRID"
    assert env["ACCELERATE_FP8_AMAX_COMPUTE_ALGO"] in typing.get_args(AmaxComputeAlgorithm)
    assert env["ACCELERATE_FP8_AMAX_HISTORY_LEN"] == "1024"
    # The other targets refuse it, naming accelerate.
    for target in ("trainer", "fsdp2"):
        out = subprocess.run([BIN, "plan", "--link", link, "--keep", "dp,ckpt,precision", "--export", target],
                             capture_output=True, text=True)
        assert out.returncode != 0 and "accelerate" in out.stderr, out.stderr


WORDS = ["[UNK]", "[PAD]", "the", "run", "fits", "on", "one", "gpu", "memory", "peak"]


def tiny_model(model_dir):
    """A two-layer Llama with random weights and a word-level tokenizer of WORDS, saved to disk."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    transformers.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]",
                                         eos_token="[PAD]").save_pretrained(model_dir)
    cfg = transformers.LlamaConfig(vocab_size=len(WORDS), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(cfg).save_pretrained(model_dir)
    return model_dir


def test_trainer_script_trains_on_cpu(tmp_path):
    """training_args.py is a complete script (issue 34 §2): given a model and a JSON-lines file of
    {"text": ...} records, `python training_args.py` tokenizes, collates and trains with the
    plan's TrainingArguments, the data the only thing filled in. Here the model is a two-layer
    Llama with random weights and a word-level tokenizer saved to disk, trained on the CPU (the
    plan keeps the transformers loss: Liger's needs CUDA)."""
    text = subprocess.run([BIN, "plan", "--model", "llama-3.2-1b", "--keep", "dp,offload,ckpt,batch,precision,loss",
                           "--export", "trainer"], capture_output=True, text=True, check=True).stdout
    model_dir = tiny_model(tmp_path / "model")
    line = next(l for l in text.splitlines() if l.startswith("MODEL = "))
    script = tmp_path / "training_args.py"
    # The plan is a GPU's: on this CPU the Trainer is told use_cpu=True, the one other change.
    assert "args = TrainingArguments(\n" in text
    script.write_text(text.replace(line, f"MODEL = {str(model_dir)!r}")
                      .replace("args = TrainingArguments(\n", "args = TrainingArguments(\n    use_cpu=True,\n"))
    (tmp_path / "train.jsonl").write_text("".join(
        json.dumps({"text": " ".join(WORDS[2 + (i + j) % 8] for j in range(5 + i % 4))}) + "\n" for i in range(8)))
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    run = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    # Three epochs of eight one-row steps: the Trainer's own state says it trained them.
    state = json.loads(next((tmp_path / "out").glob("checkpoint-*/trainer_state.json")).read_text())
    assert state["global_step"] == 24 and state["max_steps"] == 24, state


# TRL's objectives (issue 31 §4): training_args.py builds TRL 1.16's trainer for each, with its
# config class, its rows and (GRPO, RLOO) a reward. Each case: the objective's flags, the trainer
# class the script builds, its sequence (prompt and completion for GRPO and RLOO).
TRL_CASES = {
    "dpo-full": (["--trainer", "dpo", "--method", "full", "--batch", "2"], "DPOTrainer"),
    "dpo-lora-precompute": (["--trainer", "dpo", "--method", "lora", "--batch", "2", "--precompute-ref-log-probs"],
                            "DPOTrainer"),
    "kto-full-precompute": (["--trainer", "kto", "--method", "full", "--batch", "2", "--precompute-ref-log-probs"],
                            "KTOTrainer"),
    "orpo-full": (["--trainer", "orpo", "--method", "full", "--batch", "2"], "ORPOTrainer"),
    "simpo-lora": (["--trainer", "simpo", "--method", "lora", "--batch", "2"], "CPOTrainer"),
    "grpo-lora-kl": (["--trainer", "grpo", "--method", "lora", "--batch", "4", "--prompt", "16", "--kl"],
                     "GRPOTrainer"),
    "rloo-full-kl-ckpt": (["--trainer", "rloo", "--method", "full", "--batch", "2", "--prompt", "16", "--kl",
                           "--checkpointing", "full"], "RLOOTrainer"),
}
TRL_SEQ = 48
TRL_COMMON = ["--model", "llama-3.2-1b", "--gpu", "h100-sxm-80gb", "--precision", "fp32", "--seq", str(TRL_SEQ)]

# Runs each script in one Python (TRL's import is most of a run's time) and records, when its
# trainer has trained, what it built: the class, the reference model, the arguments, the steps.
TRL_DRIVER = r'''
import json, os, runpy, sys
import transformers

records = {}
train = transformers.Trainer.train
KEYS = ["per_device_train_batch_size", "gradient_accumulation_steps", "bf16", "fp16", "activation_checkpointing",
        "max_length", "max_completion_length", "num_generations", "generation_batch_size", "beta",
        "precompute_ref_log_probs", "loss_type"]


def recording_train(self, *a, **k):
    out = train(self, *a, **k)
    records[CASE] = dict(cls=type(self).__name__, reference=getattr(self, "ref_model", None) is not None,
                         steps=self.state.global_step, args={key: getattr(self.args, key, None) for key in KEYS})
    return out


transformers.Trainer.train = recording_train
for CASE, folder in json.loads(sys.argv[1]).items():
    os.chdir(folder)
    os.environ["HEADROOM_DATA"] = os.path.join(folder, "train.jsonl")
    runpy.run_path(os.path.join(folder, "training_args.py"), run_name="__main__")
print("RECORDS " + json.dumps(records))
'''


def trl_rows(trainer):
    """Eight JSON lines in the format the trainer reads (TRL's dataset formats), from WORDS."""
    text = lambda i, n: " ".join(WORDS[2 + (i + j) % 8] for j in range(n))
    if trainer in ("grpo", "rloo"):
        return [{"prompt": text(i, 4)} for i in range(8)]
    if trainer == "kto":
        return [{"prompt": text(i, 4), "completion": " " + text(i + 3, 5), "label": i % 2 == 0} for i in range(8)]
    return [{"prompt": text(i, 4), "chosen": " " + text(i + 3, 5), "rejected": " " + text(i + 5, 6)} for i in range(8)]


def test_trl_scripts_build_and_train_on_cpu(tmp_path):
    """training_args.py for every TRL objective is a complete script: given a model and a JSON-lines
    file in the trainer's format, it builds TRL's trainer with the plan's config and trains (two
    steps here, on the CPU: use_cpu and max_steps are the only changes). What it built is the
    estimate's: the trainer class, a reference model exactly where the core holds a second copy of
    the weights (a full fine-tune without precomputed log-probabilities, or GRPO/RLOO with a KL
    term), the batch, fp32 stated against TRL's bf16 default, checkpointing as planned, the
    lengths, and GRPO's groups (num_generations dividing the generation batch, which is the
    micro-batch times the accumulation the core generates at once)."""
    model_dir = tiny_model(tmp_path / "model")
    folders = {}
    for case, (flags, _) in TRL_CASES.items():
        text = subprocess.run([BIN, "plan", *TRL_COMMON, *flags, "--keep", "dp,offload,ckpt,batch,precision,loss",
                               "--export", "trainer"], capture_output=True, text=True)
        assert text.returncode == 0, text.stderr
        text = text.stdout
        line = next(l for l in text.splitlines() if l.startswith("MODEL = "))
        head = next(l for l in text.splitlines() if l.startswith("args = ") and l.endswith("Config("))
        folder = tmp_path / case
        folder.mkdir()
        (folder / "training_args.py").write_text(
            text.replace(line, f"MODEL = {str(model_dir)!r}")
                .replace(head, head + "\n    use_cpu=True,\n    max_steps=2,\n    save_strategy=\"no\",\n    report_to=[],"))
        trainer = flags[flags.index("--trainer") + 1]
        (folder / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in trl_rows(trainer)))
        folders[case] = str(folder)
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    run = subprocess.run([sys.executable, "-c", TRL_DRIVER, json.dumps(folders)], env=env, capture_output=True,
                         text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-4000:]
    records = json.loads(next(l for l in run.stdout.splitlines() if l.startswith("RECORDS "))[len("RECORDS "):])
    for case, (flags, cls) in TRL_CASES.items():
        rec, args = records[case], records[case]["args"]
        e = json.loads(subprocess.run([BIN, "estimate", *TRL_COMMON, *flags, "--format", "json"], capture_output=True,
                                      text=True, check=True).stdout)
        method = flags[flags.index("--method") + 1]
        sft = json.loads(subprocess.run([BIN, "estimate", *TRL_COMMON, "--method", method, "--format", "json"],
                                        capture_output=True, text=True, check=True).stdout)
        batch = int(flags[flags.index("--batch") + 1])
        assert rec["cls"] == cls and rec["steps"] == 2, (case, rec)
        assert rec["reference"] == (e["bytes"]["weights"] == 2 * sft["bytes"]["weights"]), (case, rec)
        assert (args["per_device_train_batch_size"], args["gradient_accumulation_steps"]) == (batch, 1), (case, args)
        assert args["bf16"] is False and args["fp16"] is False, (case, args)
        assert args["activation_checkpointing"] == ("--checkpointing" in flags), (case, args)
        if "--prompt" in flags:
            prompt = int(flags[flags.index("--prompt") + 1])
            assert args["max_completion_length"] == TRL_SEQ - prompt, (case, args)
            assert args["generation_batch_size"] == batch and batch % args["num_generations"] == 0, (case, args)
            assert args["num_generations"] >= 2 and (args["beta"] > 0) == ("--kl" in flags), (case, args)
        else:
            assert args["max_length"] == TRL_SEQ, (case, args)
            assert args["precompute_ref_log_probs"] in (None, "--precompute-ref-log-probs" in flags), (case, args)
        if case.startswith("simpo"):
            assert args["loss_type"] == "simpo", (case, args)
