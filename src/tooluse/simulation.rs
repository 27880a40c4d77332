//! The simulated side of the tool-use environment, set up the same way on every surface (the
//! CLI's `tools play`, Python's `ToolEnv`, the SkyRL env, verl's agent loop, `rulegym mcp`).
//!
//! [`SimulationConfig`] says which LLM simulates the tools and the user (endpoint, model),
//! which user answers (the keyword [`RuleUser`] or the [`LlmUser`]), and where the run's world is
//! recorded: `DIR/mappings/<task>.json` (SynthAgent's per-task mapping M) and `DIR/llm-cache/`
//! (every simulator and user exchange, so the run replays offline with `replay_only`).
//! [`Simulation`] holds the one client (bounded concurrency, timeouts, retries with backoff) and
//! one [`MappingSimulator`] per task, shared by every rollout of that task in the process: a
//! GRPO group of 8-16 rollouts sees one consistent world. Other processes (verl's agent-loop
//! workers, Ray actors) share it through the mapping file (a file lock, first writer wins).
//!
//! Nothing that decides a reward depends on an unrecorded LLM call: a configuration that
//! reaches an LLM must name the directory its answers are recorded in.

use super::env::{ToolEnv, ToolEnvConfig};
use super::mock_tools::{MappingConfig, MappingSimulator, SimError};
use super::rubric::RubricScorer;
use super::user::{RuleUser, UserKind, UserSimulator};
use crate::llm::{ClientConfig, LlmBackend, LlmError, SchemaFormat, recorded};
use crate::tooluse::task::{CompiledTask, Task};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

/// How the tools and the user of tool-use episodes are simulated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SimulationConfig {
    /// OpenAI-compatible endpoint of the simulator LLM (`http://127.0.0.1:8080/v1`); `None`:
    /// mapping tools answer only from recorded mappings (a miss is a tool error) and the user
    /// must be the rule user.
    pub endpoint: Option<String>,
    /// Simulator model name.
    pub model: String,
    /// Name of an environment variable holding the endpoint's API key.
    pub api_key_env: Option<String>,
    /// The user simulator.
    pub user: UserKind,
    /// Where the run's world is recorded: `mappings/<task>.json` and `llm-cache/`. Required
    /// whenever an LLM is used (`endpoint` or `replay_only`).
    pub dir: Option<PathBuf>,
    /// Where the simulators' LLM exchanges are recorded [`DIR/llm-cache`] (e.g. one cache shared
    /// with the agent's, as `tools play --cache` does).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache: Option<PathBuf>,
    /// A directory of mappings to start each task's mapping from when `dir` has none for it
    /// (e.g. the `mappings/` that `rulegym synth` wrote: the teacher's responses); read only.
    pub seed_mappings: Option<PathBuf>,
    /// Only recorded answers (mappings and `llm-cache/`); a miss is a tool error (tools) or an
    /// unanswered question (user). No network.
    pub replay_only: bool,
    /// SynthAgent's semantic-equivalence check against the whole mapping, in the same request
    /// that produces a new response ([`MappingConfig::semantic_equivalence`]).
    pub semantic_equivalence: bool,
    /// How the simulator's answer schema is sent (`response_format`): `json-schema` (OpenAI,
    /// vLLM, SGLang, llama.cpp), `json-object` (llama-cpp-python's server) or `off`.
    pub schema_format: SchemaFormat,
    /// Most simulator requests in flight at once in this process (all tasks together).
    pub max_concurrency: usize,
    /// Timeout of one simulator request, in seconds.
    pub timeout_s: f64,
    /// Retries of a request after transport errors, 408, 429 and 5xx (with backoff).
    pub max_retries: u32,
    /// Seed sent with simulator requests.
    pub seed: u64,
    /// Sampling temperature of the simulators.
    pub temperature: f64,
    /// Most mapping entries per task.
    pub capacity: usize,
}

impl Default for SimulationConfig {
    fn default() -> Self {
        SimulationConfig {
            endpoint: None,
            model: "simulator".into(),
            api_key_env: None,
            user: UserKind::Rule,
            dir: None,
            cache: None,
            seed_mappings: None,
            replay_only: false,
            semantic_equivalence: true,
            schema_format: SchemaFormat::JsonSchema,
            max_concurrency: 16,
            timeout_s: 120.0,
            max_retries: 2,
            seed: 0,
            temperature: 0.0,
            capacity: 1000,
        }
    }
}

