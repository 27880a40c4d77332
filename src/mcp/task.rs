//! The tool-use world: one compiled task, its simulation (shared mapping, user) and the rubric scorer, from which
//! each MCP session starts a fresh [`ToolEnv`] episode.

use super::McpError;
use crate::tooluse::env::{ToolEnv, ToolEnvConfig};
use crate::tooluse::rubric::{RubricScorer, ScoreConfig};
use crate::tooluse::simulation::{Simulation, SimulationConfig};
use crate::tooluse::task::{CompiledTask, ValidateOptions, load_tasks};
use std::path::Path;
use std::sync::Arc;

/// Names of the MCP tools every task session has besides the task's own.
pub const BUILTIN_TOOLS: [&str; 2] = ["ask_user", "finish"];

/// One tool-use task ready to be played: shared by every session.
pub struct TaskWorld {
    world: Arc<CompiledTask>,
    simulation: Arc<Simulation>,
    scorer: Arc<RubricScorer>,
    config: ToolEnvConfig,
}

impl TaskWorld {
    /// Loads the task `id` from `tasks` (a task file; `id` may be omitted when it holds exactly
    /// one task), simulated as `simulation` says (every session shares the task's mapping).
    /// Without `simulation.seed_mappings`, `mappings/` beside the task file seeds the mapping
    /// when it exists (as `rulegym synth` and `rulegym tools play` write it). Without an LLM, a
    /// call the mapping does not hold is answered with a tool error.
    pub fn load(
        tasks: &Path,
        id: Option<&str>,
        mut simulation: SimulationConfig,
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
        let beside = tasks.parent().unwrap_or(Path::new(".")).join("mappings");
        if simulation.seed_mappings.is_none() && beside.is_dir() {
            simulation.seed_mappings = Some(beside);
        }
        let world = Arc::new(task.compile(ValidateOptions::default())?);
        let simulation = Arc::new(Simulation::new(simulation)?);
        let scorer = Arc::new(RubricScorer::new(ScoreConfig::default())?);
        Self::new(world, simulation, scorer, config)
    }

    /// A world from parts (the task's tool names must not clash with [`BUILTIN_TOOLS`]).
    pub fn new(
        world: Arc<CompiledTask>,
        simulation: Arc<Simulation>,
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
            simulation,
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
        let mut env =
            self.simulation
                .env(self.world.clone(), self.scorer.clone(), self.config.clone())?;
        env.reset()?;
        Ok(env)
    }
}
