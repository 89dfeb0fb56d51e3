//! Multimodal wrappers (Gemma 3, Qwen2.5-VL, Qwen3-VL, Mistral 3, Llama 4): the vision tower's
//! parameters, frozen or trained, the image tokens in `seq`, and links of pasted configs.

use headroom_core::codec::{decode, encode};
use headroom_core::model::parse_config_json;
use headroom_core::scenario::ModelChoice;
use headroom_core::{Estimate, Scenario, estimate};

fn component(e: &Estimate, id: &str) -> u64 {
    e.components
        .iter()
        .find(|c| c.id == id)
        .map_or(0, |c| c.bytes)
}

fn run(link: &str) -> Estimate {
    estimate(&decode(link).expect("decodes")).expect("estimates")
}

/// The vision tower and projector of each preset, as transformers 5.23 builds them on the meta
/// device (`named_parameters()` grouped under `model.vision_tower` + `model.multi_modal_projector`,
/// or `model.visual`): a frozen tower leaves exactly these out of the trainable count.
#[test]
fn frozen_vision_tower_is_not_trained() {
    for (preset, total, vision) in [
        // vision_tower 416,866,032 + multi_modal_projector 2,950,272.
        ("gemma-3-4b-it", 4_300_079_472, 419_816_304),
        // visual (ViT + merger) 676,550,144.
        ("qwen2.5-vl-7b-instruct", 8_292_166_656, 676_550_144),
        // vision_tower 403,305,472 + multi_modal_projector 35,652,608.
        ("mistral-small-3.1-24b", 24_011_361_280, 438_958_080),
        // vision_model 850,960,896 (34 layers 809,467,648, the adapter 39,845,888) +
        // multi_modal_projector 20,971,520, as Llama4ForConditionalGeneration builds them.
        ("llama-4-scout-17b-16e", 108_641_793_536, 871_932_416),
    ] {
        let frozen = run(&format!("model={preset}"));
        assert_eq!(frozen.parameters.total, total, "{preset}");
        assert_eq!(frozen.parameters.trainable, total - vision, "{preset}");
        let trained = run(&format!("model={preset}&vision=trained"));
        assert_eq!(trained.parameters.trainable, total, "{preset}");
        // Gradients follow the trainable parameters: amp-bf16 keeps fp32 gradients.
        assert_eq!(
            component(&trained, "gradients") - component(&frozen, "gradients"),
            4 * vision,
            "{preset}"
        );
    }
}

/// A frozen tower saves nothing for backward: the text model's activations are those of the
/// same text model alone (`text_config` of gemma-3-4b-it as a `gemma3_text` config, whose
/// embeddings are tied as the wrapper's are).
#[test]
fn frozen_tower_saves_nothing() {
    let text = parse_config_json(
        r#"{"model_type": "gemma3_text", "hidden_size": 2560, "intermediate_size": 10240,
            "num_hidden_layers": 34, "sliding_window": 1024}"#,
    )
    .expect("parses");
    let scen = Scenario {
        model: ModelChoice::Custom(Box::new(text)),
        ..Scenario::default()
    };
    let alone = estimate(&scen).expect("estimates");
    let wrapped = run("model=gemma-3-4b-it&images=4");
    for id in ["activations", "outside_layers", "logits"] {
        assert_eq!(component(&wrapped, id), component(&alone, id), "{id}");
    }
}

