//! The SVG builder the charts are written with: elements, text escaping, round ticks, axes
//! and the legend.

use std::fmt::Write as _;

use super::Palette;

/// An RGB colour, written as `#RRGGBB`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rgb(pub u8, pub u8, pub u8);

impl std::fmt::Display for Rgb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "#{:02X}{:02X}{:02X}", self.0, self.1, self.2)
    }
}

/// Font size of tick labels, axis titles and legends; the peak label is one larger.
pub const FONT: f64 = 11.0;

/// A rough width of `text` in a sans-serif font of `size` px (no font metrics in the
/// download: enough to size a legend box and keep labels inside the chart).
pub fn text_width(text: &str, size: f64) -> f64 {
    text.chars().count() as f64 * size * 0.56
}

/// Where a text's `x` is: its start, middle or end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Anchor {
    Start,
    Middle,
    End,
}

/// Where a text's `y` is: its top, its middle or its baseline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Baseline {
    Top,
    Middle,
    Bottom,
}

/// Writes `text` with XML's five special characters escaped.
pub fn escape_into(out: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
}

/// A number as an attribute: at most one decimal, none when whole.
fn num(out: &mut String, v: f64) {
    let r = (v * 10.0).round() / 10.0 + 0.0;
    let _ = write!(out, "{r}");
}

/// An SVG document being written: shapes in drawing order, then [`Svg::finish`].
#[derive(Debug)]
pub struct Svg {
    out: String,
}

impl Svg {
    /// A `width` x `height` document (CSS pixels) filled with `background`.
    pub fn new(width: u32, height: u32, background: Rgb) -> Svg {
        let mut out = String::with_capacity(8192);
        let _ = write!(
            out,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" \
             viewBox=\"0 0 {width} {height}\" font-family=\"sans-serif\">\
             <rect width=\"{width}\" height=\"{height}\" fill=\"{background}\"/>"
        );
        Svg { out }
    }

    fn attr(&mut self, name: &str, v: f64) {
        self.out.push(' ');
        self.out.push_str(name);
        self.out.push_str("=\"");
        num(&mut self.out, v);
        self.out.push('"');
    }

    /// A filled rectangle between two corners (in any order).
    pub fn rect(&mut self, (x0, y0): (f64, f64), (x1, y1): (f64, f64), fill: Rgb, opacity: f64) {
        self.out.push_str("<rect");
        self.attr("x", x0.min(x1));
        self.attr("y", y0.min(y1));
        self.attr("width", (x1 - x0).abs());
        self.attr("height", (y1 - y0).abs());
        let _ = write!(self.out, " fill=\"{fill}\"");
        if opacity < 1.0 {
            self.attr("fill-opacity", opacity);
        }
        self.out.push_str("/>");
    }

    /// A rectangle's outline, one pixel wide (on pixel centres, so it stays sharp).
    pub fn frame(&mut self, (x0, y0): (f64, f64), (x1, y1): (f64, f64), stroke: Rgb) {
        self.out.push_str("<rect");
        self.attr("x", x0.min(x1).round() + 0.5);
        self.attr("y", y0.min(y1).round() + 0.5);
        self.attr("width", (x1 - x0).abs().round());
        self.attr("height", (y1 - y0).abs().round());
        let _ = write!(self.out, " fill=\"none\" stroke=\"{stroke}\"/>");
    }

    /// A straight line.
    pub fn line(&mut self, (x0, y0): (f64, f64), (x1, y1): (f64, f64), stroke: Rgb, width: f64) {
        self.out.push_str("<line");
        self.attr("x1", x0);
        self.attr("y1", y0);
        self.attr("x2", x1);
        self.attr("y2", y1);
        let _ = write!(self.out, " stroke=\"{stroke}\"");
        self.attr("stroke-width", width);
        self.out.push_str("/>");
    }

    /// A one-pixel horizontal or vertical rule, snapped to a pixel centre so it stays sharp.
    pub fn rule(&mut self, from: (f64, f64), to: (f64, f64), stroke: Rgb) {
        let snap = |v: f64| v.round() + 0.5;
        let (from, to) = if from.0 == to.0 {
            ((snap(from.0), from.1), (snap(to.0), to.1))
        } else {
            ((from.0, snap(from.1)), (to.0, snap(to.1)))
        };
        self.line(from, to, stroke, 1.0);
    }

    /// Connected line segments through `points`.
    pub fn polyline(
        &mut self,
        points: impl IntoIterator<Item = (f64, f64)>,
        stroke: Rgb,
        width: f64,
    ) {
        self.out
            .push_str("<polyline fill=\"none\" stroke-linejoin=\"round\"");
        let _ = write!(self.out, " stroke=\"{stroke}\"");
        self.attr("stroke-width", width);
        self.out.push_str(" points=\"");
        for (i, (x, y)) in points.into_iter().enumerate() {
            if i > 0 {
                self.out.push(' ');
            }
            num(&mut self.out, x);
            self.out.push(',');
            num(&mut self.out, y);
        }
        self.out.push_str("\"/>");
    }

