//! The calibration pages: the list of published calibrations with a loader for the user's own
//! file (`/calibration`), and one file in full (`/calibration/<file stem>`, or `yours`).

use std::rc::Rc;

use headroom_core::calibration::calibration_values;
use headroom_core::catalog::GpuCatalog;
use yew::prelude::*;

use crate::calibration_state::{
    CalibrationContext, CalibrationView, MAX_FILE_BYTES, UserCalibration, save_session, view,
    view_value,
};
use crate::components::calibration::report;
use crate::dom;
use crate::route::Route;

/// The address id of the user's own file.
pub const YOURS: &str = "yours";

/// A file input that reads a calibration file, checks it through the core and keeps it for
/// the session; a bad file gets a message naming the field.
#[component]
pub fn CalibrationLoader() -> Html {
    let ctx = use_context::<CalibrationContext>();
    let message = use_state(|| None::<String>);
    let on_file = {
        let message = message.clone();
        Callback::from(move |e: Event| {
            let Some(input) = e.target_dyn_into::<web_sys::HtmlInputElement>() else {
                return;
            };
            let Some(file) = input.files().and_then(|f| f.get(0)) else {
                return;
            };
            if file.size() > MAX_FILE_BYTES {
                message.set(Some(format!(
                    "{} is over 4 MB: a calibration file is a few hundred KB at most.",
                    file.name()
                )));
                return;
            }
            let (message, ctx) = (message.clone(), ctx.clone());
            wasm_bindgen_futures::spawn_local(async move {
                let text = wasm_bindgen_futures::JsFuture::from(file.text()).await;
                let Some(text) = text.ok().and_then(|t| t.as_string()) else {
                    message.set(Some(format!("{} could not be read as text.", file.name())));
                    return;
                };
                match UserCalibration::from_text(&file.name(), &text) {
                    Ok(user) => {
                        save_session(Some(&user));
                        message.set(None);
                        if let Some(ctx) = &ctx {
                            ctx.set.emit(Some(Rc::new(user)));
                        }
                        // The file is in session storage: a page load shows it.
                        let path = Route::CalibrationFile { id: YOURS.into() }.path();
                        if let Some(w) = web_sys::window() {
                            let _ = w.location().assign(&format!("{}{path}", dom::base_path()));
                        }
                    }
                    Err(e) => message.set(Some(e)),
                }
            });
        })
    };
    html! {
        <section class="card loader" aria-labelledby="load-title">
            <h2 id="load-title">{ "Load your own calibration file" }</h2>
            <p class="help">{ crate::help::page("calibration_load") }</p>
            <label class="file-label">{ "Calibration file " }
                <input type="file" id="calibration-file" accept=".json,application/json" onchange={on_file}/>
            </label>
            if let Some(m) = &*message {
                <div class="notice error" role="alert" id="calibration-error">{ m }</div>
            }
        </section>
    }
}

#[derive(Properties, PartialEq)]
pub struct CalibrationsProps {
    /// A file stem from `content/calibration/`, or `yours`; `None` for the list.
    #[prop_or_default]
    pub id: Option<AttrValue>,
}

