//! Limits on peer-supplied numbers, checked before anything is allocated
//! or persisted (docs/design.md#peer-input-never-panics). A request past a limit is refused with a
//! reason naming the limit; it never panics and never allocates in
//! proportion to the number it carries.
//!
//! | limit | default | checked in | answer |
//! |---|---|---|---|
//! | [`MAX_SLOTS_PER_GROUP`] | 2,048 | `master::frameworks::declare_group` ([`group_spec_problem`], which a job's validation calls too), `Message::ScaleGroup` | `RequestRefused` |
//! | [`MAX_GROUPS_PER_FRAMEWORK`] | 64 | `declare_group` | `RequestRefused` |
//! | frameworks per cluster (`master::Config::max_frameworks`, default [`DEFAULT_MAX_FRAMEWORKS`]) | 1,000 | `master::frameworks::subscribe` (a *new* framework only) | `SubscribeRefused`, connection closed; the subscriber stops (no retry) |
//! | workers per cluster (`master::Config::max_workers`, default [`DEFAULT_MAX_WORKERS`], at most [`MAX_WORKERS_LIMIT`]) | 100,000 | `master::workers::register_worker` (a *new* worker id only) | `RegisterRefused`; the worker logs it and retries slowly |
//! | [`MAX_WORKER_SHARD_LISTING`] (bytes of worker record names in one store shard) | 213,764 | `register_worker` (a new worker id only) | `RegisterRefused`; the worker logs it and retries slowly |
//! | [`MAX_ID_BYTES`] (framework id, worker id) | 256 | `subscribe`, `master::workers::register_worker` | `SubscribeRefused` / `Shutdown` |
//! | [`MAX_ADDR_BYTES`] (a worker's callback address) | 256 | `Message::Callback` | connection closed |
//! | [`MAX_ADVERTISED_MASTERS`], [`MAX_ADDR_BYTES`] (the masters a leader advertises, each address) | 64 masters of 256 bytes | `worker` and `subscriber` (`HelloReply`, `MasterChanged`, `Registered`, a callback hint), [`advertised_masters_problem`] | the whole message is ignored, logged and counted (`Action::Rejected`); a worker or subscriber also keeps at most its configured masters plus 64 learned ones in all; the master's own election listing keeps the first 64 valid ones (counted in `rejected`) |
//! | [`MAX_NAME_BYTES`] (framework name, group name) | 256 | `subscribe`, `declare_group` | `SubscribeRefused` / `RequestRefused` |
//! | [`MAX_ARG_BYTES`] (each command argument) | 16 KiB | `declare_group` | `RequestRefused` |
//! | [`MAX_COMMAND_ARGS`] | 1,024 | `declare_group` | `RequestRefused` |
//! | [`MAX_ENV_VARS`] | 1,024 | `declare_group` | `RequestRefused` |
//! | [`MAX_ENV_KEY_BYTES`] | 1 KiB | `declare_group` | `RequestRefused` |
//! | [`MAX_ENV_VALUE_BYTES`] | 16 KiB | `declare_group` | `RequestRefused` |
//! | [`MAX_GROUP_SPEC_BYTES`] (command + environment of one group) | 64 KiB | `declare_group` | `RequestRefused` |
//! | [`MAX_FAILOVER_TIMEOUT`] | 7 days | `subscribe` | `SubscribeRefused`, connection closed; the subscriber stops (no retry) |
//! | [`MAX_CORES`] (per executor and per worker) | 2^20 | `declare_group`, `register_worker` | `RequestRefused` / `Shutdown` |
//! | [`MAX_MEMORY_MB`] (per executor and per worker) | 2^40 MiB | `declare_group`, `register_worker` | `RequestRefused` / `Shutdown` |
//! | [`MAX_EXECUTORS_PER_WORKER`] (live executors placed or adopted) | 1,024 | placement and adoption (`master::executors`) | not placed there / not adopted (killed, slot refilled elsewhere) |
//! | [`MAX_DRAIN_DEADLINE`] | 7 days | `Message::DrainWorker`, `Message::ScaleGroup`'s stop | `RequestRefused` |
//! | [`MAX_SCALE_REMOVE`] (executors one scale names) | 1,000 | `Message::ScaleGroup` | `RequestRefused` |
//! | [`MAX_REPORTS_PER_REGISTRATION`] | 4,096 | `register_worker` | `Shutdown` |
//! | [`MAX_RECORD_PAYLOAD`] (a framework record at its worst case, see below) | 1,000,000 bytes | `declare_group`, before persisting | `RequestRefused` |
//! | [`MAX_FAILURE_REASON_BYTES`] (a failed slot's stored reason) | 256 | `master::executors::update_executor` | truncated (marked) |
//! | finished frameworks kept (`master::Config::retained_frameworks`, default [`DEFAULT_RETAINED_FRAMEWORKS`], at most [`MAX_RETAINED_FRAMEWORKS`]) | 200 | `master::history`, when a framework ends and when a leader loads | the oldest history records are deleted |
//! | [`MAX_HISTORY_RECORD_BYTES`] (one history record) | 64 KiB | `master::history`, before persisting | the last slots are left out and counted (`slots_omitted`) |
//! | [`MAX_ATTRIBUTES_STATE_BYTES`] (worker attributes in a `StateReply`) | 256 KiB | `Master::state` | later workers shown without attributes |
//! | [`MAX_HISTORY_SLOTS_SHOWN`], [`MAX_HISTORY_STATE_BYTES`] (history in a `StateReply`) | 64 slots per framework, 256 KiB in all | `Master::state` | left out and counted (`slots_omitted`, `history_omitted`) |
//! | [`MAX_LOG_CHUNK`] (bytes of one `LogRequest` / `ReadLog`) | 64 KiB | `master::logs` (leader), `worker` (clamped), the leader again on the worker's answer | `RequestRefused` / answer refused and counted |
//! | [`MAX_LOG_RELAYS_PER_CONN`] (log reads in flight for one connection) | 4 | `master::logs` | `RequestRefused` |
//! | [`MAX_LOG_RELAYS`] (log reads in flight at the leader) | 256 | `master::logs` | `RequestRefused` |
//! | [`LOG_RELAY_TIMEOUT`] (a worker's answer to `ReadLog`) | 10 s | `master::logs` | `RequestRefused` naming the silent worker |
//! | [`MAX_CONSTRAINT_VALUES`] (values of one `in [..]` / `not in [..]` constraint) | 64 | `declare_group` ([`group_spec_problem`]) | `RequestRefused` |
//! | [`MAX_HOST_BYTES`] (the host a worker says its executors' ports are reached at) | 255 | `register_worker` | `Shutdown` |
//! | [`crate::ports::MAX_PORT_RANGES`], [`crate::ports::MAX_PORTS_PER_GROUP`] (a worker's port ranges; a group's named ports, and the ports one executor report carries) | 64 ranges; 16 ports | `register_worker`; `declare_group`; `master::executors::apply_report` | `Shutdown`; `RequestRefused`; the report's ports past 16 are dropped |
//! | [`crate::resources::MAX_RESOURCE_KINDS`], [`crate::resources::MAX_ADDRESSES`], [`crate::resources::MAX_RESOURCE_NAME_BYTES`], [`crate::resources::MAX_ADDRESS_BYTES`] (a worker's named resources; a group's request; what one executor report carries) | 16 kinds of 256 addresses, names 32 B, addresses 64 B | `register_worker`; `declare_group`; `master::executors::apply_report` | `Shutdown`; `RequestRefused`; a report's kinds and addresses past the limits are dropped |
//! | [`MAX_PLAN_PLACEMENTS`] (placements listed in one `PlanReply`) | 4,096 | `master::plan` | the rest counted (`placed_omitted`) |
//! | [`MAX_STATE_REASON_GROUPS`], [`STATE_REASON_VISITS_FLOOR`] (waiting groups whose reasons one `ClusterState` carries, and the worker visits their passes may take: this floor or twice the snapshot's workers and frameworks) | 64; 65,536 | `Master::state` | later groups' `reasons` are empty (`JobsReply` has them) |
//! | [`MAX_LOG_READS_PER_WORKER`] (reads a worker node has asked its runtime for and not had answered) | 256 | `node::worker` | `LogData` with `Failed` (busy) |
//!
//!
//! **Connections** (enforced by the runtimes' connection layers, which take
//! these numbers from here so both runtimes follow one rule):
//!
//! | limit | default | answer |
//! |---|---|---|
//! | [`MAX_SEND_QUEUE_BYTES`] (bytes queued for one peer, not yet written) | 4 MiB | connection closed, naming the peer and the bound |
//! | [`SEND_QUEUE_BUDGET_BYTES`] (bytes queued for all peers of a process) | 32 MiB | past it, a connection holding more than [`SEND_QUEUE_SHARE_UNDER_PRESSURE`] (1 MiB + 64 KiB) is closed |
//! | read timeout ([`read_timeout`]) | max([`READ_TIMEOUT_FLOOR`] 60 s, [`READ_TIMEOUT_HEARTBEATS`] 10 × heartbeat) | connection closed |
//! | write timeout ([`write_timeout`]) | max([`WRITE_TIMEOUT_FLOOR`] 15 s, [`WRITE_TIMEOUT_HEARTBEATS`] 5 × heartbeat) | connection closed |
//! | `StateRequest` snapshots ([`STATE_SNAPSHOT_MAX_AGE`], [`STATE_REQUEST_INTERVAL`]) | one fresh snapshot per connection per 100 ms; cached one reused up to 1 s | every request answered, excess ones from the cache |
//! | the HTTP side's views ([`HTTP_SNAPSHOT_GAP_PER_ENTRY_US`]; all HTTP askers as one) | after a change, a fresh one once the last is 15 µs per entry old (≈ a tenth of the loop at most) | answered from the cache; a change of leadership at once |
//!
//! A peer that does not read is never a reason to drop a message: once its
//! queue passes the bound, or a write to it makes no progress for the write
//! timeout, its connection is closed (the peer reconnects and resyncs by the
//! protocol) and the machine hears `Disconnected` as for any other close.
//!
//! **Record size.** A framework record grows after its declaration: each
//! slot's outcome goes from `Pending` (1 byte) to `Done`/`Killed` (an
//! executor id) or `Failed` (an executor id and a reason), `retries_used`
//! grows, and a resubscription may rename the framework. The master accepts
//! a declaration only if the record's *worst case* fits in [`MAX_RECORD_PAYLOAD`]:
//! the encoded size of the prospective record, plus, per slot, the largest
//! outcome it can ever hold ([`worst_slot_outcome_len`]: a `Failed` with an
//! executor id of the longest form that framework and group can produce and
//! a reason of [`MAX_FAILURE_REASON_BYTES`]), plus a fixed headroom for the
//! name, the failover timeout and the retry counters ([`record_headroom`]).
//! So a record that was accepted can never later become one the store
//! cannot write. With short names this admits about 3,000 slots per
//! framework; `MAX_RECORD_PAYLOAD` is the limit the scale work would raise.
//! (`store::format::encode` itself refuses a payload over `MAX_PAYLOAD`
//! with an error, never a panic; the master never asks for one.)

