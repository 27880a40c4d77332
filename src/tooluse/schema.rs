//! A small JSON Schema validator for the subset OpenAI function schemas use (`type`,
//! `properties`, `required`, `additionalProperties`, `items`, `enum`, `const`, numeric and length
//! bounds, `anyOf`/`oneOf`/`allOf`). A schema is compiled once; unknown keywords are rejected at
//! compile time (never silently ignored), annotations (`description`, `title`, `default`,
//! `examples`, `format`, `$comment`) are accepted and ignored. Validation cost is linear in the
//! size of the value.

use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// Deepest schema or value nesting accepted (hostile inputs cannot overflow the stack).
pub const MAX_DEPTH: usize = 64;

/// Errors from compiling a schema or validating a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SchemaError {
    /// The schema itself is malformed or uses an unsupported keyword.
    #[error("invalid schema at {path}: {message}")]
    Invalid {
        /// JSON pointer into the schema.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// A value does not conform to the schema.
    #[error("{path}: {message}")]
    Violation {
        /// JSON pointer into the value (`""` for the root).
        path: String,
        /// What is wrong.
        message: String,
    },
}

/// A JSON type name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Null,
    Boolean,
    Integer,
    Number,
    String,
    Array,
    Object,
}

impl Kind {
    fn parse(name: &str) -> Option<Kind> {
        Some(match name {
            "null" => Kind::Null,
            "boolean" => Kind::Boolean,
            "integer" => Kind::Integer,
            "number" => Kind::Number,
            "string" => Kind::String,
            "array" => Kind::Array,
            "object" => Kind::Object,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Kind::Null => "null",
            Kind::Boolean => "boolean",
            Kind::Integer => "integer",
            Kind::Number => "number",
            Kind::String => "string",
            Kind::Array => "array",
            Kind::Object => "object",
        }
    }

    fn matches(self, value: &Value) -> bool {
        match (self, value) {
            (Kind::Null, Value::Null) | (Kind::Boolean, Value::Bool(_)) => true,
            (Kind::Integer, Value::Number(n)) => {
                n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
            }
            (Kind::Number, Value::Number(_)) => true,
            (Kind::String, Value::String(_)) => true,
            (Kind::Array, Value::Array(_)) => true,
            (Kind::Object, Value::Object(_)) => true,
            _ => false,
        }
    }
}

/// A compiled schema.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Schema {
    types: Option<Vec<Kind>>,
    properties: BTreeMap<String, Schema>,
    required: Vec<String>,
    /// `None`: any extra property; `Some(None)`: none allowed; `Some(Some(s))`: each must match.
    additional: Option<Option<Box<Schema>>>,
    items: Option<Box<Schema>>,
    enumeration: Option<Vec<Value>>,
    constant: Option<Value>,
    minimum: Option<f64>,
    maximum: Option<f64>,
    exclusive_minimum: Option<f64>,
    exclusive_maximum: Option<f64>,
    min_length: Option<u64>,
    max_length: Option<u64>,
    min_items: Option<u64>,
    max_items: Option<u64>,
    any_of: Vec<Schema>,
    one_of: Vec<Schema>,
    all_of: Vec<Schema>,
}

const ANNOTATIONS: &[&str] = &[
    "description",
    "title",
    "default",
    "examples",
    "format",
    "$comment",
    "$schema",
];

impl Schema {
    /// Compiles a schema; errors name the offending keyword and its JSON pointer.
    pub fn compile(schema: &Value) -> Result<Schema, SchemaError> {
        compile_at(schema, "", 0)
    }

    /// Checks `value` against the schema; the error names the first violation and its path.
    pub fn validate(&self, value: &Value) -> Result<(), SchemaError> {
        self.check(value, &mut String::new(), 0)
    }

    /// The declared property names of an object schema, in sorted order.
    pub fn property_names(&self) -> impl Iterator<Item = &str> {
        self.properties.keys().map(String::as_str)
    }

    /// The names of the required properties.
    pub fn required(&self) -> &[String] {
        &self.required
    }

