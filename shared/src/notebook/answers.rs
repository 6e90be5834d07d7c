//! Answers kept by their revision: a read whose revision token ([`super::revision_token`])
//! is the same answers the same, so the second time it is not opened, decrypted and written
//! again. The token names everything the answer depends on (that is what lets `if_revision`
//! say "unchanged"), so a kept answer is the one the read would give. For a page with ink
//! that includes the half of the signed URLs' lifetime the read falls in: a kept answer's URLs
//! were signed at most half their lifetime before (as a client's own `if_revision` answer).
//!
//! Per process, bounded in bytes, first in first out (a notebook write changes every token of
//! its user, and the old answers age out). Keyed by the verified user and the token; the
//! answers are opaque JSON here (a tool's serialized output), held only in memory.

use std::sync::Mutex;

use super::bounded::BoundedFifo;
use crate::domain::UserId;
use crate::tools::Output;

/// How many bytes of answers a process keeps.
pub const ANSWER_CACHE_BYTES: usize = 4 << 20;
/// An answer larger than this is not kept (it would push out many others).
const LARGEST_KEPT: usize = 256 << 10;

/// The kept answers, by revision token (a hash naming the page, so unique across users in
/// practice) with the user each was answered to: a lookup borrows the token.
#[derive(Debug)]
pub struct AnswerCache {
    kept: Mutex<BoundedFifo<String, (UserId, Output)>>,
}

impl Default for AnswerCache {
    fn default() -> Self {
        AnswerCache {
            kept: Mutex::new(BoundedFifo::new(ANSWER_CACHE_BYTES)),
        }
    }
}

impl AnswerCache {
    fn kept(&self) -> std::sync::MutexGuard<'_, BoundedFifo<String, (UserId, Output)>> {
        self.kept.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The answer kept for `user` at `revision`.
    pub fn get(&self, user: &UserId, revision: &str) -> Option<Output> {
        match self.kept().get(revision) {
            Some((owner, answer)) if owner == user => Some(answer.clone()),
            _ => None,
        }
    }

    /// Keeps `answer` for `user` at `revision`, letting the oldest answers go over the budget.
    pub fn put(&self, user: &UserId, revision: &str, answer: &Output) {
        let size = answer.get().len();
        if size > LARGEST_KEPT {
            return;
        }
        // It will be given again: its text block is written once, now, and kept with it.
        let size = size + answer.keep_text();
        let value = (user.clone(), answer.clone());
        self.kept().insert(revision.to_owned(), value, size);
    }

    /// Forgets every answer (a process starting cold, in tests; an idle server); returns the
    /// bytes they took.
    pub fn clear(&self) -> usize {
        self.kept().clear()
    }

    /// Bytes of answers kept.
    pub fn bytes(&self) -> usize {
        self.kept().bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_kept_per_user_and_revision_within_the_budget() {
        let cache = AnswerCache::default();
        let alice = UserId::parse("alice").unwrap();
        let bob = UserId::parse("bob").unwrap();
        let json = |s: String| Output::new(serde_json::value::RawValue::from_string(s).unwrap());
        cache.put(&alice, "r1.a", &json(r#"{"a":1}"#.into()));
        assert_eq!(cache.get(&alice, "r1.a").unwrap().get(), r#"{"a":1}"#);
        // Another user's read of the same revision is not this one's.
        assert!(cache.get(&bob, "r1.a").is_none());
        assert!(cache.get(&alice, "r1.b").is_none());
        // Past the budget the oldest go first.
        let big = json(format!("\"{}\"", "x".repeat(200 << 10)));
        for n in 0..(ANSWER_CACHE_BYTES / (400 << 10) + 2) {
            cache.put(&bob, &format!("r1.{n}"), &big);
        }
        assert!(cache.bytes() <= ANSWER_CACHE_BYTES);
        assert!(cache.get(&alice, "r1.a").is_none());
        assert!(cache.get(&bob, "r1.0").is_none());
        assert!(
            cache
                .get(
                    &bob,
                    &format!("r1.{}", ANSWER_CACHE_BYTES / (400 << 10) + 1)
                )
                .is_some()
        );
        // Too big to keep at all.
        cache.put(
            &alice,
            "r1.huge",
            &json(format!("\"{}\"", "x".repeat(LARGEST_KEPT))),
        );
        assert!(cache.get(&alice, "r1.huge").is_none());
    }
}
