//! Answer scoring (F1, exact match) and answer extraction.

use crate::prelude::*;

pub(crate) fn mode(name: &str) -> PyResult<ScoreMode> {
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
pub(crate) fn score<'py>(
    py: Python<'py>,
    prediction: &str,
    answers: Vec<String>,
    mode: &str,
    extract: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let m = self::mode(mode)?;
    let text = if extract {
        reward::last_answer([prediction]).unwrap_or_else(|| prediction.to_owned())
    } else {
        prediction.to_owned()
    };
    let s = reward::score(&text, &answers, m);
    let out = PyDict::new(py);
    out.set_item("f1", s.f1)?;
    out.set_item("em", s.em)?;
    out.set_item("precision", s.precision)?;
    out.set_item("recall", s.recall)?;
    Ok(out)
}

/// The text of the last complete `<answer>...</answer>` in the given turns, or None.
#[pyfunction]
pub(crate) fn last_answer(turns: Vec<String>) -> Option<String> {
    reward::last_answer(turns.iter().map(String::as_str))
}

/// SQuAD answer normalisation (lower-case, no punctuation, no articles, single spaces).
#[pyfunction]
pub(crate) fn normalize_answer(text: &str) -> String {
    reward::normalize_squad(text)
}
