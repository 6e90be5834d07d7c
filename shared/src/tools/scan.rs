//! A few string fields read out of a tool's [`Output`](super::Output) without parsing it: the
//! ids the access record needs, the pages a result's resource links name. Both run on every
//! call, over outputs of kilobytes (a page's text), where a walk with serde_json was most of
//! their cost.
//!
//! Exact for JSON as serde_json writes it (no whitespace between tokens), which is what an
//! [`Output`](super::Output) is. A field `"key":"value"` is found by its bytes: a quote that
//! no odd run of backslashes escapes, the key, a quote, a colon, a quote. Such a quote cannot be
//! inside a string (there every quote is escaped), nor close one (a closing quote is followed
//! by `,`, `:`, `}` or `]`), so it opens a key. The value runs to the next quote; a value with
//! an escape in it is skipped (ids and dates have none).

use memchr::memmem;

/// The string values of `keys`, anywhere in `json`, in the order they come: `(index into
/// keys, value)`.
pub fn fields<'j>(json: &'j str, keys: &[&str]) -> Vec<(usize, &'j str)> {
    let bytes = json.as_bytes();
    let mut found = Vec::new();
    for (k, key) in keys.iter().enumerate() {
        for start in value_starts(json, key) {
            let Some(len) = memchr::memchr(b'"', &bytes[start..]) else {
                continue;
            };
            let value = &json[start..start + len];
            if !value.contains('\\') {
                found.push((start, k, value));
            }
        }
    }
    found.sort_unstable_by_key(|(at, ..)| *at);
    found.into_iter().map(|(_, k, v)| (k, v)).collect()
}

/// Where each string value of the field `key` starts (after its opening quote).
fn value_starts(json: &str, key: &str) -> Vec<usize> {
    let bytes = json.as_bytes();
    let needle = format!("\"{key}\":\"");
    let found = |finder: &memmem::Finder<'_>| -> Vec<usize> {
        finder
            .find_iter(bytes)
            .filter(|&at| !escaped(bytes, at))
            .map(|at| at + finder.needle().len())
            .collect()
    };
    // The keys every call looks for have their searchers built once.
    match FINDERS.iter().find(|f| f.needle() == needle.as_bytes()) {
        Some(finder) => found(finder),
        None => found(&memmem::Finder::new(needle.as_bytes())),
    }
}

/// Searchers for the fields of [`super::opened`] and the resource links.
static FINDERS: std::sync::LazyLock<Vec<memmem::Finder<'static>>> =
    std::sync::LazyLock::new(|| {
        ["page_id", "id", "task_link_id", "date", "png_url"]
            .iter()
            .map(|k| memmem::Finder::new(format!("\"{k}\":\"").as_bytes()).into_owned())
            .collect()
    });

/// Whether the quote at `at` is escaped: an odd run of backslashes before it.
fn escaped(bytes: &[u8], at: usize) -> bool {
    bytes[..at]
        .iter()
        .rev()
        .take_while(|b| **b == b'\\')
        .count()
        % 2
        == 1
}

/// Whether some field `key` of `json`, at any depth, is a string (not `null` or absent).
pub fn has_string(json: &str, key: &str) -> bool {
    !value_starts(json, key).is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn fields_are_found_in_order_and_quoted_lookalikes_are_not() {
        let json = serde_json::json!({
            "page_id": "p1",
            "text": "a line that says \"page_id\":\"fake\" and a backslash \\",
            "lines": [{ "task_link_id": "t1", "completed_date": "2026-01-02" }],
            "date": "2026-06-19",
            "png_url": null,
        })
        .to_string();
        assert_eq!(
            fields(&json, &["page_id", "date", "task_link_id"]),
            // serde_json's maps sort their keys.
            [(1, "2026-06-19"), (2, "t1"), (0, "p1")]
        );
        assert!(!has_string(&json, "png_url"));
        assert!(has_string(&json, "text"));
    }

    proptest! {
        /// Whatever strings an output holds, the scan finds exactly the fields a parse finds.
        #[test]
        fn the_scan_agrees_with_a_parse(
            texts in proptest::collection::vec(".*", 0..6),
            ids in proptest::collection::vec("[a-f0-9-]{1,12}", 0..6),
        ) {
            let items: Vec<serde_json::Value> = ids
                .iter()
                .zip(texts.iter().chain(std::iter::repeat(&String::new())))
                .map(|(id, text)| serde_json::json!({ "text": text, "page_id": id, "note": format!("\"page_id\":\"{text}") }))
                .collect();
            let json = serde_json::json!({ "pages": items, "text": texts }).to_string();
            let found: Vec<&str> = fields(&json, &["page_id"]).into_iter().map(|(_, v)| v).collect();
            let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
            prop_assert_eq!(found, ids);
        }
    }
}
