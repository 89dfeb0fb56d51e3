"""Measures DPO and GRPO steps as TRL runs them (issue 31), on CUDA or CPU, phase by phase.

    python3 measure_posttrain.py OUT.json [--deadline SECONDS] [--only NAME[,NAME...]]

Each run builds a catalog preset with random weights (config from content/models, as
measure_gpu.run_preset does), hands it to TRL's own trainer (`DPOTrainer`, `KTOTrainer`, `GRPOTrainer`, `RLOOTrainer`) and
runs `trainer.train()` for a few steps on synthetic token ids, recording at every phase boundary
(TRL's and transformers' callbacks; GRPO's generation by wrapping the trainer's own method) the
allocated, reserved and device peaks, as measure_gpu.run_preset records them for supervised steps.

Two things are not the trainers' own, and neither changes a step:
- the data: pre-tokenized rows (`prompt_ids`, `chosen_ids`, `rejected_ids` for DPO, text
  prompts of space-separated words for GRPO) passed as they are, the trainers' dataset
  preparation (tokenizing, chat templates) skipped; the collators are TRL's own.
- the tokenizer: a word-level one built here (no Hub access on the GPU machine), one token per
  id of the model's vocabulary, so that generated ids decode and prompts tokenize exactly.
Where `datasets`, `pandas` or `pyarrow` are not installed (the GPU machine has no registry and
pyarrow's wheel is larger than what travels), placeholder modules satisfy TRL's imports; the
code paths of a training step use none of them (a run records which were placeholders).
"""
import json
import os
import pathlib
import sys
import time
import traceback
import types

# No Hub: nothing is downloaded, no telemetry is sent (TRL's trainers send it on construction).
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

HERE = pathlib.Path(__file__).parent
MODELS = HERE.parent.parent / "content" / "models"

