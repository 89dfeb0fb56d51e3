//! The calculator: inputs on one side, the answer on the other, the state in the URL.
//!
//! An empty link opens on a first question (`FIRST_VISIT`, LoRA of an 8B model on a 24 GB card)
//! with one-click starting points. The verdict names the model and the next step. An input the core
//! refuses dims the results until it is fixed.

use std::rc::Rc;

use headroom_core::codec::named_scenario;
use headroom_core::{Analysis, Scenario};
use yew::prelude::*;

use super::{Outcome, outcome_with};
use crate::calibration_state::use_user_calibration;
use crate::charts::ChartKind;
use crate::components::calibration::calibration_note;
use crate::components::chart::Chart;
use crate::components::form::ScenarioForm;
use crate::components::notices::LinkErrors;
use crate::components::planner::Planner;
use crate::components::report::{BreakdownTable, KeyNumbers, LayerInventory, Verdict, VerdictBar};
use crate::components::share::Share;
use crate::components::strategies::StrategyTable;
use crate::dom;
use crate::query::{calculator_query, compare_query, parse};
use crate::state::{Action, CalcState};

#[derive(Properties, PartialEq)]
pub struct CalculatorProps {
    /// A named scenario (short link `/s/<id>`); `None` for the plain calculator.
    #[prop_or_default]
    pub named: Option<AttrValue>,
}

/// Where a first visit opens (the plain calculator with an empty link): a question the page
/// answers well, LoRA on an 8B model on one 24 GB card.
const FIRST_VISIT: &str = "llama-3.1-8b-lora-4090";

/// The state a page opens on: the named scenario (if any), then the link's fields on top.
/// A plain calculator with an empty link opens on [`FIRST_VISIT`].
fn initial_state(named: Option<&str>) -> (CalcState, Option<(String, String)>) {
    let mut errors = Vec::new();
    let query = dom::current_query();
    let named = named.or((query.trim_start_matches('?').is_empty()).then_some(FIRST_VISIT));
    let mut base = Scenario::default();
    let mut title = None;
    if let Some(id) = named {
        match named_scenario(id) {
            Some(n) => {
                base = n.scenario.clone();
                title = Some((n.title.clone(), n.description.clone()));
            }
            None => errors.push(format!(
                "There is no named scenario `{}`; the default scenario is shown.",
                headroom_core::scenario::shorten(id)
            )),
        }
    }
    let q = parse(&query, base);
    errors.extend(q.errors);
    (CalcState::new(q.scenario, errors), title)
}

/// The results column for one analysis (`builtin`: computed with the built-in calibration
/// whatever file the user loaded, as embeds are).
pub fn results(a: &Rc<Analysis>, gpus: u32, file_stem: &str, builtin: bool) -> Html {
    let est = Rc::new(a.estimate.clone());
    html! {
        <>
            <Verdict analysis={a.clone()} gpus={gpus} {builtin}/>
            <section class="card" aria-labelledby="timeline-title">
                <h2 id="timeline-title">{ "Memory over one training step" }</h2>
                <p class="help">{ crate::help::page("timeline_help") }</p>
                <Chart kind={ChartKind::Timeline} estimate={est.clone()} file_stem={file_stem.to_string()}
                       label={format!("Memory timeline: peak {} in the {}", headroom_core::format::bytes(a.estimate.peak.device), a.estimate.peak.phase.label())}/>
            </section>
            <KeyNumbers analysis={a.clone()} gpus={gpus}/>
            <section class="card" aria-labelledby="breakdown-title">
                <h2 id="breakdown-title">{ "Breakdown" }</h2>
                <Chart kind={ChartKind::Breakdown} estimate={est} file_stem={file_stem.to_string()}
                       label="Memory by component, persistent and transient"/>
                <BreakdownTable analysis={a.clone()} gpus={gpus}/>
            </section>
            <section class="card" aria-labelledby="strategies-title">
                <h2 id="strategies-title">{ "What each technique saves here" }</h2>
                <StrategyTable analysis={a.clone()} gpus={gpus} {builtin}/>
            </section>
            <LayerInventory analysis={a.clone()} gpus={gpus}/>
        </>
    }
}

