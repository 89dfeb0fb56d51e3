//! The site's routes. Page state (the scenario) travels in the query string, not the path.

use yew_router::prelude::*;

#[derive(Debug, Clone, PartialEq, Eq, Routable)]
pub enum Route {
    /// The calculator on the scenario in the query (defaults for missing fields).
    #[at("/")]
    Calculator,
    /// A named scenario from `content/scenarios/` (a short link), fields in the query on top.
    #[at("/s/:id")]
    Named { id: String },
    /// Two scenarios side by side: A's fields, and B's changes prefixed `b.`.
    #[at("/compare")]
    Compare,
    /// The embed layout for iframes: one view (`view=`) without the site's chrome.
    #[at("/embed")]
    Embed,
    /// Every published calibration, and a loader for the user's own file.
    #[at("/calibration")]
    Calibrations,
    /// One calibration file: a stem from `content/calibration/`, or `yours`.
    #[at("/calibration/:id")]
    CalibrationFile { id: String },
    #[not_found]
    #[at("/404")]
    NotFound,
}
