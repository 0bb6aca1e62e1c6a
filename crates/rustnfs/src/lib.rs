//! rustnfs (being written).
