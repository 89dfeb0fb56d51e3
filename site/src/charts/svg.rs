//! The two charts, written as SVG documents by a small builder ([`Svg`]): shown in an image on
//! the page, and downloaded. Colours follow the light or dark scheme. Text is always escaped
//! (component and model names come from users' configs).

use std::fmt::Write as _;

use headroom_core::estimate::{Estimate, Lifetime, Phase};

const GIB: f64 = (1u64 << 30) as f64;

/// An RGB colour, written as `#RRGGBB`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rgb(pub u8, pub u8, pub u8);

impl std::fmt::Display for Rgb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "#{:02X}{:02X}{:02X}", self.0, self.1, self.2)
    }
}

/// Colours of one scheme.
#[derive(Debug, Clone, Copy)]
pub struct Palette {
    pub background: Rgb,
    pub text: Rgb,
    pub grid: Rgb,
    pub tensors: Rgb,
    pub allocated: Rgb,
    pub reserved: Rgb,
    pub device: Rgb,
    pub capacity: Rgb,
    pub persistent: Rgb,
    pub transient: Rgb,
    pub band: Rgb,
}

pub fn palette(dark: bool) -> Palette {
    if dark {
        Palette {
            background: Rgb(0x17, 0x1a, 0x21),
            text: Rgb(0xd9, 0xdd, 0xe6),
            grid: Rgb(0x33, 0x38, 0x44),
            tensors: Rgb(0x6c, 0xa8, 0xff),
            allocated: Rgb(0x4f, 0xd1, 0xc5),
            reserved: Rgb(0xf2, 0xb1, 0x4c),
            device: Rgb(0xff, 0x7a, 0x8a),
            capacity: Rgb(0xe6, 0xe6, 0xe6),
            persistent: Rgb(0x6c, 0xa8, 0xff),
            transient: Rgb(0xf2, 0xb1, 0x4c),
            band: Rgb(0x1f, 0x24, 0x2e),
        }
    } else {
        Palette {
            background: Rgb(0xff, 0xff, 0xff),
            text: Rgb(0x1d, 0x23, 0x2f),
            grid: Rgb(0xe3, 0xe6, 0xec),
            tensors: Rgb(0x1f, 0x5f, 0xd1),
            allocated: Rgb(0x0f, 0x8f, 0x84),
            reserved: Rgb(0xc2, 0x7a, 0x00),
            device: Rgb(0xc8, 0x2a, 0x44),
            capacity: Rgb(0x1d, 0x23, 0x2f),
            persistent: Rgb(0x1f, 0x5f, 0xd1),
            transient: Rgb(0xd9, 0x8a, 0x00),
            band: Rgb(0xf3, 0xf5, 0xf9),
        }
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
pub fn legend(svg: &mut Svg, frame: &Frame, pal: &Palette, entries: &[(&str, Rgb, Mark)]) {
    if entries.is_empty() {
        return;
    }
    const ROW: f64 = 14.0;
    let widest = entries
        .iter()
        .map(|(name, ..)| text_width(name, FONT))
        .fold(0.0, f64::max);
    let (w, h) = (38.0 + widest + 10.0, entries.len() as f64 * ROW + 12.0);
    let (x1, y1) = (frame.right - 5.0, frame.bottom - 5.0);
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

/// Reads one level of a timeline point.
type Level = fn(&headroom_core::estimate::TimelinePoint) -> u64;

/// The index of the timeline point where the tensor peak is.
pub fn peak_index(est: &Estimate) -> usize {
    est.timeline
        .iter()
        .position(|p| p.tensors == est.peak.tensors)
        .unwrap_or(0)
}

/// Memory over one step: tensors, allocated, reserved and device, the GPU's capacity and the peak.
pub fn draw_timeline(svg: &mut Svg, est: &Estimate, pal: &Palette, width: u32, height: u32) {
    let points = &est.timeline;
    if points.is_empty() {
        return;
    }
    let n = points.len() as f64;
    let capacity = est.verdict.capacity as f64 / GIB;
    let top = points
        .iter()
        .map(|p| p.device as f64 / GIB)
        .fold(capacity, f64::max)
        * 1.08;
    let (w, h) = (width as f64, height as f64);
    let f = Frame {
        left: 10.0 + 56.0,
        top: 10.0,
        right: w - 10.0,
        bottom: h - 10.0 - 34.0,
        x: (0.0, (n - 1.0).max(1.0)),
        y: (0.0, top.max(0.001)),
    };

    // Phase bands behind the lines, every other one shaded, each labelled at the top (over
    // the grid).
    let mut labels = Vec::new();
    let mut start = 0usize;
    let mut shade = false;
    for i in 1..=points.len() {
        if i == points.len() || points[i].phase != points[start].phase {
            let (x0, x1) = (start as f64, (i - 1) as f64 + 0.5);
            if shade {
                svg.rect(
                    (f.px((x0 - 0.5).max(0.0)), f.top),
                    (f.px(x1.min(f.x.1)), f.bottom),
                    pal.band,
                    1.0,
                );
            }
            if x1 - x0 >= n * 0.06 {
                labels.push((f.px(x0) + 5.0, phase_name(points[start].phase)));
            }
            shade = !shade;
            start = i;
        }
    }

    f.y_axis(svg, pal, |v, _| format!("{v:.0}"));
    f.x_line(svg, pal);
    f.titles(svg, pal, "one training step", Some("GiB"), (10.0, h - 10.0));
    for (x, name) in labels {
        let at = (x, f.top + 5.0);
        svg.text(
            at,
            name,
            FONT,
            pal.text,
            Anchor::Start,
            Baseline::Top,
            false,
        );
    }

    let series: [(&str, Rgb, Level); 4] = [
        ("device (nvidia-smi)", pal.device, |p| p.device),
        ("reserved", pal.reserved, |p| p.reserved),
        ("allocated", pal.allocated, |p| p.allocated),
        ("tensors", pal.tensors, |p| p.tensors),
    ];
    for (_, color, value) in series {
        svg.polyline(
            points
                .iter()
                .enumerate()
                .map(|(i, p)| f.at((i as f64, value(p) as f64 / GIB))),
            color,
            2.0,
        );
    }
    svg.line(
        f.at((0.0, capacity)),
        f.at((f.x.1, capacity)),
        pal.capacity,
        1.0,
    );

    let pi = peak_index(est);
    let peak = points[pi].device as f64 / GIB;
    let (px, py) = f.at((pi as f64, peak));
    svg.circle((px, py), 5.0, pal.device);
    // The label beside the marker, on the side with room, kept inside the plotting area.
    let label = format!("peak {:.1} GiB ({})", peak, phase_name(est.peak.phase));
    let label_w = text_width(&label, 12.0);
    let ly = f.py((peak + top * 0.035).min(top * 0.9));
    if (pi as f64) > n * 0.6 || px + 10.0 + label_w > f.right {
        let lx = (px - 12.0).max(f.left + 4.0 + label_w);
        svg.text(
            (lx, ly),
            &label,
            12.0,
            pal.text,
            Anchor::End,
            Baseline::Top,
            false,
        );
    } else {
        let lx = px + (n * 0.02) / f.x.1 * (f.right - f.left);
        svg.text(
            (lx, ly),
            &label,
            12.0,
            pal.text,
            Anchor::Start,
            Baseline::Top,
            false,
        );
    }

    let mut entries: Vec<(&str, Rgb, Mark)> = series
        .iter()
        .map(|(name, color, _)| (*name, *color, Mark::Line(3.0)))
        .collect();
    entries.push(("GPU memory", pal.capacity, Mark::Line(1.0)));
    legend(svg, &f, pal, &entries);
}

fn phase_name(p: Phase) -> &'static str {
    match p {
        Phase::Start => "start",
        Phase::Forward => "forward",
        Phase::Loss => "loss",
        Phase::Backward => "backward",
        Phase::Optimizer => "optimizer",
    }
}

/// The components as horizontal bars, largest first, persistent and transient in two colours.
pub fn draw_breakdown(svg: &mut Svg, est: &Estimate, pal: &Palette, width: u32, height: u32) {
    let mut rows: Vec<_> = est.components.iter().filter(|c| c.bytes > 0).collect();
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

/// Which chart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChartKind {
    Timeline,
    Breakdown,
}

impl ChartKind {
    pub fn id(self) -> &'static str {
        match self {
            ChartKind::Timeline => "timeline",
            ChartKind::Breakdown => "breakdown",
        }
    }

    /// The chart's height for a width (the breakdown grows with its rows).
    pub fn height(self, width: u32, est: &Estimate) -> u32 {
        match self {
            ChartKind::Timeline => (width as f64 * 0.5).clamp(260.0, 420.0) as u32,
            ChartKind::Breakdown => {
                let rows = est.components.iter().filter(|c| c.bytes > 0).count() as u32;
                60 + 24 * rows.max(1)
            }
        }
    }
}

/// The chart as an SVG document: what the page shows, and the export (for wikis that allow no
/// iframes).
pub fn svg(kind: ChartKind, est: &Estimate, dark: bool, width: u32) -> Result<String, String> {
    let height = kind.height(width, est);
    let pal = palette(dark);
    let mut doc = Svg::new(width, height, pal.background);
    match kind {
        ChartKind::Timeline => draw_timeline(&mut doc, est, &pal, width, height),
        ChartKind::Breakdown => draw_breakdown(&mut doc, est, &pal, width, height),
    }
    Ok(doc.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn estimate(query: &str) -> Estimate {
        let scen = headroom_core::codec::decode(query).expect("a valid link");
        headroom_core::estimate(&scen).expect("it estimates")
    }

    fn escaped(s: &str) -> String {
        let mut out = String::new();
        escape_into(&mut out, s);
        out
    }

    #[test]
    fn the_timeline_exports_as_svg_with_its_peak() {
        let e = estimate("batch=2");
        let doc = svg(ChartKind::Timeline, &e, false, 960).expect("drawn");
        assert!(doc.starts_with("<svg"), "{}", &doc[..80.min(doc.len())]);
        assert!(doc.ends_with("</svg>"));
        assert!(doc.contains(&format!("peak {:.1} GiB", e.peak.device as f64 / GIB)));
        assert!(doc.contains("GPU memory") && doc.contains("backward"));
        for name in ["device (nvidia-smi)", "reserved", "allocated", "tensors"] {
            assert!(
                doc.contains(&format!(">{name}</text>")),
                "{name} in the legend"
            );
        }
        assert!(doc.contains(">one training step<") && doc.contains(">GiB<"));
        // The text at the sizes the chart asks for (11 px labels, 12 px for the peak).
        assert!(doc.contains("font-size=\"11\"") && doc.contains("font-size=\"12\""));
        // Four levels and the marker, in the palette's colours.
        let pal = palette(false);
        assert_eq!(doc.matches("<polyline").count(), 4);
        for c in [
            pal.device,
            pal.reserved,
            pal.allocated,
            pal.tensors,
            pal.capacity,
        ] {
            assert!(doc.contains(&format!("stroke=\"{c}\"")), "{c}");
        }
        assert!(doc.contains("<circle"));
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

    #[test]
    fn text_from_a_config_is_escaped() {
        // Component names can carry a config's text: 20 characters, short enough to be shown whole.
        let hostile = "<img src=x>&\"'/\"";
        let mut e = estimate("model=qwen2.5-0.5b");
        e.components[0].name = hostile.into();
        e.components[0].bytes = e.components.iter().map(|c| c.bytes).max().unwrap_or(1) + 1;
        for kind in [ChartKind::Breakdown, ChartKind::Timeline] {
            let doc = svg(kind, &e, false, 960).expect("drawn");
            assert!(!doc.contains("<img") && !doc.contains("x>&"), "{doc}");
        }
        let doc = svg(ChartKind::Breakdown, &e, false, 960).expect("drawn");
        assert!(doc.contains(">&lt;img src=x&gt;&amp;&quot;&apos;/&quot;</text>"));
        let mut doc = Svg::new(10, 10, Rgb(0, 0, 0));
        doc.text(
            (0.0, 0.0),
            "<&>\"'",
            11.0,
            Rgb(1, 2, 3),
            Anchor::Start,
            Baseline::Top,
            false,
        );
        assert!(doc.finish().contains(">&lt;&amp;&gt;&quot;&apos;</text>"));
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

    #[test]
    fn narrow_charts_keep_their_text_inside() {
        // The peak label ends inside the chart at a phone's width (the peak is near the end).
        let e = estimate("");
        let doc = svg(ChartKind::Timeline, &e, false, 300).expect("drawn");
        let label = format!("peak {:.1} GiB", e.peak.device as f64 / GIB);
        let at = doc.find(&label).expect("the peak label");
        let tag = &doc[doc[..at].rfind("<text").expect("its element")..at];
        let x: f64 = tag
            .split("x=\"")
            .nth(1)
            .and_then(|r| r.split('"').next())
            .and_then(|v| v.parse().ok())
            .expect("an x");
        assert!(tag.contains("text-anchor=\"end\"") && x <= 290.0, "{tag}");
        // Breakdown names shortened to the label area's width.
        let doc = svg(ChartKind::Breakdown, &e, false, 300).expect("drawn");
        assert!(doc.contains('…'));
    }

    #[test]
    fn the_peak_index_points_at_the_tensor_peak() {
        let e = estimate("");
        assert_eq!(e.timeline[peak_index(&e)].tensors, e.peak.tensors);
    }
}
