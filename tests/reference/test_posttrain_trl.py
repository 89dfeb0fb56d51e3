"""TRL 1.16's own trainers on CPU, against what the core assumes of each step (issue 31, item 5).

The core models DPO, KTO, ORPO, CPO, SimPO, GRPO and RLOO from TRL's code; here TRL's trainers
(DPOTrainer, KTOTrainer, the experimental ORPOTrainer and CPOTrainer, GRPOTrainer, RLOOTrainer)
build and train two steps of a tiny model (two layers,
64 wide, a 1,000-token vocabulary: measure_posttrain.py --tiny) on CPU, and every model call is
counted: how many sequences the training forward runs, how many no-grad forwards the step adds
(DPO's reference pass; KTO's KL pass and its reference passes), how many no-grad scoring
passes GRPO and RLOO run over their completions, and whether a reference model is loaded. Each
count must be the core's (its JSON: tokens per step, the no-grad forwards' FLOPs, the weights)
or, where the core's JSON does not carry the count, the one its documentation states
(`Scenario::no_grad_forwards`, `estimate::step::Generation`).

Not here: bytes. TRL's log-probability head runs torch ops on CPU where CUDA runs Triton
kernels, so a CPU peak is not CUDA's; the GPU runs in gpu/h200/posttrain are the check of bytes.
"""
import json
import os
import subprocess
import sys
import tempfile

import pytest

import measure_posttrain as mp
from test_saved_bytes import BIN

trl = pytest.importorskip("trl")

PROMPT, COMPLETION, BATCH = 8, 24, 4
# Steps each run trains.
STEPS = 2


def core(kind, method, extra=()):
    """The core's JSON for the tiny Qwen2.5 0.5B-shaped model of the runs below."""
    config = json.loads((mp.MODELS / "qwen2.5-0.5b.json").read_text())
    config.update(mp.TINY)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(config, f)
    args = [BIN, "estimate", "--model", f.name, "--gpu", "h200-sxm-141gb", "--batch", str(BATCH), "--seq",
            str(PROMPT + COMPLETION), "--precision", "fp32", "--method", method, "--trainer", kind, "--format",
            "json", *extra]
    if method == "lora":
        args += ["--rank", "16", "--targets", "all"]
    out = subprocess.run(args, capture_output=True, text=True)
    os.unlink(f.name)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def term(e, name):
    return next((t for t in e["speed"]["terms"] if t["id"] == name), None)


def count_calls(kind, method, opts):
    """Runs STEPS steps of TRL's trainer; every model forward as (grad enabled, sequences, which
    model), and the no-grad scoring passes of GRPO and RLOO as (grad enabled, which model)."""
    import torch

    mp.SHRINK[0] = mp.TINY
    mp.ensure_trl_imports()
    name = f"test-{kind}-{method}"
    mp.RUNS[name] = (kind, "qwen2.5-0.5b", "fp32", method, BATCH, PROMPT * 16, COMPLETION * 16, opts)
    build = mp.builder(kind)
    calls, scoring, phase = [], [], ["train"]
    with tempfile.TemporaryDirectory() as d:
        torch.manual_seed(0)
        trainer, _ = build(name, "qwen2.5-0.5b", "fp32", method, BATCH, PROMPT, COMPLETION, opts, STEPS, d)
        models = {"policy": trainer.model}
        if getattr(trainer, "ref_model", None) is not None:
            models["reference"] = trainer.ref_model
        for who, m in models.items():
            def hook(module, args, kwargs, who=who):
                ids = kwargs.get("input_ids", args[0] if args else None)
                if ids is not None and phase[0] == "train":
                    calls.append((torch.is_grad_enabled(), ids.shape[0], who, kwargs.get("use_cache")))
            m.register_forward_pre_hook(hook, with_kwargs=True)
        if kind in ("grpo", "rloo"):
            inner_gen = trainer._generate_and_score_completions
            inner_logps = trainer._get_per_token_logps_and_entropies

            def generate_and_score(*a, **k):
                phase[0] = "generation"
                try:
                    return inner_gen(*a, **k)
                finally:
                    phase[0] = "train"

            def logps(model, *a, **k):
                if phase[0] == "generation":
                    who = "reference" if model is getattr(trainer, "ref_model", None) else "policy"
                    scoring.append((torch.is_grad_enabled(), who))
                return inner_logps(model, *a, **k)

            trainer._generate_and_score_completions = generate_and_score
            trainer._get_per_token_logps_and_entropies = logps
        trainer.train()
        has_reference = "reference" in models
    del mp.RUNS[name]
    return calls, scoring, has_reference


