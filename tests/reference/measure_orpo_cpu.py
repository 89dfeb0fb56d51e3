"""Measures the loss phase of TRL 1.16's ORPO and CPO (sigmoid, SimPO) trainers on CPU.

    /work/main/.venv/bin/python tests/reference/measure_orpo_cpu.py [--quick] [--json OUT]

Each case builds a tiny LlamaForCausalLM (hidden 64, 2 layers, vocab V), a word-level tokenizer
(one word per id, as measure_posttrain.word_tokenizer) and the trainer itself
(`trl.experimental.orpo.ORPOTrainer` / `trl.experimental.cpo.CPOTrainer`) on a text dataset of n
pairs. One batch comes from the trainer's own dataloader (its DPODataCollatorWithPadding), and one
step runs as Transformers' Trainer.training_step does it: `loss = trainer.compute_loss(model,
batch)`, `loss.backward()`. A warm-up step runs first (no optimizer: gradients are set to None
before the measured step).

Method (measure_peak.py's): torch.profiler with profile_memory records every allocation/free of
the CPU allocator; accumulated in time order they give the live bytes relative to the start of
the measured step. Marks (record_function "mark:<name>"):
  step     - before compute_loss
  loss     - lm_head's forward pre-hook (the logits are counted in the loss phase, as the core does)
  loss_end - after compute_loss returned
  backward - before loss.backward()
  dlogits  - a tensor hook on the logits: their gradient is formed, lm_head's backward not yet run
  end      - after backward
Reported, relative to L0 = live at "loss" (everything before lm_head: the layers' saved activations,
the batch tensors):
  retained      = live(loss_end) - L0           (what the loss forward leaves for backward)
  forward_peak  = max live in [loss, loss_end) - L0
  backward_peak = max live in [backward, dlogits] - L0 (peak of the loss's backward, incl. dlogits)
  at_dlogits    = live at dlogits - L0
The autograd-saved tensors of the loss graph (nodes between the scalar loss and the logits'
grad_fn) are listed by walking the graph's `_saved_*` attributes, deduplicated by storage.
One intra-op thread (no per-thread scratch buffers, as measure_peak.py).
"""
import argparse
import json
import os
import sys
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("WANDB_DISABLED", "true")
warnings.filterwarnings("ignore")

import torch
from torch._C._profiler import _EventType
from torch.profiler import ProfilerActivity, profile, record_function

from measure_peak import walk


def _mark(name):
    with record_function(f"mark:{name}"):
        pass


def _events(prof):
    """(time, signed bytes, parent op name) of allocations, and (time, mark) of marks."""
    allocs, marks = [], []
    for node, parent in walk(prof):
        if node.tag == _EventType.Allocation and str(node.extra_fields.device).split(":")[0] == "cpu":
            allocs.append((node.start_time_ns, node.extra_fields.alloc_size, parent.name if parent else "?"))
        elif node.name.startswith("mark:"):
            marks.append((node.start_time_ns, node.name[5:]))
    return sorted(allocs, key=lambda e: e[0]), sorted(marks)


def word_tokenizer(vocab_size):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {f"<{i}>": i for i in range(vocab_size)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<0>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<0>", pad_token="<1>", eos_token="<2>",
                                   bos_token=None)


def build_model(vocab, precision):
    import transformers

    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=512,
                                   tie_word_embeddings=False, pad_token_id=1, eos_token_id=2, bos_token_id=None)
    model = transformers.LlamaForCausalLM(cfg)
    if precision == "bf16":
        model = model.to(torch.bfloat16)
    model.train()
    return model


