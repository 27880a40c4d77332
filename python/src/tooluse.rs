//! The tool-use wing: rubric scoring and the tool-use environment.

use crate::prelude::*;

/// Scores tool-use trajectories against a task's executable rubric (Prolog rules over the
/// trajectory's facts). Holds one warm engine; thread-safe (queries are serialised on it, the
/// GIL is released while it works). Start-up cost ~0.2-0.5 s: make one and reuse it.
#[pyclass(frozen, module = "rulegym._rulegym")]
pub(crate) struct RubricScorer {
    inner: Arc<rulegym::tooluse::rubric::RubricScorer>,
}

#[pymethods]
impl RubricScorer {
    /// `variant`: `paper` (default), `peer-weighted` or `peer-strict`; `item_inferences`: the
    /// inference limit per rubric item; `max_rubrics`: distinct task rubrics one engine holds
    /// before the scorer swaps in a fresh engine (bounds memory; scryer never frees clauses).
    #[new]
    #[pyo3(signature = (variant="paper", item_inferences=200_000, max_rubrics=1024))]
    fn new(
        py: Python<'_>,
        variant: &str,
        item_inferences: u64,
        max_rubrics: usize,
    ) -> PyResult<Self> {
        use rulegym::tooluse::rubric::{RewardVariant, ScoreConfig};
        let variant: RewardVariant =
            serde_json::from_value(serde_json::json!(variant)).map_err(|_| {
                err(format!(
                    "unknown rubric variant {variant:?} (paper, peer-weighted, peer-strict)"
                ))
            })?;
        let config = ScoreConfig {
            item_inferences,
            variant,
            max_rubrics,
            ..ScoreConfig::default()
        };
        let inner = py
            .allow_threads(|| rulegym::tooluse::rubric::RubricScorer::new(config))
            .map_err(err)?;
        Ok(RubricScorer {
            inner: Arc::new(inner),
        })
    }

    /// Scores `trajectory` (`{"events": [{"event": "tool_call", "step": 1, ...}], "turns",
    /// "final_state"?, "state_matches"?}`) for `task` (a task dict or its JSON text; validated);
    /// returns `{"reward", "variant", "forbidden_violated", "subgoal_fraction",
    /// "interaction_fraction", "items": [...]}`.
    fn score<'py>(
        &self,
        py: Python<'py>,
        task: &Bound<'py, PyAny>,
        trajectory: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        use rulegym::tooluse::rubric::Trajectory;
        use rulegym::tooluse::task::{Task, ValidateOptions};
        let task_text: String = match task.extract::<String>() {
            Ok(text) => text,
            Err(_) => py
                .import("json")?
                .call_method1("dumps", (task,))?
                .extract()?,
        };
        let trajectory: Trajectory = from_py(py, Some(trajectory), "trajectory")?;
        let result = py
            .allow_threads(|| -> rulegym::Result<_> {
                let task = Task::from_json(&task_text)?;
                task.validate(ValidateOptions::default())?;
                let program = task.rubric_program()?;
                Ok(self.inner.score(&program, &trajectory, None)?)
            })
            .map_err(err)?;
        to_py(py, &result)
    }
}

