//! STUB: local key file (being written).
