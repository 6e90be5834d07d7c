//! `nib import --watch DIR`: a local inbox. A tablet's sync app (reMarkable, Supernote and Boox
//! all export PDF/PNG into a synced folder) writes pages into `DIR`; each page is imported once
//! its files have stopped changing, with one line per file saying what became of it.
//!
//! - **Complete files only.** An event names a file; its page (the files of one stem, as
//!   `nib import` groups them) is looked at again once no event has come for it for the settle
//!   time, and imported only when its files' sizes and times are the same as at the previous
//!   look. A sync app that writes a hidden or temporary name and renames it at the end is
//!   imported at the rename (hidden files and other extensions are never page files). A file
//!   that still fails to parse (a writer that paused longer than twice the settle time) is
//!   reported and taken again at its next change.
//! - **Nothing twice across restarts.** What was imported is remembered per folder and user in
//!   the data directory (`watch/{hash}.json`: each file's size, modification time and SHA-256),
//!   written after every page. At start the folder is compared with it: files changed or added
//!   while the watcher was stopped are imported, the rest are not. A file whose time changed but
//!   whose bytes did not (a sync app rewriting it) is reported as unchanged and not imported.
//! - The watcher is started before that first look, so nothing written in between is missed.

use std::collections::{BTreeMap, HashMap};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::Context;
use nib::domain::UserId;
use nib::notebook::{PageFiles, SavedPage, is_page_extension};
use nib::services::Services;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tokio::time::Instant;

/// What the watcher knows of one file it has imported (or found unchanged).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Seen {
    size: u64,
    /// Modification time, nanoseconds since the epoch.
    modified: i128,
    sha256: String,
}

/// The remembered state of one (folder, user): file name -> what was imported.
#[derive(Debug, Default, Serialize, Deserialize)]
struct State {
    dir: String,
    user: String,
    files: BTreeMap<String, Seen>,
}

/// Where the state of watching `dir` for `user` is kept, in the data directory.
fn state_path(data_dir: &Path, dir: &Path, user: &UserId) -> PathBuf {
    let mut h = Sha256::new();
    h.update(dir.as_os_str().as_encoded_bytes());
    h.update([0]);
    h.update(user.as_str().as_bytes());
    let key = hex::encode(&h.finalize()[..12]);
    data_dir.join("watch").join(format!("{key}.json"))
}

impl State {
    fn load(path: &Path, dir: &Path, user: &UserId) -> anyhow::Result<State> {
        match std::fs::read(path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .with_context(|| format!("cannot read the watch state {}", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(State {
                dir: dir.display().to_string(),
                user: user.as_str().to_owned(),
                files: BTreeMap::new(),
            }),
            Err(e) => {
                Err(e).with_context(|| format!("cannot read the watch state {}", path.display()))
            }
        }
    }

    /// Written beside and renamed over, so a crash leaves the old state or the new one.
    fn save(&self, path: &Path) -> anyhow::Result<()> {
        let dir = path.parent().expect("the state file is in a folder");
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let partial = path.with_extension("json.partial");
        std::fs::write(&partial, serde_json::to_vec_pretty(self)?)
            .with_context(|| format!("cannot write {}", partial.display()))?;
        std::fs::rename(&partial, path)
            .with_context(|| format!("cannot write {}", path.display()))?;
        Ok(())
    }
}

/// A file of a page as last looked at: its name, size and modification time.
type Look = Vec<(String, u64, i128)>;

fn nanos(t: SystemTime) -> i128 {
    match t.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(d) => d.as_nanos() as i128,
        Err(e) => -(e.duration().as_nanos() as i128),
    }
}

/// The page stem a path in the watched folder belongs to, if it is a page file.
fn page_stem(dir: &Path, path: &Path) -> Option<String> {
    if path.parent() != Some(dir) {
        return None;
    }
    let stem = path.file_stem()?.to_str()?;
    let ext = path.extension()?.to_str()?;
    (!stem.starts_with('.') && is_page_extension(ext)).then(|| stem.to_owned())
}

/// The page files of `stem` in `dir` now, sorted by name (none when they are gone).
fn look(dir: &Path, stem: &str) -> std::io::Result<Look> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        if page_stem(dir, &path).as_deref() != Some(stem) {
            continue;
        }
        let Ok(meta) = entry.metadata() else {
            continue; // gone since the listing
        };
        if !meta.is_file() {
            continue;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        files.push((name, meta.len(), meta.modified().map(nanos).unwrap_or(0)));
    }
    files.sort();
    Ok(files)
}

