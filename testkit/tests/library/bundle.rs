//! `nib::notebook::bundle`: export and import of a whole notebook, through the public API and
//! the documented format. The round trip (every read tool's answer compared, the same bundle
//! out again, a second import that writes nothing) on local notebooks of the sample and of
//! 1000 generated pages, and on the AWS emulator (task status logs and links included, and
//! older bundles without them); damaged and foreign bundles; no secret in a
//! bundle (a task pushed to the Notion stand-in); the Markdown export.
//!
//! Here rather than beside the code because two of them need the emulator or the Notion
//! stand-in, and all share one round-trip check.

use std::collections::BTreeMap;
use std::io::{Cursor, Read, Write as _};
use std::path::{Path, PathBuf};

use nib::adapters::notion::NotionToken;
use nib::domain::{Date, Notation, PageStatus, TaskLinkId, TaskStatus, UserId};
use nib::notebook::{
    BundleError, LinkActor, MAX_BUNDLE_BYTES, MAX_INK_ENTRY_BYTES, MAX_JSON_ENTRY_BYTES, Notebook,
    PageDraft, PageFiles, TaskFilter, read_page_with,
};
use nib::ports::AssetKind;
use nib::services::{LocalOptions, Services};
use nib_testkit::emulator::Emulator;
use nib_testkit::notion_standin::NotionStandin;

/// The bundle's manifest (docs/user-guide.md, "The bundle").
const MANIFEST: &str = "manifest.json";

fn user() -> UserId {
    UserId::parse("default").unwrap()
}

fn local(dir: &Path) -> Services {
    Services::open_local(dir, LocalOptions::default()).unwrap()
}

fn sample_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/sample")
}

/// The sample notebook, plus a created task, a status history, a task with a source, and two
/// tasks linked as one (`link_tasks`) with its status changed after.
async fn fill_with_sample(app: &Services) {
    let u = user();
    app.ensure_user(&u).await.unwrap();
    let (pages, _) = nib::notebook::group_dir(&sample_dir()).unwrap();
    for files in &pages {
        app.notebook().import_files(&u, files).await.unwrap();
    }
    let date = Date::parse("2026-06-19").unwrap();
    let created = app
        .notebook()
        .create_task(
            &u,
            date,
            "Send the bundle test",
            Some("https://example.com/x"),
        )
        .await
        .unwrap();
    for status in [TaskStatus::Done, TaskStatus::Todo, TaskStatus::Cancelled] {
        app.notebook()
            .update_task_status(&u, &created.task_link_id, status)
            .await
            .unwrap();
    }
    let first = app
        .notebook()
        .list_tasks(&u, TaskFilter::Open, None, 1)
        .await
        .unwrap();
    app.notebook()
        .update_task_status(&u, &first[0].task_link_id, TaskStatus::Done)
        .await
        .unwrap();
    // A line the owner corrected (issue 46): its text, its mark and its words come along.
    let page = app
        .notebook()
        .list_pages(&u, None, None, 1)
        .await
        .unwrap()
        .remove(0);
    let line = app
        .notebook()
        .get_page(&u, &page.page_id)
        .await
        .unwrap()
        .lines
        .into_iter()
        .find(|l| l.origin == nib::notebook::LineOrigin::Page)
        .unwrap();
    app.notebook()
        .correct_line(
            &u,
            &page.page_id,
            &line.line_id,
            nib::notebook::Correction {
                text: Some(format!("{} zeppelin", line.text)),
                ticked: None,
            },
        )
        .await
        .unwrap();
    let (kept, merged) = linked_pair(app).await;
    app.notebook()
        .link_tasks(
            &u,
            &kept,
            &merged,
            &LinkActor {
                tool: "link_tasks",
                client: Some("bundle test".into()),
            },
        )
        .await
        .unwrap();
    app.notebook()
        .update_task_status(&u, &kept, TaskStatus::Done)
        .await
        .unwrap();
}

