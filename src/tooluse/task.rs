//! The tool-use task schema (documented as JSON Schema in `schemas/task.schema.json`): what the
//! agent sees (`instruction`, tools), what only the simulated user knows (`hidden_context`), the
//! world the state-backed tools act on, and the rubric whose items are Prolog rule bodies over the
//! facts of a trajectory (see [`crate::tooluse::rubric`]).
//!
//! Parsing is strict (`deny_unknown_fields`) and [`Task::validate`] checks everything a run relies
//! on, with errors that name the task and the JSON path of the problem.

use super::rubric::{Brief, RubricError, RubricProgram};
pub use super::rubric::{ItemKind, Record, Rubric, RubricItem, WorldState};
use super::schema::{Schema, SchemaError};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Errors from loading or validating tasks.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TaskError {
    /// A task breaks a rule of the schema.
    #[error("task {task:?} at {path}: {message}")]
    Invalid {
        /// The task id (empty when the id itself is missing).
        task: String,
        /// Where in the task, as a JSON path (`tools[2].parameters`).
        path: String,
        /// What is wrong.
        message: String,
    },
    /// A task file could not be read or parsed.
    #[error("{context}: {message}")]
    File {
        /// The file and line.
        context: String,
        /// What went wrong.
        message: String,
    },
    /// No task has the requested id.
    #[error("no task with id {0:?}")]
    NotFound(String),
}

/// One tool-use task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Task {
    /// Unique id (`[A-Za-z0-9_.:-]`, 1-128 characters).
    pub id: String,
    /// The persona the task was written for (one line).
    #[serde(default)]
    pub persona: String,
    /// What the agent sees: an underspecified request.
    pub instruction: String,
    /// What only the simulated user knows.
    #[serde(default)]
    pub hidden_context: HiddenContext,
    /// The tools the agent may call.
    pub tools: Vec<ToolSpec>,
    /// The world state that state-backed tools read and write.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial_state: Option<WorldState>,
    /// The state a successful episode ends in (state-based verification, as tau2-bench).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_state: Option<WorldState>,
    /// The high-level workflow (sub-goals in order), for humans and LLM prompts.
    #[serde(default)]
    pub workflow: Vec<String>,
    /// The rubric: forbidden behaviours, sub-goals, required user interactions.
    pub rubric: Rubric,
    /// Maximum number of agent turns (default: the environment's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<u32>,
}

/// What only the user knows: structured slots plus free text.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HiddenContext {
    /// Named pieces of information the agent must ask for.
    #[serde(default)]
    pub slots: Vec<Slot>,
    /// Free-text background for an LLM user simulator.
    #[serde(default)]
    pub text: String,
}

/// One hidden piece of information.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Slot {
    /// Identifier (`[a-z][a-z0-9_]*`), used in `user_revealed(Step, Slot)` facts.
    pub name: String,
    /// The value the user gives when asked.
    pub value: String,
    /// Words in a question that ask about this slot (default: the words of `name`).
    #[serde(default)]
    pub keywords: Vec<String>,
    /// What the slot is, for LLM prompts.
    #[serde(default)]
    pub description: String,
}

impl Slot {
    /// The keywords a question must mention (lower case): `keywords`, or the words of `name`.
    pub fn effective_keywords(&self) -> Vec<String> {
        if self.keywords.is_empty() {
            self.name
                .split('_')
                .filter(|w| !w.is_empty())
                .map(str::to_lowercase)
                .collect()
        } else {
            self.keywords.iter().map(|k| k.to_lowercase()).collect()
        }
    }
}

/// Whether a tool changes the world.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ToolKind {
    /// Reads only.
    #[serde(rename = "read-only")]
    ReadOnly,
    /// Changes the world state.
    #[serde(rename = "state-modifying")]
    StateModifying,
}

/// One tool: an OpenAI function schema plus SynthAgent's `outputs` schema and its backend.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolSpec {
    /// Function name (`[A-Za-z][A-Za-z0-9_-]{0,63}`).
    pub name: String,
    /// What the tool does.
    #[serde(default)]
    pub description: String,
    /// JSON schema of the arguments (an object schema).
    pub parameters: Value,
    /// JSON schema of the response (required for mapping-simulated tools).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outputs: Option<Value>,
    /// `read-only` or `state-modifying`.
    pub kind: ToolKind,
    /// How calls are answered.
    #[serde(default)]
    pub backend: ToolBackend,
}

