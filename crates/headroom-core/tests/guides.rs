//! Every guide in `content/guides/` is parsed, every calculator block and live value is
//! evaluated by the core, every input changes what its block shows, every link resolves, and
//! the figures are compared with the committed `content/guides/SNAPSHOT.md`, so a change in the
//! core that moves a number in a guide shows up in review. `UPDATE_SNAPSHOTS=1` rewrites it,
//! and the guides' search text (`content/guides/search.json`).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use headroom_core::catalog::{GpuCatalog, PresetCatalog};
use headroom_core::codec;
use headroom_core::guide::{self, Block, Guide, Inline, Node};

/// The topics the guides must cover (issue 4), by slug.
const REQUIRED: [&str; 10] = [
    "memory-timeline",
    "mixed-precision",
    "optimizer-states",
    "activations-checkpointing",
    "logits-and-vocabulary",
    "batch-sequence-accumulation",
    "zero-fsdp-offload",
    "tensor-pipeline-parallelism",
    "cuda-context-allocator",
    "leaks-and-oom-debugging",
];

fn guides_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../content/guides")
}

/// Every guide file, parsed; a parse error fails with the file and line.
fn guides() -> Vec<Guide> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(guides_dir()).expect("content/guides exists") {
        let path = entry.expect("a directory entry").path();
        let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
        if path.extension().is_none_or(|e| e != "md") || matches!(stem, "README" | "SNAPSHOT") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("readable");
        out.push(guide::parse(stem, &text).unwrap_or_else(|e| panic!("{e}")));
    }
    out.sort_by_key(|g| (g.order, g.slug.clone()));
    out
}

#[test]
fn every_required_topic_has_a_guide_and_the_index_matches() {
    let all = guides();
    let slugs: Vec<&str> = all.iter().map(|g| g.slug.as_str()).collect();
    for want in REQUIRED {
        assert!(
            slugs.contains(&want),
            "no guide `{want}.md` in content/guides"
        );
    }
    let index = guide::index();
    assert_eq!(
        index.iter().map(|e| e.slug).collect::<Vec<_>>(),
        slugs,
        "the embedded index is the guides in reading order"
    );
    for (e, g) in index.iter().zip(&all) {
        // A build without `guide-summaries` (the site's) leaves the summaries out of the index.
        let summary = if cfg!(feature = "guide-summaries") {
            g.summary.as_str()
        } else {
            ""
        };
        assert_eq!(
            (e.title, e.summary, e.order),
            (g.title.as_str(), summary, g.order)
        );
    }
    let mut orders: Vec<u32> = all.iter().map(|g| g.order).collect();
    orders.dedup();
    assert_eq!(orders.len(), all.len(), "two guides share an `order`");
}

/// Other values tried for an input, to show the reader's change moves the block.
fn alternatives(key: &str, current: &str) -> Vec<String> {
    let list: &[&str] = match key {
        "model" => &[
            "llama-3.2-1b",
            "llama-3.1-8b",
            "mistral-7b-v0.1",
            "gpt2",
            "qwen2.5-0.5b",
        ],
        "gpu" => &[
            "a100-sxm4-40gb",
            "rtx-4090-24gb",
            "h100-sxm-80gb",
            "t4-16gb",
        ],
        "method" => &["full", "lora", "qlora"],
        "precision" => &["fp32", "bf16", "amp-bf16", "amp-fp16"],
        "optimizer" => &["adamw", "adamw8bit", "sgd", "adafactor"],
        "attention" => &["eager", "sdpa"],
        "ckpt" => &["none", "full", "selective", "every:2"],
        "loss" => &["hf", "fused"],
        "dp" => &["ddp", "zero1", "zero2", "zero3", "fsdp"],
        "targets" => &["attn", "all"],
        "opt_offload" | "param_offload" => &["none", "cpu", "nvme"],
        "dropout" => &["0", "0.1"],
        "fp8" => &["off", "tensorwise", "rowwise"],
        "act_offload" | "act_int8" | "keep_logits" | "sp" | "bucket_view" | "ds_bf16"
        | "expandable" | "graphs" | "compile" | "packing" => &["0", "1"],
        _ => {
            let n: u64 = current.parse().unwrap_or(1);
            return [n * 2, (n / 2).max(1), n * 4, 8, 1]
                .iter()
                .map(u64::to_string)
                .collect();
        }
    };
    list.iter().map(|s| s.to_string()).collect()
}

