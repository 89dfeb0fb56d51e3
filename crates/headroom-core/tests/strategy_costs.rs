//! The strategy table's speed costs, checked against the time model's own terms: each expected
//! change is derived from `time::step_time`'s terms for the scenario as it is, never a quoted
//! number.

use headroom_core::codec::named_scenarios;
use headroom_core::estimate::resolve_model;
use headroom_core::model::ModelSpec;
use headroom_core::scenario::{
    Attention, Checkpointing, DataParallel, Method, Optimizer, Scenario,
};
use headroom_core::strategies::{Strategy, strategies};
use headroom_core::time::{StepTime, TermKind, recomputed_layers, step_time, token_flops};
use headroom_core::{Calibration, Gpu, GpuCatalog};

fn setup(scen: &Scenario) -> (ModelSpec, Gpu, Calibration) {
    let (_, spec) = resolve_model(scen).expect("model");
    let gpu = GpuCatalog::builtin().get(&scen.gpu).expect("gpu").clone();
    let cal = Calibration::for_gpu(&gpu);
    (spec, gpu, cal)
}

fn rows(scen: &Scenario) -> (Vec<Strategy>, StepTime, ModelSpec, Gpu) {
    let (spec, gpu, cal) = setup(scen);
    let now = step_time(&spec, &gpu, &cal, scen);
    (strategies(&spec, &gpu, &cal, scen), now, spec, gpu)
}

fn row<'a>(rows: &'a [Strategy], id: &str) -> &'a Strategy {
    rows.iter()
        .find(|r| r.id == id)
        .unwrap_or_else(|| panic!("no row {id}: {:?}", ids(rows)))
}

fn ids(rows: &[Strategy]) -> Vec<&str> {
    rows.iter().map(|r| r.id.as_str()).collect()
}

fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * a.abs().max(b.abs()).max(1e-12)
}

fn exposed(t: &StepTime, id: &str) -> f64 {
    t.term(id).map_or(0.0, |x| x.exposed_seconds)
}

#[test]
fn full_checkpointing_costs_one_extra_forward_of_the_layers() {
    // One GPU, fused attention: recompute is the only term checkpointing changes.
    let scen = Scenario::default();
    let (rows, now, spec, gpu) = rows(&scen);
    let r = row(&rows, "ckpt_full");

    // The extra forward from the token FLOPs: every layer's matmuls and attention, forward,
    // over the step's tokens (not the lm_head, which is outside the checkpointed layers).
    let tf = token_flops(&spec, &gpu, &scen);
    let tokens = (scen.micro_batch * scen.seq * scen.grad_accum) as f64;
    let matmul_flops = tf.layer_matmul_forward * tokens;
    let attention_flops = tf.attention_forward * tokens;
    // The matmuls at the forward's rate (same GEMM shapes, same efficiency), the attention
    // forward at the fused kernel's own rate (its term's).
    // The layers' elementwise kernels run their forward again too (the term's growth).
    let ck = Scenario {
        checkpointing: Checkpointing::Full,
        ..scen.clone()
    };
    let after = step_time(&spec, &gpu, &Calibration::for_gpu(&gpu), &ck);
    let elementwise = |t: &StepTime| t.term("elementwise").expect("elementwise").seconds;
    let fwd = now.term("forward").expect("forward");
    let attention = now.term("attention").expect("fused attention");
    let extra_seconds = matmul_flops * fwd.seconds / fwd.flops
        + attention_flops * attention.seconds / attention.flops
        + elementwise(&after)
        - elementwise(&now);
    assert!(elementwise(&after) > elementwise(&now));
    let expected = now.step_seconds / (now.step_seconds + extra_seconds) - 1.0;
    assert!(
        close(r.speed_change, expected, 1e-9),
        "full checkpointing: {} vs one extra layer forward {expected}",
        r.speed_change
    );
    // The same from the changed scenario's recompute term.
    let recompute = after.term("recompute").expect("recompute term");
    assert!(close(recompute.flops, matmul_flops, 1e-9));
    let attention_after = after.term("attention").expect("fused attention");
    assert!(close(
        attention_after.flops - attention.flops,
        attention_flops,
        1e-9
    ));
    assert_eq!(
        recomputed_layers(Checkpointing::Full, spec.layers),
        spec.layers
    );
    // About a third of forward + backward of the layers: a real cost, well under a half.
    assert!(
        r.speed_change < -0.05 && r.speed_change > -0.34,
        "{}",
        r.speed_change
    );
    assert_eq!(r.tokens_per_step, now.tokens_per_step);
    assert!(!r.changes_training);
}

