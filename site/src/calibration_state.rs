//! Calibration files for the site: the view model of the calibration page (built from a file's
//! text, validated by the core), and the user's own file, kept for the browser session.
//!
//! A loaded file is untrusted input: it goes through [`Calibration::parse`] (constants, with
//! the field named on a bad value) and the core's schema types (the rest); every value is then
//! rendered as text by Yew, never as markup.

use std::rc::Rc;

use headroom_core::calibration::CalibrationSource;
use headroom_core::calibration::schema::{
    Bandwidth, Constants, ErrorTable, LevelError, Levels, MatmulPoint, Measured, Prediction,
    Status, Unsupported,
};
use headroom_core::catalog::GpuCatalog;
use headroom_core::{Calibration, Scenario, codec};
use serde_json::Value;
use yew::prelude::*;

/// The largest calibration file the site reads (a full run is about 200 KB).
pub const MAX_FILE_BYTES: f64 = 4_000_000.0;

/// The session storage key of the user's own file (name and text).
const STORAGE_KEY: &str = "headroom.calibration";

/// One calibration file, checked and ready to show.
#[derive(Debug)]
pub struct CalibrationView {
    /// The file name (or stem) it was read from.
    pub name: String,
    pub file: FileView,
    /// The constants as the core reads them (what the calculator uses).
    pub calibration: Calibration,
    /// The catalog's name of the GPU; `None` when the catalog has no such id (then no
    /// calculator scenario can use this file).
    pub gpu_name: Option<String>,
    /// Made by calibrate's fake backend: test data, not a measurement.
    pub fake: bool,
    pub rows: Vec<RowView>,
}

// Views are compared by identity (props and memo keys): a deep comparison would only cost
// download size, and a view never changes once read.
impl PartialEq for CalibrationView {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
    }
}

impl PartialEq for UserCalibration {
    fn eq(&self, other: &Self) -> bool {
        Rc::ptr_eq(&self.view, &other.view)
    }
}

/// One scenario row: what was measured, what the core predicts with the fitted constants.
#[derive(Debug)]
pub struct RowView {
    pub id: String,
    pub held_out: bool,
    pub status: Status,
    pub measured: Option<Levels>,
    pub predicted_before: Prediction,
    pub predicted_after: Prediction,
    /// Signed relative error of the device-level peak, in percent (positive: over-estimate),
    /// before and after fitting; `None` without a measurement.
    pub device_error_before: Option<f64>,
    pub device_error_after: Option<f64>,
    /// The calculator's query for this scenario (re-encoded by the core, so only link-safe
    /// characters); `None` when the file's link does not decode.
    pub link: Option<String>,
}

/// `(predicted - measured) / measured`, in percent; `None` when nothing was measured.
pub fn error_pct(predicted: u64, measured: u64) -> Option<f64> {
    (measured > 0).then(|| (predicted as f64 - measured as f64) / measured as f64 * 100.0)
}

/// Error statistics of the held-out rows at the three levels, recomputed from the rows
/// (`after`: with the fitted constants, else with the defaults). `None` without held-out rows.
pub fn held_out_errors(rows: &[RowView], after: bool) -> Option<ErrorTable> {
    let pick = |f: fn(&Levels) -> u64, g: fn(&Prediction) -> u64| -> Option<LevelError> {
        let errs: Vec<f64> = rows
            .iter()
            .filter(|r| r.held_out && r.status == Status::Ok)
            .filter_map(|r| {
                let m = r.measured.as_ref()?;
                let p = if after {
                    &r.predicted_after
                } else {
                    &r.predicted_before
                };
                error_pct(g(p), f(m))
            })
            .collect();
        level_error(&errs)
    };
    Some(ErrorTable {
        allocated: pick(|m| m.allocated, |p| p.allocated)?,
        reserved: pick(|m| m.reserved, |p| p.reserved)?,
        device: pick(|m| m.device, |p| p.device)?,
    })
}

