//! Command-line arguments; scenario flags are built from a table of link fields ([`FLAGS`]),
//! checked against the codec's.

use clap::{Arg, ArgMatches, Args, FromArgMatches, Parser, Subcommand, ValueEnum};
use headroom_core::codec;

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
    /// Reserved and device levels from the calibrated slack fraction, as the web page computes
    /// them today, instead of the step replayed through the model of PyTorch's caching
    /// allocator (the default, where the replay models the step).
    #[arg(long, global = true)]
    pub no_replay: bool,
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
    Plan(Box<PlanArgs>),
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
    /// The stack the plans must run on: runs (the default: any stack Headroom writes a file
    /// for) | any (also plans only env.sh carries, e.g. tensor parallelism with ZeRO) |
    /// trainer | deepspeed | fsdp2 | axolotl | llamafactory | torchtitan.
    #[arg(long, value_name = "STACK")]
    pub stack: Option<String>,
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
    /// torchrun | axolotl | llamafactory | torchtitan | env. Without --pick or --stack, the
    /// fastest plan that file runs.
    #[arg(long, value_name = "TARGET")]
    pub export: Option<String>,
    /// Which plan of the table to export (1 = fastest; default 1).
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
    /// A training framework's config: axolotl or LLaMA-Factory YAML, TRL / transformers
    /// training arguments (YAML or JSON), a DeepSpeed JSON, an accelerate config or a
    /// torchtitan TOML. Its keys apply after --scenario / --named; a link and flags on top.
    #[arg(long = "import", value_name = "FILE")]
    pub import: Option<String>,
    /// A share link or its query string (`?v=1&model=...`).
    #[arg(long, value_name = "URL")]
    pub link: Option<String>,
    /// Model preset id (see `headroom models`), a Hub id that names a preset (`Qwen/Qwen2.5-7B`,
    /// as the page's import reads it), a size such as `7b` (the typical layout of that size,
    /// approximate) or a path to a Hugging Face config.json.
    #[arg(long)]
    pub model: Option<String>,
    /// Link fields as flags (see [`FLAGS`]).
    #[command(flatten)]
    pub fields: LinkFlags,
}

/// The flag of one link field ([`headroom_core::codec::FIELDS`]).
pub struct Flag {
    /// The link key: the flag's value goes through the codec under this key, so messages name it.
    pub key: &'static str,
    pub long: &'static str,
    /// The link key spelled as a flag, when the flag's name differs from it.
    pub alias: Option<&'static str>,
    pub help: &'static str,
}

const fn flag(key: &'static str, long: &'static str, help: &'static str) -> Flag {
    Flag {
        key,
        long,
        alias: None,
        help,
    }
}

const fn renamed(
    key: &'static str,
    long: &'static str,
    alias: &'static str,
    help: &'static str,
) -> Flag {
    Flag {
        key,
        long,
        alias: Some(alias),
        help,
    }
}

