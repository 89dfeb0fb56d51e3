//! The timeline chart: memory over one training step, with phase bands and the peak.

use headroom_core::estimate::{Estimate, Phase};

use super::{
    Anchor, Baseline, FONT, Frame, GIB, Mark, Palette, Rgb, Svg, legend, peak_index, text_width,
};

/// Reads one level of a timeline point.
type Level = fn(&headroom_core::estimate::TimelinePoint) -> u64;

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
    // Below the row of phase labels, so the two never run into each other on a narrow chart.
    let ly = f.py((peak + top * 0.035).min(top * 0.9)).max(f.top + 22.0);
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
    // Keep the legend off the curves (the optimizer's spike ends the step at the right).
    let avoid: Vec<(f64, f64)> = points
        .iter()
        .enumerate()
        .flat_map(|(i, p)| [p.device, p.tensors].map(|v| f.at((i as f64, v as f64 / GIB))))
        .collect();
    legend(svg, &f, pal, &entries, &avoid);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::charts::tests::estimate;
    use crate::charts::{ChartKind, palette, svg};

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
}
