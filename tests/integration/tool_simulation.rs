//! The simulated side of the tool-use environment as every surface sets it up
//! (`tooluse::simulation`): one mapping per task shared by concurrent rollouts, recorded and
//! replayable; failed simulations become tool errors or unanswered questions, never crashed
//! rollouts; configurations that would let an unrecorded LLM call decide a reward are refused.

use super::tool_env::{scorer, world};
use rulegym::env::{Environment, Step};
use rulegym::llm::{ChatRequest, LlmBackend, LlmError, ScriptedBackend, assistant_text};
use rulegym::tooluse::env::{Protocol, ToolEnvConfig};
use rulegym::tooluse::simulation::{Simulation, SimulationConfig};
use rulegym::tooluse::user::{USER_UNAVAILABLE, UserKind};
use serde_json::json;
use std::path::Path;
use std::sync::Arc;

fn hermes() -> ToolEnvConfig {
    ToolEnvConfig {
        protocol: Protocol::Hermes,
        max_turns: 8,
        ..ToolEnvConfig::default()
    }
}

const SEARCH: &str = r#"<tool_call>{"name": "search_flights", "arguments": {"destination": "Oslo", "date": "2024-06-03"}}</tool_call>"#;

/// A simulator "LLM": a new flight price per tool request (so reuse is visible), and a user
/// that names the destination.
fn world_llm() -> Arc<ScriptedBackend> {
    let n = Arc::new(std::sync::atomic::AtomicU64::new(0));
    Arc::new(ScriptedBackend::new(move |req: &ChatRequest| {
        let system = req.messages[0].content_str();
        if system.starts_with("You simulate the tool") {
            let i = n.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok(assistant_text(
                &json!({"response": {"flights": [{"flight_id": "OS123", "price": 100 + i}]}})
                    .to_string(),
            ))
        } else {
            Ok(assistant_text("I am going to Oslo."))
        }
    }))
}

fn config(dir: &Path) -> SimulationConfig {
    SimulationConfig {
        dir: Some(dir.to_owned()),
        user: UserKind::Llm,
        ..SimulationConfig::default()
    }
}

fn observation(step: &Step) -> String {
    step.observations[0].content_str().to_owned()
}

