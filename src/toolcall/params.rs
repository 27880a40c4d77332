//! The built-in tools' arguments, described once: the input schema a session lists and the
//! checks a call's arguments pass are both read from the same [`Param`]s.

use super::limits::MAX_TEXT_CHARS;
use super::{SessionTool, ToolFault};
use serde_json::{Map, Value, json};

/// What an argument holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamKind {
    /// A string of at most [`MAX_TEXT_CHARS`] characters without protocol markup; `nonblank`:
    /// not empty once trimmed.
    Text {
        /// Whether an empty (or all-space) text is refused.
        nonblank: bool,
    },
    /// A whole number in `min..=max`.
    Count {
        /// Smallest allowed.
        min: usize,
        /// Largest allowed.
        max: usize,
    },
}

/// One argument of a built-in tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Param {
    /// Its name.
    pub name: &'static str,
    /// What it is.
    pub description: &'static str,
    /// What it holds.
    pub kind: ParamKind,
    /// Whether a call must give it.
    pub required: bool,
}

/// A tool rulegym defines (the search tools, `ask_user`, `finish`): its name, what it does, its
/// arguments and what it returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuiltinTool {
    /// The function name.
    pub name: &'static str,
    /// What the tool does.
    pub description: &'static str,
    /// Its arguments.
    pub params: &'static [Param],
    /// What it returns.
    pub returns: &'static str,
}

/// A required text argument.
pub(crate) const fn text(name: &'static str, description: &'static str) -> Param {
    Param {
        name,
        description,
        kind: ParamKind::Text { nonblank: false },
        required: true,
    }
}

impl BuiltinTool {
    /// The tool as a session lists it: the input schema has each argument's type, description
    /// and bounds, the required ones, and no other properties.
    pub fn spec(&self) -> SessionTool {
        let mut properties = Map::new();
        for p in self.params {
            let schema = match p.kind {
                ParamKind::Text { nonblank } => {
                    let mut s = json!({"type": "string", "description": p.description,
                                       "maxLength": MAX_TEXT_CHARS});
                    if nonblank {
                        s["minLength"] = json!(1);
                    }
                    s
                }
                ParamKind::Count { min, max } => json!({"type": "integer",
                    "description": p.description, "minimum": min, "maximum": max}),
            };
            properties.insert(p.name.to_owned(), schema);
        }
        let required: Vec<&str> = self
            .params
            .iter()
            .filter(|p| p.required)
            .map(|p| p.name)
            .collect();
        let mut input_schema = Map::new();
        input_schema.insert("type".into(), json!("object"));
        input_schema.insert("properties".into(), Value::Object(properties));
        if !required.is_empty() {
            input_schema.insert("required".into(), json!(required));
        }
        input_schema.insert("additionalProperties".into(), json!(false));
        SessionTool {
            name: self.name.to_owned(),
            description: self.description.to_owned(),
            input_schema,
            returns: self.returns.to_owned(),
        }
    }

    /// Checks a call's arguments against the tool's [`Param`]s: no unknown argument, every
    /// required one present, each of its kind and within its bounds (`null` is an absent
    /// optional argument).
    pub(crate) fn parse<'a>(&self, args: &'a Map<String, Value>) -> Result<Args<'a>, ToolFault> {
        let bad = |message: String| ToolFault::BadArguments {
            tool: self.name.to_owned(),
            message,
        };
        if let Some(extra) = args
            .keys()
            .find(|k| !self.params.iter().any(|p| p.name == k.as_str()))
        {
            let takes: Vec<&str> = self.params.iter().map(|p| p.name).collect();
            return Err(bad(format!(
                "unknown argument {extra:?} (the tool takes {})",
                takes.join(", ")
            )));
        }
        for p in self.params {
            let value = args.get(p.name).filter(|v| !v.is_null());
            let Some(value) = value else {
                if p.required {
                    return Err(bad(format!("missing argument {:?}", p.name)));
                }
                continue;
            };
            match p.kind {
                ParamKind::Text { nonblank } => {
                    let Value::String(s) = value else {
                        return Err(bad(format!("{} must be a string, got {value}", p.name)));
                    };
                    let len = s.chars().count();
                    if len > MAX_TEXT_CHARS {
                        return Err(ToolFault::TooLong {
                            field: p.name.to_owned(),
                            len,
                            max: MAX_TEXT_CHARS,
                        });
                    }
                    if let Some(marker) = crate::env::protocol_marker(s) {
                        return Err(ToolFault::ProtocolText {
                            field: p.name.to_owned(),
                            marker,
                        });
                    }
                    if nonblank && s.trim().is_empty() {
                        return Err(bad(format!("{} is empty", p.name)));
                    }
                }
                ParamKind::Count { min, max } => {
                    let got = match value {
                        Value::Number(n) => n
                            .as_u64()
                            .map(i128::from)
                            .or_else(|| n.as_i64().map(i128::from)),
                        _ => None,
                    };
                    let Some(got) = got else {
                        return Err(bad(format!(
                            "{} must be a whole number, got {value}",
                            p.name
                        )));
                    };
                    if got < min as i128 || got > max as i128 {
                        return Err(ToolFault::OutOfRange {
                            field: p.name.to_owned(),
                            min,
                            max,
                            got,
                        });
                    }
                }
            }
        }
        Ok(Args(args))
    }
}

