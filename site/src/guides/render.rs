//! Renders a parsed guide's Markdown nodes. Text is always text (never markup), and links were
//! checked by the core's parser (http(s), a site path or an anchor only).

use headroom_core::guide::{Inline, Node};
use yew::prelude::*;

/// A site path (`/guides/x`) under the site's base; external links unchanged.
pub fn href(h: &str) -> String {
    if h.starts_with('/') {
        format!("{}{h}", crate::dom::base_path())
    } else {
        h.to_string()
    }
}

/// Inline elements; `value` renders a live value (`{{metric}}`) for its block.
pub fn inlines(items: &[Inline], value: &dyn Fn(&str, &str, usize) -> Html) -> Html {
    html! {
        { for items.iter().map(|i| match i {
            Inline::Text(t) => html! { { t.clone() } },
            Inline::Code(t) => html! { <code>{ t.clone() }</code> },
            Inline::Bold(t) => html! { <strong>{ t.clone() }</strong> },
            Inline::Italic(t) => html! { <em>{ t.clone() }</em> },
            Inline::Link { text, href: h } => {
                let external = h.starts_with("http");
                html! {
                    <a href={href(h)} rel={external.then_some("noopener")}>{ text.clone() }</a>
                }
            }
            Inline::Value { metric, change, block } => value(metric, change, *block),
        }) }
    }
}

/// One node other than a calculator block (the page draws those, they hold state).
pub fn node(n: &Node, value: &dyn Fn(&str, &str, usize) -> Html) -> Html {
    match n {
        Node::Heading {
            level: 2,
            text,
            anchor,
        } => html! {
            <h2 id={anchor.clone()}>{ text.clone() }</h2>
        },
        Node::Heading { text, anchor, .. } => {
            html! { <h3 id={anchor.clone()}>{ text.clone() }</h3> }
        }
        Node::Paragraph(v) => html! { <p>{ inlines(v, value) }</p> },
        Node::Quote(v) => html! { <blockquote><p>{ inlines(v, value) }</p></blockquote> },
        Node::List { ordered, items } => {
            let lis =
                html! { { for items.iter().map(|i| html! { <li>{ inlines(i, value) }</li> }) } };
            if *ordered {
                html! { <ol>{ lis }</ol> }
            } else {
                html! { <ul>{ lis }</ul> }
            }
        }
        Node::Code { lang, text } => html! {
            <pre class="code" data-lang={lang.clone()}><code>{ text.clone() }</code></pre>
        },
        Node::Calc { .. } => html! {},
    }
}