#[test]
fn a_group_of_concurrent_rollouts_sees_one_world() {
    let dir = tempfile::tempdir().unwrap();
    let llm = world_llm();
    let sim = Arc::new(
        Simulation::with_backend(config(dir.path()), Some(llm.clone() as Arc<dyn LlmBackend>))
            .unwrap(),
    );
    let world = world();
    let seen: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..16)
            .map(|_| {
                let (sim, world) = (sim.clone(), world.clone());
                s.spawn(move || {
                    let mut env = sim.env(world, scorer(), hermes()).unwrap();
                    env.reset().unwrap();
                    observation(&env.step(SEARCH).unwrap())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(seen.iter().all(|o| o == &seen[0]), "{seen:?}");
    assert!(seen[0].contains("OS123"), "{}", seen[0]);
    assert_eq!(llm.calls(), 1, "one generation for the whole group");
    // Persisted where the configuration says, and loaded by a new process's simulation.
    let file = SimulationConfig::mapping_path(dir.path(), "trip-oslo-1");
    assert!(file.is_file());
    let again = Simulation::with_backend(config(dir.path()), Some(world_llm())).unwrap();
    let mut env = again.env(world, scorer(), hermes()).unwrap();
    env.reset().unwrap();
    assert_eq!(observation(&env.step(SEARCH).unwrap()), seen[0]);
}

#[test]
fn equal_configurations_share_one_process_wide_simulation() {
    let dir = tempfile::tempdir().unwrap();
    let seeds = dir.path().join("seeds");
    std::fs::create_dir_all(&seeds).unwrap();
    let cfg = SimulationConfig {
        seed_mappings: Some(seeds.clone()),
        ..SimulationConfig::default()
    };
    let a = Simulation::shared(cfg.clone()).unwrap();
    let b = Simulation::shared(cfg.clone()).unwrap();
    assert!(Arc::ptr_eq(&a, &b));
    let other = Simulation::shared(SimulationConfig { seed: 1, ..cfg }).unwrap();
    assert!(!Arc::ptr_eq(&a, &other));
}

#[test]
fn a_recorded_world_replays_offline_and_a_new_call_is_a_tool_error() {
    let dir = tempfile::tempdir().unwrap();
    let first = {
        let sim = Simulation::with_backend(config(dir.path()), Some(world_llm())).unwrap();
        let mut env = sim.env(world(), scorer(), hermes()).unwrap();
        env.reset().unwrap();
        let user = observation(&env.step("Where do you want to go?").unwrap());
        (user, observation(&env.step(SEARCH).unwrap()))
    };
    let replay = Simulation::new(SimulationConfig {
        replay_only: true,
        ..config(dir.path())
    })
    .unwrap();
    let mut env = replay.env(world(), scorer(), hermes()).unwrap();
    env.reset().unwrap();
    let user = observation(&env.step("Where do you want to go?").unwrap());
    assert_eq!((user, observation(&env.step(SEARCH).unwrap())), first);
    let new_call = env
        .step(r#"<tool_call>{"name": "search_flights", "arguments": {"destination": "Rome", "date": "2024-06-03"}}</tool_call>"#)
        .unwrap();
    assert!(observation(&new_call).contains("\"error\""), "{new_call:?}");
    assert!(observation(&new_call).contains("not in the replay cache"));
    assert!(new_call.metadata.contains_key("simulation_errors"));
}

#[test]
fn failed_simulations_are_observations_never_crashed_rollouts() {
    let dir = tempfile::tempdir().unwrap();
    let down: Arc<dyn LlmBackend> = Arc::new(ScriptedBackend::new(|_| {
        Err(LlmError::GaveUp {
            url: "http://127.0.0.1:9/v1/chat/completions".into(),
            attempts: 3,
            last: "connection refused".into(),
        })
    }));
    let sim = Simulation::with_backend(config(dir.path()), Some(down)).unwrap();
    let mut env = sim.env(world(), scorer(), hermes()).unwrap();
    env.reset().unwrap();
    let tool = env.step(SEARCH).unwrap();
    assert!(!tool.done);
    assert!(
        observation(&tool).contains("gave up after 3 attempt"),
        "{tool:?}"
    );
    assert_eq!(
        tool.metadata["simulation_errors"][0]["tool"],
        "search_flights"
    );
    let user = env.step("Where are you flying?").unwrap();
    assert!(!user.done);
    assert_eq!(observation(&user), USER_UNAVAILABLE);
    assert!(
        user.metadata["user_error"]
            .as_str()
            .unwrap()
            .contains("connection refused")
    );
    // The episode still ends with a rubric reward.
    let end = env.step("<answer>I could not book it.</answer>").unwrap();
    assert!(end.done);
    assert!(end.metadata.contains_key("rubric"));
}

#[test]
fn configurations_that_would_leave_llm_calls_unrecorded_are_refused() {
    let err = |cfg: SimulationConfig| Simulation::new(cfg).err().unwrap().to_string();
    assert!(
        err(SimulationConfig {
            endpoint: Some("http://127.0.0.1:9/v1".into()),
            ..SimulationConfig::default()
        })
        .contains("needs `dir`")
    );
    assert!(
        err(SimulationConfig {
            user: UserKind::Llm,
            ..SimulationConfig::default()
        })
        .contains("user \"llm\" needs an endpoint")
    );
    assert!(
        Simulation::with_backend(SimulationConfig::default(), Some(world_llm()))
            .err()
            .unwrap()
            .to_string()
            .contains("needs `dir`")
    );
    let bad = SimulationConfig::from_json(r#"{"endpiont": "http://x"}"#).unwrap_err();
    assert!(
        bad.to_string().contains("unknown field `endpiont`"),
        "{bad}"
    );
    let bad = Simulation::new(SimulationConfig::from_json(r#"{"temperature": 3}"#).unwrap())
        .err()
        .unwrap();
    assert!(
        bad.to_string().contains("temperature 3 must be in [0, 2]"),
        "{bad}"
    );
    let bad = SimulationConfig::from_json(r#"{"endpoint": "ftp://x", "dir": "/tmp/x"}"#)
        .map(Simulation::new)
        .unwrap()
        .err()
        .unwrap();
    assert!(bad.to_string().contains("must start with http"), "{bad}");
}

#[test]
fn seed_mappings_start_a_task_world_without_being_written() {
    let dir = tempfile::tempdir().unwrap();
    let seeds = dir.path().join("teacher");
    // Record a teacher mapping, then use it as the seed of another run.
    {
        let sim = Simulation::with_backend(
            SimulationConfig {
                dir: Some(dir.path().join("teacher-run")),
                ..SimulationConfig::default()
            },
            Some(world_llm()),
        )
        .unwrap();
        let mut env = sim.env(world(), scorer(), hermes()).unwrap();
        env.reset().unwrap();
        env.step(SEARCH).unwrap();
        std::fs::create_dir_all(&seeds).unwrap();
        std::fs::copy(
            SimulationConfig::mapping_path(&dir.path().join("teacher-run"), "trip-oslo-1"),
            seeds.join("trip-oslo-1.json"),
        )
        .unwrap();
    }
    let seed_bytes = std::fs::read(seeds.join("trip-oslo-1.json")).unwrap();
    // Read-only use (no LLM, no dir): the seed answers; a miss is a tool error.
    let sim = Simulation::new(SimulationConfig {
        seed_mappings: Some(seeds.clone()),
        ..SimulationConfig::default()
    })
    .unwrap();
    let mut env = sim.env(world(), scorer(), hermes()).unwrap();
    env.reset().unwrap();
    assert!(observation(&env.step(SEARCH).unwrap()).contains("OS123"));
    let miss = env
        .step(r#"<tool_call>{"name": "search_flights", "arguments": {"destination": "Rome", "date": "2024-07-01"}}</tool_call>"#)
        .unwrap();
    assert!(
        observation(&miss).contains("no LLM backend configured"),
        "{}",
        observation(&miss)
    );
    // Recording use: the seed is copied into the run's dir and extended there.
    let run = dir.path().join("rl-run");
    let sim = Simulation::with_backend(
        SimulationConfig {
            dir: Some(run.clone()),
            seed_mappings: Some(seeds.clone()),
            ..SimulationConfig::default()
        },
        Some(world_llm()),
    )
    .unwrap();
    let mut env = sim.env(world(), scorer(), hermes()).unwrap();
    env.reset().unwrap();
    env.step(r#"<tool_call>{"name": "search_flights", "arguments": {"destination": "Rome", "date": "2024-07-01"}}</tool_call>"#)
        .unwrap();
    assert_eq!(sim.mapping("trip-oslo-1").unwrap().unwrap().len(), 2);
    assert_eq!(
        std::fs::read(seeds.join("trip-oslo-1.json")).unwrap(),
        seed_bytes
    );
}
