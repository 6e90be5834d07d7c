//! Sealed vector blocks: each page's chunk vectors (`embed`), packed into a fixed set of
//! block items per user, so search by meaning reads a handful of items whatever the notebook's
//! size, and a page write rewrites one block in its own transaction.
//!
//! A block is the item `U#{user}` / `VEC#{nn}` (`nn` = 00..[`BLOCKS`], chosen by the page id),
//! with a raw body: `NIBVEC1\n`, the model id (u16 length + UTF-8, in clear: it names a model,
//! not the user's content), then the entries sealed as field `vectors` under the user's key.
//! An entry is the page id, its revision, its date and its quantised chunk vectors; search
//! counts an entry only when the page's current revision is the entry's (so the page-write
//! invariant holds for vectors as for postings), and only when its block's model is the
//! binary's (vectors of two models are never compared: `nib reindex` re-embeds).

use super::NotebookError;
use super::rank::OpenBlock;
use super::records;
use crate::crypto::UserKeys;
use crate::domain::{Date, PageId, UserId};
use crate::embed::{self, Model};
use crate::ports::{Cond, Item, MAX_TRANSACTION_ITEMS, Query, StoreError, Write};

/// Blocks per user. With the 3 statistics keys this stays under DynamoDB's 100 keys per
/// BatchGetItem, so all of them are one request.
pub const BLOCKS: usize = 96;
/// The most chunks kept per page (a page's first lines first): bounds a block's size.
pub const MAX_CHUNKS: usize = 16;
/// A block's sealed entries stay under this many bytes (DynamoDB's item limit is 400 KB):
/// 96 blocks hold about 44,000 pages of two windows and the whole page (three vectors), or
/// 115,000 of one; a page that would not fit keeps only its whole page's vector.
const MAX_BLOCK_BYTES: usize = 380_000;
/// Entries without vectors stop here (the sealed block's overhead is under 100 bytes).
const HARD_BLOCK_BYTES: usize = 400_000;

const MAGIC: &[u8; 8] = b"NIBVEC1\n";
pub const BLOCK_PREFIX: &str = "VEC#";

pub fn block_sk(index: usize) -> String {
    format!("{BLOCK_PREFIX}{index:02}")
}

/// Pending entries: one item per page, `VECP#{nn}#{page id}` (`nn` its block), written by a
/// bulk import instead of its block and folded into the block later (`fold_vectors`). Not
/// under [`BLOCK_PREFIX`], so a query of the blocks never meets one.
pub const PENDING_PREFIX: &str = "VECP#";
/// A counter every commit of a pending entry adds to: while it exists a search reads the
/// pending entries too; the fold deletes it once everything it saw is folded.
pub const PENDING_SK: &str = "VECPENDING";

/// The key of `page`'s pending entry.
pub fn pending_sk(page: &PageId) -> String {
    format!("{}{page}", pending_block_prefix(block_of(page)))
}

/// The prefix of the pending entries of block `index`.
fn pending_block_prefix(index: usize) -> String {
    format!("{PENDING_PREFIX}{index:02}#")
}

/// The block a page's vectors live in: from the page id's last hex digits, which are random
/// (the first ones of a v7 UUID are its creation time, shared by pages made together).
pub fn block_of(page: &PageId) -> usize {
    let hex: Vec<char> = page
        .as_str()
        .chars()
        .filter(char::is_ascii_hexdigit)
        .collect();
    let tail: String = hex[hex.len().saturating_sub(8)..].iter().collect();
    u32::from_str_radix(&tail, 16).unwrap_or(0) as usize % BLOCKS
}

/// Every block key of a user, in index order.
pub fn block_keys(pk: &str) -> Vec<(String, String)> {
    (0..BLOCKS).map(|i| (pk.to_owned(), block_sk(i))).collect()
}

/// One page's vectors in a block.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub page: String,
    pub rev: u32,
    pub date: Date,
    /// `chunks x dims` signed bytes.
    pub vectors: Vec<i8>,
}

/// An opened block.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Block {
    pub model: String,
    pub dims: usize,
    pub entries: Vec<Entry>,
}

/// A page's vectors, flattened: its chunks' (at most [`MAX_CHUNKS`]) and, for a page of more
/// than one chunk, the whole page's last (`embed::page_texts`).
pub fn page_vectors(model: &Model, lines: &[&str]) -> Vec<i8> {
    let text = lines.join("\n");
    embed::page_texts(&text, MAX_CHUNKS)
        .iter()
        .filter_map(|c| model.embed(c))
        .flat_map(|v| embed::quantize(&v))
        .collect()
}

