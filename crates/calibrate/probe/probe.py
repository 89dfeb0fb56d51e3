"""Calibrate's PyTorch probe: real training steps on the GPU, memory measured per phase.

Shipped inside the `calibrate` binary (include_str!) and written to a temporary folder.

  python3 probe.py check                      one JSON line: the software stack, or why not
  python3 probe.py run SCENARIOS.json [--device cpu [--simulate-stats]]
                                              one JSON line per event, flushed as it goes:
                                              {"type": "workspace", ...} then one
                                              {"type": "row", ...} per scenario

A scenario that runs out of memory is recorded with status "oom" and the run goes on; any other
failure is recorded with status "error". `--device cpu` runs the same code without CUDA (all
memory figures 0); `--simulate-stats` adds made-up allocator counters so the measuring code
path runs too: calibrate's tests use both to check this script where no GPU exists.
"""
import gc
import json
import os
import platform
import sys
import time

MIB = 1 << 20


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


class Nvml:
    """Device memory this process uses, through NVML when pynvml is installed.

    Created before torch touches CUDA, so the whole-device baseline excludes this process.
    """

    def __init__(self, enabled):
        self.nv = None
        self.h = None
        self.baseline = 0
        self.kind = "none"
        if not enabled:
            return
        try:
            import pynvml

            pynvml.nvmlInit()
            first = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0].strip()
            if first.startswith("GPU-"):
                self.h = pynvml.nvmlDeviceGetHandleByUUID(first)
            else:
                self.h = pynvml.nvmlDeviceGetHandleByIndex(int(first) if first.isdigit() else 0)
            self.nv = pynvml
            self.baseline = pynvml.nvmlDeviceGetMemoryInfo(self.h).used
            self.kind = "pynvml"
        except Exception:
            self.nv = None
            self.h = None

    def driver(self):
        if self.nv is None:
            return None
        try:
            v = self.nv.nvmlSystemGetDriverVersion()
            return v.decode() if isinstance(v, bytes) else v
        except Exception:
            return None

    def used(self):
        """(bytes, method): device memory this process uses now."""
        import torch

        if self.nv is not None:
            try:
                for p in self.nv.nvmlDeviceGetComputeRunningProcesses(self.h):
                    if p.pid == os.getpid() and p.usedGpuMemory:
                        return int(p.usedGpuMemory), "nvml process used memory"
            except Exception:
                pass
            try:
                info = self.nv.nvmlDeviceGetMemoryInfo(self.h)
                return int(info.used - self.baseline), "nvml device used minus the used before this process touched CUDA"
            except Exception:
                pass
        free, total = torch.cuda.mem_get_info()
        return int(total - free), "torch.cuda.mem_get_info total minus free (whole device, other processes included)"


class CudaStats:
    """The caching allocator's counters, from torch.cuda."""

    def __init__(self):
        import torch

        self.c = torch.cuda

    def sync(self):
        self.c.synchronize()

    def reset_peak(self):
        self.c.reset_peak_memory_stats()

    def allocated(self):
        return self.c.memory_allocated()

    def reserved(self):
        return self.c.memory_reserved()

    def max_allocated(self):
        return self.c.max_memory_allocated()

    def max_reserved(self):
        return self.c.max_memory_reserved()

    def retries(self):
        return int(self.c.memory_stats().get("num_alloc_retries", 0))

    def empty_cache(self):
        self.c.empty_cache()


class SimulatedStats:
    """Counters that move deterministically: runs the measuring code path on CPU, where
    torch.cuda has no allocator (`--simulate-stats`, used by calibrate's tests)."""

    def __init__(self):
        self.n = 0

    def _next(self, scale):
        self.n += 1
        return (self.n % 7 + 1) * scale

    def sync(self):
        pass

    def reset_peak(self):
        pass

    def allocated(self):
        return self._next(MIB)

    def reserved(self):
        return self._next(2 * MIB) + 8 * MIB

    def max_allocated(self):
        return self._next(MIB) + 8 * MIB

    def max_reserved(self):
        return self._next(2 * MIB) + 16 * MIB

    def retries(self):
        return 0

    def empty_cache(self):
        pass


class SimulatedNvml:
    kind = "simulated"

    def used(self):
        return 64 * MIB, "simulated"


