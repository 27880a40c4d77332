//! Python bindings of rulegym (`rulegym._rulegym`): universe and question generation, the
//! search environment, answer scoring, the retriever and the GRPO math over NumPy arrays.
//!
//! Conventions: configurations are plain dicts (the JSON shape of the Rust config structs,
//! unknown keys rejected); results are dicts and lists; every Rust error becomes a
//! `rulegym.RulegymError` (a `ValueError`) carrying the Rust message; the GIL is released
//! while Rust works (generation, retrieval, environment steps, GRPO).

use numpy::{
    PyReadonlyArray1, PyReadonlyArray2, PyReadwriteArray1, PyReadwriteArray2, PyUntypedArrayMethods,
};
use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyList, PyString};
use rulegym::env::Environment;
use rulegym::env::search::{self as search, Retriever, SearchEnvConfig, SearchTask};
use rulegym::grpo::{self, GrpoConfig, GrpoStats, TokenBatch};
use rulegym::question::{self, Question, QuestionConfig};
use rulegym::retrieval::SearchIndex;
use rulegym::reward::answer::{self, ScoreMode};
use rulegym::universe::{Universe, UniverseConfig};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

create_exception!(
    _rulegym,
    RulegymError,
    PyValueError,
    "An error reported by rulegym's Rust core (the message is the Rust error's)."
);

fn err(e: impl std::fmt::Display) -> PyErr {
    RulegymError::new_err(e.to_string())
}

/// Runs `f` on a locked environment with the GIL released (environments are shared by Python
/// threads; a step may retrieve or score for milliseconds).
fn with_env<E: Send, T: Send, X: std::fmt::Display + Send>(
    py: Python<'_>,
    env: &Mutex<E>,
    f: impl FnOnce(&mut E) -> Result<T, X> + Send,
) -> PyResult<T> {
    py.allow_threads(|| f(&mut env.lock().expect("not poisoned")))
        .map_err(err)
}

// ---------------------------------------------------------------------------------------------
// JSON <-> Python

/// Converts a JSON value into Python objects (dict, list, str, int, float, bool, None).
fn value_to_py<'py>(py: Python<'py>, v: &serde_json::Value) -> PyResult<Bound<'py, PyAny>> {
    use serde_json::Value;
    Ok(match v {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                i.into_pyobject(py)?.into_any()
            } else if let Some(u) = n.as_u64() {
                u.into_pyobject(py)?.into_any()
            } else {
                PyFloat::new(py, n.as_f64().unwrap_or(f64::NAN)).into_any()
            }
        }
        Value::String(s) => PyString::new(py, s).into_any(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(value_to_py(py, item)?)?;
            }
            list.into_any()
        }
        Value::Object(map) => {
            let dict = PyDict::new(py);
            for (k, item) in map {
                dict.set_item(k, value_to_py(py, item)?)?;
            }
            dict.into_any()
        }
    })
}

/// Serialises any value to Python objects through `serde_json::Value`.
fn to_py<'py, T: serde::Serialize>(py: Python<'py>, v: &T) -> PyResult<Bound<'py, PyAny>> {
    let value = serde_json::to_value(v).map_err(err)?;
    value_to_py(py, &value)
}

/// Parses an optional Python dict (or None) into a config struct through `json.dumps`.
fn from_py<T: serde::de::DeserializeOwned + Default>(
    py: Python<'_>,
    obj: Option<&Bound<'_, PyAny>>,
    what: &str,
) -> PyResult<T> {
    let Some(obj) = obj.filter(|o| !o.is_none()) else {
        return Ok(T::default());
    };
    let text: String = py
        .import("json")?
        .call_method1("dumps", (obj,))?
        .extract()?;
    serde_json::from_str(&text).map_err(|e| err(format!("invalid {what}: {e}")))
}

