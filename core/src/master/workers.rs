//! The leader's worker registry: registration, heartbeats, the DEAD sweep.
//!
//! * A new worker id is refused (`RegisterRefused`, naming the limit) past
//!   `Config::max_workers` or when its record's name would take its store
//!   shard's listing past [`crate::limits::MAX_WORKER_SHARD_LISTING`];
//!   known ids always register again.
//! * One binding per connection: a registration of another worker on a
//!   connection that carries a worker (or a subscription) is refused.
//! * A lower incarnation than the registered one is refused while the
//!   registered one is connected; once its connection is gone it is a new
//!   process of a host whose clock stepped back, and replaces it, unless it
//!   comes on a connection opened before the registered one registered (a
//!   dead older process's late registration): that connection is closed.
//!
//! Nothing here costs the cluster's size per event or per tick: the
//! registry keeps how many workers are in each state, the ALIVE workers in
//! the order they were last heard from ([`super::silence`]: a sweep looks at
//! the silent workers only), and the placement candidates in the order the
//! placement policy picks them ([`Registry::placeable`]).
//!
//! Tests: core/tests/registration.rs, core/tests/heartbeat_load.rs,
//! core/tests/usage.rs, core/tests/worker_upgrade.rs,
//! core/tests/operator_commands.rs (maintenance).

use super::by_attribute::ByAttribute;
use super::silence::Silence;
use super::{Action, Master, Placement};
use crate::ids::{Addr, ConnId, Epoch, Incarnation, WorkerId};
use crate::limits::{MAX_EXECUTORS_PER_WORKER, MAX_HOST_BYTES};
use crate::protocol::{Message, RegisterWorker};
use crate::store::StoreCommand;
use crate::store::{Maintenance, Record, RecordKey, WorkerRecord, WriteId};
use crate::time::Millis;
use rustc_hash::FxHashMap;
use std::collections::{BTreeMap, BTreeSet};

/// How many replaced incarnations of one worker id are remembered, so a
/// replaced process that keeps talking is told to shut down instead of
/// replacing its successor in turn.
const RETIRED_KEPT: usize = 8;

pub use crate::states::WorkerState;

/// How many commands the leader holds for one worker while it registers
/// (one kill and one stop for each executor it may run, and its acks).
pub(super) const MAX_HELD_COMMANDS: usize = 4 * MAX_EXECUTORS_PER_WORKER;

/// One worker in the leader's registry.
#[derive(Clone, Debug)]
pub struct WorkerEntry {
    /// The worker's id.
    pub id: WorkerId,
    /// The incarnation registered.
    pub incarnation: Incarnation,
    /// Cores offered.
    pub cores: u32,
    /// Memory offered, in MiB.
    pub memory_mb: u64,
    /// Where it is in its life.
    pub state: WorkerState,
    /// When it was last heard from.
    pub last_seen: Millis,
    /// The connection it talks on, if any.
    pub conn: Option<ConnId>,
    /// Its record is durable.
    pub durable: bool,
    /// Incarnations of this id that were replaced by a newer one.
    pub retired: Vec<Incarnation>,
    /// How many connections this master had accepted when this incarnation
    /// registered or its record was recovered: a lower incarnation on one of
    /// them is most likely an older process's late message, not a successor,
    /// so it replaces nothing (docs/design.md#duplicates-are-harmless).
    pub registered_after: u64,
    /// Recovered from the store by this leader.
    pub recovered: bool,
    /// Cores held by its live executors.
    pub cores_used: u32,
    /// Memory held by its live executors, in MiB.
    pub memory_used_mb: u64,
    /// Where its callback listener takes masters' connections, if it said.
    pub callback: Option<Addr>,
    /// The heartbeat interval it was told last (in `Registered`; the
    /// configured one before its first).
    pub heartbeat_interval: Millis,
    /// How long it may stay silent before it is DEAD: the worker timeout
    /// scaled to its heartbeat interval ([`super::Config::scaled`]); while
    /// a new interval is on its way to the worker, scaled to the longer of
    /// the old and the new one.
    pub timeout: Millis,
    /// An operator's cordon or drain: nothing is placed on it while set.
    pub maintenance: Option<Maintenance>,
    /// The attributes it announced in its registration, sorted by name
    /// (what constraints and `spread` match; not in its record: a new
    /// leader learns them when the worker registers again).
    pub attributes: Vec<(String, String)>,
    /// Ports it offers ([`crate::ports::count`] of its ranges; learned at
    /// registration, like its attributes).
    pub ports: u32,
    /// Ports held by its live executors.
    pub ports_used: u32,
    /// The host it said its executors' ports are reached at.
    pub host: Option<String>,
    /// The named resources it offers and how many of each its live
    /// executors hold (`None`: it offers none; boxed, as most workers).
    pub resources: Option<Box<WorkerResources>>,
    /// The users it starts executors as (from its registration): a group
    /// naming a user is placed here only if it is one of them.
    pub users: Box<[String]>,
    /// Its latest usage sample and when it came (observational; boxed:
    /// most of a large registry's entries never need it at once).
    pub usage: Option<Box<(crate::protocol::WorkerUsage, Millis)>>,
    /// Its slot in the registry's silence order.
    slot: u32,
    /// The key it has among the placement candidates, if it is one.
    placed_as: Option<(u32, u64)>,
    /// What it has free (cores, memory) in the candidates by attribute
    /// value ([`ByAttribute`]), if it is a candidate, and its id as they
    /// share it.
    indexed: Option<((u32, u64), super::by_attribute::Name)>,
}

/// The named resources a worker offers, and how many addresses of each
/// its live executors hold (the leader counts; the worker picks the
/// addresses, [`crate::resources`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WorkerResources {
    /// What it offered in its registration.
    pub offered: Vec<crate::resources::Resource>,
    /// Addresses held per kind, parallel to `offered`.
    pub held: Vec<u32>,
}

impl WorkerEntry {
    /// How many addresses of resource `name` are free here.
    pub fn resources_free(&self, name: &str) -> u32 {
        let Some(r) = &self.resources else { return 0 };
        r.offered
            .iter()
            .zip(&r.held)
            .find(|(o, _)| o.name == name)
            .map_or(0, |(o, held)| (o.addresses.len() as u32).saturating_sub(*held))
    }

