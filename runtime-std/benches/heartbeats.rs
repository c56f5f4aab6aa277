//! Heartbeats per second one master sustains from 1,000 connected workers:
//! `regent --runtime std master` (std threads) against `regent master` (smol), both
//! `--recovery none`, each a process of its own on loopback.
//!
//! `cargo bench -p regent-std --bench heartbeats`
//! (`REGENT_BENCH_WORKERS` changes the worker count, `REGENT_BENCH_SECS`
//! the measured seconds, `REGENT_BENCH_WINDOW` the heartbeats in flight per
//! worker).
//!
//! The load generator is this process: one thread (a smol executor) opens
//! every worker connection, registers each with a fresh incarnation
//! (`Hello` + `RegisterWorker`), then keeps `WINDOW` `WorkerHeartbeat`s in
//! flight per connection, sending one more for every `HeartbeatAck`. After
//! every worker is registered and a warm-up second, the acknowledgements
//! counted over the measured seconds give the figure. The generator shares
//! the machine's cores with the master, so the figure is a floor of what the
//! master alone could do, comparable between the two runtimes.
//!
//! `regent` belongs to another package: it is built here with
//! `cargo build --profile bench -p regent-smol --bin regent` into this
//! target dir (a no-op when fresh).

use regent_core::auth::{FrameOpener, FrameReader};
use regent_core::codec::{encode_into, DecoderConfig, DEFAULT_MAX_FRAME};
use regent_core::protocol::{Hello, Message, RegisterWorker, Role, PROTOCOL_VERSION};
use regent_core::{Epoch, Incarnation, WorkerId};
use smol::io::{AsyncReadExt, AsyncWriteExt};
use smol::net::TcpStream;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The `regent` binary (both runtimes), built in this target dir's bench
/// profile; this bench binary lives in `target/<profile>/deps/`.
fn regent_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("the bench binary's path");
    let profile_dir = exe.parent().and_then(Path::parent).expect("target/<profile>/deps/<bench>");
    let target = profile_dir.parent().expect("the target dir");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let status = Command::new(cargo)
        .args(["build", "-q", "--profile", "bench", "-p", "regent-smol", "--bin", "regent"])
        .env("CARGO_TARGET_DIR", target)
        .current_dir(workspace)
        .status()
        .expect("run cargo build for regent");
    assert!(status.success(), "building regent failed: {status}");
    profile_dir.join("regent")
}

struct Master(Child);

impl Drop for Master {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_master(bin: &Path, runtime: &str, addr: &str) -> Master {
    let child = Command::new(bin)
        .args(["--runtime", runtime])
        .args(["master", "--id", "bench", "--listen", addr, "--recovery", "none"])
        .args(["--worker-timeout", "600000"])
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(addr).is_err() {
        assert!(Instant::now() < deadline, "{} does not listen on {addr}", bin.display());
        std::thread::sleep(Duration::from_millis(50));
    }
    Master(child)
}

fn incarnation() -> u64 {
    let mut b = [0u8; 8];
    getrandom::fill(&mut b).expect("OS entropy");
    u64::from_le_bytes(b)
}

#[derive(Default)]
struct Counters {
    registered: AtomicU64,
    acks: AtomicU64,
    failed: AtomicU64,
}

/// One worker connection: register, then heartbeats with `window` in flight.
async fn worker(addr: String, i: usize, window: usize, c: Arc<Counters>) -> Result<(), String> {
    let mut s = TcpStream::connect(&addr).await.map_err(|e| e.to_string())?;
    s.set_nodelay(true).map_err(|e| e.to_string())?;
    let inc = Incarnation(incarnation());
    let mut out = Vec::new();
    encode_into(
        &Message::Hello(Hello {
            version: PROTOCOL_VERSION,
            cluster: "regent".into(),
            role: Role::Worker,
            node: format!("bench-w{i}"),
        }),
        &mut out,
    );
    encode_into(
        &Message::RegisterWorker(RegisterWorker {
            users: Default::default(),
            resources: Default::default(),
            host: Default::default(),
            ports: Default::default(),
            worker: WorkerId::new(format!("bench-w{i}")),
            incarnation: inc,
            cores: 8,
            memory_mb: 8192,
            executors: vec![],
            epoch_seen: Epoch(0),
            launch_seen: 0,
            attributes: vec![],
        }),
        &mut out,
    );
    s.write_all(&out).await.map_err(|e| e.to_string())?;
    out.clear();
    let heartbeat = {
        let mut b = Vec::new();
        encode_into(&Message::WorkerHeartbeat { incarnation: inc }, &mut b);
        b
    };
    let cfg = DecoderConfig { max_frame: DEFAULT_MAX_FRAME, cluster: Some("regent".into()) };
    let mut reader = FrameReader::new(DEFAULT_MAX_FRAME);
    let mut opener = FrameOpener::plain();
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = s.read(&mut buf).await.map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("master closed".into());
        }
        reader.feed(&buf[..n]).map_err(|e| e.to_string())?;
        while let Some(body) = reader.next_body().map_err(|e| e.to_string())? {
            match opener.open(body, &cfg).map_err(|e| e.to_string())? {
                Message::Registered { .. } => {
                    c.registered.fetch_add(1, Ordering::Relaxed);
                    for _ in 0..window {
                        out.extend_from_slice(&heartbeat);
                    }
                }
                Message::HeartbeatAck { .. } => {
                    c.acks.fetch_add(1, Ordering::Relaxed);
                    out.extend_from_slice(&heartbeat);
                }
                Message::Shutdown { reason, .. } => return Err(reason),
                _ => {}
            }
        }
        if !out.is_empty() {
            s.write_all(&out).await.map_err(|e| e.to_string())?;
            out.clear();
        }
    }
}

