//! What a server serves: a dataset's questions over its index (the search environment), or a
//! file of tool-use tasks; how a session's task is picked; and the task listing over them.

use super::ToolSession;
use crate::curriculum::Curriculum;
use crate::question::Question;
use crate::retrieval::Document;
use crate::retrieval::SearchIndex;
use crate::search::session::SearchSession;
use crate::search::{SearchEnv, SearchEnvConfig, SearchTask};
use crate::tooluse::env::ToolEnvConfig;
use crate::tooluse::rubric::{RubricScorer, ScoreConfig};
use crate::tooluse::simulation::{Simulation, SimulationConfig};
use crate::tooluse::task::{CompiledTask, ValidateOptions, load_tasks};
use rand::Rng;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Why a world could not be loaded, or a request named nothing it holds.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum WorldError {
    /// The dataset has no questions, or the task file no tasks.
    #[error("nothing to serve: {0}")]
    Empty(&'static str),
    /// A task tool has the name of a built-in tool.
    #[error("task {task:?}: tool {tool:?} has the name of a built-in tool (ask_user, finish)")]
    ToolNameClash {
        /// The task.
        task: String,
        /// The clashing tool.
        tool: String,
    },
    /// No question or task has this id.
    #[error("no question or task with id {0:?}")]
    UnknownId(String),
    /// The request named the other world's kind of id.
    #[error("this server holds no {0}; name a {1}")]
    WrongKey(&'static str, &'static str),
    /// The world holds several tasks and the request picks none.
    #[error("the task file holds {0} tasks; name one by id")]
    AmbiguousTask(usize),
    /// A reset named a task of a world that only deals them.
    #[error(
        "this server deals its tasks in order (an evaluation service): a reset may name a split, \
         not a question_id, task_id, index or seed"
    )]
    Dealt,
    /// A curriculum given to a world of tool-use tasks.
    #[error("a curriculum draws search questions; this world serves tool-use tasks")]
    NoCurriculum,
    /// A browsing session asked of a world of tasks.
    #[error("a world of tool-use tasks has no browsing session")]
    NoBrowsing,
    /// The split does not exist.
    #[error("no split {split:?} (splits: {splits})")]
    UnknownSplit {
        /// The split asked for.
        split: String,
        /// The splits there are.
        splits: String,
    },
    /// An index past the end of the split.
    #[error("index {index} is out of range for a split of {len} tasks")]
    BadIndex {
        /// The index asked for.
        index: i64,
        /// The split's size.
        len: usize,
    },
}

/// A dataset's questions over its index, and its people's names (for browsing).
pub struct SearchWorld {
    index: Arc<SearchIndex>,
    /// Document id -> position in the index (lookups only; never iterated).
    by_id: HashMap<String, usize>,
    questions: Vec<Question>,
    people: Arc<Vec<String>>,
    config: SearchEnvConfig,
}

/// Tool-use tasks with their shared simulation and rubric engine.
pub struct TaskWorld {
    tasks: Vec<Arc<CompiledTask>>,
    simulation: Arc<Simulation>,
    scorer: Arc<RubricScorer>,
    config: ToolEnvConfig,
}

/// The kind of world a server holds.
pub enum WorldKind {
    /// A dataset's search environment.
    Search(SearchWorld),
    /// Tool-use tasks.
    Tasks(TaskWorld),
}

/// A served world and the order a request without a choice walks it in.
pub struct World {
    /// The environment's name (OpenEnv's `env_name`, in the task-listing routes).
    pub name: String,
    kind: WorldKind,
    next: AtomicU64,
    /// Tasks are dealt in order only: a reset may not choose one ([`World::dealt`]).
    dealt: bool,
    /// Where a reset that names no question draws from ([`World::with_curriculum`]).
    curriculum: Option<std::sync::Mutex<Curriculum>>,
}

/// A session a [`World`] started, and whether its reward goes to the world's curriculum.
pub struct Started {
    /// The session.
    pub session: ToolSession,
    /// Drawn from the curriculum: report its reward once it ends ([`World::report`]).
    pub drawn: bool,
}

/// Which episode to start (OpenEnv's `reset(seed, episode_id, **kwargs)`); unknown keys are
/// refused.
#[derive(Debug, Default, Clone, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ResetRequest {
    /// Picks a question (task) of the split at random from this seed (ChaCha8).
    #[serde(default)]
    pub seed: Option<u64>,
    /// The client's id for the episode.
    #[serde(default)]
    pub episode_id: Option<String>,
    /// A question id of the dataset (search worlds).
    #[serde(default)]
    pub question_id: Option<String>,
    /// A task id of the task file (tool-use worlds).
    #[serde(default)]
    pub task_id: Option<String>,
    /// The split to draw from (`train`, `val`; tool-use tasks have `train` only).
    #[serde(default)]
    pub split: Option<String>,
    /// The position within the split (as in the task listing).
    #[serde(default)]
    pub index: Option<usize>,
}

