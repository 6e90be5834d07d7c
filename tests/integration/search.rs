//! Search by meaning (issue 15) over both back ends: paraphrases found in hybrid and meaning
//! modes and not by keywords, dates applied inside the ranking, phrases still required,
//! vectors sealed at rest, a trashed page in no mode's results (its vectors leave with it and
//! come back on restore), and `nib reindex`.

use std::path::Path;

use nib::domain::UserId;
use nib::ports::Query;
use serde_json::{Value, json};

use crate::helpers::{Options, TestApp, nib_exe};

macro_rules! search_tests {
    ($options:expr) => {
        $crate::search::search_tests!(@each $options;
            paraphrases_are_found_by_meaning_and_not_by_keywords,
            dates_are_applied_inside_the_ranking,
            quoted_phrases_are_required_in_every_mode,
            modes_are_checked_and_cursors_keep_their_ranking,
            vectors_are_sealed_in_the_store,
            a_trashed_page_is_in_no_mode_and_its_vectors_leave_with_it,
            another_process_sees_writes_made_after_it_opened_the_index,
            nonsense_is_not_found_by_words_and_hits_say_how_they_matched,
        );
    };
    (@each $options:expr; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $name() {
                let app = $crate::helpers::TestApp::spawn_with(Options {
                    import_sample: false,
                    ..$options
                })
                .await;
                import_notes(&app).await;
                $crate::search::$name(&app).await;
            }
        )*
    };
}
pub(crate) use search_tests;

mod local {
    use super::*;
    search_tests!(Options::default());
}

mod aws {
    use super::*;
    search_tests!(Options::aws());
}

/// Notes on near topics (three visits of a kind, money, food, home), one topic each, with
/// two checkups on different dates.
const NOTES: [(&str, &str); 8] = [
    (
        "2026-03-02",
        "## Monday\n- [ ] Checkup with Dr. Alvarez at 10\n- ask about the cough that won't go away\n- bring list of pills",
    ),
    (
        "2026-05-11",
        "## Monday\n- GP at 9, Dr. Chen\n- wheezing and cough since the cold\n- ask if I need an x-ray",
    ),
    (
        "2026-03-04",
        "## Wednesday\n- [ ] Dentist 4:15 with Dr. Okafor\n- molar hurts when chewing\n- floss more",
    ),
    (
        "2026-03-05",
        "## Thursday\n- Vet for Biscuit at 3\n- vaccines due, ask about the limp\n- buy the chew treats",
    ),
    (
        "2026-03-06",
        "## Friday\n- Budget review with Priya\n- rent 1400, groceries 600, transport 120\n- cut subscriptions",
    ),
    (
        "2026-03-07",
        "## Saturday\n- Lasagna recipe\n- ragu: mince, tomatoes, simmer 2h\n- bechamel, layer, bake 40 min at 180",
    ),
    (
        "2026-03-08",
        "## Sunday\n- Plumber coming 8am\n- kitchen sink leaking under the cabinet\n- turn off water valve",
    ),
    (
        "2026-03-09",
        "## Monday\n- Team sync notes: the launch plan and the beta list\n- [ ] Draft the quarterly budget",
    ),
];

async fn import_notes(app: &TestApp) {
    let dir = tempfile::tempdir().unwrap();
    for (date, body) in NOTES {
        std::fs::write(dir.path().join(format!("{date}.md")), body).unwrap();
    }
    let user = UserId::parse("default").unwrap();
    let (pages, _) = nib::notebook::group_dir(dir.path()).unwrap();
    for page in &pages {
        app.app.notebook().import_files(&user, page).await.unwrap();
    }
}

fn dates(r: &Value) -> Vec<&str> {
    r["results"]
        .as_array()
        .unwrap_or_else(|| panic!("no results in {r}"))
        .iter()
        .map(|h| h["date"].as_str().unwrap())
        .collect()
}