def build_trainer(kind, model, tok, n, prompt_len, chosen_len, rejected_len, vocab):
    from datasets import Dataset

    g = torch.Generator().manual_seed(1)
    words = lambda k: " ".join(f"<{int(i)}>" for i in torch.randint(3, vocab, (k,), generator=g))
    rows = [{"prompt": words(prompt_len), "chosen": " " + words(chosen_len), "rejected": " " + words(rejected_len)}
            for _ in range(n)]
    ds = Dataset.from_list(rows)
    common = dict(output_dir="/tmp/orpo_measure_out", per_device_train_batch_size=n, report_to=[], use_cpu=True,
                  max_length=4096, remove_unused_columns=False, logging_steps=1000,
                  save_strategy="no", disable_tqdm=True, dataloader_num_workers=0)
    if kind == "orpo":
        from trl.experimental.orpo import ORPOConfig, ORPOTrainer

        args = ORPOConfig(**common)
        return ORPOTrainer(model=model, args=args, train_dataset=ds, processing_class=tok)
    from trl.experimental.cpo import CPOConfig, CPOTrainer

    extra = {"cpo-sigmoid": {}, "simpo": {"loss_type": "simpo"}, "alphapo": {"loss_type": "alphapo"},
             "simpo-a0": {"loss_type": "simpo", "cpo_alpha": 0.0}}[kind]
    args = CPOConfig(**common, **extra)
    return CPOTrainer(model=model, args=args, train_dataset=ds, processing_class=tok)


def saved_tensors(loss, stop_fn):
    """Autograd-saved tensors of nodes from loss.grad_fn down to (not incl.) stop_fn."""
    seen_nodes, out, storages = set(), [], {}
    stack = [loss.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or node in seen_nodes or node is stop_fn:
            continue
        seen_nodes.add(node)
        for attr in dir(node):
            if not attr.startswith("_saved_"):
                continue
            try:
                v = getattr(node, attr)
            except Exception:
                continue
            vs = v if isinstance(v, (tuple, list)) else [v]
            for t in vs:
                if isinstance(t, torch.Tensor):
                    st = t.untyped_storage()
                    key = st.data_ptr()
                    if key not in storages:
                        storages[key] = st.nbytes()
                        out.append({"node": type(node).__name__, "attr": attr, "shape": list(t.shape),
                                    "dtype": str(t.dtype).replace("torch.", ""), "storage_bytes": st.nbytes()})
        stack.extend(f for f, _ in node.next_functions)
    return out


def timeline(series, marks, times, base, min_bytes=0):
    """The loss phase's allocations and frees of at least `min_bytes` ("size live-above-base op"
    lines), with the phase marks interleaved (--detail)."""
    tl, mi = [], 0
    mlist = [(t, m) for t, m in marks if m in ("loss", "loss_end", "backward", "dlogits", "end")]
    for t, lv, size, op in series:
        while mi < len(mlist) and mlist[mi][0] <= t:
            tl.append(f"--- {mlist[mi][1]}")
            mi += 1
        if times["loss"] <= t <= times["dlogits"] + 1 and abs(size) >= min_bytes:
            tl.append(f"{size:+12d} {lv - base:12d} {op}")
    return tl


def marked_step(trainer, model, batch, state, amp=False):
    """One step as Trainer.training_step runs it (compute_loss, then backward), with the phase
    marks; `step(True)` also records the autograd graph's saved tensors in `state["saved"]`."""
    def step(prof_detail):
        _mark("step")
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
            loss = trainer.compute_loss(model, batch)
        _mark("loss_end")
        if prof_detail:
            state["saved"] = saved_tensors(loss, state["logits_fn"])
        _mark("backward")
        loss.backward()
        _mark("end")
        for p in model.parameters():
            p.grad = None
        del loss

    return step


def loss_phase(allocs, times):
    """The live bytes after each allocation or free of `allocs` ((time, size, ..., op) in time
    order) and the loss phase's figures relative to what was live when lm_head started (the
    "loss" mark): retained at "loss_end", the forward peak between them, the backward peak from
    "backward" to "dlogits", and what is live at "dlogits"."""
    live, series = 0, []
    for t, size, *rest in allocs:
        live += size
        series.append((t, live, size, rest[-1]))

    def live_at(t):
        v = 0
        for tt, lv, _, _ in series:
            if tt >= t:
                break
            v = lv
        return v

    def peak_in(t0, t1):
        v = live_at(t0)
        for tt, lv, _, _ in series:
            if t0 <= tt <= t1:
                v = max(v, lv)
        return v

    base = live_at(times["loss"])
    return series, base, {
        "retained": live_at(times["loss_end"]) - base,
        "forward_peak": peak_in(times["loss"], times["loss_end"]) - base,
        "backward_peak": peak_in(times["backward"], times["dlogits"]) - base,
        "at_dlogits": live_at(times["dlogits"]) - base,
        "step_residual": series[-1][1] if series else 0,
    }


def measure(kind, precision, n, s_target, vocab, detail=False):
    """One measured step; returns the figures and the batch's shapes."""
    tok = word_tokenizer(vocab)
    model = build_model(vocab, "bf16" if precision == "bf16" else "fp32")
    # chosen: prompt + chosen words + eos = s_target tokens; rejected shorter (padding exercised)
    prompt_len = 4
    chosen_len = s_target - prompt_len - 1
    rejected_len = max(1, chosen_len - 3)
    trainer = build_trainer(kind, model, tok, n, prompt_len, chosen_len, rejected_len, vocab)
    batch = next(iter(trainer.get_train_dataloader()))
    batch = trainer._prepare_inputs(batch)
    amp = precision == "amp-bf16"
    lm_head = model.get_output_embeddings()
    state = {}

    def pre(m, a):
        _mark("loss")

    def post(m, a, out):
        state["logits_fn"] = out.grad_fn
        state["logits"] = (list(out.shape), str(out.dtype).replace("torch.", ""))
        out.register_hook(lambda g: _mark("dlogits"))

    hooks = [lm_head.register_forward_pre_hook(pre), lm_head.register_forward_hook(post)]

    step = marked_step(trainer, model, batch, state, amp)

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        step(False)  # warm-up
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=False) as prof:
            step(True)
    finally:
        torch.set_num_threads(threads)
        for h in hooks:
            h.remove()
    allocs, marks = _events(prof)
    times = {name: t for t, name in marks}
    series, L0, figures = loss_phase(allocs, times)
    r = {
        "kind": kind, "precision": precision, "n": n, "vocab": vocab,
        "batch_shapes": {k: list(v.shape) for k, v in batch.items() if isinstance(v, torch.Tensor)},
        "logits": state["logits"], **figures, "saved": state["saved"],
    }
    s = max(batch["chosen_input_ids"].shape[1], batch["rejected_input_ids"].shape[1])
    r["s"] = int(s)
    if detail:
        r["timeline"] = timeline(series, marks, times, L0, min_bytes=256)
    return r


