//! Command-line arguments; scenario flags map one to one onto link fields.

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(
    name = "headroom",
    version,
    about = "Will this training step fit on these GPUs, and where does the memory go?",
    long_about = "Estimates the GPU memory of one training step of a decoder-only transformer: \
every component with its formula and source, the peak at three levels (tensors, allocator, \
device), the largest micro-batch and sequence that fit, and what each memory-saving technique \
saves. Scenario inputs come from flags, a scenario file (--scenario), a named scenario \
(--named) or a share link (--link): a link's fields apply on top of a named scenario or file, and flags on top of both."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Estimate one scenario: breakdown, peaks, verdict, what fits.
    Estimate {
        #[command(flatten)]
        scenario: ScenarioArgs,
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
    },
    /// The largest micro-batch and the longest sequence that fit.
    Fit {
        #[command(flatten)]
        scenario: ScenarioArgs,
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
    },
    /// Every memory-saving technique applied to this scenario, with the memory it saves.
    Strategies {
        #[command(flatten)]
        scenario: ScenarioArgs,
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
    },
    /// The model presets.
    Models {
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
    },
    /// The GPU catalog.
    Gpus {
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
    },
    /// Search the setups that fit (sharding, offload, checkpointing, micro-batch, tensor
    /// parallelism, fused loss, activation offload) for a target global batch and sequence,
    /// ranked by tokens per second, with the ladder of single changes from the scenario; or
    /// export a plan's configuration.
    Plan(PlanArgs),
    /// Print the share link (query string) of a scenario.
    Link {
        #[command(flatten)]
        scenario: ScenarioArgs,
    },
}