/// The curriculum under its lock (a panic while holding it leaves a consistent state: every
/// update is whole).
fn lock_curriculum(c: &std::sync::Mutex<Curriculum>) -> std::sync::MutexGuard<'_, Curriculum> {
    c.lock().unwrap_or_else(|e| e.into_inner())
}

impl ResetRequest {
    /// True when the request chooses its task (by id, index or seed), not only a split.
    pub fn names_task(&self) -> bool {
        self.question_id.is_some()
            || self.task_id.is_some()
            || self.index.is_some()
            || self.seed.is_some()
    }
}

/// The one split of a task file.
pub const TASK_SPLIT: &str = "train";

impl SearchWorld {
    /// The dataset `dir` (its universe's people and its questions, or the question file
    /// `questions`: [`crate::dataset::load_question_set`]) over `index` (default: the dataset's
    /// `index.idx`), played with `config` (its turn cap and top-k).
    pub fn load(
        dir: &Path,
        index: Option<&Path>,
        questions: Option<&Path>,
        config: SearchEnvConfig,
    ) -> crate::Result<Self> {
        config.validate()?;
        let universe = crate::dataset::load_universe(dir)?;
        let questions = crate::dataset::load_question_set(dir, questions)?.questions;
        let path = index
            .map(Path::to_path_buf)
            .unwrap_or_else(|| dir.join(crate::dataset::INDEX_FILE));
        let index = Arc::new(SearchIndex::load(&path)?);
        let people = universe.people.iter().map(|p| p.name.clone()).collect();
        Ok(Self::new(index, questions, people, config))
    }

    /// A world from parts.
    pub fn new(
        index: Arc<SearchIndex>,
        questions: Vec<Question>,
        people: Vec<String>,
        config: SearchEnvConfig,
    ) -> Self {
        let mut by_id = HashMap::new();
        for (i, d) in index.docs().iter().enumerate() {
            by_id.entry(d.id.clone()).or_insert(i);
        }
        SearchWorld {
            index,
            by_id,
            questions,
            people: Arc::new(people),
            config,
        }
    }

    fn session(&self, q: &Question) -> crate::Result<ToolSession> {
        self.session_over(q, &self.index)
    }

    /// A scored session of `q` over `index` (its own universe's articles: a curriculum draw).
    fn session_over(&self, q: &Question, index: &Arc<SearchIndex>) -> crate::Result<ToolSession> {
        let task = SearchTask {
            question: q.question.clone(),
            answers: q.answers.clone(),
            gold_docs: Vec::new(),
        };
        let env = SearchEnv::new(index.clone(), self.config.clone(), task)?;
        let session = SearchSession::new(env, index.clone(), q.clone())?;
        Ok(ToolSession::search(session, index.clone()))
    }
}

impl TaskWorld {
    /// The tasks of `file`, simulated as `simulation` says (every session shares each task's
    /// mapping). Without `simulation.seed_mappings`, `mappings/` beside the task file seeds the
    /// mappings when it exists (as `rulegym synth` and `rulegym tools play` write it). Without
    /// an LLM, a call the mapping does not hold is answered with a tool error.
    pub fn load(
        file: &Path,
        mut simulation: SimulationConfig,
        config: ToolEnvConfig,
    ) -> crate::Result<Self> {
        let beside = file.parent().unwrap_or(Path::new(".")).join("mappings");
        if simulation.seed_mappings.is_none() && beside.is_dir() {
            simulation.seed_mappings = Some(beside);
        }
        let tasks = load_tasks(file, ValidateOptions::default())?
            .into_iter()
            .map(|t| t.compile(ValidateOptions::default()).map(Arc::new))
            .collect::<Result<Vec<_>, _>>()?;
        Self::new(
            tasks,
            Arc::new(Simulation::new(simulation)?),
            Arc::new(RubricScorer::new(ScoreConfig::default())?),
            config,
        )
    }

