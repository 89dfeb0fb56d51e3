"""What prewarmed.py's fork server imports once, before it forks a child for each script: the
modules the exported training scripts and the FSDP measurements import (a module missing here
is skipped and the script imports it itself)."""
import atexit
import gc
import importlib

for _name in [
    "torch", "torch.distributed", "torch.distributed.fsdp", "torch.distributed.device_mesh",
    "torch.distributed.checkpoint.state_dict", "torch.profiler", "torch.testing._internal.distributed.fake_pg",
    "transformers", "transformers.trainer", "transformers.training_args", "transformers.modeling_layers",
    "transformers.models.llama.modeling_llama", "peft", "accelerate", "bitsandbytes",
    "measure_peak", "measure_peft", "measure_saved",
]:
    try:
        importlib.import_module(_name)
    except Exception:  # noqa: BLE001 - the script then imports it (and fails) itself
        pass

# What is imported lives as long as the server; frozen, no collection in a child walks it.
gc.collect()
gc.freeze()
# Released again when the server ends, so that the bindings that count their objects at exit
# (nanobind's, in triton) see them go.
atexit.register(gc.unfreeze)
