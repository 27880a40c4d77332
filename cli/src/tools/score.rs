//! `rulegym tools score`: one saved conversation, or a file of them, scored against their
//! tasks' rubrics; a short summary a person reads, or the full result as JSON.

use clap::ValueEnum;
use rulegym::Result;
use rulegym::llm::ChatMessage;
use rulegym::tooluse::env::trajectory_from_messages;
use rulegym::tooluse::rubric::{
    ItemKind, ItemStatus, RewardVariant, RubricResult, RubricScorer, ScoreBy,
};
use rulegym::tooluse::task::{CompiledTask, Task, TaskError, ValidateOptions, load_tasks};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Flags of `rulegym tools score`.
#[derive(clap::Args, Debug)]
#[command(group(
    clap::ArgGroup::new("conversations")
        .required(true)
        .args(["trajectory", "trajectories"])
))]
pub struct ScoreArgs {
    /// Task file (.jsonl, or .json with one task or an array).
    #[arg(long)]
    tasks: PathBuf,
    /// Task id of --trajectory.
    #[arg(long, requires = "trajectory", conflicts_with = "trajectories")]
    id: Option<String>,
    /// One conversation (with --id): a JSON array of messages, or an object with a "messages"
    /// array. Prints "reward R (VARIANT)" (R rounded to at most 4 decimals), then one line per
    /// rubric item: satisfied, not satisfied or violated (a forbidden behaviour occurred), its
    /// kind (forbidden, sub-goal, interaction) and "ID: description".
    #[arg(long, requires = "id")]
    trajectory: Option<PathBuf>,
    /// A file of conversations instead of --id and --trajectory: JSONL, one object per line
    /// with "id" (the task id) and "messages", as `tools play` writes trajectories.jsonl and
    /// `tools oracle` its output. Prints "ID R" per trajectory, then "scored N, mean reward M
    /// (VARIANT)". A malformed line or an unknown task id is reported on stderr with its line
    /// number and the other lines are scored; the last line then reads "scored N of LINES, mean
    /// reward M (VARIANT); K failed" and the command exits 1.
    #[arg(long)]
    trajectories: Option<PathBuf>,
    /// Reward variant: paper, peer-weighted or peer-strict.
    #[arg(long, value_enum, default_value_t = RewardVariant::Paper)]
    variant: RewardVariant,
    /// Print JSON instead: the reward, every item's result and the facts derived from the
    /// conversation (pretty-printed; with --trajectories one object per line and no summary).
    #[arg(long)]
    json: bool,
}

/// A line of a trajectories file: a task's id and its conversation (other keys are ignored).
#[derive(serde::Deserialize)]
struct Line {
    id: String,
    messages: Vec<ChatMessage>,
}

/// Runs `rulegym tools score`.
pub fn run(args: ScoreArgs) -> Result<()> {
    let tasks = load_tasks(&args.tasks, ValidateOptions::default())?;
    let scorer = RubricScorer::new(super::score_config(args.variant, ScoreBy::Rules))?;
    if let Some(file) = &args.trajectories {
        return score_file(&tasks, &scorer, file, &args);
    }
    let (Some(id), Some(path)) = (&args.id, &args.trajectory) else {
        return Err(rulegym::Error::Config(
            "pass --id and --trajectory, or --trajectories".into(),
        ));
    };
    let task = tasks
        .iter()
        .find(|t| &t.id == id)
        .ok_or_else(|| TaskError::NotFound(id.clone()))?;
    let world = Arc::new(task.clone().compile(ValidateOptions::default())?);
    let (result, out) = score_one(&world, &scorer, &read_messages(path)?)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
    } else {
        print!("{}", summary(&result));
    }
    Ok(())
}

