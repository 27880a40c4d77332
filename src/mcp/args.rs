//! The arguments of the search tools and of the built-in task tools (`ask_user`, `finish`): one
//! struct per tool. Its derived JSON schema (field docs as descriptions, `#[schemars(...)]`
//! bounds, `additionalProperties: false` from `deny_unknown_fields`) is the tool's input schema,
//! and [`parse`] checks a call's arguments against the bounds of that same schema, so a bound is
//! written once.

use super::error::ToolError;
use super::limits::{MAX_K, MAX_PAGE, MAX_TEXT_CHARS};
use rmcp::model::JsonObject;
use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::sync::{Arc, LazyLock};

/// A tool's arguments: deserialised from the call, described by its derived schema.
pub(crate) trait ToolArgs: DeserializeOwned + JsonSchema {
    /// The tool's input schema, derived once.
    fn input_schema() -> &'static Arc<JsonObject>;
}

/// Implements [`ToolArgs`] for argument structs: each derives its schema once, on first use.
macro_rules! tool_args {
    ($($args:ty),* $(,)?) => {$(
        impl ToolArgs for $args {
            fn input_schema() -> &'static Arc<JsonObject> {
                static SCHEMA: LazyLock<Arc<JsonObject>> = LazyLock::new(derive_schema::<$args>);
                &SCHEMA
            }
        }
    )*};
}

tool_args!(
    SearchArgs,
    TitleArgs,
    PeopleArgs,
    AnswerArgs,
    QuestionArgs,
    SummaryArgs
);

/// `search`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SearchArgs {
    /// What to search for.
    #[schemars(length(min = 1, max = MAX_TEXT_CHARS))]
    pub query: String,
    /// Number of passages.
    #[schemars(range(min = 1, max = MAX_K))]
    pub k: Option<usize>,
}

/// `get_article`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct TitleArgs {
    /// The article title (a person's full name).
    #[schemars(length(max = MAX_TEXT_CHARS))]
    pub title: String,
}

/// `list_people`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PeopleArgs {
    /// Position of the page's first name among the matching names, from 0.
    pub offset: Option<usize>,
    /// Names per page.
    #[schemars(range(min = 1, max = MAX_PAGE))]
    pub limit: Option<usize>,
    /// Keep only the names containing this text (ignoring case).
    #[schemars(length(max = MAX_TEXT_CHARS))]
    pub contains: Option<String>,
}

/// `answer` (a scored search session).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AnswerArgs {
    /// The answer; several answers separated by commas.
    #[schemars(length(max = MAX_TEXT_CHARS))]
    pub answer: String,
}

/// `ask_user` (a tool-use task).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct QuestionArgs {
    /// The question for the user.
    #[schemars(length(max = MAX_TEXT_CHARS))]
    pub question: String,
}

/// `finish` (a tool-use task).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SummaryArgs {
    /// A short summary of what was done.
    #[schemars(length(max = MAX_TEXT_CHARS))]
    pub summary: String,
}

/// `T`'s JSON schema (draft 2020-12) as an MCP input schema: the root's `$schema`, `title` and
/// `description` (the struct's name and doc) are dropped.
fn derive_schema<T: JsonSchema>() -> Arc<JsonObject> {
    let schema = SchemaSettings::draft2020_12()
        .with(|s| s.meta_schema = None)
        .into_generator()
        .into_root_schema_for::<T>();
    let mut object = match schema.to_value() {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    };
    object.remove("title");
    object.remove("description");
    Arc::new(object)
}

/// `tool`'s arguments: deserialised (a type error, a missing or unknown field is
/// [`ToolError::BadArguments`]), then checked against the bounds of the tool's input schema: a
/// text longer than its `maxLength` (in characters) is [`ToolError::TooLong`], a number outside
/// its `minimum..=maximum` is [`ToolError::OutOfRange`]. (`minLength` is left to the tool, which
/// refuses a text that is empty once trimmed.)
pub(crate) fn parse<T: ToolArgs>(tool: &str, args: &JsonObject) -> Result<T, ToolError> {
    let parsed = serde_json::from_value(Value::Object(args.clone())).map_err(|e| {
        ToolError::BadArguments {
            tool: tool.to_owned(),
            message: e.to_string(),
        }
    })?;
    check_bounds(T::input_schema(), args)?;
    Ok(parsed)
}

