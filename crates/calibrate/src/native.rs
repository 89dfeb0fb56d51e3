//! Native measurements through the [`Device`] trait: context, granularity, cuBLAS cost, matmul
//! throughput over sizes (the efficiency curve) and copy bandwidths, each repeated and summarized.

pub use headroom_core::calibration::schema::{Bandwidth, MatmulPoint, NativeReport, Unsupported};

use crate::device::{CopyKind, CublasCost, Device, DeviceError, DeviceInfo, MatmulDtype};
use crate::stats::Measured;

/// How much to measure.
#[derive(Debug, Clone, PartialEq)]
pub struct NativePlan {
    pub reps: u32,
    pub matmul_sizes: Vec<u64>,
    pub copy_bytes: u64,
}

impl NativePlan {
    pub fn new(quick: bool) -> Self {
        if quick {
            NativePlan {
                reps: 3,
                matmul_sizes: vec![256, 1024, 4096],
                copy_bytes: 256 << 20,
            }
        } else {
            NativePlan {
                reps: 7,
                matmul_sizes: vec![256, 512, 1024, 2048, 4096, 8192, 16384],
                copy_bytes: 1 << 30,
            }
        }
    }

    /// Steps reported to the progress bar.
    pub fn steps(&self) -> u64 {
        4 + (MatmulDtype::ALL.len() * self.matmul_sizes.len()) as u64 + CopyKind::ALL.len() as u64
    }
}

fn summarize(unit: &str, method: &str, samples: &[f64]) -> Result<Measured, DeviceError> {
    Measured::from_samples(unit, method, samples)
        .ok_or_else(|| DeviceError::call(method, "no finite samples"))
}

/// Runs `plan` on `dev`; `tick` is called once per step (for the progress bar) with its label.
pub fn measure(
    dev: &mut dyn Device,
    info: &DeviceInfo,
    plan: &NativePlan,
    peak_tflops: &dyn Fn(MatmulDtype) -> Option<f64>,
    tick: &mut dyn FnMut(&str),
) -> Result<NativeReport, DeviceError> {
    let reps = plan.reps.max(1);
    tick("CUDA context size");
    let mut ctx = Vec::new();
    for _ in 0..reps {
        ctx.push(dev.context_bytes()? as f64);
    }
    let context_bytes = summarize(
        "bytes",
        "cuMemGetInfo free bytes before minus after creating one more context (cuCtxCreate) on the device",
        &ctx,
    )?;

    tick("allocation granularity");
    let (gmin, grec) = dev.granularity()?;

    tick("cuBLAS handle and workspace");
    let mut costs: Vec<CublasCost> = Vec::new();
    for _ in 0..reps {
        costs.push(dev.cublas_cost()?);
    }
    let cublas_handle_bytes = summarize(
        "bytes",
        "cuMemGetInfo free bytes before minus after cublasCreate (one new handle each repetition)",
        &costs
            .iter()
            .map(|c| c.handle_bytes as f64)
            .collect::<Vec<_>>(),
    )?;
    let cublas_first_gemm_bytes = summarize(
        "bytes",
        "cuMemGetInfo free bytes before minus after the new handle's first 1024^3 bf16 GEMM (workspace and kernels)",
        &costs
            .iter()
            .map(|c| c.first_gemm_bytes as f64)
            .collect::<Vec<_>>(),
    )?;

    let mut matmul = Vec::new();
    let mut matmul_unsupported = Vec::new();
    for dtype in MatmulDtype::ALL {
        let mut reason = None;
        for &n in &plan.matmul_sizes {
            tick(&format!("matmul {} n={n}", dtype.id()));
            if reason.is_some() {
                continue;
            }
            let flops = 2.0 * (n as f64).powi(3);
            let mut samples = Vec::new();
            for _ in 0..reps {
                // One format failing (a library refusing it) must not cost the rest of the run.
                match dev.matmul_seconds(dtype, n) {
                    Ok(Some(s)) if s > 0.0 => samples.push(flops / s / 1e12),
                    Ok(_) => {
                        reason = Some(unsupported_reason(dtype, info));
                        break;
                    }
                    Err(e) => {
                        reason = Some(format!("failed at n={n}: {e}"));
                        break;
                    }
                }
            }
            if reason.is_some() {
                continue;
            }
            let tflops = summarize(
                "tflops",
                "cuBLAS GEMM on random data, timed with CUDA events over a batch of calls after a warm-up; 2 n^3 flops per call",
                &samples,
            )?;
            let efficiency = peak_tflops(dtype).map(|p| tflops.median / p);
            matmul.push(MatmulPoint {
                dtype: dtype.id().to_string(),
                n,
                tflops,
                efficiency,
            });
        }
        if let Some(reason) = reason {
            matmul_unsupported.push(Unsupported {
                dtype: dtype.id().to_string(),
                reason,
            });
        }
    }

    let mut bandwidth = Vec::new();
    let mut bandwidth_failed = Vec::new();
    for kind in CopyKind::ALL {
        tick(&format!("bandwidth {}", kind.id()));
        let mut samples = Vec::new();
        let mut failure = None;
        for _ in 0..reps {
            match dev.copy_seconds(kind, plan.copy_bytes) {
                Ok(s) => samples.push(plan.copy_bytes as f64 * kind.traffic_factor() / s / 1e9),
                Err(e) => {
                    failure = Some(e.to_string());
                    break;
                }
            }
        }
        if let Some(reason) = failure {
            bandwidth_failed.push(Unsupported {
                dtype: kind.id().to_string(),
                reason,
            });
            continue;
        }
        bandwidth.push(Bandwidth {
            kind: kind.id().to_string(),
            bytes: plan.copy_bytes,
            gb_per_s: summarize(
                "gb_per_s",
                "cuMemcpy of one buffer timed with CUDA events after a warm-up; device-to-device counts read plus write",
                &samples,
            )?,
        });
    }

    Ok(NativeReport {
        backend: dev.backend().to_string(),
        context_bytes,
        granularity_minimum_bytes: gmin,
        granularity_recommended_bytes: grec,
        cublas_handle_bytes,
        cublas_first_gemm_bytes,
        matmul,
        matmul_unsupported,
        bandwidth,
        bandwidth_failed,
    })
}

fn unsupported_reason(dtype: MatmulDtype, info: &DeviceInfo) -> String {
    match dtype {
        MatmulDtype::Fp8 => format!(
            "fp8 GEMMs need cuBLASLt, which this build does not load; compute capability {}",
            info.compute_capability
        ),
        _ => format!(
            "cuBLAS rejected {} on compute capability {}",
            dtype.id(),
            info.compute_capability
        ),
    }
}
