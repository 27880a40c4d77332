//! OpenEnv's wire protocol (openenv 0.10) over axum: WebSocket sessions at `/ws`, OpenEnv's
//! JSON-RPC at `/mcp` (tools and HTTP sessions), the stateless simulation-mode routes, the
//! schema and metadata routes and the task-listing API.
//!
//! One file per job: `config` the server's bounds, `session` one client's episode, `app` the
//! state every route shares and the reset/step/state operations, `action` a `step` action read
//! and its observation written, `routes` the router, serving and the simulation-mode routes,
//! `schema` the schema and OpenAPI routes, `rpc` the JSON-RPC of `/mcp`, `ws` the WebSocket
//! sessions, `listing` the task-listing API.

mod action;
mod app;
mod config;
mod listing;
mod routes;
mod rpc;
mod schema;
mod session;
mod ws;

pub use config::ServerConfig;
pub use routes::{router, serve};
