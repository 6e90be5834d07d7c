//! Task links: the same task written on several pages is one task, and its status is
//! reconciled from the pages that show it and from explicit updates.
//!
//! Reconciliation is a fold over the task's history in date order: every page that shows the task
//! and every explicit update is an event, and the latest event that says something decides. On
//! one date, pages come before updates, and updates come in the order they were made (their
//! sequence number `seq`). Two pages on the same date are the one thing the contract leaves
//! unordered; they are ordered by what they decide, so that the outcome never depends on the
//! order in which the store returned them: `todo` first, then `cancelled`, then `done`, which
//! makes the furthest-along state win, since a box is usually ticked after it was written.
//!
//! The update history is bounded ([`History`]): a task keeps its newest [`MAX_KEPT_UPDATES`]
//! updates, and the ones before are folded into a [`Checkpoint`], the reconciled state right
//! after the newest dropped update. Because an update always decides, everything ordered before
//! that update can change the status no more, so the status never depends on a dropped event.

use serde::{Deserialize, Serialize};

use super::{Date, PageId, PageStatus, StatusSource, TaskStatus};

/// The key under which the same task is recognised across pages: lowercase, inner whitespace
/// collapsed to one space, trimmed, trailing punctuation (`.`, `!`, `?`, `,`, `;`, `:`) removed.
pub fn normalize(text: &str) -> String {
    let mut key = String::with_capacity(text.len());
    for word in text.split_whitespace() {
        if !key.is_empty() {
            key.push(' ');
        }
        key.extend(word.chars().flat_map(char::to_lowercase));
    }
    // Whitespace is stripped along with the punctuation so that `done !` ends up as `done`.
    let kept = key
        .trim_end_matches(|c: char| TRAILING_PUNCTUATION.contains(&c) || c.is_whitespace())
        .len();
    key.truncate(kept);
    key
}

const TRAILING_PUNCTUATION: [char; 6] = ['.', '!', '?', ',', ';', ':'];

/// One line on one page that shows the task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Appearance {
    pub page_id: PageId,
    pub line_id: String,
    pub date: Date,
    pub page_status: PageStatus,
}

/// An explicit status change (from `update_task_status`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusUpdate {
    /// The day it happened (from the clock, never before the previous update's day).
    pub date: Date,
    /// Unix seconds when it was made (kept for the record; the order is `seq`).
    pub at: i64,
    pub status: TaskStatus,
    /// The order updates were made in, from 1. Records written before it existed have 0 here
    /// and are in the order they were made already (appended); [`History::record`] numbers
    /// them.
    #[serde(default)]
    pub seq: u64,
}

/// How many updates a task keeps; older ones are folded into its [`Checkpoint`].
pub const MAX_KEPT_UPDATES: usize = 32;

/// The reconciled state right after the newest update dropped from a task's history.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// The dropped update's date and sequence number: its place in the order.
    pub date: Date,
    pub seq: u64,
    pub status: TaskStatus,
    pub completed_date: Option<Date>,
}

