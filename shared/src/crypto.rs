//! AES-256-GCM field sealing and the per-user key vault (docs/design.md §6).
//!
//! Each user has one or more data keys, stored wrapped by the `Keys` back end under
//! `U#{user}` / `KEY#{version:08}`. The [`Vault`] unwraps them into a [`UserKeys`] keyring and
//! caches it for a bounded time, so a warm process calls the key service about once per user.
//! Plaintext data keys never leave this module: callers only get `seal`, `open` and `blind`.
//!
//! # Formats
//!
//! - A sealed field is `0x01 | version (u32, big-endian) | nonce (12 bytes) | ciphertext+tag`.
//!   The associated data binds the ciphertext to the user, the item key and the field name, and
//!   to the header, so a ciphertext copied anywhere else does not open.
//! - The keys actually used are derived from each data key with HMAC-SHA256 and a label, so one
//!   data key never serves two purposes: an encryption key per version, and one index key (for
//!   blind index terms, task dedup keys and page stems) derived from the *first* version, since
//!   those values must stay stable when the key is rotated.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aes_gcm::aead::{Aead, AeadInPlace, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Nonce};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use hmac::{Hmac, Mac};
use rand::RngCore;
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use tokio::sync::OnceCell;
use zeroize::Zeroizing;

use crate::domain::UserId;
use crate::ports::{Cond, DataKey, Item, Keys, KeysError, Query, Store, StoreError, WrappedKey};

/// The first byte of every sealed value; a new layout gets a new byte.
const FORMAT_V1: u8 = 1;
const HEADER_LEN: usize = 1 + 4;
const NONCE_LEN: usize = 12;
const TAG_LEN: usize = 16;

/// Labels for the subkeys derived from a data key. Changing one makes old data unreadable.
const LABEL_ENCRYPT: &[u8] = b"nib/field-encryption/v1";
const LABEL_INDEX: &[u8] = b"nib/blind-index/v1";

/// The sort-key prefix of a user's wrapped key items.
const KEY_SK_PREFIX: &str = "KEY#";

/// How many times `rotate` retries when another process adds a version at the same moment.
const ROTATE_ATTEMPTS: usize = 5;

type HmacSha256 = Hmac<Sha256>;

#[derive(Debug, thiserror::Error)]
pub enum CryptoError {
    /// The ciphertext does not open: wrong key, wrong associated data, or tampered. Deliberately
    /// without detail, so it tells an attacker nothing.
    #[error("sealed value does not open")]
    Open,
    /// The value was sealed under a key version this keyring does not have (perhaps another
    /// process rotated the key after this keyring was loaded: `Vault::refresh` and retry).
    #[error("sealed under unknown key version {0}")]
    UnknownKeyVersion(u32),
    #[error("key service failed")]
    Keys(#[from] KeysError),
    #[error("key store failed")]
    Store(#[from] StoreError),
    /// A sealed value or a stored key item does not have the expected layout.
    #[error("malformed sealed value or key item")]
    Malformed,
}

/// Where a sealed value lives; it becomes the associated data, so the value opens only there.
#[derive(Debug, Clone, Copy)]
pub struct Aad<'a> {
    pub user: &'a UserId,
    pub pk: &'a str,
    pub sk: &'a str,
    pub field: &'a str,
}

impl Aad<'_> {
    /// Length-prefixes every part so that no two different `Aad`s encode alike (`"a#" + "b"`
    /// and `"a" + "#b"` must differ), and appends the sealed value's header so a changed format
    /// byte or key version also fails authentication.
    fn encode(&self, header: &[u8]) -> Vec<u8> {
        let parts: [&[u8]; 5] = [
            b"nib-field",
            self.user.as_str().as_bytes(),
            self.pk.as_bytes(),
            self.sk.as_bytes(),
            self.field.as_bytes(),
        ];
        let mut out = Vec::with_capacity(parts.iter().map(|p| p.len() + 4).sum::<usize>() + 8);
        for part in parts {
            out.extend_from_slice(&(part.len() as u32).to_be_bytes());
            out.extend_from_slice(part);
        }
        out.extend_from_slice(header);
        out
    }
}