/// Scores every line of `file`; a line that fails is reported and skipped. Each task is
/// compiled once, when a line first names it.
fn score_file(tasks: &[Task], scorer: &RubricScorer, file: &Path, args: &ScoreArgs) -> Result<()> {
    let by_id: HashMap<&str, &Task> = tasks.iter().map(|t| (t.id.as_str(), t)).collect();
    let mut compiled: HashMap<String, Arc<CompiledTask>> = HashMap::new();
    let bytes = rulegym::io::read(file)?;
    let (mut rewards, mut failed) = (Vec::new(), 0usize);
    for (n, line) in rulegym::io::jsonl_records::<Line>(&bytes) {
        let scored = line
            .map_err(|e| {
                // serde's position counts lines within this one line: only the column is kept.
                let text = e.to_string();
                let what = text.split(" at line ").next().unwrap_or_default();
                format!(
                    "not a trajectory (an object with \"id\" and \"messages\"): {what} at column {}",
                    e.column()
                )
            })
            .and_then(|line| {
                let world = match compiled.entry(line.id.clone()) {
                    Entry::Occupied(world) => world.into_mut(),
                    Entry::Vacant(slot) => {
                        let task = by_id
                            .get(line.id.as_str())
                            .ok_or_else(|| TaskError::NotFound(line.id.clone()).to_string())?;
                        let world = (*task)
                            .clone()
                            .compile(ValidateOptions::default())
                            .map_err(|e| e.to_string())?;
                        slot.insert(Arc::new(world))
                    }
                };
                score_one(world, scorer, &line.messages).map_err(|e| e.to_string())
            });
        match scored {
            Ok((result, out)) => {
                if args.json {
                    println!("{out}");
                } else {
                    println!(
                        "{} {}",
                        out["id"].as_str().unwrap_or_default(),
                        shown(result.reward)
                    );
                }
                rewards.push(result.reward);
            }
            Err(e) => {
                eprintln!("{} line {n}: {e}", file.display());
                failed += 1;
            }
        }
    }
    if !args.json {
        let (scored, lines) = (rewards.len(), rewards.len() + failed);
        let mean = rewards.iter().sum::<f64>() / scored.max(1) as f64;
        let of = if failed > 0 {
            format!(" of {lines}")
        } else {
            String::new()
        };
        let mut last = format!(
            "scored {scored}{of}, mean reward {} ({})",
            shown(mean),
            variant_name(args.variant)
        );
        if failed > 0 {
            last.push_str(&format!("; {failed} failed"));
        }
        println!("{last}");
    }
    if failed > 0 {
        return Err(rulegym::Error::Dataset {
            file: file.display().to_string(),
            message: format!(
                "{failed} of {} lines failed (reported above)",
                failed + rewards.len()
            ),
        });
    }
    Ok(())
}

/// Scores `messages` against the compiled task's rubric: the result, and the object `--json`
/// prints (`id`, `reward`, `result` and `facts`, the facts derived from the conversation).
fn score_one(
    world: &Arc<CompiledTask>,
    scorer: &RubricScorer,
    messages: &[ChatMessage],
) -> Result<(RubricResult, Value)> {
    let trajectory = trajectory_from_messages(world, messages)?;
    let result = scorer.score(&world.program, &trajectory, None)?;
    let out = json!({
        "id": world.task.id,
        "reward": result.reward,
        "result": result,
        "facts": trajectory,
    });
    Ok((result, out))
}

fn read_messages(path: &Path) -> Result<Vec<ChatMessage>> {
    let text = std::fs::read_to_string(path).map_err(|source| rulegym::Error::Io {
        context: format!("reading {}", path.display()),
        source,
    })?;
    let json_err = |source| rulegym::Error::Json {
        context: format!("parsing {}", path.display()),
        source,
    };
    let value: Value = serde_json::from_str(&text).map_err(json_err)?;
    let messages = match value {
        Value::Object(mut map) => map.remove("messages").unwrap_or(Value::Null),
        other => other,
    };
    serde_json::from_value(messages).map_err(json_err)
}

/// The summary of one result: `reward R (variant)`, then one line per item in rubric order.
fn summary(result: &RubricResult) -> String {
    let mut out = format!(
        "reward {} ({})\n",
        shown(result.reward),
        variant_name(result.variant)
    );
    for item in &result.items {
        let status = match (item.kind, item.status) {
            (_, ItemStatus::Passed) => "satisfied",
            (ItemKind::Forbidden, ItemStatus::Failed) => "violated",
            (_, ItemStatus::Failed) => "not satisfied",
        };
        let kind = match item.kind {
            ItemKind::Forbidden => "forbidden",
            ItemKind::Subgoal => "sub-goal",
            ItemKind::Interaction => "interaction",
        };
        let what = if item.description.is_empty() {
            item.id.clone()
        } else {
            format!("{}: {}", item.id, item.description)
        };
        out.push_str(&format!("{status:<13}  {kind:<11}  {what}\n"));
    }
    out
}

/// A reward for reading: rounded to 4 decimals, trailing zeros dropped (0.6499999999999999
/// shows as 0.65, 1 as 1.0). The JSON keeps the exact value.
fn shown(x: f64) -> String {
    let mut s = format!("{x:.4}");
    if s.contains('.') {
        s.truncate(s.trim_end_matches('0').len());
        if s.ends_with('.') {
            s.push('0');
        }
    }
    s
}

fn variant_name(variant: RewardVariant) -> String {
    variant
        .to_possible_value()
        .map(|v| v.get_name().to_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::shown;

    #[test]
    fn rewards_show_at_most_four_decimals() {
        assert_eq!(shown(0.6499999999999999), "0.65");
        assert_eq!(shown(1.0), "1.0");
        assert_eq!(shown(0.0), "0.0");
        assert_eq!(shown(0.75), "0.75");
        assert_eq!(shown(1.0 / 3.0), "0.3333");
        assert_eq!(shown(0.35), "0.35");
    }
}
