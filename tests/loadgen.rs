//! End-to-end tests of loadgen (being written).
