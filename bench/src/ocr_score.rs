//! Scores OCR output against the truth of generated handwritten pages (issue 12).
//!
//! `tests/ocr/generate.py` draws known text onto ruled paper and writes `STEM.truth.json` beside
//! each page; the OCR engine turns the page into markdown. This module compares the two:
//!
//! - [`cer`]: character error rate, Levenshtein distance over the truth's length, after
//!   lowercasing and removing all whitespace (case- and whitespace-insensitive).
//! - [`score_page`]: the page's CER (all line texts joined, markers removed), and its tasks: a
//!   predicted task matches a truth task when their CER is at most [`TASK_MATCH_CER`], one to
//!   one, best pairs first; a matched pair has the right status when both say open or both done.
//! - [`summarize`]: median and mean CER, task precision / recall / F1 and status accuracy over
//!   all pages (counts added up, not averaged per page), and the pages that got no text at all.
//!
//! The quality targets (tests/ocr/README.md): median CER <= 0.10, task F1 >= 0.90, status
//! accuracy >= 0.90, no page without text.

use serde::{Deserialize, Serialize};

/// A predicted task matches a truth task when the CER between their texts is at most this.
pub const TASK_MATCH_CER: f64 = 0.34;

/// What a line is, on the page or in the markdown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LineKind {
    Heading,
    Task,
    Bullet,
    Text,
}

/// A task's status. The truth has only `open` and `done`; markdown may carry other marks
/// (`[>]`, `[-]`), which are [`Status::Other`] and never the right status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Open,
    Done,
    Other,
}

/// One line of a generated page.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct TruthLine {
    pub kind: LineKind,
    pub text: String,
    /// `open` or `done` for tasks, `null` otherwise.
    #[serde(default)]
    pub status: Option<Status>,
    /// `[x, y, w, h]` in page pixels (after the page's rotation; approximate). Empty when the
    /// line left no ink.
    #[serde(default)]
    pub bbox: Vec<i64>,
}

/// One generated page: a `STEM.truth.json` of a single page, or one entry of a multi-page
/// file's `pages`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct TruthPage {
    pub stem: String,
    pub date: String,
    pub width: u32,
    pub height: u32,
    /// `package/face file`, e.g. `fonts-breip/Breip.ttf` (generated pages; empty for real
    /// handwriting).
    #[serde(default, deserialize_with = "null_as_empty")]
    pub font: String,
    /// Counter-clockwise, in degrees.
    #[serde(default)]
    pub rotation_deg: f64,
    /// Real handwriting (`tests/ocr/real/`): `print`, `cursive`, `mixed` or `tablet`.
    #[serde(default)]
    pub style: Option<String>,
    /// Real handwriting: who wrote the page.
    #[serde(default)]
    pub writer: Option<String>,
    pub lines: Vec<TruthLine>,
}

fn null_as_empty<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(Option::<String>::deserialize(d)?.unwrap_or_default())
}

/// A truth file: one page (`STEM.png` or a single-page `STEM.pdf`), or every page of a
/// multi-page `STEM.pdf` in order.
#[derive(Debug, Clone, PartialEq)]
pub struct TruthFile {
    pub stem: String,
    pub date: String,
    pub pages: Vec<TruthPage>,
}

/// A truth file that could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TruthError {
    #[error("truth file is not JSON: {0}")]
    Json(#[source] serde_json::Error),
    #[error("truth file is not a page or a list of pages: {0}")]
    Shape(#[source] serde_json::Error),
    #[error("truth file has no pages")]
    NoPages,
}

#[derive(Deserialize)]
struct TruthDocument {
    stem: String,
    date: String,
    pages: Vec<TruthPage>,
}

impl TruthFile {
    /// Parses either form: a page object, or `{"stem", "date", "pages": [page, ...]}`.
    pub fn parse(json: &str) -> Result<TruthFile, TruthError> {
        let value: serde_json::Value = serde_json::from_str(json).map_err(TruthError::Json)?;
        let file = if value.get("pages").is_some() {
            let doc: TruthDocument = serde_json::from_value(value).map_err(TruthError::Shape)?;
            TruthFile {
                stem: doc.stem,
                date: doc.date,
                pages: doc.pages,
            }
        } else {
            let page: TruthPage = serde_json::from_value(value).map_err(TruthError::Shape)?;
            TruthFile {
                stem: page.stem.clone(),
                date: page.date.clone(),
                pages: vec![page],
            }
        };
        if file.pages.is_empty() {
            return Err(TruthError::NoPages);
        }
        Ok(file)
    }
}

/// The markdown a perfect OCR would give for `page`: `# heading`, `- [ ]` / `- [x]` tasks,
/// `- bullet`, plain text, one line each.
pub fn to_markdown(page: &TruthPage) -> String {
    let mut md = String::new();
    for line in &page.lines {
        match line.kind {
            LineKind::Heading => md.push_str("# "),
            LineKind::Task if line.status == Some(Status::Done) => md.push_str("- [x] "),
            LineKind::Task => md.push_str("- [ ] "),
            LineKind::Bullet => md.push_str("- "),
            LineKind::Text => {}
        }
        md.push_str(&line.text);
        md.push('\n');
    }
    md
}

/// One line of the OCR's markdown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PredictedLine {
    pub kind: LineKind,
    /// The text without its marker (`#`, `- [ ]`, `-`).
    pub text: String,
    /// Set for tasks only.
    pub status: Option<Status>,
}

