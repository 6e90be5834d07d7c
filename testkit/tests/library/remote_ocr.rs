//! `nib::adapters::remote_ocr` (the providers an operator brings) against their stand-ins
//! (`nib_testkit::openai_standin`, `nib_testkit::vision_standin`): what each request carries
//! (key, model, image, feature), the answers read into lines, retries on 429 and 5xx, a
//! bounded number of tries, timeouts, and errors that never carry the provider's body.

use std::time::Duration;

use nib::adapters::remote_ocr::google_vision::GoogleVisionOcr;
use nib::adapters::remote_ocr::openai::OpenAiOcr;
use nib::config::{GoogleVisionConfig, OpenAiOcrConfig, RemoteCallPolicy, Secret};
use nib::ocr::{Kind, raster};
use nib::ports::{Ocr, OcrError, PageImage};
use nib_testkit::openai_standin::{FAULT_BODY_MARKER, OpenAiStandin};
use nib_testkit::textract_standin::TruthPage;
use nib_testkit::vision_standin::VisionStandin;

const MODEL: &str = "qwen2.5vl:7b";
const KEY: &str = "sk-standin-key";

/// Short pauses between tries (the number of tries is what is tested, not their timing).
fn policy(attempts: u32) -> RemoteCallPolicy {
    RemoteCallPolicy {
        timeout: Duration::from_secs(30),
        attempts,
        backoff: Duration::from_millis(1),
    }
}

fn openai(standin: &OpenAiStandin, policy: RemoteCallPolicy) -> OpenAiOcr {
    OpenAiOcr::new(&OpenAiOcrConfig {
        base_url: standin.base_url().into(),
        model: MODEL.into(),
        api_key: Some(Secret::new(KEY)),
        policy,
    })
}

fn vision(standin: &VisionStandin, policy: RemoteCallPolicy) -> GoogleVisionOcr {
    GoogleVisionOcr::new(&GoogleVisionConfig {
        base_url: standin.base_url().into(),
        api_key: Secret::new(KEY),
        policy,
    })
}

fn page(width: u32, height: u32) -> PageImage {
    PageImage {
        width,
        height,
        gray: vec![240; (width * height) as usize],
    }
}

/// The error with its sources, as a log line would show it.
fn shown(e: &OcrError) -> String {
    nib::telemetry::chain(e)
}

#[tokio::test]
async fn openai_sends_the_page_and_its_markdown_becomes_tasks() {
    let standin = OpenAiStandin::start(MODEL, Some(KEY)).await.unwrap();
    standin
        .reply("```markdown\n# Friday\n- [ ] call the bank\n- [x] buy milk\n- notes\nsee you\n```");
    let ocr = openai(&standin, policy(1));
    let read = nib::ocr::read(&ocr, &page(300, 200)).await.unwrap();
    assert_eq!(read.engine.name, "openai-compatible");
    assert_eq!(read.engine.version, MODEL);
    assert_eq!(
        read.markdown(),
        "# Friday\n- [ ] call the bank\n- [x] buy milk\n- notes\nsee you"
    );
    assert_eq!(read.lines[1].kind, Kind::Task { done: false });
    assert_eq!(read.lines[2].kind, Kind::Task { done: true });
    let seen = standin.requests();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        seen[0].authorization.as_deref(),
        Some("Bearer sk-standin-key")
    );
    assert_eq!(seen[0].model, MODEL);
    assert_eq!(seen[0].image_size, Some((300, 200)));
    assert!(seen[0].prompt.contains("- [ ] "), "{}", seen[0].prompt);
}

#[tokio::test]
async fn openai_is_tried_again_after_429_and_5xx() {
    let standin = OpenAiStandin::start(MODEL, Some(KEY)).await.unwrap();
    standin.reply("- [ ] retried");
    standin.fail_next(&[429, 503]);
    let read = nib::ocr::read(&openai(&standin, policy(3)), &page(50, 40))
        .await
        .unwrap();
    assert_eq!(read.markdown(), "- [ ] retried");
    assert_eq!(standin.requests().len(), 3);
}

