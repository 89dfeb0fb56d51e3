//! Answers as lines of text, for the site's on-demand worker: the worker computes a result and
//! sends it as lines, the page reads them back, so the code that computes it stays out of the
//! page's first download. Each line is one record, its fields split by U+001F (no link, label
//! or number contains it); numbers are written as Rust prints them (the shortest text that reads
//! back to the same value), so the page shows the figures the core computed, to the bit.

/// The field separator.
pub(crate) const SEP: char = '\u{1f}';

/// One record's fields joined into a line.
pub(crate) fn line(fields: &[String]) -> String {
    fields.join(&SEP.to_string())
}

/// A line's fields, read in order, each parse naming the answer, the record and the field that
/// failed.
pub(crate) struct Fields<'a> {
    answer: &'static str,
    what: &'static str,
    it: std::str::Split<'a, char>,
    at: usize,
}

impl<'a> Fields<'a> {
    /// The fields of `line`, a `what` in the `answer` (`"planner answer"`, `"a plan"`).
    pub(crate) fn new(answer: &'static str, what: &'static str, line: &'a str) -> Self {
        Fields {
            answer,
            what,
            it: line.split(SEP),
            at: 0,
        }
    }

    pub(crate) fn text(&mut self) -> Result<&'a str, String> {
        self.at += 1;
        self.it
            .next()
            .ok_or_else(|| format!("{}: {} has no field {}", self.answer, self.what, self.at))
    }

    pub(crate) fn num<T: std::str::FromStr>(&mut self) -> Result<T, String> {
        let t = self.text()?;
        t.parse().map_err(|_| self.bad(t))
    }

    /// A number, or none for an empty field.
    pub(crate) fn opt(&mut self) -> Result<Option<f64>, String> {
        let t = self.text()?;
        if t.is_empty() {
            Ok(None)
        } else {
            t.parse().map(Some).map_err(|_| self.bad(t))
        }
    }

    fn bad(&self, t: &str) -> String {
        format!("{}: {} field {}: `{t}`", self.answer, self.what, self.at)
    }
}
