//! A chart written as an SVG document (see [`crate::charts`]) and shown in an `<img>`,
//! following the page's width and colour scheme, with SVG and PNG export. An image can run
//! nothing: text from a config or a calibration file inside the SVG stays text.

use std::rc::Rc;

use headroom_core::estimate::Estimate;
use wasm_bindgen::JsCast;
use yew::prelude::*;

use crate::charts::{ChartKind, svg};
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

/// A number that changes whenever the window is resized, so an effect that depends on it
/// redraws at the new width.
#[hook]
pub fn use_resize_tick() -> u32 {
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
    *size_tick
}

/// The CSS width to draw a chart at: its container's (the image fills it), at least 280.
pub fn chart_width(img: &web_sys::HtmlImageElement) -> u32 {
    img.parent_element()
        .map_or(640, |p| p.client_width().max(280)) as u32
}

/// Draws an SVG chart at its container's width with `draw(width, dark)` (`height_for(width)`
/// tall) and shows it in `img`, recording how long that took in `data-draw-ms` (the budget
/// script sums them). Every chart of the site is shown through this.
pub fn show_svg(
    img: &web_sys::HtmlImageElement,
    height_for: impl FnOnce(u32) -> u32,
    draw: impl FnOnce(u32, bool) -> Result<String, String>,
) {
    let started = dom::now_ms();
    let width = chart_width(img);
    match draw(width, dom::prefers_dark()) {
        Ok(text) => dom::show_svg_image(img, &text, width, height_for(width)),
        Err(e) => web_sys::console::warn_1(&e.into()),
    }
    let _ = img.set_attribute("data-draw-ms", &format!("{:.2}", dom::now_ms() - started));
}

#[component]
pub fn Chart(props: &ChartProps) -> Html {
    let img = use_node_ref();
    // Redraw on resize (the width decides the layout) as well as on new data.
    let size_tick = use_resize_tick();
    {
        let img = img.clone();
        let kind = props.kind;
        use_effect_with((props.estimate.clone(), size_tick), move |(est, _)| {
            if let Some(i) = img.cast::<web_sys::HtmlImageElement>() {
                show_svg(
                    &i,
                    |width| kind.height(width, est),
                    |width, dark| svg(kind, est, dark, width),
                );
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
        let img = img.clone();
        Callback::from(move |_: MouseEvent| {
            if let Some(i) = img.cast::<web_sys::HtmlImageElement>()
                && let Err(e) = dom::download_png(&format!("{stem}.png"), &i)
            {
                web_sys::console::warn_1(&e.into());
            }
        })
    };
    html! {
        <figure class="chart" id={format!("chart-{}", kind.id())}>
            <div class="canvas-box">
                <img ref={img} role="img" alt={props.label.clone()}/>
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
