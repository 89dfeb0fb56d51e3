//! Two scenarios side by side (before and after a change), with the differences in one table.

use std::rc::Rc;

use headroom_core::Analysis;
use headroom_core::format;
use yew::prelude::*;

use super::{Outcome, outcome_with};
use crate::calibration_state::use_user_calibration;
use crate::components::form::ScenarioForm;
use crate::components::notices::LinkErrors;
use crate::components::report::Verdict;
use crate::dom;
use crate::query::{compare_query, parse};
use crate::state::{Action, CalcState};

/// One compared quantity: a label and how to read it from an analysis.
type Row = (
    &'static str,
    &'static str,
    fn(&Analysis) -> Option<u64>,
    bool,
);

const ROWS: &[Row] = &[
    (
        "peak-device",
        "Peak, device (nvidia-smi)",
        |a| Some(a.estimate.bytes.peak_device),
        true,
    ),
    (
        "peak-reserved",
        "Peak, reserved",
        |a| Some(a.estimate.bytes.peak_reserved),
        true,
    ),
    (
        "peak-tensors",
        "Peak, live tensors",
        |a| Some(a.estimate.bytes.peak_tensors),
        true,
    ),
    (
        "weights",
        "Weights",
        |a| Some(a.estimate.bytes.weights),
        true,
    ),
    (
        "gradients",
        "Gradients",
        |a| Some(a.estimate.bytes.gradients),
        true,
    ),
    (
        "optimizer-states",
        "Optimizer states",
        |a| Some(a.estimate.bytes.optimizer_states),
        true,
    ),
    (
        "retained",
        "Alive after forward + loss",
        |a| Some(a.estimate.bytes.retained_after_forward),
        true,
    ),
    ("host", "Host memory", |a| Some(a.estimate.bytes.host), true),
    (
        "max-batch",
        "Largest micro-batch that fits",
        |a| a.fit.and_then(|f| f.max_micro_batch).map(u64::from),
        false,
    ),
    (
        "max-seq",
        "Longest sequence that fits",
        |a| a.fit.and_then(|f| f.max_seq).map(u64::from),
        false,
    ),
];

fn cell(v: Option<u64>, bytes: bool) -> String {
    match v {
        None => "none".into(),
        Some(v) if bytes => format::bytes(v),
        Some(v) => v.to_string(),
    }
}

fn diff(a: Option<u64>, b: Option<u64>, bytes: bool) -> String {
    match (a, b) {
        (Some(a), Some(b)) if a == b => "same".into(),
        (Some(a), Some(b)) => {
            let d = b as i128 - a as i128;
            let sign = if d < 0 { "-" } else { "+" };
            let mag = d.unsigned_abs() as u64;
            if bytes {
                format!("{sign}{}", format::bytes(mag))
            } else {
                format!("{sign}{mag}")
            }
        }
        _ => "—".into(),
    }
}

fn table(a: &Analysis, b: &Analysis) -> Html {
    html! {
        <div class="table-wrap">
            <table class="compare" id="compare-table">
                <thead><tr><th scope="col">{ "" }</th><th scope="col">{ "A" }</th>
                    <th scope="col">{ "B" }</th><th scope="col">{ "B − A" }</th></tr></thead>
                <tbody>
                { for ROWS.iter().map(|(id, label, get, bytes)| {
                    let (va, vb) = (get(a), get(b));
                    html! {
                        <tr data-id={*id}>
                            <th scope="row">{ *label }</th>
                            <td data-value={va.map(|v| v.to_string())}>{ cell(va, *bytes) }</td>
                            <td data-value={vb.map(|v| v.to_string())}>{ cell(vb, *bytes) }</td>
                            <td>{ diff(va, vb, *bytes) }</td>
                        </tr>
                    }
                }) }
                </tbody>
            </table>
        </div>
    }
}

fn side(name: &str, state: &UseReducerHandle<CalcState>, result: &Outcome) -> Html {
    let dispatch = {
        let state = state.clone();
        Callback::from(move |a: Action| state.dispatch(a))
    };
    html! {
        <section class="side" aria-label={format!("Scenario {name}")}>
            <h2>{ format!("Scenario {name}") }</h2>
            { match result {
                Ok(a) => html! { <Verdict analysis={a.clone()} gpus={state.scenario.gpus}/> },
                Err(e) => html! { <div class="notice error" role="alert">{ e }</div> },
            } }
            <ScenarioForm state={Rc::new((**state).clone())} dispatch={dispatch}
                          id_prefix={name.to_ascii_lowercase()} open_defaults={false}/>
        </section>
    }
}

#[component]
pub fn Compare() -> Html {
    let opened = use_memo((), |_| parse(&dom::current_query(), Default::default()));
    let a = {
        let o = opened.clone();
        use_reducer(move || CalcState::new(o.scenario.clone(), o.errors.clone()))
    };
    let b = {
        let o = opened.clone();
        use_reducer(move || CalcState::new(o.other.clone(), Vec::new()))
    };
    // A calibration file the user loaded applies here as in the calculator (to its own GPU).
    let user = use_user_calibration();
    // Both sides show the estimate and what fits, never a strategy table.
    let ra: Rc<Outcome> = use_memo((a.scenario.clone(), user.clone()), |(s, u)| {
        outcome_with(s, u.as_deref(), true)
    });
    let rb: Rc<Outcome> = use_memo((b.scenario.clone(), user.clone()), |(s, u)| {
        outcome_with(s, u.as_deref(), true)
    });
    {
        let first = (opened.scenario.clone(), opened.other.clone());
        use_effect_with((a.scenario.clone(), b.scenario.clone()), move |now| {
            if *now != first {
                dom::replace_url(&format!("/compare?{}", compare_query(&now.0, &now.1)));
            }
            dom::frame_done();
        });
    }
    let dismiss = {
        let a = a.clone();
        Callback::from(move |_| a.dispatch(Action::DismissLinkErrors))
    };
    html! {
        <main class="page compare-page" id="main">
            <h1>{ "Compare two scenarios" }</h1>
            <p class="help">{ crate::help::page("compare_help") }</p>
            <LinkErrors errors={a.link_errors.clone()} on_dismiss={dismiss}/>
            if let (Ok(x), Ok(y)) = (&*ra, &*rb) {
                { table(x, y) }
            }
            <div class="sides">
                { side("A", &a, &ra) }
                { side("B", &b, &rb) }
            </div>
        </main>
    }
}
