//! `rulegym.ToolSession`: one episode driven by tool calls (the Rust `toolcall::ToolSession`),
//! the session MCP and OpenEnv serve; `rulegym.trl`'s environments call it.

use crate::prelude::*;
use crate::retrieval::{Index, load_cached};
use crate::tooluse::{RubricScorer, build_env, simulation_config};
use rulegym::toolcall::{self, SessionKind};

/// A fault as `rulegym.ToolCallError` (a `RulegymError`) with its OpenEnv `kind`.
fn fault_err(py: Python<'_>, fault: &toolcall::ToolFault) -> PyErr {
    let e = crate::ToolCallError::new_err(fault.to_string());
    // Setting an attribute on a fresh exception object cannot fail in practice; if it did,
    // the error still carries its message.
    let _ = e.value(py).setattr("kind", fault.kind());
    e
}

/// One episode driven by tool calls: a scored search question (`ToolSession.search`) or a
/// tool-use task (`ToolSession.task`). `tools()` lists the tools (name, description, JSON input
/// schema, what it returns); `call(name, arguments)` runs one and returns `{"text", "data",
/// "is_error", "done", "reward"}`; an unknown tool, a call after the episode ended or bad
/// arguments raise `rulegym.ToolCallError` (a `RulegymError`, with `.kind`) and take no turn. Thread-safe (calls are serialised; the GIL
/// is released while a call runs).
#[pyclass(frozen, module = "rulegym._rulegym")]
pub(crate) struct ToolSession {
    inner: Mutex<toolcall::ToolSession>,
}

fn wrap(session: toolcall::ToolSession) -> ToolSession {
    ToolSession {
        inner: Mutex::new(session),
    }
}

impl ToolSession {
    fn lock(&self) -> std::sync::MutexGuard<'_, toolcall::ToolSession> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[pymethods]
impl ToolSession {
    /// A scored search episode of `question` (gold `answers`) over `index` (an [`Index`] or a
    /// path); `config` a dict of `SearchEnvConfig` fields (its `top_k` and `max_turns` apply).
    #[staticmethod]
    #[pyo3(signature = (index, question, answers, config=None))]
    fn search(
        py: Python<'_>,
        index: &Bound<'_, PyAny>,
        question: String,
        answers: Vec<String>,
        config: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let index: Arc<SearchIndex> = if let Ok(ix) = index.downcast::<Index>() {
            ix.get().inner.clone()
        } else {
            let path: PathBuf = index.extract()?;
            py.allow_threads(|| load_cached(&path)).map_err(err)?
        };
        let config: SearchEnvConfig = from_py(py, config, "search env config")?;
        let task = SearchTask {
            question,
            answers,
            gold_docs: Vec::new(),
        };
        let session = py
            .allow_threads(|| {
                let env = search::SearchEnv::new(index.clone(), config, task)?;
                let session = search::session::SearchSession::of_task(env, index.clone())?;
                Ok::<_, rulegym::Error>(toolcall::ToolSession::search(session, index))
            })
            .map_err(err)?;
        Ok(wrap(session))
    }

    /// A tool-use episode of `task` (a task dict or its JSON text) scored by `scorer`, with at
    /// most `max_turns` turns (a task's own `max_turns` wins), simulated by `simulation` (a
    /// `Simulation` or its config dict; default: no LLM, the rule user).
    #[staticmethod]
    #[pyo3(signature = (task, scorer, max_turns=16, simulation=None))]
    fn task(
        py: Python<'_>,
        task: &Bound<'_, PyAny>,
        scorer: &RubricScorer,
        max_turns: u32,
        simulation: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        use rulegym::tooluse::env::Protocol;
        let (env, world) = build_env(py, task, scorer, Protocol::OpenAi, max_turns, simulation)?;
        let id = world.task.id.clone();
        let session = py
            .allow_threads(|| toolcall::ToolSession::task(env, id))
            .map_err(err)?;
        Ok(wrap(session))
    }

    /// The tools: `[{"name", "description", "input_schema", "returns"}]`.
    fn tools<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let tools: Vec<serde_json::Value> = self
            .lock()
            .tools()
            .into_iter()
            .map(|t| {
                serde_json::json!({"name": t.name, "description": t.description,
                                   "input_schema": t.input_schema, "returns": t.returns})
            })
            .collect();
        to_py_ordered(py, &tools)
    }

