"""Measures, on a real CUDA GPU, what the reference suite otherwise measures on CPU, and more.

    python3 measure_gpu.py all OUT.json [--deadline SECONDS]
    python3 measure_gpu.py PART[,PART...] OUT.json [--deadline SECONDS] [--presets JSON]
                        (sdpa, fp8gemm, presets, fp8presets, compiled, int8presets, peak, backends, saved)
    python3 measure_gpu.py preset '[...]'     one real-size run, printed

Parts (each a key of the output JSON; a part that fails records its error and the rest go on):

- `sdpa`: the kernel `torch._fused_sdp_choice` picks for the training call transformers makes
  (q, k, v requiring grad, is_causal or a mask, GQA through enable_gqa) over dtype, head
  width, dropout, heads, mask and sequence: compared with the core's `sdpa::choose`.
- `saved`: every scenario of test_saved_bytes (measure_saved.measure on `cuda`): one layer's
  saved bytes, everything alive after forward and loss, and the attention kernel that ran
  (its autograd node), all CUDA's own, with no CPU-to-CUDA corrections.
- `peak`: every scenario of test_step_peak (measure_peak.measure_step on `cuda`): the step's
  peak from the CUDA caching allocator's events (block sizes, so rounded to 512 B) and from
  torch.cuda.max_memory_allocated.
- `fp8gemm`: fp8 GEMM throughput (torch._scaled_mm, per-tensor and per-row scales) against bf16.
- `backends`: each SDPA kernel forced, on scenarios that can run them all: what each saves.
- `presets`: real-size runs of catalog presets (config from content/models, random weights,
  built on the GPU in the training dtype), one after another: peak allocated and reserved per
  phase, the device memory in use (whole device: nothing else runs there), out-of-memory or
  not, and the median step time of steps 3 to 5.
- `fp8presets`: the same for torchao float8 training (PRESETS_FP8), each recipe after its bf16
  run; `compiled`: the same compiled (PRESETS_COMPILED; the first step compiles, the median
  is of steps 3 to 5); `int8presets`: LoRA on 8-bit bases (PRESETS_INT8) beside a 16-bit
  LoRA run.

test_gpu_measured.py compares the core with a committed output of this script.
"""
import json
import os
import pathlib
import platform
import sys
import time
import traceback

HERE = pathlib.Path(__file__).parent
MODELS = HERE.parent.parent / "content" / "models"

# Real-size runs: (preset, precision, attention, checkpointing, batch, seq, method, rank, targets
# [, fp8 [, compile [, overrides]]]): the optional tenth field is a torchao float8 recipe
# (tensorwise, rowwise), applied to the Linears `fp8_filter` takes, as the FSDP2 export does;
# the eleventh compiles the model (torch.compile, default mode) after the conversion; the
# twelfth overrides keys of the preset's config (fewer layers, so that compiling takes less).
# Chosen around the core's predictions on an H100 80GB: most between 30 and 75 GiB of device
# memory, one at the edge (Llama 3.1 8B full bf16, 77.7 GiB predicted of 79.6) and one the core
# says does not fit (GPT-2 XL fp32 eager, 102 GiB).
PRESETS = [
    ("llama-3.2-1b", "bf16", "sdpa", "none", 8, 2048, "full", 0, ""),
    ("llama-3.2-1b", "amp-bf16", "sdpa", "full", 16, 2048, "full", 0, ""),
    ("qwen2.5-1.5b", "bf16", "sdpa", "full", 8, 4096, "full", 0, ""),
    ("qwen2.5-0.5b", "amp-bf16", "eager", "none", 4, 1024, "full", 0, ""),
    ("gpt2-large", "amp-bf16", "sdpa", "none", 8, 1024, "full", 0, ""),
    ("llama-3.1-8b", "bf16", "sdpa", "full", 4, 4096, "lora", 16, "all"),
    ("mistral-7b-v0.3", "bf16", "sdpa", "none", 2, 2048, "lora", 16, "attn"),
    ("llama-3.1-8b", "bf16", "sdpa", "full", 1, 2048, "full", 0, ""),
    ("gpt2-xl", "fp32", "eager", "none", 4, 1024, "full", 0, ""),
]

