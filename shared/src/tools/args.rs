//! Tool arguments: typed getters whose errors name the argument.

use serde_json::{Map, Value};

use super::ToolError;
use crate::domain::{Date, PageId, TaskLinkId};

pub struct Args<'a> {
    map: &'a Map<String, Value>,
    known: Option<&'a Map<String, Value>>,
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

impl<'a> Args<'a> {
    pub fn new(map: &'a Map<String, Value>, known: Option<&'a Map<String, Value>>) -> Self {
        Args { map, known }
    }

    /// Refuses arguments the tool's schema does not declare, so a typo is not silently ignored.
    pub fn check_known(&self) -> Result<(), ToolError> {
        if let Some(known) = self.known
            && let Some(name) = self.map.keys().find(|k| !known.contains_key(*k))
        {
            return Err(ToolError::invalid(name, "is not an argument of this tool"));
        }
        Ok(())
    }

    fn get(&self, name: &str) -> Option<&'a Value> {
        self.map.get(name).filter(|v| !v.is_null())
    }

    pub fn opt_str(&self, name: &str) -> Result<Option<&'a str>, ToolError> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(ToolError::invalid(
                name,
                format!("must be a string, not {}", type_name(other)),
            )),
        }
    }

    /// A list of strings; absent is empty.
    pub fn str_list(&self, name: &str) -> Result<Vec<String>, ToolError> {
        match self.get(name) {
            None => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| match v {
                    Value::String(s) => Ok(s.clone()),
                    other => Err(ToolError::invalid(
                        name,
                        format!("must hold strings, not {}", type_name(other)),
                    )),
                })
                .collect(),
            Some(other) => Err(ToolError::invalid(
                name,
                format!("must be an array of strings, not {}", type_name(other)),
            )),
        }
    }

    pub fn str(&self, name: &str) -> Result<&'a str, ToolError> {
        self.opt_str(name)?
            .ok_or_else(|| ToolError::invalid(name, "is required"))
    }

    /// A required string with something in it, at most `max` characters.
    pub fn text(&self, name: &str, max: usize) -> Result<&'a str, ToolError> {
        let s = self.str(name)?;
        if s.trim().is_empty() {
            return Err(ToolError::invalid(name, "must not be empty"));
        }
        if s.chars().count() > max {
            return Err(ToolError::invalid(
                name,
                format!("must be at most {max} characters"),
            ));
        }
        Ok(s)
    }

    pub fn opt_date(&self, name: &str) -> Result<Option<Date>, ToolError> {
        match self.opt_str(name)? {
            None => Ok(None),
            Some(s) => Date::parse(s).map(Some).map_err(|_| {
                ToolError::invalid(
                    name,
                    format!("must be a date written YYYY-MM-DD, not '{s}'"),
                )
            }),
        }
    }

    pub fn date(&self, name: &str) -> Result<Date, ToolError> {
        self.opt_date(name)?
            .ok_or_else(|| ToolError::invalid(name, "is required"))
    }

    /// An optional whole number of at least 1, `default` when absent, lowered to `max` when
    /// above it (the caller reports the value used as `limit_applied`).
    pub fn limit(&self, name: &str, default: usize, max: usize) -> Result<usize, ToolError> {
        match self.get(name) {
            None => Ok(default.min(max)),
            Some(Value::Number(n)) => match n.as_u64() {
                Some(v) if v >= 1 => Ok(usize::try_from(v).unwrap_or(usize::MAX).min(max)),
                _ => Err(ToolError::invalid(
                    name,
                    format!("must be a whole number of at least 1 (above {max} counts as {max})"),
                )),
            },
            Some(other) => Err(ToolError::invalid(
                name,
                format!("must be a number, not {}", type_name(other)),
            )),
        }
    }

    /// A page id. A malformed id is answered like a missing page: ids are opaque to callers.
    pub fn page_id(&self, name: &str) -> Result<PageId, ToolError> {
        PageId::parse(self.str(name)?).map_err(|_| ToolError::NotFound("page"))
    }

    pub fn task_link_id(&self, name: &str) -> Result<TaskLinkId, ToolError> {
        TaskLinkId::parse(self.str(name)?).map_err(|_| ToolError::NotFound("task"))
    }

    /// One of a fixed set of strings.
    pub fn choice(
        &self,
        name: &str,
        choices: &[&'static str],
        default: Option<&'static str>,
    ) -> Result<&'a str, ToolError> {
        match (self.opt_str(name)?, default) {
            (Some(s), _) if choices.contains(&s) => Ok(s),
            (Some(s), _) => Err(ToolError::invalid(
                name,
                format!("must be one of {}, not '{s}'", choices.join(", ")),
            )),
            (None, Some(d)) => Ok(d),
            (None, None) => Err(ToolError::invalid(name, "is required")),
        }
    }
}
