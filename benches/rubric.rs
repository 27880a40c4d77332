//! Tool-use rubric scoring and the simulated side of the tool-use environment.
//!
//! `cargo bench --bench rubric`: scoring a 30-step trajectory against a 15-item rubric with a
//! warm engine (target < 1 ms median); an exact canonical hit of the mapping simulator and a
//! rule-user turn (microseconds); and the LLM path's own overhead: a mapping miss and an LLM-user
//! turn answered by an OpenAI-compatible server on loopback that replies at once, so what is
//! measured is rulegym's side (prompt, HTTP client, record cache, validation, mapping file),
//! not a model's latency.

use criterion::{Criterion, criterion_group, criterion_main};
use rulegym::tooluse::rubric::{Event, RubricScorer, ScoreConfig, Trajectory};
use rulegym::tooluse::task::{RubricItem, Task, ValidateOptions};
use serde_json::json;
use std::hint::black_box;

#[path = "../tests/support/trip.rs"]
mod trip;

fn task() -> Task {
    let mut task = trip::trip_task();
    // 2 forbidden + 4 sub-goals + 2 interactions in the fixture; add 7 more to reach 15.
    let extra = [
        (
            "searched_twice",
            "searched at least twice",
            "call_count(search_flights, N), N >= 2",
        ),
        ("no_errors", "no tool errors", "\\+ tool_error(_, _, _)"),
        (
            "result_seen",
            "a search returned OS123",
            "tool_result(_, search_flights, R), json_get(R, flights, Fs), member(F, Fs), json_get(F, flight_id, \"OS123\")",
        ),
        (
            "asked_first",
            "asked before searching",
            "asked_user(A, _), first_call(search_flights, S), A < S",
        ),
        (
            "cheap",
            "found a flight under 200",
            "tool_result(Step, search_flights, R), json_get(R, flights, Fs), member(F, Fs), json_get(F, price, P), P < 200",
        ),
        (
            "polite",
            "said thanks",
            "said(_, T), text_contains_ci(T, \"thank\")",
        ),
        ("short", "finished within 40 turns", "turns(N), N =< 40"),
    ];
    for (id, d, rule) in extra {
        task.rubric.subgoals.push(RubricItem {
            id: id.into(),
            description: d.into(),
            rule: Some(rule.into()),
        });
    }
    task.validate(ValidateOptions::default()).unwrap();
    task
}

fn trajectory() -> Trajectory {
    let mut events = trip::ask_destination_and_date();
    for step in 3..30 {
        events.push(Event::Said {
            step,
            text: format!("Let me check option {step}, thank you for waiting."),
        });
        events.extend(trip::search_flights(
            step,
            json!([{"flight_id": format!("OS{step}"), "price": 100 + step}, {"flight_id": "OS123", "price": 120}]),
        ));
    }
    events.push(Event::ToolCall {
        step: 30,
        tool: "book_flight".into(),
        args: json!({"flight_id": "OS123", "date": "2024-06-03"}),
    });
    events.push(Event::Answered {
        step: 30,
        text: "Your flight OS123 is booked.".into(),
    });
    let state = json!({"bookings": {"OS123": {"date": "2024-06-03"}}});
    Trajectory {
        events,
        final_state: Some(serde_json::from_value(state).unwrap()),
        state_matches: Some(true),
        turns: 30,
    }
}

fn bench(c: &mut Criterion) {
    let task = task();
    let program = task.rubric_program().unwrap();
    assert_eq!(program.items.len(), 15);
    let scorer = RubricScorer::new(ScoreConfig::default()).unwrap();
    let t = trajectory();
    // The bench is also a check: the expected reward for this trajectory.
    let r = scorer.score(&program, &t, None).unwrap();
    assert_eq!(r.reward, 1.0, "{r:#?}");
    c.bench_function("rubric_score_30_steps_15_items", |b| {
        b.iter(|| black_box(scorer.score(&program, black_box(&t), None).unwrap()))
    });
    c.bench_function("rubric_facts_term_30_steps", |b| {
        b.iter(|| black_box(program.facts_term(black_box(&t)).render().unwrap()))
    });
}

