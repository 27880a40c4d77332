//! `rulegym tools`: score a saved tool-use conversation against its task's rubric, or play an
//! agent model (OpenAI-compatible endpoint) through tool-use tasks.

use rulegym::Result;
use rulegym::llm::{ChatMessage, ClientConfig};
use rulegym::preset::{self, Stage};
use rulegym::tooluse::env::{Protocol, trajectory_from_messages};
use rulegym::tooluse::play::PlayConfig;
use rulegym::tooluse::rubric::agreement::AgreementReport;
use rulegym::tooluse::rubric::judge::LlmJudge;
use rulegym::tooluse::rubric::{RewardVariant, RubricScorer, ScoreBy, ScoreConfig};
use rulegym::tooluse::simulation::SimulationConfig;
use rulegym::tooluse::task::{TaskError, ValidateOptions, load_tasks};
use rulegym::tooluse::user::UserKind;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::Arc;

mod generate;
mod score;

/// Flags of `rulegym tools`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand, Debug)]
enum Command {
    /// Score a saved conversation (--id, --trajectory) or a file of them (--trajectories)
    /// against their tasks' rubrics; prints the reward and each rubric item's status, or with
    /// --json the full result.
    Score(score::ScoreArgs),
    /// Run an agent model through tasks; writes trajectories.jsonl and prints the rewards.
    Play(Box<PlayArgs>),
    /// Generate tool-use tasks from a universe's records (rule-generated tool worlds).
    Generate(generate::GenerateArgs),
    /// Replay the reference solution of generated tasks in the tool environment.
    Oracle(generate::OracleArgs),
    /// Score recorded episodes with both the Prolog rubric and SynthAgent's LLM judge and report
    /// their agreement (confusion matrices, Cohen's kappa).
    Agree(AgreeArgs),
}

/// Flags of `rulegym tools play`.
#[derive(clap::Args, Debug)]
pub struct PlayArgs {
    /// Task file.
    #[arg(long)]
    tasks: PathBuf,
    /// The agent's endpoint, key, retries and record/replay cache (default OUT/llm-cache; also
    /// the simulators' and judge's, and with --replay-only their mappings come from OUT only).
    #[command(flatten)]
    llm: crate::llm::LlmArgs,
    /// Agent model name.
    #[arg(long)]
    model: String,
    /// Output directory (trajectories.jsonl, mappings/, llm-cache/).
    #[arg(long)]
    out: PathBuf,
    /// An environment preset (`presets/env/<name>.json`): synthagent (Hermes protocol, 16
    /// turns, 13,000 response tokens per episode). --protocol and --max-turns override it.
    #[arg(long)]
    preset: Option<String>,
    /// The preset's stage: eval (default) or train.
    #[arg(long, value_enum, default_value_t = Stage::Eval, requires = "preset")]
    stage: Stage,
    /// Wire protocol: openai (tool_calls) or hermes (<tool_call> text) [openai, or the
    /// preset's].
    #[arg(long, value_enum)]
    protocol: Option<Protocol>,
    /// User simulator: rule (reveals slots on keywords) or llm.
    #[arg(long, value_enum, default_value_t = UserKind::Rule)]
    user: UserKind,
    /// Endpoint of the simulator LLM (tool and LLM user); defaults to --endpoint.
    #[arg(long)]
    sim_endpoint: Option<String>,
    /// Simulator model; defaults to --model.
    #[arg(long)]
    sim_model: Option<String>,
    /// Turn SynthAgent's semantic-equivalence check off (a new call is then always answered
    /// with a new response; exact canonical repeats still reuse theirs).
    #[arg(long)]
    no_semantic_equivalence: bool,
    /// Start each task's mapping from DIR/<id>.json when OUT has none (e.g. the mappings/ that
    /// `rulegym synth` wrote: the teacher's tool responses).
    #[arg(long)]
    seed_mappings: Option<PathBuf>,
    /// Who decides the reward: rules (the rubric's Prolog rules; default) or judge
    /// (SynthAgent's LLM judge over the whole rubric, recorded in OUT/llm-cache).
    #[arg(long, value_enum, default_value_t = ScoreBy::Rules)]
    reward: ScoreBy,
    /// Endpoint of the judge (--reward judge, and rubric items without a rule); defaults to
    /// the simulator's.
    #[arg(long)]
    judge_endpoint: Option<String>,
    /// Judge model; defaults to the simulator's.
    #[arg(long)]
    judge_model: Option<String>,
    /// Agent turns per episode (a task's max_turns overrides) [16, or the preset's].
    #[arg(long)]
    max_turns: Option<u32>,
    /// Agent sampling temperature.
    #[arg(long, default_value_t = 0.0)]
    temperature: f64,
    /// Seed passed to the endpoints.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Episodes in flight at once.
    #[arg(long, default_value_t = 4)]
    concurrency: usize,
    /// Reward variant: paper, peer-weighted or peer-strict.
    #[arg(long, value_enum, default_value_t = RewardVariant::Paper)]
    variant: RewardVariant,
}

