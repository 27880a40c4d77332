//! `rulegym tools generate` and `rulegym tools oracle`: rule-generated tool worlds from a
//! universe, and replays of their reference solutions in the tool environment.

use rulegym::Result;
use rulegym::tooluse::rubric::{RubricScorer, ScoreConfig};
use rulegym::tooluse::rulegen::{RuleGenConfig, generate, replay_oracle};
use rulegym::tooluse::task::Task;
use serde_json::json;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

/// Flags of `rulegym tools generate`.
#[derive(clap::Args, Debug)]
pub struct GenerateArgs {
    /// Dataset directory holding the universe (`rulegym generate --out DIR`).
    #[arg(long)]
    universe: PathBuf,
    /// Number of tasks.
    #[arg(long, default_value_t = 100)]
    count: usize,
    /// Output file (JSONL, one task per line).
    #[arg(long)]
    out: PathBuf,
    /// Seed of the task streams.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Relation hops to the target, `MIN..MAX` or `N` (1 or 2).
    #[arg(long, default_value = "1..2")]
    hops: String,
    /// How many people may fit the description, `MIN..MAX` or `N` (>1: the agent must ask which).
    #[arg(long, default_value = "1..3")]
    candidates: String,
    /// Hidden slots the agent must ask for, `MIN..MAX` or `N` (1 to 3).
    #[arg(long, default_value = "1..3")]
    slots: String,
    /// People from other family trees put in each world.
    #[arg(long, default_value_t = 3)]
    outsiders: usize,
}

/// Flags of `rulegym tools oracle`.
#[derive(clap::Args, Debug)]
pub struct OracleArgs {
    /// Task file written by `rulegym tools generate`.
    #[arg(long)]
    tasks: PathBuf,
    /// Output file: one JSON line per task with `id`, `messages`, `reward` (sft: and `tools`).
    #[arg(long)]
    out: PathBuf,
    /// Worker threads (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// transcript: the environment's transcript as OpenAI API messages (arguments as JSON
    /// strings); sft: rows for TRL's `SFTTrainer` (arguments as objects, the task's `tools`),
    /// only those whose replay scores 1.
    #[arg(long, value_enum, default_value_t = OracleFormat::Transcript)]
    format: OracleFormat,
}

/// What `rulegym tools oracle` writes.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum OracleFormat {
    /// The environment's transcript (OpenAI API messages).
    Transcript,
    /// Supervised fine-tuning rows for tool calling.
    Sft,
}

fn range(name: &str, text: &str) -> Result<(usize, usize)> {
    let bad = || rulegym::Error::Config(format!("--{name}: expected N or MIN..MAX, got {text:?}"));
    let parse = |s: &str| s.trim().parse::<usize>().map_err(|_| bad());
    match text.split_once("..") {
        Some((a, b)) => Ok((parse(a)?, parse(b.trim_start_matches('='))?)),
        None => {
            let n = parse(text)?;
            Ok((n, n))
        }
    }
}

/// Runs `rulegym tools generate`.
pub fn run_generate(args: GenerateArgs) -> Result<()> {
    let start = Instant::now();
    let universe = rulegym::dataset::load_universe(&args.universe)?;
    let config = RuleGenConfig {
        seed: args.seed,
        hops: range("hops", &args.hops)?,
        candidates: range("candidates", &args.candidates)?,
        slots: range("slots", &args.slots)?,
        outsiders: args.outsiders,
        ..RuleGenConfig::default()
    };
    let tasks = generate(&universe, &config, args.count)?;
    let mut text = String::new();
    let mut hops = BTreeMap::new();
    let mut slots = BTreeMap::new();
    let mut ambiguous = 0;
    for w in &tasks {
        *hops.entry(w.path.len()).or_insert(0usize) += 1;
        *slots
            .entry(w.task.hidden_context.slots.len())
            .or_insert(0usize) += 1;
        ambiguous += usize::from(w.candidates.len() > 1);
        text.push_str(
            &serde_json::to_string(&w.task).map_err(|source| rulegym::Error::Json {
                context: "serializing a task".into(),
                source,
            })?,
        );
        text.push('\n');
    }
    rulegym::io::write_file_atomic(&args.out, text.as_bytes())?;
    println!(
        "{}",
        json!({
            "tasks": tasks.len(),
            "out": args.out,
            "by_hops": hops,
            "by_hidden_slots": slots,
            "ambiguous": ambiguous,
            "seconds": start.elapsed().as_secs_f64(),
        })
    );
    Ok(())
}

fn read_tasks(path: &PathBuf) -> Result<Vec<Task>> {
    let bytes = std::fs::read(path).map_err(|source| rulegym::Error::Io {
        context: format!("reading {}", path.display()),
        source,
    })?;
    rulegym::io::jsonl_records::<Task>(&bytes)
        .map(|(line, task)| {
            task.map_err(|e| {
                rulegym::Error::Config(format!("{}:{line}: parsing task: {e}", path.display()))
            })
        })
        .collect()
}

/// Runs `rulegym tools oracle`.
pub fn run_oracle(args: OracleArgs) -> Result<()> {
    let start = Instant::now();
    let tasks = read_tasks(&args.tasks)?;
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| rulegym::Error::Config(format!("thread pool: {e}")))?;
    let lines: Vec<Result<(f64, Option<String>)>> = pool.install(|| {
        use rayon::prelude::*;
        tasks
            .into_par_iter()
            .map_init(
                || RubricScorer::new(ScoreConfig::default()).map(Arc::new),
                |scorer, task| {
                    let scorer = scorer
                        .as_ref()
                        .map_err(|e| rulegym::Error::Rubric(e.clone()))?;
                    let tools = (args.format == OracleFormat::Sft).then(|| task.clone());
                    let episode = replay_oracle(task, scorer.clone())?;
                    let line = match &tools {
                        // A demonstration teaches only what the rubric pays in full.
                        Some(_) if episode.reward < 1.0 => None,
                        Some(task) => Some(rulegym::tooluse::rulegen::sft_row(task, &episode)),
                        None => Some(json!({
                            "id": episode.id,
                            "messages": episode.messages,
                            "reward": episode.reward,
                        })),
                    };
                    Ok((episode.reward, line.map(|l| l.to_string())))
                },
            )
            .collect()
    });
    let mut text = String::new();
    let mut dist: BTreeMap<String, usize> = BTreeMap::new();
    let mut sum = 0.0;
    let n = lines.len();
    for line in lines {
        let (reward, line) = line?;
        sum += reward;
        *dist.entry(format!("{reward:.3}")).or_default() += 1;
        if let Some(line) = line {
            text.push_str(&line);
            text.push('\n');
        }
    }
    rulegym::io::write_file_atomic(&args.out, text.as_bytes())?;
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{}",
        json!({
            "tasks": n,
            "mean_reward": if n == 0 { 0.0 } else { sum / n as f64 },
            "reward_distribution": dist,
            "out": args.out,
            "seconds": secs,
            "tasks_per_minute": if secs > 0.0 { n as f64 * 60.0 / secs } else { 0.0 },
        })
    );
    Ok(())
}