#[test]
fn eight_bit_adamw_costs_no_compute() {
    let scen = Scenario::default();
    let (rows, now, spec, gpu) = rows(&scen);
    let r = row(&rows, "adamw8bit");
    let s8 = Scenario {
        optimizer: Optimizer::AdamW8bit,
        ..scen.clone()
    };
    let after = step_time(&spec, &gpu, &Calibration::for_gpu(&gpu), &s8);
    // The matrix multiplies are untouched.
    let compute = |t: &StepTime| -> f64 {
        t.terms
            .iter()
            .filter(|x| x.kind == TermKind::Compute)
            .map(|x| x.exposed_seconds)
            .sum()
    };
    assert_eq!(after.hardware_flops_per_gpu, now.hardware_flops_per_gpu);
    assert!(close(compute(&after), compute(&now), 1e-12));
    // What changes is the optimizer step's memory traffic only (smaller states): never slower.
    let delta_opt = exposed(&after, "optimizer") - exposed(&now, "optimizer");
    assert!(delta_opt <= 0.0);
    let expected = now.step_seconds / (now.step_seconds + delta_opt) - 1.0;
    assert!(
        close(r.speed_change, expected, 1e-9),
        "{} vs {expected}",
        r.speed_change
    );
    assert!(r.speed_change >= 0.0);
    assert!(r.changes_training, "8-bit states change the update");
}

#[test]
fn activation_offload_costs_its_transfer_term() {
    let scen = Scenario::default();
    let (rows, now, spec, gpu) = rows(&scen);
    let r = row(&rows, "offload_activations");
    let after = step_time(
        &spec,
        &gpu,
        &Calibration::for_gpu(&gpu),
        &Scenario {
            offload_activations: true,
            ..scen.clone()
        },
    );
    let transfer = after.term("offload_activations").expect("transfer term");
    assert_eq!(transfer.kind, TermKind::Transfer);
    assert!(transfer.exposed_seconds > 0.0);
    let expected = now.step_seconds / (now.step_seconds + transfer.exposed_seconds) - 1.0;
    assert!(
        close(r.speed_change, expected, 1e-9),
        "{} vs {expected}",
        r.speed_change
    );
    assert!(close(
        r.step_seconds,
        now.step_seconds + transfer.exposed_seconds,
        1e-9
    ));
}

#[test]
fn smaller_micro_batch_keeps_the_tokens_of_a_step() {
    for (batch, accum, want_batch, want_accum) in [(4, 1, 2, 2), (8, 3, 4, 6), (3, 2, 1, 6)] {
        let scen = Scenario {
            micro_batch: batch,
            grad_accum: accum,
            ..Scenario::default()
        };
        let (rows, now, ..) = rows(&scen);
        let r = row(&rows, "halve_micro_batch");
        assert_eq!(r.tokens_per_step, now.tokens_per_step, "{batch}x{accum}");
        assert!(
            r.change.contains(&format!(
                "micro-batch {batch} -> {want_batch}, accumulation {accum} -> {want_accum}"
            )),
            "{}",
            r.change
        );
        assert!(!r.changes_training);
        // Smaller GEMMs never run faster in the model: the speed can only drop or stay.
        assert!(r.speed_change <= 1e-12, "{}", r.speed_change);
    }
    // Shorter sequences do change the tokens of a step, and say so.
    let (rows, now, ..) = rows(&Scenario::default());
    let r = row(&rows, "halve_seq");
    assert_eq!(r.tokens_per_step * 2, now.tokens_per_step);
    assert!(r.changes_training);
}

#[test]
fn more_gpus_keep_the_global_batch_when_accumulation_allows() {
    let scen = Scenario {
        gpus: 4,
        grad_accum: 4,
        parallel: headroom_core::scenario::Parallel {
            data: DataParallel::Zero2,
            ..Scenario::default().parallel
        },
        ..Scenario::default()
    };
    let (rows, now, ..) = rows(&scen);
    let r = row(&rows, "more_gpus");
    assert_eq!(r.tokens_per_step, now.tokens_per_step);
    assert!(!r.changes_training);
    assert!(close(
        r.tokens_per_second_per_gpu * 8.0,
        r.tokens_per_second,
        1e-9
    ));
}

