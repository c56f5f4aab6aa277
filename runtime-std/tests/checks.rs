//! Health checks as I/O (docs/design.md#issue-45): http, tcp and exec
//! probes against real listeners and processes on loopback, an exec probe's
//! sandbox (its environment in place of the worker's, its user), and a run
//! through the supervisor's pool coming back through its sink. (Exec checks
//! of real executors, run as they are, also after a restart: `shim.rs`.)

use regent_core::health::{CheckOutcome, CheckRun, Probe};
use regent_core::{ExecutorId, Millis};
use regent_std::exec::check::{run_probe, CheckPool, Sandbox, CHECK_QUEUE, CHECK_THREADS};
use regent_std::exec::user::Identity;
use std::io::{BufRead as _, BufReader, Write as _};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// A loopback HTTP server on a free port answering every request with
/// `status`, or never answering if `None`; serves until the test ends.
fn server(status: Option<u16>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut line = String::new();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            // The request line and headers, to the blank line.
            while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                line.clear();
            }
            match status {
                Some(s) => {
                    let _ = write!(
                        stream,
                        "HTTP/1.1 {s} X\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                    );
                }
                None => held.push(stream), // a hang: never answered
            }
        }
    });
    port
}

fn http(port: u16, expect: (u16, u16)) -> Probe {
    Probe::Http { host: "127.0.0.1".into(), port, path: "/health".into(), expect }
}

/// A port nothing listens on (bound, then closed).
fn closed_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

const SECOND: Duration = Duration::from_secs(1);

#[test]
fn http_checks_pass_in_range_fail_out_of_it_and_time_out() {
    let none = Sandbox::default();
    assert_eq!(
        run_probe(&http(server(Some(200)), (200, 399)), SECOND, &none),
        CheckOutcome::Passed
    );
    assert_eq!(
        run_probe(&http(server(Some(500)), (200, 399)), SECOND, &none),
        CheckOutcome::Failed("GET /health answered 500".into())
    );
    // A redirect is an answer, not followed.
    assert_eq!(
        run_probe(&http(server(Some(302)), (200, 299)), SECOND, &none),
        CheckOutcome::Failed("GET /health answered 302".into())
    );
    let started = Instant::now();
    let hang = run_probe(&http(server(None), (200, 399)), Duration::from_millis(300), &none);
    assert!(started.elapsed() < Duration::from_secs(5), "bounded by its timeout");
    let CheckOutcome::Failed(why) = hang else { panic!("{hang:?}") };
    assert!(why.contains("no answer within 300 ms"), "{why}");
    let CheckOutcome::Failed(why) = run_probe(&http(closed_port(), (200, 399)), SECOND, &none)
    else {
        panic!()
    };
    assert!(why.starts_with("GET /health: "), "{why}");
}

#[test]
fn tcp_checks_pass_on_a_listener_and_fail_on_a_closed_port() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let none = Sandbox::default();
    let probe = Probe::Tcp { host: "127.0.0.1".into(), port };
    assert_eq!(run_probe(&probe, SECOND, &none), CheckOutcome::Passed);
    let probe = Probe::Tcp { host: "127.0.0.1".into(), port: closed_port() };
    let CheckOutcome::Failed(why) = run_probe(&probe, SECOND, &none) else { panic!() };
    assert!(why.contains("connect to 127.0.0.1:"), "{why}");
    drop(TcpStream::connect(("127.0.0.1", port)));
}

#[test]
fn exec_checks_pass_on_exit_zero_say_what_failed_and_are_killed_at_their_timeout() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("ready"), "").unwrap();
    let sandbox = Sandbox { dir: dir.path().to_path_buf(), ..Default::default() };
    let exec =
        |args: &[&str]| Probe::Exec { command: args.iter().map(|a| a.to_string()).collect() };
    // Runs in the executor's directory.
    assert_eq!(run_probe(&exec(&["test", "-f", "ready"]), SECOND, &sandbox), CheckOutcome::Passed);
    assert_eq!(
        run_probe(&exec(&["sh", "-c", "echo not ready >&2; exit 3"]), SECOND, &sandbox),
        CheckOutcome::Failed("sh exited 3: not ready".into())
    );
    let started = Instant::now();
    let slow = run_probe(
        &exec(&["sh", "-c", "sleep 30 & sleep 30"]),
        Duration::from_millis(300),
        &sandbox,
    );
    assert_eq!(slow, CheckOutcome::Failed("sh ran past 300 ms".into()));
    assert!(started.elapsed() < Duration::from_secs(10), "its whole group killed, pipes closed");
    let CheckOutcome::Failed(why) = run_probe(&exec(&["/no/such/program"]), SECOND, &sandbox)
    else {
        panic!()
    };
    assert!(why.starts_with("cannot start \"/no/such/program\""), "{why}");
}

