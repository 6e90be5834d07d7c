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

use super::bounded::BoundedFifo;
use super::rank::{PostingList, VectorIndex};
use crate::domain::UserId;

/// The memory all users' open indexes may take (estimated), before the least recently used is
/// dropped. A notebook of 10,000 pages takes about 7 MB with its vectors.
pub const BUDGET_BYTES: usize = 48 << 20;
/// A user's cached posting lists stop growing here (entries, 16 bytes each: 16 MB); older
/// lists are dropped first. At 100,000 pages the bench's ten queries keep 16 lists of 637,632
/// postings in all; at 400,000 they pushed each other out every round and each query read its
/// common words' lists again (p50 106 ms against 4.4; bench/search-meaning.md, "In process at
/// 10,000 and 100,000 pages").
const MAX_CACHED_POSTINGS: usize = 1_000_000;
/// The opened hits a user's index keeps ([`HitPage`]), in bytes of text; the oldest go first.
const MAX_HIT_BYTES: usize = 2 << 20;

/// A page a query returned, opened: what the walk over a ranking needs of it. Kept in the
/// index at its revision, so the next query that returns it reads, decrypts and decodes
/// nothing: the index's revision is read before the page was, so the page is as new as it
/// (a later write makes a new index, without these).
pub(super) struct HitPage {
    pub page_id: crate::domain::PageId,
    pub date: crate::domain::Date,
    pub rev: u32,
    pub has_pdf: bool,
    pub has_png: bool,
    /// The lines' texts.
    pub lines: Vec<String>,
    /// The lines joined, ready for snippets (made by the first query that needs it).
    prepared: std::sync::OnceLock<Prepared>,
}

/// A hit page's text as snippets and phrases read it.
pub(super) struct Prepared {
    /// The lines joined by newlines.
    pub body: String,
    pub snippable: crate::domain::text::Snippable,
}

impl HitPage {
    pub fn new(
        page_id: crate::domain::PageId,
        date: crate::domain::Date,
        rev: u32,
        (has_pdf, has_png): (bool, bool),
        lines: Vec<String>,
    ) -> HitPage {
        HitPage {
            page_id,
            date,
            rev,
            has_pdf,
            has_png,
            lines,
            prepared: std::sync::OnceLock::new(),
        }
    }

    pub fn prepared(&self) -> &Prepared {
        self.prepared.get_or_init(|| {
            let body = self.lines.join("\n");
            Prepared {
                snippable: crate::domain::text::Snippable::new(&body),
                body,
            }
        })
    }

