//! `rulegym mcp`: serve a dataset's search tools, or one tool-use task, to MCP clients over stdio
//! or streamable HTTP (feature `mcp`, part of `cli`).

use rulegym::Result;
use std::path::PathBuf;

/// How MCP clients reach the server.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Transport {
    /// One session on stdin/stdout.
    Stdio,
    /// Streamable HTTP, one episode per MCP session.
    Http,
}

/// Flags of `rulegym mcp`.
#[derive(clap::Args, Debug)]
#[command(group(clap::ArgGroup::new("world").required(true).args(["dataset", "tasks"])))]
pub struct Args {
    /// A dataset directory written by `rulegym generate`: serves `search`, `get_article`,
    /// `list_people` and the articles as resources.
    #[arg(long)]
    dataset: Option<PathBuf>,
    /// Search index [default: the dataset's own `index.idx`].
    #[arg(long, conflicts_with = "tasks")]
    index: Option<PathBuf>,
    #[command(flatten)]
    questions: crate::QuestionFile,
    /// A scored session: the id of a dataset question; adds the `answer` tool (ends the episode,
    /// returns the F1 score) and the question as prompt `question` and resource.
    #[arg(long, conflicts_with = "tasks")]
    question: Option<String>,
    /// A tool-use task file (.jsonl, or .json with one task or an array): serves the task's
    /// tools, `ask_user` and `finish` (returns the rubric score).
    #[arg(long, conflicts_with = "dataset")]
    tasks: Option<PathBuf>,
    /// The task id within --tasks (optional when the file holds one task).
    #[arg(long, conflicts_with = "dataset")]
    task: Option<String>,
    /// Simulation of the task (mappings, simulator LLM, user).
    #[command(flatten)]
    simulation: super::SimulationArgs,
    /// Agent turns per tool-use episode (a task's max_turns overrides it).
    #[arg(long, default_value_t = 16)]
    max_turns: u32,
    /// Transport: `stdio` (one session on stdin/stdout) or `http` (streamable HTTP at
    /// http://HOST:PORT/mcp, one episode per MCP session).
    #[arg(long, value_enum, default_value_t = Transport::Stdio)]
    transport: Transport,
    /// Address to listen on (http).
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// TCP port (http; 0 picks a free one, printed on stderr).
    #[arg(long, default_value_t = 8000)]
    port: u16,
    /// A `Host` header value (name, or name:port) accepted besides the loopback names (http;
    /// repeatable): the DNS-rebinding guard rejects any other.
    #[arg(long)]
    allow_host: Vec<String>,
    /// Serve as an evaluation service (http): each MCP session plays the next question (task)
    /// in order, --question and --task are refused, and each client starts at most
    /// --max-episodes-per-client sessions, so rewards cannot be mined for answers.
    #[arg(long, conflicts_with_all = ["question", "task"])]
    eval: bool,
    /// MCP sessions (episodes) one client (peer address) may start (http) [default:
    /// unbounded; with --eval, the number of questions served].
    #[arg(long)]
    max_episodes_per_client: Option<u64>,
    /// Session bounds (http).
    #[command(flatten)]
    sessions: super::SessionArgs,
}

/// Runs `rulegym mcp` until the client disconnects (stdio) or the process is stopped (http).
pub fn run(args: Args) -> Result<()> {
    use rulegym::reward::ScoreMode;
    use rulegym::search::SearchEnvConfig;
    use rulegym::toolcall::{SearchWorld, TaskWorld, World, WorldKind, limits};
    use rulegym::tooluse::env::ToolEnvConfig;
    use std::sync::Arc;
    let (kind, id) = match (&args.dataset, &args.tasks) {
        (Some(dir), _) => {
            // A scored session: k passages per search, PhantomEnvironments' evaluation turn cap.
            let config = SearchEnvConfig {
                top_k: limits::DEFAULT_K,
                max_turns: 20,
                score_mode: ScoreMode::Squad,
                ..SearchEnvConfig::default()
            };
            let world = SearchWorld::load(
                dir,
                args.index.as_deref(),
                args.questions.file.as_deref(),
                config,
            )?;
            (WorldKind::Search(world), args.question.as_deref())
        }
        (None, Some(tasks)) => {
            args.questions.refuse_with_tasks()?;
            let config = ToolEnvConfig {
                max_turns: args.max_turns,
                ..ToolEnvConfig::default()
            };
            let world = TaskWorld::load(tasks, args.simulation.config()?, config)?;
            (WorldKind::Tasks(world), args.task.as_deref())
        }
        (None, None) => unreachable!("clap requires --dataset or --tasks"),
    };
    let limits = args.sessions.limits()?;
    let mut world = World::new("rulegym", kind);
    let mut max_episodes = args.max_episodes_per_client;
    if args.eval {
        if args.transport == Transport::Stdio {
            return Err(rulegym::Error::Config(
                "--eval serves many clients: pass --transport http".into(),
            ));
        }
        max_episodes = max_episodes.or(Some(world.len() as u64));
        world = world.dealt();
    }
    let world = Arc::new(world);
    let episode = world.fixed(id)?;
    if args.transport == Transport::Stdio {
        // stdout is the protocol's; a person who started this by hand learns why it waits.
        eprintln!(
            "rulegym mcp: serving MCP on stdin/stdout, waiting for a client's initialize \
             (start it from an MCP client, or pass --transport http)"
        );
        rulegym::mcp::serve_stdio(world, episode)
    } else {
        let addr = format!("{}:{}", args.host, args.port);
        let config = rulegym::mcp::HttpConfig {
            allowed_hosts: args.allow_host,
            sessions: limits,
            max_episodes_per_client: max_episodes,
        };
        rulegym::mcp::serve_http(world, episode, &addr, config, |local| {
            eprintln!("serving MCP (streamable HTTP) on http://{local}/mcp");
        })
    }
}
