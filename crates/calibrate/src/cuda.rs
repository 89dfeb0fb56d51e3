//! The CUDA backend: cudarc with the driver, cuBLAS and NVRTC loaded at run time, so nothing
//! CUDA is needed to build and a machine without a driver gets a clean error, not a panic.

// Raw driver and cuBLAS calls (GEMM on device pointers, allocation granularity, versions, pinned
// buffers, library probes) have no safe wrapper in cudarc; they are confined to this module and
// each `unsafe` block states why it is sound.
#![allow(unsafe_code)]

use std::sync::Arc;

use cudarc::cublas::{CudaBlas, result as blas_result, sys as blas_sys};
use cudarc::driver::sys as drv;
use cudarc::driver::{
    CudaContext, CudaSlice, CudaStream, DevicePtr, DevicePtrMut, PinnedHostSlice,
};

use crate::device::{CopyKind, CublasCost, Device, DeviceError, DeviceInfo, MatmulDtype};
use crate::fake::NoDevice;

/// Why the library probe is sound: `is_culib_present` only tries `dlopen` on the library's
/// usual names and closes what it opened; it touches no CUDA state.
fn library_present(which: &str) -> bool {
    // SAFETY: see above; these functions have no preconditions.
    unsafe {
        match which {
            "driver" => drv::is_culib_present(),
            "cublas" => blas_sys::is_culib_present(),
            "nvrtc" => cudarc::nvrtc::sys::is_culib_present(),
            _ => false,
        }
    }
}

/// The CUDA libraries besides the driver that cannot be loaded (`libcublas`, `libnvrtc`).
pub fn missing_libraries() -> Vec<&'static str> {
    [("cublas", "libcublas"), ("nvrtc", "libnvrtc")]
        .into_iter()
        .filter(|(which, _)| !library_present(which))
        .map(|(_, name)| name)
        .collect()
}

/// Whether the driver library (`libcuda`) can be loaded.
pub fn driver_present() -> bool {
    library_present("driver")
}

fn call<T, E: std::fmt::Debug>(what: &str, r: Result<T, E>) -> Result<T, DeviceError> {
    r.map_err(|e| DeviceError::call(what, format!("{e:?}")))
}

/// Buffers kept between repetitions so each repetition times the operation, not allocation.
#[derive(Default)]
struct Buffers {
    matmul: Option<(MatmulDtype, u64, [CudaSlice<u8>; 3])>,
    device: Option<(u64, CudaSlice<u8>, CudaSlice<u8>)>,
    pinned: Option<(u64, PinnedHostSlice<u8>)>,
    pageable: Vec<u8>,
}

/// One GPU through the CUDA driver.
pub struct CudaDevice {
    ordinal: usize,
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    blas: Option<CudaBlas>,
    buffers: Buffers,
}

impl std::fmt::Debug for CudaDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaDevice")
            .field("ordinal", &self.ordinal)
            .finish_non_exhaustive()
    }
}

impl CudaDevice {
    /// Opens device `ordinal`, or says clearly why there is none.
    pub fn open(ordinal: usize) -> Result<Self, DeviceError> {
        if !library_present("driver") {
            return Err(NoDevice::error());
        }
        let count = CudaContext::device_count().map_err(|e| {
            DeviceError::NoDevice(format!(
                "the NVIDIA driver library loads but reports no usable GPU ({e:?})"
            ))
        })?;
        if count <= 0 || ordinal >= count as usize {
            return Err(DeviceError::NoDevice(format!(
                "the NVIDIA driver reports {count} GPUs, so there is no device {ordinal} to calibrate"
            )));
        }
        let ctx = call("cuCtx (primary context)", CudaContext::new(ordinal))?;
        // SAFETY: every allocation and every use of it happens on the one stream below, in
        // order, so cudarc's cross-stream event tracking has nothing to order; without it a
        // small GEMM's time is not inflated by recording events around each call.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.default_stream();
        Ok(CudaDevice {
            ordinal,
            ctx,
            stream,
            blas: None,
            buffers: Buffers::default(),
        })
    }