use crate::time::Millis;

/// The largest payload a framework record may reach at its worst case: under
/// both the store format's `MAX_PAYLOAD` (1 MiB) and what one ZooKeeper
/// request carries (`zk::MAX_RECORD_IMAGE`, jute.maxbuffer less
/// request overhead), leaving 32 KiB for the image header, checksum and
/// the node's path.
pub const MAX_RECORD_PAYLOAD: usize = 1_000_000;

/// The most slots one executor group may declare.
pub const MAX_SLOTS_PER_GROUP: u32 = 2_048;

/// The most executor groups one framework may declare.
pub const MAX_GROUPS_PER_FRAMEWORK: usize = 64;

/// Default of `master::Config::max_frameworks`: how many framework records
/// may exist at once. The store backend decides the real bound (ZooKeeper's
/// listing of `<root>/state` must stay under its 1 MB response limit), so it
/// is a setting, not a constant.
pub const DEFAULT_MAX_FRAMEWORKS: usize = 1_000;

/// The largest `max_frameworks` a master accepts (`regent master
/// --max-frameworks`): every framework record may reach
/// [`MAX_RECORD_PAYLOAD`], and a new leader loads them all.
pub const MAX_FRAMEWORKS_LIMIT: usize = 100_000;

/// The largest `max_frameworks` with the ZooKeeper store. Records are
/// sharded ([`crate::zk::layout`]), so the cluster as a whole is not
/// limited by one listing; but a framework id may be chosen by its
/// submitter and the shard hash is not keyed, so every framework record
/// could be made to land in one shard. This limit keeps even that shard's
/// listing within ZooKeeper's packet limit
/// ([`crate::zk::layout::MAX_LISTED`] children of the longest
/// names), with a fifth of it left for the other records there.
pub const MAX_FRAMEWORKS_ZOOKEEPER: usize = 4_000;

