//! The plan of one page write: every item set a page derives, one pure step each, over what the
//! commit read first. [`Notebook::commit_page`](super::Notebook) reads, runs these steps in
//! order, and writes their items in one transaction (the page-write invariant in
//! ARCHITECTURE.md). The order of the writes is the order of the steps.
//!
//! | step | items |
//! |---|---|
//! | [`line_keys`] | (none: the dedup key of each task line) |
//! | [`resolve_keys`] | new task links and their dedup keys (`TASKKEY#`), a new task's Notion outbox item |
//! | [`link_lines`] | (none: each task line's link, each link's appearances on this page) |
//! | [`task_writes`] | every affected task link (`TASK#`), rewritten or deleted with its dedup key |
//! | [`index_terms`] | (none: the page's blinded terms and length) |
//! | [`counter_writes`] | the BM25 counters (`STATS#`), a legacy statistics item folded in |
//! | [`page_writes`] | the stem (`STEM#`), the page (`PAGE#`), the notebook's revision |
//! | [`place_postings`] | the postings (`T#`): in the transaction when they fit, else before it |
//! | [`stale_postings`] | after it: the postings of terms the page no longer has |

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::pages::{LoadedPage, PageContent};
use super::records::{
    self, PageRecord, PageSources, StatsRecord, StoredLine, TaskKeyRecord, TaskRecord, encode,
    page_gsi_sk, page_sk, pages_partition, task_gsi_sk, task_sk, taskkey_sk, tasks_partition,
};
use super::{NotebookError, notion};
use crate::crypto::UserKeys;
use crate::domain::tasks::{self, Appearance, ChangedBy};
use crate::domain::{Notation, PageId, PageStatus, TaskLinkId, TaskStatus, UserId};
use crate::ports::{Cond, Item, MAX_TRANSACTION_ITEMS, Write};

/// Whose page is written, and when.
pub(super) struct Scope<'a> {
    pub user: &'a UserId,
    pub keys: &'a UserKeys,
    pub pk: &'a str,
    pub page_id: &'a PageId,
    pub now: i64,
}

/// The dedup items read for the page's task texts: key -> (item, the task it names).
pub(super) type Dedup = HashMap<String, (Item, TaskLinkId)>;

/// The tasks the page shows now or showed before, as read (`None`: a task this plan creates).
pub(super) type Tasks = BTreeMap<TaskLinkId, (Option<Item>, TaskRecord)>;

/// The dedup key of each line (`None` for a line that is no task, or a task without words),
/// and the first text seen for each key.
pub(super) fn line_keys(
    keys: &UserKeys,
    lines: &[StoredLine],
) -> (Vec<Option<String>>, BTreeMap<String, String>) {
    let mut line_keys = Vec::with_capacity(lines.len());
    let mut key_text = BTreeMap::new();
    for line in lines {
        let normalized = match line.notation {
            Notation::Task => tasks::normalize(&line.text),
            _ => String::new(),
        };
        if normalized.is_empty() {
            line_keys.push(None);
            continue;
        }
        let key = keys.blind("task", &normalized);
        key_text
            .entry(key.clone())
            .or_insert_with(|| line.text.clone());
        line_keys.push(Some(key));
    }
    (line_keys, key_text)
}