fn sha256_file(path: &Path) -> std::io::Result<String> {
    let mut h = Sha256::new();
    let mut f = std::fs::File::open(path)?;
    std::io::copy(&mut f, &mut h)?;
    Ok(hex::encode(h.finalize()))
}

/// One line on stdout, flushed (scripts and tests read them). A reader that went away does not
/// stop the watcher.
fn say(line: impl std::fmt::Display) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// What became of a page's import, as its lines say it.
fn outcome(saved: &[SavedPage]) -> String {
    match saved {
        [] => "nothing to import".to_owned(),
        [one] if one.superseded => format!(
            "page {} already has newer files, nothing changed",
            one.page_id
        ),
        [one] if one.created => format!(
            "new page {} ({} lines, {} tasks)",
            one.page_id, one.lines, one.tasks
        ),
        [one] => format!(
            "page {} updated ({} lines, {} tasks)",
            one.page_id, one.lines, one.tasks
        ),
        many => {
            let created = many.iter().filter(|p| p.created && !p.superseded).count();
            let updated = many.iter().filter(|p| !p.created && !p.superseded).count();
            format!("{} pages ({created} new, {updated} updated)", many.len())
        }
    }
}

/// A page waiting for its files to settle: when to look again, and what the last look saw.
struct Pending {
    due: Instant,
    last: Option<Look>,
}

/// The watch options `nib import --watch` takes.
pub struct Watch<'a> {
    pub app: &'a Services,
    pub dir: &'a Path,
    pub data_dir: &'a Path,
    pub user: &'a UserId,
    pub force_ocr: bool,
    /// How long a page's files must be left alone before they are looked at again.
    pub settle: Duration,
}

