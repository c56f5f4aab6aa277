//! The store machine against a fake ZooKeeper server: loads, sealing,
//! the move of a flat store, batches, coalesced puts, shard nodes.

use super::load::by_key;
use super::migrate::MOVE_BATCH;
use super::*;
use crate::ids::Epoch;
use crate::secret::Secret;
use crate::store::format;
use crate::store::names::key_stem;
use crate::store::seal::SealKey;
use crate::store::WorkerRecord;
use crate::zk::{CreateMode, Stat, ZkReply, JUTE_MAXBUFFER};

const STATE: &str = "/r/state";
const FENCE: &str = "/r/election/n";

fn secret(s: &str) -> Secret {
    Secret::new(s.as_bytes().to_vec()).unwrap()
}

fn worker(id: &str) -> Record {
    Record::Worker(WorkerRecord {
        dead: false,
        id: crate::ids::WorkerId::new(id),
        incarnation: Incarnation(1),
        cores: 1,
        memory_mb: 1,
        callback: None,
        maintenance: None,
    })
}

/// A ZooKeeper server just good enough for the store: nodes, versions,
/// zxids, multis (all or nothing), parents checked on create.
#[derive(Default)]
struct Fake {
    nodes: BTreeMap<String, (Vec<u8>, Stat)>,
    zxid: u64,
    /// Every request the store sent, in order.
    log: Vec<ZkOp>,
    /// The most records (and listings) outstanding at once.
    max_outstanding: usize,
    /// Answer `MultiRead` as a server before 3.6 does.
    no_multi_read: bool,
}

impl Fake {
    fn new() -> Self {
        let mut f = Fake::default();
        for p in ["/r", "/r/election", FENCE, STATE] {
            f.put(p, Vec::new());
        }
        f
    }

    fn put(&mut self, path: &str, data: Vec<u8>) {
        self.zxid += 1;
        let version = self.nodes.get(path).map_or(0, |(_, s)| s.version + 1);
        let stat = Stat {
            version,
            cversion: 0,
            ephemeral_owner: None,
            czxid: self.zxid,
            mzxid: self.zxid,
        };
        self.nodes.insert(path.to_owned(), (data, stat));
    }

    /// Plants `records` in the layout of this version.
    fn plant(&mut self, records: &[Record], sealing: &Sealing) {
        for r in records {
            let path = layout::record_path(STATE, &r.key());
            let (parent, _) = path.rsplit_once('/').unwrap();
            if !self.nodes.contains_key(parent) {
                self.put(parent, Vec::new());
            }
            self.put(&path, format::encode_with(r, sealing).unwrap());
        }
    }

    fn children(&self, path: &str) -> Vec<String> {
        let prefix = format!("{path}/");
        self.nodes
            .keys()
            .filter_map(|p| p.strip_prefix(&prefix))
            .filter(|rest| !rest.contains('/'))
            .map(str::to_owned)
            .collect()
    }

    fn parent_exists(&self, path: &str) -> bool {
        self.nodes.contains_key(path.rsplit_once('/').unwrap().0)
    }

    fn exec(&mut self, op: &ZkOp) -> ZkResult {
        match op {
            ZkOp::Sync { .. } => Ok(ZkReply::Synced),
            ZkOp::GetChildren { path, .. } if self.nodes.contains_key(path) => {
                Ok(ZkReply::Children(self.children(path)))
            }
            ZkOp::GetData { path, .. } => match self.nodes.get(path) {
                Some((data, stat)) => Ok(ZkReply::Data { data: data.clone(), stat: stat.clone() }),
                None => Err(ZkError::NoNode),
            },
            ZkOp::Exists { path, .. } => {
                Ok(ZkReply::Stat(self.nodes.get(path).map(|(_, s)| s.clone())))
            }
            ZkOp::MultiRead(_) if self.no_multi_read => Err(ZkError::BadArguments),
            ZkOp::MultiRead(paths) => Ok(ZkReply::MultiRead(
                paths
                    .iter()
                    .map(|p| self.exec(&ZkOp::GetData { path: p.clone(), watch: false }))
                    .collect(),
            )),
            ZkOp::Create { path, data, .. } => {
                if self.nodes.contains_key(path) {
                    Err(ZkError::NodeExists)
                } else if !self.parent_exists(path) {
                    Err(ZkError::NoNode)
                } else {
                    self.put(path, data.clone());
                    Ok(ZkReply::Created { path: path.clone() })
                }
            }
            ZkOp::Multi(ops) => {
                let saved = (self.nodes.clone(), self.zxid);
                let mut replies = Vec::new();
                for op in ops {
                    let r = match op {
                        MultiOp::Check { path, version } => match self.nodes.get(path) {
                            Some((_, s)) if s.version == *version => Ok(ZkReply::Checked),
                            Some(_) => Err(ZkError::BadVersion),
                            None => Err(ZkError::NoNode),
                        },
                        MultiOp::Create { path, data, .. } => self.exec(&ZkOp::Create {
                            path: path.clone(),
                            data: data.clone(),
                            mode: CreateMode::Persistent,
                        }),
                        MultiOp::SetData { path, data, version } => match self.nodes.get(path) {
                            None => Err(ZkError::NoNode),
                            Some((_, s)) if version.is_some_and(|v| v != s.version) => {
                                Err(ZkError::BadVersion)
                            }
                            Some(_) => {
                                self.put(path, data.clone());
                                Ok(ZkReply::Stat(self.nodes.get(path).map(|(_, s)| s.clone())))
                            }
                        },
                        MultiOp::Delete { path, version } => match self.nodes.get(path) {
                            None => Err(ZkError::NoNode),
                            Some((_, s)) if version.is_some_and(|v| v != s.version) => {
                                Err(ZkError::BadVersion)
                            }
                            Some(_) => {
                                self.nodes.remove(path);
                                Ok(ZkReply::Deleted)
                            }
                        },
                    };
                    match r {
                        Ok(r) => replies.push(r),
                        Err(e) => {
                            (self.nodes, self.zxid) = saved;
                            return Err(e);
                        }
                    }
                }
                Ok(ZkReply::Multi(replies))
            }
            _ => Err(ZkError::NoNode),
        }
    }

