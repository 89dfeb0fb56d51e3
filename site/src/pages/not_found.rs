//! A page for addresses the site does not have.

use yew::prelude::*;
use yew_router::prelude::*;

use crate::route::Route;

#[component]
pub fn NotFound() -> Html {
    html! {
        <main class="page narrow" id="main">
            <h1>{ "No such page" }</h1>
            <p>{ "This address is not part of Headroom. " }
               <Link<Route> to={Route::Calculator}>{ "Open the calculator" }</Link<Route>>{ "." }</p>
        </main>
    }
}