    /// Its size, estimated: the text about three times over once prepared.
    fn bytes(&self) -> usize {
        3 * self.lines.iter().map(|l| l.len() + 24).sum::<usize>() + 128
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
    /// Numbers of the pages that have postings but no vector entry (after the entries').
    others: Mutex<Others>,
    /// Pages queries returned, opened, by number.
    hits: Mutex<BoundedFifo<u32, Arc<HitPage>>>,
    /// One read of a term's postings at a time: queries that miss the same term together wait
    /// for the first one's read and then find the list kept (16 concurrent first queries had
    /// each read "budget"'s 5,470 postings, on ~60 blocking threads with their own allocator
    /// arenas: 87 MiB of RSS at 10,000 pages, against 59 after one first query alone).
    term_reads: KeyedLocks<String>,
    last_used: AtomicU64,
}

#[derive(Default)]
struct Others {
    ids: HashMap<Arc<str>, u32>,
    names: Vec<Arc<str>>,
}

#[derive(Default)]
struct TermLists {
    lists: HashMap<String, (u64, PostingList)>,
    entries: usize,
    clock: u64,
}

impl TermLists {
    /// What the kept lists take.
    fn bytes(&self) -> usize {
        self.entries * std::mem::size_of::<(u32, super::rank::Posting)>()
    }
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
            others: Mutex::new(Others::default()),
            hits: Mutex::new(BoundedFifo::new(MAX_HIT_BYTES)),
            term_reads: KeyedLocks::default(),
            last_used: AtomicU64::new(0),
        }
    }

    /// The same revision and statistics with vectors (the posting lists are read again: pages
    /// are numbered by the vector entries first).
    pub fn with_vectors(&self, vectors: Arc<VectorIndex>) -> UserIndex {
        UserIndex::new(self.revision, self.docs, self.total_len, Some(vectors))
    }

    fn entries(&self) -> u32 {
        self.vectors.as_ref().map_or(0, |v| v.len() as u32)
    }

    /// The number of a page (its vector entry's, else one given here).
    pub fn number(&self, page: &str) -> u32 {
        if let Some(g) = self.vectors.as_ref().and_then(|v| v.by_page.get(page)) {
            return *g;
        }
        let mut o = self.others.lock().expect("page numbers");
        if let Some(id) = o.ids.get(page) {
            return *id;
        }
        let id = self.entries() + o.names.len() as u32;
        let name: Arc<str> = Arc::from(page);
        o.ids.insert(name.clone(), id);
        o.names.push(name);
        id
    }

    /// The page id of a number.
    pub fn page(&self, id: u32) -> Option<Arc<str>> {
        let entries = self.entries();
        if id < entries {
            return self.vectors.as_ref().map(|v| v.page(id).clone());
        }
        let o = self.others.lock().expect("page numbers");
        o.names.get((id - entries) as usize).cloned()
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

    /// The lock a read of a term's postings holds.
    pub fn term_read_lock(&self, blind: &str) -> Arc<tokio::sync::Mutex<()>> {
        self.term_reads.lock_for(blind)
    }

    /// Forgets a term's read lock when nobody else holds or waits for it.
    pub fn release_term_read(&self, blind: &str, lock: Arc<tokio::sync::Mutex<()>>) {
        self.term_reads.release(blind, lock);
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

    /// The page of number `id`, opened by an earlier query of this index.
    pub fn hit(&self, id: u32) -> Option<Arc<HitPage>> {
        self.hits.lock().expect("hit pages").get(&id).cloned()
    }

    /// Keeps an opened page (the oldest kept go past [`MAX_HIT_BYTES`]).
    pub fn keep_hit(&self, id: u32, page: Arc<HitPage>) {
        let size = page.bytes();
        self.hits.lock().expect("hit pages").insert(id, page, size);
    }

    /// Drops the kept posting lists and opened pages (what fills under load), keeping the
    /// statistics and vectors; returns the bytes they took (estimated).
    fn shed(&self) -> usize {
        let postings = std::mem::take(&mut *self.terms.lock().expect("term lists")).bytes();
        postings + self.hits.lock().expect("hit pages").clear()
    }

    fn bytes(&self) -> usize {
        let postings = self.terms.lock().expect("term lists").bytes();
        let hits = self.hits.lock().expect("hit pages").bytes();
        postings + hits + self.vectors.as_ref().map_or(0, |v| v.bytes())
    }
}

/// Every user's open index in this process.
#[derive(Default)]
pub(super) struct SearchCache {
    users: Mutex<HashMap<UserId, Arc<UserIndex>>>,
    clock: AtomicU64,
    /// One build of a user's index at a time: queries that miss together wait for the first
    /// one's build instead of each opening every block (16 concurrent builds of a 10,000-page
    /// notebook took 700 MiB).
    builds: KeyedLocks<UserId>,
}

/// One async lock per key, kept only while someone holds or waits for it: work that many
/// callers would otherwise do at once for the same key (a user's index build, a term's
/// postings read) runs once, and the others wait for it and then find its result.
pub(super) struct KeyedLocks<K> {
    locks: Mutex<HashMap<K, Arc<tokio::sync::Mutex<()>>>>,
}

impl<K> Default for KeyedLocks<K> {
    fn default() -> Self {
        KeyedLocks {
            locks: Mutex::new(HashMap::new()),
        }
    }
}

impl<K: Eq + std::hash::Hash> KeyedLocks<K> {
    /// The lock of `key` (made when nobody has it).
    fn lock_for<Q>(&self, key: &Q) -> Arc<tokio::sync::Mutex<()>>
    where
        K: std::borrow::Borrow<Q>,
        Q: std::hash::Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let mut locks = self.locks.lock().expect("keyed locks");
        if let Some(lock) = locks.get(key) {
            return lock.clone();
        }
        let lock = Arc::default();
        locks.insert(key.to_owned(), Arc::clone(&lock));
        lock
    }

    /// Forgets `key`'s lock when nobody else holds or waits for it.
    fn release<Q>(&self, key: &Q, lock: Arc<tokio::sync::Mutex<()>>)
    where
        K: std::borrow::Borrow<Q>,
        Q: std::hash::Hash + Eq + ?Sized,
    {
        let mut locks = self.locks.lock().expect("keyed locks");
        // The map's reference and `lock`: nobody else has it.
        if Arc::strong_count(&lock) <= 2 {
            locks.remove(key);
        }
    }

    /// Whether `key` has a lock now.
    #[cfg(test)]
    fn held<Q>(&self, key: &Q) -> bool
    where
        K: std::borrow::Borrow<Q>,
        Q: std::hash::Hash + Eq + ?Sized,
    {
        self.locks.lock().expect("keyed locks").contains_key(key)
    }
}

impl SearchCache {
    /// The lock a build of the user's index holds.
    pub fn build_lock(&self, user: &UserId) -> Arc<tokio::sync::Mutex<()>> {
        self.builds.lock_for(user)
    }