/// Mean, median and largest absolute error and the mean signed error of `errs` (percent).
pub fn level_error(errs: &[f64]) -> Option<LevelError> {
    if errs.is_empty() {
        return None;
    }
    let n = errs.len() as f64;
    let abs: Vec<f64> = errs.iter().map(|e| e.abs()).collect();
    Some(LevelError {
        rows: errs.len(),
        mean_abs_pct: abs.iter().sum::<f64>() / n,
        median_abs_pct: median(abs.clone()),
        max_abs_pct: abs.iter().copied().fold(0.0, f64::max),
        mean_signed_pct: errs.iter().sum::<f64>() / n,
    })
}

/// The parts of a calibration file the page shows, with the schema's field names
/// (`headroom_core::calibration::schema::CalibrationFile` is the whole file). Read field by
/// field from JSON rather than through serde's derived readers: the same checks and field
/// names for a fraction of the site's download size.
#[derive(Debug)]
pub struct FileView {
    pub gpu_id: String,
    pub measured_on: String,
    pub mode: String,
    pub machine: MachineView,
    pub software: SoftwareView,
    pub native: NativeView,
    pub torch: TorchView,
    pub constants: Constants,
    pub constants_source: std::collections::BTreeMap<String, String>,
    pub defaults: Constants,
}

/// `machine` (see `schema::Machine`).
#[derive(Debug)]
pub struct MachineView {
    pub gpu_name: String,
    pub compute_capability: String,
    pub multiprocessors: u64,
    pub driver_version: Option<String>,
    pub driver_cuda_version: String,
    pub cublas_version: Option<String>,
}

/// `software` and `software.torch` (see `schema::Software`, `schema::Stack`).
#[derive(Debug)]
pub struct SoftwareView {
    pub stack: String,
    pub cuda: String,
    pub torch: Option<String>,
    pub torch_cuda: Option<String>,
    pub transformers: Option<String>,
}

/// `native` (see `schema::NativeReport`).
#[derive(Debug)]
pub struct NativeView {
    pub backend: String,
    pub granularity_minimum_bytes: u64,
    pub granularity_recommended_bytes: u64,
    pub matmul: Vec<MatmulPoint>,
    pub matmul_unsupported: Vec<Unsupported>,
    pub bandwidth: Vec<Bandwidth>,
    pub bandwidth_failed: Vec<Unsupported>,
}

/// `torch` (see `schema::TorchPart`).
#[derive(Debug)]
pub struct TorchView {
    pub status: String,
    pub reason: Option<String>,
    pub scenarios: u64,
    pub ok: u64,
    pub oom: u64,
    pub errors: u64,
    pub device_method: Option<String>,
    pub train_rows: u64,
    pub held_out_rows: u64,
    pub held_out_before: Option<ErrorTable>,
    pub held_out_after: Option<ErrorTable>,
}

/// Typed access to one JSON object by key; every error names the dotted path from the root.
#[derive(Clone, Copy)]
struct At<'a> {
    v: &'a Value,
    path: &'a str,
}