/// Reads a page's markdown line by line: `#`..`######` headings, `- [ ]` open and
/// `- [x]` / `- [X]` done tasks (any other mark in the brackets is [`Status::Other`]), `- ` /
/// `* ` / `+ ` bullets, anything else text. Indentation is ignored; blank lines are skipped.
pub fn parse_markdown(md: &str) -> Vec<PredictedLine> {
    md.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(parse_line)
        .collect()
}

fn parse_line(line: &str) -> PredictedLine {
    let hashes = line.chars().take_while(|&c| c == '#').count();
    if (1..=6).contains(&hashes) {
        let rest = &line[hashes..];
        if rest.is_empty() || rest.starts_with(char::is_whitespace) {
            return PredictedLine {
                kind: LineKind::Heading,
                text: rest.trim().to_owned(),
                status: None,
            };
        }
    }
    let bullet = ["- ", "* ", "+ "]
        .iter()
        .find_map(|m| line.strip_prefix(m))
        .or_else(|| ["-", "*", "+"].contains(&line).then_some(""));
    let Some(rest) = bullet else {
        return PredictedLine {
            kind: LineKind::Text,
            text: line.to_owned(),
            status: None,
        };
    };
    let rest = rest.trim_start();
    let mut chars = rest.chars();
    if let (Some('['), Some(mark), Some(']')) = (chars.next(), chars.next(), chars.next()) {
        let after = chars.as_str();
        if after.is_empty() || after.starts_with(char::is_whitespace) {
            let status = match mark {
                ' ' => Status::Open,
                'x' | 'X' => Status::Done,
                _ => Status::Other,
            };
            return PredictedLine {
                kind: LineKind::Task,
                text: after.trim().to_owned(),
                status: Some(status),
            };
        }
    }
    PredictedLine {
        kind: LineKind::Bullet,
        text: rest.trim().to_owned(),
        status: None,
    }
}

fn normalize(s: &str) -> Vec<char> {
    s.chars()
        .flat_map(char::to_lowercase)
        .filter(|c| !c.is_whitespace())
        .collect()
}

fn levenshtein(a: &[char], b: &[char]) -> usize {
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.iter().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitute = prev[j] + usize::from(ca != cb);
            cur[j + 1] = substitute.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

/// Character error rate of `predicted` against `truth`: edit distance over the truth's length,
/// both lowercased and without whitespace. An empty truth scores 0 against an empty
/// prediction and 1 against anything else. Not capped: a long wrong prediction can exceed 1.
pub fn cer(truth: &str, predicted: &str) -> f64 {
    let t = normalize(truth);
    let p = normalize(predicted);
    if t.is_empty() {
        return if p.is_empty() { 0.0 } else { 1.0 };
    }
    levenshtein(&t, &p) as f64 / t.len() as f64
}

/// The score of one page.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PageScore {
    /// CER of all predicted line texts against all truth line texts, markers removed.
    pub cer: f64,
    pub tasks_truth: usize,
    pub tasks_predicted: usize,
    /// Pairs of a truth and a predicted task, one to one.
    pub tasks_matched: usize,
    /// Matched pairs whose statuses agree.
    pub status_right: usize,
    /// Non-whitespace characters of the truth and of the prediction.
    pub truth_chars: usize,
    pub predicted_chars: usize,
}

