//! The guide pages: `/guides` (the list) and `/guides/<slug>` (one guide, with its table of
//! contents, the other guides beside it and its live blocks).

use std::rc::Rc;

use headroom_core::guide::{self, Guide, Node};
use yew::prelude::*;

use super::block::{CalcBlock, reader};
use super::render;
use crate::dom::{set_page, set_title};
use crate::state::{Action, CalcState};

#[component]
pub fn GuideList() -> Html {
    set_title("Guides");
    let base = crate::dom::base_path();
    html! {
        <main class="page narrow" id="main">
            <h1>{ "Guides: where training memory goes" }</h1>
            <p class="lede">{ crate::help::page("guides_lede") }</p>
            <ol class="guide-list">
                { for guide::index().into_iter().map(|e| html! {
                    <li>
                        <a href={format!("{base}/guides/{}", e.slug)}>{ e.title }</a>
                        <p>{ crate::help::guide_summary(e.slug) }</p>
                    </li>
                }) }
            </ol>
        </main>
    }
}

/// The reader's state of every block of a guide.
#[derive(Clone, PartialEq, Default)]
struct Blocks(Vec<Rc<CalcState>>);

enum BlockAction {
    Load(Vec<Rc<CalcState>>),
    Edit(usize, Action),
}

impl Reducible for Blocks {
    type Action = BlockAction;
    fn reduce(self: Rc<Self>, action: BlockAction) -> Rc<Self> {
        match action {
            BlockAction::Load(v) => Rc::new(Blocks(v)),
            BlockAction::Edit(i, a) => {
                let mut v = self.0.clone();
                if let Some(s) = v.get_mut(i) {
                    crate::dom::edit_started();
                    *s = Rc::new(s.apply(a));
                }
                Rc::new(Blocks(v))
            }
        }
    }
}

fn initial_states(g: &Guide) -> Vec<Rc<CalcState>> {
    g.blocks()
        .map(|b| {
            let scen = guide::base_scenario(b, &[]).unwrap_or_default();
            Rc::new(CalcState::new(scen, Vec::new()))
        })
        .collect()
}

#[derive(Properties, PartialEq)]
pub struct GuideProps {
    pub slug: AttrValue,
}

#[component]
pub fn GuidePage(props: &GuideProps) -> Html {
    let slug = props.slug.to_string();
    let index = guide::index();
    let position = index.iter().position(|e| e.slug == slug);
    let loaded = use_state(|| None::<Result<Rc<Guide>, String>>);
    let blocks = use_reducer(Blocks::default);
    {
        let (loaded, blocks, slug) = (loaded.clone(), blocks.clone(), slug.clone());
        use_effect_with(slug.clone(), move |_| {
            if super::text::known(&slug) {
                wasm_bindgen_futures::spawn_local(async move {
                    let parsed = super::text::fetch(&slug)
                        .await
                        .and_then(|t| guide::parse(&slug, &t).map_err(|e| e.to_string()));
                    if let Ok(g) = &parsed {
                        blocks.dispatch(BlockAction::Load(initial_states(g)));
                    }
                    loaded.set(Some(parsed.map(Rc::new)));
                });
            }
        });
    }
    // After the guide renders, scroll to the address's #anchor (the text arrived after load).
    use_effect_with(loaded.is_some(), |ready| {
        if *ready {
            crate::dom::scroll_to_hash();
            crate::dom::frame_done();
        }
    });
    let Some(pos) = position else {
        set_title("No such guide");
        return html! {
            <main class="page narrow" id="main">
                <h1>{ "No such guide" }</h1>
                <p>{ "This guide does not exist. " }
                   <a href={format!("{}/guides", crate::dom::base_path())}>{ "See all guides" }</a>{ "." }</p>
            </main>
        };
    };
    let entry = index[pos];
    let summary = crate::help::guide_summary(entry.slug);
    set_page(entry.title, Some(&summary));
    let base = crate::dom::base_path();
    let side = html! {
        <nav class="guide-nav" aria-label="Guides">
            <p class="menu-title"><a href={format!("{base}/guides")}>{ "Guides" }</a></p>
            <ol>
                { for index.iter().map(|e| html! {
                    <li><a href={format!("{base}/guides/{}", e.slug)}
                           aria-current={(e.slug == entry.slug).then_some("page")}>{ e.title }</a></li>
                }) }
            </ol>
        </nav>
    };
    let prev_next = html! {
        <nav class="prev-next" aria-label="Previous and next guide">
            if pos > 0 {
                <a rel="prev" href={format!("{base}/guides/{}", index[pos - 1].slug)}>{ format!("← {}", index[pos - 1].title) }</a>
            }
            if let Some(next) = index.get(pos + 1) {
                <a rel="next" href={format!("{base}/guides/{}", next.slug)}>{ format!("{} →", next.title) }</a>
            }
        </nav>
    };
    let body = match &*loaded {
        None => html! { <p class="loading" aria-busy="true">{ "Loading the guide…" }</p> },
        Some(Err(m)) => html! { <p class="notice error" role="alert">{ m.clone() }</p> },
        Some(Ok(g)) => article(g, &blocks),
    };
    html! {
        <main class="guide-page" id="main">
            { side }
            <article class="guide" data-slug={entry.slug} data-ready={loaded.is_some().to_string()}>
                <h1>{ entry.title }</h1>
                <p class="lede">{ summary }</p>
                { body }
                { prev_next }
            </article>
        </main>
    }
}

/// The table of contents and the body, blocks wired to their state.
fn article(g: &Rc<Guide>, blocks: &UseReducerHandle<Blocks>) -> Html {
    let all: Vec<&guide::Block> = g.blocks().collect();
    let states = blocks.0.clone();
    let value = |metric: &str, change: &str, i: usize| -> Html {
        let (Some(b), Some(s)) = (all.get(i), states.get(i)) else {
            return html! {};
        };
        match guide::evaluate_value(b, &reader(b, s), metric, change) {
            Ok(c) => html! {
                <span class="live" data-metric={metric.to_string()}
                      data-value={c.value.map(|v| v.to_string())}>{ c.text }</span>
            },
            Err(m) => html! { <span class="live error" title={m}>{ "?" }</span> },
        }
    };
    let toc = g.toc();
    html! {
        <>
            if !toc.is_empty() {
                <nav class="toc" aria-label="On this page">
                    <p class="menu-title">{ "On this page" }</p>
                    <ul>
                        { for toc.iter().map(|t| html! {
                            <li class={format!("toc-{}", t.level)}><a href={format!("#{}", t.anchor)}>{ t.text.clone() }</a></li>
                        }) }
                    </ul>
                </nav>
            }
            { for g.body.iter().map(|n| match n {
                Node::Calc { index, block } => match states.get(*index) {
                    Some(state) => {
                        let i = *index;
                        let blocks = blocks.clone();
                        let dispatch = Callback::from(move |a: Action| blocks.dispatch(BlockAction::Edit(i, a)));
                        html! { <CalcBlock block={Rc::new(block.clone())} index={i} state={state.clone()} {dispatch}/> }
                    }
                    None => html! {},
                },
                other => render::node(other, &value),
            }) }
        </>
    }
}