    /// A world from parts: at least one task, none with a tool named like a built-in one
    /// ([`super::BUILTIN_TOOLS`]).
    pub fn new(
        tasks: Vec<Arc<CompiledTask>>,
        simulation: Arc<Simulation>,
        scorer: Arc<RubricScorer>,
        config: ToolEnvConfig,
    ) -> crate::Result<Self> {
        config.validate()?;
        if tasks.is_empty() {
            return Err(WorldError::Empty("the task file holds no task").into());
        }
        for t in &tasks {
            if let Some(clash) = t
                .task
                .tools
                .iter()
                .find(|s| super::task::is_builtin(&s.name))
            {
                return Err(WorldError::ToolNameClash {
                    task: t.task.id.clone(),
                    tool: clash.name.clone(),
                }
                .into());
            }
        }
        Ok(TaskWorld {
            tasks,
            simulation,
            scorer,
            config,
        })
    }

    fn session(&self, task: &Arc<CompiledTask>) -> crate::Result<ToolSession> {
        let env = self
            .simulation
            .env(task.clone(), self.scorer.clone(), self.config.clone())?;
        ToolSession::task(env, task.task.id.clone())
    }
}

fn split_type(name: &str) -> &'static str {
    match name {
        "train" => "train",
        "test" => "test",
        _ => "validation",
    }
}

impl World {
    /// A world named `name`.
    pub fn new(name: impl Into<String>, kind: WorldKind) -> Self {
        World {
            name: name.into(),
            kind,
            next: AtomicU64::new(0),
            dealt: false,
            curriculum: None,
        }
    }

    /// The same world with a curriculum: a reset that names no question (no `question_id`,
    /// `index` or `seed`) plays a fresh question drawn from it at its current level, in the
    /// environment of the world's dataset (its turn cap and passages per search); the rewards
    /// reported back ([`World::report`]) move its level. Only a search world takes one.
    pub fn with_curriculum(mut self, curriculum: Curriculum) -> Result<Self, WorldError> {
        if !matches!(self.kind, WorldKind::Search(_)) {
            return Err(WorldError::NoCurriculum);
        }
        self.curriculum = Some(std::sync::Mutex::new(curriculum));
        Ok(self)
    }

    /// Starts the episode `req` asks for, as [`World::session`], saying whether it was drawn
    /// from the curriculum.
    pub fn start_episode(&self, req: &ResetRequest) -> crate::Result<Started> {
        match (&self.curriculum, &self.kind) {
            (Some(c), WorldKind::Search(w)) if !req.names_task() => {
                let draw = lock_curriculum(c).draw()?;
                Ok(Started {
                    session: w.session_over(&draw.question, &draw.index)?,
                    drawn: true,
                })
            }
            _ => Ok(Started {
                session: self.session(req)?,
                drawn: false,
            }),
        }
    }

    /// Reports the reward of an ended episode drawn from the curriculum; returns the level
    /// after it (`None` without a curriculum).
    pub fn report(&self, reward: f64) -> crate::Result<Option<usize>> {
        match &self.curriculum {
            Some(c) => Ok(Some(lock_curriculum(c).report(reward)?)),
            None => Ok(None),
        }
    }

    /// The curriculum's state (level, draws, reports, window), if the world has one.
    pub fn curriculum_state(&self) -> Option<crate::curriculum::CurriculumState> {
        self.curriculum
            .as_ref()
            .map(|c| lock_curriculum(c).state().clone())
    }

    /// The same world serving as an evaluation service: every reset gets the next task of its
    /// split in order, and one that names a task (by id, index or seed) is refused, so a client
    /// cannot reset to one question over and over and read its answer off the rewards.
    pub fn dealt(mut self) -> Self {
        self.dealt = true;
        self
    }

    /// True when tasks are only dealt ([`World::dealt`]).
    pub fn is_dealt(&self) -> bool {
        self.dealt
    }

    /// What it holds.
    pub fn kind(&self) -> &WorldKind {
        &self.kind
    }

    /// The dataset's index (with the articles), for a search world.
    pub fn index(&self) -> Option<&Arc<SearchIndex>> {
        match &self.kind {
            WorldKind::Search(w) => Some(&w.index),
            WorldKind::Tasks(_) => None,
        }
    }

    /// A search world's article with document id `id`.
    pub fn article_by_id(&self, id: &str) -> Option<&Document> {
        match &self.kind {
            WorldKind::Search(w) => w.by_id.get(id).map(|&i| &w.index.docs()[i]),
            WorldKind::Tasks(_) => None,
        }
    }

    /// How many episodes (questions or tasks) it holds.
    pub fn len(&self) -> usize {
        match &self.kind {
            WorldKind::Search(w) => w.questions.len(),
            WorldKind::Tasks(w) => w.tasks.len(),
        }
    }

