//! The `regent` command line.
fn main() {}
