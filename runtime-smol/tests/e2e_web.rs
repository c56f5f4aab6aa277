//! End-to-end: the web page in a real browser. A live cluster (a master
//! with `--http`, two workers, an application running) and headless
//! Chromium (Debian's `chromium`, installed by scripts/test) driven over
//! its remote debugging protocol: the page shows what a person should see
//! (the summary's numbers, the worker rows, the framework, links to every
//! executor's output), then a worker is killed and the same page, without
//! a reload, shows it DEAD. Screenshots go to the test's temp dir (and to
//! docs/web-ui.png with REGENT_BLESS=1).

mod support;

use serde_json::Value;
use std::time::Duration;
use support::chromium::Chromium;
use support::cluster::{api_state, executors, wait_for, Cluster, MasterSpec};

const BOUND: Duration = Duration::from_secs(60);

/// What the page shows, read from its DOM.
const READ_PAGE: &str = r#"(() => {
  const q = (s) => Array.from(document.querySelectorAll(s));
  const summary = {};
  q('[data-summary]').forEach(e => { summary[e.dataset.summary] = e.textContent; });
  return {
    conn: document.getElementById('conn').textContent,
    master: document.getElementById('master').textContent,
    marker: window.__regentTestMarker || null,
    summary,
    workers: q('tr[data-worker]').map(r => [r.dataset.worker, r.querySelector('.state').textContent]),
    frameworks: q('tr[data-framework]').map(r => [r.dataset.framework, r.innerText]),
    executors: q('tr[data-executor]').map(r => [r.dataset.executor,
      r.querySelector('a.log-stdout') && r.querySelector('a.log-stdout').getAttribute('href'),
      r.querySelector('a.log-stderr') && r.querySelector('a.log-stderr').getAttribute('href'),
      r.querySelector('.state').textContent]),
    events: q('#events li').map(li => li.textContent),
    text: document.body.innerText,
  };
})()"#;

fn running(state: &Value) -> usize {
    executors(state).iter().filter(|(_, s)| s == "RUNNING").count()
}

