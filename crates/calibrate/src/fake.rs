//! Fake backends with H100-like figures: the device and the trainer the tests (and `--fake`)
//! drive the whole pipeline with. The trainer's "measurements" are the core's own predictions
//! with known constants, so a fit must find those constants again.

use headroom_core::{Calibration, Gpu};

use crate::device::{CopyKind, CublasCost, Device, DeviceError, DeviceInfo, MatmulDtype};
use crate::fit::{Levels, Sample, WorkspaceProbe, predict};
use crate::grid::ProbeScenario;
use crate::probe::{Phase, ProbeError, ProbeOutput, Row, Stack, Status, Trainer};

const MIB: u64 = 1 << 20;

/// A deterministic pseudo-random jitter in `[-amp, amp]` (a small LCG: no randomness crate).
#[derive(Debug, Clone)]
struct Jitter(u64);

impl Jitter {
    fn next(&mut self, amp: f64) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let unit = (self.0 >> 11) as f64 / (1u64 << 53) as f64;
        (unit * 2.0 - 1.0) * amp
    }
}

/// An H100 SXM 80 GB that answers instantly.
#[derive(Debug, Clone)]
pub struct FakeDevice {
    jitter: Jitter,
}

impl Default for FakeDevice {
    fn default() -> Self {
        FakeDevice { jitter: Jitter(42) }
    }
}

impl Device for FakeDevice {
    fn info(&mut self) -> Result<DeviceInfo, DeviceError> {
        Ok(DeviceInfo {
            name: "NVIDIA H100 80GB HBM3".into(),
            compute_capability: "9.0".into(),
            driver_version: Some("580.95.05".into()),
            driver_cuda_version: "13.0".into(),
            cublas_version: Some("13.0.2".into()),
            nvrtc_version: Some("13.0".into()),
            total_bytes: 85_520_809_984,
            free_bytes: 84_987_740_160,
            multiprocessors: 132,
        })
    }

    fn context_bytes(&mut self) -> Result<u64, DeviceError> {
        Ok(((518 + 2 * (self.jitter.next(1.0).round() as i64)) as u64) * MIB)
    }

    fn granularity(&mut self) -> Result<(u64, u64), DeviceError> {
        Ok((2 * MIB, 2 * MIB))
    }

    fn cublas_cost(&mut self) -> Result<CublasCost, DeviceError> {
        Ok(CublasCost {
            handle_bytes: 4 * MIB,
            first_gemm_bytes: 34 * MIB,
        })
    }

    fn matmul_seconds(&mut self, dtype: MatmulDtype, n: u64) -> Result<Option<f64>, DeviceError> {
        let peak = match dtype {
            MatmulDtype::Bf16 | MatmulDtype::Fp16 => 989.0,
            MatmulDtype::Tf32 => 494.0,
            MatmulDtype::Fp32 => 67.0,
            MatmulDtype::Fp8 => return Ok(None),
        };
        let x = n as f64;
        // Small problems cannot fill 132 SMs: efficiency rises with n towards about 75 %.
        let tflops = peak * 0.75 * x / (x + 1536.0) * (1.0 + self.jitter.next(0.02));
        Ok(Some(2.0 * x * x * x / (tflops * 1e12)))
    }

    fn copy_seconds(&mut self, kind: CopyKind, bytes: u64) -> Result<f64, DeviceError> {
        let gbs = match kind {
            CopyKind::DeviceToDevice => 2_900.0,
            CopyKind::HostToDevicePinned => 53.0,
            CopyKind::HostToDevicePageable => 19.0,
            CopyKind::DeviceToHostPinned => 51.0,
            CopyKind::DeviceToHostPageable => 14.0,
        } * (1.0 + self.jitter.next(0.03));
        Ok(bytes as f64 * kind.traffic_factor() / (gbs * 1e9))
    }

    fn backend(&self) -> &'static str {
        "fake"
    }
}

/// A fake device whose fp16 GEMMs and pageable device-to-host copies fail (a library refusing
/// them): the run must record that and go on.
#[derive(Debug, Clone, Default)]
pub struct FlakyDevice(pub FakeDevice);

impl Device for FlakyDevice {
    fn info(&mut self) -> Result<DeviceInfo, DeviceError> {
        self.0.info()
    }
    fn context_bytes(&mut self) -> Result<u64, DeviceError> {
        self.0.context_bytes()
    }
    fn granularity(&mut self) -> Result<(u64, u64), DeviceError> {
        self.0.granularity()
    }
    fn cublas_cost(&mut self) -> Result<CublasCost, DeviceError> {
        self.0.cublas_cost()
    }
    fn matmul_seconds(&mut self, dtype: MatmulDtype, n: u64) -> Result<Option<f64>, DeviceError> {
        if dtype == MatmulDtype::Fp16 && n >= 1024 {
            return Err(DeviceError::call(
                "cublasGemmEx",
                "CUBLAS_STATUS_EXECUTION_FAILED",
            ));
        }
        self.0.matmul_seconds(dtype, n)
    }
    fn copy_seconds(&mut self, kind: CopyKind, bytes: u64) -> Result<f64, DeviceError> {
        if kind == CopyKind::DeviceToHostPageable {
            return Err(DeviceError::call(
                "cuMemcpyDtoH (pageable)",
                "CUDA_ERROR_UNKNOWN",
            ));
        }
        self.0.copy_seconds(kind, bytes)
    }
    fn backend(&self) -> &'static str {
        "fake"
    }
}

