//! Framework configs read as scenarios (issue 32): every config of `tests/import_configs/`
//! (copied byte for byte from each project's own examples; `SOURCES.md` names each file's
//! repository, path and commit) imports with every key accounted for, maps to the settings the
//! file states, and estimates; and the planner's plans come back from their DeepSpeed and
//! accelerate exports.

use std::path::{Path, PathBuf};

use headroom_core::codec;
use headroom_core::estimate::resolve;
use headroom_core::export::{Target, export};
use headroom_core::import::{Framework, Outcome, import};
use headroom_core::plan::{PlanOptions, plan};
use headroom_core::scenario::{DataParallel, ModelChoice, Offload};

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/import_configs")
}

/// A referenced file (`deepspeed: deepspeed_configs/zero3_bf16_cpuoffload_all.json`) found by
/// its name anywhere in the corpus, as a user's checkout would have it.
fn corpus_file(name: &str) -> Option<String> {
    let file = Path::new(name).file_name()?.to_str()?.to_string();
    for dir in std::fs::read_dir(corpus()).ok()? {
        let p = dir.ok()?.path().join(&file);
        if p.is_file() {
            return std::fs::read_to_string(p).ok();
        }
    }
    None
}

/// What each example states, as link fields (read off the files; the defaults the notes name
/// where a file leaves a key out).
const EXPECTED: &[(&str, Framework, &str)] = &[
    (
        "axolotl/qlora.yml",
        Framework::Axolotl,
        "model=llama-3.1-8b method=qlora rank=32 targets=all lora_dropout=1 seq=4096 batch=2 accum=4 attention=flash2 packing=1 ckpt=full kbit=0 trainer=sft precision=amp-bf16 base=16bit",
    ),
    (
        "axolotl/lora-8b.yml",
        Framework::Axolotl,
        "model=llama-3.1-8b method=lora8 rank=32 targets=all lora_dropout=1 save_embeddings=1 seq=4096 batch=2 accum=4 attention=flash2 packing=1 ckpt=full optimizer=adamw8bit kbit=0 trainer=sft precision=amp-bf16 base=16bit",
    ),
    (
        "axolotl/fft-8b.yaml",
        Framework::Axolotl,
        "model=llama-3.1-8b method=full seq=8192 batch=1 accum=8 attention=flash2 packing=1 ckpt=full optimizer=paged-adamw8bit trainer=sft precision=bf16",
    ),
    (
        "axolotl/qlora-fsdp-70b.yaml",
        Framework::Axolotl,
        "model=llama-3.1-70b method=qlora rank=8 targets=all lora_dropout=1 seq=512 batch=1 accum=4 attention=flash2 ckpt=full optimizer=adamw-fused dp=fsdp param_offload=cpu opt_offload=cpu kbit=0 trainer=sft precision=amp-bf16 base=16bit fsdp1=1",
    ),
    (
        "axolotl/llama3-8b-deepspeed-alst.yaml",
        Framework::Axolotl,
        "model=llama-3.1-8b method=full seq=500000 batch=1 accum=1 attention=sdpa cp=8 ckpt=full act_offload=1 gpus=8 dp=zero3 opt_offload=cpu param_offload=cpu trainer=sft precision=amp-bf16",
    ),
    (
        "axolotl/instruct-dpo-lora-8b.yml",
        Framework::Axolotl,
        "model=llama-3.1-8b method=lora8 rank=32 targets=all lora_dropout=1 seq=4096 batch=2 accum=4 attention=flash2 ckpt=full optimizer=adamw8bit kbit=0 trainer=dpo precision=amp-bf16 base=16bit",
    ),
    (
        "axolotl/32b-qlora.yaml",
        Framework::Axolotl,
        "method=qlora rank=16 lora_dropout=0 seq=2048 batch=1 accum=2 attention=flash2 packing=1 ckpt=full act_offload=1 kbit=0 trainer=sft precision=amp-bf16 base=16bit",
    ),
    (
        "llamafactory/llama3_lora_sft.yaml",
        Framework::LlamaFactory,
        "model=llama-3.1-8b trainer=sft method=lora rank=8 targets=all lora_dropout=0 seq=2048 batch=1 accum=8 ckpt=full optimizer=adamw-fused attention=sdpa precision=amp-bf16 base=16bit",
    ),
    (
        "llamafactory/llama3_lora_sft_otfq.yaml",
        Framework::LlamaFactory,
        "model=llama-3.1-8b trainer=sft method=qlora kbit=0 rank=8 targets=all lora_dropout=0 seq=2048 batch=1 accum=8 ckpt=full optimizer=adamw-fused attention=sdpa precision=amp-bf16 base=16bit",
    ),
    (
        "llamafactory/llama3_full_sft.yaml",
        Framework::LlamaFactory,
        "model=llama-3.1-8b trainer=sft method=full seq=2048 batch=1 accum=2 ckpt=full optimizer=adamw-fused dp=zero3 attention=sdpa precision=amp-bf16",
    ),
    (
        "llamafactory/llama3_lora_dpo.yaml",
        Framework::LlamaFactory,
        "model=llama-3.1-8b trainer=dpo method=lora rank=8 targets=all lora_dropout=0 seq=2048 batch=1 accum=8 ckpt=full optimizer=adamw-fused attention=sdpa precision=amp-bf16 base=16bit",
    ),
    (
        "llamafactory/qwen3_lora_sft.yaml",
        Framework::LlamaFactory,
        "trainer=sft method=lora rank=8 targets=all lora_dropout=0 seq=2048 batch=1 accum=8 ckpt=full optimizer=adamw-fused attention=sdpa precision=amp-bf16 base=16bit",
    ),
    (
        "llamafactory/ds_z3_config.json",
        Framework::DeepSpeed,
        "dp=zero3",
    ),
    (
        "llamafactory/ds_z2_offload_config.json",
        Framework::DeepSpeed,
        "dp=zero2 opt_offload=cpu",
    ),
    (
        "llamafactory/fsdp_config.yaml",
        Framework::Accelerate,
        "gpus=2 dp=fsdp precision=amp-bf16 fsdp1=1",
    ),
    (
        "torchtitan/llama3_8b.toml",
        Framework::Torchtitan,
        "model=llama-3.1-8b batch=1 seq=8192 tp=1 pp=1 cp=1 dp=fsdp gpus=8 ckpt=selective optimizer=adamw-fused precision=amp-bf16 reduce32=1",
    ),
    (
        "torchtitan/llama3_70b.toml",
        Framework::Torchtitan,
        "model=llama-3.1-70b batch=8 seq=8192 tp=8 pp=1 cp=1 dp=fsdp gpus=8 ckpt=full optimizer=adamw-fused precision=amp-bf16 reduce32=1",
    ),
    (
        "torchtitan/debug_model.toml",
        Framework::Torchtitan,
        "batch=8 seq=2048 tp=1 pp=1 cp=1 dp=fsdp gpus=8 ckpt=every:2 optimizer=adamw-fused precision=amp-bf16 reduce32=1",
    ),
    (
        "torchtitan/deepseek_v3_16b.toml",
        Framework::Torchtitan,
        "batch=4 seq=4096 tp=1 pp=1 ep=8 dp=fsdp gpus=8 ckpt=selective optimizer=adamw-fused precision=amp-bf16 reduce32=1",
    ),
    (
        "trl/example_config.yaml",
        Framework::Trl,
        "model=qwen2.5-0.5b trainer=sft method=full batch=8 accum=1 ckpt=full optimizer=adamw-fused seq=1024 precision=amp-bf16",
    ),
    (
        "trl/config.yaml",
        Framework::Trl,
        "model=qwen2.5-1.5b trainer=grpo method=full batch=1 accum=32 ckpt=full optimizer=adamw-fused seq=16384 prompt=0 precision=amp-bf16",
    ),
    (
        "trl/fsdp1.yaml",
        Framework::Accelerate,
        "gpus=8 dp=fsdp fsdp1=1 precision=amp-bf16",
    ),
    (
        "trl/fsdp2.yaml",
        Framework::Accelerate,
        "gpus=8 dp=fsdp fsdp1=0 precision=amp-bf16",
    ),
    (
        "trl/fsdp_qlora.yaml",
        Framework::Accelerate,
        "gpus=8 dp=fsdp param_offload=cpu opt_offload=cpu precision=amp-bf16 fsdp1=1",
    ),
    (
        "trl/deepspeed_zero3.yaml",
        Framework::Accelerate,
        "gpus=8 dp=zero3 precision=amp-bf16",
    ),
    (
        "trl/multi_gpu.yaml",
        Framework::Accelerate,
        "gpus=8 dp=ddp precision=amp-bf16",
    ),
    (
        "deepspeed/ds_config_zero2.json",
        Framework::DeepSpeed,
        "dp=zero2 opt_offload=cpu optimizer=adamw",
    ),
    (
        "deepspeed/ds_config_zero3.json",
        Framework::DeepSpeed,
        "dp=zero3 opt_offload=cpu param_offload=cpu optimizer=adamw",
    ),
    (
        "deepspeed/zero3_bf16_cpuoffload_all.json",
        Framework::DeepSpeed,
        "dp=zero3 opt_offload=cpu param_offload=cpu precision=amp-bf16",
    ),
];

