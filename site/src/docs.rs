//! Mounts the whole site (the calculator and the documentation pages: guides, catalogs,
//! comparison, calibration, worked examples) into the page's body. Trunk builds this binary
//! with the `docs` feature; the loader (Trunk.toml's `pattern_script`) runs it on the addresses
//! under `route::DOCS_SECTIONS`, and the calculator's lighter `headroom-site` everywhere else.

fn main() {
    yew::Renderer::<headroom_site::App>::new().render();
}
