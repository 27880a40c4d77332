//! The parquet writer of the exports: leaf columns written under a message-type schema
//! (parquet's low-level writer, no arrow, no codecs), and a reader back to JSON for tests.

use super::ExportError;
use crate::llm::ChatMessage;
use parquet::basic::Compression;
use parquet::data_type::{ByteArray, ByteArrayType, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::parser::parse_message_type;
use serde_json::Value;
use std::path::Path;
use std::sync::Arc;

/// One leaf column: required strings, required integers, or a list of strings (def/rep levels).
pub(super) enum Column {
    Str(Vec<ByteArray>),
    Int(Vec<i64>),
    List {
        values: Vec<ByteArray>,
        def: Vec<i16>,
        rep: Vec<i16>,
    },
}

pub(super) fn list_column<'a, I: IntoIterator<Item = &'a str>>(
    per_row: impl Iterator<Item = I>,
) -> Column {
    let (mut values, mut def, mut rep) = (Vec::new(), Vec::new(), Vec::new());
    for items in per_row {
        let before = def.len();
        for (i, item) in items.into_iter().enumerate() {
            values.push(ByteArray::from(item));
            def.push(1);
            rep.push(i16::from(i > 0));
        }
        if def.len() == before {
            def.push(0);
            rep.push(0);
        }
    }
    Column::List { values, def, rep }
}

/// The two leaf columns of `prompt` (roles, then contents) of these rows' prompts.
pub(super) fn prompt_columns<'a>(
    prompts: impl Iterator<Item = &'a [ChatMessage]> + Clone,
) -> [Column; 2] {
    [
        list_column(prompts.clone().map(|p| p.iter().map(|m| m.role.as_str()))),
        list_column(prompts.map(|p| p.iter().map(|m| m.content_str()))),
    ]
}

pub(super) fn str_column<'a>(per_row: impl Iterator<Item = &'a str>) -> Column {
    Column::Str(per_row.map(ByteArray::from).collect())
}

pub(super) const PROMPT_SCHEMA: &str = "
  required group prompt (LIST) {
    repeated group list {
      required group element {
        required binary role (UTF8);
        required binary content (UTF8);
      }
    }
  }";

/// Writes leaf `columns` (in the schema's depth-first leaf order) as one parquet file with the
/// message type `schema` (one row group, uncompressed), atomically.
pub(super) fn write_columns(path: &Path, schema: &str, columns: Vec<Column>) -> crate::Result<()> {
    let perr = |source| ExportError::Parquet {
        path: path.display().to_string(),
        source,
    };
    let schema = Arc::new(parse_message_type(schema).map_err(perr)?);
    let props = Arc::new(
        WriterProperties::builder()
            .set_compression(Compression::UNCOMPRESSED)
            .set_created_by(format!("rulegym {}", env!("CARGO_PKG_VERSION")))
            .build(),
    );
    let mut bytes = Vec::new();
    {
        let mut writer = SerializedFileWriter::new(&mut bytes, schema, props).map_err(perr)?;
        let mut group = writer.next_row_group().map_err(perr)?;
        for column in columns {
            let mut col = group
                .next_column()
                .map_err(perr)?
                .ok_or_else(|| ExportError::Schema("the schema has too few columns"))?;
            match &column {
                Column::Str(values) => {
                    col.typed::<ByteArrayType>()
                        .write_batch(values, None, None)
                        .map_err(perr)?;
                }
                Column::Int(values) => {
                    col.typed::<Int64Type>()
                        .write_batch(values, None, None)
                        .map_err(perr)?;
                }
                Column::List { values, def, rep } => {
                    col.typed::<ByteArrayType>()
                        .write_batch(values, Some(def), Some(rep))
                        .map_err(perr)?;
                }
            }
            col.close().map_err(perr)?;
        }
        if group.next_column().map_err(perr)?.is_some() {
            return Err(ExportError::Schema("the schema has more columns than rows carry").into());
        }
        group.close().map_err(perr)?;
        writer.close().map_err(perr)?;
    }
    crate::io::write_file_atomic(path, &bytes)
}

/// Reads a parquet file back as one JSON object per row (for tests and inspection).
pub fn read_parquet_json(path: &Path) -> crate::Result<Vec<Value>> {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let perr = |source| ExportError::Parquet {
        path: path.display().to_string(),
        source,
    };
    let file = std::fs::File::open(path).map_err(|source| crate::Error::Io {
        context: format!("opening {}", path.display()),
        source,
    })?;
    let reader = SerializedFileReader::new(file).map_err(perr)?;
    let iter = reader.get_row_iter(None).map_err(perr)?;
    iter.map(|row| Ok(row.map_err(perr)?.to_json_value()))
        .collect()
}
