//! A throwaway ZooKeeper server for tests: a temp data dir, a free loopback
//! port, `tickTime=200`, sessions between 400 ms and 60 s (the tests of
//! faults survived within a session use 10 s ones), started from Debian's jars and killed with its whole process group
//! on drop. Reusable by any test: `#[path = "support/zk_server.rs"] mod zk_server;`.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const JARS: &str = "/usr/share/java";

/// How long the server may take to answer `ruok` (a JVM start on a busy
/// machine).
pub const START_DEADLINE: Duration = Duration::from_secs(60);

/// A running ZooKeeper server.
#[derive(Debug)]
pub struct ZkServer {
    child: Child,
    port: u16,
    dir: PathBuf,
}

/// Fails (never skips) when ZooKeeper is not installed.
pub fn require_installed() {
    let found = std::fs::read_dir(JARS)
        .map(|d| {
            d.filter_map(Result::ok).any(|e| {
                let n = e.file_name().to_string_lossy().into_owned();
                n.starts_with("zookeeper") && n.ends_with(".jar")
            })
        })
        .unwrap_or(false);
    assert!(
        found,
        "ZooKeeper is not installed ({JARS}/zookeeper*.jar missing): run `apt-get install -y zookeeper` \
         (needs Java, which the machine has) and run the tests again"
    );
}

/// A free loopback port below the ephemeral range (see
/// `cluster::free_port`; this file is also used without it).
fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    const LOW: u32 = 10_000;
    const SPAN: u32 = 22_000;
    // Offset from cluster::free_port's walk so the two never race.
    let start = (std::process::id().wrapping_mul(7_919) + SPAN / 2) % SPAN;
    for _ in 0..SPAN {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = (LOW + (start + n * 11) % SPAN) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free loopback port in {LOW}..{}", LOW + SPAN)
}

/// The answer to a four-letter word, if the server answers.
pub fn four_letter(port: u16, word: &str) -> Option<String> {
    let mut s = TcpStream::connect_timeout(
        &format!("127.0.0.1:{port}").parse().unwrap(),
        Duration::from_millis(500),
    )
    .ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    s.write_all(word.as_bytes()).ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    Some(out)
}

impl ZkServer {
    /// Starts a server and waits (at most [`START_DEADLINE`]) until it
    /// answers `ruok` with `imok`.
    pub fn start() -> ZkServer {
        require_installed();
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "regent-zk-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("data")).expect("create the server's temp dir");
        let port = free_port();
        let cfg = dir.join("zoo.cfg");
        std::fs::write(
            &cfg,
            format!(
                "tickTime=200\ndataDir={}\nclientPort={port}\nclientPortAddress=127.0.0.1\n\
                 minSessionTimeout=400\nmaxSessionTimeout=60000\nadmin.enableServer=false\n4lw.commands.whitelist=*\n",
                dir.join("data").display()
            ),
        )
        .unwrap();
        let log = std::fs::File::create(dir.join("server.log")).unwrap();
        let mut cmd = Command::new("java");
        cmd.arg("-Xmx256m")
            .arg("-cp")
            .arg(format!("{JARS}/*"))
            .arg("org.apache.zookeeper.server.quorum.QuorumPeerMain")
            .arg(&cfg)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let child = cmd.spawn().expect("start java (ZooKeeper)");
        let mut server = ZkServer { child, port, dir };
        let deadline = Instant::now() + START_DEADLINE;
        loop {
            if four_letter(port, "ruok").as_deref() == Some("imok") {
                return server;
            }
            if let Ok(Some(status)) = server.child.try_wait() {
                panic!("ZooKeeper exited with {status}; log:\n{}", server.log());
            }
            if Instant::now() > deadline {
                panic!(
                    "ZooKeeper did not answer ruok within {START_DEADLINE:?}; log:\n{}",
                    server.log()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `127.0.0.1:<port>`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The server's process id (its JVM).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The client port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's temp dir.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The server's output so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }
}

impl Drop for ZkServer {
    fn drop(&mut self) {
        // The server runs in its own process group (pgid = its pid): kill
        // the whole group, then reap the child.
        let pgid = self.child.id();
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{pgid}")])
            .stderr(Stdio::null())
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
