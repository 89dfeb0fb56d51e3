//! The planner panel: on request, the setups that fit ranked by speed, the ladder of single
//! changes from the scenario (memory and speed per step, as bars), and the configuration of a
//! chosen plan to copy. Computed by the core's planner in the on-demand worker (`worker.rs`),
//! only when opened: the search is not part of the page's first download.

use headroom_core::Scenario;
use headroom_core::export::Target;
use headroom_core::format::bytes;
use headroom_core::plan::{Plan, Planning, Stack, wire};
use yew::prelude::*;

use crate::dom;

#[derive(Properties, PartialEq)]
pub struct PlannerProps {
    pub scenario: Scenario,
}

fn tps(x: f64) -> String {
    crate::components::num::grouped(if x.is_finite() && x > 0.0 {
        x.round() as u64
    } else {
        0
    })
}

fn pct(change: f64) -> String {
    if !change.is_finite() || change.abs() < 0.005 {
        "same".into()
    } else {
        format!("{:+.0}%", change * 100.0)
    }
}

/// Seconds as people read a training run's length: "5.2 h", "3.1 days".
fn duration(s: f64) -> String {
    match s {
        x if x < 3600.0 => format!("{:.0} min", x / 60.0),
        x if x < 2.0 * 86400.0 => format!("{:.1} h", x / 3600.0),
        x => format!("{:.1} days", x / 86400.0),
    }
}

/// A plan's changes in the calculator's words: "Checkpointing: every layer", "CUDA graphs:
/// off", not link keys.
fn changes(p: &Plan) -> String {
    let c: Vec<String> = p
        .changes
        .iter()
        .map(|c| match crate::fields::find(c.field) {
            Some(f) => {
                let to = match f.control {
                    crate::fields::Control::Check => {
                        (if c.to == "1" { "on" } else { "off" }).to_string()
                    }
                    crate::fields::Control::Select(options) => options(&p.scenario)
                        .into_iter()
                        .find(|(v, _)| *v == c.to)
                        .map_or_else(|| c.to.clone(), |(_, label)| label),
                    _ => c.to.clone(),
                };
                format!("{}: {to}", f.label)
            }
            None => format!("{} {}", c.field, c.to),
        })
        .collect();
    if c.is_empty() {
        "as it is".into()
    } else {
        c.join(", ")
    }
}

fn plan_rows(
    list: &[Plan],
    now: f64,
    chosen: usize,
    offset: usize,
    on_pick: &Callback<usize>,
) -> Html {
    html! {
        <tbody>
        { for list.iter().enumerate().map(|(i, p)| {
            let n = offset + i;
            let pick = on_pick.reform(move |_: MouseEvent| n);
            let href = format!("{}/?{}", dom::base_path(), p.link);
            html! {
                <tr data-plan={n.to_string()} class={classes!((n == chosen).then_some("recommended"))}>
                    <td><button type="button" class="pick" onclick={pick}
                        aria-pressed={(n == chosen).to_string()}>{ format!("#{}", n + 1) }</button></td>
                    <td class="num" data-label="Tokens/s">{ tps(p.tokens_per_second) }</td>
                    // Against the current setup only when it runs (fits); slowdowns in red.
                    { match (now > 0.0).then(|| p.tokens_per_second / now - 1.0) {
                        Some(c) => html! { <td data-label="vs now" class={if c < -0.005 { "costs" } else { "saves" }}>{ pct(c) }</td> },
                        None => html! { <td data-label="vs now" title="the current setup does not fit">{ "–" }</td> },
                    } }
                    <td data-label="Peak">{ bytes(p.peak_device) }
                        if p.headroom_percent < headroom_core::estimate::TIGHT_PERCENT {
                            <span class="risky" title="under 5% of the GPU to spare while runtime constants are assumed">{ " risky" }</span>
                        }</td>
                    <td data-label="Step, MFU">{ format!("{:.2} s, {:.0}%", p.step_seconds, p.mfu * 100.0) }</td>
                    <td data-label="To train">{ match &p.cost {
                        Some(c) => format!("{}, {:.0} GPU-h{}", duration(c.seconds), c.gpu_hours,
                            c.money.map_or(String::new(), |m| format!(", {m:.0} at your price"))),
                        None => "–".into(),
                    } }</td>
                    <td class="changes" data-label="Changes">{ changes(p) }</td>
                    <td data-label="Runs on">{ if p.runs_on.is_empty() { "env.sh only".to_string() } else { p.runs_on.join(", ") } }</td>
                    <td><a href={href}>{ "open" }</a></td>
                </tr>
            }
        }) }
        </tbody>
    }
}