impl ToolSpec {
    /// The OpenAI `tools` entry: `{"type": "function", "function": {name, description, parameters}}`.
    pub fn openai_schema(&self) -> Value {
        serde_json::json!({
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            }
        })
    }
}

/// How a tool's calls are answered.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case", deny_unknown_fields)]
pub enum ToolBackend {
    /// The mapping simulator: reuse the recorded response for the same canonical arguments,
    /// otherwise ask an LLM for one that follows `outputs`.
    #[default]
    Mapping,
    /// A deterministic operation over a table of the world state.
    State {
        /// The operation.
        op: StateOp,
        /// The table it acts on.
        table: String,
        /// The argument holding the record key (required for get/insert/update/delete).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        key: Option<String>,
    },
}

/// A state-backed operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StateOp {
    /// The record with the given key: `{"record": {...}}`.
    Get,
    /// Records whose fields equal every given argument: `{"records": [...]}` in key order.
    Find,
    /// Adds a record (all arguments but the key become fields); errors if the key exists.
    Insert,
    /// Sets the given fields of an existing record.
    Update,
    /// Removes a record.
    Delete,
}

/// Options for [`Task::validate`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ValidateOptions {
    /// Whether an LLM judge will score items without a rule.
    pub judge_available: bool,
}

fn valid_id(s: &str) -> bool {
    (1..=128).contains(&s.len())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '-'))
}