    /// Answers the store's requests one at a time, in the order sent
    /// (as one session's are), until it sends no more; returns what it
    /// reported.
    fn serve(&mut self, store: &mut ZkStore, mut out: Vec<StoreOutput>) -> Vec<StoreEvent> {
        let mut queue = VecDeque::new();
        let mut events = Vec::new();
        loop {
            for o in out.drain(..) {
                match o {
                    StoreOutput::Request { tag, op } => queue.push_back((tag, op)),
                    StoreOutput::Done(e) => events.push(e),
                }
            }
            let outstanding: usize = queue.iter().map(|(_, op)| reads(op).max(1)).sum();
            self.max_outstanding = self.max_outstanding.max(outstanding);
            let Some((tag, op)) = queue.pop_front() else { return events };
            let result = self.exec(&op);
            self.log.push(op);
            let _ = store.on_reply(tag, result, &mut out);
        }
    }
}

/// How many record nodes `op` reads.
fn reads(op: &ZkOp) -> usize {
    match op {
        ZkOp::GetData { .. } => 1,
        ZkOp::MultiRead(paths) => paths.len(),
        _ => 0,
    }
}

fn leading_store(sealing: Sealing) -> ZkStore {
    let mut store = ZkStore::new("/r");
    store.set_sealing(sealing);
    store.set_fence(Some(MultiOp::Check { path: FENCE.into(), version: 0 }));
    store
}

fn load_from(fake: &mut Fake, store: &mut ZkStore) -> Vec<StoreEvent> {
    let mut out = Vec::new();
    store.load(&mut out);
    fake.serve(store, out)
}

/// Runs a load over `images` planted at `<root>/state/<relative path>`
/// and returns what the store reported and the requests it made after
/// the reads.
fn load(sealing: Sealing, images: &[(&str, Vec<u8>)]) -> (Vec<StoreEvent>, Vec<ZkOp>) {
    let mut fake = Fake::new();
    for (rel, image) in images {
        let path = format!("{STATE}/{rel}");
        let (parent, _) = path.rsplit_once('/').unwrap();
        if !fake.nodes.contains_key(parent) {
            fake.put(parent, Vec::new());
        }
        fake.put(&path, image.clone());
    }
    let mut store = leading_store(sealing);
    let events = load_from(&mut fake, &mut store);
    let last_read = fake.log.iter().rposition(|op| reads(op) > 0);
    let after = fake.log[last_read.map_or(0, |i| i + 1)..].to_vec();
    (events, after)
}

/// `<shard>/<stem>` of a worker's node.
fn placed(id: &str) -> String {
    layout::record_path("", &worker(id).key()).trim_start_matches('/').to_owned()
}

