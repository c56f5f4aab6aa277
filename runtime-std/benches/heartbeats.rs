//! Heartbeats per second a master sustains from 1,000 workers (in progress).

fn main() {}
