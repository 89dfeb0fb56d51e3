//! A chart on a canvas that follows the page's width and colour scheme, with SVG and PNG export.

use std::rc::Rc;

use headroom_core::estimate::Estimate;
use plotters::prelude::IntoDrawingArea;
use plotters_canvas::CanvasBackend;
use wasm_bindgen::JsCast;
use yew::prelude::*;

use crate::charts::{ChartKind, Style, palette, svg};
use crate::dom;

#[derive(Properties, PartialEq)]
pub struct ChartProps {
    pub kind: ChartKind,
    pub estimate: Rc<Estimate>,
    /// What the chart shows, for screen readers (the tables next to it hold the data).
    pub label: AttrValue,
    /// A file name stem for exports.
    #[prop_or(AttrValue::from("headroom"))]
    pub file_stem: AttrValue,
}

/// Sizes a canvas to its container's width (and the height `height_for(width)` asks for) in
/// device pixels, and returns a plotters backend on it with the page's colour scheme. Every
/// canvas chart of the site draws through this.
pub fn prepare_canvas(
    canvas: &web_sys::HtmlCanvasElement,
    height_for: impl Fn(u32) -> u32,
) -> Option<(CanvasBackend, Style)> {
    let css_width = canvas
        .parent_element()
        .map_or(640, |p| p.client_width().max(280)) as u32;
    let css_height = height_for(css_width);
    let ratio = dom::pixel_ratio();
    let (w, h) = (
        (css_width as f64 * ratio) as u32,
        (css_height as f64 * ratio) as u32,
    );
    // Resizing reallocates the canvas: only when the size changes (the chart paints its
    // background, so an unchanged canvas needs no clearing).
    if canvas.width() != w || canvas.height() != h {
        canvas.set_width(w);
        canvas.set_height(h);
        let _ = canvas
            .style()
            .set_property("height", &format!("{css_height}px"));
    }
    let backend = CanvasBackend::with_canvas_object(canvas.clone())?;
    let style = Style {
        palette: palette(dom::prefers_dark()),
        scale: ratio,
    };
    Some((backend, style))
}

fn draw(canvas: &web_sys::HtmlCanvasElement, kind: ChartKind, est: &Estimate) {
    let started = dom::now_ms();
    let Some((backend, style)) = prepare_canvas(canvas, |w| kind.height(w, est)) else {
        return;
    };
    if let Err(e) = kind.draw(&backend.into_drawing_area(), est, &style) {
        web_sys::console::warn_1(&e.into());
    }
    let _ = canvas.set_attribute("data-draw-ms", &format!("{:.2}", dom::now_ms() - started));
}

#[component]
pub fn Chart(props: &ChartProps) -> Html {
    let canvas = use_node_ref();
    // Redraw on resize (the width decides the layout) as well as on new data.
    let size_tick = use_state(|| 0u32);
    {
        let size_tick = size_tick.clone();
        use_effect_with((), move |_| {
            let cb = wasm_bindgen::closure::Closure::<dyn FnMut()>::new(move || {
                size_tick.set(size_tick.wrapping_add(1));
            });
            let window = web_sys::window();
            if let Some(w) = &window {
                let _ = w.add_event_listener_with_callback("resize", cb.as_ref().unchecked_ref());
            }
            move || {
                if let Some(w) = window {
                    let _ = w
                        .remove_event_listener_with_callback("resize", cb.as_ref().unchecked_ref());
                }
                drop(cb);
            }
        });
    }
    {
        let canvas = canvas.clone();
        let kind = props.kind;
        use_effect_with((props.estimate.clone(), *size_tick), move |(est, _)| {
            if let Some(c) = canvas.cast::<web_sys::HtmlCanvasElement>() {
                draw(&c, kind, est);
            }
            dom::frame_done();
        });
    }
    let kind = props.kind;
    let est = props.estimate.clone();
    let stem = format!("{}-{}", props.file_stem, kind.id());
    let svg_click = {
        let (est, stem) = (est.clone(), stem.clone());
        Callback::from(move |_: MouseEvent| {
            let result = svg(kind, &est, dom::prefers_dark(), 960)
                .and_then(|text| dom::download(&format!("{stem}.svg"), "image/svg+xml", &text));
            if let Err(e) = result {
                web_sys::console::warn_1(&e.into());
            }
        })
    };
    let png_click = {
        let canvas = canvas.clone();
        Callback::from(move |_: MouseEvent| {
            if let Some(c) = canvas.cast::<web_sys::HtmlCanvasElement>()
                && let Ok(url) = c.to_data_url_with_type("image/png")
            {
                let _ = dom::download_url(&format!("{stem}.png"), &url);
            }
        })
    };
    html! {
        <figure class="chart" id={format!("chart-{}", kind.id())}>
            <div class="canvas-box">
                <canvas ref={canvas} role="img" aria-label={props.label.clone()}></canvas>
            </div>
            <figcaption class="exports">
                <button type="button" class="link-button" onclick={svg_click}
                        aria-label={format!("Download the {} chart as SVG", kind.id())}>{ "SVG" }</button>
                <button type="button" class="link-button" onclick={png_click}
                        aria-label={format!("Download the {} chart as PNG", kind.id())}>{ "PNG" }</button>
            </figcaption>
        </figure>
    }
}
