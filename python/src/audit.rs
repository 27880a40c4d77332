//! `rulegym.testing.audit_rewards`: a training loop's logged rewards beside rulegym's exact
//! reward (the library's `rewardcheck::audit`, as `rulegym reward-check --audit` runs it).

use crate::prelude::*;
use rulegym::rewardcheck::audit;

/// Audits `rollouts` (JSON texts, one per rollout: `{"id" or "question" or "prompt",
/// "response", "reward"[, "answers"][, "step"]}` or verl's dump lines) against rulegym's exact
/// reward, the gold answers of an id, a question text or a prompt looked up in `dataset`. The
/// report as a dict.
#[pyfunction]
#[pyo3(signature = (rollouts, dataset=None, tolerance=audit::DEFAULT_TOLERANCE))]
pub(crate) fn audit_rewards<'py>(
    py: Python<'py>,
    rollouts: Vec<String>,
    dataset: Option<std::path::PathBuf>,
    tolerance: f64,
) -> PyResult<Bound<'py, PyAny>> {
    let text = rollouts.join("\n");
    let report = py
        .allow_threads(|| audit::audit_log(&text, dataset.as_deref(), tolerance))
        .map_err(err)?;
    to_py(py, &report)
}
