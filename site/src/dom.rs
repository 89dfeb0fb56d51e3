//! Browser glue: the URL, the document's title and description, the clipboard, downloads, the
//! colour scheme, the embed's height message and the timing marks the budget script reads.
//! Every call tolerates a missing API.

use wasm_bindgen::{JsCast, JsValue};

fn window() -> Option<web_sys::Window> {
    web_sys::window()
}

/// The site's base path (from `<base href>`, so the site works under a sub-path), no trailing
/// `/`: `""` at a domain's root, `/headroom` under a sub-path.
pub fn base_path() -> String {
    // Only a `<base href>` element counts: without one, `baseURI` is the page's own address.
    let base = window()
        .and_then(|w| w.document())
        .and_then(|d| d.query_selector("base[href]").ok().flatten())
        .and_then(|b| b.get_attribute("href"))
        .and_then(|href| {
            let page = window()?.location().href().ok()?;
            web_sys::Url::new_with_base(&href, &page).ok()
        })
        .map(|u| u.pathname())
        .unwrap_or_default();
    base.trim_end_matches('/').to_string()
}

/// An absolute URL of a site path such as `/embed?view=timeline` (for links and embed code).
pub fn absolute_url(path_and_query: &str) -> String {
    let origin = window()
        .and_then(|w| w.location().origin().ok())
        .unwrap_or_default();
    format!("{origin}{}{path_and_query}", base_path())
}

/// The current query string, with its `?`.
pub fn current_query() -> String {
    window()
        .and_then(|w| w.location().search().ok())
        .unwrap_or_default()
}

/// Replaces the address bar's path and query (no history entry: typing must not flood "back").
pub fn replace_url(path_and_query: &str) {
    let url = format!("{}{path_and_query}", base_path());
    if let Some(history) = window().and_then(|w| w.history().ok()) {
        let same = window()
            .and_then(|w| {
                let l = w.location();
                Some(format!("{}{}", l.pathname().ok()?, l.search().ok()?))
            })
            .is_some_and(|now| now == url);
        if !same {
            let _ = history.replace_state_with_url(&JsValue::NULL, "", Some(&url));
        }
    }
}

/// Copies text to the clipboard; `Err` with a reason when the browser refuses.
pub async fn copy_text(text: &str) -> Result<(), String> {
    let clipboard = window()
        .map(|w| w.navigator().clipboard())
        .ok_or("no clipboard in this browser")?;
    wasm_bindgen_futures::JsFuture::from(clipboard.write_text(text))
        .await
        .map(|_| ())
        .map_err(|_| "the browser refused clipboard access; select the text and copy it".into())
}

/// Offers `data` as a file download.
pub fn download(file_name: &str, mime: &str, data: &str) -> Result<(), String> {
    let parts = js_sys::Array::of1(&JsValue::from_str(data));
    let opts = web_sys::BlobPropertyBag::new();
    opts.set_type(mime);
    let blob = web_sys::Blob::new_with_str_sequence_and_options(&parts, &opts)
        .map_err(|_| "could not create the file")?;
    let url = web_sys::Url::create_object_url_with_blob(&blob)
        .map_err(|_| "could not create the file's address")?;
    let result = download_url(file_name, &url);
    let _ = web_sys::Url::revoke_object_url(&url);
    result
}

/// Offers a URL (a `data:` URL of a PNG, say) as a file download.
pub fn download_url(file_name: &str, url: &str) -> Result<(), String> {
    let document = window().and_then(|w| w.document()).ok_or("no document")?;
    let a: web_sys::HtmlAnchorElement = document
        .create_element("a")
        .map_err(|_| "could not create a link")?
        .unchecked_into();
    a.set_href(url);
    a.set_download(file_name);
    a.click();
    Ok(())
}

/// Whether the system asks for a dark colour scheme (charts follow it like the CSS does).
pub fn prefers_dark() -> bool {
    window()
        .and_then(|w| w.match_media("(prefers-color-scheme: dark)").ok().flatten())
        .is_some_and(|m| m.matches())
}

