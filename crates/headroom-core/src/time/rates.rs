//! Measured rates (a matmul efficiency curve, host-device copy bandwidths) and the default
//! cuBLAS efficiency curve that stands in for them when nothing was measured.

use serde::Serialize;

use crate::calibration::schema::NativeReport;
use crate::calibration::{Calibration, CalibrationSource, MeasuredRates};
use crate::dtype::DType;

/// Square GEMM size at which the default cuBLAS efficiency curve reaches half its ceiling.
/// Why: cuBLAS needs enough 128x256 tiles to fill every SM in several waves; an H100 has 132
/// SMs, an A100 108, so below n ≈ 1–2k square problems leave SMs idle or run one wave.
pub const DEFAULT_GEMM_HALF_N: f64 = 256.0;
/// Ceiling of the default cuBLAS bf16 efficiency (fraction of dense peak) for large square
/// GEMMs. Why: public cuBLAS benchmarks reach ~750 of 989 TFLOP/s on H100 SXM (0.76) and
/// ~250–270 of 312 on A100 (0.80–0.87) at n = 8192; 0.80 sits between them.
pub const DEFAULT_GEMM_CEILING: f64 = 0.80;

/// The rates one step is timed with, for one compute dtype: measured ones from a calibration
/// ([`Rates::for_calibration`]), or none ([`Rates::assumed`]: the default curve and the
/// catalog's host link).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Rates {
    /// (square size n, fraction of the catalog's dense peak) sorted by n; empty: default curve.
    pub gemm_curve: Vec<(u64, f64)>,
    /// Pinned host-to-device bandwidth, GB/s.
    pub host_to_device_gbs: Option<f64>,
    /// Pinned device-to-host bandwidth, GB/s.
    pub device_to_host_gbs: Option<f64>,
    /// Where the rates come from, for formulas shown to people.
    pub source: String,
}

impl Rates {
    /// No measurement: the default curve and the catalog's host link.
    pub fn assumed() -> Self {
        Rates {
            gemm_curve: Vec::new(),
            host_to_device_gbs: None,
            device_to_host_gbs: None,
            source: "assumed".into(),
        }
    }

    /// The rates of `cal` for `dtype`: measured where the calibration measured them, the
    /// defaults otherwise (and for the documented defaults, [`Rates::assumed`] exactly).
    pub fn for_calibration(cal: &Calibration, dtype: DType) -> Self {
        match &cal.source {
            CalibrationSource::Assumed => Rates::assumed(),
            CalibrationSource::Measured { file, .. } => {
                Rates::from_measured(&cal.rates, dtype, file)
            }
        }
    }

    /// The matmul curve for `dtype` and the pinned copy bandwidths of a calibration file.
    pub fn from_native(report: &NativeReport, dtype: DType, file: &str) -> Self {
        Rates::from_measured(&MeasuredRates::from_native(report), dtype, file)
    }

    /// The matmul curve for `dtype` and the copy bandwidths of `measured`. `calibrate` names
    /// formats `bf16`, `fp16`, `fp32` (and `tf32`, which PyTorch's fp32 matmuls do not use by
    /// default); torch's names (`bfloat16`) are accepted too.
    pub fn from_measured(measured: &MeasuredRates, dtype: DType, file: &str) -> Self {
        let torch = dtype.torch_name().trim_start_matches("torch.");
        let id = match dtype {
            DType::Bf16 => "bf16",
            DType::F16 => "fp16",
            DType::F32 => "fp32",
            DType::F8 => "fp8",
            _ => torch,
        };
        let mut curve: Vec<(u64, f64)> = measured
            .matmul
            .iter()
            .filter(|p| p.dtype == torch || p.dtype == id)
            .map(|p| (p.n, p.efficiency))
            .collect();
        curve.sort_by_key(|p| p.0);
        Rates {
            gemm_curve: curve,
            host_to_device_gbs: measured.host_to_device_gbs,
            device_to_host_gbs: measured.device_to_host_gbs,
            source: format!("measured ({file})"),
        }
    }

    /// cuBLAS efficiency (fraction of dense peak) of a square GEMM of size `n`, and whether it
    /// was measured. Measured curves interpolate linearly in log n and clamp at their ends.
    pub fn gemm_efficiency(&self, n: f64) -> (f64, bool) {
        let c = &self.gemm_curve;
        if c.is_empty() {
            return (DEFAULT_GEMM_CEILING * n / (n + DEFAULT_GEMM_HALF_N), false);
        }
        let (first, last) = (c[0], c[c.len() - 1]);
        if n <= first.0 as f64 {
            return (first.1, true);
        }
        if n >= last.0 as f64 {
            return (last.1, true);
        }
        for w in c.windows(2) {
            let (a, b) = (w[0], w[1]);
            if n <= b.0 as f64 {
                let ln = libm::log;
                let t = (ln(n) - ln(a.0 as f64)) / (ln(b.0 as f64) - ln(a.0 as f64));
                return (a.1 + t * (b.1 - a.1), true);
            }
        }
        (last.1, true)
    }
}
