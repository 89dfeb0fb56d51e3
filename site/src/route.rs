//! The site's routes. Page state (the scenario) travels in the query string, not the path.
//!
//! Links are plain `<a href>`s; the app turns a click on one into a history entry and renders
//! the new route without a page load (see `app.rs`), so a router library's download is not
//! needed.
//!
//! Routes: `/`, `/s/:id`, `/compare`, `/embed`, `/calibration[/:id]`, `/examples[/:n]`,
//! `/guides[/:slug]`, `/gpus[/:id]`, `/models[/:id]`. `app.rs` keys the page on the address and
//! `dom::intercept_links` turns clicks on site links into history entries.
//!
//! The site ships as two bundles of the one app: the calculator's (`headroom-site`, built
//! without the crate's `docs` feature: the calculator, named scenarios, embeds) and the whole
//! site's (`headroom-docs`, with it), which the pages under [`DOCS_SECTIONS`] load instead.
//! The loader in Trunk.toml's `pattern_script` picks one by the address; a bundle renders in
//! place only the routes it has ([`Route::served_here`]) and lets the browser load the others.

/// A page of the site.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// `/`: the calculator on the scenario in the query (defaults for missing fields).
    Calculator,
    /// `/s/<id>`: a named scenario from `content/scenarios/` (a short link), fields in the
    /// query on top.
    Named {
        id: String,
    },
    /// `/compare`: two scenarios side by side, A's fields and B's changes prefixed `b.`.
    Compare,
    /// `/embed`: the embed layout for iframes, one view (`view=`) without the site's chrome.
    Embed,
    /// `/calibration`: every published calibration, and a loader for the user's own file.
    Calibrations,
    /// `/calibration/<id>`: one calibration file, a stem from `content/calibration/` or `yours`.
    CalibrationFile {
        id: String,
    },
    /// `/examples`: the five worked examples.
    Examples,
    /// `/examples/<n>`: one worked example's claims, checked against the core.
    Example {
        n: String,
    },
    /// `/guides`: the list of guides.
    Guides,
    /// `/guides/<slug>`: one guide from `content/guides/`.
    Guide {
        slug: String,
    },
    /// `/gpus` and `/gpus/<id>`: the GPU catalog, and one GPU with what fits on it.
    Gpus,
    Gpu {
        id: String,
    },
    /// `/models` and `/models/<id>`: the model presets, and one model with what training it
    /// takes.
    Models,
    Model {
        id: String,
    },
    NotFound,
}

/// The first path segments of the pages only the whole site's bundle (`headroom-docs`)
/// renders: guides, catalogs, comparison, calibration and worked examples. Trunk.toml's loader
/// tests an address against the same list (a test keeps the two equal).
pub const DOCS_SECTIONS: [&str; 6] = [
    "guides",
    "gpus",
    "models",
    "examples",
    "compare",
    "calibration",
];

impl Route {
    /// Whether the calculator's bundle renders this route (the calculator, a named scenario,
    /// an embed and the not-found page); the others are the documentation pages'.
    pub fn in_calculator_bundle(&self) -> bool {
        matches!(
            self,
            Route::Calculator | Route::Named { .. } | Route::Embed | Route::NotFound
        )
    }

    /// Whether this build renders the route: the whole site's bundle renders every route, the
    /// calculator's only its own.
    pub fn served_here(&self) -> bool {
        cfg!(feature = "docs") || self.in_calculator_bundle()
    }

    /// The route of a path below the site's base (`/s/x`, `/compare/`, ``).
    pub fn recognize(path: &str) -> Route {
        let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
        match parts.as_slice() {
            [] | ["index.html"] => Route::Calculator,
            ["s", id] => Route::Named { id: id.to_string() },
            ["compare"] => Route::Compare,
            ["embed"] => Route::Embed,
            ["calibration"] => Route::Calibrations,
            ["calibration", id] => Route::CalibrationFile { id: id.to_string() },
            ["examples"] => Route::Examples,
            ["examples", n] => Route::Example { n: n.to_string() },
            ["guides"] => Route::Guides,
            ["guides", slug] => Route::Guide {
                slug: slug.to_string(),
            },
            ["gpus"] => Route::Gpus,
            ["gpus", id] => Route::Gpu { id: id.to_string() },
            ["models"] => Route::Models,
            ["models", id] => Route::Model { id: id.to_string() },
            _ => Route::NotFound,
        }
    }