impl Watch<'_> {
    /// Watches until `stop` resolves (Ctrl-C or SIGTERM for `nib`).
    pub async fn run(self, stop: impl std::future::Future<Output = ()>) -> anyhow::Result<()> {
        use notify::Watcher as _;
        let dir = std::fs::canonicalize(self.dir)
            .with_context(|| format!("cannot watch the folder {}", self.dir.display()))?;
        anyhow::ensure!(dir.is_dir(), "{} is not a folder", dir.display());
        let state_file = state_path(self.data_dir, &dir, self.user);
        let mut state = State::load(&state_file, &dir, self.user)?;

        let (tx, mut events) = tokio::sync::mpsc::unbounded_channel();
        let mut watcher = notify::recommended_watcher(move |e: notify::Result<notify::Event>| {
            let _ = tx.send(e);
        })
        .context("cannot start watching files")?;
        watcher
            .watch(&dir, notify::RecursiveMode::NonRecursive)
            .with_context(|| format!("cannot watch the folder {}", dir.display()))?;

        // The first look: every page whose files differ from what was imported is due now.
        let mut pending: HashMap<String, Pending> = HashMap::new();
        let (pages, _skipped) = nib::notebook::group_dir(&dir)
            .with_context(|| format!("cannot read the folder {}", dir.display()))?;
        let (mut current, mut waiting) = (0usize, 0usize);
        let now = Instant::now();
        for page in &pages {
            let files = look(&dir, &page.stem)?;
            let known = files
                .iter()
                .filter(|(name, size, modified)| {
                    state
                        .files
                        .get(name)
                        .is_some_and(|s| s.size == *size && s.modified == *modified)
                })
                .count();
            current += known;
            if known < files.len() {
                waiting += files.len() - known;
                // Seen as it is now: a page written before the watcher started is complete
                // unless it changes again within the settle time.
                pending.insert(
                    page.stem.clone(),
                    Pending {
                        due: now + self.settle,
                        last: Some(files),
                    },
                );
            }
        }
        say(format_args!(
            "watching {} for {}: {current} files up to date, {waiting} to look at",
            dir.display(),
            self.user
        ));

        tokio::pin!(stop);
        loop {
            let next = pending.values().map(|p| p.due).min();
            tokio::select! {
                () = &mut stop => break,
                event = events.recv() => match event {
                    Some(Ok(event)) => {
                        for path in &event.paths {
                            if let Some(stem) = page_stem(&dir, path) {
                                let due = Instant::now() + self.settle;
                                pending
                                    .entry(stem)
                                    .and_modify(|p| p.due = due)
                                    .or_insert(Pending { due, last: None });
                            }
                        }
                    }
                    Some(Err(e)) => {
                        tracing::warn!(error = %e, "file watch error");
                        say(format_args!("warning: {e}"));
                    }
                    None => anyhow::bail!("the file watcher stopped"),
                },
                () = tokio::time::sleep_until(next.unwrap_or_else(Instant::now)), if next.is_some() => {
                    let now = Instant::now();
                    let due: Vec<String> = pending
                        .iter()
                        .filter(|(_, p)| p.due <= now)
                        .map(|(s, _)| s.clone())
                        .collect();
                    for stem in due {
                        let files = look(&dir, &stem)
                            .with_context(|| format!("cannot read the folder {}", dir.display()))?;
                        let p = pending.get_mut(&stem).expect("due pages are pending");
                        if files.is_empty() {
                            pending.remove(&stem);
                        } else if p.last.as_ref() != Some(&files) {
                            p.last = Some(files);
                            p.due = Instant::now() + self.settle;
                        } else {
                            pending.remove(&stem);
                            self.import(&dir, &stem, &files, &mut state).await;
                            state.save(&state_file)?;
                        }
                    }
                }
            }
        }
        drop(watcher);
        state.save(&state_file)?;
        Ok(())
    }

    /// Imports the page of `stem` whose files have settled, unless their bytes are what was
    /// imported before; one line per file that changed.
    async fn import(&self, dir: &Path, stem: &str, files: &Look, state: &mut State) {
        let mut changed = Vec::new();
        let mut seen = Vec::new();
        for (name, size, modified) in files {
            if let Some(s) = state.files.get(name)
                && s.size == *size
                && s.modified == *modified
            {
                continue;
            }
            let sha256 = match sha256_file(&dir.join(name)) {
                Ok(h) => h,
                Err(e) => {
                    say(format_args!("error: {name}: cannot read: {e}"));
                    return;
                }
            };
            let same = state.files.get(name).is_some_and(|s| s.sha256 == sha256);
            let entry = Seen {
                size: *size,
                modified: *modified,
                sha256,
            };
            if same {
                say(format_args!("{name}: unchanged"));
                state.files.insert(name.clone(), entry);
            } else {
                changed.push(name.clone());
                seen.push((name.clone(), entry));
            }
        }
        if changed.is_empty() {
            return;
        }
        let mut page = PageFiles {
            stem: stem.to_owned(),
            ..PageFiles::default()
        };
        for (name, _, _) in files {
            let path = dir.join(name);
            let ext = path
                .extension()
                .and_then(|e| e.to_str())
                .unwrap_or_default()
                .to_owned();
            page.set(&ext, path);
        }
        match self
            .app
            .notebook()
            .import_files_read(self.user, &page, self.force_ocr)
            .await
        {
            Ok(saved) => {
                let said = outcome(&saved);
                for name in &changed {
                    say(format_args!("{name}: {said}"));
                }
                state.files.extend(seen);
            }
            // Not remembered: the file is taken again at its next change or the next start.
            Err(failure) => say(format_args!("error: {failure}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_page_files_of_the_folder_itself_have_a_stem() {
        let dir = Path::new("/inbox");
        assert_eq!(
            page_stem(dir, Path::new("/inbox/2026-06-19.pdf")).as_deref(),
            Some("2026-06-19")
        );
        assert_eq!(
            page_stem(dir, Path::new("/inbox/2026-06-19.MD")).as_deref(),
            Some("2026-06-19")
        );
        assert_eq!(page_stem(dir, Path::new("/inbox/.2026-06-19.pdf")), None);
        assert_eq!(
            page_stem(dir, Path::new("/inbox/2026-06-19.pdf.part")),
            None
        );
        assert_eq!(page_stem(dir, Path::new("/inbox/sub/2026-06-19.pdf")), None);
        assert_eq!(page_stem(dir, Path::new("/inbox/notes")), None);
    }

    #[test]
    fn each_folder_and_user_has_its_own_state() {
        let data = Path::new("/data");
        let (a, b) = (UserId::parse("a").unwrap(), UserId::parse("b").unwrap());
        let one = state_path(data, Path::new("/inbox"), &a);
        assert_eq!(one, state_path(data, Path::new("/inbox"), &a));
        assert_ne!(one, state_path(data, Path::new("/inbox"), &b));
        assert_ne!(one, state_path(data, Path::new("/inbox2"), &a));
        assert!(one.starts_with("/data/watch"));
    }
}
