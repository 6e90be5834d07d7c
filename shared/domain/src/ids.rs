//! Newtypes that parse: an invalid id or date cannot get past the boundary.

use std::fmt;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    #[error("must be a date written YYYY-MM-DD")]
    Date,
    #[error("must be 1 to 64 characters of a-z, 0-9, '-' or '_', starting with a letter or digit")]
    User,
    #[error("is not a valid id")]
    Id,
}

/// A user id: short, lowercase, safe in keys and paths.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct UserId(String);

impl UserId {
    pub fn parse(s: &str) -> Result<Self, IdError> {
        let ok = !s.is_empty()
            && s.len() <= 64
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
            && s.as_bytes()[0].is_ascii_alphanumeric();
        if ok {
            Ok(UserId(s.to_owned()))
        } else {
            Err(IdError::User)
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

macro_rules! uuid_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
        #[serde(try_from = "String")]
        pub struct $name(String);

        /// Written as its string, borrowed (no copy per id written).
        impl Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.0)
            }
        }

        impl schemars::JsonSchema for $name {
            fn inline_schema() -> bool {
                true
            }

            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }

            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                schemars::json_schema!({ "type": "string" })
            }
        }

        impl $name {
            /// A new time-ordered id (UUID v7).
            pub fn new() -> Self {
                $name(uuid::Uuid::now_v7().to_string())
            }

            /// Accepts only the canonical hyphenated lowercase form, so that one id has one
            /// spelling in keys.
            pub fn parse(s: &str) -> Result<Self, IdError> {
                match uuid::Uuid::try_parse(s) {
                    Ok(u) if u.hyphenated().to_string() == s => Ok($name(s.to_owned())),
                    _ => Err(IdError::Id),
                }
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl TryFrom<String> for $name {
            type Error = IdError;
            fn try_from(s: String) -> Result<Self, IdError> {
                Self::parse(&s)
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }
    };
}

uuid_id!(
    /// A page's id.
    PageId
);
uuid_id!(
    /// A task link's id.
    TaskLinkId
);

impl fmt::Display for UserId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for UserId {
    type Error = IdError;
    fn try_from(s: String) -> Result<Self, IdError> {
        Self::parse(&s)
    }
}

impl From<UserId> for String {
    fn from(id: UserId) -> String {
        id.0
    }
}

/// A calendar date, written `YYYY-MM-DD` everywhere (keys, JSON, front matter).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
#[serde(try_from = "String")]
pub struct Date(time::Date);

/// Written as `YYYY-MM-DD` into the serializer's own buffer.
impl Serialize for Date {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl schemars::JsonSchema for Date {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Date".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "type": "string" })
    }
}

const DATE_FORMAT: &[time::format_description::BorrowedFormatItem<'static>] =
    time::macros::format_description!("[year]-[month]-[day]");

impl Date {
    pub fn parse(s: &str) -> Result<Self, IdError> {
        // The format parser accepts some widths loosely; insist on exactly ten characters.
        if s.len() != 10 {
            return Err(IdError::Date);
        }
        time::Date::parse(s, DATE_FORMAT)
            .map(Date)
            .map_err(|_| IdError::Date)
    }

    pub fn from_time(d: time::Date) -> Self {
        Date(d)
    }

    pub fn inner(self) -> time::Date {
        self.0
    }
}

impl fmt::Display for Date {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.0;
        write!(
            f,
            "{:04}-{:02}-{:02}",
            d.year(),
            u8::from(d.month()),
            d.day()
        )
    }
}

impl TryFrom<String> for Date {
    type Error = IdError;
    fn try_from(s: String) -> Result<Self, IdError> {
        Self::parse(&s)
    }
}

impl From<Date> for String {
    fn from(d: Date) -> String {
        d.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_parse_strictly_and_print_back() {
        assert_eq!(Date::parse("2026-06-19").unwrap().to_string(), "2026-06-19");
        for bad in [
            "2026-6-19",
            "2026-02-30",
            "19-06-2026",
            "",
            "2026-06-19x",
            "2026-06-1",
        ] {
            assert!(Date::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn user_ids_are_safe_in_keys() {
        assert!(UserId::parse("default").is_ok());
        for bad in ["", "Bob", "a#b", "-x", &"a".repeat(65)] {
            assert!(UserId::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn page_ids_have_one_spelling() {
        let id = PageId::new();
        assert_eq!(PageId::parse(id.as_str()).unwrap(), id);
        assert!(PageId::parse(&id.as_str().to_uppercase()).is_err());
        assert!(PageId::parse("nope").is_err());
    }
}
