//! Mounts the calculator's bundle into the page's body: Trunk builds this binary without the
//! `docs` feature (the calculator, named scenarios and embeds: the first download at `/`); the
//! documentation pages load `headroom-docs` (src/docs.rs) instead.

fn main() {
    yew::Renderer::<headroom_site::App>::new().render();
}
