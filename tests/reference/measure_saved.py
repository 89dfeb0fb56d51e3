"""Measures one training step of a real transformers model on CPU, byte for byte.

Saved tensors come from `torch.autograd.graph.saved_tensors_hooks` (each storage once,
parameters excluded); gradients and optimizer states are summed after the step. The figures
are turned into their CUDA equivalents with explicit, named corrections (`cuda_corrections`).
"""
import gc
import json
import weakref

import torch
import transformers

LAYER_NORM_FAMILIES = {"gpt2", "starcoder2"}


def build(config, precision, attention, checkpointing, device="cpu"):
    torch.manual_seed(0)
    cfg = transformers.AutoConfig.for_model(**config)
    with torch.device(device):
        model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation=attention)
    if precision == "bf16":
        model = model.to(torch.bfloat16)
    model.train()
    if checkpointing == "full":
        # transformers 5's default: torch.utils.checkpoint with use_reentrant=False, which saves
        # the layer's positional inputs through save_for_backward (visible to hooks); its
        # keyword arguments are held by a closure (`closure_bytes`).
        model.gradient_checkpointing_enable()
    return model


def decoder_layers(model):
    if hasattr(model, "get_base_model"):
        model = model.get_base_model()  # a peft model
    if hasattr(model, "transformer"):
        return model.transformer.h
    return model.model.layers


def quant_state_bytes(p):
    """bitsandbytes' 4-bit quantization state of a Params4bit, or of the Linear4bit holding it
    (absmax and its NF4 code book, and with double quantization the 8-bit absmax's own absmax,
    code book and offset): tensors beside the parameter, not parameters. Each state holds its
    own copy of the code books (`functional.py`: `code.to(A.device, copy=True)`)."""
    qs = getattr(p, "quant_state", None)
    if qs is None:
        return 0
    total = qs.absmax.untyped_storage().nbytes() + qs.code.untyped_storage().nbytes()
    if getattr(qs, "nested", False):
        total += (qs.state2.absmax.untyped_storage().nbytes() + qs.state2.code.untyped_storage().nbytes()
                  + qs.offset.untyped_storage().nbytes())
    return total


# The decoder layer the forward is in ("outside" between layers), and the inputs 8-bit Linears'
# autograd contexts keep outside `save_for_backward` as (layer, tensor): measure_peft's 8-bit
# matmul records them, since no saved-tensor hook sees them.
CURRENT = ["outside"]
HELD = []


def int8_scale_bytes(model):
    """bitsandbytes' LLM.int8 row scales (`SCB`, fp32, one per output row): on the weight
    before the first forward, in the Linear's matmul state after (`init_8bit_state`)."""
    seen, total = set(), 0
    for m in model.modules():
        for scb in (getattr(getattr(m, "state", None), "SCB", None), getattr(getattr(m, "weight", None), "SCB", None)):
            if isinstance(scb, torch.Tensor) and scb.untyped_storage().data_ptr() not in seen:
                seen.add(scb.untyped_storage().data_ptr())
                total += scb.untyped_storage().nbytes()
    return total


