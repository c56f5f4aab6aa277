//! The history of finished frameworks at the master: how each way a
//! framework ends is recorded, the order of the store writes, eviction past
//! `retained_frameworks`, and recovery by a new leader (including a crash
//! between the history write and the framework record's delete).

mod common;

use common::*;
use regent_core::ids::InstanceId;
use regent_core::master::{self, Master};
use regent_core::protocol::{ExecutorReport, ExecutorState, GroupSpec, Message, Role, Subscribe};
use regent_core::protocol::{FinishedFramework, FrameworkOutcome};
use regent_core::store::{Record, RecordKey};
use regent_core::store::{StoreCommand, StoreEvent};
use regent_core::{ConnId, Epoch, ExecutorId, FrameworkId, Incarnation, Millis};

const T: Millis = Millis(0);
/// Wall-clock ms the runtime passes at the election.
const WALL: u64 = 1_764_603_000_000;

/// The history records' numbers in a [`Store`] (common to the scenario
/// tests; it applies the master's writes in order, as the runtimes do).
fn history_keys(store: &Store) -> Vec<u64> {
    store
        .records
        .keys()
        .filter_map(|k| match k {
            RecordKey::History(s) => Some(*s),
            _ => None,
        })
        .collect()
}

struct Cluster {
    m: Master,
    store: Store,
    now: Millis,
}

fn config(retained: usize) -> master::Config {
    let mut cfg = master::Config::new("a".into(), addr("a"));
    cfg.max_executor_retries = 0;
    cfg.retained_frameworks = retained;
    // The one worker never heartbeats: it outlives every test's clock, so a
    // tick's sweep never declares it DEAD.
    cfg.worker_timeout = Millis(10_000_000);
    cfg
}

impl Cluster {
    /// A leader elected over `store` with the wall clock [`WALL`] at `now`,
    /// and one worker of 16 cores on conn 100.
    fn new(retained: usize, store: Store, now: Millis) -> Self {
        let mut c = Cluster { m: Master::new(config(retained)), store, now };
        let out = c.m.handle(now, master::Event::Elected { floor: Epoch(1), clock: WALL + now.0 });
        assert_eq!(out, vec![master::Action::Store(StoreCommand::LoadRecords)]);
        let records: Vec<Record> = c.store.records.values().cloned().collect();
        let out = c.m.handle(now, master::Event::Store(StoreEvent::Loaded { records }));
        c.run(out);
        c.register_worker();
        c
    }

    fn run(&mut self, out: Vec<master::Action>) -> Vec<master::Action> {
        self.store.run(&mut self.m, self.now, out)
    }

    fn send(&mut self, conn: u64, msg: Message) -> Vec<master::Action> {
        let out = self.m.handle(self.now, master::Event::Message { conn: ConnId(conn), msg });
        self.run(out)
    }

    fn open(&mut self, conn: u64, role: Role) {
        let _ = self.m.handle(self.now, master::Event::Connected { conn: ConnId(conn) });
        let _ = self.send(conn, hello(role, "x"));
    }

    fn register_worker(&mut self) {
        self.open(100, Role::Worker);
        let reg = Message::RegisterWorker(regent_core::protocol::RegisterWorker {
            users: Default::default(),
            resources: Default::default(),
            host: Default::default(),
            ports: Default::default(),
            worker: "w0".into(),
            incarnation: Incarnation(100),
            cores: 16,
            memory_mb: 16_384,
            executors: vec![],
            epoch_seen: Epoch(1),
            launch_seen: 0,
            attributes: vec![],
        });
        let _ = self.send(100, reg);
    }

    /// Subscribes framework `fw` on `conn` and declares group `main` of
    /// `slots` slots; returns the launched executors.
    fn start(&mut self, conn: u64, fw: &str, slots: u32) -> Vec<ExecutorId> {
        self.open(conn, Role::Subscriber);
        let _ = self.send(
            conn,
            Message::Subscribe(Subscribe {
                framework: Some(FrameworkId::new(fw)),
                name: format!("app {fw}"),
                instance: InstanceId(conn),
                attempt: 1,
                failover_timeout: Millis(30_000),
                tenant: None,
            }),
        );
        let spec = GroupSpec {
            group: "main".into(),
            slots,
            command: vec!["/bin/true".into()],
            env: vec![],
            cores: 1,
            memory_mb: 64,
            policy: Default::default(),
            launch: Default::default(),
        };
        let out = self.send(conn, Message::DeclareGroup { request: 1, spec });
        m_sends(&out)
            .into_iter()
            .filter_map(|(_, m)| match m {
                Message::LaunchExecutor { executor, .. } => Some(executor),
                _ => None,
            })
            .collect()
    }

