//! fp8 training (torchao float8): what it changes in memory and in time, checked against
//! torchao's source, its published Llama 3 8B benchmark and an H200's runs.

use headroom_core::codec::{decode, encode};
use headroom_core::fp8;
use headroom_core::scenario::Fp8Recipe;
use headroom_core::{analyze, estimate};

use crate::common;
use common::{measured_link, measured_on_gpu};

/// torchao's benchmark setup (pytorch/ao docs/source/workflows/training.md, "e2e training
/// benchmarks", NVIDIA H100): Llama 3 8B on 8 x H100, FSDP2, batch 1, sequence 8192,
/// torch.compile, per-op selective checkpointing. Llama 3.1 8B has Llama 3 8B's shapes.
const TORCHAO_BENCH: &str = "model=llama-3.1-8b&gpu=h100-sxm-80gb&gpus=8&batch=1&seq=8192\
     &dp=fsdp&ckpt=selective&precision=amp-bf16&compile=1";

/// Median tokens/s per GPU in that table: bf16 6,150; tensorwise with fp8 all-gather 7,689.5;
/// rowwise with bf16 all-gather 6,768.
const BENCH_TOKENS_PER_SECOND: [(&str, f64); 3] =
    [("off", 6150.0), ("tensorwise", 7689.5), ("rowwise", 6768.0)];

fn tokens_per_second(recipe: &str) -> f64 {
    let scen = decode(&format!("{TORCHAO_BENCH}&fp8={recipe}")).expect("decodes");
    analyze(&scen)
        .expect("analyzes")
        .time
        .tokens_per_second_per_gpu
}

/// The recipes' speedups over bf16 against torchao's. The GEMM shares in `headroom_core::fp8`
/// were fitted on this run when the time model had no elementwise term; since that term
/// (2026-11-26) the shares are kept where the H100's own `_scaled_mm` measurements put them,
/// and the model's speedups fall short of torchao's: 1.10 and 1.02 against 1.25 and 1.10. Its
/// bf16 figure for the same run is 41% faster than published (8,666 against 6,150 tokens/s
/// per GPU): the time torchtitan's run spends beyond the model's count (its per-op selective
/// checkpointing recomputes matmuls Headroom's `selective` does not) is matmul time fp8 would
/// shorten. Held here: fp8 faster than bf16, tensorwise faster than rowwise, each speedup under
/// torchao's by less than 0.16 (a change that moves them shows).
#[test]
fn torchao_llama3_8b_speedups() {
    let base = tokens_per_second("off");
    let published_base = BENCH_TOKENS_PER_SECOND[0].1;
    let mut ours = Vec::new();
    for (recipe, published) in &BENCH_TOKENS_PER_SECOND[1..] {
        let speedup = tokens_per_second(recipe) / base;
        let theirs = published / published_base;
        assert!(
            speedup > 1.0 && speedup < theirs && theirs - speedup < 0.16,
            "{recipe}: speedup {speedup:.3} against torchao's {theirs:.3}"
        );
        ours.push(speedup);
    }
    assert!(
        ours[0] > ours[1],
        "tensorwise {} rowwise {}",
        ours[0],
        ours[1]
    );
}

/// fp8's gain depends on the GEMM's size (`fp8::size_factor`), read from the H100's measured
/// `torch._scaled_mm` against bf16 `mm` (tests/reference/gpu/gpu_presets_tf5.17.json): where
/// fp8 ran no faster than bf16 (n <= 2,048) the core gives it no gain, and where it ran at
/// 1.4-1.8x (n >= 4,096) the core's ratio (the fp8 peak's 2x times the fitted GEMM share) is
/// within 20% of the measured one for each recipe.
#[test]
fn fp8_gain_follows_the_h100s_gemm_sizes() {
    let doc = measured_on_gpu("gpu_presets_tf5.17.json");
    let rows = doc["fp8gemm"].as_array().expect("fp8gemm rows");
    let rate = |n: u64, kind: &str| {
        rows.iter()
            .find(|r| r["n"] == n && r["kind"] == kind)
            .and_then(|r| r["tflops"].as_f64())
            .expect("a measured rate")
    };
    for (kind, recipe) in [
        ("fp8_tensorwise", Fp8Recipe::Tensorwise),
        ("fp8_rowwise", Fp8Recipe::Rowwise),
    ] {
        for n in [1024u64, 2048, 4096, 8192, 16384] {
            let measured = rate(n, kind) / rate(n, "bf16");
            let full = 2.0 * fp8::gemm_factor(recipe);
            let core = 1.0 + (full - 1.0) * fp8::size_factor(n as f64);
            if measured <= 1.0 {
                assert_eq!(core, 1.0, "{kind} n={n}: measured {measured:.2}x");
            } else {
                assert!(
                    (core / measured - 1.0).abs() < 0.2,
                    "{kind} n={n}: core {core:.2}x, measured {measured:.2}x"
                );
            }
        }
    }
}