/// Default of `master::Config::max_workers` (`regent master
/// --max-workers`): how many workers (registered, recovered or DEAD in the
/// leader's registry) may exist at once; a registration of a new worker id
/// past it is refused (`RegisterRefused`, naming the limit) and the worker
/// retries slowly. Existing ids (a restart, a new incarnation) are never
/// refused by it. 100,000 is the size the store's shards and the heartbeat
/// ceiling are designed for ([`crate::zk::layout::DESIGN_RECORDS`]).
pub const DEFAULT_MAX_WORKERS: usize = 100_000;

/// The largest `max_workers` a master accepts.
pub const MAX_WORKERS_LIMIT: usize = 1_000_000;

/// The ZooKeeper arithmetic for workers, beside [`MAX_FRAMEWORKS_ZOOKEEPER`]:
/// how many bytes of one shard's listing worker records may take (each
/// costs 4 bytes plus its node name, `w-` and the escaped id). Worker ids,
/// like framework ids, could be chosen to hash into one shard, and a
/// listing over ZooKeeper's packet limit would make every future leader's
/// load fail while it holds its election node (docs/design.md#leadership-that-cannot-act-is-given-up). A shard
/// holds [`crate::zk::layout::MAX_LISTED`] children of the longest
/// names; [`MAX_FRAMEWORKS_ZOOKEEPER`] framework records of the longest
/// names may all be there, and [`HISTORY_SHARD_RESERVE`] history records
/// (`h-` and a sequence number, at most 22 bytes: their names are the
/// leader's, spread by the hash, about 40 per shard at the most retained);
/// workers get the rest: 213,764 bytes, so 1,037 workers of the longest
/// ids, or about 6,000 of typical ones (`ip-10-0-12-34.ec2.internal`), in
/// any one shard. By chance that never binds: 100,000 workers put about
/// 390 in the average shard. The master counts the names of every worker
/// in its registry per shard (DEAD ones too: conservative) and refuses a
/// new worker id whose record would pass this, in every store mode (so a
/// store stays loadable by ZooKeeper).
pub const MAX_WORKER_SHARD_LISTING: usize =
    (crate::zk::layout::MAX_LISTED - MAX_FRAMEWORKS_ZOOKEEPER) * (4 + crate::zk::layout::MAX_STEM)
        - HISTORY_SHARD_RESERVE * (4 + 22);

/// History records reserved room for in any one shard's listing (see
/// [`MAX_WORKER_SHARD_LISTING`]): over six times the average shard's share
/// of [`MAX_RETAINED_FRAMEWORKS`].
pub const HISTORY_SHARD_RESERVE: usize = 256;
const _: () = assert!(MAX_WORKER_SHARD_LISTING == 213_764);
// Every framework record of the ZooKeeper ceiling, and the history reserve,
// fit one shard's listing.
const _: () = assert!(MAX_FRAMEWORKS_ZOOKEEPER * 5 / 4 <= crate::zk::layout::MAX_LISTED);
const _: () =
    assert!(HISTORY_SHARD_RESERVE >= 6 * MAX_RETAINED_FRAMEWORKS / crate::zk::layout::SHARDS);
const _: () = assert!(MAX_HISTORY_RECORD_BYTES <= MAX_RECORD_PAYLOAD);

/// Default of `master::Config::retained_frameworks` (`regent master
/// --retained-frameworks`): how many finished frameworks the leader keeps in
/// its history, like Spark's `spark.deploy.retainedApplications`.
pub const DEFAULT_RETAINED_FRAMEWORKS: usize = 200;

/// The largest `retained_frameworks` a master accepts: each history record
/// may reach [`MAX_HISTORY_RECORD_BYTES`], the leader keeps them all in
/// memory and a new leader loads them all (at most 640 MiB at the worst
/// case, about 150 bytes each for a framework of a few slots with short
/// names).
pub const MAX_RETAINED_FRAMEWORKS: usize = 10_000;

/// The largest payload of one history record: a finished framework with
/// more slots than fit keeps the first ones and counts the rest
/// (`FinishedFramework::slots_omitted`).
pub const MAX_HISTORY_RECORD_BYTES: usize = 64 * 1024;

/// The most slots of one finished framework a `StateReply` shows; the rest
/// are counted in its `slots_omitted`.
pub const MAX_HISTORY_SLOTS_SHOWN: usize = 64;

/// The most bytes of history (encoded entries) a `StateReply` carries,
/// newest first; older entries are counted in `ClusterState::history_omitted`.
/// A quarter of the maximum frame, so history never crowds out the live
/// state: the default 200 entries of a few slots each take about 30 KB.
pub const MAX_HISTORY_STATE_BYTES: usize = 256 * 1024;

/// The longest framework id or worker id, in bytes (they name records).
pub const MAX_ID_BYTES: usize = 256;

/// The longest callback address a peer may give (`Message::Callback`), in
/// bytes; it is stored in the peer's record.
pub const MAX_ADDR_BYTES: usize = 256;

/// The most masters one `HelloReply`, `MasterChanged`, `Registered` or
/// callback hint may list. A worker dials every master it learns and a
/// subscriber tries each one, so a longer list (a hostile or broken peer's
/// 20,000 addresses) would make them dial that many; a real cluster has a
/// handful of masters. A leader never advertises more: it keeps the first
/// ones of its election (by candidate order) and says how many it left out.
pub const MAX_ADVERTISED_MASTERS: usize = 64;