    /// Takes the offer of a (new or repeated) registration, keeping what
    /// live executors hold of each kind still offered.
    pub(super) fn offer_resources(&mut self, offered: &[crate::resources::Resource]) {
        if offered.is_empty() {
            self.resources = None;
            return;
        }
        let before = self.resources.take();
        let held = offered
            .iter()
            .map(|o| {
                before.as_ref().map_or(0, |b| {
                    b.offered
                        .iter()
                        .zip(&b.held)
                        .find(|(p, _)| p.name == o.name)
                        .map_or(0, |x| *x.1)
                })
            })
            .collect();
        self.resources = Some(Box::new(WorkerResources { offered: offered.to_vec(), held }));
    }

    /// Counts `amounts` as held by an executor placed or adopted here.
    pub(super) fn hold_resources(&mut self, amounts: &[(String, u32)]) {
        self.change_resources(amounts, u32::saturating_add);
    }

    /// Gives `amounts` back, held by an executor that ended.
    pub(super) fn release_resources(&mut self, amounts: &[(String, u32)]) {
        self.change_resources(amounts, u32::saturating_sub);
    }

    fn change_resources(&mut self, amounts: &[(String, u32)], op: fn(u32, u32) -> u32) {
        let Some(r) = self.resources.as_mut() else { return };
        for (name, n) in amounts {
            if let Some(i) = r.offered.iter().position(|o| o.name == *name) {
                r.held[i] = op(r.held[i], *n);
            }
        }
    }

    /// A new entry (not yet in a registry: [`Registry::insert`] gives it its
    /// slot).
    fn new(id: WorkerId, incarnation: Incarnation, cores: u32, memory_mb: u64) -> Self {
        WorkerEntry {
            id,
            incarnation,
            cores,
            memory_mb,
            state: WorkerState::Registering,
            last_seen: Millis::ZERO,
            conn: None,
            durable: false,
            retired: Vec::new(),
            registered_after: 0,
            recovered: false,
            cores_used: 0,
            memory_used_mb: 0,
            callback: None,
            heartbeat_interval: Millis::ZERO,
            timeout: Millis::ZERO,
            maintenance: None,
            attributes: Vec::new(),
            ports: 0,
            ports_used: 0,
            host: None,
            resources: None,
            users: Box::default(),
            usage: None,
            slot: u32::MAX,
            placed_as: None,
            indexed: None,
        }
    }
}

/// What a heartbeat tells the registry.
#[derive(Debug)]
pub(super) enum Heard {
    /// From the registered incarnation of an ALIVE worker, told to
    /// heartbeat every `interval`: acknowledge it.
    Ack { interval: Millis },
    /// From a worker whose registration is being persisted: its
    /// `Registered` is on the way.
    Quiet,
    /// From an incarnation that was replaced by `current`.
    Retired { id: WorkerId, current: Incarnation },
    /// From no worker this leader knows as registered on it.
    Unknown,
}

/// A placement candidate's key: `(0, 0, id)` under `spread` (round robin in
/// id order), `(free cores, free memory, id)` under `pack` (the fullest
/// worker that fits comes first).
pub(super) type PlaceKey = (u32, u64, WorkerId);

/// The worker registry and its indexes. Every change to a worker's state,
/// last contact, connection or usage goes through its methods (or is
/// followed by [`Master::reindex_worker`]), so the indexes stay exact;
/// debug builds check them after every step (see `Master::check_indexes`).
#[derive(Debug, Default)]
pub(super) struct Registry {
    pub(super) entries: FxHashMap<WorkerId, WorkerEntry>,
    /// Writes in flight: which (worker, incarnation) each one makes durable.
    pending: FxHashMap<WriteId, (WorkerId, Incarnation)>,
    /// How many entries are in each state, by `WorkerState as usize`.
    counts: [usize; 4],
    /// How many entries were recovered from the store.
    recovered: usize,
    /// The ALIVE workers, least recently heard from first.
    silence: Silence,
    /// The placement candidates: ALIVE, connected, with room for one more
    /// live executor (`MAX_EXECUTORS_PER_WORKER`), in the policy's order.
    pub(super) placeable: BTreeSet<PlaceKey>,
    /// The same candidates by what they have free and by attribute value
    /// (a single slot of a spread, constrained or differently placed
    /// group: docs/design.md#issue-46).
    pub(super) by_attribute: ByAttribute,
    /// Bytes of listing the entries' record names take in each store
    /// shard ([`listing_cost`]; empty until the first entry).
    shard_listing: Vec<usize>,
    /// The cores and memory (MiB) the ALIVE workers offer: the
    /// denominators of dominant shares (docs/tenants.md).
    alive_capacity: (u64, u64),
    /// Commands to workers still registering, held until their
    /// `Registered` goes out ([`Registry::route`]).
    held: FxHashMap<WorkerId, Vec<Message>>,
    /// The addresses of each named resource the ALIVE workers offer (a
    /// kind none offers is absent): the other denominators of dominant
    /// shares.
    alive_named: BTreeMap<String, u64>,
}

/// Adds (`add`) or takes away the addresses `resources` offers to or from
/// `named`, dropping a kind that falls to zero.
fn count_named(named: &mut BTreeMap<String, u64>, resources: Option<&WorkerResources>, add: bool) {
    let Some(r) = resources else { return };
    for o in &r.offered {
        let n = o.addresses.len() as u64;
        if add {
            *named.entry(o.name.clone()).or_default() += n;
        } else if let Some(v) = named.get_mut(&o.name) {
            *v = v.saturating_sub(n);
            if *v == 0 {
                named.remove(&o.name);
            }
        }
    }
}

/// The store shard of worker `id`'s record and the bytes its name takes in
/// that shard's ZooKeeper listing (4 bytes of length and the name).
pub(super) fn listing_cost(id: &WorkerId) -> (u8, usize) {
    let stem = crate::store::names::key_stem(&RecordKey::Worker(id.clone()));
    let shard = crate::zk::layout::shard_of(&stem).unwrap_or(0);
    (shard, 4 + stem.len())
}

impl Registry {
    /// Where a command to worker `id` goes: its connection, or `None` if
    /// it has none or the command was held. A worker still registering
    /// (its record not yet durable, its `Registered` not yet sent) may
    /// have registered with every master at once and follows none of them
    /// yet, so it drops what this one sends; its commands are held and go
    /// out right after its `Registered` ([`Registry::take_held`]), so a
    /// kill or stop decided while its registration is written is carried
    /// out (sim seed 99443, docs/design.md#simulator-seeds). At most
    /// [`MAX_HELD_COMMANDS`] are held; past that a command is sent at once,
    /// as to any worker (owed kills and stops are sent again whenever the
    /// worker reports them live).
    pub(super) fn route(&mut self, id: &WorkerId, msg: Message) -> Option<(ConnId, Message)> {
        let e = self.entries.get(id)?;
        let conn = e.conn?;
        if e.state != WorkerState::Registering {
            return Some((conn, msg));
        }
        let held = self.held.entry(id.clone()).or_default();
        if held.len() >= MAX_HELD_COMMANDS {
            return Some((conn, msg));
        }
        held.push(msg);
        None
    }