# torchao float8 training against the same run in bf16, back to back in one process: memory and
# step time, at sizes where fp8 GEMMs gain (from 4,096 tokens x 4,096 wide) and where they do not
# (Llama 3.2 1B, 2,048 wide). Sized for a 141 GB H200 (all fit); on an 80 GB H100 the 8B rows
# without checkpointing stop out of memory.
PRESETS_FP8 = [
    *[("llama-3.2-1b", "bf16", "sdpa", "none", 8, 2048, "full", 0, "", r) for r in ("off", "tensorwise", "rowwise")],
    *[("llama-3.1-8b", "bf16", "sdpa", "full", 4, 4096, "full", 0, "", r) for r in ("off", "tensorwise", "rowwise")],
    *[("llama-3.1-8b", "bf16", "sdpa", "none", 2, 4096, "full", 0, "", r) for r in ("off", "tensorwise")],
    *[("qwen2.5-1.5b", "bf16", "sdpa", "full", 8, 4096, "full", 0, "", r) for r in ("off", "tensorwise")],
]

# The same compiled (torch.compile's default mode fuses torchao's casts): Llama 3.1 8B's shapes
# cut to 8 layers, so that each compile takes well under a minute.
PRESETS_COMPILED = [
    ("llama-3.1-8b", "bf16", "sdpa", "none", 2, 4096, "full", 0, "", r, True, {"num_hidden_layers": 8})
    for r in ("off", "tensorwise", "rowwise")
]

# LoRA on an 8-bit base (LLM.int8, `method=lora8`; issue 29): each 8-bit Linear keeps its input
# through the backward, checkpointed or not, and its forward quantizes the input and dequantizes
# an int32 product. Not yet run on a GPU (prepared 2026-11-28 for a session that has one): the
# core's figures at the three levels against these, and the same runs under a 24 GB cap at the
# largest micro-batch the core says fits.
PRESETS_INT8 = [
    ("llama-3.1-8b", "bf16", "sdpa", "full", 4, 2048, "lora8", 16, "all"),
    ("llama-3.1-8b", "amp-bf16", "sdpa", "full", 4, 2048, "lora8", 16, "qv"),
    ("llama-3.1-8b", "bf16", "sdpa", "none", 1, 2048, "lora8", 16, "all"),
    ("llama-3.1-8b", "bf16", "sdpa", "full", 4, 2048, "lora", 16, "all"),
    ("qwen2.5-1.5b", "amp-bf16", "sdpa", "full", 8, 2048, "lora8", 16, "all", "off", False, {}, {"kbit": True}),
]


def fp8_filter(module, fqn):
    """The Linears torchao converts in Headroom's estimate and export (crate::fp8::converts,
    export/fsdp2.rs): not the lm_head, both dimensions multiples of 16 (torch._scaled_mm's rule)."""
    return (not fqn.endswith("lm_head") and module.in_features % 16 == 0
            and module.out_features % 16 == 0)


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def environment():
    import torch
    import transformers

    env = {"python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda,
           "transformers": transformers.__version__, "cudnn": torch.backends.cudnn.version()}
    for name in ("peft", "torchao"):
        try:
            env[name] = __import__(name).__version__
        except Exception:  # noqa: BLE001
            env[name] = None
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        env.update(device=p.name, capability=f"{p.major}.{p.minor}", total_memory=p.total_memory,
                   sms=p.multi_processor_count)
    return env


