//! The worked examples: the list (`/examples`) and one page per example (`/examples/<n>`) that
//! checks each figure its guide states against the core, computed in the browser when the page
//! opens (`headroom_core::claims`, the same code as the snapshot test). The claims are not in
//! the app's download: the pages fetch `content/claims.json` (site/pages.sh) once a session.

use std::cell::RefCell;
use std::rc::Rc;

use headroom_core::claims::{self, ClaimFile, Row, Unit, Verdict};
use headroom_core::codec::{NamedScenario, named_scenarios};
use headroom_core::format;
use yew::prelude::*;

use crate::components::num::grouped;
use crate::dom;

thread_local! {
    static FILES: RefCell<Option<Rc<Vec<ClaimFile>>>> = const { RefCell::new(None) };
}

/// The examples' files that parse, from `content/claims.json` (the core's tests fail on one that
/// does not).
fn parse(json: &str) -> Result<Vec<ClaimFile>, String> {
    let files = claims::parse_bundle(json).map_err(|e| e.to_string())?;
    Ok(files.into_iter().filter_map(Result::ok).collect())
}

/// The claims files: `None` while they load, then the files or why they could not be read.
#[hook]
fn use_files() -> Option<Result<Rc<Vec<ClaimFile>>, String>> {
    let state = use_state(|| FILES.with(|f| f.borrow().clone()).map(Ok));
    {
        let state = state.clone();
        use_effect_with((), move |_| {
            if state.is_none() {
                wasm_bindgen_futures::spawn_local(async move {
                    let url = format!("{}/content/claims.json", dom::base_path());
                    let read = dom::fetch_text(&url)
                        .await
                        .map_err(|_| "The worked examples could not be loaded (offline?). Reload the page to try again.".to_string())
                        .and_then(|text| parse(&text))
                        .map(Rc::new);
                    if let Ok(files) = &read {
                        FILES.with(|f| *f.borrow_mut() = Some(files.clone()));
                    }
                    state.set(Some(read));
                });
            }
        });
    }
    // The page is drawn once the claims are in (`data-ready` on <main> says so; the app marks
    // itself ready on its first frame, before the fetch returns).
    let loaded = state.is_some();
    use_effect_with(loaded, |loaded| {
        if *loaded {
            dom::frame_done();
        }
    });
    (*state).clone()
}

/// The page while the claims load, or why they did not.
fn waiting(files: Option<Result<Rc<Vec<ClaimFile>>, String>>) -> Result<Rc<Vec<ClaimFile>>, Html> {
    match files {
        Some(Ok(files)) => Ok(files),
        Some(Err(e)) => Err(html! {
            <main class="page narrow" id="main" data-ready="true"><div class="notice error">{ e }</div></main>
        }),
        None => Err(html! {
            <main class="page narrow" id="main" data-ready="false"><p class="help">{ "Loading the worked examples…" }</p></main>
        }),
    }
}

/// The number of an example's file (`ex2` -> `2`).
fn number(file: &ClaimFile) -> &str {
    file.id.strip_prefix("ex").unwrap_or(&file.id)
}

/// The named scenarios of one example (`ex2-*`).
fn scenarios_of<'a>(
    named: &'a [NamedScenario],
    file: &ClaimFile,
) -> impl Iterator<Item = &'a NamedScenario> {
    let prefix = format!("{}-", file.id);
    named.iter().filter(move |s| s.id.starts_with(&prefix))
}

/// A value as the page shows it: bytes in GiB with the decimal GB the guides write, counts
/// grouped, quotients to two decimals.
pub fn show(unit: Unit, v: f64) -> String {
    match unit {
        Unit::Bytes => format!("{} ({:.2} GB)", format::bytes(v.max(0.0) as u64), v / 1e9),
        Unit::Count => grouped(v.max(0.0).round() as u64),
        Unit::Ratio => format!("{v:.2}"),
        other => headroom_core::metrics::display(other, v),
    }
}