#[component]
pub fn Calculator(props: &CalculatorProps) -> Html {
    let named = props.named.clone();
    let opened = use_memo((), move |_| initial_state(named.as_deref()));
    let state = {
        let opened = opened.clone();
        use_reducer(move || opened.0.clone())
    };
    // The user's own calibration file (loaded on /calibration) replaces the built-in one for
    // its GPU.
    let user = use_user_calibration();
    let analysis: Rc<Outcome> = use_memo((state.scenario.clone(), user.clone()), |(s, u)| {
        outcome_with(s, u.as_deref(), true)
    });
    {
        // The link follows every change (replace, not push); the short link stays until then.
        let first = opened.0.scenario.clone();
        use_effect_with(state.scenario.clone(), move |s| {
            if *s != first {
                dom::replace_url(&format!("/?{}", calculator_query(s)));
            }
            dom::frame_done();
        });
    }
    let dispatch = {
        let state = state.clone();
        Callback::from(move |a: Action| state.dispatch(a))
    };
    let dismiss = dispatch.reform(|_| Action::DismissLinkErrors);
    let scen = state.scenario.clone();
    // An input the core could not read leaves the scenario at its last readable value.
    let stale = !state.field_errors.is_empty();
    let compare_href = format!(
        "{}/compare?{}",
        dom::base_path(),
        compare_query(&scen, &scen)
    );
    html! {
        <main class="calc" id="main">
            <aside class="inputs" aria-label="Inputs">
                <ScenarioForm state={Rc::new((*state).clone())} dispatch={dispatch.clone()}/>
                if let (Ok(a), false) = (&*analysis, stale) {
                    <VerdictBar analysis={a.clone()} gpus={scen.gpus}/>
                }
            </aside>
            <div class={classes!("results", stale.then_some("stale"))}>
                // A named scenario's heading describes it only until an input changes.
                if let (Some((title, description)), true) = (&opened.1, opened.0.scenario == scen) {
                    <header class="named">
                        <h1>{ title }</h1>
                        <p>{ description }</p>
                    </header>
                }
                <LinkErrors errors={state.link_errors.clone()} on_dismiss={dismiss}/>
                if props.named.is_none() {
                    <nav class="starts" aria-label="Common questions">
                        // One-click starting points for the questions people ask most:
                        // the lead, then `named scenario=question` pairs, from the fetched
                        // page prose (content/help.toml).
                        { for crate::help::page("starts").split('|').map(|part| match part.split_once('=') {
                            Some((id, q)) => html! { <a href={format!("{}/s/{id}", dom::base_path())}>{ q }</a> },
                            None => html! { <span>{ part }</span> },
                        }) }
                    </nav>
                }
                <div class="toolbar">
                    <Share scenario={scen.clone()}/>
                    <a class="button-like" href={compare_href} id="compare-link">{ "Compare with a change" }</a>
                </div>
                if stale {
                    if let Ok(a) = &*analysis {
                        <div class="notice" role="status" id="stale-notice">
                            { crate::help::page("stale_notice").replacen("{}", &match &scen.model {
                                headroom_core::scenario::ModelChoice::Custom(spec) => crate::components::report::custom_label(spec),
                                _ => crate::components::report::model_name(&a.estimate.model),
                            }, 1) }
                        </div>
                    }
                }
                { match &*analysis {
                    Ok(a) => html! {
                        <>
                            { calibration_note(&scen.gpu, user.as_deref()) }
                            { results(a, scen.gpus, "headroom", false) }
                            <Planner scenario={scen.clone()}/>
                        </>
                    },
                    Err(e) => html! { <div class="notice error" role="alert" id="estimate-error">{ e }</div> },
                } }
            </div>
        </main>
    }
}