pub async fn paraphrases_are_found_by_meaning_and_not_by_keywords(app: &TestApp) {
    // No word in common with either checkup page.
    let query = "the medical visit for my breathing";
    let keyword = app
        .call("search_pages", json!({ "query": query, "mode": "keyword" }))
        .await;
    assert_eq!(keyword["results"], json!([]), "{keyword}");
    for mode in ["meaning", "hybrid"] {
        let r = app
            .call(
                "search_pages",
                json!({ "query": query, "mode": mode, "limit": 3 }),
            )
            .await;
        assert_eq!(r["mode"], mode);
        let top = dates(&r);
        assert!(
            ["2026-03-02", "2026-05-11"].contains(&top[0]),
            "{mode}: {r}"
        );
        assert!(
            top.contains(&"2026-03-02") && top.contains(&"2026-05-11"),
            "{mode}: {r}"
        );
        // The best line is a line of the page; the snippet is cut from the page.
        let hit = &r["results"][0];
        assert!(!hit["line"].as_str().unwrap().is_empty(), "{hit}");
        assert!(!hit["snippet"].as_str().unwrap().is_empty(), "{hit}");
    }
    // The default is hybrid, and the ChatGPT `search` tool ranks the same way.
    let default = app.call("search_pages", json!({ "query": query })).await;
    assert_eq!(default["mode"], "hybrid");
    let chatgpt = app.call("search", json!({ "query": query })).await;
    let first = &chatgpt["results"][0]["id"];
    assert_eq!(first, &default["results"][0]["page_id"], "{chatgpt}");
    // Keywords still find what they found: the budget pages, the review first.
    let words = app
        .call("search_pages", json!({ "query": "budget review" }))
        .await;
    assert_eq!(dates(&words)[0], "2026-03-06", "{words}");
}

/// Everyday lines, for day pages about nothing in particular (a notebook of 30 of them and
/// `NOTES`: enough pages for the floor of meaning to have a background).
const FILLER: [&str; 12] = [
    "- [ ] call mom",
    "- [ ] buy milk and eggs",
    "- [x] pay electricity bill",
    "water the plants",
    "- [ ] reply to emails",
    "laundry",
    "- [ ] take out recycling",
    "- [ ] charge headphones",
    "walk 30 min",
    "coffee with Tom",
    "- [ ] sort the mail",
    "weather: rainy all day",
];

pub async fn nonsense_is_not_found_by_words_and_hits_say_how_they_matched(app: &TestApp) {
    let user = UserId::parse("default").unwrap();
    let dir = tempfile::tempdir().unwrap();
    for day in 1..=30usize {
        let lines: Vec<&str> = (0..4).map(|i| FILLER[(day * 5 + i * 7) % 12]).collect();
        let body = format!("## Day\n{}", lines.join("\n"));
        std::fs::write(dir.path().join(format!("2026-01-{day:02}.md")), body).unwrap();
    }
    let (pages, _) = nib::notebook::group_dir(dir.path()).unwrap();
    for page in &pages {
        app.app.notebook().import_files(&user, page).await.unwrap();
    }
    // A paraphrase still finds its pages, by meaning, with a cosine for a score.
    let r = app
        .call(
            "search_pages",
            json!({ "query": "the medical visit for my breathing", "limit": 3 }),
        )
        .await;
    let top = dates(&r);
    assert!(["2026-03-02", "2026-05-11"].contains(&top[0]), "{r}");
    let hit = &r["results"][0];
    assert_eq!(hit["match"], "meaning", "{hit}");
    let score = hit["score"].as_f64().unwrap();
    assert!(score > 0.0 && score <= 1.0, "{hit}");
    // Letter strings and rare words in no page find nothing in any mode (before issue 48:
    // five pages by meaning alone, unmarked): the model knows none of their words whole.
    for query in ["zyzzyva quokkaplex", "asdfgh qwerty", "prothorax wizvoq"] {
        for mode in ["keyword", "hybrid", "meaning"] {
            let r = app
                .call("search_pages", json!({ "query": query, "mode": mode }))
                .await;
            assert_eq!(r["results"], json!([]), "{query} {mode}: {r}");
        }
    }
    // A topic in no page, in words the model knows: what meaning finds says so and scores
    // below a real paraphrase.
    for mode in ["hybrid", "meaning"] {
        let query = "stargazing through a telescope";
        let r = app
            .call("search_pages", json!({ "query": query, "mode": mode }))
            .await;
        for h in r["results"].as_array().unwrap() {
            assert_eq!(h["match"], "meaning", "{query} {mode}: {r}");
            assert!(h["score"].as_f64().unwrap() < score, "{query} {mode}: {r}");
        }
    }
    // A page holding the query's words matches by them, with its meaning too here.
    let r = app
        .call("search_pages", json!({ "query": "budget review" }))
        .await;
    let hit = &r["results"][0];
    assert_eq!(hit["date"], "2026-03-06", "{r}");
    assert_eq!(hit["match"], "both", "{hit}");
    assert!(hit["score"].as_f64().unwrap() > score.min(0.2), "{hit}");
    // Keywords alone: words, scored by BM25.
    let r = app
        .call(
            "search_pages",
            json!({ "query": "budget review", "mode": "keyword" }),
        )
        .await;
    assert!(
        r["results"]
            .as_array()
            .unwrap()
            .iter()
            .all(|h| h["match"] == "words" && h["score"].as_f64().unwrap() > 0.0),
        "{r}"
    );
}

