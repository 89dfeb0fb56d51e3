"""A full-size model's forward with CUDA's dispatch, on a machine with no GPU.

Under `FakeTensorMode`, tensors on `cuda` carry shapes, dtypes and strides but no memory, and
every op runs CUDA's dispatch: autocast's CUDA lists, the fused dropout, LayerNorm's fp32
statistics, and the fused attention kernels' own outputs (their meta functions,
torch/_meta_registrations.py). `saved_tensors_hooks` see what autograd keeps for backward.

Two things do not run without a GPU: backward (the autograd engine asks for a device) and
SDPA's choice of kernel (it reads the device's properties). So attention is routed to a kernel
explicitly, called as `scaled_dot_product_attention` calls it on CUDA
(aten/src/ATen/native/transformers/attention.cpp): q, k and v as transformers hands them,
grouped-query k and v not repeated (every CUDA kernel takes them as they are), the causal flag,
and under autocast the inputs cast to the autocast dtype (SDPA is on autocast's lower-precision
list).
"""
import gc
import weakref

import torch
import transformers
from torch._subclasses.fake_tensor import FakeTensorMode
from transformers import AttentionInterface

KERNEL = {"kernel": "flash", "dtype": None}
# The decoder layer running now (set by saved_forward's hooks) and the layers that called SDPA:
# a layer without softmax attention (Qwen3-Next's gated DeltaNet layers) saves no RNG state.
LAYER = {"now": "outside", "sdpa": set()}

# Bytes of the RNG tensors a CUDA SDPA kernel saves for backward, with or without dropout:
# flash's rng_state (uint64[2]) and `unused` (a uint64), the memory-efficient and cuDNN
# kernels' philox seed and offset (two int64). Measured on an H100 (torch 2.11).
RNG_BYTES = {"flash": 24, "efficient": 16, "cudnn": 16}


def _attention(module, q, k, v, mask, scaling=None, dropout=0.0, **kwargs):
    """transformers' attention call routed to one CUDA SDPA kernel (`KERNEL`)."""
    LAYER["sdpa"].add(LAYER["now"])
    amp = KERNEL["dtype"] is not None
    if amp:
        q, k, v = (t.to(KERNEL["dtype"]) for t in (q, k, v))
    # Autocast's wrapper runs SDPA with autocast off inside (the math kernel's own matmuls and
    # softmax keep its fp32 upcast).
    torch.set_autocast_enabled("cuda", False)
    try:
        window = _local_window(module, kwargs)
        if window is None or q.shape[2] < window:
            out = _kernel(KERNEL["kernel"], q, k, v, scaling, dropout)
        else:
            # The boolean mask transformers would build for SDPA: (1, 1, s, s) expanded over
            # the batch (only its shape matters to fake tensors).
            b, s = q.shape[0], q.shape[2]
            mask = torch.ones((1, 1, s, s), dtype=torch.bool, device=q.device).expand(b, 1, s, s)
            out = _masked_kernel(KERNEL["kernel"], q, k, v, mask, scaling, dropout)
    finally:
        torch.set_autocast_enabled("cuda", amp)
    # sdpa_attention_forward's own `transpose(1, 2).contiguous()`.
    return out.transpose(1, 2).contiguous(), None


def _kernel(kind, q, k, v, scaling, dropout):
    """One SDPA kernel's op, as attention.cpp calls it on CUDA (causal, no mask)."""
    ops = torch.ops.aten
    if kind == "flash":
        out = ops._scaled_dot_product_flash_attention(q, k, v, dropout, True, False, scale=scaling)[0]
    elif kind == "efficient":
        out = ops._scaled_dot_product_efficient_attention(q, k, v, None, True, dropout, True, scale=scaling)[0]
    elif kind == "cudnn":
        out = ops._scaled_dot_product_cudnn_attention(q, k, v, None, True, dropout, True, False, scale=scaling)[0]
    elif kind == "math":
        out = ops._scaled_dot_product_attention_math(q, k, v, None, dropout, True, None, scale=scaling,
                                                     enable_gqa=True)[0]
    else:
        raise ValueError(kind)
    return out


def _local_window(module, kwargs):
    """The window of a sliding-window or chunked layer (None for a full-attention one): the
    layer's `sliding_window` (Gemma 3, Cohere 2, OLMo 3) or the one passed to attention
    (Mistral, Starcoder2), or Llama 4's chunk on its RoPE layers. From the sequence's length
    equal to it on, transformers hands SDPA a mask there (`_ignore_causal_mask_sdpa`)."""
    window = getattr(module, "sliding_window", None) or kwargs.get("sliding_window")
    if window is None and getattr(module, "use_rope", False):
        window = getattr(module.config, "attention_chunk_size", None)
    return window


