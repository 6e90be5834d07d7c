//! `LocalKeys`: the local stand-in for KMS behind the `Keys` port (docs/design.md §6, §8).
//!
//! A 32-byte random master key lives in a file that only its owner can read. Data keys are
//! wrapped with AES-256-GCM under a key-encryption key derived from the master key, with the
//! user id in the associated data (as KMS binds them to an encryption context), so a wrapped key
//! copied to another user does not unwrap. The server also derives its own secrets (the asset
//! URL signing key and the asset file key) from the master key with [`LocalKeys::derive`], so the
//! data directory has a single secret to protect.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Nonce};
use async_trait::async_trait;
use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::Sha256;
use zeroize::Zeroizing;

use crate::domain::UserId;
use crate::ports::{DataKey, Keys, KeysError, WrappedKey};

const KEY_LEN: usize = 32;
const NONCE_LEN: usize = 12;

/// The label of the key-encryption key. `derive` prefixes its labels differently, so no label a
/// caller passes can yield this key.
const KEK_LABEL: &[u8] = b"nib/key-encryption-key/v1";
const DERIVE_PREFIX: &[u8] = b"nib/derive\x1f";

/// The master key file and what is derived from it.
pub struct LocalKeys {
    path: PathBuf,
    master: Zeroizing<[u8; KEY_LEN]>,
    kek: Zeroizing<[u8; KEY_LEN]>,
}

impl std::fmt::Debug for LocalKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalKeys")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

fn hmac(key: &[u8], parts: &[&[u8]]) -> [u8; KEY_LEN] {
    let mut mac =
        <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC takes keys of any length");
    for part in parts {
        mac.update(part);
    }
    mac.finalize().into_bytes().into()
}

fn aad(user: &UserId) -> Vec<u8> {
    format!("nib-data-key\x1f{user}").into_bytes()
}

impl LocalKeys {
    /// Opens the master key file, creating it with fresh random bytes on first run. Refuses a
    /// file that other users could read, or one of the wrong size.
    pub fn open_or_create(path: &Path) -> io::Result<LocalKeys> {
        let master = match read_key_file(path) {
            Ok(master) => master,
            Err(e) if e.kind() == io::ErrorKind::NotFound => create_key_file(path)?,
            Err(e) => return Err(e),
        };
        let kek = Zeroizing::new(hmac(&master[..], &[KEK_LABEL]));
        Ok(LocalKeys {
            path: path.to_owned(),
            master,
            kek,
        })
    }

    /// A 32-byte secret for one purpose, named by `label` (e.g. "asset-url-signing"), derived
    /// from the master key: stable across restarts, and unrelated to the keys of other labels.
    pub fn derive(&self, label: &str) -> [u8; KEY_LEN] {
        hmac(&self.master[..], &[DERIVE_PREFIX, label.as_bytes()])
    }

    fn cipher(&self) -> Aes256Gcm {
        Aes256Gcm::new_from_slice(&self.kek[..]).expect("AES-256 keys are 32 bytes")
    }
}

/// Reads an existing key file, checking its permissions and size.
fn read_key_file(path: &Path) -> io::Result<Zeroizing<[u8; KEY_LEN]>> {
    let mut file = File::open(path)?;
    let meta = file.metadata()?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "the key file {} can be read by other users (mode {mode:o}); \
                     restrict it with `chmod 600 {}` and make sure it was not copied",
                    path.display(),
                    path.display()
                ),
            ));
        }
    }
    if !meta.is_file() || meta.len() != KEY_LEN as u64 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "the key file {} is not a {KEY_LEN}-byte key file",
                path.display()
            ),
        ));
    }
    let mut master = Zeroizing::new([0u8; KEY_LEN]);
    file.read_exact(&mut master[..])?;
    Ok(master)
}

/// Creates the key file atomically: the key is written and synced to a private temporary file,
/// which is then hard-linked to the final name. Linking fails if the name exists, so two
/// processes starting at once cannot overwrite each other's key, and a crash never leaves a
/// short key file behind.
fn create_key_file(path: &Path) -> io::Result<Zeroizing<[u8; KEY_LEN]>> {
    let mut master = Zeroizing::new([0u8; KEY_LEN]);
    rand::rng().fill_bytes(&mut master[..]);

    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    if let Some(dir) = dir {
        fs::create_dir_all(dir)?;
    }
    let mut tmp_name = path.as_os_str().to_owned();
    tmp_name.push(format!(
        ".tmp-{}-{:08x}",
        std::process::id(),
        rand::random::<u32>()
    ));
    let tmp = PathBuf::from(tmp_name);

    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // Created private, so the key is never readable by others, not even briefly.
        options.mode(0o600);
    }
    let written = (|| {
        let mut file = options.open(&tmp)?;
        file.write_all(&master[..])?;
        file.sync_all()?;
        fs::hard_link(&tmp, path)
    })();
    // The temporary name is only a staging area; remove it whether or not the link worked.
    let _ = fs::remove_file(&tmp);
    match written {
        Ok(()) => {
            if let Some(dir) = dir {
                // Make the new directory entry durable too; failure here only risks the file
                // vanishing on power loss, before anything was encrypted with it.
                let _ = File::open(dir).and_then(|d| d.sync_all());
            }
            Ok(master)
        }
        // Another process created the key between our read and our link: use theirs.
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => read_key_file(path),
        Err(e) => Err(io::Error::new(
            e.kind(),
            format!("cannot create the key file {}: {e}", path.display()),
        )),
    }
}

