//! The two charts, drawn by plotters on any backend (the site uses only SVG: shown in an
//! image on the page, and downloaded). Colours follow the light or dark scheme.

use headroom_core::estimate::{Estimate, Lifetime, Phase};
use plotters::coord::Shift;
use plotters::prelude::*;

const GIB: f64 = (1u64 << 30) as f64;

/// Colours of one scheme.
#[derive(Debug, Clone, Copy)]
pub struct Palette {
    pub background: RGBColor,
    pub text: RGBColor,
    pub grid: RGBColor,
    pub tensors: RGBColor,
    pub allocated: RGBColor,
    pub reserved: RGBColor,
    pub device: RGBColor,
    pub capacity: RGBColor,
    pub persistent: RGBColor,
    pub transient: RGBColor,
    pub band: RGBColor,
}

pub fn palette(dark: bool) -> Palette {
    if dark {
        Palette {
            background: RGBColor(0x17, 0x1a, 0x21),
            text: RGBColor(0xd9, 0xdd, 0xe6),
            grid: RGBColor(0x33, 0x38, 0x44),
            tensors: RGBColor(0x6c, 0xa8, 0xff),
            allocated: RGBColor(0x4f, 0xd1, 0xc5),
            reserved: RGBColor(0xf2, 0xb1, 0x4c),
            device: RGBColor(0xff, 0x7a, 0x8a),
            capacity: RGBColor(0xe6, 0xe6, 0xe6),
            persistent: RGBColor(0x6c, 0xa8, 0xff),
            transient: RGBColor(0xf2, 0xb1, 0x4c),
            band: RGBColor(0x1f, 0x24, 0x2e),
        }
    } else {
        Palette {
            background: RGBColor(0xff, 0xff, 0xff),
            text: RGBColor(0x1d, 0x23, 0x2f),
            grid: RGBColor(0xe3, 0xe6, 0xec),
            tensors: RGBColor(0x1f, 0x5f, 0xd1),
            allocated: RGBColor(0x0f, 0x8f, 0x84),
            reserved: RGBColor(0xc2, 0x7a, 0x00),
            device: RGBColor(0xc8, 0x2a, 0x44),
            capacity: RGBColor(0x1d, 0x23, 0x2f),
            persistent: RGBColor(0x1f, 0x5f, 0xd1),
            transient: RGBColor(0xd9, 0x8a, 0x00),
            band: RGBColor(0xf3, 0xf5, 0xf9),
        }
    }
}

/// Draw-time settings: colours and a scale for every size (1 for SVG, which is in CSS pixels).
#[derive(Debug, Clone, Copy)]
pub struct Style {
    pub palette: Palette,
    pub scale: f64,
}

impl Style {
    fn px(&self, v: f64) -> u32 {
        (v * self.scale).round().max(1.0) as u32
    }
    fn font(&self, size: f64) -> TextStyle<'static> {
        ("sans-serif", size * self.scale)
            .into_font()
            .color(&self.palette.text)
    }
}

type DrawResult = Result<(), String>;

/// Reads one level of a timeline point.
type Level = fn(&headroom_core::estimate::TimelinePoint) -> u64;

fn err<E: std::fmt::Debug>(e: E) -> String {
    format!("chart: {e:?}")
}

/// The index of the timeline point where the tensor peak is.
pub fn peak_index(est: &Estimate) -> usize {
    est.timeline
        .iter()
        .position(|p| p.tensors == est.peak.tensors)
        .unwrap_or(0)
}

