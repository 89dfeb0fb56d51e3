//! The page's on-demand worker: the parts of Headroom a visit may never use (reading a
//! framework's config, writing a plan's configuration files) run here, in a Web Worker whose
//! wasm the page fetches the first time one is asked for, so they stay out of the first
//! download. It installs the content the app installs (`content::FETCHED`: the presets, the
//! published calibration files, the named scenarios), says
//! "ready", then answers each request (an array of strings, the first naming it) with an
//! array of strings: `["ok", ...]` or `["error", message]`.
//!
//! - `["import", text, file name]`: `headroom_core::import` (the model resolved to a preset;
//!   the page cannot read the files a config names, which the notes say); answer `["ok", link query, model that is not a preset or "", framework, report lines...]`.
//! - `["export", link query, target id]`: the targets that express the plan and
//!   `headroom_core::export`'s file for the one asked (or the first offered); answer
//!   `["ok", target shown, offered ids comma-separated, n, n refusals..., text, notes...]`.
//! - `["plan", link query, allow training changes ("1" or ""), global batch, tokens, price per
//!   GPU-hour (each "" for none), stack id, kept settings, plans per list, the user's
//!   calibration file or ""]`: the planner (`headroom_core::plan`), which the page's first
//!   download does not carry; answer `["ok", lines...]` (`plan::wire`).
//! - `["strategies", link query, the user's calibration file or ""]`: the strategy table
//!   (`headroom_core::strategies`, one estimate and step time per technique), which the page's
//!   first download does not carry; answer `["ok", lines...]` (`strategies::wire`).
//! - `["path", link query]`: the planner's cheapest path to a setup that fits
//!   (`plan::cheapest_path`), for the GPU and model pages' "fits with"; answer `["ok", the
//!   changes joined by ", then ", the last step's link]`, or `["ok"]` when none fits.
//! - `["labels", link query]`: the labels of the layer inventory's rows, in order (the worker is
//!   built with headroom-core's `inventory-text`, the page without); answer `["ok", labels...]`.

use headroom_core::codec::{decode_pairs, query_pairs};
use headroom_core::export::{Target, export, not_expressed, offered};
use headroom_core::import::import;
use headroom_core::plan::{DEFAULT_SPACE, Keep, PlanOptions, Stack, plan_with, wire};
use headroom_core::scenario::Scenario;
use headroom_core::{What, strategies};
use js_sys::Array;
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::{Closure, JsValue};
use wasm_bindgen_futures::JsFuture;
use web_sys::{DedicatedWorkerGlobalScope, MessageEvent, Response};

/// The scenario of a link query.
fn scenario_of(link: &str) -> Result<Scenario, String> {
    let pairs = query_pairs(link).map_err(|e| e.to_string())?;
    decode_pairs(Scenario::default(), &pairs).map_err(|e| e.to_string())
}

/// The user's calibration file the page sends (empty for none) when it is for the scenario's GPU,
/// as the calculator uses it.
fn user_calibration(
    scen: &Scenario,
    text: &str,
) -> Result<Option<headroom_core::Calibration>, String> {
    Ok((!text.is_empty())
        .then(|| headroom_core::Calibration::parse("calibration", text))
        .transpose()
        .map_err(|e| e.to_string())?
        .filter(|(gpu, _)| *gpu == scen.gpu)
        .map(|(_, c)| c))
}

/// A planning input as the page sends it: empty for none, else a number the page checked.
fn optional<T: std::str::FromStr>(t: &str) -> Result<Option<T>, String> {
    (!t.is_empty())
        .then(|| t.parse().map_err(|_| format!("`{t}` is not a number")))
        .transpose()
}