/// One user's keyring: every data key version, the subkeys derived from them, and the version
/// new writes use.
pub struct UserKeys {
    user: UserId,
    /// The data keys themselves, kept so the keyring is complete; only subkeys are used.
    data: BTreeMap<u32, Zeroizing<[u8; 32]>>,
    /// The field-encryption subkey of each version.
    encrypt: BTreeMap<u32, Zeroizing<[u8; 32]>>,
    /// The blind-index subkey, from the first version so it never changes.
    index: Zeroizing<[u8; 32]>,
    /// The highest version: new seals use it.
    current: u32,
}

impl std::fmt::Debug for UserKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserKeys")
            .field("user", &self.user)
            .field("versions", &self.data.keys().collect::<Vec<_>>())
            .field("current", &self.current)
            .finish_non_exhaustive()
    }
}

fn hmac(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    // HMAC accepts keys of any length, so this cannot fail.
    let mut mac = <HmacSha256 as Mac>::new_from_slice(key).expect("HMAC takes keys of any length");
    for part in parts {
        mac.update(part);
    }
    mac.finalize().into_bytes().into()
}

impl UserKeys {
    /// A keyring of one fixed key, for unit tests of code that seals and blinds.
    #[cfg(test)]
    pub(crate) fn for_tests(user: &UserId) -> UserKeys {
        let keys = BTreeMap::from([(1, DataKey(Zeroizing::new([7; 32])))]);
        UserKeys::new(user.clone(), keys).expect("one key")
    }

    /// A keyring from the user's data keys. `None` when there are none.
    fn new(user: UserId, keys: BTreeMap<u32, DataKey>) -> Option<UserKeys> {
        let first_key = keys.values().next()?;
        let current = *keys.keys().next_back()?;
        let index = Zeroizing::new(hmac(&first_key.0[..], &[LABEL_INDEX]));
        let encrypt = keys
            .iter()
            .map(|(&v, k)| (v, Zeroizing::new(hmac(&k.0[..], &[LABEL_ENCRYPT]))))
            .collect();
        let data = keys.into_iter().map(|(v, k)| (v, k.0)).collect();
        Some(UserKeys {
            user,
            data,
            encrypt,
            index,
            current,
        })
    }

    /// The user this keyring belongs to.
    pub fn user(&self) -> &UserId {
        &self.user
    }

    /// The key version new seals use.
    pub fn current_version(&self) -> u32 {
        self.current
    }

    fn cipher(&self, version: u32) -> Result<Aes256Gcm, CryptoError> {
        let key = self
            .encrypt
            .get(&version)
            .ok_or(CryptoError::UnknownKeyVersion(version))?;
        Ok(Aes256Gcm::new_from_slice(&key[..]).expect("AES-256 keys are 32 bytes"))
    }