/// Scores the OCR's markdown of a page against the page's truth.
pub fn score_page(truth: &TruthPage, predicted_markdown: &str) -> PageScore {
    let predicted = parse_markdown(predicted_markdown);
    let truth_text = join(truth.lines.iter().map(|l| l.text.as_str()));
    let predicted_text = join(predicted.iter().map(|l| l.text.as_str()));

    let truth_tasks: Vec<&TruthLine> = truth
        .lines
        .iter()
        .filter(|l| l.kind == LineKind::Task)
        .collect();
    let predicted_tasks: Vec<&PredictedLine> = predicted
        .iter()
        .filter(|l| l.kind == LineKind::Task)
        .collect();
    let mut pairs = Vec::new();
    for (i, t) in truth_tasks.iter().enumerate() {
        for (j, p) in predicted_tasks.iter().enumerate() {
            let c = cer(&t.text, &p.text);
            if c <= TASK_MATCH_CER {
                pairs.push((c, i, j));
            }
        }
    }
    pairs.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    let mut truth_used = vec![false; truth_tasks.len()];
    let mut predicted_used = vec![false; predicted_tasks.len()];
    let (mut matched, mut status_right) = (0, 0);
    for (_, i, j) in pairs {
        if truth_used[i] || predicted_used[j] {
            continue;
        }
        truth_used[i] = true;
        predicted_used[j] = true;
        matched += 1;
        if truth_tasks[i].status.is_some() && truth_tasks[i].status == predicted_tasks[j].status {
            status_right += 1;
        }
    }
    PageScore {
        cer: cer(&truth_text, &predicted_text),
        tasks_truth: truth_tasks.len(),
        tasks_predicted: predicted_tasks.len(),
        tasks_matched: matched,
        status_right,
        truth_chars: normalize(&truth_text).len(),
        predicted_chars: normalize(&predicted_text).len(),
    }
}

fn join<'a>(texts: impl Iterator<Item = &'a str>) -> String {
    texts.collect::<Vec<_>>().join("\n")
}

/// Scores over a set of pages.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// NaN when there are no pages.
    pub median_cer: f64,
    pub mean_cer: f64,
    /// Matched over predicted tasks; with nothing predicted, 1 if there was nothing to find
    /// and 0 otherwise.
    pub task_precision: f64,
    /// Matched over truth tasks; with no truth tasks, 1 if nothing was predicted and 0
    /// otherwise.
    pub task_recall: f64,
    pub task_f1: f64,
    /// Right statuses over matched tasks; with nothing matched, 1 if there were no tasks and 0
    /// otherwise.
    pub status_accuracy: f64,
    pub pages: usize,
    /// Pages with ink whose prediction has no text at all.
    pub pages_without_text: usize,
}