#[async_trait]
impl Keys for LocalKeys {
    async fn generate(&self, user: &UserId) -> Result<(DataKey, WrappedKey), KeysError> {
        let mut key = Zeroizing::new([0u8; KEY_LEN]);
        rand::rng().fill_bytes(&mut key[..]);
        let mut nonce = [0u8; NONCE_LEN];
        rand::rng().fill_bytes(&mut nonce);
        let sealed = self
            .cipher()
            .encrypt(
                Nonce::from_slice(&nonce),
                Payload {
                    msg: &key[..],
                    aad: &aad(user),
                },
            )
            .expect("AES-GCM encryption of 32 bytes cannot fail");
        let mut wrapped = nonce.to_vec();
        wrapped.extend_from_slice(&sealed);
        Ok((DataKey(key), WrappedKey(wrapped)))
    }

    async fn unwrap(&self, user: &UserId, wrapped: &WrappedKey) -> Result<DataKey, KeysError> {
        if wrapped.0.len() < NONCE_LEN {
            return Err(KeysError::Unwrap);
        }
        let (nonce, sealed) = wrapped.0.split_at(NONCE_LEN);
        let plain = Zeroizing::new(
            self.cipher()
                .decrypt(
                    Nonce::from_slice(nonce),
                    Payload {
                        msg: sealed,
                        aad: &aad(user),
                    },
                )
                .map_err(|_| KeysError::Unwrap)?,
        );
        let key: [u8; KEY_LEN] = plain[..].try_into().map_err(|_| KeysError::Unwrap)?;
        Ok(DataKey(Zeroizing::new(key)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(s: &str) -> UserId {
        UserId::parse(s).unwrap()
    }

    #[cfg(unix)]
    fn mode(path: &Path) -> u32 {
        use std::os::unix::fs::PermissionsExt;
        fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn the_key_file_is_created_private_and_reused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub").join("master.key");
        let first = LocalKeys::open_or_create(&path).unwrap();
        assert_eq!(fs::metadata(&path).unwrap().len(), 32);
        #[cfg(unix)]
        assert_eq!(mode(&path), 0o600);
        let again = LocalKeys::open_or_create(&path).unwrap();
        assert_eq!(first.derive("x"), again.derive("x"));
        assert_ne!(first.derive("x"), first.derive("y"));
        // Nothing but the key file is left in the directory.
        assert_eq!(fs::read_dir(path.parent().unwrap()).unwrap().count(), 1);
    }

    #[cfg(unix)]
    #[test]
    fn a_key_file_others_can_read_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("master.key");
        LocalKeys::open_or_create(&path).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o640)).unwrap();
        let err = LocalKeys::open_or_create(&path).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::PermissionDenied);
        assert!(err.to_string().contains("master.key"), "{err}");
    }

    #[test]
    fn a_key_file_of_the_wrong_size_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("master.key");
        LocalKeys::open_or_create(&path).unwrap();
        let mut file = OpenOptions::new().append(true).open(&path).unwrap();
        file.write_all(b"x").unwrap();
        let err = LocalKeys::open_or_create(&path).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
    }

    #[tokio::test]
    async fn wrapped_keys_unwrap_only_for_their_user() {
        let dir = tempfile::tempdir().unwrap();
        let keys = LocalKeys::open_or_create(&dir.path().join("master.key")).unwrap();
        let (alice, bob) = (user("alice"), user("bob"));
        let (key, wrapped) = keys.generate(&alice).await.unwrap();
        let unwrapped = keys.unwrap(&alice, &wrapped).await.unwrap();
        assert_eq!(*key.0, *unwrapped.0);
        assert!(matches!(
            keys.unwrap(&bob, &wrapped).await,
            Err(KeysError::Unwrap)
        ));
        let mut tampered = wrapped.clone();
        tampered.0[20] ^= 1;
        assert!(matches!(
            keys.unwrap(&alice, &tampered).await,
            Err(KeysError::Unwrap)
        ));
        assert!(matches!(
            keys.unwrap(&alice, &WrappedKey(vec![1, 2, 3])).await,
            Err(KeysError::Unwrap)
        ));

        // Another master key cannot unwrap it either.
        let other = LocalKeys::open_or_create(&dir.path().join("other.key")).unwrap();
        assert!(matches!(
            other.unwrap(&alice, &wrapped).await,
            Err(KeysError::Unwrap)
        ));

        // Two data keys differ.
        let (key2, _) = keys.generate(&alice).await.unwrap();
        assert_ne!(*key.0, *key2.0);
    }
}
