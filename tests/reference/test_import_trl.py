"""TRL's own parser reads the TRL files Headroom imports (issue 32, item 1), as `trl sft` and
`trl grpo` read them: `TrlParser` (trl/scripts/utils.py) fills ScriptArguments, the trainer's
config (SFTConfig or GRPOConfig, TRL 1.16) and ModelConfig from the YAML and the dataclasses'
defaults, and the config's `__post_init__` resolves what is left open (bf16: None becomes True
unless fp16). What Headroom imported (its link, each field at Headroom's default where the link
leaves it out) must say the same for every field that changes memory or time: the micro-batch,
accumulation, sequence, precision, checkpointing, optimizer, adapters and objective.

The files are TRL's own examples (crates/headroom-core/tests/import_configs/trl, cited in
SOURCES.md); the accelerate configs beside them are test_import_parsers.py's.
"""
import json
import pathlib
import subprocess
import urllib.parse

import pytest

import published

CONFIGS = pathlib.Path(__file__).parent.parent.parent / "crates/headroom-core/tests/import_configs/trl"
# Headroom's link omits a field at its default.
LINK_DEFAULTS = {"batch": "1", "accum": "1", "precision": "amp-bf16", "ckpt": "none", "optimizer": "adamw",
                 "method": "full", "trainer": "sft"}
# (file, the `trl` command that reads it)
FILES = [("example_config.yaml", "sft"), ("config.yaml", "grpo")]
# TRL's optimizer names (transformers' OptimizerNames) as Headroom's link names them.
OPTIMIZERS = {"adamw_torch_fused": "adamw-fused", "adamw_torch": "adamw", "adamw_8bit": "adamw8bit"}


def imported(path):
    out = subprocess.run([published.BIN, "estimate", "--no-replay", "--import", str(path), "--format", "json"],
                         capture_output=True, text=True)
    assert out.returncode == 0, f"{path.name}: headroom exited {out.returncode}: {out.stderr}"
    link = json.loads(out.stdout)["link"]
    fields = {k: v[0] for k, v in urllib.parse.parse_qs(link.lstrip("?")).items()}
    return {**LINK_DEFAULTS, **fields}


def trl_parsed(path, command, tmp_path):
    """(training arguments, model arguments) as `trl <command> --config path` parses them."""
    trl = pytest.importorskip("trl")
    config = {"sft": trl.SFTConfig, "grpo": trl.GRPOConfig}[command]
    parser = trl.TrlParser((trl.ScriptArguments, config, trl.ModelConfig))
    # Keys of the recipe's own script (NeMo-Gym's dataset_path, task, ...) are left over;
    # use_cpu only lets TrainingArguments accept bf16 on this CPU-only machine.
    _script, training, model, _rest = parser.parse_args_and_config(
        args=["--config", str(path), "--output_dir", str(tmp_path), "--use_cpu", "true"],
        return_remaining_strings=True)
    return training, model


@pytest.mark.parametrize("name,command", FILES)
def test_trls_own_parser_reads_what_headroom_imported(name, command, tmp_path):
    training, model = trl_parsed(CONFIGS / name, command, tmp_path)
    got = imported(CONFIGS / name)
    assert got["batch"] == str(training.per_device_train_batch_size), (got, training.per_device_train_batch_size)
    assert got["accum"] == str(training.gradient_accumulation_steps), got
    length = training.max_length if command == "sft" else training.max_completion_length
    assert got["seq"] == str(length), (got, length)
    assert got["ckpt"] == ("full" if training.gradient_checkpointing else "none"), got
    assert got["optimizer"] == OPTIMIZERS[str(getattr(training.optim, "value", training.optim))], got
    # bf16 autocast over the weights in ModelConfig's dtype (float32 unless the file says).
    assert training.bf16 and not training.fp16 and model.dtype == "float32", (training.bf16, model.dtype)
    assert got["precision"] == "amp-bf16", got
    assert got["method"] == ("lora" if model.use_peft else "full"), got
    assert got["trainer"] == command, got
    if command == "grpo":
        # GRPO's per-device batch counts completions; beta 0 keeps no reference model.
        assert training.beta == 0.0 and "ref" not in got, got