/// A trained SigLIP tower's saved bytes for one 896 x 896 image (4,096 patches of 14 px) under
/// amp-bf16, by the per-layer inventory that `tests/reference/test_vision.py` checks against
/// `saved_tensors_hooks` on CPU (modeling_siglip.py): over 27 layers of hidden 1,152 and MLP
/// 4,304, two fp32 LayerNorm inputs (1,019,215,872 B) and their fp32 statistics (1,769,472),
/// three bf16 casts for q, k and v (764,411,904), SDPA's q, k, v and output (1,019,215,872)
/// and logsumexp (7,077,888), fc1's input (254,803,968), GELU's input and output
/// (1,903,951,872), and the projector's two inputs (18,874,368, assumed): 4,989,321,216 B.
#[test]
fn trained_siglip_tower_saves_its_layers() {
    let frozen = run("model=gemma-3-4b-it");
    let trained = run("model=gemma-3-4b-it&vision=trained");
    let vision = component(&trained, "outside_layers") - component(&frozen, "outside_layers");
    assert_eq!(vision, 4_989_321_216);
    // Twice the images, twice the bytes; checkpointing keeps each block's fp32 input only
    // (27 x 4,096 x 1,152 x 4 B = 509,607,936) plus the projector's inputs.
    let two = run("model=gemma-3-4b-it&vision=trained&images=2");
    assert_eq!(
        component(&two, "outside_layers") - component(&frozen, "outside_layers"),
        2 * vision
    );
    let ckpt = run("model=gemma-3-4b-it&vision=trained&ckpt=full");
    let ckpt_frozen = run("model=gemma-3-4b-it&ckpt=full");
    assert_eq!(
        component(&ckpt, "outside_layers") - component(&ckpt_frozen, "outside_layers"),
        509_607_936 + 18_874_368
    );
}

/// Tokens per image as each processor expands an 896 x 896 image: Gemma 3's
/// `mm_tokens_per_image` 256; Qwen2.5-VL's (896/14)^2 = 4,096 patches over 2 x 2 merges, 1,024
/// (Qwen2VLProcessor); Pixtral's 32 rows of 32 merged patches each followed by `[IMG_BREAK]`
/// or `[IMG_END]`, 32 x 33 = 1,056 (PixtralProcessor). Image tokens count in `seq`, so a
/// sequence shorter than a sample's images is refused, naming `seq` and the images.
#[test]
fn image_tokens_must_fit_in_seq() {
    for (preset, tokens) in [
        ("gemma-3-4b-it", 256u32),
        ("qwen2.5-vl-7b-instruct", 1024),
        ("mistral-small-3.1-24b", 1056),
    ] {
        let fits = decode(&format!("model={preset}&images=2&seq={}", 2 * tokens)).expect("decodes");
        assert!(estimate(&fits).is_ok(), "{preset}");
        let over =
            decode(&format!("model={preset}&images=2&seq={}", 2 * tokens - 1)).expect("decodes");
        let err = estimate(&over).expect_err("refused").to_string();
        assert!(err.starts_with("`seq`"), "{preset}: {err}");
        assert!(err.contains("images"), "{preset}: {err}");
        assert!(err.contains(&tokens.to_string()), "{preset}: {err}");
    }
}

/// LoRA keeps the tower frozen (PEFT's adapters go on the language model's projections).
#[test]
fn lora_refuses_a_trained_tower() {
    let err = decode("model=gemma-3-4b-it&method=lora&vision=trained")
        .expect_err("refused")
        .to_string();
    assert!(err.contains("vision"), "{err}");
}

/// A pasted wrapper config survives its link: the counts are transformers' (4,300,079,472 for
/// gemma-3-4b-it's config; Qwen3-VL's class defaults, 12,616,410,352, as transformers 5.23
/// builds `Qwen3VLConfig()`), with the vision settings carried.
#[test]
fn pasted_wrapper_configs_round_trip_through_links() {
    for (text, total) in [
        (
            include_str!("../../../content/models/gemma-3-4b-it.json"),
            4_300_079_472u64,
        ),
        (r#"{"model_type": "qwen3_vl"}"#, 12_616_410_352),
        (
            include_str!("../../../content/models/llama-4-scout-17b-16e.json"),
            108_641_793_536,
        ),
    ] {
        let spec = parse_config_json(text).expect("parses");
        let scen = Scenario {
            model: ModelChoice::Custom(Box::new(spec)),
            vision: headroom_core::scenario::VisionTraining::Trained,
            images: 3,
            ..Scenario::default()
        };
        let back = decode(&encode(&scen)).expect("decodes");
        assert_eq!(back, scen);
        assert_eq!(estimate(&back).expect("estimates").parameters.total, total);
    }
}
