//! The page's side of the on-demand worker (`worker.rs`): started on the first request, then
//! reused; requests are answered one at a time, in order.
//!
//! The worker is a second wasm that Trunk builds (`data-type="worker"` in `index.html`). It is
//! started from a Blob script that sets the base URL and loads `headroom-worker.js`; requests are
//! queued until it answers. The import box (`components/import.rs`) applies the link fields on the
//! page's GPU and shows the report as text; the planner asks the worker for each configuration
//! file.

use std::cell::RefCell;

use js_sys::{Array, Function, Promise};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::{Closure, JsValue};
use wasm_bindgen_futures::JsFuture;
use web_sys::{MessageEvent, Worker};

thread_local! {
    /// The worker once started, and the requests' chain: each waits for the one before, so
    /// answers cannot cross.
    static WORKER: RefCell<Option<Worker>> = const { RefCell::new(None) };
    static QUEUE: RefCell<Option<Promise>> = const { RefCell::new(None) };
}

const UNAVAILABLE: &str =
    "This part of the page could not be loaded (offline?): reload the page and try again.";

/// A promise of the worker's next message (its data), or of its failure to load.
fn next_message(worker: &Worker) -> Promise {
    let worker = worker.clone();
    Promise::new(&mut |resolve: Function, reject: Function| {
        let on_message = Closure::once_into_js(move |msg: MessageEvent| {
            let _ = resolve.call1(&JsValue::NULL, &msg.data());
        });
        let on_error = Closure::once_into_js(move |_: JsValue| {
            let _ = reject.call1(&JsValue::NULL, &JsValue::from_str(UNAVAILABLE));
        });
        worker.set_onmessage(Some(on_message.unchecked_ref()));
        worker.set_onerror(Some(on_error.unchecked_ref()));
    })
}

/// The worker, started (and waited for) on first use.
async fn worker() -> Result<Worker, String> {
    if let Some(w) = WORKER.with(|w| w.borrow().clone()) {
        return Ok(w);
    }
    let base = web_sys::window()
        .and_then(|w| w.document())
        .and_then(|d| d.base_uri().ok().flatten())
        .ok_or(UNAVAILABLE)?;
    // Trunk writes the worker as headroom-worker.js and headroom-worker_bg.wasm at the root.
    let script = format!(
        "self.HEADROOM_BASE={base:?};importScripts({js:?});wasm_bindgen({wasm:?});",
        js = format!("{base}headroom-worker.js"),
        wasm = format!("{base}headroom-worker_bg.wasm")
    );
    let options = web_sys::BlobPropertyBag::new();
    options.set_type("text/javascript");
    let blob = web_sys::Blob::new_with_str_sequence_and_options(
        &Array::of1(&JsValue::from_str(&script)),
        &options,
    )
    .map_err(|_| UNAVAILABLE)?;
    let url = web_sys::Url::create_object_url_with_blob(&blob).map_err(|_| UNAVAILABLE)?;
    let worker = Worker::new(&url).map_err(|_| UNAVAILABLE)?;
    let ready = JsFuture::from(next_message(&worker)).await;
    if ready.ok().and_then(|r| r.as_string()).as_deref() != Some("ready") {
        worker.terminate();
        return Err(UNAVAILABLE.into());
    }
    WORKER.with(|w| *w.borrow_mut() = Some(worker.clone()));
    Ok(worker)
}

/// Sends `request` and waits for its answer (the strings after "ok"), or the error message.
pub async fn request(request: &[&str]) -> Result<Vec<String>, String> {
    // Wait for the request before this one.
    let before = QUEUE.with(|q| q.borrow().clone());
    let (done, finish) = {
        let mut finish = None;
        let p = Promise::new(&mut |resolve: Function, _| finish = Some(resolve));
        (p, finish)
    };
    QUEUE.with(|q| *q.borrow_mut() = Some(done));
    if let Some(before) = before {
        let _ = JsFuture::from(before).await;
    }
    let result = send(request).await;
    if let Some(f) = finish {
        let _ = f.call0(&JsValue::NULL);
    }
    result
}

async fn send(request: &[&str]) -> Result<Vec<String>, String> {
    let worker = worker().await?;
    let answer = next_message(&worker);
    let array: Array = request.iter().map(|s| JsValue::from_str(s)).collect();
    worker.post_message(&array).map_err(|_| UNAVAILABLE)?;
    let data = JsFuture::from(answer)
        .await
        .map_err(|e| e.as_string().unwrap_or_else(|| UNAVAILABLE.into()))?;
    let mut reply: Vec<String> = Array::from(&data)
        .iter()
        .map(|v| v.as_string().unwrap_or_default())
        .collect();
    match reply.first().map(String::as_str) {
        Some("ok") => {
            reply.remove(0);
            Ok(reply)
        }
        Some("error") => Err(reply.get(1).cloned().unwrap_or_default()),
        _ => Err(UNAVAILABLE.into()),
    }
}