/// The two tasks `fill_with_sample` links: "Call the dentist re: filling" (kept) and "call
/// dentist" (merged into it), on two days.
async fn linked_pair(app: &Services) -> (TaskLinkId, TaskLinkId) {
    let u = user();
    let mut ids = Vec::new();
    for (date, text) in [
        ("2026-06-19", "Call the dentist re: filling"),
        ("2026-06-18", "call dentist"),
    ] {
        let t = app
            .notebook()
            .create_task(&u, Date::parse(date).unwrap(), text, None)
            .await
            .unwrap();
        ids.push(t.task_link_id);
    }
    let merged = ids.pop().unwrap();
    (ids.pop().unwrap(), merged)
}

/// What the read tools show of the notebook, signed URLs aside: every page listed and
/// fetched, every task, and search for `terms`.
async fn snapshot(nb: &Notebook, terms: &[&str]) -> String {
    let u = user();
    let (pages, more) = nb
        .list_pages_after(&u, None, None, None, 100_000)
        .await
        .unwrap();
    assert!(!more);
    let mut out = format!("{pages:?}\n");
    for p in &pages {
        let mut view = nb.get_page(&u, &p.page_id).await.unwrap();
        view.pdf_url = view.pdf_url.map(|_| "signed".into());
        view.png_url = view.png_url.map(|_| "signed".into());
        out.push_str(&format!("{view:?}\n"));
    }
    let tasks = nb
        .list_tasks(&u, TaskFilter::All, None, 100_000)
        .await
        .unwrap();
    out.push_str(&format!("{tasks:?}\n"));
    // get_task of each: its lines on every page (a linked task's too) and its status history.
    for t in &tasks {
        let detail = nb.task_detail(&u, &t.task_link_id).await.unwrap();
        out.push_str(&format!("{detail:?}\n"));
    }
    for term in terms {
        let hits: Vec<_> = nb
            .search(&u, term, 50)
            .await
            .unwrap()
            .into_iter()
            .map(|h| (h.page_id, h.date, h.snippet, h.score, h.url.is_some()))
            .collect();
        out.push_str(&format!("{term}: {hits:?}\n"));
    }
    out.push_str(&format!("pages: {}\n", nb.page_count(&u).await.unwrap()));
    out
}

async fn export(nb: &Notebook) -> Vec<u8> {
    let mut out = Cursor::new(Vec::new());
    nb.export_bundle(&user(), &mut out, &|| {}).await.unwrap();
    out.into_inner()
}

/// A bundle's entries by name, the manifest's export time aside.
fn entries(bundle: &[u8]) -> BTreeMap<String, Vec<u8>> {
    let mut archive = zip::ZipArchive::new(Cursor::new(bundle)).unwrap();
    let mut out = BTreeMap::new();
    for i in 0..archive.len() {
        let mut f = archive.by_index(i).unwrap();
        let name = f.name().unwrap().into_owned();
        let mut bytes = Vec::new();
        f.read_to_end(&mut bytes).unwrap();
        if name == MANIFEST {
            let mut m: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
            m["exported_at"] = 0.into();
            bytes = m.to_string().into_bytes();
        }
        out.insert(name, bytes);
    }
    out
}