def formulas(kind, precision, n, s, V, cpu=True):
    """The report's formulas (big terms only; small O(n*s) int/bool/scalar tensors are left out).

    N = 2n sequences, T = s-1 shifted positions, c = logits dtype bytes.
    L = N*s*V*c logits; P = N*T*V*c the shifted logits; H = n*T*V*c the chosen half shifted;
    R = T*V*c one sequence's row. nll: the chosen NLL cross-entropy is computed (cpo_alpha != 0;
    always for ORPO). copy: `.contiguous()` of all_logits[:n, :-1] copies (n >= 2; a no-op for n = 1).
    `cpu=True` adds the CPU-only transients (named below); `cpu=False` is the CUDA expectation.
    """
    c = 4 if precision == "fp32" else 2
    N, T = 2 * n, s - 1
    L, P, H, R = N * s * V * c, N * T * V * c, n * T * V * c, T * V * c
    nll = 0 if kind == "alphapo" else 1
    copy = 1 if n >= 2 else 0
    if c == 4:
        # logits saved (logsumexp saves its input rows, gather its input): held to backward
        retained = L + nll * H
        fwd = max(L + nll * (copy * H + H),      # CE: contiguous copy + log_softmax output
                  L + nll * H + R)               # one row's logsumexp temp (self - max)
        bwd = max(retained + (N + 2) * R,        # last row's logsumexp backward (sub, exp, mul)
                  retained + 2 * P)              # unbind backward: N row grads + their stack
        return {"retained": retained, "forward_peak": fwd, "backward_peak": bwd}
    # half precision: per-row log_softmax outputs saved; the logits themselves freed
    retained = P + nll * H
    fwd = max(L + nll * (copy * H + H), L + nll * H + P)
    if cpu:
        # CPU mean() of a bf16 tensor sums an fp32 copy of it (metrics logits/chosen|rejected .mean()):
        # ORPO slices [:n, :-1] (n*T*V*4), CPO [:n] (n*s*V*4)
        fwd += n * (T if kind == "orpo" else s) * V * 4
    rows = retained + 2 * R + (R if cpu else 0)  # gather-backward zeros (+ CPU scatter_add_ fp32 buffer T*V*4 = 2R) -> log_softmax bwd
    bwd = max(rows,
              2 * P + nll * H,                   # stack of N row grads
              L + P + nll * H,                   # slice backward zeros while the stack is alive
              nll * (L + 3 * H),                 # CE: grad1 + saved log_softmax + nll grad + log_softmax grad
              nll * (2 * L + n * s * V * c))     # grad1 + CE slice zeros (n,s,V) + [:n] slice zeros (N,s,V)
    return {"retained": retained, "forward_peak": fwd, "backward_peak": bwd}


