//! Deterministic notebook pages for nib's benchmarks.
//!
//! A benchmark is only comparable with the last one if it measures the same input, so every page
//! here comes from a seeded generator (SplitMix64, written out below so that no dependency
//! upgrade can change the stream). [`Notebook::new`] with the same seed yields the same pages in
//! the same order, on any machine.
//!
//! The mix imitates a handwritten daily notebook as OCR'd to markdown: one to three pages a day,
//! each with a few headings, checkbox tasks in all four states (`[ ]`, `[x]`, `[>]`, `[-]`),
//! bullets and free text lines. Open tasks are copied forward to the next days' pages for a
//! while (as people do on paper), so task links span pages. Words follow a Zipf distribution
//! over a vocabulary of common note-taking words and a long tail of rarer ones, which gives search
//! terms with every document frequency, from "in most pages" to "in a handful".

pub mod ocr_score;

/// SplitMix64: tiny, fast, and good enough for test data.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// True with probability `percent` / 100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.next_u64() % 100 < percent
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Everyday note words, most common first (their Zipf rank is their position).
const COMMON: &[&str] = &[
    "meeting",
    "call",
    "review",
    "email",
    "notes",
    "plan",
    "team",
    "project",
    "budget",
    "draft",
    "follow",
    "up",
    "check",
    "send",
    "update",
    "doc",
    "spec",
    "api",
    "launch",
    "design",
    "today",
    "tomorrow",
    "week",
    "client",
    "report",
    "idea",
    "book",
    "order",
    "pay",
    "invoice",
    "schedule",
    "sync",
    "demo",
    "release",
    "bug",
    "fix",
    "test",
    "deploy",
    "hiring",
    "interview",
    "onboarding",
    "roadmap",
    "quarter",
    "goals",
    "metrics",
    "feedback",
    "survey",
    "slides",
    "contract",
    "legal",
    "travel",
    "flight",
    "hotel",
    "dentist",
    "doctor",
    "groceries",
    "milk",
    "coffee",
    "lunch",
    "dinner",
    "gym",
    "run",
    "birthday",
    "gift",
    "garden",
    "car",
    "insurance",
    "taxes",
    "bank",
    "rent",
    "kids",
    "school",
    "pickup",
    "library",
    "printer",
    "desk",
    "chair",
    "laptop",
    "backup",
    "password",
    "server",
    "database",
    "migration",
    "search",
    "index",
    "latency",
    "cache",
    "storage",
    "security",
    "audit",
    "pricing",
    "marketing",
    "newsletter",
    "blog",
    "podcast",
    "conference",
    "workshop",
    "retro",
    "standup",
    "offsite",
    "vendor",
    "quote",
    "estimate",
    "timeline",
    "milestone",
    "risk",
    "decision",
    "question",
    "answer",
];

/// People and places: proper nouns appear in a lot of real notes.
const NAMES: &[&str] = &[
    "Dana", "Priya", "Maria", "Tom", "Kenji", "Amara", "Lukas", "Sofia", "Omar", "Chen", "Berlin",
    "Lisbon", "Osaka", "Nairobi", "Acme", "Globex", "Initech", "Umbrella",
];

const SYLLABLES: &[&str] = &[
    "ka", "lo", "mi", "ra", "ten", "vor", "sul", "pe", "dri", "an", "bel", "cos", "ul", "fa", "ny",
    "tor", "is", "gan", "mel", "op",
];

const HEADINGS: &[&str] = &[
    "Tasks",
    "Notes",
    "Standup",
    "Ideas",
    "Meeting notes",
    "Today",
    "Follow-ups",
    "Personal",
    "Reading",
    "Questions",
    "Decisions",
    "Errands",
];

const VERBS: &[&str] = &[
    "Email", "Call", "Review", "Send", "Book", "Order", "Fix", "Draft", "Ask", "Plan", "Check",
    "Update", "Pay", "Schedule", "Finish", "Read", "Write", "Prepare",
];

/// The size of the rare-word tail beyond [`COMMON`].
const TAIL_WORDS: usize = 6000;

/// Zipf-distributed words: rank r is drawn with weight 1 / (r + 2).
#[derive(Debug, Clone)]
pub struct Vocabulary {
    words: Vec<String>,
    /// Cumulative weights, for a binary search.
    cumulative: Vec<f64>,
}

