"""One decoder layer's saved bytes at real preset sizes, with CUDA's dispatch, against the core.

The CPU suite (test_saved_bytes.py) is exact where CPU and CUDA agree, at small sizes. This one
runs the presets' own configs (7B to 108B) on fake CUDA tensors (measure_cuda_fake.py): autocast's
CUDA lists, the fused dropout's bool mask, and each SDPA kernel's saved outputs (flash,
memory-efficient with its logsumexp padded to 32 rows, cuDNN, math), forced on both sides
(`--sdpa`). Exact, byte for byte. Which kernel PyTorch picks for a GPU is read from its source
(crates/headroom-core/src/sdpa.rs) and cannot be observed without one.
"""
import json
import os
import pathlib
import subprocess

import pytest

from measure_cuda_fake import saved_forward

HERE = pathlib.Path(__file__).parent
MODELS = HERE.parent.parent / "content" / "models"
BIN = os.environ.get("HEADROOM_BIN", str(HERE.parent.parent / "target" / "debug" / "headroom"))

# (preset, precision, kernel, sequence, dropout). Sequences under autocast are no weight's
# dimension (autocast's weight copies are told apart by shape); 1000 is not a multiple of 32
# (the memory-efficient kernel pads its logsumexp).
CASES = [
    ("llama-3.1-8b", "bf16", "flash", 4096, 0.0),
    ("llama-3.1-8b", "bf16", "efficient", 1000, 0.0),
    ("llama-3.1-8b", "bf16", "cudnn", 4096, 0.0),
    ("llama-3.1-8b", "bf16", "math", 1024, 0.0),
    ("llama-3.1-8b", "bf16", "math", 1024, 0.1),
    ("llama-3.1-8b", "amp-bf16", "flash", 2048, 0.0),
    ("llama-3.1-8b", "amp-bf16", "math", 512, 0.0),
    ("llama-3.1-70b", "bf16", "cudnn", 8000, 0.0),
    ("llama-3.1-70b", "amp-bf16", "efficient", 2000, 0.0),
    ("qwen2.5-7b", "amp-bf16", "efficient", 2048, 0.0),
    ("qwen2.5-72b", "bf16", "flash", 4096, 0.0),
    ("qwen3-8b", "amp-bf16", "cudnn", 2048, 0.0),
    ("mistral-7b-v0.3", "bf16", "flash", 8192, 0.0),
    # Issue 13's dense architectures. Granite 3.1's and StarCoder2's configs train with dropout
    # (0.1): the case's 0.0 replaces it on both sides, as the fused kernels' RNG state is not
    # observable on fake CUDA (their meta functions return it whatever the dropout).
    ("olmo-2-7b", "bf16", "cudnn", 4096, 0.0),
    ("olmo-2-13b", "amp-bf16", "flash", 2048, 0.0),
    ("olmo-3-7b", "bf16", "efficient", 4000, 0.0),
    ("granite-3.1-8b", "bf16", "flash", 4096, 0.0),
    ("smollm3-3b", "amp-bf16", "efficient", 2000, 0.0),
    ("starcoder2-7b", "bf16", "flash", 4096, 0.0),
    ("glm-4-9b-0414", "bf16", "flash", 4096, 0.0),
    ("glm-4-9b-0414", "amp-bf16", "efficient", 2000, 0.0),
    ("command-r7b", "bf16", "flash", 4096, 0.0),
    ("command-r7b", "amp-bf16", "cudnn", 2048, 0.0),
    # Llama 4 Scout's second layer: RoPE with the q/k L2 norm, every token through its 16
    # experts by bmm. (Qwen3-Next's and gpt-oss's grouped_mm experts ask the device for its
    # properties, which fake CUDA has not: checked on CPU only.)
    ("llama-4-scout-17b-16e", "bf16", "flash", 4096, 0.0),
    ("llama-4-scout-17b-16e", "amp-bf16", "cudnn", 2000, 0.0),
    pytest.param("phi-3-mini-4k", "amp-bf16", "flash", 2000, 0.0, marks=pytest.mark.xfail(
        strict=True,
        reason="found here, not fixed yet: +12.3 MB of 328 MB per layer. Phi-3 slices q, k and v "
               "from the fused qkv output; transformers' KV cache (on without checkpointing) "
               "concatenates v into its own tensor, so the qkv output is not kept by v's view; "
               "and the rotated q of a sliced (non-dense) view comes out (b, h, s, d)-contiguous, "
               "so the kernel's output does too and transpose(1, 2).contiguous() copies it "
               "before o_proj")),
]


def predict(preset, precision, kernel, seq, dropout):
    args = [BIN, "estimate", "--model", preset, "--gpu", "h100-sxm-80gb", "--sdpa", kernel,
            "--precision", precision, "--optimizer", "adamw", "--batch", "1", "--seq", str(seq),
            "--format", "json"]
    args += ["--dropout", str(dropout)]
    out = subprocess.run(args, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


@pytest.mark.parametrize("preset,precision,kernel,seq,dropout", CASES,
                         ids=[f"{c[0]}-{c[1]}-{c[2]}-s{c[3]}{'-dropout' if c[4] else ''}"
                              for c in (getattr(c, "values", c) for c in CASES)])
def test_one_layer_at_full_size_on_cuda(preset, precision, kernel, seq, dropout):
    config = json.loads((MODELS / f"{preset}.json").read_text())
    # The case's dropout replaces every dropout the config has (as `--dropout` does).
    for key in ("attention_dropout", "residual_dropout", "embedding_dropout"):
        if dropout or config.get(key):
            config[key] = dropout
    measured = saved_forward(config, 1, seq, precision, kernel)
    predicted = predict(preset, precision, kernel, seq, dropout)
    got = predicted["bytes"]["activations_per_layer"]
    want = measured["activations_per_layer"]
    assert got == want, (
        f"one layer: predicted {got}, fake CUDA {want} ({got - want:+d} B)\n"
        f"measured: {measured['layer1']}\npredicted: {predicted['layer_inventory']}")