def _masked_kernel(kind, q, k, v, mask, scaling, dropout):
    """A layer transformers hands a mask (a sliding-window or chunked layer at a length that
    needs one), as sdpa_attention_forward and SDPA run it on CUDA: k and v repeated to every
    query head (`repeat_kv`: no enable_gqa with a mask), the boolean mask made a float one in
    q's dtype (`convert_boolean_attn_mask`, materialized over the batch), padded to a multiple
    of 16 columns for the memory-efficient kernel (`preprocess_mask`), and no `is_causal`."""
    from transformers.integrations.sdpa_attention import repeat_kv

    groups = q.shape[1] // k.shape[1]
    k, v = repeat_kv(k, groups), repeat_kv(v, groups)
    bias = torch.zeros_like(mask, dtype=q.dtype).masked_fill_(mask.logical_not(), float("-inf"))
    ops = torch.ops.aten
    if kind == "efficient":
        cols = bias.shape[-1]
        if cols % 16:
            padded = bias.new_zeros((*bias.shape[:-1], cols + 16 - cols % 16))
            padded[..., :cols] = bias
            bias = padded[..., :cols]
        return ops._scaled_dot_product_efficient_attention(q, k, v, bias, True, dropout, False, scale=scaling)[0]
    if kind == "cudnn":
        return ops._scaled_dot_product_cudnn_attention(q, k, v, bias, True, dropout, False, False, scale=scaling)[0]
    raise ValueError(f"the {kind} kernel takes no mask (PyTorch would refuse this layer)")


# A name without "flash" in it: transformers treats such names as kernels to download.
AttentionInterface.register("headroom_cuda_kernel", _attention)


VL_WRAPPERS = ("qwen2_5_vl", "qwen3_vl")


def _decoder_layers(model):
    for path in ("model.language_model.layers", "model.layers", "transformer.h", "gpt_neox.layers",
                 "model.decoder.layers"):
        obj = model
        try:
            for name in path.split("."):
                obj = getattr(obj, name)
            return obj
        except AttributeError:
            continue
    raise ValueError(f"no decoder layers in {type(model).__name__}")


def first_layers(config, n):
    """`config` with its first `n` decoder layers only (and its per-layer lists cut to them): a
    layer's saved tensors depend on the layers before it, not on those after, so layer 1 is
    measured the same with two layers as with eighty, at a fraction of the fake forward's time."""
    config = dict(config)
    # A hybrid's cache needs one full-attention layer (Qwen3-Next: every fourth).
    n = max(n, config.get("full_attention_interval") or 0)
    text = config.get("text_config")
    if isinstance(text, dict):
        config["text_config"] = first_layers(text, n)
        return config
    for key in ("num_hidden_layers", "n_layer"):
        if isinstance(config.get(key), int) and config[key] > n:
            total = config[key]
            config[key] = n
            for k, v in list(config.items()):
                if isinstance(v, list) and len(v) == total:
                    config[k] = v[:n]
    return config