/// Presets standing in for the models the examples name that are not presets (the CLI asks
/// for their config.json, the page fetches it): the nearest preset of the same family.
fn stand_in(file: &str) -> Option<&'static str> {
    match file {
        "axolotl/32b-qlora.yaml" | "llamafactory/qwen3_lora_sft.yaml" => Some("qwen3-8b"),
        "torchtitan/deepseek_v3_16b.toml" => Some("deepseek-v2-lite"),
        "torchtitan/debug_model.toml" => Some("llama-3.2-1b"),
        _ => None,
    }
}

#[test]
fn every_example_config_imports_as_it_states() {
    let mut files: Vec<String> = Vec::new();
    for dir in std::fs::read_dir(corpus()).expect("corpus") {
        let dir = dir.expect("entry").path();
        if dir.is_dir() {
            for f in std::fs::read_dir(&dir).expect("dir") {
                let f = f.expect("file").path();
                files.push(
                    f.strip_prefix(corpus())
                        .expect("inside")
                        .display()
                        .to_string(),
                );
            }
        }
    }
    files.sort();
    let mut listed: Vec<String> = EXPECTED.iter().map(|e| e.0.to_string()).collect();
    listed.sort();
    assert_eq!(
        files, listed,
        "every file of the corpus has its expectation"
    );
    for (file, framework, want) in EXPECTED {
        // Without the `toml` feature (the site's core) TOML is refused with a message.
        if cfg!(not(feature = "toml")) && file.ends_with(".toml") {
            continue;
        }
        let text = std::fs::read_to_string(corpus().join(file)).expect("reads");
        let got = import(&text, Some(file), &corpus_file).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(got.framework, *framework, "{file}");
        let pairs = got
            .pairs
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ");
        assert_eq!(&pairs, want, "{file}");
        // Every key is accounted for: read, defaulted, not expressed (with why) or no effect.
        let unknown: Vec<_> = got.with(Outcome::Unknown).map(|n| &n.key).collect();
        assert!(unknown.is_empty(), "{file}: unknown keys {unknown:?}");
        for n in got.with(Outcome::NotExpressed) {
            assert!(!n.text.is_empty(), "{file}: {} says why", n.key);
        }
        // The settings are valid together and estimate, on the named model or its stand-in.
        let mut scen = codec::decode_pairs(Default::default(), &got.pairs)
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        match (&got.model, &got.preset, stand_in(file)) {
            (Some(_), Some(_), None) => {}
            (Some(_), None, Some(id)) => scen.model = ModelChoice::Preset(id.into()),
            // accelerate and DeepSpeed files name no model: the scenario's default stays.
            (None, None, None) => assert!(
                matches!(framework, Framework::Accelerate | Framework::DeepSpeed),
                "{file}"
            ),
            (m, p, s) => panic!("{file}: model {m:?}, preset {p:?}, stand-in {s:?}"),
        }
        let r = resolve(&scen).unwrap_or_else(|e| panic!("{file}: {e}"));
        let e = headroom_core::estimate_with(&r.spec, r.gpu, &r.calibration, &scen);
        assert!(e.peak.device > 0, "{file}");
    }
}