pub async fn dates_are_applied_inside_the_ranking(app: &TestApp) {
    let query = "the medical visit for my breathing";
    // The later checkup ranks first or second overall; limited to one result and to March, the
    // search still returns the March one (the range is applied before the cut, not after).
    for mode in ["meaning", "hybrid", "keyword"] {
        let q = if mode == "keyword" { "cough" } else { query };
        let r = app
            .call(
                "search_pages",
                json!({ "query": q, "mode": mode, "limit": 1, "from": "2026-03-01", "to": "2026-03-31" }),
            )
            .await;
        assert_eq!(dates(&r), ["2026-03-02"], "{mode}: {r}");
        let r = app
            .call(
                "search_pages",
                json!({ "query": q, "mode": mode, "limit": 1, "from": "2026-05-01" }),
            )
            .await;
        assert_eq!(dates(&r), ["2026-05-11"], "{mode}: {r}");
    }
    let none = app
        .call(
            "search_pages",
            json!({ "query": query, "from": "2027-01-01" }),
        )
        .await;
    assert_eq!(none["results"], json!([]));
    let err = app
        .call_error(
            "search_pages",
            json!({ "query": query, "from": "2026-04-01", "to": "2026-03-01" }),
        )
        .await;
    assert!(err.contains("'from'"), "{err}");
}

pub async fn quoted_phrases_are_required_in_every_mode(app: &TestApp) {
    for mode in ["hybrid", "meaning", "keyword"] {
        let r = app
            .call(
                "search_pages",
                json!({ "query": "\"kitchen sink\" water", "mode": mode }),
            )
            .await;
        assert_eq!(dates(&r), ["2026-03-08"], "{mode}: {r}");
        // The words are all on that page, but not as this phrase.
        let r = app
            .call(
                "search_pages",
                json!({ "query": "\"sink kitchen\"", "mode": mode }),
            )
            .await;
        assert_eq!(r["results"], json!([]), "{mode}: {r}");
    }
}

pub async fn modes_are_checked_and_cursors_keep_their_ranking(app: &TestApp) {
    let err = app
        .call_error("search_pages", json!({ "query": "cough", "mode": "fuzzy" }))
        .await;
    assert!(err.contains("'mode'") && err.contains("hybrid"), "{err}");
    let first = app
        .call(
            "search_pages",
            json!({ "query": "the medical visit for my breathing", "mode": "meaning", "limit": 1 }),
        )
        .await;
    let cursor = first["next_cursor"]
        .as_str()
        .expect("more follow")
        .to_owned();
    let next = app
        .call(
            "search_pages",
            json!({ "query": "the medical visit for my breathing", "mode": "meaning", "limit": 1, "cursor": cursor }),
        )
        .await;
    assert_ne!(
        next["results"][0]["page_id"],
        first["results"][0]["page_id"]
    );
    // The same cursor in another mode is another ranking: refused.
    let err = app
        .call_error(
            "search_pages",
            json!({ "query": "the medical visit for my breathing", "mode": "keyword", "cursor": cursor }),
        )
        .await;
    assert!(err.contains("'cursor'"), "{err}");
}