/// Heartbeats per second acknowledged by the master at `addr`.
fn measure(name: &str, addr: &str, workers: usize, window: usize, secs: u64) -> f64 {
    let c = Arc::new(Counters::default());
    let ex = Rc::new(smol::LocalExecutor::new());
    let result = smol::block_on(ex.run({
        let ex = ex.clone();
        let c = c.clone();
        let addr = addr.to_owned();
        async move {
            for i in 0..workers {
                let (addr, c) = (addr.clone(), c.clone());
                ex.spawn(async move {
                    if let Err(e) = worker(addr, i, window, c.clone()).await {
                        if c.failed.fetch_add(1, Ordering::Relaxed) == 0 {
                            eprintln!("  a worker connection failed: {e}");
                        }
                    }
                })
                .detach();
            }
            let deadline = Instant::now() + Duration::from_secs(60);
            while c.registered.load(Ordering::Relaxed) < workers as u64 {
                if Instant::now() > deadline || c.failed.load(Ordering::Relaxed) > 0 {
                    return Err(format!(
                        "{} of {workers} workers registered, {} failed",
                        c.registered.load(Ordering::Relaxed),
                        c.failed.load(Ordering::Relaxed)
                    ));
                }
                smol::Timer::after(Duration::from_millis(20)).await;
            }
            smol::Timer::after(Duration::from_secs(1)).await;
            let (a0, t0) = (c.acks.load(Ordering::Relaxed), Instant::now());
            smol::Timer::after(Duration::from_secs(secs)).await;
            let (a1, t1) = (c.acks.load(Ordering::Relaxed), Instant::now());
            Ok((a1 - a0) as f64 / (t1 - t0).as_secs_f64())
        }
    }));
    match result {
        Ok(rate) => {
            println!(
                "{name}: {rate:>10.0} heartbeats/s from {workers} workers ({window} in flight each, \
                 {secs} s measured)"
            );
            rate
        }
        Err(e) => panic!("{name}: {e}"),
    }
}

fn free_addr() -> String {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().to_string()
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` does not: then
    // only check that the benchmark builds.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let workers = env_or("REGENT_BENCH_WORKERS", 1000) as usize;
    let secs = env_or("REGENT_BENCH_SECS", 5);
    let window = env_or("REGENT_BENCH_WINDOW", 4) as usize;
    let bin = regent_bin();
    println!("heartbeats: one master, {workers} workers, recovery none");
    for (name, runtime) in
        [("regent --runtime std master", "std"), ("regent master (smol)", "smol")]
    {
        let addr = free_addr();
        let _m = start_master(&bin, runtime, &addr);
        measure(name, &addr, workers, window, secs);
    }
}