/// A call's arguments once [`BuiltinTool::parse`] checked them.
pub(crate) struct Args<'a>(&'a Map<String, Value>);

impl Args<'_> {
    /// A text argument (`None` when an optional one is absent).
    pub(crate) fn text(&self, name: &str) -> Option<&str> {
        self.0.get(name).and_then(Value::as_str)
    }

    /// A required text argument ("" if the tool does not require it: a bug the tests catch).
    pub(crate) fn required(&self, name: &str) -> &str {
        self.text(name).unwrap_or_default()
    }

    /// A number argument, already within its bounds.
    pub(crate) fn count(&self, name: &str) -> Option<usize> {
        self.0
            .get(name)
            .and_then(Value::as_u64)
            .and_then(|n| usize::try_from(n).ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOOL: BuiltinTool = BuiltinTool {
        name: "t",
        description: "A tool.",
        params: &[
            Param {
                name: "q",
                description: "Text.",
                kind: ParamKind::Text { nonblank: true },
                required: true,
            },
            Param {
                name: "k",
                description: "Count.",
                kind: ParamKind::Count { min: 1, max: 20 },
                required: false,
            },
        ],
        returns: "Something.",
    };

    fn object(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(map) => map,
            _ => unreachable!(),
        }
    }

    #[test]
    fn the_schema_and_the_checks_come_from_the_same_params() {
        let s = TOOL.spec().input_schema;
        assert_eq!(s["required"], json!(["q"]));
        assert_eq!(s["additionalProperties"], false);
        assert_eq!(s["properties"]["q"]["maxLength"], MAX_TEXT_CHARS);
        assert_eq!(s["properties"]["q"]["minLength"], 1);
        assert_eq!(s["properties"]["k"]["maximum"], 20);
        let err = |v: Value| TOOL.parse(&object(v)).err().unwrap().to_string();
        assert_eq!(err(json!({})), "t: missing argument \"q\"");
        assert_eq!(
            err(json!({"q": "x", "z": 1})),
            "t: unknown argument \"z\" (the tool takes q, k)"
        );
        assert_eq!(err(json!({"q": 3})), "t: q must be a string, got 3");
        assert_eq!(err(json!({"q": "  "})), "t: q is empty");
        assert_eq!(err(json!({"q": "x", "k": 0})), "k must be in 1..=20, got 0");
        assert_eq!(
            err(json!({"q": "x", "k": -5})),
            "k must be in 1..=20, got -5"
        );
        assert_eq!(
            err(json!({"q": "x", "k": 1.5})),
            "t: k must be a whole number, got 1.5"
        );
        assert_eq!(
            err(json!({"q": "a <answer> b"})),
            "q must not contain \"<answer>\""
        );
        let long = "é".repeat(MAX_TEXT_CHARS + 1);
        assert_eq!(
            err(json!({ "q": long })),
            format!(
                "q is {} long; the limit is {MAX_TEXT_CHARS}",
                MAX_TEXT_CHARS + 1
            )
        );
        let ok = object(json!({"q": "x", "k": 20}));
        let a = TOOL.parse(&ok).unwrap();
        assert_eq!((a.required("q"), a.count("k")), ("x", Some(20)));
        let null_k = object(json!({"q": "x", "k": null}));
        assert_eq!(TOOL.parse(&null_k).unwrap().count("k"), None);
    }
}
