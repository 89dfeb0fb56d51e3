//! `headroom`: the memory model on the command line, as a readable table or JSON.
//!
//! Commands: `estimate`, `fit`, `strategies`, `plan`, `models`, `gpus`, `link`. `--import FILE`
//! applies a framework config (`headroom_core::import`) after a scenario file and before a link and
//! flags.

mod args;
mod plan;
mod render;

use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Parser;
use headroom_core::catalog::{GpuCatalog, PresetCatalog};
use headroom_core::estimate::resolve;
use headroom_core::{What, analyze_only, codec, fit};

use args::{Cli, Command, Format, ScenarioArgs};

fn main() -> ExitCode {
    let cli = Cli::parse();
    headroom_core::calibration::set_replay(!cli.no_replay);
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("headroom: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Estimate { scenario, format } => {
            let (scen, imported) = scenario.build_with_import()?;
            // The estimate prints what fits, not the strategy table.
            let a = analyze_only(&scen, What::FIT, None)?;
            let fit = a.fit.context("what fits was asked for")?;
            // A setup that does not fit gets its next steps, from the strategy table as the
            // page's verdict shows them.
            let fits = a.estimate.verdict.fits;
            let table = if fits {
                Vec::new()
            } else {
                analyze_only(&scen, What::STRATEGIES, None)?
                    .strategies
                    .unwrap_or_default()
            };
            let next = headroom_core::strategies::next_steps(&table, fits);
            match format {
                Format::Json => {
                    let mut json = render::estimate_json(&a.estimate, &fit, &a.link, &a.time);
                    if !fits {
                        json["next"] = render::next_steps_json(&next);
                    }
                    if let Some(i) = &imported {
                        json["import"] = serde_json::to_value(i)?;
                    }
                    println!("{}", serde_json::to_string_pretty(&json)?)
                }
                Format::Table => {
                    if let Some(i) = &imported {
                        print!("{}", render::import_table(i));
                    }
                    print!(
                        "{}",
                        render::estimate_table(&a.estimate, &fit, &a.link, &scen, &a.time)
                    );
                    if !fits {
                        print!("{}", render::next_steps_lines(&next));
                    }
                }
            }
        }
        Command::Fit { scenario, format } => {
            let scen = scenario.build()?;
            let r = resolve(&scen)?;
            let fitted = fit::fit(&r.spec, r.gpu, &r.calibration, &scen);
            match format {
                Format::Json => println!("{}", serde_json::to_string_pretty(&fitted)?),
                Format::Table => print!("{}", render::fit_table(&fitted, &scen)),
            }
        }
        Command::Strategies { scenario, format } => {
            // The analysis holds both the table and the estimate it is measured against.
            let a = analyze_only(&scenario.build()?, What::STRATEGIES, None)?;
            let rows = a.strategies.context("the strategy table was asked for")?;
            match format {
                Format::Json => println!("{}", serde_json::to_string_pretty(&rows)?),
                Format::Table => print!("{}", render::strategies_table(&rows, &a.estimate)),
            }
        }
        Command::Models { format } => {
            let presets = &PresetCatalog::builtin().presets;
            if presets.is_empty() {
                bail!("no model presets are compiled in");
            }
            match format {
                Format::Json => println!(
                    "{}",
                    serde_json::to_string_pretty(&render::models_json(presets))?
                ),
                Format::Table => print!("{}", render::models_table(presets)),
            }
        }
        Command::Gpus { format } => {
            let gpus = &GpuCatalog::builtin().gpus;
            match format {
                Format::Json => println!("{}", serde_json::to_string_pretty(gpus)?),
                Format::Table => print!("{}", render::gpus_table(gpus)),
            }
        }
        Command::Plan(args) => plan::run(&args)?,
        Command::Link { scenario } => {
            let scen = scenario.build()?;
            println!("?{}", codec::encode(&scen));
        }
    }
    Ok(())
}

impl ScenarioArgs {
    /// As [`Self::build_with_import`]; an import's notes go to stderr in short (the estimate
    /// prints them in full).
    fn build(&self) -> Result<headroom_core::Scenario> {
        let (scen, imported) = self.build_with_import()?;
        if let Some(i) = imported {
            eprint!("{}", render::import_summary(&i));
        }
        Ok(scen)
    }