/// The ladder: one bar per step, its length the device peak against the largest, the GPU's
/// capacity marked, speed beside it.
fn ladder(p: &Planning) -> Html {
    let cap = p.input.capacity.max(1);
    let top = p
        .ladder
        .iter()
        .map(|s| s.peak_device)
        .max()
        .unwrap_or(1)
        .max(cap) as f64;
    html! {
        <ol class="ladder" id="planner-ladder">
        { for p.ladder.iter().map(|s| {
            // The bars' look is style.css's (#planner .ladder); only the lengths are computed.
            let w = (s.peak_device as f64 / top * 100.0).clamp(0.5, 100.0);
            let bar = format!("width:{w:.1}%");
            let cap_at = format!("left:{:.1}%", cap as f64 / top * 100.0);
            let what = if s.change.is_empty() { s.technique.clone() } else { format!("{}: {}", s.technique, s.change) };
            html! {
                <li data-id={s.id.clone()} data-fits={s.fits.to_string()}>
                    <span>{ what }</span>
                    <span class="track">
                        <span class={if s.fits { "bar fits" } else { "bar" }} style={bar}/>
                        <span class="cap" style={cap_at} title="GPU capacity"/>
                    </span>
                    <span class="help">{ format!("{} ({}), {} tokens/s, {} vs the step before, {} in all",
                        bytes(s.peak_device), if s.fits { "fits" } else { "does not fit" },
                        tps(s.tokens_per_second), pct(s.speed_change), pct(s.speed_vs_start)) }</span>
                </li>
            }
        }) }
        </ol>
    }
}

/// An optional planning input: empty is "none" (the scenario's own), else a positive number
/// (`2e9` reads too); a message naming the input otherwise.
fn number<T: std::str::FromStr>(text: &str, what: &str) -> Result<Option<T>, String> {
    let t = text.trim().replace(',', "");
    if t.is_empty() {
        return Ok(None);
    }
    let as_f64: Option<f64> = t.parse().ok().filter(|x: &f64| x.is_finite() && *x > 0.0);
    match (t.parse::<T>(), as_f64) {
        (Ok(v), Some(_)) => Ok(Some(v)),
        (Err(_), Some(x)) if x.fract() == 0.0 => format!("{x:.0}")
            .parse()
            .map(Some)
            .map_err(|_| format!("{what}: `{text}` is out of range")),
        _ => Err(format!("{what}: `{text}` is not a positive number")),
    }
}

/// The worker's answer for a plan (`worker.rs`, request `export`): the file shown, the
/// targets that express the plan, why the others do not, the file's text and its notes.
#[derive(Clone, PartialEq)]
struct Written {
    shown: Target,
    offered: Vec<Target>,
    refused: Vec<String>,
    text: String,
    notes: Vec<String>,
}

impl Written {
    fn parse(answer: &[String]) -> Result<Written, String> {
        let bad = || "The configuration could not be written.".to_string();
        let [shown, offered, n, rest @ ..] = answer else {
            return Err(bad());
        };
        let n: usize = n.parse().map_err(|_| bad())?;
        let target = |id: &str| Target::parse("export", id).map_err(|e| e.to_string());
        let (refused, tail) = rest.split_at(n.min(rest.len()));
        let (text, notes) = tail.split_first().ok_or_else(bad)?;
        Ok(Written {
            shown: target(shown)?,
            offered: offered
                .split(',')
                .filter(|t| !t.is_empty())
                .map(target)
                .collect::<Result<_, _>>()?,
            refused: refused.to_vec(),
            text: text.clone(),
            notes: notes.to_vec(),
        })
    }
}

/// The file's toolbar (a button per target that expresses the plan, Copy), why the other
/// targets are not offered, and the text; or its error, or that it is being written.
fn written_view(
    written: Option<&Result<Written, String>>,
    target: &UseStateHandle<Target>,
    on_copy: Callback<MouseEvent>,
    status: &UseStateHandle<String>,
) -> Html {
    match written {
        Some(Ok(w)) => html! {
            <>
                <div class="toolbar" role="group" aria-label="Configuration">
                    { for w.offered.iter().map(|t| {
                        let (target, t) = (target.clone(), *t);
                        html! { <button type="button" data-target={t.id()} aria-pressed={(t == w.shown).to_string()}
                            onclick={Callback::from(move |_: MouseEvent| target.set(t))}>{ t.file_name() }</button> }
                    }) }
                    <button type="button" id="planner-copy" onclick={on_copy}>{ "Copy" }</button>
                    <span class="status" role="status">{ (**status).clone() }</span>
                </div>
                if !w.refused.is_empty() {
                    <p class="help" id="planner-not-offered">{ format!("Not offered for this plan: {}.", w.refused.join("; ")) }</p>
                }
                <pre id="planner-export">{ &w.text }</pre>
                if w.shown == Target::DeepSpeed && !w.notes.is_empty() {
                    <ul class="help">{ for w.notes.iter().map(|n| html! { <li>{ n }</li> }) }</ul>
                }
            </>
        },
        Some(Err(e)) => html! { <p class="notice error" role="alert">{ e }</p> },
        None => {
            html! { <p class="help" id="planner-export-pending">{ "Writing the configuration ..." }</p> }
        }
    }
}

