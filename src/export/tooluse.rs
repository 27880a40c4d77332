//! Dataset exports of tool-use tasks ([`crate::tooluse::task`]) for RL trainers.
//!
//! verl (multi-turn agent loop): parquet rows with `data_source`, `prompt` (system prompt and the
//! task's instruction; the tools reach the chat template from the tool config), `ability`,
//! `reward_model: {style: "rule", ground_truth: {task_id}}`, `extra_info: {index, split, id,
//! tools_kwargs: {<tool>: {create_kwargs: {task_id[, tool]}}}, interaction_kwargs: {name,
//! task_id, task}}` and `agent_name` ([`VERL_TOOL_AGENT`] by default), plus three files next to
//! the parquet: the tool config (`<stem>_tool_config.yaml`: one [`VERL_TOOL_CLASS`] entry per
//! exported tool with its OpenAI schema in the form verl keeps, [`verl_visible_schema`]), the
//! agent loop config (`<stem>_agent_loop_config.yaml`: rulegym's agent loop for verl >= 0.8,
//! which runs the simulated user and the rubric itself) and the interaction config
//! (`<stem>_interaction_config.yaml`: the simulated user [`VERL_INTERACTION_CLASS`], for verl
//! <= 0.7 with `agent_name: tool_agent`). The task JSON travels once per row, in
//! `interaction_kwargs`: the agent loop (or the interaction) starts the episode (world state,
//! user, rubric), and every tool call of that rollout acts on it.
//!
//! verl's tool config is global to a run: its tool agent loop renders every tool of the config
//! into every prompt (whatever the row's `tools_kwargs`), and creates a called tool with the
//! row's `tools_kwargs` entry for it. So the config holds the union of the tasks' tools, and a
//! tool name that two tasks give different schemas (common for LLM-made tasks: two different
//! `send_email`) is exported once per schema as `<name>__<first 8 hex of the SHA-256 of the
//! task's OpenAI schema>` (a name with one schema keeps its name, so exports without conflicts
//! are unchanged). The `create_kwargs` of a renamed tool carry `tool`: the task's own name of
//! it, or `""` when the row's task does not have that variant; `rulegym.verl.TaskTool` calls
//! the task's tool by that name. Every row has an entry for every exported tool: one parquet
//! schema serves all rows, and verl reads an absent struct field as null, which its agent loop
//! does not accept. A call to a tool the task does not have reaches the episode under its
//! exported name and fails there like any unknown tool (a `tool_error` fact for the rubric).
//! When a row's task has fewer tools than the config, or renamed ones, its system prompt ends
//! with the list of the tools that are the task's (by exported name).
//!
//! SkyRL: rows with `data_source`, `prompt` (the Hermes prompt, tools listed in the system
//! message, exactly what `rulegym.skyrl.ToolEnv.init` would produce), `env_class`
//! ([`SKYRL_TOOL_ENV`]), `reward_spec: {method: "rule", ground_truth: {task_id}}` and
//! `extra_info: {index, split, id, task}` that `rulegym.skyrl.ToolEnv` consumes directly.
//!
//! TRL (`GRPOTrainer(environment_factory={...})`): flat rows with `prompt` (a system prompt
//! naming the `ask_user` and `finish` tools, and the task's instruction; TRL renders the tools
//! from the environment's methods), `task_id`, `task`, `split` and `environment`:
//! `rulegym_tools_<first 8 hex of the SHA-256 of the task's tool schemas>`, so tasks with the
//! same tools share one environment class and TRL shows each row only its task's tools
//! (`rulegym.trl.tool_environments`).

use super::parquet::{Column, PROMPT_SCHEMA, prompt_columns, str_column, write_columns};
use super::{ExportError, ExportFormat, head_columns, trainer_row};
use crate::llm::{ChatMessage, Role};
use crate::tooluse::env::{Protocol, system_prompt};
use crate::tooluse::task::Task;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The system prompt of TRL tool-use rows: the environment's `ask_user` and `finish` methods
/// are how the model talks to the user and ends the episode.
pub const TRL_TOOL_SYSTEM_PROMPT: &str = "You are a helpful assistant that completes the user's \
     request with the tools available. The request may be missing details: ask the user for them \
     with the ask_user tool, one question per call. Do not guess missing details. When the \
     request is done, call finish with a short summary.";

