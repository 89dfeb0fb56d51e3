//! The site's charts, written as SVG documents by a small builder ([`Svg`], in `svg.rs`): shown
//! in an image on the page, and downloaded. Colours follow the light or dark scheme. Text is
//! always escaped (component and model names come from users' configs). This module holds the
//! palette and the public entry points; each chart is drawn in its own file.

mod breakdown;
pub mod calibration;
mod svg;
mod timeline;

use headroom_core::estimate::Estimate;

pub use breakdown::draw_breakdown;
pub use svg::{
    Anchor, Baseline, FONT, Frame, Mark, Rgb, Svg, escape_into, legend, text_width, tick_label,
    ticks,
};
pub use timeline::draw_timeline;

const GIB: f64 = (1u64 << 30) as f64;

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

/// The index of the timeline point where the tensor peak is.
pub fn peak_index(est: &Estimate) -> usize {
    est.timeline
        .iter()
        .position(|p| p.tensors == est.peak.tensors)
        .unwrap_or(0)
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

    pub(super) fn estimate(query: &str) -> Estimate {
        let scen = headroom_core::codec::decode(query).expect("a valid link");
        headroom_core::estimate(&scen).expect("it estimates")
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
