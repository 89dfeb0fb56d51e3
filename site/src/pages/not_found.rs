//! A page for addresses the site does not have.

use yew::prelude::*;

#[component]
pub fn NotFound() -> Html {
    html! {
        <main class="page narrow" id="main">
            <h1>{ "No such page" }</h1>
            <p>{ "This address is not part of Headroom. " }
               <a href={format!("{}/", crate::dom::base_path())}>{ "Open the calculator" }</a>{ "." }</p>
        </main>
    }
}