def check():
    info = {"type": "stack", "python": platform.python_version()}
    try:
        import torch
    except Exception as e:  # noqa: BLE001 - any import failure means "no torch here"
        emit({"type": "unavailable", "reason": f"python3 cannot import torch ({type(e).__name__}: {e})"})
        return 3
    info["torch"] = torch.__version__
    info["torch_cuda"] = torch.version.cuda
    try:
        import transformers

        info["transformers"] = transformers.__version__
    except Exception as e:  # noqa: BLE001
        emit({"type": "unavailable", "reason": f"python3 has torch {torch.__version__} but cannot import transformers ({e})"})
        return 3
    try:
        import peft

        info["peft"] = peft.__version__
    except Exception:
        info["peft"] = None
    nv = Nvml(True)
    if not torch.cuda.is_available():
        emit({"type": "unavailable", "reason": f"torch {torch.__version__} (CUDA {torch.version.cuda}) sees no CUDA device"})
        return 3
    info["cudnn"] = torch.backends.cudnn.version()
    info["device_name"] = torch.cuda.get_device_name(0)
    info["nvml"] = nv.kind
    info["driver"] = nv.driver()
    emit(info)
    return 0


def workspace_probe(device):
    """cuBLAS workspaces PyTorch allocates: bytes of one, and how many a forward+backward leaves."""
    import torch

    if device != "cuda":
        return {"type": "workspace", "bytes": 0, "count": 0, "total": 0, "method": "not measured on CPU"}
    try:
        torch._C._cuda_clearCublasWorkspaces()
    except Exception:
        pass
    x = torch.randn(512, 512, device=device, dtype=torch.bfloat16)
    w = torch.randn(512, 512, device=device, dtype=torch.bfloat16, requires_grad=True)
    torch.cuda.synchronize()
    a0 = torch.cuda.memory_allocated()
    y = x @ w
    torch.cuda.synchronize()
    one = torch.cuda.memory_allocated() - a0 - y.untyped_storage().nbytes()
    y.sum().backward()
    torch.cuda.synchronize()
    del y
    w.grad = None
    torch.cuda.synchronize()
    total = torch.cuda.memory_allocated() - a0
    del x, w
    count = round(total / one) if one > 0 else 0
    return {
        "type": "workspace",
        "bytes": int(one),
        "count": int(count),
        "total": int(total),
        "method": "memory_allocated after a first bf16 matmul on the main thread minus its output (one workspace), "
        "and after its backward on autograd's thread (all workspaces), after clearing cuBLAS workspaces",
    }


def build(sc, device):
    import torch
    import transformers

    torch.manual_seed(0)
    cfg = transformers.AutoConfig.for_model(**sc["config"])
    with torch.device(device):
        model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation=sc["attention"])
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(sc["precision"])
    if dtype is not None:
        model = model.to(dtype)
    model.train()
    if sc["checkpointing"] == "full":
        model.gradient_checkpointing_enable()
    if sc.get("lora"):
        import peft

        rank = sc["lora"]["rank"]
        targets = ["q_proj", "k_proj", "v_proj", "o_proj"] if sc["lora"]["targets"] == "attn" else "all-linear"
        lcfg = peft.LoraConfig(r=rank, lora_alpha=2 * rank, lora_dropout=0.0, target_modules=targets, task_type="CAUSAL_LM")
        model = peft.get_peft_model(model, lcfg)
        if sc["checkpointing"] == "full":
            model.enable_input_require_grads()
    return cfg, model


def optimizer(sc, params):
    import torch

    o = sc["optimizer"]
    if o == "adamw":
        return torch.optim.AdamW(params, lr=1e-4, foreach=True)
    if o == "adamw-fused":
        return torch.optim.AdamW(params, lr=1e-4, fused=True)
    if o == "adamw-forloop":
        return torch.optim.AdamW(params, lr=1e-4, foreach=False)
    if o == "sgd":
        return torch.optim.SGD(params, lr=1e-3, foreach=True)
    if o == "sgd-momentum":
        return torch.optim.SGD(params, lr=1e-3, momentum=0.9, foreach=True)
    raise ValueError(f"optimizer {o!r} is not supported by the probe")