/// Why an advertised master list breaks a limit: more than
/// [`MAX_ADVERTISED_MASTERS`] entries, or an address longer than
/// [`MAX_ADDR_BYTES`] or empty. `None` when it is within them. Checked
/// before anything is learned or dialled; costs one pass over the list.
pub fn advertised_masters_problem(masters: &[crate::ids::Addr]) -> Option<String> {
    if masters.len() > MAX_ADVERTISED_MASTERS {
        return Some(format!(
            "{} masters advertised; the limit is {MAX_ADVERTISED_MASTERS} (MAX_ADVERTISED_MASTERS)",
            masters.len()
        ));
    }
    masters.iter().find_map(advertised_addr_problem)
}

/// Why one advertised master address breaks a limit: empty, or longer than
/// [`MAX_ADDR_BYTES`].
pub fn advertised_addr_problem(addr: &crate::ids::Addr) -> Option<String> {
    let len = addr.as_str().len();
    if len == 0 {
        Some("an empty master address was advertised".into())
    } else if len > MAX_ADDR_BYTES {
        Some(format!(
            "a master address of {len} bytes was advertised; the limit is {MAX_ADDR_BYTES} \
             bytes (MAX_ADDR_BYTES)"
        ))
    } else {
        None
    }
}

/// `addr` as a log may show it: cut to [`MAX_ADDR_BYTES`] at a char
/// boundary and marked with `…` when longer (a rejected peer's address can
/// be as long as a frame).
pub fn addr_for_log(addr: &crate::ids::Addr) -> crate::ids::Addr {
    let s = addr.as_str();
    if s.len() <= MAX_ADDR_BYTES {
        return addr.clone();
    }
    let mut end = MAX_ADDR_BYTES;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    crate::ids::Addr::new(format!("{}…", &s[..end]))
}

/// Why the masters a master's message advertises (the list of
/// `HelloReply`, `MasterChanged` and `Registered`, and the leader hint of
/// `HelloReply`, `MasterChanged` and `NotLeader`) break a limit; `None`
/// for any other message and for one within the limits. Workers and
/// subscribers call it before they learn or dial anything of it.
pub fn advertised_in_message_problem(msg: &crate::protocol::Message) -> Option<String> {
    use crate::protocol::Message;
    let (list, hint): (&[crate::ids::Addr], _) = match msg {
        Message::HelloReply(r) => (&r.masters, r.leader.as_ref()),
        Message::MasterChanged { leader, masters, .. } => (masters, Some(leader)),
        Message::Registered { masters, .. } => (masters, None),
        Message::NotLeader { leader, .. } => (&[], leader.as_ref()),
        _ => return None,
    };
    hint.and_then(|h| advertised_addr_problem(&h.addr)).or_else(|| advertised_masters_problem(list))
}

/// The longest framework name or group name, in bytes.
pub const MAX_NAME_BYTES: usize = 256;

/// The longest single command argument, in bytes.
pub const MAX_ARG_BYTES: usize = 16 * 1024;

/// The most command arguments (program included) of one group.
pub const MAX_COMMAND_ARGS: usize = 1_024;

/// The most environment variables of one group.
pub const MAX_ENV_VARS: usize = 1_024;

/// The longest environment variable name, in bytes.
pub const MAX_ENV_KEY_BYTES: usize = 1024;

/// The longest environment variable value, in bytes.
pub const MAX_ENV_VALUE_BYTES: usize = 16 * 1024;

/// The most bytes of command arguments plus environment keys and values of
/// one group (each string counted by its length).
pub const MAX_GROUP_SPEC_BYTES: usize = 64 * 1024;

/// The most constraints one group may carry.
pub const MAX_CONSTRAINTS: usize = 32;

/// The longest worker attribute name or value, and the longest attribute
/// name or value a constraint or `spread` may name.
pub const MAX_ATTRIBUTE_BYTES: usize = 256;

/// The most attributes one worker may announce.
pub const MAX_WORKER_ATTRIBUTES: usize = 64;

/// The longest wait a restart policy may ask for between two runs of a
/// slot (`delay`, `max_delay`), and the longest `healthy_after`: 1 day.
pub const MAX_RESTART_DELAY: Millis = Millis(24 * 3_600 * 1_000);

/// The most retries a restart policy may give one slot.
pub const MAX_RESTART_ATTEMPTS: u32 = 1_000_000;

/// The longest failover timeout a framework may ask for: 7 days. A longer
/// one (`u64::MAX` would keep a record forever) is refused.
pub const MAX_FAILOVER_TIMEOUT: Millis = Millis(7 * 24 * 3_600 * 1_000);

/// The longest host name a worker may say its executors' ports are
/// reached at (a DNS name's limit).
pub const MAX_HOST_BYTES: usize = 255;

/// The most cores one executor may ask for and one worker may offer.
pub const MAX_CORES: u32 = 1 << 20;

/// The most memory one executor may ask for and one worker may offer, MiB.
pub const MAX_MEMORY_MB: u64 = 1 << 40;

/// Which setting of an executor group a limit concerns (see
/// [`group_spec_problem`]): the master names them as the wire does
/// ([`GroupKey::wire_name`]), a job file as its keys do
/// ([`crate::job::JobGroup`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupKey {
    /// The group's name.
    Name,
    /// How many slots (executors) it wants.
    Slots,
    /// The program and its arguments.
    Command,
    /// The environment variables.
    Env,
    /// Cores per executor.
    Cores,
    /// Memory per executor, MiB.
    MemoryMb,
    /// The restart policy.
    Restart,
    /// The constraints on worker attributes.
    Constraints,
    /// The attribute to spread over.
    Spread,
    /// The working directory.
    Cwd,
    /// The kill grace.
    KillGrace,
    /// The artifacts.
    Artifacts,
    /// The named ports.
    Ports,
    /// The user to run as.
    User,
    /// The named resources.
    Resources,
    /// The output rotation.
    Logs,
    /// The group's priority (appended).
    Priority,
    /// What a worker cut off from every master does (appended;
    /// docs/design.md#issue-45).
    Disconnect,
    /// The group's health checks (appended; docs/design.md#issue-45).
    Check,
    /// How a changed spec is deployed (appended; docs/design.md#issue-45).
    Update,
}

