//! The search environment and its oracle trajectories.

use crate::prelude::*;
use crate::retrieval::{Index, load_cached};

/// One episode of the search environment (Search-R1 protocol, set-F1 reward). Cheap to
/// construct (the index is shared); safe to use from any thread (steps on one environment are
/// serialised by a lock; the GIL is released while the step runs).
#[pyclass(frozen, module = "rulegym._rulegym")]
pub(crate) struct SearchEnv {
    inner: Mutex<search::SearchEnv>,
    max_turns: usize,
}

#[pymethods]
impl SearchEnv {
    /// `index` is an [`Index`], a path (loaded once per process) or None (no corpus: a search
    /// returns no passages; for scoring single turns); `config` a dict of
    /// `SearchEnvConfig` fields (`top_k`, `max_turns`, `end_on_invalid`, `score_mode`,
    /// `prompt`, `system_prompt`, `max_action_tokens`, `max_context_tokens`).
    #[new]
    #[pyo3(signature = (index, question, answers, gold_docs=None, config=None))]
    fn new(
        py: Python<'_>,
        index: &Bound<'_, PyAny>,
        question: String,
        answers: Vec<String>,
        gold_docs: Option<Vec<String>>,
        config: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let retriever: Arc<dyn Retriever> = if index.is_none() {
            Arc::new(search::NoRetrieval)
        } else if let Ok(ix) = index.downcast::<Index>() {
            ix.get().inner.clone()
        } else {
            let path: PathBuf = index.extract()?;
            py.allow_threads(|| load_cached(&path)).map_err(err)?
        };
        let config: SearchEnvConfig = from_py(py, config, "search env config")?;
        let max_turns = config.max_turns;
        let task = SearchTask {
            question,
            answers,
            gold_docs: gold_docs.unwrap_or_default(),
        };
        let env = search::SearchEnv::new(retriever, config, task).map_err(err)?;
        Ok(SearchEnv {
            inner: Mutex::new(env),
            max_turns,
        })
    }

    /// Starts (or restarts) the episode; returns the prompt messages.
    fn reset<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let messages = with_env(py, &self.inner, |env| env.reset())?;
        messages_to_py(py, &messages)
    }

    /// Applies one action; returns `{"observations", "reward", "done", "metadata",
    /// "env_spans"}`.
    fn step<'py>(&self, py: Python<'py>, action: &str) -> PyResult<Bound<'py, PyDict>> {
        let step = with_env(py, &self.inner, |env| env.step(action))?;
        step_to_py(py, &step)
    }

    /// Applies one action without building the result (for overhead measurements): returns
    /// only the reward.
    fn step_reward(&self, py: Python<'_>, action: &str) -> PyResult<f64> {
        let step = with_env(py, &self.inner, |env| env.step(action))?;
        Ok(step.reward)
    }

    /// The turn cap of this episode.
    #[getter]
    fn max_turns(&self) -> usize {
        self.max_turns
    }
}

/// Times `steps` Rust-only search-environment steps (reset whenever an episode ends) with
/// `actions` cycled: returns nanoseconds per step, for overhead measurements.
#[pyfunction]
pub(crate) fn bench_rust_steps(
    env: &SearchEnv,
    py: Python<'_>,
    actions: Vec<String>,
    steps: usize,
) -> PyResult<f64> {
    py.allow_threads(|| -> rulegym::Result<f64> {
        let mut e = env.inner.lock().expect("not poisoned");
        e.reset()?;
        let start = std::time::Instant::now();
        for i in 0..steps {
            let s = e.step(&actions[i % actions.len().max(1)])?;
            if s.done {
                e.reset()?;
            }
        }
        Ok(start.elapsed().as_nanos() as f64 / steps.max(1) as f64)
    })
    .map_err(err)
}

/// Proof-derived oracle trajectories of every question of a dataset directory, replayed in
/// the search environment (as `rulegym oracle`): `[{"id", "messages", "f1",
/// "retrieval_misses", "failure"}]`.
#[pyfunction]
#[pyo3(signature = (dataset, index, top_k=3))]
pub(crate) fn oracle<'py>(
    py: Python<'py>,
    dataset: PathBuf,
    index: PathBuf,
    top_k: usize,
) -> PyResult<Bound<'py, PyAny>> {
    let trajectories = py
        .allow_threads(|| -> rulegym::Result<Vec<_>> {
            let universe = rulegym::dataset::load_universe(&dataset)?;
            let questions = rulegym::dataset::load_questions(&dataset)?;
            let retriever: Arc<dyn Retriever> = load_cached(&index)?;
            let config = SearchEnvConfig {
                top_k,
                ..SearchEnvConfig::default()
            };
            questions
                .iter()
                .map(|q| rulegym::search::oracle::replay(&universe, retriever.clone(), &config, q))
                .collect()
        })
        .map_err(err)?;
    to_py(py, &trajectories)
}

/// The search tools' OpenAI function schemas (as `transformers.utils.get_json_schema` renders
/// `rulegym.trl.SearchEnvironment`'s methods).
#[pyfunction]
pub(crate) fn search_tools<'py>(py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
    to_py_ordered(py, &rulegym::toolcall::search::schemas())
}

/// Proof-derived SFT demonstrations of a dataset's questions in the tool-calling format (as
/// `rulegym oracle --format sft`): `[{"id", "question", "answers", "family", "hops", "messages",
/// "tools", "reward"}]`, only those that replay to reward 1.
#[pyfunction]
#[pyo3(signature = (dataset, index=None, split=None, max_per_family=None, seed=1))]
pub(crate) fn demonstrations<'py>(
    py: Python<'py>,
    dataset: PathBuf,
    index: Option<PathBuf>,
    split: Option<String>,
    max_per_family: Option<usize>,
    seed: u64,
) -> PyResult<Bound<'py, PyAny>> {
    let split = split
        .map(|name| {
            rulegym::question::Split::named(&name)
                .ok_or_else(|| err(format!("unknown split {name:?} (train, val)")))
        })
        .transpose()?;
    let rows = py
        .allow_threads(|| -> rulegym::Result<Vec<_>> {
            let path = index.unwrap_or_else(|| dataset.join(rulegym::dataset::INDEX_FILE));
            if !path.is_file() {
                return Err(rulegym::Error::Dataset {
                    file: path.display().to_string(),
                    message: "no search index: demonstrations are replayed over one".into(),
                });
            }
            let universe = rulegym::dataset::load_universe(&dataset)?;
            let mut questions = rulegym::dataset::load_questions(&dataset)?;
            if let Some(split) = split {
                questions.retain(|q| q.split == split);
            }
            let index = load_cached(&path)?;
            let options = rulegym::toolcall::demo::DemoOptions::new(seed, max_per_family);
            Ok(rulegym::toolcall::demo::demonstrations(&universe, &index, &options, &questions)?.0)
        })
        .map_err(err)?;
    to_py_ordered(py, &rows)
}
