//! The trip-booking tool task (`tests/fixtures/tools/trip.json`) and the opening of a good
//! conversation through it, shared by the integration tests (`tests/integration/tool_rubric.rs`)
//! and the rubric bench (`benches/rubric.rs`), which both include this file with `#[path]`.

use rulegym::tooluse::rubric::Event;
use rulegym::tooluse::task::{Task, ValidateOptions};
use serde_json::json;

/// The trip task fixture, parsed and validated.
pub fn trip_task() -> Task {
    let text = include_str!("../fixtures/tools/trip.json");
    let task = Task::from_json(text).expect("fixture parses");
    task.validate(ValidateOptions::default())
        .expect("fixture is valid");
    task
}

/// Steps 1 and 2 of a good trip conversation: the agent asks where and when, the user answers
/// (Oslo, 2024-06-03) and so reveals the `destination` and `date` slots.
pub fn ask_destination_and_date() -> Vec<Event> {
    vec![
        Event::AskedUser {
            step: 1,
            text: "Where are you going?".into(),
        },
        Event::UserSaid {
            step: 1,
            text: "Oslo.".into(),
        },
        Event::UserRevealed {
            step: 1,
            slot: "destination".into(),
        },
        Event::AskedUser {
            step: 2,
            text: "On which date?".into(),
        },
        Event::UserSaid {
            step: 2,
            text: "2024-06-03.".into(),
        },
        Event::UserRevealed {
            step: 2,
            slot: "date".into(),
        },
    ]
}

/// Searches flights to Oslo on 2024-06-03 at `step` (the call and its result `flights`).
pub fn search_flights(step: u32, flights: serde_json::Value) -> [Event; 2] {
    [
        Event::ToolCall {
            step,
            tool: "search_flights".into(),
            args: json!({"destination": "Oslo", "date": "2024-06-03"}),
        },
        Event::ToolResult {
            step,
            tool: "search_flights".into(),
            result: json!({ "flights": flights }),
        },
    ]
}
