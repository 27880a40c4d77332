//! Dataset exports for RL trainers (verl, SkyRL, TRL): the search tasks' rows
//! ([`search`]), the tool-use tasks' rows and verl configs ([`tooluse`]), and the parquet writer
//! both use ([`parquet`]).

pub mod parquet;
pub mod search;
pub mod tooluse;

pub use search::{ExportOptions, ExportRow, ExtraInfo, TRL_SEARCH_ENVIRONMENT, export};
pub use tooluse::{ToolExportOptions, export_tasks};

use self::parquet::{Column, prompt_columns};
use crate::llm::ChatMessage;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// Errors of the exporters.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExportError {
    /// The parquet writer failed.
    #[error("writing parquet {path}: {source}")]
    Parquet {
        /// The output file.
        path: String,
        /// The underlying error.
        source: ::parquet::errors::ParquetError,
    },
    /// An unknown format name.
    #[error("unknown export format {0:?} (verl, skyrl or trl)")]
    UnknownFormat(String),
    /// Nothing to export.
    #[error("nothing to export (no questions or tasks)")]
    Empty,
    /// The rows do not fit the parquet schema (a bug in the exporter: please report it).
    #[error("parquet schema and rows disagree: {0}")]
    Schema(&'static str),
    /// Writing a YAML config file failed.
    #[error("writing YAML {path}: {message}")]
    Yaml {
        /// The output file.
        path: String,
        /// What failed.
        message: String,
    },
}

/// The trainer a file is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum ExportFormat {
    /// verl (parquet rows with `reward_model`).
    Verl,
    /// SkyRL (rows with `env_class` and `reward_spec`).
    Skyrl,
    /// Hugging Face TRL (`GRPOTrainer`: flat task columns beside `prompt`, an `environment`
    /// column naming the environment a row needs; `python/rulegym/trl.py`).
    Trl,
}

impl std::str::FromStr for ExportFormat {
    type Err = ExportError;
    fn from_str(s: &str) -> Result<Self, ExportError> {
        match s {
            "verl" => Ok(ExportFormat::Verl),
            "skyrl" => Ok(ExportFormat::Skyrl),
            "trl" => Ok(ExportFormat::Trl),
            other => Err(ExportError::UnknownFormat(other.to_owned())),
        }
    }
}

impl std::fmt::Display for ExportFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ExportFormat::Verl => "verl",
            ExportFormat::Skyrl => "skyrl",
            ExportFormat::Trl => "trl",
        })
    }
}

/// The fields every trainer row has: `data_source`, `prompt`, then verl's `ability` and
/// `reward_model: {style: "rule", ground_truth}` or SkyRL's `env_class` and `reward_spec:
/// {method: "rule", ground_truth}` (`label` is the ability or the env class), and `extra_info`.
fn trainer_row(
    format: ExportFormat,
    data_source: &str,
    prompt: &[ChatMessage],
    label: &str,
    ground_truth: Value,
    extra_info: Value,
) -> Value {
    let (label_key, spec_key, style_key) = match format {
        ExportFormat::Verl => ("ability", "reward_model", "style"),
        ExportFormat::Skyrl | ExportFormat::Trl => ("env_class", "reward_spec", "method"),
    };
    json!({
        "data_source": data_source,
        "prompt": prompt,
        label_key: label,
        spec_key: { style_key: "rule", "ground_truth": ground_truth },
        "extra_info": extra_info,
    })
}

/// The leading leaf columns of verl and SkyRL parquet rows, in [`trainer_row`]'s order:
/// `data_source`, the prompt (roles, then contents), the ability or env class (`label`) and the
/// reward style `rule`.
fn head_columns<'a>(
    data_source: &str,
    prompts: impl ExactSizeIterator<Item = &'a [ChatMessage]> + Clone,
    label: &str,
) -> Vec<Column> {
    let n = prompts.len();
    let same = |s: &str| Column::Str(vec![s.into(); n]);
    let [roles, contents] = prompt_columns(prompts);
    vec![
        same(data_source),
        roles,
        contents,
        same(label),
        same("rule"),
    ]
}
