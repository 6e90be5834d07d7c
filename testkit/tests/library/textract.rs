//! `nib::adapters::aws::textract` (`TextractOcr`) against the Textract stand-in
//! (`nib_testkit::textract_standin`): lines, boxes and confidences, retries and the mapping of
//! Textract's errors, limits checked before sending, its own endpoint beside the emulator, and
//! the layout reading checkboxes through it.

use nib::adapters::aws::AwsClients;
use nib::adapters::aws::textract::{MAX_DOCUMENT_BYTES, MAX_SIDE};
use nib::config::{AwsConfig, Secret, StaticCredentials};
use nib::ocr::{Kind, raster};
use nib::ports::{Ocr, OcrBox, OcrEngine, OcrError, OcrLine, PageImage};
use nib_testkit::emulator::Emulator;
use nib_testkit::textract_standin::{Fault, StandinLine, TextractStandin, TruthPage, sha256_hex};

const SERVICE: &str = "Textract";
const OPERATION: &str = "DetectDocumentText";

/// Clients whose Textract is `standin` (nothing else is called).
async fn clients(standin: &TextractStandin) -> AwsClients {
    let vars = [
        ("NIB_TABLE", "unused"),
        ("NIB_BUCKET", "unused"),
        ("NIB_KMS_KEY_ID", "unused"),
        ("AWS_REGION", "us-east-1"),
        ("AWS_ENDPOINT_URL_TEXTRACT", standin.endpoint()),
    ];
    let mut config = AwsConfig::from_lookup(|name| {
        vars.iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.to_string())
    })
    .unwrap();
    config.credentials = Some(StaticCredentials {
        access_key_id: "testing".into(),
        secret_access_key: Secret::new("testing"),
    });
    AwsClients::connect(&config).await
}

/// A page with some texture (so its PNG is not trivially small).
fn page(width: u32, height: u32) -> PageImage {
    let gray = (0..width * height)
        .map(|i| (200 + (i % width + i / width) % 56) as u8)
        .collect();
    PageImage {
        width,
        height,
        gray,
    }
}

fn px(x: f32, y: f32, w: f32, h: f32) -> OcrBox {
    OcrBox { x, y, w, h }
}

fn assert_close(got: &OcrBox, want: &OcrBox) {
    for (g, w) in [
        (got.x, want.x),
        (got.y, want.y),
        (got.w, want.w),
        (got.h, want.h),
    ] {
        assert!((g - w).abs() < 0.01, "{got:?} is not {want:?}");
    }
}

#[tokio::test]
async fn lines_come_back_with_their_text_confidence_and_pixel_boxes() {
    let standin = TextractStandin::start().await.unwrap();
    let clients = clients(&standin).await;
    let ocr = clients.ocr();
    assert_eq!(
        ocr.engine(),
        OcrEngine {
            name: "amazon-textract".into(),
            version: "DetectDocumentText".into()
        }
    );
    // Wider than tall: a box scaled by the wrong side of the page would not come back.
    let image = page(1000, 500);
    let boxes = [px(100.0, 50.0, 400.0, 40.0), px(120.0, 300.0, 700.0, 60.0)];
    standin.answer_page(
        &image,
        vec![
            StandinLine::new("Shopping list", 98.5, boxes[0]),
            StandinLine::new("Call back Oskar", 61.0, boxes[1]),
        ],
    );
    let lines = ocr.recognize(&image).await.unwrap();
    // LINE blocks only: the PAGE and the five WORD blocks are not lines.
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(lines[0].text, "Shopping list");
    assert!((lines[0].confidence - 0.985).abs() < 1e-4);
    assert_close(&lines[0].bbox, &boxes[0]);
    assert_eq!(lines[1].text, "Call back Oskar");
    assert!((lines[1].confidence - 0.61).abs() < 1e-4);
    assert_close(&lines[1].bbox, &boxes[1]);

    // What went on the wire: one signed JSON 1.1 call carrying the page as its PNG.
    let seen = standin.requests();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].target, "Textract.DetectDocumentText");
    assert_eq!(seen[0].content_type, "application/x-amz-json-1.1");
    assert_eq!(seen[0].signed_for.as_deref(), Some("textract"));
    assert_eq!(seen[0].image_size, Some((1000, 500)));
    assert_eq!(
        seen[0].document_sha256.as_deref(),
        Some(sha256_hex(&raster::to_png(&image)).as_str())
    );
    let back = raster::decode(&raster::to_png(&image)).unwrap();
    assert_eq!(back[0].gray, image.gray);
    assert_eq!(clients.calls.count(SERVICE, OPERATION), 1);

    // A page Textract finds no text on.
    assert_eq!(ocr.recognize(&page(640, 480)).await.unwrap(), vec![]);
    assert_eq!(clients.calls.count(SERVICE, OPERATION), 2);
}