fn jsonl<T: serde::Serialize>(items: &[T]) -> PyResult<Vec<u8>> {
    let mut out = Vec::new();
    for item in items {
        serde_json::to_writer(&mut out, item).map_err(err)?;
        out.push(b'\n');
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Universe and questions

/// Generates a universe; returns `{"config", "people", "articles", "facts"}` where `people`
/// are the `people.jsonl` records and `articles` the Search-R1 corpus records
/// (`{"id", "contents", "facts"}`) of `articles.jsonl`.
#[pyfunction]
#[pyo3(signature = (config=None))]
fn generate_universe<'py>(
    py: Python<'py>,
    config: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let config: UniverseConfig = from_py(py, config, "universe config")?;
    let (universe, facts, records) = py
        .allow_threads(|| -> rulegym::Result<_> {
            let universe = Universe::generate(&config)?;
            let facts = universe.facts();
            let records: Vec<_> = rulegym::corpus::articles(&universe)
                .iter()
                .enumerate()
                .map(|(i, a)| a.record(i as u32))
                .collect();
            Ok((universe, facts, records))
        })
        .map_err(err)?;
    let out = PyDict::new(py);
    out.set_item("config", to_py(py, &universe.config)?)?;
    out.set_item(
        "people",
        to_py(py, &rulegym::dataset::person_records(&universe))?,
    )?;
    out.set_item("articles", to_py(py, &records)?)?;
    out.set_item("facts", facts)?;
    Ok(out.into_any())
}

/// Universe, engine with the facts loaded, and proposals for `config`.
fn propose_and_verify(
    universe_config: &UniverseConfig,
    config: &QuestionConfig,
    shard: (usize, usize),
) -> rulegym::Result<Vec<Question>> {
    universe_config.validate()?;
    config.validate()?;
    let starting = std::thread::spawn(rulegym::engine::Engine::new);
    let universe = Universe::generate(universe_config)?;
    let facts = universe.facts();
    let engine = starting
        .join()
        .map_err(|_| rulegym::Error::Config("engine thread panicked".into()))??;
    let proposals = std::thread::scope(|scope| {
        let loading = scope.spawn(|| engine.consult("facts", &facts));
        let proposals = question::propose_all(&universe, config);
        loading
            .join()
            .map_err(|_| rulegym::Error::Config("engine thread panicked".into()))??;
        proposals?.into_shard(shard.0, shard.1)
    })?;
    Ok(question::verify(std::slice::from_ref(&engine), proposals)?.0)
}

/// The question config as the `rulegym generate` CLI derives it: the question seed and easy
/// mode follow the universe's unless the dict sets them.
fn question_config(
    py: Python<'_>,
    universe: &UniverseConfig,
    questions: Option<&Bound<'_, PyAny>>,
) -> PyResult<QuestionConfig> {
    let given = |key: &str| -> PyResult<bool> {
        match questions.filter(|q| !q.is_none()) {
            Some(q) => q.downcast::<PyDict>()?.contains(key),
            None => Ok(false),
        }
    };
    let mut config: QuestionConfig = from_py(py, questions, "question config")?;
    if !given("seed")? {
        config.seed = universe.seed;
    }
    if !given("easy_mode")? {
        config.easy_mode = universe.easy_mode;
    }
    Ok(config)
}

/// Generates a universe and its engine-verified questions; returns the `questions.jsonl`
/// records as dicts. `universe` and `questions` are config dicts (None: defaults).
#[pyfunction]
#[pyo3(signature = (universe=None, questions=None))]
fn generate_questions<'py>(
    py: Python<'py>,
    universe: Option<&Bound<'py, PyAny>>,
    questions: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let ucfg: UniverseConfig = from_py(py, universe, "universe config")?;
    let qcfg = question_config(py, &ucfg, questions)?;
    let qs = py
        .allow_threads(|| propose_and_verify(&ucfg, &qcfg, (0, 1)))
        .map_err(err)?;
    to_py(py, &qs)
}

