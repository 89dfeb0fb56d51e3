//! A PyTorch FSDP2 (or DDP) training script (`train_fsdp2.py`): the model built as estimated
//! (dtype, LoRA/QLoRA, checkpointing), `fully_shard` per decoder layer on a meta-device model
//! whose weights rank 0 alone reads and broadcasts, the mixed-precision and offload policies,
//! the batch arithmetic checked against the world size, and a dry run
//! (`HEADROOM_DRY_RUN=config.json`) that does all of it on CPU for every rank through PyTorch's
//! fake process group and prints what it built.

use crate::model::ModelSpec;
use crate::scenario::{DataParallel, Offload, Optimizer, Precision, Scenario};

use super::Target;
use super::common::{comment_lines, common_notes, summary};
use super::model::{build_model_code, imports};
use super::names::{layer_class, layers_expr, model_path};

/// The optimizer's constructor and the import it needs.
fn optimizer_line(o: Optimizer) -> (&'static str, Option<&'static str>) {
    match o {
        Optimizer::AdamW => ("torch.optim.AdamW(params, lr=1e-4)", None),
        Optimizer::AdamWForLoop => ("torch.optim.AdamW(params, lr=1e-4, foreach=False)", None),
        Optimizer::AdamWFused => ("torch.optim.AdamW(params, lr=1e-4, fused=True)", None),
        Optimizer::AdamW8bit => (
            "bnb.optim.AdamW8bit(params, lr=1e-4)",
            Some("import bitsandbytes as bnb"),
        ),
        Optimizer::PagedAdamW8bit => (
            "bnb.optim.PagedAdamW8bit(params, lr=1e-4)",
            Some("import bitsandbytes as bnb"),
        ),
        Optimizer::Lion => (
            "bnb.optim.Lion(params, lr=1e-5)",
            Some("import bitsandbytes as bnb"),
        ),
        Optimizer::Adafactor => (
            "transformers.optimization.Adafactor(params, lr=1e-4, relative_step=False, scale_parameter=False)",
            Some("import transformers.optimization"),
        ),
        Optimizer::Sgd => ("torch.optim.SGD(params, lr=1e-2)", None),
        Optimizer::SgdMomentum => ("torch.optim.SGD(params, lr=1e-2, momentum=0.9)", None),
        Optimizer::AdamMini => (
            "Adam_mini(model.named_parameters(), lr=1e-4)",
            Some("from adam_mini import Adam_mini"),
        ),
    }
}

