//! The site's routes. Page state (the scenario) travels in the query string, not the path.
//!
//! Every link is a plain `<a href>` (a page load), so the path is read once when the app
//! starts; a router library would cost download size for navigation the site does not do.

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
    NotFound,
}

impl Route {
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
            Route::NotFound => "/404".into(),
        }
    }

    /// The route of the page the browser shows.
    pub fn current() -> Route {
        let path = web_sys::window()
            .and_then(|w| w.location().pathname().ok())
            .unwrap_or_default();
        let base = crate::dom::base_path();
        Route::recognize(path.strip_prefix(base.as_str()).unwrap_or(&path))
    }
}

#[cfg(test)]
mod tests {
    use super::Route;

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
            ("/s", Route::NotFound),
            ("/s/a/b", Route::NotFound),
            ("/no/such/page", Route::NotFound),
        ] {
            assert_eq!(Route::recognize(path), route, "{path}");
            if route != Route::NotFound {
                assert_eq!(Route::recognize(&route.path()), route);
            }
        }
    }
}
