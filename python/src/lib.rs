//! Python bindings of rulegym (`rulegym._rulegym`): universe and question generation, the
//! search environment, answer scoring, the retriever and the GRPO math over NumPy arrays.
//!
//! Conventions: configurations are plain dicts (the JSON shape of the Rust config structs,
//! unknown keys rejected); results are dicts and lists; every Rust error becomes a
//! `rulegym.RulegymError` (a `ValueError`) carrying the Rust message; the GIL is released
//! while Rust works (generation, retrieval, environment steps, GRPO).

/// What every binding module uses: PyO3, NumPy, the rulegym types and the shared helpers.
mod prelude {
    pub(crate) use crate::convert::*;
    pub(crate) use crate::{err, with_env};
    pub(crate) use numpy::{
        PyReadonlyArray1, PyReadonlyArray2, PyReadwriteArray1, PyReadwriteArray2,
        PyUntypedArrayMethods,
    };
    pub(crate) use pyo3::create_exception;
    pub(crate) use pyo3::exceptions::PyValueError;
    pub(crate) use pyo3::prelude::*;
    pub(crate) use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyList, PyString};
    pub(crate) use rulegym::env::Environment;
    pub(crate) use rulegym::grpo::{self, GrpoConfig, GrpoStats, TokenBatch};
    pub(crate) use rulegym::question::{Question, QuestionConfig};
    pub(crate) use rulegym::retrieval::SearchIndex;
    pub(crate) use rulegym::reward::{self, ScoreMode};
    pub(crate) use rulegym::search::{self as search, Retriever, SearchEnvConfig, SearchTask};
    pub(crate) use rulegym::universe::{Universe, UniverseConfig};
    pub(crate) use std::collections::BTreeMap;
    pub(crate) use std::path::{Path, PathBuf};
    pub(crate) use std::sync::atomic::{AtomicU64, Ordering};
    pub(crate) use std::sync::{Arc, Mutex, OnceLock};
}

use prelude::*;

mod audit;
mod cli;
mod convert;
mod curriculum;
mod grpo_numpy;
mod retrieval;
mod rewardcheck;
mod score;
mod search_env;
mod toolcall;
mod tooluse;
mod universe;

create_exception!(
    _rulegym,
    RulegymError,
    PyValueError,
    "An error reported by rulegym's Rust core (the message is the Rust error's)."
);

create_exception!(
    _rulegym,
    ToolCallError,
    RulegymError,
    "A tool call that was not carried out (`ToolSession.call`): `.kind` is OpenEnv's error type \
     (`tool_not_found`, `invalid_args`, `execution_error`); no turn was taken."
);

pub(crate) fn err(e: impl std::fmt::Display) -> PyErr {
    RulegymError::new_err(e.to_string())
}

/// Runs `f` on a locked environment with the GIL released (environments are shared by Python
/// threads; a step may retrieve or score for milliseconds).
pub(crate) fn with_env<E: Send, T: Send, X: std::fmt::Display + Send>(
    py: Python<'_>,
    env: &Mutex<E>,
    f: impl FnOnce(&mut E) -> Result<T, X> + Send,
) -> PyResult<T> {
    py.allow_threads(|| f(&mut env.lock().expect("not poisoned")))
        .map_err(err)
}

/// The Python extension module.
#[pymodule]
fn _rulegym(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("RulegymError", m.py().get_type::<RulegymError>())?;
    m.add("ToolCallError", m.py().get_type::<ToolCallError>())?;
    m.add_class::<toolcall::World>()?;
    m.add("INVALID_ACTION", search::INVALID_ACTION)?;
    // The test suite's trip task (tools search_flights, book_flight, get_booking,
    // refund_booking), shipped so that the guides' tool-use blocks run without a checkout.
    m.add(
        "EXAMPLE_TASK",
        include_str!("../../tests/fixtures/tools/trip.json"),
    )?;
    m.add("DEFAULT_PROMPT", search::DEFAULT_PROMPT)?;
    m.add_class::<retrieval::Index>()?;
    m.add_class::<search_env::SearchEnv>()?;
    m.add_class::<toolcall::ToolSession>()?;
    m.add_class::<curriculum::Curriculum>()?;
    m.add(
        "SEARCH_TOOL_SYSTEM_PROMPT",
        rulegym::toolcall::search::SYSTEM_PROMPT,
    )?;
    m.add_function(wrap_pyfunction!(cli::run_cli, m)?)?;
    m.add_function(wrap_pyfunction!(audit::audit_rewards, m)?)?;
    m.add_function(wrap_pyfunction!(search_env::search_tools, m)?)?;
    m.add_function(wrap_pyfunction!(search_env::demonstrations, m)?)?;
    m.add_class::<tooluse::RubricScorer>()?;
    m.add_class::<tooluse::ToolEnv>()?;
    m.add_class::<tooluse::Simulation>()?;
    m.add_class::<rewardcheck::CaseSource>()?;
    m.add_class::<rewardcheck::Case>()?;
    m.add_function(wrap_pyfunction!(rewardcheck::reward_check, m)?)?;
    m.add_function(wrap_pyfunction!(rewardcheck::reward_properties, m)?)?;
    m.add_class::<rewardcheck::ToolCaseSource>()?;
    m.add_class::<rewardcheck::ToolCase>()?;
    m.add_function(wrap_pyfunction!(rewardcheck::reward_check_tools, m)?)?;
    m.add_function(wrap_pyfunction!(rewardcheck::tool_reward_properties, m)?)?;
    m.add_function(wrap_pyfunction!(universe::generate_universe, m)?)?;
    m.add_function(wrap_pyfunction!(universe::generate_questions, m)?)?;
    m.add_function(wrap_pyfunction!(universe::generate_questions_jsonl, m)?)?;
    m.add_function(wrap_pyfunction!(universe::generate_dataset, m)?)?;
    m.add_function(wrap_pyfunction!(universe::generate_datasets, m)?)?;
    m.add_function(wrap_pyfunction!(retrieval::build_index, m)?)?;
    m.add_function(wrap_pyfunction!(search_env::oracle, m)?)?;
    m.add_function(wrap_pyfunction!(search_env::bench_rust_steps, m)?)?;
    m.add_function(wrap_pyfunction!(score::score, m)?)?;
    m.add_function(wrap_pyfunction!(score::last_answer, m)?)?;
    m.add_function(wrap_pyfunction!(score::normalize_answer, m)?)?;
    m.add_function(wrap_pyfunction!(grpo_numpy::grpo_bytes_copied, m)?)?;
    m.add_function(wrap_pyfunction!(grpo_numpy::group_advantages, m)?)?;
    m.add_function(wrap_pyfunction!(grpo_numpy::policy_loss, m)?)?;
    m.add_function(wrap_pyfunction!(grpo_numpy::policy_loss_padded, m)?)?;
    Ok(())
}