fn corrupt(what: &str) -> NotebookError {
    NotebookError::Corrupt(format!("vector block: {what}"))
}

/// A block item's model id, dimensions and where its sealed entries start in the body.
fn header(body: &[u8]) -> Result<(String, usize, usize), NotebookError> {
    if body.len() < 12 || &body[..8] != MAGIC {
        return Err(corrupt("not a vector block"));
    }
    let id_len = u16::from_le_bytes([body[8], body[9]]) as usize;
    let rest = &body[10..];
    if rest.len() < id_len + 2 {
        return Err(corrupt("cut short"));
    }
    let model = std::str::from_utf8(&rest[..id_len])
        .map_err(|_| corrupt("model id"))?
        .to_owned();
    let dims = u16::from_le_bytes([rest[id_len], rest[id_len + 1]]) as usize;
    Ok((model, dims, 10 + id_len + 2))
}

/// Calls `f` with each entry of opened block bytes: its page id, revision, date and vectors
/// (`chunks x dims` bytes, as stored), borrowed from `b`.
fn walk_entries<'b>(
    dims: usize,
    mut b: &'b [u8],
    mut f: impl FnMut(&'b str, u32, Date, &'b [u8]),
) -> Result<(), NotebookError> {
    fn take<'b>(n: usize, b: &mut &'b [u8]) -> Result<&'b [u8], NotebookError> {
        if b.len() < n {
            return Err(corrupt("cut short"));
        }
        let (h, t) = b.split_at(n);
        *b = t;
        Ok(h)
    }
    while !b.is_empty() {
        let n = take(1, &mut b)?[0] as usize;
        let page = std::str::from_utf8(take(n, &mut b)?).map_err(|_| corrupt("page id"))?;
        let rev = u32::from_le_bytes(take(4, &mut b)?.try_into().expect("4 bytes"));
        let date = std::str::from_utf8(take(10, &mut b)?).map_err(|_| corrupt("date"))?;
        let date = Date::parse(date).map_err(|_| corrupt("date"))?;
        let chunks = u16::from_le_bytes(take(2, &mut b)?.try_into().expect("2 bytes")) as usize;
        f(page, rev, date, take(chunks * dims, &mut b)?);
    }
    Ok(())
}

impl Block {
    fn encode_entries(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for e in &self.entries {
            let id = e.page.as_bytes();
            out.push(id.len() as u8);
            out.extend_from_slice(id);
            out.extend_from_slice(&e.rev.to_le_bytes());
            let date = e.date.to_string();
            out.extend_from_slice(date.as_bytes()); // always 10 bytes, YYYY-MM-DD
            let chunks = (e.vectors.len() / self.dims.max(1)) as u16;
            out.extend_from_slice(&chunks.to_le_bytes());
            out.extend(e.vectors.iter().map(|v| *v as u8));
        }
        out
    }

    fn decode_entries(model: String, dims: usize, b: &[u8]) -> Result<Block, NotebookError> {
        let mut entries = Vec::new();
        walk_entries(dims, b, |page, rev, date, vectors| {
            entries.push(Entry {
                page: page.to_owned(),
                rev,
                date,
                vectors: vectors.iter().map(|v| *v as i8).collect(),
            })
        })?;
        Ok(Block {
            model,
            dims,
            entries,
        })
    }

    /// Opens a block item.
    pub fn open(keys: &UserKeys, user: &UserId, item: &Item) -> Result<Block, NotebookError> {
        let (model, dims, sealed) = header(&item.body)?;
        let plain = records::open(
            keys,
            user,
            &item.pk,
            &item.sk,
            "vectors",
            &item.body[sealed..],
        )?;
        Block::decode_entries(model, dims, &plain)
    }

    /// Opens a block item for search, taking it: decrypted where it lies, its entries counted,
    /// then copied once into an [`OpenBlock`] of that size (no decoded [`Block`] on the way).
    pub fn open_for_search(
        keys: &UserKeys,
        user: &UserId,
        item: Item,
    ) -> Result<OpenBlock, NotebookError> {
        let Item {
            pk,
            sk,
            version,
            mut body,
            ..
        } = item;
        let (model, dims, sealed) = header(&body)?;
        let plain = records::open_in_place(keys, user, &pk, &sk, "vectors", &mut body[sealed..])?;
        let (mut entries, mut bytes) = (0, 0);
        walk_entries(dims, plain, |_, _, _, v| {
            entries += 1;
            bytes += v.len();
        })?;
        let mut open = OpenBlock::with_capacity(version, model, dims, entries, bytes);
        walk_entries(dims, plain, |page, rev, date, v| {
            open.push(page, rev, date, v)
        })?;
        Ok(open)
    }

