//! The planner's answer as lines of text (`crate::wire`): the site's on-demand worker plans and
//! sends them, the page reads them back, so the search stays out of the page's first download.
//! A plan travels as its link: the page
//! decodes the scenario and recomputes the changes from the input's link, as the planner made
//! them.

use super::{Change, LadderStep, Plan, Planning, TrainCost, differences};
use crate::codec;
use crate::export::Target;
use crate::wire::{Fields, line};

/// The name errors give this answer.
const ANSWER: &str = "planner answer";

fn plan_line(p: &Plan) -> String {
    let cost = p.cost.map_or_else(
        || vec![String::new(); 4],
        |c| {
            vec![
                c.tokens.to_string(),
                c.seconds.to_string(),
                c.gpu_hours.to_string(),
                c.money.map_or_else(String::new, |m| m.to_string()),
            ]
        },
    );
    let mut f = vec![
        p.link.clone(),
        p.peak_device.to_string(),
        p.capacity.to_string(),
        p.fits.to_string(),
        p.headroom.to_string(),
        p.headroom_percent.to_string(),
        p.step_seconds.to_string(),
        p.tokens_per_step.to_string(),
        p.tokens_per_second.to_string(),
        p.tokens_per_second_per_gpu.to_string(),
        p.mfu.to_string(),
        p.changes_training.to_string(),
        p.runs_on.join(","),
    ];
    f.extend(cost);
    line(&f)
}

fn ladder_line(s: &LadderStep) -> String {
    line(&[
        s.id.clone(),
        s.technique.clone(),
        s.change.clone(),
        s.peak_device.to_string(),
        s.fits.to_string(),
        s.headroom.to_string(),
        s.tokens_per_second.to_string(),
        s.speed_change.to_string(),
        s.speed_vs_start.to_string(),
        s.changes_training.to_string(),
        s.link.clone(),
    ])
}

/// The lines of `p`: a head (global batch, sequence, combinations, estimates, whether the
/// ladder fits, and the count of each list), the input, the plans, the training plans, the
/// ladder.
pub fn to_lines(p: &Planning) -> Vec<String> {
    let head = line(&[
        p.global_batch.to_string(),
        p.seq.to_string(),
        p.combinations.to_string(),
        p.estimates.to_string(),
        p.ladder_fits.to_string(),
        p.plans.len().to_string(),
        p.training_plans.len().to_string(),
        p.ladder.len().to_string(),
    ]);
    let mut out = vec![head, plan_line(&p.input)];
    out.extend(p.plans.iter().map(plan_line));
    out.extend(p.training_plans.iter().map(plan_line));
    out.extend(p.ladder.iter().map(ladder_line));
    out
}

fn read_plan(line: &str, input: Option<&Plan>) -> Result<Plan, String> {
    let mut f = Fields::new(ANSWER, "a plan", line);
    let link = f.text()?.to_string();
    let scenario = codec::decode(&link).map_err(|e| format!("planner answer: {e}"))?;
    let (peak_device, capacity, fits, headroom) = (f.num()?, f.num()?, f.num()?, f.num()?);
    let (headroom_percent, step_seconds, tokens_per_step) = (f.num()?, f.num()?, f.num()?);
    let (tokens_per_second, tokens_per_second_per_gpu, mfu) = (f.num()?, f.num()?, f.num()?);
    let changes_training = f.num()?;
    let runs_on = f
        .text()?
        .split(',')
        .filter(|t| !t.is_empty())
        .map(|t| Target::parse("runs_on", t).map(Target::id))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("planner answer: {e}"))?;
    let cost = match (f.opt()?, f.opt()?, f.opt()?, f.opt()?) {
        (Some(tokens), Some(seconds), Some(gpu_hours), money) => Some(TrainCost {
            tokens,
            seconds,
            gpu_hours,
            money,
        }),
        _ => None,
    };
    // The changes are the planner's: the fields that differ from the scenario as given.
    let changes: Vec<Change> = input.map_or_else(Vec::new, |i| differences(&i.scenario, &scenario));
    Ok(Plan {
        scenario,
        link,
        peak_device,
        capacity,
        fits,
        headroom,
        headroom_percent,
        step_seconds,
        tokens_per_step,
        tokens_per_second,
        tokens_per_second_per_gpu,
        mfu,
        changes,
        runs_on,
        changes_training,
        cost,
    })
}

fn read_step(line: &str) -> Result<LadderStep, String> {
    let mut f = Fields::new(ANSWER, "a ladder step", line);
    Ok(LadderStep {
        id: f.text()?.to_string(),
        technique: f.text()?.to_string(),
        change: f.text()?.to_string(),
        peak_device: f.num()?,
        fits: f.num()?,
        headroom: f.num()?,
        tokens_per_second: f.num()?,
        speed_change: f.num()?,
        speed_vs_start: f.num()?,
        changes_training: f.num()?,
        link: f.text()?.to_string(),
    })
}

/// The planning [`to_lines`] wrote.
pub fn from_lines(lines: &[String]) -> Result<Planning, String> {
    let (head, rest) = lines.split_first().ok_or("planner answer: no lines")?;
    let mut h = Fields::new(ANSWER, "the head", head);
    let (global_batch, seq, combinations, estimates) = (h.num()?, h.num()?, h.num()?, h.num()?);
    let ladder_fits = h.num()?;
    let (n_plans, n_training, n_ladder): (usize, usize, usize) = (h.num()?, h.num()?, h.num()?);
    if rest.len() != 1 + n_plans + n_training + n_ladder {
        return Err(format!(
            "planner answer: {} lines where the head counts {}",
            rest.len(),
            1 + n_plans + n_training + n_ladder
        ));
    }
    let input = read_plan(&rest[0], None)?;
    let plans = rest[1..]
        .iter()
        .take(n_plans + n_training)
        .map(|l| read_plan(l, Some(&input)))
        .collect::<Result<Vec<_>, _>>()?;
    let ladder = rest[1 + n_plans + n_training..]
        .iter()
        .map(|l| read_step(l))
        .collect::<Result<Vec<_>, _>>()?;
    let (plans, training_plans) = {
        let mut plans = plans;
        let training = plans.split_off(n_plans);
        (plans, training)
    };
    Ok(Planning {
        input,
        global_batch,
        seq,
        plans,
        training_plans,
        ladder,
        ladder_fits,
        combinations,
        estimates,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::named_scenarios;
    use crate::plan::{PlanOptions, Stack, plan};

    /// Every worked example's planning, with training changes, costs and every stack, reads
    /// back equal to the planner's (figures to the bit, changes recomputed from the input).
    #[test]
    fn planning_reads_back_as_planned() {
        let opts = PlanOptions {
            allow_training_changes: true,
            tokens: Some(2e9),
            price_per_gpu_hour: Some(2.5),
            stack: Stack::Any,
            ..PlanOptions::default()
        };
        let mut checked = 0;
        for n in named_scenarios().into_iter().take(6) {
            let p = plan(&n.scenario, &opts).expect("plans");
            let back = from_lines(&to_lines(&p)).expect("reads back");
            assert_eq!(back, p, "{}", n.id);
            checked += p.plans.len() + p.training_plans.len();
        }
        assert!(checked > 20, "{checked} plans");
        let p = plan(&crate::Scenario::default(), &PlanOptions::default()).expect("plans");
        let mut lines = to_lines(&p);
        lines.pop();
        assert!(from_lines(&lines).is_err_and(|e| e.contains("head counts")));
        lines[0] = "x".into();
        assert!(from_lines(&lines).is_err_and(|e| e.contains("the head")));
    }
}