    /// Seals `plaintext` for the place `aad` names, under the current key version and a fresh
    /// random nonce.
    pub fn seal(&self, aad: &Aad, plaintext: &[u8]) -> Vec<u8> {
        debug_assert_eq!(aad.user, &self.user, "sealing for another user's item");
        let mut header = [0u8; HEADER_LEN];
        header[0] = FORMAT_V1;
        header[1..].copy_from_slice(&self.current.to_be_bytes());
        let mut nonce = [0u8; NONCE_LEN];
        // ThreadRng is a CSPRNG seeded and periodically reseeded from the OS.
        rand::rng().fill_bytes(&mut nonce);
        let cipher = self
            .cipher(self.current)
            .expect("the current version is in the keyring");
        let ciphertext = cipher
            .encrypt(
                Nonce::from_slice(&nonce),
                Payload {
                    msg: plaintext,
                    aad: &aad.encode(&header),
                },
            )
            .expect("AES-GCM encryption fails only for absurdly long input");
        let mut out = Vec::with_capacity(HEADER_LEN + NONCE_LEN + ciphertext.len());
        out.extend_from_slice(&header);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&ciphertext);
        out
    }

    /// Opens a value sealed by [`UserKeys::seal`] for the same place.
    pub fn open(&self, aad: &Aad, sealed: &[u8]) -> Result<Vec<u8>, CryptoError> {
        if sealed.len() < HEADER_LEN + NONCE_LEN + TAG_LEN || sealed[0] != FORMAT_V1 {
            return Err(CryptoError::Malformed);
        }
        let (header, rest) = sealed.split_at(HEADER_LEN);
        let (nonce, ciphertext) = rest.split_at(NONCE_LEN);
        let version = u32::from_be_bytes(header[1..].try_into().expect("four bytes"));
        self.cipher(version)?
            .decrypt(
                Nonce::from_slice(nonce),
                Payload {
                    msg: ciphertext,
                    aad: &aad.encode(header),
                },
            )
            .map_err(|_| CryptoError::Open)
    }

    /// [`UserKeys::open`] without a copy: decrypts `sealed` where it lies and returns the
    /// plaintext, a part of it (for large values read once, such as vector blocks: no second
    /// buffer of their size).
    pub fn open_in_place<'s>(
        &self,
        aad: &Aad,
        sealed: &'s mut [u8],
    ) -> Result<&'s [u8], CryptoError> {
        if sealed.len() < HEADER_LEN + NONCE_LEN + TAG_LEN || sealed[0] != FORMAT_V1 {
            return Err(CryptoError::Malformed);
        }
        let (header, rest) = sealed.split_at_mut(HEADER_LEN);
        let (nonce, rest) = rest.split_at_mut(NONCE_LEN);
        let (ciphertext, tag) = rest.split_at_mut(rest.len() - TAG_LEN);
        let version = u32::from_be_bytes(header[1..].try_into().expect("four bytes"));
        self.cipher(version)?
            .decrypt_in_place_detached(
                Nonce::from_slice(nonce),
                &aad.encode(header),
                ciphertext,
                aes_gcm::Tag::from_slice(tag),
            )
            .map_err(|_| CryptoError::Open)?;
        Ok(ciphertext)
    }

    /// [`UserKeys::seal`] for text.
    pub fn seal_str(&self, aad: &Aad, plaintext: &str) -> Vec<u8> {
        self.seal(aad, plaintext.as_bytes())
    }

    /// [`UserKeys::open`] for text; a value that opens but is not UTF-8 is `Malformed`.
    pub fn open_str(&self, aad: &Aad, sealed: &[u8]) -> Result<String, CryptoError> {
        String::from_utf8(self.open(aad, sealed)?).map_err(|_| CryptoError::Malformed)
    }

    /// A keyed, deterministic token for `value` (32 hex characters): equal inputs give equal
    /// tokens for this user, and nothing about the input can be learned without the key. Used
    /// for blind search terms (`domain` "term"), task dedup keys ("task") and page stems
    /// ("stem"); the domain keeps the uses apart.
    pub fn blind(&self, domain: &str, value: &str) -> String {
        // The separator keeps domain and value apart only if domains never contain it.
        debug_assert!(
            !domain.contains('\x1f'),
            "a blind domain contains the separator"
        );
        let mac = hmac(
            &self.index[..],
            &[domain.as_bytes(), b"\x1f", value.as_bytes()],
        );
        hex::encode(&mac[..16])
    }
}

/// The body of a `KEY#` item.
#[derive(Serialize, Deserialize)]
struct KeyRecord {
    wrapped: String,
}

fn key_pk(user: &UserId) -> String {
    format!("U#{user}")
}

fn key_sk(version: u32) -> String {
    format!("{KEY_SK_PREFIX}{version:08}")
}

/// A cache slot. The `OnceCell` makes concurrent first uses of one user wait for a single load
/// instead of each unwrapping (or generating) a key.
struct Slot {
    keys: OnceCell<Arc<UserKeys>>,
    created: Instant,
}

/// Loads, creates, rotates and caches users' keyrings.
pub struct Vault {
    store: Arc<dyn Store>,
    keys: Arc<dyn Keys>,
    capacity: usize,
    ttl: Duration,
    cache: Mutex<HashMap<UserId, Arc<Slot>>>,
}

impl std::fmt::Debug for Vault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vault")
            .field("capacity", &self.capacity)
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

