//! `rulegym openenv`: serve a dataset's search environment, or tool-use tasks, over OpenEnv's
//! protocol (feature `openenv`, part of `cli`).

use rulegym::Result;
use std::path::PathBuf;

/// Flags of `rulegym openenv`.
#[derive(clap::Args, Debug)]
#[command(group(clap::ArgGroup::new("world").required(true).args(["dataset", "tasks"])))]
pub struct Args {
    /// A dataset directory written by `rulegym generate`: each episode is one of its
    /// questions, answered with the tools `search`, `get_article` and `answer`.
    #[arg(long)]
    dataset: Option<PathBuf>,
    /// Search index [default: the dataset's own `index.idx`].
    #[arg(long, conflicts_with = "tasks")]
    index: Option<PathBuf>,
    #[command(flatten)]
    questions: crate::QuestionFile,
    /// Passages one `search` returns.
    #[arg(long, default_value_t = 3, conflicts_with = "tasks")]
    top_k: usize,
    /// A tool-use task file (.jsonl, or .json with one task or an array): each episode is one
    /// task, played with its tools, `ask_user` and `finish`.
    #[arg(long, conflicts_with = "dataset")]
    tasks: Option<PathBuf>,
    /// Tool calls per episode [default: the search environment's cap (10); 16 for tool-use
    /// tasks, whose own max_turns overrides it].
    #[arg(long)]
    max_turns: Option<u32>,
    /// Simulation of the tool-use tasks (mappings, simulator LLM, user), as in `tools play`.
    #[command(flatten)]
    simulation: super::SimulationArgs,
    /// The environment's name (OpenEnv's env_name, in the task-listing routes)
    /// [default: rulegym_search or rulegym_tools].
    #[arg(long)]
    name: Option<String>,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// TCP port (0 picks a free one, printed on stderr).
    #[arg(long, default_value_t = 8000)]
    port: u16,
    /// Largest request body or WebSocket message, in bytes (a socket keeps a read buffer the
    /// size of its largest message while it is open).
    #[arg(long, default_value_t = 128 * 1024)]
    max_message_bytes: usize,
    /// Seconds one reset or tool call may run before it is answered with an error.
    #[arg(long, default_value_t = 120.0)]
    call_timeout: f64,
    /// Seconds a request's body may take to arrive (408 beyond).
    #[arg(long, default_value_t = 30.0)]
    body_timeout: f64,
    /// Seconds a reply may wait on a WebSocket client that does not read before the socket is
    /// closed.
    #[arg(long, default_value_t = 10.0)]
    send_timeout: f64,
    /// WebSockets attached to one session at once (`/ws?session_id=`).
    #[arg(long, default_value_t = 4)]
    max_attachments: usize,
    /// A curriculum (JSON: `rulegym::curriculum::CurriculumConfig`, as `rulegym.Curriculum`
    /// takes it): a reset that names no question draws a fresh one from it at its current
    /// level, and the rewards of those episodes move the level (shown in `state` and
    /// `/health`). Needs --dataset, whose questions stay reachable by id.
    #[arg(long, requires = "dataset")]
    curriculum: Option<PathBuf>,
    /// Serve as an evaluation service: every reset gets the next question (task) in order, a
    /// reset naming one (question_id, task_id, index, seed) is refused, and each client starts
    /// at most --max-resets-per-client episodes, so rewards cannot be mined for answers.
    #[arg(long)]
    eval: bool,
    /// Episodes one client (peer address) may start [default: unbounded; with --eval, the
    /// number of questions served].
    #[arg(long)]
    max_resets_per_client: Option<u64>,
    /// Session bounds (WebSocket and HTTP sessions; the same cap bounds connections).
    #[command(flatten)]
    sessions: super::SessionArgs,
}

/// Runs `rulegym openenv` until the process is stopped.
pub fn run(args: Args) -> Result<()> {
    use rulegym::openenv::ServerConfig;
    use rulegym::search::SearchEnvConfig;
    use rulegym::toolcall::{SearchWorld, TaskWorld, World, WorldKind};
    use rulegym::tooluse::env::ToolEnvConfig;
    let (name, worlds) = match (&args.dataset, &args.tasks) {
        (Some(dir), _) => {
            let mut config = SearchEnvConfig {
                top_k: args.top_k,
                ..SearchEnvConfig::default()
            };
            if let Some(t) = args.max_turns {
                config.max_turns = t as usize;
            }
            let world = SearchWorld::load(
                dir,
                args.index.as_deref(),
                args.questions.file.as_deref(),
                config,
            )?;
            ("rulegym_search", WorldKind::Search(world))
        }
        (None, Some(file)) => {
            args.questions.refuse_with_tasks()?;
            let config = ToolEnvConfig {
                max_turns: args.max_turns.unwrap_or(16),
                ..ToolEnvConfig::default()
            };
            let world = TaskWorld::load(file, args.simulation.config()?, config)?;
            ("rulegym_tools", WorldKind::Tasks(world))
        }
        (None, None) => unreachable!("clap requires --dataset or --tasks"),
    };
    if args.max_message_bytes == 0 || args.max_attachments == 0 {
        return Err(rulegym::Error::Config(
            "--max-message-bytes and --max-attachments must be positive".into(),
        ));
    }
    let mut world = World::new(args.name.unwrap_or_else(|| name.to_owned()), worlds);
    let mut max_resets = args.max_resets_per_client;
    if args.eval {
        max_resets = max_resets.or(Some(world.len() as u64));
        world = world.dealt();
    }
    if let Some(path) = &args.curriculum {
        let config: rulegym::curriculum::CurriculumConfig =
            serde_json::from_slice(&rulegym::io::read(path)?).map_err(|e| {
                rulegym::Error::Config(format!("--curriculum {}: {e}", path.display()))
            })?;
        world = world.with_curriculum(rulegym::curriculum::Curriculum::new(config)?)?;
    }
    let cfg = ServerConfig {
        sessions: args.sessions.limits()?,
        max_message_bytes: args.max_message_bytes,
        call_timeout: super::seconds("call-timeout", args.call_timeout)?,
        body_timeout: super::seconds("body-timeout", args.body_timeout)?,
        send_timeout: super::seconds("send-timeout", args.send_timeout)?,
        max_attachments: args.max_attachments,
        max_resets_per_client: max_resets,
        ..ServerConfig::default()
    };
    let addr = format!("{}:{}", args.host, args.port);
    rulegym::openenv::serve_blocking(world, &addr, cfg, |local| {
        eprintln!("serving OpenEnv on http://{local} (WebSocket /ws, JSON-RPC /mcp, GET /health)");
    })
}
