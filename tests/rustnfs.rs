//! End-to-end tests of rustnfs (being written).
