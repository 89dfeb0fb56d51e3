//! A byte count for people (`58.06 GiB`) that keeps the exact figure for tests and tooltips.

use headroom_core::format;
use yew::prelude::*;

#[derive(Properties, PartialEq)]
pub struct BytesProps {
    pub bytes: u64,
    /// An element id, so tests and readers can point at one number.
    #[prop_or_default]
    pub id: Option<AttrValue>,
}

/// `<span data-bytes="62345678912" title="62,345,678,912 bytes">58.06 GiB</span>`.
#[component]
pub fn Bytes(props: &BytesProps) -> Html {
    html! {
        <span class="num" id={props.id.clone()} data-bytes={props.bytes.to_string()}
              title={format!("{} bytes", grouped(props.bytes))}>
            { format::bytes(props.bytes) }
        </span>
    }
}

pub use headroom_core::format::grouped;
