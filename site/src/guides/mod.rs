//! The guides on the site: their text (fetched when opened, so the calculator's download does
//! not carry it), the Markdown renderer, the live calculator blocks and the guide pages.

pub mod block;
pub mod page;
pub mod render;
pub mod text;