    fn check(&self, value: &Value, path: &mut String, depth: usize) -> Result<(), SchemaError> {
        let fail = |path: &str, message: String| {
            Err(SchemaError::Violation {
                path: path.to_owned(),
                message,
            })
        };
        if depth > MAX_DEPTH {
            return fail(path, format!("nested deeper than {MAX_DEPTH} levels"));
        }
        if let Some(types) = &self.types
            && !types.iter().any(|t| t.matches(value))
        {
            let names: Vec<&str> = types.iter().map(|t| t.name()).collect();
            return fail(
                path,
                format!("expected {}, got {}", names.join(" or "), kind_of(value)),
            );
        }
        if let Some(constant) = &self.constant
            && !json_equal(constant, value)
        {
            return fail(path, format!("must equal {constant}"));
        }
        if let Some(options) = &self.enumeration
            && !options.iter().any(|o| json_equal(o, value))
        {
            let shown: Vec<String> = options.iter().map(Value::to_string).collect();
            return fail(path, format!("must be one of [{}]", shown.join(", ")));
        }
        match value {
            Value::Number(n) => {
                let x = n.as_f64().unwrap_or(f64::NAN);
                if let Some(m) = self.minimum
                    && x < m
                {
                    return fail(path, format!("{n} is below the minimum {m}"));
                }
                if let Some(m) = self.maximum
                    && x > m
                {
                    return fail(path, format!("{n} is above the maximum {m}"));
                }
                if let Some(m) = self.exclusive_minimum
                    && x <= m
                {
                    return fail(path, format!("{n} must be greater than {m}"));
                }
                if let Some(m) = self.exclusive_maximum
                    && x >= m
                {
                    return fail(path, format!("{n} must be less than {m}"));
                }
            }
            Value::String(s) => {
                let len = s.chars().count() as u64;
                if let Some(m) = self.min_length
                    && len < m
                {
                    return fail(path, format!("string shorter than {m} characters"));
                }
                if let Some(m) = self.max_length
                    && len > m
                {
                    return fail(path, format!("string longer than {m} characters"));
                }
            }
            Value::Array(items) => {
                let len = items.len() as u64;
                if let Some(m) = self.min_items
                    && len < m
                {
                    return fail(path, format!("fewer than {m} items"));
                }
                if let Some(m) = self.max_items
                    && len > m
                {
                    return fail(path, format!("more than {m} items"));
                }
                if let Some(item_schema) = &self.items {
                    for (i, item) in items.iter().enumerate() {
                        let mark = path.len();
                        path.push('/');
                        path.push_str(&i.to_string());
                        item_schema.check(item, path, depth + 1)?;
                        path.truncate(mark);
                    }
                }
            }
            Value::Object(map) => {
                for name in &self.required {
                    if !map.contains_key(name) {
                        return fail(path, format!("missing required property {name:?}"));
                    }
                }
                for (key, item) in map {
                    let mark = path.len();
                    path.push('/');
                    path.push_str(&escape_pointer(key));
                    if let Some(prop) = self.properties.get(key) {
                        prop.check(item, path, depth + 1)?;
                    } else {
                        match &self.additional {
                            Some(None) => {
                                let parent = path[..mark].to_owned();
                                return fail(&parent, format!("unexpected property {key:?}"));
                            }
                            Some(Some(schema)) => schema.check(item, path, depth + 1)?,
                            None => {}
                        }
                    }
                    path.truncate(mark);
                }
            }
            _ => {}
        }
        for sub in &self.all_of {
            sub.check(value, path, depth + 1)?;
        }
        if !self.any_of.is_empty()
            && !self
                .any_of
                .iter()
                .any(|s| s.check(value, &mut path.clone(), depth + 1).is_ok())
        {
            return fail(path, "matches none of anyOf".into());
        }
        if !self.one_of.is_empty() {
            let n = self
                .one_of
                .iter()
                .filter(|s| s.check(value, &mut path.clone(), depth + 1).is_ok())
                .count();
            if n != 1 {
                return fail(path, format!("matches {n} of oneOf (exactly 1 required)"));
            }
        }
        Ok(())
    }
}

fn escape_pointer(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// JSON equality where `1` and `1.0` are equal.
fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_equal(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_equal(v, w)))
        }
        _ => a == b,
    }
}