/// torchao saves the bf16 input and weight for backward (`ctx.save_for_backward(input_hp,
/// weight_hp_t)` in float8_linear.py): saved activations, weights, gradients and optimizer
/// states are those of bf16 training. What changes is a Linear's fp8 copies while it runs, a
/// few MiB to a few hundred MiB; torchao's table shows peaks within 0.3% (47.65, 47.77 and
/// 47.79 GB).
#[test]
fn fp8_keeps_what_bf16_saves() {
    for base in [
        "model=llama-3.1-8b&gpu=h100-sxm-80gb&batch=2&seq=4096&precision=bf16",
        TORCHAO_BENCH,
    ] {
        let off = estimate(&decode(base).expect("decodes")).expect("estimates");
        for recipe in ["tensorwise", "rowwise"] {
            let on = estimate(&decode(&format!("{base}&fp8={recipe}")).expect("decodes"))
                .expect("estimates");
            for id in ["weights", "gradients", "optimizer_states", "activations"] {
                let b = |e: &headroom_core::Estimate| {
                    e.components
                        .iter()
                        .filter(|c| c.id.starts_with(id))
                        .map(|c| c.bytes)
                        .sum::<u64>()
                };
                assert_eq!(b(&off), b(&on), "{base} {recipe}: {id}");
            }
            let (a, b) = (off.peak.tensors as f64, on.peak.tensors as f64);
            assert!(
                (b - a).abs() / a < 0.01,
                "{base} {recipe}: peak {a:.3e} -> {b:.3e}"
            );
        }
    }
}

/// FSDP2's fp8 all-gather (tensorwise only): the two gathered layers' Linear weights are one
/// byte instead of two, exactly.
#[test]
fn fp8_all_gather_halves_gathered_linears() {
    let gather = |recipe: &str| {
        let e = estimate(&decode(&format!("{TORCHAO_BENCH}&fp8={recipe}")).expect("decodes"))
            .expect("estimates");
        e.components
            .iter()
            .find(|c| c.id == "gathered_params")
            .map(|c| c.bytes)
            .expect("a gather line under FSDP2")
    };
    // Llama 3 8B's layer: q 4096x4096, k and v 4096x1024, o 4096x4096, gate, up and down
    // 4096x14336: 218,103,808 Linear parameters (config.json of meta-llama/Llama-3.1-8B).
    let linears: u64 = 4096 * 4096 * 2 + 4096 * 1024 * 2 + 3 * 4096 * 14336;
    assert_eq!(linears, 218_103_808);
    assert_eq!(gather("rowwise") - gather("tensorwise"), 2 * linears);
    assert_eq!(gather("off"), gather("rowwise"));
}

/// fp8 needs fp8 tensor cores (compute capability 8.9+), bf16 activations and full training;
/// each refusal names the field.
#[test]
fn fp8_refusals_name_the_field() {
    for (link, says) in [
        ("gpu=a100-sxm4-80gb&fp8=tensorwise", "no fp8 tensor cores"),
        ("precision=fp16&fp8=rowwise", "bf16"),
        ("method=lora&fp8=tensorwise", "method full"),
    ] {
        let err = decode(link)
            .and_then(|s| estimate(&s))
            .expect_err(link)
            .to_string();
        assert!(err.contains("fp8") && err.contains(says), "{link}: {err}");
    }
    // Ada has them: an RTX 4090 (sm89) runs fp8.
    estimate(&decode("gpu=rtx-4090-24gb&model=llama-3.2-1b&fp8=tensorwise").expect("decodes"))
        .expect("fp8 on Ada");
}

#[test]
fn fp8_round_trips_through_links() {
    let s = decode("fp8=rowwise&dp=fsdp&gpus=8").expect("decodes");
    assert_eq!(decode(&encode(&s)).expect("re-decodes"), s);
    assert!(encode(&s).contains("fp8=rowwise"));
    assert!(!encode(&decode("").expect("default")).contains("fp8"));
}