fn valid_tool_name(s: &str) -> bool {
    (1..=64).contains(&s.len())
        && s.starts_with(|c: char| c.is_ascii_alphabetic())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Identifiers used as Prolog atoms in facts: `[a-z][a-z0-9_]*`, at most 64 characters.
pub fn valid_ident(s: &str) -> bool {
    (1..=64).contains(&s.len())
        && s.starts_with(|c: char| c.is_ascii_lowercase())
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

impl Task {
    /// Parses one task from JSON text (strict: unknown fields are errors).
    pub fn from_json(text: &str) -> Result<Task, TaskError> {
        serde_json::from_str(text).map_err(|e| TaskError::File {
            context: "parsing task".into(),
            message: e.to_string(),
        })
    }

    /// Checks the task (see [`Task::compile`]) and drops what was compiled.
    pub fn validate(&self, options: ValidateOptions) -> Result<(), TaskError> {
        self.check(options).map(drop)
    }

    /// Checks and compiles the task, the one place a task is compiled: ids and names, tool
    /// schemas compile, state backends refer to declared tables and arguments, slot names are
    /// identifiers, rubric ids are unique and every rule parses and passes the whitelist (items
    /// without a rule need `judge_available`).
    pub fn compile(self, options: ValidateOptions) -> Result<CompiledTask, TaskError> {
        let (program, params, outputs) = self.check(options)?;
        Ok(CompiledTask {
            task: self,
            program,
            params,
            outputs,
        })
    }

    fn check(&self, options: ValidateOptions) -> Result<Compiled, TaskError> {
        let mut compiled_params = BTreeMap::new();
        let mut compiled_outputs = BTreeMap::new();
        let err = |path: String, message: String| TaskError::Invalid {
            task: self.id.clone(),
            path,
            message,
        };
        if !valid_id(&self.id) {
            return Err(err(
                "id".into(),
                "must be 1-128 characters of [A-Za-z0-9_.:-]".into(),
            ));
        }
        if self.instruction.trim().is_empty() {
            return Err(err("instruction".into(), "must not be empty".into()));
        }
        if self.max_turns == Some(0) {
            return Err(err("max_turns".into(), "must be at least 1".into()));
        }
        let mut slot_names = BTreeSet::new();
        for (i, slot) in self.hidden_context.slots.iter().enumerate() {
            let path = format!("hidden_context.slots[{i}]");
            if !valid_ident(&slot.name) {
                return Err(err(
                    format!("{path}.name"),
                    format!("{:?} must match [a-z][a-z0-9_]* (<= 64)", slot.name),
                ));
            }
            if !slot_names.insert(slot.name.as_str()) {
                return Err(err(
                    format!("{path}.name"),
                    format!("duplicate slot {:?}", slot.name),
                ));
            }
            if slot.value.trim().is_empty() {
                return Err(err(format!("{path}.value"), "must not be empty".into()));
            }
        }
        if self.tools.is_empty() {
            return Err(err("tools".into(), "a task needs at least one tool".into()));
        }
        let mut names = BTreeSet::new();
        for (i, tool) in self.tools.iter().enumerate() {
            let path = format!("tools[{i}]");
            if !valid_tool_name(&tool.name) {
                return Err(err(
                    format!("{path}.name"),
                    format!("{:?} must match [A-Za-z][A-Za-z0-9_-]{{0,63}}", tool.name),
                ));
            }
            if !names.insert(tool.name.as_str()) {
                return Err(err(
                    format!("{path}.name"),
                    format!("duplicate tool {:?}", tool.name),
                ));
            }
            let params =
                compile(&tool.parameters).map_err(|m| err(format!("{path}.parameters"), m))?;
            if tool.parameters.get("type").and_then(Value::as_str) != Some("object") {
                return Err(err(
                    format!("{path}.parameters"),
                    "must be an object schema (\"type\": \"object\")".into(),
                ));
            }
            let outputs = match &tool.outputs {
                Some(outputs) => compile(outputs).map_err(|m| err(format!("{path}.outputs"), m))?,
                None => Schema::default(),
            };
            match &tool.backend {
                ToolBackend::Mapping => {
                    if tool.outputs.is_none() {
                        return Err(err(
                            format!("{path}.outputs"),
                            "a mapping-simulated tool needs an outputs schema".into(),
                        ));
                    }
                }
                ToolBackend::State { op, table, key } => {
                    let bpath = format!("{path}.backend");
                    let state = self.initial_state.as_ref().ok_or_else(|| {
                        err(
                            bpath.clone(),
                            "state-backed tools need an initial_state".into(),
                        )
                    })?;
                    if !state.contains_key(table) {
                        return Err(err(
                            format!("{bpath}.table"),
                            format!("table {table:?} is not in initial_state"),
                        ));
                    }
                    let modifies =
                        matches!(op, StateOp::Insert | StateOp::Update | StateOp::Delete);
                    if modifies != (tool.kind == ToolKind::StateModifying) {
                        return Err(err(
                            format!("{path}.kind"),
                            format!(
                                "{op:?} must be declared {}",
                                if modifies {
                                    "state-modifying"
                                } else {
                                    "read-only"
                                }
                            ),
                        ));
                    }
                    match (op, key) {
                        (StateOp::Find, _) => {}
                        (_, None) => {
                            return Err(err(
                                format!("{bpath}.key"),
                                format!("{op:?} needs the name of the key argument"),
                            ));
                        }
                        (_, Some(key)) => {
                            if !params.required().iter().any(|r| r == key) {
                                return Err(err(
                                    format!("{bpath}.key"),
                                    format!("key argument {key:?} must be a required parameter"),
                                ));
                            }
                        }
                    }
                }
            }
            compiled_params.insert(tool.name.clone(), params);
            compiled_outputs.insert(tool.name.clone(), outputs);
        }
        for (name, state) in [
            ("initial_state", &self.initial_state),
            ("expected_state", &self.expected_state),
        ] {
            for table in state.iter().flat_map(|s| s.keys()) {
                if !valid_ident(table) {
                    return Err(err(
                        format!("{name}.{table}"),
                        "table names must match [a-z][a-z0-9_]* (<= 64)".into(),
                    ));
                }
            }
        }
        let mut ids = BTreeSet::new();
        for (kind, item) in self.rubric.items() {
            let path = format!("rubric.{kind:?}.{}", item.id).to_lowercase();
            if !valid_ident(&item.id) {
                return Err(err(
                    path,
                    format!("item id {:?} must match [a-z][a-z0-9_]*", item.id),
                ));
            }
            if !ids.insert(item.id.as_str()) {
                return Err(err(path, format!("duplicate item id {:?}", item.id)));
            }
            if item.rule.is_none() && !options.judge_available {
                return Err(err(
                    path,
                    "an item without a rule needs an LLM judge (none configured)".into(),
                ));
            }
        }
        if self.rubric.subgoals.is_empty() {
            return Err(err(
                "rubric.subgoals".into(),
                "a rubric needs at least one sub-goal".into(),
            ));
        }
        let program = self.rubric_program().map_err(|e| TaskError::Invalid {
            task: self.id.clone(),
            path: "rubric".into(),
            message: e.to_string(),
        })?;
        Ok((program, compiled_params, compiled_outputs))
    }

    /// The task's rubric compiled against its tools, with the brief a judge reads.
    pub fn rubric_program(&self) -> Result<RubricProgram, RubricError> {
        let brief = Brief {
            instruction: self.instruction.clone(),
            known: (self.hidden_context.slots.iter())
                .map(|s| (s.name.clone(), s.value.clone()))
                .collect(),
        };
        let tools = self.tools.iter().map(|t| t.name.clone()).collect();
        RubricProgram::compile(&self.rubric, tools, brief)
    }

    /// The tool with this name.
    pub fn tool(&self, name: &str) -> Option<&ToolSpec> {
        self.tools.iter().find(|t| t.name == name)
    }
}

/// What [`Task::check`] compiles: the rubric program and each tool's parameter and output schemas.
type Compiled = (
    RubricProgram,
    BTreeMap<String, Schema>,
    BTreeMap<String, Schema>,
);

/// A task prepared for rollouts: validated, rubric compiled, tool schemas compiled (by
/// [`Task::compile`]). Share one per task (`Arc`) across rollouts.
pub struct CompiledTask {
    /// The task.
    pub task: Task,
    /// The compiled rubric.
    pub program: RubricProgram,
    /// Each tool's compiled parameter schema (every tool has one).
    pub(super) params: BTreeMap<String, Schema>,
    /// Each tool's compiled output schema (empty when the task declares none).
    pub(super) outputs: BTreeMap<String, Schema>,
}

impl CompiledTask {
    /// The OpenAI `tools` list.
    pub fn openai_tools(&self) -> Vec<Value> {
        self.task.tools.iter().map(|t| t.openai_schema()).collect()
    }
}

fn compile(schema: &Value) -> Result<Schema, String> {
    Schema::compile(schema).map_err(|e: SchemaError| e.to_string())
}

/// Reads tasks from a `.jsonl` file (one task per line) or a `.json` file (one task or an array),
/// and validates each; errors name the file and line.
pub fn load_tasks(path: &Path, options: ValidateOptions) -> Result<Vec<Task>, TaskError> {
    let text = std::fs::read_to_string(path).map_err(|e| TaskError::File {
        context: format!("reading {}", path.display()),
        message: e.to_string(),
    })?;
    let mut tasks: Vec<Task> = Vec::new();
    let trimmed = text.trim_start();
    if trimmed.starts_with('[') {
        tasks = serde_json::from_str(trimmed).map_err(|e| TaskError::File {
            context: format!("parsing {}", path.display()),
            message: e.to_string(),
        })?;
    } else if path.extension().is_some_and(|e| e == "json") && trimmed.starts_with('{') {
        tasks.push(serde_json::from_str(trimmed).map_err(|e| TaskError::File {
            context: format!("parsing {}", path.display()),
            message: e.to_string(),
        })?);
    } else {
        for (line, task) in crate::io::jsonl_records(text.as_bytes()) {
            tasks.push(task.map_err(|e| TaskError::File {
                context: format!("{}:{line}", path.display()),
                message: e.to_string(),
            })?);
        }
    }
    let mut seen = BTreeSet::new();
    for task in &tasks {
        task.validate(options)?;
        if !seen.insert(task.id.clone()) {
            return Err(TaskError::Invalid {
                task: task.id.clone(),
                path: "id".into(),
                message: format!("duplicate task id in {}", path.display()),
            });
        }
    }
    Ok(tasks)
}
