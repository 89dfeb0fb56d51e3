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

/// `62345678912` -> `62,345,678,912`.
pub fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn groups_thousands() {
        assert_eq!(super::grouped(0), "0");
        assert_eq!(super::grouped(999), "999");
        assert_eq!(super::grouped(1000), "1,000");
        assert_eq!(super::grouped(62345678912), "62,345,678,912");
    }
}
