//! Reusable pieces of the pages: inputs, results, charts, sharing.

pub mod calibration;
pub mod chart;
pub mod form;
pub mod import;
pub mod model_picker;
pub mod notices;
pub mod num;
pub mod planner;
pub mod report;
pub mod search;
pub mod share;
pub mod strategies;
