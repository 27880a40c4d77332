//! The `rulegym` command-line tool: one module per subcommand; each parses flags and calls the
//! library. [`main`] is the whole tool: the `rulegym` binary calls it, and so does the Python
//! wheel's `rulegym` command (a `pip install` brings the CLI with the bindings).

#![deny(missing_docs)]

use clap::{Parser, Subcommand};

mod eval;
mod export;
mod generate;
mod grpo;
mod index;
mod llm;
mod mcp;
mod openenv;
mod oracle;
mod phantomwiki;
pub(crate) mod questions;
mod reward_check;
mod score;
mod search;
mod serve;
mod synth;
mod tools;

/// rulegym: verifiable RL environments for small LLM agents.
#[derive(Parser, Debug)]
#[command(name = "rulegym", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Generate a universe, load it into the Prolog engine and write a dataset directory.
    Generate(generate::Args),
    /// Generate more question sets for an existing universe directory.
    Questions(questions::Args),
    /// Replay proof-derived oracle trajectories in the search environment.
    Oracle(oracle::Args),
    /// Export search questions or tool-use tasks as training rows for verl, SkyRL or TRL.
    Export(export::Args),
    /// Evaluate a model behind an OpenAI-compatible endpoint in the search environment.
    Eval(eval::Args),
    /// Compare evaluation runs: seeds, checkpoints, models, universe sizes (plots and tables).
    EvalCompare(eval::CompareArgs),
    /// Score predictions against gold answers (F1, EM, precision, recall per line).
    Score(score::Args),
    /// Property-test a reward command against rulegym's exact reward (exit 1 on a failed
    /// property, 2 on a usage or protocol error).
    RewardCheck(reward_check::Args),
    /// GRPO advantages, loss, gradient and metrics for a batch in a JSON file.
    Grpo(grpo::Args),
    /// Encode a corpus (or several, pooled) into a search index file.
    Index(index::Args),
    /// PhantomWiki compatibility: verify rulegym against a PhantomWiki output directory.
    Phantomwiki(phantomwiki::Args),
    /// Print the top passages of an index for queries.
    Search(search::Args),
    /// Serve an index over HTTP, Search-R1 compatible (feature `server`).
    Serve(serve::Args),
    /// Serve a dataset's search tools or a tool-use task to MCP clients (stdio or HTTP).
    Mcp(mcp::Args),
    /// Serve a dataset's search environment, or tool-use tasks, over OpenEnv's protocol.
    Openenv(openenv::Args),
    /// Tool-use tasks: score a conversation against its rubric, or play an agent through tasks.
    Tools(tools::Args),
    /// Synthesize tool-use tasks with an LLM (SynthAgent pipeline, record/replay cache).
    Synth(synth::Args),
}

/// Entry point of the binary: parse flags, run the subcommand, print errors.
/// Runs `rulegym` with `args` (the program name first, as `std::env::args_os` gives it) and
/// returns the process's exit status: 0 on success, 1 on an error (reward-check: 1 when a
/// property fails, 2 on an error), 2 on a usage error (clap's). Help, version and usage
/// errors print as clap prints them.
pub fn main<I, T>(args: I) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    // The library's log lines (a failed simulation, ...) go to stderr: warnings and errors by
    // default, more with RUST_LOG (e.g. RUST_LOG=rulegym=debug). The MCP server's stdio
    // transport keeps stdout for protocol messages, so nothing is logged there. (A second
    // call in one process keeps the first call's logger.)
    let _ = env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn"))
        .format_timestamp(None)
        .target(env_logger::Target::Stderr)
        .try_init();
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { 2 } else { 0 };
        }
    };
    let result = match cli.command {
        Command::RewardCheck(args) => return reward_check::main(args),
        Command::Generate(args) => generate::run(args),
        Command::Questions(args) => questions::run(args),
        Command::Oracle(args) => oracle::run(args),
        Command::Export(args) => export::run(args),
        Command::Eval(args) => eval::run(args),
        Command::EvalCompare(args) => eval::run_compare(args),
        Command::Score(args) => score::run(args),
        Command::Grpo(args) => grpo::run(args),
        Command::Index(args) => index::run(args),
        Command::Phantomwiki(args) => phantomwiki::run(args),
        Command::Search(args) => search::run(args),
        Command::Serve(args) => serve::run(args),
        Command::Mcp(args) => mcp::run(args),
        Command::Openenv(args) => openenv::run(args),
        Command::Tools(args) => tools::run(args),
        Command::Synth(args) => synth::run(args),
    };
    match result {
        Ok(()) => 0,
        Err(err) => {
            // A cause that the message above already quotes is not printed again.
            let mut shown = err.to_string();
            eprintln!("error: {shown}");
            if let rulegym::Error::Exists(_) = err {
                eprintln!("  (pass --force to replace it)");
            }
            let mut source = std::error::Error::source(&err);
            while let Some(cause) = source {
                let text = cause.to_string();
                if !shown.contains(&text) {
                    eprintln!("  caused by: {text}");
                    shown = text;
                }
                source = cause.source();
            }
            1
        }
    }
}