def check(paths):
    rows = []
    for path in paths:
        for r in json.load(open(path)):
            if r["precision"] == "amp-bf16":
                continue
            f = formulas(r["kind"], r["precision"], r["n"], r["s"], r["vocab"])
            g = formulas(r["kind"], r["precision"], r["n"], r["s"], r["vocab"], cpu=False)
            for k in ("retained", "forward_peak", "backward_peak"):
                rows.append((r["kind"], r["precision"], r["n"], r["s"], k, r[k], f[k], r[k] - f[k], g[k]))
    print("| trainer | dtype | n | s | figure | measured (CPU) | formula (CPU) | diff | formula (CUDA) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(str(x) for x in row) + " |")
    return rows


def run_cases(measure_fn, a):
    """Measures every kind x precision x shape of the parsed arguments `a`, prints each run's
    figures (and with --detail its saved tensors and timeline) and writes them to --json."""
    res = []
    for kind in a.kinds.split(","):
        for prec in a.precisions.split(","):
            for sh in a.shapes.split(","):
                n, s = map(int, sh.split("x"))
                r = measure_fn(kind, prec, n, s, a.vocab, detail=a.detail)
                res.append(r)
                print(json.dumps({k: v for k, v in r.items() if k not in ("saved", "timeline", "batch_shapes")}),
                      flush=True)
                if a.detail:
                    for x in r["saved"]:
                        print("   saved", x)
                    print("\n".join("   " + line for line in r["timeline"]))
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(res, fh, indent=1)


def cli(measure_fn, check_fn, kinds, shapes, parser=None):
    """The measuring scripts' command line: the cases to run (--kinds, --precisions, --shapes,
    --vocab), --json to keep them, --detail for the timelines, or --check FILES to compare
    kept runs with the script's formulas."""
    ap = parser or argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--detail", action="store_true")
    ap.add_argument("--kinds", default=kinds)
    ap.add_argument("--precisions", default="bf16,fp32")
    ap.add_argument("--shapes", default=shapes)
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--check", nargs="*", help="compare saved --json results with the formulas")
    a = ap.parse_args()
    if a.check:
        check_fn(a.check)
        return
    run_cases(measure_fn, a)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    cli(measure, check, kinds="orpo,cpo-sigmoid,simpo,alphapo", shapes="1x16,2x33,3x64", parser=ap)


if __name__ == "__main__":
    main()
