//! Tool-use rubric scoring and mapping-simulator lookups.
//!
//! `cargo bench --bench rubric`: scoring a 30-step trajectory against a 15-item rubric with a
//! warm engine (target < 1 ms median), and an exact canonical hit of the mapping simulator.

use criterion::{Criterion, criterion_group, criterion_main};
use rulegym::tooluse::rubric::{Event, RubricProgram, RubricScorer, ScoreConfig, Trajectory};
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
    let program = RubricProgram::compile(&task).unwrap();
    assert_eq!(program.items.len(), 15);
    let scorer = RubricScorer::new(ScoreConfig::default()).unwrap();
    let t = trajectory();
    // The bench is also a check: the expected reward for this trajectory.
    let r = scorer.score(&task, &program, &t, None).unwrap();
    assert_eq!(r.reward, 1.0, "{r:#?}");
    c.bench_function("rubric_score_30_steps_15_items", |b| {
        b.iter(|| black_box(scorer.score(&task, &program, black_box(&t), None).unwrap()))
    });
    c.bench_function("rubric_facts_term_30_steps", |b| {
        b.iter(|| black_box(program.facts_term(black_box(&t)).render().unwrap()))
    });
}

fn mapping(c: &mut Criterion) {
    use rulegym::tooluse::simulator::{MappingConfig, MappingSimulator};
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

criterion_group!(benches, bench, mapping);
criterion_main!(benches);