#[tokio::test]
async fn boxes_are_clamped_to_the_page() {
    let standin = TextractStandin::start().await.unwrap();
    let clients = clients(&standin).await;
    let image = page(400, 300);
    // Past the left and bottom edges, as Textract's boxes sometimes are by a hair.
    standin.answer_page(
        &image,
        vec![StandinLine::new("edge", 90.0, px(-8.0, 280.0, 108.0, 40.0))],
    );
    let lines = clients.ocr().recognize(&image).await.unwrap();
    assert_close(&lines[0].bbox, &px(0.0, 280.0, 100.0, 20.0));
}

#[tokio::test]
async fn throttling_and_server_errors_are_retried_then_fail() {
    let standin = TextractStandin::start().await.unwrap();
    let clients = clients(&standin).await;
    let ocr = clients.ocr();
    let image = page(300, 200);
    standin.answer_page(
        &image,
        vec![StandinLine::new(
            "after all",
            95.0,
            px(10.0, 10.0, 200.0, 30.0),
        )],
    );

    // Throttled twice: the SDK's third attempt reads the page.
    standin.fail_next(2, Fault::throttling());
    let lines = ocr.recognize(&image).await.unwrap();
    assert_eq!(lines[0].text, "after all");
    assert_eq!(clients.calls.count(SERVICE, OPERATION), 3);

    for (fault, code) in [
        (Fault::server_error(), "InternalServerError"),
        (
            Fault::throughput_exceeded(),
            "ProvisionedThroughputExceededException",
        ),
        (Fault::throttling(), "ThrottlingException"),
    ] {
        standin.heal();
        standin.fail_always(fault);
        let before = clients.calls.snapshot();
        let err = ocr.recognize(&image).await.unwrap_err();
        assert!(matches!(err, OcrError::Failed(_)), "{code}: {err:?}");
        // The log line (the cause chain) says what Textract answered.
        let chain = nib::telemetry::chain(&err);
        assert!(chain.contains(code), "{chain}");
        // Three attempts, the standard retry's, then it gives up.
        let sent = clients.calls.since(&before);
        assert_eq!(
            sent.get(&(SERVICE.to_owned(), OPERATION.to_owned())),
            Some(&3),
            "{code}"
        );
    }
}

#[tokio::test]
async fn documents_textract_refuses_are_bad_images_and_not_retried() {
    let standin = TextractStandin::start().await.unwrap();
    let clients = clients(&standin).await;
    let ocr = clients.ocr();
    let image = page(300, 200);
    let faults = [
        Fault::invalid_parameter(),
        Fault::bad_document(),
        Fault::new(
            400,
            "UnsupportedDocumentException",
            "Request has unsupported document format",
        ),
        Fault::new(
            400,
            "DocumentTooLargeException",
            "Document size exceeds the limit",
        ),
    ];
    for (n, fault) in faults.into_iter().enumerate() {
        let code = fault.code.clone();
        standin.fail_next(1, fault);
        match ocr.recognize(&image).await {
            Err(OcrError::BadImage(why)) => assert!(why.contains(&code), "{why}"),
            other => panic!("{code}: {other:?}"),
        }
        assert_eq!(clients.calls.count(SERVICE, OPERATION), n as u64 + 1);
    }
}