/// Like [`generate_questions`] but returns the exact bytes of `questions.jsonl`, or of shard
/// `shard` of `num_shards` of it: every shard samples all questions (cheap, deterministic) and
/// verifies a contiguous part on its engine, so the shards' bytes concatenated in shard order
/// are the unsharded output byte for byte.
#[pyfunction]
#[pyo3(signature = (universe=None, questions=None, shard=0, num_shards=1))]
fn generate_questions_jsonl<'py>(
    py: Python<'py>,
    universe: Option<&Bound<'py, PyAny>>,
    questions: Option<&Bound<'py, PyAny>>,
    shard: usize,
    num_shards: usize,
) -> PyResult<Bound<'py, PyBytes>> {
    let ucfg: UniverseConfig = from_py(py, universe, "universe config")?;
    let qcfg = question_config(py, &ucfg, questions)?;
    let bytes = py
        .allow_threads(|| propose_and_verify(&ucfg, &qcfg, (shard, num_shards)).map(|q| jsonl(&q)))
        .map_err(err)??;
    Ok(PyBytes::new(py, &bytes))
}

/// Writes a dataset directory like `rulegym generate` (facts.pl, articles.jsonl,
/// people.jsonl, questions.jsonl, manifest.json); returns the number of questions.
#[pyfunction]
#[pyo3(signature = (out, universe=None, questions=None, force=false))]
fn generate_dataset(
    py: Python<'_>,
    out: PathBuf,
    universe: Option<&Bound<'_, PyAny>>,
    questions: Option<&Bound<'_, PyAny>>,
    force: bool,
) -> PyResult<usize> {
    let ucfg: UniverseConfig = from_py(py, universe, "universe config")?;
    let qcfg = question_config(py, &ucfg, questions)?;
    py.allow_threads(|| -> rulegym::Result<usize> {
        let qs = propose_and_verify(&ucfg, &qcfg, (0, 1))?;
        let universe = Universe::generate(&ucfg)?;
        let facts = universe.facts();
        let articles = rulegym::corpus::articles(&universe);
        let files = rulegym::dataset::universe_files(&universe, &facts, &articles, Some(&qs))?;
        rulegym::dataset::write_dir_atomic(&out, &files, force)?;
        Ok(qs.len())
    })
    .map_err(err)
}

// ---------------------------------------------------------------------------------------------
// Retrieval

/// Identity of an index file: canonical path, size and modification time (a file rewritten in
/// place is loaded again).
type IndexKey = (PathBuf, u64, Option<std::time::SystemTime>);

/// Indexes loaded by path, shared by every environment of the process.
fn index_cache() -> &'static Mutex<BTreeMap<IndexKey, Arc<SearchIndex>>> {
    static CACHE: OnceLock<Mutex<BTreeMap<IndexKey, Arc<SearchIndex>>>> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

fn load_cached(path: &Path) -> rulegym::Result<Arc<SearchIndex>> {
    let canonical = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    let meta = std::fs::metadata(path).ok();
    let key = (
        canonical,
        meta.as_ref().map_or(0, |m| m.len()),
        meta.and_then(|m| m.modified().ok()),
    );
    if let Some(index) = index_cache().lock().expect("not poisoned").get(&key) {
        return Ok(index.clone());
    }
    let index = Arc::new(SearchIndex::load(path)?);
    let mut cache = index_cache().lock().expect("not poisoned");
    cache.retain(|k, _| k.0 != key.0);
    cache.insert(key, index.clone());
    Ok(index)
}

/// A search index file written by `rulegym index` (or [`build_index`]), loaded once per file
/// (path, size, modification time) and process. Thread-safe: many threads may search one index.
#[pyclass(frozen, module = "rulegym._rulegym")]
struct Index {
    inner: Arc<SearchIndex>,
}

#[pymethods]
impl Index {
    /// Loads (or reuses the already loaded) index at `path`.
    #[new]
    fn new(py: Python<'_>, path: PathBuf) -> PyResult<Self> {
        let inner = py.allow_threads(|| load_cached(&path)).map_err(err)?;
        Ok(Index { inner })
    }