    /// The commands held for `id` while it registered, oldest first.
    pub(super) fn take_held(&mut self, id: &WorkerId) -> Vec<Message> {
        self.held.remove(id).unwrap_or_default()
    }

    pub(super) fn sorted(&self) -> Vec<&WorkerEntry> {
        let mut v: Vec<&WorkerEntry> = self.entries.values().collect();
        v.sort_by(|a, b| a.id.cmp(&b.id));
        v
    }

    /// Adds `e` (replacing nothing: the caller removed any entry of its id).
    fn insert(&mut self, mut e: WorkerEntry) {
        if self.shard_listing.is_empty() {
            self.shard_listing = vec![0; crate::zk::layout::SHARDS];
        }
        let (shard, cost) = listing_cost(&e.id);
        self.shard_listing[usize::from(shard)] += cost;
        e.slot = self.silence.alloc(e.id.clone());
        e.placed_as = None;
        e.indexed = None;
        self.counts[e.state as usize] += 1;
        self.recovered += usize::from(e.recovered);
        if e.state == WorkerState::Alive {
            self.silence.push_back(e.slot, e.last_seen);
            self.alive_capacity.0 += u64::from(e.cores);
            self.alive_capacity.1 += e.memory_mb;
            count_named(&mut self.alive_named, e.resources.as_deref(), true);
        }
        if let Some(old) = self.entries.insert(e.id.clone(), e) {
            unreachable!("worker {} inserted twice", old.id);
        }
    }

    /// Removes `id`'s entry and forgets it in every index.
    pub(super) fn remove(&mut self, id: &WorkerId) -> Option<WorkerEntry> {
        let e = self.entries.remove(id)?;
        self.held.remove(id);
        let (shard, cost) = listing_cost(&e.id);
        if let Some(b) = self.shard_listing.get_mut(usize::from(shard)) {
            *b = b.saturating_sub(cost);
        }
        self.counts[e.state as usize] -= 1;
        self.recovered -= usize::from(e.recovered);
        self.silence.free(e.slot);
        if e.state == WorkerState::Alive {
            self.alive_capacity.0 -= u64::from(e.cores);
            self.alive_capacity.1 -= e.memory_mb;
            count_named(&mut self.alive_named, e.resources.as_deref(), false);
        }
        if let Some((c, m)) = e.placed_as {
            self.placeable.remove(&(c, m, e.id.clone()));
        }
        if let Some((free, name)) = &e.indexed {
            self.by_attribute.remove(name, *free, &e.attributes);
        }
        Some(e)
    }

    /// Moves `id` to `state`. A worker becoming ALIVE counts as heard from
    /// at its `last_seen`.
    pub(super) fn set_state(&mut self, id: &WorkerId, state: WorkerState) {
        let Some(e) = self.entries.get_mut(id) else { return };
        if e.state == state {
            return;
        }
        self.counts[e.state as usize] -= 1;
        self.counts[state as usize] += 1;
        if e.state == WorkerState::Alive {
            self.alive_capacity.0 -= u64::from(e.cores);
            self.alive_capacity.1 -= e.memory_mb;
            count_named(&mut self.alive_named, e.resources.as_deref(), false);
        } else if state == WorkerState::Alive {
            self.alive_capacity.0 += u64::from(e.cores);
            self.alive_capacity.1 += e.memory_mb;
            count_named(&mut self.alive_named, e.resources.as_deref(), true);
        }
        e.state = state;
        if state == WorkerState::Alive {
            self.silence.push_back(e.slot, e.last_seen);
        } else {
            self.silence.unlink(e.slot);
        }
    }

    /// A heartbeat from `id` as `incarnation` at `now`: one lookup, and
    /// the worker moves to the tail of the silence order. The worker now
    /// heartbeats at the interval it was told last, so its timeout is
    /// `timeout` (the worker timeout scaled to that interval).
    pub(super) fn heartbeat(
        &mut self,
        id: &WorkerId,
        incarnation: Incarnation,
        now: Millis,
        timeout: impl FnOnce(Millis) -> Millis,
    ) -> Heard {
        let Some(e) = self.entries.get_mut(id) else { return Heard::Unknown };
        if e.incarnation == incarnation {
            match e.state {
                WorkerState::Alive => {
                    e.last_seen = now;
                    e.timeout = timeout(e.heartbeat_interval);
                    self.silence.push_back(e.slot, now);
                    return Heard::Ack { interval: e.heartbeat_interval };
                }
                WorkerState::Registering => {
                    e.last_seen = now;
                    return Heard::Quiet;
                }
                WorkerState::Dead | WorkerState::Unknown => return Heard::Unknown,
            }
        }
        if e.retired.contains(&incarnation) {
            return Heard::Retired { id: e.id.clone(), current: e.incarnation };
        }
        Heard::Unknown
    }

    /// `id` was heard from at `now`.
    pub(super) fn seen(&mut self, id: &WorkerId, now: Millis) {
        if let Some(e) = self.entries.get_mut(id) {
            e.last_seen = now;
            if e.state == WorkerState::Alive {
                self.silence.push_back(e.slot, now);
            }
        }
    }

    /// Adds a worker recovered from its record, UNKNOWN until it reports;
    /// `heartbeat` is the configured interval and timeout, until it is told
    /// its own; `registered_after`: how many connections this master had
    /// accepted when it recovered the record.
    pub(super) fn insert_recovered(
        &mut self,
        r: WorkerRecord,
        now: Millis,
        heartbeat: (Millis, Millis),
        registered_after: u64,
    ) {
        let mut e = WorkerEntry::new(r.id, r.incarnation, r.cores, r.memory_mb);
        (e.heartbeat_interval, e.timeout) = heartbeat;
        e.registered_after = registered_after;
        // A DEAD worker's record kept for its maintenance: DEAD again, and
        // no report of it is waited for.
        e.state = if r.dead { WorkerState::Dead } else { WorkerState::Unknown };
        e.last_seen = now;
        e.durable = true;
        e.recovered = !r.dead;
        e.callback = r.callback;
        e.maintenance = r.maintenance;
        // A store holds one record per worker id; a second one (a damaged
        // or planted store) replaces the first, as the map always did.
        let _ = self.remove(&e.id);
        self.insert(e);
    }