/// The planner's options as the worker reads them (`worker.rs`, request `plan`), after the
/// page's inputs are checked.
#[derive(Clone, PartialEq)]
struct Asked {
    link: String,
    allow: bool,
    numbers: [Option<String>; 3],
    stack: Stack,
    keep: Vec<&'static str>,
    all: bool,
    calibration: Option<std::rc::Rc<str>>,
}

/// The page's planning inputs checked as the CLI checks its flags: a number or none each.
fn checked(inputs: &[String; 3]) -> Result<[Option<String>; 3], String> {
    let batch: Option<u64> = number(&inputs[0], "Global batch")?;
    let tokens: Option<f64> = number(&inputs[1], "Tokens to train")?;
    let price: Option<f64> = number(&inputs[2], "Price per GPU-hour")?;
    Ok([
        batch.map(|b| b.to_string()),
        tokens.map(|t| t.to_string()),
        price.map(|p| p.to_string()),
    ])
}

/// The stacks to pick from: any that runs a plan first (the default), then each stack by its
/// file, then every plan.
fn stack_options() -> Vec<(Stack, String)> {
    let mut out = vec![(Stack::Runs, "Any that runs it".to_string())];
    out.extend(Stack::STACKS.iter().map(|&t| {
        let name = match t {
            Target::Trainer => "HF Trainer / accelerate",
            Target::DeepSpeed => "DeepSpeed",
            Target::Fsdp2 => "PyTorch FSDP2 script",
            Target::Axolotl => "axolotl",
            Target::LlamaFactory => "LLaMA-Factory",
            Target::Torchtitan => "torchtitan",
            _ => t.id(),
        };
        (Stack::Only(t), format!("{name} ({})", t.file_name()))
    }));
    out.push((Stack::Any, "Every plan (also env.sh only)".to_string()));
    out
}

/// Settings the planner may keep, as the page names them (`Keep::NAMES`).
const KEEP_LABELS: [(&str, &str); 4] = [
    ("tp", "Tensor, sequence and expert parallelism"),
    ("dp", "Sharding"),
    ("offload", "Offload"),
    ("batch", "Micro-batch"),
];