/// The block's evaluation as snapshot lines.
fn render(block: &Block, reader: &[(String, String)]) -> Result<String, String> {
    let e = guide::evaluate(block, reader)?;
    let mut s = String::new();
    writeln!(s, "| | {} |", e.headers.join(" | ")).expect("string");
    for r in &e.rows {
        let cells: Vec<String> = r
            .cells
            .iter()
            .map(|c| match c.value {
                Some(v) => format!("{} ({})", c.text, exact(v)),
                None => c.text.clone(),
            })
            .collect();
        writeln!(s, "| {} | {} |", r.label, cells.join(" | ")).expect("string");
    }
    Ok(s)
}

fn exact(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e18 {
        format!("{v:.0}")
    } else {
        format!("{v:.6}")
    }
}

/// Evaluates every block and live value, and checks each input of each block can move it.
fn snapshot(all: &[Guide]) -> String {
    let mut out = String::from(
        "# Guide figures (generated)\n\nEvery calculator block and live value of every guide, \
         evaluated by headroom-core with the guide's default inputs. Written by \
         `UPDATE_SNAPSHOTS=1 cargo test -p headroom-core --test suite guides::`; review changes here \
         like code.\n",
    );
    let mut errors = Vec::new();
    for g in all {
        writeln!(out, "\n## {} (`{}`)", g.title, g.slug).expect("string");
        let blocks: Vec<&Block> = g.blocks().collect();
        for (i, b) in blocks.iter().enumerate() {
            writeln!(
                out,
                "\n### Block {} (line {}): {} of `{}`{}\n",
                i + 1,
                b.line,
                b.view.id(),
                b.scenario,
                if b.set.is_empty() {
                    String::new()
                } else {
                    format!(" with `{}`", b.set)
                }
            )
            .expect("string");
            let at = format!("{}.md, block at line {}", g.slug, b.line);
            let base = match render(b, &[]) {
                Ok(s) => s,
                Err(m) => {
                    errors.push(format!("{at}: {m}"));
                    continue;
                }
            };
            out.push_str(&base);
            let scen = guide::base_scenario(b, &[]).expect("evaluated above");
            for key in &b.inputs {
                let current = codec::field_value(&scen, key).unwrap_or_default();
                let moved = alternatives(key, &current).into_iter().any(|v| {
                    v != current && render(b, &[(key.clone(), v)]).is_ok_and(|other| other != base)
                });
                if !moved {
                    errors.push(format!(
                        "{at}: the input `{key}` changes nothing in this block"
                    ));
                }
            }
        }
        for inline in g.inlines() {
            if let Inline::Value {
                metric,
                change,
                block,
            } = inline
            {
                match guide::evaluate_value(blocks[*block], &[], metric, change) {
                    Ok(c) => writeln!(
                        out,
                        "- value `{metric}`{} (block {}): {}",
                        if change.is_empty() {
                            String::new()
                        } else {
                            format!(" @ `{change}`")
                        },
                        block + 1,
                        c.text
                    )
                    .expect("string"),
                    Err(m) => errors.push(format!("{}.md, value {{{{{metric}}}}}: {m}", g.slug)),
                }
            }
        }
    }
    assert!(
        errors.is_empty(),
        "guide blocks that do not evaluate:\n  {}",
        errors.join("\n  ")
    );
    out
}