    fn report(&mut self, fw: &str, ex: &ExecutorId, state: ExecutorState) {
        let report = ExecutorReport {
            health: None,
            ran_ms: None,
            resources: Default::default(),
            ports: Default::default(),
            id: ex.clone(),
            framework: FrameworkId::new(fw),
            cores: 1,
            memory_mb: 64,
            state,
        };
        let _ = self.send(100, Message::ExecutorStatus { incarnation: Incarnation(100), report });
    }

    fn newest(&self) -> FinishedFramework {
        self.m.history().last().expect("a finished framework").clone()
    }
}

fn accepted(out: &[master::Action], request: u64) -> bool {
    m_sends(out)
        .iter()
        .any(|(_, m)| matches!(m, Message::RequestAccepted { request: r, .. } if *r == request))
}

#[test]
fn a_framework_whose_slots_all_exit_0_and_tears_down_is_completed() {
    let mut c = Cluster::new(200, Store::default(), Millis(5_000));
    let ex = c.start(1, "fw-a", 2);
    assert_eq!(ex.len(), 2);
    c.now = Millis(9_000);
    for e in &ex {
        c.report("fw-a", e, ExecutorState::Running);
        c.report("fw-a", e, ExecutorState::Exited { code: 0 });
    }
    c.now = Millis(12_000);
    let first = c.m.handle(
        c.now,
        master::Event::Message { conn: ConnId(1), msg: Message::Teardown { request: 2 } },
    );
    // The history record is the only write of the step, and nothing is
    // acknowledged before the framework record's delete is durable.
    let writes: Vec<&master::Action> = first
        .iter()
        .filter(|a| {
            matches!(
                a,
                master::Action::Store(StoreCommand::Persist { .. })
                    | master::Action::Store(StoreCommand::Unpersist { .. })
            )
        })
        .collect();
    assert!(
        matches!(
            writes[..],
            [master::Action::Store(StoreCommand::Persist { record: Record::History(_), .. })]
        ),
        "{writes:?}"
    );
    assert!(!accepted(&first, 2));
    let log_before = c.store.log.len();
    let rest = c.run(first);
    assert!(accepted(&rest, 2));
    assert_eq!(
        c.store.log[log_before..],
        [(true, RecordKey::History(0)), (false, RecordKey::Framework(FrameworkId::new("fw-a")))],
        "history written before the framework record is deleted"
    );
    assert_eq!(c.m.frameworks().count(), 0);
    let f = c.newest();
    assert_eq!(f.id, FrameworkId::new("fw-a"));
    assert_eq!(f.name, "app fw-a");
    assert_eq!(f.outcome, FrameworkOutcome::Completed);
    assert_eq!(f.finished_at_ms, WALL + 12_000, "wall clock at the election plus the time since");
    assert_eq!(f.registered_at_ms, Some(WALL + 5_000));
    assert_eq!(f.slots.len(), 2);
    for (i, s) in f.slots.iter().enumerate() {
        assert_eq!((s.group.as_str(), s.slot), ("main", i as u32));
        assert_eq!(s.executor.as_ref(), Some(&ex[i]));
        assert_eq!(s.state, Some(ExecutorState::Exited { code: 0 }));
        assert_eq!(s.exit_code(), Some(0));
        assert_eq!(s.attempts, 1);
    }
    // And the operator's view, newest first.
    let state = c.m.state();
    assert_eq!(state.history, vec![f]);
    assert_eq!(state.history_omitted, 0);
}