    /// Why a new worker `id` may not join: the registry holds `max`
    /// workers, or its record's name would take its store shard's listing
    /// past [`crate::limits::MAX_WORKER_SHARD_LISTING`].
    pub(super) fn full_for(&self, id: &WorkerId, max: usize) -> Option<String> {
        if self.entries.len() >= max {
            return Some(format!(
                "the cluster has {} workers ({} DEAD); the limit is {max} (max_workers: \
                 `regent remove-worker` forgets DEAD ones, `regent master --max-workers` \
                 raises it)",
                self.entries.len(),
                self.count(WorkerState::Dead)
            ));
        }
        let (shard, cost) = listing_cost(id);
        let used = self.shard_listing.get(usize::from(shard)).copied().unwrap_or(0);
        let limit = crate::limits::MAX_WORKER_SHARD_LISTING;
        (used + cost > limit).then(|| {
            format!(
                "worker {id}'s record would take the names of worker records in store shard \
                 {shard:02x} to {} bytes; the limit is {limit} bytes \
                 (MAX_WORKER_SHARD_LISTING, ZooKeeper's packet limit): use a shorter or \
                 different worker id",
                used + cost
            )
        })
    }

    /// The cores and memory (MiB) the ALIVE workers offer.
    pub(super) fn alive_capacity(&self) -> (u64, u64) {
        self.alive_capacity
    }

    /// The addresses of each named resource the ALIVE workers offer.
    pub(super) fn alive_named(&self) -> &BTreeMap<String, u64> {
        &self.alive_named
    }

    /// Worker `id` offers `offered` now (a repeated registration): its
    /// entry takes the offer, and the ALIVE workers' named capacity moves
    /// with it.
    pub(super) fn offer_resources(
        &mut self,
        id: &WorkerId,
        offered: &[crate::resources::Resource],
    ) {
        let Some(e) = self.entries.get_mut(id) else { return };
        let alive = e.state == WorkerState::Alive;
        if alive {
            count_named(&mut self.alive_named, e.resources.as_deref(), false);
        }
        e.offer_resources(offered);
        if alive {
            count_named(&mut self.alive_named, e.resources.as_deref(), true);
        }
    }

    pub(super) fn count(&self, state: WorkerState) -> usize {
        self.counts[state as usize]
    }

    pub(super) fn recovered_count(&self) -> usize {
        self.recovered
    }

    pub(super) fn ids_in(&self, state: WorkerState) -> Vec<WorkerId> {
        let mut v: Vec<WorkerId> =
            self.entries.values().filter(|e| e.state == state).map(|e| e.id.clone()).collect();
        v.sort();
        v
    }

    pub(super) fn refresh_all(&mut self, now: Millis) {
        for e in self.entries.values_mut() {
            e.last_seen = now;
        }
        self.silence.touch_all(now);
    }

    pub(super) fn remove_if_not_alive(&mut self, id: &WorkerId) -> Option<WorkerEntry> {
        match self.entries.get(id) {
            Some(e) if matches!(e.state, WorkerState::Unknown | WorkerState::Dead) => {
                self.remove(id)
            }
            _ => None,
        }
    }

    /// The ALIVE workers silent for longer than their timeout at `now`,
    /// in id order, where no worker's timeout is below `floor` (the
    /// configured worker timeout). Looks at the workers silent for longer
    /// than `floor` only (and one more).
    pub(super) fn silent(&self, now: Millis, floor: Millis) -> Vec<WorkerId> {
        let mut v: Vec<WorkerId> = self
            .silence
            .silent_longer_than(now, floor)
            .into_iter()
            .filter(|id| {
                self.entries.get(*id).is_some_and(|e| {
                    e.state == WorkerState::Alive && now.since(e.last_seen) > e.timeout.max(floor)
                })
            })
            .cloned()
            .collect();
        v.sort();
        v
    }

    /// How many workers heartbeat to this leader, or will: every one not
    /// DEAD.
    pub(super) fn heartbeating(&self) -> usize {
        self.entries.len() - self.count(WorkerState::Dead)
    }

    /// Puts `id` among the placement candidates, or takes it out, by its
    /// state, connection and usage now; `live` is how many live executors
    /// it has.
    pub(super) fn reindex(&mut self, id: &WorkerId, live: usize, policy: Placement) {
        let Some(e) = self.entries.get_mut(id) else { return };
        let candidate = e.state == WorkerState::Alive
            && e.conn.is_some()
            && e.maintenance.is_none()
            && live < MAX_EXECUTORS_PER_WORKER;
        let want = candidate.then(|| place_key(e, policy));
        if want != e.placed_as {
            if let Some((c, m)) = e.placed_as.take() {
                self.placeable.remove(&(c, m, id.clone()));
            }
            if let Some((c, m)) = want {
                self.placeable.insert((c, m, id.clone()));
            }
            e.placed_as = want;
        }
        let free = candidate.then(|| free_of(e));
        match (&mut e.indexed, free) {
            (Some((had, _)), Some(now)) if *had == now => {}
            (Some((had, name)), Some(now)) => {
                self.by_attribute.rekey(name, *had, now, &e.attributes);
                *had = now;
            }
            (Some(_), None) => {
                let (had, name) = e.indexed.take().expect("matched");
                self.by_attribute.remove(&name, had, &e.attributes);
            }
            (None, Some(now)) => {
                let name: super::by_attribute::Name = std::sync::Arc::from(id.as_str());
                self.by_attribute.insert(&name, now, &e.attributes);
                e.indexed = Some((now, name));
            }
            (None, None) => {}
        }
    }

    /// Gives `id` the attributes it announced now (a repeated
    /// registration): it leaves the candidates by attribute value first
    /// ([`Registry::reindex`] puts it back under its new ones).
    pub(super) fn set_attributes(&mut self, id: &WorkerId, attributes: Vec<(String, String)>) {
        let Some(e) = self.entries.get_mut(id) else { return };
        if let Some((had, name)) = e.indexed.take() {
            self.by_attribute.remove(&name, had, &e.attributes);
        }
        e.attributes = attributes;
    }

