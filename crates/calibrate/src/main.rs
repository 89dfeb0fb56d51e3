//! The `calibrate` binary: measures this machine's GPU and writes `content/calibration/*.json`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use calibrate::device::{Device, DeviceError};
use calibrate::fake::{FakeDevice, FakeTrainer};
use calibrate::probe::{PythonTrainer, Trainer};
use calibrate::progress::Bar;
use calibrate::report::{CalibrationFile, write_atomic};
use calibrate::{CalibrateError, Options, calibrate};
use clap::Parser;
use headroom_core::GpuCatalog;

/// Measures one GPU and its software stack, fits the constants Headroom's estimates take from a
/// calibration, and writes them to one JSON file per GPU and stack.
///
/// Native part (CUDA through cudarc, libraries loaded at run time): device name, compute
/// capability, driver and CUDA versions, total and free memory, the CUDA context's size, the
/// allocation granularity, a cuBLAS handle's and first GEMM's memory, GEMM throughput in bf16,
/// fp16, tf32 and fp32 over sizes from 256 to 16384 (the efficiency curve), and copy bandwidth
/// device-to-device and host<->device, pinned and pageable: each repeated, with median and
/// spread.
///
/// PyTorch part (when `--python` has torch with CUDA and transformers; peft for LoRA): real
/// training steps over a grid of 42 scenarios (small llama, qwen2, mistral and gpt2 configs built
/// with from_config, no downloads) measuring max_memory_allocated, max_memory_reserved and the
/// process's device memory (NVML) per phase; out-of-memory is recorded and the grid goes on.
/// Constants are fitted on two thirds of the grid and checked on the held-out third.
///
/// Libraries: libcuda from the driver; libcublas and libnvrtc from the system or from
/// LD_LIBRARY_PATH; when they are missing there but `--python`'s environment has PyTorch's
/// nvidia wheels (site-packages/nvidia/*/lib), calibrate runs itself again with those folders on
/// LD_LIBRARY_PATH.
/// Exits with status 1 and one sentence when there is no GPU or driver.
#[derive(Debug, Parser)]
#[command(name = "calibrate", version)]
struct Args {
    /// Fewer repetitions, GEMM sizes and training scenarios (a fraction of the full run).
    /// A quick run never replaces an existing full run's file, nor a run without PyTorch data
    /// one with it (unless --force).
    #[arg(long)]
    quick: bool,

    /// Folder for the calibration file (created if missing).
    #[arg(long, value_name = "DIR", default_value = "content/calibration")]
    out: PathBuf,

    /// CUDA device ordinal to measure.
    #[arg(long, value_name = "N", default_value_t = 0)]
    device: usize,

    /// File the results under this GPU catalog id instead of the one matched from the device's
    /// name, compute capability and memory.
    #[arg(long, value_name = "ID")]
    gpu: Option<String>,

    /// The python interpreter for the PyTorch part.
    #[arg(long, value_name = "PATH", default_value = "python3")]
    python: PathBuf,

    /// Skip the PyTorch part even where torch is installed.
    #[arg(long)]
    native_only: bool,

    /// Replace an existing file even with a less complete run.
    #[arg(long)]
    force: bool,

    /// Use the fake H100 device and trainer (for tests and to see the output format anywhere).
    #[arg(long)]
    fake: bool,

    /// Fit a calibration file's constants again from its own measured rows with this build's
    /// core (after the core's model changed), and write it to --out under its own name. Needs
    /// no GPU: nothing is measured.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["quick", "fake", "native_only", "gpu"])]
    refit: Option<PathBuf>,
}

fn open_device(args: &Args) -> Result<Box<dyn Device>, DeviceError> {
    if args.fake {
        return Ok(Box::new(FakeDevice::default()));
    }
    #[cfg(feature = "cuda")]
    {
        Ok(Box::new(calibrate::cuda::CudaDevice::open(args.device)?))
    }
    #[cfg(not(feature = "cuda"))]
    {
        Err(DeviceError::NoDevice(
            "this calibrate was built without the `cuda` feature, so it cannot measure a GPU"
                .into(),
        ))
    }
}

