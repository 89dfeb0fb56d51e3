//! The device a calibration measures, as a trait: the CUDA backend and the fake one used in tests.

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Why a device could not be opened or measured.
#[derive(Debug, Error)]
pub enum DeviceError {
    /// No NVIDIA driver library on this machine (or the CUDA backend is not compiled in).
    #[error("{0}")]
    NoDevice(String),
    /// A CUDA library other than the driver is missing (cuBLAS, NVRTC).
    #[error("{library} was not found: {hint}")]
    MissingLibrary { library: String, hint: String },
    /// A driver or library call failed.
    #[error("{what}: {message}")]
    Call { what: String, message: String },
}

impl DeviceError {
    pub fn call(what: &str, message: impl ToString) -> Self {
        DeviceError::Call {
            what: what.to_string(),
            message: message.to_string(),
        }
    }
}

/// What the driver says about the device and the software around it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceInfo {
    pub name: String,
    /// `major.minor`, as in the GPU catalog.
    pub compute_capability: String,
    /// The kernel module's version (`/proc/driver/nvidia/version`), when readable.
    pub driver_version: Option<String>,
    /// The newest CUDA version the driver supports (`cuDriverGetVersion`), `major.minor`.
    pub driver_cuda_version: String,
    /// cuBLAS's version, `major.minor.patch`, when the library loads.
    pub cublas_version: Option<String>,
    /// NVRTC's version, `major.minor`, when the library loads.
    pub nvrtc_version: Option<String>,
    pub total_bytes: u64,
    /// Free memory when the measurements started (other processes' use included).
    pub free_bytes: u64,
    pub multiprocessors: u32,
}

/// Matrix-multiply number formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MatmulDtype {
    Bf16,
    Fp16,
    /// fp32 inputs with TF32 tensor cores (`CUBLAS_COMPUTE_32F_FAST_TF32`).
    Tf32,
    /// fp32 inputs and fp32 arithmetic (`CUBLAS_COMPUTE_32F_PEDANTIC`).
    Fp32,
    /// fp8 e4m3 inputs (needs cuBLASLt; reported as unsupported by this build).
    Fp8,
}

impl MatmulDtype {
    pub const ALL: [MatmulDtype; 5] = [
        MatmulDtype::Bf16,
        MatmulDtype::Fp16,
        MatmulDtype::Tf32,
        MatmulDtype::Fp32,
        MatmulDtype::Fp8,
    ];

    pub fn id(self) -> &'static str {
        match self {
            MatmulDtype::Bf16 => "bf16",
            MatmulDtype::Fp16 => "fp16",
            MatmulDtype::Tf32 => "tf32",
            MatmulDtype::Fp32 => "fp32",
            MatmulDtype::Fp8 => "fp8",
        }
    }
}

/// Copies whose bandwidth is measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CopyKind {
    DeviceToDevice,
    HostToDevicePinned,
    HostToDevicePageable,
    DeviceToHostPinned,
    DeviceToHostPageable,
}

impl CopyKind {
    pub const ALL: [CopyKind; 5] = [
        CopyKind::DeviceToDevice,
        CopyKind::HostToDevicePinned,
        CopyKind::HostToDevicePageable,
        CopyKind::DeviceToHostPinned,
        CopyKind::DeviceToHostPageable,
    ];

    pub fn id(self) -> &'static str {
        match self {
            CopyKind::DeviceToDevice => "device_to_device",
            CopyKind::HostToDevicePinned => "host_to_device_pinned",
            CopyKind::HostToDevicePageable => "host_to_device_pageable",
            CopyKind::DeviceToHostPinned => "device_to_host_pinned",
            CopyKind::DeviceToHostPageable => "device_to_host_pageable",
        }
    }

    /// Bytes moved per byte copied: a device-to-device copy reads and writes device memory.
    pub fn traffic_factor(self) -> f64 {
        match self {
            CopyKind::DeviceToDevice => 2.0,
            _ => 1.0,
        }
    }
}

/// Device memory taken by creating a cuBLAS handle and by its first matrix multiply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CublasCost {
    pub handle_bytes: u64,
    pub first_gemm_bytes: u64,
}

/// A GPU to measure. Each method performs one repetition; the caller repeats and summarizes.
pub trait Device {
    /// Names, versions, memory.
    fn info(&mut self) -> Result<DeviceInfo, DeviceError>;
    /// Device memory one more CUDA context takes (free memory before minus after creating it).
    fn context_bytes(&mut self) -> Result<u64, DeviceError>;
    /// `cuMemGetAllocationGranularity` for device memory: (minimum, recommended).
    fn granularity(&mut self) -> Result<(u64, u64), DeviceError>;
    /// Memory taken by a new cuBLAS handle, and by its first GEMM (workspace, kernels).
    fn cublas_cost(&mut self) -> Result<CublasCost, DeviceError>;
    /// Seconds for one `n x n x n` matrix multiply (median-friendly: one timed batch divided by
    /// its count), or `None` when the device or this build cannot run the format.
    fn matmul_seconds(&mut self, dtype: MatmulDtype, n: u64) -> Result<Option<f64>, DeviceError>;
    /// Seconds for one copy of `bytes` bytes.
    fn copy_seconds(&mut self, kind: CopyKind, bytes: u64) -> Result<f64, DeviceError>;
    /// Which backend this is (`cuda`, `fake`), written into the file.
    fn backend(&self) -> &'static str;
}