#[test]
fn an_operator_kill_is_killed_and_its_running_executors_end_killed() {
    let mut c = Cluster::new(200, Store::default(), T);
    let ex = c.start(1, "fw-k", 2);
    c.report("fw-k", &ex[0], ExecutorState::Running);
    c.report("fw-k", &ex[1], ExecutorState::Exited { code: 0 });
    c.open(7, Role::Client);
    let out = c.send(7, Message::KillFramework { request: 9, framework: FrameworkId::new("fw-k") });
    assert!(accepted(&out, 9));
    assert!(m_sends(&out).iter().any(|(conn, m)| *conn == ConnId(100)
        && matches!(m, Message::KillExecutorOnWorker { executor, .. } if *executor == ex[0])));
    let f = c.newest();
    assert_eq!(f.outcome, FrameworkOutcome::Killed);
    assert_eq!(f.slots[0].state, Some(ExecutorState::Killed));
    assert_eq!(f.slots[0].exit_code(), None);
    assert_eq!(f.slots[1].state, Some(ExecutorState::Exited { code: 0 }));
    assert!(!c.store.records.contains_key(&RecordKey::Framework(FrameworkId::new("fw-k"))));
}

#[test]
fn a_teardown_before_the_slots_are_done_is_torn_down_and_a_failed_slot_makes_it_failed() {
    let mut c = Cluster::new(200, Store::default(), T);
    let ex = c.start(1, "fw-t", 1);
    c.report("fw-t", &ex[0], ExecutorState::Running);
    let _ = c.send(1, Message::Teardown { request: 2 });
    assert_eq!(c.newest().outcome, FrameworkOutcome::TornDown);
    assert_eq!(c.newest().slots[0].state, Some(ExecutorState::Killed));

    // No retries: a non-zero exit fails the slot.
    let ex = c.start(2, "fw-f", 2);
    c.report("fw-f", &ex[0], ExecutorState::Exited { code: 3 });
    c.report("fw-f", &ex[1], ExecutorState::Exited { code: 0 });
    let _ = c.send(2, Message::Teardown { request: 2 });
    let f = c.newest();
    assert_eq!(f.outcome, FrameworkOutcome::Failed);
    assert_eq!(f.slots[0].executor.as_ref(), Some(&ex[0]));
    assert_eq!(f.slots[0].state_name(), "FAILED");
    assert_eq!(f.slots[1].exit_code(), Some(0));

    // A framework that declared nothing and tears down is torn down.
    c.open(3, Role::Subscriber);
    let sub = Subscribe {
        framework: Some(FrameworkId::new("fw-empty")),
        name: "e".into(),
        instance: InstanceId(3),
        attempt: 1,
        failover_timeout: Millis(30_000),
        tenant: None,
    };
    let _ = c.send(3, Message::Subscribe(sub));
    let _ = c.send(3, Message::Teardown { request: 1 });
    assert_eq!(c.newest().outcome, FrameworkOutcome::TornDown);
    assert!(c.newest().slots.is_empty());
}

#[test]
fn a_framework_past_its_failover_timeout_is_timed_out() {
    let mut c = Cluster::new(200, Store::default(), T);
    let ex = c.start(1, "fw-o", 1);
    c.report("fw-o", &ex[0], ExecutorState::Running);
    let _ = c.m.handle(Millis(1_000), master::Event::Disconnected { conn: ConnId(1) });
    c.now = Millis(31_001);
    let out = c.m.handle(c.now, master::Event::Tick);
    let _ = c.run(out);
    let f = c.newest();
    assert_eq!(f.outcome, FrameworkOutcome::TimedOut);
    assert_eq!(f.finished_at_ms, WALL + 31_001);
    assert_eq!(f.slots[0].state, Some(ExecutorState::Killed));
    assert_eq!(history_keys(&c.store), vec![0]);
    assert!(!c.store.records.contains_key(&RecordKey::Framework(FrameworkId::new("fw-o"))));

    // `regent submit` leaves a finished application behind: once its
    // failover timeout expires, its slots decide the outcome.
    let ex = c.start(2, "fw-done", 1);
    c.report("fw-done", &ex[0], ExecutorState::Exited { code: 0 });
    let _ = c.m.handle(c.now, master::Event::Disconnected { conn: ConnId(2) });
    c.now = Millis(62_002);
    let out = c.m.handle(c.now, master::Event::Tick);
    let _ = c.run(out);
    assert_eq!(c.newest().id.as_str(), "fw-done");
    assert_eq!(c.newest().outcome, FrameworkOutcome::Completed);
}

