//! `LocalAssets`: page images in a directory, behind the `Assets` port (docs/design.md §7, §8).
//!
//! Files live at `{dir}/u/{user}/pages/{page_id}.{pdf|png}`, the same layout as the S3 keys. They
//! are encrypted at rest with AES-256-GCM (associated data: the relative path, so a file moved
//! to another page or user does not open), so no page content sits in clear in the data
//! directory. Each file is written to a temporary name and renamed into place, so a reader never
//! sees half a file.
//!
//! **Trash.** `trash` moves a page's files to `{dir}/u/{user}/trash/{page_id}.{ext}.{unix}` (the
//! time of the mark, by the assets' clock; the bytes untouched, still bound to their page
//! path), where no URL reaches them; `untrash` moves the newest back. [`LocalAssets::sweep_trash`]
//! deletes the files marked [`ASSET_PURGE_DAYS`] days ago or more; it runs by itself with the
//! first call of the port after opening, then with the first call each
//! [`SWEEP_EVERY_SECONDS`] of the clock (as the embedded store sweeps its expired items).
//!
//! Readers get URLs like S3 presigned GETs: `{base_url}/assets/{path}?expires={unix}&sig={hex}`,
//! where `sig` is HMAC-SHA256 over `{path}\n{expires}`. The HTTP layer hands the three query
//! parts to [`LocalAssets::fetch`], which checks them and returns the decrypted bytes.

use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Nonce};
use async_trait::async_trait;
use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::Sha256;
use subtle::ConstantTimeEq;
use zeroize::Zeroizing;

use crate::domain::{PageId, UserId};
use crate::ports::{
    ASSET_PURGE_DAYS, AssetKind, Assets, AssetsError, Clock, SWEEP_EVERY_SECONDS, SystemClock,
};

const NONCE_LEN: usize = 12;
/// The first byte of every asset file; a new layout gets a new byte.
const FILE_FORMAT: u8 = 1;

#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// A bad or expired signature, or a path that is not an asset's. One variant with no detail,
    /// so a client learns nothing about which check failed.
    #[error("forbidden")]
    Forbidden,
    #[error("asset not found")]
    NotFound,
    #[error("cannot read asset")]
    Io(#[source] io::Error),
}

/// The asset directory, its keys and the URL it is served under.
pub struct LocalAssets {
    dir: PathBuf,
    base_url: String,
    signing_key: Zeroizing<[u8; 32]>,
    file_key: Zeroizing<[u8; 32]>,
    clock: Arc<dyn Clock>,
    /// The clock's time of the last trash sweep (`None`: none since opening).
    swept: Mutex<Option<i64>>,
    /// Held by each move into or out of the trash folder and by the sweep: a move is a listing
    /// and renames, and two at once on one file could each act on what the other moved away.
    moves: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for LocalAssets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalAssets")
            .field("dir", &self.dir)
            .field("base_url", &self.base_url)
            .finish_non_exhaustive()
    }
}

/// An asset's path relative to the directory (and to `/assets/` in URLs).
fn relative_path(user: &UserId, page: &PageId, kind: AssetKind) -> String {
    format!("u/{user}/pages/{page}.{}", kind.ext())
}

/// Accepts exactly `u/{user}/pages/{page_id}.{ext}` with a valid user id, a canonical page id
/// and a known extension; anything else (`..`, extra segments, odd spellings) is refused.
fn parse_path(path: &str) -> Option<(UserId, PageId, AssetKind)> {
    let mut segments = path.split('/');
    let (u, user, pages, file) = (
        segments.next()?,
        segments.next()?,
        segments.next()?,
        segments.next()?,
    );
    if segments.next().is_some() || u != "u" || pages != "pages" {
        return None;
    }
    let (page, ext) = file.rsplit_once('.')?;
    Some((
        UserId::parse(user).ok()?,
        PageId::parse(page).ok()?,
        AssetKind::from_ext(ext)?,
    ))
}