pub(super) fn fsdp2_text(spec: &ModelSpec, scen: &Scenario) -> (String, Vec<String>) {
    let mut notes = common_notes(scen);
    let p = &scen.parallel;
    let fsdp = p.data == DataParallel::Fsdp;
    let param_dtype = match scen.precision {
        Precision::AmpBf16 | Precision::Bf16 => Some("torch.bfloat16"),
        Precision::AmpFp16 | Precision::Fp16 => Some("torch.float16"),
        Precision::Fp32 => None,
    };
    // FSDP2's MixedPrecisionPolicy is its autocast (16-bit compute over fp32 shards); without
    // FSDP, mixed precision is torch.autocast.
    let autocast = scen.precision.is_autocast() && !fsdp;
    let offload = p.offload_params != Offload::None;
    if scen.precision == Precision::AmpFp16 {
        notes.push("fp16 autocast: add a gradient scaler (torch.amp.GradScaler, or ShardedGradScaler with FSDP)".into());
    }
    let nodes = super::launch::nodes(scen);
    let mut t = format!("# Headroom plan: {}\n", summary(scen));
    t.push_str(&format!("# {}\n", super::checked_with_line()));
    t.push_str(&format!(
        "# Launch: torchrun --nproc_per_node={} --nnodes={nodes} {}\n",
        scen.gpus / nodes,
        Target::Fsdp2.file_name()
    ));
    t.push_str(&format!(
        "# Dry run, no GPU and no weights: HEADROOM_DRY_RUN=path/to/config.json python {} (one process stands for\n# all {} ranks; it builds, applies LoRA and the wrapping, checks the batch arithmetic, prints a JSON report and exits).\n",
        Target::Fsdp2.file_name(),
        scen.gpus
    ));
    t.push_str(&comment_lines(&notes, "# "));
    t.push_str(super::common::script_imports(scen));
    t.push_str("import torch.distributed as dist\n");
    if fsdp {
        t.push_str("from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict\n");
        t.push_str("from torch.distributed.device_mesh import init_device_mesh\n");
        t.push_str("from torch.distributed.fsdp import CPUOffloadPolicy, FSDPModule, MixedPrecisionPolicy, fully_shard\n");
    } else {
        t.push_str("from torch.nn.parallel import DistributedDataParallel\n");
    }
    t.push_str(&imports(scen));
    t.push_str(&format!(
        "\nMODEL = \"{}\"\nGPUS = {}\nMICRO_BATCH = {}\nACCUMULATION = {}\nGLOBAL_BATCH = {}\nSEQ = {}\n",
        model_path(scen),
        scen.gpus,
        scen.micro_batch,
        scen.grad_accum,
        scen.global_batch(),
        scen.seq
    ));
    // With FSDP, fully_shard's checkpointing is transformers' own, applied before wrapping.
    t.push_str(&build_model_code(scen, true));
    t.push_str("\n\nif DRY_RUN:\n    # PyTorch's fake process group: every collective returns at once, so one CPU process\n    # wraps the model exactly as each of the GPUS ranks does.\n    from torch.testing._internal.distributed.fake_pg import FakeStore\n\n    dist.init_process_group(\"fake\", rank=0, world_size=GPUS, store=FakeStore())\n    device = torch.device(\"cpu\")\nelse:\n    dist.init_process_group(\"nccl\")\n    local_rank = int(os.environ[\"LOCAL_RANK\"])\n    torch.cuda.set_device(local_rank)\n    device = torch.device(\"cuda\", local_rank)\n");
    t.push_str("# The plan's batch: micro-batch x accumulation x data-parallel ranks.\ndata_parallel = dist.get_world_size()\nassert data_parallel == GPUS, f\"the plan is for {GPUS} GPUs, launched on {data_parallel}\"\nassert MICRO_BATCH * ACCUMULATION * data_parallel == GLOBAL_BATCH\n\n");
    if let Some(lines) = super::common::sdpa_switches(scen) {
        t.push_str(&format!(
            "# SDPA kernel forced, as the estimate assumed: the others are switched off.\n{lines}"
        ));
    }
    if fsdp {
        t.push_str("# Every rank builds the model on the meta device (no host memory for weights); after\n# sharding, rank 0 alone reads the checkpoint and broadcasts each rank its shards.\nmodel = build_model(on_meta=True)\n");
        t.push_str(&fp8_code(scen));
        let mp = match param_dtype {
            // Gradients reduced in the compute dtype as accelerate reduces them, or in fp32
            // (`reduce32`), as the estimate assumed.
            Some(d) => format!(
                "MixedPrecisionPolicy(param_dtype={d}, reduce_dtype={})",
                if scen.parallel.reduce32 {
                    "torch.float32"
                } else {
                    d
                }
            ),
            None => "MixedPrecisionPolicy()".into(),
        };
        t.push_str(&format!(
            "mesh = init_device_mesh(device.type, (data_parallel,))\nkwargs = dict(mesh=mesh, mp_policy={mp}, reshard_after_forward=True)\n"
        ));
        if offload {
            // fully_shard keeps each unit's parameters on the CPU under CPUOffloadPolicy, with
            // their gradients and the optimizer's states.
            t.push_str("kwargs[\"offload_policy\"] = CPUOffloadPolicy(pin_memory=True)\n");
        }
        let layers = layers_expr(spec);
        let layers = if scen.method == crate::scenario::Method::Full {
            layers.to_string()
        } else {
            // Under peft the transformers model is model.base_model.model.
            layers.replacen("model.", "model.base_model.model.", 1)
        };
        t.push_str(&format!(
            "# One FSDP unit per decoder layer ({}), then the root.\nfor layer in {layers}:\n    fully_shard(layer, **kwargs)\nfully_shard(model, **kwargs)\n",
            layer_class(spec),
        ));
        t.push_str(&format!(
            "if not DRY_RUN:\n    model.to_empty(device={})\n    full = build_model() if dist.get_rank() == 0 else None\n    set_model_state_dict(model, full.state_dict() if full is not None else {{}},\n                         options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=True))\n    # Buffers outside the state dict (RoPE's inv_freq) come from rank 0 too.\n    full_buffers = dict(full.named_buffers()) if full is not None else {{}}\n    for name, buf in model.named_buffers():\n        if full is not None:\n            buf.copy_(full_buffers[name])\n        dist.broadcast(buf, src=0)\n    del full, full_buffers\n",
            if offload { "\"cpu\"" } else { "device" }
        ));
    } else {
        t.push_str("# Each rank holds the whole model (DDP), loaded straight onto its GPU.\nif DRY_RUN:\n    model = build_model(on_meta=True)\nelse:\n    model = build_model(device_map={\"\": device})\n");
        t.push_str(&fp8_code(scen));
        t.push_str("if not DRY_RUN and data_parallel > 1:  # one GPU: no DDP wrapper and no gradient buckets, as estimated\n    model = DistributedDataParallel(model, device_ids=[local_rank])\n");
    }
    let (opt_line, opt_import) = optimizer_line(scen.optimizer);
    t.push_str("params = [p for p in model.parameters() if p.requires_grad]\n");
    match opt_import {
        Some(imp) => t.push_str(&format!(
            "try:\n    {imp}\n    optimizer = {opt_line}\nexcept ImportError:\n    if not DRY_RUN:\n        raise\n    optimizer = None  # a dry run without the optimizer's library (bitsandbytes needs CUDA)\n"
        )),
        None => t.push_str(&format!("optimizer = {opt_line}\n")),
    }
    t.push_str(&dry_run_report(scen, fsdp));
    if scen.packing {
        t.push('\n');
        t.push_str(&super::common::packing_code(scen));
    }
    t.push_str(&train_step_code(scen, fsdp, autocast, param_dtype));
    (t, notes)
}