/// Memory over one step: tensors, allocated, reserved and device, the GPU's capacity and the peak.
pub fn draw_timeline<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    est: &Estimate,
    style: &Style,
) -> DrawResult {
    let pal = style.palette;
    root.fill(&pal.background).map_err(err)?;
    let points = &est.timeline;
    if points.is_empty() {
        return Ok(());
    }
    let n = points.len() as f64;
    let capacity = est.verdict.capacity as f64 / GIB;
    let top = points
        .iter()
        .map(|p| p.device as f64 / GIB)
        .fold(capacity, f64::max)
        * 1.08;
    let mut chart = ChartBuilder::on(root)
        .margin(style.px(10.0))
        .x_label_area_size(style.px(34.0))
        .y_label_area_size(style.px(56.0))
        .build_cartesian_2d(0.0..(n - 1.0).max(1.0), 0.0..top.max(0.001))
        .map_err(err)?;

    // Phase bands behind the lines, every other one shaded, each labelled at the top.
    let mut start = 0usize;
    let mut shade = false;
    for i in 1..=points.len() {
        if i == points.len() || points[i].phase != points[start].phase {
            let (x0, x1) = (start as f64, (i - 1) as f64 + 0.5);
            if shade {
                chart
                    .draw_series(std::iter::once(Rectangle::new(
                        [((x0 - 0.5).max(0.0), 0.0), (x1, top)],
                        pal.band.filled(),
                    )))
                    .map_err(err)?;
            }
            if x1 - x0 >= n * 0.06 {
                chart
                    .draw_series(std::iter::once(Text::new(
                        phase_name(points[start].phase).to_string(),
                        (x0 + 0.3, top * 0.985),
                        style.font(11.0),
                    )))
                    .map_err(err)?;
            }
            shade = !shade;
            start = i;
        }
    }

    chart
        .configure_mesh()
        .disable_x_mesh()
        .light_line_style(TRANSPARENT)
        .bold_line_style(pal.grid)
        .axis_style(pal.grid)
        .y_desc("GiB")
        .x_desc("one training step")
        .x_labels(0)
        .label_style(style.font(11.0))
        .axis_desc_style(style.font(11.0))
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()
        .map_err(err)?;

    let series: [(&str, RGBColor, Level); 4] = [
        ("device (nvidia-smi)", pal.device, |p| p.device),
        ("reserved", pal.reserved, |p| p.reserved),
        ("allocated", pal.allocated, |p| p.allocated),
        ("tensors", pal.tensors, |p| p.tensors),
    ];
    for (name, color, value) in series {
        chart
            .draw_series(LineSeries::new(
                points
                    .iter()
                    .enumerate()
                    .map(|(i, p)| (i as f64, value(p) as f64 / GIB)),
                color.stroke_width(style.px(2.0)),
            ))
            .map_err(err)?
            .label(name)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(3))
            });
    }
    let cap_color = pal.capacity;
    chart
        .draw_series(LineSeries::new(
            [(0.0, capacity), ((n - 1.0).max(1.0), capacity)],
            cap_color.stroke_width(style.px(1.0)),
        ))
        .map_err(err)?
        .label("GPU memory")
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], cap_color));

    let pi = peak_index(est);
    let peak = points[pi].device as f64 / GIB;
    chart
        .draw_series([Circle::new(
            (pi as f64, peak),
            style.px(5.0),
            pal.device.filled(),
        )])
        .map_err(err)?;
    let label_x = if (pi as f64) > n * 0.6 {
        pi as f64 - n * 0.3
    } else {
        pi as f64 + n * 0.02
    };
    chart
        .draw_series(std::iter::once(Text::new(
            format!("peak {:.1} GiB ({})", peak, phase_name(est.peak.phase)),
            (label_x, (peak + top * 0.035).min(top * 0.9)),
            style.font(12.0),
        )))
        .map_err(err)?;

    legend(&mut chart, style)?;
    root.present().map_err(err)
}

/// The legend box, in the lower right, in the chart's colours.
fn legend<'a, DB: DrawingBackend + 'a, CT: plotters::coord::CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
    style: &Style,
) -> DrawResult {
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(style.palette.background.mix(0.85))
        .border_style(style.palette.grid)
        .label_font(style.font(11.0))
        .draw()
        .map_err(err)
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
pub fn draw_breakdown<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    est: &Estimate,
    style: &Style,
) -> DrawResult {
    let pal = style.palette;
    root.fill(&pal.background).map_err(err)?;
    let mut rows: Vec<_> = est.components.iter().filter(|c| c.bytes > 0).collect();
    rows.sort_by_key(|c| std::cmp::Reverse(c.bytes));
    if rows.is_empty() {
        return Ok(());
    }
    // Segment 0 is drawn at the bottom: reverse so the largest bar is on top, away from the
    // legend in the lower right.
    rows.reverse();
    let names: Vec<String> = rows.iter().map(|c| short(&c.name, 30)).collect();
    let max = rows.iter().map(|c| c.bytes).max().unwrap_or(0) as f64 / GIB * 1.12;
    let (w, _) = root.dim_in_pixel();
    let label_area = (w as f64 * 0.42).min(260.0 * style.scale) as u32;
    let mut chart = ChartBuilder::on(root)
        .margin(style.px(8.0))
        .x_label_area_size(style.px(30.0))
        .y_label_area_size(label_area)
        .build_cartesian_2d(0.0..max.max(0.001), (0..rows.len()).into_segmented())
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .light_line_style(TRANSPARENT)
        .bold_line_style(pal.grid)
        .axis_style(pal.grid)
        .x_desc("GiB per GPU")
        .label_style(style.font(11.0))
        .axis_desc_style(style.font(11.0))
        .y_labels(rows.len())
        .y_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) | SegmentValue::Exact(i) => {
                names.get(*i).cloned().unwrap_or_default()
            }
            SegmentValue::Last => String::new(),
        })
        .draw()
        .map_err(err)?;
    chart
        .draw_series(rows.iter().enumerate().map(|(i, c)| {
            let color = match c.lifetime {
                Lifetime::Persistent => pal.persistent,
                Lifetime::Transient => pal.transient,
            };
            let mut bar = Rectangle::new(
                [
                    (0.0, SegmentValue::Exact(i)),
                    (c.bytes as f64 / GIB, SegmentValue::Exact(i + 1)),
                ],
                color.filled(),
            );
            bar.set_margin(style.px(2.0), style.px(2.0), 0, 0);
            bar
        }))
        .map_err(err)?;
    let (p, t) = (pal.persistent, pal.transient);
    chart
        .draw_series(std::iter::empty::<Circle<(f64, SegmentValue<usize>), i32>>())
        .map_err(err)?
        .label("persistent (all step)")
        .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], p.filled()));
    chart
        .draw_series(std::iter::empty::<Circle<(f64, SegmentValue<usize>), i32>>())
        .map_err(err)?
        .label("transient")
        .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], t.filled()));
    legend(&mut chart, style)?;
    root.present().map_err(err)
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

    pub fn draw<DB: DrawingBackend>(
        self,
        root: &DrawingArea<DB, Shift>,
        est: &Estimate,
        style: &Style,
    ) -> DrawResult {
        match self {
            ChartKind::Timeline => draw_timeline(root, est, style),
            ChartKind::Breakdown => draw_breakdown(root, est, style),
        }
    }
}