/// The planner's plans for a 70B full fine-tune on 8 GPUs and a LoRA on one come back from
/// their accelerate config (which names the DeepSpeed JSON beside it, read as the user's
/// `accelerate launch` would): GPUs, data parallelism, offload, micro-batch and accumulation.
#[test]
fn plans_come_back_from_their_exports() {
    let cases = [
        "model=llama-3.1-70b&gpu=a100-sxm4-80gb&gpus=8&seq=4096&batch=1&accum=8",
        "model=llama-3.1-8b&gpu=h100-sxm-80gb&gpus=8&seq=4096&batch=2&accum=4",
        "model=llama-3.1-8b&gpu=rtx-4090&method=lora&seq=2048&batch=4",
    ];
    let mut checked = 0;
    for link in cases {
        let scen = codec::decode(&format!("v=1&{link}")).expect("link");
        let planning = plan(&scen, &PlanOptions::default()).expect("plans");
        for p in planning.plans.iter().chain(&planning.training_plans) {
            let s = &p.scenario;
            if s.parallel.tensor > 1 || s.parallel.pipeline > 1 || s.parallel.context > 1 {
                continue; // Neither format expresses these: the planner's export says so.
            }
            let spec = resolve(s).expect("resolves").spec;
            let accelerate = export(&spec, s, Target::Accelerate).text;
            let ds = export(&spec, s, Target::DeepSpeed).text;
            let read = |name: &str| (name == Target::DeepSpeed.file_name()).then(|| ds.clone());
            let got = import(&accelerate, Some("accelerate_config.yaml"), &read)
                .unwrap_or_else(|e| panic!("{}: {e}\n{accelerate}", p.link));
            let back = codec::decode_pairs(s.clone(), &got.pairs)
                .unwrap_or_else(|e| panic!("{}: {e}", p.link));
            assert_eq!(back.gpus, s.gpus, "{}", p.link);
            assert_eq!(back.parallel.data, s.parallel.data, "{}", p.link);
            if s.parallel.data == DataParallel::Fsdp {
                // FSDP offloads parameters, gradients and states together.
                let any = s.parallel.offload_params != Offload::None
                    || s.parallel.offload_optimizer != Offload::None;
                assert_eq!(
                    back.parallel.offload_params != Offload::None,
                    any,
                    "{}",
                    p.link
                );
            } else {
                assert_eq!(
                    back.parallel.offload_optimizer, s.parallel.offload_optimizer,
                    "{}",
                    p.link
                );
                assert_eq!(
                    back.parallel.offload_params, s.parallel.offload_params,
                    "{}",
                    p.link
                );
            }
            if matches!(
                s.parallel.data,
                DataParallel::Zero1 | DataParallel::Zero2 | DataParallel::Zero3
            ) {
                assert_eq!(back.micro_batch, s.micro_batch, "{}", p.link);
                assert_eq!(back.grad_accum, s.grad_accum, "{}", p.link);
            }
            assert!(
                got.with(Outcome::Unknown).next().is_none(),
                "{}: {:?}",
                p.link,
                got.with(Outcome::Unknown).collect::<Vec<_>>()
            );
            checked += 1;
        }
    }
    assert!(checked >= 10, "only {checked} plans checked");
}

