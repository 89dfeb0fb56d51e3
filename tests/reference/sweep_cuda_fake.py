"""Every preset's one layer on fake CUDA against the core (cuDNN, the H100's kernel, which
also takes the masks of sliding-window layers past their window; bf16 and autocast, batch 1,
sequence 2000): the wider survey behind test_cuda_fake.py, which pins the exact ones
and the traced disagreements. Not part of the test command (a few minutes); run with
`HEADROOM_BIN=target/debug/headroom .venv/bin/python tests/reference/sweep_cuda_fake.py` and
it prints the table in cuda_fake_report.md (presets named as arguments: only their rows)."""
import json
import os
import pathlib
import subprocess
import sys
import tempfile

import transformers

from measure_cuda_fake import saved_forward

HERE = pathlib.Path(__file__).parent
BIN = os.environ.get("HEADROOM_BIN", str(HERE.parent.parent / "target" / "debug" / "headroom"))

print("| preset | precision | predicted | fake CUDA | error |\n|---|---|---|---|---|")
# Presets whose layer 1 is a MoE layer while the core's one-layer figure is their dense layer's:
# every layer made MoE (given to the core as a file), so that both sides describe a MoE layer.
ALL_MOE = {"first_k_dense_replace": 0, "interleave_moe_layer_step": 1}
# Gemma 3's and Mistral 3's wrappers need image inputs: their text model is built from the text
# config (as test_cuda_fake.py does; the vision tower is outside the layers).
WRAPPERS = {"gemma3", "mistral3"}
for path in sorted((HERE.parent.parent / "content" / "models").glob("*.json")):
    preset = path.stem
    if sys.argv[1:] and preset not in sys.argv[1:]:
        continue
    config = json.loads(path.read_text())
    if config["model_type"] in WRAPPERS:
        config = dict(config["text_config"])
        config.setdefault("vocab_size", transformers.AutoConfig.for_model(**config).vocab_size)
    model = preset
    text = config.get("text_config", config)
    if text.get("first_k_dense_replace") == 1 or text.get("interleave_moe_layer_step", 1) > 1:
        text.update({k: v for k, v in ALL_MOE.items() if k in text})
        model = str(pathlib.Path(tempfile.gettempdir()) / f"{preset}-all-moe.json")
        pathlib.Path(model).write_text(json.dumps(config))
    # gpt-oss has no SDPA path in transformers: eager on both sides. The Qwen-VL wrappers run
    # a text-only forward: no images on the core's side either.
    kernel = "eager" if config.get("model_type") == "gpt_oss" else "cudnn"
    images = ["--images", "0"] if config.get("model_type") in ("qwen2_5_vl", "qwen3_vl") else []
    for precision in ("bf16", "amp-bf16"):
        try:
            measured = saved_forward(config, 1, 2000, precision, kernel)["activations_per_layer"]
        except Exception as e:  # a model fake CUDA cannot run
            print(f"| {preset} | {precision} | | {type(e).__name__} | not measurable |")
            continue
        attention = ["--attention", "eager"] if kernel == "eager" else ["--sdpa", "cudnn"]
        out = subprocess.run([BIN, "estimate", "--model", model, "--gpu", "h100-sxm-80gb", *attention,
                              "--precision", precision, "--batch", "1", "--seq", "2000", "--format", "json",
                              *images],
                             capture_output=True, text=True, check=True)
        predicted = json.loads(out.stdout)["bytes"]["activations_per_layer"]
        diff = predicted - measured
        error = ("exact" if diff == 0 else f"{diff:+d} B" if abs(diff) < 1024
                 else f"{100 * diff / measured:+.2f}%")
        print(f"| {preset} | {precision} | {predicted} | {measured} | {error} |", flush=True)