def saved_forward(config, batch, seq, precision, kernel):
    """Saved bytes of a forward (with the loss) on fake CUDA: layer 1's, in a model cut to its
    first two layers (`first_layers`).

    Each storage counts once, where it is first saved; parameters are excluded (the weights,
    counted elsewhere). So are the fused kernels' RNG seed and offset: their meta functions
    return the same two tensors whatever the kernel and the dropout, while the CUDA kernels
    place them by kernel and dropout (PyTorch's flash_api.cpp: a uint64[2] and a uint64
    scalar on the GPU, always; attention.cu's memory-efficient kernel: CPU scalars with
    dropout, two GPU int64 scalars without; cuDNN: two GPU int64 scalars), at most 24 B a
    layer, which fake tensors cannot tell apart (the core counts 16 B with attention dropout:
    the +16 B rows of cuda_fake_report.md). One layer is layer 1: layer 0 also saves what every
    layer shares (the RoPE tables), which the core counts once outside the layers. Returns the
    per-layer bytes and layer 1's tensors (shape, dtype, bytes), for the message of a failing
    comparison."""
    amp = precision.startswith("amp")
    param_dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    config = first_layers(config, 2)
    KERNEL.update(kernel=kernel, dtype=torch.bfloat16 if amp else None)
    previous = torch.get_default_dtype()
    # transformers' MoE layers ask the device whether grouped_mm runs (sm80+): fake CUDA has no
    # device, so it answers as the H100 the core is compared on.
    capability = torch.cuda.get_device_capability
    torch.cuda.get_device_capability = lambda device=None: (9, 0)
    try:
        with FakeTensorMode(allow_non_fake_inputs=True):
            torch.set_default_dtype(param_dtype)
            with torch.device("cuda"):
                cfg = transformers.AutoConfig.for_model(**config)
                # The dtype given, not the config's own `torch_dtype`.
                # Qwen-VL has no causal-LM class for its text model alone: the wrapper runs a
                # text-only forward (no pixel values), its text layers as they train.
                auto = (transformers.AutoModelForImageTextToText if config.get("model_type") in VL_WRAPPERS
                        else transformers.AutoModelForCausalLM)
                model = auto.from_config(
                    cfg, attn_implementation="eager" if kernel == "eager" else "headroom_cuda_kernel",
                    dtype=param_dtype)
            model.train()
            layers = _decoder_layers(model)
            current = ["outside"]
            LAYER["sdpa"] = set()

            def enter(i):
                current[0] = LAYER["now"] = i

            for i, layer in enumerate(layers):
                layer.register_forward_pre_hook(lambda m, a, i=i: enter(i))
                layer.register_forward_hook(lambda m, a, o: enter("outside"))
            params = {p.untyped_storage()._cdata for p in model.parameters()}
            # Autocast's 16-bit weight copies (saved as the weight or its transpose) are the
            # weights' cost, not activations: matched by shape, so a caller picks a sequence
            # length that is no weight's dimension.
            weight_shapes = {s for p in model.parameters() if p.dim() == 2
                             for s in (tuple(p.shape), tuple(p.shape[::-1]))}
            # Stacked experts (Llama 4's, which bmm casts under autocast) in their own shape.
            weight_shapes |= {tuple(p.shape) for p in model.parameters() if p.dim() == 3}
            saved = {}

            def pack(t):
                storage = t.untyped_storage()
                key = storage._cdata
                rng_state = t.dtype in (torch.int64, torch.uint64) and t.numel() <= 2
                cast = amp and t.dim() in (2, 3) and t.dtype == torch.bfloat16 and tuple(t.shape) in weight_shapes
                if key not in params and key not in saved and not rng_state and not cast:
                    # The tensor is held until the forward ends, so no storage freed meanwhile
                    # hands its address (the key) to a later one.
                    saved[key] = (current[0], storage.nbytes(), tuple(t.shape), str(t.dtype), [])
                if key in saved:
                    saved[key][4].append(t)
                return t

            # A multimodal wrapper (Llama 4's) keeps its text model's keys under text_config.
            vocab = config.get("vocab_size") or config["text_config"]["vocab_size"]
            ids = torch.randint(vocab, (batch, seq), device="cuda")
            # torch.autocast refuses to turn on without a GPU; the dispatcher's own switch
            # (what torch.autocast sets) works on fake CUDA tensors.
            torch.set_autocast_dtype("cuda", torch.bfloat16)
            torch.set_autocast_enabled("cuda", amp)
            with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
                out = model(input_ids=ids, labels=ids)
            # What backward will read: a tensor saved by a node the loss does not reach (the
            # DeepSeek-V3 router's group top-k and mask, which only choose the experts) is
            # freed with that node when the forward ends, so only what the graph still holds
            # counts.
            refs = {key: [weakref.ref(t) for t in v[4]] for key, v in saved.items()}
            saved = {key: v[:4] for key, v in saved.items()}
            gc.collect()
            saved = {key: v for key, v in saved.items() if any(r() is not None for r in refs[key])}
            del out
    finally:
        torch.set_autocast_enabled("cuda", False)
        torch.clear_autocast_cache()
        torch.set_default_dtype(previous)
        torch.cuda.get_device_capability = capability
    layer1 = [v for v in saved.values() if v[0] == 1]
    return {
        # The RNG tensors left out above, as the CUDA kernel keeps them whatever the dropout
        # (measured on an H100: tests/reference/gpu/gpu_small.json, each kernel forced).
        "activations_per_layer": sum(v[1] for v in layer1) + (RNG_BYTES.get(kernel, 0) if 1 in LAYER["sdpa"] else 0),
        "layer1": [(v[2], v[3], v[1]) for v in layer1],
    }