/// Resolves each key to a task: the deduplicated one (when it still exists under that key and
/// this is not the `create_task` of the key), one in the trash (its lines stay on it), or a
/// new one, whose record joins `tasks` and whose dedup key is written (conditional on the
/// dedup item read, or on there being none). `content.source_url` goes to the first new task.
pub(super) fn resolve_keys(
    s: &Scope,
    content: &mut PageContent,
    key_text: &BTreeMap<String, String>,
    dedup: &Dedup,
    tasks: &mut Tasks,
    trashed: &BTreeSet<TaskLinkId>,
) -> (Vec<Write>, HashMap<String, TaskLinkId>) {
    let (keys, user, pk) = (s.keys, s.user, s.pk);
    let mut writes = Vec::new();
    let mut key_task = HashMap::new();
    for (key, text) in key_text {
        let creating = content.new_task.as_ref().is_some_and(|n| &n.key == key);
        let reusable = dedup
            .get(key)
            .filter(|(_, id)| !creating && tasks.get(id).is_some_and(|(_, t)| t.answers_to(key)));
        if let Some((_, id)) = reusable {
            key_task.insert(key.clone(), id.clone());
            continue;
        }
        if let Some((_, id)) = dedup.get(key).filter(|(_, id)| trashed.contains(id)) {
            key_task.insert(key.clone(), id.clone());
            continue;
        }
        let id = TaskLinkId::new();
        let sk = task_sk(&id);
        let source_url = content
            .source_url
            .take()
            .map(|u| records::seal(keys, user, pk, &sk, "source_url", u.as_bytes()));
        let rec = TaskRecord {
            task_link_id: id.clone(),
            status: TaskStatus::Todo,
            first_seen_date: content.date,
            completed_date: None,
            source_page_id: s.page_id.clone(),
            key: key.clone(),
            text: records::seal(keys, user, pk, &sk, "text", text.as_bytes()),
            source_url,
            appearances: Vec::new(),
            history: Default::default(),
            created_at: s.now,
            notion: None,
            status_log: None,
            merged: Vec::new(),
        };
        if let Some(lease) = content
            .new_task
            .as_ref()
            .filter(|n| &n.key == key)
            .and_then(|n| n.notion_lease)
        {
            writes.push(notion::new_outbox_write(user, &id, s.now, lease));
        }
        let (cond, version) = match dedup.get(key) {
            Some((item, _)) => (Cond::Version(item.version), item.version + 1),
            None => (Cond::NotExists, 1),
        };
        writes.push(Write::put(
            Item {
                pk: pk.to_owned(),
                sk: taskkey_sk(key),
                gsi1: None,
                version,
                expires_at: None,
                body: encode(&TaskKeyRecord {
                    task_link_id: id.clone(),
                }),
            },
            cond,
        ));
        tasks.insert(id.clone(), (None, rec));
        key_task.insert(key.clone(), id);
    }
    (writes, key_task)
}

/// Links each task line to its task (every other line to none); returns each task's
/// appearances on this page and, per task line id, its task.
pub(super) fn link_lines(
    page_id: &PageId,
    content: &mut PageContent,
    line_keys: &[Option<String>],
    key_task: &HashMap<String, TaskLinkId>,
) -> (
    HashMap<TaskLinkId, Vec<Appearance>>,
    HashMap<String, TaskLinkId>,
) {
    let mut appearances: HashMap<TaskLinkId, Vec<Appearance>> = HashMap::new();
    let mut line_tasks = HashMap::new();
    let date = content.date;
    for (line, key) in content.lines.iter_mut().zip(line_keys) {
        line.task_link_id = None;
        let Some(id) = key.as_ref().and_then(|k| key_task.get(k)) else {
            continue;
        };
        appearances.entry(id.clone()).or_default().push(Appearance {
            page_id: page_id.clone(),
            line_id: line.line_id.clone(),
            date,
            page_status: line.page_status.unwrap_or(PageStatus::Open),
        });
        line_tasks.insert(line.line_id.clone(), id.clone());
        line.task_link_id = Some(id.clone());
    }
    (appearances, line_tasks)
}

