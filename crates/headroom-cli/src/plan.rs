//! `headroom plan`: the planner's ranked plans and ladder as a table or JSON, and the
//! ready-to-run configuration of a chosen plan.

use std::fmt::Write as _;

use anyhow::{Result, bail};
use headroom_core::ScenarioError;
use headroom_core::estimate::resolve;
use headroom_core::export::{Target, export, not_expressed, offered};
use headroom_core::format::{bytes, signed_bytes};
use headroom_core::plan::{Keep, Plan, PlanOptions, Planning, Stack, plan};
use serde_json::json;

use crate::args::{Format, PlanArgs};
use crate::render::{speed_change, tokens_per_second};

/// Parses a count such as `2000000000`, `2e9`, `15T`, `300B`, `1.5M` (the suffixes are
/// thousands, millions, billions, trillions of tokens).
pub fn parse_amount(field: &str, s: &str) -> Result<f64, ScenarioError> {
    let t = s.trim();
    let (num, mult) = match t.chars().last() {
        Some('K' | 'k') => (&t[..t.len() - 1], 1e3),
        Some('M' | 'm') => (&t[..t.len() - 1], 1e6),
        Some('B' | 'b' | 'G' | 'g') => (&t[..t.len() - 1], 1e9),
        Some('T' | 't') => (&t[..t.len() - 1], 1e12),
        _ => (t, 1.0),
    };
    match num.parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v * mult),
        _ => Err(ScenarioError::invalid(
            field,
            format!(
                "expected a number such as 2e9, 300B or 15T, found `{}`",
                headroom_core::scenario::shorten(s)
            ),
        )),
    }
}

fn parse_int<T: std::str::FromStr>(field: &str, s: &str) -> Result<T, ScenarioError> {
    s.trim().parse::<T>().map_err(|_| {
        ScenarioError::invalid(
            field,
            format!(
                "expected a positive integer, found `{}`",
                headroom_core::scenario::shorten(s)
            ),
        )
    })
}

impl PlanArgs {
    /// The planner's options from the flags; every value checked, naming its flag.
    pub fn options(&self) -> Result<PlanOptions> {
        let opts = PlanOptions {
            global_batch: self
                .global_batch
                .as_deref()
                .map(|s| parse_int::<u64>("global_batch", s))
                .transpose()?,
            seq: self
                .target_seq
                .as_deref()
                .map(|s| parse_int::<u32>("target_seq", s))
                .transpose()?,
            allow_training_changes: self.allow_training_changes,
            tokens: self
                .tokens
                .as_deref()
                .map(|s| parse_amount("tokens", s))
                .transpose()?,
            price_per_gpu_hour: self
                .price_per_gpu_hour
                .as_deref()
                .map(|s| parse_amount("price_per_gpu_hour", s))
                .transpose()?,
            max_plans: self
                .max_plans
                .as_deref()
                .map(|s| parse_int::<usize>("max_plans", s))
                .transpose()?
                .unwrap_or(10),
            keep: self
                .keep
                .as_deref()
                .map(|s| Keep::parse("keep", s))
                .transpose()?
                .unwrap_or_default(),
            stack: match (&self.stack, &self.export, &self.pick) {
                (Some(s), _, _) => Stack::parse("stack", s)?,
                // Exporting without a stack or a pick: the fastest plan that file runs. A pick
                // numbers the table's plans (the default stack's).
                (None, Some(t), None) => export_stack(Target::parse("export", t)?),
                _ => Stack::default(),
            },
        };
        if opts.price_per_gpu_hour.is_some() && opts.tokens.is_none() {
            bail!(
                "`price_per_gpu_hour`: needs --tokens (the cost is price x GPU-hours to train on them)"
            );
        }
        opts.validate()?;
        Ok(opts)
    }
}

/// The plans an export target writes: those its file expresses; env.sh carries every plan.
fn export_stack(t: Target) -> Stack {
    match t {
        Target::Env => Stack::Any,
        t => Stack::Only(t),
    }
}