/// Flags of `rulegym tools agree`.
#[derive(clap::Args, Debug)]
pub struct AgreeArgs {
    /// Task file.
    #[arg(long)]
    tasks: PathBuf,
    /// Recorded episodes: the trajectories.jsonl of `tools play` (one JSON object per line with
    /// "id" and "messages").
    #[arg(long)]
    trajectories: PathBuf,
    /// The judge's endpoint, key, retries and record/replay cache (default OUT/llm-cache).
    #[command(flatten)]
    llm: crate::llm::LlmArgs,
    /// The judge's endpoint (the same as --endpoint, which it overrides).
    #[arg(long)]
    judge_endpoint: Option<String>,
    /// Judge model.
    #[arg(long)]
    judge_model: String,
    /// Output directory: agreement.json and llm-cache/ (the judge's recorded answers).
    #[arg(long)]
    out: PathBuf,
    /// Seed sent to the judge.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Reward variant: paper, peer-weighted or peer-strict.
    #[arg(long, value_enum, default_value_t = RewardVariant::Paper)]
    variant: RewardVariant,
}

/// Runs `rulegym tools`.
pub fn run(args: Args) -> Result<()> {
    match args.command {
        Command::Score(a) => score::run(a),
        Command::Play(a) => play(*a),
        Command::Generate(a) => generate::run_generate(a),
        Command::Oracle(a) => generate::run_oracle(a),
        Command::Agree(a) => agree(a),
    }
}

fn score_config(variant: RewardVariant, by: ScoreBy) -> ScoreConfig {
    ScoreConfig {
        variant,
        by,
        ..ScoreConfig::default()
    }
}

/// The client settings of `tools play` and `tools agree`: 5-minute requests, two connections per
/// episode in flight.
fn tools_client(llm: &crate::llm::LlmArgs, out: &Path, concurrency: usize) -> ClientConfig {
    llm.client(
        ClientConfig {
            timeout_s: 300.0,
            max_concurrency: (concurrency.max(1) * 2).min(1024),
            ..ClientConfig::default()
        },
        Some(&out.join("llm-cache")),
    )
}

fn play(args: PlayArgs) -> Result<()> {
    let env = preset::tooluse_env(
        args.preset.as_deref(),
        args.stage,
        args.protocol,
        args.max_turns,
    )?;
    let agent = tools_client(&args.llm, &args.out, args.concurrency);
    let config = PlayConfig {
        simulation: SimulationConfig {
            endpoint: args.sim_endpoint.clone(),
            model: args.sim_model.clone().unwrap_or(args.model.clone()),
            user: args.user,
            dir: Some(args.out.clone()),
            seed_mappings: args.seed_mappings.clone(),
            semantic_equivalence: !args.no_semantic_equivalence,
            schema_format: agent.schema_format,
            max_concurrency: agent.max_concurrency,
            seed: args.seed,
            ..SimulationConfig::default()
        },
        agent,
        model: args.model.clone(),
        temperature: args.temperature,
        seed: args.seed,
        env,
        judge_endpoint: args.judge_endpoint.clone(),
        judge_model: args.judge_model.clone(),
        score: score_config(args.variant, args.reward),
        concurrency: args.concurrency,
    };
    let tasks = load_tasks(&args.tasks, ValidateOptions::default())?;
    let report = rulegym::tooluse::play::play(tasks, &config)?;
    let path = args.out.join("trajectories.jsonl");
    rulegym::io::write_file_atomic(&path, report.jsonl().as_bytes())?;
    println!(
        "{}",
        json!({"episodes": report.episodes.len(), "mean_reward": report.mean_reward(),
               "rewards": report.rewards(), "failed_simulations": report.failed_simulations(),
               "out": path})
    );
    Ok(())
}

fn agree(args: AgreeArgs) -> Result<()> {
    let tasks = load_tasks(&args.tasks, ValidateOptions::default())?;
    /// A line of the trajectories file: a task's id and its conversation.
    #[derive(serde::Deserialize)]
    struct Episode {
        id: String,
        messages: Vec<ChatMessage>,
    }
    let episodes: Vec<Episode> = rulegym::io::read_jsonl(&args.trajectories)?;
    let client =
        tools_client(&args.llm, &args.out, 2).with_endpoint(args.judge_endpoint.as_deref());
    let judge = LlmJudge::new(client.backend()?, &args.judge_model, Some(args.seed));
    let rules = RubricScorer::new(score_config(args.variant, ScoreBy::Rules))?;
    let judged = RubricScorer::new(score_config(args.variant, ScoreBy::Judge))?;
    let mut report = AgreementReport::default();
    for Episode { id, messages } in &episodes {
        let task = tasks
            .iter()
            .find(|t| &t.id == id)
            .ok_or_else(|| TaskError::NotFound(id.clone()))?;
        let world = Arc::new(task.clone().compile(ValidateOptions::default())?);
        let trajectory = trajectory_from_messages(&world, messages)?;
        let by_rules = rules.score(&world.program, &trajectory, None)?;
        let by_judge = judged.score(&world.program, &trajectory, Some(&judge));
        report.add(id, &by_rules, by_judge.map_err(|e| e.to_string()));
    }
    let json = serde_json::to_vec_pretty(&report).unwrap_or_default();
    rulegym::io::write_file_atomic(&args.out.join("agreement.json"), &json)?;
    println!("{}", report.markdown());
    Ok(())
}