/// Adds up page scores: CER per page (median and mean), task counts over all pages.
pub fn summarize(scores: &[PageScore]) -> Summary {
    let mut cers: Vec<f64> = scores.iter().map(|s| s.cer).collect();
    cers.sort_by(f64::total_cmp);
    let n = cers.len();
    let median_cer = match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => cers[n / 2],
        _ => (cers[n / 2 - 1] + cers[n / 2]) / 2.0,
    };
    let mean_cer = if n == 0 {
        f64::NAN
    } else {
        cers.iter().sum::<f64>() / n as f64
    };
    let truth: usize = scores.iter().map(|s| s.tasks_truth).sum();
    let predicted: usize = scores.iter().map(|s| s.tasks_predicted).sum();
    let matched: usize = scores.iter().map(|s| s.tasks_matched).sum();
    let right: usize = scores.iter().map(|s| s.status_right).sum();
    let ratio = |num: usize, den: usize, vacuous: bool| {
        if den > 0 {
            num as f64 / den as f64
        } else if vacuous {
            1.0
        } else {
            0.0
        }
    };
    let task_precision = ratio(matched, predicted, truth == 0);
    let task_recall = ratio(matched, truth, predicted == 0);
    let task_f1 = if task_precision + task_recall > 0.0 {
        2.0 * task_precision * task_recall / (task_precision + task_recall)
    } else {
        0.0
    };
    Summary {
        median_cer,
        mean_cer,
        task_precision,
        task_recall,
        task_f1,
        status_accuracy: ratio(right, matched, truth == 0),
        pages: n,
        pages_without_text: scores
            .iter()
            .filter(|s| s.truth_chars > 0 && s.predicted_chars == 0)
            .count(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    fn line(kind: LineKind, text: &str, status: Option<Status>) -> TruthLine {
        TruthLine {
            kind,
            text: text.to_owned(),
            status,
            bbox: vec![0, 0, 10, 10],
        }
    }

    fn page(lines: Vec<TruthLine>) -> TruthPage {
        TruthPage {
            stem: "2026-03-04".to_owned(),
            date: "2026-03-04".to_owned(),
            width: 1404,
            height: 1872,
            font: "fonts-breip/Breip.ttf".to_owned(),
            rotation_deg: 1.5,
            style: None,
            writer: None,
            lines,
        }
    }

    fn score(tasks_truth: usize, predicted: usize, matched: usize, right: usize) -> PageScore {
        PageScore {
            cer: 0.0,
            tasks_truth,
            tasks_predicted: predicted,
            tasks_matched: matched,
            status_right: right,
            truth_chars: 100,
            predicted_chars: 100,
        }
    }

    #[test]
    fn cer_counts_edits_over_the_truth_length() {
        assert_eq!(cer("Call Dana at 10:30", "Call Dana at 10:30"), 0.0);
        // kitten -> sitting: two substitutions and one insertion over 6 characters.
        assert!(close(cer("kitten", "sitting"), 3.0 / 6.0));
        // One deletion, one substitution over 4.
        assert!(close(cer("abcd", "axc"), 2.0 / 4.0));
        assert!(close(cer("abc", ""), 1.0));
        // Insertions only: not capped at 1.
        assert!(close(cer("ab", "abxyz"), 3.0 / 2.0));
        assert_eq!(cer("", ""), 0.0);
        assert_eq!(cer("  \n", "x"), 1.0);
    }

    #[test]
    fn cer_ignores_case_and_whitespace() {
        assert_eq!(cer("Call Dana at 10:30", "call  DANA\tat10:30"), 0.0);
        assert_eq!(cer("Buy milk\nPay rent", "buymilk payrent"), 0.0);
        assert_eq!(cer("ÉTÉ Straße", "été straße"), 0.0);
        // Punctuation is not whitespace: it counts.
        assert!(close(cer("10:30", "1030"), 1.0 / 5.0));
    }

    #[test]
    fn markdown_lines_get_their_kind_status_and_bare_text() {
        let md = "# Errands\n\n## Work notes\n- [ ] Buy milk\n- [x] Pay rent\n  - [X] nested done\n\
                  - [>] moved\n- a bullet\n* star bullet\n+ plus\nplain text\n#7 is not a heading\n\
                  -no space is text\n- [ ]\n";
        let lines = parse_markdown(md);
        let got: Vec<(LineKind, &str, Option<Status>)> = lines
            .iter()
            .map(|l| (l.kind, l.text.as_str(), l.status))
            .collect();
        use LineKind::*;
        assert_eq!(
            got,
            vec![
                (Heading, "Errands", None),
                (Heading, "Work notes", None),
                (Task, "Buy milk", Some(Status::Open)),
                (Task, "Pay rent", Some(Status::Done)),
                (Task, "nested done", Some(Status::Done)),
                (Task, "moved", Some(Status::Other)),
                (Bullet, "a bullet", None),
                (Bullet, "star bullet", None),
                (Bullet, "plus", None),
                (Text, "plain text", None),
                (Text, "#7 is not a heading", None),
                (Text, "-no space is text", None),
                (Task, "", Some(Status::Open)),
            ]
        );
    }

    #[test]
    fn a_perfect_prediction_scores_perfectly() {
        let truth = page(vec![
            line(LineKind::Heading, "Errands", None),
            line(LineKind::Task, "Buy milk, eggs and tea", Some(Status::Open)),
            line(LineKind::Task, "Pay rent - $1,200", Some(Status::Done)),
            line(LineKind::Bullet, "Budget: 40 EUR", None),
            line(LineKind::Text, "Met Dana at 10:30.", None),
        ]);
        let s = score_page(&truth, &to_markdown(&truth));
        assert_eq!(
            s,
            PageScore {
                cer: 0.0,
                tasks_truth: 2,
                tasks_predicted: 2,
                tasks_matched: 2,
                status_right: 2,
                truth_chars: normalize(
                    "ErrandsBuymilk,eggsandteaPayrent-$1,200Budget:40EURMetDanaat10:30."
                )
                .len(),
                predicted_chars: s.truth_chars,
            }
        );
    }

    #[test]
    fn tasks_match_one_to_one_within_the_cer_threshold() {
        let truth = page(vec![
            line(LineKind::Heading, "Today", None),
            line(LineKind::Task, "Call Priya", Some(Status::Open)),
            line(LineKind::Task, "Pay the rent", Some(Status::Done)),
            line(LineKind::Task, "Water plants", Some(Status::Done)),
            line(LineKind::Text, "Notes", None),
        ]);
        // "Call Priya" read twice (only one can match), "Pay the rent" with one typo but the
        // wrong status, "Water plants" unreadable (CER over 0.34), and a task that is a bullet.
        let md = "# Today\n- [ ] Cal Priya\n- [ ] Call Priya\n- [ ] Pay the rant\n\
                  - [x] Wter pnts xyz\n- [x] Notes\n";
        let s = score_page(&truth, md);
        assert_eq!(s.tasks_truth, 3);
        assert_eq!(s.tasks_predicted, 5);
        assert_eq!(s.tasks_matched, 2);
        assert_eq!(
            s.status_right, 1,
            "Call Priya is right, Pay the rent is not"
        );
        // The page text: every predicted line against every truth line, markers removed.
        let expected = cer(
            "Today Call Priya Pay the rent Water plants Notes",
            "Today Cal Priya Call Priya Pay the rant Wter pnts xyz Notes",
        );
        assert!(close(s.cer, expected));
        assert!(s.cer > 0.0);
    }

    #[test]
    fn the_best_pair_wins_and_the_threshold_is_inclusive() {
        // Truth "abc": a prediction one edit away has CER 1/3 <= 0.34 and matches; "abcdef"
        // against "abcxyz" is 3/6 and does not.
        let truth = page(vec![
            line(LineKind::Task, "abc", Some(Status::Open)),
            line(LineKind::Task, "abcdef", Some(Status::Done)),
        ]);
        let s = score_page(&truth, "- [ ] abx\n- [x] abcxyz\n");
        assert_eq!((s.tasks_matched, s.status_right), (1, 1));
        // Both predictions are close to the first truth task; the exact one takes it, and the
        // other is left for the second truth task when close enough to it.
        let truth = page(vec![
            line(LineKind::Task, "email tom", Some(Status::Open)),
            line(LineKind::Task, "email tim", Some(Status::Done)),
        ]);
        let s = score_page(&truth, "- [x] email tim\n- [ ] email tom\n");
        assert_eq!((s.tasks_matched, s.status_right), (2, 2));
    }

    #[test]
    fn summary_adds_up_counts_and_takes_the_median_cer() {
        let mut a = score(4, 3, 3, 2);
        a.cer = 0.1;
        let mut b = score(2, 3, 1, 1);
        b.cer = 0.3;
        let mut c = score(0, 0, 0, 0);
        c.cer = 0.2;
        c.predicted_chars = 0;
        let s = summarize(&[a.clone(), b.clone(), c]);
        assert_eq!(s.pages, 3);
        assert!(close(s.median_cer, 0.2));
        assert!(close(s.mean_cer, 0.2));
        // 4 matched of 6 predicted and of 6 in the truth.
        assert!(close(s.task_precision, 4.0 / 6.0));
        assert!(close(s.task_recall, 4.0 / 6.0));
        assert!(close(s.task_f1, 4.0 / 6.0));
        assert!(close(s.status_accuracy, 3.0 / 4.0));
        assert_eq!(s.pages_without_text, 1);

        let s = summarize(&[a, b]);
        assert!(
            close(s.median_cer, 0.2),
            "even count: mean of the middle two"
        );

        // Precision 1/2, recall 1/4: F1 = 2 * 1/8 / (3/4) = 1/3.
        let s = summarize(&[score(4, 2, 1, 0)]);
        assert!(close(s.task_f1, 1.0 / 3.0));
        assert_eq!(s.status_accuracy, 0.0);
    }

    #[test]
    fn summary_edge_cases_do_not_pass_by_accident() {
        // Tasks on the page but none predicted: everything task-related is 0.
        let s = summarize(&[score(3, 0, 0, 0)]);
        assert_eq!(
            (
                s.task_precision,
                s.task_recall,
                s.task_f1,
                s.status_accuracy
            ),
            (0.0, 0.0, 0.0, 0.0)
        );
        // Tasks invented on a page without any.
        let s = summarize(&[score(0, 2, 0, 0)]);
        assert_eq!(
            (s.task_precision, s.task_recall, s.task_f1),
            (0.0, 0.0, 0.0)
        );
        // No tasks anywhere and none predicted: nothing was missed.
        let s = summarize(&[score(0, 0, 0, 0)]);
        assert_eq!(
            (s.task_precision, s.task_recall, s.task_f1),
            (1.0, 1.0, 1.0)
        );
        let s = summarize(&[]);
        assert!(s.median_cer.is_nan() && s.mean_cer.is_nan());
        assert_eq!(s.pages, 0);
    }

    #[test]
    fn truth_files_parse_in_both_forms() {
        let one = r#"{"stem": "2026-03-04", "date": "2026-03-04", "width": 1404, "height": 1872,
            "font": "fonts-bwht/BecauseWeBuild-Regular.otf", "rotation_deg": -1.2, "format": "png",
            "lines": [{"kind": "heading", "text": "To do", "status": null, "bbox": [1, 2, 3, 4], "mark": "underline"},
                      {"kind": "task", "text": "Buy milk", "status": "done", "bbox": []}]}"#;
        let f = TruthFile::parse(one).unwrap();
        assert_eq!((f.stem.as_str(), f.pages.len()), ("2026-03-04", 1));
        assert_eq!(f.pages[0].lines[1].status, Some(Status::Done));
        assert_eq!(f.pages[0].rotation_deg, -1.2);

        let many = format!(
            r#"{{"stem": "2026-03-04", "date": "2026-03-04", "format": "pdf", "pages": [{one}, {one}]}}"#
        );
        let f = TruthFile::parse(&many).unwrap();
        assert_eq!(f.pages.len(), 2);
        assert_eq!(f.pages[1].lines[0].kind, LineKind::Heading);

        assert!(matches!(TruthFile::parse("{"), Err(TruthError::Json(_))));
        assert!(matches!(
            TruthFile::parse(r#"{"stem": "x", "lines": []}"#),
            Err(TruthError::Shape(_))
        ));
        assert!(matches!(
            TruthFile::parse(r#"{"stem": "x", "date": "y", "pages": []}"#),
            Err(TruthError::NoPages)
        ));
    }

    /// The committed sample pages (tests/data/ocr/, written by tests/ocr/generate.py) parse,
    /// have what the generator promises, and score perfectly against their own markdown.
    #[test]
    fn the_committed_sample_truth_files_parse_and_score() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/ocr");
        let mut files = 0;
        let mut pages = Vec::new();
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            let Some(stem) = name.strip_suffix(".truth.json") else {
                continue;
            };
            files += 1;
            let file = TruthFile::parse(&std::fs::read_to_string(&path).unwrap()).unwrap();
            assert_eq!(file.stem, stem);
            let image = ["png", "pdf"]
                .iter()
                .map(|ext| dir.join(format!("{stem}.{ext}")))
                .find(|p| p.exists());
            assert!(image.is_some(), "{stem} has its page image");
            pages.extend(file.pages);
        }
        assert!(files >= 3, "samples in {}", dir.display());
        let fonts: std::collections::BTreeSet<&str> = pages
            .iter()
            .map(|p| p.font.split('/').next().unwrap())
            .collect();
        assert_eq!(fonts.len(), 6, "all six font packages: {fonts:?}");
        let mut scores = Vec::new();
        for p in &pages {
            assert_eq!(p.lines[0].kind, LineKind::Heading, "{}", p.stem);
            assert!(p.rotation_deg.abs() <= 2.0);
            for l in &p.lines {
                assert!(!l.text.trim().is_empty());
                assert_eq!(l.kind == LineKind::Task, l.status.is_some(), "{l:?}");
            }
            scores.push(score_page(p, &to_markdown(p)));
        }
        let s = summarize(&scores);
        assert_eq!(s.median_cer, 0.0);
        assert_eq!((s.task_f1, s.status_accuracy), (1.0, 1.0));
        let statuses: std::collections::BTreeSet<_> = pages
            .iter()
            .flat_map(|p| p.lines.iter().filter_map(|l| l.status))
            .collect();
        assert_eq!(statuses.len(), 2, "open and done tasks");
        // A wrong reading of every page scores worse: the scorer is not trivially perfect.
        let empty: Vec<PageScore> = pages.iter().map(|p| score_page(p, "")).collect();
        let s = summarize(&empty);
        assert_eq!(s.median_cer, 1.0);
        assert_eq!(s.pages_without_text, pages.len());
        assert_eq!(s.task_f1, 0.0);
    }
}
