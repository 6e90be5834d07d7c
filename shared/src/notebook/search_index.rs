//! The search index a process keeps open per user, at the notebook's revision (issue 15).
//!
//! Search reads the same things for every query of a notebook that has not changed: the
//! statistics, the 96 sealed vector blocks and the postings of its terms. Opening them is most
//! of a query's cost (at 10,000 pages the blocks are ~6 MB to read and decrypt), so a process
//! keeps them open in memory, keyed by the notebook's revision item (`records::REVISION_SK`),
//! which every write replaces in its own transaction. A query first reads the revision (one
//! small item): when it is the cached one, the cached statistics, vectors and posting lists
//! are the notebook's and nothing else is read or opened but the pages returned.
//!
//! Correctness: the revision is read *before* anything it keys (strongly consistent reads,
//! in order), so a cached index holds the notebook as of its revision or later, never older;
//! a later write changes the revision and the next query builds again (re-opening only the
//! blocks whose item version changed). Postings and vectors still carry their page revision and
//! are checked against the page record of every hit, as without the cache.
//!
//! What is in memory is opened user data (vectors, blinded term postings): it never leaves the
//! process, is never logged, and is bounded: [`BUDGET_BYTES`] over all users, the least
//! recently used user's index dropped first.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::vectors::Block;
use crate::domain::{Date, UserId};

/// The memory all users' open indexes may take (estimated), before the least recently used is
/// dropped. A notebook of 10,000 pages takes about 7 MB with its vectors.
pub const BUDGET_BYTES: usize = 48 << 20;
/// A user's cached posting lists stop growing here (entries); older lists are dropped first.
const MAX_CACHED_POSTINGS: usize = 400_000;

/// One posting: term frequency, document length and the page revision it was written for.
#[derive(Clone, Copy, Debug)]
pub(super) struct Posting {
    pub tf: u32,
    pub len: u32,
    pub rev: u32,
}

/// A term's postings, sorted by page id.
pub(super) type PostingList = Arc<[(Arc<str>, Posting)]>;

/// An opened vector block and the item version it was opened at.
pub(super) struct OpenBlock {
    pub version: u64,
    pub block: Block,
    /// The entries' page ids, shared with candidates.
    pub pages: Vec<Arc<str>>,
}

/// The opened vector blocks of a user, flattened: entry `g` is `blocks[b].block.entries[e]`
/// with `g = offsets[b] + e`.
pub(super) struct VectorIndex {
    pub blocks: Vec<Option<Arc<OpenBlock>>>,
    pub offsets: Vec<usize>,
    pub by_page: HashMap<Arc<str>, usize>,
    pub total: usize,
}

impl VectorIndex {
    pub fn new(blocks: Vec<Option<Arc<OpenBlock>>>) -> VectorIndex {
        let mut offsets = Vec::with_capacity(blocks.len());
        let mut by_page = HashMap::new();
        let mut total = 0;
        for b in &blocks {
            offsets.push(total);
            if let Some(b) = b {
                for (e, page) in b.pages.iter().enumerate() {
                    by_page.insert(page.clone(), total + e);
                }
                total += b.pages.len();
            }
        }
        VectorIndex {
            blocks,
            offsets,
            by_page,
            total,
        }
    }

    /// The date of a page that has an entry.
    pub fn date_of(&self, page: &str) -> Option<Date> {
        let g = *self.by_page.get(page)?;
        let b = self.offsets.partition_point(|&o| o <= g) - 1;
        let open = self.blocks[b].as_ref()?;
        Some(open.block.entries[g - self.offsets[b]].date)
    }

    fn bytes(&self) -> usize {
        self.blocks
            .iter()
            .flatten()
            .map(|b| {
                b.block
                    .entries
                    .iter()
                    .map(|e| e.vectors.len() + 2 * e.page.len() + 120)
                    .sum::<usize>()
            })
            .sum()
    }
}

