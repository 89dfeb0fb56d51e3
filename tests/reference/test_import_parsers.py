"""The imported configs read by their own frameworks' parsers (issue 32, item 1).

Headroom imports DeepSpeed JSONs and accelerate configs (`headroom estimate --import FILE`);
the files are the projects' own examples (crates/headroom-core/tests/import_configs, each cited
in SOURCES.md). Here each is read again by the code that reads it in a real run, on CPU:
DeepSpeed's pydantic `DeepSpeedZeroConfig` (deepspeed/runtime/zero/config.py) for the ZeRO stage
and where the optimizer states and the parameters are offloaded, and accelerate's
`load_config_from_file` (commands/config/config_args.py) for the launcher's processes, its
distributed type, FSDP's version (1 when the file names none, as accelerate's FSDP plugin
defaults) and its offload. What Headroom imported (its link) must say the same.

Not here: axolotl's, LLaMA-Factory's and torchtitan's own parsers (not in the reference
environment). TRL's files are read by TRL's own parser in test_import_trl.py.
"""
import json
import pathlib
import subprocess
import urllib.parse

import pytest
from accelerate.commands.config.config_args import load_config_from_file
from accelerate.utils import DistributedType
from deepspeed.runtime.zero.config import DeepSpeedZeroConfig

import published

CONFIGS = pathlib.Path(__file__).parent.parent.parent / "crates/headroom-core/tests/import_configs"
DEEPSPEED = sorted(p.relative_to(CONFIGS).as_posix() for p in CONFIGS.glob("*/*.json"))
ACCELERATE = ["llamafactory/fsdp_config.yaml", "trl/deepspeed_zero3.yaml", "trl/fsdp1.yaml", "trl/fsdp2.yaml",
              "trl/fsdp_qlora.yaml", "trl/multi_gpu.yaml"]


def imported(path):
    """The link fields Headroom imported from `path` (one value per key)."""
    out = subprocess.run([published.BIN, "estimate", "--no-replay", "--import", str(CONFIGS / path), "--format",
                          "json"], capture_output=True, text=True)
    assert out.returncode == 0, f"{path}: headroom exited {out.returncode}: {out.stderr}"
    link = json.loads(out.stdout)["link"]
    return {k: v[0] for k, v in urllib.parse.parse_qs(link.lstrip("?")).items()}


def offload(device):
    """An offload device as Headroom's link names it (absent: none)."""
    device = getattr(device, "value", device)
    return None if device in (None, "none") else device


def test_every_deepspeed_file_is_checked():
    assert len(DEEPSPEED) == 5, DEEPSPEED


@pytest.mark.parametrize("path", DEEPSPEED)
def test_deepspeeds_own_zero_config_reads_what_headroom_imported(path):
    zero = json.loads((CONFIGS / path).read_text()).get("zero_optimization", {})
    # "auto" is filled by transformers' integration from the model and the arguments before
    # DeepSpeed sees it; DeepSpeed's defaults stand in for them (none of them moves a stage or an
    # offload).
    ds = DeepSpeedZeroConfig(**{k: v for k, v in zero.items() if v != "auto"})
    got = imported(path)
    assert got.get("dp", "ddp") == (f"zero{ds.stage}" if ds.stage else "ddp")
    assert got.get("opt_offload") == offload(ds.offload_optimizer and ds.offload_optimizer.device)
    assert got.get("param_offload") == offload(ds.offload_param and ds.offload_param.device)


@pytest.mark.parametrize("path", ACCELERATE)
def test_accelerates_own_config_loader_reads_what_headroom_imported(path):
    cfg = load_config_from_file(str(CONFIGS / path))
    got = imported(path)
    assert int(got.get("gpus", 1)) == cfg.num_processes
    if cfg.distributed_type == DistributedType.FSDP:
        fsdp = cfg.fsdp_config
        assert got.get("dp") == "fsdp"
        assert (got.get("fsdp1") == "1") == (fsdp.get("fsdp_version", 1) == 1)
        # FSDP's CPUOffload moves the parameters and their gradients, so the optimizer steps on
        # the CPU too: both offloads.
        cpu = "cpu" if fsdp.get("fsdp_offload_params") else None
        assert (got.get("opt_offload"), got.get("param_offload")) == (cpu, cpu)
    elif cfg.distributed_type == DistributedType.DEEPSPEED:
        ds = cfg.deepspeed_config
        assert got.get("dp") == f"zero{ds['zero_stage']}"
        assert got.get("opt_offload") == offload(ds.get("offload_optimizer_device"))
        assert got.get("param_offload") == offload(ds.get("offload_param_device"))
    else:
        assert cfg.distributed_type == DistributedType.MULTI_GPU
        assert got.get("dp", "ddp") == "ddp"
