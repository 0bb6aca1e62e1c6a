//! Empty library target of the `servelab-e2e` package; the end-to-end tests live in
//! `tests/tests.rs` and its modules.
