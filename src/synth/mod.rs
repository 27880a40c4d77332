//! Tool-use task synthesis: the task schema, a JSON Schema validator for tool schemas, and the
//! LLM backend (OpenAI-compatible client, record/replay cache, scripted backend), the SynthAgent
//! LLM pipeline and rule-generated tool worlds.

pub mod llm;
pub mod llm_openai;
pub mod pipeline;
pub mod schema;
pub mod task;
pub mod worlds;
