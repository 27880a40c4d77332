//! The tool-use world: one compiled task, its mapping simulator and the rubric scorer, from which
//! each MCP session starts a fresh [`ToolEnv`] episode.

use super::McpError;
use crate::tooluse::env::{ToolEnv, ToolEnvConfig};
use crate::tooluse::rubric::{RubricScorer, ScoreConfig};
use crate::tooluse::simulator::{MappingConfig, MappingSimulator};
use crate::tooluse::task::{CompiledTask, ValidateOptions, load_tasks};
use crate::tooluse::user::RuleUser;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Names of the MCP tools every task session has besides the task's own.
pub const BUILTIN_TOOLS: [&str; 2] = ["ask_user", "finish"];

/// One tool-use task ready to be played: shared by every session.
pub struct TaskWorld {
    world: Arc<CompiledTask>,
    mapping: Arc<MappingSimulator>,
    scorer: Arc<RubricScorer>,
    config: ToolEnvConfig,
}

impl TaskWorld {
    /// Loads the task `id` from `tasks` (a task file; `id` may be omitted when it holds exactly
    /// one task). Mapping-backed tools answer from `mapping` (a mapping file as `rulegym tools
    /// play` writes, `mappings/<id>.json`; default: `mappings/<id>.json` beside the task file
    /// when it exists); a call the mapping does not hold is answered with a tool error (no LLM).
    pub fn load(
        tasks: &Path,
        id: Option<&str>,
        mapping: Option<&Path>,
        config: ToolEnvConfig,
    ) -> crate::Result<Self> {
        let mut all = load_tasks(tasks, ValidateOptions::default())?;
        let file = tasks.display().to_string();
        let task = match id {
            Some(id) => {
                let i =
                    all.iter()
                        .position(|t| t.id == id)
                        .ok_or_else(|| McpError::UnknownTask {
                            id: id.to_owned(),
                            file: file.clone(),
                        })?;
                all.swap_remove(i)
            }
            None if all.len() == 1 => all.remove(0),
            None => {
                return Err(McpError::AmbiguousTask {
                    file,
                    count: all.len(),
                }
                .into());
            }
        };
        let default_mapping: PathBuf = tasks
            .parent()
            .unwrap_or(Path::new("."))
            .join("mappings")
            .join(format!("{}.json", task.id));
        let mapping_path = match mapping {
            Some(p) => Some(p.to_path_buf()),
            None if default_mapping.is_file() => Some(default_mapping),
            None => None,
        };
        let world = Arc::new(task.compile(ValidateOptions::default())?);
        // No LLM backend: the simulator only answers from the mapping file and never writes it.
        let mapping =
            MappingSimulator::new(&world.task.id, mapping_path, None, MappingConfig::default())?;
        let scorer = Arc::new(RubricScorer::new(ScoreConfig::default())?);
        Self::new(world, Arc::new(mapping), scorer, config)
    }

    /// A world from parts (the task's tool names must not clash with [`BUILTIN_TOOLS`]).
    pub fn new(
        world: Arc<CompiledTask>,
        mapping: Arc<MappingSimulator>,
        scorer: Arc<RubricScorer>,
        config: ToolEnvConfig,
    ) -> crate::Result<Self> {
        if let Some(t) = world
            .task
            .tools
            .iter()
            .find(|t| BUILTIN_TOOLS.contains(&t.name.as_str()))
        {
            return Err(McpError::ToolNameClash(t.name.clone()).into());
        }
        Ok(TaskWorld {
            world,
            mapping,
            scorer,
            config,
        })
    }

    /// The compiled task.
    pub fn task(&self) -> &CompiledTask {
        &self.world
    }

    /// A fresh episode (reset: the system prompt and the user's instruction are in its
    /// transcript).
    pub fn episode(&self) -> crate::Result<ToolEnv> {
        use crate::env::Environment;
        let mut env = ToolEnv::new(
            self.world.clone(),
            Some(self.mapping.clone()),
            Box::new(RuleUser::new(&self.world.task)),
            self.scorer.clone(),
            self.config.clone(),
        );
        env.reset()?;
        Ok(env)
    }
}