    /// The path of this route below the site's base.
    pub fn path(&self) -> String {
        match self {
            Route::Calculator => "/".into(),
            Route::Named { id } => format!("/s/{id}"),
            Route::Compare => "/compare".into(),
            Route::Embed => "/embed".into(),
            Route::Calibrations => "/calibration".into(),
            Route::CalibrationFile { id } => format!("/calibration/{id}"),
            Route::Examples => "/examples".into(),
            Route::Example { n } => format!("/examples/{n}"),
            Route::Guides => "/guides".into(),
            Route::Guide { slug } => format!("/guides/{slug}"),
            Route::Gpus => "/gpus".into(),
            Route::Gpu { id } => format!("/gpus/{id}"),
            Route::Models => "/models".into(),
            Route::Model { id } => format!("/models/{id}"),
            Route::NotFound => "/404".into(),
        }
    }

    /// The route of the page the browser shows.
    pub fn current() -> Route {
        let path = web_sys::window()
            .and_then(|w| w.location().pathname().ok())
            .unwrap_or_default();
        Route::at(&path)
    }

    /// The route of an absolute path on this site (`/headroom/guides/x` under a sub-path).
    pub fn at(path: &str) -> Route {
        let base = crate::dom::base_path();
        Route::recognize(path.strip_prefix(base.as_str()).unwrap_or(path))
    }
}

#[cfg(test)]
mod tests {
    use super::{DOCS_SECTIONS, Route};

    #[test]
    fn paths_map_to_routes_and_back() {
        for (path, route) in [
            ("/", Route::Calculator),
            ("", Route::Calculator),
            ("/index.html", Route::Calculator),
            ("/s/llama", Route::Named { id: "llama".into() }),
            ("/compare/", Route::Compare),
            ("/embed", Route::Embed),
            ("/calibration", Route::Calibrations),
            (
                "/calibration/yours",
                Route::CalibrationFile { id: "yours".into() },
            ),
            ("/examples/", Route::Examples),
            ("/examples/2", Route::Example { n: "2".into() }),
            ("/examples/2/x", Route::NotFound),
            ("/guides", Route::Guides),
            (
                "/guides/mixed-precision",
                Route::Guide {
                    slug: "mixed-precision".into(),
                },
            ),
            (
                "/gpus/h100-sxm-80gb",
                Route::Gpu {
                    id: "h100-sxm-80gb".into(),
                },
            ),
            ("/gpus/", Route::Gpus),
            ("/models", Route::Models),
            ("/models/gpt2", Route::Model { id: "gpt2".into() }),
            ("/guides/a/b", Route::NotFound),
            ("/s", Route::NotFound),
            ("/s/a/b", Route::NotFound),
            ("/no/such/page", Route::NotFound),
        ] {
            assert_eq!(Route::recognize(path), route, "{path}");
            if route != Route::NotFound {
                assert_eq!(Route::recognize(&route.path()), route);
            }
            // A route is the documentation bundle's exactly when its first segment is one of
            // DOCS_SECTIONS, the list the loader reads.
            let first = path.split('/').find(|p| !p.is_empty()).unwrap_or("");
            if route != Route::NotFound {
                assert_eq!(
                    route.in_calculator_bundle(),
                    !DOCS_SECTIONS.contains(&first),
                    "{path}"
                );
            }
        }
    }

    /// Trunk.toml's loader picks the bundle with a pattern over the same sections as
    /// `DOCS_SECTIONS`, so an address never loads a bundle that cannot render it; site/pages.sh
    /// preloads the whole site's bundle on the same pages.
    #[test]
    fn the_loader_knows_the_documentation_sections() {
        let trunk = include_str!("../../Trunk.toml");
        let pattern = format!("^({})(\\/|$)", DOCS_SECTIONS.join("|"));
        assert!(
            trunk.contains(&pattern),
            "Trunk.toml's pattern_script should test {pattern}"
        );
        let pages = include_str!("../pages.sh");
        let cases = DOCS_SECTIONS.map(|s| format!("{s}*")).join("|");
        assert!(
            pages.contains(&format!("{cases})")),
            "site/pages.sh should preload headroom-docs for {cases}"
        );
    }
}