# name: (trainer, preset, precision, method, batch (pairs or completions), prompt, completion,
#        options). precision "bf16": weights and training in bf16; "amp-bf16": fp32 weights,
#        autocast. DPO's policy and reference see prompt + completion tokens per sequence, chosen
#        and rejected of the same length; GRPO generates `completion` tokens for each of
#        `batch` completions (num_generations of them per prompt).
RUNS = {
    # A full fine-tune keeps a frozen reference copy in the policy's dtype.
    "dpo-qwen0.5b-full-bf16": ("dpo", "qwen2.5-0.5b", "bf16", "full", 4, 256, 768, {}),
    # The case: a 0.5B model loaded in fp32 under bf16 autocast, 152k vocabulary.
    "dpo-qwen0.5b-full-amp": ("dpo", "qwen2.5-0.5b", "amp-bf16", "full", 4, 256, 768, {}),
    # LoRA: no copy, the reference is the base with its adapters off.
    "dpo-llama1b-lora-bf16": ("dpo", "llama-3.2-1b", "bf16", "lora", 8, 512, 1536, {}),
    "dpo-llama1b-full-bf16-ckpt": ("dpo", "llama-3.2-1b", "bf16", "full", 8, 512, 1536, {"ckpt": True}),
    # Second session's rows (held out from the first's comparison): autocast on an fp32 Llama,
    # LoRA with checkpointing on a 1.5B Qwen, LoRA under autocast on a 16-bit base.
    "dpo-llama1b-full-amp-ckpt": ("dpo", "llama-3.2-1b", "amp-bf16", "full", 4, 512, 1536, {"ckpt": True}),
    "dpo-qwen1.5b-lora-bf16-ckpt": ("dpo", "qwen2.5-1.5b", "bf16", "lora", 8, 1024, 3072, {"ckpt": True}),
    "dpo-qwen0.5b-lora-bf16": ("dpo", "qwen2.5-0.5b", "bf16", "lora", 4, 256, 768, {}),
    # GRPO with transformers' generate (no vLLM), beta 0 (TRL's default: no reference model), every
    # completion generated to its full length (min_new_tokens).
    "grpo-qwen0.5b-full-bf16": ("grpo", "qwen2.5-0.5b", "bf16", "full", 16, 128, 256, {"num_generations": 8}),
    # Third call (held out from the GRPO model's fit): LoRA with checkpointing on Llama 3.2 1B,
    # and fp32 weights under autocast with two micro-batches per optimizer step (TRL generates
    # both micro-batches' completions at once: steps_per_generation = accumulation).
    "grpo-llama1b-lora-ckpt": ("grpo", "llama-3.2-1b", "bf16", "lora", 16, 256, 512, {"num_generations": 8, "ckpt": True}),
    "grpo-qwen0.5b-amp-accum2": ("grpo", "qwen2.5-0.5b", "amp-bf16", "full", 8, 128, 256,
                                 {"num_generations": 8, "accum": 2}),
    # beta > 0 keeps a reference model and its log-prob pass: TRL loads it from the policy's path,
    # so the policy is saved first (its random weights) and its config points there.
    "grpo-qwen0.5b-full-bf16-beta": ("grpo", "qwen2.5-0.5b", "bf16", "full", 16, 128, 256,
                                     {"num_generations": 8, "beta": 0.04}),
    # Prepared for a GPU session, not run on one yet: KTO (unpaired samples, a KL pass over the
    # batch's mismatched completions) and RLOO (GRPO's loop, the policy scoring its completions
    # before training, beta 0.05 by default: a reference model).
    "kto-qwen0.5b-full-bf16": ("kto", "qwen2.5-0.5b", "bf16", "full", 8, 256, 768, {}),
    "kto-llama1b-lora-bf16-ckpt": ("kto", "llama-3.2-1b", "bf16", "lora", 8, 512, 1536, {"ckpt": True}),
    "rloo-qwen0.5b-full-bf16": ("rloo", "qwen2.5-0.5b", "bf16", "full", 16, 128, 256,
                                {"num_generations": 8, "beta": 0.05}),
    "rloo-qwen0.5b-full-bf16-beta0": ("rloo", "qwen2.5-0.5b", "bf16", "full", 16, 128, 256,
                                      {"num_generations": 8, "beta": 0.0}),
    # Prepared, not run on a GPU yet: ORPO, CPO and SimPO (TRL's experimental trainers: no
    # reference model, the loss reads the full logits; on CUDA selective_log_softmax is TRL's
    # Triton kernel).
    "orpo-qwen0.5b-full-bf16": ("orpo", "qwen2.5-0.5b", "bf16", "full", 4, 256, 768, {}),
    "simpo-qwen0.5b-full-amp": ("simpo", "qwen2.5-0.5b", "amp-bf16", "full", 2, 256, 768, {}),
    "cpo-llama1b-lora-bf16-ckpt": ("cpo", "llama-3.2-1b", "bf16", "lora", 4, 512, 1536, {"ckpt": True}),
}

PLACEHOLDERS = []

# --tiny (a CPU check of the harness itself): every run on a two-layer, 64-wide model of the same
# family with a 1,000-token vocabulary, at a sixteenth of the lengths.
TINY = {"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 1000, "eos_token_id": 2, "bos_token_id": 2,
        "pad_token_id": 1}
SHRINK = [None]


def log(*a):
    print(*a, file=sys.stderr, flush=True)


class _PlaceholderModule(types.ModuleType):
    """Any name asked of it is a class of that name (TRL's annotations name pyarrow's types)."""

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        value = type(attr, (), {})
        setattr(self, attr, value)
        return value


def _placeholder(name, **attrs):
    import importlib.machinery

    module = _PlaceholderModule(name)
    module.__spec__ = importlib.machinery.ModuleSpec(name, None)
    module.__dict__.update(attrs)
    module.__headroom_placeholder__ = True
    sys.modules[name] = module
    PLACEHOLDERS.append(name)
    return module


class ListDataset:
    """What the trainers are handed when `datasets` is a placeholder: rows by index."""

    def __init__(self, rows):
        self.rows = list(rows)
        self.column_names = list(self.rows[0]) if self.rows else []
        self.cache_files = []  # "in memory", for TRL's telemetry (off: HF_HUB_DISABLE_TELEMETRY)

    def __len__(self):
        return len(self.rows)

    def remove_columns(self, names):
        """What transformers' Trainer calls to drop columns the model does not take."""
        return type(self)([{k: v for k, v in r.items() if k not in names} for r in self.rows])

    def __getitem__(self, i):
        return self.rows[i]


