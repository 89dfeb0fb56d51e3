//! The breakdown chart: the estimate's components as horizontal bars, largest first.

use headroom_core::estimate::{Estimate, Lifetime};

use super::{Anchor, Baseline, FONT, Frame, GIB, Mark, Palette, Svg, legend, tick_label, ticks};

/// The components as horizontal bars, largest first, persistent and transient in two colours.
pub fn draw_breakdown(svg: &mut Svg, est: &Estimate, pal: &Palette, width: u32, height: u32) {
    // GPU memory only: host memory has its own line in the verdict.
    let mut rows: Vec<_> = est
        .components
        .iter()
        .filter(|c| c.bytes > 0 && c.level != headroom_core::estimate::Level::Host)
        .collect();
    rows.sort_by_key(|c| std::cmp::Reverse(c.bytes));
    if rows.is_empty() {
        return;
    }
    let max = rows[0].bytes as f64 / GIB * 1.12;
    let (w, h) = (width as f64, height as f64);
    let label_area = (w * 0.42).min(260.0);
    let f = Frame {
        left: 8.0 + label_area,
        top: 8.0,
        right: w - 8.0,
        bottom: h - 8.0 - 34.0,
        x: (0.0, max.max(0.001)),
        y: (0.0, rows.len() as f64),
    };
    // Round x ticks, as many as the width has room for, each with a vertical grid line.
    let (values, step) = ticks(
        0.0,
        f.x.1,
        ((f.right - f.left) / 40.0).clamp(2.0, 10.0) as usize,
    );
    for v in values {
        f.x_tick(svg, pal, v, &tick_label(v, step));
    }
    svg.rule((f.left - 1.0, f.top), (f.left - 1.0, f.bottom), pal.grid);
    f.x_line(svg, pal);
    f.titles(svg, pal, "GiB per GPU", None, (0.0, h - 8.0));

    // Names as long as the label area has room for (at most 30 characters).
    let chars = ((label_area - 12.0) / (FONT * 0.5)).clamp(8.0, 30.0) as usize;
    let row_h = (f.bottom - f.top) / rows.len() as f64;
    for (i, c) in rows.iter().enumerate() {
        let color = match c.lifetime {
            Lifetime::Persistent => pal.persistent,
            Lifetime::Transient => pal.transient,
        };
        let y = f.top + row_h * i as f64;
        svg.rect(
            (f.left, y + 2.0),
            (f.px(c.bytes as f64 / GIB), y + row_h - 2.0),
            color,
            1.0,
        );
        let mid = y + row_h / 2.0;
        svg.rule((f.left - 5.0, mid), (f.left, mid), pal.grid);
        svg.text(
            (f.left - 9.0, mid),
            &short(&c.name, chars),
            FONT,
            pal.text,
            Anchor::End,
            Baseline::Middle,
            false,
        );
    }
    legend(
        svg,
        &f,
        pal,
        &[
            ("persistent (all step)", pal.persistent, Mark::Square),
            ("transient", pal.transient, Mark::Square),
        ],
        &[],
    );
}

fn short(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut out: String = s.chars().take(n - 1).collect();
        out.push('…');
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::charts::tests::estimate;
    use crate::charts::{ChartKind, escape_into, svg};

    fn escaped(s: &str) -> String {
        let mut out = String::new();
        escape_into(&mut out, s);
        out
    }

    #[test]
    fn the_breakdown_exports_every_component_in_both_schemes() {
        let e = estimate("model=qwen2.5-0.5b&batch=4");
        for dark in [false, true] {
            let doc = svg(ChartKind::Breakdown, &e, dark, 800).expect("drawn");
            let bars = e.components.iter().filter(|c| c.bytes > 0).count();
            assert!(bars > 5);
            for c in e.components.iter().filter(|c| c.bytes > 0) {
                let label = short(&c.name, 30);
                assert!(doc.contains(&escaped(&label)), "{label} missing");
            }
            let background = if dark { "#171A21" } else { "#FFFFFF" };
            assert!(
                doc.to_uppercase().contains(background),
                "background of dark={dark}"
            );
        }
    }
}