    /// Top-`k` documents for each query: `[[{"id", "contents", "score"}, ...], ...]`.
    #[pyo3(signature = (queries, k=3))]
    fn search<'py>(
        &self,
        py: Python<'py>,
        queries: Vec<String>,
        k: usize,
    ) -> PyResult<Bound<'py, PyList>> {
        let refs: Vec<&str> = queries.iter().map(String::as_str).collect();
        let hits = py
            .allow_threads(|| self.inner.search(&refs, k))
            .map_err(err)?;
        let docs = self.inner.docs();
        let out = PyList::empty(py);
        for row in hits {
            let list = PyList::empty(py);
            for h in row {
                let d = &docs[h.index as usize];
                let item = PyDict::new(py);
                item.set_item("id", &d.id)?;
                item.set_item("contents", &d.contents)?;
                item.set_item("score", h.score)?;
                list.append(item)?;
            }
            out.append(list)?;
        }
        Ok(out)
    }

    /// Number of documents.
    fn __len__(&self) -> usize {
        self.inner.len()
    }
}

/// Builds a flat index with the built-in encoder over a Search-R1 JSONL corpus (such as a
/// dataset's `articles.jsonl`) and writes it to `out`, like `rulegym index`.
#[pyfunction]
fn build_index(py: Python<'_>, corpus: PathBuf, out: PathBuf) -> PyResult<usize> {
    py.allow_threads(|| -> rulegym::Result<usize> {
        use rulegym::retrieval::{BuiltinConfig, EncoderChoice, IndexKind, docs};
        let corpus = docs::read_jsonl(&corpus)?;
        let index = SearchIndex::build(
            corpus,
            &EncoderChoice::Builtin(BuiltinConfig::default()),
            IndexKind::Flat,
        )?;
        index.save(&out)?;
        Ok(index.len())
    })
    .map_err(err)
}

// ---------------------------------------------------------------------------------------------
// Search environment

/// One episode of the search environment (Search-R1 protocol, set-F1 reward). Cheap to
/// construct (the index is shared); safe to use from any thread (steps on one environment are
/// serialised by a lock; the GIL is released while the step runs).
#[pyclass(frozen, module = "rulegym._rulegym")]
struct SearchEnv {
    inner: Mutex<search::SearchEnv>,
    max_turns: usize,
}

fn step_to_py<'py>(py: Python<'py>, step: &rulegym::env::Step) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    let obs = PyList::empty(py);
    for m in &step.observations {
        let d = PyDict::new(py);
        d.set_item("role", &m.role)?;
        d.set_item("content", &m.content)?;
        obs.append(d)?;
    }
    out.set_item("observations", obs)?;
    out.set_item("reward", step.reward)?;
    out.set_item("done", step.done)?;
    let meta = PyDict::new(py);
    for (k, v) in &step.metadata {
        meta.set_item(k, value_to_py(py, v)?)?;
    }
    out.set_item("metadata", meta)?;
    let spans = PyList::empty(py);
    for s in &step.env_spans {
        spans.append((s.start, s.end))?;
    }
    out.set_item("env_spans", spans)?;
    Ok(out)
}

fn messages_to_py<'py>(
    py: Python<'py>,
    messages: &[rulegym::env::Message],
) -> PyResult<Bound<'py, PyList>> {
    let out = PyList::empty(py);
    for m in messages {
        let d = PyDict::new(py);
        d.set_item("role", &m.role)?;
        d.set_item("content", &m.content)?;
        out.append(d)?;
    }
    Ok(out)
}