/// Every affected task: its appearances on other pages plus those on this one, sorted, its
/// first-seen date and status reconciled, written conditional on the version read. A task no
/// page shows any more is deleted, with its dedup key when that still names it. A new task,
/// and a task whose status this page changes, gets an entry in its status log saying `by`.
pub(super) fn task_writes(
    s: &Scope,
    tasks: Tasks,
    mut appearances: HashMap<TaskLinkId, Vec<Appearance>>,
    dedup: &Dedup,
    by: &ChangedBy,
) -> Result<Vec<Write>, NotebookError> {
    let pk = s.pk;
    let mut writes = Vec::new();
    for (id, (item, mut rec)) in tasks {
        let mut apps: Vec<Appearance> = rec
            .appearances
            .iter()
            .filter(|a| &a.page_id != s.page_id)
            .cloned()
            .collect();
        apps.extend(appearances.remove(&id).unwrap_or_default());
        let sk = task_sk(&id);
        if apps.is_empty() {
            // The task was written only here and the page no longer shows it.
            if let Some(item) = item {
                writes.push(Write::delete(
                    pk.to_owned(),
                    sk,
                    Cond::Version(item.version),
                ));
                if let Some((dedup_item, owner)) = dedup.get(&rec.key)
                    && owner == &id
                {
                    writes.push(Write::delete(
                        pk.to_owned(),
                        taskkey_sk(&rec.key),
                        Cond::Version(dedup_item.version),
                    ));
                }
            }
            continue;
        }
        apps.sort_by(|a, b| {
            (a.date, &a.page_id, &a.line_id).cmp(&(b.date, &b.page_id, &b.line_id))
        });
        rec.first_seen_date = apps[0].date;
        rec.appearances = apps;
        if item.is_none() {
            rec.reconcile();
            rec.log_status(s.keys, s.user, pk, s.now, by.clone())?;
        } else {
            rec.reconcile_logged(s.keys, s.user, pk, s.now, by.clone())?;
        }
        let (cond, version) = match &item {
            Some(item) => (Cond::Version(item.version), item.version + 1),
            None => (Cond::NotExists, 1),
        };
        writes.push(Write::put(
            Item {
                pk: pk.to_owned(),
                sk,
                gsi1: Some((
                    tasks_partition(s.user, rec.status),
                    task_gsi_sk(rec.first_seen_date, &id),
                )),
                version,
                expires_at: None,
                body: encode(&rec),
            },
            cond,
        ));
    }
    Ok(writes)
}

/// The page's blinded terms with their frequencies, and its length in terms.
pub(super) fn index_terms(keys: &UserKeys, lines: &[StoredLine]) -> (BTreeMap<String, u32>, u32) {
    let mut tf: BTreeMap<String, u32> = BTreeMap::new();
    let mut doc_len = 0u32;
    for line in lines {
        for term in crate::domain::text::terms(&line.text) {
            *tf.entry(keys.blind("term", &term)).or_default() += 1;
            doc_len += 1;
        }
    }
    (tf, doc_len)
}

/// The BM25 counters: added to, never rewritten, so commits of other pages do not contend
/// here. A legacy statistics item (one versioned record) is folded into the counters and
/// deleted by the first commit that reads it.
pub(super) fn counter_writes(
    pk: &str,
    existing: Option<&LoadedPage>,
    doc_len: u32,
    legacy: Option<(Item, StatsRecord)>,
) -> Vec<Write> {
    let mut writes = Vec::new();
    let (mut pages_delta, mut len_delta) = match existing {
        Some(p) => (0i64, i64::from(doc_len) - i64::from(p.record.doc_len)),
        None => (1, i64::from(doc_len)),
    };
    if let Some((item, old)) = legacy {
        pages_delta += i64::from(old.pages);
        len_delta += i64::try_from(old.total_len).unwrap_or(i64::MAX);
        writes.push(Write::delete(
            pk.to_owned(),
            records::LEGACY_STATS_SK,
            Cond::Version(item.version),
        ));
    }
    if pages_delta != 0 {
        writes.push(Write::add(
            pk.to_owned(),
            records::STATS_PAGES_SK,
            pages_delta,
        ));
    }
    if len_delta != 0 {
        writes.push(Write::add(pk.to_owned(), records::STATS_LEN_SK, len_delta));
    }
    writes
}

