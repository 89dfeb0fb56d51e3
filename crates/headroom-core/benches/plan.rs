//! Criterion benchmarks of the planner natively: the default search space on the default
//! scenario (Llama 3.1 8B, one H100) and on the largest worked example of the space (Llama 2
//! 70B on 8 GPUs: tensor parallelism 1-8, every sharding), ladder included; and the heaviest
//! accepted links (`bounds::HEAVIEST_LINKS`), training changes allowed.

use criterion::{Criterion, criterion_group, criterion_main};
use headroom_core::Scenario;
use headroom_core::bounds::HEAVIEST_LINKS;
use headroom_core::codec::{decode, named_scenarios};
use headroom_core::plan::{PlanOptions, plan};
use std::hint::black_box;

fn benches(c: &mut Criterion) {
    let opts = PlanOptions::default();
    let scen = Scenario::default();
    c.bench_function("plan: default scenario, default space", |b| {
        b.iter(|| plan(black_box(&scen), &opts))
    });
    if let Some(n) = named_scenarios()
        .into_iter()
        .find(|n| n.id == "ex2-70b-zero3-8x80gb")
    {
        c.bench_function("plan: ex2-70b-zero3-8x80gb (8 GPUs), default space", |b| {
            b.iter(|| plan(black_box(&n.scenario), &opts))
        });
    }
    let all = PlanOptions {
        allow_training_changes: true,
        ..PlanOptions::default()
    };
    for (i, link) in HEAVIEST_LINKS.iter().enumerate() {
        let heavy = decode(link).expect("an accepted link");
        c.bench_function(&format!("plan: heaviest accepted link #{i}"), |b| {
            b.iter(|| plan(black_box(&heavy), &all))
        });
    }
}

criterion_group!(plan_benches, benches);
criterion_main!(plan_benches);