/// A device that is not there: what the binary sees on a machine without a driver.
#[derive(Debug, Clone, Default)]
pub struct NoDevice;

impl NoDevice {
    pub fn error() -> DeviceError {
        DeviceError::NoDevice(
            "no NVIDIA GPU driver found (libcuda could not be loaded), so there is nothing to calibrate on this machine".into(),
        )
    }
}

/// A trainer whose measurements are the core's predictions with `truth`.
#[derive(Debug, Clone)]
pub struct FakeTrainer {
    pub gpu: Gpu,
    pub truth: Calibration,
    /// Whether `peft` is "installed" (LoRA scenarios are skipped without it).
    pub peft: bool,
    /// Relative measurement noise added to every peak (deterministic), e.g. 0.005.
    pub noise: f64,
}

impl FakeTrainer {
    /// Known constants, different from every default, for an H100 SXM.
    pub fn h100(gpu: &Gpu) -> Self {
        let mut truth = Calibration::assumed(gpu);
        truth.cuda_context_bytes = 611 * MIB;
        truth.cublas_workspace_bytes = 32 * MIB;
        truth.cublas_workspaces = 2;
        truth.reserved_slack_fraction = 0.137;
        truth.reserved_slack_fraction_expandable = 0.021;
        FakeTrainer {
            gpu: gpu.clone(),
            truth,
            peft: true,
            noise: 0.0,
        }
    }
}

impl Trainer for FakeTrainer {
    fn stack(&mut self) -> Result<Stack, ProbeError> {
        Ok(Stack {
            python: Some("3.12.3".into()),
            torch: Some("2.11.0+cu130".into()),
            torch_cuda: Some("13.0".into()),
            cudnn: Some(91_300),
            transformers: Some("5.23.0".into()),
            peft: self.peft.then(|| "0.18.0".into()),
            nvml: Some("pynvml".into()),
            driver: Some("580.95.05".into()),
            device_name: Some("NVIDIA H100 80GB HBM3".into()),
        })
    }

    fn run(
        &mut self,
        scenarios: &[ProbeScenario],
        stack: &Stack,
        tick: &mut dyn FnMut(&str),
    ) -> Result<ProbeOutput, ProbeError> {
        let mut rows = Vec::new();
        for p in scenarios {
            tick(&p.id);
            if p.lora.is_some() && stack.peft.is_none() {
                rows.push(Row::skipped(&p.id, "peft is not installed"));
                continue;
            }
            let (spec, scenario) = p
                .to_core(&self.gpu.id)
                .map_err(|e| ProbeError::Failed(e.to_string()))?;
            let sample = Sample {
                id: p.id.clone(),
                spec,
                scenario,
                measured: Levels {
                    allocated: 0,
                    reserved: 0,
                    device: 0,
                },
            };
            let mut m = predict(&sample, &self.gpu, &self.truth);
            if self.noise > 0.0 {
                let mut j = Jitter(
                    p.id.bytes()
                        .fold(7u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b))),
                );
                let scale = |x: u64, j: &mut Jitter| (x as f64 * (1.0 + j.next(self.noise))) as u64;
                m.allocated = scale(m.allocated, &mut j).div_ceil(512) * 512;
                m.reserved =
                    (scale(m.reserved, &mut j).div_ceil(2 * MIB) * 2 * MIB).max(m.allocated);
                m.device = scale(m.device, &mut j).max(m.reserved);
            }
            let e = headroom_core::estimate_with(
                &sample.spec,
                &self.gpu,
                &self.truth,
                &sample.scenario,
            );
            if m.device > self.gpu.total_bytes {
                rows.push(Row {
                    status: Status::Oom,
                    error: Some("OutOfMemoryError: CUDA out of memory (fake)".into()),
                    ..Row::skipped(&p.id, "")
                });
                continue;
            }
            let mut phases = Vec::new();
            for step in 1..=2 {
                for (name, phs) in [
                    (
                        "forward+loss",
                        &[headroom_core::Phase::Forward, headroom_core::Phase::Loss][..],
                    ),
                    ("backward", &[headroom_core::Phase::Backward][..]),
                    ("optimizer", &[headroom_core::Phase::Optimizer][..]),
                ] {
                    let pts: Vec<_> = e
                        .timeline
                        .iter()
                        .filter(|t| phs.contains(&t.phase))
                        .collect();
                    let top = |f: fn(&headroom_core::estimate::TimelinePoint) -> u64| {
                        pts.iter().map(|t| f(t)).max().unwrap_or(0)
                    };
                    let last = pts.last();
                    phases.push(Phase {
                        step,
                        phase: name.into(),
                        allocated: last.map_or(0, |t| t.allocated),
                        reserved: top(|t| t.reserved),
                        max_allocated: top(|t| t.allocated),
                        max_reserved: top(|t| t.reserved),
                        device: top(|t| t.device),
                    });
                }
            }
            rows.push(Row {
                status: Status::Ok,
                error: None,
                allocated: m.allocated,
                reserved: m.reserved,
                device: m.device,
                device_method: Some("nvml process used memory".into()),
                allocated_before: self.truth.cublas_workspace_bytes * self.truth.cublas_workspaces,
                alloc_retries: 0,
                seconds: 1.0,
                phases,
                ..Row::skipped(&p.id, "")
            });
        }
        Ok(ProbeOutput {
            workspace: Some(WorkspaceProbe {
                bytes: self.truth.cublas_workspace_bytes,
                count: self.truth.cublas_workspaces,
            }),
            workspace_method: Some("fake: the known constants".into()),
            rows,
        })
    }
}