def part_sdpa(device):
    """torch._fused_sdp_choice over the inputs the core's choice depends on."""
    import torch
    from torch.nn.attention import SDPBackend

    names = {int(b.value): n for n, b in SDPBackend.__members__.items()}
    rows = []
    dtypes = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
    for dname, dtype in dtypes.items():
        for head_dim, v_dim in ((64, 64), (80, 80), (96, 96), (128, 128), (160, 160), (192, 192), (256, 256),
                                (192, 128), (512, 512)):
            for dropout in (0.0, 0.1):
                for heads, kv in ((32, 32), (32, 8)):
                    for mask in ("causal", "bool", "float"):
                        for seq in (128, 4096):
                            b = 1 if seq > 1024 else 2
                            q = torch.empty(b, heads, seq, head_dim, device=device, dtype=dtype, requires_grad=True)
                            k = torch.empty(b, kv, seq, head_dim, device=device, dtype=dtype, requires_grad=True)
                            v = torch.empty(b, kv, seq, v_dim, device=device, dtype=dtype, requires_grad=True)
                            m = None
                            if mask == "bool":
                                m = torch.ones(b, 1, seq, seq, device=device, dtype=torch.bool).tril()
                            elif mask == "float":
                                m = torch.zeros(b, 1, seq, seq, device=device, dtype=dtype)
                            try:
                                c = torch._fused_sdp_choice(q, k, v, m, dropout, mask == "causal", scale=None,
                                                             enable_gqa=kv != heads)
                                pick = names.get(int(c), str(c))
                            except Exception as e:  # noqa: BLE001
                                pick = f"error: {type(e).__name__}: {str(e)[:120]}"
                            rows.append({"dtype": dname, "head_dim": head_dim, "v_head_dim": v_dim,
                                         "dropout": dropout, "heads": heads, "kv_heads": kv, "mask": mask,
                                         "seq": seq, "backend": pick})
    return rows


# When the run must end (`--deadline`): scenarios after it are recorded as skipped.
DEADLINE = [float("inf")]


def part_fp8gemm(device):
    """fp8 GEMM throughput (torch._scaled_mm, e4m3 x e4m3 -> bf16, per-tensor and per-row
    scales) against bf16 torch.mm at the same sizes: the measured fp8 speed-up the time model's
    GEMM shares stand for. Median of 5 timings of a batch of about 50 ms each."""
    import torch

    if device != "cuda" or torch.cuda.get_device_capability() < (8, 9):
        return {"error": "fp8 GEMMs need a CUDA GPU of compute capability 8.9 or later"}
    rows = []
    for n in (1024, 2048, 4096, 8192, 16384):
        a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
        b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
        a8 = a.to(torch.float8_e4m3fn)
        b8 = b.to(torch.float8_e4m3fn).t().contiguous().t()  # column-major, as _scaled_mm wants
        one = torch.ones((), device=device)
        row_a, row_b = torch.ones(n, 1, device=device), torch.ones(1, n, device=device)
        cases = {
            "bf16": lambda: torch.mm(a, b),
            "fp8_tensorwise": lambda: torch._scaled_mm(a8, b8, one, one, out_dtype=torch.bfloat16),
            "fp8_rowwise": lambda: torch._scaled_mm(a8, b8, row_a, row_b, out_dtype=torch.bfloat16),
        }
        for name, fn in cases.items():
            try:
                rows.append({"n": n, "kind": name, "tflops": _time_tflops(fn, 2 * n ** 3)})
            except Exception as e:  # noqa: BLE001
                rows.append({"n": n, "kind": name, "error": f"{type(e).__name__}: {str(e)[:200]}"})
        del a, b, a8, b8
    return rows


def _time_tflops(fn, flops):
    import torch

    fn()
    torch.cuda.synchronize()
    t = time.time()
    fn()
    torch.cuda.synchronize()
    reps = max(1, int(0.05 / max(time.time() - t, 1e-6)))
    out = []
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        torch.cuda.synchronize()
        out.append(flops * reps / (start.elapsed_time(end) / 1e3) / 1e12)
    return sorted(out)[2]


