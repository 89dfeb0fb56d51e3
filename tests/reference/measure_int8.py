"""What bitsandbytes' 8-bit Linears (LLM.int8, `load_in_8bit`) keep for backward, measured on CPU
through the code path CUDA runs (groundwork for issue 29's 8-bit bases; the core does not model
them yet).

On a GPU, `bnb.matmul` runs `MatMul8bitLt`, whose forward keeps `ctx.tensors = (CAt, subA, A)`:
A is the Linear's input as a 2-D view (the input's own storage), kept as a Python attribute of
the autograd context, not through `save_for_backward`. On CPU bitsandbytes 0.50 trains through
`MatMul8bitFp` instead; this script routes `bnb.matmul` to `MatMul8bitLt` so the CPU runs the
GPU's autograd function. It walks the graph behind the loss and reports, per run, the distinct
storages those contexts hold. Two things follow from bitsandbytes' and PyTorch's code and are
what the numbers show:
- every 8-bit Linear whose input needs a gradient keeps that input: per Llama layer four
  storages (q/k/v's input, o_proj's, gate/up's, down_proj's), whatever LoRA adapts; the first
  layer's q/k/v input only when the embeddings' output needs a gradient (checkpointing's
  `enable_input_require_grads`);
- non-reentrant checkpointing (transformers 5's default) cannot drop them: its hooks see only
  `save_for_backward`. The contexts live as long as the graph, so the inputs stay from the
  forward through the whole backward, every layer's at once (`bytes_still_held_after_backward`:
  the graph walked again once backward ran, while the loss still holds it).

Run: `.venv/bin/python tests/reference/measure_int8.py > tests/reference/int8_probe.json`.
"""
import json
import logging
import tempfile
import warnings

import bitsandbytes as bnb
import bitsandbytes.nn.modules as modules
import peft
import torch
import transformers
from bitsandbytes.autograd import _functions as functions

warnings.filterwarnings("ignore")
logging.disable(logging.WARNING)


def cuda_matmul(A, B, out=None, state=None, threshold=0.0, bias=None):
    """`bnb.matmul` as it runs on CUDA in training: MatMul8bitLt (not the CPU's MatMul8bitFp)."""
    state = state or functions.MatmulLtState()
    if threshold > 0.0:
        state.threshold = threshold
    return functions.MatMul8bitLt.apply(A, B, out, bias, state)


bnb.matmul = functions.matmul = modules.bnb.matmul = cuda_matmul

CONFIG = dict(hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, vocab_size=1000, max_position_embeddings=256)
BATCH, SEQ = 2, 64


def build(checkpointing, targets):
    torch.manual_seed(0)
    cfg = transformers.AutoConfig.for_model("llama", **CONFIG)
    with tempfile.TemporaryDirectory() as tmp:
        transformers.AutoModelForCausalLM.from_config(cfg).save_pretrained(tmp)
        model = transformers.AutoModelForCausalLM.from_pretrained(
            tmp, quantization_config=transformers.BitsAndBytesConfig(load_in_8bit=True),
            dtype=torch.bfloat16, device_map="cpu")
    model = peft.get_peft_model(model, peft.LoraConfig(r=8, target_modules=targets, task_type="CAUSAL_LM"))
    model.train()
    if checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.enable_input_require_grads()
    return model


def held(loss):
    """Distinct storages the MatMul8bitLt contexts behind `loss` hold: {ptr: (bytes, shape)}."""
    seen, stack, out = set(), [loss.grad_fn], {}
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        if type(node).__name__.startswith("MatMul8bitLt"):
            for t in node.tensors:
                if isinstance(t, torch.Tensor) and t.numel():
                    out[t.untyped_storage().data_ptr()] = (t.untyped_storage().nbytes(), list(t.shape))
        stack.extend(n for n, _ in node.next_functions)
    return out


def main():
    runs = []
    for checkpointing in (False, True):
        for targets in (["q_proj", "v_proj"], "all-linear"):
            model = build(checkpointing, targets)
            ids = torch.randint(CONFIG["vocab_size"], (BATCH, SEQ))
            loss = model(input_ids=ids, labels=ids).loss
            h = held(loss)
            loss.backward()
            after = held(loss)
            runs.append({"checkpointing": checkpointing, "targets": targets, "storages": len(h),
                         "bytes": sum(b for b, _ in h.values()),
                         "shapes": sorted({(tuple(s), b) for b, s in h.values()}),
                         "bytes_still_held_after_backward": sum(b for b, _ in after.values())})
    print(json.dumps({"torch": torch.__version__, "transformers": transformers.__version__,
                      "peft": peft.__version__, "bitsandbytes": bnb.__version__, "config": CONFIG,
                      "batch": BATCH, "seq": SEQ, "runs": runs}, indent=1))


if __name__ == "__main__":
    main()
