//! STUB: local assets (being written).