#[tokio::test]
async fn openai_gives_up_after_its_attempts_without_the_body() {
    let standin = OpenAiStandin::start(MODEL, Some(KEY)).await.unwrap();
    standin.reply("- [ ] never seen");
    standin.fail_next(&[500, 500, 500, 500]);
    let err = openai(&standin, policy(3))
        .recognize(&page(50, 40))
        .await
        .unwrap_err();
    assert!(matches!(err, OcrError::Failed(_)), "{err:?}");
    let text = shown(&err);
    assert!(
        text.contains("HTTP 500") && text.contains("3 attempt"),
        "{text}"
    );
    assert!(!text.contains(FAULT_BODY_MARKER), "{text}");
    assert_eq!(standin.requests().len(), 3);
}

#[tokio::test]
async fn openai_refusals_are_not_retried_and_a_wrong_key_is_a_setting_to_fix() {
    let standin = OpenAiStandin::start(MODEL, Some(KEY)).await.unwrap();
    let wrong = OpenAiOcr::new(&OpenAiOcrConfig {
        base_url: standin.base_url().into(),
        model: MODEL.into(),
        api_key: Some(Secret::new("sk-wrong")),
        policy: policy(3),
    });
    let err = wrong.recognize(&page(50, 40)).await.unwrap_err();
    assert!(
        matches!(&err, OcrError::Unavailable(why) if why.contains("HTTP 401")),
        "{err:?}"
    );
    assert!(!shown(&err).contains("sk-wrong"));
    standin.fail_next(&[400]);
    let err = openai(&standin, policy(3))
        .recognize(&page(50, 40))
        .await
        .unwrap_err();
    assert!(shown(&err).contains("HTTP 400"), "{}", shown(&err));
    // One try each: neither a 401 nor a 400 can pass by trying again.
    assert_eq!(standin.requests().len(), 2);
}

#[tokio::test]
async fn openai_times_out() {
    let standin = OpenAiStandin::start(MODEL, Some(KEY)).await.unwrap();
    standin.hang_next(1);
    let ocr = openai(
        &standin,
        RemoteCallPolicy {
            timeout: Duration::from_millis(300),
            ..policy(1)
        },
    );
    let err = ocr.recognize(&page(50, 40)).await.unwrap_err();
    assert!(matches!(err, OcrError::Failed(_)), "{err:?}");
    assert!(shown(&err).contains("timed out"), "{}", shown(&err));
}

#[tokio::test]
async fn vision_lines_go_through_the_layout_and_checkboxes_come_from_the_pixels() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/data/ocr");
    let image = raster::decode(&std::fs::read(format!("{dir}/2025-03-15.png")).unwrap())
        .unwrap()
        .remove(0);
    let truth_json = std::fs::read_to_string(format!("{dir}/2025-03-15.truth.json")).unwrap();
    let truth = TruthPage::parse(&truth_json).unwrap().remove(0);
    let kinds: serde_json::Value = serde_json::from_str(&truth_json).unwrap();
    let kinds = kinds["lines"].as_array().unwrap();
    let standin = VisionStandin::start(KEY).await.unwrap();
    // Vision's scale is 0..1; the truth's lines come at Textract's 0-100.
    let lines: Vec<_> = truth
        .lines_for(&image)
        .into_iter()
        .map(|mut l| {
            l.confidence = 0.97;
            l
        })
        .collect();
    standin.reply(lines);
    let ocr = vision(&standin, policy(1));
    let read = nib::ocr::read(&ocr, &image).await.unwrap();
    assert_eq!(read.engine.name, "google-cloud-vision");
    assert_eq!(read.lines.len(), kinds.len(), "{:#?}", read.lines);
    let mut statuses = Vec::new();
    for t in kinds.iter().filter(|t| t["kind"] == "task") {
        let text = t["text"].as_str().unwrap();
        let line = read.lines.iter().find(|l| l.text == text).unwrap();
        if let Kind::Task { done } = line.kind {
            assert_eq!(done, t["status"] == "done", "{text:?}");
            statuses.push(done);
        }
    }
    assert!(
        statuses.contains(&true) && statuses.contains(&false),
        "{statuses:?}"
    );
    assert!((read.lines[0].confidence - 0.97).abs() < 1e-4);
    let seen = standin.requests();
    assert_eq!(seen.len(), 1);
    // The key goes in the header, never in the URL.
    assert_eq!(seen[0].key_header.as_deref(), Some(KEY));
    assert_eq!(seen[0].key_query, None);
    assert_eq!(seen[0].feature, "DOCUMENT_TEXT_DETECTION");
    assert_eq!(seen[0].image_size, Some((image.width, image.height)));
}

