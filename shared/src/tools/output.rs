//! What a tool answers: a typed output struct per tool, serialized once into [`Output`], with
//! its output schema derived from the same type ([`output_schema`], schemars), and the
//! annotation sets tools share ([`Annotations`]).
//!
//! The MCP layer writes an [`Output`] as the result's `structuredContent` and, escaped, as its
//! text block; a class function sends it to the front as it is. No `serde_json::Value` tree
//! is built on the way.

use std::borrow::Cow;
use std::sync::{Arc, OnceLock};

use schemars::generate::{Contract, SchemaSettings};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

use super::{Opened, ToolError};
use crate::notebook::NotebookError;

/// A tool's answer: the JSON of its typed output, written once and shared, not copied (a kept
/// answer, `notebook::answers`, is the same `Output` each time it is given). A kept answer
/// also keeps what the MCP layer would derive from it on every call: its text block (the same
/// JSON escaped as a string, [`Output::keep_text`]) and the ids the access record names.
#[derive(Debug, Clone)]
pub struct Output(Arc<Written>);

#[derive(Debug)]
struct Written {
    json: Box<RawValue>,
    text: OnceLock<Box<str>>,
    opened: OnceLock<Opened>,
}

impl Output {
    pub fn new(json: Box<RawValue>) -> Output {
        Output(Arc::new(Written {
            json,
            text: OnceLock::new(),
            opened: OnceLock::new(),
        }))
    }

    /// The pages and tasks this answer names, for the access record: `find` runs on first use.
    pub(super) fn opened(&self, find: impl FnOnce(&str) -> Opened) -> &Opened {
        self.0.opened.get_or_init(|| find(self.0.json.get()))
    }

    /// Writes the text block (the JSON as a JSON string: quoted and escaped) into `out`: the
    /// one [`Output::keep_text`] wrote, or escaped now.
    pub fn write_text(&self, out: &mut Vec<u8>) {
        match self.0.text.get() {
            Some(text) => out.extend_from_slice(text.as_bytes()),
            // Writing JSON into a Vec cannot fail.
            None => {
                let _ = serde_json::to_writer(out, self.0.json.get());
            }
        }
    }

    /// Escapes the text block once and keeps it with the answer, for an answer that will be
    /// given again (`notebook::answers`); returns its length.
    pub fn keep_text(&self) -> usize {
        self.0
            .text
            .get_or_init(|| {
                // A `&str` always serializes.
                serde_json::to_string(self.0.json.get())
                    .unwrap_or_default()
                    .into_boxed_str()
            })
            .len()
    }
}

impl std::ops::Deref for Output {
    type Target = RawValue;

    fn deref(&self) -> &RawValue {
        &self.0.json
    }
}

impl Serialize for Output {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.json.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Output {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Box::<RawValue>::deserialize(deserializer).map(Output::new)
    }
}

/// Serializes a tool's typed output.
pub fn output<T: Serialize>(value: &T) -> Result<Output, ToolError> {
    serde_json::value::to_raw_value(value)
        .map(Output::new)
        .map_err(|e| ToolError::Internal(NotebookError::Corrupt(format!("tool output: {e}"))))
}

/// The output schema of `T`, as `tools/list` shows it: every subschema inline, no `$schema`
/// or root title, and a root of type `object` (the revisions before 2026-07-28 take only
/// object schemas).
pub fn output_schema<T: JsonSchema>() -> Value {
    let settings = SchemaSettings::draft2020_12().with(|s| {
        s.inline_subschemas = true;
        s.meta_schema = None;
        s.contract = Contract::Serialize;
    });
    let mut schema = SchemaGenerator::new(settings)
        .into_root_schema_for::<T>()
        .to_value();
    if let Some(root) = schema.as_object_mut() {
        root.remove("title");
        root.remove("$defs");
        root.insert("type".into(), Value::String("object".into()));
    }
    schema
}

/// The behaviour hints a tool declares (`readOnlyHint`, `destructiveHint`, `idempotentHint`,
/// `openWorldHint`). nib's tools touch only the user's notebook, so none is open-world.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Annotations {
    pub read_only: bool,
    pub destructive: bool,
    pub idempotent: bool,
    pub open_world: bool,
}

impl Annotations {
    /// Reads: nothing changes, and the same call answers the same.
    pub const READ_ONLY: Annotations = Annotations {
        read_only: true,
        destructive: false,
        idempotent: true,
        open_world: false,
    };
    /// Writes that add or set, where a second identical call changes nothing more.
    pub const IDEMPOTENT_WRITE: Annotations = Annotations {
        read_only: false,
        destructive: false,
        idempotent: true,
        open_world: false,
    };
    /// Writes that add: a second identical call adds again.
    pub const WRITE: Annotations = Annotations {
        read_only: false,
        destructive: false,
        idempotent: false,
        open_world: false,
    };
    /// Writes that take something away (to the trash); a second identical call changes nothing.
    pub const DESTRUCTIVE: Annotations = Annotations {
        read_only: false,
        destructive: true,
        idempotent: true,
        open_world: false,
    };
}

