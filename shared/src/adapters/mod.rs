//! Adapters: implementations of the ports.

#[cfg(feature = "aws")]
pub mod aws;
/// The embedded store (redb), a crate of its own so that only the local back end links redb.
#[cfg(any(test, feature = "local"))]
pub use nib_embedded as embedded;
pub mod local_assets;
pub mod local_keys;
pub mod notion;
pub mod rate_limit;
#[cfg(feature = "ocr")]
pub mod remote_ocr;
