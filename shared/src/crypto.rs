//! STUB: crypto (being written).
