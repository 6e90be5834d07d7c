//! Adapters: implementations of the ports.

#[cfg(feature = "aws")]
pub mod aws;
pub mod embedded;
pub mod local_assets;
pub mod local_keys;
pub mod notion;
pub mod rate_limit;
#[cfg(feature = "ocr")]
pub mod remote_ocr;