impl Default for Vocabulary {
    fn default() -> Self {
        Self::new()
    }
}

impl Vocabulary {
    pub fn new() -> Vocabulary {
        let mut words: Vec<String> = COMMON.iter().map(|w| (*w).to_owned()).collect();
        let mut seen: std::collections::HashSet<String> = words.iter().cloned().collect();
        let mut rng = Rng::new(0x05ee_d0f7_0cab);
        while words.len() < COMMON.len() + TAIL_WORDS {
            let parts = 2 + rng.below(3);
            let word: String = (0..parts).map(|_| *rng.pick(SYLLABLES)).collect();
            if seen.insert(word.clone()) {
                words.push(word);
            }
        }
        let mut total = 0.0;
        let cumulative = (0..words.len())
            .map(|rank| {
                total += 1.0 / (rank as f64 + 2.0);
                total
            })
            .collect();
        Vocabulary { words, cumulative }
    }

    pub fn word(&self, rng: &mut Rng) -> &str {
        let total = *self.cumulative.last().expect("non-empty");
        let x = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * total;
        let i = self.cumulative.partition_point(|&c| c < x);
        &self.words[i.min(self.words.len() - 1)]
    }

    /// The word of a given Zipf rank (0 is the most common).
    pub fn ranked(&self, rank: usize) -> &str {
        &self.words[rank.min(self.words.len() - 1)]
    }

    pub fn len(&self) -> usize {
        self.words.len()
    }

    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }
}

/// One generated page: its file stem (which carries the date) and its markdown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    pub stem: String,
    pub date: String,
    pub markdown: String,
}

/// An open task that may be copied forward to later pages.
#[derive(Debug, Clone)]
struct OpenTask {
    text: String,
    /// How many more pages it will still be copied to.
    lives: u32,
}

/// The page stream. Iterate it for as many pages as needed.
#[derive(Debug, Clone)]
pub struct Notebook {
    rng: Rng,
    vocab: Vocabulary,
    /// Days since 2000-01-01 of the current day.
    day: i64,
    /// Pages still to write on the current day, and how many were written.
    left_today: u32,
    written_today: u32,
    open: Vec<OpenTask>,
}

impl Notebook {
    pub fn new(seed: u64) -> Notebook {
        Notebook {
            rng: Rng::new(seed),
            vocab: Vocabulary::new(),
            day: 0,
            left_today: 0,
            written_today: 0,
            open: Vec::new(),
        }
    }

    pub fn vocabulary(&self) -> &Vocabulary {
        &self.vocab
    }

    fn words(&mut self, n: usize) -> String {
        let mut out = String::new();
        for i in 0..n {
            if i > 0 {
                out.push(' ');
            }
            if self.rng.chance(8) {
                let name = *self.rng.pick(NAMES);
                out.push_str(name);
            } else {
                let w = self.vocab.word(&mut self.rng).to_owned();
                out.push_str(&w);
            }
        }
        out
    }

    fn task_text(&mut self) -> String {
        let verb = *self.rng.pick(VERBS);
        let n = 2 + self.rng.below(5);
        let rest = self.words(n);
        if self.rng.chance(30) {
            let name = *self.rng.pick(NAMES);
            format!("{verb} {rest} with {name}")
        } else {
            format!("{verb} {rest}")
        }
    }

    fn sentence(&mut self) -> String {
        let n = 4 + self.rng.below(12);
        let mut s = self.words(n);
        if let Some(first) = s.get_mut(0..1) {
            first.make_ascii_uppercase();
        }
        s.push('.');
        s
    }

