//! End-to-end: `regent events --http` follows the leader's `GET /v1/events`
//! stream across a kill -9 of the leader (issue 43, docs/design.md#issue-43; docs/api.md "The event
//! stream"). Two ZooKeeper masters, real processes on loopback, bounded
//! waits; the ZooKeeper server and every process end with the test.

mod support;

use serde_json::Value;
use std::time::Duration;
use support::cluster::{api_state, wait_for, Cluster, Kind, MasterSpec, Proc};
use support::zk_server::ZkServer;

const BOUND: Duration = Duration::from_secs(60);

/// The JSON lines `regent events --http --json` printed so far.
fn lines(p: &Proc) -> Vec<Value> {
    p.stdout().lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

/// The epoch of an `EPOCH.SEQ` index.
fn epoch_of(line: &Value) -> u64 {
    index_of(line).0
}

/// An `EPOCH.SEQ` index as a pair that orders as the stream does.
fn index_of(line: &Value) -> (u64, u64) {
    let index = line["index"].as_str().unwrap_or_else(|| panic!("no index in {line}"));
    let (e, q) = index.split_once('.').unwrap_or_else(|| panic!("{index}"));
    (
        e.parse().unwrap_or_else(|_| panic!("{index}")),
        q.parse().unwrap_or_else(|_| panic!("{index}")),
    )
}

fn worker_event(line: &Value, worker: &str) -> bool {
    line["event"]["kind"] == "worker" && line["event"]["worker"] == worker
}

#[test]
fn regent_events_http_continues_at_the_new_leader_after_a_kill_9() {
    let zk = ZkServer::start();
    let c = Cluster::new("events-http");
    let root = format!("/{}", support::cluster::unique("events-http"));
    let specs = ["m1", "m2"].map(|id| {
        let mut spec = MasterSpec::zookeeper(id, &zk.addr(), &root, 4_000);
        let fast = ["--worker-timeout", "2000", "--heartbeat-interval", "500"];
        spec.args.extend(fast.map(String::from));
        spec
    });
    let addrs: Vec<String> = specs.iter().map(MasterSpec::addr).collect();
    let mut m1 = c.master(&specs[0]);
    wait_for(BOUND, "m1 ALIVE", || match api_state(&specs[0].http_addr()) {
        Some(v) if v["status"] == "ALIVE" => Ok(()),
        other => Err(format!("{other:?}")),
    });
    let _m2 = c.master(&specs[1]);
    wait_for(BOUND, "m2 STANDBY", || match api_state(&specs[1].http_addr()) {
        Some(v) if v["status"] == "STANDBY" => Ok(()),
        other => Err(format!("{other:?}")),
    });
    // The standby first: its 503 sends the command on to m1.
    let urls = format!("http://{},http://{}", specs[1].http_addr(), specs[0].http_addr());
    let json = c.spawn("events-json", Kind::Other, &["events", "--http", &urls, "--json"]);
    let text = c.spawn("events-text", Kind::Other, &["events", "--http", &urls]);
    let start = wait_for(BOUND, "the stream's first line", || {
        lines(&json).into_iter().next().ok_or_else(|| json.stderr())
    });
    let old_epoch = epoch_of(&start);

    let _w1 = c.worker("w1", &addrs, 1, 256, &[]);
    let added = wait_for(BOUND, "w1's registration in the JSON stream", || {
        let ls = lines(&json);
        ls.iter().find(|l| worker_event(l, "w1")).cloned().ok_or_else(|| format!("{ls:#?}"))
    });
    assert_eq!(added["event"]["change"], "added", "{added}");
    assert_eq!(epoch_of(&added), old_epoch, "{added}");
    wait_for(BOUND, "w1's registration in the text stream", || {
        let out = text.stdout();
        if out.lines().any(|l| l.starts_with("worker w1 ")) {
            Ok(())
        } else {
            Err(format!("{out}\n{}", text.stderr()))
        }
    });
    let before_kill = lines(&json).len();

    // The leader dies: the stream breaks, the command resumes at m2 after
    // the last index it printed.
    m1.kill9();
    wait_for(BOUND, "m2 ALIVE", || match api_state(&specs[1].http_addr()) {
        Some(v) if v["status"] == "ALIVE" => Ok(()),
        other => Err(format!("{other:?}")),
    });
    // A worker joins the new leader, then dies: its death is an event of
    // the new leader's however late the command reached it (its joining
    // may already be in the state a gap line resumes from).
    let mut w2 = c.worker("w2", &addrs, 1, 256, &[]);
    wait_for(BOUND, "w2 ALIVE at m2", || match api_state(&specs[1].http_addr()) {
        Some(v) if v["workers"].as_array().is_some_and(|ws| ws.iter().any(|w| w["id"] == "w2")) => {
            Ok(())
        }
        other => Err(format!("{other:?}")),
    });
    w2.kill9();
    let ls = wait_for(BOUND, "w2's death from the new leader", || {
        let ls = lines(&json);
        if ls.iter().any(|l| worker_event(l, "w2") && l["event"]["state"] == "DEAD") {
            Ok(ls)
        } else {
            Err(format!("{ls:#?}\n{}", json.stderr()))
        }
    });
    let after: Vec<&Value> = ls[before_kill..].iter().collect();
    let w2 = after.iter().position(|l| worker_event(l, "w2")).expect("w2 after the kill");
    assert!(epoch_of(after[w2]) > old_epoch, "w2 comes from the new leader: {after:#?}");
    // Either the command printed the gap line before the new leader's
    // events, or the new leader continued the index exactly.
    let gap = after.iter().position(|l| l["gap"] == true);
    match gap {
        Some(g) => {
            assert!(g < w2, "the gap line comes before the new leader's events: {after:#?}");
            assert_eq!(after[g]["resync"], "/v1/jobs", "{after:#?}");
            assert!(epoch_of(after[g]) > old_epoch, "{after:#?}");
        }
        None => {
            // Without a gap, every line after the kill continues the stream:
            // each index after the last one printed before it.
            let mut prev = index_of(&ls[before_kill - 1]);
            for l in &after {
                assert!(index_of(l) > prev, "indexes grow without a gap: {ls:#?}");
                prev = index_of(l);
            }
        }
    }
    // The text form says the same: the gap line naming the last index seen
    // (when the JSON follower got one, so did this one: both resumed after
    // an index of the dead leader's epoch), then w2.
    let out = wait_for(BOUND, "w2's death in the text stream", || {
        let out = text.stdout();
        if out.lines().any(|l| l.starts_with("worker w2 ") && l.contains("DEAD")) {
            Ok(out)
        } else {
            Err(format!("{out}\n{}", text.stderr()))
        }
    });
    let text_lines: Vec<&str> = out.lines().collect();
    let w2_text = text_lines.iter().position(|l| l.starts_with("worker w2 ")).unwrap();
    let gap_text = text_lines.iter().position(|l| l.starts_with("gap: "));
    if gap.is_some() {
        let g = gap_text.unwrap_or_else(|| panic!("no gap line in the text form: {out}"));
        assert!(g < w2_text, "{out}");
        let line = text_lines[g];
        let since = line
            .strip_prefix("gap: events were missed since ")
            .and_then(|r| r.strip_suffix("; re-read /v1/jobs"))
            .unwrap_or_else(|| panic!("{line}"));
        assert!(since.starts_with(&format!("{old_epoch}.")), "the old leader's index: {line}");
    }
    drop(zk);
}