impl LocalAssets {
    /// Assets under `dir`, served at `{base_url}/assets/...`, with URLs signed by `signing_key`
    /// and files encrypted with `file_key` (both derived from the master key by the caller).
    pub fn new(
        dir: PathBuf,
        base_url: String,
        signing_key: [u8; 32],
        file_key: [u8; 32],
    ) -> LocalAssets {
        LocalAssets {
            dir,
            base_url: base_url.trim_end_matches('/').to_owned(),
            signing_key: Zeroizing::new(signing_key),
            file_key: Zeroizing::new(file_key),
            clock: Arc::new(SystemClock),
            swept: Mutex::new(None),
            moves: tokio::sync::Mutex::new(()),
        }
    }

    /// Uses `clock` for URL expiry instead of the system clock (tests pin time with it).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> LocalAssets {
        self.clock = clock;
        self
    }

    /// Deletes every trashed file marked [`ASSET_PURGE_DAYS`] days ago or more, by the clock;
    /// the number deleted.
    pub async fn sweep_trash(&self) -> Result<u64, AssetsError> {
        let now = self.clock.unix();
        *self.swept.lock().unwrap_or_else(|e| e.into_inner()) = Some(now);
        let users = self.dir.join("u");
        let _moves = self.moves.lock().await;
        blocking(move || sweep_trash_in(&users, now - ASSET_PURGE_DAYS * DAY_SECONDS)).await
    }

    /// The sweep, when none ran since opening or the last one is an hour old; a failure is
    /// logged, never the caller's.
    async fn maybe_sweep(&self) {
        let now = self.clock.unix();
        let due = self
            .swept
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_none_or(|at| now >= at.saturating_add(SWEEP_EVERY_SECONDS));
        if !due {
            return;
        }
        match self.sweep_trash().await {
            Ok(0) => {}
            Ok(n) => tracing::info!(files = n, "swept purged page images"),
            Err(e) => {
                tracing::warn!(error = %crate::telemetry::chain(&e), "could not sweep trashed page images")
            }
        }
    }

    fn trash_dir(&self, user: &UserId) -> PathBuf {
        self.dir.join("u").join(user.as_str()).join("trash")
    }

    fn signature(&self, path: &str, expires: &str) -> [u8; 32] {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.signing_key[..])
            .expect("HMAC takes keys of any length");
        mac.update(path.as_bytes());
        mac.update(b"\n");
        mac.update(expires.as_bytes());
        mac.finalize().into_bytes().into()
    }

    fn cipher(&self) -> Aes256Gcm {
        Aes256Gcm::new_from_slice(&self.file_key[..]).expect("AES-256 keys are 32 bytes")
    }

    /// `format | nonce | ciphertext+tag`, bound to the relative path.
    fn encrypt(&self, path: &str, plaintext: &[u8]) -> Vec<u8> {
        let mut nonce = [0u8; NONCE_LEN];
        rand::rng().fill_bytes(&mut nonce);
        let sealed = self
            .cipher()
            .encrypt(
                Nonce::from_slice(&nonce),
                Payload {
                    msg: plaintext,
                    aad: path.as_bytes(),
                },
            )
            .expect("AES-GCM encryption fails only for absurdly long input");
        let mut out = Vec::with_capacity(1 + NONCE_LEN + sealed.len());
        out.push(FILE_FORMAT);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&sealed);
        out
    }

    fn decrypt(&self, path: &str, file: &[u8]) -> io::Result<Vec<u8>> {
        let undecryptable = || {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("asset {path} does not decrypt (damaged, moved, or another key)"),
            )
        };
        let Some((&FILE_FORMAT, rest)) = file.split_first() else {
            return Err(undecryptable());
        };
        if rest.len() < NONCE_LEN {
            return Err(undecryptable());
        }
        let (nonce, sealed) = rest.split_at(NONCE_LEN);
        self.cipher()
            .decrypt(
                Nonce::from_slice(nonce),
                Payload {
                    msg: sealed,
                    aad: path.as_bytes(),
                },
            )
            .map_err(|_| undecryptable())
    }

    /// Checks a request for `/assets/{path}?expires=..&sig=..` and returns the asset. `path` is
    /// the part after `/assets/` (one leading `/` is tolerated).
    pub async fn fetch(
        &self,
        path: &str,
        expires: &str,
        sig: &str,
    ) -> Result<(AssetKind, Vec<u8>), FetchError> {
        let path = path.strip_prefix('/').unwrap_or(path);
        let (_, _, kind) = parse_path(path).ok_or(FetchError::Forbidden)?;
        // The signature first, in constant time, so timing reveals nothing about valid ones.
        let given = hex::decode(sig).map_err(|_| FetchError::Forbidden)?;
        let expected = self.signature(path, expires);
        if !bool::from(expected[..].ct_eq(&given[..])) {
            return Err(FetchError::Forbidden);
        }
        // Only plain decimal digits: the signed text must have one spelling.
        if expires.is_empty() || !expires.bytes().all(|b| b.is_ascii_digit()) {
            return Err(FetchError::Forbidden);
        }
        let expires: i64 = expires.parse().map_err(|_| FetchError::Forbidden)?;
        if self.clock.unix() > expires {
            return Err(FetchError::Forbidden);
        }
        let file = match tokio::fs::read(self.dir.join(path)).await {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(FetchError::NotFound),
            Err(e) => return Err(FetchError::Io(e)),
        };
        let bytes = self.decrypt(path, &file).map_err(FetchError::Io)?;
        Ok((kind, bytes))
    }
}

