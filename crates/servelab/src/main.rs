//! servelab (being written).
fn main() {}