    fn free_bytes(&self) -> Result<u64, DeviceError> {
        call("bind context", self.ctx.bind_to_thread())?;
        let (free, _) = call("cuMemGetInfo", self.ctx.mem_get_info())?;
        Ok(free as u64)
    }

    fn blas(&mut self) -> Result<&CudaBlas, DeviceError> {
        if !library_present("cublas") {
            return Err(DeviceError::MissingLibrary {
                library: "libcublas".into(),
                hint: "install CUDA's cuBLAS or point LD_LIBRARY_PATH at a python environment's nvidia/cublas/lib".into(),
            });
        }
        if self.blas.is_none() {
            self.blas = Some(call("cublasCreate", CudaBlas::new(self.stream.clone()))?);
        }
        self.blas
            .as_ref()
            .ok_or_else(|| DeviceError::call("cublasCreate", "no handle"))
    }

    fn sync(&self) -> Result<(), DeviceError> {
        call("cuStreamSynchronize", self.stream.synchronize())
    }

    /// Times `iters` runs of `f` on the stream with CUDA events; seconds per run.
    fn time(
        &mut self,
        iters: u32,
        f: &mut dyn FnMut(&mut Self) -> Result<(), DeviceError>,
    ) -> Result<f64, DeviceError> {
        let flags = Some(drv::CUevent_flags::CU_EVENT_DEFAULT);
        let start = call("cuEventCreate", self.ctx.new_event(flags))?;
        let end = call("cuEventCreate", self.ctx.new_event(flags))?;
        call("cuEventRecord", start.record(&self.stream))?;
        for _ in 0..iters {
            f(self)?;
        }
        call("cuEventRecord", end.record(&self.stream))?;
        call("cuEventSynchronize", end.synchronize())?;
        let ms = call("cuEventElapsedTime", start.elapsed_ms(&end))?;
        Ok(f64::from(ms) / 1000.0 / f64::from(iters.max(1)))
    }

