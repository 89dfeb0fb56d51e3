//! A live calculator block in a guide: its inputs, and its table, grid, bars, summary or chart,
//! evaluated by the core's `guide::evaluate` (the function the guide tests snapshot).

use std::rc::Rc;

use headroom_core::codec::field_value;
use headroom_core::guide::{self, Block, Evaluated, View};
use yew::prelude::*;

use crate::charts::ChartKind;
use crate::components::chart::Chart;
use crate::components::form::field_input;
use crate::state::{Action, CalcState};

/// The reader's values of a block's inputs, as link pairs.
pub fn reader(block: &Block, state: &CalcState) -> Vec<(String, String)> {
    block
        .inputs
        .iter()
        .filter_map(|k| {
            let v = field_value(&state.scenario, k)?;
            (!v.is_empty()).then(|| (k.clone(), v))
        })
        .collect()
}

#[derive(Properties, PartialEq)]
pub struct BlockProps {
    pub block: Rc<Block>,
    pub index: usize,
    pub state: Rc<CalcState>,
    pub dispatch: Callback<Action>,
}

/// The model input: the presets (a block's model input is a preset, not a pasted config).
fn model_input(state: &CalcState, dispatch: &Callback<Action>, id: &str) -> Html {
    let current = field_value(&state.scenario, "model").unwrap_or_default();
    let dispatch = dispatch.clone();
    let onchange = Callback::from(move |e: Event| {
        if let Some(s) = e.target_dyn_into::<web_sys::HtmlSelectElement>() {
            dispatch.emit(Action::Edit("model".into(), s.value()));
        }
    });
    html! {
        <div class="field" data-key="model">
            <label for={id.to_string()}>{ "Model" }</label>
            <select id={id.to_string()} {onchange}>
                { for crate::fields::model_options().into_iter().map(|(v, label)| {
                    let selected = v == current;
                    html! { <option value={v} {selected}>{ label }</option> }
                }) }
            </select>
        </div>
    }
}

fn table(e: &Evaluated, corner: &str) -> Html {
    let base = crate::dom::base_path();
    html! {
        <div class="table-wrap">
            <table class="calc-table">
                <thead><tr>
                    <th scope="col">{ corner }</th>
                    { for e.headers.iter().map(|h| html! { <th scope="col">{ h.clone() }</th> }) }
                </tr></thead>
                <tbody>
                    { for e.rows.iter().map(|r| html! {
                        <tr>
                            <th scope="row"><a href={format!("{base}/?{}", r.link)}>{ r.label.clone() }</a></th>
                            { for r.cells.iter().map(|c| html! {
                                <td class="num" data-metric={c.metric.clone()} data-value={c.value.map(|v| v.to_string())}>{ c.text.clone() }</td>
                            }) }
                        </tr>
                    }) }
                </tbody>
            </table>
        </div>
    }
}

/// Horizontal bars, one group per row, each metric scaled to its largest value.
fn bars(e: &Evaluated) -> Html {
    let max: Vec<f64> = (0..e.headers.len())
        .map(|i| {
            e.rows
                .iter()
                .filter_map(|r| r.cells.get(i)?.value)
                .fold(0.0_f64, f64::max)
        })
        .collect();
    html! {
        <div class="bars" role="img" aria-label={format!("Bars of {}", e.headers.join(" and "))}>
            <p class="bars-legend">
                { for e.headers.iter().enumerate().map(|(i, h)| html! {
                    <span class={format!("key key-{i}")}>{ h.clone() }</span>
                }) }
            </p>
            { for e.rows.iter().map(|r| html! {
                <div class="bar-row">
                    <span class="bar-label">{ r.label.clone() }</span>
                    <span class="bar-group">
                    { for r.cells.iter().enumerate().map(|(i, c)| {
                        let share = match (c.value, max[i]) {
                            (Some(v), m) if m > 0.0 => (v / m * 100.0).clamp(0.0, 100.0),
                            _ => 0.0,
                        };
                        html! {
                            <span class="bar-line">
                                <span class={format!("bar bar-{i}")} style={format!("width:{share:.1}%")}
                                      data-value={c.value.map(|v| v.to_string())}></span>
                                <span class="bar-text">{ c.text.clone() }</span>
                            </span>
                        }
                    }) }
                    </span>
                </div>
            }) }
        </div>
    }
}

fn view(block: &Block, e: &Evaluated) -> Html {
    match block.view {
        View::Summary => html! {
            <dl class="calc-summary">
                { for e.rows.iter().map(|r| html! {
                    <div>
                        <dt>{ r.label.clone() }</dt>
                        { for r.cells.iter().map(|c| html! {
                            <dd data-metric={c.metric.clone()} data-value={c.value.map(|v| v.to_string())}>{ c.text.clone() }</dd>
                        }) }
                    </div>
                }) }
            </dl>
        },
        View::Table => table(e, ""),
        View::Grid => table(e, ""),
        View::Bars => bars(e),
        View::Timeline | View::Breakdown => match &e.analysis {
            Some(a) => {
                let est = Rc::new(a.estimate.clone());
                let (kind, label) = if block.view == View::Timeline {
                    (
                        ChartKind::Timeline,
                        format!(
                            "Memory over one training step: peak {} in the {}",
                            headroom_core::format::bytes(a.estimate.peak.device),
                            a.estimate.peak.phase.label()
                        ),
                    )
                } else {
                    (ChartKind::Breakdown, "Memory by component".to_string())
                };
                html! {
                    <>
                        <Chart {kind} estimate={est} label={label} file_stem="headroom-guide"/>
                        if block.view == View::Breakdown {
                            { table(e, "Component") }
                        }
                    </>
                }
            }
            None => html! {},
        },
    }
}

#[component]
pub fn CalcBlock(props: &BlockProps) -> Html {
    let block = props.block.clone();
    let pairs = reader(&block, &props.state);
    let evaluated = use_memo((block.clone(), pairs), |(b, p)| guide::evaluate(b, p));
    let id_prefix = format!("b{}", props.index);
    // The block's state is its scenario with the reader's inputs (the form edits nothing else).
    let link = headroom_core::codec::encode(&props.state.scenario);
    html! {
        <figure class="calc-block card" id={format!("block-{}", props.index + 1)}
                data-view={block.view.id()}>
            if !block.inputs.is_empty() {
                <form class="calc-inputs" aria-label="Change the inputs"
                      onsubmit={Callback::from(|e: SubmitEvent| e.prevent_default())}>
                    { for block.inputs.iter().map(|k| match crate::fields::find(k) {
                        Some(f) => field_input(f, &props.state, &props.dispatch, &id_prefix),
                        None => model_input(&props.state, &props.dispatch, &format!("{id_prefix}-model")),
                    }) }
                </form>
            }
            { match &*evaluated {
                Ok(e) => view(&block, e),
                Err(m) => html! { <p class="notice error" role="alert">{ m.clone() }</p> },
            } }
            <figcaption>
                if !block.caption.is_empty() { { block.caption.clone() } { " " } }
                <a href={format!("{}/?{link}", crate::dom::base_path())}>{ "Open in the calculator" }</a>
            </figcaption>
        </figure>
    }
}