    /// Calls the tool `name` with `arguments` (a dict): one turn. Returns `{"text", "data",
    /// "is_error", "done", "reward"}`; failed tool simulations are logged to the `rulegym`
    /// logger.
    #[pyo3(signature = (name, arguments=None))]
    fn call<'py>(
        &self,
        py: Python<'py>,
        name: &str,
        arguments: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let arguments: serde_json::Map<String, serde_json::Value> = match arguments {
            Some(a) => {
                let text: String = py.import("json")?.call_method1("dumps", (a,))?.extract()?;
                serde_json::from_str(&text).map_err(|e| err(format!("invalid arguments: {e}")))?
            }
            None => serde_json::Map::new(),
        };
        let out = py
            .allow_threads(|| self.lock().call(name, &arguments))
            .map_err(|f| fault_err(py, &f))?;
        if let Some(failures) = out.data.get("simulation_errors").and_then(|v| v.as_array()) {
            let logger = py
                .import("logging")?
                .call_method1("getLogger", ("rulegym",))?;
            for f in failures {
                logger.call_method1("warning", (format!("tool simulation failed: {f}"),))?;
            }
        }
        let value = serde_json::json!({"text": out.text, "data": out.data,
            "is_error": out.is_error, "done": out.done, "reward": out.reward});
        to_py_ordered(py, &value)
    }

    /// Whether the episode is over.
    #[getter]
    fn done(&self) -> bool {
        self.lock().done()
    }

    /// The episode's reward: the exact reward once it ended, 0 before.
    #[getter]
    fn reward(&self) -> f64 {
        self.lock().reward()
    }

    /// Calls that took a turn.
    #[getter]
    fn turns(&self) -> usize {
        self.lock().turns()
    }

    /// `"search"`, `"browse"` or `"task"`.
    #[getter]
    fn kind(&self) -> &'static str {
        match self.lock().kind() {
            SessionKind::Search => "search",
            SessionKind::Browse => "browse",
            SessionKind::Task => "task",
        }
    }

    /// The question's or task's id, if it has one.
    #[getter]
    fn id(&self) -> Option<String> {
        self.lock().id().map(str::to_owned)
    }

    /// What the agent is told at the start (the tools' use, the question or request).
    fn instructions(&self) -> String {
        self.lock().instructions()
    }

    /// The opening observation (`prompt`, the question or request, the kind's own fields).
    fn opening<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py_ordered(py, &self.lock().opening())
    }
}

/// What a server serves (the Rust `toolcall::World`): a dataset's questions
/// (`World.search(dataset)`) or a file of tool-use tasks (`World.tasks(file)`), from which
/// `session(request)` starts an episode exactly as `rulegym openenv`'s `reset` does (by
/// `question_id`/`task_id`, `split` and `index`, `seed`, else the next in turn).
#[pyclass(frozen, module = "rulegym._rulegym")]
pub(crate) struct World {
    inner: Arc<toolcall::World>,
}

#[pymethods]
impl World {
    /// The questions of the dataset directory `dataset` over `index` (default: its
    /// `index.idx`); `config` a dict of `SearchEnvConfig` fields.
    #[staticmethod]
    #[pyo3(signature = (dataset, index=None, config=None, name="rulegym_search"))]
    fn search(
        py: Python<'_>,
        dataset: PathBuf,
        index: Option<PathBuf>,
        config: Option<&Bound<'_, PyAny>>,
        name: &str,
    ) -> PyResult<Self> {
        let config: SearchEnvConfig = from_py(py, config, "search env config")?;
        let world = py
            .allow_threads(|| toolcall::SearchWorld::load(&dataset, index.as_deref(), None, config))
            .map_err(err)?;
        Ok(World {
            inner: Arc::new(toolcall::World::new(
                name,
                toolcall::WorldKind::Search(world),
            )),
        })
    }

    /// The tasks of `file` (JSON or JSONL), simulated as `simulation` (a dict of
    /// `Simulation` settings) says; `mappings/` beside the file seeds the mappings when it
    /// exists. `max_turns`: the turn cap of a task without its own.
    #[staticmethod]
    #[pyo3(signature = (file, simulation=None, max_turns=16, name="rulegym_tools"))]
    fn tasks(
        py: Python<'_>,
        file: PathBuf,
        simulation: Option<&Bound<'_, PyAny>>,
        max_turns: u32,
        name: &str,
    ) -> PyResult<Self> {
        use rulegym::tooluse::env::ToolEnvConfig;
        let simulation = simulation_config(py, simulation)?;
        let config = ToolEnvConfig {
            max_turns,
            ..ToolEnvConfig::default()
        };
        let world = py
            .allow_threads(|| toolcall::TaskWorld::load(&file, simulation, config))
            .map_err(err)?;
        Ok(World {
            inner: Arc::new(toolcall::World::new(
                name,
                toolcall::WorldKind::Tasks(world),
            )),
        })
    }

    /// A fresh episode: `request` holds `seed`, `episode_id`, `question_id` or `task_id`,
    /// `split`, `index` (unknown keys are an error).
    #[pyo3(signature = (request=None))]
    fn session(&self, py: Python<'_>, request: Option<&Bound<'_, PyAny>>) -> PyResult<ToolSession> {
        let request: toolcall::ResetRequest = from_py(py, request, "reset request")?;
        let world = self.inner.clone();
        let session = py.allow_threads(|| world.session(&request)).map_err(err)?;
        Ok(wrap(session))
    }

    /// The environment's name.
    #[getter]
    fn name(&self) -> String {
        self.inner.name.clone()
    }

    /// One line on what is served.
    fn description(&self) -> String {
        self.inner.description()
    }

    /// The splits, in first-seen order.
    fn splits(&self) -> Vec<String> {
        self.inner.splits()
    }

    /// Questions or tasks held.
    fn __len__(&self) -> usize {
        self.inner.len()
    }
}