const DAY_SECONDS: i64 = 86_400;

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> Result<T, AssetsError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| AssetsError::Unavailable(Box::new(e)))?
        .map_err(|e| AssetsError::Unavailable(Box::new(e)))
}

/// The marked copies of the file `name` (`{page_id}.{ext}`) in `trash`, oldest first, with
/// their mark times.
fn marked(trash: &Path, name: &str) -> io::Result<Vec<(i64, PathBuf)>> {
    let entries = match std::fs::read_dir(trash) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry?;
        let file = entry.file_name();
        let Some(file) = file.to_str() else { continue };
        if let Some(at) = file
            .strip_prefix(name)
            .and_then(|rest| rest.strip_prefix('.'))
            .and_then(mark_time)
        {
            out.push((at, entry.path()));
        }
    }
    out.sort();
    Ok(out)
}

/// The mark time of a trashed file's name suffix (plain decimal digits).
fn mark_time(suffix: &str) -> Option<i64> {
    if suffix.is_empty() || !suffix.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    suffix.parse().ok()
}

fn remove_if_there(path: &Path) -> io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Moves `live` into `trash` marked `now`; older marked copies go (the live file is newer).
/// Nothing to move (no such file, or marked already) is no error.
fn trash_file(live: &Path, trash: &Path, name: &str, now: i64) -> io::Result<()> {
    if !live.exists() {
        return Ok(());
    }
    let older = marked(trash, name)?;
    create_private_dir_all(trash)?;
    std::fs::rename(live, trash.join(format!("{name}.{now}")))?;
    for (at, path) in older {
        if at != now {
            remove_if_there(&path)?;
        }
    }
    Ok(())
}

/// Moves the newest marked copy back to `live`, unless a live file is there (it is newer);
/// the other copies go.
fn untrash_file(live: &Path, trash: &Path, name: &str) -> io::Result<()> {
    let mut copies = marked(trash, name)?;
    if !live.exists()
        && let Some((_, newest)) = copies.pop()
    {
        std::fs::rename(&newest, live)?;
    }
    for (_, path) in copies {
        remove_if_there(&path)?;
    }
    Ok(())
}

/// Deletes the files of `{users}/*/trash/` marked at or before `cutoff`; how many.
fn sweep_trash_in(users: &Path, cutoff: i64) -> io::Result<u64> {
    let entries = match std::fs::read_dir(users) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e),
    };
    let mut n = 0;
    for user in entries {
        let trash = user?.path().join("trash");
        let files = match std::fs::read_dir(&trash) {
            Ok(files) => files,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        for file in files {
            let file = file?;
            let name = file.file_name();
            let at = name
                .to_str()
                .and_then(|n| n.rsplit_once('.'))
                .and_then(|(_, t)| mark_time(t));
            if at.is_some_and(|at| at <= cutoff) {
                remove_if_there(&file.path())?;
                n += 1;
            }
        }
    }
    Ok(n)
}

