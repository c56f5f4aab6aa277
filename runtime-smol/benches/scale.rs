//! Scale figures of the `regent` binary with `regent load` (docs/design.md#issue-13),
//! real processes on loopback:
//!
//! * **steady state**: one master (`--recovery none`) and one `regent load`
//!   process of N simulated workers heartbeating every second: registration
//!   from cold, master CPU (% of one core) and RSS per worker above the idle
//!   master, heartbeat round-trip percentiles — for the smol master without
//!   and with a cluster secret, and for the std master up to its ceiling;
//! * **registration with durable records**: the same with `--recovery
//!   filesystem` and `--recovery zookeeper` (a registration is a record
//!   write): reported, not targeted;
//! * **failover under load**: two ZooKeeper masters, two `regent load`
//!   processes (`--shard 0/2`, `1/2`; each simulated worker keeps a
//!   connection to both masters), `kill -9` or SIGTERM of the leader: from
//!   the signal to the other master ALIVE with every worker re-registered;
//! * **the floor** (docs/design.md#issue-24), in the same run at each size: a bare
//!   level-triggered epoll server (`support/floor.rs`, a child process)
//!   answering N connections' 40-byte request with a 40-byte reply once a
//!   second each, driven by a bare epoll client: the CPU, memory per
//!   connection and round trips the machine itself costs at that rate,
//!   against which the master's are read (targets: CPU at most 1.3× the
//!   floor's, RSS at most 2 kB per worker, p99 at most 2 ms);
//! * **the probe** (`support/probe.rs`), in the steady runs on plain
//!   connections: one more worker on its own thread heartbeating every
//!   10 ms and timing each acknowledgement, so the master's round trips are
//!   read without the generator's own queueing;
//! * **placement throughput** (docs/design.md#issue-46), only when asked
//!   (`REGENT_SCALE_ONLY=placement`): for each store — none, `--recovery
//!   filesystem`, ZooKeeper on loopback, ZooKeeper behind the delaying
//!   proxy (`tests/support/zk_proxy.rs`) at 0.2 ms and at 5 ms round trip —
//!   one master, W simulated workers and F frameworks declaring E executors
//!   in all (default 5,000, 100 and 100,000: 1,000 each, in one group of
//!   1,000 slots), all in one `regent load` process: executors RUNNING per
//!   second, from the declarations to the last executor its framework was
//!   told is RUNNING (the master's `ExecutorUpdate`), and the master's CPU
//!   over that window and its RSS at the end.
//!
//! `cargo bench -p regent-smol --bench scale` (release build). Environment:
//! `REGENT_SCALE_WORKERS` (comma-separated sizes, default `1000,5000,18000`),
//! `REGENT_SCALE_SECS` (measured seconds, default 10),
//! `REGENT_SCALE_FAILOVER_WORKERS` (default 9000 per generator, two
//! generators; `REGENT_SCALE_FAILOVER_TLS=1`: every connection over mutual
//! TLS), `REGENT_SCALE_SKIP` (comma-separated parts to skip:
//! `steady`, `spread`, `secret`, `tls`, `std`, `durable`, `failover`,
//! `floor`; `tls`: the secret with and without mutual TLS under it;
//! `spread`: the workers started evenly over a second, so the round trips
//! measure the master rather than a cold start's aligned bursts),
//! `REGENT_SCALE_ONLY` (comma-separated parts to run, the others skipped;
//! `placement` and `hundred-k` run only when named here; `hundred-k`: the
//! 100,000 row, [`hundred_k`], with `REGENT_SCALE_HUNDRED_K_WORKERS`). The placement part:
//! `REGENT_SCALE_PLACEMENT_WORKERS` (default 5000),
//! `REGENT_SCALE_PLACEMENT_FRAMEWORKS` (100),
//! `REGENT_SCALE_PLACEMENT_EXECUTORS` (100000),
//! `REGENT_SCALE_PLACEMENT_STORES` (comma-separated, default
//! `none,filesystem,zk,zk-0.2ms,zk-5ms`), `REGENT_SCALE_PLACEMENT_BOUND`
//! (seconds a run may take before it is cut short and its partial rate
//! reported, default 600), `REGENT_SCALE_PLACEMENT_WINDOWS` (comma-separated
//! `--zk-write-window`s, each ZooKeeper store run once per window, e.g.
//! `1,64`: serial against pipelined writes, docs/design.md#issue-46; default: the
//! master's default only). Each row also gives the workers registered per
//! second from cold (a registration is a durable write). Figures, not
//! assertions.

#[path = "../tests/support/cluster.rs"]
mod cluster;
#[path = "support/floor.rs"]
mod floor;
#[path = "support/probe.rs"]
mod probe;
#[path = "../tests/support/zk_proxy.rs"]
mod zk_proxy;
#[path = "../tests/support/zk_server.rs"]
mod zk_server;

use cluster::{http_get, https_get, unique, wait_for, Cluster, Kind, MasterSpec, Proc};
use regent_std::host::cpu_ticks;
use serde_json::Value;
use std::time::{Duration, Instant};
use zk_server::ZkServer;