/// The stem of a new page, the page record (its lines and OCR sealed, its terms and revision
/// `rev`), conditional on the version read or on there being none, and the notebook's revision.
pub(super) fn page_writes(
    s: &Scope,
    content: &PageContent,
    existing: Option<&LoadedPage>,
    sources: Option<PageSources>,
    tf: &BTreeMap<String, u32>,
    doc_len: u32,
    rev: u32,
) -> Vec<Write> {
    let (keys, user, pk, page_id) = (s.keys, s.user, s.pk, s.page_id);
    let mut writes = Vec::new();
    let psk = page_sk(page_id);
    if existing.is_none()
        && let Some(stem) = &content.stem
    {
        writes.push(records::stem_write(pk, stem, page_id));
    }
    let record = PageRecord {
        page_id: page_id.clone(),
        date: content.date,
        has_pdf: content.has_pdf,
        has_png: content.has_png,
        ocr_kind: content.ocr.as_ref().map(|(k, _)| *k),
        ocr_blank: content
            .ocr
            .as_ref()
            .is_some_and(|(k, text)| !records::ocr_has_text(*k, text)),
        ocr: content
            .ocr
            .as_ref()
            .map(|(_, text)| records::seal(keys, user, pk, &psk, "ocr", text.as_bytes())),
        lines: records::seal(keys, user, pk, &psk, "lines", &encode(&content.lines)),
        stem: content
            .stem
            .clone()
            .or_else(|| existing.and_then(|p| p.record.stem.clone())),
        terms: tf.keys().cloned().collect(),
        doc_len,
        rev,
        created_at: existing.map_or(s.now, |p| p.record.created_at),
        updated_at: s.now,
        sources: sources
            .or_else(|| existing.map(|p| p.record.sources))
            .unwrap_or_default(),
        notes: super::notes::count(&content.lines),
    };
    let (cond, version) = match existing {
        Some(p) => (Cond::Version(p.item.version), p.item.version + 1),
        None => (Cond::NotExists, 1),
    };
    writes.push(Write::put(
        Item {
            pk: pk.to_owned(),
            sk: psk,
            gsi1: Some((pages_partition(user), page_gsi_sk(content.date, page_id))),
            version,
            expires_at: None,
            body: encode(&record),
        },
        cond,
    ));
    writes.push(records::revision_write(pk));
    writes
}

/// Puts the postings into the transaction when they fit, else returns them to be written
/// before it (a posting counts only when its revision matches its page's, so early postings
/// are harmless). The rest alone must fit.
pub(super) fn place_postings(
    writes: &mut Vec<Write>,
    postings: Vec<Write>,
) -> Result<Vec<Write>, NotebookError> {
    if writes.len() + postings.len() <= MAX_TRANSACTION_ITEMS {
        writes.extend(postings);
        return Ok(Vec::new());
    }
    if writes.len() > MAX_TRANSACTION_ITEMS {
        return Err(NotebookError::Invalid(format!(
            "a page may link at most about {} tasks",
            MAX_TRANSACTION_ITEMS / 2 - 2
        )));
    }
    Ok(postings)
}

