//! The tools of every world: five working state-backed tools and two distractors.

use crate::tooluse::task::{StateOp, ToolBackend, ToolKind, ToolSpec};
use serde_json::{Value, json};

/// Relations the target path may use (family only) and `list_relatives` accepts.
pub const PATH_RELATIONS: &[&str] = &[
    "mother",
    "father",
    "parent",
    "child",
    "son",
    "daughter",
    "sibling",
    "sister",
    "brother",
    "husband",
    "wife",
    "aunt",
    "uncle",
    "niece",
    "nephew",
    "grandmother",
    "grandfather",
    "grandchild",
    "cousin",
];

/// One state-backed tool.
#[allow(clippy::too_many_arguments)]
fn tool(
    name: &str,
    description: &str,
    properties: Value,
    required: &[&str],
    kind: ToolKind,
    op: StateOp,
    table: &str,
    key: Option<&str>,
) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: description.into(),
        parameters: json!({
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": false,
        }),
        outputs: None,
        kind,
        backend: ToolBackend::State {
            op,
            table: table.into(),
            key: key.map(str::to_owned),
        },
    }
}

/// The tools of every world (five working tools and two distractors).
pub fn tools() -> Vec<ToolSpec> {
    let name = json!({"type": "string", "minLength": 1});
    use StateOp::*;
    use ToolKind::*;
    vec![
        tool(
            "find_person",
            "Look a person up by full name; returns the matching records.",
            json!({"name": name}),
            &["name"],
            ReadOnly,
            Find,
            "people",
            None,
        ),
        tool(
            "get_record",
            "Read a person's record (name, gender, dob, occupation, hobby).",
            json!({"name": name}),
            &["name"],
            ReadOnly,
            Get,
            "people",
            Some("name"),
        ),
        tool(
            "list_relatives",
            "List a person's relatives of one relation (e.g. the aunts of a person).",
            json!({"name": name, "relation": {"type": "string", "enum": PATH_RELATIONS}}),
            &["name", "relation"],
            ReadOnly,
            Find,
            "relatives",
            None,
        ),
        tool(
            "update_record",
            "Change fields of a person's record.",
            json!({"name": name, "hobby": {"type": "string", "minLength": 1},
                   "occupation": {"type": "string", "minLength": 1}}),
            &["name"],
            StateModifying,
            Update,
            "people",
            Some("name"),
        ),
        tool(
            "send_message",
            "Send a text message to a person.",
            json!({"to": name, "text": {"type": "string", "minLength": 1}}),
            &["to", "text"],
            StateModifying,
            Insert,
            "messages",
            Some("to"),
        ),
        tool(
            "delete_record",
            "Delete a person's record from the directory.",
            json!({"name": name}),
            &["name"],
            StateModifying,
            Delete,
            "people",
            Some("name"),
        ),
        tool(
            "list_people_by_hobby",
            "List everyone with a given hobby.",
            json!({"hobby": {"type": "string", "minLength": 1}}),
            &["hobby"],
            ReadOnly,
            Find,
            "people",
            None,
        ),
    ]
}