fn env_list(name: &str, default: &str) -> Vec<usize> {
    std::env::var(name)
        .unwrap_or_else(|_| default.into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect()
}

fn skip(part: &str) -> bool {
    std::env::var("REGENT_SCALE_SKIP").is_ok_and(|s| s.split(',').any(|p| p.trim() == part))
        || std::env::var("REGENT_SCALE_ONLY").is_ok_and(|s| !s.split(',').any(|p| p.trim() == part))
}

/// Whether `REGENT_SCALE_ONLY` names `part` (the parts run only when asked).
fn only(part: &str) -> bool {
    std::env::var("REGENT_SCALE_ONLY").is_ok_and(|s| s.split(',').any(|p| p.trim() == part))
}

/// Waits until `addr` accepts connections.
fn listening(addr: &str) {
    wait_for(Duration::from_secs(30), "the master listening", || {
        std::net::TcpStream::connect(addr).map(|_| ()).map_err(|e| e.to_string())
    });
}

/// Runs `regent load` to completion; its JSON report.
fn load(c: &Cluster, args: &[&str]) -> Value {
    load_within(c, args, Duration::from_secs(600))
}

/// [`load`], killed (and failing) after `bound`.
fn load_within(c: &Cluster, args: &[&str], bound: Duration) -> Value {
    let mut all = vec!["load", "--json"];
    all.extend_from_slice(args);
    let out = c.run(&all, bound);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "regent load failed: {}\n{}",
        stdout,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.lines().last().unwrap_or("")).expect("the load's JSON line")
}

struct Row {
    name: String,
    workers: u64,
    registered: u64,
    registration_ms: f64,
    cpu: f64,
    rss_per_worker_kb: f64,
    p50: f64,
    p99: f64,
    rate: f64,
    errors: u64,
    /// The probe's samples, p50, p99 and max round trip in ms
    /// (`support/probe.rs`), where one ran.
    probe: Option<(usize, f64, f64, f64)>,
}

impl Row {
    fn of(name: String, v: &Value) -> Row {
        let f = |k: &str| v[k].as_f64().unwrap_or(f64::NAN);
        let u = |k: &str| v[k].as_u64().unwrap_or(0);
        let registered = u("registered");
        let per = (f("master_rss_kb") - f("master_rss_idle_kb")) / registered.max(1) as f64;
        Row {
            name,
            workers: u("workers"),
            registered,
            registration_ms: f("registration_ms"),
            cpu: f("master_cpu_percent"),
            rss_per_worker_kb: per,
            p50: f("rtt_p50_ms"),
            p99: f("rtt_p99_ms"),
            rate: f("heartbeats_per_sec"),
            errors: u("errors") + u("rejections"),
            probe: None,
        }
    }

    fn print(&self) {
        println!(
            "{:<44} {:>6} {:>6} {:>9.0} {:>7.1} {:>8.2} {:>7.2} {:>7.2} {:>8.0} {:>6}",
            self.name,
            self.workers,
            self.registered,
            self.registration_ms,
            self.cpu,
            self.rss_per_worker_kb,
            self.p50,
            self.p99,
            self.rate,
            self.errors
        );
        if let Some((n, p50, p99, max)) = self.probe {
            println!(
                "{:<44} probe (one worker heartbeating every 10 ms on its own thread, {n} round trips): p50 {p50:.2} ms, p99 {p99:.2} ms, max {max:.2} ms",
                ""
            );
        }
    }
}

fn header() {
    println!(
        "{:<44} {:>6} {:>6} {:>9} {:>7} {:>8} {:>7} {:>7} {:>8} {:>6}",
        "run (heartbeat 1 s)",
        "N",
        "reg'd",
        "reg ms",
        "CPU %",
        "kB/wkr",
        "p50 ms",
        "p99 ms",
        "hb/s",
        "errors"
    );
}

/// One steady-state run: a master from `master_args`, `n` workers.
fn steady(name: &str, n: usize, secs: u64, master_args: &[&str], secret: bool) -> Row {
    steady_spread(name, n, secs, master_args, Wire { secret, tls: false }, 0, &EVERY_SECOND)
}

/// [`steady_spread`] with what it fixes for the rows at 1 s made
/// explicit: whether the heartbeat ceiling is lifted (every worker every
/// second) or kept at the master's default (10,000 a second: the interval
/// stretched to N / 10,000 s), and how long registration may take.
struct Heartbeats {
    /// `--max-heartbeats-per-second 0` on the master.
    lifted: bool,
    /// The load generator's `--register-within`, seconds.
    register_within: u64,
}

/// The rows at a 1 s heartbeat: the ceiling lifted.
const EVERY_SECOND: Heartbeats = Heartbeats { lifted: true, register_within: 60 };

/// What every connection of a run carries.
#[derive(Clone, Copy)]
struct Wire {
    /// The cluster secret (the handshake and a MAC per frame).
    secret: bool,
    /// Mutual TLS under it (one development CA).
    tls: bool,
}