    /// Checks every index against the entries (debug builds, small
    /// registries): the state counts, the silence order (exactly the ALIVE
    /// workers, keys never decreasing) and the placement candidates.
    #[cfg(debug_assertions)]
    pub(super) fn check(
        &self,
        policy: Placement,
        timeout_floor: Millis,
        live: impl Fn(&WorkerId) -> usize,
    ) {
        let mut counts = [0usize; 4];
        for e in self.entries.values() {
            counts[e.state as usize] += 1;
        }
        assert_eq!(self.counts, counts, "worker counts by state");
        let alive = self.entries.values().filter(|e| e.state == WorkerState::Alive);
        let capacity = alive.fold((0, 0), |(c, m), e| (c + u64::from(e.cores), m + e.memory_mb));
        assert_eq!(self.alive_capacity, capacity, "the ALIVE workers' capacity");
        let mut named = BTreeMap::new();
        for e in self.entries.values().filter(|e| e.state == WorkerState::Alive) {
            count_named(&mut named, e.resources.as_deref(), true);
        }
        assert_eq!(self.alive_named, named, "the ALIVE workers' named resources");
        let recovered = self.entries.values().filter(|e| e.recovered).count();
        assert_eq!(self.recovered, recovered, "recovered workers");
        let linked = self.silence.linked();
        assert!(linked.windows(2).all(|w| w[0].1 <= w[1].1), "silence order is sorted");
        let mut linked: Vec<&WorkerId> = linked.into_iter().map(|(w, _)| w).collect();
        linked.sort();
        let mut alive: Vec<&WorkerId> = self
            .entries
            .values()
            .filter(|e| e.state == WorkerState::Alive)
            .map(|e| &e.id)
            .collect();
        alive.sort();
        assert_eq!(linked, alive, "the silence order holds exactly the ALIVE workers");
        for e in self.entries.values() {
            assert_eq!(self.silence.is_linked(e.slot), e.state == WorkerState::Alive);
            // The sweep's walk stops at the configured timeout.
            assert!(
                e.state != WorkerState::Alive || e.timeout >= timeout_floor,
                "an ALIVE worker's timeout is at least the configured one"
            );
        }
        let want: BTreeSet<PlaceKey> = self
            .entries
            .values()
            .filter(|e| {
                e.state == WorkerState::Alive
                    && e.conn.is_some()
                    && e.maintenance.is_none()
                    && live(&e.id) < MAX_EXECUTORS_PER_WORKER
            })
            .map(|e| {
                let (c, m) = place_key(e, policy);
                (c, m, e.id.clone())
            })
            .collect();
        assert_eq!(self.placeable, want, "placement candidates");
        let mut by_attribute = ByAttribute::default();
        for e in self.entries.values() {
            let candidate = e.state == WorkerState::Alive
                && e.conn.is_some()
                && e.maintenance.is_none()
                && live(&e.id) < MAX_EXECUTORS_PER_WORKER;
            if candidate {
                let name: super::by_attribute::Name = std::sync::Arc::from(e.id.as_str());
                by_attribute.insert(&name, free_of(e), &e.attributes);
            }
            let indexed = e.indexed.as_ref().map(|(free, name)| (*free, name.as_ref()));
            assert_eq!(
                indexed,
                candidate.then(|| (free_of(e), e.id.as_str())),
                "worker {}: its key among the candidates by attribute value",
                e.id
            );
        }
        assert_eq!(self.by_attribute, by_attribute, "the candidates by attribute value");
    }

    /// `worker` is registered as `incarnation` and talks on `conn`.
    pub(super) fn is_bound(
        &self,
        worker: &WorkerId,
        incarnation: Incarnation,
        conn: ConnId,
    ) -> bool {
        self.entries.get(worker).is_some_and(|e| {
            e.incarnation == incarnation
                && e.conn == Some(conn)
                && matches!(e.state, WorkerState::Alive | WorkerState::Registering)
        })
    }

    /// `worker` no longer talks on `conn`; `true` if it did.
    #[must_use]
    pub(super) fn unbind(&mut self, worker: &WorkerId, conn: ConnId) -> bool {
        match self.entries.get_mut(worker) {
            Some(e) if e.conn == Some(conn) => {
                e.conn = None;
                true
            }
            _ => false,
        }
    }
}

/// What `e` has free: (cores, memory in MiB).
fn free_of(e: &WorkerEntry) -> (u32, u64) {
    (e.cores.saturating_sub(e.cores_used), e.memory_mb.saturating_sub(e.memory_used_mb))
}

/// `e`'s key among the placement candidates under `policy`.
fn place_key(e: &WorkerEntry, policy: Placement) -> (u32, u64) {
    match policy {
        Placement::Spread => (0, 0),
        Placement::Pack => {
            (e.cores.saturating_sub(e.cores_used), e.memory_mb.saturating_sub(e.memory_used_mb))
        }
    }
}

impl Master {
    /// `Registered` for `worker`, telling it its heartbeat interval (see
    /// [`Master::hand_out_interval`]).
    fn registered_msg(&mut self, worker: &WorkerId, duplicate: bool) -> Message {
        let heartbeat_interval = self.hand_out_interval(worker);
        Message::Registered {
            epoch: self.epoch,
            heartbeat_interval,
            duplicate,
            masters: self.known_masters(),
        }
    }

    /// The heartbeat interval `worker` is told now: the shortest interval
    /// the ceiling allows for the workers registered
    /// ([`super::Config::heartbeat_interval_for`]), plus, when that is past
    /// the configured interval, a jitter of up to a quarter of it drawn
    /// from the worker's id and incarnation (so heartbeats of workers that
    /// registered together drift apart). Its timeout covers the longer of
    /// its old and new interval until its next heartbeat: the heartbeat
    /// after this one may still come at the old interval.
    fn hand_out_interval(&mut self, worker: &WorkerId) -> Millis {
        let floor = self.heartbeat_floor();
        let Some(e) = self.workers.entries.get_mut(worker) else { return floor };
        let interval = if floor > self.config.heartbeat_interval {
            Millis(floor.0.saturating_add(jitter(&e.id, e.incarnation, floor.0 / 4)))
        } else {
            floor
        };
        let longest = interval.max(e.heartbeat_interval);
        e.timeout = self.config.scaled(self.config.worker_timeout, longest);
        e.heartbeat_interval = interval;
        self.longest_heartbeat = self.longest_heartbeat.max(interval);
        interval
    }

    /// Whether a worker told to heartbeat every `interval` should be told
    /// another interval: the cluster grew past it (its heartbeats would
    /// pass the ceiling) or shrank below half of it (its failures would be
    /// noticed later than they need be).
    fn interval_outgrown(&mut self, interval: Millis) -> bool {
        let floor = self.heartbeat_floor();
        interval < floor || interval.0 > floor.0.saturating_mul(2)
    }

