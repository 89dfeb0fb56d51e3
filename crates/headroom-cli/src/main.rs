//! `headroom`: the memory model on the command line, as a readable table or JSON.

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
            let scen = scenario.build()?;
            // The estimate prints what fits, not the strategy table.
            let a = analyze_only(&scen, What::FIT, None)?;
            let fit = a.fit.context("what fits was asked for")?;
            match format {
                Format::Json => println!(
                    "{}",
                    serde_json::to_string_pretty(&render::estimate_json(
                        &a.estimate,
                        &fit,
                        &a.link,
                        &a.time
                    ))?
                ),
                Format::Table => print!(
                    "{}",
                    render::estimate_table(&a.estimate, &fit, &a.link, &scen, &a.time)
                ),
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
    /// Defaults, then a scenario file or named scenario, then a link's fields, then flags;
    /// every value checked by the core.
    fn build(&self) -> Result<headroom_core::Scenario> {
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
        // A link's fields apply on top of a named scenario or file, as `/s/<id>?fields` does on
        // the site (alone, on top of the defaults: the link's own scenario).
        if let Some(link) = &self.link {
            let pairs = codec::query_pairs(link).context("--link")?;
            scen = codec::decode_pairs(scen, &pairs).context("--link")?;
        }
        let mut pairs = self.fields.pairs.clone();
        // --model takes a preset id or a path to a config.json.
        if let Some(model) = &self.model {
            let path = std::path::Path::new(model);
            if model.ends_with(".json") || path.is_file() {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("--model: reading {model}"))?;
                let spec = headroom_core::model::parse_config_json(&text)
                    .with_context(|| format!("--model {model}"))?;
                scen.model = headroom_core::scenario::ModelChoice::Custom(Box::new(spec));
            } else {
                pairs.push(("model".into(), model.clone()));
            }
        }
        Ok(codec::decode_pairs(scen, &pairs)?)
    }
}