pub(crate) fn json_text(py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<String> {
    match obj.extract::<String>() {
        Ok(text) => Ok(text),
        Err(_) => py.import("json")?.call_method1("dumps", (obj,))?.extract(),
    }
}

/// The simulated side of tool-use episodes (the Rust `tooluse::simulation::Simulation`): the
/// LLM that answers tool calls the task's mapping lacks and (with `"user": "llm"`) the user's
/// questions, one mapping per task shared by every `ToolEnv` built with this object, and the
/// record of the run (`dir/mappings/<id>.json`, `dir/llm-cache/`). `config` keys: `endpoint`,
/// `model`, `api_key_env`, `user` (`rule` | `llm`), `dir`, `seed_mappings`, `replay_only`,
/// `semantic_equivalence`, `max_concurrency`, `timeout_s`, `max_retries`, `seed`,
/// `temperature`, `capacity`. `llm`: a Python callable taking the chat messages (a list of
/// `{"role", "content"}` dicts) and returning the answer text, used instead of an HTTP endpoint
/// (its answers are recorded in `dir` like any other).
#[pyclass(frozen, module = "rulegym._rulegym")]
pub(crate) struct Simulation {
    inner: Arc<rulegym::tooluse::simulation::Simulation>,
}

pub(crate) fn simulation_config(
    py: Python<'_>,
    config: Option<&Bound<'_, PyAny>>,
) -> PyResult<rulegym::tooluse::simulation::SimulationConfig> {
    let text = match config.filter(|c| !c.is_none()) {
        Some(c) => json_text(py, c)?,
        None => "{}".to_owned(),
    };
    rulegym::tooluse::simulation::SimulationConfig::from_json(&text).map_err(err)
}

#[pymethods]
impl Simulation {
    #[new]
    #[pyo3(signature = (config=None, llm=None))]
    fn new(
        py: Python<'_>,
        config: Option<&Bound<'_, PyAny>>,
        llm: Option<Py<PyAny>>,
    ) -> PyResult<Self> {
        use rulegym::llm::{LlmBackend, LlmError, ScriptedBackend, assistant_text};
        let config = simulation_config(py, config)?;
        let inner = match llm {
            Some(f) => {
                let backend = ScriptedBackend::new(move |req| {
                    Python::with_gil(|py| -> PyResult<String> {
                        let messages = to_py(py, &req.messages)?;
                        f.call1(py, (messages,))?.extract(py)
                    })
                    .map(|t| assistant_text(&t))
                    .map_err(|e| LlmError::Script(format!("the llm callable raised: {e}")))
                });
                let backend: Arc<dyn LlmBackend> = Arc::new(backend);
                py.allow_threads(|| {
                    rulegym::tooluse::simulation::Simulation::with_backend(config, Some(backend))
                })
                .map(Arc::new)
            }
            None => py.allow_threads(|| {
                rulegym::tooluse::simulation::Simulation::new(config).map(Arc::new)
            }),
        }
        .map_err(err)?;
        Ok(Simulation { inner })
    }

    /// The process-wide simulation of `config`: every call with an equal configuration returns
    /// one shared object (one client, one mapping per task), as the SkyRL and verl adapters use.
    #[staticmethod]
    #[pyo3(signature = (config=None))]
    fn shared(py: Python<'_>, config: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let config = simulation_config(py, config)?;
        let inner = py
            .allow_threads(|| rulegym::tooluse::simulation::Simulation::shared(config))
            .map_err(err)?;
        Ok(Simulation { inner })
    }

    /// The configuration, as a dict.
    #[getter]
    fn config<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, self.inner.config())
    }

    /// The recorded mapping of task `task_id` (`[{"tool", "args", "response", "same_as"?}]`,
    /// canonical order); empty when the task has none yet.
    fn mapping<'py>(&self, py: Python<'py>, task_id: &str) -> PyResult<Bound<'py, PyAny>> {
        let entries = py
            .allow_threads(|| self.inner.mapping(task_id))
            .map_err(err)?
            .map(|m| m.entries())
            .unwrap_or_default();
        to_py(py, &entries)
    }
}

/// One episode of the tool-use environment: a task's tools (state-backed tools executed, mapping
/// tools answered by the task's shared mapping and, on a miss, the simulator LLM), the simulated
/// user, and the task's rubric as the reward at the end. Safe to use from any thread (steps are
/// serialised by a lock; the GIL is released while the step runs). A failed simulation is a tool
/// error (or an unanswered question) for the agent, logged to the `rulegym` logger and listed in
/// the step's `metadata["simulation_errors"]` / `metadata["user_error"]`.
#[pyclass(frozen, module = "rulegym._rulegym")]
pub(crate) struct ToolEnv {
    inner: Mutex<rulegym::tooluse::env::ToolEnv>,
    world: Arc<rulegym::tooluse::task::CompiledTask>,
    scorer: Arc<rulegym::tooluse::rubric::RubricScorer>,
}

/// Logs a step's failed simulations to Python's `rulegym` logger.
fn log_failures(py: Python<'_>, task: &str, step: &rulegym::env::Step) -> PyResult<()> {
    let tools = step.metadata.get("simulation_errors");
    let user = step.metadata.get("user_error");
    if tools.is_none() && user.is_none() {
        return Ok(());
    }
    let logger = py
        .import("logging")?
        .call_method1("getLogger", ("rulegym",))?;
    for failure in tools.and_then(|v| v.as_array()).into_iter().flatten() {
        logger.call_method1(
            "warning",
            (format!("task {task}: tool simulation failed: {failure}"),),
        )?;
    }
    if let Some(e) = user {
        logger.call_method1(
            "warning",
            (format!("task {task}: user simulation failed: {e}"),),
        )?;
    }
    Ok(())
}

/// A fresh tool-use environment of `task` (a task dict or its JSON text, validated and compiled)
/// scored by `scorer`, simulated by `simulation` (a [`Simulation`], its config dict for the
/// process-wide shared one, or `None`: no LLM, the rule user).
pub(crate) fn build_env(
    py: Python<'_>,
    task: &Bound<'_, PyAny>,
    scorer: &RubricScorer,
    protocol: rulegym::tooluse::env::Protocol,
    max_turns: u32,
    simulation: Option<&Bound<'_, PyAny>>,
) -> PyResult<(
    rulegym::tooluse::env::ToolEnv,
    Arc<rulegym::tooluse::task::CompiledTask>,
)> {
    use rulegym::tooluse::env::ToolEnvConfig;
    use rulegym::tooluse::task::{Task, ValidateOptions};
    let text = json_text(py, task)?;
    let task = Task::from_json(&text).map_err(err)?;
    let world = Arc::new(task.compile(ValidateOptions::default()).map_err(err)?);
    let simulation = match simulation.filter(|s| !s.is_none()) {
        Some(s) => match s.downcast::<Simulation>() {
            Ok(sim) => sim.get().inner.clone(),
            Err(_) => Simulation::shared(py, Some(s))?.inner,
        },
        None => Simulation::shared(py, None)?.inner,
    };
    let config = ToolEnvConfig {
        max_turns,
        protocol,
        ..ToolEnvConfig::default()
    };
    let env = py
        .allow_threads(|| simulation.env(world.clone(), scorer.inner.clone(), config))
        .map_err(err)?;
    Ok((env, world))
}

