//! Artifacts fetched by a worker (`regent_std::exec::artifacts`): from a
//! local HTTP server and from `file://`, checked against their digest,
//! cached by digest (fetched once, evicted least recently used past the
//! cap), placed executable or unpacked from tar.gz and zip, and archives
//! whose entries would escape refused before anything is written. Loopback
//! only; every server thread ends with its test.

use regent_core::launch::Artifact;
use regent_std::exec::artifacts::{ArtifactCache, ArtifactError};
use sha2::{Digest as _, Sha256};
use std::io::{Read as _, Write as _};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

fn sha(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// An HTTP server on a free loopback port answering `GET /<name>` with the
/// file's bytes (404 otherwise), counting the requests; it stops when the
/// returned guard is dropped.
struct Server {
    addr: String,
    hits: Arc<AtomicUsize>,
    stop: Arc<std::sync::atomic::AtomicBool>,
}

impl Server {
    fn start(files: Vec<(&'static str, Vec<u8>)>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let hits = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (h, s) = (hits.clone(), stop.clone());
        std::thread::spawn(move || {
            while !s.load(Ordering::SeqCst) {
                let Ok((mut conn, _)) = listener.accept() else {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                    continue;
                };
                conn.set_nonblocking(false).unwrap();
                let mut req = Vec::new();
                let mut buf = [0u8; 1024];
                while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                    match conn.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => req.extend_from_slice(&buf[..n]),
                    }
                }
                h.fetch_add(1, Ordering::SeqCst);
                let line = String::from_utf8_lossy(&req).lines().next().unwrap_or("").to_owned();
                let target = line.split(' ').nth(1).unwrap_or("/");
                let path = target.split('?').next().unwrap_or(target).trim_start_matches('/');
                let reply = match files.iter().find(|(n, _)| *n == path) {
                    Some((_, body)) => {
                        let mut r = format!(
                            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                            body.len()
                        )
                        .into_bytes();
                        r.extend_from_slice(body);
                        r
                    }
                    None => {
                        b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                            .to_vec()
                    }
                };
                let _ = conn.write_all(&reply);
            }
        });
        Server { addr, hits, stop }
    }

    fn url(&self, name: &str) -> String {
        format!("http://{}/{name}", self.addr)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

fn artifact(source: String, bytes: &[u8], dest: &str, unpack: bool) -> Artifact {
    Artifact { source, sha256: sha(bytes), dest: dest.into(), unpack }
}

fn tar_gz(entries: &[(&str, &[u8], u32)]) -> Vec<u8> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut b = tar::Builder::new(gz);
    for (path, data, mode) in entries {
        let mut h = tar::Header::new_gnu();
        // The name's bytes as given: `set_path` would refuse `..`, which is
        // what a hostile archive holds.
        let name = &mut h.as_gnu_mut().unwrap().name;
        name[..path.len()].copy_from_slice(path.as_bytes());
        h.set_size(data.len() as u64);
        h.set_mode(*mode);
        h.set_entry_type(tar::EntryType::Regular);
        h.set_cksum();
        b.append(&h, *data).unwrap();
    }
    b.into_inner().unwrap().finish().unwrap()
}

fn files_under(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else {
                out.push(p.strip_prefix(dir).unwrap().display().to_string());
            }
        }
    }
    out.sort();
    out
}

#[test]
fn a_fetched_file_is_placed_executable_and_fetched_once_for_every_executor() {
    let program = b"#!/bin/sh\necho fetched\n".to_vec();
    let server = Server::start(vec![("tool.sh", program.clone())]);
    let dir = tempfile::tempdir().unwrap();
    let cache = ArtifactCache::new(dir.path().join("cache"), 1 << 20).unwrap();
    let a = artifact(server.url("tool.sh?v=2"), &program, "bin", false);
    for exec in ["e1", "e2", "e3"] {
        cache.install(std::slice::from_ref(&a), &dir.path().join(exec)).unwrap();
        let placed = dir.path().join(exec).join("bin/tool.sh");
        assert_eq!(std::fs::read(&placed).unwrap(), program);
        let mode = std::fs::metadata(&placed).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o755, "a fetched program runs");
    }
    assert_eq!(server.hits.load(Ordering::SeqCst), 1, "fetched once, then from the cache");
    // The placed file is a copy: changing it leaves the cache's intact.
    std::fs::write(dir.path().join("e1/bin/tool.sh"), b"changed").unwrap();
    cache.install(std::slice::from_ref(&a), &dir.path().join("e4")).unwrap();
    assert_eq!(std::fs::read(dir.path().join("e4/bin/tool.sh")).unwrap(), program);
}