/// Round trip of `source` into an empty notebook, then a second import: asserts the same
/// tool outputs, the same bundle out again, and that the second import writes nothing.
async fn round_trip(source: &Notebook, target: &Notebook, terms: &[&str]) {
    let u = user();
    assert!(
        !source.search(&u, terms[0], 5).await.unwrap().is_empty(),
        "the comparison includes search hits"
    );
    let before = snapshot(source, terms).await;
    let bundle = export(source).await;
    let ticks = std::sync::atomic::AtomicU64::new(0);
    let tick = || {
        ticks.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    };
    let first = target
        .import_bundle(&u, Cursor::new(&bundle), &tick)
        .await
        .unwrap();
    let pages = source.page_count(&u).await.unwrap();
    assert_eq!(first.pages, pages);
    assert_eq!((first.pages_present, first.tasks_present), (0, 0));
    assert_eq!(ticks.into_inner(), pages, "progress after every page");
    let after = snapshot(target, terms).await;
    assert_eq!(before, after, "every read identical after the round trip");
    assert_eq!(
        target.vocabulary(&u).await.unwrap(),
        source.vocabulary(&u).await.unwrap(),
        "the corrected words are the user's vocabulary again"
    );
    // Lines, OCR sources, histories, appearances, revisions: the same bundle comes out.
    assert_eq!(entries(&bundle), entries(&export(target).await));

    let second = target
        .import_bundle(&u, Cursor::new(&bundle), &|| {})
        .await
        .unwrap();
    assert_eq!((second.pages, second.tasks), (0, 0));
    assert_eq!(
        (second.pages_present, second.tasks_present),
        (first.pages, first.tasks)
    );
    assert_eq!(
        snapshot(target, terms).await,
        before,
        "a second import changes nothing"
    );
}

const SAMPLE_TERMS: &[&str] = &[
    "printer",
    "meeting",
    "toner",
    "\"the printer\"",
    "bundle",
    "zeppelin",
];

#[tokio::test]
async fn the_sample_notebook_round_trips_through_a_bundle() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (source, target) = (local(a.path()), local(b.path()));
    fill_with_sample(&source).await;
    target.ensure_user(&user()).await.unwrap();
    let tasks = source
        .notebook()
        .list_tasks(&user(), TaskFilter::All, None, 1000)
        .await
        .unwrap();
    assert!(tasks.len() >= 3 && tasks.iter().any(|t| t.status == TaskStatus::Cancelled));
    round_trip(source.notebook(), target.notebook(), SAMPLE_TERMS).await;

    // The history survived (the tools show it only through the status): the bundle says so.
    let bundle = export(target.notebook()).await;
    let created = entries(&bundle)
        .into_iter()
        .filter(|(n, _)| n.starts_with("tasks/"))
        .map(|(_, b)| serde_json::from_slice::<serde_json::Value>(&b).unwrap())
        .find(|t| t["text"] == "Send the bundle test")
        .unwrap();
    assert_eq!(created["history"]["updates"].as_array().unwrap().len(), 3);
    assert_eq!(created["source_url"], "https://example.com/x");
    // Who changed it came along (get_task's history), and so did the link: the kept task's
    // entry holds the merged one, and get_task shows both days' lines and the link.
    assert_eq!(
        created["status_log"]["changes"].as_array().unwrap().len(),
        4
    );
    let kept = entries(&bundle)
        .into_iter()
        .filter(|(n, _)| n.starts_with("tasks/"))
        .map(|(_, b)| serde_json::from_slice::<serde_json::Value>(&b).unwrap())
        .find(|t| t["text"] == "Call the dentist re: filling")
        .unwrap();
    assert_eq!(kept["merged"][0]["text"], "call dentist");
    assert_eq!(kept["merged"][0]["owns_key"], true);
    let kept_id = TaskLinkId::parse(kept["task_link_id"].as_str().unwrap()).unwrap();
    let merged_id = TaskLinkId::parse(kept["merged"][0]["task_link_id"].as_str().unwrap()).unwrap();
    let detail = target
        .notebook()
        .task_detail(&user(), &kept_id)
        .await
        .unwrap();
    let days: Vec<String> = detail.lines.iter().map(|l| l.date.to_string()).collect();
    assert_eq!(days, ["2026-06-18", "2026-06-19"]);
    assert!(
        detail
            .changes
            .changes
            .iter()
            .any(|c| matches!(&c.by, nib::domain::tasks::ChangedBy::Link { other, .. } if *other == merged_id)),
        "{detail:?}"
    );
    // The link is a link still: unlinking gives the merged task back with its own text and
    // its own day's line.
    target
        .notebook()
        .unlink_tasks(
            &user(),
            &kept_id,
            &merged_id,
            &LinkActor {
                tool: "unlink_tasks",
                client: None,
            },
        )
        .await
        .unwrap();
    let back = target
        .notebook()
        .task_detail(&user(), &merged_id)
        .await
        .unwrap();
    assert_eq!(back.task.text, "call dentist");
    let days: Vec<String> = back.lines.iter().map(|l| l.date.to_string()).collect();
    assert_eq!(days, ["2026-06-18"]);
    // The ink came along, and its bytes are the same.
    let page = target
        .notebook()
        .list_pages(&user(), None, None, 100)
        .await
        .unwrap()
        .into_iter()
        .find(|p| p.has_ink)
        .unwrap();
    for kind in [AssetKind::Pdf, AssetKind::Png] {
        assert_eq!(
            source
                .assets
                .get(&user(), &page.page_id, kind)
                .await
                .unwrap(),
            target
                .assets
                .get(&user(), &page.page_id, kind)
                .await
                .unwrap()
        );
    }
}

