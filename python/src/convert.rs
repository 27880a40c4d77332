//! JSON values <-> Python objects, and config dicts -> Rust configs.

use crate::prelude::*;

/// Converts a JSON value into Python objects (dict, list, str, int, float, bool, None).
pub(crate) fn value_to_py<'py>(
    py: Python<'py>,
    v: &serde_json::Value,
) -> PyResult<Bound<'py, PyAny>> {
    use serde_json::Value;
    Ok(match v {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                i.into_pyobject(py)?.into_any()
            } else if let Some(u) = n.as_u64() {
                u.into_pyobject(py)?.into_any()
            } else {
                PyFloat::new(py, n.as_f64().unwrap_or(f64::NAN)).into_any()
            }
        }
        Value::String(s) => PyString::new(py, s).into_any(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(value_to_py(py, item)?)?;
            }
            list.into_any()
        }
        Value::Object(map) => {
            let dict = PyDict::new(py);
            for (k, item) in map {
                dict.set_item(k, value_to_py(py, item)?)?;
            }
            dict.into_any()
        }
    })
}

/// Serialises any value to Python objects through `serde_json::Value`.
pub(crate) fn to_py<'py, T: serde::Serialize>(
    py: Python<'py>,
    v: &T,
) -> PyResult<Bound<'py, PyAny>> {
    let value = serde_json::to_value(v).map_err(err)?;
    value_to_py(py, &value)
}

/// Serialises a value to Python objects through JSON text, keeping the struct field order of
/// its keys (where the order is part of what a caller renders, such as tool schemas).
pub(crate) fn to_py_ordered<'py, T: serde::Serialize>(
    py: Python<'py>,
    v: &T,
) -> PyResult<Bound<'py, PyAny>> {
    let text = serde_json::to_string(v).map_err(err)?;
    py.import("json")?.call_method1("loads", (text,))
}

/// Parses an optional Python dict (or None) into a config struct through `json.dumps`.
pub(crate) fn from_py<T: serde::de::DeserializeOwned + Default>(
    py: Python<'_>,
    obj: Option<&Bound<'_, PyAny>>,
    what: &str,
) -> PyResult<T> {
    let Some(obj) = obj.filter(|o| !o.is_none()) else {
        return Ok(T::default());
    };
    let text: String = py
        .import("json")?
        .call_method1("dumps", (obj,))?
        .extract()?;
    serde_json::from_str(&text).map_err(|e| err(format!("invalid {what}: {e}")))
}

pub(crate) fn jsonl<T: serde::Serialize>(items: &[T]) -> PyResult<Vec<u8>> {
    rulegym::io::jsonl_bytes(items).map_err(err)
}

pub(crate) fn step_to_py<'py>(
    py: Python<'py>,
    step: &rulegym::env::Step,
) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    let obs = PyList::empty(py);
    for m in &step.observations {
        let d = PyDict::new(py);
        d.set_item("role", m.role.as_str())?;
        d.set_item("content", m.content_str())?;
        obs.append(d)?;
    }
    out.set_item("observations", obs)?;
    out.set_item("reward", step.reward)?;
    out.set_item("done", step.done)?;
    let meta = PyDict::new(py);
    for (k, v) in &step.metadata {
        meta.set_item(k, value_to_py(py, v)?)?;
    }
    out.set_item("metadata", meta)?;
    let spans = PyList::empty(py);
    for s in &step.env_spans {
        spans.append((s.start, s.end))?;
    }
    out.set_item("env_spans", spans)?;
    Ok(out)
}

pub(crate) fn messages_to_py<'py>(
    py: Python<'py>,
    messages: &[rulegym::llm::ChatMessage],
) -> PyResult<Bound<'py, PyList>> {
    let out = PyList::empty(py);
    for m in messages {
        let d = PyDict::new(py);
        d.set_item("role", m.role.as_str())?;
        d.set_item("content", m.content_str())?;
        out.append(d)?;
    }
    Ok(out)
}
