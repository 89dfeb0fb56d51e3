//! A small progress bar on stderr (redrawn in place on a terminal, one line per phase otherwise).

use std::io::{IsTerminal, Write};
use std::time::Instant;

use crate::Progress;

/// Draws `[#####.....] 12/40 phase: label` on stderr.
#[derive(Debug)]
pub struct Bar {
    phase: String,
    total: u64,
    done: u64,
    tty: bool,
    started: Instant,
}

impl Default for Bar {
    fn default() -> Self {
        Bar {
            phase: String::new(),
            total: 0,
            done: 0,
            tty: std::io::stderr().is_terminal(),
            started: Instant::now(),
        }
    }
}

impl Bar {
    fn draw(&self, label: &str) {
        let width = 30u64;
        let filled = (self.done * width).checked_div(self.total).unwrap_or(0) as usize;
        let bar = format!(
            "[{}{}] {}/{} {} ({:.0} s): {}",
            "#".repeat(filled),
            ".".repeat(width as usize - filled),
            self.done,
            self.total,
            self.phase,
            self.started.elapsed().as_secs_f64(),
            label
        );
        let mut err = std::io::stderr().lock();
        if self.tty {
            let shown: String = bar.chars().take(118).collect();
            let _ = write!(err, "\r\x1b[2K{shown}");
        } else if self.done == self.total {
            let _ = writeln!(err, "{bar}");
        }
        let _ = err.flush();
    }

    /// Ends the current line (before printing something else).
    pub fn finish(&mut self) {
        if self.tty && self.total > 0 {
            let _ = writeln!(std::io::stderr());
        }
        self.total = 0;
    }
}

impl Progress for Bar {
    fn phase(&mut self, name: &str, steps: u64) {
        self.finish();
        self.phase = name.to_string();
        self.total = steps;
        self.done = 0;
        self.draw("starting");
    }

    fn tick(&mut self, label: &str) {
        self.done = (self.done + 1).min(self.total);
        self.draw(label);
    }

    fn note(&mut self, line: &str) {
        if self.tty && self.total > 0 {
            let _ = write!(std::io::stderr(), "\r\x1b[2K");
        }
        eprintln!("{line}");
        if self.total > 0 {
            self.draw("");
        }
    }
}