/// A user's open index at one notebook revision.
pub(super) struct UserIndex {
    pub revision: u64,
    pub docs: u32,
    pub total_len: u64,
    /// `None` until a query needed the vectors (keyword search without dates does not).
    pub vectors: Option<Arc<VectorIndex>>,
    terms: Mutex<TermLists>,
    last_used: AtomicU64,
}

#[derive(Default)]
struct TermLists {
    lists: HashMap<String, (u64, PostingList)>,
    entries: usize,
    clock: u64,
}

impl UserIndex {
    pub fn new(
        revision: u64,
        docs: u32,
        total_len: u64,
        vectors: Option<Arc<VectorIndex>>,
    ) -> UserIndex {
        UserIndex {
            revision,
            docs,
            total_len,
            vectors,
            terms: Mutex::new(TermLists::default()),
            last_used: AtomicU64::new(0),
        }
    }

    /// The same revision and statistics with vectors, keeping the posting lists already read.
    pub fn with_vectors(&self, vectors: Arc<VectorIndex>) -> UserIndex {
        let terms = self.terms.lock().expect("term lists");
        UserIndex {
            revision: self.revision,
            docs: self.docs,
            total_len: self.total_len,
            vectors: Some(vectors),
            terms: Mutex::new(TermLists {
                lists: terms.lists.clone(),
                entries: terms.entries,
                clock: terms.clock,
            }),
            last_used: AtomicU64::new(self.last_used.load(Ordering::Relaxed)),
        }
    }

    /// A cached posting list of a blinded term.
    pub fn postings(&self, blind: &str) -> Option<PostingList> {
        let mut t = self.terms.lock().expect("term lists");
        t.clock += 1;
        let now = t.clock;
        let entry = t.lists.get_mut(blind)?;
        entry.0 = now;
        Some(entry.1.clone())
    }

    /// Keeps a term's posting list (dropping the least recently used lists past
    /// [`MAX_CACHED_POSTINGS`]).
    pub fn keep_postings(&self, blind: String, list: PostingList) {
        let mut t = self.terms.lock().expect("term lists");
        if list.len() > MAX_CACHED_POSTINGS {
            return;
        }
        t.clock += 1;
        let now = t.clock;
        t.entries += list.len();
        if let Some((_, old)) = t.lists.insert(blind, (now, list)) {
            t.entries -= old.len();
        }
        while t.entries > MAX_CACHED_POSTINGS {
            let Some(oldest) = t
                .lists
                .iter()
                .min_by_key(|(_, (used, _))| *used)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            if let Some((_, old)) = t.lists.remove(&oldest) {
                t.entries -= old.len();
            }
        }
    }

    fn bytes(&self) -> usize {
        let postings = self.terms.lock().expect("term lists").entries * 40;
        postings + self.vectors.as_ref().map_or(0, |v| v.bytes())
    }
}

/// Every user's open index in this process.
#[derive(Default)]
pub(super) struct SearchCache {
    users: Mutex<HashMap<UserId, Arc<UserIndex>>>,
    clock: AtomicU64,
}

impl SearchCache {
    /// The user's open index, whatever its revision.
    pub fn get(&self, user: &UserId) -> Option<Arc<UserIndex>> {
        let index = self
            .users
            .lock()
            .expect("search cache")
            .get(user)
            .cloned()?;
        index.last_used.store(
            self.clock.fetch_add(1, Ordering::Relaxed),
            Ordering::Relaxed,
        );
        Some(index)
    }

