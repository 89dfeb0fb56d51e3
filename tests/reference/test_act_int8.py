"""int8 activation compression (worked example 2's `compress_activation`), measured.

A `saved_tensors_hooks` pack/unpack pair around each decoder layer's forward packs every
floating-point tensor the layer saves to int8 with one scale (`abs().max() / 127`, a 0-dim
tensor of the tensor's dtype), one packed copy per storage (a tensor saved by several ops, or
its views, is packed once), and leaves parameters, masks and indices alone. The packed bytes of
one layer must equal the core's `activations_per_layer` with `act_int8`, exactly.
"""
import json
import os
import pathlib
import subprocess

import pytest
import torch
import transformers

from test_saved_bytes import RNG_BYTES

HERE = pathlib.Path(__file__).parent
BIN = os.environ.get("HEADROOM_BIN", str(HERE.parent.parent / "target" / "debug" / "headroom"))

CONFIG = {"model_type": "llama", "vocab_size": 3000, "hidden_size": 192, "intermediate_size": 512,
          "num_hidden_layers": 3, "num_attention_heads": 6, "num_key_value_heads": 2,
          "tie_word_embeddings": False}
BATCH, SEQ = 2, 64


class Int8Pack:
    """The pack/unpack pair, with the bytes it keeps per storage."""

    def __init__(self, params):
        self.params = {p.untyped_storage().data_ptr() for p in params}
        self.packed = {}
        self.alive = []

    def pack(self, t):
        st = t.untyped_storage()
        key = st.data_ptr()
        if key in self.params or not t.is_floating_point():
            return t
        if key not in self.packed:
            flat = torch.empty(0, dtype=t.dtype).set_(st)
            scale = flat.abs().max() / 127
            q = (flat / scale).round().to(torch.int8)
            # The storage is kept referenced (`self.alive`) only so that no later tensor reuses
            # its address and reads as already packed; a real hook would let it go.
            self.packed[key] = (q, scale)
            self.alive.append(st)
        return ("int8", key, t.size(), t.stride(), t.storage_offset(), t.dtype)

    def unpack(self, packed):
        if not (isinstance(packed, tuple) and packed and packed[0] == "int8"):
            return packed
        _, key, size, stride, offset, dtype = packed
        q, scale = self.packed[key]
        return (q.to(dtype) * scale).as_strided(size, stride, offset)

    def bytes(self):
        return sum(q.untyped_storage().nbytes() + s.untyped_storage().nbytes() for q, s in self.packed.values())


def packed_layer_bytes(precision):
    torch.manual_seed(0)
    cfg = transformers.AutoConfig.for_model(**CONFIG)
    model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa")
    if precision == "bf16":
        model = model.to(torch.bfloat16)
    model.train()
    hooks = Int8Pack(model.parameters())
    per_layer = []
    for layer in model.model.layers:
        forward = layer.forward

        def wrapped(*a, _forward=forward, **k):
            before = hooks.bytes()
            with torch.autograd.graph.saved_tensors_hooks(hooks.pack, hooks.unpack):
                out = _forward(*a, **k)
            per_layer.append(hooks.bytes() - before)
            return out

        layer.forward = wrapped
    ids = torch.randint(CONFIG["vocab_size"], (BATCH, SEQ), generator=torch.Generator().manual_seed(1))
    out = model(input_ids=ids, labels=ids)
    out.loss.backward()  # the unpacked tensors run backward
    assert all(p.grad is not None for p in model.parameters())
    return per_layer[len(per_layer) // 2]


def core_layer_bytes(precision, tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(CONFIG))
    out = subprocess.run([BIN, "estimate", "--model", str(config), "--batch", str(BATCH), "--seq", str(SEQ),
                          "--precision", precision, "--attention", "sdpa", "--sdpa", "flash", "--act-int8",
                          "--format", "json"],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)["bytes"]["activations_per_layer"]


@pytest.mark.parametrize("precision", ["bf16", "fp32"])
def test_packed_bytes_per_layer_match(precision, tmp_path):
    # Compared with the core's flash kernel, the one CPU runs (on an H100 bf16 takes cuDNN and
    # fp32 with grouped-query attention the math kernel); CUDA's flash kernel also keeps its RNG
    # tensors (24 B, integers, which the packing leaves as they are), CPU's none.
    assert core_layer_bytes(precision, tmp_path) == packed_layer_bytes(precision) + RNG_BYTES["flash"]