/// The answer to one request.
fn answer(request: &[String]) -> Result<Vec<String>, String> {
    match request {
        [kind, text, name] if kind == "import" => {
            let imported = import(text, Some(name), &|_: &str| None).map_err(|e| e.0)?;
            let query = imported
                .pairs
                .iter()
                .map(|(k, v)| format!("{k}={}", js_sys::encode_uri_component(v)))
                .collect::<Vec<_>>()
                .join("&");
            let unresolved = match (&imported.preset, &imported.model) {
                (None, Some(m)) => m.clone(),
                _ => String::new(),
            };
            let mut out = vec![query, unresolved, imported.framework.name().to_string()];
            out.extend(imported.report());
            Ok(out)
        }
        [kind, link, target] if kind == "export" => {
            let scen = scenario_of(link)?;
            let wanted = Target::parse("export", target).map_err(|e| e.to_string())?;
            let spec = headroom_core::estimate::resolve(&scen)
                .map_err(|e| e.to_string())?
                .spec;
            // Only the targets that run this plan as estimated are offered; the others are
            // named with the reason, those refused for one reason together.
            let offered = offered(&scen);
            let shown = if offered.contains(&wanted) {
                wanted
            } else {
                offered.first().copied().unwrap_or(Target::Env)
            };
            let mut by_reason: Vec<(String, Vec<&str>)> = Vec::new();
            for t in Target::ALL {
                if let Some(why) = not_expressed(&scen, t) {
                    match by_reason.iter_mut().find(|(w, _)| *w == why) {
                        Some((_, files)) => files.push(t.file_name()),
                        None => by_reason.push((why, vec![t.file_name()])),
                    }
                }
            }
            let e = export(&spec, &scen, shown);
            let mut out = vec![
                shown.id().to_string(),
                offered.iter().map(|t| t.id()).collect::<Vec<_>>().join(","),
                by_reason.len().to_string(),
            ];
            out.extend(
                by_reason
                    .into_iter()
                    .map(|(why, files)| format!("{}: {why}", files.join(", "))),
            );
            out.push(e.text);
            out.extend(e.notes);
            Ok(out)
        }
        [
            kind,
            link,
            allow,
            global_batch,
            tokens,
            price,
            stack,
            keep,
            max_plans,
            calibration,
        ] if kind == "plan" => {
            let scen = scenario_of(link)?;
            let opts = PlanOptions {
                allow_training_changes: allow == "1",
                global_batch: optional(global_batch)?,
                tokens: optional(tokens)?,
                price_per_gpu_hour: optional(price)?,
                stack: Stack::parse("stack", stack).map_err(|e| e.to_string())?,
                keep: Keep::parse("keep", keep).map_err(|e| e.to_string())?,
                max_plans: max_plans.parse().map_err(|_| "max_plans".to_string())?,
                ..PlanOptions::default()
            };
            let r = headroom_core::estimate::resolve(&scen).map_err(|e| e.to_string())?;
            let user = user_calibration(&scen, calibration)?;
            let cal = user.as_ref().unwrap_or(&r.calibration);
            let p = plan_with(&r.spec, r.gpu, cal, &scen, &opts, &DEFAULT_SPACE)
                .map_err(|e| e.to_string())?;
            Ok(wire::to_lines(&p))
        }
        [kind, link, calibration] if kind == "strategies" => {
            let scen = scenario_of(link)?;
            let r = headroom_core::estimate::resolve(&scen).map_err(|e| e.to_string())?;
            let user = user_calibration(&scen, calibration)?;
            let cal = user.as_ref().unwrap_or(&r.calibration);
            let a =
                headroom_core::analyze_with(&r.name, &r.spec, r.gpu, cal, &scen, What::STRATEGIES);
            Ok(strategies::wire::to_lines(
                &a.strategies.unwrap_or_default(),
            ))
        }
        [kind, link] if kind == "path" => {
            let (ladder, fits) = headroom_core::plan::cheapest_path(&scenario_of(link)?)
                .map_err(|e| e.to_string())?;
            let steps = ladder.get(1..).unwrap_or_default();
            Ok(match steps.last() {
                Some(last) if fits => vec![
                    steps
                        .iter()
                        .map(|s| s.technique.as_str())
                        .collect::<Vec<_>>()
                        .join(", then "),
                    last.link.clone(),
                ],
                _ => Vec::new(),
            })
        }
        [kind, link] if kind == "labels" => {
            let e = headroom_core::estimate(&scenario_of(link)?).map_err(|e| e.to_string())?;
            Ok(e.layer_inventory.into_iter().map(|s| s.what).collect())
        }
        _ => Err("unknown request".into()),
    }
}

/// Fetches and installs the content the app installs (`content::FETCHED`); the message to give
/// each request if it fails.
async fn install_content(scope: &DedicatedWorkerGlobalScope) -> Result<(), String> {
    use headroom_core::content::FETCHED;
    let base = js_sys::Reflect::get(scope, &JsValue::from_str("HEADROOM_BASE"))
        .ok()
        .and_then(|b| b.as_string())
        .ok_or_else(|| format!("{} could not be loaded", FETCHED[0].what))?;
    // Every request is sent before any is awaited.
    let requests: Vec<_> = FETCHED
        .iter()
        .map(|f| (f, scope.fetch_with_str(&format!("{base}{}", f.path))))
        .collect();
    for (file, request) in requests {
        let failed = format!("{} could not be loaded (offline?)", file.what);
        let text = text_of(request).await.ok_or_else(|| failed.clone())?;
        (file.install)(&text).map_err(|e| format!("{failed}: {e}"))?;
    }
    Ok(())
}

/// The text a fetch answered, or `None` when it failed or was not OK.
async fn text_of(request: js_sys::Promise) -> Option<String> {
    let response: Response = JsFuture::from(request).await.ok()?.unchecked_into();
    if !response.ok() {
        return None;
    }
    JsFuture::from(response.text().ok()?)
        .await
        .ok()?
        .as_string()
}

fn main() {
    let scope: DedicatedWorkerGlobalScope = js_sys::global().unchecked_into();
    wasm_bindgen_futures::spawn_local(async move {
        let installed = install_content(&scope).await;
        let responder = scope.clone();
        let on_message = Closure::<dyn Fn(MessageEvent)>::new(move |msg: MessageEvent| {
            let request: Vec<String> = Array::from(&msg.data())
                .iter()
                .map(|v| v.as_string().unwrap_or_default())
                .collect();
            let reply = match installed.clone().and_then(|()| answer(&request)) {
                Ok(mut out) => {
                    out.insert(0, "ok".into());
                    out
                }
                Err(e) => vec!["error".into(), e],
            };
            let array: Array = reply.iter().map(|s| JsValue::from_str(s)).collect();
            let _ = responder.post_message(&array);
        });
        scope.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
        on_message.forget();
        // Messages sent before the handler was set are dropped: say when it is.
        let _ = scope.post_message(&JsValue::from_str("ready"));
    });
}