    /// The put of this block as item `pk`/`sk`, conditional on the version read (`None`: the
    /// block did not exist).
    pub fn write(
        &self,
        keys: &UserKeys,
        user: &UserId,
        pk: &str,
        sk: &str,
        read_version: Option<u64>,
    ) -> Write {
        let (cond, version) = match read_version {
            Some(v) => (Cond::Version(v), v + 1),
            None => (Cond::NotExists, 1),
        };
        Write::put(self.item(keys, user, pk, sk, version), cond)
    }

    /// This block sealed as item `pk`/`sk` at `version`.
    fn item(&self, keys: &UserKeys, user: &UserId, pk: &str, sk: &str, version: u64) -> Item {
        let sealed = records::seal(keys, user, pk, sk, "vectors", &self.encode_entries());
        let mut body = Vec::with_capacity(sealed.len() + 64);
        body.extend_from_slice(MAGIC);
        body.extend_from_slice(&(self.model.len() as u16).to_le_bytes());
        body.extend_from_slice(self.model.as_bytes());
        body.extend_from_slice(&(self.dims as u16).to_le_bytes());
        body.extend_from_slice(&sealed);
        Item {
            pk: pk.to_owned(),
            sk: sk.to_owned(),
            gsi1: None,
            version,
            expires_at: None,
            body,
        }
    }

    /// Puts (or replaces) one page's entry. A block of another model loses its entries: they
    /// cannot be compared with this model's, and `nib reindex` rewrites them.
    pub fn upsert(&mut self, model: &Model, entry: Entry) {
        if self.model != model.id() || self.dims != model.dims() {
            self.model = model.id().to_owned();
            self.dims = model.dims();
            self.entries.clear();
        }
        self.entries.retain(|e| e.page != entry.page);
        let mut entry = entry;
        let size: usize = self
            .entries
            .iter()
            .map(|e| e.page.len() + 17 + e.vectors.len())
            .sum();
        let bare = entry.page.len() + 17;
        if size + bare + entry.vectors.len() > MAX_BLOCK_BYTES {
            // A full block: the page keeps one vector, its last (the whole page's, for a page
            // of several windows), then none; past the hard limit it has no entry (keywords
            // still find it, and its record gives its date).
            let last = entry.vectors.len().saturating_sub(self.dims);
            entry.vectors.drain(..last);
            if size + bare + entry.vectors.len() > MAX_BLOCK_BYTES {
                entry.vectors.clear();
            }
            if size + bare > HARD_BLOCK_BYTES {
                return;
            }
        }
        self.entries.push(entry);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_and_block_numbers_spread() {
        let block = Block {
            model: "m".into(),
            dims: 2,
            entries: vec![
                Entry {
                    page: PageId::new().to_string(),
                    rev: 7,
                    date: Date::parse("2026-06-19").unwrap(),
                    vectors: vec![1, -2, 3, -127],
                },
                Entry {
                    page: PageId::new().to_string(),
                    rev: 9,
                    date: Date::parse("2026-01-01").unwrap(),
                    vectors: vec![],
                },
            ],
        };
        let back = Block::decode_entries("m".into(), 2, &block.encode_entries()).unwrap();
        // A full block never passes the store's item limit.
        let model = crate::embed::model().unwrap();
        let mut full = Block::default();
        for _ in 0..2_000 {
            full.upsert(
                model,
                Entry {
                    page: PageId::new().to_string(),
                    rev: 1,
                    date: Date::parse("2026-06-19").unwrap(),
                    // two windows (1s), then the whole page (2s)
                    vectors: [vec![1; model.dims() * 2], vec![2; model.dims()]].concat(),
                },
            );
        }
        let encoded = full.encode_entries().len();
        assert!(encoded <= HARD_BLOCK_BYTES + 80, "{encoded}");
        assert!(full.entries.len() < 2_000);
        assert!(full.entries.iter().any(|e| e.vectors.is_empty()));
        // Pages that came when it was nearly full kept one vector: the whole page's.
        let one: Vec<_> = full
            .entries
            .iter()
            .filter(|e| e.vectors.len() == model.dims())
            .collect();
        assert!(!one.is_empty() && one.iter().all(|e| e.vectors.iter().all(|v| *v == 2)));
        assert_eq!(back, block);
        let blocks: std::collections::BTreeSet<usize> =
            (0..500).map(|_| block_of(&PageId::new())).collect();
        assert!(blocks.len() > BLOCKS * 3 / 4, "{}", blocks.len());
        assert!(blocks.iter().all(|b| *b < BLOCKS));
    }
}

/// What `nib reindex` did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReindexReport {
    /// Pages read.
    pub pages: usize,
    /// Pages whose vectors were computed again (missing, stale, or of another model).
    pub embedded: usize,
    /// Blocks rewritten.
    pub blocks: usize,
}