    /// A filled circle.
    pub fn circle(&mut self, (cx, cy): (f64, f64), r: f64, fill: Rgb) {
        self.out.push_str("<circle");
        self.attr("cx", cx);
        self.attr("cy", cy);
        self.attr("r", r);
        let _ = write!(self.out, " fill=\"{fill}\"/>");
    }

    /// Text at `(x, y)`, escaped; `rotated` turns it a quarter left (for a y axis title).
    #[allow(clippy::too_many_arguments)]
    pub fn text(
        &mut self,
        (x, y): (f64, f64),
        text: &str,
        size: f64,
        fill: Rgb,
        anchor: Anchor,
        baseline: Baseline,
        rotated: bool,
    ) {
        self.out.push_str("<text");
        self.attr("x", x);
        self.attr("y", y);
        match baseline {
            Baseline::Top => self.out.push_str(" dy=\"0.76em\""),
            Baseline::Middle => self.out.push_str(" dy=\"0.35em\""),
            Baseline::Bottom => {}
        }
        match anchor {
            Anchor::Start => {}
            Anchor::Middle => self.out.push_str(" text-anchor=\"middle\""),
            Anchor::End => self.out.push_str(" text-anchor=\"end\""),
        }
        self.attr("font-size", size);
        let _ = write!(self.out, " fill=\"{fill}\"");
        if rotated {
            self.out.push_str(" transform=\"rotate(-90 ");
            num(&mut self.out, x);
            self.out.push(' ');
            num(&mut self.out, y);
            self.out.push_str(")\"");
        }
        self.out.push('>');
        escape_into(&mut self.out, text);
        self.out.push_str("</text>");
    }

    /// The document.
    pub fn finish(mut self) -> String {
        self.out.push_str("</svg>");
        self.out
    }
}

/// Round tick values from `lo` to `hi`: steps of 1, 2 or 5 times a power of ten, at most
/// `max` of them (and at least two).
pub fn ticks(lo: f64, hi: f64, max: usize) -> (Vec<f64>, f64) {
    let span = (hi - lo).max(1e-9);
    let raw = span / max.max(2) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let first = (lo / step).ceil() as i64;
    let last = (hi / step + 1e-9).floor() as i64;
    ((first..=last).map(|i| i as f64 * step).collect(), step)
}

/// A tick value with as many decimals as its step needs.
pub fn tick_label(v: f64, step: f64) -> String {
    let decimals = if step >= 1.0 {
        0
    } else {
        (-step.log10()).ceil() as usize
    };
    format!("{v:.decimals$}")
}

/// The plotting area of a chart and its linear scales.
#[derive(Debug, Clone, Copy)]
pub struct Frame {
    pub left: f64,
    pub top: f64,
    pub right: f64,
    pub bottom: f64,
    pub x: (f64, f64),
    pub y: (f64, f64),
}

impl Frame {
    pub fn px(&self, x: f64) -> f64 {
        self.left + (x - self.x.0) / (self.x.1 - self.x.0) * (self.right - self.left)
    }
    pub fn py(&self, y: f64) -> f64 {
        self.bottom - (y - self.y.0) / (self.y.1 - self.y.0) * (self.bottom - self.top)
    }
    pub fn at(&self, (x, y): (f64, f64)) -> (f64, f64) {
        (self.px(x), self.py(y))
    }

    /// The y axis: a line, horizontal grid lines and labels at round values.
    pub fn y_axis(&self, svg: &mut Svg, pal: &Palette, label: impl Fn(f64, f64) -> String) {
        let max = ((self.bottom - self.top) / 22.0).clamp(2.0, 10.0) as usize;
        let (values, step) = ticks(self.y.0, self.y.1, max);
        for v in values {
            let y = self.py(v);
            svg.rule((self.left, y), (self.right, y), pal.grid);
            svg.rule((self.left - 5.0, y), (self.left, y), pal.grid);
            svg.text(
                (self.left - 9.0, y),
                &label(v, step),
                FONT,
                pal.text,
                Anchor::End,
                Baseline::Middle,
                false,
            );
        }
        svg.rule(
            (self.left - 1.0, self.top),
            (self.left - 1.0, self.bottom),
            pal.grid,
        );
    }

    /// The x axis line along the bottom.
    pub fn x_line(&self, svg: &mut Svg, pal: &Palette) {
        svg.rule(
            (self.left, self.bottom),
            (self.right, self.bottom),
            pal.grid,
        );
    }

    /// A tick and label under the x axis at `x` (data units), with a vertical grid line.
    pub fn x_tick(&self, svg: &mut Svg, pal: &Palette, x: f64, label: &str) {
        let px = self.px(x);
        svg.rule((px, self.top), (px, self.bottom), pal.grid);
        svg.rule((px, self.bottom), (px, self.bottom + 5.0), pal.grid);
        svg.text(
            (px, self.bottom + 8.0),
            label,
            FONT,
            pal.text,
            Anchor::Middle,
            Baseline::Top,
            false,
        );
    }