#[tokio::test]
async fn access_denied_means_textract_is_unavailable_here() {
    let standin = TextractStandin::start().await.unwrap();
    let clients = clients(&standin).await;
    standin.fail_next(1, Fault::access_denied());
    match clients.ocr().recognize(&page(300, 200)).await {
        Err(OcrError::Unavailable(why)) => {
            assert!(why.contains("AccessDeniedException"), "{why}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(clients.calls.count(SERVICE, OPERATION), 1);
}

#[tokio::test]
async fn an_unreachable_textract_fails_after_the_retries() {
    let standin = TextractStandin::start().await.unwrap();
    let clients = clients(&standin).await;
    drop(standin);
    let err = clients.ocr().recognize(&page(300, 200)).await.unwrap_err();
    assert!(matches!(err, OcrError::Failed(_)), "{err:?}");
    assert_eq!(clients.calls.count(SERVICE, OPERATION), 3);
}

#[tokio::test]
async fn pages_over_textracts_limits_are_refused_before_sending() {
    let standin = TextractStandin::start().await.unwrap();
    let clients = clients(&standin).await;
    let ocr = clients.ocr();
    // Wider than Textract reads.
    let wide = PageImage {
        width: MAX_SIDE + 1,
        height: 2,
        gray: vec![255; (MAX_SIDE as usize + 1) * 2],
    };
    assert!(matches!(
        ocr.recognize(&wide).await,
        Err(OcrError::BadImage(_))
    ));
    // Noise does not compress: over 10 MB as PNG, though within 10000 px a side.
    let side = 3400u32;
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let gray = (0..side * side)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8
        })
        .collect();
    let noisy = PageImage {
        width: side,
        height: side,
        gray,
    };
    assert!(raster::to_png(&noisy).len() > MAX_DOCUMENT_BYTES);
    match ocr.recognize(&noisy).await {
        Err(OcrError::BadImage(why)) => assert!(why.contains("as PNG"), "{why}"),
        other => panic!("{other:?}"),
    }
    // Pixels that do not fill the page.
    let short = PageImage {
        width: 10,
        height: 10,
        gray: vec![0; 99],
    };
    assert!(matches!(
        ocr.recognize(&short).await,
        Err(OcrError::BadImage(_))
    ));
    assert!(standin.requests().is_empty());
    assert_eq!(clients.calls.count(SERVICE, OPERATION), 0);
}

#[tokio::test]
async fn textract_has_its_own_endpoint_beside_the_emulator() {
    let emulator = Emulator::shared().await.unwrap();
    let standin = TextractStandin::start().await.unwrap();
    let mut config = emulator.fresh().await.unwrap();
    let image = page(300, 200);
    standin.answer_page(
        &image,
        vec![StandinLine::new(
            "from the stand-in",
            97.0,
            px(5.0, 5.0, 250.0, 30.0),
        )],
    );

    // Without the override Textract goes where everything else goes: to moto (whose
    // Textract reads no text, and whose answer this SDK cannot even parse, a malformed
    // `DocumentMetadata`; so whatever comes back, only where the request went matters).
    let on_moto = AwsClients::connect(&config).await;
    let _ = on_moto.ocr().recognize(&image).await;
    assert_eq!(on_moto.calls.count(SERVICE, OPERATION), 1);
    assert!(standin.requests().is_empty());

    config.textract_endpoint_url = Some(standin.endpoint().to_owned());
    let clients = AwsClients::connect(&config).await;
    let lines = clients.ocr().recognize(&image).await.unwrap();
    assert_eq!(lines[0].text, "from the stand-in");
    // DynamoDB is still moto (the table `fresh` made there).
    clients
        .dynamodb
        .describe_table()
        .table_name(&config.table)
        .send()
        .await
        .unwrap();
    assert_eq!(standin.requests().len(), 1);
    assert_eq!(clients.calls.count(SERVICE, OPERATION), 1);
    assert_eq!(clients.calls.count("DynamoDB", "DescribeTable"), 1);
}

/// Through Textract's lines, the layout reads the page exactly as it reads the same lines
/// handed to it directly: the adapter's boxes land on the pixels the engine saw, so the
/// checkboxes it finds there are the page's. (How well the layout itself reads a page is
/// `nib-ocr-eval`'s to judge, over many pages; see issue 12.)
#[tokio::test]
async fn the_layout_finds_the_checkboxes_of_textracts_lines_in_the_pixels() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/data/ocr");
    let image = raster::decode(&std::fs::read(format!("{dir}/2025-03-15.png")).unwrap())
        .unwrap()
        .remove(0);
    let truth_json = std::fs::read_to_string(format!("{dir}/2025-03-15.truth.json")).unwrap();
    let truth = TruthPage::parse(&truth_json).unwrap().remove(0);
    let kinds: serde_json::Value = serde_json::from_str(&truth_json).unwrap();
    let kinds = kinds["lines"].as_array().unwrap();
    let standin = TextractStandin::start().await.unwrap();
    let clients = clients(&standin).await;
    let ocr = clients.ocr();
    // Textract reads the words, not the hand-drawn squares: no text holds a box glyph.
    let lines = truth.lines_for(&image);
    standin.answer_page(&image, lines.clone());

    let read = nib::ocr::read(&ocr, &image).await.unwrap();
    assert_eq!(read.engine.name, "amazon-textract");
    let direct = nib::ocr::layout::analyze(
        &image,
        lines
            .iter()
            .map(|l| OcrLine {
                text: l.text.clone(),
                confidence: l.confidence / 100.0,
                bbox: l.bbox,
            })
            .collect(),
    );
    assert_eq!(read.lines.len(), kinds.len());
    assert_eq!(read.lines.len(), direct.len());
    for (got, want) in read.lines.iter().zip(&direct) {
        assert_eq!((&got.text, got.kind), (&want.text, want.kind));
        assert_close(&got.bbox, &want.bbox);
    }

    // The squares the layout found are the truth's tasks, ticked as the truth says: open
    // ones and the done one (its square holds a scribble).
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
    assert!(
        read.markdown()
            .contains("- [x] prep slides for Glacier kickoff")
    );

    // The same lines over blank paper: no squares in the pixels, so no tasks.
    let blank = PageImage {
        width: image.width,
        height: image.height,
        gray: vec![245; image.gray.len()],
    };
    standin.answer_page(&blank, truth.lines_for(&blank));
    let read = nib::ocr::read(&ocr, &blank).await.unwrap();
    assert_eq!(read.lines.len(), kinds.len());
    assert!(
        read.lines
            .iter()
            .all(|l| !matches!(l.kind, Kind::Task { .. })),
        "{:#?}",
        read.lines
    );
}