/// A bundle written before tasks carried their status log and links (no `status_log`, no
/// `merged`) still imports: the tasks come in with their statuses and update history, and
/// an empty change log.
#[tokio::test]
async fn a_bundle_without_status_logs_and_links_still_imports() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (source, target) = (local(a.path()), local(b.path()));
    fill_with_sample(&source).await;
    target.ensure_user(&user()).await.unwrap();
    let older = rewrite(&export(source.notebook()).await, |name, bytes| {
        if !name.starts_with("tasks/") {
            return Some(bytes);
        }
        let mut t: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        let o = t.as_object_mut().unwrap();
        o.remove("status_log");
        o.remove("merged");
        Some(serde_json::to_vec(&t).unwrap())
    });
    target
        .notebook()
        .import_bundle(&user(), Cursor::new(&older), &|| {})
        .await
        .unwrap();
    let before = source
        .notebook()
        .list_tasks(&user(), TaskFilter::All, None, 1000)
        .await
        .unwrap();
    let after = target
        .notebook()
        .list_tasks(&user(), TaskFilter::All, None, 1000)
        .await
        .unwrap();
    assert_eq!(before, after);
    let detail = target
        .notebook()
        .task_detail(&user(), &after[0].task_link_id)
        .await
        .unwrap();
    assert!(detail.changes.changes.is_empty(), "{detail:?}");
}

#[tokio::test]
async fn a_generated_thousand_page_notebook_round_trips() {
    use futures::StreamExt;
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (source, target) = (local(a.path()), local(b.path()));
    let u = user();
    source.ensure_user(&u).await.unwrap();
    target.ensure_user(&u).await.unwrap();
    let words = [
        "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf",
    ];
    let start = Date::parse("2023-01-01").unwrap();
    let drafts: Vec<PageDraft> = (0..1000u32)
        .map(|i| {
            let date = Date::from_time(start.inner() + time::Duration::days(i64::from(i)));
            let md = format!(
                "# Day {i}\n## Tasks\n- [ ] Call client {}\n- [{}] Review {} notes\n## Notes\n- {} {} meeting {i}\n",
                i % 40,
                if i % 3 == 0 { "x" } else { " " },
                words[i as usize % 7],
                words[(i as usize * 3) % 7],
                words[(i as usize * 5) % 7],
            );
            // Read as `nib import` reads files, from memory: a page with its text, and every
            // hundredth its ink too (a PNG only by its signature).
            let stem = date.to_string();
            let png = (i % 100 == 0)
                .then(|| [&b"\x89PNG\r\n\x1a\n"[..], format!("png {i}").as_bytes()].concat());
            let files = PageFiles {
                md: Some(PathBuf::from(format!("{stem}.md"))),
                png: png.as_ref().map(|_| PathBuf::from(format!("{stem}.png"))),
                stem,
                ..PageFiles::default()
            };
            read_page_with(&files, |path| {
                let bytes = match path.extension().and_then(|e| e.to_str()) {
                    Some("png") => png.clone().unwrap(),
                    _ => md.clone().into_bytes(),
                };
                Ok((bytes, None))
            })
            .unwrap()
        })
        .collect();
    let nb = source.notebook().clone();
    let mut runs = futures::stream::select_all(drafts.chunks(63).map(|run| {
        let nb = nb.clone();
        let u = u.clone();
        futures::stream::iter(run.to_vec())
            .then(move |d| {
                let (nb, u) = (nb.clone(), u.clone());
                async move { nb.import_page(&u, d).await.unwrap() }
            })
            .boxed()
    }));
    while runs.next().await.is_some() {}
    assert_eq!(source.notebook().page_count(&u).await.unwrap(), 1000);
    round_trip(
        source.notebook(),
        target.notebook(),
        &["alpha", "meeting 7", "client", "\"review golf\""],
    )
    .await;
}