/// Runs `headroom plan`.
pub fn run(args: &PlanArgs) -> Result<()> {
    let scen = args.scenario.build()?;
    let opts = args.options()?;
    let p = plan(&scen, &opts)?;
    let calibrated = calibrated(&scen);
    let band = headroom_core::time::band_factors(calibrated);
    if let Some(target) = &args.export {
        let target = Target::parse("export", target)?;
        let list = if args.training {
            &p.training_plans
        } else {
            &p.plans
        };
        let n = args
            .pick
            .as_deref()
            .map(|s| parse_int::<usize>("pick", s))
            .transpose()?
            .unwrap_or(1);
        let Some(chosen) = n.checked_sub(1).and_then(|i| list.get(i)) else {
            // No plan on the stack asked: why the stack does not run the scenario as given.
            if let (Stack::Only(t), true) = (opts.stack, list.is_empty())
                && let Some(why) = not_expressed(&scen, t)
            {
                bail!(
                    "`export`: no plan that fits runs on {}, and the scenario as given cannot be written as {}: {why}",
                    t.id(),
                    t.file_name()
                );
            }
            bail!(
                "`pick`: plan {n} does not exist; {} {}plans fit (see `headroom plan` without --export)",
                list.len(),
                if args.training {
                    "training-changing "
                } else {
                    ""
                }
            );
        };
        // A target that would run another plan is not offered for this one.
        if let Some(why) = not_expressed(&chosen.scenario, target) {
            let runs: Vec<String> = list
                .iter()
                .enumerate()
                .filter(|(_, pl)| not_expressed(&pl.scenario, target).is_none())
                .map(|(i, _)| format!("#{}", i + 1))
                .collect();
            bail!(
                "`export`: plan {n} cannot be written as {}: {why}. This plan exports as: {}. {}",
                target.file_name(),
                ids(&offered(&chosen.scenario)),
                if runs.is_empty() {
                    format!("No listed plan exports as {}.", target.file_name())
                } else {
                    format!(
                        "Plans that export as {}: {} (--pick).",
                        target.file_name(),
                        runs.join(", ")
                    )
                }
            );
        }
        let r = resolve(&chosen.scenario)?;
        let e = export(&r.spec, &chosen.scenario, target);
        if target == Target::DeepSpeed {
            // JSON has no comments: what the file cannot say goes to stderr.
            for n in &e.notes {
                eprintln!("# {n}");
            }
        }
        print!("{}", e.text);
        return Ok(());
    }
    match args.format {
        Format::Json => {
            // Each plan lists the export targets that run it as estimated.
            let mut planning = serde_json::to_value(&p)?;
            for (key, list) in [("plans", &p.plans), ("training_plans", &p.training_plans)] {
                let first = list.first().map_or(0.0, |f| f.tokens_per_second);
                if let Some(rows) = planning[key].as_array_mut() {
                    for (row, pl) in rows.iter_mut().zip(list) {
                        row["within_spread_of_first"] = json!(within(first, pl, band));
                        row["targets"] = json!(
                            offered(&pl.scenario)
                                .iter()
                                .map(|t| t.id())
                                .collect::<Vec<_>>()
                        );
                    }
                }
            }
            println!(
                "{}",
                serde_json::to_string_pretty(&json!({
                    "schema": "headroom.plan.v1",
                    "stack": opts.stack.id(),
                    "planning": planning,
                    "band": [band.0, band.1],
                }))?
            )
        }
        Format::Table => print!("{}", table(&p, opts.stack, calibrated)),
    }
    Ok(())
}

/// Whether the scenario's step time runs on a measured matmul curve (`time::Band`): the
/// narrower band, where eight in ten measured steps fell.
fn calibrated(scen: &headroom_core::Scenario) -> bool {
    // The estimate and its step time only: what fits and the strategy table are not needed.
    headroom_core::analyze_only(scen, headroom_core::What::ESTIMATE, None)
        .is_ok_and(|a| a.time.band().calibrated)
}

/// Whether `p`'s band overlaps that of a plan at `first` tokens/s: the model cannot tell which
/// of the two runs faster.
fn within(first: f64, p: &Plan, band: (f64, f64)) -> bool {
    headroom_core::time::indistinct_from_first([first, p.tokens_per_second], band) == 2
}

/// A line naming the plans whose speed the model cannot tell from the first's.
fn spread_line(s: &mut String, plans: &[Plan], calibrated: bool) {
    if let Some(note) = headroom_core::plan::spread_note(plans, calibrated) {
        let _ = writeln!(s, "{note}");
    }
}

/// Target ids as a list for a message.
fn ids(targets: &[Target]) -> String {
    targets
        .iter()
        .map(|t| t.id())
        .collect::<Vec<_>>()
        .join(", ")
}

fn duration(seconds: f64) -> String {
    if !seconds.is_finite() {
        return "never".into();
    }
    let h = seconds / 3600.0;
    if h >= 48.0 {
        format!("{:.1} days", h / 24.0)
    } else if h >= 1.0 {
        format!("{h:.1} h")
    } else {
        format!("{:.0} min", seconds / 60.0)
    }
}

