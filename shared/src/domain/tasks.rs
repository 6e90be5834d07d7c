//! Task links: the same task written on several pages is one task, and its status is
//! reconciled from the pages that show it and from explicit updates.
//!
//! Reconciliation is a fold over the task's history in date order: every page that shows the task
//! and every explicit update is an event, and the latest event that says something decides. Events
//! that the contract leaves unordered (two pages on the same date, two updates in the same second)
//! are ordered by what they decide, so that the outcome never depends on the order in which the
//! store returned them: on the same day `todo` sorts first, then `cancelled`, then `done`. That
//! makes the furthest-along state win a tie, since a box is usually ticked after it was written.

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

/// An explicit status change (from `update_task_status` or `create_task`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusUpdate {
    /// The day it happened (from the clock).
    pub date: Date,
    /// Unix seconds, to order updates on the same day.
    pub at: i64,
    pub status: TaskStatus,
}

/// The outcome of reconciliation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reconciled {
    pub status: TaskStatus,
    /// The date of the event that made it done (the first `done` after the last event that was
    /// not `done`); `None` unless `status` is `Done`.
    pub completed_date: Option<Date>,
}

/// Reconciles a task's status. Events are ordered by date; on the same date page appearances
/// come before updates, and updates by `at`. The latest deciding event wins: an update always
/// decides; a page appearance decides open -> todo, done -> done, cancelled -> cancelled, and a
/// `migrated` appearance decides nothing. No deciding event -> `Todo`.
pub fn reconcile(appearances: &[Appearance], updates: &[StatusUpdate]) -> Reconciled {
    let pages = appearances.iter().filter_map(|a| {
        page_status_to_task(a.page_status).map(|status| Event {
            date: a.date,
            kind: Kind::Page,
            at: 0,
            status,
        })
    });
    let explicit = updates.iter().map(|u| Event {
        date: u.date,
        kind: Kind::Update,
        at: u.at,
        status: u.status,
    });
    let mut events: Vec<Event> = pages.chain(explicit).collect();
    events.sort_unstable_by_key(|e| (e.date, e.kind, e.at, rank(e.status)));

    let mut outcome = Reconciled {
        status: TaskStatus::Todo,
        completed_date: None,
    };
    for e in events {
        outcome.completed_date = match (e.status, outcome.status) {
            // Still done: it was completed when it first became done.
            (TaskStatus::Done, TaskStatus::Done) => outcome.completed_date,
            (TaskStatus::Done, _) => Some(e.date),
            _ => None,
        };
        outcome.status = e.status;
    }
    outcome
}

/// One deciding event of a task's history (migrated appearances are left out: they decide
/// nothing).
struct Event {
    date: Date,
    kind: Kind,
    at: i64,
    status: TaskStatus,
}

/// Pages come before updates on the same date: an update is a deliberate statement made after
/// looking at the day's pages.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Page,
    Update,
}

/// The tie-break between events the contract leaves unordered (see the module docs).
fn rank(s: TaskStatus) -> u8 {
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

    /// Events are written `page <day> <page status>` or `update <day> <at> <status>` (days of
    /// June 2026); the outcome is rendered `<status> [<completed day>]`.
    fn check(events: &[&str], expect: &str) {
        let mut appearances = Vec::new();
        let mut updates = Vec::new();
        for e in events {
            let parts: Vec<&str> = e.split_whitespace().collect();
            match parts.as_slice() {
                ["page", day, status] => {
                    appearances.push(appearance(day.parse().unwrap(), page_status(status)))
                }
                ["update", day, at, status] => updates.push(StatusUpdate {
                    date: date(day.parse().unwrap()),
                    at: at.parse().unwrap(),
                    status: TaskStatus::parse(status).unwrap(),
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
    fn updates_on_one_date_are_ordered_by_time() {
        check(&["update 2 200 todo", "update 2 100 done"], "todo");
        check(&["update 2 100 todo", "update 2 200 done"], "done 2");
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
            (ups, shuffled_ups) in prop::collection::vec((1u8..6, 0i64..3, any_task_status()), 0..6)
                .prop_flat_map(|v| (Just(v.clone()), Just(v).prop_shuffle())),
        ) {
            let build = |apps: &[(u8, PageStatus)], ups: &[(u8, i64, TaskStatus)]| {
                let apps: Vec<_> = apps.iter().map(|&(d, s)| appearance(d, s)).collect();
                let ups: Vec<_> = ups
                    .iter()
                    .map(|&(d, at, status)| StatusUpdate { date: date(d), at, status })
                    .collect();
                reconcile(&apps, &ups)
            };
            let r = build(&apps, &ups);
            prop_assert_eq!(r, build(&shuffled_apps, &shuffled_ups));
            prop_assert_eq!(r.completed_date.is_some(), r.status == TaskStatus::Done);
        }
    }
}