#[tokio::test]
async fn vision_is_tried_again_then_gives_up_without_the_body() {
    let standin = VisionStandin::start(KEY).await.unwrap();
    standin.fail_next(&[429]);
    let lines = vision(&standin, policy(2))
        .recognize(&page(50, 40))
        .await
        .unwrap();
    assert!(lines.is_empty());
    assert_eq!(standin.requests().len(), 2);

    standin.fail_next(&[500, 502, 503]);
    let err = vision(&standin, policy(2))
        .recognize(&page(50, 40))
        .await
        .unwrap_err();
    assert!(matches!(err, OcrError::Failed(_)), "{err:?}");
    let text = shown(&err);
    assert!(
        text.contains("HTTP 502") && text.contains("2 attempt"),
        "{text}"
    );
    assert!(!text.contains(FAULT_BODY_MARKER), "{text}");
    assert_eq!(standin.requests().len(), 4);

    // An error inside a 200: the page is not read; only the code is kept.
    standin.refuse_next(1);
    let err = vision(&standin, policy(2))
        .recognize(&page(50, 40))
        .await
        .unwrap_err();
    assert!(shown(&err).contains("error code 3"), "{}", shown(&err));
    assert!(!shown(&err).contains(FAULT_BODY_MARKER));

    // A wrong key: a setting to fix, said without the key.
    let wrong = GoogleVisionOcr::new(&GoogleVisionConfig {
        base_url: standin.base_url().into(),
        api_key: Secret::new("AIza-wrong"),
        policy: policy(2),
    });
    let err = wrong.recognize(&page(50, 40)).await.unwrap_err();
    assert!(
        matches!(&err, OcrError::Unavailable(why) if why.contains("HTTP 403")),
        "{err:?}"
    );
    assert!(!shown(&err).contains("AIza-wrong"));
}

#[tokio::test]
async fn vision_times_out() {
    let standin = VisionStandin::start(KEY).await.unwrap();
    standin.hang_next(1);
    let ocr = vision(
        &standin,
        RemoteCallPolicy {
            timeout: Duration::from_millis(300),
            ..policy(1)
        },
    );
    let err = ocr.recognize(&page(50, 40)).await.unwrap_err();
    assert!(matches!(err, OcrError::Failed(_)), "{err:?}");
    assert!(shown(&err).contains("timed out"), "{}", shown(&err));
}

#[tokio::test]
async fn a_retry_after_is_followed_and_one_past_the_cap_gives_the_page_up() {
    let standin = OpenAiStandin::start(MODEL, Some(KEY)).await.unwrap();
    standin.reply("- [ ] after the pause");
    // `Retry-After: 0`: tried again at once, however long the backoff would be.
    standin.fail_next_retry_after(429, 0);
    let slow_backoff = RemoteCallPolicy {
        backoff: Duration::from_secs(3600),
        ..policy(2)
    };
    let read = nib::ocr::read(&openai(&standin, slow_backoff), &page(50, 40))
        .await
        .unwrap();
    assert_eq!(read.markdown(), "- [ ] after the pause");
    assert_eq!(standin.requests().len(), 2);
    // A wait past `MAX_RETRY_AFTER`: the page is given up now, its other tries unused.
    standin.fail_next_retry_after(503, nib::config::MAX_RETRY_AFTER.as_secs() + 1);
    let err = openai(&standin, policy(4))
        .recognize(&page(50, 40))
        .await
        .unwrap_err();
    assert!(
        shown(&err).contains("HTTP 503 after 1 attempt"),
        "{}",
        shown(&err)
    );
    assert_eq!(standin.requests().len(), 3);
}

/// A notebook on a fresh data directory whose engine is `engine`.
fn notebook_with(
    dir: &std::path::Path,
    engine: std::sync::Arc<dyn Ocr>,
) -> nib::notebook::Notebook {
    let app =
        nib::services::Services::open_local(dir, nib::services::LocalOptions::default()).unwrap();
    nib::notebook::Notebook::new(
        app.store.clone(),
        app.vault().clone(),
        app.assets.clone(),
        std::sync::Arc::new(nib::ports::SystemClock),
        app.notebook().config().clone(),
    )
    .with_ocr(engine)
}

