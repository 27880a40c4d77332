//! One integration-test binary (links scryer and wgpu once); one module per concept.

mod engine;
mod grpo;
mod phantomwiki;
mod questions;
mod retrieval;
mod retrieval_server;
mod search_env;
mod search_export;
mod tool_rubric;
mod universe;