/// `+3.9%`, or `n/a` when Headroom computes zero.
pub fn difference(d: Option<f64>) -> String {
    d.map_or("n/a".into(), |d| format!("{:+.1}%", d * 100.0))
}

#[component]
pub fn Examples() -> Html {
    let files = match waiting(use_files()) {
        Ok(files) => files,
        Err(page) => return page,
    };
    let base = dom::base_path();
    let named = named_scenarios();
    html! {
        <main class="page narrow examples" id="main" data-ready="true">
            <h1>{ "Worked examples" }</h1>
            <p>{ crate::help::page("examples_intro") }</p>
            <ol class="example-list" id="examples">
                { for files.iter().map(|f| html! {
                    <li>
                        <h2><a href={format!("{base}/examples/{}", number(f))}>{ &f.title }</a></h2>
                        <p>{ &f.summary }</p>
                        <p class="help">{ format!("{} claims checked. Scenarios: ", f.claims.len()) }
                            { for scenarios_of(&named, f).enumerate().map(|(i, s)| html! {
                                <>
                                    if i > 0 { { ", " } }
                                    <a href={format!("{base}/s/{}", s.id)}><code>{ &s.id }</code></a>
                                </>
                            }) }
                        </p>
                    </li>
                }) }
            </ol>
        </main>
    }
}

#[derive(Properties, PartialEq)]
pub struct ExampleProps {
    /// The example's number (`2` for `content/claims/ex2.toml`).
    pub n: AttrValue,
}

#[component]
pub fn Example(props: &ExampleProps) -> Html {
    let all = match waiting(use_files()) {
        Ok(files) => files,
        Err(page) => return page,
    };
    let base = dom::base_path();
    let Some(pos) = all.iter().position(|f| number(f) == props.n.as_str()) else {
        return html! {
            <main class="page narrow" id="main">
                <h1>{ "No such worked example" }</h1>
                <p><a href={format!("{base}/examples")}>{ "See the five worked examples" }</a>{ "." }</p>
            </main>
        };
    };
    let file = &all[pos];
    let named = named_scenarios();
    // Each claim's scenario analyzed now, by the same core as the CLI (through the
    // calculator's path, so the download carries one copy of the analysis).
    let rows = claims::evaluate_with(file, &named, |s| super::outcome(s, true));
    let count = |v: Verdict| file.claims.iter().filter(|c| c.verdict == v).count();
    let neighbour = |f: Option<&ClaimFile>, label: &str| match f {
        Some(f) => html! {
            <a href={format!("{base}/examples/{}", number(f))}>{ format!("{label} {}", number(f)) }</a>
        },
        None => html! {},
    };
    html! {
        <main class="page example" id="main" data-ready="true">
            <p class="crumbs"><a href={format!("{base}/examples")}>{ "Worked examples" }</a>
                { format!(" / Example {}", number(file)) }</p>
            <h1>{ &file.title }</h1>
            <p>{ &file.summary }</p>
            <p class="help">
                { format!("{} claims: {} right, {} wrong, {} partly right, {} unverified. ", file.claims.len(),
                    count(Verdict::Right), count(Verdict::Wrong), count(Verdict::Partly), count(Verdict::Unverified)) }
                { crate::help::page("examples_claims") }
            </p>
            <div class="table-wrap">
                <table id="claims">
                    <thead>
                        <tr>
                            <th scope="col">{ "Claim" }</th>
                            <th scope="col">{ "Claimed" }</th>
                            <th scope="col">{ "Headroom" }</th>
                            <th scope="col">{ "Difference" }</th>
                            <th scope="col">{ "Verdict" }</th>
                            <th scope="col">{ "Why" }</th>
                        </tr>
                    </thead>
                    <tbody>
                        { for file.claims.iter().zip(rows).enumerate().map(|(i, (c, r))| match r {
                            Ok(r) => claim_row(i, &r, &base),
                            Err(e) => html! {
                                <tr class="claim">
                                    <th scope="row">{ &c.quote }</th>
                                    <td colspan="5"><div class="notice error">{ e.to_string() }</div></td>
                                </tr>
                            },
                        }) }
                    </tbody>
                </table>
            </div>
            <section class="example-scenarios">
                <h2>{ "Scenarios and assumptions" }</h2>
                <p class="help">{ crate::help::page("examples_assumptions") }</p>
                <dl>
                    { for scenarios_of(&named, file).map(|s| html! {
                        <>
                            <dt><a href={format!("{base}/s/{}", s.id)}>{ &s.title }</a></dt>
                            <dd>{ &s.description }</dd>
                        </>
                    }) }
                </dl>
            </section>
            <nav class="pager" aria-label="Worked examples">
                { neighbour(pos.checked_sub(1).and_then(|p| all.get(p)), "← Example") }
                { neighbour(all.get(pos + 1), "Example") }
            </nav>
        </main>
    }
}

