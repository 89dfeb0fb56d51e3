//! Criterion benchmarks: one estimate, the largest-micro-batch search, and a whole analysis
//! (estimate, fit, strategy table: what the site recomputes on every input change), natively;
//! and the whole analysis of each of the heaviest accepted links (`bounds::HEAVIEST_LINKS`).

use criterion::{Criterion, criterion_group, criterion_main};
use headroom_core::catalog::{GpuCatalog, PresetCatalog};
use headroom_core::{
    Calibration, Scenario, What, analyze_only, analyze_with, bounds, codec, estimate_with, fit,
};
use std::hint::black_box;

fn benches(c: &mut Criterion) {
    let scen = Scenario::default();
    let preset = PresetCatalog::builtin()
        .get("llama-3.1-8b")
        .expect("preset exists");
    let gpu = GpuCatalog::builtin()
        .get("h100-sxm-80gb")
        .expect("gpu exists");
    let cal = Calibration::for_gpu(gpu);
    c.bench_function("estimate llama-3.1-8b h100 b1 s4096 amp-bf16", |b| {
        b.iter(|| estimate_with(black_box(&preset.spec), gpu, &cal, black_box(&scen)))
    });
    c.bench_function("fit: largest micro-batch and sequence", |b| {
        b.iter(|| fit::fit(black_box(&preset.spec), gpu, &cal, black_box(&scen)))
    });
    c.bench_function("analyze: estimate + fit + strategies", |b| {
        b.iter(|| {
            analyze_with(
                "llama-3.1-8b",
                black_box(&preset.spec),
                gpu,
                &cal,
                black_box(&scen),
                What::ALL,
            )
        })
    });
    for (i, link) in bounds::HEAVIEST_LINKS.iter().enumerate() {
        let heavy = codec::decode(link).expect("an accepted link");
        c.bench_function(&format!("analyze: heaviest accepted link #{i}"), |b| {
            b.iter(|| analyze_only(black_box(&heavy), What::ALL, None))
        });
    }
}

criterion_group!(estimate, benches);
criterion_main!(estimate);
