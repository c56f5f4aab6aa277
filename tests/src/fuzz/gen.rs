//! Decisions read from fuzz bytes, and the generators the node targets
//! share (numbers at and around the limits, names, specs, reports).

use regent_core::limits;
use regent_core::protocol::{ExecutorReport, ExecutorState, GroupSpec, Role};
use regent_core::{Epoch, ExecutorId, FrameworkId, Incarnation, Millis, WorkerId};

/// Reads fuzz input bytes as decisions. Past the end every read is zero
/// (and every slice empty), so any byte string is a valid input and an
/// input's length bounds its run.
#[derive(Clone, Debug)]
pub struct Source<'a> {
    data: &'a [u8],
}

impl<'a> Source<'a> {
    /// Decisions from `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Source { data }
    }

    /// `true` once every byte was read.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Bytes not yet read.
    pub fn remaining(&self) -> usize {
        self.data.len()
    }

    /// The next byte (0 past the end).
    pub fn u8(&mut self) -> u8 {
        match self.data.split_first() {
            Some((b, rest)) => {
                self.data = rest;
                *b
            }
            None => 0,
        }
    }

    /// Two bytes, little-endian.
    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }

    /// Four bytes, little-endian.
    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }

    /// Eight bytes, little-endian.
    pub fn u64(&mut self) -> u64 {
        u64::from(self.u32()) | (u64::from(self.u32()) << 32)
    }

    /// One bit of the next byte.
    pub fn bool(&mut self) -> bool {
        self.u8() & 1 == 1
    }

    /// A number below `n` (`n` > 0; 0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        match n {
            0 => 0,
            1..=256 => usize::from(self.u8()) % n,
            257..=65_536 => usize::from(self.u16()) % n,
            _ => self.u32() as usize % n,
        }
    }

    /// `true` about once in `n` (on the next byte).
    pub fn one_in(&mut self, n: u8) -> bool {
        self.u8().is_multiple_of(n.max(1))
    }

    /// Up to `n` next bytes.
    pub fn bytes(&mut self, n: usize) -> &'a [u8] {
        let (head, rest) = self.data.split_at(n.min(self.data.len()));
        self.data = rest;
        head
    }

    /// A slice whose length (at most `max`) is the next byte or two.
    pub fn sized(&mut self, max: usize) -> &'a [u8] {
        let n = if max < 256 { self.below(max + 1) } else { usize::from(self.u16()) % (max + 1) };
        self.bytes(n)
    }

    /// Every byte not yet read.
    pub fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.data)
    }

    /// One of `items` (`None` if there are none).
    pub fn pick<'b, T>(&mut self, items: &'b [T]) -> Option<&'b T> {
        if items.is_empty() {
            None
        } else {
            items.get(self.below(items.len()))
        }
    }
}

/// Whether `REGENT_FUZZ_TRACE` is set: the node targets then print every
/// input they feed (and the replay test its failing input's steps), to
/// read a crash by.
pub fn tracing() -> bool {
    static TRACE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *TRACE.get_or_init(|| std::env::var_os("REGENT_FUZZ_TRACE").is_some())
}

/// A `u32` a peer might send: small, at a limit, just past it, or extreme.
pub fn u32_peer(src: &mut Source, limit: u32) -> u32 {
    match src.u8() % 12 {
        0 => 0,
        1 => 1,
        2..=5 => u32::from(src.u8() % 8),
        6 => limit,
        7 => limit.saturating_add(1),
        8 => u32::MAX,
        9 => 1 << 31,
        _ => src.u32(),
    }
}

/// A `u64` a peer might send.
pub fn u64_peer(src: &mut Source, limit: u64) -> u64 {
    match src.u8() % 12 {
        0 => 0,
        1 => 1,
        2..=5 => u64::from(src.u16()),
        6 => limit,
        7 => limit.saturating_add(1),
        8 => u64::MAX,
        9 => 1 << 63,
        _ => src.u64(),
    }
}

/// The clock after a step of a node target: to the node's next deadline
/// (`next`, never backwards), or forward by a byte's, two bytes' or sixteen
/// times two bytes' worth of milliseconds.
pub fn later(src: &mut Source, now: Millis, next: Option<Millis>) -> Millis {
    match src.u8() % 4 {
        0 => next.map_or(now, |t| t.max(now)),
        1 => now + Millis(u64::from(src.u8())),
        2 => now + Millis(u64::from(src.u16())),
        _ => now + Millis(u64::from(src.u16()) * 16),
    }
}

