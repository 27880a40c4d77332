//! `rulegym score`: answer scores for (gold answers, prediction) pairs, one JSON line each.

use rulegym::reward::{ScoreMode, last_answer, score};
use rulegym::{Error, Result};
use serde::Deserialize;
use std::io::{BufRead, Write};
use std::path::PathBuf;

/// Flags of `rulegym score`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// JSONL lines `{"answers": [...], "prediction": "..."[, "id": ...]}`; `-` reads stdin.
    /// A prediction is scored on the text of its last `<answer>...</answer>` when it has one,
    /// else on the whole text as given (a `<think>` block is then part of it); each output line
    /// echoes the input's `id` when it has one. A malformed line is answered
    /// `{"line": N, "error": "..."}` (so output lines stay aligned with input lines) and the
    /// rest are scored; the command then exits non-zero, saying how many lines failed.
    #[arg(long, default_value = "-")]
    pairs: PathBuf,
    /// Read `rulegym reward-check` lines and answer each with `{"id", "reward"}`, flushed per
    /// line: rulegym's own reward as a reward command (`rulegym reward-check --cmd "rulegym
    /// score --reward-lines"`). `{"id", "question", "response", "answers"}` gets the search
    /// environment's exact reward for the response as its final turn; `{"id", "task",
    /// "messages"}` gets the task's rubric reward for the conversation.
    #[arg(long, conflicts_with = "mode")]
    reward_lines: bool,
    /// Normalisation: squad (default) or phantomwiki.
    #[arg(long, default_value = "squad")]
    mode: String,
}

/// A reward-check line: an answer (`response`, `answers`) or a tool-use conversation (`task`,
/// `messages`).
#[derive(Deserialize)]
struct RewardLine {
    id: serde_json::Value,
    #[serde(default)]
    question: String,
    #[serde(default)]
    response: Option<String>,
    #[serde(default)]
    answers: Vec<String>,
    #[serde(default)]
    task: Option<rulegym::tooluse::task::Task>,
    #[serde(default)]
    messages: Vec<rulegym::llm::ChatMessage>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Pair {
    answers: Vec<String>,
    prediction: String,
    #[serde(default)]
    id: Option<serde_json::Value>,
}

/// Runs `rulegym score`. With `--pairs`, a malformed line is answered with an error line and
/// the rest are scored (the exit is then an error counting them); a malformed reward line ends
/// the run (reward-check reads a reward per line).
pub fn run(args: Args) -> Result<()> {
    let mode = match args.mode.as_str() {
        "squad" => ScoreMode::Squad,
        "phantomwiki" => ScoreMode::Phantomwiki,
        other => {
            return Err(Error::Config(format!(
                "unknown --mode {other:?} (squad, phantomwiki)"
            )));
        }
    };
    let reader: Box<dyn BufRead> = if args.pairs.as_os_str() == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        let file = std::fs::File::open(&args.pairs).map_err(|source| Error::Io {
            context: format!("opening {}", args.pairs.display()),
            source,
        })?;
        Box::new(std::io::BufReader::new(file))
    };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let write_err = |source| Error::Io {
        context: "writing stdout".into(),
        source,
    };
    if args.reward_lines {
        // The rubric scorer (one Prolog engine), started at the first tool-use line.
        let mut scorer = None;
        for record in rulegym::io::jsonl_stream::<RewardLine>(reader) {
            let (line, input) = record?;
            let reward = match (&input.task, &input.response) {
                (Some(task), _) => {
                    let scorer = match &scorer {
                        Some(s) => s,
                        None => scorer.insert(rulegym::tooluse::rubric::RubricScorer::new(
                            Default::default(),
                        )?),
                    };
                    rulegym::rewardcheck::tooluse::exact_rubric_reward(
                        scorer,
                        task,
                        &input.messages,
                    )?
                }
                (None, Some(response)) => {
                    rulegym::rewardcheck::exact_reward(&input.question, response, &input.answers)?
                }
                (None, None) => {
                    return Err(Error::Config(format!(
                        "line {line}: a reward line needs \"response\" (and \"answers\") or \"task\" (and \"messages\")"
                    )));
                }
            };
            writeln!(
                out,
                "{}",
                serde_json::json!({"id": input.id, "reward": reward})
            )
            .and_then(|()| out.flush())
            .map_err(write_err)?;
        }
    } else {
        let (mut lines, mut failed) = (0usize, 0usize);
        for (line, record) in rulegym::io::jsonl_lines::<Pair>(reader) {
            lines += 1;
            let pair = match record {
                Ok(pair) => pair,
                Err(e @ Error::Json { .. }) => {
                    failed += 1;
                    eprintln!("error: {e}");
                    let reply = serde_json::json!({"line": line, "error": e.to_string()});
                    writeln!(out, "{reply}").map_err(write_err)?;
                    continue;
                }
                Err(e) => return Err(e),
            };
            // A prediction with <answer> tags is scored on its last answer; plain text as is.
            let text = last_answer([pair.prediction.as_str()]).unwrap_or(pair.prediction);
            let s = score(&text, &pair.answers, mode);
            let mut line = serde_json::json!({"f1": s.f1, "em": s.em, "precision": s.precision, "recall": s.recall});
            if let Some(id) = pair.id {
                line["id"] = id;
            }
            writeln!(out, "{line}").map_err(write_err)?;
        }
        if failed > 0 {
            out.flush().map_err(write_err)?;
            return Err(Error::Dataset {
                file: match args.pairs.to_str() {
                    Some("-") => "stdin".to_owned(),
                    _ => args.pairs.display().to_string(),
                },
                message: format!(
                    "{failed} of {lines} lines were malformed (answered with an error line each); \
                     the other {} were scored",
                    lines - failed
                ),
            });
        }
    }
    out.flush().map_err(write_err)
}
