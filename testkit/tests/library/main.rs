//! nib-shared's tests that need the scaffolding of this crate: the emulator, the store suite
//! or a stand-in. They would be unit tests beside the code, but nib-shared cannot depend on
//! nib-testkit (its tests would link a second copy of nib-shared, whose types do not match the
//! scaffolding's), so they test it from here, through its public API.
//!
//! One test binary (fast to link); a module per nib-shared module tested.

mod aws;
mod bundle;
mod embedded;
mod remote_ocr;
mod textract;
