//! Real training steps through PyTorch: the [`Trainer`] trait, the python3 backend that runs the
//! shipped probe script, and the records it returns.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde::{Deserialize, Serialize};
use thiserror::Error;

pub use headroom_core::calibration::schema::{Phase, Stack, Status};

use crate::fit::WorkspaceProbe;
use crate::grid::ProbeScenario;

/// The probe script, shipped inside the binary.
pub const PROBE_PY: &str = include_str!("../probe/probe.py");

/// Why the PyTorch part could not run.
#[derive(Debug, Error)]
pub enum ProbeError {
    /// No usable python3 + torch + CUDA: the native part still runs.
    #[error("{0}")]
    Unavailable(String),
    #[error("the probe failed: {0}")]
    Failed(String),
    #[error("probe temporary files: {0}")]
    Io(#[from] std::io::Error),
}

/// One scenario's measurements.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub id: String,
    pub status: Status,
    #[serde(default)]
    pub error: Option<String>,
    /// Peaks over both steps (`max_memory_allocated`, `max_memory_reserved`, process device use).
    #[serde(default)]
    pub allocated: u64,
    #[serde(default)]
    pub reserved: u64,
    #[serde(default)]
    pub device: u64,
    #[serde(default)]
    pub device_method: Option<String>,
    #[serde(default)]
    pub allocated_before: u64,
    #[serde(default)]
    pub alloc_retries: u64,
    #[serde(default)]
    pub seconds: f64,
    #[serde(default)]
    pub phases: Vec<Phase>,
}

impl Row {
    pub fn skipped(id: &str, why: &str) -> Self {
        Row {
            id: id.to_string(),
            status: Status::Skipped,
            error: Some(why.to_string()),
            allocated: 0,
            reserved: 0,
            device: 0,
            device_method: None,
            allocated_before: 0,
            alloc_retries: 0,
            seconds: 0.0,
            phases: Vec::new(),
        }
    }
}

/// Everything the training probe returns.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeOutput {
    pub workspace: Option<WorkspaceProbe>,
    pub workspace_method: Option<String>,
    pub rows: Vec<Row>,
}

/// Something that runs training steps and measures them.
pub trait Trainer {
    /// The software stack, or why training steps cannot run here.
    fn stack(&mut self) -> Result<Stack, ProbeError>;
    /// Runs every scenario; `tick` is called once per finished scenario.
    fn run(
        &mut self,
        scenarios: &[ProbeScenario],
        stack: &Stack,
        tick: &mut dyn FnMut(&str),
    ) -> Result<ProbeOutput, ProbeError>;
}

/// Runs the probe script with the machine's python.
#[derive(Debug)]
pub struct PythonTrainer {
    python: PathBuf,
    dir: PathBuf,
    /// `cuda`, or `cpu` to check the script where there is no GPU (all figures 0).
    device: String,
    /// The CUDA ordinal calibrate measures natively; the probe is pointed at the same GPU.
    ordinal: usize,
    /// Made-up allocator counters (with `cpu`), so tests run the measuring code path.
    simulate_stats: bool,
}

impl PythonTrainer {
    /// Writes the probe script into a fresh temporary folder.
    pub fn new(python: &Path, device: &str) -> Result<Self, ProbeError> {
        Self::on_ordinal(python, device, 0)
    }

