//! Dataset exports of tool-use tasks ([`crate::synth::task`]) for RL trainers.
//!
//! verl (multi-turn agent loop): parquet rows with `data_source`, `prompt` (system prompt and the
//! task's instruction; the tools reach the chat template from the tool config), `ability`,
//! `reward_model: {style: "rule", ground_truth: {task_id}}`, `extra_info: {index, split, id,
//! tools_kwargs: {<tool>: {create_kwargs: {task_id}}}, interaction_kwargs: {name, task_id,
//! task}}` and `agent_name: "tool_agent"`, plus two files next to the parquet: the tool config
//! (`<stem>_tool_config.yaml`: one [`VERL_TOOL_CLASS`] entry per tool with its OpenAI schema) and
//! the interaction config (`<stem>_interaction_config.yaml`: the simulated user
//! [`VERL_INTERACTION_CLASS`]). The task JSON travels once per row, in `interaction_kwargs`: the
//! interaction starts the episode (world state, user, rubric) under verl's request id, and every
//! tool call of that request acts on it.
//!
//! SkyRL: rows with `data_source`, `prompt` (the Hermes prompt, tools listed in the system
//! message, exactly what `rulegym.skyrl.ToolEnv.init` would produce), `env_class`
//! ([`SKYRL_TOOL_ENV`]), `reward_spec: {method: "rule", ground_truth: {task_id}}` and
//! `extra_info: {index, split, id, task}` that `rulegym.skyrl.ToolEnv` consumes directly.

use super::Message;
use super::export::{
    Column, ExportError, ExportFormat, PROMPT_SCHEMA, prompt_columns, str_column, trainer_row,
    write_columns, write_json_lines,
};
use super::tool::{Protocol, system_prompt};
use crate::synth::task::Task;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// `class_name` of the verl tool in the tool config (`python/rulegym/verl.py`).
pub const VERL_TOOL_CLASS: &str = "rulegym.verl.TaskTool";
/// `class_name` of the verl user simulator in the interaction config.
pub const VERL_INTERACTION_CLASS: &str = "rulegym.verl.UserInteraction";
/// Default interaction name (`extra_info.interaction_kwargs.name`).
pub const INTERACTION_NAME: &str = "rulegym_user";
/// The SkyRL environment id `rulegym.skyrl.register_tool_env()` registers.
pub const SKYRL_TOOL_ENV: &str = "rulegym-tool-v1";

/// What goes into every row besides the task.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolExportOptions {
    /// Target trainer.
    pub format: ExportFormat,
    /// `data_source` of every row.
    pub data_source: String,
    /// verl's `ability`.
    pub ability: String,
    /// SkyRL's `env_class`.
    pub env_class: String,
    /// `extra_info.split` of every row (tasks carry no split of their own).
    pub split: String,
    /// verl's `agent_name` (the agent loop that runs the row).
    pub agent_name: String,
    /// verl interaction name.
    pub interaction: String,
    /// Environment turns (tool calls and user turns) per episode, written into the interaction
    /// config (a task's `max_turns` overrides it).
    pub max_turns: u32,
}

impl Default for ToolExportOptions {
    fn default() -> Self {
        ToolExportOptions {
            format: ExportFormat::Verl,
            data_source: "rulegym_tools".into(),
            ability: "tool-use".into(),
            env_class: SKYRL_TOOL_ENV.into(),
            split: "train".into(),
            agent_name: "tool_agent".into(),
            interaction: INTERACTION_NAME.into(),
            max_turns: 16,
        }
    }
}

/// One exported task, format-independent.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolExportRow {
    /// Position of the row in the file.
    pub index: i64,
    /// The task id.
    pub task_id: String,
    /// The task as JSON text (what the environment is rebuilt from).
    pub task: String,
    /// The chat prompt: system prompt and the task's instruction.
    pub prompt: Vec<Message>,
}

/// Rows of a task export and the tools they share.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolExport {
    /// One row per task, in order.
    pub rows: Vec<ToolExportRow>,
    /// Every tool of every task (OpenAI function schemas), in order of first appearance.
    pub tools: Vec<Value>,
}

impl ToolExport {
    /// Tool names, in the order of [`ToolExport::tools`].
    pub fn tool_names(&self) -> Vec<&str> {
        self.tools
            .iter()
            .filter_map(|t| t["function"]["name"].as_str())
            .collect()
    }
}

