//! The importer on small configs written here; the real example configs are in
//! `tests/import.rs`.

use super::*;

fn no_files(_: &str) -> Option<String> {
    None
}

fn fields(text: &str, name: &str) -> Vec<(String, String)> {
    import(text, Some(name), &no_files).expect("imports").pairs
}

#[test]
fn resolves_hub_ids_to_presets() {
    assert_eq!(
        resolve_preset("meta-llama/Meta-Llama-3.1-8B-Instruct").as_deref(),
        Some("llama-3.1-8b")
    );
    assert_eq!(
        resolve_preset("Qwen/Qwen2.5-7B-Instruct").as_deref(),
        Some("qwen2.5-7b")
    );
    assert_eq!(
        resolve_preset("/models/Llama-3.2-1B/").as_deref(),
        Some("llama-3.2-1b")
    );
    assert_eq!(resolve_preset("someone/unknown-model"), None);
}

#[test]
fn detects_each_format() {
    let cases = [
        (
            "base_model: x\nmicro_batch_size: 2\n",
            "a.yml",
            Framework::Axolotl,
        ),
        (
            "model_name_or_path: x\nstage: sft\n",
            "a.yaml",
            Framework::LlamaFactory,
        ),
        (
            "model_name_or_path: x\nper_device_train_batch_size: 2\n",
            "a.yaml",
            Framework::Trl,
        ),
        (
            "{\"zero_optimization\": {\"stage\": 2}}",
            "ds.json",
            Framework::DeepSpeed,
        ),
        (
            "compute_environment: LOCAL_MACHINE\ndistributed_type: FSDP\n",
            "a.yaml",
            Framework::Accelerate,
        ),
        (
            "[job]\ndescription = \"x\"\n[training]\nseq_len = 4096\n",
            "a.toml",
            Framework::Torchtitan,
        ),
    ];
    for (text, name, want) in cases {
        // Without the `toml` feature (the site's core) TOML is refused with a message.
        if cfg!(not(feature = "toml")) && name.ends_with(".toml") {
            let err = import(text, Some(name), &no_files).expect_err("refused");
            assert!(err.0.contains("command-line tool"), "{err}");
            continue;
        }
        assert_eq!(
            import(text, Some(name), &no_files).expect(name).framework,
            want,
            "{text}"
        );
    }
    let err = import("a: 1\n", Some("x.yaml"), &no_files).expect_err("refused");
    assert!(err.0.contains("axolotl"), "{err}");
}

#[test]
fn bad_values_name_their_key() {
    let err = import(
        "base_model: x\nmicro_batch_size: two\n",
        Some("a.yml"),
        &no_files,
    )
    .expect_err("refused");
    assert_eq!(
        err.0,
        "`micro_batch_size`: expected a whole number, found two"
    );
    let err =
        import("{\"zero_optimization\": {\"stage\": 5}}", None, &no_files).expect_err("refused");
    assert_eq!(err.0, "`zero_optimization.stage`: expected 0, 1, 2 or 3");
}

#[test]
fn lora_targets_as_peft_names_them() {
    let t = |names: &[&str]| lora_targets(&names.iter().map(|s| s.to_string()).collect::<Vec<_>>());
    assert_eq!(t(&["v_proj", "q_proj"]), Some("qv"));
    assert_eq!(t(&["q_proj", "k_proj", "v_proj", "o_proj"]), Some("attn"));
    assert_eq!(t(&["all-linear"]), Some("all"));
    assert_eq!(t(&["q_proj"]), None);
}

#[test]
fn a_deepspeed_file_named_by_the_arguments_is_read() {
    let ds = "{\"zero_optimization\": {\"stage\": 3, \"offload_optimizer\": {\"device\": \"cpu\"}}, \"bf16\": {\"enabled\": \"auto\"}}";
    let read = |p: &str| (p == "ds.json").then(|| ds.to_string());
    let got = import(
        "model_name_or_path: Qwen/Qwen2.5-7B\nper_device_train_batch_size: 2\ndeepspeed: ds.json\n",
        Some("args.yaml"),
        &read,
    )
    .expect("imports");
    let get = |k: &str| {
        got.pairs
            .iter()
            .find(|(f, _)| f == k)
            .map(|(_, v)| v.as_str())
    };
    assert_eq!(get("dp"), Some("zero3"));
    assert_eq!(get("opt_offload"), Some("cpu"));
    assert_eq!(get("model"), Some("qwen2.5-7b"));
    // TRL's fp32 load under bf16 autocast, with DeepSpeed's fp32 masters.
    assert_eq!(get("precision"), Some("amp-bf16"));
    let unread = fields(
        "model_name_or_path: Qwen/Qwen2.5-7B\ndeepspeed: ds.json\n",
        "args.yaml",
    );
    assert!(!unread.iter().any(|(k, _)| k == "dp"));
}

/// axolotl's FSDP2 block as its schema names the keys (`schemas/fsdp.py`: no `fsdp_` prefix).
#[test]
fn axolotl_fsdp2_keys_are_all_accounted_for() {
    let text = "base_model: meta-llama/Llama-3.1-8B\nmicro_batch_size: 1\nfsdp_version: 2\nfsdp_config:\n  offload_params: true\n  cpu_offload_pin_memory: false\n  reshard_after_forward: true\n  mixed_precision_policy: bf16\n  final_state_dict_type: FULL_STATE_DICT\n  transformer_layer_cls_to_wrap: LlamaDecoderLayer\n";
    let got = import(text, Some("a.yml"), &no_files).expect("imports");
    assert!(got.with(Outcome::Unknown).next().is_none());
    let get = |k: &str| {
        got.pairs
            .iter()
            .find(|(f, _)| f == k)
            .map(|(_, v)| v.as_str())
    };
    assert_eq!(get("dp"), Some("fsdp"));
    assert_eq!(get("param_offload"), Some("cpu"));
    assert!(
        got.with(Outcome::NotExpressed)
            .any(|n| n.key == "fsdp_config.mixed_precision_policy")
    );
}