fn compile_at(schema: &Value, path: &str, depth: usize) -> Result<Schema, SchemaError> {
    let invalid = |message: String| SchemaError::Invalid {
        path: if path.is_empty() {
            "/".into()
        } else {
            path.into()
        },
        message,
    };
    if depth > MAX_DEPTH {
        return Err(invalid(format!("nested deeper than {MAX_DEPTH} levels")));
    }
    let map: &Map<String, Value> = match schema {
        Value::Object(map) => map,
        Value::Bool(true) => return Ok(Schema::default()),
        other => return Err(invalid(format!("a schema must be an object, got {other}"))),
    };
    let mut out = Schema::default();
    let number = |key: &str, v: &Value| {
        v.as_f64()
            .ok_or_else(|| invalid(format!("{key} must be a number")))
    };
    let count = |key: &str, v: &Value| {
        v.as_u64()
            .ok_or_else(|| invalid(format!("{key} must be a non-negative integer")))
    };
    let subs = |key: &str, v: &Value| -> Result<Vec<Schema>, SchemaError> {
        let list = v
            .as_array()
            .filter(|l| !l.is_empty())
            .ok_or_else(|| invalid(format!("{key} must be a non-empty array of schemas")))?;
        list.iter()
            .enumerate()
            .map(|(i, s)| compile_at(s, &format!("{path}/{key}/{i}"), depth + 1))
            .collect()
    };
    for (key, v) in map {
        match key.as_str() {
            "type" => {
                let names: Vec<&Value> = match v {
                    Value::Array(list) => list.iter().collect(),
                    single => vec![single],
                };
                let mut kinds = Vec::new();
                for name in names {
                    let kind = name
                        .as_str()
                        .and_then(Kind::parse)
                        .ok_or_else(|| invalid(format!("unknown type {name}")))?;
                    kinds.push(kind);
                }
                if kinds.is_empty() {
                    return Err(invalid("type must name at least one type".into()));
                }
                out.types = Some(kinds);
            }
            "properties" => {
                let props = v
                    .as_object()
                    .ok_or_else(|| invalid("properties must be an object".into()))?;
                for (name, s) in props {
                    let sub_path = format!("{path}/properties/{}", escape_pointer(name));
                    out.properties
                        .insert(name.clone(), compile_at(s, &sub_path, depth + 1)?);
                }
            }
            "required" => {
                let list = v
                    .as_array()
                    .ok_or_else(|| invalid("required must be an array of strings".into()))?;
                for name in list {
                    let name = name
                        .as_str()
                        .ok_or_else(|| invalid("required must be an array of strings".into()))?;
                    out.required.push(name.to_owned());
                }
            }
            "additionalProperties" => {
                out.additional = match v {
                    Value::Bool(true) => None,
                    Value::Bool(false) => Some(None),
                    s => Some(Some(Box::new(compile_at(
                        s,
                        &format!("{path}/additionalProperties"),
                        depth + 1,
                    )?))),
                }
            }
            "items" => {
                out.items = Some(Box::new(compile_at(
                    v,
                    &format!("{path}/items"),
                    depth + 1,
                )?))
            }
            "enum" => {
                let list = v
                    .as_array()
                    .filter(|l| !l.is_empty())
                    .ok_or_else(|| invalid("enum must be a non-empty array".into()))?;
                out.enumeration = Some(list.clone());
            }
            "const" => out.constant = Some(v.clone()),
            "minimum" => out.minimum = Some(number(key, v)?),
            "maximum" => out.maximum = Some(number(key, v)?),
            "exclusiveMinimum" => out.exclusive_minimum = Some(number(key, v)?),
            "exclusiveMaximum" => out.exclusive_maximum = Some(number(key, v)?),
            "minLength" => out.min_length = Some(count(key, v)?),
            "maxLength" => out.max_length = Some(count(key, v)?),
            "minItems" => out.min_items = Some(count(key, v)?),
            "maxItems" => out.max_items = Some(count(key, v)?),
            "anyOf" => out.any_of = subs(key, v)?,
            "oneOf" => out.one_of = subs(key, v)?,
            "allOf" => out.all_of = subs(key, v)?,
            k if ANNOTATIONS.contains(&k) => {}
            other => {
                return Err(invalid(format!(
                    "unsupported keyword {other:?} (supported: type, properties, required, \
                     additionalProperties, items, enum, const, minimum, maximum, \
                     exclusiveMinimum, exclusiveMaximum, minLength, maxLength, minItems, \
                     maxItems, anyOf, oneOf, allOf)"
                )));
            }
        }
    }
    for name in &out.required {
        if !out.properties.is_empty() && !out.properties.contains_key(name) {
            return Err(invalid(format!(
                "required property {name:?} is not declared in properties"
            )));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn validates_the_openai_subset() {
        let s = Schema::compile(&json!({
            "type": "object",
            "properties": {
                "city": {"type": "string", "minLength": 1, "description": "a city"},
                "nights": {"type": "integer", "minimum": 1, "maximum": 30},
                "tags": {"type": "array", "items": {"enum": ["a", "b"]}}
            },
            "required": ["city"],
            "additionalProperties": false
        }))
        .unwrap();
        assert!(s.validate(&json!({"city": "Oslo", "nights": 3})).is_ok());
        assert!(s.validate(&json!({"city": "Oslo", "nights": 3.0})).is_ok());
        let e = s.validate(&json!({"nights": 3})).unwrap_err();
        assert!(
            e.to_string().contains("missing required property \"city\""),
            "{e}"
        );
        let e = s.validate(&json!({"city": "x", "nights": 0})).unwrap_err();
        assert!(e.to_string().starts_with("/nights"), "{e}");
        let e = s
            .validate(&json!({"city": "x", "tags": ["a", "c"]}))
            .unwrap_err();
        assert!(e.to_string().starts_with("/tags/1"), "{e}");
        let e = s.validate(&json!({"city": "x", "extra": 1})).unwrap_err();
        assert!(e.to_string().contains("unexpected property"), "{e}");
        assert!(s.validate(&json!("Oslo")).is_err());
    }

    #[test]
    fn rejects_unsupported_keywords_and_bad_types() {
        assert!(Schema::compile(&json!({"type": "string", "pattern": "^a"})).is_err());
        assert!(Schema::compile(&json!({"type": "strin"})).is_err());
        assert!(Schema::compile(&json!({"$ref": "#/x"})).is_err());
        assert!(Schema::compile(&json!(3)).is_err());
        let mut deep = json!({"type": "string"});
        for _ in 0..100 {
            deep = json!({"type": "array", "items": deep});
        }
        assert!(Schema::compile(&deep).is_err());
    }
}