/// The training step: accumulation with gradient sync on the last micro-batch, autocast and
/// save_on_cpu where the plan has them, clipping, the optimizer, fp8's scale update.
fn train_step_code(
    scen: &Scenario,
    fsdp: bool,
    autocast: bool,
    param_dtype: Option<&str>,
) -> String {
    let mut t = String::new();
    t.push_str("\n\ndef train_step(micro_batches):\n    \"\"\"One optimizer step over ACCUMULATION micro-batches of MICRO_BATCH x SEQ tokens.\"\"\"\n");
    t.push_str("    for i, batch in enumerate(micro_batches):\n");
    t.push_str("        last = i == ACCUMULATION - 1\n");
    if fsdp {
        t.push_str("        model.set_requires_gradient_sync(last)\n");
    } else {
        t.push_str("        model.require_backward_grad_sync = last\n");
    }
    let mut indent = "        ".to_string();
    if autocast {
        t.push_str(&format!(
            "{indent}with torch.autocast(\"cuda\", dtype={}):\n",
            param_dtype.unwrap_or("torch.bfloat16")
        ));
        indent.push_str("    ");
    }
    if scen.offload_activations {
        t.push_str(&format!(
            "{indent}with torch.autograd.graph.save_on_cpu(pin_memory=True):\n"
        ));
        indent.push_str("    ");
    }
    t.push_str(&format!(
        "{indent}loss = model(**batch).loss / ACCUMULATION\n"
    ));
    t.push_str("        loss.backward()\n");
    t.push_str("    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n");
    t.push_str("    optimizer.step()\n    optimizer.zero_grad(set_to_none=True)\n");
    if scen.fp8.fp8_all_gather() && fsdp {
        t.push_str("    # fp8 all-gather: every converted weight's scale from one all-reduce of their maxima.\n    precompute_float8_dynamic_scale_for_fsdp(model)\n");
    }
    if scen.precision == Precision::AmpFp16 {
        t.push_str("# fp16 autocast needs a loss scaler: torch.amp.GradScaler (ShardedGradScaler with FSDP).\n");
    }
    t
}