/// The `environment` of a TRL tool-use row: tasks with the same tools (by canonical OpenAI
/// schema) share it.
pub fn trl_environment(task: &Task) -> String {
    use sha2::Digest;
    let mut hasher = sha2::Sha256::new();
    for tool in &task.tools {
        hasher.update(tool_key(tool).as_bytes());
        hasher.update(b"\n");
    }
    format!("rulegym_tools_{}", &hex::encode(hasher.finalize())[..8])
}

/// `class_name` of the verl tool in the tool config (`python/rulegym/verl.py`).
pub const VERL_TOOL_CLASS: &str = "rulegym.verl.TaskTool";
/// `class_name` of the verl user simulator in the interaction config.
pub const VERL_INTERACTION_CLASS: &str = "rulegym.verl.UserInteraction";
/// `agent_name` of rulegym's tool-use agent loop for verl >= 0.8 (`python/rulegym/verl_agent.py`).
pub const VERL_TOOL_AGENT: &str = "rulegym_tool_agent";
/// `_target_` of rulegym's tool-use agent loop in verl's agent loop config.
pub const VERL_TOOL_AGENT_CLASS: &str = "rulegym.verl_agent.ToolUseAgentLoop";
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
            agent_name: VERL_TOOL_AGENT.into(),
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
    pub prompt: Vec<ChatMessage>,
    /// The task's tools: exported name -> the task's own name.
    pub tools: BTreeMap<String, String>,
    /// The TRL environment of the task ([`trl_environment`]).
    pub environment: String,
}

/// A tool as the export declares it.
#[derive(Debug, Clone, PartialEq)]
pub struct ExportedTool {
    /// Its name in the tool config (the task's name, or `<name>__<hash>` for one of several
    /// schemas under one name).
    pub name: String,
    /// Its name in the tasks that have it.
    pub tool: String,
    /// Its OpenAI function schema, under `name`.
    pub schema: Value,
}

impl ExportedTool {
    /// Whether the export renamed it (its name is shared by tools of other schemas).
    pub fn renamed(&self) -> bool {
        self.name != self.tool
    }
}

/// Rows of a task export and the tools they share.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolExport {
    /// One row per task, in order.
    pub rows: Vec<ToolExportRow>,
    /// Every tool of every task, one per (name, schema), in order of first appearance.
    pub tools: Vec<ExportedTool>,
}

impl ToolExport {
    /// Exported tool names, in the order of [`ToolExport::tools`].
    pub fn tool_names(&self) -> Vec<&str> {
        self.tools.iter().map(|t| t.name.as_str()).collect()
    }

    /// The exported tools' OpenAI schemas, in order.
    pub fn schemas(&self) -> Vec<Value> {
        self.tools.iter().map(|t| t.schema.clone()).collect()
    }
}

/// Longest exported tool name (OpenAI's limit for function names).
const MAX_TOOL_NAME: usize = 64;

/// The exported name of `name`'s variant with `schema` when several schemas share `name`:
/// `<name>__<hex>`, with the shortest hex prefix (8 or more) of the schema's SHA-256 that no
/// name in `taken` has.
fn variant_name(name: &str, schema: &Value, taken: &BTreeSet<String>) -> String {
    let hash = crate::io::sha256_hex(crate::tooluse::mock_tools::canonical_json(schema).as_bytes());
    for len in 8..=hash.len() {
        let keep = MAX_TOOL_NAME.saturating_sub(len + 2).min(name.len());
        let candidate = format!("{}__{}", &name[..keep], &hash[..len]);
        if !taken.contains(&candidate) {
            return candidate;
        }
    }
    format!("{name}__{hash}")
}