/// A task's explicit updates: the newest [`MAX_KEPT_UPDATES`] in the order they were made, and
/// what the older ones added up to. Bounded, so toggling a task never grows its item.
///
/// Correctness of the fold: updates are dated monotonically ([`History::record`]), so every
/// dropped update is ordered before every kept one, and the newest dropped one is the
/// checkpoint. An update always decides, so the state after it is its status whatever came
/// before: events ordered before the checkpoint (pages dated on or before its date, and the
/// dropped updates) cannot change the reconciled status. What they can still change is only a
/// `completed_date` whose done run began before the checkpoint, when a page dated before it is
/// re-imported differently later; that date stays as recorded at the checkpoint.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct History {
    pub updates: Vec<StatusUpdate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<Checkpoint>,
    /// How many updates were folded into the checkpoint (so a view of the history can say it
    /// is truncated).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped_updates: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl History {
    /// Appends an update made now and folds what falls beyond [`MAX_KEPT_UPDATES`] into the
    /// checkpoint, against the task's current `appearances`.
    pub fn record(&mut self, appearances: &[Appearance], today: Date, at: i64, status: TaskStatus) {
        self.record_capped(appearances, today, at, status, MAX_KEPT_UPDATES);
    }

    fn record_capped(
        &mut self,
        appearances: &[Appearance],
        today: Date,
        at: i64,
        status: TaskStatus,
        cap: usize,
    ) {
        self.number_legacy();
        let (last_date, last_seq) = match (self.updates.last(), &self.checkpoint) {
            (Some(u), _) => (Some(u.date), u.seq),
            (None, Some(c)) => (Some(c.date), c.seq),
            (None, None) => (None, 0),
        };
        // Never dated before the previous update (a clock that stepped back, another
        // instance's clock): the order of dates must be the order of sequence numbers.
        let date = last_date.map_or(today, |d| d.max(today));
        self.updates.push(StatusUpdate {
            date,
            at,
            status,
            seq: last_seq + 1,
        });
        let cap = cap.max(1);
        if self.updates.len() > cap {
            let excess = self.updates.len() - cap;
            let newest_dropped = &self.updates[excess - 1];
            // The state right after the newest dropped update: only the pages ordered before
            // it count (a later page is still folded in by every reconcile after this).
            let before: Vec<Appearance> = appearances
                .iter()
                .filter(|a| a.date <= newest_dropped.date)
                .cloned()
                .collect();
            let state = fold(&before, self.checkpoint.as_ref(), &self.updates[..excess]);
            self.checkpoint = Some(Checkpoint {
                date: newest_dropped.date,
                seq: newest_dropped.seq,
                status: state.status,
                completed_date: state.completed_date,
            });
            self.updates.drain(..excess);
            self.dropped_updates += excess as u64;
        }
    }

    /// Gives updates of a record written before sequence numbers their numbers, in the order
    /// the reconciliation of that time used: by date, then as appended.
    fn number_legacy(&mut self) {
        if self.updates.iter().all(|u| u.seq != 0) {
            return;
        }
        self.updates.sort_by_key(|u| u.date);
        let base = self.checkpoint.map_or(0, |c| c.seq);
        for (i, u) in self.updates.iter_mut().enumerate() {
            u.seq = base + 1 + i as u64;
        }
    }

    /// The task's reconciled status given the pages that show it.
    pub fn reconcile(&self, appearances: &[Appearance]) -> Reconciled {
        fold(appearances, self.checkpoint.as_ref(), &self.updates)
    }
}

/// How many status changes a task's change log keeps (`get_task` shows them); older ones are
/// dropped and counted.
pub const MAX_STATUS_CHANGES: usize = 100;

/// Who or what changed a task's reconciled status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ChangedBy {
    /// A tool call (`update_task_status`; the web app calls the same tool), by the client
    /// named on the credential (an OAuth client's name, a token's label, "web app").
    Tool {
        tool: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        client: Option<String>,
    },
    /// A write of a page that shows the task (import, upload, OCR, a bundle, create_task):
    /// reconciliation with that page's lines. The first entry of a new task says which page
    /// wrote it first.
    Page { page_id: PageId, date: Date },
    /// The page was moved to the trash, and the task reconciled without it.
    PageDeleted { page_id: PageId, date: Date },
    /// The page came back from the trash, and the task reconciled with it again.
    PageRestored { page_id: PageId, date: Date },
    /// `link_tasks` merged another task into this one (its pages now count), or
    /// `unlink_tasks` split it off again.
    Link {
        tool: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        client: Option<String>,
        other: super::TaskLinkId,
    },
}

/// One change of a task's reconciled status (or its creation: the first entry).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusChange {
    /// Unix seconds when it happened.
    pub at: i64,
    pub status: TaskStatus,
    pub by: ChangedBy,
}

/// A task's status changes, newest last, bounded by [`MAX_STATUS_CHANGES`]: the oldest are
/// dropped and counted in `dropped`, so a view can say the log is truncated. Sealed in the task
/// item as one field (who changed it is the user's business).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusLog {
    pub changes: Vec<StatusChange>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped: u64,
}

impl StatusLog {
    /// Appends a change, dropping the oldest beyond [`MAX_STATUS_CHANGES`].
    pub fn push(&mut self, change: StatusChange) {
        self.push_capped(change, MAX_STATUS_CHANGES);
    }

    fn push_capped(&mut self, change: StatusChange, cap: usize) {
        self.changes.push(change);
        let cap = cap.max(1);
        if self.changes.len() > cap {
            let excess = self.changes.len() - cap;
            self.changes.drain(..excess);
            self.dropped += excess as u64;
        }
    }
}

/// The outcome of reconciliation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reconciled {
    pub status: TaskStatus,
    /// The date of the event that made it done (the first `done` after the last event that was
    /// not `done`); `None` unless `status` is `Done`.
    pub completed_date: Option<Date>,
}