# Each SDPA kernel forced (torch.nn.attention.sdpa_kernel) on scenarios that run them all:
# their saved tensors, compared with the core's `--sdpa` choices.
BACKEND_CASES = [
    (fam, over, prec, backend)
    for fam, over in (("llama", {}), ("qwen2", {}), ("gpt2", {"attn_pdrop": 0.1}), ("llama", {"attention_dropout": 0.1}))
    for prec in ("bf16", "amp-bf16", "fp32")
    for backend in ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION", "MATH")
]


def part_backends(device):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from measure_saved import measure
    from test_saved_bytes import CONFIGS

    def one(fam, over, prec, backend):
        with sdpa_kernel([SDPBackend.__members__[backend]]):
            return measure({**CONFIGS[fam], **over}, 2, 64, prec, "sdpa", "none", False, device=device)

    return _scenario_rows(BACKEND_CASES, one)


def _scenario_rows(scenarios, fn):
    rows = []
    for sc in scenarios:
        if time.time() > DEADLINE[0]:
            rows.append({"scenario": sc, "error": "skipped: out of time"})
            continue
        t0 = time.time()
        try:
            rows.append({"scenario": sc, "result": fn(*sc), "seconds": round(time.time() - t0, 3)})
        except Exception as e:  # noqa: BLE001
            rows.append({"scenario": sc, "error": f"{type(e).__name__}: {str(e)[:300]}"})
            log(f"  {sc}: {rows[-1]['error']}")
    return rows


def part_saved(device):
    from measure_saved import measure
    from test_saved_bytes import CONFIGS, SCENARIOS, VARIANTS

    plain = [("", fam, {}, p, a, c, b, s, k) for fam, p, a, c, b, s, k in SCENARIOS]

    def one(name, fam, over, prec, attn, ckpt, b, s, keep):
        r = measure({**CONFIGS[fam], **over}, b, s, prec, attn, ckpt, keep, device=device)
        r.pop("raw_cpu", None)
        return r

    return _scenario_rows([tuple(v) for v in plain + list(VARIANTS)], one)


def part_peak(device):
    from measure_peak import measure_step
    from test_saved_bytes import CONFIGS
    from test_step_peak import KEPT, SCENARIOS

    def plain(fam, prec, attn, ckpt, b, s, keep):
        r = measure_step(CONFIGS[fam], b, s, prec, attn, ckpt, keep, detail=ckpt == "none", device=device)
        return {k: v for k, v in r.items() if k != "segments"} | {"segments": _segment_peaks(r["segments"])}

    def kept(fam, vocab, prec, attn, ckpt, b, s):
        r = measure_step({**CONFIGS[fam], "vocab_size": vocab}, b, s, prec, attn, ckpt, True, device=device)
        return {k: v for k, v in r.items() if k != "segments"}

    scen = [tuple(getattr(x, "values", x)) for x in SCENARIOS]
    return {"scenarios": _scenario_rows(scen, plain), "kept": _scenario_rows([tuple(k) for k in KEPT], kept)}


def _segment_peaks(segments):
    out = {}
    for name, _start, mx in segments:
        out[name] = max(out.get(name, 0), mx)
    return out


def swap_linears(model, quantized, flag):
    """Every Linear but the lm_head replaced by `quantized(child)` (a bitsandbytes Linear built
    from the child's own random weights, on its device: no checkpoint written and read), then
    what transformers sets on a quantized load, which peft and TRL read (`flag`:
    is_loaded_in_4bit or is_loaded_in_8bit), and every parameter frozen."""
    import torch

    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if type(child) is not torch.nn.Linear or name == "lm_head":
                continue
            q = quantized(child)
            if child.bias is not None:
                q.bias = torch.nn.Parameter(child.bias.data, requires_grad=False)
            setattr(parent, name, q)
            del child
    setattr(model, flag, True)
    model.is_quantized = True
    for p in model.parameters():
        p.requires_grad_(False)