#[test]
fn an_exec_check_gets_its_sandboxs_environment_only_and_its_user() {
    let dir = tempfile::tempdir().unwrap();
    let exec = |script: &str| Probe::Exec {
        command: vec!["sh".into(), "-c".into(), format!("{script}; exit 1")],
    };
    let sandbox = Sandbox {
        dir: dir.path().to_path_buf(),
        env: Some(vec![("ONLY".into(), "x=1\ny".into()), ("PATH".into(), "/usr/bin:/bin".into())]),
        ..Default::default()
    };
    // The worker's environment (its HOME, say) is cleared first.
    assert!(std::env::var_os("HOME").is_some(), "this test needs a HOME to clear");
    assert_eq!(
        run_probe(&exec("echo \"$ONLY ${HOME-unset} $PATH\""), SECOND, &sandbox),
        CheckOutcome::Failed("sh exited 1: x=1\ny unset /usr/bin:/bin".into())
    );
    // Without one, the worker's own.
    let inherits = Sandbox { env: None, ..sandbox.clone() };
    let CheckOutcome::Failed(said) = run_probe(&exec("echo \"${HOME-unset}\""), SECOND, &inherits)
    else {
        panic!()
    };
    assert_ne!(said, "sh exited 1: unset");
    // As another user (std sets the uid and gid; only root may).
    if !rustix::process::geteuid().is_root() {
        println!("skipped: not root (an exec check as another user needs root)");
        return;
    }
    let nobody = Sandbox {
        user: Some(Identity { uid: 65534, gid: 65534, groups: vec![] }),
        dir: "/".into(),
        ..sandbox
    };
    assert_eq!(
        run_probe(&exec("id -u; id -g; id -G"), SECOND, &nobody),
        CheckOutcome::Failed("sh exited 1: 65534\n65534\n65534".into())
    );
}

#[test]
fn the_pool_answers_every_run_once_and_skips_what_does_not_fit() {
    let pool = CheckPool::new();
    let (tx, rx) = std::sync::mpsc::channel();
    let run = |n: u64, probe: Probe| CheckRun {
        executor: ExecutorId::new("f/web#0#1"),
        check: 0,
        run: n,
        probe,
        timeout: Millis(100),
    };
    // More hanging runs than threads and queue hold: the excess is skipped
    // at once, the others answer within their timeout.
    let hang = server(None);
    let total = (CHECK_QUEUE + CHECK_THREADS + 8) as u64;
    for n in 0..total {
        let tx = tx.clone();
        pool.submit(run(n, http(hang, (200, 399))), Sandbox::default(), move |r, o| {
            let _ = tx.send((r.run, o));
        });
    }
    let skipped = rx.try_iter().filter(|(_, o)| matches!(o, CheckOutcome::Skipped(_))).count();
    assert!(skipped >= 8, "{skipped} skipped at once");
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut answered = skipped;
    let mut seen = std::collections::BTreeSet::new();
    while answered < total as usize {
        let left = deadline.saturating_duration_since(Instant::now());
        let (n, o) = rx.recv_timeout(left).expect("every run answered");
        assert!(seen.insert(n), "run {n} answered twice");
        assert!(matches!(o, CheckOutcome::Failed(_)), "{o:?}");
        answered += 1;
    }
    // The pool has room again: a run against a live server passes.
    let port = server(Some(204));
    pool.submit(run(total, http(port, (200, 299))), Sandbox::default(), move |r, o| {
        let _ = tx.send((r.run, o));
    });
    let (n, o) = rx.recv_timeout(Duration::from_secs(30)).unwrap();
    assert_eq!((n, o), (total, CheckOutcome::Passed));
}