/// Builds the rows of `tasks` (validated by the caller, e.g. [`crate::synth::task::load_tasks`]).
/// The prompt follows the trainer: verl renders the tools through its chat template, so its
/// system prompt is the OpenAI-protocol one; SkyRL's text environment gets the Hermes prompt with
/// the tools listed. Errors when two tasks give one tool name different schemas.
pub fn tool_rows(tasks: &[Task], options: &ToolExportOptions) -> crate::Result<ToolExport> {
    if tasks.is_empty() {
        return Err(ExportError::Empty.into());
    }
    let protocol = match options.format {
        ExportFormat::Verl => Protocol::OpenAi,
        ExportFormat::Skyrl => Protocol::Hermes,
    };
    let mut tools = Vec::new();
    let mut declared: BTreeMap<&str, (usize, &str)> = BTreeMap::new();
    let mut rows = Vec::with_capacity(tasks.len());
    for (i, task) in tasks.iter().enumerate() {
        for tool in &task.tools {
            let schema = tool.openai_schema();
            match declared.get(tool.name.as_str()) {
                None => {
                    declared.insert(&tool.name, (tools.len(), &task.id));
                    tools.push(schema);
                }
                Some(&(at, first)) if tools[at] != schema => {
                    return Err(ExportError::ToolConflict {
                        tool: tool.name.clone(),
                        first: first.to_owned(),
                        second: task.id.clone(),
                    }
                    .into());
                }
                Some(_) => {}
            }
        }
        let text = serde_json::to_string(task).map_err(|source| crate::Error::Json {
            context: format!("serialising task {}", task.id),
            source,
        })?;
        rows.push(ToolExportRow {
            index: i as i64,
            task_id: task.id.clone(),
            task: text,
            prompt: vec![
                Message::new("system", system_prompt(task, protocol)),
                Message::new("user", task.instruction.clone()),
            ],
        });
    }
    Ok(ToolExport { rows, tools })
}

/// A row as the trainer's JSON object (the same fields the parquet file holds). `tools` are
/// the export's tool names (every row carries `tools_kwargs` for each, as one parquet schema
/// serves all rows).
pub fn tool_row_json(row: &ToolExportRow, tools: &[&str], options: &ToolExportOptions) -> Value {
    let (label, extra) = match options.format {
        ExportFormat::Verl => {
            let tools_kwargs: serde_json::Map<String, Value> = tools
                .iter()
                .map(|name| {
                    let kwargs = json!({ "create_kwargs": { "task_id": row.task_id } });
                    ((*name).to_owned(), kwargs)
                })
                .collect();
            let extra = json!({
                "index": row.index,
                "split": options.split,
                "id": row.task_id,
                "tools_kwargs": tools_kwargs,
                "interaction_kwargs": {
                    "name": options.interaction,
                    "task_id": row.task_id,
                    "task": row.task,
                },
            });
            (&options.ability, extra)
        }
        ExportFormat::Skyrl => {
            let extra = json!({
                "index": row.index,
                "split": options.split,
                "id": row.task_id,
                "task": row.task,
            });
            (&options.env_class, extra)
        }
    };
    let mut value = trainer_row(
        options.format,
        &options.data_source,
        &row.prompt,
        label,
        json!({ "task_id": row.task_id }),
        extra,
    );
    if options.format == ExportFormat::Verl {
        value["agent_name"] = json!(options.agent_name);
    }
    value
}

/// The parquet schema of a task export with these tool names.
pub fn tool_parquet_schema(format: ExportFormat, tools: &[&str]) -> String {
    const TASK_ID: &str =
        "required group ground_truth {\n      required binary task_id (UTF8);\n    }";
    match format {
        ExportFormat::Verl => {
            let mut kwargs = String::new();
            for name in tools {
                kwargs.push_str(&format!(
                    "\n      required group {name} {{\n        required group create_kwargs {{\n          \
                     required binary task_id (UTF8);\n        }}\n      }}"
                ));
            }
            format!(
                "message verl {{\n  required binary data_source (UTF8);{PROMPT_SCHEMA}\n  \
                 required binary ability (UTF8);\n  required group reward_model {{\n    \
                 required binary style (UTF8);\n    {TASK_ID}\n  }}\n  \
                 required group extra_info {{\n    required int64 index;\n    \
                 required binary split (UTF8);\n    required binary id (UTF8);\n    \
                 required group tools_kwargs {{{kwargs}\n    }}\n    \
                 required group interaction_kwargs {{\n      required binary name (UTF8);\n      \
                 required binary task_id (UTF8);\n      required binary task (UTF8);\n    }}\n  }}\n  \
                 required binary agent_name (UTF8);\n}}"
            )
        }
        ExportFormat::Skyrl => format!(
            "message skyrl {{\n  required binary data_source (UTF8);{PROMPT_SCHEMA}\n  \
             required binary env_class (UTF8);\n  required group reward_spec {{\n    \
             required binary method (UTF8);\n    {TASK_ID}\n  }}\n  \
             required group extra_info {{\n    required int64 index;\n    \
             required binary split (UTF8);\n    required binary id (UTF8);\n    \
             required binary task (UTF8);\n  }}\n}}"
        ),
    }
}