fn failure(events: &[StoreEvent]) -> String {
    match events {
        [StoreEvent::LoadFailed { reason }] => reason.clone(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_planted_unsealed_record_fails_the_load_naming_the_node() {
    let s = Sealing::with_secret(&secret("the current cluster secret"));
    let (events, ops) = load(
        s.clone(),
        &[
            ("epoch", format::encode_with(&Record::Epoch(Epoch(3)), &s).unwrap()),
            (&placed("a"), format::encode_with(&worker("a"), &s).unwrap()),
            (&placed("planted"), format::encode(&worker("planted")).unwrap()),
        ],
    );
    let reason = failure(&events);
    assert!(reason.starts_with("1 damaged record(s) in ZooKeeper: "), "{reason}");
    let named = format!("record {STATE}/{}: not sealed", placed("planted"));
    assert!(reason.contains(&named), "{reason}");
    assert!(ops.is_empty(), "nothing is written: {ops:?}");
}

#[test]
fn an_altered_record_and_one_under_an_unknown_key_are_both_named() {
    let s = Sealing::with_secret(&secret("the current cluster secret"));
    let other = secret("some other cluster secret");
    let mut altered = format::encode_with(&worker("a"), &s).unwrap();
    altered[20] ^= 4;
    let (events, _) = load(
        s,
        &[
            (&placed("a"), altered),
            (
                &placed("b"),
                format::encode_with(&worker("b"), &Sealing::with_secret(&other)).unwrap(),
            ),
        ],
    );
    let reason = failure(&events);
    let a = format!("record {STATE}/{}: MAC does not verify", placed("a"));
    assert!(reason.contains(&a), "{reason}");
    let id = SealKey::derive(&other).id();
    let b = format!("record {STATE}/{}: sealed under record key {id}", placed("b"));
    assert!(reason.contains(&b), "{reason}");
}

#[test]
fn without_a_secret_a_sealed_record_cannot_be_verified() {
    let s = Sealing::with_secret(&secret("the current cluster secret"));
    let (events, _) =
        load(Sealing::none(), &[(&placed("a"), format::encode_with(&worker("a"), &s).unwrap())]);
    let reason = failure(&events);
    assert!(reason.contains(&format!("record {STATE}/{}: sealed under record key", placed("a"))));
    assert!(reason.contains("no cluster secret to verify it"), "{reason}");
}

#[test]
fn records_under_a_previous_key_are_resealed_right_after_the_load() {
    let (cur, prev) = (secret("the current cluster secret"), secret("the previous secret!"));
    let rotating = Sealing::with_secret(&cur).and_previous(&prev);
    let old = Sealing::with_secret(&prev);
    let (events, ops) = load(
        rotating.clone(),
        &[
            (&placed("a"), format::encode_with(&worker("a"), &old).unwrap()),
            (&placed("b"), format::encode_with(&worker("b"), &rotating).unwrap()),
        ],
    );
    assert_eq!(events, vec![StoreEvent::Loaded { records: vec![worker("a"), worker("b")] }]);
    // The re-seal is written, fenced, under the current key, and is all
    // that is written.
    let [ZkOp::Multi(multi)] = &ops[..] else { panic!("{ops:?}") };
    assert!(matches!(&multi[0], MultiOp::Check { .. }), "{multi:?}");
    let MultiOp::SetData { path, data, .. } = &multi[1] else { panic!("{multi:?}") };
    assert_eq!(path, &format!("{STATE}/{}", placed("a")));
    assert_eq!(data, &format::encode_with(&worker("a"), &rotating).unwrap());
}

#[test]
fn a_record_in_a_shard_its_name_does_not_hash_to_is_damage() {
    let right = placed("a");
    let (shard, stem) = right.split_once('/').unwrap();
    let wrong = format!("{:02x}/{stem}", layout::parse_shard(shard).unwrap() ^ 1);
    let image = format::encode(&worker("a")).unwrap();
    let epoch = format::encode(&Record::Epoch(Epoch(2))).unwrap();
    let (events, ops) =
        load(Sealing::none(), &[(&wrong, image), (&format!("{shard}/epoch"), epoch)]);
    let reason = failure(&events);
    assert!(reason.starts_with("2 damaged record(s)"), "{reason}");
    assert!(reason.contains(&format!("belongs at \"{right}\"")), "{reason}");
    assert!(reason.contains("belongs at \"epoch\""), "{reason}");
    assert!(ops.is_empty(), "{ops:?}");
}

#[test]
fn a_flat_store_is_moved_into_its_shards_by_fenced_multis() {
    let s = Sealing::none();
    let mut fake = Fake::new();
    let records = [Record::Epoch(Epoch(4)), worker("a"), worker("b"), worker("c")];
    for r in &records {
        fake.put(&layout::flat_path(STATE, &key_stem(&r.key())), format::encode(r).unwrap());
    }
    fake.put(&format!("{STATE}/junk"), b"not ours".to_vec());
    let mut store = leading_store(s);
    let events = load_from(&mut fake, &mut store);
    assert_eq!(events, vec![StoreEvent::Loaded { records: records.to_vec() }]);
    assert_eq!(store.moved, 3);
    assert_eq!(store.epoch_version, Some(0));
    for r in &records[1..] {
        let stem = key_stem(&r.key());
        assert!(!fake.nodes.contains_key(&layout::flat_path(STATE, &stem)), "{stem} moved");
        let (image, _) = &fake.nodes[&layout::stem_path(STATE, &stem)];
        assert_eq!(image, &format::encode(r).unwrap(), "{stem}: the same bytes");
    }
    assert!(fake.nodes.contains_key(&format!("{STATE}/epoch")), "the epoch stays on top");
    assert!(fake.nodes.contains_key(&format!("{STATE}/junk")), "not ours: left alone");
    for op in &fake.log {
        if let ZkOp::Multi(ops) = op {
            assert_eq!(ops[0], MultiOp::Check { path: FENCE.into(), version: 0 }, "{ops:?}");
            assert!(matches!(ops.last(), Some(MultiOp::Delete { version: Some(0), .. })));
        }
    }
    // The next load finds the sharded layout only, and moves nothing.
    fake.log.clear();
    let events = load_from(&mut fake, &mut store);
    assert_eq!(events, vec![StoreEvent::Loaded { records: records.to_vec() }]);
    assert!(!fake.log.iter().any(|op| matches!(op, ZkOp::Multi(_) | ZkOp::Create { .. })));
}

#[test]
fn a_large_flat_store_is_moved_by_batches() {
    let mut fake = Fake::new();
    let n = 2 * MOVE_BATCH + 10;
    let records: Vec<Record> = (0..n).map(|i| worker(&format!("w{i:04}"))).collect();
    for r in &records {
        fake.put(&layout::flat_path(STATE, &key_stem(&r.key())), format::encode(r).unwrap());
    }
    let mut store = leading_store(Sealing::none());
    let events = load_from(&mut fake, &mut store);
    let [StoreEvent::Loaded { records: loaded }] = &events[..] else { panic!("{events:?}") };
    assert_eq!(loaded.len(), n);
    assert_eq!(store.moved, n as u64);
    let multis: Vec<usize> = fake
        .log
        .iter()
        .filter_map(|op| match op {
            ZkOp::Multi(ops) => Some((ops.len() - 1) / 2),
            _ => None,
        })
        .collect();
    assert_eq!(multis, [MOVE_BATCH, MOVE_BATCH, 10]);
    assert!(fake.max_outstanding <= MAX_LOAD_IN_FLIGHT);
    let nodes = layout::record_nodes(STATE, |p| fake.children(p));
    assert!(nodes.iter().all(|n| !n.is_flat()) && nodes.len() == n, "{nodes:?}");
}

#[test]
fn a_deposed_leader_moves_nothing() {
    let mut fake = Fake::new();
    fake.put(&layout::flat_path(STATE, "w-a"), format::encode(&worker("a")).unwrap());
    fake.nodes.remove(FENCE);
    let mut store = leading_store(Sealing::none());
    let events = load_from(&mut fake, &mut store);
    let reason = failure(&events);
    assert!(reason.contains(&format!("moving {STATE}/w-a into its shard failed")), "{reason}");
    assert!(fake.nodes.contains_key(&layout::flat_path(STATE, "w-a")));
    assert!(!fake.nodes.contains_key(&layout::stem_path(STATE, "w-a")));
}

#[test]
fn a_key_in_both_layouts_keeps_the_node_written_last() {
    for flat_is_newer in [false, true] {
        let mut fake = Fake::new();
        let (old, new) = (worker("a"), {
            let Record::Worker(mut w) = worker("a") else { unreachable!() };
            w.incarnation = Incarnation(2);
            Record::Worker(w)
        });
        let (first, second) = if flat_is_newer { (&old, &new) } else { (&new, &old) };
        // `first` in its shard, then `second` flat (written later).
        fake.plant(std::slice::from_ref(first), &Sealing::none());
        fake.put(&layout::flat_path(STATE, "w-a"), format::encode(second).unwrap());
        let mut store = leading_store(Sealing::none());
        let events = load_from(&mut fake, &mut store);
        assert_eq!(events, vec![StoreEvent::Loaded { records: vec![second.clone()] }]);
        assert!(!fake.nodes.contains_key(&layout::flat_path(STATE, "w-a")));
        let (image, _) = &fake.nodes[&layout::stem_path(STATE, "w-a")];
        assert_eq!(image, &format::encode(second).unwrap(), "flat newer: {flat_is_newer}");
    }
}

#[test]
fn a_large_load_reads_worker_records_by_batches_within_the_bound_in_flight() {
    for no_multi_read in [false, true] {
        let mut fake = Fake { no_multi_read, ..Fake::new() };
        let mut records = vec![Record::Epoch(Epoch(9))];
        records.extend((0..2_500).map(|i| worker(&format!("worker-{i:05}"))));
        fake.plant(&records, &Sealing::none());
        let mut store = leading_store(Sealing::none());
        let events = load_from(&mut fake, &mut store);
        let [StoreEvent::Loaded { records: loaded }] = &events[..] else { panic!("{events:?}") };
        assert_eq!(loaded.len(), records.len());
        assert!(fake.max_outstanding <= MAX_LOAD_IN_FLIGHT, "{}", fake.max_outstanding);
        let listings = fake.log.iter().filter(|op| matches!(op, ZkOp::GetChildren { .. })).count();
        assert_eq!(listings, 1 + layout::SHARDS, "the top level and every shard");
        let batches: Vec<usize> = fake
            .log
            .iter()
            .filter_map(|op| match op {
                ZkOp::MultiRead(paths) => Some(paths.len()),
                _ => None,
            })
            .collect();
        let singles = fake.log.iter().filter(|op| matches!(op, ZkOp::GetData { .. })).count();
        if no_multi_read {
            // The batches sent before the first refusal came back, then
            // one read per record.
            assert!(!batches.is_empty() && batches.iter().all(|&b| b <= MULTI_READ_BATCH));
            assert_eq!(singles, records.len());
        } else {
            // The epoch alone, the workers by full batches but the last.
            assert_eq!(singles, 1);
            assert_eq!(batches.iter().sum::<usize>(), 2_500);
            assert!(batches[..batches.len() - 1].iter().all(|&b| b == MULTI_READ_BATCH));
        }
    }
}

#[test]
fn records_are_reported_in_the_order_of_their_keys() {
    let framework = |id: &str| {
        Record::Framework(crate::store::FrameworkRecord {
            id: crate::ids::FrameworkId::new(id),
            name: id.into(),
            failover_timeout_ms: 1,
            groups: vec![],
            callback: None,
            registered_at_ms: None,
            job: None,
            tenant: None,
        })
    };
    let mut records = vec![
        framework("a"),
        worker("b%"),
        worker("b"),
        Record::Epoch(Epoch(1)),
        worker("a-z"),
        framework("0"),
        worker("é"),
    ];
    let mut want = records.clone();
    want.sort_by_key(|r| r.key());
    records.sort_unstable_by(by_key);
    assert_eq!(records, want);
}

#[test]
fn the_largest_worker_records_fill_a_fifth_of_the_packet_limit_per_batch() {
    use crate::limits::{MAX_ADDR_BYTES, MAX_ID_BYTES};
    let largest = Record::Worker(WorkerRecord {
        dead: false,
        id: crate::ids::WorkerId::new("\u{10ffff}".repeat(MAX_ID_BYTES / 4)),
        incarnation: Incarnation(u64::MAX),
        cores: u32::MAX,
        memory_mb: u64::MAX,
        callback: Some(crate::ids::Addr::new("x".repeat(MAX_ADDR_BYTES))),
        // The largest maintenance: a drain with its deadline.
        maintenance: Some(crate::store::Maintenance::Draining { deadline_ms: u64::MAX }),
    });
    let sealing = Sealing::with_secret(&secret("the longest worker record's secret"));
    let image = format::encode_with(&largest, &sealing).unwrap().len();
    assert!(image < 700, "{image}");
    // Per result: op header (type, done, error), data length, stat.
    let per_result = 4 + 1 + 4 + 4 + 68;
    assert!(MULTI_READ_BATCH * (image + per_result) < JUTE_MAXBUFFER / 5);
}

/// Issue 20 (docs/design.md#issue-20) scenario 8 in ZooKeeper mode (sim seeds 8 and 9, docs/design.md#simulator-seeds
/// `--slow-store`): with writes slower than the clients' retries, every
/// retried registration or SUBSCRIBE queued one more write of the same
/// record behind the running one, and the queue never drained. A put
/// of a key whose queued put has not started joins it: one write, and
/// every write reported, in order.
#[test]
fn puts_of_one_record_waiting_behind_a_running_write_are_one_write() {
    let mut fake = Fake::new();
    let mut store = leading_store(Sealing::none());
    // One write at a time, as before pipelining (the pipelined case is
    // `a_put_of_a_key_in_flight_waits_and_later_puts_join_it`).
    store.set_window(1);
    let _ = load_from(&mut fake, &mut store);
    let n = fake.log.len();
    let mut out = Vec::new();
    store.put(WriteId(1), worker("a"), &mut out); // running
    store.put(WriteId(2), worker("b"), &mut out); // queued
    let mut newer = worker("b");
    if let Record::Worker(w) = &mut newer {
        w.cores = 7;
    }
    store.put(WriteId(3), newer.clone(), &mut out); // joins 2
    store.put(WriteId(4), worker("a"), &mut out); // queued: 1 runs
    store.delete(WriteId(5), worker("b").key(), None, &mut out);
    store.put(WriteId(6), worker("b"), &mut out); // after a delete: queued
    assert_eq!(store.coalesced, 1);
    let events = fake.serve(&mut store, out);
    let writes: Vec<u64> = events
        .iter()
        .map(|e| match e {
            StoreEvent::Persisted { write } => write.0,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(writes, vec![1, 2, 3, 4, 5, 6]);
    let images: Vec<&ZkOp> = fake.log[n..]
        .iter()
        .filter(|op| matches!(op, ZkOp::Multi(ops) if ops.iter().any(|o| matches!(o, MultiOp::SetData { path, .. } | MultiOp::Create { path, .. } if path.ends_with("/w-b")))))
        .collect();
    let newest = format::encode(&newer).unwrap();
    assert!(
        images.iter().any(|op| matches!(op, ZkOp::Multi(ops) if ops.iter().any(|o| matches!(o, MultiOp::SetData { data, .. } | MultiOp::Create { data, .. } if *data == newest)))),
        "the joined put wrote the newer image: {images:?}"
    );
}

#[test]
fn a_put_creates_its_shard_first_and_a_vanished_shard_costs_the_leadership_once() {
    let mut fake = Fake::new();
    let mut store = leading_store(Sealing::none());
    let _ = load_from(&mut fake, &mut store);
    let mut out = Vec::new();
    store.put(WriteId(1), worker("a"), &mut out);
    let events = fake.serve(&mut store, out);
    assert_eq!(events, vec![StoreEvent::Persisted { write: WriteId(1) }]);
    let shard = layout::shard_path(STATE, layout::shard_of("w-a").unwrap());
    let n = fake.log.len();
    // The set finds no record; the shard is created right before the
    // record.
    assert!(
        matches!(&fake.log[n - 3], ZkOp::Multi(ops) if matches!(&ops[1], MultiOp::SetData { .. }))
    );
    assert!(matches!(&fake.log[n - 2], ZkOp::Create { path, .. } if *path == shard));
    assert!(
        matches!(&fake.log[n - 1], ZkOp::Multi(ops) if matches!(&ops[0], MultiOp::Check { .. }))
    );
    // An operator deletes the (empty) shard behind the store's back: the
    // put fails as fenced (the master gives the leadership up) ...
    let mut out = Vec::new();
    store.delete(WriteId(2), worker("a").key(), None, &mut out);
    let _ = fake.serve(&mut store, out);
    fake.nodes.remove(&shard);
    let mut out = Vec::new();
    store.put(WriteId(3), worker("a"), &mut out);
    let events = fake.serve(&mut store, out);
    let [StoreEvent::PersistFailed { reason, .. }] = &events[..] else { panic!("{events:?}") };
    assert!(reason.contains("fenced write rejected"), "{reason}");
    // ... and the next leadership creates it again.
    store.clear();
    store.set_fence(Some(MultiOp::Check { path: FENCE.into(), version: 0 }));
    let _ = load_from(&mut fake, &mut store);
    let mut out = Vec::new();
    store.put(WriteId(4), worker("a"), &mut out);
    let events = fake.serve(&mut store, out);
    assert_eq!(events, vec![StoreEvent::Persisted { write: WriteId(4) }]);
    assert!(fake.nodes.contains_key(&layout::stem_path(STATE, "w-a")));
}

// Pipelining (docs/design.md#issue-46): puts of distinct keys in flight together.

/// A worker record with `cores` (a distinct image per value).
fn worker_with(id: &str, cores: u32) -> Record {
    let Record::Worker(mut w) = worker(id) else { unreachable!() };
    w.cores = cores;
    Record::Worker(w)
}

/// The requests in `out` (drained), the events left in it.
fn sent(out: &mut Vec<StoreOutput>) -> (Vec<(u64, ZkOp)>, Vec<StoreEvent>) {
    let (mut reqs, mut events) = (Vec::new(), Vec::new());
    for o in out.drain(..) {
        match o {
            StoreOutput::Request { tag, op } => reqs.push((tag, op)),
            StoreOutput::Done(e) => events.push(e),
        }
    }
    (reqs, events)
}

/// The record path a request writes (a multi's op after the fence, or a
/// plain create's path), if it writes one.
fn written(op: &ZkOp) -> Option<String> {
    match op {
        ZkOp::Multi(ops) => ops.iter().find_map(|o| match o {
            MultiOp::SetData { path, .. } | MultiOp::Create { path, .. } => Some(path.clone()),
            _ => None,
        }),
        _ => None,
    }
}

fn stem_of(op: &ZkOp) -> String {
    written(op).map(|p| p.rsplit('/').next().unwrap().to_owned()).unwrap_or_default()
}

fn persisted(events: &[StoreEvent]) -> Vec<u64> {
    events
        .iter()
        .map(|e| match e {
            StoreEvent::Persisted { write } => write.0,
            other => panic!("{other:?}"),
        })
        .collect()
}

/// A loaded store over a fake holding `a`, `b`, `c`, `d` (so a put is one
/// `SetData`).
fn loaded_with_workers(window: usize) -> (Fake, ZkStore) {
    let mut fake = Fake::new();
    let ids = ["a", "b", "c", "d"];
    fake.plant(&ids.map(worker), &Sealing::none());
    let mut store = leading_store(Sealing::none());
    store.set_window(window);
    let _ = load_from(&mut fake, &mut store);
    fake.log.clear();
    (fake, store)
}

#[test]
fn puts_of_distinct_keys_go_out_before_the_first_reply() {
    let (mut fake, mut store) = loaded_with_workers(DEFAULT_WRITE_WINDOW);
    let mut out = Vec::new();
    for (i, id) in ["a", "b", "c"].into_iter().enumerate() {
        store.put(WriteId(i as u64 + 1), worker_with(id, 2), &mut out);
    }
    let (reqs, events) = sent(&mut out);
    assert!(events.is_empty());
    let stems: Vec<String> = reqs.iter().map(|(_, op)| stem_of(op)).collect();
    assert_eq!(stems, ["w-a", "w-b", "w-c"], "all three before any reply");
    for (_, op) in &reqs {
        let ZkOp::Multi(ops) = op else { panic!("{op:?}") };
        assert_eq!(ops[0], MultiOp::Check { path: FENCE.into(), version: 0 }, "fenced");
    }
    let events = fake.serve(
        &mut store,
        reqs.into_iter().map(|(tag, op)| StoreOutput::Request { tag, op }).collect(),
    );
    assert_eq!(persisted(&events), [1, 2, 3]);
    assert_eq!(store.backlog(), 0);
    // With a window of 1 the same puts go one at a time.
    let (_, mut serial) = loaded_with_workers(1);
    for (i, id) in ["a", "b", "c"].into_iter().enumerate() {
        serial.put(WriteId(i as u64 + 1), worker_with(id, 2), &mut out);
    }
    let (reqs, _) = sent(&mut out);
    assert_eq!(reqs.len(), 1, "{reqs:?}");
}

#[test]
fn a_put_of_a_key_in_flight_waits_and_later_puts_join_it() {
    let (mut fake, mut store) = loaded_with_workers(DEFAULT_WRITE_WINDOW);
    let mut out = Vec::new();
    store.put(WriteId(1), worker_with("a", 2), &mut out); // in flight
    store.put(WriteId(2), worker_with("a", 3), &mut out); // waits for 1
    store.put(WriteId(3), worker_with("b", 2), &mut out); // goes
    store.put(WriteId(4), worker_with("a", 4), &mut out); // joins 2
    assert_eq!(store.coalesced, 1);
    let (reqs, _) = sent(&mut out);
    let stems: Vec<String> = reqs.iter().map(|(_, op)| stem_of(op)).collect();
    assert_eq!(stems, ["w-a", "w-b"], "the second put of a waits");
    // Answer the first put of a: the waiting one goes out, with the image
    // of the put that joined it.
    let (tag, op) = reqs[0].clone();
    let result = fake.exec(&op);
    store.on_reply(tag, result, &mut out);
    let (next, events) = sent(&mut out);
    assert_eq!(persisted(&events), [1]);
    let [(_, ZkOp::Multi(ops))] = &next[..] else { panic!("{next:?}") };
    let MultiOp::SetData { data, .. } = &ops[1] else { panic!("{ops:?}") };
    assert_eq!(data, &format::encode(&worker_with("a", 4)).unwrap());
    let rest = std::iter::once(reqs[1].clone()).chain(next);
    let events =
        fake.serve(&mut store, rest.map(|(tag, op)| StoreOutput::Request { tag, op }).collect());
    assert_eq!(persisted(&events), [3, 2, 4]);
    let (image, _) = &fake.nodes[&layout::stem_path(STATE, "w-a")];
    assert_eq!(image, &format::encode(&worker_with("a", 4)).unwrap(), "the last put of a");
}

#[test]
fn writes_to_one_key_are_applied_and_confirmed_in_order() {
    // New keys (each put a `SetData`, `NoNode`, then its shard and a
    // `Create`) interleaved with puts of existing ones and re-puts.
    let (mut fake, mut store) = loaded_with_workers(DEFAULT_WRITE_WINDOW);
    let mut out = Vec::new();
    let mut want: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    let ids = ["a", "new1", "b", "new2", "a", "new1", "c", "new2", "a"];
    for (i, id) in ids.iter().enumerate() {
        let write = i as u64 + 1;
        store.put(WriteId(write), worker_with(id, write as u32), &mut out);
        want.entry(format!("w-{id}")).or_default().push(write);
    }
    let events = fake.serve(&mut store, out);
    // Every write confirmed, and per key in the order asked for.
    let mut got: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for w in persisted(&events) {
        got.entry(format!("w-{}", ids[w as usize - 1])).or_default().push(w);
    }
    assert_eq!(got, want);
    // Per key, the images applied in order: the log's writes of a key
    // carry strictly increasing core counts, and the last is the node's.
    for (stem, writes) in &want {
        let cores: Vec<u32> = fake
            .log
            .iter()
            .filter(|op| stem_of(op) == *stem)
            .filter_map(|op| match op {
                ZkOp::Multi(ops) => ops.iter().find_map(|o| match o {
                    MultiOp::SetData { data, .. } | MultiOp::Create { data, .. } => {
                        match format::decode(data).unwrap() {
                            Record::Worker(w) => Some(w.cores),
                            _ => None,
                        }
                    }
                    _ => None,
                }),
                _ => None,
            })
            .collect();
        assert!(cores.windows(2).all(|w| w[0] <= w[1]), "{stem}: {cores:?}");
        let (image, _) = &fake.nodes[&layout::stem_path(STATE, stem)];
        let last = *writes.last().unwrap();
        let Record::Worker(w) = format::decode(image).unwrap() else { panic!() };
        assert_eq!(u64::from(w.cores), last, "{stem}");
    }
}

/// Several puts in flight, the connection lost after the server applied
/// a prefix of them: each one in doubt is sent again from its first step,
/// in its order, before any newer put; every write is confirmed once.
#[test]
fn a_connection_loss_with_several_in_flight_resends_them_in_order_first() {
    for applied in 0..=3 {
        let (mut fake, mut store) = loaded_with_workers(DEFAULT_WRITE_WINDOW);
        let mut out = Vec::new();
        for (i, id) in ["a", "b", "c"].into_iter().enumerate() {
            store.put(WriteId(i as u64 + 1), worker_with(id, 2), &mut out);
        }
        let (reqs, _) = sent(&mut out);
        // The server applies the first `applied`; the reply to the first
        // is lost; the others' replies are lost with it.
        for (_, op) in &reqs[..applied] {
            fake.exec(op).unwrap();
        }
        assert!(store.on_reply(reqs[0].0, Err(ZkError::ConnectionLoss), &mut out));
        for (tag, _) in &reqs[1..] {
            assert!(!store.on_reply(*tag, Err(ZkError::ConnectionLoss), &mut out));
        }
        // Newer puts wait while paused (one of a key in doubt, one new).
        store.put(WriteId(4), worker_with("a", 3), &mut out);
        store.put(WriteId(5), worker_with("d", 3), &mut out);
        let (none, events) = sent(&mut out);
        assert!(none.is_empty() && events.is_empty(), "{none:?} {events:?}");
        store.resume(&mut out);
        assert_eq!(store.resends, 3);
        let (again, _) = sent(&mut out);
        let stems: Vec<String> = again.iter().map(|(_, op)| stem_of(op)).collect();
        assert_eq!(stems, ["w-a", "w-b", "w-c", "w-d"], "applied {applied}");
        for (i, (_, op)) in again[..3].iter().enumerate() {
            assert_eq!(op, &reqs[i].1, "the same put, from its first step");
        }
        let events = fake.serve(
            &mut store,
            again.into_iter().map(|(tag, op)| StoreOutput::Request { tag, op }).collect(),
        );
        assert_eq!(persisted(&events), [1, 2, 3, 5, 4], "applied {applied}");
        let (image, _) = &fake.nodes[&layout::stem_path(STATE, "w-a")];
        assert_eq!(image, &format::encode(&worker_with("a", 3)).unwrap());
    }
}

/// The fence fails in the middle of the puts in flight (the leader's
/// election node goes): the puts confirmed before stay confirmed, every
/// later one fails as fenced and writes nothing.
#[test]
fn a_fence_failure_in_the_middle_fails_the_writes_after_it() {
    let (mut fake, mut store) = loaded_with_workers(DEFAULT_WRITE_WINDOW);
    let mut out = Vec::new();
    for (i, id) in ["a", "new", "b"].into_iter().enumerate() {
        store.put(WriteId(i as u64 + 1), worker_with(id, 9), &mut out);
    }
    let (reqs, _) = sent(&mut out);
    assert_eq!(reqs.len(), 3);
    let (tag, op) = reqs[0].clone();
    let result = fake.exec(&op);
    store.on_reply(tag, result, &mut out);
    fake.nodes.remove(FENCE);
    let rest = reqs[1..].iter().cloned().map(|(tag, op)| StoreOutput::Request { tag, op });
    let events = fake.serve(&mut store, out.drain(..).chain(rest).collect());
    let mut outcome: Vec<(u64, bool)> = events
        .iter()
        .map(|e| match e {
            StoreEvent::Persisted { write } => (write.0, true),
            StoreEvent::PersistFailed { write, reason } => {
                assert!(reason.contains("fenced write rejected"), "{reason}");
                (write.0, false)
            }
            other => panic!("{other:?}"),
        })
        .collect();
    outcome.sort();
    assert_eq!(outcome, [(1, true), (2, false), (3, false)]);
    let image = |id: &str| fake.nodes[&layout::stem_path(STATE, &format!("w-{id}"))].0.clone();
    assert_eq!(image("a"), format::encode(&worker_with("a", 9)).unwrap());
    assert_eq!(image("b"), format::encode(&worker("b")).unwrap(), "not written");
    assert!(!fake.nodes.contains_key(&layout::stem_path(STATE, "w-new")));
    assert_eq!(store.backlog(), 0);
}

#[test]
fn no_more_puts_than_the_window_are_in_flight() {
    for window in [1, 3, DEFAULT_WRITE_WINDOW] {
        let (mut fake, mut store) = loaded_with_workers(window);
        let mut out = Vec::new();
        let n = 2 * DEFAULT_WRITE_WINDOW as u64 + 5;
        for i in 0..n {
            store.put(WriteId(i), worker(&format!("x{i}")), &mut out);
        }
        let (reqs, _) = sent(&mut out);
        let multis = |reqs: &[(u64, ZkOp)]| {
            reqs.iter().filter(|(_, op)| matches!(op, ZkOp::Multi(_))).count()
        };
        assert_eq!(multis(&reqs), window, "window {window}");
        // Serve one reply at a time, counting the puts in flight.
        let mut queue: VecDeque<(u64, ZkOp)> = reqs.into();
        let mut most = 0;
        let mut done = 0;
        while let Some((tag, op)) = queue.pop_front() {
            // The puts in flight: the multis not yet answered, this one
            // included (a shard's create goes with its put's multi).
            let multis = queue.iter().filter(|(_, op)| matches!(op, ZkOp::Multi(_))).count();
            most = most.max(multis + usize::from(matches!(op, ZkOp::Multi(_))));
            let result = fake.exec(&op);
            store.on_reply(tag, result, &mut out);
            let (more, events) = sent(&mut out);
            done += events.len();
            queue.extend(more);
        }
        assert_eq!(done as u64, n);
        assert_eq!(most, window, "window {window}");
    }
}

/// Two puts in flight create records in the same new shard: each sends
/// the shard's create right before its own; the second one's gets
/// `NodeExists`, and both records land.
#[test]
fn two_puts_in_flight_to_one_new_shard_both_land() {
    let mut fake = Fake::new();
    let mut store = leading_store(Sealing::none());
    let _ = load_from(&mut fake, &mut store);
    let first = "s0";
    let shard = layout::shard_of(&format!("w-{first}")).unwrap();
    let second = (1..)
        .map(|i| format!("s{i}"))
        .find(|id| layout::shard_of(&format!("w-{id}")) == Some(shard))
        .unwrap();
    let mut out = Vec::new();
    store.put(WriteId(1), worker(first), &mut out);
    store.put(WriteId(2), worker(&second), &mut out);
    fake.log.clear();
    let events = fake.serve(&mut store, out);
    assert_eq!(persisted(&events), [1, 2]);
    let shard_path = layout::shard_path(STATE, shard);
    let shard_creates = fake
        .log
        .iter()
        .filter(|op| matches!(op, ZkOp::Create { path, .. } if *path == shard_path))
        .count();
    assert_eq!(shard_creates, 2, "{:?}", fake.log);
    assert!(fake.nodes.contains_key(&layout::stem_path(STATE, &format!("w-{first}"))));
    assert!(fake.nodes.contains_key(&layout::stem_path(STATE, &format!("w-{second}"))));
}

/// A conditional delete is a barrier: it waits for the puts in flight,
/// runs alone, and nothing newer starts before it ends.
#[test]
fn a_delete_waits_for_the_puts_in_flight_and_runs_alone() {
    let (mut fake, mut store) = loaded_with_workers(DEFAULT_WRITE_WINDOW);
    let mut out = Vec::new();
    store.put(WriteId(1), worker_with("a", 2), &mut out);
    store.put(WriteId(2), worker_with("b", 2), &mut out);
    store.delete(WriteId(3), worker("c").key(), None, &mut out);
    store.put(WriteId(4), worker_with("d", 2), &mut out);
    let (reqs, _) = sent(&mut out);
    let stems: Vec<String> = reqs.iter().map(|(_, op)| stem_of(op)).collect();
    assert_eq!(stems, ["w-a", "w-b"]);
    let events = fake.serve(
        &mut store,
        reqs.into_iter().map(|(tag, op)| StoreOutput::Request { tag, op }).collect(),
    );
    assert_eq!(persisted(&events), [1, 2, 3, 4]);
    // The delete's read came after both puts and before d's write.
    let ops: Vec<String> = fake
        .log
        .iter()
        .map(|op| match op {
            ZkOp::GetData { path, .. } => format!("read {}", path.rsplit('/').next().unwrap()),
            op => stem_of(op),
        })
        .collect();
    assert_eq!(ops, ["w-a", "w-b", "read w-c", "", "w-d"], "{:?}", fake.log);
    assert!(!fake.nodes.contains_key(&layout::stem_path(STATE, "w-c")));
}