/// Writes `bytes` to `target` through a temporary file in the same directory and a rename, so
/// the file is either the old one or the whole new one. The data is synced before the rename so
/// a power cut cannot leave an empty file under the final name.
fn write_atomically(target: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = target
        .parent()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "asset path has no parent"))?;
    create_private_dir_all(dir)?;
    let mut tmp_name = target.as_os_str().to_owned();
    tmp_name.push(format!(".tmp-{:016x}", rand::random::<u64>()));
    let tmp = PathBuf::from(tmp_name);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let written = (|| {
        let mut file = options.open(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, target)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Creates the directory and its parents readable by the owner only.
fn create_private_dir_all(dir: &Path) -> io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir)
}

#[async_trait]
impl Assets for LocalAssets {
    async fn put(
        &self,
        user: &UserId,
        page: &PageId,
        kind: AssetKind,
        bytes: Vec<u8>,
    ) -> Result<(), AssetsError> {
        self.maybe_sweep().await;
        let path = relative_path(user, page, kind);
        let target = self.dir.join(&path);
        let file = self.encrypt(&path, &bytes);
        tokio::task::spawn_blocking(move || write_atomically(&target, &file))
            .await
            .map_err(|e| AssetsError::Unavailable(Box::new(e)))?
            .map_err(|e| AssetsError::Unavailable(Box::new(e)))
    }

    async fn get(
        &self,
        user: &UserId,
        page: &PageId,
        kind: AssetKind,
    ) -> Result<Option<Vec<u8>>, AssetsError> {
        let path = relative_path(user, page, kind);
        let file = match tokio::fs::read(self.dir.join(&path)).await {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(AssetsError::Unavailable(Box::new(e))),
        };
        self.decrypt(&path, &file)
            .map(Some)
            .map_err(|e| AssetsError::Unavailable(Box::new(e)))
    }

    async fn signed_url(
        &self,
        user: &UserId,
        page: &PageId,
        kind: AssetKind,
        ttl_seconds: u64,
    ) -> Result<String, AssetsError> {
        self.maybe_sweep().await;
        let path = relative_path(user, page, kind);
        let ttl = i64::try_from(ttl_seconds).unwrap_or(i64::MAX);
        let expires = self.clock.unix().saturating_add(ttl).to_string();
        let sig = hex::encode(self.signature(&path, &expires));
        Ok(format!(
            "{}/assets/{path}?expires={expires}&sig={sig}",
            self.base_url
        ))
    }

    async fn trash(
        &self,
        user: &UserId,
        page: &PageId,
        kinds: &[AssetKind],
    ) -> Result<(), AssetsError> {
        self.maybe_sweep().await;
        let _moves = self.moves.lock().await;
        let now = self.clock.unix();
        for kind in kinds {
            let live = self.dir.join(relative_path(user, page, *kind));
            let trash = self.trash_dir(user);
            let name = format!("{page}.{}", kind.ext());
            blocking(move || trash_file(&live, &trash, &name, now)).await?;
        }
        Ok(())
    }

    async fn untrash(
        &self,
        user: &UserId,
        page: &PageId,
        kinds: &[AssetKind],
    ) -> Result<(), AssetsError> {
        self.maybe_sweep().await;
        let _moves = self.moves.lock().await;
        for kind in kinds {
            let live = self.dir.join(relative_path(user, page, *kind));
            let trash = self.trash_dir(user);
            let name = format!("{page}.{}", kind.ext());
            blocking(move || untrash_file(&live, &trash, &name)).await?;
        }
        Ok(())
    }