/// The chart as an SVG document: what the page shows, and the export (for wikis that allow no
/// iframes).
pub fn svg(kind: ChartKind, est: &Estimate, dark: bool, width: u32) -> Result<String, String> {
    let height = kind.height(width, est);
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (width, height)).into_drawing_area();
        kind.draw(
            &root,
            est,
            &Style {
                palette: palette(dark),
                scale: 1.0,
            },
        )?;
    }
    Ok(full_size_text(&out))
}

/// plotters-svg writes every font size divided by 1.24, though plotters laid the text out at
/// the full size (as a canvas draws it): this puts the sizes back, so the chart looks as it
/// did on a canvas. Text from the data cannot hold the attribute (quotes are escaped).
pub fn full_size_text(svg: &str) -> String {
    const KEY: &str = "font-size=\"";
    let mut out = String::with_capacity(svg.len());
    let mut rest = svg;
    while let Some(i) = rest.find(KEY) {
        let (head, tail) = rest.split_at(i + KEY.len());
        out.push_str(head);
        let end = tail.find('"').unwrap_or(tail.len());
        match tail[..end].parse::<f64>() {
            Ok(v) => out.push_str(&format!("{}", (v * 124.0).round() / 100.0)),
            Err(_) => out.push_str(&tail[..end]),
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn estimate(query: &str) -> Estimate {
        let scen = headroom_core::codec::decode(query).expect("a valid link");
        headroom_core::estimate(&scen).expect("it estimates")
    }

    #[test]
    fn the_timeline_exports_as_svg_with_its_peak() {
        let e = estimate("batch=2");
        let doc = svg(ChartKind::Timeline, &e, false, 960).expect("drawn");
        assert!(doc.starts_with("<svg"), "{}", &doc[..80.min(doc.len())]);
        assert!(doc.contains(&format!("peak {:.1} GiB", e.peak.device as f64 / GIB)));
        assert!(doc.contains("GPU memory") && doc.contains("backward"));
        // The text at the sizes the chart asks for (11 px labels, 12 px for the peak).
        assert!(doc.contains("font-size=\"11\"") && doc.contains("font-size=\"12\""));
        assert!(!doc.contains("font-size=\"8.87"));
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
                // plotters-svg escapes text as XML does.
                let escaped = label
                    .replace('&', "&amp;")
                    .replace('<', "&lt;")
                    .replace('>', "&gt;")
                    .replace('"', "&quot;")
                    .replace('\'', "&apos;");
                assert!(doc.contains(&escaped), "{label} missing");
            }
            let background = if dark { "#171A21" } else { "#FFFFFF" };
            assert!(
                doc.to_uppercase().contains(background),
                "background of dark={dark}"
            );
        }
    }

    #[test]
    fn the_peak_index_points_at_the_tensor_peak() {
        let e = estimate("");
        assert_eq!(e.timeline[peak_index(&e)].tensors, e.peak.tensors);
    }
}
