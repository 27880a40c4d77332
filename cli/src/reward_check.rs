//! `rulegym reward-check`: property-test any reward command against rulegym's exact reward.

use rulegym::rewardcheck::{
    CaseSource, CheckConfig, CommandReward, ToolCaseSource, check, check_tools,
};
use std::path::PathBuf;
use std::time::Duration;

/// Rule-generated tasks the tool-use check draws its trajectories from.
const TOOL_TASKS: usize = 24;

/// Flags of `rulegym reward-check`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The reward command, run once under `sh -c`: it reads one
    /// `{"id","question","response","answers"}` per line on stdin and writes one
    /// `{"id","reward"}` per line on stdout.
    #[arg(long, required_unless_present = "audit")]
    cmd: Option<String>,
    /// Audit a trainer's logged rewards instead of a reward command: a JSONL log, verl's
    /// rollout dump (`trainer.rollout_data_dir`'s STEP.jsonl: `input`, `output`, `gts`,
    /// `score`) or `{"id" or "question" or "prompt", "response", "reward"[, "answers"]
    /// [, "step"]}` lines (gold answers by id, question text or the question the prompt asks,
    /// from --dataset). Every reward is compared with rulegym's
    /// exact reward; the report groups the divergences by the property they break, with
    /// counts, examples and the reward paid beyond the exact one. Exit 1 on a divergence, 2
    /// when lines could not be audited (each named in the report).
    #[arg(long, conflicts_with_all = ["cmd", "tool_use"])]
    audit: Option<PathBuf>,
    /// With --audit: how far a logged reward may be from the exact one.
    #[arg(long, default_value_t = rulegym::rewardcheck::audit::DEFAULT_TOLERANCE, requires = "audit")]
    tolerance: f64,
    /// Draw the cases from this dataset directory (its people and questions) instead of a
    /// fresh universe.
    #[arg(long, conflicts_with = "trees")]
    dataset: Option<PathBuf>,
    /// Seed of the fresh universe and of the case streams.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Family trees of the fresh universe (10 people at most each).
    #[arg(long, default_value_t = 30)]
    trees: usize,
    /// Cases to generate (spread evenly over the generated properties; at most 100,000).
    #[arg(long, default_value_t = 1200)]
    cases: usize,
    /// Cases per round trip to the command (lines, with --tool-use).
    #[arg(long, default_value_t = 2000)]
    batch: usize,
    /// Seconds to wait for each answer line.
    #[arg(long, default_value_t = 10.0)]
    timeout: f64,
    /// Check a tool-use rubric reward instead of an answer reward: the lines are
    /// `{"id", "task", "messages"}`, trajectories of rule-generated tasks (of the fresh
    /// universe, or of `--dataset`'s) with known rubric scores.
    #[arg(long)]
    tool_use: bool,
    /// Write the JSON report here (atomically) instead of stdout.
    #[arg(long)]
    out: Option<PathBuf>,
}

/// Runs `rulegym reward-check`: exit 0 when every property holds, 1 when one fails, 2 on a
/// usage or protocol error (the command died, answered garbage or missed lines).
pub fn main(args: Args) -> u8 {
    match run(args) {
        Ok(true) => 0,
        Ok(false) => 1,
        Err(message) => {
            eprintln!("error: {message}");
            2
        }
    }
}

fn run(args: Args) -> Result<bool, String> {
    if let Some(log) = &args.audit {
        return run_audit(&args, log);
    }
    let cmd = args.cmd.as_deref().unwrap_or_default();
    let timeout = Duration::try_from_secs_f64(args.timeout)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| {
            format!(
                "--timeout {} is not a positive number of seconds",
                args.timeout
            )
        })?;
    let config = CheckConfig {
        seed: args.seed,
        cases: args.cases,
        batch: args.batch,
        ..Default::default()
    };
    config.validate().map_err(|e| e.to_string())?;
    let report = if args.tool_use {
        let source = match &args.dataset {
            Some(dir) => rulegym::dataset::load_universe(dir)
                .and_then(|u| ToolCaseSource::new(&u, args.seed, TOOL_TASKS)),
            None => ToolCaseSource::generate(args.seed, args.trees, TOOL_TASKS),
        }
        .map_err(|e| e.to_string())?;
        let mut reward = CommandReward::spawn(cmd, timeout).map_err(|e| e.to_string())?;
        check_tools(&source, &mut reward, args.cases, args.batch)
    } else {
        let source = match &args.dataset {
            Some(dir) => CaseSource::load(dir),
            None => CaseSource::generate(args.seed, args.trees),
        }
        .map_err(|e| e.to_string())?;
        let mut reward = CommandReward::spawn(cmd, timeout).map_err(|e| e.to_string())?;
        check(&source, &mut reward, &config)
    }
    .map_err(|e| e.to_string())?
    .map_err(|e| e.to_string())?;
    write_report(&report, args.out.as_deref())?;
    let failed: Vec<&str> = report.failures.iter().map(|f| f.property).collect();
    if failed.is_empty() {
        eprintln!(
            "reward-check: every property held over {} cases ({} lines)",
            report.cases, report.lines
        );
    } else {
        eprintln!("reward-check: FAILED {}", failed.join(", "));
    }
    Ok(report.passed)
}

/// `--audit LOG`: the log's rewards beside rulegym's exact reward.
fn run_audit(args: &Args, log: &std::path::Path) -> Result<bool, String> {
    let text =
        std::fs::read_to_string(log).map_err(|e| format!("reading {}: {e}", log.display()))?;
    let report =
        rulegym::rewardcheck::audit::audit_log(&text, args.dataset.as_deref(), args.tolerance)
            .map_err(|e| e.to_string())?;
    write_report(&report, args.out.as_deref())?;
    eprintln!(
        "reward-check --audit: {} rollouts, {} agree, {} diverge (paid {:.3} beyond the exact reward); {} lines not audited",
        report.rollouts,
        report.agree,
        report.diverge,
        report.overpaid,
        report.errors.len()
    );
    for (property, class) in &report.by_property {
        eprintln!(
            "  {property}: {} rollouts, overpaid {:.3}, underpaid {:.3}",
            class.count, class.overpaid, class.underpaid
        );
    }
    for e in &report.errors {
        eprintln!("  {} line {}: {}", log.display(), e.line, e.message);
    }
    if report.diverge > 0 {
        return Ok(false);
    }
    if !report.errors.is_empty() {
        return Err(format!(
            "{} lines of {} could not be audited",
            report.errors.len(),
            log.display()
        ));
    }
    Ok(true)
}

/// Writes a report as pretty JSON to `out` (atomically) or stdout.
fn write_report(
    report: &impl serde::Serialize,
    out: Option<&std::path::Path>,
) -> Result<(), String> {
    let mut json = serde_json::to_string_pretty(report).map_err(|e| e.to_string())?;
    json.push('\n');
    match out {
        Some(path) => {
            rulegym::io::write_file_atomic(path, json.as_bytes()).map_err(|e| e.to_string())?
        }
        None => {
            use std::io::Write;
            std::io::stdout()
                .write_all(json.as_bytes())
                .map_err(|e| format!("writing the report to stdout: {e}"))?
        }
    }
    Ok(())
}
