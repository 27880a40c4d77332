//! Tool simulators. State-backed tools are deterministic operations over the task's world state
//! ([`execute_state_tool`]); every other tool goes through the [`MappingSimulator`], SynthAgent's
//! per-task map M from (tool, canonical JSON of the arguments) to a response. An exact canonical
//! hit is reused (microseconds, no LLM). A miss is ONE LLM request (plus a corrective retry when
//! the answer is invalid) that shows the whole mapping (within a character budget) and asks for
//! either `{"same_as": K}`, naming an earlier call of the same tool that asks for the same thing
//! (the paper's semantic-equivalence check: its response is reused), or `{"response": ...}`, a
//! new response that follows the tool's description and `outputs` schema (validated; never a
//! guess). Either way the new arguments are appended to M. The map is shared by all rollouts of a
//! task, persisted atomically, bounded, and safe under concurrent rollouts (in one process: one
//! generation per key, others wait; across processes: a file lock around read-merge-write, first
//! writer wins).

use crate::llm::{ChatMessage, ChatRequest, LlmBackend, LlmError, Role, parse_json_answer};
use crate::tooluse::schema::Schema;
use crate::tooluse::task::{Record, StateOp, ToolBackend, ToolSpec, WorldState};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// Errors from a simulator.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SimError {
    /// The LLM's response was invalid every time it was asked.
    #[error("tool {tool}: no valid response after {attempts} attempts; last problem: {reason}")]
    InvalidResponse {
        /// Tool name.
        tool: String,
        /// Attempts made.
        attempts: u32,
        /// Why the last response was rejected.
        reason: String,
    },
    /// The mapping reached its capacity.
    #[error("the mapping of task {task} is full ({capacity} entries)")]
    Full {
        /// Task id.
        task: String,
        /// The bound.
        capacity: usize,
    },
    /// A miss and no LLM backend was configured.
    #[error("tool {0}: no recorded response for these arguments and no LLM backend configured")]
    NoBackend(String),
    /// The LLM backend failed.
    #[error(transparent)]
    Llm(#[from] LlmError),
    /// The mapping file could not be read or written.
    #[error("mapping file {path}: {message}")]
    Storage {
        /// The file.
        path: String,
        /// What went wrong.
        message: String,
    },
}