#[test]
fn executors_launched_together_fetch_an_artifact_once() {
    let data = vec![7u8; 200_000];
    let server = Server::start(vec![("data.bin", data.clone())]);
    let dir = tempfile::tempdir().unwrap();
    let cache = Arc::new(ArtifactCache::new(dir.path().join("cache"), 1 << 24).unwrap());
    let a = artifact(server.url("data.bin"), &data, "", false);
    let threads: Vec<_> = (0..4)
        .map(|i| {
            let (cache, a, exec) = (cache.clone(), a.clone(), dir.path().join(format!("e{i}")));
            std::thread::spawn(move || cache.install(&[a], &exec).unwrap())
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(server.hits.load(Ordering::SeqCst), 1);
    for i in 0..4 {
        assert_eq!(std::fs::read(dir.path().join(format!("e{i}/data.bin"))).unwrap(), data);
    }
}

#[test]
fn a_digest_mismatch_names_both_digests_and_installs_nothing() {
    let served = b"not what was declared".to_vec();
    let server = Server::start(vec![("x.bin", served.clone())]);
    let dir = tempfile::tempdir().unwrap();
    let cache = ArtifactCache::new(dir.path().join("cache"), 1 << 20).unwrap();
    let declared = sha(b"what was declared");
    let a = Artifact {
        source: server.url("x.bin"),
        sha256: declared.clone(),
        dest: String::new(),
        unpack: false,
    };
    let e = cache.install(&[a], &dir.path().join("e1")).unwrap_err();
    assert!(matches!(e, ArtifactError::DigestMismatch { .. }), "{e}");
    let text = e.to_string();
    assert!(text.contains(&format!("expected {declared}")), "{text}");
    assert!(text.contains(&format!("received {}", sha(&served))), "{text}");
    assert!(files_under(&dir.path().join("e1")).is_empty(), "nothing installed");
    assert!(files_under(&dir.path().join("cache")).is_empty(), "nothing cached");
}

#[test]
fn fetch_failures_name_the_source_and_the_cause() {
    let server = Server::start(vec![]);
    let dir = tempfile::tempdir().unwrap();
    let cache = ArtifactCache::new(dir.path().join("cache"), 1 << 20).unwrap();
    let missing = artifact(server.url("missing.tgz"), b"x", "", false);
    let e = cache.install(&[missing], &dir.path().join("e1")).unwrap_err().to_string();
    assert!(e.contains("missing.tgz") && e.contains("404"), "{e}");
    let file = artifact("file:///nonexistent/regent-artifact".into(), b"x", "", false);
    let e = cache.install(&[file], &dir.path().join("e1")).unwrap_err().to_string();
    assert!(e.contains("/nonexistent/regent-artifact") && e.contains("No such file"), "{e}");
    // Larger than the cache may hold: refused as it streams.
    let small = ArtifactCache::new(dir.path().join("small"), 10).unwrap();
    let src = dir.path().join("big");
    std::fs::write(&src, [1u8; 100]).unwrap();
    let big = artifact(format!("file://{}", src.display()), &[1u8; 100], "", false);
    let e = small.install(&[big], &dir.path().join("e2")).unwrap_err();
    assert!(matches!(e, ArtifactError::TooLarge { cap: 10, .. }), "{e}");
}

#[test]
fn archives_are_unpacked_with_their_modes() {
    let dir = tempfile::tempdir().unwrap();
    let cache = ArtifactCache::new(dir.path().join("cache"), 1 << 20).unwrap();
    let tgz = tar_gz(&[("tool/run.sh", b"#!/bin/sh\n", 0o755), ("tool/README", b"hi", 0o644)]);
    let tgz_path = dir.path().join("tool-1.0.tar.gz");
    std::fs::write(&tgz_path, &tgz).unwrap();
    let mut zip_bytes = std::io::Cursor::new(Vec::new());
    {
        let mut z = zip::ZipWriter::new(&mut zip_bytes);
        let opts = zip::write::SimpleFileOptions::default().unix_permissions(0o750);
        z.start_file("data/a.txt", opts).unwrap();
        z.write_all(b"alpha").unwrap();
        z.finish().unwrap();
    }
    let zip_bytes = zip_bytes.into_inner();
    let zip_path = dir.path().join("data.zip");
    std::fs::write(&zip_path, &zip_bytes).unwrap();
    let exec = dir.path().join("e1");
    cache
        .install(
            &[
                artifact(format!("file://{}", tgz_path.display()), &tgz, "opt", true),
                artifact(format!("file://{}", zip_path.display()), &zip_bytes, "", true),
            ],
            &exec,
        )
        .unwrap();
    assert_eq!(files_under(&exec), ["data/a.txt", "opt/tool/README", "opt/tool/run.sh"]);
    let mode = |p: &str| std::fs::metadata(exec.join(p)).unwrap().permissions().mode() & 0o777;
    assert_eq!((mode("opt/tool/run.sh"), mode("opt/tool/README")), (0o755, 0o644));
    assert_eq!(mode("data/a.txt"), 0o750);
    assert_eq!(std::fs::read(exec.join("data/a.txt")).unwrap(), b"alpha");
}

#[test]
fn archive_entries_that_would_escape_are_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let cache = ArtifactCache::new(dir.path().join("cache"), 1 << 20).unwrap();
    let inside = dir.path().join("exec/work");
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("dotdot.tar.gz", tar_gz(&[("ok.txt", b"ok", 0o644), ("../evil", b"x", 0o644)]), "../evil"),
        (
            "abs.tar.gz",
            tar_gz(&[("ok.txt", b"ok", 0o644), ("/tmp/evil", b"x", 0o644)]),
            "/tmp/evil",
        ),
        ("deep.tar.gz", tar_gz(&[("a/../../evil", b"x", 0o644)]), "a/../../evil"),
    ];
    let mut zip_bytes = std::io::Cursor::new(Vec::new());
    {
        let mut z = zip::ZipWriter::new(&mut zip_bytes);
        let opts = zip::write::SimpleFileOptions::default();
        z.start_file("ok.txt", opts).unwrap();
        z.write_all(b"ok").unwrap();
        z.start_file("../x", opts).unwrap();
        z.write_all(b"x").unwrap();
        z.finish().unwrap();
    }
    let mut cases = cases;
    cases.push(("evil.zip", zip_bytes.into_inner(), "../x"));
    for (name, bytes, entry) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, &bytes).unwrap();
        let a = artifact(format!("file://{}", path.display()), &bytes, "", true);
        let e = cache.install(&[a], &inside).unwrap_err();
        match &e {
            ArtifactError::Escape { entry: got, .. } => assert_eq!(got, entry, "{name}"),
            other => panic!("{name}: expected an escape, got {other}"),
        }
        assert!(e.to_string().contains("would escape the executor directory"), "{e}");
        assert!(files_under(&inside).is_empty(), "{name}: nothing unpacked, not even ok.txt");
        assert!(!dir.path().join("exec/evil").exists() && !dir.path().join("evil").exists());
        assert!(!dir.path().join("exec/x").exists());
    }
}

#[test]
fn the_cache_evicts_the_least_recently_used_past_its_cap() {
    let dir = tempfile::tempdir().unwrap();
    let cache = ArtifactCache::new(dir.path().join("cache"), 100).unwrap();
    let put = |name: &str, byte: u8| {
        let p = dir.path().join(name);
        std::fs::write(&p, [byte; 40]).unwrap();
        let a = artifact(format!("file://{}", p.display()), &[byte; 40], "", false);
        cache.install(&[a], &dir.path().join("exec")).unwrap();
        sha(&[byte; 40])
    };
    let a = put("a", 1);
    std::thread::sleep(std::time::Duration::from_millis(20));
    let b = put("b", 2);
    std::thread::sleep(std::time::Duration::from_millis(20));
    // Using `a` again makes `b` the least recently used.
    assert_eq!(put("a", 1), a);
    std::thread::sleep(std::time::Duration::from_millis(20));
    let c = put("c", 3);
    let cached = files_under(cache.dir());
    assert_eq!(cached.len(), 2, "120 bytes > 100: one of three goes: {cached:?}");
    assert!(cached.contains(&a) && cached.contains(&c), "b was the least recently used");
    assert!(!cached.contains(&b));
}
