//! The calibration file (`content/calibration/<gpu>-<stack>.json`): its schema, its name, and
//! writing it atomically (a temporary file in the same folder, fsync, rename).

use std::io::Write;
use std::path::{Path, PathBuf};

pub use headroom_core::calibration::schema::{
    CalibrationFile, Constants, Machine, Prediction, RowReport, SCHEMA_VERSION, Software,
    TorchPart, WorkspaceMeasure,
};

/// A lowercase slug: letters, digits and single dashes.
pub fn slug(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if c.is_ascii_alphanumeric() || c == '.' {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    out.trim_end_matches('-').to_string()
}

/// `major.minor` of a version such as `2.11.0+cu130`.
pub fn major_minor(v: &str) -> String {
    let core = v.split(['+', ' ']).next().unwrap_or(v);
    core.split('.').take(2).collect::<Vec<_>>().join(".")
}

/// Writes `text` to `dir/name` atomically: a temporary file in `dir`, flushed and fsynced, then
/// renamed over the target, then the folder fsynced. A reader sees the old file or the new one,
/// never a partial one; on any error the temporary file is removed and the target is untouched.
pub fn write_atomic(dir: &Path, name: &str, text: &str) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let target = dir.join(name);
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.flush()?;
        f.sync_all()?;
        drop(f);
        std::fs::rename(&tmp, &target)?;
        // The rename itself is durable once the folder is synced (best effort off Unix).
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(target.clone())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// UTC date and time from seconds since the Unix epoch: (`YYYY-MM-DD`, `YYYY-MM-DDTHH:MM:SSZ`).
pub fn utc(secs: u64) -> (String, String) {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    let date = format!("{y:04}-{m:02}-{d:02}");
    let time = format!(
        "{date}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    );
    (date, time)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // In tests a panic is the failure report.
mod tests {
    use super::*;

    #[test]
    fn dates_names_and_versions() {
        assert_eq!(utc(0).1, "1970-01-01T00:00:00Z");
        assert_eq!(utc(1_795_350_896).1, "2026-11-22T12:34:56Z");
        assert_eq!(utc(951_782_400).0, "2000-02-29");
        assert_eq!(slug("NVIDIA H100 80GB HBM3"), "nvidia-h100-80gb-hbm3");
        assert_eq!(major_minor("2.11.0+cu130"), "2.11");
        assert_eq!(major_minor("13.0"), "13.0");
    }

    #[test]
    fn atomic_write_replaces_whole_files_and_leaves_no_temporaries() {
        let dir = std::env::temp_dir().join(format!("calibrate-atomic-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let p = write_atomic(&dir, "x.json", "{\"a\":1}").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "{\"a\":1}");
        write_atomic(&dir, "x.json", "{\"a\":2}").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "{\"a\":2}");
        let names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, vec!["x.json".to_string()]);
        // A target that cannot be replaced (a folder) fails and keeps nothing half-written.
        std::fs::create_dir_all(dir.join("d.json")).unwrap();
        assert!(write_atomic(&dir, "d.json", "{}").is_err());
        assert!(dir.join("d.json").is_dir());
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 2);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
