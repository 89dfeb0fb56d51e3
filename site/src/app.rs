//! The app: the page for the address, and the site's header and footer around every page but
//! embeds. Built with the `docs` feature it renders every page (the whole site's bundle);
//! without it, the calculator's pages only (`route::DOCS_SECTIONS` says which are not).
//!
//! Before the first page it fetches in parallel the GPU catalog (`content/gpus.json`), the presets'
//! index and configs (`content/models.json`), the published calibrations
//! (`content/calibrations.json`) and the named scenarios (`content/scenarios.json`), installs them
//! into the core in that order (`content::FETCHED`), then reads the user's session calibration
//! (`Loaded`). The site builds the core without `embedded-gpus`, `embedded-configs`,
//! `embedded-calibrations` and `embedded-scenarios`, so `GpuCatalog::builtin()` is empty until
//! `install_gpus`, `PresetCatalog::builtin()` until `install_model_configs`, `Calibration::for_gpu`
//! gives the defaults until `install_calibrations`, and `codec::named_scenarios()` is empty until
//! `install_named_scenarios`. The form's help text (`content/help.json`) comes with them, kept by
//! `help.rs`; the form shows no help where it could not be read.

use headroom_core::codec::named_scenarios;
use yew::prelude::*;

use crate::calibration_state::{CalibrationContext, UserCalibration, load_session};
use crate::components::search::Search;
use crate::dom;
use crate::pages::{calculator::Calculator, embed::Embed, not_found::NotFound};
use crate::route::Route;

fn switch(route: Route) -> Html {
    match route {
        Route::Embed => html! { <Embed/> },
        other => html! { <Chrome>{ page(other) }</Chrome> },
    }
}

fn page(route: Route) -> Html {
    match route {
        Route::Calculator => html! { <Calculator/> },
        Route::Named { id } => {
            let key = id.clone();
            html! { <Calculator key={key} named={id}/> }
        }
        Route::Embed | Route::NotFound => html! { <NotFound/> },
        #[cfg(feature = "docs")]
        other => docs_page(other),
        #[cfg(not(feature = "docs"))]
        other => html! { <ElsewhereNotice path={other.path()}/> },
    }
}

/// The pages only the whole site's bundle renders (`route::DOCS_SECTIONS`).
#[cfg(feature = "docs")]
fn docs_page(route: Route) -> Html {
    use crate::guides::page::{GuideList, GuidePage};
    use crate::pages::calibration::Calibrations;
    use crate::pages::catalog::{GpuList, GpuPage, ModelList, ModelPage};
    use crate::pages::compare::Compare;
    use crate::pages::examples::{Example, Examples};
    match route {
        Route::Compare => html! { <Compare/> },
        Route::Calibrations => html! { <Calibrations/> },
        Route::CalibrationFile { id } => {
            let key = id.clone();
            html! { <Calibrations key={key} id={Some(AttrValue::from(id))}/> }
        }
        Route::Examples => html! { <Examples/> },
        Route::Example { n } => {
            let key = n.clone();
            html! { <Example key={key} n={AttrValue::from(n)}/> }
        }
        Route::Guides => html! { <GuideList/> },
        Route::Guide { slug } => html! { <GuidePage slug={AttrValue::from(slug)}/> },
        Route::Gpus => html! { <GpuList/> },
        Route::Gpu { id } => html! { <GpuPage id={AttrValue::from(id)}/> },
        Route::Models => html! { <ModelList/> },
        Route::Model { id } => html! { <ModelPage id={AttrValue::from(id)}/> },
        Route::Calculator | Route::Named { .. } | Route::Embed | Route::NotFound => {
            html! { <NotFound/> }
        }
    }
}

#[cfg(not(feature = "docs"))]
#[derive(Properties, PartialEq)]
struct ElsewhereProps {
    path: String,
}

/// What the calculator's bundle shows at a documentation page's address, which the loader
/// never gives it (it loads the whole site's bundle there): a link that loads the page
/// (`dom::intercept_links` lets it through).
#[cfg(not(feature = "docs"))]
#[component]
fn ElsewhereNotice(props: &ElsewhereProps) -> Html {
    let href = format!("{}{}", dom::base_path(), props.path);
    html! {
        <main class="page narrow" id="main">
            <p><a href={href}>{ "Open this page" }</a></p>
        </main>
    }
}

/// One labelled list of named scenarios in the Examples menu.
fn menu_group<'a>(
    title: &str,
    items: impl Iterator<Item = &'a headroom_core::codec::NamedScenario>,
    base: &str,
) -> Html {
    html! {
        <>
            <p class="menu-title">{ title }</p>
            <ul>
                { for items.map(|n| html! {
                    <li><a href={format!("{base}/s/{}", n.id)}>{ &n.title }</a></li>
                }) }
            </ul>
        </>
    }
}

#[derive(Properties, PartialEq)]
struct ChromeProps {
    children: Html,
}

