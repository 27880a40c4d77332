//! What an OpenEnv server serves: a dataset's questions (the search environment) or a file of
//! tool-use tasks; how `reset` picks one; and OpenEnv's task listing over them.

use super::OpenEnvError;
use super::episode::{Episode, TaskEpisode};
use crate::question::Question;
use crate::retrieval::SearchIndex;
use crate::search::session::SearchSession;
use crate::search::{SearchEnv, SearchEnvConfig, SearchTask};
use crate::tooluse::env::ToolEnvConfig;
use crate::tooluse::rubric::{RubricScorer, ScoreConfig};
use crate::tooluse::simulation::{Simulation, SimulationConfig};
use crate::tooluse::task::{CompiledTask, ValidateOptions, load_tasks};
use rand::Rng;
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// A dataset's questions over its index.
pub struct SearchWorld {
    index: Arc<SearchIndex>,
    questions: Vec<Question>,
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
pub enum Worlds {
    /// A dataset's search environment.
    Search(SearchWorld),
    /// Tool-use tasks.
    Tasks(TaskWorld),
}

/// A served world and the order `reset` without a choice walks it in.
pub struct World {
    /// The environment's name (OpenEnv's `env_name`, in the task-listing routes).
    pub name: String,
    worlds: Worlds,
    next: AtomicU64,
}

/// What `reset` may say about the episode to start (OpenEnv's `reset(seed, episode_id,
/// **kwargs)`); unknown keys are refused.
#[derive(Debug, Default, Clone, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
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

/// The one split of a task file.
pub const TASK_SPLIT: &str = "train";

impl SearchWorld {
    /// The questions of `dir` over `index` (default: the dataset's `index.idx`), played with
    /// `config` (its turn cap and top-k).
    pub fn load(dir: &Path, index: Option<&Path>, config: SearchEnvConfig) -> crate::Result<Self> {
        config.validate()?;
        let questions = crate::dataset::load_questions(dir)?;
        let path = index
            .map(Path::to_path_buf)
            .unwrap_or_else(|| dir.join("index.idx"));
        let index = Arc::new(SearchIndex::load(&path)?);
        Self::new(index, questions, config)
    }