#[test]
fn the_page_shows_the_cluster_and_follows_it_live_in_chromium() {
    let cluster = Cluster::new("web");
    let spec = MasterSpec::new("m1", &["--worker-timeout", "3000", "--heartbeat-interval", "500"]);
    let _master = cluster.master(&spec);
    let masters = vec![spec.addr()];
    let _w1 = cluster.worker("w1", &masters, 4, 2048, &["--resource", "gpu=0,1"]);
    let mut w2 = cluster.worker("w2", &masters, 4, 2048, &[]);
    let _app = cluster.submit(
        "etl",
        &masters,
        &["--name", "etl", "--executors", "2", "--cores", "1", "--memory", "256"],
        &["sleep", "600"],
    );
    let http = spec.http_addr();
    let state = wait_for(BOUND, "two executors RUNNING on two workers", || {
        let s = api_state(&http).ok_or("no /api/state")?;
        let ws = s["workers"].as_array().map_or(0, Vec::len);
        if ws == 2 && running(&s) == 2 {
            Ok(s)
        } else {
            Err(format!("{s}"))
        }
    });
    let fw_id = state["frameworks"][0]["id"].as_str().expect("a framework id").to_owned();

    let mut browser = Chromium::launch(
        &format!("http://{http}/"),
        &cluster.path("chromium-profile"),
        &cluster.path("chromium.stderr"),
    );
    let page = wait_for(BOUND, "the page live with two workers", || {
        let v = browser.eval(READ_PAGE);
        if v["conn"] == "live" && v["workers"].as_array().map_or(0, Vec::len) == 2 {
            Ok(v)
        } else {
            Err(format!("{v}"))
        }
    });
    // The summary: what a person reads first.
    assert_eq!(page["summary"]["workers"], "2", "{page}");
    assert_eq!(page["summary"]["cores"], "2 / 8", "{page}");
    assert_eq!(page["summary"]["memory"], "512 MiB / 4.0 GiB", "{page}");
    assert_eq!(page["summary"]["frameworks-running"], "1", "{page}");
    assert_eq!(page["summary"]["executors"], "2", "{page}");
    let text = page["text"].as_str().unwrap_or_default();
    assert!(text.contains("master m1 · ALIVE"), "{text}");
    assert!(text.contains("ALIVE 2"), "workers by state: {text}");
    assert!(text.contains("1 finished") || text.contains("0 finished"), "{text}");
    let workers: Vec<(String, String)> =
        serde_json::from_value(page["workers"].clone()).expect("worker rows");
    assert_eq!(workers, vec![("w1".into(), "ALIVE".into()), ("w2".into(), "ALIVE".into())]);
    let fws = page["frameworks"].as_array().expect("framework rows");
    assert_eq!(fws.len(), 1, "{page}");
    assert_eq!(fws[0][0], fw_id.as_str());
    let row = fws[0][1].as_str().unwrap_or_default();
    assert!(row.contains("etl") && row.contains("ACTIVE") && row.contains("2 / 0 / 2"), "{row}");

    // The framework's page: its executors, each linked to its output.
    browser.eval(&format!("location.hash = '#/frameworks/' + encodeURIComponent('{fw_id}'); 1"));
    let fw_page = wait_for(BOUND, "the framework page with two executors", || {
        let v = browser.eval(READ_PAGE);
        if v["executors"].as_array().map_or(0, Vec::len) == 2 {
            Ok(v)
        } else {
            Err(format!("{v}"))
        }
    });
    for x in fw_page["executors"].as_array().unwrap() {
        let id = x[0].as_str().unwrap();
        let enc = id.replace('/', "%2F").replace('#', "%23");
        assert_eq!(x[1], format!("/api/logs/{enc}?stream=stdout").as_str(), "{x}");
        assert_eq!(x[2], format!("/api/logs/{enc}?stream=stderr").as_str(), "{x}");
        assert_eq!(x[3], "RUNNING", "{x}");
    }
    let fw_text = fw_page["text"].as_str().unwrap_or_default();
    assert!(fw_text.contains("Framework etl") && fw_text.contains("main[0]"), "{fw_text}");
    // A worker's page lists the executors placed on it.
    let on_w1 = state["executors"]
        .as_array()
        .map_or(0, |xs| xs.iter().filter(|x| x["worker_id"] == "w1").count());
    browser.eval("location.hash = '#/workers/w1'; 1");
    wait_for(BOUND, "worker w1's page", || {
        let v = browser.eval(READ_PAGE);
        let t = v["text"].as_str().unwrap_or_default().to_owned();
        let n = v["executors"].as_array().map_or(0, Vec::len);
        // Its named resources, free and used, and whom it runs executors as.
        if t.contains("Worker w1")
            && t.contains(&format!("Executors on w1 ({on_w1})"))
            && t.contains("gpu: free 0,1; used none (0 of 2 held)")
            && t.contains("Runs executors as")
            && n == on_w1
        {
            Ok(())
        } else {
            Err(format!("{n} executor rows, {on_w1} expected: {t}"))
        }
    });
    browser.eval("location.hash = '#/'; 1");
    wait_for(BOUND, "back on the cluster view", || {
        let v = browser.eval(READ_PAGE);
        if v["workers"].as_array().map_or(0, Vec::len) == 2 {
            Ok(())
        } else {
            Err(format!("{v}"))
        }
    });
    browser.screenshot(&cluster.path("web-ui-before.png"));

    // A tenant set: the page shows each tenant's use beside its guarantee
    // and limit (docs/tenants.md), re-read from the leader's /v1/tenants.
    let out = cluster.run(
        &[
            "tenant",
            "set",
            "team-a",
            "--guarantee",
            "cores=2",
            "--limit",
            "cores=4",
            "--weight",
            "3",
            "--masters",
            &spec.addr(),
        ],
        BOUND,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "regent tenant set: {err}");
    wait_for(BOUND, "the tenants on the page", || {
        let mut row = |name: &str| {
            browser.eval(&format!(
                "(() => {{ const r = document.querySelector('tr[data-tenant=\"{name}\"]'); \
                 return r ? r.innerText : null; }})()"
            ))
        };
        let (a, d) = (row("team-a"), row("default"));
        let (a, d) = (a.as_str().unwrap_or_default(), d.as_str().unwrap_or_default());
        // team-a: weight 3, nothing held, its guarantee and limit; default
        // (not set): etl's two 1-core executors.
        if a.contains('3')
            && a.contains("cores=0")
            && a.contains("cores=2")
            && a.contains("cores=4")
            && d.contains("not set")
            && d.contains("cores=2")
        {
            Ok(())
        } else {
            Err(format!("team-a: {a:?}; default: {d:?}"))
        }
    });

    // A worker dies: the same page (no reload: the marker stays) shows it.
    browser.eval("window.__regentTestMarker = 'same page'; 1");
    w2.kill9();
    let after = wait_for(BOUND, "the page showing w2 DEAD without a reload", || {
        let v = browser.eval(READ_PAGE);
        let dead = v["workers"]
            .as_array()
            .is_some_and(|ws| ws.iter().any(|w| w[0] == "w2" && w[1] == "DEAD"));
        if dead {
            Ok(v)
        } else {
            Err(format!("{v}"))
        }
    });
    assert_eq!(after["marker"], "same page", "the page was not reloaded");
    assert_eq!(after["conn"], "live", "{after}");
    let events: Vec<String> = serde_json::from_value(after["events"].clone()).unwrap();
    assert!(
        events.iter().any(|e| e.contains("worker w2 ALIVE → DEAD")),
        "the change is listed: {events:?}"
    );
    // Let the replacement executor settle for the picture.
    std::thread::sleep(Duration::from_millis(1_500));
    let shot = cluster.path("web-ui.png");
    browser.screenshot(&shot);
    assert!(std::fs::metadata(&shot).map(|m| m.len() > 10_000).unwrap_or(false), "a real PNG");
    if std::env::var_os("REGENT_BLESS").is_some() {
        let docs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/web-ui.png");
        std::fs::create_dir_all(docs.parent().unwrap()).unwrap();
        std::fs::copy(&shot, &docs).expect("copy the screenshot into docs/");
    }

    // Names are shown as text, never run as markup.
    let evil = "<img src=x onerror=\"window.__regentXss=1\">";
    let _evil_app = cluster.submit(
        "evil",
        &masters,
        &["--name", evil, "--executors", "1", "--cores", "1", "--memory", "64"],
        &["sleep", "600"],
    );
    let page = wait_for(BOUND, "the second framework on the page", || {
        let v = browser.eval(READ_PAGE);
        if v["frameworks"].as_array().map_or(0, Vec::len) == 2 {
            Ok(v)
        } else {
            Err(format!("{v}"))
        }
    });
    assert!(page["text"].as_str().unwrap_or_default().contains(evil), "{page}");
    let injected =
        browser.eval("[document.querySelectorAll('main img').length, window.__regentXss || 0]");
    assert_eq!(injected, serde_json::json!([0, 0]), "markup from a name ran");
}