/// Header (name, navigation, examples) and footer.
#[component]
fn Chrome(props: &ChromeProps) -> Html {
    let base = dom::base_path();
    let examples = named_scenarios();
    html! {
        <>
            <a class="skip" href="#main">{ "Skip to content" }</a>
            <header class="site-header">
                <a class="brand" href={format!("{base}/")}>
                    <span class="logo" aria-hidden="true">{ "▮▮▯" }</span>{ "Headroom" }
                </a>
                <p class="tagline">{ "Will this training run fit on these GPUs?" }</p>
                <nav aria-label="Site">
                    <a href={format!("{base}/")}>{ "Calculator" }</a>
                    <a href={format!("{base}/guides")}>{ "Guides" }</a>
                    <a href={format!("{base}/compare")}>{ "Compare" }</a>
                    <a href={format!("{base}/calibration")}>{ "Calibration" }</a>
                    <a href={format!("{base}/examples")}>{ "Worked examples" }</a>
                    if !examples.is_empty() {
                        <details class="menu">
                            <summary>{ "Scenarios" }</summary>
                            <div class="menu-panel">
                                <p class="menu-title">{ "Worked examples from practitioners' guides" }</p>
                                <ul>
                                    <li><a href={format!("{base}/examples")}>{ "The five examples, their claims checked" }</a></li>
                                </ul>
                                { menu_group("More scenarios",
                                    examples.iter().filter(|n| !n.id.starts_with("ex")), &base) }
                                <p class="menu-title">{ "Catalogs" }</p>
                                <ul>
                                    <li><a href={format!("{base}/gpus")}>{ "Every GPU: what fits on it" }</a></li>
                                    <li><a href={format!("{base}/models")}>{ "Every model: what training it takes" }</a></li>
                                </ul>
                            </div>
                        </details>
                    }
                </nav>
                <Search/>
            </header>
            { props.children.clone() }
            <footer class="site-footer">
                <p>{ crate::help::page("footer") }</p>
            </footer>
        </>
    }
}

/// The page for the current address.
#[component]
fn Routed() -> Html {
    // Pages without their own drawing (lists, catalog pages) are interactive once rendered;
    // the calculator and the guides mark themselves again when their content is drawn.
    use_effect_with((), |_| dom::frame_done());
    dom::reset_page();
    switch(Route::current())
}

/// The content the app's download leaves out and every page computes from (and the form's help
/// text, `content/help.json`, which no computation needs): the GPU catalog
/// (`content/gpus.json`), the presets (`content/models.json`: their index and configs), the
/// published calibration files
/// (`content/calibrations.json`) and the named scenarios (`content/scenarios.json`), all written
/// by site/pages.sh, fetched in parallel and installed into the core before the first page.
/// `None` while they load, then whether all could be read (the error names the one that could
/// not).
#[hook]
fn use_content() -> Option<Result<(), String>> {
    use headroom_core::content::{FETCHED, fetched_ready};
    let state = use_state(|| fetched_ready().then_some(Ok(())));
    {
        let state = state.clone();
        use_effect_with((), move |_| {
            if state.is_none() {
                let base = dom::base_path();
                // Every request is sent before any is awaited.
                let requests: Vec<_> = FETCHED
                    .iter()
                    .map(|f| (*f, dom::fetch_text(&format!("{base}/{}", f.path))))
                    .collect();
                let help = dom::fetch_text(&format!("{base}/content/help.json"));
                wasm_bindgen_futures::spawn_local(async move {
                    let mut read = Ok(());
                    for (file, text) in requests {
                        let text = text.await;
                        if read.is_ok() {
                            read = installed(text, file);
                        }
                    }
                    // The form's help: the pages work without it.
                    if let Ok(text) = help.await {
                        crate::help::install(&text);
                    }
                    state.set(Some(read));
                });
            }
        });
    }
    (*state).clone()
}

/// Fetched content `text` installed into the core; the error names the file's content.
fn installed(
    text: Result<String, ()>,
    file: headroom_core::content::Fetched,
) -> Result<(), String> {
    let what = file.what;
    match text {
        Ok(text) => (file.install)(&text)
            .map_err(|e| format!("{what} could not be read ({e}). Reload the page to try again.")),
        Err(()) => Err(format!(
            "{what} could not be loaded (offline?). Reload the page to try again."
        )),
    }
}

#[derive(Properties, PartialEq)]
struct LoadedProps {
    location: String,
}

/// The app once its content is in: the user's own calibration file, kept in session storage
/// across page loads (read here, after the catalog it names its GPU from is installed), around
/// the page the address names.
#[component]
fn Loaded(props: &LoadedProps) -> Html {
    let user = use_state(load_session);
    let calibration = CalibrationContext {
        user: (*user).clone(),
        set: Callback::from(move |u: Option<std::rc::Rc<UserCalibration>>| user.set(u)),
    };
    html! {
        <ContextProvider<CalibrationContext> context={calibration}>
            <Routed key={props.location.clone()}/>
        </ContextProvider<CalibrationContext>>
    }
}

#[component]
pub fn App() -> Html {
    use_effect_with((), |_| dom::register_service_worker());
    // Links to other pages of the site render in place (no page load); `Loaded` keys its page
    // by the address, so each address is a fresh page, which reads its state from the address
    // as on a page load.
    let location = use_state(dom::location_key);
    {
        let location = location.clone();
        use_effect_with((), move |_| {
            dom::intercept_links();
            dom::on_history(move || location.set(dom::location_key()));
        });
    }
    match use_content() {
        Some(Ok(())) => html! { <Loaded location={(*location).clone()}/> },
        Some(Err(e)) => html! {
            <main class="page narrow" id="main" data-ready="true"><div class="notice error">{ e }</div></main>
        },
        None => html! {
            <main class="page narrow" id="main" data-ready="false"><p class="help">{ "Loading…" }</p></main>
        },
    }
}