/// Rewrites a bundle with `edit` applied to its entries (None drops an entry).
fn rewrite(bundle: &[u8], edit: impl Fn(&str, Vec<u8>) -> Option<Vec<u8>>) -> Vec<u8> {
    let mut out = zip::ZipWriter::new(Cursor::new(Vec::new()));
    for (name, bytes) in entries(bundle) {
        if let Some(bytes) = edit(&name, bytes) {
            out.start_file(name, zip::write::SimpleFileOptions::default())
                .unwrap();
            out.write_all(&bytes).unwrap();
        }
    }
    out.finish().unwrap().into_inner()
}

/// `bundle` with the uncompressed size its central directory gives the entries `which`
/// picks set to `size`, their data untouched: what a crafted archive says.
fn declare_sizes(bundle: &[u8], which: impl Fn(&str) -> bool, size: u32) -> Vec<u8> {
    let mut out = bundle.to_vec();
    let mut at = 0;
    // Central directory headers: the signature, the uncompressed size at 24, the name's
    // length at 28, the name at 46.
    while let Some(i) = out[at..].windows(4).position(|w| w == b"PK\x01\x02") {
        let h = at + i;
        let name_len = usize::from(u16::from_le_bytes([out[h + 28], out[h + 29]]));
        let name = String::from_utf8(out[h + 46..h + 46 + name_len].to_vec()).unwrap();
        if which(&name) {
            out[h + 24..h + 28].copy_from_slice(&size.to_le_bytes());
        }
        at = h + 46 + name_len;
    }
    out
}