/// Reconciles a task's status from its pages and its whole update history (no checkpoint).
/// See [`History::reconcile`] for a bounded history.
pub fn reconcile(appearances: &[Appearance], updates: &[StatusUpdate]) -> Reconciled {
    fold(appearances, None, updates)
}

/// The fold. Events are ordered by date; on the same date page appearances come before
/// updates, and updates by `seq` (then as given, for records from before `seq`). The latest
/// deciding event wins: an update always decides; a page appearance decides open -> todo,
/// done -> done, cancelled -> cancelled, and a `migrated` appearance decides nothing. It starts
/// from the checkpoint, if any, and skips what is ordered before it; no deciding event at all
/// -> `Todo`.
fn fold(
    appearances: &[Appearance],
    checkpoint: Option<&Checkpoint>,
    updates: &[StatusUpdate],
) -> Reconciled {
    let after_checkpoint = |date: Date| checkpoint.is_none_or(|c| date > c.date);
    let pages = appearances.iter().filter_map(|a| {
        let status = page_status_to_task(a.page_status)?;
        after_checkpoint(a.date).then_some(Event {
            key: (a.date, Kind::Page, 0, rank(status)),
            status,
        })
    });
    let explicit = updates.iter().enumerate().map(|(i, u)| Event {
        key: (u.date, Kind::Update, u.seq, i),
        status: u.status,
    });
    let mut events: Vec<Event> = pages.chain(explicit).collect();
    events.sort_unstable_by_key(|e| e.key);

    let mut outcome = match checkpoint {
        Some(c) => Reconciled {
            status: c.status,
            completed_date: c.completed_date,
        },
        None => Reconciled {
            status: TaskStatus::Todo,
            completed_date: None,
        },
    };
    for e in events {
        outcome.completed_date = match (e.status, outcome.status) {
            // Still done: it was completed when it first became done.
            (TaskStatus::Done, TaskStatus::Done) => outcome.completed_date,
            (TaskStatus::Done, _) => Some(e.key.0),
            _ => None,
        };
        outcome.status = e.status;
    }
    outcome
}

/// One deciding event of a task's history (migrated appearances are left out: they decide
/// nothing). The key orders them: date, kind, then `seq` and position for updates, and the
/// status rank for pages (the tie-break between pages of one date).
struct Event {
    key: (Date, Kind, u64, usize),
    status: TaskStatus,
}

/// Pages come before updates on the same date: an update is a deliberate statement made after
/// looking at the day's pages.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Page,
    Update,
}

/// The tie-break between pages of one date (see the module docs).
fn rank(s: TaskStatus) -> usize {
    match s {
        TaskStatus::Todo => 0,
        TaskStatus::Cancelled => 1,
        TaskStatus::Done => 2,
    }
}

/// What a page status says about the task, if anything (`Migrated` says nothing).
pub fn page_status_to_task(s: PageStatus) -> Option<TaskStatus> {
    match s {
        PageStatus::Open => Some(TaskStatus::Todo),
        PageStatus::Done => Some(TaskStatus::Done),
        PageStatus::Cancelled => Some(TaskStatus::Cancelled),
        PageStatus::Migrated => None,
    }
}

/// `Page` when the line's own page status agrees with the reconciled status (a migrated line
/// agrees with `Todo`), else `Reconciled`.
pub fn status_source(page_status: PageStatus, status: TaskStatus) -> StatusSource {
    let said = page_status_to_task(page_status).unwrap_or(TaskStatus::Todo);
    if said == status {
        StatusSource::Page
    } else {
        StatusSource::Reconciled
    }
}

/// A task status in the page vocabulary: `todo` is an open line.
pub fn task_to_page_status(s: TaskStatus) -> PageStatus {
    match s {
        TaskStatus::Todo => PageStatus::Open,
        TaskStatus::Done => PageStatus::Done,
        TaskStatus::Cancelled => PageStatus::Cancelled,
    }
}