impl GroupKey {
    /// The name the master's refusals use: the field of
    /// [`crate::protocol::GroupSpec`] (`group name`, `slots`, `command`,
    /// `env`, `cores`, `memory_mb`).
    pub fn wire_name(self) -> &'static str {
        match self {
            GroupKey::Name => "group name",
            GroupKey::Slots => "slots",
            GroupKey::Command => "command",
            GroupKey::Env => "env",
            GroupKey::Cores => "cores",
            GroupKey::MemoryMb => "memory_mb",
            GroupKey::Restart => "restart",
            GroupKey::Constraints => "constraints",
            GroupKey::Spread => "spread",
            GroupKey::Cwd => "cwd",
            GroupKey::KillGrace => "kill_grace",
            GroupKey::Artifacts => "artifacts",
            GroupKey::Ports => "ports",
            GroupKey::User => "user",
            GroupKey::Resources => "resources",
            GroupKey::Logs => "logs",
            GroupKey::Priority => "priority",
            GroupKey::Disconnect => "disconnect",
            GroupKey::Check => "check",
            GroupKey::Update => "update",
        }
    }
}

/// A group declaration past a limit: the setting, and why (the reason
/// names the setting as the caller's `names` does, and the limit).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupSpecProblem {
    /// The setting at fault.
    pub key: GroupKey,
    /// Why, e.g. `cores is 2000000; the limit is 1048576 per executor (MAX_CORES)`.
    pub reason: String,
}

impl GroupSpecProblem {
    /// The reason prefixed with the group, `group "mappers": ...`; a name
    /// past its limit is not repeated (it may be as long as a frame).
    pub fn message(&self, group: &str) -> String {
        match self.key {
            GroupKey::Name => self.reason.clone(),
            _ => format!("group {group:?}: {}", self.reason),
        }
    }
}

/// Why declaring `spec` breaks a rule the master enforces before anything
/// is allocated or persisted (`master::frameworks::declare_group`): at
/// least one slot and at most [`MAX_SLOTS_PER_GROUP`], a command, and the
/// size limits of names, arguments, environment, cores and memory. `None`
/// when it keeps them. `names` names each setting in the reason
/// ([`GroupKey::wire_name`] for the master). The framework-wide rules
/// (groups per framework, the record's worst case) are the master's alone.
pub fn group_spec_problem(
    spec: &crate::protocol::GroupSpec,
    names: fn(GroupKey) -> &'static str,
) -> Option<GroupSpecProblem> {
    use GroupKey as K;
    let problem = |key, reason| Some(GroupSpecProblem { key, reason });
    let name = spec.group.len();
    if name > MAX_NAME_BYTES {
        let key = names(K::Name);
        return problem(
            K::Name,
            format!("{key} of {name} bytes; the limit is {MAX_NAME_BYTES} bytes (MAX_NAME_BYTES)"),
        );
    }
    if spec.slots == 0 {
        return problem(K::Slots, format!("{} must be at least 1", names(K::Slots)));
    }
    if spec.slots > MAX_SLOTS_PER_GROUP {
        return problem(
            K::Slots,
            format!(
                "{} is {}; the limit is {MAX_SLOTS_PER_GROUP} per group (MAX_SLOTS_PER_GROUP)",
                names(K::Slots),
                spec.slots
            ),
        );
    }
    if spec.command.is_empty() {
        return problem(K::Command, format!("{} must name a program", names(K::Command)));
    }
    if spec.cores > MAX_CORES {
        return problem(
            K::Cores,
            format!(
                "{} is {}; the limit is {MAX_CORES} per executor (MAX_CORES)",
                names(K::Cores),
                spec.cores
            ),
        );
    }
    if spec.memory_mb > MAX_MEMORY_MB {
        return problem(
            K::MemoryMb,
            format!(
                "{} is {}; the limit is {MAX_MEMORY_MB} MiB per executor (MAX_MEMORY_MB)",
                names(K::MemoryMb),
                spec.memory_mb
            ),
        );
    }
    let command = names(K::Command);
    if spec.command.len() > MAX_COMMAND_ARGS {
        return problem(
            K::Command,
            format!(
                "{command} has {} arguments; the limit is {MAX_COMMAND_ARGS} (MAX_COMMAND_ARGS)",
                spec.command.len()
            ),
        );
    }
    if let Some((i, a)) = spec.command.iter().enumerate().find(|(_, a)| a.len() > MAX_ARG_BYTES) {
        return problem(
            K::Command,
            format!(
                "{command} argument {i} is {} bytes; the limit is {MAX_ARG_BYTES} bytes (MAX_ARG_BYTES)",
                a.len()
            ),
        );
    }
    let env = names(K::Env);
    if spec.env.len() > MAX_ENV_VARS {
        return problem(
            K::Env,
            format!(
                "{env} has {} variables; the limit is {MAX_ENV_VARS} (MAX_ENV_VARS)",
                spec.env.len()
            ),
        );
    }
    for (k, v) in &spec.env {
        if k.len() > MAX_ENV_KEY_BYTES {
            return problem(
                K::Env,
                format!(
                    "{env} has a variable name of {} bytes; the limit is {MAX_ENV_KEY_BYTES} bytes (MAX_ENV_KEY_BYTES)",
                    k.len()
                ),
            );
        }
        if v.len() > MAX_ENV_VALUE_BYTES {
            return problem(
                K::Env,
                format!(
                    "{env}: the value of {:?} is {} bytes; the limit is {MAX_ENV_VALUE_BYTES} bytes (MAX_ENV_VALUE_BYTES)",
                    k.chars().take(64).collect::<String>(),
                    v.len()
                ),
            );
        }
    }
    // Each string is at most 16 KiB and there are at most 3 * 1,024 of them:
    // the sum cannot overflow.
    let total: usize = spec.command.iter().map(String::len).sum::<usize>()
        + spec.env.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>()
        + spec.launch.size();
    if total > MAX_GROUP_SPEC_BYTES {
        return problem(
            K::Env,
            format!(
                "{command} and {env} are {total} bytes together; the limit is {MAX_GROUP_SPEC_BYTES} bytes (MAX_GROUP_SPEC_BYTES)"
            ),
        );
    }
    if let Some(p) = spec.launch.problem() {
        use crate::launch::LaunchProblem as L;
        let key = match &p {
            L::Path { key, .. } if key == "cwd" => K::Cwd,
            L::KillGrace(_) => K::KillGrace,
            L::Ports(_) => K::Ports,
            L::User(_) => K::User,
            L::Resources(_) => K::Resources,
            L::Logs(_) => K::Logs,
            L::StopAfter(_) => K::Disconnect,
            L::Check { .. } => K::Check,
            _ => K::Artifacts,
        };
        return problem(key, p.to_string());
    }
    if let Some(why) = spec.policy.update.as_ref().and_then(|u| u.problem(spec.slots)) {
        return problem(K::Update, why);
    }
    policy_problem(&spec.policy, names)
}

