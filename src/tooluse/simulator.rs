//! Tool simulators. State-backed tools are deterministic operations over the task's world state
//! ([`execute_state_tool`]); every other tool goes through the [`MappingSimulator`], a per-task
//! map from (tool, canonical JSON of the arguments) to a response: an exact canonical hit is
//! reused; a miss asks an LLM for a response that follows the tool's description and `outputs`
//! schema, validates it, and appends it. The map is shared by all rollouts of a task, persisted
//! atomically, bounded, and safe under concurrent rollouts (in one process: one generation per
//! key, others wait; across processes: a file lock around read-merge-write, first writer wins).

use crate::llm::{ChatMessage, ChatRequest, LlmBackend, LlmError, parse_json_answer};
use crate::tooluse::schema::Schema;
use crate::tooluse::task::{Record, StateOp, ToolBackend, ToolSpec, WorldState};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// Errors from a simulator.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
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
    /// Attempts at a valid response per miss.
    pub max_attempts: u32,
    /// First ask the LLM whether an existing entry of the same tool is equivalent.
    pub ask_equivalence: bool,
    /// Earlier entries of the same tool shown in the prompt (for consistency).
    pub context_entries: usize,
    /// Model name for the backend.
    pub model: String,
    /// Sampling temperature.
    pub temperature: Option<f64>,
    /// Sampling seed.
    pub seed: Option<u64>,
}

impl Default for MappingConfig {
    fn default() -> Self {
        MappingConfig {
            capacity: 1000,
            max_attempts: 3,
            ask_equivalence: false,
            context_entries: 8,
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
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct MappingFile {
    task: String,
    entries: Vec<MappingEntry>,
}

type Key = (String, String);

#[derive(Default)]
struct MapState {
    entries: BTreeMap<Key, Value>,
    in_flight: BTreeMap<Key, Arc<Mutex<()>>>,
}

impl MapState {
    /// The entries as file records, in canonical (key) order.
    fn entry_list(&self) -> Vec<MappingEntry> {
        self.entries
            .iter()
            .map(|((tool, args), response)| MappingEntry {
                tool: tool.clone(),
                args: args.clone(),
                response: response.clone(),
            })
            .collect()
    }
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
            let mut st = sim.lock();
            for e in file.entries {
                st.entries.insert((e.tool, e.args), e.response);
            }
        }
        Ok(sim)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, MapState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
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
        self.commit(key, response)
    }

    /// The exact canonical hit, if any (no LLM call). Cost: one canonicalisation and a B-tree
    /// lookup under a mutex.
    pub fn get(&self, tool: &str, args: &Value) -> Option<Value> {
        let key = (tool.to_owned(), canonical_json(args));
        self.lock().entries.get(&key).cloned()
    }

    /// The response for a call: the recorded one, or a new validated one from the LLM.
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
                return Ok(hit.clone());
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
            return Ok(hit.clone());
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
        let earlier: Vec<(String, Value)> = {
            let st = self.lock();
            st.entries
                .range((tool.name.clone(), String::new())..)
                .take_while(|((t, _), _)| *t == tool.name)
                .map(|((_, a), r)| (a.clone(), r.clone()))
                .collect()
        };
        if self.config.ask_equivalence
            && !earlier.is_empty()
            && let Some(i) = self.ask_equivalent(backend.as_ref(), tool, &key.1, &earlier)?
        {
            let response = earlier[i].1.clone();
            return self.commit(key.clone(), response);
        }
        let response = self.generate(backend.as_ref(), tool, outputs, &key.1, &earlier)?;
        self.commit(key.clone(), response)
    }