/// Canonical JSON: sorted keys, no whitespace, integral floats written as integers. Two argument
/// objects that differ only in key order, formatting or `1` vs `1.0` map to the same text.
pub fn canonical_json(value: &Value) -> String {
    fn norm(v: &Value) -> Value {
        match v {
            Value::Number(n) if !n.is_i64() && !n.is_u64() => match n.as_f64() {
                Some(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => json!(f as i64),
                _ => v.clone(),
            },
            Value::Array(items) => Value::Array(items.iter().map(norm).collect()),
            Value::Object(map) => {
                Value::Object(map.iter().map(|(k, v)| (k.clone(), norm(v))).collect())
            }
            other => other.clone(),
        }
    }
    // serde_json's Map is a BTreeMap here (no preserve_order feature): keys come out sorted.
    serde_json::to_string(&norm(value)).unwrap_or_default()
}

/// Why a state-backed tool call failed (a tool-side error, answered to the agent).
pub type ToolFailure = String;

/// Runs a state-backed tool on `state`. Results: get -> `{"record": {...}}`, find ->
/// `{"records": [...]}` (key order), insert/update -> `{"ok": true, "record": {...}}`, delete ->
/// `{"ok": true}`. Arguments were validated against the tool's `parameters` before.
pub fn execute_state_tool(
    tool: &ToolSpec,
    args: &Map<String, Value>,
    state: &mut WorldState,
) -> Result<Value, ToolFailure> {
    let ToolBackend::State { op, table, key } = &tool.backend else {
        return Err(format!("{} is not a state-backed tool", tool.name));
    };
    let records = state.entry(table.clone()).or_default();
    let key_value = |key: &Option<String>| -> Result<String, ToolFailure> {
        let name = key.as_deref().ok_or("no key argument configured")?;
        match args.get(name) {
            Some(Value::String(s)) => Ok(s.clone()),
            Some(Value::Number(n)) => Ok(n.to_string()),
            Some(other) => Err(format!("{name} must be a string or a number, got {other}")),
            None => Err(format!("missing argument {name}")),
        }
    };
    let fields = |key: &Option<String>| -> Record {
        args.iter()
            .filter(|(k, _)| Some(k.as_str()) != key.as_deref())
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    match op {
        StateOp::Get => {
            let k = key_value(key)?;
            let record = records
                .get(&k)
                .ok_or_else(|| format!("no {table} record {k:?}"))?;
            Ok(json!({ "record": record }))
        }
        StateOp::Find => {
            let found: Vec<Value> = records
                .iter()
                .filter(|(k, record)| {
                    args.iter().all(|(name, want)| {
                        record.get(name) == Some(want)
                            || (key.as_deref() == Some(name.as_str())
                                && want.as_str() == Some(k.as_str()))
                    })
                })
                .map(|(_, r)| Value::Object(r.clone()))
                .collect();
            Ok(json!({ "records": found }))
        }
        StateOp::Insert => {
            let k = key_value(key)?;
            if records.contains_key(&k) {
                return Err(format!("{table} record {k:?} already exists"));
            }
            let record = fields(key);
            records.insert(k, record.clone());
            Ok(json!({"ok": true, "record": record}))
        }
        StateOp::Update => {
            let k = key_value(key)?;
            let record = records
                .get_mut(&k)
                .ok_or_else(|| format!("no {table} record {k:?}"))?;
            for (name, v) in fields(key) {
                record.insert(name, v);
            }
            Ok(json!({"ok": true, "record": record}))
        }
        StateOp::Delete => {
            let k = key_value(key)?;
            records
                .remove(&k)
                .ok_or_else(|| format!("no {table} record {k:?}"))?;
            Ok(json!({"ok": true}))
        }
    }
}

/// SHA-256 (hex) of a world state's canonical JSON (tau2-bench style state comparison).
pub fn state_hash(state: &WorldState) -> String {
    let text = canonical_json(&serde_json::to_value(state).unwrap_or_default());
    crate::io::sha256_hex(text.as_bytes())
}

/// Options of the mapping simulator.
#[derive(Debug, Clone, PartialEq)]
pub struct MappingConfig {
    /// Most entries per task; a miss beyond it is [`SimError::Full`].
    pub capacity: usize,
    /// Attempts at a valid answer per miss (a rejected answer is shown to the model with the
    /// reason before it tries again).
    pub max_attempts: u32,
    /// SynthAgent's consistency check: in the same request that produces a new response, the
    /// model may instead name an earlier call of the same tool that asks for the same thing
    /// (`{"same_as": K}`), whose response is then reused and recorded for the new arguments.
    pub semantic_equivalence: bool,
    /// Most characters of earlier entries shown in the prompt (the whole mapping, this tool's
    /// entries first, then the others, each in key order, until the budget is spent).
    pub context_chars: usize,
    /// Model name for the backend.
    pub model: String,
    /// Sampling temperature.
    pub temperature: Option<f64>,
    /// Sampling seed (attempt `a` sends `seed + a`).
    pub seed: Option<u64>,
}

impl Default for MappingConfig {
    fn default() -> Self {
        MappingConfig {
            capacity: 1000,
            max_attempts: 3,
            semantic_equivalence: true,
            context_chars: 16_000,
            model: "simulator".into(),
            temperature: Some(0.0),
            seed: Some(0),
        }
    }
}

/// One entry of the mapping.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MappingEntry {
    /// Tool name.
    pub tool: String,
    /// Canonical JSON of the arguments.
    pub args: String,
    /// The response.
    pub response: Value,
    /// When the simulator judged these arguments equivalent to an earlier call of the same
    /// tool: that call's canonical arguments (the response is the earlier one's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub same_as: Option<String>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct MappingFile {
    task: String,
    entries: Vec<MappingEntry>,
}

type Key = (String, String);

/// A recorded response and, for an equivalence hit, the arguments it was matched to.
#[derive(Debug, Clone, PartialEq)]
struct Stored {
    response: Value,
    same_as: Option<String>,
}

#[derive(Default)]
struct MapState {
    entries: BTreeMap<Key, Stored>,
    in_flight: BTreeMap<Key, Arc<Mutex<()>>>,
}

impl MapState {
    /// The entries as file records, in canonical (key) order.
    fn entry_list(&self) -> Vec<MappingEntry> {
        self.entries
            .iter()
            .map(|((tool, args), stored)| MappingEntry {
                tool: tool.clone(),
                args: args.clone(),
                response: stored.response.clone(),
                same_as: stored.same_as.clone(),
            })
            .collect()
    }

    /// Adds the entries of a file; on a conflict the entry already held wins when `keep_own`,
    /// the file's otherwise.
    fn merge(&mut self, file: MappingFile, keep_own: bool) {
        for e in file.entries {
            let stored = Stored {
                response: e.response,
                same_as: e.same_as,
            };
            if keep_own {
                self.entries.entry((e.tool, e.args)).or_insert(stored);
            } else {
                self.entries.insert((e.tool, e.args), stored);
            }
        }
    }
}

/// What the model answered for a missed call.
#[derive(Debug, Clone, PartialEq)]
enum Answer {
    /// Reuse the response of the shown entry with these arguments.
    SameAs(String),
    /// A new response.
    New(Value),
}

/// The per-task mapping simulator. `Sync`: share one per task across rollouts.
pub struct MappingSimulator {
    task: String,
    path: Option<PathBuf>,
    backend: Option<Arc<dyn LlmBackend>>,
    config: MappingConfig,
    state: Mutex<MapState>,
}

impl MappingSimulator {
    /// A simulator for `task`, persisted at `path` (loaded if it exists), answering misses with
    /// `backend`.
    pub fn new(
        task: &str,
        path: Option<PathBuf>,
        backend: Option<Arc<dyn LlmBackend>>,
        config: MappingConfig,
    ) -> Result<Self, SimError> {
        let sim = MappingSimulator {
            task: task.to_owned(),
            path,
            backend,
            config,
            state: Mutex::new(MapState::default()),
        };
        if let Some(path) = &sim.path {
            let file = read_mapping(path)?;
            sim.lock().merge(file, false);
        }
        Ok(sim)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, MapState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The task id.
    pub fn task(&self) -> &str {
        &self.task
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.lock().entries.len()
    }

    /// Whether the mapping is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// All entries in canonical order.
    pub fn entries(&self) -> Vec<MappingEntry> {
        self.lock().entry_list()
    }

    /// Adds an entry if the key is free (seeding from fixtures); returns the recorded response.
    pub fn insert(&self, tool: &str, args: &Value, response: Value) -> Result<Value, SimError> {
        let key = (tool.to_owned(), canonical_json(args));
        self.commit(
            key,
            Stored {
                response,
                same_as: None,
            },
        )
    }

    /// The exact canonical hit, if any (no LLM call). Cost: one canonicalisation and a B-tree
    /// lookup under a mutex.
    pub fn get(&self, tool: &str, args: &Value) -> Option<Value> {
        let key = (tool.to_owned(), canonical_json(args));
        self.lock().entries.get(&key).map(|s| s.response.clone())
    }

    /// The response for a call: the recorded one, or (one LLM request per attempt) an earlier
    /// equivalent call's or a new validated one.
    pub fn lookup(
        &self,
        tool: &ToolSpec,
        outputs: &Schema,
        args: &Value,
    ) -> Result<Value, SimError> {
        let key = (tool.name.clone(), canonical_json(args));
        let slot = {
            let mut st = self.lock();
            if let Some(hit) = st.entries.get(&key) {
                return Ok(hit.response.clone());
            }
            st.in_flight.entry(key.clone()).or_default().clone()
        };
        // One generation per key: concurrent rollouts with the same call wait here.
        let _guard = slot.lock().unwrap_or_else(|e| e.into_inner());
        let result = self.fill(tool, outputs, &key);
        self.lock().in_flight.remove(&key);
        result
    }

    fn fill(&self, tool: &ToolSpec, outputs: &Schema, key: &Key) -> Result<Value, SimError> {
        if let Some(hit) = self.lock().entries.get(key) {
            return Ok(hit.response.clone());
        }
        if let Some(hit) = self.reload_hit(key)? {
            return Ok(hit);
        }
        if self.len() >= self.config.capacity {
            return Err(SimError::Full {
                task: self.task.clone(),
                capacity: self.config.capacity,
            });
        }
        let backend = self
            .backend
            .as_ref()
            .ok_or_else(|| SimError::NoBackend(tool.name.clone()))?;
        let shown = self.context(&tool.name);
        let stored = match self.ask(backend.as_ref(), tool, outputs, &key.1, &shown)? {
            Answer::SameAs(args) => {
                // Only shown entries are accepted, and entries are never removed.
                let earlier = self
                    .lock()
                    .entries
                    .get(&(tool.name.clone(), args.clone()))
                    .cloned();
                let response =
                    earlier
                        .map(|s| s.response)
                        .ok_or_else(|| SimError::InvalidResponse {
                            tool: tool.name.clone(),
                            attempts: 1,
                            reason: format!("the matched entry {args} is gone"),
                        })?;
                Stored {
                    response,
                    same_as: Some(args),
                }
            }
            Answer::New(response) => Stored {
                response,
                same_as: None,
            },
        };
        self.commit(key.clone(), stored)
    }

    /// The entries shown to the model: this tool's first, then the others, each in key order,
    /// while they fit in [`MappingConfig::context_chars`].
    fn context(&self, tool: &str) -> Vec<(Key, String)> {
        let st = self.lock();
        let line = |(t, a): &Key, s: &Stored| format!("{t} {a} -> {}", canonical_json(&s.response));
        let own = st.entries.iter().filter(|((t, _), _)| t == tool);
        let others = st.entries.iter().filter(|((t, _), _)| t != tool);
        let mut shown = Vec::new();
        let mut budget = self.config.context_chars;
        for (key, stored) in own.chain(others) {
            let text = line(key, stored);
            if text.len() > budget {
                break;
            }
            budget -= text.len();
            shown.push((key.clone(), text));
        }
        shown
    }

    /// The request for a missed call (before any corrective turn).
    fn request_messages(
        &self,
        tool: &ToolSpec,
        args: &str,
        shown: &[(Key, String)],
    ) -> Vec<ChatMessage> {
        let outputs_text = tool
            .outputs
            .as_ref()
            .map(canonical_json)
            .unwrap_or_else(|| "{}".into());
        let mut system = format!(
            "You simulate the tool `{}` in the mock world of one task. Description: {}\nIts \
             output follows this JSON schema: {outputs_text}\nNever contradict earlier \
             responses or deny that the world of the task exists.",
            tool.name, tool.description
        );
        if !shown.is_empty() {
            system.push_str("\nCalls answered so far in this world:");
            for (i, (_, line)) in shown.iter().enumerate() {
                system.push_str(&format!("\n[{}] {line}", i + 1));
            }
        }
        if self.offers_same_as(tool, shown) {
            system.push_str(&format!(
                "\nAnswer the new call with ONLY one JSON object: {{\"same_as\": K}} when \
                 earlier call [K] of `{}` asks for exactly the same thing (the same meaning, \
                 however it is written), so that its response is reused; otherwise \
                 {{\"response\": OUTPUT}} with a new output that follows the schema. No \
                 narration, no code fences.",
                tool.name
            ));
        } else {
            system.push_str(
                "\nAnswer the new call with ONLY one JSON object: {\"response\": OUTPUT} with \
                 an output that follows the schema. No narration, no code fences.",
            );
        }
        vec![
            ChatMessage::text(Role::System, system),
            ChatMessage::text(Role::User, format!("{} {args}", tool.name)),
        ]
    }

    /// Whether the request offers `{"same_as": K}`: the check is on and an earlier call of the
    /// same tool is shown.
    fn offers_same_as(&self, tool: &ToolSpec, shown: &[(Key, String)]) -> bool {
        self.config.semantic_equivalence && shown.iter().any(|((t, _), _)| *t == tool.name)
    }

    /// The JSON schema of an answer (sent as the request's `response_format`).
    fn answer_schema(&self, tool: &ToolSpec, shown: &[(Key, String)]) -> Value {
        let output = tool.outputs.clone().unwrap_or_else(|| json!({}));
        let response = json!({
            "type": "object",
            "properties": {"response": output},
            "required": ["response"],
            "additionalProperties": false,
        });
        if !self.offers_same_as(tool, shown) {
            return response;
        }
        let same_as = json!({
            "type": "object",
            "properties": {"same_as": {"type": "integer", "minimum": 1, "maximum": shown.len()}},
            "required": ["same_as"],
            "additionalProperties": false,
        });
        json!({"anyOf": [same_as, response]})
    }

    /// Asks for a missed call's answer, validating it; a rejected answer is shown to the model
    /// with the reason, up to [`MappingConfig::max_attempts`] attempts.
    fn ask(
        &self,
        backend: &dyn LlmBackend,
        tool: &ToolSpec,
        outputs: &Schema,
        args: &str,
        shown: &[(Key, String)],
    ) -> Result<Answer, SimError> {
        let mut messages = self.request_messages(tool, args, shown);
        let mut reason = String::new();
        for attempt in 0..self.config.max_attempts {
            let mut request = ChatRequest::new(&self.config.model, messages.clone())
                .json_schema("simulated_tool_answer", self.answer_schema(tool, shown));
            request.temperature = self.config.temperature;
            request.seed = self.config.seed.map(|s| s + u64::from(attempt));
            let answer = backend.chat(&request)?;
            let text = answer.message.content_str().to_owned();
            match self.read_answer(&text, tool, outputs, shown) {
                Ok(a) => return Ok(a),
                Err(why) => {
                    reason = why;
                    messages.push(ChatMessage::text(Role::Assistant, text));
                    messages.push(ChatMessage::text(
                        Role::User,
                        format!(
                            "Invalid answer ({reason}). Answer again with only the JSON object."
                        ),
                    ));
                }
            }
        }
        Err(SimError::InvalidResponse {
            tool: tool.name.clone(),
            attempts: self.config.max_attempts,
            reason,
        })
    }

    /// Reads an answer: `{"same_as": K}` naming a shown entry of this tool (when the check is
    /// on), `{"response": OUTPUT}`, or a bare OUTPUT; an output must follow the `outputs`
    /// schema.
    fn read_answer(
        &self,
        text: &str,
        tool: &ToolSpec,
        outputs: &Schema,
        shown: &[(Key, String)],
    ) -> Result<Answer, String> {
        let value = parse_json_answer(text)?;
        if let Some(k) = value
            .get("same_as")
            .filter(|_| value.as_object().is_some_and(|o| o.len() == 1))
        {
            if !self.config.semantic_equivalence {
                return Err("same_as is not accepted here: give a response".into());
            }
            let k = k
                .as_u64()
                .ok_or_else(|| format!("same_as must be an entry number, got {k}"))?;
            return match k.checked_sub(1).and_then(|i| shown.get(i as usize)) {
                Some(((t, a), _)) if *t == tool.name => Ok(Answer::SameAs(a.clone())),
                Some(((t, _), _)) => Err(format!(
                    "entry [{k}] is a call of `{t}`, not of `{}`",
                    tool.name
                )),
                None => Err(format!("there is no entry [{k}]")),
            };
        }
        let output = match value.as_object() {
            Some(o) if o.len() == 1 && o.contains_key("response") => o["response"].clone(),
            _ => value,
        };
        outputs
            .validate(&output)
            .map_err(|e| format!("violates outputs: {e}"))?;
        Ok(Answer::New(output))
    }

    /// Records `stored` under `key` unless present (in memory and on disk); returns the
    /// recorded response.
    fn commit(&self, key: Key, stored: Stored) -> Result<Value, SimError> {
        {
            let mut st = self.lock();
            if let Some(existing) = st.entries.get(&key) {
                return Ok(existing.response.clone());
            }
            if st.entries.len() >= self.config.capacity {
                return Err(SimError::Full {
                    task: self.task.clone(),
                    capacity: self.config.capacity,
                });
            }
            st.entries.insert(key.clone(), stored.clone());
        }
        if self.path.is_some() {
            return self.persist(&key, stored);
        }
        Ok(stored.response)
    }

    /// Read-merge-write under a file lock; the disk's entry wins if another process recorded the
    /// same key first.
    fn persist(&self, key: &Key, stored: Stored) -> Result<Value, SimError> {
        let path = self.path.as_ref().expect("checked by caller");
        let storage = |message: String| SimError::Storage {
            path: path.display().to_string(),
            message,
        };
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| storage(e.to_string()))?;
        }
        let lock_path = path.with_extension("lock");
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| storage(format!("opening {}: {e}", lock_path.display())))?;
        lock.lock().map_err(|e| storage(format!("locking: {e}")))?;
        let result = (|| {
            let disk = read_mapping(path)?;
            let mut st = self.lock();
            // Entries from other processes; on a conflict the one on disk wins.
            st.merge(disk, false);
            let recorded = st
                .entries
                .entry(key.clone())
                .or_insert(stored)
                .response
                .clone();
            let file = MappingFile {
                task: self.task.clone(),
                entries: st.entry_list(),
            };
            drop(st);
            let bytes = serde_json::to_vec_pretty(&file).map_err(|e| storage(e.to_string()))?;
            crate::io::write_file_atomic(path, &bytes).map_err(|e| storage(e.to_string()))?;
            Ok(recorded)
        })();
        let _ = lock.unlock();
        result
    }

    fn reload_hit(&self, key: &Key) -> Result<Option<Value>, SimError> {
        let Some(path) = &self.path else {
            return Ok(None);
        };
        let disk = read_mapping(path)?;
        let mut st = self.lock();
        st.merge(disk, true);
        Ok(st.entries.get(key).map(|s| s.response.clone()))
    }
}

fn read_mapping(path: &std::path::Path) -> Result<MappingFile, SimError> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| SimError::Storage {
            path: path.display().to_string(),
            message: format!("corrupt mapping file: {e}"),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(MappingFile::default()),
        Err(e) => Err(SimError::Storage {
            path: path.display().to_string(),
            message: e.to_string(),
        }),
    }
}