/// Why a group's policy breaks a limit (see [`group_spec_problem`]).
fn policy_problem(
    policy: &crate::policy::GroupPolicy,
    names: fn(GroupKey) -> &'static str,
) -> Option<GroupSpecProblem> {
    use crate::policy::ConstraintOp;
    use GroupKey as K;
    let problem = |key, reason| Some(GroupSpecProblem { key, reason });
    let restart = names(K::Restart);
    let r = &policy.restart;
    if r.attempts.is_some_and(|a| a > MAX_RESTART_ATTEMPTS) {
        return problem(
            K::Restart,
            format!(
                "{restart}: attempts is {}; the limit is {MAX_RESTART_ATTEMPTS} (MAX_RESTART_ATTEMPTS)",
                r.attempts.unwrap_or_default()
            ),
        );
    }
    for (what, ms) in [
        ("delay", r.delay_ms),
        ("max_delay", r.max_delay_ms),
        ("healthy_after", r.healthy_after_ms),
    ] {
        if ms > MAX_RESTART_DELAY.0 {
            return problem(
                K::Restart,
                format!(
                    "{restart}: {what} is {ms} ms; the limit is {} ms (MAX_RESTART_DELAY)",
                    MAX_RESTART_DELAY.0
                ),
            );
        }
    }
    if r.max_delay_ms != 0 && r.max_delay_ms < r.delay_ms {
        return problem(
            K::Restart,
            format!(
                "{restart}: max_delay ({} ms) is shorter than delay ({} ms)",
                r.max_delay_ms, r.delay_ms
            ),
        );
    }
    let constraints = names(K::Constraints);
    if policy.constraints.len() > MAX_CONSTRAINTS {
        return problem(
            K::Constraints,
            format!(
                "{constraints} has {} entries; the limit is {MAX_CONSTRAINTS} (MAX_CONSTRAINTS)",
                policy.constraints.len()
            ),
        );
    }
    for c in &policy.constraints {
        let values = c.op.values();
        if values.len() > MAX_CONSTRAINT_VALUES {
            return problem(
                K::Constraints,
                format!(
                    "{constraints}: {c} lists {} values; the limit is {MAX_CONSTRAINT_VALUES} (MAX_CONSTRAINT_VALUES)",
                    values.len()
                ),
            );
        }
        if matches!(&c.op, ConstraintOp::In(v) | ConstraintOp::NotIn(v) if v.is_empty()) {
            return problem(K::Constraints, format!("{constraints}: {c} lists no value"));
        }
        let value = values.iter().map(|v| v.len()).max().unwrap_or(0);
        if c.attribute.is_empty() {
            return problem(
                K::Constraints,
                format!("{constraints}: a constraint names no attribute"),
            );
        }
        if c.attribute.len().max(value) > MAX_ATTRIBUTE_BYTES {
            return problem(
                K::Constraints,
                format!(
                    "{constraints}: an attribute name or value of {} bytes; the limit is {MAX_ATTRIBUTE_BYTES} bytes (MAX_ATTRIBUTE_BYTES)",
                    c.attribute.len().max(value)
                ),
            );
        }
    }
    if policy.priority > crate::policy::MAX_PRIORITY {
        return problem(
            K::Priority,
            format!(
                "{} is {}; a priority is {} to {} (MAX_PRIORITY)",
                names(K::Priority),
                policy.priority,
                crate::policy::MIN_PRIORITY,
                crate::policy::MAX_PRIORITY
            ),
        );
    }
    if let Some(spread) = &policy.spread {
        let key = names(K::Spread);
        if spread.is_empty() {
            return problem(K::Spread, format!("{key} names no attribute"));
        }
        if spread.len() > MAX_ATTRIBUTE_BYTES {
            return problem(
                K::Spread,
                format!(
                    "{key} names an attribute of {} bytes; the limit is {MAX_ATTRIBUTE_BYTES} bytes (MAX_ATTRIBUTE_BYTES)",
                    spread.len()
                ),
            );
        }
    }
    None
}

/// The longest drain deadline an operator may give (`regent drain
/// --deadline`): 7 days, like the framework failover timeout.
pub const MAX_DRAIN_DEADLINE: Millis = Millis(7 * 24 * 3_600 * 1_000);

/// The most executors one scale may name to remove (`ScaleGroup { remove
/// }`, `regent scale --remove`).
pub const MAX_SCALE_REMOVE: usize = 1_000;

/// The most live executors the master places on or adopts from one worker.
pub const MAX_EXECUTORS_PER_WORKER: usize = 1_024;

/// The most executor reports one registration may carry (live executors
/// and terminal ones not yet acknowledged).
pub const MAX_REPORTS_PER_REGISTRATION: usize = 4 * MAX_EXECUTORS_PER_WORKER;

/// The longest reason stored with a failed slot, in bytes; a longer one
/// (the worker's failure text is peer input) is cut at a char boundary and
/// marked with `…`.
pub const MAX_FAILURE_REASON_BYTES: usize = 256;

/// The most bytes of an executor's output one `LogRequest` may ask for and
/// one `LogChunk` carries: 64 KiB, far below the frame limit, so a chunk
/// never fills a connection's send queue on its own.
pub const MAX_LOG_CHUNK: u32 = 64 * 1024;

/// The most log reads the leader relays at once for one connection; one
/// more is refused (the operator's tool asks one chunk at a time).
pub const MAX_LOG_RELAYS_PER_CONN: usize = 4;

