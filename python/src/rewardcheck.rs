//! Property tests of a reward function (`rulegym.testing`): the Rust case generator and check
//! of `rulegym::rewardcheck`, with a Python callable as the reward.

use crate::prelude::*;
use rulegym::rewardcheck::{self, Property, RewardError, RewardInput};

/// A universe's questions and wrong-answer pools, the source of reward-check cases.
#[pyclass(frozen, module = "rulegym._rulegym")]
pub(crate) struct CaseSource {
    inner: Arc<rewardcheck::CaseSource>,
}

/// One generated case: a response, its gold answers, the property it tests and rulegym's exact
/// reward for it.
#[pyclass(frozen, module = "rulegym._rulegym")]
pub(crate) struct Case {
    inner: rewardcheck::Case,
}

fn property(index: usize) -> PyResult<Property> {
    Property::ANSWER_GENERATED
        .get(index)
        .copied()
        .ok_or_else(|| {
            err(format!(
                "property index {index} is out of range (0..{})",
                Property::ANSWER_GENERATED.len()
            ))
        })
}

fn case(spec: Option<rewardcheck::Spec>) -> PyResult<Option<Case>> {
    spec.map(|s| {
        rewardcheck::Case::new(s)
            .map(|inner| Case { inner })
            .map_err(err)
    })
    .transpose()
}

#[pymethods]
impl CaseSource {
    /// A fresh universe from `seed` with `trees` family trees and its default questions.
    #[staticmethod]
    #[pyo3(signature = (seed=1, trees=30))]
    fn generate(py: Python<'_>, seed: u64, trees: usize) -> PyResult<Self> {
        let inner = py
            .allow_threads(|| rewardcheck::CaseSource::generate(seed, trees))
            .map_err(err)?;
        Ok(CaseSource {
            inner: Arc::new(inner),
        })
    }

    /// The people and questions of a dataset directory.
    #[staticmethod]
    fn load(py: Python<'_>, dir: PathBuf) -> PyResult<Self> {
        let inner = py
            .allow_threads(|| rewardcheck::CaseSource::load(&dir))
            .map_err(err)?;
        Ok(CaseSource {
            inner: Arc::new(inner),
        })
    }

    /// The questions with gold answers: `[{"id", "question", "answers"}]`.
    fn questions<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, &self.inner.questions())
    }

    /// Every person's name, sorted.
    fn names(&self) -> Vec<String> {
        self.inner.names().to_vec()
    }

    /// Case `index` of generated property `property` (an index into `PROPERTIES`), on any
    /// question, or on question `question` when given; None when the property does not apply.
    #[pyo3(signature = (property, index, question=None, seed=0))]
    fn case(
        &self,
        property: usize,
        index: u64,
        question: Option<usize>,
        seed: u64,
    ) -> PyResult<Option<Case>> {
        let p = self::property(property)?;
        case(match question {
            Some(q) => self.inner.case_for(q, seed, p, index),
            None => self.inner.case(seed, p, index),
        })
    }
}

#[pymethods]
impl Case {
    /// The property's name.
    #[getter]
    fn property(&self) -> &'static str {
        self.inner.spec.property.name()
    }

    /// The question.
    #[getter]
    fn question(&self) -> String {
        self.inner.spec.question.clone()
    }

    /// The gold answers.
    #[getter]
    fn answers(&self) -> Vec<String> {
        self.inner.spec.answers.clone()
    }

    /// The response (full model text with its tags).
    #[getter]
    fn response(&self) -> String {
        self.inner.response.clone()
    }

    /// For the monotonicity properties, the response without the added item (else None).
    #[getter]
    fn base_response(&self) -> Option<String> {
        self.inner.base.clone()
    }

    /// rulegym's exact reward for `response`.
    #[getter]
    fn expected(&self) -> f64 {
        self.inner.expected
    }

    /// What a reward must be, as text (`= 1`, `< 1`, `<= 0.25 (rulegym's reward)`...).
    #[pyo3(signature = (base_got=None))]
    fn expectation(&self, base_got: Option<f64>) -> String {
        self.inner.expectation(base_got).describe()
    }

    /// Whether a reward `got` (and `base_got`, the reward of `base_response`, for the
    /// monotonicity properties) satisfies the case's property.
    #[pyo3(signature = (got, base_got=None))]
    fn holds(&self, got: f64, base_got: Option<f64>) -> bool {
        self.inner.holds(got, base_got)
    }

    fn __repr__(&self) -> String {
        format!(
            "Case(property={:?}, response={:?}, answers={:?}, expected={})",
            self.property(),
            self.inner.response,
            self.inner.spec.answers,
            self.inner.expected
        )
    }
}