#[test]
fn the_oldest_entries_past_the_limit_are_deleted_from_the_store() {
    let mut c = Cluster::new(2, Store::default(), T);
    for (i, fw) in ["fw-1", "fw-2", "fw-3"].iter().enumerate() {
        let conn = 1 + i as u64;
        let _ = c.start(conn, fw, 1);
        let _ = c.send(conn, Message::Teardown { request: 2 });
    }
    let ids: Vec<&str> = c.m.history().map(|f| f.id.as_str()).collect();
    assert_eq!(ids, ["fw-2", "fw-3"], "oldest first, the first one evicted");
    assert_eq!(history_keys(&c.store), vec![1, 2]);
    let shown: Vec<String> = c.m.state().history.iter().map(|f| f.id.to_string()).collect();
    assert_eq!(shown, ["fw-3", "fw-2"], "newest first");
}

#[test]
fn a_new_leader_recovers_the_history_and_numbers_after_it() {
    let mut c = Cluster::new(200, Store::default(), T);
    let _ = c.start(1, "fw-1", 1);
    let _ = c.send(1, Message::Teardown { request: 2 });
    c.open(7, Role::Client);
    let _ = c.start(2, "fw-2", 1);
    let _ = c.send(7, Message::KillFramework { request: 3, framework: FrameworkId::new("fw-2") });
    let before: Vec<FinishedFramework> = c.m.history().cloned().collect();
    assert_eq!(before.len(), 2);

    // The leader dies; another loads the store.
    let store = std::mem::take(&mut c.store);
    let mut d = Cluster::new(200, store, Millis(100));
    let after: Vec<FinishedFramework> = d.m.history().cloned().collect();
    assert_eq!(after, before, "every entry as it was written");
    assert_eq!(d.m.frameworks().count(), 0);
    let _ = d.start(1, "fw-3", 1);
    let _ = d.send(1, Message::Teardown { request: 2 });
    assert_eq!(history_keys(&d.store), vec![0, 1, 2], "numbered after the recovered ones");

    // A new leader with a smaller limit deletes the oldest when it loads.
    let store = std::mem::take(&mut d.store);
    let e = Cluster::new(1, store, Millis(200));
    let ids: Vec<&str> = e.m.history().map(|f| f.id.as_str()).collect();
    assert_eq!(ids, ["fw-3"]);
    assert_eq!(history_keys(&e.store), vec![2]);
}

#[test]
fn a_crash_between_the_history_write_and_the_delete_leaves_the_framework_finished_once() {
    let mut c = Cluster::new(200, Store::default(), T);
    let _ = c.start(1, "fw-x", 1);
    let out = c.m.handle(
        c.now,
        master::Event::Message { conn: ConnId(1), msg: Message::Teardown { request: 2 } },
    );
    // Only the history write lands: the runtime dies before the delete.
    let history = out
        .iter()
        .find_map(|a| match a {
            master::Action::Store(StoreCommand::Persist {
                record: r @ Record::History(_), ..
            }) => Some(r.clone()),
            _ => None,
        })
        .expect("a history write");
    let mut store = std::mem::take(&mut c.store);
    store.records.insert(history.key(), history);
    let fw_key = RecordKey::Framework(FrameworkId::new("fw-x"));
    assert!(store.records.contains_key(&fw_key), "both records are in the store");
    // Another framework finished under the same id earlier, and subscribed
    // again once its entry was evicted by a leader with a smaller limit:
    // its live record differs from the finished one, and stays.
    let mut other = Cluster::new(200, Store::default(), T);
    let _ = other.start(1, "fw-y", 1);
    let _ = other.send(1, Message::Teardown { request: 2 });
    let mut again = Cluster::new(200, Store::default(), T);
    let _ = again.start(2, "fw-y", 2);
    for (k, r) in other.store.records.into_iter().chain(again.store.records) {
        match (k, r) {
            (RecordKey::History(_), Record::History(mut h)) => {
                h.seq = 7;
                store.records.insert(RecordKey::History(7), Record::History(h));
            }
            (k @ RecordKey::Framework(_), r) => {
                store.records.insert(k, r);
            }
            _ => {}
        }
    }

    let d = Cluster::new(200, store, Millis(100));
    let live: Vec<&str> = d.m.frameworks().map(|f| f.id.as_str()).collect();
    assert_eq!(live, ["fw-y"], "the finished fw-x is not live again; the resubscribed fw-y is");
    let finished: Vec<&str> = d.m.history().map(|f| f.id.as_str()).collect();
    assert_eq!(finished, ["fw-x", "fw-y"]);
    assert!(!d.store.records.contains_key(&fw_key), "the leftover record is deleted");
    assert!(d.store.records.contains_key(&RecordKey::Framework(FrameworkId::new("fw-y"))));
}

