//! A pure ZooKeeper model, and a harness that runs electors against it.
//!
//! [`ZkModel`] is the server side: sessions with negotiated timeouts
//! (clamped into [2, 20] × tickTime like the real server), persistent,
//! ephemeral and sequential nodes (10-digit sequence per parent, taken from
//! the parent's cversion as the server does), ephemeral cleanup on expiry
//! and on close, one-shot watches (exists / data / children) queued for the
//! owning session, versions for conditional set, delete and multi. Time is
//! virtual: every call takes `now`, and a session expires when the server has
//! not heard from it for its timeout.
//!
//! It also has ZooKeeper's **packet limit** (`jute.maxbuffer`, 1 MiB - 1
//! by default on the server and in the client): a request whose encoding
//! is larger is refused unapplied, and a reply whose encoding is larger is
//! lost after the request was applied (a `get_children` of a big shard, a
//! `multi` read of many records). Either way the client sees the
//! connection drop: [`ZkModel::execute`] answers `ConnectionLoss`, and a
//! client-side driver must then treat the connection as lost (every
//! request in flight fails with `ConnectionLoss`; the session lives on if
//! it reconnects in time), as the real client does. Sizes follow the jute
//! encoding closely enough for the limit (strings and buffers with a
//! 4-byte length, a 68-byte stat, headers; ACLs counted as one `world`
//! entry); [`request_len`] and [`reply_len`] give them.
//!
//! [`Sim`] is the client side for tests: it runs a few
//! [`Elector`](crate::elector::Elector)s, executes their actions against the
//! model in order, keeps their timers, and injects the faults that matter to
//! the election recipe: connection loss, "request applied, reply lost",
//! session expiry and process pauses. Everything is deterministic.

use crate::elector::{Action, Config, Elector, Event, Timer};
use crate::ids::{Addr, MasterId};
use crate::time::Millis;
use crate::zk::{
    CreateMode, MultiOp, RequestId, SessionId, Stat, WatchEvent, WatchKind, ZkCommand, ZkError,
    ZkEvent, ZkOp, ZkReply, ZkResult,
};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// One node of the model's tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZNode {
    /// The data.
    pub data: Vec<u8>,
    /// Data version.
    pub version: i32,
    /// Children version (also the next sequence number of a child).
    pub cversion: i32,
    /// The owner, for ephemeral nodes.
    pub ephemeral_owner: Option<SessionId>,
    /// Creating transaction.
    pub czxid: u64,
    /// Last modifying transaction.
    pub mzxid: u64,
}