    /// Whether it holds no question (a task world always holds a task).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// One line on what is served.
    pub fn description(&self) -> String {
        match &self.kind {
            WorldKind::Search(w) => format!(
                "rulegym search environment: {} questions about a rule-generated universe; tools \
                 search, get_article, answer; reward: the exact set F1 of the answer",
                w.questions.len()
            ),
            WorldKind::Tasks(w) => format!(
                "rulegym tool-use tasks: {} tasks with their own tools, ask_user and finish; \
                 reward: the task's rubric score",
                w.tasks.len()
            ),
        }
    }

    /// The splits there are, in first-seen order.
    pub fn splits(&self) -> Vec<String> {
        match &self.kind {
            WorldKind::Search(w) => {
                let mut splits: Vec<String> = Vec::new();
                for q in &w.questions {
                    let split = q.split.as_str().to_owned();
                    if !splits.contains(&split) {
                        splits.push(split);
                    }
                }
                splits
            }
            WorldKind::Tasks(_) => vec![TASK_SPLIT.to_owned()],
        }
    }

    /// OpenEnv's split records: `{"name", "type"}`.
    pub fn split_records(&self) -> Vec<Value> {
        self.splits()
            .iter()
            .map(|s| json!({"name": s, "type": split_type(s)}))
            .collect()
    }

    /// Positions (into the world's list) of the tasks of `split`.
    fn members(&self, split: &str) -> Result<Vec<usize>, WorldError> {
        let members: Vec<usize> = match &self.kind {
            WorldKind::Search(w) => (0..w.questions.len())
                .filter(|&i| w.questions[i].split.as_str() == split)
                .collect(),
            WorldKind::Tasks(w) if split == TASK_SPLIT => (0..w.tasks.len()).collect(),
            WorldKind::Tasks(_) => Vec::new(),
        };
        if members.is_empty() {
            return Err(WorldError::UnknownSplit {
                split: split.to_owned(),
                splits: self.splits().join(", "),
            });
        }
        Ok(members)
    }

    /// How many tasks `split` holds.
    pub fn num_tasks(&self, split: &str) -> Result<usize, WorldError> {
        Ok(self.members(split)?.len())
    }

    /// The listing record of the task at `pos` (no gold answers: the listing may reach the
    /// policy).
    fn record(&self, pos: usize) -> Value {
        match &self.kind {
            WorldKind::Search(w) => {
                let q = &w.questions[pos];
                json!({
                    "id": q.id, "question": q.question, "split": q.split,
                    "family": q.family, "hops": q.hops, "kind": q.kind,
                    "difficulty": q.difficulty,
                })
            }
            WorldKind::Tasks(w) => {
                let t = &w.tasks[pos].task;
                json!({
                    "id": t.id, "instruction": t.instruction, "split": TASK_SPLIT,
                    "tools": t.tools.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
                })
            }
        }
    }

    /// The tasks of `split` from `start` to `stop` (Python slice semantics: negative counts
    /// from the end, out-of-range ends are clamped).
    pub fn task_range(
        &self,
        split: &str,
        start: Option<i64>,
        stop: Option<i64>,
    ) -> Result<Vec<Value>, WorldError> {
        let members = self.members(split)?;
        let n = members.len() as i64;
        let clamp = |v: i64| if v < 0 { (v + n).max(0) } else { v.min(n) };
        let (a, b) = (clamp(start.unwrap_or(0)), clamp(stop.unwrap_or(n)));
        Ok(members[a as usize..b.max(a) as usize]
            .iter()
            .map(|&p| self.record(p))
            .collect())
    }

    /// The task of `split` at `index` (negative counts from the end).
    pub fn task(&self, split: &str, index: i64) -> Result<Value, WorldError> {
        let members = self.members(split)?;
        let n = members.len() as i64;
        let i = if index < 0 { index + n } else { index };
        if !(0..n).contains(&i) {
            return Err(WorldError::BadIndex {
                index,
                len: n as usize,
            });
        }
        Ok(self.record(members[i as usize]))
    }

