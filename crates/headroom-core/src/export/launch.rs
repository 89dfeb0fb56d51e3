//! Launching: the node count, the torchrun command (`launch.sh`) and the environment
//! (`env.sh`).

use serde_json::Value;

use crate::model::ModelSpec;
use crate::scenario::Scenario;

use super::common::{comment_lines, common_notes, summary};
use super::trainer::trainer_kwargs;

/// Nodes the plan's GPUs take, at the scenario's GPUs per node.
pub(super) fn nodes(scen: &Scenario) -> u32 {
    let per_node = scen.runtime.gpus_per_node();
    if scen.gpus > per_node {
        scen.gpus.div_ceil(per_node)
    } else {
        1
    }
}

fn env_vars(scen: &Scenario) -> Vec<(&'static str, &'static str, &'static str)> {
    let mut v = Vec::new();
    if scen.runtime.expandable_segments {
        v.push((
            "PYTORCH_CUDA_ALLOC_CONF",
            "expandable_segments:True",
            "the caching allocator grows segments instead of stranding freed blocks (less fragmentation)",
        ));
    }
    if scen.parallel.tensor > 1 {
        v.push((
            "CUDA_DEVICE_MAX_CONNECTIONS",
            "1",
            "Megatron-LM's requirement with tensor/sequence parallelism: kernels run in issue order so communication overlaps compute",
        ));
    }
    v
}

pub(super) fn env_text(scen: &Scenario) -> String {
    let vars = env_vars(scen);
    let mut t = format!("# Headroom plan: {}\n", summary(scen));
    t.push_str(&format!("# {}\n", super::checked_with_line()));
    if vars.is_empty() {
        t.push_str("# No environment variables needed for this plan.\n");
    }
    for (k, v, why) in vars {
        t.push_str(&format!("# {why}\nexport {k}={v}\n"));
    }
    t
}

pub(super) fn torchrun_text(spec: &ModelSpec, scen: &Scenario) -> (String, Vec<String>) {
    let mut notes = common_notes(scen);
    let nodes = nodes(scen);
    let per_node = scen.gpus / nodes;
    if per_node * nodes != scen.gpus {
        notes.push(format!(
            "{} GPUs do not split evenly over {nodes} nodes of {}: adjust --nnodes and --nproc_per_node",
            scen.gpus,
            scen.runtime.gpus_per_node()
        ));
    }
    let mut t = format!("# Headroom plan: {}\n", summary(scen));
    t.push_str(&format!("# {}\n", super::checked_with_line()));
    t.push_str(&comment_lines(&notes, "# "));
    for (k, v, _) in env_vars(scen) {
        t.push_str(&format!("export {k}={v}\n"));
    }
    let mut cmd = format!("torchrun --nproc_per_node={per_node} --nnodes={nodes}");
    if nodes > 1 {
        cmd.push_str(
            " --node_rank=$NODE_RANK --rdzv_backend=c10d --rdzv_endpoint=$MASTER_ADDR:29500",
        );
    }
    // The plan's Trainer script (`--export trainer`), which carries these settings itself; the
    // flags are TrainingArguments fields for a script that parses them (HfArgumentParser, as
    // transformers' example scripts do), given as SCRIPT.
    t.push_str(concat!(
        "# Runs training_args.py (headroom plan ... --export trainer), which sets these arguments\n",
        "# itself; SCRIPT=run_clm.py (a script that parses TrainingArguments flags) runs that one with them.\n",
    ));
    cmd.push_str(" \"${SCRIPT:-training_args.py}\"");
    let (kw, _) = trainer_kwargs(spec, scen);
    for (k, v) in kw {
        match v {
            Value::Bool(true) => cmd.push_str(&format!(" \\\n  --{k}")),
            Value::Bool(false) => {}
            Value::String(s) if s.contains(' ') => cmd.push_str(&format!(" \\\n  --{k} \"{s}\"")),
            Value::String(s) => cmd.push_str(&format!(" \\\n  --{k} {s}")),
            Value::Object(_) | Value::Array(_) => cmd.push_str(&format!(" \\\n  --{k} '{v}'")),
            other => cmd.push_str(&format!(" \\\n  --{k} {other}")),
        }
    }
    t.push_str(&cmd);
    t.push('\n');
    (t, notes)
}