#[pymethods]
impl SearchEnv {
    /// `index` is an [`Index`] or a path (loaded once per process); `config` a dict of
    /// `SearchEnvConfig` fields (`top_k`, `max_turns`, `end_on_invalid`, `score_mode`,
    /// `prompt`, `system_prompt`).
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
        let retriever: Arc<dyn Retriever> = if let Ok(ix) = index.downcast::<Index>() {
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
fn bench_rust_steps(
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
fn oracle<'py>(
    py: Python<'py>,
    dataset: PathBuf,
    index: PathBuf,
    top_k: usize,
) -> PyResult<Bound<'py, PyAny>> {
    let trajectories = py
        .allow_threads(|| -> rulegym::Result<Vec<_>> {
            let universe = rulegym::dataset::load_universe(&dataset)?;
            let questions =
                rulegym::dataset::jsonl::read_jsonl::<Question>(&dataset.join("questions.jsonl"))?;
            let retriever: Arc<dyn Retriever> = load_cached(&index)?;
            let config = SearchEnvConfig {
                top_k,
                ..SearchEnvConfig::default()
            };
            questions
                .iter()
                .map(|q| rulegym::env::oracle::replay(&universe, retriever.clone(), &config, q))
                .collect()
        })
        .map_err(err)?;
    to_py(py, &trajectories)
}

// ---------------------------------------------------------------------------------------------
// Answer scoring

fn mode(name: &str) -> PyResult<ScoreMode> {
    match name {
        "squad" => Ok(ScoreMode::Squad),
        "phantomwiki" => Ok(ScoreMode::Phantomwiki),
        other => Err(err(format!(
            "unknown score mode {other:?} (squad, phantomwiki)"
        ))),
    }
}

/// Scores a comma-separated prediction against gold answers: `{"f1", "em", "precision",
/// "recall"}`. With `extract=True` a prediction containing `<answer>` tags is scored on its
/// last answer (as `rulegym score`).
#[pyfunction]
#[pyo3(signature = (prediction, answers, mode="squad", extract=true))]
fn score<'py>(
    py: Python<'py>,
    prediction: &str,
    answers: Vec<String>,
    mode: &str,
    extract: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let m = self::mode(mode)?;
    let text = if extract {
        answer::last_answer([prediction]).unwrap_or_else(|| prediction.to_owned())
    } else {
        prediction.to_owned()
    };
    let s = answer::score(&text, &answers, m);
    let out = PyDict::new(py);
    out.set_item("f1", s.f1)?;
    out.set_item("em", s.em)?;
    out.set_item("precision", s.precision)?;
    out.set_item("recall", s.recall)?;
    Ok(out)
}

/// The text of the last complete `<answer>...</answer>` in the given turns, or None.
#[pyfunction]
fn last_answer(turns: Vec<String>) -> Option<String> {
    answer::last_answer(turns.iter().map(String::as_str))
}

/// SQuAD answer normalisation (lower-case, no punctuation, no articles, single spaces).
#[pyfunction]
fn normalize_answer(text: &str) -> String {
    answer::normalize_squad(text)
}

// ---------------------------------------------------------------------------------------------
// Rubric scoring (tool-use trajectories)