/// [`steady`] with the workers started evenly over `spread_ms` (their
/// heartbeats spread over the second as a running cluster's are) and the
/// heartbeat ceiling as `hb` says.
fn steady_spread(
    name: &str,
    n: usize,
    secs: u64,
    master_args: &[&str],
    wire: Wire,
    spread_ms: u64,
    hb: &Heartbeats,
) -> Row {
    let c = Cluster::new("bench-scale");
    let spec = MasterSpec::new("m1", &[]);
    let addr = spec.addr();
    let secret_file = c.path("secret");
    std::fs::write(&secret_file, SECRET).expect("write the secret");
    let secret_file = secret_file.to_str().unwrap().to_owned();
    let mut common: Vec<&str> = Vec::new();
    if wire.secret {
        common.extend(["--secret-file", &secret_file]);
    }
    let tls_dir = c.path("tls");
    let tls_files: Vec<String> = ["127.0.0.1.pem", "127.0.0.1-key.pem", "ca.pem"]
        .iter()
        .map(|f| tls_dir.join(f).to_str().unwrap().to_owned())
        .collect();
    if wire.tls {
        let ca = regent_std::tls::DevCa::new("regent").expect("a development CA");
        let node = ca
            .issue(&["127.0.0.1".to_string()], regent_std::tls::Validity::Open)
            .expect("a certificate");
        std::fs::create_dir_all(&tls_dir).expect("the TLS directory");
        for (path, pem) in tls_files.iter().zip([node.cert_pem, node.key_pem, ca.cert_pem()]) {
            std::fs::write(path, pem).expect("write the TLS material");
        }
        // One certificate for the master and the simulated workers alike.
        common.extend(["--tls-cert", &tls_files[0], "--tls-key", &tls_files[1]]);
        common.extend(["--tls-ca", &tls_files[2]]);
    }
    let mut args = common.clone();
    args.extend(master_args);
    args.extend(["--id", "m1", "--listen", &addr, "--worker-timeout", "60000"]);
    if hb.lifted {
        // Every worker heartbeats every second: the heartbeat ceiling (load
        // control, 10,000 a second by default) is lifted for the run.
        args.extend(["--max-heartbeats-per-second", "0"]);
    }
    let master = c.spawn("m1", Kind::Master, &args);
    listening(&addr);
    std::thread::sleep(Duration::from_millis(500));
    let (n_s, secs_s, pid) = (n.to_string(), secs.to_string(), master.pid().to_string());
    let mut largs = common;
    largs.extend(["--masters", &addr, "--workers", &n_s, "--secs", &secs_s]);
    let spread = spread_ms.to_string();
    let within = hb.register_within.to_string();
    largs.extend(["--master-pid", &pid, "--register-within", &within, "--spread-start", &spread]);
    // One more worker on its own thread measures the master's round trips
    // without the generator's queueing, on the same wire as the others.
    let probe_wire = probe::Wire {
        secret: wire.secret.then(|| {
            regent_core::secret::Secret::new(SECRET.to_vec()).expect("the bench's secret")
        }),
        tls: wire.tls.then(|| {
            let m = regent_std::tls::TlsMaterial::load(
                tls_files[0].as_ref(),
                tls_files[1].as_ref(),
                tls_files[2].as_ref(),
            )
            .expect("the bench's TLS material");
            m.client_config().expect("a client configuration")
        }),
    };
    let probe = probe::start(&addr, "regent", probe_wire, PROBE_EVERY);
    let v = load(&c, &largs);
    let ended = Instant::now();
    eprintln!("  {name}: {v}");
    let mut row = Row::of(name.to_string(), &v);
    {
        // The load's measured seconds end as it exits: the probe's samples
        // of the same window, less half a second at its end for the exit.
        let from = ended - Duration::from_secs(secs);
        let to = ended - Duration::from_millis(500);
        match probe.finish() {
            Ok(samples) => {
                let mut rtts_us: Vec<u32> = samples
                    .into_iter()
                    .filter(|(at, _)| *at >= from && *at < to)
                    .map(|(_, d)| d.as_micros().min(u128::from(u32::MAX)) as u32)
                    .collect();
                rtts_us.sort_unstable();
                let pct = |p: f64| regent_smol::load::percentile(&rtts_us, p);
                row.probe = Some((rtts_us.len(), pct(0.5), pct(0.99), pct(1.0)));
            }
            Err(e) => eprintln!("  {name}: the probe failed: {e}"),
        }
    }
    row
}

/// The cluster secret of the runs with one.
const SECRET: &[u8] = b"bench-secret-0123456789abcdef";

/// How often the probe heartbeats (100 a second: noise beside the
/// generator's thousands, a thousand samples in 10 s).
const PROBE_EVERY: Duration = Duration::from_millis(10);

/// The number of ALIVE workers a master's `/metrics` reports, and whether it
/// is ALIVE itself.
fn alive_workers(http: &str, ca: Option<&str>) -> Option<(bool, u64)> {
    let (code, body) = match ca {
        None => http_get(http, "/metrics")?,
        Some(ca) => https_get(http, "/metrics", ca).ok()?,
    };
    if code != 200 {
        return None;
    }
    let mut alive = false;
    let mut workers = 0;
    for l in body.lines() {
        if l.starts_with("regent_master_status{status=\"ALIVE\"} 1") {
            alive = true;
        }
        if let Some(v) = l.strip_prefix("regent_workers{state=\"ALIVE\"} ") {
            workers = v.trim().parse().ok()?;
        }
    }
    Some((alive, workers))
}