/// An epoch: mostly small (so fencing is crossed both ways), sometimes
/// extreme.
pub fn epoch(src: &mut Source) -> Epoch {
    Epoch(match src.u8() % 8 {
        0..=5 => u64::from(src.u8() % 6),
        6 => u64::MAX,
        _ => src.u64(),
    })
}

/// A duration a peer might send.
pub fn millis(src: &mut Source) -> Millis {
    Millis(match src.u8() % 8 {
        0 => 0,
        1..=4 => u64::from(src.u16()),
        5 => limits::MAX_FAILOVER_TIMEOUT.0,
        6 => limits::MAX_FAILOVER_TIMEOUT.0 + 1,
        _ => u64::MAX,
    })
}

/// A string a peer might send: one of a few short names (so ids meet), one
/// of exactly `limit` or `limit + 1` bytes, odd characters, or raw bytes.
pub fn text(src: &mut Source, names: &[&str], limit: usize) -> String {
    match src.u8() % 10 {
        0..=5 => src.pick(names).copied().unwrap_or("").to_owned(),
        6 => "x".repeat(limit),
        7 => "y".repeat(limit + 1),
        8 => ["", "/", "..", "%2F", "a/b#1#2.3", "…", "é".repeat(200).as_str(), "\0"][src.below(8)]
            .to_owned(),
        _ => String::from_utf8_lossy(src.sized(64)).into_owned(),
    }
}

/// A role.
pub fn role(src: &mut Source) -> Role {
    [Role::Master, Role::Worker, Role::Subscriber, Role::Client][src.below(4)]
}

/// A worker id from a small pool (or an odd one).
pub fn worker_id(src: &mut Source) -> WorkerId {
    WorkerId(text(src, &["w0", "w1", "w2"], limits::MAX_ID_BYTES))
}

/// A framework id: one of `known`, or from a small pool, or odd.
pub fn framework_id(src: &mut Source, known: &[FrameworkId]) -> FrameworkId {
    if !known.is_empty() && !src.u8().is_multiple_of(4) {
        return src.pick(known).cloned().unwrap_or_else(|| FrameworkId::new("f0"));
    }
    FrameworkId(text(src, &["f0", "f1", "fw-1"], limits::MAX_ID_BYTES))
}

/// An executor id: one of `known`, one shaped like the master's
/// (`<framework>/<group>#<slot>#<epoch>.<n>`, any slot), or odd.
pub fn executor_id(
    src: &mut Source,
    known: &[ExecutorId],
    frameworks: &[FrameworkId],
) -> ExecutorId {
    match src.u8() % 4 {
        0 | 1 if !known.is_empty() => {
            src.pick(known).cloned().unwrap_or_else(|| ExecutorId::new("e"))
        }
        0..=2 => {
            let fw = framework_id(src, frameworks);
            let group = text(src, &["g", "h"], limits::MAX_NAME_BYTES);
            let slot = u32_peer(src, limits::MAX_SLOTS_PER_GROUP);
            ExecutorId(format!("{fw}/{group}#{slot}#{}.{}", src.u8(), src.u8()))
        }
        _ => ExecutorId(text(src, &["e0", "e1"], limits::MAX_ID_BYTES)),
    }
}

/// An incarnation from a small pool (so replacement is both ways).
pub fn incarnation(src: &mut Source) -> Incarnation {
    Incarnation(match src.u8() % 6 {
        0..=4 => u64::from(src.u8() % 4),
        _ => src.u64(),
    })
}

/// An executor state.
pub fn executor_state(src: &mut Source) -> ExecutorState {
    match src.u8() % 8 {
        0 => ExecutorState::Launching,
        1 | 2 => ExecutorState::Running,
        3 => ExecutorState::Exited { code: 0 },
        4 => ExecutorState::Exited { code: src.u32() as i32 },
        5 => {
            ExecutorState::Failed { reason: text(src, &["boom"], limits::MAX_FAILURE_REASON_BYTES) }
        }
        6 => ExecutorState::Killed,
        _ => ExecutorState::Lost,
    }
}

/// A report of one executor.
pub fn report(
    src: &mut Source,
    known: &[ExecutorId],
    frameworks: &[FrameworkId],
) -> ExecutorReport {
    ExecutorReport {
        health: None,
        ran_ms: None,
        resources: assigned(src),
        ports: Default::default(),
        id: executor_id(src, known, frameworks),
        framework: framework_id(src, frameworks),
        cores: u32_peer(src, limits::MAX_CORES),
        memory_mb: u64_peer(src, limits::MAX_MEMORY_MB),
        state: executor_state(src),
    }
}