    /// The position of the task a request asks for: by id, by split and index, by seed (drawn
    /// uniformly within the split), or else the next in the world's order (round robin).
    fn pick(&self, req: &ResetRequest) -> Result<usize, WorldError> {
        if self.is_empty() {
            return Err(WorldError::Empty("the dataset has no questions"));
        }
        if self.dealt && req.names_task() {
            return Err(WorldError::Dealt);
        }
        let by_id = |id: &str| -> Result<usize, WorldError> {
            let found = match &self.kind {
                WorldKind::Search(w) => w.questions.iter().position(|q| q.id == id),
                WorldKind::Tasks(w) => w.tasks.iter().position(|t| t.task.id == id),
            };
            found.ok_or_else(|| WorldError::UnknownId(id.to_owned()))
        };
        match (&self.kind, &req.question_id, &req.task_id) {
            (WorldKind::Search(_), Some(id), None) | (WorldKind::Tasks(_), None, Some(id)) => {
                return by_id(id);
            }
            (WorldKind::Search(_), _, Some(_)) => {
                return Err(WorldError::WrongKey("task_id", "question_id"));
            }
            (WorldKind::Tasks(_), Some(_), _) => {
                return Err(WorldError::WrongKey("question_id", "task_id"));
            }
            _ => {}
        }
        let split = req.split.clone().unwrap_or_else(|| match &self.kind {
            WorldKind::Search(_) => "train".into(),
            WorldKind::Tasks(_) => TASK_SPLIT.into(),
        });
        // A dataset made entirely of one other split (e.g. val only) is still served.
        let members = match self.members(&split) {
            Err(_) if req.split.is_none() => self.members(&self.splits()[0])?,
            other => other?,
        };
        let i = match (req.index, req.seed) {
            (Some(i), _) => {
                if i >= members.len() {
                    return Err(WorldError::BadIndex {
                        index: i as i64,
                        len: members.len(),
                    });
                }
                i
            }
            (None, Some(seed)) => {
                crate::seed::stream(seed, "openenv/reset", 0).random_range(0..members.len())
            }
            (None, None) => {
                (self.next.fetch_add(1, Ordering::Relaxed) % members.len() as u64) as usize
            }
        };
        Ok(members[i])
    }

    /// Starts the episode a request asks for.
    pub fn session(&self, req: &ResetRequest) -> crate::Result<ToolSession> {
        let pos = self.pick(req)?;
        match &self.kind {
            WorldKind::Search(w) => w.session(&w.questions[pos]),
            WorldKind::Tasks(w) => w.session(&w.tasks[pos]),
        }
    }

    /// A browsing session of a dataset (no question): `search` with `k`, `get_article`,
    /// `list_people`.
    pub fn browse(&self) -> crate::Result<ToolSession> {
        match &self.kind {
            WorldKind::Search(w) => Ok(ToolSession::browse(w.index.clone(), w.people.clone())),
            WorldKind::Tasks(_) => Err(WorldError::NoBrowsing.into()),
        }
    }

    /// The one episode every session of a single-episode server (MCP) plays: the question or
    /// task `id`; without one, browsing a dataset, or the task file's only task. A world that
    /// deals its tasks ([`World::dealt`]) plays the next one in order in each session, and
    /// refuses an `id`.
    pub fn fixed(&self, id: Option<&str>) -> crate::Result<FixedEpisode> {
        if self.dealt {
            return match id {
                Some(_) => Err(WorldError::Dealt.into()),
                None if self.is_empty() => Err(WorldError::Empty("the world has no tasks").into()),
                None => Ok(FixedEpisode::Dealt),
            };
        }
        let req = match (id, &self.kind) {
            (Some(id), WorldKind::Search(_)) => ResetRequest {
                question_id: Some(id.to_owned()),
                ..ResetRequest::default()
            },
            (Some(id), WorldKind::Tasks(_)) => ResetRequest {
                task_id: Some(id.to_owned()),
                ..ResetRequest::default()
            },
            (None, WorldKind::Search(_)) => return Ok(FixedEpisode::Browse),
            (None, WorldKind::Tasks(w)) if w.tasks.len() == 1 => ResetRequest {
                index: Some(0),
                ..ResetRequest::default()
            },
            (None, WorldKind::Tasks(w)) => {
                return Err(WorldError::AmbiguousTask(w.tasks.len()).into());
            }
        };
        self.pick(&req)?;
        Ok(FixedEpisode::Reset(req))
    }

    /// A fresh session of `episode`.
    pub fn start(&self, episode: &FixedEpisode) -> crate::Result<ToolSession> {
        match episode {
            FixedEpisode::Browse => self.browse(),
            FixedEpisode::Reset(req) => self.session(req),
            FixedEpisode::Dealt => self.session(&ResetRequest::default()),
        }
    }
}

/// The episode of a single-episode server ([`World::fixed`]).
#[derive(Debug, Clone, PartialEq)]
pub enum FixedEpisode {
    /// Browsing the dataset.
    Browse,
    /// The episode this request picks.
    Reset(ResetRequest),
    /// The world's next task in order, a new one per session ([`World::dealt`]).
    Dealt,
}