/// Where a python environment keeps CUDA's libraries (`site-packages/nvidia/*/lib`).
#[cfg(feature = "cuda")]
fn python_cuda_lib_dirs(python: &std::path::Path) -> Vec<String> {
    let code = "import glob, site\n\
                dirs = site.getsitepackages() + [site.getusersitepackages()]\n\
                print(':'.join(p for d in dirs for p in sorted(glob.glob(d + '/nvidia/*/lib'))))";
    std::process::Command::new(python)
        .args(["-c", code])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .trim()
                .split(':')
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// When cuBLAS or NVRTC cannot be loaded but the python environment ships them (PyTorch's
/// `nvidia-*` wheels), runs this binary again with them on `LD_LIBRARY_PATH` (the loader reads
/// it only at start). Returns the child's exit code, or `None` to go on in this process.
#[cfg(feature = "cuda")]
fn rerun_with_python_libraries(args: &Args) -> Option<ExitCode> {
    const MARK: &str = "CALIBRATE_LIBRARY_PATH_SET";
    if args.fake
        || std::env::var_os(MARK).is_some()
        || !calibrate::cuda::driver_present()
        || calibrate::cuda::missing_libraries().is_empty()
    {
        return None;
    }
    let dirs = python_cuda_lib_dirs(&args.python);
    if dirs.is_empty() {
        return None;
    }
    let mut path = dirs.join(":");
    if let Some(old) = std::env::var_os("LD_LIBRARY_PATH") {
        path.push(':');
        path.push_str(&old.to_string_lossy());
    }
    eprintln!("calibrate: loading CUDA libraries from {}", dirs.join(", "));
    let exe = std::env::current_exe().ok()?;
    let status = std::process::Command::new(exe)
        .args(std::env::args_os().skip(1))
        .env("LD_LIBRARY_PATH", path)
        .env(MARK, "1")
        .status()
        .ok()?;
    Some(match status.code() {
        Some(0) => ExitCode::SUCCESS,
        Some(c) => ExitCode::from(u8::try_from(c).unwrap_or(1)),
        None => ExitCode::FAILURE,
    })
}

fn main() -> ExitCode {
    let args = Args::parse();
    if let Some(path) = &args.refit {
        return match refit(&args, path) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("calibrate: {e:#}");
                ExitCode::FAILURE
            }
        };
    }
    #[cfg(feature = "cuda")]
    if let Some(code) = rerun_with_python_libraries(&args) {
        return code;
    }
    let mut dev = match open_device(&args) {
        Ok(d) => d,
        Err(DeviceError::NoDevice(why)) => {
            eprintln!("calibrate: {why}.");
            return ExitCode::FAILURE;
        }
        Err(e) => {
            eprintln!("calibrate: cannot open the GPU: {e}.");
            return ExitCode::FAILURE;
        }
    };
    match run(&args, dev.as_mut()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("calibrate: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// `--refit FILE`: the file's constants fitted again with this core, written to `--out`.
fn refit(args: &Args, path: &std::path::Path) -> anyhow::Result<()> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let old: CalibrationFile = serde_json::from_str(&text)
        .with_context(|| format!("{} is not a calibration file", path.display()))?;
    let now_secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .context("the system clock is before 1970")?
        .as_secs();
    let file = calibrate::refit(&old, now_secs)?;
    write_checked(args, &file)
}

fn run(args: &Args, dev: &mut dyn Device) -> anyhow::Result<()> {
    let now_secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .context("the system clock is before 1970")?
        .as_secs();
    let opts = Options {
        quick: args.quick,
        gpu: args.gpu.clone(),
        native_only: args.native_only,
        now_secs,
    };
    let mut bar = Bar::default();
    let mut trainer: Box<dyn Trainer> = if args.fake {
        let gpu = GpuCatalog::builtin()
            .get(args.gpu.as_deref().unwrap_or("h100-sxm-80gb"))
            .context("--gpu")?;
        // Half a percent of noise, so the fixture's error tables look like measurements.
        Box::new(FakeTrainer {
            noise: 0.005,
            ..FakeTrainer::h100(gpu)
        })
    } else {
        Box::new(
            PythonTrainer::on_ordinal(&args.python, "cuda", args.device)
                .context("preparing the PyTorch probe")?,
        )
    };
    let file = match calibrate(dev, Some(trainer.as_mut()), &opts, &mut bar) {
        Ok(f) => f,
        Err(CalibrateError::Device(e)) => bail!("measuring the GPU failed: {e}"),
        Err(e) => return Err(e.into()),
    };
    bar.finish();
    let name = file.file_name();
    let target = args.out.join(&name);
    if !args.force && target.exists() {
        let existing: Option<CalibrationFile> = std::fs::read_to_string(&target)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok());
        if existing.is_some_and(|e| file.is_less_complete_than(&e)) {
            bail!(
                "{} holds a more complete run ({} than this one); it is kept (pass --force to replace it)",
                target.display(),
                if file.mode == "quick" {
                    "a full run"
                } else {
                    "PyTorch data"
                }
            );
        }
    }
    write_checked(args, &file)
}