/// A stand-in for a master's HTTP server: the real page at `/`, `state` at
/// `/api/state` (re-read on every request), and `404` for `/api/events`, so
/// the page must fall back to polling.
fn fake_master(state: std::sync::Arc<std::sync::Mutex<Value>>) -> String {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            let state = state.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                let mut line = String::new();
                let _ = reader.read_line(&mut line);
                loop {
                    let mut h = String::new();
                    if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
                        break;
                    }
                }
                let path = line.split_whitespace().nth(1).unwrap_or("/").to_owned();
                let (code, kind, body) = match path.as_str() {
                    "/" => ("200 OK", "text/html", regent_smol::http::page::PAGE.to_owned()),
                    "/api/state" => {
                        ("200 OK", "application/json", state.lock().unwrap().to_string())
                    }
                    _ => ("404 Not Found", "text/plain", "not found\n".to_owned()),
                };
                let _ = write!(
                    conn,
                    "HTTP/1.1 {code}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\n\
                     Connection: close\r\n\r\n{body}",
                    body.len()
                );
            });
        }
    });
    addr
}

#[test]
fn the_page_shows_cordoned_draining_workers_and_history_and_falls_back_to_polling() {
    let cluster = Cluster::new("web-fields");
    // The fields other parts of the API add: cordoned, DRAINING and DRAINED
    // workers, finished frameworks in `history`.
    let state = serde_json::json!({
        "id": "m1", "status": "ALIVE", "epoch": 7, "leader": "127.0.0.1:5050",
        "leader_id": "m1", "leader_epoch": 7, "messages": 1, "rejected_messages": 0,
        "rejected_connections": 0,
        "workers": [
            {"id": "w1", "state": "ALIVE", "cordoned": true, "cores": 4, "cores_used": 1,
             "memory_mb": 1024, "memory_used_mb": 128},
            {"id": "w2", "state": "DRAINING", "cordoned": true, "cores": 4, "cores_used": 0,
             "memory_mb": 1024, "memory_used_mb": 0},
            {"id": "w3", "state": "DRAINED", "cores": 4, "cores_used": 0,
             "memory_mb": 1024, "memory_used_mb": 0}
        ],
        "frameworks": [{"id": "fw-00000000000000aa", "name": "live-app", "state": "ACTIVE",
                        "connected": true,
                        "groups": [{"name": "main", "slots": 6, "declared_slots": 6,
                                    "running": 3, "waiting_to_restart": 0, "unplaced": 3,
                                    "reason_words": [
                                        "needs 2 more gpu: the most free on a matching worker is 0",
                                        "1 matching worker(s) are cordoned"]}]}],
        "executors": [{"id": "fw-00000000000000aa/main#0#7.1", "framework_id": "fw-00000000000000aa",
                       "worker_id": "w1", "state": "RUNNING"}],
        "history": [{"id": "fw-00000000000000bb", "name": "nightly", "outcome": "FINISHED",
                     "finished_at_ms": 1_700_000_000_000u64,
                     "slots": [
                        {"slot": 0, "state": "EXITED", "exit_code": 0,
                         "executor": "fw-00000000000000bb/main#0#6.1", "worker": "w1"},
                        {"slot": 1, "state": "FAILED", "reason": "exit 3",
                         "executor": "fw-00000000000000bb/main#1#6.2", "worker": "w2"}]}]
    });
    let shared = std::sync::Arc::new(std::sync::Mutex::new(state));
    let addr = fake_master(shared.clone());
    let mut browser = Chromium::launch(
        &format!("http://{addr}/"),
        &cluster.path("chromium-profile"),
        &cluster.path("chromium.stderr"),
    );
    let page = wait_for(BOUND, "the page polling with three workers", || {
        let v = browser.eval(READ_PAGE);
        if v["conn"] == "polling" && v["workers"].as_array().map_or(0, Vec::len) == 3 {
            Ok(v)
        } else {
            Err(format!("{v}"))
        }
    });
    let text = page["text"].as_str().unwrap_or_default();
    let workers: Vec<(String, String)> = serde_json::from_value(page["workers"].clone()).unwrap();
    assert_eq!(
        workers,
        vec![
            ("w1".into(), "ALIVE".into()),
            ("w2".into(), "DRAINING".into()),
            ("w3".into(), "DRAINED".into())
        ]
    );
    let cordoned = browser.eval(
        "Array.from(document.querySelectorAll('tr[data-worker]')).filter(r => \
         r.querySelector('.cordoned')).map(r => r.dataset.worker)",
    );
    assert_eq!(cordoned, serde_json::json!(["w1", "w2"]));
    assert!(text.contains("Finished frameworks (1)") && text.contains("nightly"), "{text}");
    assert_eq!(page["summary"]["frameworks-running"], "1");
    assert!(text.contains("1 finished"), "{text}");
    // A framework of 6 slots, 3 running and 3 waiting: the row counts the
    // waiting ones (running / waiting / total).
    let rows = browser.eval(
        "Array.from(document.querySelectorAll('[data-framework-slots]')).map(e => e.textContent)",
    );
    assert_eq!(rows, serde_json::json!(["3 / 3 / 6"]), "running / waiting / total");
    // The finished framework's page: every slot's final state and output.
    browser.eval("location.hash = '#/frameworks/fw-00000000000000bb'; 1");
    let slots = wait_for(BOUND, "the finished framework's slots", || {
        let v = browser.eval(
            "Array.from(document.querySelectorAll('tr[data-slot]')).map(r => [r.innerText, \
             r.querySelector('a.log-stderr') && r.querySelector('a.log-stderr').getAttribute('href')])",
        );
        if v.as_array().map_or(0, Vec::len) == 2 {
            Ok(v)
        } else {
            Err(format!("{v}"))
        }
    });
    let first = slots[0][0].as_str().unwrap_or_default();
    assert!(
        first.contains("main[0]") && first.contains("EXITED") && first.contains("code 0"),
        "{slots}"
    );
    let second = slots[1][0].as_str().unwrap_or_default();
    assert!(second.contains("FAILED") && second.contains("exit 3"), "{slots}");
    assert_eq!(slots[1][1], "/api/logs/fw-00000000000000bb%2Fmain%231%236.2?stream=stderr");
    // Its page says why its waiting slots wait, every reason.
    browser.eval("location.hash = '#/frameworks/fw-00000000000000aa'; 1");
    let why = wait_for(BOUND, "the live framework's waiting slots and reasons", || {
        let v = browser.eval(
            "Array.from(document.querySelectorAll('[data-group-waiting] li')).map(e => e.textContent)",
        );
        if v.as_array().map_or(0, Vec::len) == 2 {
            Ok(v)
        } else {
            Err(format!("{v}"))
        }
    });
    assert_eq!(
        why,
        serde_json::json!([
            "needs 2 more gpu: the most free on a matching worker is 0",
            "1 matching worker(s) are cordoned"
        ])
    );
    // Polling follows a change without a reload.
    browser.eval("window.__regentTestMarker = 'same page'; location.hash = '#/'; 1");
    shared.lock().unwrap()["workers"][2]["state"] = "DEAD".into();
    let after = wait_for(BOUND, "w3 DEAD by polling", || {
        let v = browser.eval(READ_PAGE);
        let dead = v["workers"]
            .as_array()
            .is_some_and(|ws| ws.iter().any(|w| w[0] == "w3" && w[1] == "DEAD"));
        if dead {
            Ok(v)
        } else {
            Err(format!("{v}"))
        }
    });
    assert_eq!(after["marker"], "same page");
    browser.screenshot(&cluster.path("web-ui-fields.png"));
}