    /// Axis titles: `x` centred under the x axis, its baseline on the chart's lower edge
    /// (`edge.1`), and `y` turned a quarter, centred beside the y axis at its left edge (`edge.0`).
    pub fn titles(&self, svg: &mut Svg, pal: &Palette, x: &str, y: Option<&str>, edge: (f64, f64)) {
        svg.text(
            ((self.left + self.right) / 2.0, edge.1),
            x,
            FONT,
            pal.text,
            Anchor::Middle,
            Baseline::Bottom,
            false,
        );
        if let Some(y) = y {
            svg.text(
                (edge.0, (self.top + self.bottom) / 2.0),
                y,
                FONT,
                pal.text,
                Anchor::Middle,
                Baseline::Top,
                true,
            );
        }
    }
}

/// What a legend entry shows before its name.
#[derive(Debug, Clone, Copy)]
pub enum Mark {
    /// A line of this width.
    Line(f64),
    /// A filled square.
    Square,
}

/// The legend box, in the lower right of the plotting area, in the chart's colours.
/// The legend box in the plotting area's corner that covers the fewest of `avoid` (pixel
/// points of the data, so the legend never hides a curve's peak or spike); bottom right first.
pub fn legend(
    svg: &mut Svg,
    frame: &Frame,
    pal: &Palette,
    entries: &[(&str, Rgb, Mark)],
    avoid: &[(f64, f64)],
) {
    if entries.is_empty() {
        return;
    }
    const ROW: f64 = 14.0;
    let widest = entries
        .iter()
        .map(|(name, ..)| text_width(name, FONT))
        .fold(0.0, f64::max);
    let (w, h) = (38.0 + widest + 10.0, entries.len() as f64 * ROW + 12.0);
    let (right, bottom) = (frame.right - 5.0, frame.bottom - 5.0);
    let (left, top) = ((frame.left + 5.0).min(right - w), frame.top + 24.0);
    let corners = [
        (right, bottom),
        (left + w, bottom),
        (right, top + h),
        (left + w, top + h),
    ];
    let covered = |(x1, y1): (f64, f64)| {
        avoid
            .iter()
            .filter(|(x, y)| {
                *x >= x1 - w - 4.0 && *x <= x1 + 4.0 && *y >= y1 - h - 4.0 && *y <= y1 + 4.0
            })
            .count()
    };
    let (x1, y1) = corners
        .iter()
        .copied()
        .min_by_key(|c| covered(*c))
        .unwrap_or((right, bottom));
    let (x0, y0) = ((x1 - w).max(frame.left + 2.0), y1 - h);
    svg.rect((x0, y0), (x1, y1), pal.background, 0.85);
    svg.frame((x0, y0), (x1, y1), pal.grid);
    for (i, (name, color, mark)) in entries.iter().enumerate() {
        let y = y0 + 6.0 + ROW * (i as f64 + 0.5);
        match mark {
            Mark::Line(width) => svg.line((x0 + 10.0, y), (x0 + 28.0, y), *color, *width),
            Mark::Square => svg.rect((x0 + 10.0, y - 5.0), (x0 + 22.0, y + 5.0), *color, 1.0),
        }
        svg.text(
            (x0 + 38.0, y),
            name,
            FONT,
            pal.text,
            Anchor::Start,
            Baseline::Middle,
            false,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The legend goes to the corner with none of the data in it.
    #[test]
    fn the_legend_keeps_off_the_data() {
        let pal = crate::charts::palette(false);
        let f = Frame {
            left: 50.0,
            top: 10.0,
            right: 600.0,
            bottom: 300.0,
            x: (0.0, 1.0),
            y: (0.0, 1.0),
        };
        let entries = [("a series", pal.text, Mark::Line(2.0))];
        let x_of_box = |avoid: &[(f64, f64)]| {
            let mut svg = Svg::new(640, 320, pal.background);
            legend(&mut svg, &f, &pal, &entries, avoid);
            let out = svg.finish();
            let at = out.find("fill-opacity").expect("the legend's box");
            let rect = &out[out[..at].rfind("<rect").expect("a rect")..at];
            let x = rect
                .split("x=\"")
                .nth(1)
                .expect("x")
                .split('"')
                .next()
                .expect("x");
            x.parse::<f64>().expect("a number")
        };
        // Nothing to avoid: bottom right.
        assert!(x_of_box(&[]) > 400.0);
        // A spike in the bottom right corner (the optimizer step at the end): elsewhere.
        let spike: Vec<(f64, f64)> = (0..30)
            .map(|i| (590.0, 300.0 - 10.0 * f64::from(i)))
            .collect();
        assert!(x_of_box(&spike) < 200.0);
    }

    #[test]
    fn ticks_are_round_and_within_range() {
        assert_eq!(
            ticks(0.0, 167.0, 9).0,
            vec![0.0, 20.0, 40.0, 60.0, 80.0, 100.0, 120.0, 140.0, 160.0]
        );
        let (t, step) = ticks(0.0, 0.9, 5);
        assert_eq!(step, 0.2);
        assert_eq!(tick_label(t[2], step), "0.4");
    }
}