fn config_error(message: impl Into<String>) -> SimError {
    SimError::Llm(LlmError::Config(message.into()))
}

impl SimulationConfig {
    /// Whether an LLM answers misses (online, or replayed from the cache).
    pub fn uses_llm(&self) -> bool {
        self.endpoint.is_some() || self.replay_only
    }

    /// Checks ranges and that every LLM answer is recorded.
    pub fn validate(&self) -> Result<(), SimError> {
        self.check(self.uses_llm())
    }

    /// [`SimulationConfig::validate`] for a simulation that has an LLM backend (`llm`) or not.
    fn check(&self, llm: bool) -> Result<(), SimError> {
        if llm && self.dir.is_none() {
            return Err(config_error(
                "a simulation that uses an LLM (endpoint or replay_only) needs `dir`, where its \
                 mappings and LLM answers are recorded (rewards must not depend on unrecorded \
                 calls)",
            ));
        }
        if self.user == UserKind::Llm && !llm {
            return Err(config_error(
                "user \"llm\" needs an endpoint (or replay_only with a recorded dir)",
            ));
        }
        if self.model.trim().is_empty() {
            return Err(config_error("model must not be empty"));
        }
        // The client's bounds (concurrency, timeout, retries) are the one client configuration's.
        self.client_config().validate()?;
        if !(0.0..=2.0).contains(&self.temperature) {
            return Err(config_error(format!(
                "temperature {} must be in [0, 2]",
                self.temperature
            )));
        }
        if self.capacity == 0 {
            return Err(config_error("capacity must be at least 1"));
        }
        Ok(())
    }

    /// Parses a configuration from JSON (unknown keys are errors naming the key; ranges are
    /// checked when a [`Simulation`] is made from it).
    pub fn from_json(text: &str) -> Result<Self, SimError> {
        serde_json::from_str(text).map_err(|e| config_error(format!("simulation config: {e}")))
    }

    /// The mapping simulator's options.
    pub fn mapping_config(&self) -> MappingConfig {
        MappingConfig {
            capacity: self.capacity,
            semantic_equivalence: self.semantic_equivalence,
            model: self.model.clone(),
            temperature: Some(self.temperature),
            seed: Some(self.seed),
            ..MappingConfig::default()
        }
    }

    /// The mapping file of `task` under `dir`.
    pub fn mapping_path(dir: &Path, task: &str) -> PathBuf {
        dir.join("mappings").join(format!("{task}.json"))
    }

    /// Where the simulators' exchanges are recorded: `cache`, else `DIR/llm-cache`.
    pub fn cache_dir(&self) -> Option<PathBuf> {
        self.cache
            .clone()
            .or_else(|| self.dir.as_ref().map(|dir| dir.join("llm-cache")))
    }

    /// The client of the simulator LLM: this configuration's endpoint, key, limits and
    /// replay mode (recorded in `DIR/llm-cache`).
    pub fn client_config(&self) -> ClientConfig {
        ClientConfig {
            endpoint: self.endpoint.clone(),
            api_key_env: self.api_key_env.clone(),
            timeout_s: self.timeout_s,
            max_retries: self.max_retries,
            max_concurrency: self.max_concurrency,
            schema_format: self.schema_format,
            cache: self.cache_dir(),
            replay_only: self.replay_only,
            ..ClientConfig::default()
        }
    }
}

/// A process's simulated side of the tool-use environment: the recorded LLM client and one
/// shared mapping per task. `Sync`: share it (behind an `Arc`) across rollouts and threads.
pub struct Simulation {
    config: SimulationConfig,
    backend: Option<Arc<dyn LlmBackend>>,
    mappings: Mutex<BTreeMap<String, Arc<MappingSimulator>>>,
}

impl Simulation {
    /// A simulation as configured (the HTTP client when there is an endpoint).
    pub fn new(config: SimulationConfig) -> Result<Self, SimError> {
        config.validate()?;
        let client = config.client_config().http()?;
        Self::with_backend(config, client)
    }

