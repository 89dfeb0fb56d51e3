//! The strategy table as lines of text (`crate::wire`): the site's on-demand worker computes
//! the table (one estimate and one step time per row) and sends it, the page reads it back, so
//! the table's code stays out of the page's first download.

use super::Strategy;
use crate::wire::{Fields, line};

/// The name errors give this answer.
const ANSWER: &str = "strategy table answer";

/// One line per row, in the table's order.
pub fn to_lines(rows: &[Strategy]) -> Vec<String> {
    rows.iter()
        .map(|r| {
            line(&[
                r.id.clone(),
                r.technique.clone(),
                r.change.clone(),
                r.peak_device.to_string(),
                r.saved.to_string(),
                r.fits.to_string(),
                r.step_seconds.to_string(),
                r.tokens_per_step.to_string(),
                r.tokens_per_second.to_string(),
                r.tokens_per_second_per_gpu.to_string(),
                r.speed_change.to_string(),
                r.changes_training.to_string(),
                r.recommended.to_string(),
                r.link.clone(),
            ])
        })
        .collect()
}

/// The rows [`to_lines`] wrote.
pub fn from_lines(lines: &[String]) -> Result<Vec<Strategy>, String> {
    lines
        .iter()
        .map(|l| {
            let mut f = Fields::new(ANSWER, "a row", l);
            Ok(Strategy {
                id: f.text()?.to_string(),
                technique: f.text()?.to_string(),
                change: f.text()?.to_string(),
                peak_device: f.num()?,
                saved: f.num()?,
                fits: f.num()?,
                step_seconds: f.num()?,
                tokens_per_step: f.num()?,
                tokens_per_second: f.num()?,
                tokens_per_second_per_gpu: f.num()?,
                speed_change: f.num()?,
                changes_training: f.num()?,
                recommended: f.num()?,
                link: f.text()?.to_string(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::named_scenarios;
    use crate::{What, analyze_only};

    /// Every worked example's strategy table reads back equal to the core's, figures to the bit;
    /// a cut line names the row's field it lacks.
    #[test]
    fn tables_read_back_as_computed() {
        let mut rows = 0;
        for n in named_scenarios() {
            let table = analyze_only(&n.scenario, What::STRATEGIES, None)
                .expect("analyzes")
                .strategies
                .expect("asked for");
            assert_eq!(
                from_lines(&to_lines(&table)).expect("reads"),
                table,
                "{}",
                n.id
            );
            rows += table.len();
        }
        assert!(rows > 100, "{rows} rows");
        let line = to_lines(
            &analyze_only(&crate::Scenario::default(), What::STRATEGIES, None)
                .expect("analyzes")
                .strategies
                .expect("asked for"),
        )
        .remove(0);
        let cut = line.rsplit_once('\u{1f}').expect("fields").0.to_string();
        assert!(from_lines(&[cut]).is_err_and(|e| e.contains("a row has no field 14")));
    }
}