/// One checked claim: the claim and its scenario link, both figures, the difference, the
/// verdict with the correct figure, and why.
fn claim_row(i: usize, r: &Row, base: &str) -> Html {
    let c = &r.claim;
    let unit = c.unit();
    let verdict = c.verdict.id();
    let scenario = if c.overrides.is_empty() {
        c.scenario.clone()
    } else {
        format!("{} + {}", c.scenario, c.overrides.replace('&', ", "))
    };
    html! {
        <tr class={classes!("claim", verdict)} id={format!("claim-{}", i + 1)}>
            <th scope="row">
                <span class="quote">{ format!("{}. {}", i + 1, c.quote) }</span>
                <a class="scenario-link" href={format!("{base}{}", c.link())}><code>{ scenario }</code></a>
            </th>
            <td data-label="Claimed" class="claimed">{ show(unit, c.claimed) }</td>
            <td data-label="Headroom" class="computed" data-value={r.computed.to_string()}
                title={r.computed.to_string()}>{ show(unit, r.computed) }</td>
            <td data-label="Difference" class="difference">{ difference(r.difference) }</td>
            <td data-label="Verdict" class="verdict-cell">
                <span class={classes!("tag", verdict)}>{ verdict }</span>
                if matches!(c.verdict, Verdict::Wrong | Verdict::Partly) {
                    <span class="correct">{ format!("correct: {}", show(unit, r.computed)) }</span>
                }
            </td>
            <td data-label="Why" class="note">{ &r.note }</td>
        </tr>
    }
}

#[cfg(test)]
mod tests {
    use headroom_core::claims::Unit;

    #[test]
    fn values_read_as_the_guides_write_them() {
        assert_eq!(
            super::show(Unit::Bytes, 28e9),
            "26.08 GiB (28.00 GB)".to_string()
        );
        assert_eq!(super::show(Unit::Count, 6738415616.0), "6,738,415,616");
        assert_eq!(super::show(Unit::Ratio, 6.0312), "6.03");
        assert_eq!(super::difference(Some(0.039)), "+3.9%");
        assert_eq!(super::difference(None), "n/a");
    }

    #[test]
    fn a_claims_bundle_reads_as_the_pages_fetch_it() {
        // The shape site/pages.sh writes: file stem -> the TOML file as JSON.
        let claim = r#"[{"quote":"q","scenario":"ex2-7b-fp32-a100","metric":"parameters.total","claimed":7000000000,"verdict":"right","note":"n"}]"#;
        let json = format!(
            r#"{{"ex2":{{"title":"Two","summary":"s","claim":{claim}}},"ex3":{{"title":"Three","summary":"s","claim":{claim}}}}}"#
        );
        let files = super::parse(&json).expect("parses");
        assert_eq!(files.len(), 2);
        assert_eq!(files[0].title, "Two");
        assert_eq!(super::number(&files[0]), "2");
        assert!(super::parse("not json").is_err());
    }
}
