//! The calibration page's chart: measured matmul throughput against problem size, one line per
//! dtype, drawn by plotters on any backend (the site shows it as SVG).

use headroom_core::calibration::schema::MatmulPoint;
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::charts::Style;

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

fn err<E: std::fmt::Debug>(e: E) -> String {
    format!("chart: {e:?}")
}

/// The efficiency curves: x is n on a log2 axis (labelled 256, 1024, ...), y the unit of
/// [`curves`].
pub fn draw_efficiency<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    points: &[MatmulPoint],
    style: &Style,
) -> Result<(), String> {
    let pal = style.palette;
    root.fill(&pal.background).map_err(err)?;
    let (curves, unit) = curves(points);
    let all = curves.iter().flat_map(|c| c.points.iter());
    let (mut x0, mut x1, mut top) = (f64::MAX, f64::MIN, 0.0f64);
    for &(x, y) in all {
        x0 = x0.min(x);
        x1 = x1.max(x);
        top = top.max(y);
    }
    if curves.is_empty() {
        return root.present().map_err(err);
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    let top = if unit.starts_with('%') {
        (top * 1.1).clamp(1.0, 100.0)
    } else {
        (top * 1.1).max(0.001)
    };
    let font = |size: f64| {
        ("sans-serif", size * style.scale)
            .into_font()
            .color(&pal.text)
    };
    let px = |v: f64| (v * style.scale).round().max(1.0) as u32;
    let mut chart = ChartBuilder::on(root)
        .margin(px(10.0))
        .x_label_area_size(px(34.0))
        .y_label_area_size(px(52.0))
        .build_cartesian_2d((x0 - 0.3)..(x1 + 0.3), 0.0..top)
        .map_err(err)?;
    chart
        .configure_mesh()
        .light_line_style(TRANSPARENT)
        .bold_line_style(pal.grid)
        .axis_style(pal.grid)
        .x_desc("n (square n × n GEMM, log scale)")
        .y_desc(unit)
        .label_style(font(11.0))
        .axis_desc_style(font(11.0))
        .x_labels(((x1 - x0) as usize + 1).min(12))
        .x_label_formatter(&|x| {
            // Only whole powers of two get a label.
            if (x - x.round()).abs() < 1e-6 && *x >= 0.0 && *x < 63.0 {
                (1u64 << x.round() as u32).to_string()
            } else {
                String::new()
            }
        })
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()
        .map_err(err)?;
    let colors = [pal.tensors, pal.allocated, pal.reserved, pal.device];
    for (i, c) in curves.iter().enumerate() {
        let color = colors[i % colors.len()];
        chart
            .draw_series(LineSeries::new(
                c.points.iter().copied(),
                color.stroke_width(px(2.0)),
            ))
            .map_err(err)?
            .label(c.dtype.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(3))
            });
        chart
            .draw_series(
                c.points
                    .iter()
                    .map(|&p| Circle::new(p, px(3.0), color.filled())),
            )
            .map_err(err)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(pal.background.mix(0.85))
        .border_style(pal.grid)
        .label_font(font(11.0))
        .draw()
        .map_err(err)?;
    root.present().map_err(err)
}

/// The chart as an SVG document (what the page shows).
pub fn svg(points: &[MatmulPoint], dark: bool, width: u32) -> Result<String, String> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (width, height(width))).into_drawing_area();
        let style = Style {
            palette: crate::charts::palette(dark),
            scale: 1.0,
        };
        draw_efficiency(&root, points, &style)?;
    }
    Ok(crate::charts::full_size_text(&out))
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
        assert!(text.contains("bf16") && text.contains("fp16"));
        assert!(
            svg(&[], true, 640).is_ok(),
            "no points draws an empty chart"
        );
    }
}
