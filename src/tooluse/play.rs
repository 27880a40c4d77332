//! An agent model played through tool-use tasks, the library call behind `rulegym tools play`
//! (the tool-use counterpart of `eval::evaluate`): one client configuration for the agent, the
//! simulators and the judge, every exchange recorded in one cache, episodes in parallel, each
//! task's world shared through the [`Simulation`].

use super::env::{Episode, ToolEnvConfig, play_episode};
use super::rubric::judge::LlmJudge;
use super::rubric::{ItemJudge, RubricScorer, ScoreConfig};
use super::simulation::{Simulation, SimulationConfig};
use super::task::{Task, ValidateOptions};
use crate::llm::{ClientConfig, recorded};
use std::sync::Arc;

/// What [`play`] runs.
#[derive(Debug, Clone)]
pub struct PlayConfig {
    /// The agent's client: endpoint, key, limits, and `cache`, where every exchange of the run
    /// (agent, simulators, judge) is recorded. With `replay_only`, nothing leaves the process.
    pub agent: ClientConfig,
    /// The agent's model name.
    pub model: String,
    /// The agent's sampling temperature.
    pub temperature: f64,
    /// Seed sent with the agent's (and the judge's) requests.
    pub seed: u64,
    /// The episodes' protocol, turn cap and budgets.
    pub env: ToolEnvConfig,
    /// The simulated tools and user. Its endpoint (default: the agent's) is reached with the
    /// agent's client settings; its `dir` records the mappings.
    pub simulation: SimulationConfig,
    /// Endpoint of the judge (`ScoreBy::Judge`, and rubric items without a rule) [the
    /// simulator's].
    pub judge_endpoint: Option<String>,
    /// Judge model [the simulator's].
    pub judge_model: Option<String>,
    /// How episodes are scored.
    pub score: ScoreConfig,
    /// Episodes in flight at once.
    pub concurrency: usize,
}

/// The episodes of a [`play`] run, in task order.
#[derive(Debug, Clone)]
pub struct PlayReport {
    /// One episode per task.
    pub episodes: Vec<Episode>,
}

impl PlayReport {
    /// The rewards, in task order.
    pub fn rewards(&self) -> Vec<f64> {
        self.episodes.iter().map(|e| e.reward).collect()
    }

    /// The mean reward (0 without episodes).
    pub fn mean_reward(&self) -> f64 {
        if self.episodes.is_empty() {
            0.0
        } else {
            self.rewards().iter().sum::<f64>() / self.episodes.len() as f64
        }
    }

    /// Simulations that failed (answered to the agent as tool errors or unanswered questions).
    pub fn failed_simulations(&self) -> usize {
        self.episodes
            .iter()
            .map(|e| e.simulation_errors.len())
            .sum()
    }

    /// The episodes as JSON lines (`trajectories.jsonl`; keys sorted, as before this call
    /// existed).
    pub fn jsonl(&self) -> String {
        let mut lines = String::new();
        for episode in &self.episodes {
            let value = serde_json::to_value(episode).unwrap_or_default();
            lines.push_str(&value.to_string());
            lines.push('\n');
        }
        lines
    }
}

/// Plays `config.model` through every task (in parallel, `config.concurrency` at once).
pub fn play(tasks: Vec<Task>, config: &PlayConfig) -> crate::Result<PlayReport> {
    config.env.validate()?;
    let Some(cache) = config.agent.cache.as_deref() else {
        return Err(crate::Error::Config(
            "play records every exchange: the agent's client needs a cache directory".into(),
        ));
    };
    let replay_only = config.agent.replay_only;
    let agent = config.agent.backend()?;
    let sim_endpoint = config
        .simulation
        .endpoint
        .clone()
        .or_else(|| config.agent.endpoint.clone());
    let simulation = Simulation::with_backend(
        SimulationConfig {
            endpoint: sim_endpoint.clone(),
            replay_only,
            cache: Some(cache.to_owned()),
            ..config.simulation.clone()
        },
        config.agent.with_endpoint(sim_endpoint.as_deref()).http()?,
    )?;
    let judge_endpoint = config.judge_endpoint.as_deref().or(sim_endpoint.as_deref());
    let judge: Arc<dyn ItemJudge> = Arc::new(LlmJudge::new(
        recorded(
            config.agent.with_endpoint(judge_endpoint).http()?,
            cache,
            replay_only,
        ),
        config
            .judge_model
            .as_deref()
            .unwrap_or(&config.simulation.model),
        Some(config.seed),
    ));
    let scorer = Arc::new(RubricScorer::new(config.score)?);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(config.concurrency.max(1))
        .build()
        .map_err(|e| crate::Error::Config(format!("thread pool: {e}")))?;
    // Every episode runs; the first failure in task order is the one reported.
    let episodes: Vec<crate::Result<Episode>> = pool.install(|| {
        use rayon::prelude::*;
        tasks
            .into_par_iter()
            .map(|task| {
                let world = Arc::new(task.compile(ValidateOptions::default())?);
                let mut env = simulation
                    .env(world, scorer.clone(), config.env.clone())?
                    .with_judge(judge.clone());
                play_episode(
                    &mut env,
                    agent.as_ref(),
                    &config.model,
                    Some(config.temperature),
                    Some(config.seed),
                )
            })
            .collect()
    });
    Ok(PlayReport {
        episodes: episodes.into_iter().collect::<crate::Result<_>>()?,
    })
}