/// `headroom plan` flags.
#[derive(Debug, Args)]
pub struct PlanArgs {
    #[command(flatten)]
    pub scenario: ScenarioArgs,
    /// Target sequences per optimizer step over all GPUs (default: the scenario's
    /// micro-batch x accumulation x data-parallel GPUs).
    #[arg(long, value_name = "N")]
    pub global_batch: Option<String>,
    /// Target sequence length (default: the scenario's --seq).
    #[arg(long, value_name = "TOKENS")]
    pub target_seq: Option<String>,
    /// Also search changes to the training: pure bf16 weights, 8-bit or factored optimizers,
    /// LoRA/QLoRA (listed separately).
    #[arg(long)]
    pub allow_training_changes: bool,
    /// Settings to keep as in the scenario, comma-separated: dp, tp, offload, ckpt, batch,
    /// loss, act_offload, precision (e.g. `--keep tp` for the Trainer, which has no tensor
    /// parallelism).
    #[arg(long, value_name = "LIST")]
    pub keep: Option<String>,
    /// Tokens to train on (2e9, 300B, 15T): time and GPU-hours per plan.
    #[arg(long, value_name = "N")]
    pub tokens: Option<String>,
    /// Your price of one GPU-hour (Headroom keeps no price list): money per plan, with --tokens.
    #[arg(long, value_name = "PRICE", allow_negative_numbers = true)]
    pub price_per_gpu_hour: Option<String>,
    /// Plans listed per list (default 10).
    #[arg(long, value_name = "N")]
    pub max_plans: Option<String>,
    /// Print the configuration of a plan instead: deepspeed | trainer | accelerate | fsdp2 |
    /// torchrun | env.
    #[arg(long, value_name = "TARGET")]
    pub export: Option<String>,
    /// Which plan to export (1 = fastest; default 1).
    #[arg(long, value_name = "N")]
    pub pick: Option<String>,
    /// Export from the training-changing plans (with --allow-training-changes).
    #[arg(long)]
    pub training: bool,
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Format {
    Table,
    Json,
}

/// Scenario inputs. Values are checked by the core, so messages match the site's.
#[derive(Debug, Args)]
pub struct ScenarioArgs {
    /// A scenario file (TOML with a [scenario] table, keys as in links).
    #[arg(long, value_name = "FILE")]
    pub scenario: Option<String>,
    /// A named scenario from content/scenarios (e.g. a worked example).
    #[arg(long, value_name = "ID", conflicts_with = "scenario")]
    pub named: Option<String>,
    /// A share link or its query string (`?v=1&model=...`).
    #[arg(long, value_name = "URL")]
    pub link: Option<String>,
    /// Model preset id (see `headroom models`) or a path to a Hugging Face config.json.
    #[arg(long)]
    pub model: Option<String>,
    /// GPU id (see `headroom gpus`).
    #[arg(long)]
    pub gpu: Option<String>,
    /// GPUs in total (data x tensor x pipeline parallel).
    #[arg(long)]
    pub gpus: Option<String>,
    /// Micro-batch size (sequences per GPU per forward).
    #[arg(long)]
    pub batch: Option<String>,
    /// Sequence length in tokens.
    #[arg(long)]
    pub seq: Option<String>,
    /// Gradient accumulation steps.
    #[arg(long)]
    pub accum: Option<String>,
    /// full | lora | qlora
    #[arg(long)]
    pub method: Option<String>,
    /// LoRA rank.
    #[arg(long)]
    pub rank: Option<String>,
    /// LoRA targets: attn | all
    #[arg(long)]
    pub targets: Option<String>,
    /// fp32 | bf16 | fp16 | amp-bf16 | amp-fp16
    #[arg(long)]
    pub precision: Option<String>,
    /// adamw | adamw-forloop | adamw-fused | adamw8bit | paged-adamw8bit | lion | adafactor | sgd | sgd-momentum | adam-mini
    #[arg(long)]
    pub optimizer: Option<String>,
    /// eager | sdpa
    #[arg(long)]
    pub attention: Option<String>,
    /// none | full | every:K | selective
    #[arg(long)]
    pub checkpointing: Option<String>,
    /// Override every dropout probability of the model.
    #[arg(long)]
    pub dropout: Option<String>,
    /// Offload saved activations to pinned CPU memory (save_on_cpu).
    #[arg(long)]
    pub offload_activations: bool,
    /// hf | fused
    #[arg(long)]
    pub loss: Option<String>,
    /// The training loop keeps `outputs` (and the logits) alive through backward.
    #[arg(long)]
    pub keep_logits: bool,
    /// ddp | zero1 | zero2 | zero3 | fsdp
    #[arg(long)]
    pub dp: Option<String>,
    /// Tensor-parallel degree.
    #[arg(long)]
    pub tp: Option<String>,
    /// Pipeline-parallel degree.
    #[arg(long)]
    pub pp: Option<String>,
    /// Sequence parallelism (with tp > 1).
    #[arg(long)]
    pub sp: bool,
    /// Optimizer offload: none | cpu | nvme (ZeRO or FSDP).
    #[arg(long)]
    pub offload_optimizer: Option<String>,
    /// Parameter offload: none | cpu | nvme (ZeRO-3 or FSDP).
    #[arg(long)]
    pub offload_params: Option<String>,
    /// PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
    #[arg(long)]
    pub expandable_segments: bool,
    /// CUDA graphs on (torch.compile mode="reduce-overhead").
    #[arg(long)]
    pub cuda_graphs: bool,
}

impl ScenarioArgs {
    /// Flags as link fields (key, value), for the core's codec to check and apply.
    pub fn flag_pairs(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let opts = [
            ("gpu", &self.gpu),
            ("gpus", &self.gpus),
            ("batch", &self.batch),
            ("seq", &self.seq),
            ("accum", &self.accum),
            ("method", &self.method),
            ("rank", &self.rank),
            ("targets", &self.targets),
            ("precision", &self.precision),
            ("optimizer", &self.optimizer),
            ("attention", &self.attention),
            ("ckpt", &self.checkpointing),
            ("dropout", &self.dropout),
            ("loss", &self.loss),
            ("dp", &self.dp),
            ("tp", &self.tp),
            ("pp", &self.pp),
            ("opt_offload", &self.offload_optimizer),
            ("param_offload", &self.offload_params),
        ];
        for (k, v) in opts {
            if let Some(v) = v {
                out.push((k.to_string(), v.clone()));
            }
        }
        let flags = [
            ("act_offload", self.offload_activations),
            ("keep_logits", self.keep_logits),
            ("sp", self.sp),
            ("expandable", self.expandable_segments),
            ("graphs", self.cuda_graphs),
        ];
        for (k, on) in flags {
            if on {
                out.push((k.to_string(), "1".into()));
            }
        }
        out
    }
}