@pytest.mark.parametrize("kind,method,opts,extra", [
    ("dpo", "full", {}, []),
    ("dpo", "lora", {}, []),
    ("kto", "full", {}, []),
    ("kto", "lora", {}, []),
    ("kto", "full", {"precompute": True}, ["--precompute-ref-log-probs"]),
], ids=["dpo-full", "dpo-lora", "kto-full", "kto-lora", "kto-full-precompute"])
def test_preference_trainers_forwards_and_reference(kind, method, opts, extra):
    calls, _, has_reference = count_calls(kind, method, opts)
    e = core(kind, method, extra)
    sft = core("sft", method)
    trained = [c for c in calls if c[0]]
    assert len(trained) == STEPS, calls
    # The training forward's sequences: the core's tokens per step over the sequence length.
    sequences = e["speed"]["tokens_per_step"] // (PROMPT + COMPLETION)
    assert all(c[1] == sequences for c in trained), (calls, sequences)
    # use_cache=False in every forward (the core holds no KV cache for these trainers).
    assert all(c[3] is False for c in calls), calls
    # The no-grad forwards per step, each over the batch's sequences; the core counts them in
    # its no-grad forwards' FLOPs (KTO with precomputed references: one pass, the unit).
    no_grad = [c for c in calls if not c[0]]
    per_step = len(no_grad) // STEPS
    assert len(no_grad) == per_step * STEPS and all(c[1] == sequences for c in no_grad), calls
    expected = {("dpo", False): 1, ("kto", False): 3, ("kto", True): 1}[(kind, bool(opts.get("precompute")))]
    assert per_step == expected
    if kind == "kto" and not opts.get("precompute"):
        unit = term(core(kind, method, ["--precompute-ref-log-probs"]), "reference_forward")["flops"]
        assert term(e, "reference_forward")["flops"] == pytest.approx(per_step * unit, rel=1e-9)
    # A reference model only for a full fine-tune without precomputed log-probabilities; the
    # core then holds its weights beside the policy's.
    assert has_reference == (method == "full" and not opts.get("precompute"))
    assert (e["bytes"]["weights"] == 2 * sft["bytes"]["weights"]) == has_reference


@pytest.mark.parametrize("kind,method", [("orpo", "full"), ("orpo", "lora"), ("cpo", "full"), ("simpo", "lora")])
def test_reference_free_trainers_one_forward_of_the_pairs(kind, method):
    """ORPO, CPO and SimPO: one forward per step over the pairs' 2 x batch sequences, with
    use_cache=False, no other forward and no reference model (the core holds the policy's
    weights alone and no KV cache)."""
    calls, _, has_reference = count_calls(kind, method, {})
    e = core(kind, method)
    sft = core("sft", method)
    sequences = e["speed"]["tokens_per_step"] // (PROMPT + COMPLETION)
    assert sequences == 2 * BATCH
    assert len(calls) == STEPS and all(c[0] and c[1] == sequences and c[3] is False for c in calls), calls
    assert not has_reference
    assert e["bytes"]["weights"] == sft["bytes"]["weights"]
    assert all(c["id"] != "kv_cache" or c["bytes"] == 0 for c in e["components"])


@pytest.mark.parametrize("kind,method,beta", [
    ("grpo", "full", 0.0), ("grpo", "full", 0.04), ("grpo", "lora", 0.04),
    ("rloo", "full", 0.0), ("rloo", "full", 0.05), ("rloo", "lora", 0.05),
])
def test_online_trainers_scoring_passes_and_reference(kind, method, beta):
    opts = {"num_generations": BATCH, "beta": beta}
    calls, scoring, has_reference = count_calls(kind, method, opts)
    # generate() runs under no_grad and is not counted; the training forward runs the batch.
    assert len([c for c in calls if c[0]]) == STEPS
    # The scoring passes before training (one generation per step, batch x accum = BATCH
    # completions, scored in one chunk): the reference's with a KL term, and RLOO's policy pass
    # always (Generation::of: `scen.kl || Rloo`).
    per_step = len(scoring) / STEPS
    assert all(not grad for grad, _ in scoring)
    assert per_step == (beta > 0) + (kind == "rloo"), scoring
    e = core(kind, method, ["--prompt", str(PROMPT)] + (["--kl"] if beta > 0 else []))
    sft = core("sft", method)
    assert has_reference == (method == "full" and beta > 0)
    assert (e["bytes"]["weights"] == 2 * sft["bytes"]["weights"]) == has_reference


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
