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