/// Device pixels per CSS pixel, for crisp canvases.
pub fn pixel_ratio() -> f64 {
    window()
        .map_or(1.0, |w| w.device_pixel_ratio())
        .clamp(1.0, 4.0)
}

/// Milliseconds since navigation started.
pub fn now_ms() -> f64 {
    window()
        .and_then(|w| w.performance())
        .map_or(0.0, |p| p.now())
}

fn set_body_attr(name: &str, value: &str) {
    if let Some(body) = window().and_then(|w| w.document()).and_then(|d| d.body()) {
        let _ = body.set_attribute(name, value);
    }
}

thread_local! {
    static EDIT_STARTED: std::cell::Cell<f64> = const { std::cell::Cell::new(-1.0) };
}

/// Marks the start of an input change (the budget script times recompute plus redraw).
pub fn edit_started() {
    EDIT_STARTED.with(|c| c.set(now_ms()));
}

/// Marks that the page is drawn: the first time, the app is interactive
/// (`data-ready-ms` on `<body>`); after an edit, the edit's recompute-and-redraw time
/// (`data-update-ms`). Tests wait for these attributes instead of sleeping.
pub fn frame_done() {
    let now = now_ms();
    let Some(body) = window().and_then(|w| w.document()).and_then(|d| d.body()) else {
        return;
    };
    if !body.has_attribute("data-ready-ms") {
        set_body_attr("data-ready-ms", &format!("{now:.1}"));
    }
    let started = EDIT_STARTED.with(|c| c.get());
    if started >= 0.0 {
        set_body_attr("data-update-ms", &format!("{:.2}", now - started));
    }
}

/// Records the core's share of an update (milliseconds).
pub fn mark_analyze(ms: f64) {
    set_body_attr("data-analyze-ms", &format!("{ms:.2}"));
}

/// Tells the parent page (an iframe's host) this document's height, so it can resize the frame.
pub fn post_height() {
    let Some(w) = window() else { return };
    let Some(document) = w.document() else { return };
    // The content's own height (the page's main element and the body's margins), not the
    // document's scroll height, which never drops below the frame's current height: a frame
    // must be able to shrink.
    let Some(body) = document.body() else { return };
    let height = match document.get_element_by_id("main") {
        Some(main) => {
            let style = w.get_computed_style(&body).ok().flatten();
            let margin = |side: &str| {
                style
                    .as_ref()
                    .and_then(|s| s.get_property_value(side).ok())
                    .and_then(|v| v.trim_end_matches("px").parse::<f64>().ok())
                    .unwrap_or(0.0)
            };
            (main.get_bounding_client_rect().bottom()
                + w.scroll_y().unwrap_or(0.0)
                + margin("margin-bottom")
                + margin("padding-bottom"))
            .ceil() as i32
        }
        None => body.scroll_height(),
    };
    let Ok(Some(parent)) = w.parent() else { return };
    if parent == w {
        return;
    }
    let msg = js_sys::Object::new();
    let _ = js_sys::Reflect::set(&msg, &"headroom".into(), &"resize".into());
    let _ = js_sys::Reflect::set(&msg, &"height".into(), &JsValue::from(height));
    let _ = parent.post_message(&msg, "*");
}

/// Calls [`post_height`] whenever the document's size changes (kept alive for the page's life).
pub fn watch_height() {
    // The main element's size is what the frame follows (see `post_height`).
    let Some(root) = window()
        .and_then(|w| w.document())
        .and_then(|d| d.get_element_by_id("main").or_else(|| d.document_element()))
    else {
        return;
    };
    let callback = wasm_bindgen::closure::Closure::<dyn FnMut(JsValue)>::new(|_| post_height());
    if let Ok(observer) = web_sys::ResizeObserver::new(callback.as_ref().unchecked_ref()) {
        observer.observe(&root);
    }
    callback.forget();
    post_height();
}

/// Registers the service worker that keeps the site working offline once loaded.
pub fn register_service_worker() {
    if let Some(w) = window() {
        let has_sw = js_sys::Reflect::has(&w.navigator(), &"serviceWorker".into()).unwrap_or(false);
        if has_sw {
            let url = format!("{}/sw.js", base_path());
            let _ = w.navigator().service_worker().register(&url);
        }
    }
}