/// The key of a tool's (name, schema): its canonical OpenAI schema text (which holds the name).
fn tool_key(tool: &crate::tooluse::task::ToolSpec) -> String {
    crate::tooluse::mock_tools::canonical_json(&tool.openai_schema())
}

/// Every (name, schema) of `tasks` once, in order of first appearance, named for export; with
/// the index of each by [`tool_key`].
fn export_tools(tasks: &[Task]) -> (Vec<ExportedTool>, BTreeMap<String, usize>) {
    let mut seen: Vec<(&str, Value)> = Vec::new();
    let mut index: BTreeMap<String, usize> = BTreeMap::new();
    for tool in tasks.iter().flat_map(|t| &t.tools) {
        if let std::collections::btree_map::Entry::Vacant(e) = index.entry(tool_key(tool)) {
            e.insert(seen.len());
            seen.push((&tool.name, tool.openai_schema()));
        }
    }
    let mut variants: BTreeMap<&str, usize> = BTreeMap::new();
    for (name, _) in &seen {
        *variants.entry(name).or_default() += 1;
    }
    let mut taken: BTreeSet<String> = seen.iter().map(|(n, _)| (*n).to_owned()).collect();
    let mut tools = Vec::with_capacity(seen.len());
    for (name, schema) in seen {
        let exported = if variants[name] > 1 {
            let v = variant_name(name, &schema, &taken);
            taken.insert(v.clone());
            v
        } else {
            name.to_owned()
        };
        let mut schema = schema;
        schema["function"]["name"] = json!(exported);
        tools.push(ExportedTool {
            name: exported,
            tool: name.to_owned(),
            schema,
        });
    }
    (tools, index)
}

/// Builds the rows of `tasks` (validated by the caller, e.g. [`crate::tooluse::task::load_tasks`]).
/// The prompt follows the trainer: verl renders the tools through its chat template, so its
/// system prompt is the OpenAI-protocol one (ending with the task's tool names when the export
/// has other tools too, or renamed the task's); SkyRL's text environment gets the Hermes
/// prompt with the tools listed. A tool name that tasks give different schemas is exported
/// once per schema under a distinct name (see the module documentation).
pub fn tool_rows(tasks: &[Task], options: &ToolExportOptions) -> crate::Result<ToolExport> {
    if tasks.is_empty() {
        return Err(ExportError::Empty.into());
    }
    let protocol = match options.format {
        ExportFormat::Verl | ExportFormat::Trl => Protocol::OpenAi,
        ExportFormat::Skyrl => Protocol::Hermes,
    };
    let (tools, index) = export_tools(tasks);
    let mut rows = Vec::with_capacity(tasks.len());
    for (i, task) in tasks.iter().enumerate() {
        let mut own = BTreeMap::new();
        let mut listed = Vec::new();
        for tool in &task.tools {
            let exported = &tools[index[&tool_key(tool)]];
            own.insert(exported.name.clone(), tool.name.clone());
            listed.push(exported.name.as_str());
        }
        let text = serde_json::to_string(task).map_err(|source| crate::Error::Json {
            context: format!("serialising task {}", task.id),
            source,
        })?;
        let mut system = match options.format {
            ExportFormat::Trl => TRL_TOOL_SYSTEM_PROMPT.to_owned(),
            _ => system_prompt(task, protocol),
        };
        let partial = own.len() < tools.len() || own.iter().any(|(e, t)| e != t);
        if options.format == ExportFormat::Verl && partial {
            system.push_str(&format!(
                "\n\nOf the functions available, this request has only these: {}.",
                listed.join(", ")
            ));
        }
        rows.push(ToolExportRow {
            index: i as i64,
            task_id: task.id.clone(),
            task: text,
            prompt: vec![
                ChatMessage::text(Role::System, system),
                ChatMessage::text(Role::User, task.instruction.clone()),
            ],
            tools: own,
            environment: trl_environment(task),
        });
    }
    Ok(ToolExport { rows, tools })
}