def train(sc, device, stats, nv, phases):
    """Two training steps; appends one record per phase to `phases` (figures from `stats`, or 0
    when there is nothing to measure)."""
    import torch

    cfg, model = build(sc, device)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = optimizer(sc, params)
    amp = {"amp-bf16": torch.bfloat16, "amp-fp16": torch.float16}.get(sc["precision"])
    scaler = torch.amp.GradScaler(device) if sc["precision"] == "amp-fp16" else None
    gen = torch.Generator(device=device).manual_seed(1)
    ids = torch.randint(cfg.vocab_size, (sc["batch"], sc["seq"]), device=device, generator=gen)
    labels = ids.clone()

    def begin():
        if stats is not None:
            stats.sync()
            stats.reset_peak()

    def record(step, phase):
        if stats is None:
            phases.append({"step": step, "phase": phase, "allocated": 0, "reserved": 0,
                           "max_allocated": 0, "max_reserved": 0, "device": 0})
            return
        stats.sync()
        used, method = nv.used()
        phases.append({
            "step": step,
            "phase": phase,
            "allocated": stats.allocated(),
            "reserved": stats.reserved(),
            "max_allocated": stats.max_allocated(),
            "max_reserved": stats.max_reserved(),
            "device": used,
            "device_method": method,
        })

    for step in (1, 2):
        begin()
        with torch.autocast(device, dtype=amp or torch.bfloat16, enabled=amp is not None):
            out = model(input_ids=ids, labels=labels)
        loss = out.loss
        del out
        record(step, "forward+loss")
        begin()
        (scaler.scale(loss) if scaler is not None else loss).backward()
        del loss
        record(step, "backward")
        begin()
        if scaler is not None:
            scaler.step(opt)
            scaler.update()
        else:
            opt.step()
        opt.zero_grad(set_to_none=True)
        record(step, "optimizer")


def run_one(sc, device, stats, nv):
    import torch

    row = {"type": "row", "id": sc["id"], "status": "ok", "error": None}
    phases = []
    t0 = time.time()
    if stats is not None:
        stats.sync()
        row["allocated_before"] = stats.allocated()
    oom_type = getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError)
    try:
        train(sc, device, stats, nv, phases)
    except Exception as e:  # noqa: BLE001 - recorded, and the grid goes on
        text = str(e).splitlines()[0][:300] if str(e) else ""
        # cuBLAS and NCCL report exhaustion as RuntimeErrors mentioning memory.
        oom = isinstance(e, oom_type) or "out of memory" in text.lower() or "ALLOC_FAILED" in text
        row["status"] = "oom" if oom else "error"
        row["error"] = f"{type(e).__name__}: {text}"
    # The failed step's frames are gone with the exception; free what they held.
    gc.collect()
    row["phases"] = phases
    row["seconds"] = round(time.time() - t0, 3)
    if stats is not None:
        row["alloc_retries"] = stats.retries()
        row["allocated"] = max((p["max_allocated"] for p in phases), default=0)
        row["reserved"] = max((p["max_reserved"] for p in phases), default=0)
        # Reserved memory is cached, so the process's device use at a phase's end plus what the
        # phase reserved at its peak beyond the end is the phase's device peak.
        row["device"] = max((p["device"] + p["max_reserved"] - p["reserved"] for p in phases), default=0)
        row["device_method"] = phases[-1]["device_method"] if phases else None
        stats.empty_cache()
        stats.reset_peak()
    else:
        row.update({"alloc_retries": 0, "allocated": 0, "reserved": 0, "device": 0, "device_method": None})
    return row


def run(path, device, simulate):
    cuda = device == "cuda"
    nv = SimulatedNvml() if simulate else Nvml(cuda)
    import torch  # noqa: F401 - after the NVML baseline

    stats = SimulatedStats() if simulate else (CudaStats() if cuda else None)
    with open(path) as f:
        scenarios = json.load(f)
    emit(workspace_probe(device))
    for sc in scenarios:
        emit(run_one(sc, device, stats, nv))
    return 0


def main(argv):
    if len(argv) >= 2 and argv[1] == "check":
        return check()
    if len(argv) >= 3 and argv[1] == "run":
        device = "cpu" if "--device" in argv and argv[argv.index("--device") + 1] == "cpu" else "cuda"
        return run(argv[2], device, "--simulate-stats" in argv)
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
