//! STUB: the redb store (being written).