    /// The shortest interval for the workers registered now (computed once
    /// per change of their number: every heartbeat asks).
    fn heartbeat_floor(&mut self) -> Millis {
        let n = self.workers.heartbeating();
        if self.floor_for.0 != n || self.floor_for.1 == Millis::ZERO {
            self.floor_for = (n, self.config.heartbeat_interval_for(n));
        }
        self.floor_for.1
    }

    /// Puts `worker` among the placement candidates or takes it out, by its
    /// state, connection, usage and live executors now.
    pub(super) fn reindex_worker(&mut self, worker: &WorkerId) {
        let live = self.executors.live_on(worker);
        self.workers.reindex(worker, live, self.config.placement);
    }

    /// `worker` no longer talks on `conn` (if it did).
    pub(super) fn unbind_worker(&mut self, worker: &WorkerId, conn: ConnId) {
        if self.workers.unbind(worker, conn) {
            self.reindex_worker(worker);
        }
    }

    /// Binds `conn` to `worker`, unbinding the worker's previous connection.
    fn bind(&mut self, conn: ConnId, worker: &WorkerId) {
        if let Some(c) = self.conns.get_mut(&conn) {
            c.worker = Some(worker.clone());
        }
    }

    /// Forgets a connection this master closes itself (no `Disconnected`
    /// follows) while refusing `registering`'s registration on it: neither
    /// that worker nor one registered on it before is bound to it any more, so
    /// nothing more is accepted from it or sent on it (a refused
    /// re-registration's reports were once applied on the registration it
    /// failed to replace).
    fn drop_conn(&mut self, conn: ConnId, registering: &WorkerId) {
        if let Some(worker) = self.conns.remove(&conn).and_then(|c| c.worker) {
            self.unbind_worker(&worker, conn);
        }
        self.unbind_worker(registering, conn);
    }

    pub(super) fn register_worker(
        &mut self,
        now: Millis,
        conn: ConnId,
        reg: RegisterWorker,
        out: &mut Vec<Action>,
    ) {
        if let Some(reason) = registration_limit(&reg) {
            // Checked before anything is allocated or persisted
            // (docs/design.md#peer-input-never-panics): a worker that offers absurd numbers is misconfigured,
            // so it is told why and stops, rather than retrying forever.
            let reason = format!("registration refused: {reason}");
            out.push(Action::Send { conn, msg: Message::Shutdown { epoch: self.epoch, reason } });
            out.push(Action::Close { conn, reason: "registration past a limit".into() });
            self.drop_conn(conn, &reg.worker);
            self.metrics.rejected += 1;
            return;
        }
        let id = reg.worker.clone();
        if let Some(reason) = self.binding_conflict(conn, Some(&id), None) {
            // What the connection carries keeps it; nothing is recorded.
            let msg = Message::RegisterRefused { epoch: self.epoch, reason };
            out.push(Action::Send { conn, msg });
            return;
        }
        if let Some(entry) = self.workers.entries.get(&id) {
            // Incarnations grow with their process's start time: an older one
            // (a registration sent before a crash and delivered late) never
            // replaces a newer one that is still connected, nor one that
            // registered after the older one's connection was opened (below).
            // A lower incarnation on a connection opened since, while the
            // registered one is disconnected, is a new process of a host
            // whose clock stepped back (docs/design.md#identity-and-time-do-not-trust-the-wall-clock) and replaces it
            // like any new incarnation; one that was replaced stays refused.
            let older = reg.incarnation < entry.incarnation;
            let opened = self.conns.get(&conn).map_or(0, |c| c.opened);
            if entry.retired.contains(&reg.incarnation) || (older && entry.conn.is_some()) {
                let msg = shutdown_msg(self.epoch, &id, reg.incarnation, entry.incarnation);
                out.push(Action::Send { conn, msg });
                out.push(Action::Close {
                    conn,
                    reason: format!("replaced incarnation of worker {id}"),
                });
                self.drop_conn(conn, &id);
                return;
            }
            if older && opened <= entry.registered_after {
                // Its sender was connected before the registered incarnation
                // registered: almost surely a dead older process whose
                // registration came late, even though the newer one's
                // connection is gone (sim seed 99173, docs/design.md#simulator-seeds: taken
                // as a successor, it made the live newer process exit when it
                // registered again). Only the connection is closed, no
                // `Shutdown`: a dead process hears nothing, and a live
                // successor (its registration overtaken by its
                // predecessor's) dials again and is judged on a connection
                // opened since.
                out.push(Action::Close {
                    conn,
                    reason: format!("late registration of an older incarnation of worker {id}"),
                });
                self.drop_conn(conn, &id);
                self.metrics.rejected += 1;
                return;
            }
        }
        if !self.workers.entries.contains_key(&id) {
            if let Some(reason) = self.workers.full_for(&id, self.config.max_workers) {
                // Nothing is recorded; the worker logs the reason and
                // retries slowly (an operator may remove DEAD workers or
                // raise the limit meanwhile).
                let reason = format!("registration of worker {id} refused: {reason}");
                let msg = Message::RegisterRefused { epoch: self.epoch, reason };
                out.push(Action::Send { conn, msg });
                self.metrics.rejected += 1;
                return;
            }
        }
        self.bind(conn, &id);
        let same = self.workers.entries.get(&id).map(|e| e.incarnation == reg.incarnation);
        match same {
            Some(true) => {
                let entry = self.workers.entries.get_mut(&id).expect("checked");
                let old_conn = entry.conn.replace(conn);
                entry.ports = crate::ports::count(&reg.ports);
                entry.host = reg.host.clone();
                entry.users = reg.users.clone().into_boxed_slice();
                let state = entry.state;
                // A recovered entry learns them here.
                self.workers.set_attributes(&id, reg.attributes.clone());
                self.workers.offer_resources(&id, &reg.resources);
                self.workers.seen(&id, now);
                if let Some(old) = old_conn.filter(|c| *c != conn) {
                    if let Some(c) = self.conns.get_mut(&old) {
                        c.worker = None;
                    }
                }
                match state {
                    WorkerState::Alive => {
                        // The same process again (a retry or a blip): acknowledge
                        // idempotently, never an error (SPARK-23191).
                        let msg = self.registered_msg(&id, true);
                        out.push(Action::Send { conn, msg });
                    }
                    // The acknowledgement follows `Persisted`, on the latest conn.
                    WorkerState::Registering => {}
                    // A recovered worker reports: its record is durable already.
                    WorkerState::Unknown => {
                        self.workers.set_state(&id, WorkerState::Alive);
                        let msg = self.registered_msg(&id, false);
                        out.push(Action::Send { conn, msg });
                    }
                    WorkerState::Dead => {
                        self.workers.set_state(&id, WorkerState::Registering);
                        if let Some(e) = self.workers.entries.get_mut(&id) {
                            e.durable = false;
                        }
                        self.persist_worker(&id, out);
                    }
                }
                self.reindex_worker(&id);
            }
            Some(false) => {
                // A new process of the worker. What it re-adopted and the
                // leader still places there, in slots that still name it, is
                // kept; the rest of the old incarnation's executors are lost
                // (docs/design.md#duplicates-are-harmless), all in this one step.
                let kept = self.kept_on_new_incarnation(&id, &reg.executors);
                self.lose_executors_except(&id, &kept, now, out);
                let old = self.workers.remove(&id).expect("checked");
                if let Some(old_conn) = old.conn.filter(|c| *c != conn) {
                    let msg = shutdown_msg(self.epoch, &id, old.incarnation, reg.incarnation);
                    out.push(Action::Send { conn: old_conn, msg });
                    out.push(Action::Close {
                        conn: old_conn,
                        reason: format!("worker {id} re-registered with a new incarnation"),
                    });
                    self.conns.remove(&old_conn);
                }
                let mut retired = old.retired;
                retired.push(old.incarnation);
                if retired.len() > RETIRED_KEPT {
                    retired.remove(0);
                }
                // An operator's cordon or drain is of the worker id, not of
                // one process: the new incarnation keeps it.
                let maintenance = old.maintenance;
                self.insert_registering(now, conn, reg, retired, maintenance, out);
                self.hold_kept(&id, &kept);
            }
            None => self.insert_registering(now, conn, reg, Vec::new(), None, out),
        }
    }