    /// Removes the folder `u/{user}/` (page images, and any temporary file of a write cut
    /// short); the number of files it held.
    async fn delete_user(&self, user: &UserId) -> Result<u64, AssetsError> {
        let folder = self.dir.join("u").join(user.as_str());
        tokio::task::spawn_blocking(move || {
            fn count(dir: &Path) -> io::Result<u64> {
                let mut n = 0;
                for entry in std::fs::read_dir(dir)? {
                    let entry = entry?;
                    n += if entry.file_type()?.is_dir() {
                        count(&entry.path())?
                    } else {
                        1
                    };
                }
                Ok(n)
            }
            let n = match count(&folder) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
                Err(e) => return Err(e),
            };
            match std::fs::remove_dir_all(&folder) {
                Ok(()) => Ok(n),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(n),
                Err(e) => Err(e),
            }
        })
        .await
        .map_err(|e| AssetsError::Unavailable(Box::new(e)))?
        .map_err(|e| AssetsError::Unavailable(Box::new(e)))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicI64, Ordering};
    use std::time::{Duration, SystemTime};

    use super::*;

    /// A clock the test moves by hand.
    struct TestClock(AtomicI64);

    impl Clock for TestClock {
        fn now(&self) -> SystemTime {
            SystemTime::UNIX_EPOCH + Duration::from_secs(self.0.load(Ordering::SeqCst) as u64)
        }
    }

    struct Fixture {
        dir: tempfile::TempDir,
        clock: Arc<TestClock>,
        assets: LocalAssets,
        user: UserId,
        page: PageId,
    }

    fn fixture() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(TestClock(AtomicI64::new(1_700_000_000)));
        let assets = LocalAssets::new(
            dir.path().to_owned(),
            "http://127.0.0.1:8080/".into(),
            [1; 32],
            [2; 32],
        )
        .with_clock(clock.clone());
        Fixture {
            dir,
            clock,
            assets,
            user: UserId::parse("alice").unwrap(),
            page: PageId::new(),
        }
    }

    /// Splits a signed URL into the three parts `fetch` takes.
    fn parts(url: &str) -> (String, String, String) {
        let rest = url.strip_prefix("http://127.0.0.1:8080/assets/").unwrap();
        let (path, query) = rest.split_once('?').unwrap();
        let (expires, sig) = query.split_once('&').unwrap();
        (
            path.to_owned(),
            expires.strip_prefix("expires=").unwrap().to_owned(),
            sig.strip_prefix("sig=").unwrap().to_owned(),
        )
    }

    const INK: &[u8] = b"%PDF-1.7 the page's ink, in clear";

    #[tokio::test]
    async fn put_then_fetch_round_trips() {
        let f = fixture();
        f.assets
            .put(&f.user, &f.page, AssetKind::Pdf, INK.to_vec())
            .await
            .unwrap();
        let url = f
            .assets
            .signed_url(&f.user, &f.page, AssetKind::Pdf, 3600)
            .await
            .unwrap();
        assert!(url.starts_with(&format!(
            "http://127.0.0.1:8080/assets/u/alice/pages/{}.pdf?expires=1700003600&sig=",
            f.page
        )));
        let (path, expires, sig) = parts(&url);
        let (kind, bytes) = f.assets.fetch(&path, &expires, &sig).await.unwrap();
        assert_eq!((kind, &bytes[..]), (AssetKind::Pdf, INK));
        let (_, bytes) = f
            .assets
            .fetch(&format!("/{path}"), &expires, &sig)
            .await
            .unwrap();
        assert_eq!(bytes, INK);

        // Overwriting replaces the file.
        f.assets
            .put(&f.user, &f.page, AssetKind::Pdf, b"second".to_vec())
            .await
            .unwrap();
        let (_, bytes) = f.assets.fetch(&path, &expires, &sig).await.unwrap();
        assert_eq!(bytes, b"second");
    }

    #[tokio::test]
    async fn files_on_disk_are_encrypted_and_private() {
        let f = fixture();
        f.assets
            .put(&f.user, &f.page, AssetKind::Png, INK.to_vec())
            .await
            .unwrap();
        let path = f.dir.path().join(format!("u/alice/pages/{}.png", f.page));
        let on_disk = std::fs::read(&path).unwrap();
        assert!(!on_disk.windows(8).any(|w| INK.windows(8).any(|i| i == w)));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        // No temporary files are left behind.
        assert_eq!(
            std::fs::read_dir(path.parent().unwrap()).unwrap().count(),
            1
        );
    }

    #[tokio::test]
    async fn expired_urls_are_forbidden() {
        let f = fixture();
        f.assets
            .put(&f.user, &f.page, AssetKind::Pdf, INK.to_vec())
            .await
            .unwrap();
        let url = f
            .assets
            .signed_url(&f.user, &f.page, AssetKind::Pdf, 60)
            .await
            .unwrap();
        let (path, expires, sig) = parts(&url);
        f.clock.0.fetch_add(60, Ordering::SeqCst);
        assert!(f.assets.fetch(&path, &expires, &sig).await.is_ok());
        f.clock.0.fetch_add(1, Ordering::SeqCst);
        assert!(matches!(
            f.assets.fetch(&path, &expires, &sig).await,
            Err(FetchError::Forbidden)
        ));
    }

    #[tokio::test]
    async fn tampered_urls_are_forbidden() {
        let f = fixture();
        let other = PageId::new();
        for page in [&f.page, &other] {
            f.assets
                .put(&f.user, page, AssetKind::Pdf, INK.to_vec())
                .await
                .unwrap();
        }
        let url = f
            .assets
            .signed_url(&f.user, &f.page, AssetKind::Pdf, 60)
            .await
            .unwrap();
        let (path, expires, sig) = parts(&url);
        let mut bad_sig = sig.clone().into_bytes();
        bad_sig[0] = if bad_sig[0] == b'0' { b'1' } else { b'0' };
        let bad_sig = String::from_utf8(bad_sig).unwrap();
        let later = (expires.parse::<i64>().unwrap() + 1000).to_string();
        let cases = [
            (path.clone(), expires.clone(), bad_sig),
            (path.clone(), expires.clone(), sig[..62].to_owned()),
            (path.clone(), expires.clone(), String::new()),
            (path.clone(), expires.clone(), "zz".repeat(32)),
            (path.clone(), later, sig.clone()),
            (path.clone(), format!("0{expires}"), sig.clone()),
            (path.clone(), format!("+{expires}"), sig.clone()),
            (
                path.replace(f.page.as_str(), other.as_str()),
                expires.clone(),
                sig.clone(),
            ),
            (path.replace("alice", "bob"), expires.clone(), sig.clone()),
            (path.replace(".pdf", ".png"), expires.clone(), sig.clone()),
        ];
        for (path, expires, sig) in cases {
            assert!(
                matches!(
                    f.assets.fetch(&path, &expires, &sig).await,
                    Err(FetchError::Forbidden)
                ),
                "{path} {expires} {sig}"
            );
        }
    }

    #[tokio::test]
    async fn paths_outside_the_layout_are_forbidden_even_when_signed() {
        let f = fixture();
        std::fs::write(f.dir.path().join("secret"), b"secret").unwrap();
        let expires = "9999999999";
        let page = f.page.as_str();
        let paths = [
            "../secret".to_owned(),
            "secret".to_owned(),
            "u/alice/pages/../../../secret".to_owned(),
            format!("u/alice/pages/{page}.pdf/.."),
            format!("u/../pages/{page}.pdf"),
            format!("u/alice/pages/{page}.exe"),
            format!("u/alice/pages/{page}"),
            format!("u/Alice/pages/{page}.pdf"),
            format!("u/alice/pages/{}.pdf", page.to_uppercase()),
            format!("u/alice/other/{page}.pdf"),
            format!("u/alice/pages/x/{page}.pdf"),
            format!("u/alice/pages//{page}.pdf"),
            format!("//u/alice/pages/{page}.pdf"),
            format!("x/alice/pages/{page}.pdf"),
        ];
        for path in paths {
            // Even a correct signature over the odd path does not help.
            let sig = hex::encode(f.assets.signature(&path, expires));
            assert!(
                matches!(
                    f.assets.fetch(&path, expires, &sig).await,
                    Err(FetchError::Forbidden)
                ),
                "{path}"
            );
        }
    }

    #[tokio::test]
    async fn a_missing_or_moved_file_is_not_served() {
        let f = fixture();
        let url = f
            .assets
            .signed_url(&f.user, &f.page, AssetKind::Pdf, 60)
            .await
            .unwrap();
        let (path, expires, sig) = parts(&url);
        assert!(matches!(
            f.assets.fetch(&path, &expires, &sig).await,
            Err(FetchError::NotFound)
        ));

        // Another page's file copied over this one does not decrypt.
        let other = PageId::new();
        f.assets
            .put(&f.user, &other, AssetKind::Pdf, INK.to_vec())
            .await
            .unwrap();
        let base = f.dir.path().join("u/alice/pages");
        std::fs::copy(
            base.join(format!("{other}.pdf")),
            base.join(format!("{}.pdf", f.page)),
        )
        .unwrap();
        assert!(matches!(
            f.assets.fetch(&path, &expires, &sig).await,
            Err(FetchError::Io(_))
        ));
    }
}