/// Failover under load: returns (ms from the signal to the other master
/// ALIVE with every worker, ms from the signal to its election log line).
fn failover(zk: &ZkServer, per_generator: usize, kill9: bool, tls: bool) -> (f64, Option<f64>) {
    let c = Cluster::new("bench-scale-failover");
    let root = format!("/{}", unique("scale"));
    // With `tls`: one development CA, one certificate for 127.0.0.1 for the
    // masters and the simulated workers alike.
    let (tls_args, ca_pem) = if tls {
        let ca = regent_std::tls::DevCa::new("regent").expect("a development CA");
        let node = ca
            .issue(&["127.0.0.1".to_string()], regent_std::tls::Validity::Open)
            .expect("a certificate");
        let mut args = Vec::new();
        for (flag, file, pem) in [
            ("--tls-cert", "node.pem", node.cert_pem),
            ("--tls-key", "node-key.pem", node.key_pem),
            ("--tls-ca", "ca.pem", ca.cert_pem()),
        ] {
            let path = c.path(file);
            std::fs::write(&path, pem).expect("write the TLS material");
            args.extend([flag.to_string(), path.to_str().unwrap().to_owned()]);
        }
        (args, Some(ca.cert_pem()))
    } else {
        (Vec::new(), None)
    };
    let ca = ca_pem.as_deref();
    let specs: Vec<MasterSpec> = ["m1", "m2"]
        .iter()
        .map(|id| {
            let mut spec = MasterSpec::zookeeper(id, &zk.addr(), &root, 10_000);
            spec.args.extend(tls_args.iter().cloned());
            spec
        })
        .collect();
    let mut masters: Vec<Proc> = Vec::new();
    masters.push(c.master(&specs[0]));
    wait_for(Duration::from_secs(60), "m1 ALIVE", || {
        match alive_workers(&specs[0].http_addr(), ca) {
            Some((true, _)) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    });
    masters.push(c.master(&specs[1]));
    std::thread::sleep(Duration::from_secs(1));
    let addrs = format!("{},{}", specs[0].addr(), specs[1].addr());
    let total = 2 * per_generator as u64;
    let n = per_generator.to_string();
    let generators: Vec<Proc> = (0..2)
        .map(|i| {
            let shard = format!("{i}/2");
            let mut args = vec![
                "load",
                "--masters",
                &addrs,
                "--workers",
                &n,
                "--shard",
                &shard,
                "--secs",
                "600",
                "--register-within",
                "600",
            ];
            args.extend(tls_args.iter().map(String::as_str));
            c.spawn(&format!("load{i}"), Kind::Other, &args)
        })
        .collect();
    wait_for(Duration::from_secs(600), "every worker on m1", || {
        match alive_workers(&specs[0].http_addr(), ca) {
            Some((true, w)) if w >= total => Ok(()),
            other => Err(format!("{other:?} of {total}")),
        }
    });
    // Let heartbeats and the standby's watch settle.
    std::thread::sleep(Duration::from_secs(3));
    let start = Instant::now();
    let killed_at = seconds_of_day(std::time::SystemTime::now());
    if kill9 {
        masters[0].kill9();
    } else {
        masters[0].sigterm();
    }
    let mut last_print = Duration::ZERO;
    // Generous: 120 s, or 5 ms a worker when that is longer (100,000).
    let bound = Duration::from_secs(120).max(Duration::from_millis(5 * total));
    let took = wait_for(bound, "m2 ALIVE with every worker", || {
        // Every 100 ms: `/metrics` of a master with thousands of workers is
        // not free, and polling it faster slows the master being measured.
        std::thread::sleep(Duration::from_millis(100));
        let seen = alive_workers(&specs[1].http_addr(), ca);
        if start.elapsed() >= last_print + Duration::from_millis(500) {
            last_print = start.elapsed();
            let cpu: Vec<u64> = std::iter::once(masters[1].pid())
                .chain(generators.iter().map(Proc::pid))
                .chain(std::iter::once(zk.pid()))
                .map(|pid| cpu_ticks(pid).unwrap_or(0))
                .collect();
            eprintln!(
                "    {:>6.0} ms: m2 {seen:?}, CPU ticks m2/load0/load1/zookeeper {cpu:?}",
                ms(start.elapsed())
            );
        }
        match seen {
            Some((true, w)) if w >= total => Ok(start.elapsed()),
            other => Err(format!("{other:?} of {total}")),
        }
    });
    // When m2 was elected, from its log line's timestamp (same clock).
    let elected = masters[1]
        .stderr()
        .lines()
        .filter(|l| l.contains(" elected"))
        .filter_map(log_seconds_of_day)
        .find(|t| *t >= killed_at)
        .map(|t| (t - killed_at) * 1000.0);
    drop(generators);
    (ms(took), elected)
}

/// The 100,000 row (docs/design.md#issue-46), run only when asked
/// (`REGENT_SCALE_ONLY=hundred-k`; `REGENT_SCALE_HUNDRED_K_WORKERS`, default
/// 100,000): N simulated workers of one `regent load` process on one
/// master with its default heartbeat ceiling (10,000 a second: the
/// interval stretched to N / 10,000 s, 10 s at 100,000), the floor at the
/// same connections and the same rate beside it, then `kill -9` of the
/// ZooKeeper leader of two masters under N workers (two generators of
/// N / 2). The file-descriptor limit is raised for the bench and the
/// processes it starts to N + 2,000 (the most one process holds: the
/// master's N connections, or a failover generator's N / 2 workers with a
/// connection to each master) when it is lower: past the hard limit that
/// needs `CAP_SYS_RESOURCE`, and without it the row is skipped, saying so.
fn hundred_k(secs: u64, rows: &mut Vec<Row>, failovers: &mut Vec<(bool, usize, f64, Option<f64>)>) {
    let n =
        env_list("REGENT_SCALE_HUNDRED_K_WORKERS", "100000").first().copied().unwrap_or(100_000);
    // One process holds at most N connections and a few more: the master,
    // the floor's server and its client, each generator of the failover
    // (N / 2 workers, a connection to each master).
    let want = n as u64 + 2_000;
    if let Err(e) = raise_nofile(want) {
        eprintln!("  hundred-k: cannot raise the file-descriptor limit to {want}: {e}; skipped");
        return;
    }
    let ceiling = u64::from(regent_core::master::DEFAULT_MAX_HEARTBEATS_PER_SECOND);
    let period = Duration::from_millis((n as u64 * 1_000).div_ceil(ceiling).max(1_000));
    // Three intervals measured, at least: every worker heartbeats thrice.
    let secs = secs.max(3 * period.as_secs());
    rows.push(floor_row_every(n, secs, period));
    let hb = Heartbeats { lifted: false, register_within: 600 };
    rows.push(steady_spread(
        &format!("smol, no secret, ceiling 10,000/s, N={n}"),
        n,
        secs,
        &["master", "--recovery", "none"],
        Wire { secret: false, tls: false },
        0,
        &hb,
    ));
    let zk = ZkServer::start();
    let (took, elected) = failover(&zk, n / 2, true, false);
    eprintln!("  failover under load (kill -9), {} workers: {took:.0} ms", 2 * (n / 2));
    failovers.push((true, 2 * (n / 2), took, elected));
}

/// Raises this process's file-descriptor limit (soft and hard) to at least
/// `want`; the processes it starts inherit it.
fn raise_nofile(want: u64) -> Result<(), String> {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let now = getrlimit(Resource::Nofile);
    if now.current.is_none_or(|c| c >= want) {
        return Ok(());
    }
    let max = now.maximum.map_or(want, |m| m.max(want));
    setrlimit(Resource::Nofile, Rlimit { current: Some(want), maximum: Some(max) }).map_err(|e| {
        format!(
            "setrlimit: {e} (the hard limit is {:?}; raising it needs CAP_SYS_RESOURCE)",
            now.maximum
        )
    })
}

/// Seconds since midnight UTC.
fn seconds_of_day(t: std::time::SystemTime) -> f64 {
    let d = t.duration_since(std::time::UNIX_EPOCH).expect("after 1970");
    (d.as_secs() % 86_400) as f64 + f64::from(d.subsec_micros()) / 1e6
}

/// The time of day of a log line (`2026-12-01T13:22:12.060049Z ...`, after
/// any colour codes), in seconds since midnight UTC.
fn log_seconds_of_day(line: &str) -> Option<f64> {
    let t = line.find('T').map(|i| &line[i + 1..])?;
    let hms = t.get(..15)?; // 13:22:12.060049
    let h: f64 = hms.get(0..2)?.parse().ok()?;
    let m: f64 = hms.get(3..5)?.parse().ok()?;
    let s: f64 = hms.get(6..15)?.parse().ok()?;
    Some(h * 3600.0 + m * 60.0 + s)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The floor at `n` connections: a row in the table's columns.
fn floor_row(n: usize, secs: u64) -> Row {
    floor_row_every(n, secs, Duration::from_secs(1))
}

/// [`floor_row`] with each connection sending once every `period`.
fn floor_row_every(n: usize, secs: u64, period: Duration) -> Row {
    let addr = cluster::loopback(cluster::free_port());
    let mut server = std::process::Command::new(std::env::current_exe().expect("the bench binary"))
        .env("REGENT_FLOOR_SERVE", &addr)
        .spawn()
        .expect("start the floor server");
    listening(&addr);
    std::thread::sleep(Duration::from_millis(300));
    let run = floor::drive(&addr, server.id(), n, secs, period);
    let _ = server.kill();
    let _ = server.wait();
    eprintln!(
        "  floor, N={n}: {} answered, CPU {:.1} %, {:.0} B/conn, p50 {:.2} ms, p99 {:.2} ms",
        run.answered, run.cpu, run.bytes_per_conn, run.p50, run.p99
    );
    let every = if period == Duration::from_secs(1) {
        String::new()
    } else {
        format!(", each every {} ms", period.as_millis())
    };
    Row {
        name: format!("floor (bare epoll, 40 B each way{every}), N={n}"),
        workers: n as u64,
        registered: n as u64,
        registration_ms: f64::NAN,
        cpu: run.cpu,
        rss_per_worker_kb: run.bytes_per_conn / 1024.0,
        p50: run.p50,
        p99: run.p99,
        rate: run.answered as f64 / secs as f64,
        errors: 0,
        probe: None,
    }
}

fn main() {
    if let Ok(addr) = std::env::var("REGENT_FLOOR_SERVE") {
        floor::serve(&addr);
    }
    if !std::env::args().any(|a| a == "--bench") {
        println!("scale: run with `cargo bench -p regent-smol --bench scale`");
        return;
    }
    let sizes = env_list("REGENT_SCALE_WORKERS", "1000,5000,18000");
    let secs = env_list("REGENT_SCALE_SECS", "10").first().copied().unwrap_or(10) as u64;
    let mut rows = Vec::new();
    for &n in &sizes {
        if !skip("floor") {
            rows.push(floor_row(n, secs));
        }
        if !skip("steady") {
            rows.push(steady(
                &format!("smol, no secret, N={n}"),
                n,
                secs,
                &["master", "--recovery", "none"],
                false,
            ));
        }
        if !skip("spread") {
            rows.push(steady_spread(
                &format!("smol, no secret, starts spread over 1 s, N={n}"),
                n,
                secs,
                &["master", "--recovery", "none"],
                Wire { secret: false, tls: false },
                1_000,
                &EVERY_SECOND,
            ));
        }
        if !skip("tls") {
            for (label, tls) in [("secret", false), ("secret + TLS", true)] {
                rows.push(steady_spread(
                    &format!("smol, {label}, starts spread over 1 s, N={n}"),
                    n,
                    secs,
                    &["master", "--recovery", "none"],
                    Wire { secret: true, tls },
                    1_000,
                    &EVERY_SECOND,
                ));
            }
        }
        if !skip("secret") {
            rows.push(steady(
                &format!("smol, secret, N={n}"),
                n,
                secs,
                &["master", "--recovery", "none"],
                true,
            ));
        }
        if !skip("std") && n <= 4_000 {
            rows.push(steady(
                &format!("std, no secret, N={n}"),
                n,
                secs,
                &["--runtime", "std", "master", "--recovery", "none"],
                false,
            ));
        }
    }
    let mut failovers = Vec::new();
    if only("hundred-k") {
        hundred_k(secs, &mut rows, &mut failovers);
    }
    let mut placements = Vec::new();
    if only("placement") {
        placements = placement_all();
    }
    if !skip("durable") {
        let c = Cluster::new("bench-scale-durable");
        let store = c.path("store");
        let store = store.to_str().unwrap().to_owned();
        let n = 5_000;
        rows.push(steady(
            &format!("smol, --recovery filesystem, N={n}"),
            n,
            secs.min(3),
            &["master", "--recovery", "filesystem", "--store", &store],
            false,
        ));
        let zk = ZkServer::start();
        let root = format!("/{}", unique("scale-durable"));
        let zk_addr = zk.addr();
        rows.push(steady(
            &format!("smol, --recovery zookeeper, N={n}"),
            n,
            secs.min(3),
            &["master", "--recovery", "zookeeper", "--zk", &zk_addr, "--zk-root", &root],
            false,
        ));
    }
    if !skip("failover") {
        let per =
            env_list("REGENT_SCALE_FAILOVER_WORKERS", "9000").first().copied().unwrap_or(9000);
        let zk = ZkServer::start();
        let tls = std::env::var("REGENT_SCALE_FAILOVER_TLS").is_ok_and(|v| v == "1");
        for kill9 in [true, false] {
            let (took, elected) = failover(&zk, per, kill9, tls);
            eprintln!(
                "  failover under load ({}), {} workers: {took:.0} ms",
                if kill9 { "kill -9" } else { "SIGTERM" },
                2 * per
            );
            failovers.push((kill9, 2 * per, took, elected));
        }
    }
    println!();
    if !rows.is_empty() {
        header();
    }
    for r in &rows {
        r.print();
    }
    if !placements.is_empty() {
        placement_header();
    }
    for p in &placements {
        p.print();
    }
    for (kill9, n, took, elected) in failovers {
        println!(
            "failover under load, {}, {n} workers, 2 masters (ZooKeeper, 10 s session): {took:.0} ms to ALIVE with every worker{}",
            if kill9 { "kill -9" } else { "SIGTERM" },
            elected
                .map(|e| format!(" (elected at {e:.0} ms: {:.0} ms after the election)", took - e))
                .unwrap_or_default()
        );
    }
}

/// Where a placement run's master keeps its records.
#[derive(Clone, Copy, Debug)]
enum PlacementStore {
    /// `--recovery none`.
    None,
    /// `--recovery filesystem`.
    Filesystem,
    /// `--recovery zookeeper`, directly (`None`) or through the delaying
    /// proxy at this round trip.
    Zk(Option<Duration>),
}

impl PlacementStore {
    fn parse(s: &str) -> Option<PlacementStore> {
        let s = s.trim();
        Some(match s {
            "none" => PlacementStore::None,
            "filesystem" => PlacementStore::Filesystem,
            "zk" => PlacementStore::Zk(None),
            _ => {
                let ms: f64 = s.strip_prefix("zk-")?.strip_suffix("ms")?.parse().ok()?;
                PlacementStore::Zk(Some(Duration::from_secs_f64(ms / 1000.0)))
            }
        })
    }

    fn label(&self) -> String {
        match self {
            PlacementStore::None => "--recovery none".into(),
            PlacementStore::Filesystem => "--recovery filesystem".into(),
            PlacementStore::Zk(None) => "ZooKeeper, loopback".into(),
            PlacementStore::Zk(Some(rtt)) => {
                format!("ZooKeeper, proxy {} ms round trip", rtt.as_secs_f64() * 1000.0)
            }
        }
    }
}

/// One placement run's figures.
struct PlacementRow {
    name: String,
    workers: u64,
    frameworks: u64,
    executors: u64,
    /// `Err(why)`: the run failed (its processes were cleaned up).
    report: Result<Value, String>,
}

fn placement_header() {
    println!();
    println!(
        "{:<46} {:>6} {:>7} {:>5} {:>7} {:>8} {:>9} {:>9} {:>10} {:>7} {:>7} {:>9} {:>6}",
        "placement (docs/design.md#issue-46)",
        "W",
        "reg/s",
        "F",
        "E",
        "RUNNING",
        "window ms",
        "RUNNING/s",
        "launched/s",
        "CPU %",
        "load %",
        "RSS MB",
        "errors"
    );
}

impl PlacementRow {
    fn print(&self) {
        let v = match &self.report {
            Ok(v) => v,
            Err(why) => {
                println!("{:<46} failed: {why}", self.name);
                return;
            }
        };
        let f = |k: &str| v[k].as_f64().unwrap_or(f64::NAN);
        let running = v["executors_running"].as_u64().unwrap_or(0);
        let window = f("placement_window_ms");
        // A run cut short: the rate of what did run within the window.
        let rate = running as f64 / (window / 1000.0);
        let launched_rate = self.executors as f64 / (f("executors_ms") / 1000.0);
        // Registrations from cold: one durable write each.
        let registered_rate = self.workers as f64 / (f("registration_ms") / 1000.0);
        println!(
            "{:<46} {:>6} {:>7.0} {:>5} {:>7} {:>8} {:>9.0} {:>9.0} {:>10.0} {:>7.1} {:>7.1} {:>9.1} {:>6}{}",
            self.name,
            self.workers,
            registered_rate,
            self.frameworks,
            self.executors,
            running,
            window,
            rate,
            launched_rate,
            f("master_cpu_placement_percent"),
            f("load_cpu_placement_percent"),
            f("master_rss_kb") / 1024.0,
            v["errors"].as_u64().unwrap_or(0) + v["rejections"].as_u64().unwrap_or(0),
            if running < self.executors { "  (cut short: not every executor RUNNING)" } else { "" }
        );
        if let Some(t) = v["zk_transactions"].as_u64() {
            println!(
                "{:<46} ZooKeeper transactions in the run: {t} ({} registrations + {} subscriptions + the rest)",
                "", self.workers, self.frameworks
            );
        }
    }
}

/// The placement part (docs/design.md#issue-46): every store asked for, one
/// run each; a run that fails is reported as failed and the next one runs.
fn placement_all() -> Vec<PlacementRow> {
    let first = |name: &str, default: usize| {
        env_list(name, &default.to_string()).first().copied().unwrap_or(default)
    };
    let workers = first("REGENT_SCALE_PLACEMENT_WORKERS", 5_000);
    let frameworks = first("REGENT_SCALE_PLACEMENT_FRAMEWORKS", 100);
    let executors = first("REGENT_SCALE_PLACEMENT_EXECUTORS", 100_000);
    let bound = Duration::from_secs(first("REGENT_SCALE_PLACEMENT_BOUND", 600) as u64);
    let stores: Vec<PlacementStore> = std::env::var("REGENT_SCALE_PLACEMENT_STORES")
        .unwrap_or_else(|_| "none,filesystem,zk,zk-0.2ms,zk-5ms".into())
        .split(',')
        .map(|s| PlacementStore::parse(s).unwrap_or_else(|| panic!("unknown store {s:?}")))
        .collect();
    // The write windows each ZooKeeper store runs with (`None`: the
    // master's default, no flag).
    let windows: Vec<Option<usize>> = match std::env::var("REGENT_SCALE_PLACEMENT_WINDOWS") {
        Ok(list) => list.split(',').filter_map(|s| s.trim().parse().ok()).map(Some).collect(),
        Err(_) => vec![None],
    };
    let runs: Vec<(PlacementStore, Option<usize>)> = stores
        .iter()
        .flat_map(|&store| match store {
            PlacementStore::Zk(_) => windows.iter().map(|&w| (store, w)).collect::<Vec<_>>(),
            _ => vec![(store, None)],
        })
        .collect();
    // One ZooKeeper server for the ZooKeeper runs (each its own root), started
    // once one is asked for; it goes (killed with its process group) on drop.
    let mut zk: Option<ZkServer> = None;
    let mut rows = Vec::new();
    for (store, window) in runs {
        if matches!(store, PlacementStore::Zk(_)) && zk.is_none() {
            zk = Some(ZkServer::start());
        }
        let name = match window {
            Some(w) => format!("{}, window {w}", store.label()),
            None => store.label(),
        };
        eprintln!("  placement, {name}: {workers} workers, {frameworks} frameworks, {executors} executors");
        let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            placement(store, window, zk.as_ref(), workers, frameworks, executors, bound)
        }));
        let report = run.map_err(|e| {
            e.downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "panicked".into())
        });
        if let Ok(v) = &report {
            eprintln!("  placement, {name}: {v}");
        }
        rows.push(PlacementRow {
            name,
            workers: workers as u64,
            frameworks: frameworks as u64,
            executors: executors as u64,
            report,
        });
    }
    rows
}