#[tokio::test]
async fn a_damaged_or_foreign_bundle_is_refused_and_nothing_is_written() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (source, target) = (local(a.path()), local(b.path()));
    fill_with_sample(&source).await;
    target.ensure_user(&user()).await.unwrap();
    let bundle = export(source.notebook()).await;
    let empty = snapshot(target.notebook(), SAMPLE_TERMS).await;

    // One byte flipped inside a stored (uncompressed) ink file: its CRC no longer holds.
    let mut flipped = bundle.clone();
    let at = flipped
        .windows(4)
        .position(|w| w == b"%PDF")
        .expect("the sample's PDF is stored as is");
    flipped[at + 20] ^= 0xff;
    let truncated = bundle[..bundle.len() / 2].to_vec();
    let no_manifest = rewrite(&bundle, |n, b| (n != MANIFEST).then_some(b));
    let other_format = rewrite(&bundle, |n, b| {
        Some(if n == MANIFEST {
            br#"{"format":"evernote","version":1,"exported_at":0,"pages":0,"tasks":0,"ink_files":0}"#.to_vec()
        } else {
            b
        })
    });
    let newer = rewrite(&bundle, |n, b| {
        Some(if n == MANIFEST {
            String::from_utf8(b)
                .unwrap()
                .replace("\"version\":1", "\"version\":2")
                .into_bytes()
        } else {
            b
        })
    });
    let lost_task = {
        let first_task = entries(&bundle)
            .into_keys()
            .find(|n| n.starts_with("tasks/"))
            .unwrap();
        rewrite(&bundle, move |n, b| (n != first_task).then_some(b))
    };
    let bad_json = rewrite(&bundle, |n, b| {
        Some(if n.starts_with("pages/") && n.ends_with(".json") {
            b"{\"page_id\": 3".to_vec()
        } else {
            b
        })
    });
    // A page entry larger than an entry holds (valid JSON, padded).
    let oversized = rewrite(&bundle, |n, b| {
        Some(if n.starts_with("pages/") && n.ends_with(".json") {
            let mut padded = vec![b' '; MAX_JSON_ENTRY_BYTES as usize + 1 - b.len()];
            padded.extend(b);
            padded
        } else {
            b
        })
    });
    // An entry whose header says it inflates to nearly 4 GiB (its data a few hundred bytes).
    let claims_4_gib = declare_sizes(
        &bundle,
        |n| n.starts_with("pages/") && n.ends_with(".json"),
        0xffff_fff0,
    );
    // Entries each within the ink cap but together more than a bundle holds.
    let many = rewrite(&bundle, |_, b| Some(b));
    let many = {
        let mut out = zip::ZipWriter::new_append(Cursor::new(many)).unwrap();
        let entries = MAX_BUNDLE_BYTES / MAX_INK_ENTRY_BYTES + 1;
        for _ in 0..entries {
            out.start_file(
                format!("pages/{}.png", uuid::Uuid::now_v7()),
                zip::write::SimpleFileOptions::default()
                    .compression_method(zip::CompressionMethod::Stored),
            )
            .unwrap();
            out.write_all(b"ink").unwrap();
        }
        out.finish().unwrap().into_inner()
    };
    let too_much = declare_sizes(
        &many,
        |n| n.ends_with(".png"),
        u32::try_from(MAX_INK_ENTRY_BYTES).unwrap(),
    );
    type Expect = fn(&BundleError) -> bool;
    let cases: [(&str, Vec<u8>, Expect); 10] = [
        ("flipped byte", flipped, |e| {
            matches!(e, BundleError::Damaged(_))
        }),
        (
            "truncated",
            truncated,
            |e| matches!(e, BundleError::Damaged(m) if m.contains("cut short")),
        ),
        (
            "no manifest",
            no_manifest,
            |e| matches!(e, BundleError::Foreign(m) if m.contains("manifest.json")),
        ),
        (
            "other format",
            other_format,
            |e| matches!(e, BundleError::Foreign(m) if m.contains("evernote")),
        ),
        (
            "newer version",
            newer,
            |e| matches!(e, BundleError::Foreign(m) if m.contains("version 2")),
        ),
        (
            "a task missing",
            lost_task,
            |e| matches!(e, BundleError::Damaged(m) if m.contains("manifest lists")),
        ),
        ("bad page JSON", bad_json, |e| {
            matches!(e, BundleError::Damaged(_))
        }),
        (
            "an entry over its cap",
            oversized,
            |e| matches!(e, BundleError::Damaged(m) if m.contains("holds at most 4194304")),
        ),
        (
            "an entry saying it holds 4 GiB",
            claims_4_gib,
            |e| matches!(e, BundleError::Damaged(m) if m.contains("says it holds 4294967280 bytes")),
        ),
        (
            "entries over the total",
            too_much,
            |e| matches!(e, BundleError::Damaged(m) if m.contains("together")),
        ),
    ];
    for (what, bytes, expected) in cases {
        let err = target
            .notebook()
            .import_bundle(&user(), Cursor::new(bytes), &|| {})
            .await
            .unwrap_err();
        assert!(expected(&err), "{what}: {err:?}");
        assert!(!err.to_string().is_empty());
        assert_eq!(
            snapshot(target.notebook(), SAMPLE_TERMS).await,
            empty,
            "{what}: nothing written"
        );
    }
    let err = target
        .notebook()
        .import_bundle(&user(), Cursor::new(b"hello".to_vec()), &|| {})
        .await
        .unwrap_err();
    assert!(matches!(err, BundleError::Foreign(_)), "{err:?}");

    // A notebook with pages of its own is refused too, before anything is written.
    let u = user();
    target
        .notebook()
        .create_task(&u, Date::parse("2020-01-01").unwrap(), "Mine", None)
        .await
        .unwrap();
    let mine = snapshot(target.notebook(), SAMPLE_TERMS).await;
    let err = target
        .notebook()
        .import_bundle(&u, Cursor::new(bundle), &|| {})
        .await
        .unwrap_err();
    assert!(matches!(err, BundleError::NotEmpty(_)), "{err:?}");
    assert_eq!(snapshot(target.notebook(), SAMPLE_TERMS).await, mine);
}