/// A list of a few reports, or rarely half of or just past
/// [`limits::MAX_REPORTS_PER_REGISTRATION`].
pub fn reports(
    src: &mut Source,
    known: &[ExecutorId],
    frameworks: &[FrameworkId],
) -> Vec<ExecutorReport> {
    let n = match src.u8() % 16 {
        0 => limits::MAX_REPORTS_PER_REGISTRATION + 1,
        // Half the limit, not the limit itself: one registration at the
        // limit legitimately makes about one action per report (a kill for
        // each stray), and the node's output for it, 4,096+ actions of 136
        // bytes, is one vector just over 1 MiB — bounded by the limit, not
        // an allocation on trust, but past what the harness allows.
        1 => limits::MAX_REPORTS_PER_REGISTRATION / 2,
        k => usize::from(k % 4),
    };
    // Exactly `n`: the harness's own vector, grown by doubling, would pass
    // the 1 MiB it allows (8,192 reports of 136 bytes) for 4,097 reports.
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(report(src, known, frameworks));
    }
    out
}

/// A list of strings of `count` items, or rarely one at or past its
/// limits (count, item size, total size).
fn strings(src: &mut Source, count_limit: usize, item_limit: usize) -> Vec<String> {
    match src.u8() % 12 {
        0 => vec![String::new(); count_limit + 1],
        1 => vec!["z".repeat(item_limit + 1)],
        2 => vec!["z".repeat(item_limit); limits::MAX_GROUP_SPEC_BYTES / item_limit + 1],
        k => (0..usize::from(k % 4))
            .map(|_| text(src, &["/bin/true", "sh", "-c", "exit 1"], item_limit))
            .collect(),
    }
}

/// A group's slot count: small, half the limit, just past it, or extreme.
/// Not the limit itself: placing a group of
/// [`limits::MAX_SLOTS_PER_GROUP`] slots at once legitimately makes two
/// actions per slot (a launch and an update), and the step's output, over
/// 4,096 actions of 136 bytes, is one vector just over 1 MiB — bounded by
/// the limit, not an allocation on trust, but past what the harness allows
/// (`core/tests/limits.rs` covers declarations at the limit).
pub fn slots(src: &mut Source) -> u32 {
    let limit = limits::MAX_SLOTS_PER_GROUP;
    match src.u8() % 12 {
        0 => 0,
        1 => 1,
        2..=5 => u32::from(src.u8() % 8),
        6 => limit / 2,
        7 => limit + 1,
        8 => u32::MAX,
        9 => 1 << 31,
        _ => src.u32() % (limit / 2),
    }
}

/// A group's placement policy, sometimes: a placement, constraints on
/// worker attributes, an attribute to spread over (restart policies left
/// default).
fn group_policy(src: &mut Source) -> regent_core::policy::GroupPolicy {
    use regent_core::policy::{Constraint, GroupPolicy, Placement};
    if !src.one_in(4) {
        return GroupPolicy::default();
    }
    let placement =
        src.pick(&[None, Some(Placement::Pack), Some(Placement::Spread)]).copied().flatten();
    let n = src.below(3);
    let constraints = (0..n)
        .filter_map(|_| {
            Constraint::parse(&text(
                src,
                &["disk=ssd", "rack!=r9", "gpu", "rack in [r1, r2]", "zone not in [z9]"],
                64,
            ))
            .ok()
        })
        .collect();
    let spread = src.bool().then(|| text(src, &["rack", "zone"], 64));
    GroupPolicy { placement, constraints, spread, ..Default::default() }
}

/// An executor group spec as a subscriber might declare it.
pub fn group_spec(src: &mut Source) -> GroupSpec {
    let command = strings(src, limits::MAX_COMMAND_ARGS, limits::MAX_ARG_BYTES);
    let env = match src.u8() % 10 {
        0 => vec![(String::new(), String::new()); limits::MAX_ENV_VARS + 1],
        1 => vec![("k".repeat(limits::MAX_ENV_KEY_BYTES + 1), String::new())],
        2 => vec![("K".into(), "v".repeat(limits::MAX_ENV_VALUE_BYTES + 1))],
        k => (0..usize::from(k % 3))
            .map(|_| (text(src, &["A", "B"], 64), text(src, &["1", ""], 64)))
            .collect(),
    };
    GroupSpec {
        group: text(src, &["g", "h"], limits::MAX_NAME_BYTES),
        slots: slots(src),
        command,
        env,
        cores: u32_peer(src, limits::MAX_CORES),
        memory_mb: u64_peer(src, limits::MAX_MEMORY_MB),
        policy: group_policy(src),
        launch: Box::new(launch_spec(src)),
    }
}