/// Scores tool-use trajectories against a task's executable rubric (Prolog rules over the
/// trajectory's facts). Holds one warm engine; thread-safe (queries are serialised on it, the
/// GIL is released while it works). Start-up cost ~0.2-0.5 s: make one and reuse it.
#[pyclass(frozen, module = "rulegym._rulegym")]
struct RubricScorer {
    inner: Arc<rulegym::reward::rubric::RubricScorer>,
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
        use rulegym::reward::rubric::{RewardVariant, ScoreConfig};
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
            .allow_threads(|| rulegym::reward::rubric::RubricScorer::new(config))
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
        use rulegym::reward::rubric::{RubricProgram, Trajectory};
        use rulegym::synth::task::{Task, ValidateOptions};
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

// ---------------------------------------------------------------------------------------------
// Tool-use environment

fn json_text(py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<String> {
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
struct ToolEnv {
    inner: Mutex<rulegym::env::tool::ToolEnv>,
    world: Arc<rulegym::env::tool::ToolWorld>,
    scorer: Arc<rulegym::reward::rubric::RubricScorer>,
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
        use rulegym::env::tool::{Protocol, ToolEnvConfig, ToolWorld};
        use rulegym::env::tool_sim::{MappingConfig, MappingSimulator};
        use rulegym::synth::llm::{LlmBackend, LlmError, ScriptedBackend, assistant_text};
        use rulegym::synth::task::{Task, ValidateOptions};
        let protocol: Protocol = serde_json::from_value(serde_json::json!(protocol))
            .map_err(|_| err(format!("unknown protocol {protocol:?} (hermes, openai)")))?;
        let text = json_text(py, task)?;
        let task = Task::from_json(&text).map_err(err)?;
        let world = Arc::new(ToolWorld::new(task, ValidateOptions::default()).map_err(err)?);
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
        let user = Box::new(rulegym::env::tool_user::RuleUser::new(&world.task));
        let env = rulegym::env::tool::ToolEnv::new(
            world.clone(),
            mapping,
            user,
            scorer.inner.clone(),
            ToolEnvConfig {
                max_turns,
                protocol,
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
        let message: rulegym::synth::llm::ChatMessage =
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

// ---------------------------------------------------------------------------------------------
// GRPO over NumPy arrays

static BYTES_COPIED: AtomicU64 = AtomicU64::new(0);

/// Bytes the GRPO bindings copied out of input arrays since the process started (0 for
/// C-contiguous inputs of the native dtypes: float32 values, uint8/bool masks, uint64 offsets).
#[pyfunction]
fn grpo_bytes_copied() -> u64 {
    BYTES_COPIED.load(Ordering::Relaxed)
}

/// A read-only 1-D view as a slice: zero-copy when contiguous, else copied (and counted).
fn slice1<'a, T: numpy::Element + Copy>(
    a: &'a PyReadonlyArray1<'_, T>,
    owned: &'a mut Vec<T>,
) -> &'a [T] {
    match a.as_slice() {
        Ok(s) => s,
        Err(_) => {
            *owned = a.as_array().iter().copied().collect();
            BYTES_COPIED.fetch_add(
                (owned.len() * std::mem::size_of::<T>()) as u64,
                Ordering::Relaxed,
            );
            owned
        }
    }
}

fn slice2<'a, T: numpy::Element + Copy>(
    a: &'a PyReadonlyArray2<'_, T>,
    owned: &'a mut Vec<T>,
) -> &'a [T] {
    match a.as_slice() {
        Ok(s) => s,
        Err(_) => {
            *owned = a.as_array().iter().copied().collect();
            BYTES_COPIED.fetch_add(
                (owned.len() * std::mem::size_of::<T>()) as u64,
                Ordering::Relaxed,
            );
            owned
        }
    }
}

/// A mask given as uint8 or bool (bools are bytes 0/1: reinterpreted without a copy).
enum Mask<'py> {
    U8(PyReadonlyArray1<'py, u8>),
    Bool(PyReadonlyArray1<'py, bool>),
}

fn mask_slice<'a>(m: &'a Mask<'_>, owned: &'a mut Vec<u8>) -> &'a [u8] {
    match m {
        Mask::U8(a) => slice1(a, owned),
        Mask::Bool(a) => match a.as_slice() {
            // SAFETY: bool is one byte holding 0 or 1.
            Ok(s) => unsafe { std::slice::from_raw_parts(s.as_ptr().cast::<u8>(), s.len()) },
            Err(_) => {
                *owned = a.as_array().iter().map(|&b| u8::from(b)).collect();
                BYTES_COPIED.fetch_add(owned.len() as u64, Ordering::Relaxed);
                owned
            }
        },
    }
}

fn extract_mask<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Mask<'py>> {
    if let Ok(a) = obj.extract::<PyReadonlyArray1<'py, u8>>() {
        return Ok(Mask::U8(a));
    }
    if let Ok(a) = obj.extract::<PyReadonlyArray1<'py, bool>>() {
        return Ok(Mask::Bool(a));
    }
    Err(pyo3::exceptions::PyTypeError::new_err(
        "mask must be a 1-D numpy array of uint8 or bool",
    ))
}