    fn random_host(bytes: usize, dtype: MatmulDtype) -> Vec<u8> {
        // Values in [0.5, 1) with random mantissas: realistic switching activity, no overflow.
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            state >> 33
        };
        let mut out = Vec::with_capacity(bytes);
        match dtype {
            MatmulDtype::Bf16 => {
                while out.len() + 2 <= bytes {
                    out.extend_from_slice(&(0x3F00u16 | (next() as u16 & 0x7F)).to_le_bytes());
                }
            }
            MatmulDtype::Fp16 => {
                while out.len() + 2 <= bytes {
                    out.extend_from_slice(&(0x3800u16 | (next() as u16 & 0x3FF)).to_le_bytes());
                }
            }
            _ => {
                while out.len() + 4 <= bytes {
                    out.extend_from_slice(
                        &(0x3F00_0000u32 | (next() as u32 & 0x7F_FFFF)).to_le_bytes(),
                    );
                }
            }
        }
        out.resize(bytes, 0);
        out
    }

    fn gemm(&mut self, dtype: MatmulDtype, n: u64) -> Result<Option<()>, DeviceError> {
        let (a_type, compute) = match dtype {
            MatmulDtype::Bf16 => (
                blas_sys::cudaDataType::CUDA_R_16BF,
                blas_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
            ),
            MatmulDtype::Fp16 => (
                blas_sys::cudaDataType::CUDA_R_16F,
                blas_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
            ),
            MatmulDtype::Tf32 => (
                blas_sys::cudaDataType::CUDA_R_32F,
                blas_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32,
            ),
            MatmulDtype::Fp32 => (
                blas_sys::cudaDataType::CUDA_R_32F,
                blas_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F_PEDANTIC,
            ),
            // cublasGemmEx has no fp8; it needs cuBLASLt, which this build does not load.
            MatmulDtype::Fp8 => return Ok(None),
        };
        let Some((_, _, bufs)) = &mut self.buffers.matmul else {
            return Err(DeviceError::call("gemm", "buffers not allocated"));
        };
        let blas = self
            .blas
            .as_ref()
            .ok_or_else(|| DeviceError::call("gemm", "no cuBLAS handle"))?;
        let alpha = 1.0f32;
        let beta = 0.0f32;
        let ni = i32::try_from(n).map_err(|_| DeviceError::call("gemm", "n too large"))?;
        let [a, b, c] = bufs;
        let (a_ptr, _ga) = a.device_ptr(&self.stream);
        let (b_ptr, _gb) = b.device_ptr(&self.stream);
        let (c_ptr, _gc) = c.device_ptr_mut(&self.stream);
        // SAFETY: the three buffers hold n*n elements of the format (allocated in `matmul_seconds`
        // for this dtype and n), stay alive and unfreed while the guards live, lda = ldb = ldc = n
        // fit column-major n x n matrices, and alpha/beta are host f32s as compute type 32F needs.
        let r = unsafe {
            blas_result::gemm_ex(
                *blas.handle(),
                blas_sys::cublasOperation_t::CUBLAS_OP_N,
                blas_sys::cublasOperation_t::CUBLAS_OP_N,
                ni,
                ni,
                ni,
                (&alpha as *const f32).cast(),
                a_ptr as *const std::ffi::c_void,
                a_type,
                ni,
                b_ptr as *const std::ffi::c_void,
                a_type,
                ni,
                (&beta as *const f32).cast(),
                c_ptr as *mut std::ffi::c_void,
                a_type,
                ni,
                compute,
                blas_sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        };
        match r {
            Ok(()) => Ok(Some(())),
            Err(e) if e.0 == blas_sys::cublasStatus_t::CUBLAS_STATUS_NOT_SUPPORTED => Ok(None),
            Err(e) => Err(DeviceError::call("cublasGemmEx", format!("{e:?}"))),
        }
    }

    fn copy(&mut self, kind: CopyKind) -> Result<(), DeviceError> {
        let s = self.stream.clone();
        match kind {
            CopyKind::DeviceToDevice => {
                let Some((_, src, dst)) = &mut self.buffers.device else {
                    return Err(DeviceError::call("copy", "buffers not allocated"));
                };
                call("cuMemcpyDtoD", s.memcpy_dtod(src, dst))
            }
            CopyKind::HostToDevicePinned => {
                let (Some((_, pinned)), Some((_, dst, _))) =
                    (&self.buffers.pinned, &mut self.buffers.device)
                else {
                    return Err(DeviceError::call("copy", "buffers not allocated"));
                };
                call("cuMemcpyHtoD (pinned)", s.memcpy_htod(pinned, dst))
            }
            CopyKind::HostToDevicePageable => {
                let Some((_, dst, _)) = &mut self.buffers.device else {
                    return Err(DeviceError::call("copy", "buffers not allocated"));
                };
                call(
                    "cuMemcpyHtoD (pageable)",
                    s.memcpy_htod(&self.buffers.pageable, dst),
                )
            }
            CopyKind::DeviceToHostPinned => {
                let (Some((_, pinned)), Some((_, src, _))) =
                    (&mut self.buffers.pinned, &self.buffers.device)
                else {
                    return Err(DeviceError::call("copy", "buffers not allocated"));
                };
                call("cuMemcpyDtoH (pinned)", s.memcpy_dtoh(src, pinned))
            }
            CopyKind::DeviceToHostPageable => {
                let Some((_, src, _)) = &self.buffers.device else {
                    return Err(DeviceError::call("copy", "buffers not allocated"));
                };
                call(
                    "cuMemcpyDtoH (pageable)",
                    s.memcpy_dtoh(src, &mut self.buffers.pageable),
                )
            }
        }
    }
}

fn driver_version() -> Option<String> {
    let text = std::fs::read_to_string("/proc/driver/nvidia/version").ok()?;
    // "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.95.05  Thu ..."
    text.lines()
        .next()?
        .split_whitespace()
        .find(|w| w.chars().next().is_some_and(|c| c.is_ascii_digit()) && w.contains('.'))
        .map(str::to_string)
}