/// The address's path, query and fragment: what identifies a page of the app.
pub fn location_key() -> String {
    window()
        .and_then(|w| {
            let l = w.location();
            Some(format!("{}{}", l.pathname().ok()?, l.search().ok()?))
        })
        .unwrap_or_default()
}

/// Goes to a site address without a page load: a history entry, then the app renders the new
/// route (it listens for `popstate`, which this dispatches, as "back" does). An address this
/// bundle does not render (`Route::served_here`) is loaded as a page instead.
pub fn navigate(href: &str) {
    let Some(w) = window() else { return };
    // A page this bundle does not render is a page load, which the loader gives the bundle
    // that does (route.rs).
    let path = w
        .location()
        .href()
        .ok()
        .and_then(|page| web_sys::Url::new_with_base(href, &page).ok())
        .map(|u| u.pathname())
        .unwrap_or_default();
    if !crate::route::Route::at(&path).served_here() {
        let _ = w.location().set_href(href);
        return;
    }
    if let Ok(history) = w.history()
        && history
            .push_state_with_url(&JsValue::NULL, "", Some(href))
            .is_err()
    {
        let _ = w.location().set_href(href);
        return;
    }
    w.scroll_to_with_x_and_y(0.0, 0.0);
    if let Ok(e) = web_sys::Event::new("popstate") {
        let _ = w.dispatch_event(&e);
    }
}

/// Scrolls to the element the address's `#fragment` names (content drawn after load).
pub fn scroll_to_hash() {
    let Some(w) = window() else { return };
    let hash = w.location().hash().unwrap_or_default();
    let Some(id) = hash.strip_prefix('#').filter(|h| !h.is_empty()) else {
        return;
    };
    if let Some(el) = w.document().and_then(|d| d.get_element_by_id(id)) {
        el.scroll_into_view();
    }
}

/// Turns a plain click on a link to another page of this site into [`navigate`]: no page load,
/// no new download of the app. Modified clicks (new tab), downloads, other origins, other
/// targets and same-page anchors keep the browser's behaviour.
pub fn intercept_links() {
    let Some(w) = window() else { return };
    let Some(document) = w.document() else { return };
    let handler = wasm_bindgen::closure::Closure::<dyn FnMut(web_sys::MouseEvent)>::new(
        |e: web_sys::MouseEvent| {
            if e.default_prevented()
                || e.button() != 0
                || e.meta_key()
                || e.ctrl_key()
                || e.shift_key()
                || e.alt_key()
            {
                return;
            }
            let Some(a) = e
                .target()
                .and_then(|t| t.dyn_into::<web_sys::Element>().ok())
                .and_then(|el| el.closest("a[href]").ok().flatten())
                .and_then(|el| el.dyn_into::<web_sys::HtmlAnchorElement>().ok())
            else {
                return;
            };
            let Some(w) = window() else { return };
            let here = w.location();
            let same_origin = here.origin().ok().is_some_and(|o| a.origin() == o);
            let base = base_path();
            let in_site = a.pathname().starts_with(&format!("{base}/")) || a.pathname() == base;
            if !same_origin || !in_site || !a.target().is_empty() || a.has_attribute("download") {
                return;
            }
            // Static files (the guides' Markdown, sw.js, the embed test page) load normally.
            if a.pathname()
                .rsplit('/')
                .next()
                .is_some_and(|last| last.contains('.'))
            {
                return;
            }
            let same_page = here.pathname().ok().is_some_and(|p| p == a.pathname())
                && here.search().ok().is_some_and(|s| s == a.search());
            if same_page && !a.hash().is_empty() {
                return;
            }
            e.prevent_default();
            navigate(&format!("{}{}{}", a.pathname(), a.search(), a.hash()));
        },
    );
    let _ = document.add_event_listener_with_callback("click", handler.as_ref().unchecked_ref());
    handler.forget();
}

/// Calls `on_change` when the address changes by history (back, forward, [`navigate`]).
pub fn on_history(on_change: impl Fn() + 'static) {
    let Some(w) = window() else { return };
    let handler =
        wasm_bindgen::closure::Closure::<dyn FnMut(web_sys::Event)>::new(move |_| on_change());
    let _ = w.add_event_listener_with_callback("popstate", handler.as_ref().unchecked_ref());
    handler.forget();
}