/// Checks `args` against the `maxLength`, `minimum` and `maximum` of `schema`'s properties.
fn check_bounds(schema: &'static JsonObject, args: &JsonObject) -> Result<(), ToolError> {
    let Some(Value::Object(properties)) = schema.get("properties") else {
        return Ok(());
    };
    let bound = |property: &Value, key: &str| {
        property
            .get(key)
            .and_then(Value::as_u64)
            .and_then(|n| usize::try_from(n).ok())
    };
    for (field, property) in properties {
        let field = field.as_str();
        match args.get(field) {
            Some(Value::String(text)) => {
                if let Some(max) = bound(property, "maxLength") {
                    let len = text.chars().count();
                    if len > max {
                        return Err(ToolError::TooLong { field, len, max });
                    }
                }
            }
            Some(Value::Number(n)) => {
                let Some(got) = n.as_u64().and_then(|n| usize::try_from(n).ok()) else {
                    continue;
                };
                let min = bound(property, "minimum").unwrap_or(0);
                let max = bound(property, "maximum").unwrap_or(usize::MAX);
                if got < min || got > max {
                    return Err(ToolError::OutOfRange {
                        field,
                        min,
                        max,
                        got,
                    });
                }
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(v: Value) -> JsonObject {
        match v {
            Value::Object(map) => map,
            _ => unreachable!(),
        }
    }

    #[test]
    fn search_schema_has_the_bounds_and_descriptions() {
        let s = SearchArgs::input_schema();
        assert_eq!(s["type"], "object");
        assert_eq!(s["required"], json!(["query"]));
        assert_eq!(s["additionalProperties"], false);
        assert!(!s.contains_key("$schema") && !s.contains_key("title"));
        let query = &s["properties"]["query"];
        assert_eq!(query["description"], "What to search for.");
        assert_eq!(query["minLength"], 1);
        assert_eq!(query["maxLength"], MAX_TEXT_CHARS);
        let k = &s["properties"]["k"];
        assert_eq!(k["description"], "Number of passages.");
        assert_eq!(k["minimum"], 1);
        assert_eq!(k["maximum"], MAX_K);
        let people = PeopleArgs::input_schema();
        assert!(!people.contains_key("required"));
        assert_eq!(people["properties"]["limit"]["maximum"], MAX_PAGE);
        assert_eq!(people["properties"]["offset"]["minimum"], 0);
        assert_eq!(
            people["properties"]["contains"]["maxLength"],
            MAX_TEXT_CHARS
        );
        for schema in [
            TitleArgs::input_schema(),
            AnswerArgs::input_schema(),
            QuestionArgs::input_schema(),
            SummaryArgs::input_schema(),
        ] {
            let (name, property) = schema["properties"]
                .as_object()
                .unwrap()
                .iter()
                .next()
                .unwrap();
            assert_eq!(schema["required"], json!([name]));
            assert_eq!(schema["additionalProperties"], false);
            assert_eq!(property["type"], "string");
            assert_eq!(property["maxLength"], MAX_TEXT_CHARS);
            assert!(
                property["description"]
                    .as_str()
                    .is_some_and(|d| !d.is_empty())
            );
        }
    }

    #[test]
    fn parse_checks_the_schema_bounds() {
        let long = "x".repeat(MAX_TEXT_CHARS + 1);
        let e = parse::<SearchArgs>("search", &object(json!({"query": long}))).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "query is {} long; the limit is {MAX_TEXT_CHARS}",
                MAX_TEXT_CHARS + 1
            )
        );
        let e = parse::<SearchArgs>("search", &object(json!({"query": "x", "k": 0}))).unwrap_err();
        assert_eq!(e.to_string(), format!("k must be in 1..={MAX_K}, got 0"));
        let e = parse::<PeopleArgs>("list_people", &object(json!({"limit": 201}))).unwrap_err();
        assert_eq!(e.to_string(), "limit must be in 1..=200, got 201");
        let e =
            parse::<TitleArgs>("get_article", &object(json!({"title": "a", "x": 1}))).unwrap_err();
        assert!(matches!(e, ToolError::BadArguments { .. }), "{e}");
        let a: SearchArgs = parse("search", &object(json!({"query": "x", "k": MAX_K}))).unwrap();
        assert_eq!((a.query.as_str(), a.k), ("x", Some(MAX_K)));
        let a: PeopleArgs = parse("list_people", &object(json!({"offset": 10_000}))).unwrap();
        assert_eq!(a.offset, Some(10_000));
    }
}