impl super::Notebook {
    /// The writes of `page`'s vectors at revision `rev`, for its page's transaction. Normally
    /// its entry in its block (read here, rewritten whole) and the delete of any pending entry
    /// of the page, which would otherwise stand for it. While vectors are deferred
    /// (`defer_vectors`, a bulk import) the page's pending entry instead: one small item of
    /// its own, put without reading anything, so a page's commit costs the same whatever the
    /// notebook's size and concurrent commits into one block do not conflict; and the pending
    /// counter, which tells search to read pending entries (`fold_vectors` ends both).
    pub(super) async fn vector_writes(
        &self,
        user: &UserId,
        keys: &UserKeys,
        page: &PageId,
        rev: u32,
        date: Date,
        lines: &[records::StoredLine],
    ) -> Result<Vec<Write>, NotebookError> {
        let pk = records::user_pk(user);
        if !self.vectors_deferred() {
            return Ok(vec![
                self.vector_block_write(user, keys, page, rev, date, lines)
                    .await?,
                Write::delete(pk, pending_sk(page), Cond::None),
            ]);
        }
        let model = embed::model()?;
        let texts: Vec<&str> = lines.iter().map(|l| l.text.as_str()).collect();
        let pending = Block {
            model: model.id().to_owned(),
            dims: model.dims(),
            entries: vec![Entry {
                page: page.to_string(),
                rev,
                date,
                vectors: page_vectors(model, &texts),
            }],
        };
        let item = pending.item(keys, user, &pk, &pending_sk(page), 1);
        Ok(vec![
            Write::put(item, Cond::None),
            Write::add(pk, PENDING_SK, 1),
        ])
    }

    /// The write of `page`'s vectors at revision `rev` into its block (read here).
    pub(super) async fn vector_block_write(
        &self,
        user: &UserId,
        keys: &UserKeys,
        page: &PageId,
        rev: u32,
        date: Date,
        lines: &[records::StoredLine],
    ) -> Result<Write, NotebookError> {
        let model = embed::model()?;
        let texts: Vec<&str> = lines.iter().map(|l| l.text.as_str()).collect();
        let pk = records::user_pk(user);
        let sk = block_sk(block_of(page));
        let item = self.store.get(&pk, &sk).await?;
        let mut block = match &item {
            Some(item) => Block::open(keys, user, item)?,
            None => Block::default(),
        };
        block.upsert(
            model,
            Entry {
                page: page.to_string(),
                rev,
                date,
                vectors: page_vectors(model, &texts),
            },
        );
        Ok(block.write(keys, user, &pk, &sk, item.map(|i| i.version)))
    }

    /// The write that takes `page`'s entry out of its block (read here), for the transaction
    /// that moves the page to the trash: no vector of a trashed page is searched, and none
    /// outlives its purge. `None` when the block holds no entry of the page.
    pub(super) async fn vector_block_removal(
        &self,
        user: &UserId,
        keys: &UserKeys,
        page: &PageId,
    ) -> Result<Option<Write>, NotebookError> {
        let pk = records::user_pk(user);
        let sk = block_sk(block_of(page));
        let Some(item) = self.store.get(&pk, &sk).await? else {
            return Ok(None);
        };
        let mut block = Block::open(keys, user, &item)?;
        let id = page.to_string();
        let before = block.entries.len();
        block.entries.retain(|e| e.page != id);
        if block.entries.len() == before {
            return Ok(None);
        }
        Ok(Some(block.write(keys, user, &pk, &sk, Some(item.version))))
    }

