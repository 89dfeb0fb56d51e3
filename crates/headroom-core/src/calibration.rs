//! Constants only a GPU can tell (CUDA context, workspaces, allocator slack), with documented
//! defaults that are marked as assumed until a calibration file replaces them.

use serde::{Deserialize, Serialize};

use crate::catalog::Gpu;
use crate::error::ContentError;

const MIB: u64 = 1 << 20;

/// Where the runtime constants of an estimate come from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CalibrationSource {
    /// Documented defaults from public reports (see each field).
    Assumed,
    /// A calibration file measured on this GPU by `calibrate`.
    Measured { file: String, measured_on: String },
}

/// Runtime constants for one GPU and software stack.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    pub source: CalibrationSource,
    /// Device memory the CUDA context takes (NVML used minus reserved after a full step).
    /// Default 500 MiB: reports range from 256 MiB (RTX 3090, CUDA 12.8) to 426 MiB
    /// (RTX 6000 Ada, CUDA 13), and the context grows as cuBLAS, NCCL and Triton load modules.
    pub cuda_context_bytes: u64,
    /// One cuBLAS workspace: 32 MiB on sm90, 8 MiB + 128 KiB elsewhere
    /// (PyTorch `CublasHandlePool.cpp`). Allocated through the caching allocator.
    pub cublas_workspace_bytes: u64,
    /// Workspaces alive in a training step: one per (handle, stream); forward runs on the main
    /// thread and backward on autograd's device thread, each with its own handle.
    pub cublas_workspaces: u64,
    /// Reserved minus allocated at the peak, as a fraction of the step's transient bytes,
    /// with the default allocator (segments that cannot be reused for other sizes).
    pub reserved_slack_fraction: f64,
    /// The same with `expandable_segments:True` (segments grow in place, little slack).
    pub reserved_slack_fraction_expandable: f64,
    /// NCCL's communicator buffers per process when more than one GPU trains.
    /// Default 512 MiB ("~0.5 GB per communicator", okoge-kaz memory estimator; unverified).
    pub nccl_bytes: u64,
}

impl Calibration {
    /// The documented defaults for `gpu`.
    pub fn assumed(gpu: &Gpu) -> Self {
        Calibration {
            source: CalibrationSource::Assumed,
            cuda_context_bytes: 500 * MIB,
            cublas_workspace_bytes: if gpu.is_sm90() {
                32 * MIB
            } else {
                4096 * 1024 * 2 + 16 * 1024 * 8
            },
            cublas_workspaces: 2,
            reserved_slack_fraction: 0.08,
            reserved_slack_fraction_expandable: 0.01,
            nccl_bytes: 512 * MIB,
        }
    }

    /// Parses a calibration file written by `calibrate` (only the constants the core uses;
    /// the file holds much more for the site's calibration page).
    pub fn parse(name: &str, text: &str) -> Result<(String, Self), ContentError> {
        #[derive(Deserialize)]
        struct Constants {
            cuda_context_bytes: u64,
            cublas_workspace_bytes: u64,
            cublas_workspaces: u64,
            reserved_slack_fraction: f64,
            reserved_slack_fraction_expandable: f64,
            nccl_bytes: u64,
        }
        #[derive(Deserialize)]
        struct File {
            schema_version: u32,
            gpu_id: String,
            measured_on: String,
            constants: Constants,
        }
        let err = |field: &str, message: String| ContentError::Field {
            file: name.to_string(),
            field: field.to_string(),
            message,
        };
        let f: File = serde_json::from_str(text).map_err(|e| ContentError::Parse {
            file: name.to_string(),
            message: e.to_string(),
        })?;
        if f.schema_version != 1 {
            return Err(err(
                "schema_version",
                format!("must be 1, found {}", f.schema_version),
            ));
        }
        let c = f.constants;
        if c.cuda_context_bytes > 8 << 30 {
            return Err(err(
                "constants.cuda_context_bytes",
                "must be at most 8 GiB".into(),
            ));
        }
        if c.cublas_workspace_bytes > 1 << 30 || c.cublas_workspaces > 64 {
            return Err(err(
                "constants.cublas_workspace_bytes",
                "out of range (at most 1 GiB, 64 workspaces)".into(),
            ));
        }
        for (field, v) in [
            (
                "constants.reserved_slack_fraction",
                c.reserved_slack_fraction,
            ),
            (
                "constants.reserved_slack_fraction_expandable",
                c.reserved_slack_fraction_expandable,
            ),
        ] {
            if !(0.0..=1.0).contains(&v) {
                return Err(err(field, format!("must be between 0 and 1, found {v}")));
            }
        }
        Ok((
            f.gpu_id,
            Calibration {
                source: CalibrationSource::Measured {
                    file: name.to_string(),
                    measured_on: f.measured_on,
                },
                cuda_context_bytes: c.cuda_context_bytes,
                cublas_workspace_bytes: c.cublas_workspace_bytes,
                cublas_workspaces: c.cublas_workspaces,
                reserved_slack_fraction: c.reserved_slack_fraction,
                reserved_slack_fraction_expandable: c.reserved_slack_fraction_expandable,
                nccl_bytes: c.nccl_bytes,
            },
        ))
    }

    /// The calibration for `gpu`: a committed file when one exists, the defaults otherwise.
    pub fn for_gpu(gpu: &Gpu) -> Self {
        crate::catalog::embedded::CALIBRATION_FILES
            .iter()
            .filter_map(|(name, text)| Calibration::parse(name, text).ok())
            .find(|(id, _)| *id == gpu.id)
            .map(|(_, c)| c)
            .unwrap_or_else(|| Calibration::assumed(gpu))
    }

    pub fn is_measured(&self) -> bool {
        matches!(self.source, CalibrationSource::Measured { .. })
    }
}
