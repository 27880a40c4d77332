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
        use rulegym::tooluse::rubric::{RubricProgram, Trajectory};
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
                let program = RubricProgram::compile(&task)?;
                Ok(self.inner.score(&task, &program, &trajectory, None)?)
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

/// One episode of the tool-use environment: a task's tools (state-backed tools executed, mapping
/// tools answered by the simulator), a rule-based user simulator, and the task's rubric as the
/// reward at the end. Safe to use from any thread (steps are serialised by a lock; the GIL is
/// released while the step runs).
#[pyclass(frozen, module = "rulegym._rulegym")]
pub(crate) struct ToolEnv {
    inner: Mutex<rulegym::tooluse::env::ToolEnv>,
    world: Arc<rulegym::tooluse::task::CompiledTask>,
    scorer: Arc<rulegym::tooluse::rubric::RubricScorer>,
}

#[pymethods]
impl ToolEnv {
    /// `task`: a task dict or its JSON text (validated). `scorer`: a [`RubricScorer`] (share
    /// one). `protocol`: `hermes` (`<tool_call>` in the text) or `openai` (`tool_calls`).
    /// Mapping tools are answered from `mapping_cache` (a simulator file, replayed and extended)
    /// and, on a miss, by `mapping_llm`: a Python callable taking the simulator's chat messages
    /// (a list of `{"role", "content"}` dicts) and returning the tool's JSON output as text.
    #[new]
    #[pyo3(signature = (task, scorer, protocol="hermes", max_turns=16, mapping_cache=None, mapping_llm=None))]
    fn new(
        py: Python<'_>,
        task: &Bound<'_, PyAny>,
        scorer: &RubricScorer,
        protocol: &str,
        max_turns: u32,
        mapping_cache: Option<PathBuf>,
        mapping_llm: Option<Py<PyAny>>,
    ) -> PyResult<Self> {
        use rulegym::llm::{LlmBackend, LlmError, ScriptedBackend, assistant_text};
        use rulegym::tooluse::env::{Protocol, ToolEnvConfig};
        use rulegym::tooluse::simulator::{MappingConfig, MappingSimulator};
        use rulegym::tooluse::task::{Task, ValidateOptions};
        let protocol: Protocol = serde_json::from_value(serde_json::json!(protocol))
            .map_err(|_| err(format!("unknown protocol {protocol:?} (hermes, openai)")))?;
        let text = json_text(py, task)?;
        let task = Task::from_json(&text).map_err(err)?;
        let world = Arc::new(task.compile(ValidateOptions::default()).map_err(err)?);
        let backend: Option<Arc<dyn LlmBackend>> = mapping_llm.map(|f| {
            let backend = ScriptedBackend::new(move |req| {
                Python::with_gil(|py| -> PyResult<String> {
                    let messages = to_py(py, &req.messages)?;
                    f.call1(py, (messages,))?.extract(py)
                })
                .map(|t| assistant_text(&t))
                .map_err(|e| LlmError::Script(format!("mapping_llm raised: {e}")))
            });
            Arc::new(backend) as Arc<dyn LlmBackend>
        });
        let mapping = if mapping_cache.is_some() || backend.is_some() {
            Some(Arc::new(
                MappingSimulator::new(
                    &world.task.id,
                    mapping_cache,
                    backend,
                    MappingConfig::default(),
                )
                .map_err(err)?,
            ))
        } else {
            None
        };
        let user = Box::new(rulegym::tooluse::user::RuleUser::new(&world.task));
        let env = rulegym::tooluse::env::ToolEnv::new(
            world.clone(),
            mapping,
            user,
            scorer.inner.clone(),
            ToolEnvConfig {
                max_turns,
                protocol,
                ..ToolEnvConfig::default()
            },
        );
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
                let (task, program) = (&self.world.task, &self.world.program);
                Ok(self.scorer.score(task, program, &trajectory, None)?)
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
