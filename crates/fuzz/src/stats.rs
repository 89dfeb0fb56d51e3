//! How far generated inputs get (decoded, estimated, planned...), counted per target so a run
//! can report that its cases reach the arithmetic and not only the first parser. Printed by
//! each test target when `FUZZ_STATS` is set.

use std::collections::BTreeMap;
use std::sync::Mutex;

static COUNTS: Mutex<BTreeMap<(&'static str, &'static str), u64>> = Mutex::new(BTreeMap::new());

/// Counts one input of `target` that reached `stage`.
pub fn count(target: &'static str, stage: &'static str) {
    if let Ok(mut c) = COUNTS.lock() {
        *c.entry((target, stage)).or_default() += 1;
    }
}

/// `target stage: n` lines for every count so far, when `FUZZ_STATS` is set (else nothing).
pub fn report(cases: &str) -> String {
    if std::env::var_os("FUZZ_STATS").is_none() {
        return String::new();
    }
    let c = COUNTS.lock().map(|c| c.clone()).unwrap_or_default();
    let mut out = format!("{cases}:\n");
    for ((target, stage), n) in c {
        out.push_str(&format!("  {target} {stage}: {n}\n"));
    }
    out
}

/// Prints the text a target hands the core when `FUZZ_SHOW` is set, so that a failure found
/// with `BOLERO_RANDOM_SEED` can be read as the link or file it was.
pub fn show(target: &str, text: &str) {
    if std::env::var_os("FUZZ_SHOW").is_some() {
        eprintln!("{target} input: {text:?}");
    }
}