impl Device for CudaDevice {
    fn info(&mut self) -> Result<DeviceInfo, DeviceError> {
        let name = call("cuDeviceGetName", self.ctx.name())?;
        let (major, minor) = call("cuDeviceGetAttribute", self.ctx.compute_capability())?;
        let total = call("cuDeviceTotalMem", self.ctx.total_mem())? as u64;
        let sms = call(
            "cuDeviceGetAttribute",
            self.ctx
                .attribute(drv::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT),
        )?;
        let mut v: i32 = 0;
        // SAFETY: the driver library is loaded (checked in `open`) and `v` is a valid out-pointer.
        let r = unsafe { drv::cuDriverGetVersion(&mut v) };
        call("cuDriverGetVersion", r.result())?;
        let cublas_version = library_present("cublas").then(|| {
            let mut p = [0i32; 3];
            for (i, t) in [
                blas_sys::libraryPropertyType::MAJOR_VERSION,
                blas_sys::libraryPropertyType::MINOR_VERSION,
                blas_sys::libraryPropertyType::PATCH_LEVEL,
            ]
            .into_iter()
            .enumerate()
            {
                // SAFETY: cuBLAS is present; `p[i]` is a valid out-pointer.
                let _ = unsafe { blas_sys::cublasGetProperty(t, &mut p[i]) };
            }
            format!("{}.{}.{}", p[0], p[1], p[2])
        });
        let nvrtc_version = library_present("nvrtc").then(|| {
            let (mut major, mut minor) = (0i32, 0i32);
            // SAFETY: NVRTC is present; both are valid out-pointers.
            let _ = unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) };
            format!("{major}.{minor}")
        });
        Ok(DeviceInfo {
            name,
            compute_capability: format!("{major}.{minor}"),
            driver_version: driver_version(),
            driver_cuda_version: format!("{}.{}", v / 1000, (v % 1000) / 10),
            cublas_version,
            nvrtc_version,
            total_bytes: total,
            free_bytes: self.free_bytes()?,
            multiprocessors: u32::try_from(sms).unwrap_or(0),
        })
    }

    fn context_bytes(&mut self) -> Result<u64, DeviceError> {
        let before = self.free_bytes()?;
        let extra = call("cuCtxCreate", CudaContext::new_non_primary(self.ordinal, 0))?;
        call("bind context", extra.bind_to_thread())?;
        let (after, _) = call("cuMemGetInfo", extra.mem_get_info())?;
        drop(extra);
        call("bind context", self.ctx.bind_to_thread())?;
        Ok(before.saturating_sub(after as u64))
    }

    fn granularity(&mut self) -> Result<(u64, u64), DeviceError> {
        let ordinal = i32::try_from(self.ordinal).unwrap_or(0);
        // SAFETY: every field of this plain C struct is an integer, a C enum whose 0 is a valid
        // variant (INVALID / NONE), a null pointer or flag bytes, so all-zero is a valid value.
        let mut prop: drv::CUmemAllocationProp = unsafe { std::mem::zeroed() };
        prop.type_ = drv::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location.type_ = drv::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
        prop.location.id = ordinal;
        let mut out = [0u64; 2];
        for (i, flag) in [
            drv::CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_MINIMUM,
            drv::CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_RECOMMENDED,
        ]
        .into_iter()
        .enumerate()
        {
            let mut g: usize = 0;
            // SAFETY: the context is current, `prop` is initialized above, `g` is an out-pointer.
            let r = unsafe { drv::cuMemGetAllocationGranularity(&mut g, &prop, flag) };
            call("cuMemGetAllocationGranularity", r.result())?;
            out[i] = g as u64;
        }
        Ok((out[0], out[1]))
    }

    fn cublas_cost(&mut self) -> Result<CublasCost, DeviceError> {
        // The GEMM's operands exist before the first reading, so only cuBLAS's own memory counts.
        self.blas()?;
        self.prepare_matmul(MatmulDtype::Bf16, 1024)?;
        self.sync()?;
        let before = self.free_bytes()?;
        let own = call("cublasCreate", CudaBlas::new(self.stream.clone()))?;
        self.sync()?;
        let after_handle = self.free_bytes()?;
        // Swap the fresh handle in for one GEMM, then put the long-lived one back.
        let kept = self.blas.replace(own);
        let r = self.gemm(MatmulDtype::Bf16, 1024);
        self.sync()?;
        let after_gemm = self.free_bytes()?;
        self.blas = kept;
        r?;
        Ok(CublasCost {
            handle_bytes: before.saturating_sub(after_handle),
            first_gemm_bytes: after_handle.saturating_sub(after_gemm),
        })
    }

    fn matmul_seconds(&mut self, dtype: MatmulDtype, n: u64) -> Result<Option<f64>, DeviceError> {
        if dtype == MatmulDtype::Fp8 {
            return Ok(None);
        }
        self.blas()?;
        self.prepare_matmul(dtype, n)?;
        // Warm up (kernel selection, clocks), then size the batch to about 50 ms.
        if self.gemm(dtype, n)?.is_none() {
            return Ok(None);
        }
        self.sync()?;
        let one = self.time(1, &mut |d| d.gemm(dtype, n).map(|_| ()))?;
        let iters = ((0.05 / one.max(1e-7)) as u32).clamp(1, 1000);
        Ok(Some(
            self.time(iters, &mut |d| d.gemm(dtype, n).map(|_| ()))?,
        ))
    }

    fn copy_seconds(&mut self, kind: CopyKind, bytes: u64) -> Result<f64, DeviceError> {
        self.prepare_copies(bytes)?;
        self.copy(kind)?;
        self.sync()?;
        let iters = if kind == CopyKind::DeviceToDevice {
            10
        } else {
            2
        };
        self.time(iters, &mut |d| d.copy(kind))
    }

    fn backend(&self) -> &'static str {
        "cuda"
    }
}

