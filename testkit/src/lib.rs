//! nib's test scaffolding: what the tests of every crate run nib against, kept out of the
//! product crates so that no binary nib ships carries it.
//!
//! # Layout
//!
//! - [`emulator`]: moto's server on 127.0.0.1 (from the project's `.venv`), a fresh table,
//!   bucket and KMS key per test, and fault injection before a chosen AWS operation.
//! - [`store_suite`]: the `Store` conformance suite that the embedded store and the DynamoDB
//!   adapter both pass.
//! - [`notion_standin`]: a local Notion (the three endpoints nib calls, their documented shapes
//!   and errors).
//! - [`pdf`]: small PDFs that parse, for tests that need ink.
//! - [`textract_standin`]: a local Amazon Textract `DetectDocumentText` (moto's reads no text).
//! - [`openai_standin`], [`vision_standin`]: a local OpenAI-compatible chat-completions
//!   endpoint with image input, and a local Google Cloud Vision `images:annotate`.
//!
//! The tests of nib-shared that need one of these are this crate's `tests/library/`; the
//! integration tests (`tests/`, package `nib-tests`) use them too.

pub mod emulator;
pub mod notion_standin;
pub mod openai_standin;
pub mod pdf;
pub mod store_suite;
pub mod textract_standin;
pub mod vision_standin;