    fn generate(
        &self,
        backend: &dyn LlmBackend,
        tool: &ToolSpec,
        outputs: &Schema,
        args: &str,
        earlier: &[(String, Value)],
    ) -> Result<Value, SimError> {
        let outputs_text = tool
            .outputs
            .as_ref()
            .map(canonical_json)
            .unwrap_or_else(|| "{}".into());
        let mut system = format!(
            "You simulate the tool `{}`. Description: {}\nAnswer every call with ONLY a JSON \
             value that follows this output schema: {outputs_text}\nNo narration, no code \
             fences, no explanation. Never contradict earlier responses or deny that the world \
             of the task exists.",
            tool.name, tool.description
        );
        let shown = earlier.len().saturating_sub(self.config.context_entries);
        if shown < earlier.len() {
            system.push_str("\nEarlier calls and responses:");
            for (a, r) in &earlier[shown..] {
                system.push_str(&format!("\n{a} -> {}", canonical_json(r)));
            }
        }
        let mut messages = vec![
            ChatMessage::text("system", system),
            ChatMessage::text("user", args.to_owned()),
        ];
        let mut reason = String::new();
        for attempt in 0..self.config.max_attempts {
            let mut request = ChatRequest::new(&self.config.model, messages.clone());
            request.temperature = self.config.temperature;
            request.seed = self.config.seed.map(|s| s + u64::from(attempt));
            let answer = backend.chat(&request)?;
            let text = answer.message.content_str().to_owned();
            match parse_json_answer(&text).and_then(|v| {
                outputs
                    .validate(&v)
                    .map_err(|e| format!("violates outputs: {e}"))?;
                Ok(v)
            }) {
                Ok(v) => return Ok(v),
                Err(why) => {
                    reason = why;
                    messages.push(ChatMessage::text("assistant", text));
                    messages.push(ChatMessage::text(
                        "user",
                        format!("Invalid response ({reason}). Answer again with only valid JSON."),
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

    /// Asks which earlier call (if any) is equivalent; the answer must be a number shown or
    /// `NONE` (anything else is treated as `NONE`, i.e. a new response is generated).
    fn ask_equivalent(
        &self,
        backend: &dyn LlmBackend,
        tool: &ToolSpec,
        args: &str,
        earlier: &[(String, Value)],
    ) -> Result<Option<usize>, SimError> {
        let mut prompt = format!(
            "Tool `{}`: {}\nNew call arguments: {args}\nEarlier calls:\n",
            tool.name, tool.description
        );
        for (i, (a, _)) in earlier.iter().enumerate() {
            prompt.push_str(&format!("{}. {a}\n", i + 1));
        }
        prompt.push_str(
            "If one earlier call means exactly the same request, answer with its number only; \
             otherwise answer NONE.",
        );
        let mut request =
            ChatRequest::new(&self.config.model, vec![ChatMessage::text("user", prompt)]);
        request.temperature = self.config.temperature;
        request.seed = self.config.seed;
        let answer = backend.chat(&request)?;
        let text = answer.message.content_str().trim();
        Ok(text
            .parse::<usize>()
            .ok()
            .filter(|&n| n >= 1 && n <= earlier.len())
            .map(|n| n - 1))
    }

    /// Records `response` under `key` unless present (in memory and on disk); returns the
    /// recorded response.
    fn commit(&self, key: Key, response: Value) -> Result<Value, SimError> {
        let recorded = {
            let mut st = self.lock();
            if let Some(existing) = st.entries.get(&key) {
                return Ok(existing.clone());
            }
            if st.entries.len() >= self.config.capacity {
                return Err(SimError::Full {
                    task: self.task.clone(),
                    capacity: self.config.capacity,
                });
            }
            st.entries.insert(key.clone(), response.clone());
            response
        };
        if self.path.is_some() {
            return self.persist(&key, recorded);
        }
        Ok(recorded)
    }

    /// Read-merge-write under a file lock; the disk's entry wins if another process recorded the
    /// same key first.
    fn persist(&self, key: &Key, response: Value) -> Result<Value, SimError> {
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
            for e in disk.entries {
                // Entries from other processes; on a conflict the one on disk wins.
                st.entries.insert((e.tool, e.args), e.response);
            }
            let recorded = st.entries.entry(key.clone()).or_insert(response).clone();
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
        for e in disk.entries {
            st.entries.entry((e.tool, e.args)).or_insert(e.response);
        }
        Ok(st.entries.get(key).cloned())
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