/// A bundle imported into its own notebook after one of its pages went to the trash (and
/// after a task was deleted on its own): refused before anything is written, naming the
/// trashed item and how to restore it, rather than putting it back live beside its trash item
/// (where `delete_page` could no longer trash it) or reporting a stem clash. Restored, the
/// import skips it, and `delete_page` works as ever.
#[tokio::test]
async fn a_bundle_import_over_its_trashed_page_is_refused_naming_the_trash() {
    let dir = tempfile::tempdir().unwrap();
    let app = local(dir.path());
    fill_with_sample(&app).await;
    let (nb, u) = (app.notebook(), user());
    let bundle = export(nb).await;
    let (pages, _) = nb
        .list_pages_after(&u, None, None, None, 100)
        .await
        .unwrap();
    // The page of 2026-06-19 has a date stem, ink and a task on no other page.
    let page = pages
        .iter()
        .find(|p| p.date == Date::parse("2026-06-19").unwrap() && p.has_ink)
        .unwrap()
        .page_id
        .clone();
    assert!(nb.trash_page(&u, &page).await.unwrap().deleted);
    let trashed = snapshot(nb, SAMPLE_TERMS).await;
    let err = nb
        .import_bundle(&u, Cursor::new(&bundle), &|| {})
        .await
        .unwrap_err();
    assert!(
        matches!(&err, BundleError::InTrash(m)
            if m.contains(&format!("page {page} is in the trash")) && m.contains("restore_page")),
        "{err:?}"
    );
    assert_eq!(snapshot(nb, SAMPLE_TERMS).await, trashed, "nothing written");

    assert!(nb.restore_page(&u, &page).await.unwrap().restored);
    let task = nb.list_tasks(&u, TaskFilter::Open, None, 1).await.unwrap()[0]
        .task_link_id
        .clone();
    assert!(nb.trash_task(&u, &task).await.unwrap().deleted);
    let err = nb
        .import_bundle(&u, Cursor::new(&bundle), &|| {})
        .await
        .unwrap_err();
    assert!(
        matches!(&err, BundleError::InTrash(m)
            if m.contains(&format!("task {task} is in the trash")) && m.contains("restore_task")),
        "{err:?}"
    );
    assert!(nb.restore_task(&u, &task).await.unwrap().restored);

    let again = nb
        .import_bundle(&u, Cursor::new(&bundle), &|| {})
        .await
        .unwrap();
    assert_eq!((again.pages, again.tasks), (0, 0), "everything was there");
    assert!(nb.trash_page(&u, &page).await.unwrap().deleted);
    assert!(nb.restore_page(&u, &page).await.unwrap().restored);
}