#[test]
fn a_model_that_is_not_a_preset_is_named_for_its_config() {
    let got = import(
        "base_model: Qwen/Qwen3-32B\nmicro_batch_size: 1\n",
        Some("x.yml"),
        &|_: &str| None,
    )
    .expect("imports");
    assert_eq!(got.model.as_deref(), Some("Qwen/Qwen3-32B"));
    assert_eq!(got.preset, None);
    assert!(got.pairs.iter().all(|(k, _)| k != "model"));
}

/// The planner's single-node plans come back from their axolotl and LLaMA-Factory YAML (and
/// the DeepSpeed JSON it names): every setting the import reads equals the plan's, for full
/// fine-tunes, LoRA, QLoRA with and without peft's kbit preparation, packing and DPO.
#[test]
fn plans_come_back_from_their_axolotl_and_llamafactory_yaml() {
    let cases = [
        "model=llama-3.1-8b&gpu=h100-sxm-80gb&gpus=8&seq=4096&batch=2&accum=4",
        "model=llama-3.2-3b&gpu=h100-sxm-80gb&precision=bf16&seq=2048&batch=4",
        "model=llama-3.1-8b&gpu=rtx-4090&method=lora&seq=2048&batch=4",
        "model=llama-3.1-8b&gpu=rtx-4090&method=qlora&kbit=1&seq=2048&batch=2&attention=flash2&packing=1",
        "model=qwen2.5-7b&gpu=a100-sxm4-80gb&gpus=2&method=qlora&seq=2048&trainer=dpo",
        "model=qwen2.5-1.5b&gpu=a100-sxm4-80gb&method=lora&seq=2048&trainer=orpo",
        "model=qwen2.5-1.5b&gpu=a100-sxm4-80gb&seq=2048&batch=2&trainer=simpo",
    ];
    let mut checked = std::collections::BTreeMap::new();
    for link in cases {
        let scen = codec::decode(&format!("v=1&{link}")).expect("link");
        let opts = PlanOptions {
            allow_training_changes: true,
            ..PlanOptions::default()
        };
        let planning = plan(&scen, &opts).expect("plans");
        for p in planning.plans.iter().chain(&planning.training_plans) {
            let s = &p.scenario;
            let spec = resolve(s).expect("resolves").spec;
            let ds = export(&spec, s, Target::DeepSpeed).text;
            let read = |name: &str| (name == Target::DeepSpeed.file_name()).then(|| ds.clone());
            for target in [Target::Axolotl, Target::LlamaFactory] {
                if !headroom_core::export::offered(s).contains(&target) {
                    continue;
                }
                let text = export(&spec, s, target).text;
                let got = import(&text, Some(target.file_name()), &read)
                    .unwrap_or_else(|e| panic!("{} {}: {e}\n{text}", target.id(), p.link));
                assert!(
                    got.with(Outcome::Unknown).next().is_none(),
                    "{} {}: {:?}",
                    target.id(),
                    p.link,
                    got.with(Outcome::Unknown).collect::<Vec<_>>()
                );
                let mut back = codec::decode_pairs(s.clone(), &got.pairs)
                    .unwrap_or_else(|e| panic!("{} {}: {e}", target.id(), p.link));
                // DeepSpeed's own optimizer steps offloaded states (the JSON's AdamW block):
                // the GPU holds none of them, whichever it is.
                if s.parallel.offload_optimizer != Offload::None {
                    back.optimizer = s.optimizer;
                }
                assert_eq!(&back, s, "{} {}\n{text}", target.id(), p.link);
                *checked.entry(target.id()).or_insert(0) += 1;
            }
        }
    }
    eprintln!("plans checked per format: {checked:?}");
    assert!(
        checked.values().all(|n| *n >= 5) && checked.len() == 2,
        "plans checked per format: {checked:?}"
    );
}