/// Every run of 16 bytes of each chunk vector of the page of `date`, as its block holds them
/// (computed here from the page's lines, as the page write computes them).
async fn vector_windows(app: &TestApp, date: &str) -> Vec<Vec<u8>> {
    let id = app.page_of(date).await;
    let page = app.call("get_page", json!({ "page_id": id })).await;
    let text: Vec<&str> = page["structure_json"]["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["text"].as_str().unwrap())
        .collect();
    let model = nib::embed::model().unwrap();
    let mut out = Vec::new();
    for chunk in nib::embed::chunks(&text.join("\n")) {
        let v: Vec<u8> = nib::embed::quantize(&model.embed(&chunk).unwrap())
            .into_iter()
            .map(|x| x as u8)
            .collect();
        out.extend(v.chunks(16).map(<[u8]>::to_vec));
    }
    out
}

fn holds_any(bytes: &[u8], needles: &[Vec<u8>]) -> bool {
    needles
        .iter()
        .any(|n| bytes.windows(n.len()).any(|w| w == n.as_slice()))
}

fn files_under(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(files_under(&path));
        } else {
            out.push(path);
        }
    }
    out
}

pub async fn vectors_are_sealed_in_the_store(app: &TestApp) {
    let needles = vector_windows(app, "2026-03-02").await;
    assert!(!needles.is_empty());
    // The blocks are there, a handful for the notebook, with the model's id in clear...
    let blocks = app
        .app
        .store
        .query(&Query::table("U#default", "VEC#"))
        .await
        .unwrap()
        .items;
    assert!(
        !blocks.is_empty() && blocks.len() <= NOTES.len(),
        "{}",
        blocks.len()
    );
    let model = nib::embed::model().unwrap().id().to_owned();
    let mut all = Vec::new();
    for item in &blocks {
        assert!(holds_any(&item.body, &[model.clone().into_bytes()]));
        all.extend_from_slice(&item.body);
    }
    // ...and no vector: the same bytes computed here are in no block body, no file of the
    // data directory (local), no item of the table (AWS: the store reads the table's bytes).
    assert!(
        !holds_any(&all, &needles),
        "a vector is in clear in a block"
    );
    if let Some(dir) = app.app.data_dir() {
        for file in files_under(dir) {
            let bytes = std::fs::read(&file).unwrap();
            assert!(
                !holds_any(&bytes, &needles),
                "a vector in clear in {}",
                file.display()
            );
        }
    }
    // The test's own vectors are the page's: search by meaning finds it through them.
    let r = app
        .call(
            "search_pages",
            json!({ "query": "the medical visit for my breathing", "mode": "meaning", "limit": 2 }),
        )
        .await;
    assert!(dates(&r).contains(&"2026-03-02"), "{r}");
}

/// The page ids of each mode's hits and of the ChatGPT `search` tool, for `query`.
async fn every_mode(app: &TestApp, query: &str) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for mode in ["keyword", "meaning", "hybrid"] {
        let r = app
            .call(
                "search_pages",
                json!({ "query": query, "mode": mode, "limit": 8 }),
            )
            .await;
        out.push((mode.to_owned(), r["results"].clone()));
    }
    let r = app.call("search", json!({ "query": query })).await;
    out.push(("search".to_owned(), r["results"].clone()));
    out
}

/// The byte length of every vector block, by key.
async fn block_sizes(app: &TestApp) -> Vec<(String, usize)> {
    app.app
        .store
        .query(&Query::table("U#default", "VEC#"))
        .await
        .unwrap()
        .items
        .iter()
        .map(|i| (i.sk.clone(), i.body.len()))
        .collect()
}