/// Transformer Engine (`fp8=te`, accelerate's TE backend) as its source reads (TE 2.20,
/// `module/linear.py` `_Linear.forward`; not measured): each `te.Linear` saves its own fp8 copy
/// of its input (1 byte per element, one layout) with a 4-byte `scale_inv`, instead of the
/// 16-bit input the Linears share; it keeps an fp8 copy of its weight in both layouts (2 bytes
/// per weight on Hopper) to its backward; and each holds `DelayedScaling`'s amax histories
/// (20,500 B). Llama 3.1 8B in bf16 on an H100, 2,048 tokens: the q/k/v, o_proj, gate/up and
/// down_proj inputs change, nothing else.
#[test]
fn transformer_engine_saves_fp8_inputs_and_weight_copies() {
    let link = "model=llama-3.1-8b&gpu=h100-sxm-80gb&precision=bf16&batch=1&seq=2048";
    let at = |fp8: &str| {
        estimate(&decode(&format!("{link}&fp8={fp8}")).expect("decodes")).expect("estimates")
    };
    let (off, te) = (at("off"), at("te"));
    let (t, h, q, f) = (2048u64, 4096u64, 4096u64, 14336u64);
    // bf16: the two norm outputs (read by q/k/v and by gate/up) and the down_proj input, 2 B
    // each, saved once. TE: an fp8 copy per Linear (q, k, v, gate, up on the norm outputs;
    // o_proj beside the kernel's output; down_proj), 1 B each, and 7 scales.
    let bf16_inputs = 2 * (2 * t * h) + 2 * t * f;
    let te_inputs = 5 * t * h + t * q + t * f + 7 * 4;
    assert_eq!(
        te.bytes.activations_per_layer + bf16_inputs,
        off.bytes.activations_per_layer + te_inputs
    );
    // Weight copies: 2 B per decoder-layer Linear weight (bf16 has no autocast copies), and
    // per weight of the untied lm_head (128,256 x 4,096: multiples of 16, so accelerate swaps
    // it too), kept to its backward.
    let linears_per_layer = 2 * h * q + 2 * h * 1024 + 3 * h * f;
    let lm_head = 128_256 * h;
    let copies = te
        .components
        .iter()
        .find(|c| c.id == "autocast_cache")
        .expect("copies");
    assert_eq!(copies.bytes, 2 * (32 * linears_per_layer + lm_head));
    // On Blackwell one layout serves both GEMMs (TE's `non_tn_fp8_gemm_supported()`, compute
    // capability 10 and up): 1 B per weight.
    let blackwell = link.replace("h100-sxm-80gb", "b200-180gb");
    let b200 =
        estimate(&decode(&format!("{blackwell}&fp8=te")).expect("decodes")).expect("estimates");
    let b200_copies = b200.components.iter().find(|c| c.id == "autocast_cache");
    assert_eq!(
        b200_copies.expect("copies").bytes,
        32 * linears_per_layer + lm_head
    );
    assert!(b200.fp8.contains("one layout"), "{}", b200.fp8);
    // Delayed scaling's state: 7 te.Linears in each of 32 layers, and the lm_head's.
    assert_eq!(te.bytes.weights - off.bytes.weights, (32 * 7 + 1) * 20_500);
    // The lm_head saves its input in fp8 (1 B and a scale) in place of the bf16 one (2 B).
    let outside = |e: &headroom_core::Estimate| {
        e.components
            .iter()
            .find(|c| c.id == "outside_layers")
            .expect("outside the layers")
            .bytes
    };
    assert_eq!(outside(&te) + t * h, outside(&off) + 4);
    assert_eq!(fp8::TE_DELAYED_STATE_BYTES, 20_500);
    assert!(te.fp8.contains("Transformer Engine"), "{}", te.fp8);
    // Round trip, and what TE cannot do here: LoRA (it converts the Linears that train).
    let scen = decode(&format!("{link}&fp8=te")).expect("decodes");
    assert_eq!(scen.fp8, Fp8Recipe::Te);
    assert_eq!(decode(&encode(&scen)), Ok(scen));
    let lora = decode(&format!("{link}&fp8=te&method=lora"));
    assert!(lora.is_err_and(|e| e.to_string().contains("method full")));
}