/// One placement run: a master with `store`, one `regent load` of
/// `workers` simulated workers (enough cores for every executor) and
/// `frameworks` frameworks declaring `executors` in all once every worker
/// registered. Every process it starts (the master, the load, the proxy) is
/// stopped when it returns or panics. `window`: the ZooKeeper master's
/// `--zk-write-window` (`None`: its default).
fn placement(
    store: PlacementStore,
    window: Option<usize>,
    zk: Option<&ZkServer>,
    workers: usize,
    frameworks: usize,
    executors: usize,
    bound: Duration,
) -> Value {
    let c = Cluster::new("bench-scale-placement");
    let spec = MasterSpec::new("m1", &[]);
    let addr = spec.addr();
    let store_dir = c.path("store").to_str().unwrap().to_owned();
    let root = format!("/{}", unique("placement"));
    // The proxy lives as long as the run (dropped after the master).
    let mut proxy: Option<zk_proxy::ZkProxy> = None;
    let zk_addr = match (store, zk) {
        (PlacementStore::Zk(None), Some(zk)) => zk.addr(),
        (PlacementStore::Zk(Some(rtt)), Some(zk)) => {
            let p = zk_proxy::ZkProxy::start(zk.addr());
            p.set_latency(rtt / 2);
            let a = p.addr();
            proxy = Some(p);
            a
        }
        _ => String::new(),
    };
    let window = window.map(|w| w.to_string());
    let mut args: Vec<&str> = vec!["master"];
    match store {
        PlacementStore::None => args.extend(["--recovery", "none"]),
        PlacementStore::Filesystem => {
            args.extend(["--recovery", "filesystem", "--store", &store_dir])
        }
        PlacementStore::Zk(_) => {
            args.extend(["--recovery", "zookeeper", "--zk", &zk_addr, "--zk-root", &root]);
            if let Some(w) = &window {
                args.extend(["--zk-write-window", w]);
            }
        }
    }
    args.extend(["--id", "m1", "--listen", &addr, "--worker-timeout", "60000"]);
    args.extend(["--max-heartbeats-per-second", "0"]);
    let zxid_before = zk.and_then(zxid);
    let master = c.spawn("m1", Kind::Master, &args);
    listening(&addr);
    std::thread::sleep(Duration::from_millis(500));
    // Cores for every executor (each asks for 1 core, 1 MiB), with room.
    let cores = (executors.div_ceil(workers.max(1)) * 2).max(8).to_string();
    let (w, f, e) = (workers.to_string(), frameworks.to_string(), executors.to_string());
    let pid = master.pid().to_string();
    let within = bound.as_secs().to_string();
    let largs = [
        "--masters",
        &addr,
        "--workers",
        &w,
        "--frameworks",
        &f,
        "--executors",
        &e,
        "--cores",
        &cores,
        "--secs",
        "1",
        "--master-pid",
        &pid,
        "--register-within",
        &within,
    ];
    let mut v = load_within(&c, &largs, bound + Duration::from_secs(180));
    // The ZooKeeper transactions of the run (every store write, the
    // election's and the epoch's): beside W registrations and F
    // subscriptions, what the declarations and placements wrote.
    if let (Some(a), Some(b)) = (zxid_before, zk.and_then(zxid)) {
        v["zk_transactions"] = Value::from(b.saturating_sub(a));
    }
    drop(master);
    drop(proxy);
    v
}

/// The server's last transaction id (`srvr`'s `Zxid`), within one server
/// epoch a count of the transactions it applied.
fn zxid(zk: &ZkServer) -> Option<u64> {
    let out = zk_server::four_letter(zk.port(), "srvr")?;
    let hex = out.lines().find_map(|l| l.strip_prefix("Zxid: 0x"))?;
    u64::from_str_radix(hex.trim(), 16).ok()
}
