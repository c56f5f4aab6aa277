//! Recovery at scale (docs/design.md#issue-13 item 4): how long a new leader takes from
//! its election to RECOVERING with every record loaded, for N worker
//! records (2,000, 20,000 and 100,000 by default) in a real ZooKeeper
//! (tickTime 200, the Debian server, its default `jute.maxbuffer`) and in a
//! filesystem store.
//!
//! For each N the records are planted once (ZooKeeper: with a plain client,
//! multis of a few hundred creates, into the sharded layout; filesystem:
//! the record files written directly, then `sync`), then a `regent master` is
//! started on the store `REGENT_BENCH_REPS` times (default 3) and the figure
//! is the master's own log line "recovering: loaded N records in X ms since
//! the election" (N counts the epoch record too; ZooKeeper: from the
//! `Elected` note to RECOVERING, i.e. the `Sync`, the listings, every read,
//! the decoding, the master's processing of `Loaded` and the epoch write;
//! filesystem: from the store's open, which reads every file, to
//! RECOVERING; the files are in the page cache). The records carry no
//! callback address, so no contact dials follow. Beside it: the wall time
//! from the process start to that line, the master's RSS once RECOVERING,
//! and (ZooKeeper) the same load by a bare client, one record per request
//! and [`MULTI_READ_BATCH`] per `multiRead`: what the server and the client
//! crate allow.
//!
//! Then, once per N, a store of the flat layout of earlier versions (every
//! record directly under `<root>/state/`): the figure of the first master's
//! load, which moves every record into its shard. And once, at the largest
//! N: a listing of N children of one node by `zookeeper-client` and by
//! ZooKeeper's Java client (`zkCli.sh ls`, which refuses a reply over
//! `jute.maxbuffer`): what the shards avoid.
//!
//! `cargo bench -p regent-smol --bench recovery` (release build; Cargo
//! passes `--bench`). `REGENT_BENCH_SIZES=2000,20000` picks the sizes.
//! Figures, not assertions.

#[path = "../tests/support/cluster.rs"]
mod cluster;
#[path = "../tests/support/zk_server.rs"]
mod zk_server;

use cluster::{unique, Cluster, MasterSpec, Proc};
use regent_core::store::names::key_stem;
use regent_core::store::{format, Record, WorkerRecord};
use regent_core::zk::layout;
use regent_core::zk::{MAX_LOAD_IN_FLIGHT, MULTI_READ_BATCH};
use regent_core::{Epoch, Incarnation, WorkerId};
use regent_std::store::names::record_file_name;
use std::collections::{BTreeSet, VecDeque};
use std::time::{Duration, Instant};
use zk_server::ZkServer;
use zookeeper_client as zkc;

/// Bound for one load.
const BOUND: Duration = Duration::from_secs(300);
/// Creates per planting multi (a few hundred bytes each: far under the
/// packet limit).
const PLANT_BATCH: usize = 500;
/// Planting multis in flight.
const PLANT_IN_FLIGHT: usize = 8;

fn worker(i: usize) -> Record {
    Record::Worker(WorkerRecord {
        dead: false,
        id: WorkerId::new(format!("bench-worker-{i:06}")),
        incarnation: Incarnation(1 + i as u64),
        cores: 16,
        memory_mb: 65_536,
        callback: None,
        maintenance: None,
    })
}

fn records(n: usize) -> Vec<Record> {
    let mut out = vec![Record::Epoch(Epoch(1))];
    out.extend((0..n).map(worker));
    out
}

async fn client(addr: &str) -> zkc::Client {
    zkc::Client::connector()
        .with_session_timeout(Duration::from_secs(20))
        .connect(addr)
        .await
        .expect("a ZooKeeper session")
}

/// Creates `nodes` (path, data) with multis of [`PLANT_BATCH`], a few in
/// flight; parents must exist or come earlier in the list.
async fn create_all(zk: &zkc::Client, nodes: &[(String, Vec<u8>)]) {
    let open = zkc::CreateMode::Persistent.with_acls(zkc::Acls::anyone_all());
    let mut pending = VecDeque::new();
    for batch in nodes.chunks(PLANT_BATCH) {
        let mut w = zk.new_multi_writer();
        for (path, data) in batch {
            w.add_create(path, data, &open).expect("a create op");
        }
        pending.push_back(w.commit());
        if pending.len() >= PLANT_IN_FLIGHT {
            pending.pop_front().unwrap().await.expect("a planting multi");
        }
    }
    for p in pending {
        p.await.expect("a planting multi");
    }
}