def measure(config, batch, seq, precision, attention, checkpointing="none", keep_logits=False, device="cpu",
            builder=None):
    """The figures of one scenario. On `device="cuda"` (a real GPU: measure_gpu.py) they are
    CUDA's own, with no corrections, and `sdpa_nodes` names the attention kernels that ran.
    `builder()`, when given, builds the model instead (LoRA and QLoRA: measure_peft.py)."""
    model = builder() if builder else build(config, precision, attention, checkpointing, device)
    layers = decoder_layers(model)
    params = list(model.parameters())
    param_ptrs = {p.untyped_storage().data_ptr() for p in params}
    # Autocast saves a cast weight as the transposed view of shape (in, out): match both. Stacked
    # experts (Llama 4's, which bmm casts) are saved in their own shape.
    weight_shapes = {s for p in params if p.dim() == 2 for s in (tuple(p.shape), tuple(p.shape[::-1]))}
    weight_shapes |= {tuple(p.shape) for p in params if p.dim() == 3}
    opt = torch.optim.AdamW(params, lr=1e-4, foreach=True)
    vocab = config["vocab_size"]
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(vocab, (batch, seq), generator=gen).to(device)
    amp = precision.startswith("amp")

    result = {}
    for step in range(2):
        current = CURRENT
        current[0] = "outside"
        HELD.clear()
        saved = {}
        hooks = []
        for i, layer in enumerate(layers):
            hooks.append(layer.register_forward_pre_hook(lambda m, a, i=i: current.__setitem__(0, i)))
            hooks.append(layer.register_forward_hook(lambda m, a, o: current.__setitem__(0, "outside")))

        def pack(t):
            st = t.untyped_storage()
            key = st.data_ptr()
            if key not in param_ptrs and key not in saved:
                cast = amp and t.dim() in (2, 3) and t.dtype == torch.bfloat16 and (tuple(t.shape) in weight_shapes)
                saved[key] = (current[0], st.nbytes(), cast, t.dtype, [])
            if key in saved:
                saved[key][4].append(t)
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            with torch.autocast(device, dtype=torch.bfloat16, enabled=amp):
                out = model(input_ids=ids, labels=ids)
        for where, t in HELD:
            key = t.untyped_storage().data_ptr()
            if key not in param_ptrs and key not in saved:
                saved[key] = (where, t.untyped_storage().nbytes(), False, t.dtype, [])
            if key in saved:
                saved[key][4].append(t)
        HELD.clear()
        # Held above until the forward ends (so that no freed storage hands its address to a
        # later tensor); now only what the graph still holds counts: a node the loss does not
        # reach (DeepSeek-V3's group top-k and mask, which only choose the experts) is freed
        # with what it saved when the forward ends.
        refs = {key: [weakref.ref(t) for t in v[4]] for key, v in saved.items()}
        saved = {key: (*v[:4], None) for key, v in saved.items()}
        gc.collect()
        saved = {key: v for key, v in saved.items() if any(r() is not None for r in refs[key])}
        for h in hooks:
            h.remove()
        loss = out.loss
        logits_bytes = out.logits.untyped_storage().nbytes()
        if not keep_logits:
            del out
        ids_ptr = ids.untyped_storage().data_ptr()
        per_layer = [0] * len(layers)
        retained = loss.untyped_storage().nbytes() + (logits_bytes if keep_logits else 0)
        for key, (where, nbytes, cast, dtype, t) in saved.items():
            if key == ids_ptr:
                continue
            retained += nbytes
        retained += closure_bytes(set(saved) | param_ptrs | {ids_ptr})
        for key, (where, nbytes, cast, dtype, t) in saved.items():
            if key == ids_ptr:
                continue
            if where != "outside" and not cast:
                per_layer[where] += nbytes
        sdpa_nodes = attention_nodes(loss)
        loss.backward()
        grads = sum(p.grad.untyped_storage().nbytes() for p in params if p.grad is not None)
        opt.step()
        # `step` is a CPU scalar on CUDA too (not fused, not capturable): not GPU memory.
        states = sum(v.untyped_storage().nbytes() for s in opt.state.values() for k, v in s.items() if k != "step")
        opt.zero_grad(set_to_none=True)
        saved.clear()
        result = {
            "parameters_total": model.num_parameters(),
            "parameters_trainable": model.num_parameters(only_trainable=True),
            "weights": sum(p.untyped_storage().nbytes() + quant_state_bytes(p) for p in params)
            + int8_scale_bytes(model),
            "activations_per_layer": per_layer[len(layers) // 2],
            "retained_after_forward": retained,
            "gradients": grads,
            "optimizer_states": states,
        }
    result["sdpa_nodes"] = sdpa_nodes
    if device != "cpu":
        result["corrections"] = []
        return result
    fixes = cuda_corrections(config, batch, seq, precision, attention, checkpointing, len(layers))
    result["raw_cpu"] = dict(result)
    for key in ("activations_per_layer", "retained_after_forward"):
        result[key] += fixes.get(key, 0)
    result["corrections"] = fixes["corrections"]
    return result


def attention_nodes(loss):
    """The distinct autograd node names of the attention kernels in the graph behind `loss`
    (e.g. ScaledDotProductCudnnAttentionBackward0): which SDPA kernel ran."""
    names, stack, seen = set(), [loss.grad_fn], set()
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        if "ScaledDotProduct" in node.name() or "Attention" in node.name():
            names.add(node.name())
        stack.extend(n for n, _ in node.next_functions)
    return sorted(names)


def closure_bytes(seen):
    """Bytes alive after forward that no saved-tensor hook sees: the keyword arguments of
    checkpointed layers. transformers' GradientCheckpointingLayer binds a layer's keywords in a
    `functools.partial` (Llama-like layers get the eager causal mask and RoPE's cos and sin as
    keywords) and hands it to `torch.utils.checkpoint`, whose frame keeps it for the recompute
    until backward: alive, but never passed to `save_for_backward` (GPT-2 passes its mask
    positionally, which the checkpoint does save, and the hooks see). Found among the live
    objects after forward: only checkpoints still hold such partials then."""
    import functools
    import gc

    total = 0
    for obj in gc.get_objects():
        if type(obj) is not functools.partial or getattr(obj.func, "__name__", "") != "forward":
            continue
        for v in list(obj.args) + list(obj.keywords.values()):
            for t in v if isinstance(v, (tuple, list)) else (v,):
                if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in seen:
                    seen.add(t.untyped_storage().data_ptr())
                    total += t.untyped_storage().nbytes()
    return total


def cuda_corrections(config, batch, seq, precision, attention, checkpointing, n_layers):
    """What CUDA does differently from the CPU run, in bytes (added to the CPU figures)."""
    out = {"corrections": [], "activations_per_layer": 0, "retained_after_forward": 0}
    tokens = batch * seq
    ckpt = checkpointing == "full"
    if config["model_type"] in LAYER_NORM_FAMILIES and precision == "bf16":
        # native_layer_norm: CPU keeps mean and rstd in the input dtype, CUDA in fp32.
        per_norm = 2 * tokens * (4 - 2)
        layer = 2 * per_norm
        out["corrections"].append({"why": "LayerNorm mean/rstd fp32 on CUDA, bf16 on CPU", "per_layer": layer})
        out["activations_per_layer"] += 0 if ckpt else layer
        out["retained_after_forward"] += per_norm + (0 if ckpt else layer * n_layers)
    for mask in dropout_masks(config, batch, seq, precision, attention):
        # at::dropout: CUDA runs the fused native_dropout, whose backward saves a bool mask;
        # CPU multiplies by a noise tensor of the input's dtype, which mul saves
        # (aten/src/ATen/native/Dropout.cpp, is_fused_kernel_acceptable).
        fix = mask["elements"] * (1 - mask["cpu_bytes"])
        out["corrections"].append({"why": f"{mask['name']} dropout mask: bool on CUDA, input dtype on CPU",
                                   "bytes": fix})
        if mask["per_layer"]:
            out["activations_per_layer"] += 0 if ckpt else fix
            out["retained_after_forward"] += 0 if ckpt else fix * n_layers
        else:
            out["retained_after_forward"] += fix
    return out


def dropout_masks(config, batch, seq, precision, attention):
    """The dropout masks of a config: elements, where, and their dtype's size on CPU."""
    if config["model_type"] != "gpt2":
        # Llama-like: attention dropout (on the probabilities, in the compute dtype), with the
        # config class's default where the config has none (Seed-OSS trains with 0.1).
        defaults = transformers.AutoConfig.for_model(config["model_type"])
        p = config.get("attention_dropout", getattr(defaults, "attention_dropout", 0.0))
        heads = config["num_attention_heads"]
        # SDPA's math kernel (which CPU runs with dropout) works in fp32 for 16-bit inputs;
        # eager attention's probabilities are in q's dtype, fp32 under autocast too (RoPE's fp32
        # cos and sin make q fp32).
        size = 4 if precision != "bf16" or attention == "sdpa" else 2
        masks = [{"name": "attention", "elements": batch * heads * seq * seq, "per_layer": True,
                  "cpu_bytes": size}] if p > 0 else []
        if config["model_type"] in ("starcoder2", "seed_oss"):
            # StarCoder2 and Seed-OSS also drop out the attention and MLP outputs (StarCoder2 the
            # embeddings too).
            tokens, h, size = batch * seq, config["hidden_size"], 4 if precision == "fp32" else 2
            if config.get("residual_dropout", getattr(defaults, "residual_dropout", 0.0)) > 0:
                masks += [{"name": "residual", "elements": tokens * h, "per_layer": True, "cpu_bytes": size}] * 2
            if config.get("embedding_dropout", 0.0) > 0:
                masks.append({"name": "embedding", "elements": tokens * h, "per_layer": False,
                              "cpu_bytes": 4 if precision != "bf16" else 2})
        return masks
    tokens, h, heads = batch * seq, config["n_embd"], config["n_head"]
    size = 4 if precision == "fp32" else 2
    masks = []
    # (CPU's SDPA runs its math kernel when dropout is on: it saves the mask too.)
    if config.get("attn_pdrop", 0.1) > 0:
        masks.append({"name": "attention", "elements": batch * heads * seq * seq, "per_layer": True,
                      "cpu_bytes": 4 if attention == "sdpa" else size})
    if config.get("resid_pdrop", 0.1) > 0:
        masks += [{"name": "residual", "elements": tokens * h, "per_layer": True, "cpu_bytes": size}] * 2
    if config.get("embd_pdrop", 0.1) > 0:
        masks.append({"name": "embedding", "elements": tokens * h, "per_layer": False, "cpu_bytes": size})
    return masks
    return out


if __name__ == "__main__":
    import sys
    print(json.dumps(measure(json.loads(sys.argv[1]), *map(int, sys.argv[2:4]), *sys.argv[4:])))