/// The most log reads the leader relays at once for all connections
/// together: at most this many chunks ([`MAX_LOG_CHUNK`] each, 16 MiB in
/// all) are ever on their way through the leader.
pub const MAX_LOG_RELAYS: usize = 256;

/// The most `(slot, worker)` placements one `PlanReply` lists (about 64
/// bytes each with a long worker id, so a reply stays far below a frame);
/// further placed slots are counted in `GroupPlan::placed_omitted`.
pub const MAX_PLAN_PLACEMENTS: usize = 4_096;

/// The most waiting groups whose reasons one [`crate::protocol::ClusterState`]
/// computes (`GroupView::reasons`), in framework id order: each costs a
/// pass over the workers, and a snapshot is taken for every event poll.
/// The later groups' reasons are empty there; `JobsReply` (`regent job
/// status`, `/v1/jobs`) has every group's.
pub const MAX_STATE_REASON_GROUPS: usize = 64;

/// The worker visits the reasons of one [`crate::protocol::ClusterState`]
/// may take at least (a pass over the workers per waiting group, at most
/// [`MAX_STATE_REASON_GROUPS`]); a larger snapshot may take twice its
/// workers and frameworks, so the reasons at most about triple its cost:
/// at 100,000 workers about two groups get theirs, at 1,000 every one of
/// the first 64.
pub const STATE_REASON_VISITS_FLOOR: usize = 65_536;

/// The most values one `in [..]` or `not in [..]` constraint lists.
pub const MAX_CONSTRAINT_VALUES: usize = 64;

/// How long the leader waits for a worker's answer to `ReadLog` before it
/// answers the operator that the worker did not answer.
pub const LOG_RELAY_TIMEOUT: Millis = Millis(10_000);

/// The most reads a worker node has asked its runtime for and not had
/// answered; one more is answered `Failed` (busy) at once. The leader's
/// [`MAX_LOG_RELAYS`] keeps an honest leader below it.
pub const MAX_LOG_READS_PER_WORKER: usize = MAX_LOG_RELAYS;

/// Bytes of a postcard length/varint prefix for `n`.
fn varint_len(n: usize) -> usize {
    let mut n = n;
    let mut len = 1;
    while n >= 0x80 {
        n >>= 7;
        len += 1;
    }
    len
}

/// The longest executor id the master can produce for a slot of `group` of
/// `framework` with `slots` slots: `<framework>/<group>#<slot>#<epoch>.<launch>`,
/// epoch and launch counter at most 20 decimal digits each.
pub fn max_executor_id_len(framework: &str, group: &str, slots: u32) -> usize {
    let slot_digits = slots.saturating_sub(1).max(1).ilog10() as usize + 1;
    framework.len() + 1 + group.len() + 1 + slot_digits + 1 + 20 + 1 + 20
}

/// The largest encoded `SlotOutcome` a slot of this group can ever hold: a
/// `Failed` with the longest executor id and the longest stored reason.
pub fn worst_slot_outcome_len(framework: &str, group: &str, slots: u32) -> usize {
    let id = max_executor_id_len(framework, group, slots);
    // Reason bytes: the cap plus the truncation marker.
    let reason = MAX_FAILURE_REASON_BYTES + '…'.len_utf8();
    1 + varint_len(id) + id + varint_len(reason) + reason
}

/// The most bytes a slot's counted end takes in its framework record
/// ([`crate::store::GroupRecord::counted`]): the slot number as a 5-byte
/// varint and the longest executor id of the group with its length.
pub fn worst_slot_counted_len(framework: &str, group: &str, slots: u32) -> usize {
    let id = max_executor_id_len(framework, group, slots);
    5 + varint_len(id) + id
}

/// Headroom reserved in every framework record for what may grow without a
/// declaration: the name up to [`MAX_NAME_BYTES`] (plus its length prefix),
/// the failover timeout up to a 10-byte varint, each group's retry counter
/// up to a 5-byte varint, and a subscriber's callback address up to
/// [`MAX_ADDR_BYTES`] (plus its option tag and length prefix).
pub fn record_headroom(groups: usize) -> usize {
    (MAX_NAME_BYTES + 2) + 10 + 5 * groups + (MAX_ADDR_BYTES + 3)
}

/// The most bytes of worker attributes one `StateReply` shows (names and
/// values, four bytes of framing each): workers past it, in id order, are
/// shown without their attributes, so a cluster of many workers with many
/// attributes still gets a reply within the frame limit.
pub const MAX_ATTRIBUTES_STATE_BYTES: usize = 256 * 1024;

/// The most bytes the restart state of one slot takes in its framework
/// record ([`crate::store::SlotRestart`] and its slot number as varints):
/// reserved per slot of a group with a restart policy of its own.
pub const WORST_SLOT_RESTART_LEN: usize = 5 + 5 + 10;

/// `reason` cut to at most [`MAX_FAILURE_REASON_BYTES`] at a char boundary,
/// marked with `…` when cut.
pub fn cap_reason(mut reason: String) -> String {
    if reason.len() > MAX_FAILURE_REASON_BYTES {
        let mut end = MAX_FAILURE_REASON_BYTES;
        while !reason.is_char_boundary(end) {
            end -= 1;
        }
        reason.truncate(end);
        reason.push('…');
    }
    reason
}

/// The most bytes (encoded frames, plus [`SEND_QUEUE_ENTRY_OVERHEAD`] per
/// frame) queued for one peer and not yet written to its socket. A peer
/// that lets its queue grow past this does not read: its connection is
/// closed. Four frames of the largest default size (1 MiB): a burst a
/// reading peer drains in milliseconds fits many times over.
pub const MAX_SEND_QUEUE_BYTES: usize = 4 << 20;

/// The most bytes queued for all peers of one process together. Past it,
/// a connection whose own queue holds more than
/// [`SEND_QUEUE_SHARE_UNDER_PRESSURE`] is closed when it is sent to, so a
/// hundred non-reading peers cannot each hold [`MAX_SEND_QUEUE_BYTES`]
/// while peers that read (whose queues stay near empty) are never touched.
pub const SEND_QUEUE_BUDGET_BYTES: usize = 32 << 20;