/// Shows an SVG document in an `<img>` as a `data:` URL (an image runs no script and adds no
/// markup to the page, whatever text the SVG holds), sized `width` x `height` CSS pixels so
/// the page keeps the chart's shape while the image decodes.
pub fn show_svg_image(img: &web_sys::HtmlImageElement, svg: &str, width: u32, height: u32) {
    let encoded = String::from(js_sys::encode_uri_component(svg));
    img.set_width(width);
    img.set_height(height);
    img.set_src(&format!("data:image/svg+xml;charset=utf-8,{encoded}"));
}

/// Offers a shown image as a PNG download, drawn on an offscreen canvas at the screen's
/// pixel ratio (an SVG image stays sharp at any scale).
pub fn download_png(file_name: &str, img: &web_sys::HtmlImageElement) -> Result<(), String> {
    let (w, h) = (img.natural_width(), img.natural_height());
    if !img.complete() || w == 0 || h == 0 {
        return Err("the chart is not drawn yet".into());
    }
    let document = window().and_then(|w| w.document()).ok_or("no document")?;
    let canvas: web_sys::HtmlCanvasElement = document
        .create_element("canvas")
        .map_err(|_| "could not create a canvas")?
        .unchecked_into();
    let ratio = pixel_ratio();
    let (cw, ch) = ((w as f64 * ratio).round(), (h as f64 * ratio).round());
    canvas.set_width(cw as u32);
    canvas.set_height(ch as u32);
    let context: web_sys::CanvasRenderingContext2d = canvas
        .get_context("2d")
        .ok()
        .flatten()
        .ok_or("no 2D canvas in this browser")?
        .unchecked_into();
    context
        .draw_image_with_html_image_element_and_dw_and_dh(img, 0.0, 0.0, cw, ch)
        .map_err(|_| "could not draw the chart")?;
    let url = canvas
        .to_data_url_with_type("image/png")
        .map_err(|_| "the browser refused to export the chart")?;
    download_url(file_name, &url)
}

/// Sets the document's title (what a tab, a bookmark and a search engine show).
pub fn set_title(title: &str) {
    set_page(title, None);
}

/// Sets the document's title and its `<meta name="description">` (a search result's text).
pub fn set_page(title: &str, description: Option<&str>) {
    set_head(&format!("{title} · Headroom"), description);
}

/// The head of `index.html`, restored before each page renders, so a page that sets none (the
/// calculator) does not keep the previous page's after in-place navigation.
pub fn reset_page() {
    // The description is index.html's, from the fetched page prose (pages render once it is in).
    let description = crate::help::page("description");
    set_head(
        "Headroom: GPU memory for training language models",
        (!description.is_empty()).then_some(description.as_str()),
    );
}

fn set_head(title: &str, description: Option<&str>) {
    let Some(d) = web_sys::window().and_then(|w| w.document()) else {
        return;
    };
    d.set_title(title);
    if let (Some(text), Ok(Some(meta))) = (description, d.query_selector("meta[name=description]"))
    {
        let _ = meta.set_attribute("content", text);
    }
}

/// The text at `url` (a file next to the app), or `Err(())` when it cannot be fetched (offline,
/// not found): the caller words the message. The request is sent when this is called, not
/// when the future is first awaited, so requests started one after the other load in parallel.
pub fn fetch_text(url: &str) -> impl std::future::Future<Output = Result<String, ()>> + use<> {
    use wasm_bindgen::JsCast;
    let sent = window().map(|w| wasm_bindgen_futures::JsFuture::from(w.fetch_with_str(url)));
    async move {
        let response = sent.ok_or(())?.await.map_err(|_| ())?;
        let response: web_sys::Response = response.dyn_into().map_err(|_| ())?;
        if !response.ok() {
            return Err(());
        }
        wasm_bindgen_futures::JsFuture::from(response.text().map_err(|_| ())?)
            .await
            .map_err(|_| ())?
            .as_string()
            .ok_or(())
    }
}