impl Vault {
    /// A vault caching at most `cache_capacity` keyrings (at least one), each for `cache_ttl`.
    pub fn new(
        store: Arc<dyn Store>,
        keys: Arc<dyn Keys>,
        cache_capacity: usize,
        cache_ttl: Duration,
    ) -> Vault {
        Vault {
            // A deleted user's key is never minted again by a call still in flight.
            store: Arc::new(crate::notebook::guard::GuardedStore::new(store)),
            keys,
            capacity: cache_capacity.max(1),
            ttl: cache_ttl,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// The user's keyring, from the cache when fresh; creates the user's first key when they
    /// have none.
    pub async fn user_keys(&self, user: &UserId) -> Result<Arc<UserKeys>, CryptoError> {
        let slot = self.slot(user);
        slot.keys
            .get_or_try_init(|| self.load_or_create(user))
            .await
            .cloned()
    }

    /// Drops the cached keyring and loads it again, e.g. after `UnknownKeyVersion` when another
    /// process may have rotated the key.
    pub async fn refresh(&self, user: &UserId) -> Result<Arc<UserKeys>, CryptoError> {
        self.forget(user);
        self.user_keys(user).await
    }

    /// Drops the user's cached keyring (the next use loads it again).
    pub fn forget(&self, user: &UserId) {
        self.lock_cache().remove(user);
    }

    /// Adds a new key version for the user and returns it. New seals use it; older versions
    /// stay in the keyring so older values still open.
    pub async fn rotate(&self, user: &UserId) -> Result<u32, CryptoError> {
        for _ in 0..ROTATE_ATTEMPTS {
            // Read the stored versions, not the cache: another process may have rotated already.
            let mut keys = self.load(user).await?;
            let next = keys.keys().next_back().map_or(1, |v| v + 1);
            let (key, wrapped) = self.keys.generate(user).await?;
            match self.put_key(user, next, &wrapped).await {
                Ok(()) => {
                    keys.insert(next, key);
                    let ring = UserKeys::new(user.clone(), keys).expect("at least one key");
                    self.install(user, ring);
                    return Ok(next);
                }
                // Another process took this version number at the same moment: try the next.
                Err(StoreError::ConditionFailed { .. }) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(StoreError::Conflict.into())
    }

    fn lock_cache(&self) -> std::sync::MutexGuard<'_, HashMap<UserId, Arc<Slot>>> {
        // A panic while holding this lock cannot leave the map inconsistent (each operation is
        // a single insert or remove), so a poisoned lock is still usable.
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The user's cache slot, replacing an expired one and evicting the oldest when full.
    fn slot(&self, user: &UserId) -> Arc<Slot> {
        let mut cache = self.lock_cache();
        if let Some(slot) = cache.get(user)
            && slot.created.elapsed() < self.ttl
        {
            return slot.clone();
        }
        self.insert_slot(&mut cache, user, OnceCell::new())
    }

    /// Puts a freshly built keyring in the cache.
    fn install(&self, user: &UserId, ring: UserKeys) {
        let mut cache = self.lock_cache();
        self.insert_slot(&mut cache, user, OnceCell::from(Arc::new(ring)));
    }

    fn insert_slot(
        &self,
        cache: &mut HashMap<UserId, Arc<Slot>>,
        user: &UserId,
        keys: OnceCell<Arc<UserKeys>>,
    ) -> Arc<Slot> {
        cache.remove(user);
        cache.retain(|_, slot| slot.created.elapsed() < self.ttl);
        while cache.len() >= self.capacity {
            let oldest = cache
                .iter()
                .min_by_key(|(_, slot)| slot.created)
                .map(|(user, _)| user.clone());
            match oldest {
                Some(oldest) => cache.remove(&oldest),
                None => break,
            };
        }
        let slot = Arc::new(Slot {
            keys,
            created: Instant::now(),
        });
        cache.insert(user.clone(), slot.clone());
        slot
    }

    /// Loads the user's keyring, creating the first key if there is none.
    async fn load_or_create(&self, user: &UserId) -> Result<Arc<UserKeys>, CryptoError> {
        let keys = self.load(user).await?;
        if let Some(ring) = UserKeys::new(user.clone(), keys) {
            return Ok(Arc::new(ring));
        }
        let (key, wrapped) = self.keys.generate(user).await?;
        match self.put_key(user, 1, &wrapped).await {
            Ok(()) => {
                let ring = UserKeys::new(user.clone(), BTreeMap::from([(1, key)]));
                Ok(Arc::new(ring.expect("one key")))
            }
            // Another process created the first key at the same moment: use theirs.
            Err(StoreError::ConditionFailed { .. }) => {
                let keys = self.load(user).await?;
                UserKeys::new(user.clone(), keys)
                    .map(Arc::new)
                    .ok_or(CryptoError::Malformed)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Reads and unwraps every stored key version of the user.
    async fn load(&self, user: &UserId) -> Result<BTreeMap<u32, DataKey>, CryptoError> {
        let items = self
            .store
            .query_all(Query::table(key_pk(user), KEY_SK_PREFIX));
        let mut keys = BTreeMap::new();
        for item in items.await? {
            let version = item
                .sk
                .strip_prefix(KEY_SK_PREFIX)
                .and_then(|v| v.parse::<u32>().ok())
                .ok_or(CryptoError::Malformed)?;
            let record: KeyRecord =
                serde_json::from_slice(&item.body).map_err(|_| CryptoError::Malformed)?;
            let wrapped = BASE64
                .decode(record.wrapped)
                .map_err(|_| CryptoError::Malformed)?;
            let key = self.keys.unwrap(user, &WrappedKey(wrapped)).await?;
            keys.insert(version, key);
        }
        Ok(keys)
    }

    /// Stores a wrapped key version, failing with `ConditionFailed` if it already exists.
    async fn put_key(
        &self,
        user: &UserId,
        version: u32,
        wrapped: &WrappedKey,
    ) -> Result<(), StoreError> {
        let body = serde_json::to_vec(&KeyRecord {
            wrapped: BASE64.encode(&wrapped.0),
        })
        .expect("a struct of one string serializes");
        let item = Item {
            pk: key_pk(user),
            sk: key_sk(version),
            gsi1: None,
            version: 1,
            expires_at: None,
            body,
        };
        self.store.put(item, Cond::NotExists).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use async_trait::async_trait;

    use super::*;
    use crate::adapters::embedded::EmbeddedStore;
    use crate::adapters::local_keys::LocalKeys;

    fn user(s: &str) -> UserId {
        UserId::parse(s).unwrap()
    }

    fn ring(user: &UserId, keys: &[(u32, u8)]) -> UserKeys {
        let keys = keys
            .iter()
            .map(|&(v, b)| (v, DataKey(Zeroizing::new([b; 32]))))
            .collect();
        UserKeys::new(user.clone(), keys).unwrap()
    }

    fn aad<'a>(user: &'a UserId, pk: &'a str, sk: &'a str, field: &'a str) -> Aad<'a> {
        Aad {
            user,
            pk,
            sk,
            field,
        }
    }

    #[test]
    fn seal_then_open_round_trips() {
        let u = user("alice");
        let keys = ring(&u, &[(1, 7)]);
        let a = aad(&u, "U#alice", "PAGE#1", "text");
        for plaintext in [&b""[..], b"x", &[0u8; 1000][..]] {
            let sealed = keys.seal(&a, plaintext);
            assert_eq!(
                sealed.len(),
                plaintext.len() + HEADER_LEN + NONCE_LEN + TAG_LEN
            );
            assert_eq!(keys.open(&a, &sealed).unwrap(), plaintext);
            let mut in_place = sealed.clone();
            assert_eq!(keys.open_in_place(&a, &mut in_place).unwrap(), plaintext);
        }
        let sealed = keys.seal_str(&a, "héllo");
        assert_eq!(keys.open_str(&a, &sealed).unwrap(), "héllo");
    }

    #[test]
    fn a_ciphertext_moved_elsewhere_does_not_open() {
        let (alice, bob) = (user("alice"), user("bob"));
        let keys = ring(&alice, &[(1, 7)]);
        let sealed = keys.seal(&aad(&alice, "U#alice", "PAGE#1", "text"), b"secret");
        let elsewhere = [
            aad(&alice, "U#alice", "PAGE#2", "text"),
            aad(&alice, "U#alicf", "PAGE#1", "text"),
            aad(&alice, "U#alice", "PAGE#1", "markdown"),
            aad(&bob, "U#alice", "PAGE#1", "text"),
            // Shifting a character between parts must not give the same associated data.
            aad(&alice, "U#alic", "ePAGE#1", "text"),
            aad(&alice, "U#alice", "PAGE#", "1text"),
        ];
        for a in elsewhere {
            assert!(
                matches!(keys.open(&a, &sealed), Err(CryptoError::Open)),
                "{a:?}"
            );
        }
    }

    #[test]
    fn tampering_with_any_byte_fails() {
        let u = user("alice");
        let keys = ring(&u, &[(1, 7)]);
        let a = aad(&u, "U#alice", "PAGE#1", "text");
        let sealed = keys.seal(&a, b"secret text");
        for i in 0..sealed.len() {
            let mut bad = sealed.clone();
            bad[i] ^= 0x01;
            assert!(keys.open(&a, &bad).is_err(), "byte {i}");
            assert!(keys.open_in_place(&a, &mut bad).is_err(), "byte {i}");
        }
        assert!(keys.open(&a, &sealed[..sealed.len() - 1]).is_err());
        assert!(matches!(keys.open(&a, &[]), Err(CryptoError::Malformed)));
    }

    #[test]
    fn two_seals_of_the_same_plaintext_differ() {
        let u = user("alice");
        let keys = ring(&u, &[(1, 7)]);
        let a = aad(&u, "U#alice", "PAGE#1", "text");
        assert_ne!(keys.seal(&a, b"same"), keys.seal(&a, b"same"));
    }

    #[test]
    fn another_key_does_not_open() {
        let u = user("alice");
        let a = aad(&u, "U#alice", "PAGE#1", "text");
        let sealed = ring(&u, &[(1, 7)]).seal(&a, b"secret");
        assert!(matches!(
            ring(&u, &[(1, 8)]).open(&a, &sealed),
            Err(CryptoError::Open)
        ));
    }

    #[test]
    fn blind_is_deterministic_per_user_and_differs_across_users_and_domains() {
        let (alice, bob) = (user("alice"), user("bob"));
        let a = ring(&alice, &[(1, 7)]);
        let b = ring(&bob, &[(1, 8)]);
        let token = a.blind("term", "milk");
        assert_eq!(token.len(), 32);
        assert!(token.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(token, a.blind("term", "milk"));
        assert_ne!(token, b.blind("term", "milk"));
        assert_ne!(token, a.blind("task", "milk"));
        assert_ne!(token, a.blind("term", "milk2"));
    }

    #[test]
    fn rotation_keeps_old_values_readable_and_the_index_stable() {
        let u = user("alice");
        let a = aad(&u, "U#alice", "PAGE#1", "text");
        let v1 = ring(&u, &[(1, 7)]);
        let old = v1.seal(&a, b"old");
        let v2 = ring(&u, &[(1, 7), (2, 9)]);
        assert_eq!(v2.current_version(), 2);
        assert_eq!(v2.open(&a, &old).unwrap(), b"old");
        let new = v2.seal(&a, b"new");
        assert_eq!(&new[1..5], &2u32.to_be_bytes());
        assert!(matches!(
            v1.open(&a, &new),
            Err(CryptoError::UnknownKeyVersion(2))
        ));
        assert_eq!(v1.blind("term", "milk"), v2.blind("term", "milk"));
    }

    /// A `Keys` that counts its calls, to see what the vault caches.
    struct Counting {
        inner: LocalKeys,
        generated: AtomicUsize,
        unwrapped: AtomicUsize,
    }

    #[async_trait]
    impl Keys for Counting {
        async fn generate(&self, user: &UserId) -> Result<(DataKey, WrappedKey), KeysError> {
            self.generated.fetch_add(1, Ordering::SeqCst);
            // Yield so that concurrent callers really interleave.
            tokio::task::yield_now().await;
            self.inner.generate(user).await
        }

        async fn unwrap(&self, user: &UserId, wrapped: &WrappedKey) -> Result<DataKey, KeysError> {
            self.unwrapped.fetch_add(1, Ordering::SeqCst);
            self.inner.unwrap(user, wrapped).await
        }
    }

    struct Fixture {
        _dir: tempfile::TempDir,
        store: Arc<dyn Store>,
        keys: Arc<Counting>,
    }

    fn fixture() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> =
            Arc::new(EmbeddedStore::open(&dir.path().join("nib.redb")).unwrap());
        let keys = Arc::new(Counting {
            inner: LocalKeys::open_or_create(&dir.path().join("master.key")).unwrap(),
            generated: AtomicUsize::new(0),
            unwrapped: AtomicUsize::new(0),
        });
        Fixture {
            _dir: dir,
            store,
            keys,
        }
    }

    impl Fixture {
        fn vault(&self, capacity: usize, ttl: Duration) -> Vault {
            Vault::new(self.store.clone(), self.keys.clone(), capacity, ttl)
        }

        fn counts(&self) -> (usize, usize) {
            (
                self.keys.generated.load(Ordering::SeqCst),
                self.keys.unwrapped.load(Ordering::SeqCst),
            )
        }
    }

    const HOUR: Duration = Duration::from_secs(3600);

    #[tokio::test]
    async fn the_vault_creates_a_key_once_and_caches_it() {
        let f = fixture();
        let alice = user("alice");
        let vault = f.vault(10, HOUR);
        let first = vault.user_keys(&alice).await.unwrap();
        assert_eq!(f.counts(), (1, 0));
        let again = vault.user_keys(&alice).await.unwrap();
        assert!(Arc::ptr_eq(&first, &again));
        assert_eq!(f.counts(), (1, 0));

        // A second process (a new vault over the same store) unwraps the stored key once.
        let other = f.vault(10, HOUR);
        let a = aad(&alice, "U#alice", "PAGE#1", "text");
        let sealed = first.seal(&a, b"secret");
        for _ in 0..3 {
            let keys = other.user_keys(&alice).await.unwrap();
            assert_eq!(keys.open(&a, &sealed).unwrap(), b"secret");
            assert_eq!(keys.blind("term", "x"), first.blind("term", "x"));
        }
        assert_eq!(f.counts(), (1, 1));

        other.forget(&alice);
        other.user_keys(&alice).await.unwrap();
        assert_eq!(f.counts(), (1, 2));
    }

    #[tokio::test]
    async fn the_cache_is_bounded_in_size_and_lifetime() {
        let f = fixture();
        let (alice, bob) = (user("alice"), user("bob"));
        let vault = f.vault(1, HOUR);
        vault.user_keys(&alice).await.unwrap();
        vault.user_keys(&bob).await.unwrap();
        assert_eq!(f.counts(), (2, 0));
        // Bob pushed Alice out.
        vault.user_keys(&alice).await.unwrap();
        assert_eq!(f.counts(), (2, 1));

        let short = f.vault(10, Duration::from_millis(1));
        short.user_keys(&alice).await.unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
        short.user_keys(&alice).await.unwrap();
        assert_eq!(f.counts(), (2, 3));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_first_use_yields_one_key() {
        let f = fixture();
        let alice = user("alice");
        // Many tasks on one vault, and several vaults (processes) racing.
        let vaults: Vec<Arc<Vault>> = (0..4).map(|_| Arc::new(f.vault(10, HOUR))).collect();
        let mut tasks = Vec::new();
        for i in 0..40 {
            let vault = vaults[i % vaults.len()].clone();
            let alice = alice.clone();
            tasks.push(tokio::spawn(async move {
                vault.user_keys(&alice).await.unwrap().blind("term", "x")
            }));
        }
        let mut tokens = Vec::new();
        for task in tasks {
            tokens.push(task.await.unwrap());
        }
        tokens.dedup();
        assert_eq!(tokens.len(), 1);
        // At most one generation per vault, thanks to the per-user slot.
        assert!(f.counts().0 <= vaults.len());
        let stored = f
            .store
            .query(&Query::table("U#alice", "KEY#"))
            .await
            .unwrap();
        assert_eq!(stored.items.len(), 1);
    }

    #[tokio::test]
    async fn rotation_adds_a_version_and_old_values_still_open() {
        let f = fixture();
        let alice = user("alice");
        let vault = f.vault(10, HOUR);
        let a = aad(&alice, "U#alice", "PAGE#1", "text");
        let v1 = vault.user_keys(&alice).await.unwrap();
        let old = v1.seal(&a, b"old");

        assert_eq!(vault.rotate(&alice).await.unwrap(), 2);
        let v2 = vault.user_keys(&alice).await.unwrap();
        assert_eq!(v2.current_version(), 2);
        let new = v2.seal(&a, b"new");
        assert_eq!(&new[1..5], &2u32.to_be_bytes());
        assert_eq!(v2.open(&a, &old).unwrap(), b"old");
        assert_eq!(v2.blind("term", "x"), v1.blind("term", "x"));

        // Another process sees both versions.
        let other = f.vault(10, HOUR);
        let keys = other.user_keys(&alice).await.unwrap();
        assert_eq!(keys.current_version(), 2);
        assert_eq!(keys.open(&a, &old).unwrap(), b"old");
        assert_eq!(keys.open(&a, &new).unwrap(), b"new");
        assert_eq!(other.rotate(&alice).await.unwrap(), 3);
    }

    #[tokio::test]
    async fn a_corrupt_key_item_is_malformed() {
        let f = fixture();
        let alice = user("alice");
        let item = Item {
            pk: "U#alice".into(),
            sk: "KEY#00000001".into(),
            gsi1: None,
            version: 1,
            expires_at: None,
            body: b"{\"wrapped\":\"!!!\"}".to_vec(),
        };
        f.store.put(item, Cond::None).await.unwrap();
        let err = f.vault(10, HOUR).user_keys(&alice).await.unwrap_err();
        assert!(matches!(err, CryptoError::Malformed), "{err:?}");
    }
}
