//! Shared helpers of the ZooKeeper tests.
#![allow(dead_code)]

pub mod chromium;
pub mod cli;
pub mod cluster;
pub mod elector_driver;
pub mod file_server;
pub mod tcp_proxy;
pub mod zk_proxy;
pub mod zk_server;

use async_channel::Receiver;
use elector_driver::Outcome;
use regent_core::elector::Config;
use regent_core::{Addr, MasterId, Millis};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Generous bound for anything to happen (never a timing assertion).
pub const BOUND: Duration = Duration::from_secs(40);

/// A unique root per test, so tests sharing a server never meet.
pub fn unique_root(name: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    format!("/regent-test/{name}-{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed))
}

/// An elector config with a fresh GUID and a `timeout_ms` session.
pub fn elector_config(root: &str, id: &str, guid: u64, timeout_ms: u64) -> Config {
    let mut c = Config::new(root, guid, MasterId::new(id), Addr::new(format!("{id}.test:5050")));
    c.session_timeout = Millis(timeout_ms);
    c.retry_interval = Millis(300);
    c
}

/// Waits (at most `bound`) for an outcome matching `pred`; returns it and
/// everything seen before.
pub async fn wait_outcome(
    rx: &Receiver<Outcome>,
    bound: Duration,
    mut pred: impl FnMut(&Outcome) -> bool,
) -> Result<(Outcome, Vec<Outcome>), Vec<Outcome>> {
    let deadline = Instant::now() + bound;
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let next = smol::future::or(async { rx.recv().await.ok() }, async {
            async_io::Timer::after(left).await;
            None
        })
        .await;
        match next {
            Some(o) if pred(&o) => return Ok((o, seen)),
            Some(o) => seen.push(o),
            None => return Err(seen),
        }
    }
}

/// Polls `f` until it returns `Some` or `bound` passes.
pub async fn eventually<T, F, Fut>(bound: Duration, mut f: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + bound;
    loop {
        if let Some(t) = f().await {
            return Some(t);
        }
        if Instant::now() > deadline {
            return None;
        }
        async_io::Timer::after(Duration::from_millis(100)).await;
    }
}
