//! One integration-test binary (links scryer and wgpu once); one module per concept.

mod retrieval;
mod grpo;