/// torchao's float8 conversion, as `crate::fp8::converts` counts it: the decoder layers'
/// `nn.Linear`s whose dimensions are multiples of 16, not the lm_head; with FSDP2, the
/// tensorwise recipe gathers the converted weights in fp8. Empty without fp8.
fn fp8_code(scen: &Scenario) -> String {
    if !scen.fp8.is_on() {
        return String::new();
    }
    let fsdp_gather = scen.fp8.fp8_all_gather() && scen.parallel.data == DataParallel::Fsdp;
    let config = if fsdp_gather {
        // The tensorwise recipe is torchao's default config.
        "Float8LinearConfig(enable_fsdp_float8_all_gather=True)".to_string()
    } else {
        format!("Float8LinearConfig.from_recipe_name(\"{}\")", scen.fp8.id())
    };
    let mut t = format!(
        "# fp8 matmuls (torchao float8, {} recipe), as estimated: the decoder layers' nn.Linears\n# whose dimensions are multiples of 16 (torch._scaled_mm's rule), not the lm_head.\nfrom torchao.float8 import Float8LinearConfig, convert_to_float8_training\n",
        scen.fp8.id()
    );
    if fsdp_gather {
        t.push_str("from torchao.float8 import precompute_float8_dynamic_scale_for_fsdp\n");
    }
    t.push_str(&format!(
        "\ndef fp8_filter(module, fqn):\n    return (not fqn.endswith(\"lm_head\") and module.in_features % 16 == 0\n            and module.out_features % 16 == 0)\n\n\nconvert_to_float8_training(model, config={config}, module_filter_fn=fp8_filter)\n"
    ));
    t
}

/// The dry run's report: what was built, per rank (FSDP2's local shards), then exit.
fn dry_run_report(scen: &Scenario, fsdp: bool) -> String {
    let mut t = String::from(super::model::report_code());
    t.push_str("\n\nif DRY_RUN:\n    report = dict(\n        model_report(model), world_size=data_parallel, data_parallel=data_parallel,\n        micro_batch=MICRO_BATCH, accumulation=ACCUMULATION, global_batch=GLOBAL_BATCH, seq=SEQ,\n        optimizer=type(optimizer).__name__ if optimizer is not None else None,\n        autocast=");
    t.push_str(if scen.precision.is_autocast() && !fsdp {
        "True"
    } else {
        "False"
    });
    t.push_str(",\n    )\n");
    if scen.fp8.is_on() {
        t.push_str("    from torchao.float8.float8_linear import Float8Linear\n    report[\"fp8_linear_params\"] = sum(m.weight.numel() for m in model.modules()\n                                       if isinstance(m, Float8Linear))\n");
    }
    if fsdp {
        t.push_str("    report[\"fsdp_units\"] = sum(1 for m in model.modules() if isinstance(m, FSDPModule))\n    report[\"mp_param_dtype\"] = str(kwargs[\"mp_policy\"].param_dtype)\n    report[\"reshard_after_forward\"] = kwargs[\"reshard_after_forward\"]\n    report[\"offload\"] = type(kwargs.get(\"offload_policy\")).__name__\n");
    }
    t.push_str("    print(json.dumps(report))\n    dist.destroy_process_group()\n    raise SystemExit(0)\n");
    t
}
