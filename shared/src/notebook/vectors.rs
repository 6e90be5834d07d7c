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
use crate::ports::{Cond, Item, Write};

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
        let sealed = records::seal(keys, user, pk, sk, "vectors", &self.encode_entries());
        let mut body = Vec::with_capacity(sealed.len() + 64);
        body.extend_from_slice(MAGIC);
        body.extend_from_slice(&(self.model.len() as u16).to_le_bytes());
        body.extend_from_slice(self.model.as_bytes());
        body.extend_from_slice(&(self.dims as u16).to_le_bytes());
        body.extend_from_slice(&sealed);
        let (cond, version) = match read_version {
            Some(v) => (Cond::Version(v), v + 1),
            None => (Cond::NotExists, 1),
        };
        Write::put(
            Item {
                pk: pk.to_owned(),
                sk: sk.to_owned(),
                gsi1: None,
                version,
                expires_at: None,
                body,
            },
            cond,
        )
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
        let model = embed::model().map_err(|e| NotebookError::Corrupt(e.to_string()))?;
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

    /// Brings every vector block of `user` to this binary's model and the pages' current
    /// revisions: pages without vectors, with stale ones or with another model's are embedded
    /// again; entries of pages that no longer exist are dropped. Blocks already right are not
    /// written. Safe to run while the notebook changes (each block is written conditionally
    /// and done again on conflict).
    pub async fn reindex(&self, user: &UserId) -> Result<ReindexReport, NotebookError> {
        let model = embed::model().map_err(|e| NotebookError::Corrupt(e.to_string()))?;
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
                .import_page(
                    &user,
                    PageDraft {
                        date: Some(Date::parse(date).unwrap()),
                        stem: date.to_owned(),
                        ocr: Some((OcrKind::Markdown, md.to_owned())),
                        pdf: None,
                        png: None,
                        sources: PageSources::default(),
                        png_rendered: false,
                    },
                )
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
