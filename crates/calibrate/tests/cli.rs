//! The `calibrate` binary: one clear sentence and a non-zero exit without a GPU; `--help`;
//! a fake run writes a file the core reads; a quick run never replaces a full one.

use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_calibrate"))
}

fn has_nvidia_driver() -> bool {
    std::path::Path::new("/proc/driver/nvidia/version").exists()
}

#[test]
fn without_a_gpu_it_exits_non_zero_with_one_sentence() {
    if has_nvidia_driver() {
        eprintln!("this machine has an NVIDIA driver: the no-GPU path cannot be observed here");
        return;
    }
    let out = bin().output().expect("runs");
    assert!(!out.status.success());
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.starts_with("calibrate: "), "{err}");
    assert!(err.trim_end().ends_with('.'), "a sentence: {err}");
    assert!(
        err.contains("no NVIDIA GPU driver found") || err.contains("without the `cuda` feature"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn help_documents_every_flag() {
    let out = bin().arg("--help").output().expect("runs");
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--quick",
        "--out",
        "--device",
        "--gpu",
        "--python",
        "--native-only",
        "--force",
        "--fake",
        "--version",
    ] {
        assert!(help.contains(flag), "{flag} in --help");
    }
    assert!(
        help.contains("LD_LIBRARY_PATH"),
        "where the libraries are found"
    );
}

#[test]
fn a_fake_run_writes_a_file_and_a_quick_run_never_replaces_a_full_one() {
    let dir = std::env::temp_dir().join(format!("calibrate-cli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = bin()
        .args(["--fake", "--quick", "--out"])
        .arg(&dir)
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("held-out error"), "{stdout}");
    assert!(stdout.contains("wrote "), "{stdout}");
    let path = dir.join("h100-sxm-80gb-cuda13.0-torch2.11.json");
    let text = std::fs::read_to_string(&path).expect("written");
    assert!(headroom_core::Calibration::parse("f", &text).is_ok());

    // Pretend the file is a full run: a quick run must leave it alone.
    let full = text.replacen("\"mode\": \"quick\"", "\"mode\": \"full\"", 1);
    std::fs::write(&path, &full).expect("write");
    let out = bin()
        .args(["--fake", "--quick", "--out"])
        .arg(&dir)
        .output()
        .expect("runs");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--force"));
    assert_eq!(std::fs::read_to_string(&path).expect("kept"), full);
    std::fs::remove_dir_all(&dir).expect("cleanup");
}