/// The `create_kwargs` of exported tool `tool` in `row`: the task id, and for a renamed tool
/// the task's own name of it (`""` when the task does not have this variant).
fn create_kwargs(row: &ToolExportRow, tool: &ExportedTool) -> Value {
    if tool.renamed() {
        let own = row.tools.get(&tool.name).map_or("", String::as_str);
        json!({ "task_id": row.task_id, "tool": own })
    } else {
        json!({ "task_id": row.task_id })
    }
}

/// A row as the trainer's JSON object (the same fields the parquet file holds). `tools` are
/// the export's tools: every row carries a `tools_kwargs` entry for each, as one parquet schema
/// serves all rows.
pub fn tool_row_json(
    row: &ToolExportRow,
    tools: &[ExportedTool],
    options: &ToolExportOptions,
) -> Value {
    let (label, extra) = match options.format {
        ExportFormat::Verl => {
            let tools_kwargs: serde_json::Map<String, Value> = tools
                .iter()
                .map(|tool| {
                    let kwargs = json!({ "create_kwargs": create_kwargs(row, tool) });
                    (tool.name.clone(), kwargs)
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
        ExportFormat::Trl => {
            return json!({
                "prompt": row.prompt,
                "task_id": row.task_id,
                "task": row.task,
                "split": options.split,
                "environment": row.environment,
            });
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

/// The parquet schema of a task export with these tools.
pub fn tool_parquet_schema(format: ExportFormat, tools: &[ExportedTool]) -> String {
    const TASK_ID: &str =
        "required group ground_truth {\n      required binary task_id (UTF8);\n    }";
    match format {
        ExportFormat::Verl => {
            let mut kwargs = String::new();
            for tool in tools {
                let name = &tool.name;
                let own = if tool.renamed() {
                    "\n          required binary tool (UTF8);"
                } else {
                    ""
                };
                kwargs.push_str(&format!(
                    "\n      required group {name} {{\n        required group create_kwargs {{\n          \
                     required binary task_id (UTF8);{own}\n        }}\n      }}"
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
        ExportFormat::Trl => format!(
            "message trl {{{PROMPT_SCHEMA}\n  required binary task_id (UTF8);\n  \
             required binary task (UTF8);\n  required binary split (UTF8);\n  \
             required binary environment (UTF8);\n}}"
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
        ExportFormat::Trl => {
            let [roles, contents] = prompt_columns(rows.iter().map(|r| r.prompt.as_slice()));
            return vec![
                roles,
                contents,
                ids(),
                str_column(rows.iter().map(|r| r.task.as_str())),
                same(&options.split),
                str_column(rows.iter().map(|r| r.environment.as_str())),
            ];
        }
    };
    let prompts = rows.iter().map(|r| r.prompt.as_slice());
    let mut columns = head_columns(&options.data_source, prompts, label);
    columns.extend([
        ids(),
        Column::Int(rows.iter().map(|r| r.index).collect()),
        same(&options.split),
        ids(),
    ]);
    match options.format {
        ExportFormat::Verl => {
            for tool in &export.tools {
                columns.push(ids());
                if tool.renamed() {
                    let own = rows
                        .iter()
                        .map(|r| r.tools.get(&tool.name).map_or("", String::as_str));
                    columns.push(str_column(own));
                }
            }
            columns.push(same(&options.interaction));
            columns.push(ids());
            columns.push(str_column(rows.iter().map(|r| r.task.as_str())));
            columns.push(same(&options.agent_name));
        }
        ExportFormat::Skyrl => columns.push(str_column(rows.iter().map(|r| r.task.as_str()))),
        // TRL rows returned their columns above.
        ExportFormat::Trl => {}
    }
    columns
}

/// verl's tool config: one [`VERL_TOOL_CLASS`] entry per exported tool, with its OpenAI schema
/// in the form verl passes to the model ([`verl_visible_schema`]).
pub fn verl_tool_config(tools: &[Value]) -> Value {
    let entries: Vec<Value> = tools
        .iter()
        .map(|schema| {
            json!({
                "class_name": VERL_TOOL_CLASS,
                "config": { "type": "native" },
                "tool_schema": verl_visible_schema(schema),
            })
        })
        .collect();
    json!({ "tools": entries })
}

/// Keys of a parameter that verl's `OpenAIFunctionPropertySchema` keeps (verl 0.7-0.9).
const VERL_PROPERTY_KEYS: [&str; 3] = ["type", "description", "enum"];
/// Keys of the parameters object that verl's `OpenAIFunctionParametersSchema` keeps.
const VERL_PARAMETERS_KEYS: [&str; 3] = ["type", "properties", "required"];
/// Every JSON type, for a parameter whose schema names none (verl requires `type`).
const ANY_TYPE: [&str; 7] = [
    "string", "number", "integer", "boolean", "array", "object", "null",
];

/// An OpenAI tool schema in the form verl passes to the model unchanged. verl validates tool
/// schemas with pydantic models that keep, per parameter, only `type` (required), `description`
/// and `enum`, and for the parameters object only `type`, `properties` and `required`; every
/// other keyword (`items`, `minLength`, `minimum`, `additionalProperties`, nested `properties`,
/// `oneOf`, ...) is silently dropped before the chat template renders the tools. So the
/// dropped keywords are folded, as compact canonical JSON, into the description the model
/// reads: a parameter's into its own description (`... (JSON Schema: {"items": ...})`), the
/// parameters object's into the function description. A parameter without `type` gets the
/// types its `oneOf`/`anyOf` branches, `const` or `enum` values name, else every JSON type.
/// The environment still validates calls against the task's full schema.
pub fn verl_visible_schema(schema: &Value) -> Value {
    let mut out = schema.clone();
    let Some(function) = out.get_mut("function").and_then(Value::as_object_mut) else {
        return out;
    };
    let mut description = function
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    if let Some(params) = function.get("parameters").and_then(Value::as_object) {
        let mut kept = serde_json::Map::new();
        let mut dropped = serde_json::Map::new();
        for (key, value) in params {
            if VERL_PARAMETERS_KEYS.contains(&key.as_str()) && key != "properties" {
                kept.insert(key.clone(), value.clone());
            } else if key != "properties" {
                dropped.insert(key.clone(), value.clone());
            }
        }
        kept.entry("type").or_insert_with(|| json!("object"));
        let properties: serde_json::Map<String, Value> = params
            .get("properties")
            .and_then(Value::as_object)
            .map(|props| {
                props
                    .iter()
                    .map(|(name, p)| (name.clone(), verl_visible_property(p)))
                    .collect()
            })
            .unwrap_or_default();
        kept.insert("properties".into(), Value::Object(properties));
        if !dropped.is_empty() {
            description = with_note(&description, "Parameters JSON Schema", &dropped);
        }
        function.insert("parameters".into(), Value::Object(kept));
    }
    function.insert("description".into(), json!(description));
    out
}

/// One parameter's schema reduced to verl's keys, the rest folded into its description.
fn verl_visible_property(property: &Value) -> Value {
    let Some(obj) = property.as_object() else {
        return json!({ "type": ANY_TYPE, "description": format!("(JSON Schema: {property})") });
    };
    let mut kept = serde_json::Map::new();
    let mut dropped = serde_json::Map::new();
    for (key, value) in obj {
        let verl_shape = match key.as_str() {
            "type" => {
                value.is_string()
                    || value
                        .as_array()
                        .is_some_and(|a| a.iter().all(Value::is_string))
            }
            "description" => value.is_string(),
            "enum" => value.is_array(),
            _ => false,
        };
        if verl_shape && VERL_PROPERTY_KEYS.contains(&key.as_str()) {
            kept.insert(key.clone(), value.clone());
        } else {
            dropped.insert(key.clone(), value.clone());
        }
    }
    if !kept.contains_key("type") {
        kept.insert("type".into(), inferred_type(obj));
    }
    if !dropped.is_empty() {
        let description = kept
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or("");
        let note = with_note(description, "JSON Schema", &dropped);
        kept.insert("description".into(), json!(note));
    }
    Value::Object(kept)
}

/// The JSON type(s) a schema without `type` admits, as far as its branches or values say.
fn inferred_type(schema: &serde_json::Map<String, Value>) -> Value {
    fn type_of(v: &Value) -> &'static str {
        match v {
            Value::Null => "null",
            Value::Bool(_) => "boolean",
            Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
            Value::Number(_) => "number",
            Value::String(_) => "string",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
        }
    }
    let mut types: Vec<&str> = Vec::new();
    for key in ["oneOf", "anyOf"] {
        for branch in schema
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            match branch.get("type") {
                Some(Value::String(t)) => types.push(t),
                Some(Value::Array(ts)) => types.extend(ts.iter().filter_map(Value::as_str)),
                _ => return json!(ANY_TYPE),
            }
        }
    }
    if let Some(c) = schema.get("const") {
        types.push(type_of(c));
    }
    for v in schema
        .get("enum")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        types.push(type_of(v));
    }
    let mut seen = BTreeSet::new();
    types.retain(|t| seen.insert(*t));
    match types.len() {
        0 => json!(ANY_TYPE),
        1 => json!(types[0]),
        _ => json!(types),
    }
}

/// `text` with ` (<label>: <canonical JSON of dropped>)` appended.
fn with_note(text: &str, label: &str, dropped: &serde_json::Map<String, Value>) -> String {
    let json = crate::tooluse::mock_tools::canonical_json(&Value::Object(dropped.clone()));
    if text.is_empty() {
        format!("({label}: {json})")
    } else {
        format!("{text} ({label}: {json})")
    }
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

/// Where [`export_tasks`] writes verl's agent loop config for an output file `path`.
pub fn agent_loop_config_path(path: &Path) -> PathBuf {
    sibling(path, "_agent_loop_config.yaml")
}

/// verl's agent loop config (`actor_rollout_ref.rollout.agent.agent_loop_config_path`, verl >=
/// 0.8): rulegym's tool-use agent loop ([`VERL_TOOL_AGENT_CLASS`]) under [`VERL_TOOL_AGENT`],
/// with the episode's turn cap.
pub fn verl_agent_loop_config(options: &ToolExportOptions) -> Value {
    json!([{
        "name": VERL_TOOL_AGENT,
        "_target_": VERL_TOOL_AGENT_CLASS,
        "max_turns": options.max_turns,
    }])
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
    let text = serde_yaml_ng::to_string(value).map_err(|e| ExportError::Yaml {
        path: path.display().to_string(),
        message: e.to_string(),
    })?;
    crate::io::write_file_atomic(path, text.as_bytes())
}

/// Exports `tasks` to `path` (JSONL when the name ends in `.jsonl`, parquet otherwise); for
/// verl also writes the tool, interaction (verl <= 0.7) and agent loop (verl >= 0.8) configs
/// next to it. Returns the files written, the
/// rows file first. Every file is written atomically; bytes depend only on the input.
pub fn export_tasks(
    path: &Path,
    tasks: &[Task],
    options: &ToolExportOptions,
) -> crate::Result<Vec<PathBuf>> {
    let export = tool_rows(tasks, options)?;
    if path.extension().is_some_and(|e| e == "jsonl") {
        let rows = export.rows.iter();
        crate::io::write_jsonl(path, rows.map(|r| tool_row_json(r, &export.tools, options)))?;
    } else {
        write_columns(
            path,
            &tool_parquet_schema(options.format, &export.tools),
            tool_columns(&export, options),
        )?;
    }
    let mut files = vec![path.to_path_buf()];
    if options.format == ExportFormat::Verl {
        let tools = tool_config_path(path);
        write_yaml(&tools, &verl_tool_config(&export.schemas()))?;
        let interaction = interaction_config_path(path);
        write_yaml(&interaction, &verl_interaction_config(options))?;
        let agent_loop = agent_loop_config_path(path);
        write_yaml(&agent_loop, &verl_agent_loop_config(options))?;
        files.extend([tools, interaction, agent_loop]);
    }
    Ok(files)
}