    /// Every pending entry of `user` (`index`: of that block only), as stored.
    async fn pending_items(
        &self,
        user: &UserId,
        index: Option<usize>,
    ) -> Result<Vec<Item>, NotebookError> {
        let prefix = match index {
            Some(i) => pending_block_prefix(i),
            None => PENDING_PREFIX.to_owned(),
        };
        Ok(self
            .store
            .query_all(Query::table(records::user_pk(user), prefix))
            .await?)
    }

    /// The pending entries of `user` opened as one block for search, when the pending counter
    /// says there may be some. Entries of another model than this binary's are left out (their
    /// pages keep their block entries, if any; `nib reindex` embeds them again).
    pub(super) async fn open_pending(
        &self,
        user: &UserId,
        keys: &UserKeys,
    ) -> Result<OpenBlock, NotebookError> {
        let model = embed::model()?;
        let items = self.pending_items(user, None).await?;
        let mut open = OpenBlock::with_capacity(0, model.id().to_owned(), model.dims(), 0, 0);
        for item in &items {
            let block = Block::open(keys, user, item)?;
            if block.model != model.id() || block.dims != model.dims() {
                continue;
            }
            for e in &block.entries {
                let raw: Vec<u8> = e.vectors.iter().map(|v| *v as u8).collect();
                open.push(&e.page, e.rev, e.date, &raw);
            }
        }
        Ok(open)
    }