impl CudaDevice {
    fn prepare_matmul(&mut self, dtype: MatmulDtype, n: u64) -> Result<(), DeviceError> {
        if matches!(&self.buffers.matmul, Some((d, m, _)) if *d == dtype && *m == n) {
            return Ok(());
        }
        self.buffers.matmul = None;
        let elem = match dtype {
            MatmulDtype::Bf16 | MatmulDtype::Fp16 => 2,
            MatmulDtype::Fp8 => 1,
            _ => 4,
        };
        let bytes = usize::try_from(n * n * elem)
            .map_err(|_| DeviceError::call("matmul buffers", "too large"))?;
        let host = Self::random_host(bytes, dtype);
        let a = call("cuMemAlloc + copy", self.stream.clone_htod(&host))?;
        let b = call("cuMemAlloc + copy", self.stream.clone_htod(&host))?;
        let c = call("cuMemAlloc", self.stream.alloc_zeros::<u8>(bytes))?;
        self.buffers.matmul = Some((dtype, n, [a, b, c]));
        Ok(())
    }

    fn prepare_copies(&mut self, bytes: u64) -> Result<(), DeviceError> {
        let len = usize::try_from(bytes).map_err(|_| DeviceError::call("copy", "too large"))?;
        // Free the GEMM operands first: the copies want the memory.
        self.buffers.matmul = None;
        if !matches!(&self.buffers.device, Some((b, _, _)) if *b == bytes) {
            self.buffers.device = None;
            let src = call("cuMemAlloc", self.stream.alloc_zeros::<u8>(len))?;
            let dst = call("cuMemAlloc", self.stream.alloc_zeros::<u8>(len))?;
            self.buffers.device = Some((bytes, src, dst));
        }
        if !matches!(&self.buffers.pinned, Some((b, _)) if *b == bytes) {
            self.buffers.pinned = None;
            // SAFETY: the memory is uninitialized after allocation; it is filled right below
            // before anything reads it. Default flags (0): plain page-locked memory, as
            // PyTorch's pinned host allocator uses (not write-combined).
            let mut p = call("cuMemHostAlloc", unsafe {
                self.ctx.alloc_pinned_with_flags::<u8>(len, 0)
            })?;
            call("pinned buffer", p.as_mut_slice())?.fill(1);
            self.buffers.pinned = Some((bytes, p));
        }
        if self.buffers.pageable.len() != len {
            self.buffers.pageable = vec![1u8; len];
        }
        Ok(())
    }
}