    fn insert_registering(
        &mut self,
        now: Millis,
        conn: ConnId,
        reg: RegisterWorker,
        retired: Vec<Incarnation>,
        maintenance: Option<Maintenance>,
        out: &mut Vec<Action>,
    ) {
        let id = reg.worker.clone();
        let mut e = WorkerEntry::new(reg.worker, reg.incarnation, reg.cores, reg.memory_mb);
        // The configured interval and timeout until it is told its own.
        e.heartbeat_interval = self.config.heartbeat_interval;
        e.timeout = self.config.worker_timeout;
        e.last_seen = now;
        e.conn = Some(conn);
        e.retired = retired;
        e.registered_after = self.conns_opened;
        e.maintenance = maintenance;
        e.callback = self.conns.get(&conn).and_then(|c| c.callback.clone());
        e.attributes = reg.attributes;
        e.ports = crate::ports::count(&reg.ports);
        e.host = reg.host;
        e.offer_resources(&reg.resources);
        e.users = reg.users.into_boxed_slice();
        self.workers.insert(e);
        self.persist_worker(&id, out);
    }

    fn persist_worker(&mut self, id: &WorkerId, out: &mut Vec<Action>) {
        let write = self.next_write();
        let e = &self.workers.entries[id];
        let record = worker_record(e);
        self.workers.pending.insert(write, (id.clone(), e.incarnation));
        out.push(Action::Store(StoreCommand::Persist { write, record }));
    }

    /// Writes `id`'s record as it stands (an operator's cordon or drain
    /// changed it); returns the write, whose continuations the caller
    /// attaches. `None` if there is no such worker.
    pub(super) fn persist_worker_maintenance(
        &mut self,
        id: &WorkerId,
        out: &mut Vec<Action>,
    ) -> Option<WriteId> {
        let record = worker_record(self.workers.entries.get(id)?);
        let write = self.next_write();
        out.push(Action::Store(StoreCommand::Persist { write, record }));
        Some(write)
    }

    /// Handles `Persisted` for a worker registration; `false` if `write` is
    /// another kind of write.
    pub(super) fn on_persisted(
        &mut self,
        now: Millis,
        write: WriteId,
        out: &mut Vec<Action>,
    ) -> bool {
        let Some((id, incarnation)) = self.workers.pending.remove(&write) else {
            return false;
        };
        let reply = match self.workers.entries.get_mut(&id) {
            Some(e) if e.incarnation == incarnation && e.state == WorkerState::Registering => {
                e.durable = true;
                e.last_seen = now;
                let conn = e.conn;
                self.workers.set_state(&id, WorkerState::Alive);
                self.reindex_worker(&id);
                conn
            }
            _ => None,
        };
        if let Some(conn) = reply {
            let msg = self.registered_msg(&id, false);
            out.push(Action::Send { conn, msg });
            for msg in self.workers.take_held(&id) {
                out.push(Action::Send { conn, msg });
            }
            self.place(out);
        }
        true
    }

    pub(super) fn worker_heartbeat(
        &mut self,
        now: Millis,
        conn: ConnId,
        incarnation: Incarnation,
        out: &mut Vec<Action>,
    ) {
        let epoch = self.epoch;
        let bound = self.conns.get(&conn).and_then(|c| c.worker.as_ref());
        let config = &self.config;
        let timeout = |interval| config.scaled(config.worker_timeout, interval);
        match bound.map(|w| self.workers.heartbeat(w, incarnation, now, timeout)) {
            Some(Heard::Ack { interval }) => {
                out.push(Action::Send { conn, msg: Message::HeartbeatAck { epoch } });
                if self.interval_outgrown(interval) {
                    // Heartbeat load control: the cluster's size changed
                    // enough that this worker's interval no longer suits
                    // it. The worker takes the interval of any `Registered`
                    // from the master it follows (a repeat of its
                    // acknowledgement, harmless by the protocol), from its
                    // next heartbeat on.
                    if let Some(worker) = self.conns.get(&conn).and_then(|c| c.worker.clone()) {
                        let msg = self.registered_msg(&worker, true);
                        out.push(Action::Send { conn, msg });
                    }
                }
            }
            // Registering: the acknowledgement is on its way; stay quiet.
            Some(Heard::Quiet) => {}
            Some(Heard::Retired { id, current }) => {
                let msg = shutdown_msg(epoch, &id, incarnation, current);
                out.push(Action::Send { conn, msg });
            }
            // Unknown on this connection, dead, or another incarnation.
            Some(Heard::Unknown) | None => {
                out.push(Action::Send { conn, msg: Message::ReconnectWorker { epoch } })
            }
        }
    }

