//! Dataset exports of the search tasks for RL trainers: verl parquet rows (`data_source`,
//! `prompt`, `ability`, `reward_model: {style: "rule", ground_truth: {target}}`, `extra_info`),
//! SkyRL rows (`data_source`, `prompt`, `env_class`, `reward_spec: {method: "rule", ground_truth:
//! {target}}`, `extra_info`) and TRL rows (flat columns, as `GRPOTrainer` passes every column to
//! the reward functions and to an environment's `reset(**row)`: `prompt`, `answers`, `id`,
//! `question`, `split`, `family`, `hops`, `difficulty`, `kind`, `index_path`, `environment`
//! and, for a non-default configuration, `env_config`), as parquet (low-level writer, no arrow)
//! or JSONL.
//!
//! The ground truth is Search-R1's `{"target": [answers]}` shape, which both trainers' search
//! reward functions read; the prompt is exactly what [`SearchEnv::reset`] returns.

use super::parquet::{
    Column, PROMPT_SCHEMA, list_column, prompt_columns, str_column, write_columns,
};
use super::{ExportError, ExportFormat, head_columns, trainer_row};
use crate::env::Environment;
use crate::llm::ChatMessage;
use crate::question::Question;
use crate::search::{NoRetrieval, Retriever, SearchEnv, SearchEnvConfig, SearchTask};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;

/// The `environment` of every TRL search row (the key of `rulegym.trl.SearchEnvironment` in a
/// `GRPOTrainer(environment_factory={...})` dictionary).
pub const TRL_SEARCH_ENVIRONMENT: &str = "rulegym_search";

/// What goes into every row besides the question.
#[derive(Debug, Clone, PartialEq)]
pub struct ExportOptions {
    /// Target trainer.
    pub format: ExportFormat,
    /// `data_source` of every row (verl picks the reward function by it).
    pub data_source: String,
    /// verl's `ability`.
    pub ability: String,
    /// SkyRL's `env_class` (the id the environment is registered under).
    pub env_class: String,
    /// The environment configuration whose prompt the rows carry.
    pub config: SearchEnvConfig,
    /// The index the rows are searched over, recorded in every row's `extra_info.index_path`
    /// (SkyRL's typed config cannot carry an env config for `rulegym-search-v1`, so the
    /// environment reads it from the row; `""` when unknown).
    pub index_path: String,
}

impl Default for ExportOptions {
    fn default() -> Self {
        ExportOptions {
            format: ExportFormat::Verl,
            data_source: "rulegym_search".into(),
            ability: "fact-reasoning".into(),
            env_class: "rulegym-search-v1".into(),
            config: SearchEnvConfig::default(),
            index_path: String::new(),
        }
    }
}

/// `extra_info` of a row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExtraInfo {
    /// Position of the row in the file.
    pub index: i64,
    /// `train` or `val`.
    pub split: String,
    /// The question id.
    pub id: String,
    /// The question text.
    pub question: String,
    /// Question family name.
    pub family: String,
    /// Relation hops.
    pub hops: i64,
    /// PhantomWiki difficulty.
    pub difficulty: i64,
    /// `who`, `what`, `how-many` or `comparison`.
    pub kind: String,
    /// The index file the environment searches (`""` when the export was not given one).
    pub index_path: String,
    /// The environment configuration as JSON (a [`SearchEnvConfig`]), present only when it
    /// differs from the default (an environment preset or a prompt file): SkyRL's typed config
    /// cannot carry one for `rulegym-search-v1`, so `rulegym.skyrl.SearchEnv` reads it here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env_config: Option<String>,
}

/// One exported row, format-independent.
#[derive(Debug, Clone, PartialEq)]
pub struct ExportRow {
    /// The chat prompt (the environment's `reset`).
    pub prompt: Vec<ChatMessage>,
    /// Gold answers.
    pub target: Vec<String>,
    /// Row metadata.
    pub extra: ExtraInfo,
}