    /// Folds `user`'s pending entries (a bulk import's) into their blocks: each block with
    /// pending entries is read, takes them as a page write would ([`Block::upsert`]) and is
    /// written once, conditional on its version, with the notebook revision and the deletes
    /// of the pending items it took, each conditional on the version read (an entry written
    /// again meanwhile stays pending, and still stands for its page). Then the pending
    /// counter goes, unless an entry was added since it was read. Returns the entries folded.
    /// A crash anywhere leaves every entry in its block or still pending, both searched; the
    /// next `nib import` or `nib reindex` folds again.
    pub async fn fold_vectors(&self, user: &UserId) -> Result<usize, NotebookError> {
        let pk = records::user_pk(user);
        let Some(counter) = self.store.get(&pk, PENDING_SK).await? else {
            return Ok(0);
        };
        let keys = self.vault.user_keys(user).await?;
        let (mut folded, mut complete) = (0, true);
        for index in 0..BLOCKS {
            let (n, all) = self.fold_block(user, &keys, index).await?;
            folded += n;
            complete &= all;
        }
        if complete {
            let done = Write::delete(pk, PENDING_SK, Cond::Version(counter.version));
            match self.store.transact(vec![done]).await {
                // Added to since: entries written after it was read stay pending and searched.
                Ok(()) | Err(StoreError::ConditionFailed { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(folded)
    }

    /// Folds the pending entries of block `index`: how many, and whether every one of their
    /// items was deleted.
    async fn fold_block(
        &self,
        user: &UserId,
        keys: &UserKeys,
        index: usize,
    ) -> Result<(usize, bool), NotebookError> {
        let model = embed::model()?;
        let pk = records::user_pk(user);
        let sk = block_sk(index);
        let mut attempt = 0;
        loop {
            let pending = self.pending_items(user, Some(index)).await?;
            if pending.is_empty() {
                return Ok((0, true));
            }
            let item = self.store.get(&pk, &sk).await?;
            let mut block = match &item {
                Some(item) => Block::open(keys, user, item)?,
                None => Block::default(),
            };
            for p in &pending {
                let entry = Block::open(keys, user, p)?;
                // Another binary's vectors are not compared with this one's: the page is found
                // by its words until `nib reindex` embeds it again.
                if entry.model == model.id() && entry.dims == model.dims() {
                    for e in entry.entries {
                        block.upsert(model, e);
                    }
                }
            }
            let mut deletes = pending
                .iter()
                .map(|p| Write::delete(pk.clone(), p.sk.clone(), Cond::Version(p.version)));
            let mut writes = vec![
                block.write(keys, user, &pk, &sk, item.map(|i| i.version)),
                records::revision_write(&pk),
            ];
            writes.extend(deletes.by_ref().take(MAX_TRANSACTION_ITEMS - writes.len()));
            match self.store.transact(writes).await {
                Ok(()) => {}
                Err(e) => {
                    let e = NotebookError::from(e);
                    if !super::is_retryable(&e) || attempt + 1 == super::MAX_ATTEMPTS {
                        return Err(e);
                    }
                    super::backoff(attempt).await;
                    attempt += 1;
                    continue;
                }
            }
            // The rest of the items taken: each is in the block now, so one left behind (a
            // crash, or written again meanwhile) only stands for its page as before.
            let rest: Vec<Write> = deletes.collect();
            let mut all = true;
            for chunk in rest.chunks(MAX_TRANSACTION_ITEMS) {
                match self.store.transact(chunk.to_vec()).await {
                    Ok(()) => {}
                    Err(StoreError::ConditionFailed { .. } | StoreError::Conflict) => all = false,
                    Err(e) => return Err(e.into()),
                }
            }
            return Ok((pending.len(), all));
        }
    }

    /// Brings every vector block of `user` to this binary's model and the pages' current
    /// revisions: pages without vectors, with stale ones or with another model's are embedded
    /// again; entries of pages that no longer exist are dropped. Blocks already right are not
    /// written. Safe to run while the notebook changes (each block is written conditionally
    /// and done again on conflict).
    pub async fn reindex(&self, user: &UserId) -> Result<ReindexReport, NotebookError> {
        let model = embed::model()?;
        // An import cut short left entries pending: into their blocks first, so the blocks
        // compared below are whole.
        self.fold_vectors(user).await?;
        let keys = self.vault.user_keys(user).await?;
        let pk = records::user_pk(user);
        let mut report = ReindexReport::default();
        // Every page's id, revision, date and sealed lines, by block.
        let mut by_block: Vec<Vec<records::PageHead>> = (0..BLOCKS).map(|_| Vec::new()).collect();
        let mut q = crate::ports::Query::gsi1(records::pages_partition(user), "");
        loop {
            let page = self.store.query(&q).await?;
            for item in &page.items {
                let head: records::PageHead = records::decode("page", &item.body)?;
                by_block[block_of(&head.page_id)].push(head);
                report.pages += 1;
            }
            match page.next {
                Some(next) => q.after = Some(next),
                None => break,
            }
        }
        for (index, heads) in by_block.iter().enumerate() {
            let sk = block_sk(index);
            for attempt in 0..super::MAX_ATTEMPTS {
                let item = self.store.get(&pk, &sk).await?;
                let old = match &item {
                    Some(item) => Block::open(&keys, user, item)?,
                    None => Block::default(),
                };
                let current = old.model == model.id() && old.dims == model.dims();
                let mut block = Block {
                    model: model.id().to_owned(),
                    dims: model.dims(),
                    entries: Vec::new(),
                };
                let mut embedded = 0;
                for head in heads {
                    let id = head.page_id.to_string();
                    let kept = old.entries.iter().find(|e| {
                        current && e.page == id && e.rev == head.rev && e.date == head.date
                    });
                    let entry = match kept {
                        Some(e) => e.clone(),
                        None => {
                            let lines = super::pages::open_page_lines(
                                user,
                                &keys,
                                &head.page_id,
                                &head.lines,
                            )?;
                            let texts: Vec<&str> = lines.iter().map(|l| l.text.as_str()).collect();
                            embedded += 1;
                            Entry {
                                page: id,
                                rev: head.rev,
                                date: head.date,
                                vectors: page_vectors(model, &texts),
                            }
                        }
                    };
                    block.upsert(model, entry);
                }
                if block == old || (item.is_none() && block.entries.is_empty()) {
                    break;
                }
                match self
                    .store
                    .transact(vec![
                        block.write(&keys, user, &pk, &sk, item.map(|i| i.version)),
                        records::revision_write(&pk),
                    ])
                    .await
                {
                    Ok(()) => {
                        report.embedded += embedded;
                        report.blocks += 1;
                        break;
                    }
                    Err(e) => {
                        let e = NotebookError::from(e);
                        if !super::is_retryable(&e) || attempt + 1 == super::MAX_ATTEMPTS {
                            return Err(e);
                        }
                        super::backoff(attempt).await;
                    }
                }
            }
        }
        Ok(report)
    }
}

#[cfg(test)]
mod reindex_tests {
    use super::*;
    use crate::notebook::records::{OcrKind, PageSources};
    use crate::notebook::{PageDraft, SearchMode, SearchOptions};
    use crate::services::{LocalOptions, Services};

    async fn meaning_hits(app: &Services, user: &UserId, query: &str) -> Vec<PageId> {
        let opts = SearchOptions {
            mode: SearchMode::Meaning,
            ..SearchOptions::default()
        };
        let (hits, _) = app
            .notebook()
            .search_with(user, query, &opts, 0, 10)
            .await
            .unwrap();
        hits.into_iter().map(|h| h.page_id).collect()
    }

    fn draft(date: &str, md: &str) -> PageDraft {
        PageDraft {
            date: Some(Date::parse(date).unwrap()),
            stem: date.to_owned(),
            ocr: Some((OcrKind::Markdown, md.to_owned())),
            pdf: None,
            png: None,
            sources: PageSources::default(),
            png_rendered: false,
        }
    }

    async fn store_keys(app: &Services, user: &UserId, prefix: &str) -> Vec<String> {
        let q = Query::table(records::user_pk(user), prefix);
        let items = app.store.query(&q).await.unwrap().items;
        items.into_iter().map(|i| i.sk).collect()
    }

    /// Every mode's hits (page ids, in order) for a few queries: words, meaning, both.
    async fn answers(app: &Services, user: &UserId) -> Vec<Vec<PageId>> {
        let mut out = Vec::new();
        for query in [
            "plumber",
            "lasagna",
            "paying the bill for the pipes repair",
            "vehicle maintenance and the brakes",
            "the medical visit for my breathing",
        ] {
            for mode in [SearchMode::Keyword, SearchMode::Meaning, SearchMode::Hybrid] {
                let opts = SearchOptions {
                    mode,
                    ..SearchOptions::default()
                };
                let (hits, _) = app
                    .notebook()
                    .search_with(user, query, &opts, 0, 10)
                    .await
                    .unwrap();
                out.push(hits.into_iter().map(|h| h.page_id).collect());
            }
        }
        out
    }

    /// A bulk import leaves each page's vectors pending: search finds those pages by words and
    /// by meaning, a page's pending entry stands for its older block entry, a reopened store
    /// (a crash between the import and the fold) still has them all, and the fold moves them
    /// into their blocks with every answer the same.
    #[tokio::test]
    async fn pending_vectors_are_searched_survive_a_reopen_and_fold_into_their_blocks() {
        let dir = tempfile::tempdir().unwrap();
        let user = UserId::parse("default").unwrap();
        let app = Services::open_local(dir.path(), LocalOptions::default()).unwrap();
        let checkup = app
            .notebook()
            .import_page(
                &user,
                draft(
                    "2026-03-02",
                    "Checkup with Dr. Alvarez\nask about the cough",
                ),
            )
            .await
            .unwrap()
            .page_id;
        let lasagna = "Lasagna recipe\nbechamel, layer, bake 40 min";
        let car = app
            .notebook()
            .import_page(&user, draft("2026-03-07", lasagna))
            .await
            .unwrap()
            .page_id;
        assert!(store_keys(&app, &user, PENDING_PREFIX).await.is_empty());

        // The bulk import: a new page, and the lasagna page rewritten as the car's service.
        app.notebook().defer_vectors(true);
        let plumber = app
            .notebook()
            .import_page(
                &user,
                draft("2026-03-09", "Invoice from the plumber\npay by Friday"),
            )
            .await
            .unwrap()
            .page_id;
        let service = "Car service at the garage\noil change, new brakes";
        let again = app
            .notebook()
            .import_page(&user, draft("2026-03-07", service))
            .await
            .unwrap();
        assert_eq!(again.page_id, car);
        let pending = store_keys(&app, &user, PENDING_PREFIX).await;
        assert_eq!(
            pending,
            {
                let mut want = vec![pending_sk(&plumber), pending_sk(&car)];
                want.sort();
                want
            },
            "one pending entry per page"
        );
        assert!(
            app.store
                .get(&records::user_pk(&user), PENDING_SK)
                .await
                .unwrap()
                .is_some()
        );

        // Hits by query and mode: [0..3) "plumber", [3..6) "lasagna", [6..9) the pipes,
        // [9..12) the car, [12..15) the checkup; each keyword, meaning, hybrid.
        let check = |answers: &[Vec<PageId>]| {
            assert_eq!(answers[0], std::slice::from_ref(&plumber));
            for i in [1, 7, 8] {
                assert_eq!(answers[i].first(), Some(&plumber), "{i}");
            }
            // The lasagna is gone from the page: its words find nothing.
            assert!(answers[3].is_empty(), "{:?}", answers[3]);
            // The car's service by meaning (its pending entry, not its block's), once.
            for i in [10, 11] {
                assert_eq!(answers[i].first(), Some(&car), "{i}");
                assert_eq!(answers[i].iter().filter(|p| **p == car).count(), 1);
            }
            assert_eq!(answers[13].first(), Some(&checkup));
        };
        let before = answers(&app, &user).await;
        check(&before);

        // A crash before the fold: the store reopened has every pending entry, searched.
        drop(app);
        let app = Services::open_local(dir.path(), LocalOptions::default()).unwrap();
        assert_eq!(store_keys(&app, &user, PENDING_PREFIX).await, pending);
        assert_eq!(answers(&app, &user).await, before);

        assert_eq!(app.notebook().fold_vectors(&user).await.unwrap(), 2);
        assert!(store_keys(&app, &user, PENDING_PREFIX).await.is_empty());
        assert!(
            app.store
                .get(&records::user_pk(&user), PENDING_SK)
                .await
                .unwrap()
                .is_none()
        );
        let keys = app.vault().user_keys(&user).await.unwrap();
        for page in [&plumber, &car] {
            let sk = block_sk(block_of(page));
            let item = app.store.get(&records::user_pk(&user), &sk).await.unwrap();
            let block = Block::open(&keys, &user, &item.unwrap()).unwrap();
            let entries: Vec<_> = block
                .entries
                .iter()
                .filter(|e| e.page == page.as_str())
                .collect();
            assert_eq!(entries.len(), 1, "folded into its block once");
        }
        assert_eq!(
            answers(&app, &user).await,
            before,
            "the same answers after the fold"
        );
        assert_eq!(app.notebook().fold_vectors(&user).await.unwrap(), 0);

        // A page trashed while its entry is pending takes the entry with it.
        app.notebook().defer_vectors(true);
        let dentist = app
            .notebook()
            .import_page(
                &user,
                draft("2026-03-11", "Dentist appointment\nfilling, x-ray"),
            )
            .await
            .unwrap()
            .page_id;
        assert_eq!(
            store_keys(&app, &user, PENDING_PREFIX).await,
            [pending_sk(&dentist)]
        );
        app.notebook().trash_page(&user, &dentist).await.unwrap();
        assert!(store_keys(&app, &user, PENDING_PREFIX).await.is_empty());
        assert!(
            !meaning_hits(&app, &user, "a tooth filling")
                .await
                .contains(&dentist)
        );
    }

    #[tokio::test]
    async fn reindex_re_embeds_a_block_of_another_model_and_then_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let app = Services::open_local(dir.path(), LocalOptions::default()).unwrap();
        let user = UserId::parse("default").unwrap();
        let mut ids = Vec::new();
        for (date, md) in [
            (
                "2026-03-02",
                "Checkup with Dr. Alvarez\nask about the cough",
            ),
            ("2026-03-07", "Lasagna recipe\nbechamel, layer, bake 40 min"),
        ] {
            let saved = app
                .notebook()
                .import_page(&user, draft(date, md))
                .await
                .unwrap();
            ids.push(saved.page_id);
        }
        let query = "the medical visit for my breathing";
        assert_eq!(
            meaning_hits(&app, &user, query).await.first(),
            Some(&ids[0])
        );

        // The checkup's block as an older model wrote it (with the notebook's revision, as
        // every write does): search no longer compares it.
        let keys = app.vault().user_keys(&user).await.unwrap();
        let pk = records::user_pk(&user);
        let sk = block_sk(block_of(&ids[0]));
        let item = app.store.get(&pk, &sk).await.unwrap().unwrap();
        let mut block = Block::open(&keys, &user, &item).unwrap();
        block.model = "an-older-model".into();
        app.store
            .transact(vec![
                block.write(&keys, &user, &pk, &sk, Some(item.version)),
                records::revision_write(&pk),
            ])
            .await
            .unwrap();
        assert!(!meaning_hits(&app, &user, query).await.contains(&ids[0]));

        let report = app.notebook().reindex(&user).await.unwrap();
        assert_eq!(report.pages, 2);
        assert!(report.embedded >= 1 && report.blocks >= 1, "{report:?}");
        assert_eq!(
            meaning_hits(&app, &user, query).await.first(),
            Some(&ids[0])
        );
        let reopened = Block::open(
            &keys,
            &user,
            &app.store.get(&pk, &sk).await.unwrap().unwrap(),
        )
        .unwrap();
        assert_eq!(reopened.model, embed::model().unwrap().id());

        // Everything is current now: a second run embeds and writes nothing.
        let again = app.notebook().reindex(&user).await.unwrap();
        assert_eq!((again.embedded, again.blocks), (0, 0), "{again:?}");
    }
}