#[pymethods]
impl ToolEnv {
    /// `task`: a task dict or its JSON text (validated). `scorer`: a [`RubricScorer`] (share
    /// one). `protocol`: `hermes` (`<tool_call>` in the text) or `openai` (`tool_calls`).
    /// `simulation`: a [`Simulation`], or its config dict (then the process-wide shared one);
    /// default: no LLM, the rule user, mapping tools answer with a tool error.
    #[new]
    #[pyo3(signature = (task, scorer, protocol="hermes", max_turns=16, simulation=None))]
    fn new(
        py: Python<'_>,
        task: &Bound<'_, PyAny>,
        scorer: &RubricScorer,
        protocol: &str,
        max_turns: u32,
        simulation: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        use rulegym::tooluse::env::Protocol;
        let protocol: Protocol = serde_json::from_value(serde_json::json!(protocol))
            .map_err(|_| err(format!("unknown protocol {protocol:?} (hermes, openai)")))?;
        let (env, world) = build_env(py, task, scorer, protocol, max_turns, simulation)?;
        Ok(ToolEnv {
            inner: Mutex::new(env),
            world,
            scorer: scorer.inner.clone(),
        })
    }

    /// Starts (or restarts) the episode; returns the prompt (system with the tools, user
    /// instruction).
    fn reset<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let messages = with_env(py, &self.inner, |env| env.reset())?;
        messages_to_py(py, &messages)
    }

    /// Applies an assistant turn given as text; returns `{"observations", "reward", "done",
    /// "metadata", "env_spans"}` (the rubric result is in `metadata` at the end).
    fn step<'py>(&self, py: Python<'py>, action: &str) -> PyResult<Bound<'py, PyDict>> {
        let step = with_env(py, &self.inner, |env| env.step(action))?;
        log_failures(py, &self.world.task.id, &step)?;
        step_to_py(py, &step)
    }

    /// Applies an assistant turn given as an OpenAI message dict (with `tool_calls`).
    fn step_message<'py>(
        &self,
        py: Python<'py>,
        message: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let text = json_text(py, message)?;
        let message: rulegym::llm::ChatMessage =
            serde_json::from_str(&text).map_err(|e| err(format!("invalid message: {e}")))?;
        let step = py
            .allow_threads(|| {
                self.inner
                    .lock()
                    .expect("not poisoned")
                    .step_message(&message)
            })
            .map_err(err)?;
        log_failures(py, &self.world.task.id, &step)?;
        step_to_py(py, &step)
    }

    /// Applies an assistant turn that makes one tool call of `name` with `arguments` (a dict;
    /// default `{}`), its id numbered in the episode's order (`call_1`, `call_2`, ...): the
    /// same turn a task `ToolSession` plays for a call.
    #[pyo3(signature = (name, arguments=None))]
    fn call_tool<'py>(
        &self,
        py: Python<'py>,
        name: &str,
        arguments: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let args: serde_json::Value = match arguments.filter(|a| !a.is_none()) {
            Some(a) => serde_json::from_str(&json_text(py, a)?)
                .map_err(|e| err(format!("invalid arguments: {e}")))?,
            None => serde_json::json!({}),
        };
        let step = with_env(py, &self.inner, |env| env.call_tool(name, &args))?;
        log_failures(py, &self.world.task.id, &step)?;
        step_to_py(py, &step)
    }

    /// OpenAI `tools` entries for chat requests (OpenAI protocol; empty for Hermes).
    fn request_tools<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let tools = self.inner.lock().expect("not poisoned").request_tools();
        to_py(py, &tools)
    }

    /// The rubric result once the episode is over, else None.
    fn result<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let env = self.inner.lock().expect("not poisoned");
        env.result().map(|r| to_py(py, r)).transpose()
    }

    /// The rubric result of the trajectory so far (the final result once the episode is over):
    /// what the reward would be if the episode ended now. The GIL is released while it scores.
    fn score<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let result = py
            .allow_threads(|| -> rulegym::Result<_> {
                let env = self.inner.lock().expect("not poisoned");
                if let Some(result) = env.result() {
                    return Ok(result.clone());
                }
                let trajectory = env.trajectory();
                drop(env);
                Ok(self.scorer.score(&self.world.program, &trajectory, None)?)
            })
            .map_err(err)?;
        to_py(py, &result)
    }

    /// Whether the episode is over.
    #[getter]
    fn done(&self) -> bool {
        self.inner.lock().expect("not poisoned").is_done()
    }
}