/// The snapshot's reserved and device figures are the replayed allocator's.
#[test]
#[cfg_attr(
    not(feature = "replay"),
    ignore = "the snapshot's reserved level is replayed"
)]
fn every_block_evaluates_and_matches_the_snapshot() {
    let text = snapshot(&guides());
    let path = guides_dir().join("SNAPSHOT.md");
    if std::env::var("UPDATE_SNAPSHOTS").is_ok_and(|v| v == "1") {
        std::fs::write(&path, &text).expect("writable");
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed != text {
        let line = committed
            .lines()
            .zip(text.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(committed.lines().count().min(text.lines().count()));
        panic!(
            "content/guides/SNAPSHOT.md is out of date (first difference at line {}):\n  \
             committed: {:?}\n  computed:  {:?}\nRun `UPDATE_SNAPSHOTS=1 cargo test -p \
             headroom-core --test suite guides::` and review the difference.",
            line + 1,
            committed.lines().nth(line).unwrap_or(""),
            text.lines().nth(line).unwrap_or("")
        );
    }
}

/// The guides' words for the site's search box, as `Guide::plain_text` gives them: the
/// calculator's bundle fetches `content/guides/search.json` (one request, no guide parser in
/// its download) where it once fetched and parsed every guide. `UPDATE_SNAPSHOTS=1` rewrites it.
#[test]
fn the_search_text_is_the_guides_plain_text() {
    let texts: serde_json::Map<String, serde_json::Value> = guides()
        .iter()
        .map(|g| (g.slug.clone(), serde_json::Value::from(g.plain_text())))
        .collect();
    let text = serde_json::to_string_pretty(&texts).expect("JSON") + "\n";
    let path = guides_dir().join("search.json");
    if std::env::var("UPDATE_SNAPSHOTS").is_ok_and(|v| v == "1") {
        std::fs::write(&path, &text).expect("writable");
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == text,
        "content/guides/search.json is out of date: run `UPDATE_SNAPSHOTS=1 cargo test -p \
         headroom-core --test suite guides::` and commit it"
    );
}

/// Where an internal link points, checked against the content it names.
fn check_link(
    href: &str,
    from: &Guide,
    anchors: &BTreeMap<String, Vec<String>>,
) -> Result<(), String> {
    if href.starts_with("http://") || href.starts_with("https://") {
        return Ok(());
    }
    let (path, fragment) = href.split_once('#').unwrap_or((href, ""));
    let (path, query) = path.split_once('?').unwrap_or((path, ""));
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    let anchor_in = |slug: &str| {
        fragment.is_empty()
            || anchors
                .get(slug)
                .is_some_and(|a| a.iter().any(|x| x == fragment))
    };
    let ok = match parts.as_slice() {
        [] if href.starts_with('#') => anchor_in(&from.slug),
        [] => codec::decode(query).is_ok(),
        ["guides"] => true,
        ["guides", slug] => anchors.contains_key(*slug) && anchor_in(slug),
        ["s", id] => match codec::named_scenario(id) {
            Some(n) => codec::decode_pairs(
                n.scenario.clone(),
                &codec::query_pairs(query).map_err(|e| e.to_string())?,
            )
            .is_ok(),
            None => false,
        },
        ["gpus"] | ["models"] | ["examples"] | ["calibration"] | ["compare"] => true,
        ["gpus", id] => GpuCatalog::builtin().get(id).is_ok(),
        ["models", id] => PresetCatalog::builtin().get(id).is_ok(),
        ["examples", n] => ["0", "1", "2", "3", "4"].contains(n),
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(format!("`{href}` points nowhere"))
    }
}

#[test]
fn every_link_resolves_and_every_guide_cites_sources() {
    let all = guides();
    let anchors: BTreeMap<String, Vec<String>> = all
        .iter()
        .map(|g| {
            (
                g.slug.clone(),
                g.toc().into_iter().map(|t| t.anchor).collect(),
            )
        })
        .collect();
    let mut errors = Vec::new();
    for g in &all {
        for href in g.links() {
            if let Err(m) = check_link(href, g, &anchors) {
                errors.push(format!("{}.md: {m}", g.slug));
            }
        }
        // The sources: a `## Sources` heading followed by at least one https link.
        let at = g
            .body
            .iter()
            .position(|n| matches!(n, Node::Heading { level: 2, text, .. } if text == "Sources"));
        let cited = at.is_some_and(|i| {
            g.body[i..].iter().any(|n| match n {
                Node::List { items, .. } => items.iter().flatten().any(
                    |x| matches!(x, Inline::Link { href, .. } if href.starts_with("https://")),
                ),
                Node::Paragraph(v) => v.iter().any(
                    |x| matches!(x, Inline::Link { href, .. } if href.starts_with("https://")),
                ),
                _ => false,
            })
        });
        if !cited {
            errors.push(format!(
                "{}.md: no `## Sources` section with an https link",
                g.slug
            ));
        }
        if g.blocks().next().is_none() {
            errors.push(format!("{}.md: no calculator block", g.slug));
        }
    }
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}

/// The link checker refuses what it should (so the test above can fail).
#[test]
fn the_link_checker_finds_broken_links() {
    let g = guide::parse(
        "t",
        "---\ntitle: T\nsummary: S\norder: 1\n---\n## Here\n\ntext\n",
    )
    .expect("parses");
    let anchors: BTreeMap<String, Vec<String>> =
        [("t".to_string(), vec!["here".to_string()])].into();
    for bad in [
        "/guides/nope",
        "/guides/t#nowhere",
        "/s/no-such",
        "/gpus/x",
        "/models/x",
        "/examples/9",
        "/nope",
        "#gone",
        "/?batch=0",
    ] {
        assert!(check_link(bad, &g, &anchors).is_err(), "{bad}");
    }
    for good in [
        "/guides/t#here",
        "#here",
        "/s/llama-3.1-8b-h100?batch=2",
        "/gpus/t4-16gb",
        "/models/gpt2",
        "/examples/3",
        "/?batch=2",
        "https://pytorch.org",
    ] {
        assert!(check_link(good, &g, &anchors).is_ok(), "{good}");
    }
}