    fn next_page(&mut self) -> Page {
        if self.left_today == 0 {
            self.day += 1 + (self.rng.chance(20) as i64);
            self.left_today = 1 + self.rng.below(3) as u32;
            self.written_today = 0;
        }
        self.left_today -= 1;
        self.written_today += 1;
        let date = civil_date(self.day);
        let stem = if self.written_today == 1 {
            date.clone()
        } else {
            format!("{date}-{}", self.written_today)
        };

        let mut md = String::with_capacity(1536);
        if self.rng.chance(30) {
            let n = 2 + self.rng.below(3);
            md.push_str(&format!("# {}\n\n", self.words(n)));
        }
        let sections = 1 + self.rng.below(3);
        let mut carried = false;
        for s in 0..sections {
            md.push_str(&format!("## {}\n", self.rng.pick(HEADINGS)));
            // Tasks copied forward go in the first section, as on paper.
            if s == 0 && !carried {
                carried = true;
                let open = std::mem::take(&mut self.open);
                for mut task in open {
                    let mark = match self.rng.below(10) {
                        0..=2 => 'x',
                        3 => '-',
                        4 if task.lives > 1 => '>',
                        _ => ' ',
                    };
                    md.push_str(&format!("- [{mark}] {}\n", task.text));
                    task.lives = task.lives.saturating_sub(1);
                    if matches!(mark, ' ' | '>') && task.lives > 0 {
                        self.open.push(task);
                    }
                }
            }
            let tasks = self.rng.below(5);
            for _ in 0..tasks {
                let text = self.task_text();
                let mark = match self.rng.below(10) {
                    0..=1 => 'x',
                    2 => '-',
                    _ => ' ',
                };
                md.push_str(&format!("- [{mark}] {text}\n"));
                if mark == ' ' && self.open.len() < 12 && self.rng.chance(50) {
                    let lives = 1 + self.rng.below(4) as u32;
                    self.open.push(OpenTask { text, lives });
                }
            }
            for _ in 0..self.rng.below(5) {
                let n = 3 + self.rng.below(8);
                let bullet = self.words(n);
                md.push_str(&format!("- {bullet}\n"));
            }
            for _ in 0..self.rng.below(4) {
                let line = self.sentence();
                md.push_str(&line);
                md.push('\n');
            }
            md.push('\n');
        }
        Page {
            stem,
            date,
            markdown: md,
        }
    }
}

impl Iterator for Notebook {
    type Item = Page;

    fn next(&mut self) -> Option<Page> {
        Some(self.next_page())
    }
}

/// `YYYY-MM-DD` of `days` after 2000-01-01 (Howard Hinnant's civil-from-days).
pub fn civil_date(days: i64) -> String {
    let z = days + 10_957 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

/// Search queries over generated pages, from common words (long posting lists) to rare ones,
/// two-word queries and a quoted phrase. The same list every run.
pub fn queries(vocab: &Vocabulary) -> Vec<String> {
    vec![
        vocab.ranked(0).to_owned(),
        vocab.ranked(3).to_owned(),
        vocab.ranked(20).to_owned(),
        vocab.ranked(150).to_owned(),
        vocab.ranked(1500).to_owned(),
        format!("{} {}", vocab.ranked(5), vocab.ranked(60)),
        format!("{} {}", vocab.ranked(8), vocab.ranked(800)),
        format!("\"follow up\" {}", vocab.ranked(30)),
        "Priya budget".to_owned(),
        format!(
            "{} {} {}",
            vocab.ranked(12),
            vocab.ranked(90),
            vocab.ranked(400)
        ),
    ]
}

/// Writes `count` pages (seed `seed`) as `STEM.md` files into `dir`, which must exist.
pub fn write_notebook(dir: &std::path::Path, count: usize, seed: u64) -> std::io::Result<()> {
    for page in Notebook::new(seed).take(count) {
        std::fs::write(dir.join(format!("{}.md", page.stem)), page.markdown)?;
    }
    Ok(())
}

/// The seed every benchmark uses unless told otherwise.
pub const SEED: u64 = 0x6e69_6221;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stream_is_deterministic_and_dated() {
        let a: Vec<Page> = Notebook::new(7).take(50).collect();
        let b: Vec<Page> = Notebook::new(7).take(50).collect();
        assert_eq!(a, b);
        assert_ne!(a, Notebook::new(8).take(50).collect::<Vec<_>>());
        assert_eq!(civil_date(0), "2000-01-01");
        assert_eq!(civil_date(59), "2000-02-29");
        assert_eq!(civil_date(366), "2001-01-01");
        let mut stems: Vec<&str> = a.iter().map(|p| p.stem.as_str()).collect();
        stems.dedup();
        assert_eq!(stems.len(), 50, "stems are unique");
        assert!(a.iter().all(|p| p.markdown.contains("## ")));
    }
}
