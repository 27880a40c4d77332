//! `rulegym.testing.audit_rewards`: a training loop's logged rewards beside rulegym's exact
//! reward (the library's `rewardcheck::audit`, as `rulegym reward-check --audit` runs it).

use crate::prelude::*;
use rulegym::rewardcheck::audit;

/// Audits `rollouts` (JSON texts, one per rollout: `{"id" or "question", "response", "reward"
/// [, "answers"]}` or verl's dump lines) against rulegym's exact reward, the gold answers of
/// an id or a question text looked up in `dataset`. The report as a dict.
#[pyfunction]
#[pyo3(signature = (rollouts, dataset=None, tolerance=audit::DEFAULT_TOLERANCE))]
pub(crate) fn audit_rewards<'py>(
    py: Python<'py>,
    rollouts: Vec<String>,
    dataset: Option<std::path::PathBuf>,
    tolerance: f64,
) -> PyResult<Bound<'py, PyAny>> {
    if tolerance.is_nan() || tolerance < 0.0 {
        return Err(err(format!(
            "tolerance {tolerance} is not a non-negative number"
        )));
    }
    let report = py
        .allow_threads(|| {
            let gold = match &dataset {
                Some(dir) => audit::GoldLookup::new(&rulegym::dataset::load_questions(dir)?),
                None => audit::GoldLookup::default(),
            };
            let text = rollouts.join("\n");
            let (lines, errors) = audit::read_log(&text, &gold);
            Ok::<_, rulegym::Error>(audit::audit(&lines, errors, tolerance))
        })
        .map_err(err)?;
    to_py(py, &report)
}