    /// A bound worker's usage sample ([`Message::WorkerUsage`]): kept for
    /// the views, only for executors it runs per the leader (others are
    /// dropped), at most [`crate::limits::MAX_EXECUTORS_PER_WORKER`].
    pub(super) fn worker_usage(
        &mut self,
        now: Millis,
        worker: &WorkerId,
        mut usage: crate::protocol::WorkerUsage,
    ) {
        usage.executors.truncate(crate::limits::MAX_EXECUTORS_PER_WORKER);
        let executors = &self.executors;
        usage.executors.retain(|e| {
            executors
                .get(&e.executor)
                .is_some_and(|x| x.worker == *worker && !x.state.is_terminal())
        });
        if let Some(w) = self.workers.entries.get_mut(worker) {
            w.usage = Some(Box::new((usage, now)));
        }
    }

    /// Marks a worker DEAD and deletes its record (conditional on its
    /// incarnation).
    pub(super) fn mark_dead(&mut self, id: &WorkerId, now: Millis, out: &mut Vec<Action>) {
        if !self.workers.entries.contains_key(id) {
            return;
        }
        self.lose_executors_of(id, now, out);
        if let Some(conn) = self.workers.entries.get_mut(id).and_then(|e| e.conn.take()) {
            // docs/design.md#one-executor-per-slot: the launches just written off may still be on
            // this connection (a partition holds TCP's segments, it does not
            // lose them). A worker declared DEAD registers again on a new
            // connection, so a registration never comes after them on the
            // same one and leaves them standing; what this connection still
            // delivers the worker reports from then, and the leader kills.
            out.push(Action::Close {
                conn,
                reason: format!("worker {id} is DEAD: silent past its timeout"),
            });
            self.conns.remove(&conn);
        }
        self.workers.set_state(id, WorkerState::Dead);
        self.reindex_worker(id);
        let e = self.workers.entries.get_mut(id).expect("checked above");
        if e.maintenance.is_some() {
            // An operator's cordon or drain outlives the worker's absence
            // and a new leader (docs/design.md#issue-41, scenario 3): its record is kept,
            // marked DEAD.
            let _ = self.persist_worker_maintenance(id, out);
            return;
        }
        e.durable = false;
        let incarnation = e.incarnation;
        let write = self.next_write();
        out.push(Action::Store(StoreCommand::Unpersist {
            write,
            key: RecordKey::Worker(id.clone()),
            incarnation: Some(incarnation),
        }));
    }

    /// Marks the workers silent for longer than `worker_timeout` DEAD, in
    /// id order. Costs the silent workers, not the registry's size.
    pub(super) fn sweep(&mut self, now: Millis, out: &mut Vec<Action>) {
        for id in self.workers.silent(now, self.config.worker_timeout) {
            self.mark_dead(&id, now, out);
        }
    }
}

/// The durable record of worker entry `e`.
fn worker_record(e: &WorkerEntry) -> Record {
    Record::Worker(WorkerRecord {
        id: e.id.clone(),
        incarnation: e.incarnation,
        cores: e.cores,
        memory_mb: e.memory_mb,
        callback: e.callback.clone(),
        maintenance: e.maintenance,
        dead: e.state == WorkerState::Dead,
    })
}

fn shutdown_msg(epoch: Epoch, id: &WorkerId, old: Incarnation, new: Incarnation) -> Message {
    Message::Shutdown {
        epoch,
        reason: format!(
            "worker id {id} conflict: incarnation {old} was replaced by incarnation {new}"
        ),
    }
}

/// A number in `0..=max` drawn from a worker's id and incarnation: the same
/// for the same process, spread across processes.
fn jitter(id: &WorkerId, incarnation: Incarnation, max: u64) -> u64 {
    use std::hash::{Hash, Hasher};
    if max == 0 {
        return 0;
    }
    let mut h = rustc_hash::FxHasher::default();
    id.hash(&mut h);
    incarnation.hash(&mut h);
    // FxHash's low bits vary least: mix the high ones in.
    let x = h.finish();
    (x ^ (x >> 29) ^ (x >> 47)) % (max + 1)
}

/// Why `reg` breaks a limit of [`crate::limits`], if it does.
fn registration_limit(reg: &RegisterWorker) -> Option<String> {
    use crate::limits::{MAX_CORES, MAX_ID_BYTES, MAX_MEMORY_MB, MAX_REPORTS_PER_REGISTRATION};
    let id = reg.worker.as_str();
    if id.len() > MAX_ID_BYTES {
        return Some(format!(
            "worker id of {} bytes; the limit is {MAX_ID_BYTES} bytes (MAX_ID_BYTES)",
            id.len()
        ));
    }
    if reg.cores > MAX_CORES {
        return Some(format!(
            "worker {id} offers {} cores; the limit is {MAX_CORES} (MAX_CORES)",
            reg.cores
        ));
    }
    if reg.memory_mb > MAX_MEMORY_MB {
        return Some(format!(
            "worker {id} offers {} MiB; the limit is {MAX_MEMORY_MB} MiB (MAX_MEMORY_MB)",
            reg.memory_mb
        ));
    }
    if let Some(problem) = crate::limits::attributes_problem(&reg.attributes) {
        return Some(format!("worker {id} {problem}"));
    }
    if let Some(problem) = crate::ports::ranges_problem(&reg.ports) {
        return Some(format!("worker {id} offers ports badly: {problem}"));
    }
    if let Some(problem) = crate::resources::offers_problem(&reg.resources) {
        return Some(format!("worker {id} offers named resources badly: {problem}"));
    }
    if reg.users.len() > crate::launch::MAX_WORKER_USERS {
        return Some(format!(
            "worker {id} announces {} users; the limit is {} (MAX_WORKER_USERS)",
            reg.users.len(),
            crate::launch::MAX_WORKER_USERS
        ));
    }
    if let Some(bad) = reg.users.iter().find(|u| !crate::launch::is_user_name(u)) {
        return Some(format!("worker {id} announces user {bad:?}, which is no user name"));
    }
    if let Some(host) = reg.host.as_ref().filter(|h| h.is_empty() || h.len() > MAX_HOST_BYTES) {
        return Some(format!(
            "worker {id} names a host of {} bytes; it must be 1 to {MAX_HOST_BYTES} (MAX_HOST_BYTES)",
            host.len()
        ));
    }
    if reg.executors.len() > MAX_REPORTS_PER_REGISTRATION {
        return Some(format!(
            "worker {id} reports {} executors; the limit is {MAX_REPORTS_PER_REGISTRATION} per registration (MAX_REPORTS_PER_REGISTRATION)",
            reg.executors.len()
        ));
    }
    None
}