    /// Keeps a user's index (replacing any older one), then drops the least recently used
    /// indexes of other users while all of them pass [`BUDGET_BYTES`].
    pub fn put(&self, user: &UserId, index: Arc<UserIndex>) {
        index.last_used.store(
            self.clock.fetch_add(1, Ordering::Relaxed),
            Ordering::Relaxed,
        );
        let mut users = self.users.lock().expect("search cache");
        users.insert(user.clone(), index);
        loop {
            let total: usize = users.values().map(|i| i.bytes()).sum();
            if total <= BUDGET_BYTES || users.len() <= 1 {
                break;
            }
            let oldest = users
                .iter()
                .filter(|(u, _)| *u != user)
                .min_by_key(|(_, i)| i.last_used.load(Ordering::Relaxed))
                .map(|(u, _)| u.clone());
            match oldest {
                Some(u) => {
                    users.remove(&u);
                }
                None => break,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::PageId;
    use crate::notebook::vectors::Entry;

    /// An index whose vectors take about `mib` MiB.
    fn index_of(revision: u64, mib: usize) -> Arc<UserIndex> {
        let entry = Entry {
            page: PageId::new().to_string(),
            rev: 1,
            date: Date::parse("2026-06-19").unwrap(),
            vectors: vec![1; mib << 20],
        };
        let open = OpenBlock {
            version: 1,
            pages: vec![Arc::from(entry.page.as_str())],
            block: Block {
                model: "m".into(),
                dims: 256,
                entries: vec![entry],
            },
        };
        let vectors = VectorIndex::new(vec![None, Some(Arc::new(open)), None]);
        Arc::new(UserIndex::new(revision, 1, 10, Some(Arc::new(vectors))))
    }

    #[test]
    fn the_least_recently_used_index_leaves_when_all_pass_the_budget() {
        let cache = SearchCache::default();
        let users: Vec<UserId> = (0..4)
            .map(|i| UserId::parse(&format!("u{i}")).unwrap())
            .collect();
        let share = (BUDGET_BYTES >> 20) / 3 + 1;
        cache.put(&users[0], index_of(1, share));
        cache.put(&users[1], index_of(1, share));
        // u0 used since u1 was put: u1 is the least recently used when u2 comes.
        assert_eq!(cache.get(&users[0]).unwrap().revision, 1);
        cache.put(&users[2], index_of(7, share));
        assert!(cache.get(&users[1]).is_none(), "u1 left");
        assert!(cache.get(&users[0]).is_some() && cache.get(&users[2]).is_some());
        // A new revision replaces the user's index.
        cache.put(&users[2], index_of(8, 1));
        assert_eq!(cache.get(&users[2]).unwrap().revision, 8);
        // One index over the whole budget is still kept (its user is searching).
        cache.put(&users[3], index_of(1, (BUDGET_BYTES >> 20) + 1));
        assert!(cache.get(&users[3]).is_some());
        assert_eq!(cache.users.lock().unwrap().len(), 1);
    }

    #[test]
    fn entries_are_found_by_page_across_empty_blocks() {
        let index = index_of(1, 0);
        let v = index.vectors.as_ref().unwrap();
        let page = v.blocks[1].as_ref().unwrap().pages[0].clone();
        assert_eq!(v.by_page[&page], 0);
        assert_eq!(v.offsets, [0, 0, 1]);
        assert_eq!(v.date_of(&page), Date::parse("2026-06-19").ok());
        assert_eq!(v.date_of("nope"), None);
    }

    #[test]
    fn posting_lists_are_bounded_and_the_oldest_leave_first() {
        let index = UserIndex::new(1, 1, 1, None);
        let list = |n: usize| -> PostingList {
            (0..n)
                .map(|i| {
                    (
                        Arc::from(format!("p{i:07}").as_str()),
                        Posting {
                            tf: 1,
                            len: 1,
                            rev: 1,
                        },
                    )
                })
                .collect::<Vec<_>>()
                .into()
        };
        let half = MAX_CACHED_POSTINGS / 2;
        index.keep_postings("a".into(), list(half));
        index.keep_postings("b".into(), list(half));
        assert!(index.postings("a").is_some()); // a is now newer than b
        index.keep_postings("c".into(), list(10));
        assert!(index.postings("b").is_none(), "b left");
        assert_eq!(index.postings("a").unwrap().len(), half);
        assert_eq!(index.postings("c").unwrap().len(), 10);
        // A list larger than the bound is not kept at all.
        index.keep_postings("d".into(), list(MAX_CACHED_POSTINGS + 1));
        assert!(index.postings("d").is_none());
    }
}