/// Writes `file` to `--out` once the core accepts it (a rejected result is kept beside it, under
/// a name the build ignores), and prints its summary.
fn write_checked(args: &Args, file: &CalibrationFile) -> anyhow::Result<()> {
    let name = file.file_name();
    let target = args.out.join(&name);
    let text = serde_json::to_string_pretty(file).context("serializing the calibration")?;
    // The core must accept the result (range checks included) before it lands where the build
    // embeds it; a rejected result is kept beside it, under a name the build ignores.
    if let Err(e) = headroom_core::Calibration::parse(&name, &text) {
        let kept = write_atomic(&args.out, &format!("{name}.rejected"), &text)
            .with_context(|| format!("writing {}.rejected", target.display()))?;
        bail!(
            "the core rejects the result ({e}); it is kept in {} for inspection",
            kept.display()
        );
    }
    let path = write_atomic(&args.out, &name, &(text + "\n"))
        .with_context(|| format!("writing {}", target.display()))?;
    print!("{}", summary(file, &path));
    Ok(())
}

fn mib(b: f64) -> String {
    format!("{:.0} MiB", b / (1u64 << 20) as f64)
}

fn summary(f: &CalibrationFile, path: &std::path::Path) -> String {
    let mut s = String::new();
    let m = &f.machine;
    s.push_str(&format!(
        "\n{} ({}; compute capability {}; driver {}; CUDA {}), measured {}\n",
        m.gpu_name,
        f.gpu_id,
        m.compute_capability,
        m.driver_version.as_deref().unwrap_or("?"),
        f.software.cuda,
        f.measured_on
    ));
    let n = &f.native;
    s.push_str(&format!(
        "  CUDA context {} (IQR {}-{}), cuBLAS handle {} + first GEMM {}, granularity {} KiB\n",
        mib(n.context_bytes.median),
        mib(n.context_bytes.q1),
        mib(n.context_bytes.q3),
        mib(n.cublas_handle_bytes.median),
        mib(n.cublas_first_gemm_bytes.median),
        n.granularity_recommended_bytes / 1024
    ));
    for dtype in ["bf16", "fp16", "tf32", "fp32"] {
        if let Some(p) = n
            .matmul
            .iter()
            .filter(|p| p.dtype == dtype)
            .max_by(|a, b| a.tflops.median.total_cmp(&b.tflops.median))
        {
            s.push_str(&format!(
                "  GEMM {dtype}: best {:.0} TFLOP/s at n={}{}\n",
                p.tflops.median,
                p.n,
                p.efficiency
                    .map(|e| format!(" ({:.0}% of the catalog's peak)", e * 100.0))
                    .unwrap_or_default()
            ));
        }
    }
    for u in &n.matmul_unsupported {
        s.push_str(&format!(
            "  GEMM {}: not measured ({})\n",
            u.dtype, u.reason
        ));
    }
    for b in &n.bandwidth {
        s.push_str(&format!(
            "  {}: {:.1} GB/s\n",
            b.kind.replace('_', " "),
            b.gb_per_s.median
        ));
    }
    for b in &n.bandwidth_failed {
        s.push_str(&format!(
            "  {}: failed ({})\n",
            b.dtype.replace('_', " "),
            b.reason
        ));
    }
    let t = &f.torch;
    if t.status == "measured" {
        s.push_str(&format!(
            "  PyTorch {}: {} scenarios, {} measured, {} out of memory, {} failed, {} skipped\n",
            f.software.torch.torch.as_deref().unwrap_or("?"),
            t.scenarios,
            t.ok,
            t.oom,
            t.errors,
            t.skipped
        ));
        if let (Some(b), Some(a)) = (&t.held_out_before, &t.held_out_after) {
            s.push_str(&format!(
                "  held-out error ({} scenarios), mean |error| before -> after fitting:\n",
                a.device.rows
            ));
            for (level, lb, la) in [
                ("allocated", &b.allocated, &a.allocated),
                ("reserved", &b.reserved, &a.reserved),
                ("device", &b.device, &a.device),
            ] {
                s.push_str(&format!(
                    "    {level:<9} {:>6.2}% -> {:>6.2}%  (max {:.2}% -> {:.2}%)\n",
                    lb.mean_abs_pct, la.mean_abs_pct, lb.max_abs_pct, la.max_abs_pct
                ));
            }
        }
    } else {
        s.push_str(&format!(
            "  PyTorch part {}: {}\n",
            t.status,
            t.reason.as_deref().unwrap_or("")
        ));
    }
    let c = &f.constants;
    s.push_str(&format!(
        "  constants: context {}, cuBLAS workspaces {} x {}, reserved slack {:.3} (expandable {:.3})\n",
        mib(c.cuda_context_bytes as f64),
        c.cublas_workspaces,
        mib(c.cublas_workspace_bytes as f64),
        c.reserved_slack_fraction,
        c.reserved_slack_fraction_expandable
    ));
    s.push_str(&format!("wrote {}\n", path.display()));
    s
}