/// The paging fields of a list's output.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Paging {
    /// Pass as cursor to get what follows; null when nothing more follows.
    pub next_cursor: Option<String>,
    /// The limit used (a larger one is lowered to the maximum).
    pub limit_applied: usize,
}

/// The output of a read that may answer "unchanged": the whole answer with `unchanged: false`
/// and its revision, or only `{"unchanged": true, "revision"}`.
#[derive(Debug, Clone)]
pub enum Revisable<T> {
    Full { answer: T, revision: String },
    Unchanged { revision: String },
}

impl<T: Serialize> Serialize for Revisable<T> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Full<'a, T> {
            #[serde(flatten)]
            answer: &'a T,
            unchanged: bool,
            revision: &'a str,
        }
        #[derive(Serialize)]
        struct Unchanged<'a> {
            unchanged: bool,
            revision: &'a str,
        }
        match self {
            Revisable::Full { answer, revision } => Full {
                answer,
                unchanged: false,
                revision,
            }
            .serialize(serializer),
            Revisable::Unchanged { revision } => Unchanged {
                unchanged: true,
                revision,
            }
            .serialize(serializer),
        }
    }
}

impl<T: JsonSchema> JsonSchema for Revisable<T> {
    fn schema_name() -> Cow<'static, str> {
        format!("Revisable_{}", T::schema_name()).into()
    }

    /// `T`'s properties with `revision` and `unchanged`; `unchanged` and `revision` always,
    /// and `T`'s required fields too when `unchanged` is false.
    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let mut schema = generator.subschema_for::<T>().to_value();
        let full = schema["required"].take();
        schema["properties"]["revision"] = serde_json::json!({
            "type": "string",
            "description": "This answer's revision: pass it as if_revision to the same call to hear whether anything changed.",
        });
        schema["properties"]["unchanged"] = serde_json::json!({
            "type": "boolean",
            "description": "true: nothing changed since the answer of if_revision, and only revision is sent.",
        });
        schema["required"] = serde_json::json!(["unchanged", "revision"]);
        schema["anyOf"] = serde_json::json!([
            { "properties": { "unchanged": { "const": false } }, "required": full },
            { "properties": { "unchanged": { "const": true } } },
        ]);
        Schema::try_from(schema).unwrap_or_else(|_| json_schema!({ "type": "object" }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A page.
    #[derive(Serialize, JsonSchema)]
    struct Answer {
        /// The page's id.
        page_id: String,
        date: Option<String>,
        #[serde(flatten)]
        paging: Paging,
    }

    /// A kept text block is the one a call would escape.
    #[test]
    fn a_kept_text_block_is_the_escaped_json() {
        let out = output(&serde_json::json!({ "text": "a \"quoted\" line\nand ü" })).unwrap();
        let (mut fresh, mut kept) = (Vec::new(), Vec::new());
        out.write_text(&mut fresh);
        assert_eq!(out.keep_text(), fresh.len());
        out.write_text(&mut kept);
        assert_eq!(fresh, kept);
        assert_eq!(
            serde_json::from_slice::<String>(&kept).unwrap(),
            out.get(),
            "the text block is the JSON as a string"
        );
    }

    #[test]
    fn schemas_are_inline_objects_with_the_fields_and_their_descriptions() {
        let schema = output_schema::<Answer>();
        assert_eq!(schema["type"], "object");
        assert!(schema.get("$schema").is_none() && schema.get("title").is_none());
        assert_eq!(schema["properties"]["page_id"]["type"], "string");
        assert_eq!(
            schema["properties"]["page_id"]["description"],
            "The page's id."
        );
        assert_eq!(
            schema["properties"]["date"]["type"],
            serde_json::json!(["string", "null"])
        );
        assert!(schema["properties"]["next_cursor"].is_object());
        let required: Vec<&str> = schema["required"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        for field in ["page_id", "date", "next_cursor", "limit_applied"] {
            assert!(required.contains(&field), "{field} is required");
        }
    }

    #[test]
    fn a_revisable_answer_serializes_either_shape_and_its_schema_says_both() {
        let full = Revisable::Full {
            answer: Answer {
                page_id: "p".into(),
                date: None,
                paging: Paging {
                    next_cursor: None,
                    limit_applied: 5,
                },
            },
            revision: "r1.x".into(),
        };
        let v: Value = serde_json::from_str(output(&full).unwrap().get()).unwrap();
        assert_eq!(v["unchanged"], false);
        assert_eq!(v["revision"], "r1.x");
        assert_eq!(v["page_id"], "p");
        assert_eq!(v["limit_applied"], 5);
        let same = Revisable::<Answer>::Unchanged {
            revision: "r1.x".into(),
        };
        assert_eq!(
            output(&same).unwrap().get(),
            r#"{"unchanged":true,"revision":"r1.x"}"#
        );
        let schema = output_schema::<Revisable<Answer>>();
        assert_eq!(schema["type"], "object");
        assert_eq!(
            schema["required"],
            serde_json::json!(["unchanged", "revision"])
        );
        assert!(
            schema["anyOf"][0]["required"]
                .as_array()
                .unwrap()
                .contains(&Value::String("page_id".into()))
        );
    }
}