    /// Forgets the user's build lock when nobody else holds or waits for it.
    pub fn release_build(&self, user: &UserId, lock: Arc<tokio::sync::Mutex<()>>) {
        self.builds.release(user, lock);
    }

    /// Drops every open index's kept posting lists and opened pages, keeping their statistics
    /// and vectors (the costly part to open again); returns the bytes they took (estimated).
    pub fn shed(&self) -> usize {
        let users: Vec<Arc<UserIndex>> = self
            .users
            .lock()
            .expect("search cache")
            .values()
            .cloned()
            .collect();
        users.iter().map(|index| index.shed()).sum()
    }

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
    use crate::domain::{Date, PageId};
    use crate::notebook::rank::{OpenBlock, Posting};
    use crate::notebook::vectors::{Block, Entry};

    /// An index whose vectors take about `mib` MiB.
    fn index_of(revision: u64, mib: usize) -> Arc<UserIndex> {
        let entry = Entry {
            page: PageId::new().to_string(),
            rev: 1,
            date: Date::parse("2026-06-19").unwrap(),
            vectors: vec![1; mib << 20],
        };
        let open = OpenBlock::new(
            1,
            Block {
                model: "m".into(),
                dims: 256,
                entries: vec![entry],
            },
        );
        let vectors = VectorIndex::new(vec![None, Some(Arc::new(open)), None], "m", 256);
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

    #[tokio::test]
    async fn one_build_at_a_time_per_user_and_the_lock_is_forgotten_after() {
        let cache = SearchCache::default();
        let (a, b) = (UserId::parse("a").unwrap(), UserId::parse("b").unwrap());
        let lock = cache.build_lock(&a);
        let guard = lock.lock().await;
        // Another query of the same user waits; another user's does not.
        assert!(cache.build_lock(&a).try_lock().is_err());
        assert!(cache.build_lock(&b).try_lock().is_ok());
        drop(guard);
        assert!(cache.build_lock(&a).try_lock().is_ok());
        cache.release_build(&a, lock);
        assert!(!cache.builds.held(&a));
    }

    #[tokio::test]
    async fn one_read_of_a_term_at_a_time_and_the_lock_is_forgotten_after() {
        let index = UserIndex::new(1, 1, 1, None);
        let lock = index.term_read_lock("t");
        let guard = lock.lock().await;
        assert!(index.term_read_lock("t").try_lock().is_err());
        assert!(index.term_read_lock("u").try_lock().is_ok());
        drop(guard);
        index.release_term_read("t", lock);
        assert!(!index.term_reads.held("t"));
    }

    #[test]
    fn pages_are_numbered_after_the_vector_entries() {
        let index = index_of(1, 0);
        let v = index.vectors.as_ref().unwrap();
        let page = v.page(0).clone();
        assert_eq!(index.number(&page), 0);
        // A page with postings only gets the next number, the same each time.
        assert_eq!(index.number("p-only-words"), 1);
        assert_eq!(index.number("p-other"), 2);
        assert_eq!(index.number("p-only-words"), 1);
        assert_eq!(index.page(1).as_deref(), Some("p-only-words"));
        assert_eq!(index.page(0), Some(page));
        assert_eq!(index.page(3), None);
    }

    #[test]
    fn posting_lists_are_bounded_and_the_oldest_leave_first() {
        let index = UserIndex::new(1, 1, 1, None);
        let list = |n: usize| -> PostingList {
            (0..n)
                .map(|i| {
                    (
                        i as u32,
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

    #[test]
    fn shedding_drops_the_postings_and_pages_and_keeps_the_vectors() {
        let cache = SearchCache::default();
        let user = UserId::parse("alice").unwrap();
        let index = index_of(7, 1);
        let posting = Posting {
            tf: 1,
            len: 1,
            rev: 1,
        };
        index.keep_postings("a".into(), vec![(0, posting)].into());
        let page = HitPage::new(
            PageId::new(),
            Date::parse("2026-06-19").unwrap(),
            1,
            (false, false),
            vec!["one line".into()],
        );
        index.keep_hit(0, Arc::new(page));
        cache.put(&user, index);
        let vectors = cache.get(&user).unwrap().vectors.as_ref().unwrap().bytes();

        let shed = cache.shed();
        assert!(shed >= std::mem::size_of::<(u32, Posting)>() + "one line".len());
        let index = cache.get(&user).expect("the index stays open");
        assert_eq!(index.revision, 7);
        assert!(index.postings("a").is_none() && index.hit(0).is_none());
        assert_eq!(index.vectors.as_ref().unwrap().bytes(), vectors);
        assert_eq!(index.bytes(), vectors);
        assert_eq!(cache.shed(), 0, "nothing left to shed");
    }
}