/// Plants `records` under `<root>/state` in the sharded layout.
async fn plant_zk(zk: &zkc::Client, root: &str, records: &[Record]) {
    let state = format!("{root}/state");
    let mut nodes = vec![(root.to_owned(), Vec::new()), (state.clone(), Vec::new())];
    let shards: BTreeSet<u8> =
        records.iter().filter_map(|r| layout::shard_of(&key_stem(&r.key()))).collect();
    nodes.extend(shards.iter().map(|&s| (layout::shard_path(&state, s), Vec::new())));
    nodes.extend(
        records.iter().map(|r| (layout::record_path(&state, &r.key()), format::encode(r).unwrap())),
    );
    create_all(zk, &nodes).await;
}

/// The same load with a bare client, as fast as the server and the client
/// crate go: `sync`, the listing of `<root>/state` and of every shard, and
/// every read, `batch` records per request (1: `getData`; more: a
/// `multiRead`), with up to [`MAX_LOAD_IN_FLIGHT`] records in flight.
/// Returns ms.
async fn raw_load(zk: &zkc::Client, root: &str, n: usize, batch: usize) -> f64 {
    let state = format!("{root}/state");
    let start = Instant::now();
    zk.sync(&state).await.expect("sync");
    let top = zk.list_children(&state).await.expect("the listing");
    let shards: Vec<String> = top
        .iter()
        .filter(|n| layout::parse_shard(n).is_some())
        .map(|s| format!("{state}/{s}"))
        .collect();
    let listings: Vec<_> = shards.iter().map(|p| zk.list_children(p)).collect();
    let mut paths = vec![format!("{state}/epoch")];
    for (dir, l) in shards.iter().zip(listings) {
        paths.extend(l.await.expect("a shard listing").into_iter().map(|c| format!("{dir}/{c}")));
    }
    let mut read = 0;
    if batch == 1 {
        let mut window = VecDeque::new();
        for p in &paths {
            window.push_back(zk.get_data(p));
            if window.len() >= MAX_LOAD_IN_FLIGHT {
                read +=
                    usize::from(!window.pop_front().unwrap().await.expect("a read").0.is_empty());
            }
        }
        for r in window {
            read += usize::from(!r.await.expect("a read").0.is_empty());
        }
    } else {
        let mut window = VecDeque::new();
        for chunk in paths.chunks(batch) {
            let mut reader = zk.new_multi_reader();
            for p in chunk {
                reader.add_get_data(p).expect("a read op");
            }
            window.push_back(reader.commit());
            if window.len() * batch >= MAX_LOAD_IN_FLIGHT {
                read += window.pop_front().unwrap().await.expect("a multi read").len();
            }
        }
        for r in window {
            read += r.await.expect("a multi read").len();
        }
    }
    assert_eq!(read, n + 1);
    start.elapsed().as_secs_f64() * 1e3
}

/// One load: (the master's figure in ms, wall ms from the start, RSS kB).
fn load_once(c: &Cluster, spec: &MasterSpec, n: usize) -> (f64, f64, u64) {
    let start = Instant::now();
    let mut m: Proc = c.master(spec);
    let want = format!("recovering: loaded {} records in ", n + 1);
    let figure = loop {
        let log = m.stderr();
        if let Some(line) = log.lines().find(|l| l.contains(&want)) {
            let rest = &line[line.find(&want).unwrap() + want.len()..];
            let ms: f64 = rest.split_whitespace().next().and_then(|v| v.parse().ok()).unwrap();
            break ms;
        }
        if let Some(l) = log.lines().find(|l| l.contains("recovering: loaded")) {
            panic!("loaded something else: {l}");
        }
        m.assert_running("while loading");
        assert!(start.elapsed() < BOUND, "no load within {BOUND:?}:\n{}", cluster::tail(&log, 20));
        std::thread::sleep(Duration::from_millis(10));
    };
    let wall = start.elapsed().as_secs_f64() * 1e3;
    let rss = regent_std::host::rss_kb(m.pid()).unwrap_or(0);
    m.stop(Duration::from_secs(30));
    (figure, wall, rss)
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(|a, b| a.partial_cmp(b).unwrap());
    xs[xs.len() / 2]
}