impl ZNode {
    fn stat(&self) -> Stat {
        Stat {
            version: self.version,
            cversion: self.cversion,
            ephemeral_owner: self.ephemeral_owner,
            czxid: self.czxid,
            mzxid: self.mzxid,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum WatchType {
    /// Left by `exists` on a missing node.
    Exist,
    /// Left by `exists` on a present node, or `get_data`.
    Data,
    /// Left by `get_children`.
    Child,
}

#[derive(Clone, Debug)]
struct SessionState {
    timeout: Millis,
    last_heard: Millis,
}

/// The server side: a single, always consistent ZooKeeper server.
#[derive(Clone, Debug)]
pub struct ZkModel {
    min_timeout: Millis,
    max_timeout: Millis,
    nodes: BTreeMap<String, ZNode>,
    sessions: BTreeMap<SessionId, SessionState>,
    next_session: u64,
    zxid: u64,
    watches: BTreeMap<(String, WatchType), BTreeSet<SessionId>>,
    notifications: BTreeMap<SessionId, Vec<WatchEvent>>,
    packet_limit: usize,
}

/// ZooKeeper's default packet limit (`jute.maxbuffer`, `0xfffff` bytes),
/// on the server for requests and in the client for replies.
pub const PACKET_LIMIT: usize = 0xfffff;

/// A string or a buffer in jute: a 4-byte length, then the bytes.
const fn jute(len: usize) -> usize {
    4 + len
}

/// A stat in jute: 6 longs and 5 ints.
const STAT_LEN: usize = 68;
/// A request header (xid, type), a reply header (xid, zxid, err), a multi
/// header (type, done, err), one `world:anyone` ACL entry.
const REQUEST_HEADER: usize = 8;
const REPLY_HEADER: usize = 16;
const MULTI_HEADER: usize = 9;
const WORLD_ACL: usize = 4 + 4 + jute(5) + jute(6);

/// The encoded length of `op` as a request (what the server checks
/// against the packet limit).
pub fn request_len(op: &ZkOp) -> usize {
    fn multi_op(op: &MultiOp) -> usize {
        MULTI_HEADER
            + match op {
                MultiOp::Check { path, .. } | MultiOp::Delete { path, .. } => jute(path.len()) + 4,
                MultiOp::Create { path, data, .. } => {
                    jute(path.len()) + jute(data.len()) + 4 + WORLD_ACL + 4
                }
                MultiOp::SetData { path, data, .. } => jute(path.len()) + jute(data.len()) + 4,
            }
    }
    REQUEST_HEADER
        + match op {
            ZkOp::Create { path, data, .. } => {
                jute(path.len()) + jute(data.len()) + 4 + WORLD_ACL + 4
            }
            ZkOp::SetData { path, data, .. } => jute(path.len()) + jute(data.len()) + 4,
            ZkOp::Delete { path, .. } => jute(path.len()) + 4,
            ZkOp::Exists { path, .. }
            | ZkOp::GetData { path, .. }
            | ZkOp::GetChildren { path, .. } => jute(path.len()) + 1,
            ZkOp::Sync { path } => jute(path.len()),
            ZkOp::MultiRead(paths) => {
                paths.iter().map(|p| MULTI_HEADER + jute(p.len()) + 1).sum::<usize>() + MULTI_HEADER
            }
            ZkOp::Multi(ops) => ops.iter().map(multi_op).sum::<usize>() + MULTI_HEADER,
        }
}

/// The encoded length of a reply (what the client checks against the
/// packet limit).
pub fn reply_len(reply: &ZkReply) -> usize {
    fn body(reply: &ZkReply) -> usize {
        match reply {
            ZkReply::Created { path } => jute(path.len()),
            ZkReply::Deleted | ZkReply::Synced | ZkReply::Checked => 0,
            ZkReply::Stat(_) => STAT_LEN,
            ZkReply::Data { data, .. } => jute(data.len()) + STAT_LEN,
            ZkReply::Children(names) => 4 + names.iter().map(|n| jute(n.len())).sum::<usize>(),
            ZkReply::Multi(replies) => {
                replies.iter().map(|r| MULTI_HEADER + body(r)).sum::<usize>() + MULTI_HEADER
            }
            ZkReply::MultiRead(results) => {
                results.iter().map(|r| MULTI_HEADER + r.as_ref().map_or(4, body)).sum::<usize>()
                    + MULTI_HEADER
            }
        }
    }
    REPLY_HEADER + body(reply)
}

fn parent_of(path: &str) -> Option<&str> {
    if path == "/" {
        return None;
    }
    let (parent, _) = path.rsplit_once('/')?;
    Some(if parent.is_empty() { "/" } else { parent })
}

fn valid_path(path: &str) -> bool {
    path == "/"
        || (path.starts_with('/')
            && !path.ends_with('/')
            && !path[1..].split('/').any(str::is_empty))
}

impl ZkModel {
    /// A server with `tick_time`; session timeouts are clamped into
    /// [2, 20] × tick_time.
    pub fn new(tick_time: Millis) -> Self {
        let mut nodes = BTreeMap::new();
        nodes.insert(
            "/".to_owned(),
            ZNode {
                data: Vec::new(),
                version: 0,
                cversion: 0,
                ephemeral_owner: None,
                czxid: 0,
                mzxid: 0,
            },
        );
        ZkModel {
            min_timeout: tick_time.times(2),
            max_timeout: tick_time.times(20),
            nodes,
            sessions: BTreeMap::new(),
            next_session: 0x100,
            zxid: 0,
            watches: BTreeMap::new(),
            notifications: BTreeMap::new(),
            packet_limit: PACKET_LIMIT,
        }
    }

    /// This server with another packet limit (`jute.maxbuffer`), in bytes.
    pub fn with_packet_limit(mut self, bytes: usize) -> Self {
        self.packet_limit = bytes;
        self
    }

    /// The packet limit, in bytes.
    pub fn packet_limit(&self) -> usize {
        self.packet_limit
    }

    /// Opens a session asking for `requested`; returns its id and the
    /// negotiated timeout.
    pub fn connect(&mut self, now: Millis, requested: Millis) -> (SessionId, Millis) {
        let id = SessionId(self.next_session);
        self.next_session += 1;
        let timeout = requested.max(self.min_timeout).min(self.max_timeout);
        self.sessions.insert(id, SessionState { timeout, last_heard: now });
        (id, timeout)
    }

    /// A client reconnects with `session`: its negotiated timeout if the
    /// session is still alive (and the server heard from it), `None` if it
    /// expired.
    pub fn resume(&mut self, now: Millis, session: SessionId) -> Option<Millis> {
        self.expire_due(now);
        let s = self.sessions.get_mut(&session)?;
        s.last_heard = now;
        Some(s.timeout)
    }

    /// The server hears from `session` (a client ping); false if it is gone.
    pub fn touch(&mut self, now: Millis, session: SessionId) -> bool {
        match self.sessions.get_mut(&session) {
            Some(s) => {
                s.last_heard = s.last_heard.max(now);
                true
            }
            None => false,
        }
    }

    /// Whether `session` is alive.
    pub fn is_alive(&self, session: SessionId) -> bool {
        self.sessions.contains_key(&session)
    }

    /// Every live session.
    pub fn sessions(&self) -> impl Iterator<Item = SessionId> + '_ {
        self.sessions.keys().copied()
    }

    /// Expires every session not heard from for its timeout; returns them.
    pub fn expire_due(&mut self, now: Millis) -> Vec<SessionId> {
        let due: Vec<SessionId> = self
            .sessions
            .iter()
            .filter(|(_, s)| now >= s.last_heard + s.timeout)
            .map(|(id, _)| *id)
            .collect();
        for id in &due {
            self.end_session(*id);
        }
        due
    }

    /// Expires `session` now (as the server would after a long silence).
    pub fn expire(&mut self, session: SessionId) {
        self.end_session(session);
    }

    /// `session` closes itself: its ephemeral nodes go at once.
    pub fn close(&mut self, session: SessionId) {
        self.end_session(session);
    }

    fn end_session(&mut self, session: SessionId) {
        if self.sessions.remove(&session).is_none() {
            return;
        }
        let owned: Vec<String> = self.owned_by(session);
        for path in owned {
            let mut fired = Vec::new();
            self.zxid += 1;
            self.remove_node(&path, &mut fired);
            self.fire(fired);
        }
        self.forget_watches(session);
    }

    /// Drops the watches `session` left and the notifications queued for
    /// it (a connection drop that loses them; the real client re-registers
    /// its watches on reconnect, so this is harsher than ZooKeeper).
    pub fn forget_watches(&mut self, session: SessionId) {
        for sessions in self.watches.values_mut() {
            sessions.remove(&session);
        }
        self.watches.retain(|_, s| !s.is_empty());
        self.notifications.remove(&session);
    }

    /// Paths of the ephemeral nodes `session` owns.
    pub fn owned_by(&self, session: SessionId) -> Vec<String> {
        self.nodes
            .iter()
            .filter(|(_, n)| n.ephemeral_owner == Some(session))
            .map(|(p, _)| p.clone())
            .collect()
    }

    /// The node at `path`.
    pub fn node(&self, path: &str) -> Option<&ZNode> {
        self.nodes.get(path)
    }

    /// The children of `path`, sorted by name.
    pub fn children(&self, path: &str) -> Vec<String> {
        let prefix = if path == "/" { "/".to_owned() } else { format!("{path}/") };
        self.nodes
            .range(prefix.clone()..)
            .take_while(|(p, _)| p.starts_with(&prefix))
            .filter(|(p, _)| p.len() > prefix.len() && !p[prefix.len()..].contains('/'))
            .map(|(p, _)| p[prefix.len()..].to_owned())
            .collect()
    }

    /// Takes the watch notifications queued for `session`, in order.
    pub fn take_notifications(&mut self, session: SessionId) -> Vec<WatchEvent> {
        self.notifications.remove(&session).unwrap_or_default()
    }

    /// Executes `op` for `session` at `now` (which also counts as hearing
    /// from it). `SessionExpired` if the session is gone.
    pub fn execute(&mut self, now: Millis, session: SessionId, op: &ZkOp) -> ZkResult {
        self.expire_due(now);
        if !self.touch(now, session) {
            return Err(ZkError::SessionExpired);
        }
        if request_len(op) > self.packet_limit {
            // The server closes the connection on a request over the
            // limit ("Len error"), before applying anything.
            return Err(ZkError::ConnectionLoss);
        }
        let result = self.apply(session, op);
        match &result {
            // The client closes the connection on a reply over the limit
            // ("Packet len is out of range"): the request was applied.
            Ok(reply) if reply_len(reply) > self.packet_limit => Err(ZkError::ConnectionLoss),
            _ => result,
        }
    }

    fn apply(&mut self, session: SessionId, op: &ZkOp) -> ZkResult {
        let mut fired = Vec::new();
        let result = match op {
            ZkOp::Create { path, data, mode } => {
                self.zxid += 1;
                self.create(session, path, data, *mode, &mut fired)
                    .map(|path| ZkReply::Created { path })
            }
            ZkOp::Delete { path, version } => {
                self.zxid += 1;
                self.delete(path, *version, &mut fired).map(|()| ZkReply::Deleted)
            }
            ZkOp::SetData { path, data, version } => {
                self.zxid += 1;
                self.set_data(path, data, *version, &mut fired).map(|s| ZkReply::Stat(Some(s)))
            }
            ZkOp::Exists { path, watch } => {
                let stat = self.nodes.get(path).map(ZNode::stat);
                if *watch {
                    let kind = if stat.is_some() { WatchType::Data } else { WatchType::Exist };
                    self.add_watch(path, kind, session);
                }
                Ok(ZkReply::Stat(stat))
            }
            ZkOp::GetData { path, watch } => match self.nodes.get(path) {
                Some(n) => {
                    let reply = ZkReply::Data { data: n.data.clone(), stat: n.stat() };
                    if *watch {
                        self.add_watch(path, WatchType::Data, session);
                    }
                    Ok(reply)
                }
                None => Err(ZkError::NoNode),
            },
            ZkOp::GetChildren { path, watch } => {
                if self.nodes.contains_key(path) {
                    if *watch {
                        self.add_watch(path, WatchType::Child, session);
                    }
                    Ok(ZkReply::Children(self.children(path)))
                } else {
                    Err(ZkError::NoNode)
                }
            }
            ZkOp::Sync { .. } => Ok(ZkReply::Synced),
            ZkOp::MultiRead(paths) => Ok(ZkReply::MultiRead(
                paths
                    .iter()
                    .map(|path| match self.nodes.get(path) {
                        Some(n) => Ok(ZkReply::Data { data: n.data.clone(), stat: n.stat() }),
                        None => Err(ZkError::NoNode),
                    })
                    .collect(),
            )),
            ZkOp::Multi(ops) => {
                self.zxid += 1;
                let snapshot = self.nodes.clone();
                let mut replies = Vec::new();
                let mut failed = None;
                for op in ops {
                    let r = match op {
                        MultiOp::Check { path, version } => match self.nodes.get(path) {
                            Some(n) if n.version == *version => Ok(ZkReply::Checked),
                            Some(_) => Err(ZkError::BadVersion),
                            None => Err(ZkError::NoNode),
                        },
                        MultiOp::Create { path, data, mode } => self
                            .create(session, path, data, *mode, &mut fired)
                            .map(|path| ZkReply::Created { path }),
                        MultiOp::SetData { path, data, version } => self
                            .set_data(path, data, *version, &mut fired)
                            .map(|s| ZkReply::Stat(Some(s))),
                        MultiOp::Delete { path, version } => {
                            self.delete(path, *version, &mut fired).map(|()| ZkReply::Deleted)
                        }
                    };
                    match r {
                        Ok(r) => replies.push(r),
                        Err(e) => {
                            failed = Some(e);
                            break;
                        }
                    }
                }
                match failed {
                    Some(e) => {
                        self.nodes = snapshot;
                        fired.clear();
                        Err(e)
                    }
                    None => Ok(ZkReply::Multi(replies)),
                }
            }
        };
        self.fire(fired);
        result
    }

    fn add_watch(&mut self, path: &str, kind: WatchType, session: SessionId) {
        self.watches.entry((path.to_owned(), kind)).or_default().insert(session);
    }

    fn create(
        &mut self,
        session: SessionId,
        path: &str,
        data: &[u8],
        mode: CreateMode,
        fired: &mut Vec<(String, WatchKind)>,
    ) -> Result<String, ZkError> {
        if !valid_path(path) || path == "/" {
            return Err(ZkError::BadArguments);
        }
        let parent = parent_of(path).ok_or(ZkError::BadArguments)?.to_owned();
        let Some(p) = self.nodes.get(&parent) else {
            return Err(ZkError::NoNode);
        };
        if p.ephemeral_owner.is_some() {
            return Err(ZkError::NoChildrenForEphemerals);
        }
        let full = if mode.is_sequential() {
            format!("{path}{:010}", p.cversion)
        } else {
            path.to_owned()
        };
        if self.nodes.contains_key(&full) {
            return Err(ZkError::NodeExists);
        }
        let p = self.nodes.get_mut(&parent).expect("parent checked above");
        p.cversion += 1;
        self.nodes.insert(
            full.clone(),
            ZNode {
                data: data.to_vec(),
                version: 0,
                cversion: 0,
                ephemeral_owner: mode.is_ephemeral().then_some(session),
                czxid: self.zxid,
                mzxid: self.zxid,
            },
        );
        fired.push((full.clone(), WatchKind::NodeCreated));
        fired.push((parent, WatchKind::NodeChildrenChanged));
        Ok(full)
    }

    fn delete(
        &mut self,
        path: &str,
        version: Option<i32>,
        fired: &mut Vec<(String, WatchKind)>,
    ) -> Result<(), ZkError> {
        let Some(n) = self.nodes.get(path) else {
            return Err(ZkError::NoNode);
        };
        if version.is_some_and(|v| v != n.version) {
            return Err(ZkError::BadVersion);
        }
        if !self.children(path).is_empty() {
            return Err(ZkError::NotEmpty);
        }
        self.remove_node(path, fired);
        Ok(())
    }

    fn remove_node(&mut self, path: &str, fired: &mut Vec<(String, WatchKind)>) {
        if self.nodes.remove(path).is_none() {
            return;
        }
        if let Some(parent) = parent_of(path) {
            if let Some(p) = self.nodes.get_mut(parent) {
                p.cversion += 1;
            }
            fired.push((path.to_owned(), WatchKind::NodeDeleted));
            fired.push((parent.to_owned(), WatchKind::NodeChildrenChanged));
        }
    }

    fn set_data(
        &mut self,
        path: &str,
        data: &[u8],
        version: Option<i32>,
        fired: &mut Vec<(String, WatchKind)>,
    ) -> Result<Stat, ZkError> {
        let zxid = self.zxid;
        let Some(n) = self.nodes.get_mut(path) else {
            return Err(ZkError::NoNode);
        };
        if version.is_some_and(|v| v != n.version) {
            return Err(ZkError::BadVersion);
        }
        n.data = data.to_vec();
        n.version += 1;
        n.mzxid = zxid;
        fired.push((path.to_owned(), WatchKind::NodeDataChanged));
        Ok(n.stat())
    }

    /// Delivers fired watches: each is one-shot, so it is removed.
    fn fire(&mut self, fired: Vec<(String, WatchKind)>) {
        for (path, kind) in fired {
            let types: &[WatchType] = match kind {
                WatchKind::NodeCreated | WatchKind::NodeDataChanged => {
                    &[WatchType::Exist, WatchType::Data]
                }
                WatchKind::NodeDeleted => &[WatchType::Exist, WatchType::Data, WatchType::Child],
                WatchKind::NodeChildrenChanged => &[WatchType::Child],
            };
            let mut to: BTreeSet<SessionId> = BTreeSet::new();
            for t in types {
                if let Some(s) = self.watches.remove(&(path.clone(), *t)) {
                    to.extend(s);
                }
            }
            for s in to {
                self.notifications
                    .entry(s)
                    .or_default()
                    .push(WatchEvent { path: path.clone(), kind });
            }
        }
    }
}

/// Which requests a "reply lost" fault applies to.
pub type OpFilter = fn(&ZkOp) -> bool;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Link {
    Up,
    Down { until: Millis },
}

/// One elector and the client library around it.
#[derive(Debug)]
pub struct Member {
    /// The machine.
    pub elector: Elector,
    /// The session the client library holds.
    pub session: Option<SessionId>,
    link: Link,
    paused_until: Millis,
    wants_session: Option<Millis>,
    outbox: VecDeque<(RequestId, ZkOp)>,
    inbox: VecDeque<Event>,
    timers: BTreeMap<Timer, Millis>,
    lose_reply: Option<OpFilter>,
    /// Every request sent, with its session and time.
    pub sent: Vec<(Millis, SessionId, ZkOp)>,
    /// Every outcome (`LeaderNamed`, `Elected`, `Suspended`, `Resumed`,
    /// `Revoked`), `NewSession` and `CloseSession`, with its time.
    pub outcomes: Vec<(Millis, Action)>,
}

impl Member {
    /// Whether the process is paused at `now`.
    pub fn is_paused(&self, now: Millis) -> bool {
        now < self.paused_until
    }

    /// Whether the connection is up.
    pub fn is_connected(&self) -> bool {
        self.link == Link::Up
    }

    /// The outcomes without the session bookkeeping.
    pub fn leadership_outcomes(&self) -> Vec<Action> {
        self.outcomes
            .iter()
            .filter(|(_, a)| {
                matches!(
                    a,
                    Action::Elected { .. }
                        | Action::Suspended
                        | Action::Resumed
                        | Action::Revoked
                        | Action::LeaderNamed { .. }
                )
            })
            .map(|(_, a)| a.clone())
            .collect()
    }
}

/// Electors against one [`ZkModel`], with faults. Virtual time moves only in
/// [`Sim::tick`] / [`Sim::advance`]; [`Sim::pump`] runs every pending delivery
/// at the current time.
#[derive(Debug)]
pub struct Sim {
    /// The server.
    pub zk: ZkModel,
    /// Virtual time.
    pub now: Millis,
    /// The electors.
    pub members: Vec<Member>,
    /// Virtual time per tick. Default 10 ms.
    pub step: Millis,
    /// How long a dropped connection stays down by default. Default 50 ms.
    pub reconnect_delay: Millis,
}

/// The root used by [`Sim::new`].
pub const SIM_ROOT: &str = "/regent";

impl Sim {
    /// `n` electors (ids `m0`..; GUIDs `0xa0..`), a server with tickTime 200
    /// ms, sessions asking for 2 s; `tweak` edits each config.
    pub fn new(n: usize, tweak: impl Fn(&mut Config)) -> Self {
        let members = (0..n)
            .map(|i| {
                let mut c = Config::new(
                    SIM_ROOT,
                    0xa0 + i as u64,
                    MasterId::new(format!("m{i}")),
                    Addr::new(format!("10.0.0.{i}:5050")),
                );
                c.session_timeout = Millis(2_000);
                tweak(&mut c);
                Member {
                    elector: Elector::new(c),
                    session: None,
                    link: Link::Up,
                    paused_until: Millis::ZERO,
                    wants_session: None,
                    outbox: VecDeque::new(),
                    inbox: VecDeque::new(),
                    timers: BTreeMap::new(),
                    lose_reply: None,
                    sent: Vec::new(),
                    outcomes: Vec::new(),
                }
            })
            .collect();
        Sim {
            zk: ZkModel::new(Millis(200)),
            now: Millis::ZERO,
            members,
            step: Millis(10),
            reconnect_delay: Millis(50),
        }
    }

    /// The election directory.
    pub fn election_path(&self) -> String {
        self.members[0].elector.config().election_path()
    }

    /// The candidate nodes in the model, sorted by name.
    pub fn candidates(&self) -> Vec<String> {
        self.zk.children(&self.election_path())
    }

    /// Candidate nodes owned by member `i`'s current session.
    pub fn nodes_of(&self, i: usize) -> Vec<String> {
        match self.members[i].session {
            Some(s) => self
                .zk
                .owned_by(s)
                .into_iter()
                .filter(|p| p.starts_with(&self.election_path()))
                .collect(),
            None => Vec::new(),
        }
    }

    /// Feeds `Start` to every elector and runs deliveries.
    pub fn start(&mut self) {
        for i in 0..self.members.len() {
            self.members[i].inbox.push_back(Event::Start);
        }
        self.pump();
    }

    /// The indices of electors acting as leader now.
    pub fn acting(&self) -> Vec<usize> {
        (0..self.members.len()).filter(|&i| self.members[i].elector.is_acting(self.now)).collect()
    }

    /// Fault: the next request of member `i` matching `filter` is applied by
    /// the server but its reply is lost; the client sees `ConnectionLoss` and
    /// `Disconnected`, and reconnects (same session) after `reconnect_delay`.
    pub fn lose_next_reply(&mut self, i: usize, filter: OpFilter) {
        self.members[i].lose_reply = Some(filter);
    }

    /// Fault: member `i`'s connection drops for `down_for`; requests not yet
    /// applied fail with `ConnectionLoss`; watches and undelivered
    /// notifications are lost (the elector must re-arm them itself).
    pub fn disconnect(&mut self, i: usize, down_for: Millis) {
        let until = self.now + down_for;
        let m = &mut self.members[i];
        if let Link::Down { until: u } = m.link {
            m.link = Link::Down { until: u.max(until) };
            return;
        }
        m.link = Link::Down { until };
        for (req, _) in m.outbox.drain(..) {
            m.inbox
                .push_back(Event::Zk(ZkEvent::Reply { req, result: Err(ZkError::ConnectionLoss) }));
        }
        if let Some(session) = m.session {
            m.inbox.push_back(Event::Zk(ZkEvent::Disconnected { session }));
            self.zk.forget_watches(session);
        }
    }

    /// Feeds `Shutdown` to member `i` and runs deliveries.
    pub fn shutdown(&mut self, i: usize) {
        let actions = self.members[i].elector.handle(self.now, Event::Shutdown);
        self.apply(i, actions);
        self.pump();
    }

    /// Fault: member `i`'s session expires the way it does on a real
    /// server: the member is cut off (connection down) until the server has
    /// not heard from it for the session timeout, and reconnects after.
    /// (A server never expires a session it heard from within the timeout;
    /// the leader's lease relies on that. [`ZkModel::expire`] is the
    /// unrealistic instant kill.)
    pub fn expire(&mut self, i: usize) {
        if let Some(s) = self.members[i].session {
            let timeout = self.zk.sessions.get(&s).map_or(Millis::ZERO, |st| st.timeout);
            self.disconnect(i, timeout + self.reconnect_delay);
        }
    }

    /// Fault: member `i`'s process (elector and client library) stops for
    /// `for_`: no events, no timers, no pings.
    pub fn pause(&mut self, i: usize, for_: Millis) {
        let m = &mut self.members[i];
        m.paused_until = m.paused_until.max(self.now + for_);
    }

    /// Ends every fault: connections up (at the next tick), no pauses, no
    /// pending lost replies.
    pub fn heal(&mut self) {
        for m in &mut self.members {
            m.paused_until = self.now;
            m.lose_reply = None;
            if let Link::Down { .. } = m.link {
                m.link = Link::Down { until: self.now };
            }
        }
    }

    /// Advances time by `dur`, one tick at a time.
    pub fn advance(&mut self, dur: Millis) {
        let end = self.now + dur;
        while self.now < end {
            self.tick();
        }
    }

    /// Feeds member `i` an event now (e.g. [`Event::Depose`] or
    /// [`Event::Confirm`]), then runs every delivery.
    pub fn inject(&mut self, i: usize, event: Event) {
        self.members[i].inbox.push_back(event);
        self.pump();
    }

    /// Advances time by one step: server expiry, client pings and
    /// reconnects, due timers, then every delivery.
    pub fn tick(&mut self) {
        self.now = self.now + self.step;
        let now = self.now;
        self.zk.expire_due(now);
        for i in 0..self.members.len() {
            if self.members[i].is_paused(now) {
                continue;
            }
            let session = self.members[i].session;
            match (self.members[i].link, session) {
                (Link::Up, Some(s)) if !self.zk.touch(now, s) => {
                    // The server dropped the expired session's connection;
                    // the client learns on reconnect.
                    self.disconnect(i, self.reconnect_delay);
                }
                (Link::Down { until }, _) if until <= now => {
                    let m = &mut self.members[i];
                    m.link = Link::Up;
                    if let Some(s) = m.session {
                        match self.zk.resume(now, s) {
                            Some(timeout) => {
                                m.inbox.push_back(Event::Zk(ZkEvent::SessionConnected {
                                    session: s,
                                    timeout,
                                }))
                            }
                            None => {
                                m.session = None;
                                m.inbox.push_back(Event::Zk(ZkEvent::Expired { session: s }));
                            }
                        }
                    }
                }
                _ => {}
            }
            let m = &mut self.members[i];
            let due: Vec<Timer> =
                m.timers.iter().filter(|(_, at)| **at <= now).map(|(t, _)| *t).collect();
            for t in due {
                m.timers.remove(&t);
                m.inbox.push_back(Event::Timer(t));
            }
        }
        self.pump();
    }

    /// Runs deliveries at the current time until nothing moves.
    pub fn pump(&mut self) {
        loop {
            let mut moved = false;
            for i in 0..self.members.len() {
                moved |= self.pump_one(i);
            }
            if !moved {
                break;
            }
        }
    }

    fn pump_one(&mut self, i: usize) -> bool {
        let now = self.now;
        if self.members[i].is_paused(now) {
            return false;
        }
        let mut moved = false;
        // Open a session asked for.
        if self.members[i].link == Link::Up {
            if let Some(requested) = self.members[i].wants_session.take() {
                let (s, timeout) = self.zk.connect(now, requested);
                let m = &mut self.members[i];
                m.session = Some(s);
                m.inbox.push_back(Event::Zk(ZkEvent::SessionConnected { session: s, timeout }));
                moved = true;
            }
        }
        // The server answers one request.
        if self.members[i].link == Link::Up {
            if let (Some(s), Some((req, op))) =
                (self.members[i].session, self.members[i].outbox.pop_front())
            {
                let result = self.zk.execute(now, s, &op);
                moved = true;
                let lose = self.members[i].lose_reply.is_some_and(|f| f(&op));
                if lose {
                    self.members[i].lose_reply = None;
                    self.members[i].outbox.push_front((req, op));
                    self.disconnect(i, self.reconnect_delay);
                } else if matches!(result, Err(ZkError::SessionExpired | ZkError::ConnectionLoss)) {
                    // The server closes the connection of an expired
                    // session, and the connection of a packet over the limit
                    // drops: the request fails with the others in flight.
                    self.members[i].outbox.push_front((req, op));
                    self.disconnect(i, self.reconnect_delay);
                } else {
                    self.members[i].inbox.push_back(Event::Zk(ZkEvent::Reply { req, result }));
                }
            }
        }
        // Watch notifications.
        if self.members[i].link == Link::Up {
            if let Some(s) = self.members[i].session {
                for event in self.zk.take_notifications(s) {
                    self.members[i]
                        .inbox
                        .push_back(Event::Zk(ZkEvent::Watch { session: s, event }));
                    moved = true;
                }
            }
        }
        // The elector handles one event.
        if let Some(ev) = self.members[i].inbox.pop_front() {
            moved = true;
            let actions = self.members[i].elector.handle(now, ev);
            self.apply(i, actions);
        }
        moved
    }

    fn apply(&mut self, i: usize, actions: Vec<Action>) {
        let now = self.now;
        for a in actions {
            let m = &mut self.members[i];
            match a {
                Action::Zk(ZkCommand::NewSession { timeout }) => {
                    m.session = None;
                    m.outbox.clear();
                    m.wants_session = Some(timeout);
                    m.outcomes.push((now, Action::Zk(ZkCommand::NewSession { timeout })));
                }
                Action::Zk(ZkCommand::CloseSession { session }) => {
                    if m.session == Some(session) {
                        if m.link == Link::Up {
                            self.zk.close(session);
                        }
                        let m = &mut self.members[i];
                        m.session = None;
                        m.outbox.clear();
                    }
                    self.members[i]
                        .outcomes
                        .push((now, Action::Zk(ZkCommand::CloseSession { session })));
                }
                Action::Zk(ZkCommand::Request { session, req, op }) => {
                    if m.session != Some(session) {
                        continue;
                    }
                    m.sent.push((now, session, op.clone()));
                    if m.link == Link::Up {
                        m.outbox.push_back((req, op));
                    } else {
                        m.inbox.push_back(Event::Zk(ZkEvent::Reply {
                            req,
                            result: Err(ZkError::ConnectionLoss),
                        }));
                    }
                }
                Action::SetTimer { timer, at } => {
                    m.timers.insert(timer, at);
                }
                Action::CancelTimer { timer } => {
                    m.timers.remove(&timer);
                }
                other => m.outcomes.push((now, other)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequential_ephemeral_watches_and_expiry() {
        let mut zk = ZkModel::new(Millis(200));
        let (a, ta) = zk.connect(Millis(0), Millis(1));
        assert_eq!(ta, Millis(400), "clamped to 2 ticks");
        let (b, tb) = zk.connect(Millis(0), Millis(60_000));
        assert_eq!(tb, Millis(4_000), "clamped to 20 ticks");
        let create = |path: &str, mode| ZkOp::Create { path: path.into(), data: vec![], mode };
        assert!(zk.execute(Millis(1), a, &create("/e", CreateMode::Persistent)).is_ok());
        assert_eq!(
            zk.execute(Millis(1), a, &create("/e", CreateMode::Persistent)),
            Err(ZkError::NodeExists)
        );
        let r = zk.execute(Millis(1), a, &create("/e/x-", CreateMode::EphemeralSequential));
        assert_eq!(r, Ok(ZkReply::Created { path: "/e/x-0000000000".into() }));
        let r = zk.execute(Millis(1), b, &create("/e/x-", CreateMode::EphemeralSequential));
        assert_eq!(r, Ok(ZkReply::Created { path: "/e/x-0000000001".into() }));
        // b watches a's node; a's session expires; b is told.
        let get = ZkOp::GetData { path: "/e/x-0000000000".into(), watch: true };
        assert!(zk.execute(Millis(2), b, &get).is_ok());
        assert!(zk.touch(Millis(3_000), b));
        assert_eq!(zk.expire_due(Millis(3_500)), vec![a]);
        assert_eq!(zk.children("/e"), vec!["x-0000000001".to_owned()]);
        assert_eq!(
            zk.take_notifications(b),
            vec![WatchEvent { path: "/e/x-0000000000".into(), kind: WatchKind::NodeDeleted }]
        );
        assert!(zk.take_notifications(b).is_empty(), "one-shot");
        // Versions and multi.
        let set = |v| ZkOp::SetData { path: "/e".into(), data: vec![1], version: v };
        assert!(zk.execute(Millis(3_100), b, &set(Some(0))).is_ok());
        assert_eq!(zk.execute(Millis(3_100), b, &set(Some(0))), Err(ZkError::BadVersion));
        let multi = ZkOp::Multi(vec![
            MultiOp::Check { path: "/e/x-0000000001".into(), version: 0 },
            MultiOp::SetData { path: "/e".into(), data: vec![2], version: Some(1) },
        ]);
        assert!(zk.execute(Millis(3_100), b, &multi).is_ok());
        zk.close(b);
        assert!(zk.children("/e").is_empty());
        assert_eq!(zk.execute(Millis(3_100), b, &multi), Err(ZkError::SessionExpired));
        assert_eq!(zk.node("/e").map(|n| n.data.clone()), Some(vec![2]));
    }

    /// Issue 20 (docs/design.md#issue-20) scenario 9, the model side: a listing over ZooKeeper's
    /// 1 MiB packet limit fails as the real server and client fail it
    /// (connection loss), one just under it is answered.
    #[test]
    fn a_listing_over_the_packet_limit_is_a_connection_loss() {
        let mut zk = ZkModel::new(Millis(200));
        assert_eq!(zk.packet_limit(), 0xfffff);
        let (s, _) = zk.connect(Millis(0), Millis(4_000));
        let create =
            |path: String| ZkOp::Create { path, data: vec![], mode: CreateMode::Persistent };
        assert!(zk.execute(Millis(1), s, &create("/shard".into())).is_ok());
        // Children named as worker records are (`w-` and a 200-byte id):
        // 4 + 202 bytes each in the reply.
        let name = |i: usize| format!("w-{i:0>200}");
        let list = ZkOp::GetChildren { path: "/shard".into(), watch: false };
        let fit = (PACKET_LIMIT - REPLY_HEADER - 4) / jute(name(0).len());
        for i in 0..fit {
            assert!(zk.execute(Millis(1), s, &create(format!("/shard/{}", name(i)))).is_ok());
        }
        match zk.execute(Millis(1), s, &list) {
            Ok(ZkReply::Children(c)) => assert_eq!(c.len(), fit),
            other => panic!("a listing under the limit is answered: {other:?}"),
        }
        assert!(zk.execute(Millis(1), s, &create(format!("/shard/{}", name(fit)))).is_ok());
        assert_eq!(zk.execute(Millis(1), s, &list), Err(ZkError::ConnectionLoss));
        // The session lives on: a smaller request still works.
        assert!(zk
            .execute(Millis(1), s, &ZkOp::Exists { path: "/shard".into(), watch: false })
            .is_ok());
    }

    /// A write over the limit is refused unapplied (connection loss): a
    /// multi of records too big for one packet changes nothing.
    #[test]
    fn a_write_over_the_packet_limit_is_refused_unapplied() {
        let mut zk = ZkModel::new(Millis(200)).with_packet_limit(1_000);
        let (s, _) = zk.connect(Millis(0), Millis(4_000));
        let big = ZkOp::Multi(vec![
            MultiOp::Create { path: "/a".into(), data: vec![0; 600], mode: CreateMode::Persistent },
            MultiOp::Create { path: "/b".into(), data: vec![0; 600], mode: CreateMode::Persistent },
        ]);
        assert_eq!(zk.execute(Millis(1), s, &big), Err(ZkError::ConnectionLoss));
        assert!(zk.node("/a").is_none() && zk.node("/b").is_none());
        let small =
            ZkOp::Create { path: "/a".into(), data: vec![0; 600], mode: CreateMode::Persistent };
        assert!(zk.execute(Millis(1), s, &small).is_ok());
        // A read whose reply is over the limit fails too, after the fact.
        let read = ZkOp::MultiRead(vec!["/a".into(), "/a".into()]);
        assert_eq!(zk.execute(Millis(1), s, &read), Err(ZkError::ConnectionLoss));
    }
}