fn plan_rows(s: &mut String, plans: &[Plan], input: &Plan) {
    let _ = writeln!(
        s,
        "{:>3}  {:>11} {:>10} {:>11} {:>8} {:>6}  {:<12} changes",
        "#", "tokens/s", "peak", "headroom", "vs now", "MFU", "to train"
    );
    for (i, p) in plans.iter().enumerate() {
        let cost = match &p.cost {
            Some(c) => match c.money {
                Some(m) => format!("{} / {m:.0} at your price", duration(c.seconds)),
                None => duration(c.seconds),
            },
            None => "-".into(),
        };
        let changes: Vec<String> = p
            .changes
            .iter()
            .map(|c| format!("{}={}", c.field, c.to))
            .collect();
        let _ = writeln!(
            s,
            "{:>3}  {:>11} {:>10} {:>11} {:>8} {:>5.1}%  {:<12} {}",
            i + 1,
            tokens_per_second(p.tokens_per_second),
            bytes(p.peak_device),
            // A plan with under 5% to spare is marked: the runtime constants are assumed.
            format!(
                "{}{}",
                signed_bytes(p.headroom),
                if p.headroom_percent < headroom_core::estimate::TIGHT_PERCENT {
                    "!"
                } else {
                    ""
                }
            ),
            // Against the current setup only when it runs (fits), as the page compares.
            if input.fits && input.tokens_per_second > 0.0 {
                speed_change(p.tokens_per_second / input.tokens_per_second - 1.0)
            } else {
                "-".to_string()
            },
            p.mfu * 100.0,
            cost,
            changes.join(" ")
        );
        let _ = writeln!(
            s,
            "{:>3}  runs on: {}",
            "",
            if p.runs_on.is_empty() {
                "no stack Headroom writes for (env.sh only)".to_string()
            } else {
                p.runs_on.join(", ")
            }
        );
    }
}

/// The plans and the ladder for people.
pub fn table(p: &Planning, stack: Stack, calibrated: bool) -> String {
    let mut s = String::new();
    let i = &p.input;
    // A speed only for a setup that runs.
    let _ = writeln!(
        s,
        "now: {} at the device level ({}); target: global batch {} x {} tokens",
        bytes(i.peak_device),
        if i.fits {
            format!("fits, {} tokens/s", tokens_per_second(i.tokens_per_second))
        } else {
            "does not fit".into()
        },
        p.global_batch,
        p.seq
    );
    let _ = writeln!(
        s,
        "searched {} combinations, {} estimates; {}\n",
        p.combinations,
        p.estimates,
        match stack {
            Stack::Any => "every plan, whatever runs it (--stack any)".to_string(),
            Stack::Runs =>
                "plans a stack Headroom writes for runs (--stack to choose one, any for all)".into(),
            Stack::Only(t) => format!("plans {} runs (--stack)", t.id()),
        }
    );
    if p.plans.is_empty() {
        s.push_str("No plan in the search space fits without changing the training");
        if stack != Stack::Any {
            let _ = write!(s, " on stack {}", stack.id());
        }
        s.push_str(if p.training_plans.is_empty() {
            "; try --allow-training-changes, more GPUs or a shorter sequence.\n"
        } else {
            ".\n"
        });
    } else {
        s.push_str("Plans that fit and train the same thing, fastest first:\n");
        plan_rows(&mut s, &p.plans, i);
        spread_line(&mut s, &p.plans, calibrated);
    }
    if !p.training_plans.is_empty() {
        s.push_str(
            "\nPlans that change the training (precision of the weights, optimizer, LoRA):\n",
        );
        plan_rows(&mut s, &p.training_plans, i);
        spread_line(&mut s, &p.training_plans, calibrated);
    }
    if let Some(c) = p.plans.first().and_then(|b| b.cost.as_ref()) {
        let _ = writeln!(
            s,
            "\nplan 1 on {:.3e} tokens: {}, {:.0} GPU-hours{}",
            c.tokens,
            duration(c.seconds),
            c.gpu_hours,
            c.money
                .map(|m| format!(", {m:.0} at the given price per GPU-hour"))
                .unwrap_or_default()
        );
    }
    s.push_str("\nLadder from the scenario as given, one change at a time:\n");
    let _ = writeln!(
        s,
        "{:>3}  {:<64} {:>10} {:<4} {:>11} {:>8} {:>8}",
        "", "change", "peak", "fits", "tokens/s", "step", "total"
    );
    for (n, st) in p.ladder.iter().enumerate() {
        let what = if st.change.is_empty() {
            st.technique.clone()
        } else {
            format!("{}: {}", st.technique, st.change)
        };
        let _ = writeln!(
            s,
            "{:>3}  {:<64} {:>10} {:<4} {:>11} {:>8} {:>8}",
            n,
            what,
            bytes(st.peak_device),
            if st.fits { "yes" } else { "no" },
            tokens_per_second(st.tokens_per_second),
            speed_change(st.speed_change),
            speed_change(st.speed_vs_start)
        );
    }
    if !p.ladder_fits {
        s.push_str(
            "The ladder found no single change that saves more memory: see the plans above.\n",
        );
    }
    if p.plans
        .iter()
        .any(|b| b.headroom_percent < headroom_core::estimate::TIGHT_PERCENT)
    {
        s.push_str("! risky: under 5% of the GPU to spare while the runtime constants are assumed (set --margin to plan with room)\n");
    }
    if let Some(b) = p.plans.first() {
        let _ = writeln!(s, "\nplan 1: ?{}", b.link);
        let _ = writeln!(
            s,
            "export it: headroom plan ... --export {}",
            offered(&b.scenario)
                .iter()
                .map(|t| t.id())
                .collect::<Vec<_>>()
                .join("|")
        );
    }
    s
}