struct Row {
    store: &'static str,
    n: usize,
    plant_ms: f64,
    loads: Vec<(f64, f64, u64)>,
    /// The bare client's load, one record per read and by batches
    /// (ZooKeeper).
    raw: Option<(f64, f64)>,
}

fn zk_rows(zk: &ZkServer, sizes: &[usize], reps: usize) -> Vec<Row> {
    let mut rows = Vec::new();
    for &n in sizes {
        let c = Cluster::new("bench-recovery-zk");
        let root = format!("/{}", unique("recovery"));
        let recs = records(n);
        let start = Instant::now();
        smol::block_on(async {
            let zk = client(&zk.addr()).await;
            plant_zk(&zk, &root, &recs).await;
        });
        let plant_ms = start.elapsed().as_secs_f64() * 1e3;
        eprintln!("  zookeeper: planted {n} records in {plant_ms:.0} ms");
        let raw = |batch: usize| -> f64 {
            let ms: Vec<f64> = (0..reps)
                .map(|_| {
                    smol::block_on(async {
                        let zk = client(&zk.addr()).await;
                        raw_load(&zk, &root, n, batch).await
                    })
                })
                .collect();
            eprintln!("  zookeeper {n}: a bare client, {batch} per read: {ms:.0?} ms");
            median(ms)
        };
        let raw = (raw(1), raw(MULTI_READ_BATCH));
        let spec = MasterSpec::zookeeper("m1", &zk.addr(), &root, 4000);
        let mut loads = Vec::new();
        for i in 0..reps {
            let l = load_once(&c, &spec, n);
            eprintln!(
                "  zookeeper {n} rep {i}: {:.1} ms since the election ({:.0} ms from the start), RSS {} kB",
                l.0, l.1, l.2
            );
            loads.push(l);
        }
        rows.push(Row { store: "ZooKeeper", n, plant_ms, loads, raw: Some(raw) });
    }
    rows
}

/// A store of the flat layout (earlier versions): the first master's load
/// moves every record into its shard (one fenced multi each) before it
/// reports; the figure is that first load. Returns one row per size.
fn zk_flat_rows(zk: &ZkServer, sizes: &[usize]) -> Vec<Row> {
    let mut rows = Vec::new();
    for &n in sizes {
        let c = Cluster::new("bench-recovery-flat");
        let root = format!("/{}", unique("flat-move"));
        let state = format!("{root}/state");
        let start = Instant::now();
        smol::block_on(async {
            let zk = client(&zk.addr()).await;
            let mut nodes = vec![(root.clone(), Vec::new()), (state.clone(), Vec::new())];
            nodes.extend(records(n).iter().map(|r| {
                (layout::flat_path(&state, &key_stem(&r.key())), format::encode(r).unwrap())
            }));
            create_all(&zk, &nodes).await;
        });
        let plant_ms = start.elapsed().as_secs_f64() * 1e3;
        let spec = MasterSpec::zookeeper("m1", &zk.addr(), &root, 4000);
        let l = load_once(&c, &spec, n);
        eprintln!(
            "  zookeeper, flat layout, {n}: the first load (moving every record) {:.1} ms",
            l.0
        );
        rows.push(Row {
            store: "ZooKeeper, flat layout: the first load moves it",
            n,
            plant_ms,
            loads: vec![l],
            raw: None,
        });
    }
    rows
}

fn fs_rows(sizes: &[usize], reps: usize) -> Vec<Row> {
    let mut rows = Vec::new();
    for &n in sizes {
        let c = Cluster::new("bench-recovery-fs");
        let dir = c.path("store");
        let start = Instant::now();
        // The files as the store writes them, without its fsync per file
        // (planting is not what is measured); the store's open checks them.
        std::fs::create_dir_all(&dir).expect("the store's directory");
        for r in records(n) {
            let path = dir.join(record_file_name(&r.key()));
            std::fs::write(path, format::encode(&r).unwrap()).expect("a record file");
        }
        // On disk before the loads: no writeback competes with them.
        let _ = std::process::Command::new("sync").status();
        let plant_ms = start.elapsed().as_secs_f64() * 1e3;
        eprintln!("  filesystem: planted {n} records in {plant_ms:.0} ms");
        let spec =
            MasterSpec::new("m1", &["--recovery", "filesystem", "--store", dir.to_str().unwrap()]);
        let mut loads = Vec::new();
        for i in 0..reps {
            // Warm: the files are in the page cache (as for a master
            // restarted on the machine that wrote them).
            let l = load_once(&c, &spec, n);
            eprintln!(
                "  filesystem {n} rep {i}: {:.1} ms since the store's open ({:.0} ms from the start), RSS {} kB",
                l.0, l.1, l.2
            );
            loads.push(l);
        }
        rows.push(Row { store: "filesystem", n, plant_ms, loads, raw: None });
    }
    rows
}