/// A Python callable over a batch of inputs (a list of dicts) returning a list of floats.
struct PyReward<'py> {
    py: Python<'py>,
    f: Bound<'py, PyAny>,
}

impl rewardcheck::RewardFn for PyReward<'_> {
    fn rewards(
        &mut self,
        inputs: &[RewardInput],
        first_line: usize,
    ) -> Result<Vec<f64>, RewardError> {
        let failed = |e: PyErr| RewardError::Failed {
            line: first_line,
            message: e.to_string(),
        };
        let batch = to_py(self.py, &inputs).map_err(failed)?;
        let out = self.f.call1((batch,)).map_err(failed)?;
        let values: Vec<Option<f64>> = out.extract().map_err(failed)?;
        Ok(values.into_iter().map(|v| v.unwrap_or(f64::NAN)).collect())
    }
}

/// Runs every reward-check property against `batch_fn` (called with a list of
/// `{"id", "question", "response", "answers"}` dicts, returning a list of floats, None for no
/// reward) on cases from `source` (a fresh universe from `seed` when None). Returns the report
/// dict; raises `RulegymError` when the function raises or answers the wrong count.
#[pyfunction]
#[pyo3(signature = (batch_fn, source=None, seed=1, cases=1200, batch=2000, trees=30))]
pub(crate) fn reward_check<'py>(
    py: Python<'py>,
    batch_fn: Bound<'py, PyAny>,
    source: Option<&CaseSource>,
    seed: u64,
    cases: usize,
    batch: usize,
    trees: usize,
) -> PyResult<Bound<'py, PyAny>> {
    let fresh;
    let source = match source {
        Some(s) => &s.inner,
        None => {
            fresh = Arc::new(
                py.allow_threads(|| rewardcheck::CaseSource::generate(seed, trees))
                    .map_err(err)?,
            );
            &fresh
        }
    };
    let config = rewardcheck::CheckConfig {
        seed,
        cases,
        batch,
        ..Default::default()
    };
    let mut reward = PyReward { py, f: batch_fn };
    let report = rewardcheck::check(source, &mut reward, &config)
        .map_err(err)?
        .map_err(err)?;
    to_py(py, &report)
}

/// The generated properties' names, in the order `CaseSource.case` indexes them.
#[pyfunction]
pub(crate) fn reward_properties() -> Vec<&'static str> {
    Property::ANSWER_GENERATED
        .iter()
        .map(|p| p.name())
        .collect()
}

/// Rule-generated tool-use tasks of a universe, the source of tool-use reward-check
/// trajectories.
#[pyclass(frozen, module = "rulegym._rulegym")]
pub(crate) struct ToolCaseSource {
    inner: Arc<rewardcheck::ToolCaseSource>,
}

/// One trajectory of a tool-use task with rulegym's rubric reward for it.
#[pyclass(frozen, module = "rulegym._rulegym")]
pub(crate) struct ToolCase {
    inner: rewardcheck::ToolCase,
}

#[pymethods]
impl ToolCaseSource {
    /// `tasks` rule-generated tasks of a fresh universe from `seed` with `trees` family trees.
    #[staticmethod]
    #[pyo3(signature = (seed=1, trees=30, tasks=24))]
    fn generate(py: Python<'_>, seed: u64, trees: usize, tasks: usize) -> PyResult<Self> {
        let inner = py
            .allow_threads(|| rewardcheck::ToolCaseSource::generate(seed, trees, tasks))
            .map_err(err)?;
        Ok(ToolCaseSource {
            inner: Arc::new(inner),
        })
    }

