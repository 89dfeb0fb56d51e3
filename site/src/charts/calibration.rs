//! The calibration page's chart: measured matmul throughput against problem size, one line per
//! dtype, written as SVG by the charts' builder (the site shows it as an image).

use headroom_core::calibration::schema::MatmulPoint;

use super::{Frame, Mark, Palette, Svg, legend, palette, tick_label};

/// One dtype's curve: (log2 n, value) points in the file's order (calibrate writes them by
/// growing n; no sort here, which would add sorting code to the download).
#[derive(Debug, Clone, PartialEq)]
pub struct Curve {
    pub dtype: String,
    pub points: Vec<(f64, f64)>,
}

/// The curves to draw and what their values are: the fraction of the catalog's peak (in
/// percent) when every point has one, TFLOP/s otherwise (a GPU the catalog has no peak for).
pub fn curves(points: &[MatmulPoint]) -> (Vec<Curve>, &'static str) {
    let as_percent = !points.is_empty() && points.iter().all(|p| p.efficiency.is_some());
    let mut out: Vec<Curve> = Vec::new();
    for p in points {
        // log2 of n spaces 256 ... 16384 evenly; n = 0 would be a broken file, skipped.
        if p.n == 0 {
            continue;
        }
        let y = if as_percent {
            p.efficiency.unwrap_or(0.0) * 100.0
        } else {
            p.tflops.median
        };
        if !y.is_finite() {
            continue;
        }
        let x = (p.n as f64).log2();
        match out.iter_mut().find(|c| c.dtype == p.dtype) {
            Some(c) => c.points.push((x, y)),
            None => out.push(Curve {
                dtype: p.dtype.clone(),
                points: vec![(x, y)],
            }),
        }
    }
    let unit = if as_percent {
        "% of the dense peak"
    } else {
        "TFLOP/s"
    };
    (out, unit)
}

/// The chart's height for a width.
pub fn height(width: u32) -> u32 {
    (width as f64 * 0.45).clamp(240.0, 360.0) as u32
}

/// The efficiency curves: x is n on a log2 axis (labelled 256, 1024, ...), y the unit of
/// [`curves`].
pub fn draw_efficiency(
    svg: &mut Svg,
    points: &[MatmulPoint],
    pal: &Palette,
    width: u32,
    height: u32,
) {
    let (curves, unit) = curves(points);
    let all = curves.iter().flat_map(|c| c.points.iter());
    let (mut x0, mut x1, mut top) = (f64::MAX, f64::MIN, 0.0f64);
    for &(x, y) in all {
        x0 = x0.min(x);
        x1 = x1.max(x);
        top = top.max(y);
    }
    if curves.is_empty() {
        return;
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    let top = if unit.starts_with('%') {
        (top * 1.1).clamp(1.0, 100.0)
    } else {
        (top * 1.1).max(0.001)
    };
    let (w, h) = (width as f64, height as f64);
    let f = Frame {
        left: 10.0 + 52.0,
        top: 10.0,
        right: w - 10.0,
        bottom: h - 10.0 - 34.0,
        x: (x0 - 0.3, x1 + 0.3),
        y: (0.0, top),
    };
    f.y_axis(svg, pal, tick_label);
    // Whole powers of two get a tick and a label, every other one where they would crowd.
    let (first, last) = (x0.ceil().max(0.0) as u32, x1.floor().min(62.0) as u32);
    let every = if (f.px(1.0) - f.px(0.0)) < 44.0 { 2 } else { 1 };
    for e in (first..=last.max(first)).step_by(every) {
        f.x_tick(svg, pal, e as f64, &(1u64 << e).to_string());
    }
    f.x_line(svg, pal);
    f.titles(
        svg,
        pal,
        "n (square n × n GEMM, log scale)",
        Some(unit),
        (10.0, h - 10.0),
    );
    let colors = [pal.tensors, pal.allocated, pal.reserved, pal.device];
    let mut entries = Vec::new();
    for (i, c) in curves.iter().enumerate() {
        let color = colors[i % colors.len()];
        svg.polyline(c.points.iter().map(|&p| f.at(p)), color, 2.0);
        for &p in &c.points {
            svg.circle(f.at(p), 3.0, color);
        }
        entries.push((c.dtype.as_str(), color, Mark::Line(3.0)));
    }
    legend(svg, &f, pal, &entries, &[]);
}

/// The chart as an SVG document (what the page shows).
pub fn svg(points: &[MatmulPoint], dark: bool, width: u32) -> Result<String, String> {
    let (pal, height) = (palette(dark), height(width));
    let mut doc = Svg::new(width, height, pal.background);
    draw_efficiency(&mut doc, points, &pal, width, height);
    Ok(doc.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(dtype: &str, n: u64, eff: Option<f64>) -> MatmulPoint {
        MatmulPoint {
            dtype: dtype.into(),
            n,
            tflops: headroom_core::calibration::schema::Measured::from_samples(
                "tflops",
                "test",
                &[100.0],
            )
            .expect("a sample"),
            efficiency: eff,
        }
    }

    #[test]
    fn one_curve_per_dtype_in_percent_when_every_point_has_a_peak() {
        let pts = [
            point("bf16", 256, Some(0.1)),
            point("bf16", 4096, Some(0.5)),
            point("fp32", 256, Some(0.2)),
        ];
        let (c, unit) = curves(&pts);
        assert_eq!(unit, "% of the dense peak");
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].points, vec![(8.0, 10.0), (12.0, 50.0)]);
        let (_, unit) = curves(&[point("bf16", 256, None)]);
        assert_eq!(unit, "TFLOP/s");
    }

    #[test]
    fn the_svg_names_each_dtype() {
        let pts = [
            point("bf16", 256, Some(0.1)),
            point("fp16", 1024, Some(0.3)),
        ];
        let text = svg(&pts, false, 640).expect("drawn");
        assert!(text.contains(">bf16</text>") && text.contains(">fp16</text>"));
        for label in [">256</text>", ">1024</text>", ">% of the dense peak</text>"] {
            assert!(text.contains(label), "{label}");
        }
        assert_eq!(text.matches("<polyline").count(), 2);
        assert!(
            svg(&[], true, 640).is_ok(),
            "no points draws an empty chart"
        );
    }
}
