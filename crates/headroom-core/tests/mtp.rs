//! Multi-token prediction modules (DeepSeek-V3, GLM-4.5) trained with `mtp`: parameters,
//! the extra layer and loss, refusals, and links of pasted configs.

use headroom_core::codec::{decode, encode};
use headroom_core::model::parse_config_json;
use headroom_core::scenario::ModelChoice;
use headroom_core::{Estimate, Scenario, estimate};

fn run(link: &str) -> Estimate {
    estimate(&decode(link).expect("decodes")).expect("estimates")
}

const DEEPSEEK: &str = "model=deepseek-v3&gpu=h200-sxm-141gb&gpus=256&dp=fsdp&precision=bf16\
                        &ckpt=full&batch=1&seq=4096";

/// One module adds 11,610,067,968 parameters to DeepSeek-V3: its MoE decoder layer
/// (11,507,286,016 as transformers builds layer 61: MLA attention, 256 routed experts and
/// the shared one, the router, two norms), eh_proj (14,336 x 7,168) and three norms of 7,168
/// (tests/reference/test_mtp.py builds the module from transformers' classes and checks the
/// same sum through the CLI).
#[test]
fn deepseek_v3_module_adds_its_layer_projection_and_norms() {
    let off = run(DEEPSEEK);
    let on = run(&format!("{DEEPSEEK}&mtp=1"));
    let layer = 11_507_286_016u64;
    assert_eq!(
        on.parameters.total - off.parameters.total,
        layer + 14_336 * 7_168 + 3 * 7_168
    );
    assert!(on.mtp.contains("11.61B"), "{}", on.mtp);
    assert!(off.mtp.is_empty());
}

/// The second head's loss keeps its own fp32 log-softmax over the vocabulary for backward:
/// 4,096 tokens x 129,280 x 4 bytes on top of what the module's layer and norms keep.
#[test]
fn each_module_keeps_a_loss_of_its_own() {
    let off = run(DEEPSEEK);
    let on = run(&format!("{DEEPSEEK}&mtp=1"));
    let log_softmax = 4_096u64 * 129_280 * 4;
    let more = on.bytes.retained_after_forward - off.bytes.retained_after_forward;
    assert!(more > log_softmax, "{more} <= {log_softmax}");
    // The rest is the layer's checkpointed input and the module's norms, concatenation and
    // lm_head input: a few hidden-state-sized tensors, well under one log-softmax.
    assert!(more < log_softmax + 16 * 4_096 * 7_168 * 2, "{more}");
}

#[test]
fn mtp_needs_a_config_that_has_the_modules() {
    for (link, has) in [
        ("model=llama-3.1-8b&mtp=1", "has 0"),
        (&format!("{DEEPSEEK}&mtp=2") as &str, "has 1"),
    ] {
        let err = estimate(&decode(link).expect("decodes"))
            .expect_err("refused")
            .to_string();
        assert!(err.contains("mtp") && err.contains(has), "{err}");
    }
    assert!(decode("mtp=17").is_err(), "beyond the bound");
}

/// A pasted GLM-4.5-Air config keeps its module count through a link.
#[test]
fn pasted_config_keeps_its_modules_through_links() {
    let spec = parse_config_json(include_str!("../../../content/models/glm-4.5-air.json"))
        .expect("parses");
    assert_eq!(spec.mtp_modules, 1);
    let scen = Scenario {
        model: ModelChoice::Custom(Box::new(spec)),
        mtp: 1,
        ..Scenario::default()
    };
    let back = decode(&encode(&scen)).expect("decodes");
    assert_eq!(back, scen);
    assert!(!estimate(&back).expect("estimates").mtp.is_empty());
}
