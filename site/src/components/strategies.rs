//! The strategy table and the verdict's next steps. The table (one estimate and one step time
//! per technique) is computed by the on-demand worker (`worker.rs`, request `strategies`), not by
//! the page: its code stays out of the first download, and the page's input changes wait for one
//! estimate instead of twenty. The answer is kept per link (and calibration), and components
//! that ask for the same one while it is on its way wait for that request.

use std::cell::RefCell;
use std::rc::Rc;

use headroom_core::format;
use headroom_core::strategies::{Strategy, next_steps, wire};
use yew::prelude::*;

use super::num::Bytes;
use super::report::AnalysisProps;

/// The worker's table for one request, or why there is none.
type Rows = Rc<Result<Vec<Strategy>, String>>;

thread_local! {
    /// The latest answers, newest last (a few: the page moves between a handful of links).
    static ANSWERS: RefCell<Vec<(String, Rows)>> = const { RefCell::new(Vec::new()) };
    /// The requests on their way, each with the components waiting for it.
    static WAITING: RefCell<Vec<(String, Vec<Callback<Rows>>)>> = const { RefCell::new(Vec::new()) };
}

const KEPT: usize = 6;

/// Asks for the table of `key` (its worker request's fields joined) and calls `done` with it:
/// at once when it is known, else when the one request for it answers.
fn ask(key: String, request: [String; 3], done: Callback<Rows>) {
    if let Some(rows) = ANSWERS.with(|a| {
        a.borrow()
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, r)| r.clone())
    }) {
        done.emit(rows);
        return;
    }
    let first = WAITING.with(|w| {
        let mut w = w.borrow_mut();
        match w.iter_mut().find(|(k, _)| *k == key) {
            Some((_, waiting)) => {
                waiting.push(done.clone());
                false
            }
            None => {
                w.push((key.clone(), vec![done.clone()]));
                true
            }
        }
    });
    if !first {
        return;
    }
    wasm_bindgen_futures::spawn_local(async move {
        let [kind, link, cal] = &request;
        let answer = crate::worker_client::request(&[kind, link, cal]).await;
        let rows: Rows = Rc::new(answer.and_then(|lines| wire::from_lines(&lines)));
        // A failure (the worker could not load: offline) is not kept: the next ask tries again.
        if rows.is_ok() {
            ANSWERS.with(|a| {
                let mut a = a.borrow_mut();
                a.push((key.clone(), rows.clone()));
                let over = a.len().saturating_sub(KEPT);
                a.drain(..over);
            });
        }
        let waiting = WAITING.with(|w| {
            let mut w = w.borrow_mut();
            w.iter()
                .position(|(k, _)| *k == key)
                .map(|i| w.remove(i).1)
                .unwrap_or_default()
        });
        for d in waiting {
            d.emit(rows.clone());
        }
    });
}

/// The strategy table of the analysed scenario once the worker has answered (`None` before, or
/// when `wanted` is false). The user's calibration file goes with the request when the page's
/// analysis used it (`props.builtin` false and the file is for this GPU).
#[hook]
fn use_strategies(props: &AnalysisProps, wanted: bool) -> Option<Rows> {
    let user = crate::calibration_state::use_user_calibration();
    let cal: Rc<str> = match (&user, props.builtin) {
        (Some(u), false) if u.for_gpu(&props.analysis.estimate.verdict.gpu).is_some() => {
            u.text.clone()
        }
        _ => Rc::from(""),
    };
    let link = props.analysis.link.clone();
    let key = wanted.then(|| format!("{link}\u{1f}{cal}"));
    let got = use_state(|| None::<(String, Rows)>);
    {
        let got = got.clone();
        use_effect_with(key.clone(), move |key| {
            if let Some(key) = key.clone() {
                let for_key = key.clone();
                let done = Callback::from(move |rows: Rows| got.set(Some((for_key.clone(), rows))));
                ask(key, ["strategies".into(), link, cal.to_string()], done);
            }
        });
    }
    match (&*got, key) {
        (Some((k, rows)), Some(key)) if *k == key => Some(rows.clone()),
        _ => None,
    }
}

/// `−12% (3,450 tok/s)`, or `same (…)` within half a percent.
pub fn speed(s: &Strategy) -> String {
    let tps = super::num::grouped(s.tokens_per_second.max(0.0).round() as u64);
    let pct = s.speed_change * 100.0;
    if pct.abs() < 0.5 {
        format!("same ({tps} tok/s)")
    } else {
        format!(
            "{}{:.0}% ({tps} tok/s)",
            if pct < 0.0 { "−" } else { "+" },
            pct.abs()
        )
    }
}