/// The bundle carries no secret: no Notion token or connection, no password hash, no API
/// token, no wrapped key.
#[tokio::test]
async fn a_bundle_holds_no_secret() {
    const NOTION_TOKEN: &str = "ntn_bundle_secret_4f1c9e";
    let notion = NotionStandin::start(NOTION_TOKEN).await.unwrap();
    let database = notion.add_task_database();
    let a = tempfile::tempdir().unwrap();
    let source = Services::open_local(
        a.path(),
        LocalOptions {
            notion_api_url: notion.url.clone(),
            ..LocalOptions::default()
        },
    )
    .unwrap();
    fill_with_sample(&source).await;
    let u = user();
    source
        .notebook()
        .notion_connect(&u, &database, NotionToken::parse(NOTION_TOKEN).unwrap())
        .await
        .unwrap();
    let (_, pushed) = source
        .notebook()
        .create_task_pushed(&u, Date::parse("2026-06-20").unwrap(), "Pushed one", None)
        .await
        .unwrap();
    let notion_page = pushed.page.expect("pushed to the stand-in").page_id;
    source
        .users()
        .set_password(&u, "correct horse battery", true)
        .await
        .unwrap();
    let token = source
        .tokens
        .create(&u, nib::auth::Scope::Write, Some("laptop".into()))
        .await
        .unwrap();
    let bundle = export(source.notebook()).await;
    let all: Vec<u8> = entries(&bundle).into_values().flatten().collect();
    let text = String::from_utf8_lossy(&all);
    for secret in [
        token.token.as_str(),
        "argon2",
        "correct horse",
        "laptop",
        "NOTION",
        "KEY#",
    ] {
        assert!(!text.contains(secret), "the bundle contains {secret:?}");
    }
    // It does hold the content, in the clear, and the pushed task's Notion link.
    assert!(text.contains("Send the bundle test"));
    assert!(text.contains(&notion_page));
}

/// The Markdown export: a file per page with front matter, tasks as checkboxes with their
/// reconciled status, the image beside it.
#[tokio::test]
async fn the_markdown_export_has_a_file_per_page_with_its_status_and_image() {
    let a = tempfile::tempdir().unwrap();
    let source = local(a.path());
    fill_with_sample(&source).await;
    let u = user();
    let mut out = Cursor::new(Vec::new());
    let report = source
        .notebook()
        .export_markdown(&u, &mut out, &|| {})
        .await
        .unwrap();
    let files = entries(&out.into_inner());
    let pages = source
        .notebook()
        .list_pages(&u, None, None, 100)
        .await
        .unwrap();
    assert_eq!(report.pages, pages.len() as u64);
    for p in &pages {
        let base = format!("pages/{}_{}", p.date, p.page_id);
        let md = String::from_utf8(files[&format!("{base}.md")].clone()).unwrap();
        assert!(md.starts_with(&format!(
            "---\ndate: {}\npage_id: {}\n---\n",
            p.date, p.page_id
        )));
        let view = source.notebook().get_page(&u, &p.page_id).await.unwrap();
        if view.png_url.is_some() {
            assert!(files.contains_key(&format!("{base}.png")));
            assert!(md.contains(&format!("]({}_{}.png)", p.date, p.page_id)));
        }
        for line in view.lines.iter().filter(|l| l.notation == Notation::Task) {
            let mark = match line.status {
                Some(PageStatus::Done) => "x",
                Some(PageStatus::Cancelled) => "-",
                Some(PageStatus::Migrated) => ">",
                _ => " ",
            };
            assert!(md.contains(&format!("- [{mark}] {}\n", line.text)), "{md}");
        }
    }
    let cancelled = files
        .values()
        .any(|b| String::from_utf8_lossy(b).contains("- [-] Send the bundle test"));
    assert!(cancelled, "the reconciled status, not the page's own box");
}

/// Both back ends: a notebook on the AWS emulator exports, and its bundle imports into
/// another table and bucket with the same reads.
#[tokio::test]
async fn the_round_trip_works_on_the_aws_back_end() {
    let emulator = Emulator::shared().await.unwrap_or_else(|e| panic!("{e}"));
    let source = Services::open_aws(emulator.fresh().await.unwrap())
        .await
        .unwrap();
    let target = Services::open_aws(emulator.fresh_with_own_key().await.unwrap())
        .await
        .unwrap();
    fill_with_sample(&source).await;
    target.ensure_user(&user()).await.unwrap();
    round_trip(source.notebook(), target.notebook(), SAMPLE_TERMS).await;
}
