//! A PyTorch FSDP2 training script (`train_fsdp2.py`): `fully_shard` per decoder layer, the
//! mixed-precision and offload policies, and the accumulation loop.

use crate::model::ModelSpec;
use crate::scenario::{
    Checkpointing, DataParallel, LossImpl, Offload, Optimizer, Precision, Scenario,
};

use super::common::{comment_lines, common_notes, summary};
use super::names::{layer_class, layers_expr, model_path};
use super::{GPUS_PER_NODE, Target};

pub(super) fn fsdp2_text(spec: &ModelSpec, scen: &Scenario) -> (String, Vec<String>) {
    let mut notes = common_notes(scen);
    let p = &scen.parallel;
    let (param_dtype, autocast) = match scen.precision {
        Precision::AmpBf16 => (Some("torch.bfloat16"), true),
        Precision::AmpFp16 => (Some("torch.float16"), true),
        Precision::Bf16 => (Some("torch.bfloat16"), false),
        Precision::Fp16 => (Some("torch.float16"), false),
        Precision::Fp32 => (None, false),
    };
    let load_dtype = match scen.precision {
        Precision::Bf16 => "torch.bfloat16",
        Precision::Fp16 => "torch.float16",
        _ => "torch.float32",
    };
    match p.data {
        DataParallel::Zero1 | DataParallel::Zero2 => notes.push(format!(
            "the plan uses DeepSpeed {}; FSDP2's closest form keeps parameters gathered between forward and backward (reshard_after_forward=False, ZeRO-2-like)",
            p.data.label()
        )),
        DataParallel::Zero3 => notes.push("the plan uses DeepSpeed ZeRO-3; FSDP2 full sharding (reshard_after_forward=True) shards the same states".into()),
        _ => {}
    }
    let offload = p.offload_params != Offload::None || p.offload_optimizer != Offload::None;
    if offload && p.offload_optimizer != p.offload_params {
        notes.push("FSDP2's CPUOffloadPolicy offloads parameters, gradients and optimizer states together; optimizer-only offload needs DeepSpeed ZeRO".into());
    }
    let mut t = format!("# Headroom plan: {}\n", summary(scen));
    t.push_str(&format!(
        "# Launch: torchrun --nproc_per_node={} {}\n",
        scen.gpus.min(GPUS_PER_NODE),
        Target::Fsdp2.file_name()
    ));
    t.push_str(&comment_lines(&notes, "# "));
    t.push_str("import os\n\nimport torch\nimport torch.distributed as dist\n");
    if p.data == DataParallel::Ddp {
        t.push_str("from torch.nn.parallel import DistributedDataParallel\n");
    } else {
        t.push_str("from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard\n");
    }
    t.push_str("from transformers import AutoModelForCausalLM\n\n");
    t.push_str(&format!(
        "MODEL = \"{}\"\nMICRO_BATCH = {}\nACCUMULATION = {}\nSEQ = {}\n\n",
        model_path(scen),
        scen.micro_batch,
        scen.grad_accum,
        scen.seq
    ));
    t.push_str("dist.init_process_group(\"nccl\")\nlocal_rank = int(os.environ[\"LOCAL_RANK\"])\ntorch.cuda.set_device(local_rank)\n\n");
    let attn = scen.attention.hf_name();
    if scen.loss == LossImpl::Fused {
        t.push_str(
            "# Fused linear cross-entropy (chunked logits): Liger's kernels patch the model.\n",
        );
        t.push_str("from liger_kernel.transformers import AutoLigerKernelForCausalLM\n\n");
        t.push_str(&format!(
            "model = AutoLigerKernelForCausalLM.from_pretrained(MODEL, dtype={load_dtype}, attn_implementation=\"{attn}\")\n"
        ));
    } else {
        t.push_str(&format!(
            "model = AutoModelForCausalLM.from_pretrained(MODEL, dtype={load_dtype}, attn_implementation=\"{attn}\")\n"
        ));
    }
    if let Some(lines) = super::common::sdpa_switches(scen) {
        t.push_str(&format!(
            "# SDPA kernel forced, as the estimate assumed: the others are switched off.\n{lines}"
        ));
    }
    // transformers 5.23: activation_checkpointing_enable (gradient_checkpointing_enable is its
    // deprecated alias); every_n_layers checkpoints one decoder layer in k.
    match scen.checkpointing {
        Checkpointing::Full => t.push_str("model.activation_checkpointing_enable(activation_checkpointing_kwargs={\"use_reentrant\": False})\n"),
        Checkpointing::Every(k) => t.push_str(&format!(
            "model.activation_checkpointing_enable(activation_checkpointing_kwargs={{\"use_reentrant\": False}}, every_n_layers={k})\n"
        )),
        _ => {}
    }
    if p.data == DataParallel::Ddp {
        t.push_str("model = DistributedDataParallel(model.cuda(), device_ids=[local_rank])\n");
    } else {
        let mp = match param_dtype {
            Some(d) => format!("MixedPrecisionPolicy(param_dtype={d}, reduce_dtype=torch.float32)"),
            None => "MixedPrecisionPolicy()".into(),
        };
        t.push_str(&format!("mp = {mp}\n"));
        let off = if offload {
            "CPUOffloadPolicy(pin_memory=True)"
        } else {
            "None"
        };
        let reshard = if matches!(p.data, DataParallel::Zero1 | DataParallel::Zero2) {
            "False"
        } else {
            "True"
        };
        t.push_str(&format!(
            "kwargs = dict(mp_policy=mp, reshard_after_forward={reshard})\n"
        ));
        // fully_shard moves each unit's parameters to the GPU as it shards them (kept on
        // the CPU under CPUOffloadPolicy), so the whole model never sits on one GPU.
        if offload {
            t.push_str(&format!("kwargs[\"offload_policy\"] = {off}\n"));
        }
        t.push_str(&format!(
            "# One FSDP unit per decoder layer ({}), then the root.\nfor layer in {}:\n    fully_shard(layer, **kwargs)\nfully_shard(model, **kwargs)\n",
            layer_class(spec),
            layers_expr(spec)
        ));
    }
    let (opt_line, opt_note) = match scen.optimizer {
        Optimizer::AdamW => ("torch.optim.AdamW(model.parameters(), lr=1e-4)", None),
        Optimizer::AdamWForLoop => (
            "torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False)",
            None,
        ),
        Optimizer::AdamWFused => (
            "torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)",
            None,
        ),
        Optimizer::AdamW8bit => (
            "bnb.optim.AdamW8bit(model.parameters(), lr=1e-4)",
            Some("import bitsandbytes as bnb"),
        ),
        Optimizer::PagedAdamW8bit => (
            "bnb.optim.PagedAdamW8bit(model.parameters(), lr=1e-4)",
            Some("import bitsandbytes as bnb"),
        ),
        Optimizer::Lion => (
            "bnb.optim.Lion(model.parameters(), lr=1e-5)",
            Some("import bitsandbytes as bnb"),
        ),
        Optimizer::Adafactor => (
            "transformers.optimization.Adafactor(model.parameters(), lr=1e-4, relative_step=False, scale_parameter=False)",
            Some("import transformers.optimization"),
        ),
        Optimizer::Sgd => ("torch.optim.SGD(model.parameters(), lr=1e-2)", None),
        Optimizer::SgdMomentum => (
            "torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)",
            None,
        ),
        Optimizer::AdamMini => (
            "Adam_mini(model.named_parameters(), lr=1e-4)",
            Some("from adam_mini import Adam_mini"),
        ),
    };
    if let Some(imp) = opt_note {
        t.push_str(&format!("{imp}\n"));
    }
    t.push_str(&format!("optimizer = {opt_line}\n\n"));
    t.push_str("\ndef train_step(micro_batches):\n    \"\"\"One optimizer step over ACCUMULATION micro-batches of MICRO_BATCH x SEQ tokens.\"\"\"\n");
    t.push_str("    for i, batch in enumerate(micro_batches):\n");
    t.push_str("        last = i == ACCUMULATION - 1\n");
    if p.data == DataParallel::Ddp {
        t.push_str("        model.require_backward_grad_sync = last\n");
    } else {
        t.push_str("        model.set_requires_gradient_sync(last)\n");
    }
    let mut indent = "        ".to_string();
    // FSDP2's MixedPrecisionPolicy is its autocast (bf16 compute over fp32 shards); DDP needs
    // torch.autocast.
    if autocast && p.data == DataParallel::Ddp {
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
    if scen.precision == Precision::AmpFp16 {
        notes.push("fp16 autocast: add a gradient scaler (torch.amp.GradScaler, or ShardedGradScaler with FSDP)".into());
        t.push_str("# fp16 autocast needs a loss scaler: torch.amp.GradScaler (ShardedGradScaler with FSDP).\n");
    }
    (t, notes)
}