/// A listing of `n` children of one node (the flat layout), with the same
/// client: its outcome and time.
fn flat_listing(zk: &ZkServer, n: usize) -> String {
    smol::block_on(async {
        let client = client(&zk.addr()).await;
        let root = format!("/{}", unique("flat"));
        let state = format!("{root}/state");
        let mut nodes = vec![(root.clone(), Vec::new()), (state.clone(), Vec::new())];
        nodes.extend(
            records(n).iter().map(|r| {
                (layout::flat_path(&state, &key_stem(&r.key())), format::encode(r).unwrap())
            }),
        );
        create_all(&client, &nodes).await;
        let bytes: usize = nodes[2..].iter().map(|(p, _)| 4 + p.len() - state.len() - 1).sum();
        let start = Instant::now();
        let r = client.list_children(&state).await;
        let ms = start.elapsed().as_secs_f64() * 1e3;
        let rust = match r {
            Ok(c) => format!("zookeeper-client lists them in {ms:.0} ms ({} names)", c.len()),
            Err(e) => format!("zookeeper-client: {e} after {ms:.0} ms"),
        };
        format!(
            "{} children of one node ({bytes} bytes of names): {rust}; ZooKeeper's own Java \
             client (`zkCli.sh ls`): {}",
            n + 1,
            zkcli_ls(&zk.addr(), &state)
        )
    })
}

/// What `zkCli.sh ls PATH` (the Java client, default `jute.maxbuffer`)
/// makes of a listing.
fn zkcli_ls(addr: &str, path: &str) -> String {
    let out = std::process::Command::new("timeout")
        .args(["120", "/usr/share/zookeeper/bin/zkCli.sh", "-server", addr, "ls", path])
        .output();
    let Ok(out) = out else { return "not run (no zkCli.sh)".into() };
    let text = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
    match text.lines().find(|l| l.starts_with("KeeperErrorCode")) {
        Some(err) => err.to_owned(),
        None if text.lines().any(|l| l.starts_with('[')) => "listed".into(),
        None => "no answer".into(),
    }
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        println!("recovery: run with `cargo bench -p regent-smol --bench recovery`");
        return;
    }
    let reps: usize =
        std::env::var("REGENT_BENCH_REPS").ok().and_then(|s| s.parse().ok()).unwrap_or(3);
    let sizes: Vec<usize> = std::env::var("REGENT_BENCH_SIZES")
        .ok()
        .map(|s| s.split(',').filter_map(|v| v.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![2_000, 20_000, 100_000]);
    eprintln!("recovery bench: sizes {sizes:?}, {reps} loads each, binary {}", cluster::BIN);
    let zk = ZkServer::start();
    let mut rows = zk_rows(&zk, &sizes, reps);
    rows.extend(zk_flat_rows(&zk, &sizes));
    rows.extend(fs_rows(&sizes, reps));
    let flat = sizes.iter().max().map(|&n| flat_listing(&zk, n));

    println!();
    println!(
        "| store | worker records | elected → RECOVERING, all loaded (median; min–max of {reps} loads, one for a flat store) \
         | process start → RECOVERING | master RSS | a bare client's load: one record per read \
         / {MULTI_READ_BATCH} per read | planting |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for r in &rows {
        let figs: Vec<f64> = r.loads.iter().map(|l| l.0).collect();
        let (lo, hi) = figs.iter().fold((f64::MAX, 0f64), |(a, b), &x| (a.min(x), b.max(x)));
        let wall = median(r.loads.iter().map(|l| l.1).collect());
        let rss = median(r.loads.iter().map(|l| l.2 as f64).collect());
        let raw = r.raw.map_or("–".to_owned(), |(one, many)| format!("{one:.0} / {many:.0} ms"));
        println!(
            "| {} | {} | {:.0} ms ({lo:.0}–{hi:.0}) | {wall:.0} ms | {:.0} MB | {raw} | {:.0} ms |",
            r.store,
            r.n,
            median(figs),
            rss / 1024.0,
            r.plant_ms
        );
    }
    if let Some(flat) = flat {
        println!();
        println!("flat layout (earlier versions): {flat}");
    }
}
