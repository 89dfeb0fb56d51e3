//! Every integration test of the core in one test binary (one link instead of one per file):
//! each file under tests/ is a module here, `common` the helpers several share.

mod common;

mod act_int8;
#[cfg(feature = "replay")]
mod allocator_sequence;
mod allocator_traces;
mod assumptions;
mod attention_kernels;
mod calibrated_time;
mod calibration;
mod content_install;
mod context;
#[path = "core.rs"]
mod core_model;
mod dpo;
mod expert_parallel;
mod export;
mod fp8;
mod fragmentation;
mod grpo_vllm;
mod guides;
mod import;
mod int8;
mod inventory;
mod layering;
mod links;
mod measured;
mod mtp;
mod multimodal;
#[cfg(feature = "replay")]
mod padded_time;
#[cfg(feature = "replay")]
mod padding;
mod peak_parts;
mod plan;
mod presets;
mod properties;
mod robust;
mod strategy_costs;
mod time;
#[cfg(all(feature = "toml", feature = "embedded-claims"))]
mod worked_examples;