def ensure_trl_imports():
    """Real `datasets`, `pandas` and `pyarrow` where installed; otherwise placeholders, installed
    after torch._dynamo has listed the installed packages (it looks each one up once)."""
    import torch._dynamo  # noqa: F401
    import transformers.masking_utils  # noqa: F401

    try:
        import datasets  # noqa: F401
    except ImportError:
        class _Unused:
            def __init__(self, *a, **k):
                raise RuntimeError("datasets is a placeholder here")

        class Dataset(ListDataset):
            @classmethod
            def from_list(cls, rows):
                return cls(rows)

        class IterableDataset(_Unused):
            pass

        ds = _placeholder("datasets", Dataset=Dataset, IterableDataset=IterableDataset, DatasetDict=dict,
                          IterableDatasetDict=dict, concatenate_datasets=None, __version__="4.7.0")
        ds.fingerprint = _placeholder("datasets.fingerprint", Hasher=_Unused)
    try:
        import pandas  # noqa: F401
    except ImportError:
        _placeholder("pandas", DataFrame=None, __version__="0")
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        pa = _placeholder("pyarrow", __version__="0")
        pa.compute = _placeholder("pyarrow.compute")
        pa.types = _placeholder("pyarrow.types")


def word_tokenizer(vocab_size):
    """A fast tokenizer with one word per id: "<0>" ... "<{vocab-1}>", split on spaces (no word
    contains another, so the special tokens "<0>", "<1>" and "<2>" match whole words only)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {f"<{i}>": i for i in range(vocab_size)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<0>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<0>", pad_token="<1>", eos_token="<2>",
                                   bos_token=None)


def build_model(preset, prec, device, attn="sdpa"):
    import torch
    import transformers

    config = json.loads((MODELS / f"{preset}.json").read_text())
    config = {k: v for k, v in config.items() if k not in ("architectures", "torch_dtype", "dtype")}
    config.update(SHRINK[0] or {})
    cfg = transformers.AutoConfig.for_model(**config)
    dtype = torch.bfloat16 if prec == "bf16" else torch.float32
    with torch.device(device):
        model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation=attn, dtype=dtype)
    return model, cfg


class Recorder:
    """Peaks per phase at the three levels (as measure_gpu.run_preset), the step's wall time."""

    def __init__(self, cuda):
        import torch

        self.torch, self.cuda, self.phases, self.step_seconds = torch, cuda, [], []
        self.step, self.t0 = 0, None

    def used(self):
        if not self.cuda:
            return 0
        free, total = self.torch.cuda.mem_get_info()
        return total - free

    def mark(self, name):
        torch = self.torch
        if not self.cuda:
            self.phases.append({"step": self.step, "phase": name})
            return
        torch.cuda.synchronize()
        self.phases.append({"step": self.step, "phase": name, "allocated": torch.cuda.memory_allocated(),
                            "reserved": torch.cuda.memory_reserved(),
                            "max_allocated": torch.cuda.max_memory_allocated(),
                            "max_reserved": torch.cuda.max_memory_reserved(), "device": self.used()})
        torch.cuda.reset_peak_memory_stats()

    def start(self):
        if self.cuda:
            self.torch.cuda.synchronize()
            self.torch.cuda.reset_peak_memory_stats()
        self.step += 1
        self.t0 = time.time()

    def end(self):
        self.mark("optimizer")
        self.step_seconds.append(round(time.time() - self.t0, 4))

    def summary(self, out):
        ph = [p for p in self.phases if "max_allocated" in p]
        if ph:
            out["peak_allocated"] = max(p["max_allocated"] for p in ph)
            out["peak_reserved"] = max(p["max_reserved"] for p in ph)
            out["peak_device"] = max(p["device"] + p["max_reserved"] - p["reserved"] for p in ph)
        timed = sorted(self.step_seconds[2:])
        if timed:
            out["median_step_seconds"] = timed[len(timed) // 2]
        out["phases"], out["step_seconds"] = self.phases, self.step_seconds


def callback(rec):
    from transformers import TrainerCallback

    class PhaseCallback(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            rec.start()

        def on_pre_optimizer_step(self, args, state, control, **kw):
            rec.mark("forward+backward")

        def on_step_end(self, args, state, control, **kw):
            rec.end()

    return PhaseCallback()


def common_args(prec, steps, batch, out_dir, ckpt, accum=1):
    cuda = _cuda()
    return dict(output_dir=out_dir, per_device_train_batch_size=batch, max_steps=steps, learning_rate=1e-6,
                gradient_accumulation_steps=accum,
                bf16=prec.startswith("amp") and cuda, logging_steps=1000, save_strategy="no", report_to=[],
                gradient_checkpointing=ckpt, use_cpu=not cuda, dataloader_num_workers=0, seed=0,
                disable_tqdm=True)


def _cuda():
    import torch

    return torch.cuda.is_available()


def lora_config():
    """The runs' LoRA: rank 16 on every Linear, no dropout."""
    import peft

    from measure_peft import TARGETS

    return peft.LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, target_modules=TARGETS["all"],
                           task_type="CAUSAL_LM")


def token_ids(vocab_size):
    """Draws of n random token ids (the specials 0-2 left out), seeded."""
    import torch

    gen = torch.Generator().manual_seed(1)
    return lambda n: torch.randint(3, vocab_size, (n,), generator=gen).tolist()


def run_dpo(name, preset, prec, method, batch, prompt, completion, opts, steps, out_dir):
    from trl import DPOConfig, DPOTrainer

    device = "cuda" if _cuda() else "cpu"
    model, cfg = build_model(preset, prec, device)
    ref = None
    peft_config = None
    if method == "lora":
        peft_config = lora_config()
    else:
        ref, _ = build_model(preset, prec, device)
        ref.eval()
        ref.requires_grad_(False)
    ids = token_ids(cfg.vocab_size)

    rows = [{"prompt_ids": ids(prompt), "chosen_ids": ids(completion), "rejected_ids": ids(completion)}
            for _ in range(batch * steps)]
    from datasets import Dataset

    dataset = Dataset.from_list(rows)
    args = DPOConfig(**common_args(prec, steps, batch, out_dir, opts.get("ckpt", False)),
                     max_length=prompt + completion, dataset_num_proc=None)
    DPOTrainer._prepare_dataset = lambda self, dataset, *a, **k: dataset
    rec = Recorder(device == "cuda")
    trainer = DPOTrainer(model=model, ref_model=ref, args=args, train_dataset=dataset,
                         processing_class=word_tokenizer(cfg.vocab_size), peft_config=peft_config,
                         callbacks=[callback(rec)])
    return trainer, rec


def run_orpo(name, preset, prec, method, batch, prompt, completion, opts, steps, out_dir):
    """TRL 1.16's experimental ORPOTrainer, or CPOTrainer for `cpo` and `simpo` (SimPO is its
    loss_type): pairs of text completions of equal length, tokenized by the trainer itself."""
    from datasets import Dataset

    kind = RUNS[name][0]
    device = "cuda" if _cuda() else "cpu"
    model, cfg = build_model(preset, prec, device)
    peft_config = lora_config() if method == "lora" else None
    ids = token_ids(cfg.vocab_size)
    words = lambda k: " ".join(f"<{i}>" for i in ids(k))
    rows = [{"prompt": words(prompt), "chosen": " " + words(completion), "rejected": " " + words(completion)}
            for _ in range(batch * steps)]
    common = dict(**common_args(prec, steps, batch, out_dir, opts.get("ckpt", False)),
                  max_length=prompt + completion + 1, remove_unused_columns=False)
    if kind == "orpo":
        from trl.experimental.orpo import ORPOConfig as Config, ORPOTrainer as Trainer

        args = Config(**common)
    else:
        from trl.experimental.cpo import CPOConfig as Config, CPOTrainer as Trainer

        args = Config(**common, **({"loss_type": "simpo"} if kind == "simpo" else {}))
    rec = Recorder(device == "cuda")
    trainer = Trainer(model=model, args=args, train_dataset=Dataset.from_list(rows),
                      processing_class=word_tokenizer(cfg.vocab_size), peft_config=peft_config,
                      callbacks=[callback(rec)])
    return trainer, rec


def run_kto(name, preset, prec, method, batch, prompt, completion, opts, steps, out_dir):
    """KTOTrainer on unpaired rows, half of them desirable; each row's KL completion is the next
    row's completion (what KTOTrainer's dataset preparation builds, which is skipped here)."""
    from trl import KTOConfig, KTOTrainer

    device = "cuda" if _cuda() else "cpu"
    model, cfg = build_model(preset, prec, device)
    ref, peft_config = None, None
    if method == "lora":
        peft_config = lora_config()
    elif not opts.get("precompute"):
        ref, _ = build_model(preset, prec, device)
        ref.eval()
        ref.requires_grad_(False)
    ids = token_ids(cfg.vocab_size)

    n = batch * steps
    completions = [ids(completion) for _ in range(n)]
    rows = [{"prompt_ids": ids(prompt), "completion_ids": completions[i],
             "KL_completion_ids": completions[(i + 1) % n], "label": i % 2 == 0} for i in range(n)]
    from datasets import Dataset

    dataset = Dataset.from_list(rows)
    args = KTOConfig(**common_args(prec, steps, batch, out_dir, opts.get("ckpt", False)),
                     max_length=prompt + completion, dataset_num_proc=None,
                     precompute_ref_log_probs=bool(opts.get("precompute")))
    KTOTrainer._prepare_dataset = lambda self, dataset, *a, **k: dataset
    rec = Recorder(device == "cuda")
    trainer = KTOTrainer(model=model, ref_model=ref, args=args, train_dataset=dataset,
                         processing_class=word_tokenizer(cfg.vocab_size), peft_config=peft_config,
                         callbacks=[callback(rec)])
    return trainer, rec


def run_grpo(name, preset, prec, method, batch, prompt, completion, opts, steps, out_dir):
    import torch
    import trl

    kind = RUNS[name][0] if name in RUNS else "grpo"
    Config, Trainer = ((trl.RLOOConfig, trl.RLOOTrainer) if kind == "rloo"
                       else (trl.GRPOConfig, trl.GRPOTrainer))
    device = "cuda" if _cuda() else "cpu"
    model, cfg = build_model(preset, prec, device)
    if opts.get("beta"):
        path = os.path.join(out_dir, "policy")
        model.save_pretrained(path)
        model.config._name_or_path = path
    gen = torch.Generator().manual_seed(1)
    n = opts["num_generations"]
    accum = opts.get("accum", 1)
    rows = [{"prompt": " ".join(f"<{i}>" for i in torch.randint(3, cfg.vocab_size, (prompt,), generator=gen).tolist())}
            for _ in range(batch // n * steps * accum)]
    from datasets import Dataset

    dataset = Dataset.from_list(rows)
    args = Config(**common_args(prec, steps, batch, out_dir, opts.get("ckpt", False), accum),
                      num_generations=n, max_completion_length=completion, beta=opts.get("beta", 0.0),
                      generation_kwargs={"min_new_tokens": completion}, shuffle_dataset=False)
    Trainer._prepare_dataset = lambda self, dataset, *a, **k: dataset

    def reward(completions, **kw):
        return [float(len(c)) for c in completions]

    rec = Recorder(device == "cuda")
    ref_kw = {}
    peft_config = None
    if method == "lora":
        peft_config = lora_config()
    trainer = Trainer(model=model, reward_funcs=reward, args=args, train_dataset=dataset,
                          processing_class=word_tokenizer(cfg.vocab_size), callbacks=[callback(rec)],
                          peft_config=peft_config, **ref_kw)
    inner = trainer._generate_and_score_completions

    def generate_and_score(*a, **k):
        rec.mark("before-generation")
        result = inner(*a, **k)
        rec.mark("generation+scoring")
        return result

    trainer._generate_and_score_completions = generate_and_score
    return trainer, rec


def builder(kind):
    """The function that builds the trainer of `kind` (GRPO's builds RLOO's too)."""
    return {"dpo": run_dpo, "kto": run_kto, "orpo": run_orpo, "cpo": run_orpo, "simpo": run_orpo}.get(kind, run_grpo)


def run(name, steps, out_dir):
    import torch

    kind, preset, prec, method, batch, prompt, completion, opts = RUNS[name]
    if SHRINK[0]:
        prompt, completion = prompt // 16, completion // 16
    out = {"name": name, "run": RUNS[name], "status": "ok", "placeholders": list(PLACEHOLDERS)}
    cuda = _cuda()
    free0 = torch.cuda.mem_get_info() if cuda else (0, 0)
    out["used_before_model"] = free0[1] - free0[0]
    build = builder(kind)
    t0 = time.time()
    trainer, rec = build(name, preset, prec, method, batch, prompt, completion, opts, steps, out_dir)
    out["build_seconds"] = round(time.time() - t0, 2)
    shapes = out.setdefault("input_shapes", [])
    compute_loss = trainer.compute_loss

    def compute_loss_recording_shape(model, inputs, *a, **k):
        if len(shapes) < 2:
            shapes.append({key: list(v.shape) for key, v in inputs.items() if hasattr(v, "shape")})
        return compute_loss(model, inputs, *a, **k)

    trainer.compute_loss = compute_loss_recording_shape
    if cuda:
        torch.cuda.synchronize()
        out["after_build"] = {"allocated": torch.cuda.memory_allocated(), "device": rec.used()}
    try:
        trainer.train()
    except torch.OutOfMemoryError as e:
        out["status"] = "oom"
        out["error"] = str(e).splitlines()[0][:400]
    rec.summary(out)
    if cuda:
        stats = torch.cuda.memory_stats()
        out["alloc_retries"] = int(stats.get("num_alloc_retries", 0))
    return out


def main(argv):
    path = pathlib.Path(argv[1])
    deadline = time.time() + (float(argv[argv.index("--deadline") + 1]) if "--deadline" in argv else 600)
    only = argv[argv.index("--only") + 1].split(",") if "--only" in argv else list(RUNS)
    steps = int(argv[argv.index("--steps") + 1]) if "--steps" in argv else 4
    sys.path.insert(0, str(HERE))
    if "--tiny" in argv:
        SHRINK[0] = TINY
    ensure_trl_imports()
    import tempfile

    import torch
    import transformers
    import trl

    result = {"measured_on": time.strftime("%Y-%m-%d"), "device": "cuda" if torch.cuda.is_available() else "cpu",
              "environment": {"torch": torch.__version__, "transformers": transformers.__version__,
                              "trl": trl.__version__, "placeholders": PLACEHOLDERS,
                              "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None},
              "allocator": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""), "runs": []}
    for name in only:
        if deadline - time.time() < 20:
            result["runs"].append({"name": name, "status": "skipped", "error": "out of time"})
            continue
        t0 = time.time()
        try:
            with tempfile.TemporaryDirectory() as d:
                # GRPO generates every step (token by token): three steps, not four.
                row = run(name, min(steps, 3) if RUNS[name][0] in ("grpo", "rloo") else steps, d)
        except Exception:  # noqa: BLE001 - recorded; the next run still goes
            row = {"name": name, "status": "error", "error": traceback.format_exc()[-2500:]}
        import gc

        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        row["wall_seconds"] = round(time.time() - t0, 1)
        log(f"  {name}: {row['status']} peak_alloc={row.get('peak_allocated')} "
            f"peak_device={row.get('peak_device')} t={row.get('median_step_seconds')} ({row['wall_seconds']} s)")
        result["runs"].append(row)
        path.write_text(json.dumps(result, indent=1, default=str))
    path.write_text(json.dumps(result, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