#[test]
fn flash_attention_and_qlora_rows_appear_where_they_apply() {
    let eager = Scenario {
        attention: Attention::Eager,
        method: Method::Lora,
        ..Scenario::default()
    };
    let (rows, ..) = rows(&eager);
    let sdpa = row(&rows, "sdpa");
    // Fused attention skips the masked half and the s x s softmax traffic: faster.
    assert!(sdpa.speed_change > 0.0, "{}", sdpa.speed_change);
    assert!(row(&rows, "qlora").change.starts_with("LoRA -> QLoRA"));
    assert!(rows.iter().all(|r| r.id != "lora"));
}

#[test]
fn rows_are_ordered_by_saving_then_speed_and_recommend_at_most_one() {
    let mut scens: Vec<Scenario> = named_scenarios().into_iter().map(|n| n.scenario).collect();
    scens.push(Scenario::default());
    for scen in scens {
        let (rows, ..) = rows(&scen);
        for w in rows.windows(2) {
            assert!(
                w[0].saved > w[1].saved
                    || (w[0].saved == w[1].saved && w[0].speed_change >= w[1].speed_change),
                "{:?}",
                ids(&rows)
            );
        }
        let rec: Vec<&Strategy> = rows.iter().filter(|r| r.recommended).collect();
        assert!(rec.len() <= 1);
        if let Some(r) = rec.first() {
            assert!(r.fits && !r.changes_training);
            for o in rows.iter().filter(|o| o.fits && !o.changes_training) {
                assert!(o.tokens_per_second_per_gpu <= r.tokens_per_second_per_gpu);
            }
        }
    }
}

#[test]
fn every_speed_field_is_finite() {
    let mut scens: Vec<Scenario> = named_scenarios().into_iter().map(|n| n.scenario).collect();
    let base = Scenario::default();
    for (batch, seq, accum, gpus) in [(1, 1, 1, 1), (1, 4096, 1, 65_536), (64, 32_768, 7, 3)] {
        scens.push(Scenario {
            micro_batch: batch,
            seq,
            grad_accum: accum,
            gpus,
            ..base.clone()
        });
    }
    for scen in scens {
        let (rows, ..) = rows(&scen);
        assert!(!rows.is_empty());
        for r in &rows {
            for (what, v) in [
                ("step_seconds", r.step_seconds),
                ("tokens_per_second", r.tokens_per_second),
                ("tokens_per_second_per_gpu", r.tokens_per_second_per_gpu),
                ("speed_change", r.speed_change),
            ] {
                assert!(v.is_finite(), "{} {what} = {v}", r.id);
            }
            assert!(r.step_seconds > 0.0 && r.tokens_per_second > 0.0);
            assert!(r.speed_change > -1.0);
            assert!(r.tokens_per_step > 0);
        }
    }
}

/// "Changes the training" is one rule (`plan::changes_training`) for the table and the planner.
/// From 8-bit AdamW: paging the same 8-bit states changes nothing trained; fused AdamW keeps
/// fp32 states, so it does. From paged 8-bit AdamW, unpaged 8-bit AdamW changes nothing.
#[test]
fn changing_the_training_is_one_rule_for_the_table_and_the_planner() {
    let from_8bit = Scenario {
        optimizer: Optimizer::AdamW8bit,
        ..Scenario::default()
    };
    let (table, ..) = rows(&from_8bit);
    assert!(!row(&table, "paged_adamw8bit").changes_training);
    assert!(row(&table, "adamw_fused").changes_training);
    let from_paged = Scenario {
        optimizer: Optimizer::PagedAdamW8bit,
        ..Scenario::default()
    };
    let (table, ..) = rows(&from_paged);
    assert!(!row(&table, "adamw8bit").changes_training);
    // The planner answers the same for the same pairs of scenarios.
    let with = |o: Optimizer| Scenario {
        optimizer: o,
        ..Scenario::default()
    };
    use headroom_core::plan::changes_training;
    assert!(!changes_training(
        &with(Optimizer::AdamW8bit),
        &with(Optimizer::PagedAdamW8bit)
    ));
    assert!(changes_training(
        &with(Optimizer::AdamW8bit),
        &with(Optimizer::AdamWFused)
    ));
    assert!(!changes_training(
        &with(Optimizer::PagedAdamW8bit),
        &with(Optimizer::AdamW8bit)
    ));
}