#[test]
fn a_finished_framework_cannot_subscribe_again_and_a_killed_ones_subscriber_is_told() {
    let mut c = Cluster::new(200, Store::default(), T);
    let ex = c.start(1, "fw-r", 1);
    c.report("fw-r", &ex[0], ExecutorState::Running);
    c.open(7, Role::Client);
    let out = c.send(7, Message::KillFramework { request: 9, framework: FrameworkId::new("fw-r") });
    // The live subscription hears why, and is closed.
    assert!(m_sends(&out).iter().any(|(conn, m)| *conn == ConnId(1)
        && matches!(m, Message::FrameworkError { message, failed_over_to: None, .. }
            if message.contains("killed by an operator"))));
    assert!(out.iter().any(|a| matches!(a, master::Action::Close { conn: ConnId(1), .. })));
    // Its subscriber reconnects: refused, nothing is created or launched.
    c.open(2, Role::Subscriber);
    let sub = Subscribe {
        framework: Some(FrameworkId::new("fw-r")),
        name: "again".into(),
        instance: InstanceId(1),
        attempt: 2,
        failover_timeout: Millis(30_000),
        tenant: None,
    };
    let out = c.send(2, Message::Subscribe(sub.clone()));
    let refused = m_sends(&out);
    assert!(
        matches!(&refused[..], [(ConnId(2), Message::SubscribeRefused { reason, .. })]
            if reason.contains("fw-r has finished (KILLED)")),
        "{refused:?}"
    );
    assert_eq!(c.m.frameworks().count(), 0);
    assert!(!c.store.records.contains_key(&RecordKey::Framework(FrameworkId::new("fw-r"))));

    // Once its entry is evicted, the id is free again.
    let mut d = Cluster::new(0, Store::default(), T);
    let _ = d.start(1, "fw-e", 1);
    let _ = d.send(1, Message::Teardown { request: 2 });
    assert_eq!(d.m.history().count(), 0);
    let _ = d.start(2, "fw-e", 1);
    assert_eq!(d.m.frameworks().count(), 1);
}

#[test]
fn a_reply_shows_at_most_the_slot_and_byte_limits_and_counts_the_rest() {
    let mut c = Cluster::new(10_000, Store::default(), T);
    let ex = c.start(1, "fw-big", 100);
    assert_eq!(ex.len(), 16, "one worker of 16 cores");
    let _ = c.send(1, Message::Teardown { request: 2 });
    let stored = c.newest();
    assert_eq!(stored.slots.len(), 100, "the record keeps every slot");
    let shown = &c.m.state().history[0];
    assert_eq!(shown.slots.len(), regent_core::limits::MAX_HISTORY_SLOTS_SHOWN);
    assert_eq!(shown.slots_omitted, 36);
    assert_eq!(shown.slots[20].state, None, "a slot that never ran");
    assert_eq!(shown.slots[20].attempts, 0);

    // Enough finished frameworks to pass the reply's byte limit.
    let mut conn = 10;
    let shown_len = |f: &FinishedFramework| {
        let mut f = f.clone();
        f.drop_slots_after(regent_core::limits::MAX_HISTORY_SLOTS_SHOWN);
        f.encoded_len()
    };
    while c.m.history().map(shown_len).sum::<usize>()
        <= regent_core::limits::MAX_HISTORY_STATE_BYTES
    {
        conn += 1;
        let _ = c.start(conn, &format!("fw-{conn:04}"), 8);
        let _ = c.send(conn, Message::Teardown { request: 2 });
    }
    let state = c.m.state();
    assert!(state.history_omitted > 0);
    assert_eq!(state.history.len() + state.history_omitted as usize, c.m.history().count());
    assert_eq!(state.history[0].id.as_str(), format!("fw-{conn:04}"), "newest first");
    let frame = regent_core::codec::encode(&Message::StateReply(Box::new(state)));
    assert!(frame.len() <= regent_core::codec::DEFAULT_MAX_FRAME);
}