    /// A world from parts.
    pub fn new(
        index: Arc<SearchIndex>,
        questions: Vec<Question>,
        config: SearchEnvConfig,
    ) -> crate::Result<Self> {
        if questions.is_empty() {
            return Err(OpenEnvError::Empty("the dataset has no questions").into());
        }
        Ok(SearchWorld {
            index,
            questions,
            config,
        })
    }
}

impl TaskWorld {
    /// The tasks of `file`, simulated as `simulation` says (every session shares each task's
    /// mapping). Without `simulation.seed_mappings`, `mappings/` beside the task file seeds the
    /// mappings when it exists.
    pub fn load(
        file: &Path,
        mut simulation: SimulationConfig,
        config: ToolEnvConfig,
    ) -> crate::Result<Self> {
        config.validate()?;
        let tasks = load_tasks(file, ValidateOptions::default())?;
        if tasks.is_empty() {
            return Err(OpenEnvError::Empty("the task file holds no task").into());
        }
        let beside = file.parent().unwrap_or(Path::new(".")).join("mappings");
        if simulation.seed_mappings.is_none() && beside.is_dir() {
            simulation.seed_mappings = Some(beside);
        }
        let mut compiled = Vec::with_capacity(tasks.len());
        for t in tasks {
            if let Some(clash) = t
                .tools
                .iter()
                .find(|s| ["ask_user", "finish"].contains(&s.name.as_str()))
            {
                return Err(OpenEnvError::ToolNameClash {
                    task: t.id.clone(),
                    tool: clash.name.clone(),
                }
                .into());
            }
            compiled.push(Arc::new(t.compile(ValidateOptions::default())?));
        }
        Ok(TaskWorld {
            tasks: compiled,
            simulation: Arc::new(Simulation::new(simulation)?),
            scorer: Arc::new(RubricScorer::new(ScoreConfig::default())?),
            config,
        })
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
    pub fn new(name: impl Into<String>, worlds: Worlds) -> Self {
        World {
            name: name.into(),
            worlds,
            next: AtomicU64::new(0),
        }
    }

    /// One line on what is served (OpenEnv's metadata `description`).
    pub fn description(&self) -> String {
        match &self.worlds {
            Worlds::Search(w) => format!(
                "rulegym search environment: {} questions about a rule-generated universe; tools \
                 search, get_article, answer; reward: the exact set F1 of the answer",
                w.questions.len()
            ),
            Worlds::Tasks(w) => format!(
                "rulegym tool-use tasks: {} tasks with their own tools, ask_user and finish; \
                 reward: the task's rubric score",
                w.tasks.len()
            ),
        }
    }

    /// The splits there are, in first-seen order.
    pub fn splits(&self) -> Vec<String> {
        match &self.worlds {
            Worlds::Search(w) => {
                let mut splits: Vec<String> = Vec::new();
                for q in &w.questions {
                    let split = q.split.as_str().to_owned();
                    if !splits.contains(&split) {
                        splits.push(split);
                    }
                }
                splits
            }
            Worlds::Tasks(_) => vec![TASK_SPLIT.to_owned()],
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
    fn members(&self, split: &str) -> Result<Vec<usize>, OpenEnvError> {
        let members: Vec<usize> = match &self.worlds {
            Worlds::Search(w) => (0..w.questions.len())
                .filter(|&i| w.questions[i].split.as_str() == split)
                .collect(),
            Worlds::Tasks(w) if split == TASK_SPLIT => (0..w.tasks.len()).collect(),
            Worlds::Tasks(_) => Vec::new(),
        };
        if members.is_empty() {
            return Err(OpenEnvError::UnknownSplit {
                split: split.to_owned(),
                splits: self.splits().join(", "),
            });
        }
        Ok(members)
    }

    /// How many tasks `split` holds.
    pub fn num_tasks(&self, split: &str) -> Result<usize, OpenEnvError> {
        Ok(self.members(split)?.len())
    }

    /// The listing record of the task at `pos` (no gold answers: the listing may reach the
    /// policy).
    fn record(&self, pos: usize) -> Value {
        match &self.worlds {
            Worlds::Search(w) => {
                let q = &w.questions[pos];
                json!({
                    "id": q.id, "question": q.question, "split": q.split,
                    "family": q.family, "hops": q.hops, "kind": q.kind,
                    "difficulty": q.difficulty,
                })
            }
            Worlds::Tasks(w) => {
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
    ) -> Result<Vec<Value>, OpenEnvError> {
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
    pub fn task(&self, split: &str, index: i64) -> Result<Value, OpenEnvError> {
        let members = self.members(split)?;
        let n = members.len() as i64;
        let i = if index < 0 { index + n } else { index };
        if !(0..n).contains(&i) {
            return Err(OpenEnvError::BadIndex {
                index,
                len: n as usize,
            });
        }
        Ok(self.record(members[i as usize]))
    }

    /// The position of the task `reset` asks for: by id, by split and index, by seed (drawn
    /// uniformly within the split), or else the next in the world's order (round robin).
    fn pick(&self, req: &ResetRequest) -> Result<usize, OpenEnvError> {
        let by_id = |id: &str| -> Result<usize, OpenEnvError> {
            let found = match &self.worlds {
                Worlds::Search(w) => w.questions.iter().position(|q| q.id == id),
                Worlds::Tasks(w) => w.tasks.iter().position(|t| t.task.id == id),
            };
            found.ok_or_else(|| OpenEnvError::UnknownId(id.to_owned()))
        };
        match (&self.worlds, &req.question_id, &req.task_id) {
            (Worlds::Search(_), Some(id), None) | (Worlds::Tasks(_), None, Some(id)) => {
                return by_id(id);
            }
            (Worlds::Search(_), _, Some(_)) => {
                return Err(OpenEnvError::WrongKey("task_id", "question_id"));
            }
            (Worlds::Tasks(_), Some(_), _) => {
                return Err(OpenEnvError::WrongKey("question_id", "task_id"));
            }
            _ => {}
        }
        let split = req.split.clone().unwrap_or_else(|| match &self.worlds {
            Worlds::Search(_) => "train".into(),
            Worlds::Tasks(_) => TASK_SPLIT.into(),
        });
        // A dataset made entirely of one other split (e.g. val only) is still served.
        let members = match self.members(&split) {
            Err(_) if req.split.is_none() => self.members(&self.splits()[0])?,
            other => other?,
        };
        let i = match (req.index, req.seed) {
            (Some(i), _) => {
                if i >= members.len() {
                    return Err(OpenEnvError::BadIndex {
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

    /// Starts the episode `reset` asks for.
    pub fn episode(&self, req: &ResetRequest) -> crate::Result<Episode> {
        let pos = self.pick(req)?;
        match &self.worlds {
            Worlds::Search(w) => {
                let q = w.questions[pos].clone();
                let task = SearchTask {
                    question: q.question.clone(),
                    answers: q.answers.clone(),
                    gold_docs: Vec::new(),
                };
                let env = SearchEnv::new(w.index.clone(), w.config.clone(), task)?;
                Ok(Episode::Search(Box::new(SearchSession::new(
                    env,
                    w.index.clone(),
                    q,
                )?)))
            }
            Worlds::Tasks(w) => {
                let task = w.tasks[pos].clone();
                let id = task.task.id.clone();
                let env = w.simulation.env(task, w.scorer.clone(), w.config.clone())?;
                Ok(Episode::Task(Box::new(TaskEpisode::new(env, id)?)))
            }
        }
    }
}