/// torchao's float8 run eagerly (no torch.compile, as the FSDP2 export writes it) on an H200
/// (torch 2.11, torchao 0.18; tests/reference/gpu/h200/gpu_presets_fp8.json): each fp8 step
/// against the same step in bf16, measured back to back. Measured, eager fp8 took 1.57 to 2.08
/// times as long; the core's ratio is within 8% of each (its eager cast cost,
/// `fp8::EAGER_CAST_BYTES_PER_ELEMENT`, was fitted on these six runs, so this checks the fit
/// and that one constant serves three models and two recipes). Compiled, the same steps are
/// faster than in bf16 (torchao's benchmark, `torchao_llama3_8b_speedups`), and the memory is
/// the same either way.
#[test]
fn eager_casts_cost_what_the_h200_measured() {
    let doc = measured_on_gpu("h200/gpu_presets_fp8.json");
    let rows = doc["fp8presets"].as_array().expect("fp8 runs");
    let link = |sc: &serde_json::Value, fp8: &str| {
        format!("{}&fp8={fp8}", measured_link(sc, "h200-sxm-141gb"))
    };
    let step = |link: &str| {
        let scen = decode(link).expect("decodes");
        let a = analyze(&scen).expect("analyzes");
        (a.time.step_seconds, a.estimate.bytes.peak_allocated)
    };
    let mut checked = 0;
    for row in rows.iter().filter(|r| r["scenario"][9] != "off") {
        let sc = &row["scenario"];
        let base = rows
            .iter()
            .find(|r| {
                r["scenario"][9] == "off"
                    && r["scenario"].as_array().expect("a run's fields")[..9]
                        == sc.as_array().expect("a run's fields")[..9]
            })
            .expect("the bf16 run beside it");
        let measured = row["median_step_seconds"].as_f64().expect("a step time")
            / base["median_step_seconds"].as_f64().expect("a step time");
        let recipe = sc[9].as_str().expect("a recipe");
        let (off, off_peak) = step(&link(sc, "off"));
        let (eager, eager_peak) = step(&link(sc, recipe));
        let (compiled, compiled_peak) = step(&format!("{}&compile=1", link(sc, recipe)));
        let core = eager / off;
        assert!(
            (core / measured - 1.0).abs() < 0.08,
            "{sc}: eager fp8 / bf16 step: core {core:.3}, H200 {measured:.3}"
        );
        assert!(
            compiled < off,
            "{sc}: compiled fp8 {compiled:.3} s, bf16 {off:.3} s"
        );
        // Eager, fp8 keeps what bf16 saves. Compiled, the bf16 layer is the partitioner's
        // (`headroom_core::compiled`) and the fp8 one keeps the eager inventory (not modelled
        // compiled): never below it.
        assert_eq!(eager_peak, off_peak, "{sc}");
        let (_, compiled_off_peak) = step(&format!("{}&compile=1", link(sc, "off")));
        assert!(compiled_peak >= compiled_off_peak, "{sc}");
        checked += 1;
    }
    assert_eq!(checked, 6);
}

/// Compiled (torch.compile's default mode) on the same H200 (tests/reference/gpu/h200/
/// gpu_compiled.json): Llama 3.1 8B's shapes cut to 8 layers, 2 x 4,096 tokens, no
/// checkpointing. bf16 took 0.2641 s a step and torchao's tensorwise fp8 0.2232 s (0.845 of
/// it); the core's ratio (0.880) is within 5% of that and each step within 10% (0.2482 s and
/// 0.2185 s); these runs chose `time::COMPILED_SHARE_OF_EAGER`. Memory: compiled bf16 peaked
/// at 33.56 GB allocated; the core's compiled layers and loss (`headroom_core::compiled`) say
/// 34.67 GB, 3.3% over (an eager count would say 42.90 GB).
#[test]
fn compiled_fp8_runs_as_fast_as_the_h200_measured() {
    let doc = measured_on_gpu("h200/gpu_compiled.json");
    let measured = |i: usize| {
        let row = &doc["compiled"][i];
        let sc = row["scenario"].as_array().expect("a scenario");
        assert_eq!(sc[10], true, "compiled");
        (
            row["median_step_seconds"].as_f64().expect("a step time"),
            row["peak_allocated"].as_u64().expect("a peak"),
        )
    };
    let ((bf16, bf16_peak), (fp8, _)) = (measured(0), measured(1));
    let mut config: serde_json::Value =
        serde_json::from_str(include_str!("../../../content/models/llama-3.1-8b.json"))
            .expect("JSON");
    config["num_hidden_layers"] = 8.into();
    let spec = headroom_core::model::parse_config_json(&config.to_string()).expect("parses");
    let run = |fp8: Fp8Recipe| {
        let mut scen =
            decode("gpu=h200-sxm-141gb&precision=bf16&ckpt=none&batch=2&seq=4096&compile=1")
                .expect("decodes");
        scen.model = headroom_core::scenario::ModelChoice::Custom(Box::new(spec.clone()));
        scen.fp8 = fp8;
        let a = analyze(&scen).expect("analyzes");
        (a.time.step_seconds, a.estimate.bytes.peak_allocated)
    };
    let ((core_bf16, core_peak), (core_fp8, _)) = (run(Fp8Recipe::Off), run(Fp8Recipe::Tensorwise));
    let (ratio, core_ratio) = (fp8 / bf16, core_fp8 / core_bf16);
    assert!(
        (core_ratio / ratio - 1.0).abs() < 0.05,
        "fp8/bf16: core {core_ratio:.3}, H200 {ratio:.3}"
    );
    for (core, gpu) in [(core_bf16, bf16), (core_fp8, fp8)] {
        assert!(
            (core / gpu - 1.0).abs() < 0.1,
            "step: core {core:.4} s, H200 {gpu:.4} s"
        );
    }
    // The compiled count is above what the compiled run allocated, by under 5%.
    assert!(core_peak > bf16_peak && (core_peak as f64) < 1.05 * bf16_peak as f64);
}
