//! Mounts the Headroom app into the page's body (Trunk builds this binary to wasm).

fn main() {
    yew::Renderer::<headroom_site::App>::new().render();
}