/// The ink-only page `stem` of `tests/data/ocr`, imported as `nib import` imports it.
async fn import_ink(
    notebook: &nib::notebook::Notebook,
    user: &nib::domain::UserId,
    stem: &str,
) -> nib::domain::PageId {
    let folder = tempfile::tempdir().unwrap();
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/data/ocr");
    std::fs::copy(
        format!("{dir}/{stem}.png"),
        folder.path().join(format!("{stem}.png")),
    )
    .unwrap();
    let (pages, _) = nib::notebook::group_dir(folder.path()).unwrap();
    let saved = notebook
        .import_files_read(user, &pages[0], false)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    saved[0].page_id.clone()
}

/// Through the notebook: 429, then success reads the page; 5xx past every try stores the page
/// unread (its ink kept, no text), logged with its id and the status, never the key nor the
/// provider's body, and `reread_page` (`nib ocr`) reads it later. Logs at trace level of every
/// crate, the HTTP client's included, hold the key nowhere.
#[tokio::test(flavor = "current_thread")]
async fn a_page_the_provider_fails_on_is_stored_unread_and_read_again_later() {
    use nib::telemetry::{CapturedLogs, subscriber};
    let standin = OpenAiStandin::start(MODEL, Some(KEY)).await.unwrap();
    let data = tempfile::tempdir().unwrap();
    let notebook = notebook_with(
        data.path(),
        std::sync::Arc::new(openai(&standin, policy(3))),
    );
    let user = nib::domain::UserId::parse("default").unwrap();
    let logs = CapturedLogs::default();
    let guard = tracing::subscriber::set_default(subscriber(Some("trace"), false, logs.clone()));

    standin.reply("# Monday\n- [ ] call the bank\n- [x] buy milk");
    standin.fail_next(&[429]);
    let read = import_ink(&notebook, &user, "2025-03-17").await;
    let page = notebook.get_page(&user, &read).await.unwrap();
    // The page's text; its marks are its structure (a heading, a task of each status).
    assert_eq!(
        page.ocr_text.as_deref(),
        Some("Monday\ncall the bank\nbuy milk")
    );
    let mut tasks: Vec<(String, nib::domain::TaskStatus)> = notebook
        .list_tasks(&user, nib::notebook::TaskFilter::All, None, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|t| (t.text, t.status))
        .collect();
    tasks.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        tasks,
        [
            ("buy milk".to_owned(), nib::domain::TaskStatus::Done),
            ("call the bank".to_owned(), nib::domain::TaskStatus::Todo),
        ]
    );
    assert_eq!(standin.requests().len(), 2);

    standin.fail_next(&[500, 502, 503]);
    let unread = import_ink(&notebook, &user, "2025-03-15").await;
    assert_eq!(standin.requests().len(), 5);
    let page = notebook.get_page(&user, &unread).await.unwrap();
    assert!(page.has_ink && !page.has_ocr, "{page:?}");
    assert_eq!(page.ocr_text, None);
    drop(guard);
    let text = logs.text();
    let said = text
        .lines()
        .find(|l| l.contains("stored unread"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        said.contains(unread.as_str()) && said.contains("HTTP 503") && said.contains("3 attempt"),
        "{said}"
    );
    assert!(!text.contains(KEY), "the key is in the logs");
    assert!(
        !text.contains(FAULT_BODY_MARKER),
        "the provider's body is in the logs"
    );
    assert!(
        !text.contains("call the bank"),
        "the page's text is in the logs"
    );

    standin.reply("- [ ] pay rent");
    let again = notebook
        .reread_page(&user, &unread, false)
        .await
        .unwrap()
        .expect("the unread page is read");
    assert_eq!(again.page_id, unread);
    let page = notebook.get_page(&user, &unread).await.unwrap();
    assert_eq!(page.ocr_text.as_deref(), Some("pay rent"));
    // The page read before is not read again.
    assert!(
        notebook
            .reread_page(&user, &read, false)
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(standin.requests().len(), 6);
}