fn mapping(c: &mut Criterion) {
    use rulegym::tooluse::mock_tools::{MappingConfig, MappingSimulator};
    let task = task();
    let tool = task.tool("search_flights").unwrap().clone();
    let outputs =
        rulegym::tooluse::schema::Schema::compile(tool.outputs.as_ref().unwrap()).unwrap();
    let sim = MappingSimulator::new("bench", None, None, MappingConfig::default()).unwrap();
    for i in 0..1000 {
        let args = json!({"destination": format!("City{i}"), "date": "2024-06-03"});
        sim.insert(
            "search_flights",
            &args,
            json!({"flights": [{"flight_id": format!("F{i}"), "price": i}]}),
        )
        .unwrap();
    }
    let args: serde_json::Value =
        serde_json::from_str(r#"{ "date": "2024-06-03", "destination": "City500" }"#).unwrap();
    assert_eq!(
        sim.lookup(&tool, &outputs, &args).unwrap()["flights"][0]["flight_id"],
        "F500"
    );
    c.bench_function("mapping_hit_1000_entries", |b| {
        b.iter(|| black_box(sim.lookup(&tool, &outputs, black_box(&args)).unwrap()))
    });
}

fn rule_user(c: &mut Criterion) {
    use criterion::BatchSize;
    use rulegym::tooluse::user::{RuleUser, UserSimulator};
    let task = trip::trip_task();
    c.bench_function("rule_user_turn", |b| {
        b.iter_batched(
            || RuleUser::new(&task),
            |mut user| black_box(user.reply("Where are you going?").unwrap()),
            BatchSize::SmallInput,
        )
    });
}

#[path = "../tests/support/openai_stub.rs"]
mod openai_stub;

/// The LLM path against an instant server: every iteration is a miss (new arguments, a new
/// question), so it sends one request, records it and (tools) appends to the mapping file.
fn llm_path(c: &mut Criterion) {
    use rulegym::env::Environment;
    use rulegym::tooluse::env::{Protocol, ToolEnvConfig};
    use rulegym::tooluse::simulation::{Simulation, SimulationConfig};
    use rulegym::tooluse::user::UserKind;
    use std::sync::Arc;
    use std::time::{Duration, Instant};
    let (url, _) = openai_stub::serve(
        |r| {
            let system = r["messages"][0]["content"].as_str().unwrap_or_default();
            let text = if system.starts_with("You simulate the tool") {
                r#"{"response": {"flights": [{"flight_id": "OS123", "price": 120}]}}"#
            } else {
                "I fly to Oslo."
            };
            json!({"role": "assistant", "content": text})
        },
        0,
    );
    let mut task = trip::trip_task();
    task.max_turns = None;
    let world = Arc::new(task.compile(ValidateOptions::default()).unwrap());
    let scorer = Arc::new(RubricScorer::new(ScoreConfig::default()).unwrap());
    let config = ToolEnvConfig {
        protocol: Protocol::Hermes,
        max_turns: 1_000_000,
        ..ToolEnvConfig::default()
    };
    // `per_run` misses per fresh record directory and episode (a task's mapping in the paper
    // holds at most ~160 entries: 16 rollouts x 10 calls; an episode has at most 16 turns).
    let mut measure = |name: &str, per_run: u64, action: &dyn Fn(u64) -> String| {
        c.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                let mut done = 0;
                while done < iters {
                    let dir = tempfile::tempdir().unwrap();
                    let sim = Simulation::new(SimulationConfig {
                        endpoint: Some(url.clone()),
                        user: UserKind::Llm,
                        dir: Some(dir.path().to_owned()),
                        ..SimulationConfig::default()
                    })
                    .unwrap();
                    let mut env = sim
                        .env(world.clone(), scorer.clone(), config.clone())
                        .unwrap();
                    env.reset().unwrap();
                    let n = per_run.min(iters - done);
                    let start = Instant::now();
                    for i in 0..n {
                        black_box(env.step(&action(i)).unwrap());
                    }
                    total += start.elapsed();
                    done += n;
                }
                total
            })
        });
    };
    measure("mapping_miss_instant_server", 100, &|i| {
        format!(
            r#"<tool_call>{{"name": "search_flights", "arguments": {{"destination": "City{i}", "date": "2024-06-03"}}}}</tool_call>"#
        )
    });
    measure("llm_user_turn_instant_server", 16, &|i| {
        format!("Question {i}: where are you going?")
    });
}

criterion_group!(benches, bench, mapping, rule_user, llm_path);
criterion_main!(benches);
