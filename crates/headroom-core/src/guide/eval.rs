//! Evaluating a calculator block: its scenario with the reader's inputs, each row's and
//! column's change, and the metrics, through the same estimate and time model as the calculator.

use super::block::{Block, View};
use crate::analysis::{Analysis, What, analyze_only};
use crate::codec::{decode_pairs, named_scenario, named_scenarios, query_pairs};
use crate::metrics::{self, Unit};
use crate::scenario::Scenario;

/// One figure: its exact value (`None` when the metric has none here, e.g. no micro-batch fits)
/// and how it reads.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    /// The metric this figure is (`peak.device`, `logits`, ...).
    pub metric: String,
    pub value: Option<f64>,
    pub unit: Unit,
    pub text: String,
}

/// One row of a block's result: its label, the share link (query string) of its scenario, and
/// one cell per column.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub label: String,
    pub link: String,
    pub cells: Vec<Cell>,
}

/// What a block shows: column headings and rows; for `timeline` and `breakdown`, the analysis
/// of the block's scenario too (the site draws the calculator's chart from it).
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluated {
    pub headers: Vec<String>,
    pub rows: Vec<Row>,
    pub analysis: Option<Box<Analysis>>,
}

/// The block's scenario: the named scenario, its `set:` changes, then the reader's values for
/// the block's inputs (other keys are ignored).
pub fn base_scenario(block: &Block, reader: &[(String, String)]) -> Result<Scenario, String> {
    let base = named_scenario(&block.scenario)
        .ok_or_else(|| {
            format!(
                "unknown scenario `{}`; named scenarios: {}",
                crate::error::shorten(&block.scenario),
                named_scenarios()
                    .iter()
                    .map(|n| n.id.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })?
        .scenario
        .clone();
    let set = query_pairs(&block.set).map_err(|e| format!("set: {e}"))?;
    let scen = decode_pairs(base, &set).map_err(|e| format!("set: {e}"))?;
    let inputs: Vec<(String, String)> = reader
        .iter()
        .filter(|(k, _)| block.inputs.contains(k))
        .cloned()
        .collect();
    decode_pairs(scen, &inputs).map_err(|e| e.to_string())
}

/// `scen` with a change (`key=value&...`) applied; later keys replace earlier ones.
fn changed(scen: &Scenario, queries: &[&str]) -> Result<Scenario, String> {
    let mut pairs: Vec<(String, String)> = Vec::new();
    for q in queries {
        for (k, v) in query_pairs(q).map_err(|e| e.to_string())? {
            pairs.retain(|(old, _)| *old != k);
            pairs.push((k, v));
        }
    }
    decode_pairs(scen.clone(), &pairs).map_err(|e| e.to_string())
}

/// The analysis a block needs: the estimate and the time model always, what fits only when a
/// metric asks for it, never the strategy table (a guide table row costs one estimate).
fn analysis(scen: &Scenario, with_fit: bool) -> Result<Analysis, String> {
    let what = if with_fit { What::FIT } else { What::ESTIMATE };
    analyze_only(scen, what, None).map_err(|e| e.to_string())
}

fn cell(a: &Analysis, metric: &str) -> Result<Cell, String> {
    let unit = metrics::metric_unit(metric);
    match metrics::eval_metric(a, metric) {
        Ok(v) => Ok(Cell {
            metric: metric.to_string(),
            value: Some(v),
            unit,
            text: metrics::display(unit, v),
        }),
        // `fit.*` has no value when nothing fits: that is an answer, not an error.
        Err(m) if m.contains("(null)") => Ok(Cell {
            metric: metric.to_string(),
            value: None,
            unit,
            text: "none fits".into(),
        }),
        Err(m) => Err(format!("metric `{metric}` {m}")),
    }
}

/// Evaluates a block for the reader's inputs. Every error names what is wrong (the tests run
/// every block of every guide, so an author sees it before a reader does).
pub fn evaluate(block: &Block, reader: &[(String, String)]) -> Result<Evaluated, String> {
    let base = base_scenario(block, reader)?;
    let with_fit = block.all_metrics().iter().any(|m| m.contains("fit."));
    let run = |queries: &[&str]| -> Result<Analysis, String> {
        analysis(&changed(&base, queries)?, with_fit)
    };
    let row = |label: &str, a: &Analysis, metrics: &[String]| -> Result<Row, String> {
        Ok(Row {
            label: label.to_string(),
            link: a.link.clone(),
            cells: metrics
                .iter()
                .map(|m| cell(a, m))
                .collect::<Result<_, _>>()?,
        })
    };
    let labels = |a: Option<&Analysis>, ms: &[String]| -> Vec<String> {
        ms.iter().map(|m| metrics::label(a, m)).collect()
    };
    match block.view {
        View::Summary => {
            let a = run(&[])?;
            let rows = block
                .metrics
                .iter()
                .map(|m| row(&metrics::label(Some(&a), m), &a, std::slice::from_ref(m)))
                .collect::<Result<_, _>>()?;
            Ok(Evaluated {
                headers: vec![String::new()],
                rows,
                analysis: None,
            })
        }
        View::Table | View::Bars => {
            let metrics = if block.view == View::Table {
                &block.columns
            } else {
                &block.metrics
            };
            let mut rows = Vec::new();
            let mut first = None;
            for change in &block.rows {
                let a =
                    run(&[&change.query]).map_err(|m| format!("row `{}`: {m}", change.label))?;
                rows.push(row(&change.label, &a, metrics)?);
                first.get_or_insert(a);
            }
            Ok(Evaluated {
                headers: labels(first.as_ref(), metrics),
                rows,
                analysis: None,
            })
        }
        View::Grid => {
            let mut rows = Vec::new();
            for r in &block.rows {
                let mut cells = Vec::new();
                let mut link = String::new();
                for c in &block.cols {
                    let a = run(&[&r.query, &c.query])
                        .map_err(|m| format!("cell `{}` x `{}`: {m}", r.label, c.label))?;
                    cells.push(cell(&a, &block.metric)?);
                    if link.is_empty() {
                        link = a.link.clone();
                    }
                }
                rows.push(Row {
                    label: r.label.clone(),
                    link,
                    cells,
                });
            }
            Ok(Evaluated {
                headers: block.cols.iter().map(|c| c.label.clone()).collect(),
                rows,
                analysis: None,
            })
        }
        View::Timeline | View::Breakdown => {
            let a = run(&[])?;
            let rows = a
                .estimate
                .components
                .iter()
                .filter(|c| c.bytes > 0)
                .map(|c| Row {
                    label: c.name.clone(),
                    link: a.link.clone(),
                    cells: vec![Cell {
                        metric: c.id.to_string(),
                        value: Some(c.bytes as f64),
                        unit: Unit::Bytes,
                        text: metrics::display(Unit::Bytes, c.bytes as f64),
                    }],
                })
                .collect();
            Ok(Evaluated {
                headers: vec!["Bytes (its largest)".into()],
                rows,
                analysis: Some(Box::new(a)),
            })
        }
    }
}

/// A live value in the text: `metric` for the block's scenario with the reader's inputs and
/// `change` applied.
pub fn evaluate_value(
    block: &Block,
    reader: &[(String, String)],
    metric: &str,
    change: &str,
) -> Result<Cell, String> {
    let base = base_scenario(block, reader)?;
    let a = analysis(&changed(&base, &[change])?, metric.contains("fit."))?;
    cell(&a, metric)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::analyze;

    fn block(text: &str) -> Block {
        let lines: Vec<&str> = text.lines().collect();
        Block::parse(&lines, 1).expect("parses")
    }

    /// A table cell is exactly what the calculator's analysis says for the same scenario.
    #[test]
    fn cells_are_the_calculators_numbers() {
        let b = block(
            "scenario: llama-3.1-8b-h100\ninputs: batch\nview: table\nrows: bf16 => precision=bf16 | 8-bit => optimizer=adamw8bit\ncolumns: peak.device, time.step_seconds, fit.max_micro_batch",
        );
        let reader = vec![("batch".to_string(), "2".to_string())];
        let e = evaluate(&b, &reader).expect("evaluates");
        assert_eq!(
            e.headers,
            vec!["Peak on the device", "Step time", "Largest micro-batch"]
        );
        let scen = crate::codec::decode("batch=2&precision=bf16").expect("decodes");
        let want = analyze(&scen).expect("analyzes");
        assert_eq!(
            e.rows[0].cells[0].value,
            Some(want.estimate.peak.device as f64)
        );
        assert_eq!(e.rows[0].cells[1].value, Some(want.time.step_seconds));
        assert_eq!(
            e.rows[0].cells[2].value,
            want.fit.and_then(|f| f.max_micro_batch).map(f64::from)
        );
        assert_eq!(e.rows[0].link, want.link);
    }

    #[test]
    fn grid_cells_combine_row_and_column() {
        let b = block(
            "scenario: llama-3.1-8b-h100\nview: grid\nrows: b1 => batch=1 | b4 => batch=4\ncols: 1k => seq=1024 | 4k => seq=4096\nmetric: logits",
        );
        let e = evaluate(&b, &[]).expect("evaluates");
        let scen = crate::codec::decode("batch=4&seq=1024").expect("decodes");
        let want = analyze(&scen).expect("analyzes");
        let logits = want
            .estimate
            .components
            .iter()
            .find(|c| c.id == "logits")
            .expect("logits");
        assert_eq!(e.rows[1].cells[0].value, Some(logits.bytes as f64));
        assert!(e.rows[1].cells[1].value > e.rows[1].cells[0].value);
    }

    #[test]
    fn reader_inputs_outside_the_block_are_ignored_and_bad_ones_named() {
        let b =
            block("scenario: llama-3.1-8b-h100\ninputs: seq\nview: summary\nmetrics: peak.device");
        let plain = evaluate(&b, &[]).expect("evaluates");
        let other = evaluate(&b, &[("batch".into(), "8".into())]).expect("evaluates");
        assert_eq!(plain, other);
        let e = evaluate(&b, &[("seq".into(), "0".into())]).expect_err("seq 0");
        assert!(e.contains("seq"), "{e}");
        let unknown = block("scenario: nope\nview: timeline");
        assert!(
            evaluate(&unknown, &[])
                .expect_err("unknown")
                .contains("unknown scenario")
        );
        let bad_metric = block("scenario: llama-3.1-8b-h100\nview: summary\nmetrics: bytes.nope");
        assert!(
            evaluate(&bad_metric, &[])
                .expect_err("metric")
                .contains("bytes.nope")
        );
    }
}