/// `/calibration` (every published calibration, and the loader) and `/calibration/<id>` (one
/// file in full). One component for both: each component costs download size.
#[component]
pub fn Calibrations(props: &CalibrationsProps) -> Html {
    use_effect_with((), |_| dom::frame_done());
    let ctx = use_context::<CalibrationContext>();
    let user = ctx.as_ref().and_then(|c| c.user.clone());
    let base = dom::base_path();
    // A published file's rows are not in the app (the core has its constants and rates only,
    // installed from `content/calibrations.json`): the whole file is fetched from next to the app and read once per page (it is
    // 150 KB; reading it on every render cost each redraw). Err: it did not come or did not
    // read (a server that answers a missing file with the app's page sends HTML).
    let whole = use_state(|| None::<Result<Rc<CalibrationView>, ()>>);
    {
        let whole = whole.clone();
        let id = props.id.clone();
        let base = base.clone();
        use_effect_with(id.clone(), move |_| {
            whole.set(None);
            if let Some(stem) =
                id.filter(|i| calibration_values().iter().any(|(s, _)| s == &i.as_str()))
            {
                wasm_bindgen_futures::spawn_local(async move {
                    let url = format!("{base}/content/calibration/{stem}.json");
                    let read = dom::fetch_text(&url)
                        .await
                        .and_then(|text| view(&stem, &text).map(Rc::new).map_err(|_| ()));
                    whole.set(Some(read));
                });
            }
        });
    }
    let Some(id) = props.id.as_deref() else {
        return list(user.as_deref(), &base);
    };
    let mut rows_note = None;
    let found: Result<Rc<CalibrationView>, String> = if id == YOURS {
        user.map(|u| u.view.clone())
            .ok_or_else(|| "No calibration file of yours is loaded in this tab.".to_string())
    } else {
        match calibration_values()
            .into_iter()
            .find(|(stem, _)| *stem == id)
        {
            Some((stem, value)) => {
                // The whole file when it came and read, else the embedded constants with a note.
                match whole.as_ref() {
                    Some(Ok(v)) => Ok(v.clone()),
                    _ => {
                        rows_note = Some(if whole.is_none() {
                            "Loading the measured training steps…".to_string()
                        } else {
                            crate::help::page("calibration_rows_offline")
                        });
                        view_value(stem, value).map(Rc::new)
                    }
                }
            }
            None => Err(format!(
                "There is no published calibration `{}`.",
                headroom_core::scenario::shorten(id)
            )),
        }
    };
    let forget = Callback::from(move |_: MouseEvent| {
        save_session(None);
        if let Some(c) = &ctx {
            c.set.emit(None);
        }
    });
    html! {
        <main class="page calibration-page" id="main">
            <p class="crumbs"><a href={format!("{base}/calibration")}>{ "All calibrations" }</a></p>
            { match found {
                Ok(v) => html! {
                    <>
                        if id == YOURS {
                            <div class="toolbar">
                                if v.gpu_name.is_some() {
                                    <a class="button-like" href={format!("{base}/?gpu={}", v.file.gpu_id)}
                                       id="open-calculator">{ "Open the calculator on this GPU" }</a>
                                }
                                <button type="button" onclick={forget}>{ "Forget this file" }</button>
                            </div>
                        }
                        { report(&v) }
                        if let Some(note) = rows_note {
                            <p class="notice" id="calibration-rows-note">{ note }</p>
                        }
                    </>
                },
                Err(e) => html! {
                    <>
                        <div class="notice error" role="alert" id="calibration-error">{ e }</div>
                        <CalibrationLoader/>
                    </>
                },
            } }
        </main>
    }
}

/// The list page.
fn list(user: Option<&UserCalibration>, base: &str) -> Html {
    let catalog = GpuCatalog::builtin();
    let files = calibration_values();
    html! {
        <main class="page narrow calibration-list" id="main">
            <h1>{ "Calibrations" }</h1>
            <p>{ crate::help::page("calibration_intro") }</p>
            if files.is_empty() {
                <p id="no-calibrations">{ crate::help::page("calibration_none") }</p>
            } else {
                <ul id="calibration-files">
                    { for files.iter().map(|(stem, value)| {
                        // The stem is a committed file name; the GPU's name comes from the catalog.
                        let gpu = headroom_core::Calibration::parse_value(stem, value).ok()
                            .and_then(|(id, _)| catalog.get(&id).ok().map(|g| g.name.clone()));
                        html! {
                            <li><a href={format!("{base}/calibration/{stem}")}>{ *stem }</a>
                                { gpu.map(|g| format!(" ({g})")).unwrap_or_default() }</li>
                        }
                    }) }
                </ul>
            }
            if let Some(u) = user {
                <p id="your-calibration">{ format!("Your file {} ({}) is loaded for this tab. ", u.view.name, u.view.file.gpu_id) }
                    <a href={format!("{base}/calibration/{YOURS}")}>{ "See it" }</a></p>
            }
            <CalibrationLoader/>
        </main>
    }
}