    /// Like [`PythonTrainer::new`], for CUDA device `ordinal` (as numbered within
    /// `CUDA_VISIBLE_DEVICES` when that is set, as cudarc numbers it).
    pub fn on_ordinal(python: &Path, device: &str, ordinal: usize) -> Result<Self, ProbeError> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let dir =
            std::env::temp_dir().join(format!("calibrate-probe-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join("probe.py"), PROBE_PY)?;
        Ok(PythonTrainer {
            python: python.to_path_buf(),
            dir,
            device: device.to_string(),
            ordinal,
            simulate_stats: false,
        })
    }

    /// Has the probe report made-up allocator counters (for tests on CPU): the code that reads
    /// and combines the counters runs as it does on a GPU.
    pub fn simulating_stats(mut self) -> Self {
        self.simulate_stats = true;
        self
    }

    fn command(&self) -> Command {
        let mut c = Command::new(&self.python);
        c.arg(self.dir.join("probe.py"));
        // Keep python's own output unbuffered and quiet about bytecode files.
        c.env("PYTHONUNBUFFERED", "1")
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .env("TRANSFORMERS_VERBOSITY", "error")
            .env("HF_HUB_OFFLINE", "1");
        if self.ordinal != 0 {
            // The probe trains on cuda:0; make that the GPU calibrate measured natively.
            let visible = std::env::var("CUDA_VISIBLE_DEVICES").ok();
            let pick = visible
                .as_deref()
                .and_then(|v| v.split(',').nth(self.ordinal).map(str::trim))
                .map(str::to_string)
                .unwrap_or_else(|| self.ordinal.to_string());
            c.env("CUDA_VISIBLE_DEVICES", pick);
        }
        c
    }

    fn run_group(
        &self,
        scenarios: &[&ProbeScenario],
        expandable: bool,
        out: &mut ProbeOutput,
        tick: &mut dyn FnMut(&str),
    ) -> Result<(), ProbeError> {
        let name = if expandable { "expandable" } else { "default" };
        let path = self.dir.join(format!("scenarios-{name}.json"));
        let text = serde_json::to_string(scenarios)
            .map_err(|e| ProbeError::Failed(format!("scenarios to JSON: {e}")))?;
        std::fs::write(&path, text)?;
        let log = std::fs::File::create(self.dir.join(format!("probe-{name}.log")))?;
        let mut cmd = self.command();
        cmd.arg("run").arg(&path).arg("--device").arg(&self.device);
        if self.simulate_stats {
            cmd.arg("--simulate-stats");
        }
        // The allocator reads this once, at CUDA initialization: one process per setting.
        if expandable {
            cmd.env("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True");
        } else {
            cmd.env_remove("PYTORCH_CUDA_ALLOC_CONF");
        }
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .spawn()
            .map_err(|e| {
                ProbeError::Failed(format!("cannot start {}: {e}", self.python.display()))
            })?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| ProbeError::Failed("no stdout from the probe".into()))?;
        let mut seen = 0usize;
        for line in BufReader::new(stdout).lines() {
            let line = line?;
            let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) else {
                continue;
            };
            match v.get("type").and_then(|t| t.as_str()) {
                Some("workspace") => {
                    let bytes = v.get("bytes").and_then(|b| b.as_u64()).unwrap_or(0);
                    let count = v.get("count").and_then(|b| b.as_u64()).unwrap_or(0);
                    if !expandable && bytes > 0 && count > 0 {
                        out.workspace = Some(WorkspaceProbe { bytes, count });
                        out.workspace_method =
                            v.get("method").and_then(|m| m.as_str()).map(str::to_string);
                    }
                }
                Some("row") => {
                    let row: Row = serde_json::from_value(v)
                        .map_err(|e| ProbeError::Failed(format!("a row the probe wrote: {e}")))?;
                    tick(&row.id);
                    out.rows.push(row);
                    seen += 1;
                }
                _ => {}
            }
        }
        let status = child.wait()?;
        // A crash (a segfault, a killed process) loses the remaining scenarios, not the run.
        for s in &scenarios[seen.min(scenarios.len())..] {
            tick(&s.id);
            out.rows.push(Row {
                status: Status::Error,
                ..Row::skipped(
                    &s.id,
                    &format!(
                        "the probe process ended ({status}) before this scenario; see {}",
                        self.log_tail(name)
                    ),
                )
            });
        }
        Ok(())
    }

    fn log_tail(&self, name: &str) -> String {
        let mut s = String::new();
        let _ = std::fs::File::open(self.dir.join(format!("probe-{name}.log")))
            .and_then(|mut f| f.read_to_string(&mut s));
        let tail: Vec<&str> = s.lines().rev().take(3).collect();
        tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
    }
}

impl Drop for PythonTrainer {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Trainer for PythonTrainer {
    fn stack(&mut self) -> Result<Stack, ProbeError> {
        let out = self
            .command()
            .arg("check")
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .map_err(|e| {
                ProbeError::Unavailable(format!("{} cannot run: {e}", self.python.display()))
            })?;
        let text = String::from_utf8_lossy(&out.stdout);
        let v: serde_json::Value = text
            .lines()
            .rev()
            .find_map(|l| serde_json::from_str(l).ok())
            .ok_or_else(|| {
                ProbeError::Unavailable(format!(
                    "{} printed no answer to the probe's check",
                    self.python.display()
                ))
            })?;
        if v.get("type").and_then(|t| t.as_str()) == Some("unavailable") {
            let reason = v
                .get("reason")
                .and_then(|r| r.as_str())
                .unwrap_or("unknown");
            return Err(ProbeError::Unavailable(reason.to_string()));
        }
        serde_json::from_value(v).map_err(|e| ProbeError::Failed(format!("the stack check: {e}")))
    }

    fn run(
        &mut self,
        scenarios: &[ProbeScenario],
        stack: &Stack,
        tick: &mut dyn FnMut(&str),
    ) -> Result<ProbeOutput, ProbeError> {
        let mut out = ProbeOutput {
            workspace: None,
            workspace_method: None,
            rows: Vec::new(),
        };
        let mut runnable: Vec<&ProbeScenario> = Vec::new();
        for s in scenarios {
            if s.lora.is_some() && stack.peft.is_none() {
                tick(&s.id);
                out.rows.push(Row::skipped(&s.id, "peft is not installed"));
            } else {
                runnable.push(s);
            }
        }
        for expandable in [false, true] {
            let group: Vec<&ProbeScenario> = runnable
                .iter()
                .copied()
                .filter(|s| s.expandable_segments == expandable)
                .collect();
            if !group.is_empty() {
                self.run_group(&group, expandable, &mut out, tick)?;
            }
        }
        // Rows in grid order, whatever order the groups ran in.
        let order = |id: &str| {
            scenarios
                .iter()
                .position(|s| s.id == id)
                .unwrap_or(usize::MAX)
        };
        out.rows.sort_by_key(|r| order(&r.id));
        Ok(out)
    }
}