/// A task line's effective status, in the page vocabulary (`open`, `done`, `cancelled`,
/// `migrated`), and where it comes from: the line's own status when it agrees with the task's
/// reconciled status (a migrated line agrees with `todo` and stays `migrated`), else the
/// task's status written as a page status.
pub fn line_status(page_status: PageStatus, status: TaskStatus) -> (PageStatus, StatusSource) {
    match status_source(page_status, status) {
        StatusSource::Page => (page_status, StatusSource::Page),
        StatusSource::Reconciled => (task_to_page_status(status), StatusSource::Reconciled),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn date(day: u8) -> Date {
        Date::parse(&format!("2026-06-{day:02}")).unwrap()
    }

    fn page_status(s: &str) -> PageStatus {
        match s {
            "open" => PageStatus::Open,
            "done" => PageStatus::Done,
            "migrated" => PageStatus::Migrated,
            "cancelled" => PageStatus::Cancelled,
            _ => panic!("unknown page status {s}"),
        }
    }

    fn appearance(day: u8, status: PageStatus) -> Appearance {
        Appearance {
            page_id: PageId::new(),
            line_id: "ln_000000000000".into(),
            date: date(day),
            page_status: status,
        }
    }

    /// Events are written `page <day> <page status>` or `update <day> <seq> <status>` (days of
    /// June 2026; every update made in the same second); the outcome is rendered
    /// `<status> [<completed day>]`.
    fn check(events: &[&str], expect: &str) {
        let mut appearances = Vec::new();
        let mut updates = Vec::new();
        for e in events {
            let parts: Vec<&str> = e.split_whitespace().collect();
            match parts.as_slice() {
                ["page", day, status] => {
                    appearances.push(appearance(day.parse().unwrap(), page_status(status)))
                }
                ["update", day, seq, status] => updates.push(StatusUpdate {
                    date: date(day.parse().unwrap()),
                    at: 1_781_000_000,
                    status: TaskStatus::parse(status).unwrap(),
                    seq: seq.parse().unwrap(),
                }),
                _ => panic!("bad event {e}"),
            }
        }
        let r = reconcile(&appearances, &updates);
        let actual = match r.completed_date {
            Some(d) => format!("{} {}", r.status.as_str(), d.inner().day()),
            None => r.status.as_str().to_owned(),
        };
        assert_eq!(actual, expect, "events: {events:?}");
    }

    fn change(at: i64) -> StatusChange {
        StatusChange {
            at,
            status: TaskStatus::Done,
            by: ChangedBy::Tool {
                tool: "update_task_status".into(),
                client: Some("Claude".into()),
            },
        }
    }

    #[test]
    fn the_status_log_keeps_the_newest_changes_and_counts_the_dropped() {
        let mut log = StatusLog::default();
        for at in 0..(MAX_STATUS_CHANGES as i64 + 7) {
            log.push(change(at));
        }
        assert_eq!(log.changes.len(), MAX_STATUS_CHANGES);
        assert_eq!(log.dropped, 7);
        assert_eq!(log.changes.first().unwrap().at, 7);
        assert_eq!(
            log.changes.last().unwrap().at,
            MAX_STATUS_CHANGES as i64 + 6
        );
    }

    #[test]
    fn a_short_status_log_drops_nothing_and_round_trips() {
        let mut log = StatusLog::default();
        log.push_capped(change(1), 3);
        log.push_capped(change(2), 3);
        assert_eq!(log.dropped, 0);
        let json = serde_json::to_string(&log).unwrap();
        assert!(!json.contains("dropped"), "{json}");
        assert_eq!(serde_json::from_str::<StatusLog>(&json).unwrap(), log);
        for at in 3..=5 {
            log.push_capped(change(at), 3);
        }
        assert_eq!(
            log.changes.iter().map(|c| c.at).collect::<Vec<_>>(),
            vec![3, 4, 5]
        );
        assert_eq!(log.dropped, 2);
    }

    #[test]
    fn normalizes_task_text() {
        for (input, expect) in [
            ("  Follow up on   API spec. ", "follow up on api spec"),
            ("Done?!", "done"),
            ("done !", "done"),
            ("Call\tBob,\nabout  it;:", "call bob, about it"),
            ("ÉCRIRE à Zoë", "écrire à zoë"),
            ("v1.2 release", "v1.2 release"),
            ("...", ""),
            ("", ""),
        ] {
            assert_eq!(normalize(input), expect, "{input:?}");
        }
    }

    #[test]
    fn no_events_is_todo() {
        check(&[], "todo");
        check(&["page 1 migrated"], "todo");
    }

    #[test]
    fn ticked_on_a_later_page() {
        check(&["page 1 open", "page 3 done"], "done 3");
    }

    #[test]
    fn done_then_copied_forward_unticked_is_todo_again() {
        check(&["page 1 done", "page 2 open"], "todo");
    }

    #[test]
    fn an_update_after_the_pages_decides() {
        check(
            &["page 1 open", "page 2 open", "update 4 100 done"],
            "done 4",
        );
        check(&["page 1 done", "update 2 100 todo"], "todo");
    }

    #[test]
    fn a_later_page_beats_an_earlier_update() {
        check(&["update 2 100 done", "page 3 open"], "todo");
        check(&["update 2 100 todo", "page 3 done"], "done 3");
    }

    #[test]
    fn migrated_decides_nothing() {
        check(&["page 1 open", "page 2 migrated"], "todo");
        check(&["page 1 done", "page 2 migrated"], "done 1");
        check(
            &["update 1 5 done", "page 2 migrated", "page 3 migrated"],
            "done 1",
        );
    }

    #[test]
    fn on_the_same_date_the_update_wins() {
        check(&["update 2 100 done", "page 2 open"], "done 2");
        check(&["page 2 done", "update 2 100 todo"], "todo");
    }

    #[test]
    fn updates_on_one_date_are_ordered_by_sequence() {
        check(&["update 2 2 todo", "update 2 1 done"], "todo");
        check(&["update 2 1 todo", "update 2 2 done"], "done 2");
    }

    /// Issue 11, item 13: done then todo within one second reopens the task (it used to stay
    /// done: same-second updates were ordered by status rank).
    #[test]
    fn done_then_todo_in_the_same_second_is_todo() {
        check(
            &["page 2 open", "update 2 1 done", "update 2 2 todo"],
            "todo",
        );
        check(
            &[
                "page 2 open",
                "update 2 1 todo",
                "update 2 2 done",
                "update 2 3 todo",
            ],
            "todo",
        );
    }

    /// Records from before sequence numbers (all `seq` 0) keep their order of appending.
    #[test]
    fn legacy_updates_apply_in_the_order_appended() {
        check(&["update 2 0 done", "update 2 0 todo"], "todo");
        check(&["update 2 0 todo", "update 2 0 done"], "done 2");
        let mut h = History {
            updates: vec![
                StatusUpdate {
                    date: date(3),
                    at: 5,
                    status: TaskStatus::Done,
                    seq: 0,
                },
                StatusUpdate {
                    date: date(2),
                    at: 9,
                    status: TaskStatus::Todo,
                    seq: 0,
                },
            ],
            ..History::default()
        };
        h.record(&[], date(3), 5, TaskStatus::Cancelled);
        let seqs: Vec<(u8, u64)> = h
            .updates
            .iter()
            .map(|u| (u.date.inner().day(), u.seq))
            .collect();
        assert_eq!(seqs, [(2, 1), (3, 2), (3, 3)]);
        assert_eq!(h.reconcile(&[]).status, TaskStatus::Cancelled);
    }

    #[test]
    fn updates_are_never_dated_before_the_previous_one() {
        let mut h = History::default();
        h.record(&[], date(5), 1, TaskStatus::Done);
        // The clock stepped back a day (another instance): still ordered after.
        h.record(&[], date(4), 2, TaskStatus::Todo);
        assert_eq!(h.updates[1].date, date(5));
        assert_eq!(h.reconcile(&[]).status, TaskStatus::Todo);
    }

    /// Issue 11, item 9: toggling a task a thousand times keeps its history bounded, and the
    /// status is still the last update's.
    #[test]
    fn the_history_keeps_the_newest_updates_and_counts_the_rest() {
        let apps = [appearance(1, PageStatus::Open)];
        let mut h = History::default();
        for i in 0..1000 {
            let status = if i % 2 == 0 {
                TaskStatus::Done
            } else {
                TaskStatus::Todo
            };
            h.record(&apps, date(2), 1_781_000_000, status);
            assert_eq!(h.reconcile(&apps).status, status, "after update {i}");
        }
        assert_eq!(h.updates.len(), MAX_KEPT_UPDATES);
        assert_eq!(h.dropped_updates, 1000 - MAX_KEPT_UPDATES as u64);
        assert_eq!(h.updates.last().unwrap().seq, 1000);
        let c = h.checkpoint.unwrap();
        assert_eq!(c.seq, 1000 - MAX_KEPT_UPDATES as u64);
        // The serialized size does not grow with the number of updates.
        let size = serde_json::to_vec(&h).unwrap().len();
        assert!(size < 4096, "{size} bytes");
    }

    #[test]
    fn cancelled() {
        check(&["page 1 open", "page 2 cancelled"], "cancelled");
        check(&["page 1 open", "update 2 1 cancelled"], "cancelled");
        check(&["page 1 cancelled", "page 2 open"], "todo");
    }

    #[test]
    fn completed_date_is_the_first_done_after_the_last_undone() {
        check(
            &[
                "page 1 done",
                "page 2 open",
                "page 3 done",
                "page 4 done",
                "update 5 1 done",
            ],
            "done 3",
        );
    }

    #[test]
    fn same_date_pages_that_disagree_resolve_to_done() {
        check(&["page 2 done", "page 2 open"], "done 2");
        check(&["page 2 open", "page 2 done"], "done 2");
        check(&["page 2 cancelled", "page 2 open"], "cancelled");
    }

    #[test]
    fn status_source_compares_page_and_reconciled() {
        assert_eq!(
            status_source(PageStatus::Migrated, TaskStatus::Todo),
            StatusSource::Page
        );
        assert_eq!(
            status_source(PageStatus::Open, TaskStatus::Done),
            StatusSource::Reconciled
        );
    }

    fn any_page_status() -> impl Strategy<Value = PageStatus> {
        prop::sample::select(vec![
            PageStatus::Open,
            PageStatus::Done,
            PageStatus::Migrated,
            PageStatus::Cancelled,
        ])
    }

    fn any_task_status() -> impl Strategy<Value = TaskStatus> {
        prop::sample::select(vec![
            TaskStatus::Todo,
            TaskStatus::Done,
            TaskStatus::Cancelled,
        ])
    }

    proptest! {
        #[test]
        fn input_order_never_matters(
            (apps, shuffled_apps) in prop::collection::vec((1u8..6, any_page_status()), 0..8)
                .prop_flat_map(|v| (Just(v.clone()), Just(v).prop_shuffle())),
            (ups, shuffled_ups) in prop::collection::vec((1u8..6, any_task_status()), 0..6)
                .prop_map(|v| v.into_iter().enumerate().map(|(i, (d, s))| (d, i as u64 + 1, s)).collect::<Vec<_>>())
                .prop_flat_map(|v| (Just(v.clone()), Just(v).prop_shuffle())),
        ) {
            let build = |apps: &[(u8, PageStatus)], ups: &[(u8, u64, TaskStatus)]| {
                let apps: Vec<_> = apps.iter().map(|&(d, s)| appearance(d, s)).collect();
                let ups: Vec<_> = ups
                    .iter()
                    .map(|&(d, seq, status)| StatusUpdate { date: date(d), at: 0, status, seq })
                    .collect();
                reconcile(&apps, &ups)
            };
            let r = build(&apps, &ups);
            prop_assert_eq!(r, build(&shuffled_apps, &shuffled_ups));
            prop_assert_eq!(r.completed_date.is_some(), r.status == TaskStatus::Done);
        }
        /// A history folded into a checkpoint reconciles to the same status as the whole
        /// history, whatever pages are added, in any date order, between the updates; and to
        /// the same completed date when the pages were all there before the updates.
        #[test]
        fn a_folded_history_reconciles_like_the_whole_one(
            ops in prop::collection::vec(
                prop_oneof![
                    (1u8..9, any_page_status()).prop_map(|(d, s)| (true, d, Some(s), None)),
                    (1u8..9, any_task_status()).prop_map(|(d, s)| (false, d, None, Some(s))),
                ],
                0..40,
            ),
            pages_first in any::<bool>(),
        ) {
            let mut ops = ops;
            if pages_first {
                ops.sort_by_key(|op| !op.0);
            }
            let mut apps = Vec::new();
            let mut folded = History::default();
            let mut whole = History::default();
            for (i, (is_page, day, page, update)) in ops.into_iter().enumerate() {
                if is_page {
                    apps.push(appearance(day, page.unwrap()));
                } else {
                    let status = update.unwrap();
                    folded.record_capped(&apps, date(day), i as i64, status, 3);
                    whole.record_capped(&apps, date(day), i as i64, status, usize::MAX);
                }
                let (f, w) = (folded.reconcile(&apps), whole.reconcile(&apps));
                prop_assert_eq!(f.status, w.status);
                if pages_first {
                    prop_assert_eq!(f.completed_date, w.completed_date);
                }
                prop_assert!(folded.updates.len() <= 3);
                prop_assert_eq!(
                    folded.updates.len() as u64 + folded.dropped_updates,
                    whole.updates.len() as u64
                );
            }
        }
    }
}