/// The rows of `questions`, in order.
pub fn rows(questions: &[Question], options: &ExportOptions) -> crate::Result<Vec<ExportRow>> {
    let retriever: Arc<dyn Retriever> = Arc::new(NoRetrieval);
    let env_config = if options.config == SearchEnvConfig::default() {
        None
    } else {
        Some(
            serde_json::to_string(&options.config).map_err(|source| crate::Error::Json {
                context: "serialising the environment config".into(),
                source,
            })?,
        )
    };
    questions
        .iter()
        .enumerate()
        .map(|(i, q)| {
            let task = SearchTask {
                question: q.question.clone(),
                answers: q.answers.clone(),
                gold_docs: Vec::new(),
            };
            let mut env = SearchEnv::new(retriever.clone(), options.config.clone(), task)?;
            Ok(ExportRow {
                prompt: env.reset()?,
                target: q.answers.clone(),
                extra: ExtraInfo {
                    index: i as i64,
                    split: q.split.as_str().to_owned(),
                    id: q.id.clone(),
                    question: q.question.clone(),
                    family: q.family.name().to_owned(),
                    hops: q.hops as i64,
                    difficulty: i64::from(q.difficulty),
                    kind: q.kind.as_str().to_owned(),
                    index_path: options.index_path.clone(),
                    env_config: env_config.clone(),
                },
            })
        })
        .collect()
}

/// A row as the trainer's JSON object (the same fields the parquet file holds).
pub fn row_json(row: &ExportRow, options: &ExportOptions) -> Value {
    let label = match options.format {
        ExportFormat::Verl => &options.ability,
        ExportFormat::Skyrl => &options.env_class,
        ExportFormat::Trl => return trl_row_json(row),
    };
    let extra = serde_json::to_value(&row.extra).unwrap_or(Value::Null);
    trainer_row(
        options.format,
        &options.data_source,
        &row.prompt,
        label,
        json!({ "target": row.target }),
        extra,
    )
}

/// A TRL row: the prompt, the gold answers and the question's metadata as top-level columns.
fn trl_row_json(row: &ExportRow) -> Value {
    let e = &row.extra;
    let mut value = json!({
        "prompt": row.prompt,
        "answers": row.target,
        "id": e.id,
        "question": e.question,
        "split": e.split,
        "family": e.family,
        "hops": e.hops,
        "difficulty": e.difficulty,
        "kind": e.kind,
        "index_path": e.index_path,
        "environment": TRL_SEARCH_ENVIRONMENT,
    });
    if let Some(config) = &e.env_config {
        value["env_config"] = json!(config);
    }
    value
}

const EXTRA_SCHEMA: &str = "
  required group extra_info {
    required int64 index;
    required binary split (UTF8);
    required binary id (UTF8);
    required binary question (UTF8);
    required binary family (UTF8);
    required int64 hops;
    required int64 difficulty;
    required binary kind (UTF8);
    required binary index_path (UTF8);
  }";

const TARGET_SCHEMA: &str = "
    required group ground_truth {
      required group target (LIST) {
        repeated group list {
          required binary element (UTF8);
        }
      }
    }";

/// The parquet schema of a format (rows without `extra_info.env_config`).
pub fn parquet_schema(format: ExportFormat) -> String {
    parquet_schema_with(format, false)
}

/// The parquet schema of a format; `env_config`: whether `extra_info` ends with the
/// `env_config` string.
pub fn parquet_schema_with(format: ExportFormat, env_config: bool) -> String {
    let extra = if env_config {
        EXTRA_SCHEMA.replace(
            "required binary index_path (UTF8);",
            "required binary index_path (UTF8);\n    required binary env_config (UTF8);",
        )
    } else {
        EXTRA_SCHEMA.to_owned()
    };
    let schema = match format {
        ExportFormat::Verl => format!(
            "message verl {{\n  required binary data_source (UTF8);{PROMPT_SCHEMA}\n  \
             required binary ability (UTF8);\n  required group reward_model {{\n    \
             required binary style (UTF8);{TARGET_SCHEMA}\n  }}{EXTRA_SCHEMA}\n}}"
        ),
        ExportFormat::Skyrl => format!(
            "message skyrl {{\n  required binary data_source (UTF8);{PROMPT_SCHEMA}\n  \
             required binary env_class (UTF8);\n  required group reward_spec {{\n    \
             required binary method (UTF8);{TARGET_SCHEMA}\n  }}{EXTRA_SCHEMA}\n}}"
        ),
        ExportFormat::Trl => {
            let env_config = if env_config {
                "\n  required binary env_config (UTF8);"
            } else {
                ""
            };
            return format!(
                "message trl {{{PROMPT_SCHEMA}\n  required group answers (LIST) {{\n    \
                 repeated group list {{\n      required binary element (UTF8);\n    }}\n  }}\n  \
                 required binary id (UTF8);\n  required binary question (UTF8);\n  \
                 required binary split (UTF8);\n  required binary family (UTF8);\n  \
                 required int64 hops;\n  required int64 difficulty;\n  \
                 required binary kind (UTF8);\n  required binary index_path (UTF8);\n  \
                 required binary environment (UTF8);{env_config}\n}}"
            );
        }
    };
    schema.replace(EXTRA_SCHEMA, &extra)
}

