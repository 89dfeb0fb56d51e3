//! The core's modules form layers: no import circle among them (issue 28). A module's
//! references are the `crate::` and `super::` paths its source names (its unit tests left
//! out); a path counts for the longest module it names. Checked with modules grouped to their
//! first one, two and three path segments, so a circle through a parent and its children
//! shows at the coarser levels.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn source_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("src/ reads") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            source_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `model::hf` for src/model/hf/mod.rs, `scenario::padding` for src/scenario/padding.rs, the
/// empty path for lib.rs.
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file
        .strip_prefix(src)
        .expect("under src/")
        .with_extension("");
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts
}

/// The identifiers after each `prefix` in `code` (`crate::a::b::C` gives a, b, C).
fn paths_after<'a>(code: &'a str, prefix: &str) -> Vec<Vec<&'a str>> {
    code.match_indices(prefix)
        .filter(|(i, _)| {
            // Not part of a longer name (`headroom_core::`, `super::super::` counts once).
            !code[..*i]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':')
        })
        .map(|(i, _)| {
            let rest = &code[i + prefix.len()..];
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(rest.len());
            rest[..end].split("::").filter(|s| !s.is_empty()).collect()
        })
        .collect()
}

/// `use crate::{a::b, c};`: the paths inside the braces.
fn braced_paths(code: &str) -> Vec<Vec<&str>> {
    let mut out = Vec::new();
    for (i, _) in code.match_indices("use crate::{") {
        let rest = &code[i + "use crate::{".len()..];
        let Some(end) = rest.find("};") else { continue };
        for item in rest[..end].split([',', '{', '}']) {
            let item = item.trim();
            if !item.is_empty() {
                out.push(item.split("::").map(str::trim).collect());
            }
        }
    }
    out
}

/// The module graph at `level` path segments: who refers to whom.
fn graph(level: usize) -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    source_files(&src, &mut files);
    let modules: BTreeSet<Vec<String>> = files.iter().map(|f| module_of(&src, f)).collect();
    let key = |m: &[String]| m.iter().take(level).cloned().collect::<Vec<_>>().join("::");
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let me = module_of(&src, file);
        let text = std::fs::read_to_string(file).expect("source reads");
        let code = text.split("#[cfg(test)]\nmod tests").next().unwrap_or("");
        let code: String = code
            .lines()
            .map(|l| l.split("//").next().unwrap_or(""))
            .collect::<Vec<_>>()
            .join("\n");
        // `super::` is the parent of the file's module (of a mod.rs, its own parent too).
        let parent: Vec<String> = me
            .iter()
            .take(me.len().saturating_sub(1))
            .cloned()
            .collect();
        let mut named: Vec<Vec<String>> = Vec::new();
        for p in paths_after(&code, "crate::")
            .into_iter()
            .chain(braced_paths(&code))
        {
            named.push(p.iter().map(|s| s.to_string()).collect());
        }
        for p in paths_after(&code, "super::") {
            let mut full = parent.clone();
            full.extend(p.iter().map(|s| s.to_string()));
            named.push(full);
        }
        for path in named {
            let target = (1..=path.len())
                .rev()
                .map(|n| path[..n].to_vec())
                .find(|m| modules.contains(m));
            if let Some(t) = target {
                let (a, b) = (key(&me), key(&t));
                if a != b {
                    g.entry(a).or_default().insert(b);
                }
            }
        }
    }
    g
}

/// A circle of the graph, if there is one.
fn circle(g: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    fn visit(
        n: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        marks: &mut BTreeMap<String, Mark>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        match marks.get(n) {
            Some(Mark::Done) => return None,
            Some(Mark::Open) => {
                let from = stack.iter().position(|s| s == n).expect("on the stack");
                return Some(stack[from..].to_vec());
            }
            None => {}
        }
        marks.insert(n.to_string(), Mark::Open);
        stack.push(n.to_string());
        for m in g.get(n).into_iter().flatten() {
            if let Some(c) = visit(m, g, marks, stack) {
                return Some(c);
            }
        }
        stack.pop();
        marks.insert(n.to_string(), Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    g.keys()
        .find_map(|n| visit(n, g, &mut marks, &mut Vec::new()))
}

#[test]
fn the_core_has_no_import_circle() {
    for level in 1..=3 {
        let g = graph(level);
        assert!(
            g.len() > 10,
            "level {level}: only {} modules refer to others",
            g.len()
        );
        assert_eq!(circle(&g), None, "level {level}");
    }
}

/// The check finds a circle where one is (so it can fail): the graph with one edge back.
#[test]
fn a_circle_is_found() {
    let mut g = graph(1);
    assert!(
        g["estimate"].contains("time"),
        "estimate uses the time model"
    );
    g.entry("time".into())
        .or_default()
        .insert("estimate".into());
    let c = circle(&g).expect("a circle");
    assert!(
        c.contains(&"time".to_string()) && c.contains(&"estimate".to_string()),
        "{c:?}"
    );
}
