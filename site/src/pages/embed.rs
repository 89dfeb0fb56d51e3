//! The embed layout: one view of a scenario for an iframe, without the site's chrome. It tells
//! its parent page its height whenever that changes, so the frame can fit its content.

use std::rc::Rc;

use yew::prelude::*;

use super::calculator::results;
use super::{Outcome, outcome};
use crate::charts::ChartKind;
use crate::components::chart::Chart;
use crate::components::report::{BreakdownTable, Verdict, gpu_name, model_name};
use crate::components::strategies::StrategyTable;
use crate::dom;
use crate::query::{View, calculator_query, parse};

#[component]
pub fn Embed() -> Html {
    let q = use_memo((), |_| parse(&dom::current_query(), Default::default()));
    // Built-in calibrations only: an embed shows every visitor of the host page the same
    // numbers, whatever file one of them loaded on this site.
    let result: Rc<Outcome> = use_memo((q.scenario.clone(), q.view), |(s, view)| {
        // Each view computes only what it shows (the strategy table is the worker's).
        outcome(s, matches!(view, View::Calculator | View::Breakdown))
    });
    use_effect_with((), |_| {
        dom::watch_height();
        dom::frame_done();
    });
    let open = dom::absolute_url(&format!("/?{}", calculator_query(&q.scenario)));
    let body = match &*result {
        Err(e) => html! { <div class="notice error" role="alert">{ e }</div> },
        Ok(a) => {
            let est = Rc::new(a.estimate.clone());
            let gpus = q.scenario.gpus;
            // Every view says which model, GPUs and verdict it is for.
            let v = &a.estimate.verdict;
            let caption = html! {
                <p class="embed-caption" id="embed-caption">
                    <strong>{ model_name(&a.estimate.model) }</strong>
                    { format!(" on {gpus} x {}: {}, peak {} of {}{}.", gpu_name(&v.gpu),
                        if v.fits { "fits" } else { "does not fit" },
                        headroom_core::format::bytes(a.estimate.peak.device),
                        headroom_core::format::bytes(v.capacity),
                        if gpus > 1 { " per GPU" } else { "" }) }
                </p>
            };
            match q.view {
                // The results open with the verdict, which names the model and GPUs.
                View::Calculator => results(a, gpus, "headroom", true),
                View::Timeline => html! {
                    <>{ caption }
                    <Chart kind={ChartKind::Timeline} estimate={est} label="Memory over one training step"/></>
                },
                View::Breakdown => html! {
                    <>
                        <Verdict analysis={a.clone()} gpus={gpus} builtin=true/>
                        <Chart kind={ChartKind::Breakdown} estimate={est} label="Memory by component"/>
                        <BreakdownTable analysis={a.clone()} gpus={gpus}/>
                    </>
                },
                View::Strategies => {
                    html! { <>{ caption }<StrategyTable analysis={a.clone()} gpus={gpus} builtin=true/></> }
                }
            }
        }
    };
    html! {
        <main class="embed" id="main" data-view={q.view.id()}>
            if !q.errors.is_empty() {
                <div class="notice" role="alert" id="link-errors">
                    <ul>{ for q.errors.iter().map(|e| html! { <li>{ e }</li> }) }</ul>
                </div>
            }
            { body }
            <p class="embed-footer">
                <a href={open} target="_blank" rel="noopener">{ "Open in Headroom" }</a>
                { " · computed in your browser" }
            </p>
        </main>
    }
}