/// Every link field but `v` (the codec's version), `model` and `cfg` (both `--model`: a preset
/// id or a config.json) has a flag; a test checks this against the codec's table. Switches
/// take no value to turn on and `=0`/`=false` to turn off.
pub const FLAGS: &[Flag] = &[
    flag("gpu", "gpu", "GPU id (see `headroom gpus`)."),
    flag(
        "gpus",
        "gpus",
        "GPUs in total (data x tensor x pipeline x context parallel).",
    ),
    flag(
        "batch",
        "batch",
        "Micro-batch size (sequences per GPU per forward).",
    ),
    flag(
        "seq",
        "seq",
        "Sequence length in tokens (for a multimodal model, image tokens included).",
    ),
    flag("accum", "accum", "Gradient accumulation steps."),
    flag(
        "packing",
        "packing",
        "Sequence packing: whole documents per row, no padding, varlen attention (flash2, flash3 or flex).",
    ),
    renamed(
        "doc_len",
        "doc-len",
        "doc_len",
        "Mean document length in tokens when packing (attention FLOPs scale with it).",
    ),
    renamed(
        "len_mean",
        "len-mean",
        "len_mean",
        "Dynamic padding: the samples' mean length in tokens (0: every micro-batch is --seq \
         long). Each micro-batch is padded to its longest sample; reserved grows at each step \
         longer than all before it (replayed over 1,000 micro-batches).",
    ),
    renamed(
        "len_sd",
        "len-sd",
        "len_sd",
        "Dynamic padding: the samples' length standard deviation in tokens (log-normal).",
    ),
    renamed(
        "drop_long",
        "drop-long",
        "drop_long",
        "Dynamic padding: samples longer than --seq are dropped (axolotl, ms-swift), not cut.",
    ),
    flag(
        "method",
        "method",
        "full | lora | qlora (4-bit NF4 base) | lora8 (8-bit LLM.int8 base)",
    ),
    flag("rank", "rank", "LoRA rank."),
    flag(
        "targets",
        "targets",
        "LoRA targets: attn (q,k,v,o) | all (all-linear) | qv (peft's default for Llama-like \
         models) | qkv | mlp (gate, up, down)",
    ),
    flag(
        "base",
        "base",
        "LoRA/QLoRA base model's load dtype: 16bit (the precision's) | fp32 (under amp: an fp32 \
         residual stream, and each frozen Linear's weight cast in every forward)",
    ),
    flag(
        "adapter",
        "adapter",
        "LoRA adapters' dtype: fp32 (peft's default, autocast_adapter_dtype=True) | bf16 | fp16",
    ),
    flag(
        "lora_dropout",
        "lora-dropout",
        "peft's lora_dropout > 0 (any probability): each adapted Linear keeps its own dropped \
         copy of the input and a mask.",
    ),
    flag(
        "save_embeddings",
        "save-embeddings",
        "peft's modules_to_save=[\"embed_tokens\", \"lm_head\"]: a trained copy of each beside \
         the frozen originals.",
    ),
    flag(
        "dora",
        "dora",
        "DoRA (peft's use_dora): a magnitude per output of each adapted Linear, and the base's and \
         adapters' outputs kept for it (Llama-like layers).",
    ),
    flag(
        "kbit",
        "kbit",
        "QLoRA and lora8: peft's prepare_model_for_kbit_training was called (embeddings, norms, lm_head \
         upcast to fp32; an fp32 residual stream). TRL's SFTTrainer and axolotl call it.",
    ),
    flag(
        "precision",
        "precision",
        "fp32 | bf16 | fp16 | amp-bf16 | amp-fp16",
    ),
    flag(
        "fp8",
        "fp8",
        "fp8 matmuls: off | tensorwise | rowwise (torchao float8 training) | te (Transformer \
         Engine, delayed scaling)",
    ),
    flag(
        "optimizer",
        "optimizer",
        "adamw | adamw-forloop | adamw-fused | adamw8bit | paged-adamw8bit | lion | adafactor | \
         sgd | sgd-momentum | adam-mini",
    ),
    flag(
        "vision",
        "vision",
        "A multimodal model's vision tower and projector: frozen (weights only) | trained",
    ),
    flag(
        "images",
        "images",
        "Images per sample (multimodal models): their tokens count in --seq (Gemma 3: 256 \
         each; Qwen-VL and Pixtral: an 896 x 896 image assumed).",
    ),
    flag(
        "mtp",
        "mtp",
        "Multi-token prediction modules trained (DeepSeek-V3, GLM-4.5: at most the config's \
         num_nextn_predict_layers; Megatron-LM's --mtp-num-layers). 0: none, as transformers.",
    ),
    flag("attention", "attention", "eager | sdpa"),
    flag(
        "sdpa",
        "sdpa",
        "SDPA kernel: auto (PyTorch's choice for the GPU) | flash | efficient | cudnn | math",
    ),
    flag(
        "dropout",
        "dropout",
        "Override every dropout probability of the model (empty: the config's own).",
    ),
    renamed(
        "ckpt",
        "checkpointing",
        "ckpt",
        "none | full | every:K | selective",
    ),
    renamed(
        "act_offload",
        "offload-activations",
        "act-offload",
        "Offload saved activations to pinned CPU memory (save_on_cpu).",
    ),
    flag(
        "act_int8",
        "act-int8",
        "What-if: the layers' saved activations packed to int8 with one scale each (saved_tensors_hooks).",
    ),
    flag("loss", "loss", "hf | fused"),
    flag(
        "trainer",
        "trainer",
        "sft | dpo (TRL's DPOTrainer: each micro-batch sample a chosen and rejected pair, a reference model) | kto (KTOTrainer: unpaired samples, no-grad passes over mismatched KL completions, a reference model) | orpo, cpo, simpo (TRL's experimental ORPOTrainer and CPOTrainer, SimPO its loss_type: pairs, no reference model, the full logits) | grpo (GRPOTrainer: --batch completions per GPU, --seq prompt + completion; --gen picks transformers' generate or vLLM) | rloo (RLOOTrainer: as grpo, and the policy scores its completions before training).",
    ),
    flag(
        "prompt",
        "prompt",
        "GRPO and RLOO: tokens of each prompt (the rest of --seq is the completion the loss scores).",
    ),
    flag(
        "kl",
        "kl",
        "GRPO and RLOO: beta > 0 (RLOO's default), a reference model (its log-probabilities computed in the generation phase).",
    ),
    flag(
        "gen",
        "gen",
        "GRPO's and RLOO's generation: hf (transformers generate) | colocate (vLLM in each training process, TRL's vllm_mode=colocate) | server (vLLM on a GPU of its own, `trl vllm-serve`).",
    ),
    flag(
        "vllm_util",
        "vllm-util",
        "vLLM's gpu_memory_utilization in percent (default: TRL's 30 colocated, 90 for trl vllm-serve).",
    ),
    flag(
        "vllm_len",
        "vllm-len",
        "vLLM's max_model_len in tokens (TRL's vllm_max_model_length; default: the model's max_position_embeddings).",
    ),
    flag(
        "vllm_sleep",
        "vllm-sleep",
        "TRL's vllm_enable_sleep_mode: the colocated engine frees its weights and KV cache between generations.",
    ),
    renamed(
        "ref_precompute",
        "precompute-ref-log-probs",
        "ref-precompute",
        "DPO and KTO: TRL's precompute_ref_log_probs (no reference model or forward in the step).",
    ),
    flag(
        "keep_logits",
        "keep-logits",
        "The training loop keeps `outputs` (and the logits) alive through backward.",
    ),
    flag("dp", "dp", "ddp | zero1 | zero2 | zero3 | fsdp"),
    flag("tp", "tp", "Tensor-parallel degree."),
    flag("pp", "pp", "Pipeline-parallel degree."),
    flag(
        "cp",
        "cp",
        "Context-parallel degree: the sequence split over cp GPUs, ring attention (SDPA).",
    ),
    flag("sp", "sp", "Sequence parallelism (with tp > 1)."),
    flag(
        "ep",
        "ep",
        "Expert-parallel degree (MoE models): experts split over this many data-parallel ranks.",
    ),
    renamed(
        "opt_offload",
        "offload-optimizer",
        "opt-offload",
        "Optimizer offload: none | cpu | nvme (ZeRO or FSDP).",
    ),
    renamed(
        "param_offload",
        "offload-params",
        "param-offload",
        "Parameter offload: none | cpu | nvme (ZeRO-3 or FSDP).",
    ),
    flag(
        "bucket_view",
        "bucket-view",
        "DDP's gradient_as_bucket_view=True (gradients are views into the buckets).",
    ),
    flag(
        "fsdp1",
        "fsdp1",
        "FSDP1 (accelerate's default: flat parameters, each unit's gradient one flat tensor) instead of FSDP2 (fully_shard).",
    ),
    flag(
        "reduce32",
        "reduce32",
        "FSDP under amp: gradients reduced in fp32 (torchtitan's and PyTorch's FSDP recipes) instead of the compute dtype (accelerate's and the Trainer's policy).",
    ),
    flag(
        "ds_bf16",
        "ds-bf16",
        "DeepSpeed ZeRO with bf16: bf16_master_weights_and_grads and bf16_optimizer_states.",
    ),
    renamed(
        "expandable",
        "expandable-segments",
        "expandable",
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
    ),
    renamed(
        "graphs",
        "cuda-graphs",
        "graphs",
        "CUDA graphs on (torch.compile mode=\"reduce-overhead\").",
    ),
    flag(
        "compile",
        "compile",
        "The model compiled with torch.compile (default mode): the loss fused, torchao's fp8 casts one pass each, and what a Llama-family layer trained in full saves as the compiled graph keeps it (other layers: eager training's, above a compiled run's).",
    ),
    renamed(
        "node",
        "gpus-per-node",
        "node",
        "GPUs per node for per-node host RAM, launch commands and the time model (0: 8).",
    ),
    renamed(
        "ib",
        "internode-gbs",
        "ib",
        "Inter-node bandwidth per GPU and direction in GB/s for the time model (0: 50).",
    ),
    renamed(
        "eff",
        "efficiency",
        "eff",
        "The time model's framework efficiency in percent (0: 68, fitted on Megatron-LM; plain transformers loops measured 36-52 on an H100).",
    ),
    flag(
        "host_ram",
        "host-ram",
        "CPU RAM of one node in GiB, checked against what offloading pins there (0: unchecked).",
    ),
    flag(
        "margin",
        "margin",
        "Safety margin: percent of the GPU's memory to keep free (0 to 50); it fits only with that much to spare.",
    ),
];

