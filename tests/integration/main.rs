//! One integration-test binary (links scryer and wgpu once); one module per concept. It tests the
//! library and drives the `rulegym` binary, so it is a test target of the CLI package
//! (`cli/Cargo.toml`), where `mcp` and `server` are always on.

/// The repository root (this suite is compiled from `cli/`).
pub fn repo() -> &'static std::path::Path {
    std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

mod architecture;
mod attacks;
mod batch;
mod cli;
mod dataset_load;
mod engine;
mod examples;
mod fuzz;
mod grpo;
mod mcp;
mod phantomwiki;
mod question_quality;
mod questions;
mod retrieval;
#[cfg(feature = "bert")]
mod retrieval_bert;
#[cfg(feature = "gpu")]
mod retrieval_gpu;
#[cfg(feature = "hnsw")]
mod retrieval_hnsw;
mod retrieval_server;
#[cfg(feature = "testkit")]
mod reward_audit;
mod reward_check;
mod rubric_memory;
mod search_env;
mod search_eval;
mod search_export;
mod search_tools;
mod sessions;
mod skip;
mod synth_pipeline;
mod tool_env;
mod tool_export;
mod tool_rubric;
mod tool_session;
mod tool_simulation;
mod tool_worlds;
mod universe;
