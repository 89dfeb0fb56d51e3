//! Headroom's web calculator: a Yew single-page app over `headroom-core`.
//!
//! Everything is computed in the browser by the same core the CLI uses. The page's state lives
//! in its URL (see [`query`]); charts are written as SVG by a small builder
//! ([`charts::Svg`]), shown in an image and exported as SVG/PNG.
//! Pure modules (`query`, `fields`, `state`) have native unit tests; browser glue is in `dom`.

// Yew's props and handles hold callbacks and node refs; a Debug form of them says nothing.
#![allow(missing_debug_implementations)]

pub mod app;
pub mod calibration_state;
pub mod charts;
pub mod components;
pub mod dom;
pub mod fields;
pub mod guides;
pub mod help;
pub mod hub;
pub mod pages;
pub mod query;
pub mod route;
pub mod search;
pub mod state;
pub mod worker_client;

pub use app::App;