pub async fn a_trashed_page_is_in_no_mode_and_its_vectors_leave_with_it(app: &TestApp) {
    // Found by meaning alone: no word in common with the checkup page.
    let query = "the medical visit for my breathing";
    let checkup = app.page_of("2026-03-02").await;
    let before = every_mode(app, query).await;
    assert_eq!(before[0].1, json!([]), "keyword: {:?}", before[0]);
    for (mode, hits) in &before[1..] {
        let ids: Vec<&str> = hits
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["page_id"].as_str().or(h["id"].as_str()).unwrap())
            .collect();
        assert!(ids.contains(&checkup.as_str()), "{mode}: {hits}");
    }
    let sizes = block_sizes(app).await;

    app.call("delete_page", json!({ "page_id": checkup })).await;
    for (mode, hits) in every_mode(app, query).await {
        assert!(!hits.to_string().contains(&checkup), "{mode}: {hits}");
    }
    // Its entry left its block in the delete's transaction: one block is shorter by at least
    // a chunk's vector, the others are unchanged (nothing of the page is left to purge).
    let trashed = block_sizes(app).await;
    let shrunk: Vec<_> = sizes.iter().zip(&trashed).filter(|(a, b)| a != b).collect();
    assert_eq!(shrunk.len(), 1, "{sizes:?} -> {trashed:?}");
    let ((sk, was), (sk2, now)) = shrunk[0];
    assert_eq!(sk, sk2);
    assert!(
        *now + nib::embed::model().unwrap().dims() <= *was,
        "{sk}: {was} -> {now}"
    );

    // Restored: the same answers in every mode, the block its old size again.
    app.call("restore_page", json!({ "page_id": checkup }))
        .await;
    assert_eq!(every_mode(app, query).await, before);
    assert_eq!(block_sizes(app).await, sizes);
}

/// A second process over the same store (another Lambda container) keeps its own open index:
/// writes made through the server after it searched are in its next answers (the notebook's
/// revision changed), in every mode.
pub async fn another_process_sees_writes_made_after_it_opened_the_index(app: &TestApp) {
    let a = &app.app;
    let other = nib::notebook::Notebook::new(
        a.store.clone(),
        a.vault().clone(),
        a.assets.clone(),
        a.clock.clone(),
        a.notebook().config().clone(),
    );
    let user = UserId::parse("default").unwrap();
    let query = "soldering the broken kettle";
    let search = |mode: &'static str| {
        let opts = nib::notebook::SearchOptions {
            mode: nib::notebook::SearchMode::parse(mode).unwrap(),
            ..Default::default()
        };
        let (other, user) = (&other, &user);
        async move {
            let (hits, _) = other.search_with(user, query, &opts, 0, 10).await.unwrap();
            hits.into_iter()
                .map(|h| h.date.to_string())
                .collect::<Vec<_>>()
        }
    };
    for mode in ["hybrid", "meaning", "keyword"] {
        assert!(
            !search(mode).await.contains(&"2026-08-08".to_owned()),
            "{mode}"
        );
    }
    app.call(
        "create_task",
        json!({ "target_date": "2026-08-08", "text": "Soldering iron for the broken kettle" }),
    )
    .await;
    for mode in ["hybrid", "meaning", "keyword"] {
        assert_eq!(
            search(mode).await.first().map(String::as_str),
            Some("2026-08-08"),
            "{mode}"
        );
    }
    let page = app.page_of("2026-08-08").await;
    app.call("delete_page", json!({ "page_id": page })).await;
    for mode in ["hybrid", "meaning", "keyword"] {
        assert!(
            !search(mode).await.contains(&"2026-08-08".to_owned()),
            "{mode}"
        );
    }
}

/// `nib reindex` through the binary: on a notebook whose vectors are current it reads every
/// page and writes nothing (the block rewrite itself is tested in `notebook::vectors`).
#[test]
fn nib_reindex_reads_every_page_and_leaves_current_blocks_alone() {
    let data = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    for (date, body) in &NOTES[..3] {
        std::fs::write(dir.path().join(format!("{date}.md")), body).unwrap();
    }
    let nib = |args: &[&str]| {
        let out = std::process::Command::new(nib_exe())
            .arg("--data-dir")
            .arg(data.path())
            .args(args)
            .env("NIB_OCR", "off")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    nib(&["import", dir.path().to_str().unwrap()]);
    let out = nib(&["reindex"]);
    let model = nib::embed::model().unwrap().id().to_owned();
    assert!(
        out.contains("reindexed default: 3 pages, 0 embedded again, 0 vector blocks written")
            && out.contains(&model),
        "{out}"
    );
}