impl<'a> At<'a> {
    fn name(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.path)
        }
    }
    fn err(&self, key: &str, what: &str) -> String {
        format!("the field `{}` {what}", self.name(key))
    }
    /// The value at `key`; `None` when it is missing or null.
    fn opt(&self, key: &str) -> Option<&'a Value> {
        self.v.get(key).filter(|v| !v.is_null())
    }
    fn get(&self, key: &str) -> Result<&'a Value, String> {
        self.opt(key).ok_or_else(|| self.err(key, "is missing"))
    }
    fn text(&self, key: &str) -> Result<String, String> {
        let v = self.get(key)?;
        v.as_str()
            .map(str::to_string)
            .ok_or_else(|| self.err(key, &format!("must be a string, found {}", kind(v))))
    }
    fn opt_text(&self, key: &str) -> Result<Option<String>, String> {
        match self.opt(key) {
            None => Ok(None),
            Some(_) => self.text(key).map(Some),
        }
    }
    fn uint(&self, key: &str) -> Result<u64, String> {
        let v = self.get(key)?;
        v.as_u64().ok_or_else(|| {
            self.err(
                key,
                &format!("must be a non-negative integer, found {}", kind(v)),
            )
        })
    }
    fn num(&self, key: &str) -> Result<f64, String> {
        let v = self.get(key)?;
        v.as_f64()
            .ok_or_else(|| self.err(key, &format!("must be a number, found {}", kind(v))))
    }
    /// Each element of the array at `key` (missing: none), read by `f` with its indexed path.
    fn each<T>(
        &self,
        key: &str,
        f: impl Fn(At<'_>) -> Result<T, String>,
    ) -> Result<Vec<T>, String> {
        let Some(v) = self.opt(key) else {
            return Ok(Vec::new());
        };
        let items = v
            .as_array()
            .ok_or_else(|| self.err(key, "must be a list"))?;
        let base = self.name(key);
        items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                let path = format!("{base}[{i}]");
                f(At {
                    v: item,
                    path: &path,
                })
            })
            .collect()
    }
    /// Runs `f` on the object at `key`.
    fn obj<T>(&self, key: &str, f: impl FnOnce(At<'_>) -> Result<T, String>) -> Result<T, String> {
        let v = self.get(key)?;
        if !v.is_object() {
            return Err(self.err(key, "must be an object"));
        }
        let path = self.name(key);
        f(At { v, path: &path })
    }
    fn opt_obj<T>(
        &self,
        key: &str,
        f: impl FnOnce(At<'_>) -> Result<T, String>,
    ) -> Result<Option<T>, String> {
        match self.opt(key) {
            None => Ok(None),
            Some(_) => self.obj(key, f).map(Some),
        }
    }
}

/// What a JSON value is, for messages (its text could be long, and printing it costs code).
fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "true or false",
        Value::Number(n) if n.is_f64() => "a fraction",
        Value::Number(n) if n.is_i64() && !n.is_u64() => "a negative number",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// A measurement: its median, and its spread when the file has it. The app's embedded copies
/// keep medians only (the page fetches the whole file); a spread left out reads as the median
/// itself over 0 runs, which the page shows as not known.
fn measured(a: At<'_>) -> Result<Measured, String> {
    let median = a.num("median")?;
    let or_median = |key| a.opt(key).map_or(Ok(median), |_| a.num(key));
    Ok(Measured {
        unit: a.opt_text("unit")?.unwrap_or_default(),
        method: a.opt_text("method")?.unwrap_or_default(),
        reps: u32::try_from(a.opt("reps").map_or(Ok(0), |_| a.uint("reps"))?).unwrap_or(u32::MAX),
        median,
        min: or_median("min")?,
        max: or_median("max")?,
        q1: or_median("q1")?,
        q3: or_median("q3")?,
    })
}

/// A measurement the file leaves out: every figure not a number.
fn unmeasured() -> Measured {
    Measured {
        unit: String::new(),
        method: String::new(),
        reps: 0,
        median: f64::NAN,
        min: f64::NAN,
        max: f64::NAN,
        q1: f64::NAN,
        q3: f64::NAN,
    }
}

fn unsupported(a: At<'_>) -> Result<Unsupported, String> {
    Ok(Unsupported {
        dtype: a.text("dtype")?,
        reason: a.text("reason")?,
    })
}

fn constants(a: At<'_>) -> Result<Constants, String> {
    Ok(Constants {
        cuda_context_bytes: a.uint("cuda_context_bytes")?,
        cublas_workspace_bytes: a.uint("cublas_workspace_bytes")?,
        cublas_workspaces: a.uint("cublas_workspaces")?,
        reserved_slack_fraction: a.num("reserved_slack_fraction")?,
        reserved_slack_fraction_expandable: a.num("reserved_slack_fraction_expandable")?,
        nccl_bytes: a.uint("nccl_bytes")?,
    })
}

fn error_table(a: At<'_>) -> Result<ErrorTable, String> {
    let level = |key: &str| {
        a.obj(key, |l| {
            Ok(LevelError {
                rows: usize::try_from(l.uint("rows")?).unwrap_or(usize::MAX),
                mean_abs_pct: l.num("mean_abs_pct")?,
                median_abs_pct: l.num("median_abs_pct")?,
                max_abs_pct: l.num("max_abs_pct")?,
                mean_signed_pct: l.num("mean_signed_pct")?,
            })
        })
    };
    Ok(ErrorTable {
        allocated: level("allocated")?,
        reserved: level("reserved")?,
        device: level("device")?,
    })
}

fn prediction(a: At<'_>) -> Result<Prediction, String> {
    Ok(Prediction {
        allocated: a.uint("allocated")?,
        reserved: a.uint("reserved")?,
        device: a.uint("device")?,
        fits: a.get("fits")?.as_bool().unwrap_or(false),
    })
}

fn row(a: At<'_>) -> Result<RowView, String> {
    let status = match a.text("status")?.as_str() {
        "ok" => Status::Ok,
        "oom" => Status::Oom,
        "error" => Status::Error,
        "skipped" => Status::Skipped,
        other => {
            return Err(a.err(
                "status",
                &format!("must be ok, oom, error or skipped, found `{other}`"),
            ));
        }
    };
    let measured = a.opt_obj("measured", |m| {
        Ok(Levels {
            allocated: m.uint("allocated")?,
            reserved: m.uint("reserved")?,
            device: m.uint("device")?,
        })
    })?;
    let predicted_before = a.obj("predicted_before", prediction)?;
    let predicted_after = a.obj("predicted_after", prediction)?;
    let err = |p: &Prediction| {
        measured
            .as_ref()
            .and_then(|m| error_pct(p.device, m.device))
    };
    Ok(RowView {
        id: a.text("id")?,
        held_out: a.text("split")? == "held_out",
        status,
        device_error_before: err(&predicted_before),
        device_error_after: err(&predicted_after),
        measured,
        predicted_before,
        predicted_after,
        link: safe_link(&a.text("link")?),
    })
}

/// The calculator's query for a file's link: through the core's codec and back, so a hostile
/// link cannot become an address.
fn safe_link(link: &str) -> Option<String> {
    codec::decode(link)
        .ok()
        .map(|s: Scenario| codec::encode(&s))
}

fn file_view(root: At<'_>) -> Result<(FileView, Vec<RowView>), String> {
    let machine = root.obj("machine", |m| {
        Ok(MachineView {
            gpu_name: m.text("gpu_name")?,
            compute_capability: m.text("compute_capability")?,
            multiprocessors: m.uint("multiprocessors")?,
            driver_version: m.opt_text("driver_version")?,
            driver_cuda_version: m.text("driver_cuda_version")?,
            cublas_version: m.opt_text("cublas_version")?,
        })
    })?;
    let software = root.obj("software", |s| {
        let (torch, torch_cuda, transformers) = s
            .opt_obj("torch", |t| {
                Ok((
                    t.opt_text("torch")?,
                    t.opt_text("torch_cuda")?,
                    t.opt_text("transformers")?,
                ))
            })?
            .unwrap_or_default();
        Ok(SoftwareView {
            stack: s.text("stack")?,
            cuda: s.text("cuda")?,
            torch,
            torch_cuda,
            transformers,
        })
    })?;
    let native = root.obj("native", |n| {
        Ok(NativeView {
            backend: n.text("backend")?,
            granularity_minimum_bytes: n.uint("granularity_minimum_bytes")?,
            granularity_recommended_bytes: n.uint("granularity_recommended_bytes")?,
            matmul: n.each("matmul", |p| {
                let efficiency = match p.opt("efficiency") {
                    None => None,
                    Some(_) => Some(p.num("efficiency")?),
                };
                // The embedded copy leaves the throughput out (the efficiency is what
                // estimates read): not a number then, which the chart skips.
                let tflops = match p.opt("tflops") {
                    None => unmeasured(),
                    Some(_) => p.obj("tflops", measured)?,
                };
                Ok(MatmulPoint {
                    dtype: p.text("dtype")?,
                    n: p.uint("n")?,
                    tflops,
                    efficiency,
                })
            })?,
            matmul_unsupported: n.each("matmul_unsupported", unsupported)?,
            bandwidth: n.each("bandwidth", |b| {
                Ok(Bandwidth {
                    kind: b.text("kind")?,
                    bytes: b.uint("bytes")?,
                    gb_per_s: b.obj("gb_per_s", measured)?,
                })
            })?,
            bandwidth_failed: n.each("bandwidth_failed", unsupported)?,
        })
    })?;
    let torch = root.obj("torch", |t| {
        Ok(TorchView {
            status: t.text("status")?,
            reason: t.opt_text("reason")?,
            scenarios: t.uint("scenarios")?,
            ok: t.uint("ok")?,
            oom: t.uint("oom")?,
            errors: t.uint("errors")?,
            device_method: t.opt_text("device_method")?,
            train_rows: t.uint("train_rows")?,
            held_out_rows: t.uint("held_out_rows")?,
            held_out_before: t.opt_obj("held_out_before", error_table)?,
            held_out_after: t.opt_obj("held_out_after", error_table)?,
        })
    })?;
    let constants_source = root.obj("constants_source", |s| {
        let mut out = std::collections::BTreeMap::new();
        for (k, v) in s.v.as_object().into_iter().flatten() {
            let text = v
                .as_str()
                .ok_or_else(|| s.err(k, &format!("must be a string, found {}", kind(v))))?;
            out.insert(k.clone(), text.to_string());
        }
        Ok(out)
    })?;
    let file = FileView {
        gpu_id: root.text("gpu_id")?,
        measured_on: root.text("measured_on")?,
        mode: root.text("mode")?,
        machine,
        software,
        native,
        torch,
        constants: root.obj("constants", constants)?,
        constants_source,
        defaults: root.obj("defaults", constants)?,
    };
    Ok((file, root.each("rows", row)?))
}

/// The median of a few numbers. An insertion sort: a library sort of `f64`s would add its own
/// copy of the sorting code to the download.
fn median(mut v: Vec<f64>) -> f64 {
    for i in 1..v.len() {
        let mut j = i;
        while j > 0 && v[j - 1] > v[j] {
            v.swap(j - 1, j);
            j -= 1;
        }
    }
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Reads a calibration file into the page's view model. The error is one sentence naming the
/// file and the field.
pub fn view(name: &str, text: &str) -> Result<CalibrationView, String> {
    // The core's own check first: it names the file, the field and the allowed range of each
    // constant.
    let (_, calibration) = Calibration::parse(name, text).map_err(|e| format!("{BAD}: {e}"))?;
    let value: Value = serde_json::from_str(text).map_err(|e| format!("{BAD}: {name}: {e}"))?;
    view_parsed(name, calibration, &value)
}

const BAD: &str = "Not a calibration file Headroom can read";

/// [`view`] of a file already read as JSON (a published file as installed).
pub fn view_value(name: &str, value: &Value) -> Result<CalibrationView, String> {
    let (_, calibration) =
        Calibration::parse_value(name, value).map_err(|e| format!("{BAD}: {e}"))?;
    view_parsed(name, calibration, value)
}

fn view_parsed(
    name: &str,
    calibration: Calibration,
    value: &Value,
) -> Result<CalibrationView, String> {
    let bad = |e: String| format!("{BAD}: {name}: {e}");
    let (file, rows) = file_view(At { v: value, path: "" }).map_err(bad)?;
    let gpu_name = GpuCatalog::builtin()
        .get(&file.gpu_id)
        .ok()
        .map(|g| g.name.clone());
    Ok(CalibrationView {
        name: name.to_string(),
        fake: file.native.backend == "fake",
        gpu_name,
        calibration,
        rows,
        file,
    })
}

/// Whether a built-in calibration exists for `gpu_id`: the one `Calibration::for_gpu` picks,
/// as (file stem, measured on).
pub fn builtin_for(gpu_id: &str) -> Option<(String, String)> {
    let gpu = GpuCatalog::builtin().get(gpu_id).ok()?;
    match Calibration::for_gpu(gpu).source {
        CalibrationSource::Measured { file, measured_on } => Some((file, measured_on)),
        CalibrationSource::Assumed => None,
    }
}

/// The user's own calibration file, loaded on the calibration page.
#[derive(Debug, Clone)]
pub struct UserCalibration {
    pub view: Rc<CalibrationView>,
    /// The text as loaded, kept in session storage so it survives page loads.
    pub text: Rc<str>,
}

impl UserCalibration {
    pub fn from_text(name: &str, text: &str) -> Result<Self, String> {
        Ok(UserCalibration {
            view: Rc::new(view(name, text)?),
            text: Rc::from(text),
        })
    }

    /// The calibration for a scenario's GPU, when this file is for that GPU.
    pub fn for_gpu(&self, gpu_id: &str) -> Option<&Calibration> {
        (self.view.file.gpu_id == gpu_id).then_some(&self.view.calibration)
    }
}

/// What the pages share: the user's file (if any) and how to replace or drop it.
#[derive(Clone, PartialEq)]
pub struct CalibrationContext {
    pub user: Option<Rc<UserCalibration>>,
    pub set: Callback<Option<Rc<UserCalibration>>>,
}

/// The user's calibration from the context (`None` outside the app or when none is loaded).
#[hook]
pub fn use_user_calibration() -> Option<Rc<UserCalibration>> {
    use_context::<CalibrationContext>().and_then(|c| c.user)
}

/// `window.sessionStorage`, reached through `Reflect` (no extra web-sys features needed).
fn storage() -> Option<js_sys::Object> {
    let window = web_sys::window()?;
    js_sys::Reflect::get(&window, &"sessionStorage".into())
        .ok()?
        .dyn_into()
        .ok()
}

fn storage_call(method: &str, args: &[&str]) -> Option<wasm_bindgen::JsValue> {
    let store = storage()?;
    let f: js_sys::Function = js_sys::Reflect::get(&store, &method.into())
        .ok()?
        .dyn_into()
        .ok()?;
    let args: js_sys::Array = args
        .iter()
        .map(|a| wasm_bindgen::JsValue::from(*a))
        .collect();
    f.apply(&store, &args).ok()
}

use wasm_bindgen::JsCast as _;

/// The file loaded earlier in this browser session, re-checked (a stored file that no longer
/// parses is dropped).
pub fn load_session() -> Option<Rc<UserCalibration>> {
    let stored = storage_call("getItem", &[STORAGE_KEY])?.as_string()?;
    let (name, text) = stored.split_once('\n')?;
    match UserCalibration::from_text(name, text) {
        Ok(u) => Some(Rc::new(u)),
        Err(_) => {
            let _ = storage_call("removeItem", &[STORAGE_KEY]);
            None
        }
    }
}

/// Keeps (or forgets) the user's file for the rest of the session.
pub fn save_session(user: Option<&UserCalibration>) {
    match user {
        Some(u) => {
            // A file name holds no newline; it goes first, then the text.
            let name = u.view.name.replace('\n', " ");
            let _ = storage_call("setItem", &[STORAGE_KEY, &format!("{name}\n{}", u.text)]);
        }
        None => {
            let _ = storage_call("removeItem", &[STORAGE_KEY]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIXTURE: &str = include_str!(
        "../../crates/headroom-core/tests/fixtures/calibration/h100-sxm-80gb-cuda13.0-torch2.11.json"
    );

    #[test]
    fn the_fixture_becomes_a_view() {
        let v = view("fixture.json", FIXTURE).expect("the fixture reads");
        assert_eq!(v.file.gpu_id, "h100-sxm-80gb");
        assert!(v.gpu_name.is_some(), "the GPU is in the catalog");
        assert!(v.fake);
        assert_eq!(v.calibration.cuda_context_bytes, 636_485_632);
        assert_eq!(v.rows.len(), 12);
        assert!(
            v.rows.iter().all(|r| r.link.is_some()),
            "every link decodes"
        );
        assert!(v.rows.iter().any(|r| r.held_out));
    }

    #[test]
    fn recomputed_errors_match_the_files_statistics() {
        let v = view("fixture.json", FIXTURE).expect("the fixture reads");
        for (after, file) in [
            (false, v.file.torch.held_out_before.as_ref()),
            (true, v.file.torch.held_out_after.as_ref()),
        ] {
            let ours = held_out_errors(&v.rows, after).expect("held-out rows");
            let file = file.expect("statistics in the file");
            for (a, b) in [
                (&ours.allocated, &file.allocated),
                (&ours.reserved, &file.reserved),
                (&ours.device, &file.device),
            ] {
                assert_eq!(a.rows, b.rows);
                // The file rounds to two decimals.
                for (x, y) in [
                    (a.mean_abs_pct, b.mean_abs_pct),
                    (a.median_abs_pct, b.median_abs_pct),
                    (a.max_abs_pct, b.max_abs_pct),
                    (a.mean_signed_pct, b.mean_signed_pct),
                ] {
                    assert!((x - y).abs() <= 0.006, "{x} vs {y} (after: {after})");
                }
            }
        }
    }

    #[test]
    fn error_statistics_by_hand() {
        let e = level_error(&[10.0, -20.0, 30.0]).expect("some");
        assert_eq!(e.rows, 3);
        assert!((e.mean_abs_pct - 20.0).abs() < 1e-9);
        assert!((e.median_abs_pct - 20.0).abs() < 1e-9);
        assert!((e.max_abs_pct - 30.0).abs() < 1e-9);
        assert!((e.mean_signed_pct - 20.0 / 3.0).abs() < 1e-9);
        assert!(level_error(&[]).is_none());
        assert_eq!(error_pct(110, 100), Some(10.0));
        assert_eq!(error_pct(1, 0), None);
    }

    #[test]
    fn a_bad_file_names_the_field() {
        let e = view("x.json", "{").expect_err("not JSON");
        assert!(e.contains("x.json"), "{e}");
        let bad = FIXTURE.replace(
            "\"cuda_context_bytes\": 636485632",
            "\"cuda_context_bytes\": -1",
        );
        let e = view("x.json", &bad).expect_err("a negative context");
        assert!(e.contains("constants.cuda_context_bytes"), "{e}");
        let bad = FIXTURE.replacen("\"gpu_name\"", "\"gpu_nom\"", 1);
        let e = view("x.json", &bad).expect_err("a missing machine field");
        assert!(e.contains("`machine.gpu_name` is missing"), "{e}");
        let bad = FIXTURE.replacen("\"n\": 1024", "\"n\": \"big\"", 1);
        let e = view("x.json", &bad).expect_err("a bad matmul size");
        assert!(e.contains("`native.matmul[1].n` must be"), "{e}");
    }

    #[test]
    fn a_hostile_link_in_a_row_is_dropped() {
        assert_eq!(safe_link("javascript:alert(1)"), None);
        assert_eq!(safe_link("batch=2&model=<script>"), None);
        assert_eq!(safe_link("batch=2").as_deref(), Some("v=1&batch=2"));
    }

    #[test]
    fn the_user_file_applies_to_its_gpu_only() {
        let u = UserCalibration::from_text("mine.json", FIXTURE).expect("reads");
        assert!(u.for_gpu("h100-sxm-80gb").is_some());
        assert!(u.for_gpu("a100-sxm4-80gb").is_none());
    }
}
