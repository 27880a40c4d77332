//! The curriculum: questions drawn at a difficulty that follows the reported rewards.

use crate::prelude::*;
use crate::retrieval::Index;
use rulegym::curriculum::{self, CurriculumConfig, CurriculumState};

/// A curriculum over the question generator ([`rulegym::curriculum`]): `draw()` serves a fresh
/// engine-verified question at the current level, `report(reward)` moves the level. Shared by
/// every environment of a process (calls are serialised).
#[pyclass(frozen, module = "rulegym._rulegym")]
pub(crate) struct Curriculum {
    inner: Mutex<curriculum::Curriculum>,
}

#[pymethods]
impl Curriculum {
    /// `config`: a dict of `CurriculumConfig` fields (None: the defaults); `state`: a dict from
    /// `state()` to resume from (it must come from a curriculum with the same seed).
    #[new]
    #[pyo3(signature = (config=None, state=None))]
    fn new(
        py: Python<'_>,
        config: Option<&Bound<'_, PyAny>>,
        state: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let config: CurriculumConfig = from_py(py, config, "curriculum config")?;
        let inner = match state.filter(|s| !s.is_none()) {
            None => curriculum::Curriculum::new(config),
            Some(state) => {
                let text: String = py
                    .import("json")?
                    .call_method1("dumps", (state,))?
                    .extract()?;
                let state: CurriculumState = serde_json::from_str(&text)
                    .map_err(|e| err(format!("invalid curriculum state: {e}")))?;
                curriculum::Curriculum::resume(config, state)
            }
        }
        .map_err(err)?;
        Ok(Curriculum {
            inner: Mutex::new(inner),
        })
    }

    /// The next question: `{"id", "question", "answers", "hops", "family", "level",
    /// "universe_seed", "prompt", "index"}` (`prompt`: the tool-calling system prompt and the
    /// question; `index`: an `Index` of its universe's articles).
    fn draw<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = with_env(py, &self.inner, |c| c.draw())?;
        let q = &d.question;
        let out = PyDict::new(py);
        out.set_item("id", &q.id)?;
        out.set_item("question", &q.question)?;
        out.set_item("answers", &q.answers)?;
        out.set_item("hops", q.hops)?;
        out.set_item("family", q.family.name())?;
        out.set_item("level", d.level)?;
        out.set_item("universe_seed", d.universe_seed)?;
        let prompt = serde_json::json!([
            {"role": "system", "content": rulegym::toolcall::search::SYSTEM_PROMPT},
            {"role": "user", "content": q.question},
        ]);
        out.set_item("prompt", value_to_py(py, &prompt)?)?;
        out.set_item("index", Index { inner: d.index })?;
        Ok(out)
    }

    /// Reports an episode's reward (in [0, 1]); returns the level after it.
    fn report(&self, py: Python<'_>, reward: f64) -> PyResult<usize> {
        with_env(py, &self.inner, |c| c.report(reward))
    }

    /// The current level.
    #[getter]
    fn level(&self) -> usize {
        self.inner.lock().expect("not poisoned").level()
    }

    /// Levels of the ladder.
    #[getter]
    fn levels(&self) -> usize {
        self.inner
            .lock()
            .expect("not poisoned")
            .config()
            .ladder
            .len()
    }

    /// The state to resume from (a JSON-able dict).
    fn state<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let state = self.inner.lock().expect("not poisoned").state().clone();
        to_py(py, &state)
    }

    /// The config (a JSON-able dict, defaults filled in).
    fn config<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let config = self.inner.lock().expect("not poisoned").config().clone();
        to_py(py, &config)
    }
}