/// Under budget pressure (see [`SEND_QUEUE_BUDGET_BYTES`]), the most a
/// connection may hold queued: one largest default frame plus 64 KiB.
pub const SEND_QUEUE_SHARE_UNDER_PRESSURE: usize = (1 << 20) + (64 << 10);

/// Bytes counted per queued frame on top of its encoded size (the queue's
/// own bookkeeping), so a flood of tiny frames is bounded too.
pub const SEND_QUEUE_ENTRY_OVERHEAD: usize = 64;

/// The shortest read timeout: a connection on which nothing arrives for
/// [`read_timeout`] is closed. 60 s keeps idle links (a worker's link to a
/// standby, an operator's command) from churning.
pub const READ_TIMEOUT_FLOOR: Millis = Millis(60_000);

/// The read timeout in heartbeat intervals: a peer that heartbeats (or is
/// heartbeated) every `h` is silent for `10 h` only when it is gone.
pub const READ_TIMEOUT_HEARTBEATS: u64 = 10;

/// The shortest write timeout: a write to a peer that makes no progress
/// for [`write_timeout`] closes the connection. A write blocks only once
/// the kernel's buffers towards the peer (hundreds of KiB on loopback) are
/// full, so 15 s of no progress means the peer has stopped reading.
pub const WRITE_TIMEOUT_FLOOR: Millis = Millis(15_000);

/// The write timeout in heartbeat intervals.
pub const WRITE_TIMEOUT_HEARTBEATS: u64 = 5;

/// The read timeout of a connection whose heartbeat interval is
/// `heartbeat`: `max(floor, READ_TIMEOUT_HEARTBEATS × heartbeat)`
/// (saturating). The floor is [`READ_TIMEOUT_FLOOR`] unless a runtime's
/// configuration lowers it (tests).
pub fn read_timeout(floor: Millis, heartbeat: Millis) -> Millis {
    floor.max(heartbeat.times(READ_TIMEOUT_HEARTBEATS))
}

/// The write timeout of a connection whose heartbeat interval is
/// `heartbeat`: `max(floor, WRITE_TIMEOUT_HEARTBEATS × heartbeat)`
/// (saturating). The floor is [`WRITE_TIMEOUT_FLOOR`] unless a runtime's
/// configuration lowers it (tests).
pub fn write_timeout(floor: Millis, heartbeat: Millis) -> Millis {
    floor.max(heartbeat.times(WRITE_TIMEOUT_HEARTBEATS))
}

/// The longest a `StateReply` snapshot is reused. A snapshot is rebuilt for
/// a `StateRequest` when anything other than a `StateRequest` or a
/// heartbeat was handled since it was built (the state may have changed) or
/// when it is older than this (so its counters, which heartbeats move, move
/// on) — but see [`STATE_REQUEST_INTERVAL`].
pub const STATE_SNAPSHOT_MAX_AGE: Millis = Millis(1_000);

/// One connection gets at most one freshly built `StateReply` per interval:
/// a `StateRequest` that comes sooner on the same connection is answered
/// with the cached snapshot, however stale (at most this old). Every
/// request is answered; a peer that asks without reading fills its send
/// queue ([`MAX_SEND_QUEUE_BYTES`]) and is disconnected. So a flood builds
/// at most one snapshot per connection per interval, and none while the
/// cluster is quiet.
pub const STATE_REQUEST_INTERVAL: Millis = Millis(100);

/// The HTTP side's pause between builds, per entry of the last view built
/// (workers, executors and frameworks), in microseconds. After a change the
/// HTTP askers (`/api/state`, the event stream; all together, as one) get a
/// freshly built view only once the last one is `entries ×` this old: a
/// build costs the master's loop about 0.75–1.5 µs an entry (27–56 ms at
/// 18,000 workers and 18,000 executors, measured), so however many
/// dashboards poll a cluster that changes all the time, building their
/// views takes at most about a tenth of the loop. A small cluster's pause is
/// under a millisecond (an operator's command shows at the next read); a
/// change of leadership is always shown at once.
pub const HTTP_SNAPSHOT_GAP_PER_ENTRY_US: u64 = 15;

/// What is wrong with a worker's attributes, if anything: more than
/// [`MAX_WORKER_ATTRIBUTES`], a name or value longer than
/// [`MAX_ATTRIBUTE_BYTES`], an empty or repeated name. The
/// text reads after a worker's name ("announces ...").
pub fn attributes_problem(attributes: &[(String, String)]) -> Option<String> {
    if attributes.len() > MAX_WORKER_ATTRIBUTES {
        return Some(format!(
            "announces {} attributes; the limit is {MAX_WORKER_ATTRIBUTES} (MAX_WORKER_ATTRIBUTES)",
            attributes.len()
        ));
    }
    for (i, (k, v)) in attributes.iter().enumerate() {
        if k.is_empty() {
            return Some("announces an attribute with an empty name".to_string());
        }
        if k.len().max(v.len()) > MAX_ATTRIBUTE_BYTES {
            return Some(format!(
                "announces attribute {:?} with a name or value of {} bytes; the limit is {MAX_ATTRIBUTE_BYTES} bytes (MAX_ATTRIBUTE_BYTES)",
                k.chars().take(32).collect::<String>(),
                k.len().max(v.len())
            ));
        }
        if attributes[..i].iter().any(|(o, _)| o == k) {
            return Some(format!("announces attribute {k:?} twice"));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_scale_with_the_heartbeat_above_their_floors() {
        let s = Millis::from_secs;
        assert_eq!(read_timeout(READ_TIMEOUT_FLOOR, s(1)), s(60));
        assert_eq!(read_timeout(READ_TIMEOUT_FLOOR, s(30)), s(300));
        assert_eq!(write_timeout(WRITE_TIMEOUT_FLOOR, s(1)), s(15));
        assert_eq!(write_timeout(WRITE_TIMEOUT_FLOOR, s(10)), s(50));
        assert_eq!(read_timeout(Millis(200), Millis(10)), Millis(200));
        assert_eq!(write_timeout(Millis(0), Millis::MAX), Millis::MAX, "saturates");
    }
}