#[test]
fn the_default_history_of_small_frameworks_is_a_small_part_of_a_reply() {
    let mut c = Cluster::new(regent_core::limits::DEFAULT_RETAINED_FRAMEWORKS, Store::default(), T);
    for i in 0..210u64 {
        let fw = format!("fw-{:016x}", 0x1a23_2493_a09e_2800 + i);
        let ex = c.start(1 + i, &fw, 2);
        for e in &ex {
            c.report(&fw, e, ExecutorState::Exited { code: 0 });
        }
        let _ = c.send(1 + i, Message::Teardown { request: 2 });
    }
    let state = c.m.state();
    assert_eq!(state.history.len(), 200);
    assert_eq!(state.history_omitted, 0);
    let bytes: usize = state.history.iter().map(FinishedFramework::encoded_len).sum();
    let frame = regent_core::codec::encode(&Message::StateReply(Box::new(state))).len();
    eprintln!(
        "200 finished frameworks of 2 slots: {bytes} bytes of history, a {frame}-byte StateReply"
    );
    assert!(bytes < 64 * 1024, "{bytes}");
}

#[test]
fn the_registration_time_survives_a_failover_in_the_framework_record() {
    let mut c = Cluster::new(200, Store::default(), Millis(3_000));
    let _ = c.start(1, "fw-long", 1);
    let store = std::mem::take(&mut c.store);
    // A new leader recovers the live framework and kills it.
    let mut d = Cluster::new(200, store, Millis(50_000));
    assert_eq!(d.m.frameworks().count(), 1);
    d.open(7, Role::Client);
    let _ =
        d.send(7, Message::KillFramework { request: 1, framework: FrameworkId::new("fw-long") });
    let f = d.newest();
    assert_eq!(f.registered_at_ms, Some(WALL + 3_000), "from the first leader's SUBSCRIBE");
    assert_eq!(f.finished_at_ms, WALL + 50_000);
}

/// Regression (CI, e2e_history's ZooKeeper failover): the leader showed a
/// finished framework in its history while the history record was still
/// being written, and a `kill -9` in that window left a successor whose
/// history was empty. An entry is shown once its record is durable; until
/// then the framework is still refused a new subscription.
#[test]
fn a_finished_framework_is_shown_only_once_its_history_record_is_durable() {
    let mut c = Cluster::new(200, Store::default(), T);
    let ex = c.start(1, "fw-p", 1);
    c.report("fw-p", &ex[0], ExecutorState::Running);
    c.report("fw-p", &ex[0], ExecutorState::Exited { code: 0 });
    let pending = c.m.handle(
        c.now,
        master::Event::Message { conn: ConnId(1), msg: Message::Teardown { request: 2 } },
    );
    assert!(c.m.state().history.is_empty(), "not durable yet: a successor would not show it");
    assert_eq!(c.m.state().history_omitted, 0);
    assert_eq!(c.m.history().count(), 0);
    c.open(2, Role::Subscriber);
    let sub = Subscribe {
        framework: Some(FrameworkId::new("fw-p")),
        name: "again".into(),
        instance: InstanceId(2),
        attempt: 2,
        failover_timeout: Millis(30_000),
        tenant: None,
    };
    let out = c.send(2, Message::Subscribe(sub));
    assert!(
        m_sends(&out).iter().any(|(_, m)| matches!(m, Message::SubscribeRefused { .. })),
        "{out:?}"
    );
    let _ = c.run(pending);
    let state = c.m.state();
    assert_eq!(state.history.len(), 1);
    assert_eq!(state.history[0].id, FrameworkId::new("fw-p"));
    assert_eq!(state.history[0].outcome, FrameworkOutcome::Completed);
}