def quantize_8bit(model):
    """bitsandbytes' LLM.int8 Linear8bitLt (int8 codes, an fp32 scale per row, outlier threshold
    6.0) for every Linear but the lm_head, as `from_pretrained(quantization_config=
    BitsAndBytesConfig(load_in_8bit=True))` loads it; quantized when moved to its device."""
    import bitsandbytes as bnb

    def quantized(child):
        q = bnb.nn.Linear8bitLt(child.in_features, child.out_features, bias=child.bias is not None,
                                has_fp16_weights=False, threshold=6.0, device="meta")
        weight = bnb.nn.Int8Params(child.weight.data.to("cpu"), requires_grad=False, has_fp16_weights=False)
        q.weight = weight.to(child.weight.device)
        return q

    swap_linears(model, quantized, "is_loaded_in_8bit")


def quantize_4bit(model, compute_dtype, storage=None):
    """bitsandbytes' NF4 Linear4bit (double quantization, uint8 storage) for every Linear but the
    lm_head, as `from_pretrained(quantization_config=BitsAndBytesConfig(load_in_4bit=True,
    bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True))` loads it; quantized on the GPU
    one Linear at a time. `storage`: `bnb_4bit_quant_storage`, the dtype the packed weights are
    stored as (uint8 unless FSDP must flatten them with its bf16 parameters)."""
    import bitsandbytes as bnb
    import torch

    storage = storage or torch.uint8

    def quantized(child):
        q = bnb.nn.Linear4bit(child.in_features, child.out_features, bias=child.bias is not None,
                              compute_dtype=compute_dtype, compress_statistics=True, quant_type="nf4",
                              quant_storage=storage, device="meta")
        weight = bnb.nn.Params4bit(child.weight.data, requires_grad=False, compress_statistics=True,
                                   quant_type="nf4", quant_storage=storage, module=q)
        q.weight = weight.to(child.weight.device)
        return q

    swap_linears(model, quantized, "is_loaded_in_4bit")


def model_path(model_id):
    """A preset's config.json, or one of the published tables' stand-in configs."""
    path = MODELS / f"{model_id}.json"
    return path if path.exists() else HERE / "published_configs" / f"{model_id}.json"