/// Offsets as usize: uint64 arrays are viewed in place (64-bit platforms), int64 copied.
fn offsets_vec<'py>(
    obj: &Bound<'py, PyAny>,
) -> PyResult<(Option<PyReadonlyArray1<'py, u64>>, Vec<usize>)> {
    if let Ok(a) = obj.extract::<PyReadonlyArray1<'py, u64>>() {
        if cfg!(target_pointer_width = "64") && a.as_slice().is_ok() {
            return Ok((Some(a), Vec::new()));
        }
        let v: Vec<usize> = a.as_array().iter().map(|&x| x as usize).collect();
        BYTES_COPIED.fetch_add((v.len() * 8) as u64, Ordering::Relaxed);
        return Ok((None, v));
    }
    if let Ok(a) = obj.extract::<PyReadonlyArray1<'py, i64>>() {
        let mut v = Vec::with_capacity(a.len());
        for &x in a.as_array().iter() {
            v.push(usize::try_from(x).map_err(|_| err(format!("negative offset {x}")))?);
        }
        BYTES_COPIED.fetch_add((v.len() * 8) as u64, Ordering::Relaxed);
        return Ok((None, v));
    }
    Err(pyo3::exceptions::PyTypeError::new_err(
        "offsets must be a 1-D numpy array of uint64 or int64",
    ))
}

fn stats_to_py<'py>(py: Python<'py>, s: &GrpoStats) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("loss", s.loss)?;
    d.set_item("tokens", s.tokens)?;
    d.set_item("sequences", s.sequences)?;
    d.set_item("clip_frac_low", s.clip_frac_low)?;
    d.set_item("clip_frac_high", s.clip_frac_high)?;
    d.set_item("dual_clip_frac", s.dual_clip_frac)?;
    d.set_item("mean_ratio", s.mean_ratio)?;
    d.set_item("approx_kl_k1", s.approx_kl_k1)?;
    d.set_item("approx_kl_k3", s.approx_kl_k3)?;
    Ok(d)
}

/// Group-normalised advantages of `rewards` (float32, groups of `group_size` consecutive
/// sequences), written into `out` (float32, same length). `config` is a GRPO config dict
/// (`std`, `eps`, `mean_only`, `clip_low`, `clip_high`, `dual_clip`, `aggregation`).
#[pyfunction]
#[pyo3(signature = (rewards, group_size, out, config=None))]
fn group_advantages(
    py: Python<'_>,
    rewards: PyReadonlyArray1<'_, f32>,
    group_size: usize,
    mut out: PyReadwriteArray1<'_, f32>,
    config: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let cfg: GrpoConfig = from_py(py, config, "GRPO config")?;
    let mut owned = Vec::new();
    let r = slice1(&rewards, &mut owned);
    let out = out
        .as_slice_mut()
        .map_err(|_| err("out must be a C-contiguous float32 array"))?;
    py.allow_threads(|| grpo::group_advantages(r, group_size, &cfg, out))
        .map_err(err)
}

/// Clipped-surrogate loss over a ragged batch: flat float32 `logp_old`/`logp_new`, a
/// uint8/bool `mask`, `offsets` (uint64 or int64, sequences + 1 entries) and one float32
/// advantage per sequence; writes d loss / d logp_new into `grad` and returns the loss and
/// metrics as a dict.
#[pyfunction]
#[pyo3(signature = (logp_old, logp_new, mask, offsets, advantages, grad, config=None))]
#[allow(clippy::too_many_arguments)]
fn policy_loss<'py>(
    py: Python<'py>,
    logp_old: PyReadonlyArray1<'py, f32>,
    logp_new: PyReadonlyArray1<'py, f32>,
    mask: &Bound<'py, PyAny>,
    offsets: &Bound<'py, PyAny>,
    advantages: PyReadonlyArray1<'py, f32>,
    mut grad: PyReadwriteArray1<'py, f32>,
    config: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let cfg: GrpoConfig = from_py(py, config, "GRPO config")?;
    let mask = extract_mask(mask)?;
    let (off_view, off_owned) = offsets_vec(offsets)?;
    let off: &[usize] = match &off_view {
        // SAFETY: u64 and usize have the same size and alignment on 64-bit targets (checked
        // when the view was taken).
        Some(a) => {
            let s = a.as_slice().map_err(err)?;
            unsafe { std::slice::from_raw_parts(s.as_ptr().cast::<usize>(), s.len()) }
        }
        None => &off_owned,
    };
    let (mut o1, mut o2, mut o3, mut o4) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let old = slice1(&logp_old, &mut o1);
    let new = slice1(&logp_new, &mut o2);
    let m = mask_slice(&mask, &mut o3);
    let adv = slice1(&advantages, &mut o4);
    let g = grad
        .as_slice_mut()
        .map_err(|_| err("grad must be a C-contiguous float32 array"))?;
    let stats = py
        .allow_threads(|| -> Result<GrpoStats, grpo::GrpoError> {
            let batch = TokenBatch::ragged(old, new, m, off)?;
            grpo::policy_loss(&batch, adv, &cfg, g)
        })
        .map_err(err)?;
    stats_to_py(py, &stats)
}