#[component]
pub fn Planner(props: &PlannerProps) -> Html {
    let open = use_state(|| false);
    let allow = use_state(|| false);
    let chosen = use_state(|| 0usize);
    let target = use_state(|| Target::DeepSpeed);
    let status = use_state(String::new);
    let stack = use_state(Stack::default);
    let keep = use_state(Vec::<&'static str>::new);
    let all = use_state(|| false);
    // The configuration the worker wrote: for which (plan link, target), and its answer.
    let exported = use_state(|| (None::<(String, Target)>, None::<Result<Written, String>>));
    // The CLI's planning inputs, as typed: global batch, tokens to train, price per GPU-hour.
    let inputs = use_state(|| [String::new(), String::new(), String::new()]);
    // The user's calibration file for this GPU, when one is loaded, as the calculator uses it.
    let user = crate::calibration_state::use_user_calibration();
    // What to ask the worker (the planner runs there), or why the inputs cannot be planned.
    let asked: Option<Result<Asked, String>> = open.then(|| {
        Ok(Asked {
            link: headroom_core::codec::encode(&props.scenario),
            allow: *allow,
            numbers: checked(&inputs)?,
            stack: *stack,
            keep: (*keep).clone(),
            all: *all,
            calibration: user
                .as_ref()
                .filter(|u| u.for_gpu(&props.scenario.gpu).is_some())
                .map(|u| u.text.clone()),
        })
    });
    // The worker's planning: for which request, and its answer.
    let planned = use_state(|| (None::<Asked>, None::<Result<Planning, String>>));
    {
        let planned = planned.clone();
        use_effect_with(asked.clone(), move |asked| {
            if let Some(Ok(a)) = asked.clone() {
                wasm_bindgen_futures::spawn_local(async move {
                    let [batch, tokens, price] = a.numbers.clone().map(Option::unwrap_or_default);
                    let keep = a.keep.join(",");
                    let answer = crate::worker_client::request(&[
                        "plan",
                        &a.link,
                        if a.allow { "1" } else { "" },
                        &batch,
                        &tokens,
                        &price,
                        a.stack.id(),
                        &keep,
                        if a.all { "100" } else { "10" },
                        a.calibration.as_deref().unwrap_or(""),
                    ])
                    .await;
                    planned.set((Some(a), Some(answer.and_then(|l| wire::from_lines(&l)))));
                });
            }
        });
    }
    let result: Option<Result<Planning, String>> = match &asked {
        None => None,
        Some(Err(e)) => Some(Err(e.clone())),
        Some(Ok(a)) => (planned.0.as_ref() == Some(a))
            .then(|| planned.1.clone())
            .flatten(),
    };
    let pending = matches!(asked, Some(Ok(_))) && result.is_none();
    let on_open = {
        let open = open.clone();
        Callback::from(move |_: MouseEvent| open.set(!*open))
    };
    let on_allow = {
        let (allow, chosen) = (allow.clone(), chosen.clone());
        Callback::from(move |_: Event| {
            allow.set(!*allow);
            chosen.set(0);
        })
    };
    let on_pick = {
        let chosen = chosen.clone();
        Callback::from(move |n: usize| chosen.set(n))
    };
    let on_stack = {
        let (stack, chosen) = (stack.clone(), chosen.clone());
        Callback::from(move |e: Event| {
            if let Some(el) = e.target_dyn_into::<web_sys::HtmlSelectElement>()
                && let Ok(s) = Stack::parse("stack", &el.value())
            {
                stack.set(s);
                chosen.set(0);
            }
        })
    };
    let on_all = {
        let all = all.clone();
        Callback::from(move |_: Event| all.set(!*all))
    };
    // The plan shown and the file asked for. The worker writes the file and says which targets
    // express the plan (the others with the reason): asked once each time either changes.
    let wanted = match &result {
        Some(Ok(p)) => p
            .plans
            .iter()
            .chain(&p.training_plans)
            .nth(*chosen)
            .or(p.plans.first().or(p.training_plans.first()))
            .map(|pl| (pl.link.clone(), *target)),
        _ => None,
    };
    {
        let exported = exported.clone();
        use_effect_with(wanted, move |wanted| {
            if let Some((link, target)) = wanted.clone() {
                wasm_bindgen_futures::spawn_local(async move {
                    let answer =
                        crate::worker_client::request(&["export", &link, target.id()]).await;
                    exported.set((
                        Some((link, target)),
                        Some(answer.and_then(|a| Written::parse(&a))),
                    ));
                });
            }
        });
    }
    let body = match &result {
        None if pending => {
            html! { <p class="help" id="planner-pending">{ "Searching the plans ..." }</p> }
        }
        None => html! {},
        Some(Err(e)) => html! { <div class="notice error" role="alert">{ e }</div> },
        Some(Ok(p)) => {
            let all: Vec<&Plan> = p.plans.iter().chain(p.training_plans.iter()).collect();
            let pick = all.get(*chosen).or(all.first()).copied();
            let wanted = pick.map(|pl| (pl.link.clone(), *target));
            let written: Option<Result<Written, String>> =
                (exported.0 == wanted).then(|| exported.1.clone()).flatten();
            let pending = wanted.is_some() && written.is_none();
            let on_copy = {
                let text = match &written {
                    Some(Ok(w)) => Some(w.text.clone()),
                    _ => None,
                };
                let status = status.clone();
                Callback::from(move |_: MouseEvent| {
                    let (status, text) = (status.clone(), text.clone().unwrap_or_default());
                    wasm_bindgen_futures::spawn_local(async move {
                        status.set(match dom::copy_text(&text).await {
                            Ok(()) => "Copied.".into(),
                            Err(e) => format!("Could not copy: {e}."),
                        });
                    });
                })
            };
            // "vs now" compares with the current setup only when it fits (it does not run
            // otherwise).
            let now = if p.input.fits {
                p.input.tokens_per_second
            } else {
                0.0
            };
            html! {
                <>
                    <p class="help" id="planner-summary">{ format!(
                        "Now {} ({}). Target: global batch {} of {} tokens. {} combinations searched.",
                        bytes(p.input.peak_device),
                        if p.input.fits { format!("fits, {} tokens/s", tps(now)) } else { "does not fit".into() },
                        p.global_batch, p.seq, p.combinations) }</p>
                    if all.is_empty() {
                        <p id="planner-none">{ crate::help::page("planner_none") }</p>
                    } else {
                        <div class="table-wrap">
                            <table class="strategies" id="planner-plans">
                                <thead><tr><th scope="col">{ "Plan" }</th><th scope="col">{ "Tokens/s" }</th>
                                    <th scope="col">{ "vs now" }</th><th scope="col">{ "Peak" }</th>
                                    <th scope="col">{ "Step, MFU" }</th><th scope="col">{ "To train" }</th>
                                    <th scope="col">{ "Changes" }</th><th scope="col">{ "Runs on" }</th>
                                    <th scope="col">{ "Link" }</th></tr></thead>
                                { plan_rows(&p.plans, now, *chosen, 0, &on_pick) }
                                if !p.training_plans.is_empty() {
                                    <tbody><tr><th colspan="9">{ crate::help::page("planner_training") }</th></tr></tbody>
                                    { plan_rows(&p.training_plans, now, *chosen, p.plans.len(), &on_pick) }
                                }
                            </table>
                        </div>
                    }
                    <h3>{ "One change at a time" }</h3>
                    { ladder(p) }
                    if pending || written.is_some() {
                        <h3>{ format!("Configuration of plan #{}", (*chosen).min(all.len().saturating_sub(1)) + 1) }</h3>
                        { written_view(written.as_ref(), &target, on_copy, &status) }
                    }
                </>
            }
        }
    };
    html! {
        <section class="card" aria-labelledby="planner-title" id="planner">
            <h2 id="planner-title">{ "Plan: setups that fit, fastest first" }</h2>
            <p class="help">{ crate::help::page("planner_help") }</p>
            <div class="toolbar">
                <button type="button" id="planner-open" onclick={on_open} aria-expanded={open.to_string()}>
                    { if *open { "Hide plans" } else { "Find plans" } }</button>
                <label><input type="checkbox" id="planner-allow" checked={*allow} onchange={on_allow}/>
                    { " Allow changes to the training" }</label>
                <label><input type="checkbox" id="planner-all" checked={*all} onchange={on_all}/>
                    { " Every plan that fits (up to 100)" }</label>
            </div>
            <div class="planner-inputs">
                <label for="planner-stack">{ "Runs on" }
                    <select id="planner-stack" onchange={on_stack}>
                        { for stack_options().into_iter().map(|(s, label)| html! {
                            <option value={s.id()} selected={s == *stack}>{ label }</option>
                        }) }
                    </select></label>
                <fieldset class="planner-keep"><legend>{ "Keep as now" }</legend>
                { for KEEP_LABELS.iter().map(|&(name, label)| {
                    let keep = keep.clone();
                    let on = keep.contains(&name);
                    let toggle = Callback::from(move |_: Event| {
                        let mut next: Vec<&'static str> =
                            (*keep).iter().copied().filter(|k| *k != name).collect();
                        if !on {
                            next.push(name);
                        }
                        keep.set(next);
                    });
                    html! { <label><input type="checkbox" data-keep={name} checked={on} onchange={toggle}/>
                        { format!(" {label}") }</label> }
                }) }
                </fieldset>
            </div>
            <div class="planner-inputs">
                { for [("planner-batch", "Global batch (sequences)", "as now"), ("planner-tokens", "Tokens to train", "e.g. 2e9"), ("planner-price", "Price per GPU-hour", "optional")]
                    .into_iter().enumerate().map(|(i, (id, label, hint))| {
                        let value = (*inputs)[i].clone();
                        let inputs = inputs.clone();
                        let on_input = Callback::from(move |e: InputEvent| {
                            if let Some(el) = e.target_dyn_into::<web_sys::HtmlInputElement>() {
                                let mut next = (*inputs).clone();
                                next[i] = el.value();
                                inputs.set(next);
                            }
                        });
                        html! {
                            <label for={id}>{ label }
                                <input id={id} type="text" inputmode="decimal" placeholder={hint}
                                    {value} oninput={on_input}/></label>
                        }
                    }) }
            </div>
            { body }
        </section>
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn planning_inputs_read_as_the_cli_reads_them() {
        assert_eq!(super::number::<u64>("", "x"), Ok(None));
        assert_eq!(super::number::<u64>("128", "x"), Ok(Some(128)));
        assert_eq!(super::number::<f64>("2e9", "x"), Ok(Some(2e9)));
        assert_eq!(super::number::<u64>("1,024", "x"), Ok(Some(1024)));
        assert!(
            super::number::<u64>("lots", "Global batch").is_err_and(|e| e.contains("Global batch"))
        );
        assert!(super::number::<f64>("-3", "x").is_err());
        assert_eq!(super::duration(5400.0), "1.5 h");
        assert_eq!(super::duration(3.0 * 86400.0), "3.0 days");
    }
}