/// What to do next. A setup that fits is pointed at the planner and the table. One that does not
/// gets the fastest single change that fits and trains the same thing and, beside it, the
/// fastest that fits at all when that one changes the training and is faster
/// (`strategies::next_steps`, as the CLI prints them), each applied in one click; or a pointer
/// to the planner when no single change is enough.
#[component]
pub fn NextStep(props: &AnalysisProps) -> Html {
    let fits = props.analysis.estimate.verdict.fits;
    let rows = use_strategies(props, !fits);
    if fits {
        return html! {
            <p class="next" id="next-step">{ "Next: " }
                <a href="#planner-title">{ "find faster plans" }</a>{ " or " }
                <a href="#strategies-title">{ "see what each technique saves" }</a>{ "." }</p>
        };
    }
    let rows = match rows.as_deref() {
        None => {
            return html! { <p class="next" id="next-step">{ "Next: looking for the fastest change that fits…" }</p> };
        }
        Some(Err(e)) => {
            return html! { <p class="next" id="next-step">{ format!("Next: {e}") }</p> };
        }
        Some(Ok(rows)) => rows,
    };
    let base = crate::dom::base_path();
    let offer = |r: &Strategy, lead: &str, id: &'static str| {
        html! {
            <>
                { format!("{lead}{} ({}) fits: peak {}, speed {}{}. ", r.technique, r.change,
                    format::bytes(r.peak_device), speed(r),
                    if r.changes_training { "; it changes what is trained" } else { "" }) }
                <a class="button-like" href={format!("{base}/?{}", r.link)} {id}>{ "Apply" }</a>
            </>
        }
    };
    match next_steps(rows, false) {
        n if n.same_training.is_none() && n.fastest.is_none() => html! {
            <p class="next" id="next-step">
                { "No single change is enough: " }
                <a href="#planner-title">{ "find plans that combine them" }</a>{ "." }
            </p>
        },
        n => html! {
            <>
                <p class="next" id="next-step">
                    { match (n.same_training, n.fastest) {
                        (Some(s), _) => offer(s, "Next, training the same thing: ", "apply-next"),
                        (None, Some(f)) => offer(f, "Next: ", "apply-next"),
                        (None, None) => html! {},
                    } }
                </p>
                if let (Some(_), Some(f)) = (n.same_training, n.fastest) {
                    <p class="next" id="next-fastest">{ offer(f, "Faster: ", "apply-fastest") }</p>
                }
            </>
        },
    }
}

/// Each memory-saving technique applied to this scenario, largest saving first, as the worker
/// computes it.
#[component]
pub fn StrategyTable(props: &AnalysisProps) -> Html {
    match use_strategies(props, true).as_deref() {
        None => html! { <p id="strategy-wait">{ "Computing each technique's effect…" }</p> },
        Some(Err(e)) => html! { <p class="notice" role="alert">{ e.clone() }</p> },
        Some(Ok(rows)) => table(rows),
    }
}

/// The table of `rows`.
pub fn table(rows: &[Strategy]) -> Html {
    if rows.is_empty() {
        return html! { <p>{ "No further technique applies to this scenario." }</p> };
    }
    html! {
        <div class="table-wrap">
            <table class="strategies" id="strategy-table">
                <thead><tr><th scope="col">{ "Technique" }</th><th scope="col">{ "Change" }</th>
                    <th scope="col">{ "Peak after" }</th><th scope="col">{ "Saves" }</th>
                    <th scope="col">{ "Fits" }</th><th scope="col">{ "Speed" }</th></tr></thead>
                <tbody>
                { for rows.iter().map(|s| html! {
                    <tr data-id={s.id.clone()} class={classes!(s.recommended.then_some("recommended"))}>
                        <th scope="row">{ &s.technique }</th>
                        <td data-label="Change">{ &s.change }{ if s.changes_training { " *" } else { "" } }</td>
                        <td data-label="Peak after"><Bytes bytes={s.peak_device}/></td>
                        <td data-label="Saves" class={if s.saved < 0 { "costs" } else { "saves" }}>
                            { if s.saved < 0 { format!("costs {}", format::bytes(s.saved.unsigned_abs())) }
                              else { format::bytes(s.saved as u64) } }
                        </td>
                        <td data-label="Fits">{ if s.recommended { "yes, fastest" } else if s.fits { "yes" } else { "no" } }</td>
                        <td data-label="Speed" class={if s.speed_change < -0.005 { "costs" } else { "saves" }}>{ speed(s) }</td>
                    </tr>
                }) }
                </tbody>
            </table>
            <p class="note">{ crate::help::page("ladder_note") }</p>
        </div>
    }
}

#[cfg(test)]
mod tests {
    use headroom_core::strategies::Strategy;

    fn row(speed_change: f64, tokens_per_second: f64) -> Strategy {
        Strategy {
            id: "x".into(),
            technique: String::new(),
            change: String::new(),
            peak_device: 0,
            saved: 0,
            fits: true,
            step_seconds: 1.0,
            tokens_per_step: 1,
            tokens_per_second,
            tokens_per_second_per_gpu: tokens_per_second,
            speed_change,
            changes_training: false,
            recommended: false,
            link: String::new(),
        }
    }

    #[test]
    fn speed_reads_as_a_signed_percentage_with_the_rate() {
        assert_eq!(super::speed(&row(-0.12, 3450.4)), "−12% (3,450 tok/s)");
        assert_eq!(super::speed(&row(0.9, 16709.0)), "+90% (16,709 tok/s)");
        assert_eq!(super::speed(&row(0.004, 7679.0)), "same (7,679 tok/s)");
        assert_eq!(super::speed(&row(-0.004, 7679.0)), "same (7,679 tok/s)");
    }
}