/// Like [`policy_loss`] for a padded batch: 2-D float32 `logp_old`/`logp_new` and a 2-D
/// uint8 `mask` (rows x cols; padding has mask 0), `grad` 2-D float32 of the same shape.
#[pyfunction]
#[pyo3(signature = (logp_old, logp_new, mask, advantages, grad, config=None))]
fn policy_loss_padded<'py>(
    py: Python<'py>,
    logp_old: PyReadonlyArray2<'py, f32>,
    logp_new: PyReadonlyArray2<'py, f32>,
    mask: PyReadonlyArray2<'py, u8>,
    advantages: PyReadonlyArray1<'py, f32>,
    mut grad: PyReadwriteArray2<'py, f32>,
    config: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let cfg: GrpoConfig = from_py(py, config, "GRPO config")?;
    let shape = logp_old.shape().to_vec();
    for (name, s) in [
        ("logp_new", logp_new.shape()),
        ("mask", mask.shape()),
        ("grad", grad.shape()),
    ] {
        if s != shape.as_slice() {
            return Err(err(format!(
                "{name} has shape {s:?}, logp_old has {shape:?}"
            )));
        }
    }
    let (mut o1, mut o2, mut o3, mut o4) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let old = slice2(&logp_old, &mut o1);
    let new = slice2(&logp_new, &mut o2);
    let m = slice2(&mask, &mut o3);
    let adv = slice1(&advantages, &mut o4);
    let g = grad
        .as_slice_mut()
        .map_err(|_| err("grad must be a C-contiguous float32 array"))?;
    let stats = py
        .allow_threads(|| -> Result<GrpoStats, grpo::GrpoError> {
            let batch = TokenBatch::padded(old, new, m, shape[0], shape[1])?;
            grpo::policy_loss(&batch, adv, &cfg, g)
        })
        .map_err(err)?;
    stats_to_py(py, &stats)
}

/// The Python extension module.
#[pymodule]
fn _rulegym(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("RulegymError", m.py().get_type::<RulegymError>())?;
    m.add("INVALID_ACTION", search::INVALID_ACTION)?;
    m.add("DEFAULT_PROMPT", search::DEFAULT_PROMPT)?;
    m.add_class::<Index>()?;
    m.add_class::<SearchEnv>()?;
    m.add_class::<RubricScorer>()?;
    m.add_class::<ToolEnv>()?;
    m.add_function(wrap_pyfunction!(generate_universe, m)?)?;
    m.add_function(wrap_pyfunction!(generate_questions, m)?)?;
    m.add_function(wrap_pyfunction!(generate_questions_jsonl, m)?)?;
    m.add_function(wrap_pyfunction!(generate_dataset, m)?)?;
    m.add_function(wrap_pyfunction!(build_index, m)?)?;
    m.add_function(wrap_pyfunction!(oracle, m)?)?;
    m.add_function(wrap_pyfunction!(bench_rust_steps, m)?)?;
    m.add_function(wrap_pyfunction!(score, m)?)?;
    m.add_function(wrap_pyfunction!(last_answer, m)?)?;
    m.add_function(wrap_pyfunction!(normalize_answer, m)?)?;
    m.add_function(wrap_pyfunction!(grpo_bytes_copied, m)?)?;
    m.add_function(wrap_pyfunction!(group_advantages, m)?)?;
    m.add_function(wrap_pyfunction!(policy_loss, m)?)?;
    m.add_function(wrap_pyfunction!(policy_loss_padded, m)?)?;
    Ok(())
}