    /// The tasks (task dicts, the shape of a task file's records).
    fn tasks<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let tasks: Vec<&rulegym::tooluse::task::Task> =
            self.inner.tasks().iter().map(|t| &t.task).collect();
        to_py(py, &tasks)
    }

    /// rulegym's rubric reward of a conversation (OpenAI messages) on `task` (a task dict).
    fn exact_reward(
        &self,
        py: Python<'_>,
        task: &Bound<'_, PyAny>,
        messages: &Bound<'_, PyAny>,
    ) -> PyResult<f64> {
        let text: String = py
            .import("json")?
            .call_method1("dumps", (task,))?
            .extract()?;
        let task = rulegym::tooluse::task::Task::from_json(&text).map_err(err)?;
        let messages: Vec<rulegym::llm::ChatMessage> = from_py(py, Some(messages), "messages")?;
        let inner = self.inner.clone();
        py.allow_threads(move || inner.exact_reward(&task, &messages))
            .map_err(err)
    }

    /// The trajectory of tool-use property `property` (an index into `TOOL_PROPERTIES`) on task
    /// `task % len(tasks())`, played and scored.
    fn case(&self, py: Python<'_>, property: usize, task: usize) -> PyResult<Option<ToolCase>> {
        let p = Property::TOOL_GENERATED
            .get(property)
            .copied()
            .ok_or_else(|| {
                err(format!(
                    "tool property index {property} is out of range (0..{})",
                    Property::TOOL_GENERATED.len()
                ))
            })?;
        let inner = self.inner.clone();
        Ok(py
            .allow_threads(move || inner.case(p, task))
            .map_err(err)?
            .map(|inner| ToolCase { inner }))
    }
}

#[pymethods]
impl ToolCase {
    /// The property's name.
    #[getter]
    fn property(&self) -> &'static str {
        self.inner.property.name()
    }

    /// The task (a task dict).
    #[getter]
    fn task<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, &self.inner.task)
    }

    /// The conversation (OpenAI messages).
    #[getter]
    fn messages<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, &self.inner.messages)
    }

    /// rulegym's rubric reward for the conversation.
    #[getter]
    fn expected(&self) -> f64 {
        self.inner.expected
    }

    /// Whether a reward `got` satisfies the case's property.
    fn holds(&self, got: f64) -> bool {
        self.inner.holds(got)
    }

    fn __repr__(&self) -> String {
        format!(
            "ToolCase(property={:?}, task={:?}, messages={}, expected={})",
            self.property(),
            self.inner.task.id,
            self.inner.messages.len(),
            self.inner.expected
        )
    }
}

/// Runs the tool-use properties against `batch_fn` (called with a list of
/// `{"id", "task", "messages"}` dicts, returning a list of floats) on `cases` trajectories of
/// `source` (24 tasks of a fresh universe from `seed` when None). Returns the report dict.
#[pyfunction]
#[pyo3(signature = (batch_fn, source=None, seed=1, cases=200, trees=30))]
pub(crate) fn reward_check_tools<'py>(
    py: Python<'py>,
    batch_fn: Bound<'py, PyAny>,
    source: Option<&ToolCaseSource>,
    seed: u64,
    cases: usize,
    trees: usize,
) -> PyResult<Bound<'py, PyAny>> {
    let fresh;
    let source = match source {
        Some(s) => &s.inner,
        None => {
            fresh = Arc::new(
                py.allow_threads(|| rewardcheck::ToolCaseSource::generate(seed, trees, 24))
                    .map_err(err)?,
            );
            &fresh
        }
    };
    let mut reward = PyReward { py, f: batch_fn };
    let report = rewardcheck::check_tools(source, &mut reward, cases, 2000)
        .map_err(err)?
        .map_err(err)?;
    to_py(py, &report)
}

/// The tool-use properties' names, in the order `ToolCaseSource.case` indexes them.
#[pyfunction]
pub(crate) fn tool_reward_properties() -> Vec<&'static str> {
    Property::TOOL_GENERATED.iter().map(|p| p.name()).collect()
}