    /// A simulation whose misses go to `inner` (any backend: tests, a shared client), recorded
    /// in `cache` or `dir/llm-cache` (replayed only, whatever `inner` is, when `replay_only`).
    pub fn with_backend(
        config: SimulationConfig,
        inner: Option<Arc<dyn LlmBackend>>,
    ) -> Result<Self, SimError> {
        config.check(config.uses_llm() || inner.is_some())?;
        let backend = match &config.dir {
            Some(_) if config.uses_llm() || inner.is_some() => config
                .cache_dir()
                .map(|cache| recorded(inner, &cache, config.replay_only)),
            _ => None,
        };
        Ok(Simulation {
            config,
            backend,
            mappings: Mutex::new(BTreeMap::new()),
        })
    }

    /// The process-wide simulation of this configuration: every caller with an equal
    /// configuration gets the same one (one client, one mapping per task), so the Python,
    /// SkyRL and verl surfaces share the world of a task across the rollouts of a process.
    pub fn shared(config: SimulationConfig) -> Result<Arc<Simulation>, SimError> {
        static SHARED: OnceLock<Mutex<BTreeMap<String, Arc<Simulation>>>> = OnceLock::new();
        config.validate()?;
        let key = serde_json::to_string(&config).unwrap_or_default();
        let mut all = SHARED
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(sim) = all.get(&key) {
            return Ok(sim.clone());
        }
        let sim = Arc::new(Simulation::new(config)?);
        all.insert(key, sim.clone());
        Ok(sim)
    }

    /// The configuration.
    pub fn config(&self) -> &SimulationConfig {
        &self.config
    }

    /// The recorded backend of the simulators (`None` when no LLM is used).
    pub fn backend(&self) -> Option<Arc<dyn LlmBackend>> {
        self.backend.clone()
    }

    /// The mapping of `task`, shared by every rollout of it in this process; `None` when the
    /// configuration neither records (no `dir`) nor has seed mappings, so mapping tools answer
    /// with a tool error.
    pub fn mapping(&self, task: &str) -> Result<Option<Arc<MappingSimulator>>, SimError> {
        let mut mappings = self.mappings.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(m) = mappings.get(task) {
            return Ok(Some(m.clone()));
        }
        let seed = self
            .config
            .seed_mappings
            .as_ref()
            .map(|d| d.join(format!("{task}.json")))
            .filter(|p| p.exists());
        let path = match (&self.config.dir, seed) {
            (Some(dir), seed) => {
                let path = SimulationConfig::mapping_path(dir, task);
                if let Some(seed) = seed.filter(|_| !path.exists()) {
                    let bytes = std::fs::read(&seed).map_err(|e| SimError::Storage {
                        path: seed.display().to_string(),
                        message: e.to_string(),
                    })?;
                    crate::io::write_file_atomic(&path, &bytes).map_err(|e| SimError::Storage {
                        path: path.display().to_string(),
                        message: e.to_string(),
                    })?;
                }
                Some(path)
            }
            // No LLM and nowhere to record: the seed mapping answers, and a miss (which has no
            // backend to ask) is a tool error, so the seed file is never written.
            (None, Some(seed)) => Some(seed),
            (None, None) => return Ok(None),
        };
        let backend = self.backend.clone().filter(|_| self.config.dir.is_some());
        let sim = Arc::new(MappingSimulator::new(
            task,
            path,
            backend,
            self.config.mapping_config(),
        )?);
        mappings.insert(task.to_owned(), sim.clone());
        Ok(Some(sim))
    }

    /// A fresh user simulator for one episode of `task`.
    pub fn user(&self, task: &Task) -> Box<dyn UserSimulator> {
        match &self.backend {
            Some(backend) => self.config.user.simulator(
                task,
                backend.clone(),
                &self.config.model,
                Some(self.config.seed),
            ),
            // validate() makes an LLM user imply a backend.
            None => Box::new(RuleUser::new(task)),
        }
    }

    /// An episode of `world` in this simulation: the task's shared mapping and a fresh user.
    pub fn env(
        &self,
        world: Arc<CompiledTask>,
        scorer: Arc<RubricScorer>,
        config: ToolEnvConfig,
    ) -> Result<ToolEnv, SimError> {
        let mapping = self.mapping(&world.task.id)?;
        let user = self.user(&world.task);
        Ok(ToolEnv::new(world, mapping, user, scorer, config))
    }
}