fn columns(rows: &[ExportRow], options: &ExportOptions) -> Vec<Column> {
    let label = match options.format {
        ExportFormat::Verl => &options.ability,
        ExportFormat::Skyrl => &options.env_class,
        ExportFormat::Trl => return trl_columns(rows),
    };
    let prompts = rows.iter().map(|r| r.prompt.as_slice());
    let mut columns = head_columns(&options.data_source, prompts, label);
    columns.extend([
        list_column(rows.iter().map(|r| r.target.iter().map(String::as_str))),
        Column::Int(rows.iter().map(|r| r.extra.index).collect()),
        str_column(rows.iter().map(|r| r.extra.split.as_str())),
        str_column(rows.iter().map(|r| r.extra.id.as_str())),
        str_column(rows.iter().map(|r| r.extra.question.as_str())),
        str_column(rows.iter().map(|r| r.extra.family.as_str())),
        Column::Int(rows.iter().map(|r| r.extra.hops).collect()),
        Column::Int(rows.iter().map(|r| r.extra.difficulty).collect()),
        str_column(rows.iter().map(|r| r.extra.kind.as_str())),
        str_column(rows.iter().map(|r| r.extra.index_path.as_str())),
    ]);
    if rows.first().is_some_and(|r| r.extra.env_config.is_some()) {
        columns.push(str_column(
            rows.iter()
                .map(|r| r.extra.env_config.as_deref().unwrap_or("")),
        ));
    }
    columns
}

/// The leaf columns of TRL rows, in [`parquet_schema_with`]'s order.
fn trl_columns(rows: &[ExportRow]) -> Vec<Column> {
    let [roles, contents] = prompt_columns(rows.iter().map(|r| r.prompt.as_slice()));
    let text = |f: fn(&ExtraInfo) -> &str| str_column(rows.iter().map(move |r| f(&r.extra)));
    let mut columns = vec![
        roles,
        contents,
        list_column(rows.iter().map(|r| r.target.iter().map(String::as_str))),
        text(|e| &e.id),
        text(|e| &e.question),
        text(|e| &e.split),
        text(|e| &e.family),
        Column::Int(rows.iter().map(|r| r.extra.hops).collect()),
        Column::Int(rows.iter().map(|r| r.extra.difficulty).collect()),
        text(|e| &e.kind),
        text(|e| &e.index_path),
        str_column(rows.iter().map(|_| TRL_SEARCH_ENVIRONMENT)),
    ];
    if rows.first().is_some_and(|r| r.extra.env_config.is_some()) {
        columns.push(text(|e| e.env_config.as_deref().unwrap_or("")));
    }
    columns
}

/// Writes `rows` as one parquet file (one row group, uncompressed), atomically.
pub fn write_parquet(
    path: &Path,
    rows: &[ExportRow],
    options: &ExportOptions,
) -> crate::Result<()> {
    let env_config = rows.first().is_some_and(|r| r.extra.env_config.is_some());
    write_columns(
        path,
        &parquet_schema_with(options.format, env_config),
        columns(rows, options),
    )
}

/// Writes `rows` as JSON lines, atomically.
pub fn write_jsonl(path: &Path, rows: &[ExportRow], options: &ExportOptions) -> crate::Result<()> {
    crate::io::write_jsonl(path, rows.iter().map(|row| row_json(row, options)))
}

/// Exports `questions` to `path`: JSONL when the name ends in `.jsonl`, parquet otherwise.
/// Returns the number of rows.
pub fn export(
    path: &Path,
    questions: &[Question],
    options: &ExportOptions,
) -> crate::Result<usize> {
    if questions.is_empty() {
        return Err(ExportError::Empty.into());
    }
    let rows = rows(questions, options)?;
    if path.extension().is_some_and(|e| e == "jsonl") {
        write_jsonl(path, &rows, options)?;
    } else {
        write_parquet(path, &rows, options)?;
    }
    Ok(rows.len())
}
