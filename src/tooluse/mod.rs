//! The tool-use wing (SynthAgent-style mock worlds): a [`task::Task`] gives its own tools, an
//! underspecified instruction, a hidden user context and a rubric; [`task::Task::compile`] turns
//! it into a [`task::CompiledTask`] (schemas and rubric program compiled once); the
//! [`env::ToolEnv`] plays an episode against the mock tools ([`mock_tools`]) and a simulated [`user`];
//! [`simulation`] sets both up the same way on every surface (one shared mapping per task, the
//! recorded LLM client); [`play`] runs an agent model through tasks; the [`rubric`] scores the trajectory with Prolog rules (or an LLM
//! judge); `crate::export::tooluse` writes verl/SkyRL rows; [`rulegen`] builds tasks from a universe with no LLM.
//!
//! The LLM synthesis pipeline that writes tasks lives above this wing, in `synth` (feature `synth`).

pub mod env;
pub mod mock_tools;
pub mod play;
pub mod rubric;
pub mod rulegen;
pub mod schema;
pub mod simulation;
pub mod task;
pub mod user;