def run_preset(sc, steps=5, on_phase=None, extra_step=None):
    """One real-size run in this process: two warm-up steps, then three timed ones.
    `on_phase(step, phase)` is called at each phase's end (synchronized, before the peaks are
    reset); `extra_step(run)` is handed a function that runs one more step (e.g. to profile it)."""
    import torch
    import transformers

    model_id, prec, attn, ckpt, batch, seq, method, rank, targets = sc[:9]
    fp8 = sc[9] if len(sc) > 9 else "off"
    compiled = len(sc) > 10 and sc[10]
    overrides = sc[11] if len(sc) > 11 else {}
    # The thirteenth field: LoRA/QLoRA options as Headroom's flags name them (base, kbit) and
    # a cap on what the caching allocator may reserve (`cap`, bytes: a smaller card emulated
    # with torch.cuda.set_per_process_memory_fraction).
    options = sc[12] if len(sc) > 12 else {}
    config = json.loads(model_path(model_id).read_text())
    config = {k: v for k, v in config.items() if k not in ("architectures", "torch_dtype", "dtype")}
    config.update(overrides)
    # `lengths` (options): one sequence length per step, the micro-batch padded to it (a run
    # over variable lengths, issue 30's dynamic padding); the steps are then as many.
    lengths = options.get("lengths")
    if lengths:
        steps = len(lengths)
    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    total = torch.cuda.get_device_properties(0).total_memory if cuda else 0
    if cuda:
        torch.cuda.set_per_process_memory_fraction(min(1.0, options.get("cap", total) / total))

    def used():
        if not cuda:
            return 0
        free, tot = torch.cuda.mem_get_info()
        return tot - free

    # Before this run's model: the context, the library workspaces of earlier runs in this
    # process (at most what this run's first step would make) and nothing else.
    base_used = used()
    torch.manual_seed(0)
    cfg = transformers.AutoConfig.for_model(**config)
    dtype = torch.bfloat16 if prec == "bf16" else torch.float32
    if prec.startswith("amp") and method in ("lora", "qlora", "lora8") and options.get("base") != "fp32":
        dtype = torch.bfloat16  # Headroom's base=16bit: the base loaded in the compute dtype
    t0 = time.time()
    with torch.device(device):
        model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation=attn, dtype=dtype)
    if method in ("qlora", "lora8"):
        if method == "qlora":
            quantize_4bit(model, torch.bfloat16)
        else:
            quantize_8bit(model)
        if options.get("kbit"):
            import peft

            model = peft.prepare_model_for_kbit_training(model, use_gradient_checkpointing=False)
    model.train()
    if fp8 != "off":
        from torchao.float8 import Float8LinearConfig, convert_to_float8_training

        convert_to_float8_training(model, config=Float8LinearConfig.from_recipe_name(fp8),
                                   module_filter_fn=fp8_filter)
    if ckpt == "full":
        model.gradient_checkpointing_enable()
    if compiled:
        model = torch.compile(model)
    if method in ("lora", "qlora", "lora8"):
        import peft

        from measure_peft import TARGETS

        tm = TARGETS[targets]
        lcfg = peft.LoraConfig(r=rank, lora_alpha=2 * rank, lora_dropout=0.0, target_modules=tm, task_type="CAUSAL_LM")
        model = peft.get_peft_model(model, lcfg)
        if ckpt == "full":
            model.enable_input_require_grads()
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()  # what quantizing freed: a from_pretrained load never caches it
    build_s = time.time() - t0
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-5, foreach=True)
    amp = prec.startswith("amp")
    gen = torch.Generator(device=device).manual_seed(1)
    ids = torch.randint(cfg.vocab_size, (batch, seq), device=device, generator=gen)
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    out = {"scenario": sc, "status": "ok", "build_seconds": round(build_s, 2), "total_memory": total,
           "used_before_model": base_used, "phases": [], "step_seconds": []}
    out["after_build"] = {"allocated": torch.cuda.memory_allocated() if cuda else 0, "device": used()}

    def phase(step, name):
        if not cuda:
            out["phases"].append({"step": step, "phase": name})
            return
        torch.cuda.synchronize()
        out["phases"].append({"step": step, "phase": name, "allocated": torch.cuda.memory_allocated(),
                              "reserved": torch.cuda.memory_reserved(),
                              "max_allocated": torch.cuda.max_memory_allocated(),
                              "max_reserved": torch.cuda.max_memory_reserved(), "device": used()})
        if on_phase:
            on_phase(step, name)
        torch.cuda.reset_peak_memory_stats()

    def forward_loss():
        with torch.autocast(device, dtype=torch.bfloat16, enabled=amp):
            return model(input_ids=ids, labels=ids).loss

    def optimizer_step():
        opt.step()
        opt.zero_grad(set_to_none=True)

    def one_step():
        loss = forward_loss()
        loss.backward()
        del loss
        optimizer_step()

    # The step's phases for hooks that time or profile them apart (measure_allocator `hostphases`).
    one_step.phases = (forward_loss, lambda loss: loss.backward(), optimizer_step)

    try:
        for step in range(1, steps + 1):
            if cuda:
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
            if options.get("deadline") and time.time() > options["deadline"]:
                break  # a run over variable lengths stops at its own deadline, its steps so far kept
            if lengths:
                ids = torch.randint(cfg.vocab_size, (batch, lengths[step - 1]), device=device, generator=gen)
            t = time.time()
            with torch.autocast(device, dtype=torch.bfloat16, enabled=amp):
                loss = model(input_ids=ids, labels=ids).loss
            phase(step, "forward+loss")
            loss.backward()
            del loss
            phase(step, "backward")
            opt.step()
            opt.zero_grad(set_to_none=True)
            phase(step, "optimizer")
            out["step_seconds"].append(round(time.time() - t, 4))
        if extra_step:
            extra_step(one_step)
    except torch.OutOfMemoryError as e:
        out["status"] = "oom"
        out["error"] = str(e).splitlines()[0][:400]
    if cuda:
        stats = torch.cuda.memory_stats()
        out["alloc_retries"] = int(stats.get("num_alloc_retries", 0))
        out["num_ooms"] = int(stats.get("num_ooms", 0))
    ph = out["phases"]
    if cuda and ph:
        out["peak_allocated"] = max(p["max_allocated"] for p in ph)
        out["peak_reserved"] = max(p["max_reserved"] for p in ph)
        # Reserved memory stays cached: a phase's device peak is its end's device use plus what
        # it reserved at its peak beyond the end.
        out["peak_device"] = max(p["device"] + p["max_reserved"] - p["reserved"] for p in ph)
    timed = sorted(out["step_seconds"][2:])
    if timed:
        out["median_step_seconds"] = timed[len(timed) // 2]
        out["tokens_per_second"] = batch * seq / out["median_step_seconds"]
    return out


def part_presets(deadline, presets=PRESETS):
    """The presets one after another in this process (a python and transformers import each
    would cost more than most runs): what one run leaves is freed (gc, empty_cache) before the
    next, so each starts from the context, cuBLAS's and cuDNN's workspaces and its own model."""
    import gc

    import torch

    rows = []
    for sc in presets:
        if deadline - time.time() < 15:
            rows.append({"scenario": sc, "status": "skipped", "error": "out of time"})
            continue
        t0 = time.time()
        try:
            row = run_preset(sc)
        except Exception as e:  # noqa: BLE001 - recorded; the next preset still runs
            row = {"scenario": sc, "status": "error", "error": f"{type(e).__name__}: {str(e)[:400]}"}
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        row["wall_seconds"] = round(time.time() - t0, 1)
        log(f"  preset {sc[0]} {sc[1]} b{sc[4]} s{sc[5]} {sc[6]} {sc[9:]}: {row.get('status')} "
            f"peak_device={row.get('peak_device')} t={row.get('median_step_seconds')} ({row['wall_seconds']} s)")
        rows.append(row)
    return rows


# The parts that take the device (presets take the deadline instead).
PARTS = {"sdpa": part_sdpa, "fp8gemm": part_fp8gemm, "backends": part_backends, "saved": part_saved,
         "peak": part_peak}


def main(argv):
    if len(argv) >= 3 and argv[1] == "preset":
        print(json.dumps(run_preset(tuple(json.loads(argv[2])))))
        return 0
    what, path = argv[1], pathlib.Path(argv[2])
    deadline = time.time() + (float(argv[argv.index("--deadline") + 1]) if "--deadline" in argv else 600)
    DEADLINE[0] = deadline
    if "--presets" in argv:
        # A subset or other runs (JSON list of PRESETS-style rows), e.g. under another allocator
        # setting: PYTORCH_CUDA_ALLOC_CONF is read once per process, so it is set outside.
        PRESETS[:] = [tuple(r) for r in json.loads(argv[argv.index("--presets") + 1])]
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    result = {"measured_on": time.strftime("%Y-%m-%d"), "device": device, "environment": environment(),
              "allocator": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")}
    parts = ["sdpa", "fp8gemm", "presets", "peak", "backends", "saved"] if what == "all" else what.split(",")
    for part in parts:
        t0 = time.time()
        log(f"{part} ...")
        try:
            if part in ("presets", "fp8presets", "compiled", "int8presets"):
                which = {"presets": PRESETS, "fp8presets": PRESETS_FP8, "compiled": PRESETS_COMPILED,
                         "int8presets": PRESETS_INT8}
                result[part] = part_presets(deadline, which[part])
            else:
                result[part] = PARTS[part](device)
        except Exception:  # noqa: BLE001 - recorded; the other parts still run
            result[part] = {"error": traceback.format_exc()[-2000:]}
        result[f"{part}_seconds"] = round(time.time() - t0, 1)
        log(f"{part}: {result[f'{part}_seconds']} s")
        path.write_text(json.dumps(result, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