/// The deletes of the postings of terms the page had and no longer has (after the
/// transaction; search ignores them anyway, by revision).
pub(super) fn stale_postings(
    user: &UserId,
    page_id: &PageId,
    old_terms: &[String],
    tf: &BTreeMap<String, u32>,
) -> Vec<Write> {
    old_terms
        .iter()
        .filter(|t| !tf.contains_key(*t))
        .map(|t| {
            Write::delete(
                records::term_partition(user, t),
                page_id.to_string(),
                Cond::None,
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Date;

    fn user() -> UserId {
        UserId::parse("alice").unwrap()
    }

    fn scope<'a>(
        user: &'a UserId,
        keys: &'a UserKeys,
        pk: &'a str,
        page_id: &'a PageId,
        now: i64,
    ) -> Scope<'a> {
        Scope {
            user,
            keys,
            pk,
            page_id,
            now,
        }
    }

    fn date(s: &str) -> Date {
        Date::parse(s).unwrap()
    }

    fn line(id: &str, text: &str, notation: Notation) -> StoredLine {
        StoredLine {
            line_id: id.into(),
            text: text.into(),
            section: None,
            notation,
            page_status: None,
            task_link_id: None,
            digital: false,
            tags: Vec::new(),
            source_url: None,
            added_at: None,
            corrected: None,
        }
    }

    fn content(lines: Vec<StoredLine>) -> PageContent {
        PageContent {
            date: date("2026-05-04"),
            has_pdf: false,
            has_png: true,
            ocr: None,
            lines,
            stem: Some("stem-blind".into()),
            new_task: None,
            source_url: None,
        }
    }

    fn item(pk: &str, sk: &str, version: u64) -> Item {
        Item {
            pk: pk.into(),
            sk: sk.into(),
            gsi1: None,
            version,
            expires_at: None,
            body: Vec::new(),
        }
    }

    fn task(id: &TaskLinkId, key: &str, pages: &[(&PageId, &str)]) -> TaskRecord {
        TaskRecord {
            task_link_id: id.clone(),
            status: TaskStatus::Todo,
            first_seen_date: date("2026-01-01"),
            completed_date: None,
            source_page_id: pages[0].0.clone(),
            key: key.into(),
            text: Vec::new(),
            source_url: None,
            appearances: pages
                .iter()
                .map(|(p, d)| Appearance {
                    page_id: (*p).clone(),
                    line_id: "l".into(),
                    date: date(d),
                    page_status: PageStatus::Open,
                })
                .collect(),
            history: Default::default(),
            created_at: 0,
            notion: None,
            status_log: None,
            merged: Vec::new(),
        }
    }

    /// (kind, sk, condition) of each write, to compare plans.
    fn shape(writes: &[Write]) -> Vec<(&'static str, String, String)> {
        writes
            .iter()
            .map(|w| match w {
                Write::Put { item, cond } => ("put", item.sk.clone(), format!("{cond:?}")),
                Write::Delete { sk, cond, .. } => ("delete", sk.clone(), format!("{cond:?}")),
                Write::Check { sk, cond, .. } => ("check", sk.clone(), format!("{cond:?}")),
                Write::Add { sk, by, .. } => ("add", sk.clone(), by.to_string()),
            })
            .collect()
    }

    #[test]
    fn task_lines_of_one_text_share_a_key_and_other_lines_have_none() {
        let keys = UserKeys::for_tests(&user());
        let lines = vec![
            line("a", "Call Bob", Notation::Task),
            line("b", "call  bob", Notation::Task),
            line("c", "Call Bob", Notation::Bullet),
            line("d", "  ", Notation::Task),
            line("e", "Pay rent", Notation::Task),
        ];
        let (line_keys, key_text) = line_keys(&keys, &lines);
        assert_eq!(line_keys[0], line_keys[1], "normalized alike");
        assert!(line_keys[0].is_some());
        assert_eq!((&line_keys[2], &line_keys[3]), (&None, &None));
        assert_ne!(line_keys[4], line_keys[0]);
        assert_eq!(key_text.len(), 2);
        assert_eq!(
            key_text[line_keys[0].as_ref().unwrap()],
            "Call Bob",
            "first text"
        );
    }

    #[test]
    fn keys_resolve_to_the_dedup_task_a_trashed_one_or_a_new_one() {
        let (u, page) = (user(), PageId::new());
        let keys = UserKeys::for_tests(&u);
        let pk = records::user_pk(&u);
        let s = scope(&u, &keys, &pk, &page, 42);
        let (live, trashed_id, old) = (TaskLinkId::new(), TaskLinkId::new(), TaskLinkId::new());
        let key_text: BTreeMap<String, String> = ["live", "trashed", "fresh", "recreated"]
            .map(|k| (k.to_owned(), format!("text of {k}")))
            .into();
        let dedup: Dedup = HashMap::from([
            (
                "live".into(),
                (item(&pk, &taskkey_sk("live"), 3), live.clone()),
            ),
            (
                "trashed".into(),
                (item(&pk, &taskkey_sk("trashed"), 4), trashed_id.clone()),
            ),
            (
                "recreated".into(),
                (item(&pk, &taskkey_sk("recreated"), 5), old.clone()),
            ),
        ]);
        let mut tasks: Tasks = BTreeMap::from([
            (
                live.clone(),
                (
                    Some(item(&pk, &task_sk(&live), 1)),
                    task(&live, "live", &[(&page, "2026-05-04")]),
                ),
            ),
            (
                old.clone(),
                (
                    Some(item(&pk, &task_sk(&old), 1)),
                    task(&old, "recreated", &[(&page, "2026-05-04")]),
                ),
            ),
        ]);
        let trashed = BTreeSet::from([trashed_id.clone()]);
        let mut c = content(Vec::new());
        c.source_url = Some("https://example.com/x".into());
        c.new_task = Some(super::super::pages::NewTask {
            key: "recreated".into(),
            replaces: Some(old.clone()),
            notion_lease: None,
        });
        let (writes, key_task) = resolve_keys(&s, &mut c, &key_text, &dedup, &mut tasks, &trashed);
        assert_eq!(key_task["live"], live, "the deduplicated task");
        assert_eq!(
            key_task["trashed"], trashed_id,
            "the lines stay on the trashed link"
        );
        assert!(key_task["fresh"] != live && key_task["recreated"] != old);
        assert_eq!(
            shape(&writes),
            vec![
                ("put", taskkey_sk("fresh"), "NotExists".into()),
                ("put", taskkey_sk("recreated"), "Version(5)".into()),
            ],
            "a dedup key per new task, conditional on what was read"
        );
        let (fresh_item, fresh) = &tasks[&key_task["fresh"]];
        assert!(fresh_item.is_none() && fresh.created_at == 42 && fresh.key == "fresh");
        assert!(
            fresh.source_url.is_some(),
            "the first new task takes the source URL"
        );
        assert!(tasks[&key_task["recreated"]].1.source_url.is_none());
        assert!(c.source_url.is_none());
    }

    #[test]
    fn only_task_lines_are_linked_and_each_appears_once() {
        let page = PageId::new();
        let id = TaskLinkId::new();
        let mut c = content(vec![
            line("a", "Call Bob", Notation::Task),
            line("b", "note", Notation::Bullet),
        ]);
        c.lines[1].task_link_id = Some(TaskLinkId::new());
        let key_task = HashMap::from([("k".to_owned(), id.clone())]);
        let (apps, line_tasks) = link_lines(&page, &mut c, &[Some("k".into()), None], &key_task);
        assert_eq!(c.lines[0].task_link_id, Some(id.clone()));
        assert_eq!(c.lines[1].task_link_id, None, "a stale link is cleared");
        assert_eq!(line_tasks, HashMap::from([("a".to_owned(), id.clone())]));
        assert_eq!(apps[&id].len(), 1);
        assert_eq!(
            (apps[&id][0].date, apps[&id][0].page_status),
            (c.date, PageStatus::Open)
        );
    }

    #[test]
    fn shown_tasks_are_rewritten_and_a_task_shown_nowhere_is_deleted_with_its_key() {
        let (u, page, other) = (user(), PageId::new(), PageId::new());
        let keys = UserKeys::for_tests(&u);
        let pk = records::user_pk(&u);
        let s = scope(&u, &keys, &pk, &page, 1);
        let (shared, gone, new) = (TaskLinkId::new(), TaskLinkId::new(), TaskLinkId::new());
        let tasks: Tasks = BTreeMap::from([
            (
                shared.clone(),
                (
                    Some(item(&pk, &task_sk(&shared), 7)),
                    task(
                        &shared,
                        "s",
                        &[(&other, "2026-03-01"), (&page, "2026-01-01")],
                    ),
                ),
            ),
            (
                gone.clone(),
                (
                    Some(item(&pk, &task_sk(&gone), 2)),
                    task(&gone, "g", &[(&page, "2026-01-01")]),
                ),
            ),
            (
                new.clone(),
                (None, task(&new, "n", &[(&page, "2026-01-01")])),
            ),
        ]);
        let here = |id: &TaskLinkId| {
            (
                id.clone(),
                vec![Appearance {
                    page_id: page.clone(),
                    line_id: "x".into(),
                    date: date("2026-05-04"),
                    page_status: PageStatus::Done,
                }],
            )
        };
        let appearances = HashMap::from([here(&shared), here(&new)]);
        let dedup: Dedup =
            HashMap::from([("g".into(), (item(&pk, &taskkey_sk("g"), 9), gone.clone()))]);
        let by = ChangedBy::Page {
            page_id: page.clone(),
            date: date("2026-05-04"),
        };
        let writes = task_writes(&s, tasks, appearances, &dedup, &by).unwrap();
        let mut got = shape(&writes);
        got.sort();
        let mut want = vec![
            ("delete", task_sk(&gone), "Version(2)".to_owned()),
            ("delete", taskkey_sk("g"), "Version(9)".to_owned()),
            ("put", task_sk(&new), "NotExists".to_owned()),
            ("put", task_sk(&shared), "Version(7)".to_owned()),
        ];
        want.sort();
        assert_eq!(got, want);
        let Some(Write::Put { item, .. }) = writes
            .iter()
            .find(|w| matches!(w, Write::Put { item, .. } if item.sk == task_sk(&shared)))
        else {
            panic!("no put of the shared task");
        };
        let rec: TaskRecord = records::decode("task", &item.body).unwrap();
        let dates: Vec<String> = rec.appearances.iter().map(|a| a.date.to_string()).collect();
        assert_eq!(
            dates,
            ["2026-03-01", "2026-05-04"],
            "this page's old appearance replaced, sorted"
        );
        assert_eq!(rec.first_seen_date, date("2026-03-01"));
    }

    #[test]
    fn terms_are_blinded_and_counted() {
        let keys = UserKeys::for_tests(&user());
        let (tf, len) = index_terms(
            &keys,
            &[line("a", "budget review budget", Notation::Bullet)],
        );
        assert_eq!(len, 3);
        assert_eq!(tf.len(), 2);
        assert_eq!(tf[&keys.blind("term", "budget")], 2);
        assert!(
            tf.keys().all(|t| !t.contains("budget")),
            "no plaintext term"
        );
    }

    #[test]
    fn counters_change_by_the_difference_and_fold_a_legacy_record() {
        let pk = "USER#alice";
        let loaded = |doc_len| LoadedPage {
            item: item(pk, "PAGE#x", 3),
            record: PageRecord {
                page_id: PageId::new(),
                date: date("2026-01-01"),
                has_pdf: false,
                has_png: false,
                ocr_kind: None,
                ocr_blank: false,
                ocr: None,
                lines: Vec::new(),
                stem: None,
                terms: Vec::new(),
                doc_len,
                rev: 0,
                created_at: 0,
                updated_at: 0,
                sources: Default::default(),
                notes: 0,
            },
        };
        assert_eq!(
            shape(&counter_writes(pk, None, 10, None)),
            vec![
                ("add", records::STATS_PAGES_SK.into(), "1".into()),
                ("add", records::STATS_LEN_SK.into(), "10".into())
            ]
        );
        assert!(
            counter_writes(pk, Some(&loaded(10)), 10, None).is_empty(),
            "nothing changed"
        );
        assert_eq!(
            shape(&counter_writes(pk, Some(&loaded(10)), 4, None)),
            vec![("add", records::STATS_LEN_SK.into(), "-6".into())]
        );
        let legacy = (
            item(pk, records::LEGACY_STATS_SK, 8),
            StatsRecord {
                pages: 5,
                total_len: 50,
            },
        );
        assert_eq!(
            shape(&counter_writes(pk, None, 10, Some(legacy))),
            vec![
                (
                    "delete",
                    records::LEGACY_STATS_SK.into(),
                    "Version(8)".into()
                ),
                ("add", records::STATS_PAGES_SK.into(), "6".into()),
                ("add", records::STATS_LEN_SK.into(), "60".into()),
            ]
        );
    }

    #[test]
    fn a_new_page_writes_its_stem_and_an_existing_one_keeps_what_it_had() {
        let (u, page) = (user(), PageId::new());
        let keys = UserKeys::for_tests(&u);
        let pk = records::user_pk(&u);
        let s = scope(&u, &keys, &pk, &page, 100);
        let c = content(vec![line("a", "hello", Notation::Bullet)]);
        let tf = BTreeMap::from([("t1".to_owned(), 1)]);
        let writes = page_writes(&s, &c, None, None, &tf, 1, 77);
        let kinds: Vec<_> = shape(&writes)
            .into_iter()
            .map(|(k, sk, cond)| (k, sk.split('#').next().unwrap().to_owned(), cond))
            .collect();
        assert_eq!(kinds[0].1, "STEM");
        assert_eq!(
            (kinds[1].1.as_str(), kinds[1].2.as_str()),
            ("PAGE", "NotExists")
        );
        assert_eq!(writes.len(), 3, "stem, page, revision");
        let Write::Put { item, .. } = &writes[1] else {
            panic!()
        };
        let rec: PageRecord = records::decode("page", &item.body).unwrap();
        assert_eq!(
            (rec.rev, rec.doc_len, rec.created_at, rec.terms.clone()),
            (77, 1, 100, vec!["t1".to_owned()])
        );
        assert!(
            !item.body.windows(5).any(|w| w == b"hello"),
            "the lines are sealed"
        );

        let existing = LoadedPage {
            item: item.clone(),
            record: PageRecord {
                created_at: 5,
                ..rec
            },
        };
        let mut again = content(vec![line("a", "hello", Notation::Bullet)]);
        again.stem = None;
        let writes = page_writes(
            &Scope { now: 200, ..s },
            &again,
            Some(&existing),
            None,
            &tf,
            1,
            78,
        );
        assert_eq!(writes.len(), 2, "no stem for a page that has one");
        let Write::Put { item, cond } = &writes[0] else {
            panic!()
        };
        assert_eq!(*cond, Cond::Version(existing.item.version));
        let rec: PageRecord = records::decode("page", &item.body).unwrap();
        assert_eq!(
            (rec.created_at, rec.updated_at, rec.stem.as_deref()),
            (5, 200, Some("stem-blind"))
        );
    }

    #[test]
    fn postings_join_the_transaction_when_they_fit() {
        let put = |n: usize| -> Vec<Write> {
            (0..n)
                .map(|i| Write::delete("p", i.to_string(), Cond::None))
                .collect()
        };
        let mut writes = put(10);
        assert!(place_postings(&mut writes, put(5)).unwrap().is_empty());
        assert_eq!(writes.len(), 15);
        let mut writes = put(10);
        let before = place_postings(&mut writes, put(MAX_TRANSACTION_ITEMS)).unwrap();
        assert_eq!((writes.len(), before.len()), (10, MAX_TRANSACTION_ITEMS));
        let mut writes = put(MAX_TRANSACTION_ITEMS + 1);
        assert!(matches!(
            place_postings(&mut writes, put(1)),
            Err(NotebookError::Invalid(_))
        ));
    }

    #[test]
    fn only_terms_the_page_lost_have_their_postings_deleted() {
        let (u, page) = (user(), PageId::new());
        let tf = BTreeMap::from([("kept".to_owned(), 1)]);
        let writes = stale_postings(&u, &page, &["kept".into(), "lost".into()], &tf);
        assert_eq!(writes.len(), 1);
        let Write::Delete { pk, sk, .. } = &writes[0] else {
            panic!()
        };
        assert_eq!(
            (pk.as_str(), sk.clone()),
            (
                records::term_partition(&u, "lost").as_str(),
                page.to_string()
            )
        );
    }
}