impl Flag {
    fn is_switch(&self) -> bool {
        codec::Field::find(self.key).is_some_and(|f| f.switch)
    }

    fn arg(&self) -> Arg {
        let arg = Arg::new(self.key).long(self.long).help(self.help);
        let arg = match self.alias {
            Some(alias) => arg.visible_alias(alias),
            None => arg,
        };
        if self.is_switch() {
            arg.num_args(0..=1)
                .require_equals(true)
                .default_missing_value("1")
                .value_name("0|1")
        } else {
            arg.value_name("VALUE")
        }
    }
}

/// The flags given, as link fields (key, value) in [`FLAGS`] order, for the core's codec to
/// check and apply.
#[derive(Debug, Default)]
pub struct LinkFlags {
    pub pairs: Vec<(String, String)>,
}

impl FromArgMatches for LinkFlags {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let pairs = FLAGS
            .iter()
            .filter_map(|f| {
                m.get_one::<String>(f.key)
                    .map(|v| (f.key.to_string(), v.clone()))
            })
            .collect();
        Ok(LinkFlags { pairs })
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

impl Args for LinkFlags {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        FLAGS.iter().fold(cmd, |cmd, f| cmd.arg(f.arg()))
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_link_field_has_a_flag() {
        let mut keys: Vec<&str> = FLAGS.iter().map(|f| f.key).collect();
        keys.extend(["v", "model", "cfg"]);
        let mut expected: Vec<&str> = codec::FIELDS.iter().map(|f| f.key).collect();
        keys.sort_unstable();
        expected.sort_unstable();
        assert_eq!(keys, expected);
        // Flags and aliases are unique, and every flag the table names exists.
        let cmd = <Cli as clap::CommandFactory>::command();
        cmd.clone().debug_assert();
        let link = cmd.find_subcommand("link").expect("the link command");
        for f in FLAGS {
            assert!(
                link.get_arguments().any(|a| a.get_long() == Some(f.long)),
                "--{} missing",
                f.long
            );
        }
    }

    fn pairs(args: &[&str]) -> Vec<(String, String)> {
        let cli = Cli::try_parse_from(["headroom", "link"].iter().chain(args)).expect("parses");
        match cli.command {
            Command::Link { scenario } => scenario.fields.pairs,
            _ => unreachable!(),
        }
    }

    fn kv(k: &str, v: &str) -> (String, String) {
        (k.into(), v.into())
    }

    #[test]
    fn switches_turn_on_and_off_and_old_names_work() {
        assert_eq!(pairs(&["--keep-logits"]), [kv("keep_logits", "1")]);
        assert_eq!(
            pairs(&["--keep-logits=false"]),
            [kv("keep_logits", "false")]
        );
        assert_eq!(pairs(&["--bucket-view"]), [kv("bucket_view", "1")]);
        assert_eq!(pairs(&["--graphs=0"]), [kv("graphs", "0")]);
        assert_eq!(
            pairs(&["--checkpointing", "full", "--tp", "2"]),
            [kv("ckpt", "full"), kv("tp", "2")]
        );
        assert_eq!(pairs(&["--ckpt", "full"]), [kv("ckpt", "full")]);
        assert!(pairs(&[]).is_empty());
    }
}