/// Session bounds of a network server (`serve`, `mcp --transport http`), flattened into its
/// flags: the one policy of [`rulegym::sessions`].
/// `--questions FILE`, the flag of every command that plays, exports or serves a dataset's
/// questions ([`rulegym::dataset::load_question_set`]).
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct QuestionFile {
    /// Use these questions instead of the dataset's own questions.jsonl: a file about the same
    /// universe (`rulegym questions --out FILE`, or one edited by hand), each question's gold
    /// answers checked by the engine against the universe first.
    #[arg(
        long = "questions",
        id = "questions",
        value_name = "FILE",
        requires = "dataset"
    )]
    pub(crate) file: Option<std::path::PathBuf>,
}

impl QuestionFile {
    /// Refuses the flag beside a task file, which has no dataset questions to replace (clap's
    /// `requires = "dataset"` does not refuse it there, since `--dataset` belongs to the
    /// commands' dataset-or-tasks group).
    pub(crate) fn refuse_with_tasks(&self) -> rulegym::Result<()> {
        match &self.file {
            Some(_) => Err(rulegym::Error::Config(
                "--questions replaces a dataset's questions; it does not apply to --tasks".into(),
            )),
            None => Ok(()),
        }
    }
}

#[derive(clap::Args, Debug, Clone)]
pub(crate) struct SessionArgs {
    /// Live sessions at once (MCP sessions; connections for `serve`); one more is answered 503
    /// until one ends.
    #[arg(long, default_value_t = 1024)]
    max_sessions: usize,
    /// Seconds without a request after which a session is closed and its state freed.
    #[arg(long, default_value_t = 600.0)]
    idle_timeout: f64,
    /// Seconds after which a session is closed, however busy.
    #[arg(long, default_value_t = 3600.0)]
    max_lifetime: f64,
    /// Live sessions one client (peer address) may hold [default: half of --max-sessions].
    #[arg(long)]
    max_sessions_per_client: Option<usize>,
    /// When every slot is taken, the session idle longest is closed for a newcomer if it has
    /// been idle this many seconds.
    #[arg(long, default_value_t = 60.0)]
    evict_idle_after: f64,
    /// New sessions one client may open per second, sustained; a burst of its whole share is
    /// admitted at once [default: its share per second].
    #[arg(long)]
    new_sessions_per_client_per_s: Option<f64>,
}

/// The flag `--FLAG V` as a positive duration.
pub(crate) fn seconds(flag: &str, v: f64) -> rulegym::Result<std::time::Duration> {
    std::time::Duration::try_from_secs_f64(v)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| {
            rulegym::Error::Config(format!("--{flag} {v} is not a positive number of seconds"))
        })
}

impl SessionArgs {
    /// The limits these flags give (checked).
    pub(crate) fn limits(&self) -> rulegym::Result<rulegym::sessions::SessionLimits> {
        let secs = |flag: &str, v: f64| {
            std::time::Duration::try_from_secs_f64(v).map_err(|_| {
                rulegym::Error::Config(format!("--{flag} {v} is not a number of seconds"))
            })
        };
        let limits = rulegym::sessions::SessionLimits {
            max_sessions: self.max_sessions,
            idle_timeout: secs("idle-timeout", self.idle_timeout)?,
            max_lifetime: secs("max-lifetime", self.max_lifetime)?,
            max_per_client: self.max_sessions_per_client,
            evict_idle_after: secs("evict-idle-after", self.evict_idle_after)?,
            new_per_client_per_s: self.new_sessions_per_client_per_s,
        };
        limits.validate()?;
        Ok(limits)
    }
}

/// How a served tool-use task is simulated (`rulegym mcp --tasks`, `rulegym openenv --tasks`).
#[derive(clap::Args, Debug)]
pub(crate) struct SimulationArgs {
    /// A directory of mappings (`<id>.json`) that seeds the task's mapping-simulated tools
    /// [default: `mappings/` beside the task file, if present]. Without --sim-endpoint a call
    /// the mapping lacks gets a tool error.
    #[arg(long, conflicts_with = "dataset")]
    seed_mappings: Option<std::path::PathBuf>,
    /// OpenAI-compatible endpoint of the simulator LLM (tools the mapping lacks, and the LLM
    /// user); needs --record.
    #[arg(long, conflicts_with = "dataset", requires = "record")]
    sim_endpoint: Option<String>,
    /// Simulator model.
    #[arg(long, default_value = "simulator", conflicts_with = "dataset")]
    sim_model: String,
    /// User simulator behind `ask_user`: rule or llm (needs --sim-endpoint).
    #[arg(long, value_enum, default_value_t = rulegym::tooluse::user::UserKind::Rule, conflicts_with = "dataset")]
    user: rulegym::tooluse::user::UserKind,
    /// Directory where the simulated world is recorded (mappings/, llm-cache/).
    #[arg(long, conflicts_with = "dataset")]
    record: Option<std::path::PathBuf>,
    /// Only replay the world recorded in --record (no network).
    #[arg(long, conflicts_with = "dataset", requires = "record")]
    replay_only: bool,
}

impl SimulationArgs {
    /// The simulation these flags ask for.
    pub(crate) fn config(&self) -> rulegym::Result<rulegym::tooluse::simulation::SimulationConfig> {
        Ok(rulegym::tooluse::simulation::SimulationConfig {
            endpoint: self.sim_endpoint.clone(),
            model: self.sim_model.clone(),
            user: self.user,
            dir: self.record.clone(),
            seed_mappings: self.seed_mappings.clone(),
            replay_only: self.replay_only,
            ..Default::default()
        })
    }
}