/// Launch options, mostly the default, sometimes set or past a limit (a
/// cwd that climbs out, a digest of the wrong length, too many artifacts).
pub fn launch_spec(src: &mut Source) -> regent_core::launch::LaunchSpec {
    use regent_core::launch::{Artifact, LaunchSpec, MAX_ARTIFACTS};
    match src.u8() % 8 {
        0 => LaunchSpec {
            // Drawn from no byte, so the stored fuzz inputs keep their
            // meaning (the rule's range is checked in core's unit tests).
            disconnect: None,
            checks: Vec::new(),
            logs: Default::default(),
            resources: resource_amounts(src),
            ports: Default::default(),
            user: src.bool().then(|| text(src, &["alice", "-rf", "a/b", "x"], 40)),
            cwd: Some(text(src, &["work", "../up", "/abs", "a/b"], 64)),
            kill_grace_ms: Some(u64::from(src.u16()) << (src.u8() % 40)),
            artifacts: (0..usize::from(src.u8() % 3))
                .map(|_| Artifact {
                    source: text(src, &["http://h/x.tgz", "file:///x", "ftp://x"], 128),
                    sha256: text(src, &["ab", &"a".repeat(64)], 80),
                    dest: text(src, &["", "bin", ".."], 32),
                    unpack: src.bool(),
                })
                .collect(),
        },
        1 => LaunchSpec {
            artifacts: vec![
                Artifact {
                    source: "file:///x".into(),
                    sha256: "a".repeat(64),
                    dest: String::new(),
                    unpack: false,
                };
                MAX_ARTIFACTS + 1
            ],
            ..Default::default()
        },
        _ => LaunchSpec::default(),
    }
}

/// A group's named-resource request: mostly none, sometimes sane, past a
/// limit (too many kinds, an amount of 0 or 257, a bad or repeated name).
pub fn resource_amounts(src: &mut Source) -> Vec<(String, u32)> {
    use regent_core::resources::{MAX_ADDRESSES, MAX_RESOURCE_KINDS};
    match src.u8() % 6 {
        0 => vec![("gpu".into(), 1)],
        1 => vec![(text(src, &["gpu", "GPU", "fpga"], 40), src.u32() % (MAX_ADDRESSES as u32 + 2))],
        2 => (0..=MAX_RESOURCE_KINDS).map(|i| (format!("r{i}"), 1)).collect(),
        3 => vec![("gpu".into(), 1), ("gpu".into(), 2)],
        _ => Vec::new(),
    }
}

/// A worker's named-resource offer: mostly none, sometimes sane, past a
/// limit (no addresses, too many, a repeated address, a bad name).
pub fn resource_offers(src: &mut Source) -> Vec<regent_core::resources::Resource> {
    use regent_core::resources::{Resource, MAX_ADDRESSES};
    let gpus = |n: usize| Resource {
        name: "gpu".into(),
        addresses: (0..n).map(|i| i.to_string()).collect(),
    };
    match src.u8() % 6 {
        0 => vec![gpus(1 + usize::from(src.u8() % 8))],
        1 => vec![gpus(MAX_ADDRESSES + 1)],
        2 => vec![Resource { name: "gpu".into(), addresses: vec!["0".into(), "0".into()] }],
        3 => vec![Resource {
            name: text(src, &["gpu", "Gpu", ""], 40),
            addresses: vec![text(src, &["0", "a b", ""], 80)],
        }],
        _ => Vec::new(),
    }
}

/// The addresses a (possibly hostile) report says its executor holds.
pub fn assigned(src: &mut Source) -> regent_core::resources::Assigned {
    match src.u8() % 5 {
        0 => vec![("gpu".into(), vec![src.u8().to_string()])],
        1 => vec![("gpu".into(), (0..300).map(|i| i.to_string()).collect())],
        2 => (0..20).map(|i| (format!("r{i}"), vec!["0".into()])).collect(),
        _ => Vec::new(),
    }
}