    /// Defaults, then a scenario file or named scenario, then an imported config, then a link's
    /// fields, then flags; every value checked by the core.
    fn build_with_import(
        &self,
    ) -> Result<(
        headroom_core::Scenario,
        Option<headroom_core::import::Imported>,
    )> {
        let mut scen = headroom_core::Scenario::default();
        if let Some(path) = &self.scenario {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading scenario file {path}"))?;
            let id = std::path::Path::new(path)
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or("scenario");
            scen = codec::parse_scenario_file(id, &text)
                .with_context(|| format!("scenario file {path}"))?
                .scenario;
        } else if let Some(name) = &self.named {
            scen = match codec::named_scenario(name) {
                Some(n) => n.scenario.clone(),
                None => bail!(
                    "--named: unknown scenario `{name}`; known: {}",
                    codec::named_scenarios()
                        .iter()
                        .map(|n| n.id.clone())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            };
        }
        let imported = match &self.import {
            Some(path) => {
                let (s, i) = import_file(scen, path, self.model.is_some())?;
                scen = s;
                Some(i)
            }
            None => None,
        };
        // A link's fields apply on top of a named scenario or file, as `/s/<id>?fields` does on
        // the site (alone, on top of the defaults: the link's own scenario).
        if let Some(link) = &self.link {
            let pairs = codec::query_pairs(link).context("--link")?;
            scen = codec::decode_pairs(scen, &pairs).context("--link")?;
        }
        let mut pairs = self.fields.pairs.clone();
        // --model takes a preset id, a size, a path to a config.json or a Hub id.
        if let Some(model) = &self.model {
            let path = std::path::Path::new(model);
            if model.ends_with(".json") || path.is_file() {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("--model: reading {model}"))?;
                let spec = headroom_core::model::parse_config_json(&text)
                    .with_context(|| format!("--model {model}"))?;
                scen.model = headroom_core::scenario::ModelChoice::Custom(Box::new(spec));
            } else if model.contains('/') {
                pairs.push(("model".into(), hub_preset(model)?));
            } else {
                pairs.push(("model".into(), model.clone()));
            }
        }
        Ok((codec::decode_pairs(scen, &pairs)?, imported))
    }
}

/// The preset a Hub id (`owner/name`) names, as the page's import resolves it
/// (`import::resolve_preset`: the preset's Hub id, or the same name without its owner or a
/// chat-tuning suffix, Llama 3 as Llama 3.1). A link field cannot hold `/`, so the id never
/// reaches the codec; an id that is no preset is said to need its config.json.
fn hub_preset(id: &str) -> Result<String> {
    match headroom_core::import::resolve_preset(id) {
        Some(preset) => Ok(preset),
        None => bail!(
            "--model: `{id}` is not a preset (see `headroom models`) and no file at that path; \
             download its config.json (https://huggingface.co/{id}/blob/main/config.json) and \
             give --model path/to/config.json"
        ),
    }
}

/// Applies a framework config to `scen`. Files it names (a DeepSpeed JSON) are read relative
/// to it; a model that is not a preset is read from its path's config.json, unless `--model`
/// is given.
fn import_file(
    scen: headroom_core::Scenario,
    path: &str,
    model_flag: bool,
) -> Result<(headroom_core::Scenario, headroom_core::import::Imported)> {
    use std::path::Path;
    let text =
        std::fs::read_to_string(path).with_context(|| format!("--import: reading {path}"))?;
    let dir = Path::new(path).parent().unwrap_or(Path::new("."));
    let read = |name: &str| {
        [dir.join(name), Path::new(name).to_path_buf()]
            .iter()
            .find_map(|p| std::fs::read_to_string(p).ok())
            .or_else(|| {
                // LLaMA-Factory names its DeepSpeed files from the repository root
                // (examples/deepspeed/ds_z3_config.json): try the file's name beside the config.
                let file = Path::new(name).file_name()?;
                std::fs::read_to_string(dir.join(file)).ok()
            })
    };
    let imported = headroom_core::import::import(&text, Some(path), &read)
        .with_context(|| format!("--import {path}"))?;
    let mut scen = codec::decode_pairs(scen, &imported.pairs)
        .with_context(|| format!("--import {path}: the settings it maps to"))?;
    if imported.preset.is_none()
        && !model_flag
        && let Some(model) = &imported.model
    {
        let candidates = [
            Path::new(model).join("config.json"),
            dir.join(model).join("config.json"),
            Path::new(model).to_path_buf(),
        ];
        let Some(text) = candidates
            .iter()
            .filter(|p| p.is_file())
            .find_map(|p| std::fs::read_to_string(p).ok())
        else {
            bail!(
                "--import {path}: the model `{model}` is not a preset (see `headroom models`) and no \
                 config.json was found at that path; give --model path/to/config.json"
            );
        };
        let spec = headroom_core::model::parse_config_json(&text)
            .with_context(|| format!("--import {path}: the config.json of `{model}`"))?;
        scen.model = headroom_core::scenario::ModelChoice::Custom(Box::new(spec));
    }
    Ok((scen, imported))
}