fn tool_columns(export: &ToolExport, options: &ToolExportOptions) -> Vec<Column> {
    let rows = &export.rows;
    let n = rows.len();
    let same = |s: &str| Column::Str(vec![s.into(); n]);
    let ids = || str_column(rows.iter().map(|r| r.task_id.as_str()));
    let label = match options.format {
        ExportFormat::Verl => &options.ability,
        ExportFormat::Skyrl => &options.env_class,
    };
    let [roles, contents] = prompt_columns(rows.iter().map(|r| r.prompt.as_slice()));
    let mut columns = vec![
        same(&options.data_source),
        roles,
        contents,
        same(label),
        same("rule"),
        ids(),
        Column::Int(rows.iter().map(|r| r.index).collect()),
        same(&options.split),
        ids(),
    ];
    match options.format {
        ExportFormat::Verl => {
            columns.extend(export.tools.iter().map(|_| ids()));
            columns.push(same(&options.interaction));
            columns.push(ids());
            columns.push(str_column(rows.iter().map(|r| r.task.as_str())));
            columns.push(same(&options.agent_name));
        }
        ExportFormat::Skyrl => columns.push(str_column(rows.iter().map(|r| r.task.as_str()))),
    }
    columns
}

/// verl's tool config: one [`VERL_TOOL_CLASS`] entry per tool, with the tool's OpenAI schema.
pub fn verl_tool_config(tools: &[Value]) -> Value {
    let entries: Vec<Value> = tools
        .iter()
        .map(|schema| {
            json!({
                "class_name": VERL_TOOL_CLASS,
                "config": { "type": "native" },
                "tool_schema": schema,
            })
        })
        .collect();
    json!({ "tools": entries })
}

/// verl's interaction config: the simulated user under `options.interaction`.
pub fn verl_interaction_config(options: &ToolExportOptions) -> Value {
    json!({
        "interaction": [{
            "name": options.interaction,
            "class_name": VERL_INTERACTION_CLASS,
            "config": { "max_turns": options.max_turns },
        }]
    })
}

/// `dir/<stem><suffix>` for an output file `dir/<stem>.<ext>`.
fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let stem = path
        .file_stem()
        .map_or_else(|| "export".into(), |s| s.to_string_lossy().into_owned());
    path.with_file_name(format!("{stem}{suffix}"))
}

/// Where [`export_tasks`] writes verl's tool config for an output file `path`.
pub fn tool_config_path(path: &Path) -> PathBuf {
    sibling(path, "_tool_config.yaml")
}

/// Where [`export_tasks`] writes verl's interaction config for an output file `path`.
pub fn interaction_config_path(path: &Path) -> PathBuf {
    sibling(path, "_interaction_config.yaml")
}

fn write_yaml(path: &Path, value: &Value) -> crate::Result<()> {
    let text = serde_yaml_ng::to_string(value)
        .map_err(|e| crate::Error::Config(format!("writing YAML {}: {e}", path.display())))?;
    crate::dataset::write_file_atomic(path, text.as_bytes())
}

/// Exports `tasks` to `path` (JSONL when the name ends in `.jsonl`, parquet otherwise); for
/// verl also writes the tool and interaction configs next to it. Returns the files written, the
/// rows file first. Every file is written atomically; bytes depend only on the input.
pub fn export_tasks(
    path: &Path,
    tasks: &[Task],
    options: &ToolExportOptions,
) -> crate::Result<Vec<PathBuf>> {
    let export = tool_rows(tasks, options)?;
    let names = export.tool_names();
    if path.extension().is_some_and(|e| e == "jsonl") {
        let rows = export.rows.iter();
        write_json_lines(path, rows.map(|r| tool_row_json(r, &names, options)))?;
    } else {
        write_columns(
            path,
            &tool_parquet_schema(options.format, &names),
            tool_columns(&export, options),
        )?;
    }
    let mut files = vec![path.to_path_buf()];
    if options.format == ExportFormat::Verl {
        let tools = tool_config_path(path);
        write_yaml(&tools, &verl_tool_config(&export.tools))?;
        let interaction = interaction_config_path(path);
        write_yaml(&interaction, &verl_interaction_config(options))?;
        files.extend([tools, interaction]);
    }
    Ok(files)
}
