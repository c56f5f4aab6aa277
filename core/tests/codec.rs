//! The frame codec: round trips, hostile input, and golden frames that pin
//! the wire format.

use quickcheck::{Arbitrary, Gen, QuickCheck};
use regent_core::api;
use regent_core::codec::{self, DecodeError, Decoder, DecoderConfig};
use regent_core::ids::InstanceId;
use regent_core::policy::{Constraint, GroupPolicy, Placement, RestartMode, RestartPolicy};
use regent_core::protocol::*;
use regent_core::protocol::{FinishedFramework, FinishedSlot, FrameworkOutcome};
use regent_core::states::{DrainState, FrameworkState, MasterStatus, WorkerState};
use regent_core::{Addr, Epoch, ExecutorId, FrameworkId, Incarnation, MasterId, Millis, WorkerId};
use std::path::PathBuf;

fn s(g: &mut Gen) -> String {
    let n = usize::arbitrary(g) % 12;
    (0..n).map(|_| char::arbitrary(g)).collect()
}

fn hint(g: &mut Gen) -> LeaderHint {
    LeaderHint { id: MasterId(s(g)), addr: Addr(s(g)), epoch: Epoch(u64::arbitrary(g)) }
}

fn role(g: &mut Gen) -> Role {
    *g.choose(&[Role::Master, Role::Worker, Role::Subscriber, Role::Client]).unwrap()
}

fn addrs(g: &mut Gen) -> Vec<Addr> {
    (0..usize::arbitrary(g) % 4).map(|_| Addr(s(g))).collect()
}

fn exec_state(g: &mut Gen) -> ExecutorState {
    match u8::arbitrary(g) % 6 {
        0 => ExecutorState::Launching,
        1 => ExecutorState::Running,
        2 => ExecutorState::Exited { code: i32::arbitrary(g) },
        3 => ExecutorState::Failed { reason: s(g) },
        4 => ExecutorState::Killed,
        _ => ExecutorState::Lost,
    }
}

fn strings(g: &mut Gen) -> Vec<String> {
    (0..usize::arbitrary(g) % 4).map(|_| s(g)).collect()
}

fn signal_arb(g: &mut Gen) -> regent_core::api::StopSignal {
    *g.choose(&regent_core::api::StopSignal::ALL).expect("not empty")
}

fn group_spec_arb(g: &mut Gen) -> GroupSpec {
    GroupSpec {
        group: s(g),
        slots: u32::arbitrary(g),
        command: strings(g),
        env: env(g),
        cores: u32::arbitrary(g),
        memory_mb: u64::arbitrary(g),
        policy: Default::default(),
        launch: launch_spec(g),
    }
}

fn launch_spec(g: &mut Gen) -> Box<regent_core::launch::LaunchSpec> {
    Box::new(regent_core::launch::LaunchSpec {
        disconnect: Option::<u64>::arbitrary(g).map(regent_core::launch::Disconnect::after_ms),
        checks: (0..usize::arbitrary(g) % 3).map(|_| check_arb(g)).collect(),
        logs: Default::default(),
        resources: Default::default(),
        ports: Default::default(),
        user: if bool::arbitrary(g) { Some(s(g)) } else { None },
        cwd: if bool::arbitrary(g) { Some(s(g)) } else { None },
        kill_grace_ms: Option::<u64>::arbitrary(g),
        artifacts: (0..usize::arbitrary(g) % 3)
            .map(|_| regent_core::launch::Artifact {
                source: s(g),
                sha256: s(g),
                dest: s(g),
                unpack: bool::arbitrary(g),
            })
            .collect(),
    })
}

/// A health check of any kind (docs/design.md#issue-45).
fn check_arb(g: &mut Gen) -> regent_core::launch::CheckSpec {
    use regent_core::launch::CheckKind;
    let kind = match u8::arbitrary(g) % 4 {
        0 => CheckKind::Http { port: s(g), path: s(g), expect: <(u16, u16)>::arbitrary(g) },
        1 => CheckKind::Tcp { port: s(g) },
        2 => CheckKind::Exec { command: strings(g) },
        _ => CheckKind::Manual { ttl_ms: u64::arbitrary(g) },
    };
    regent_core::launch::CheckSpec {
        name: s(g),
        kind,
        interval_ms: u64::arbitrary(g),
        timeout_ms: u64::arbitrary(g),
        grace_ms: u64::arbitrary(g),
        failures: u32::arbitrary(g),
    }
}

/// Launch options with every field set: a cwd, a kill grace, an artifact
/// to unpack and one to place, a user, a disconnect rule, an http check.
fn golden_launch() -> regent_core::launch::LaunchSpec {
    regent_core::launch::LaunchSpec {
        disconnect: Some(regent_core::launch::Disconnect::after_ms(30_000)),
        checks: vec![regent_core::launch::CheckSpec::new(regent_core::launch::CheckKind::Http {
            port: "http".into(),
            path: "/health".into(),
            expect: (200, 299),
        })],
        logs: Default::default(),
        resources: Default::default(),
        ports: Default::default(),
        user: Some("alice".into()),
        cwd: Some("work".into()),
        kill_grace_ms: Some(10_000),
        artifacts: vec![
            regent_core::launch::Artifact {
                source: "https://files.example/tool-1.2.tar.gz".into(),
                sha256: "5e".repeat(32),
                dest: "bin".into(),
                unpack: true,
            },
            regent_core::launch::Artifact {
                source: "file:///srv/data.csv".into(),
                sha256: "0a".repeat(32),
                dest: String::new(),
                unpack: false,
            },
        ],
    }
}

fn env(g: &mut Gen) -> Vec<(String, String)> {
    (0..usize::arbitrary(g) % 3).map(|_| (s(g), s(g))).collect()
}

fn exec_info(g: &mut Gen) -> ExecutorInfo {
    ExecutorInfo {
        resources: Default::default(),
        host: Default::default(),
        ports: Default::default(),
        id: ExecutorId(s(g)),
        group: s(g),
        slot: u32::arbitrary(g),
        worker: if bool::arbitrary(g) { Some(WorkerId(s(g))) } else { None },
        state: exec_state(g),
    }
}

fn exec_report(g: &mut Gen) -> ExecutorReport {
    use regent_core::protocol::{HealthReport, HealthStatus};
    let statuses = [HealthStatus::Pending, HealthStatus::Passing, HealthStatus::Failing];
    ExecutorReport {
        health: bool::arbitrary(g).then(|| HealthReport {
            status: *g.choose(&statuses).unwrap(),
            for_ms: u64::arbitrary(g),
            detail: s(g),
        }),
        ran_ms: None,
        resources: Default::default(),
        ports: Default::default(),
        id: ExecutorId(s(g)),
        framework: FrameworkId(s(g)),
        cores: u32::arbitrary(g),
        memory_mb: u64::arbitrary(g),
        state: exec_state(g),
    }
}

fn log_stream(g: &mut Gen) -> LogStream {
    if bool::arbitrary(g) {
        LogStream::Stdout
    } else {
        LogStream::Stderr
    }
}

/// Number of `Message` variants; a new variant must be added to `arb` and
/// to `golden_samples`.
const VARIANTS: u8 = 63;

fn opt_u64(g: &mut Gen) -> Option<u64> {
    if bool::arbitrary(g) {
        Some(u64::arbitrary(g))
    } else {
        None
    }
}

fn usage_arb(g: &mut Gen) -> Usage {
    Usage { memory_bytes: opt_u64(g), memory_peak_bytes: opt_u64(g), cpu_usec: opt_u64(g) }
}

const JOB_CHANGES: [api::JobChange; 4] = [
    api::JobChange::Created,
    api::JobChange::Updated,
    api::JobChange::Unchanged,
    api::JobChange::Replayed,
];

const SLOT_PHASES: [api::SlotPhase; 8] = [
    api::SlotPhase::Waiting,
    api::SlotPhase::Backoff,
    api::SlotPhase::Launching,
    api::SlotPhase::Running,
    api::SlotPhase::Stopping,
    api::SlotPhase::Completed,
    api::SlotPhase::Failed,
    api::SlotPhase::Killed,
];

fn opt_s(g: &mut Gen) -> Option<String> {
    if bool::arbitrary(g) {
        Some(s(g))
    } else {
        None
    }
}

fn job_submission_arb(g: &mut Gen) -> api::JobSubmission {
    api::JobSubmission {
        job: FrameworkId(s(g)),
        name: s(g),
        groups: (0..usize::arbitrary(g) % 3).map(|_| group_spec_arb(g)).collect(),
        key: opt_s(g),
        expect_version: opt_u64(g),
        max_parallel: u32::arbitrary(g),
        tenant: opt_s(g),
    }
}

fn job_status_arb(g: &mut Gen) -> api::JobStatus {
    api::JobStatus {
        tenant: None,
        job: FrameworkId(s(g)),
        name: s(g),
        version: opt_u64(g),
        state: *g.choose(&FrameworkState::ALL).expect("states"),
        groups: (0..usize::arbitrary(g) % 3)
            .map(|_| api::GroupStatus {
                group: s(g),
                desired: u32::arbitrary(g),
                placed: u32::arbitrary(g),
                running: u32::arbitrary(g),
                done: u32::arbitrary(g),
                rolling: bool::arbitrary(g),
                priority: u8::arbitrary(g),
                stop_after_ms: opt_u64(g),
                deployment: None,
                slots: (0..usize::arbitrary(g) % 3)
                    .map(|_| api::SlotStatus {
                        health: None,
                        preempted_by: opt_s(g),
                        slot: u32::arbitrary(g),
                        phase: *g.choose(&SLOT_PHASES).expect("phases"),
                        executor: if bool::arbitrary(g) { Some(ExecutorId(s(g))) } else { None },
                        worker: if bool::arbitrary(g) { Some(WorkerId(s(g))) } else { None },
                        reason: opt_s(g),
                        reasons: wait_reasons_arb(g),
                    })
                    .collect(),
            })
            .collect(),
    }
}

fn tenant_arb(g: &mut Gen) -> tenants::Tenant {
    let opt = |g: &mut Gen| if bool::arbitrary(g) { Some(u64::arbitrary(g)) } else { None };
    tenants::Tenant {
        name: s(g),
        guarantee: tenants::Dims { cores: opt(g), memory_mb: opt(g), resources: vec![] },
        limit: tenants::Dims {
            cores: opt(g),
            memory_mb: opt(g),
            resources: vec![(s(g), u64::arbitrary(g))],
        },
        weight: u32::arbitrary(g),
    }
}

#[derive(Clone, Debug)]
struct Arb(Message);

impl Arbitrary for Arb {
    fn arbitrary(g: &mut Gen) -> Self {
        let e = |g: &mut Gen| Epoch(u64::arbitrary(g));
        Arb(match u8::arbitrary(g) % VARIANTS {
            0 => Message::Hello(Hello {
                version: u16::arbitrary(g),
                cluster: s(g),
                role: role(g),
                node: s(g),
            }),
            1 => Message::HelloReply(HelloReply {
                role: role(g),
                master: MasterId(s(g)),
                leading: bool::arbitrary(g),
                epoch: e(g),
                leader: if bool::arbitrary(g) { Some(hint(g)) } else { None },
                masters: addrs(g),
            }),
            2 => Message::RegisterWorker(RegisterWorker {
                users: Default::default(),
                resources: Default::default(),
                host: Default::default(),
                ports: Default::default(),
                worker: WorkerId(s(g)),
                incarnation: Incarnation(u64::arbitrary(g)),
                cores: u32::arbitrary(g),
                memory_mb: u64::arbitrary(g),
                executors: (0..usize::arbitrary(g) % 3)
                    .map(|_| ExecutorReport {
                        health: None,
                        ran_ms: None,
                        resources: Default::default(),
                        ports: Default::default(),
                        id: ExecutorId(s(g)),
                        framework: FrameworkId(s(g)),
                        cores: u32::arbitrary(g),
                        memory_mb: u64::arbitrary(g),
                        state: exec_state(g),
                    })
                    .collect(),
                epoch_seen: e(g),
                launch_seen: u64::arbitrary(g),
                attributes: (0..usize::arbitrary(g) % 3).map(|_| (s(g), s(g))).collect(),
            }),
            3 => Message::WorkerHeartbeat { incarnation: Incarnation(u64::arbitrary(g)) },
            4 => Message::Registered {
                epoch: e(g),
                heartbeat_interval: Millis(u64::arbitrary(g)),
                duplicate: bool::arbitrary(g),
                masters: addrs(g),
            },
            5 => Message::NotLeader {
                epoch: e(g),
                leader: if bool::arbitrary(g) { Some(hint(g)) } else { None },
            },
            6 => Message::HeartbeatAck { epoch: e(g) },
            7 => Message::ReconnectWorker { epoch: e(g) },
            8 => Message::Shutdown { epoch: e(g), reason: s(g) },
            9 => Message::MasterChanged { epoch: e(g), leader: hint(g), masters: addrs(g) },
            10 => Message::LeaderSuspended { epoch: e(g) },
            11 => Message::Subscribe(Subscribe {
                framework: if bool::arbitrary(g) { Some(FrameworkId(s(g))) } else { None },
                name: s(g),
                instance: InstanceId(u64::arbitrary(g)),
                attempt: u64::arbitrary(g),
                failover_timeout: Millis(u64::arbitrary(g)),
                tenant: opt_s(g),
            }),
            12 => Message::DeclareGroup { request: u64::arbitrary(g), spec: group_spec_arb(g) },
            13 => Message::KillExecutor { request: u64::arbitrary(g), executor: ExecutorId(s(g)) },
            14 => Message::Teardown { request: u64::arbitrary(g) },
            15 => Message::Subscribed {
                epoch: e(g),
                framework: FrameworkId(s(g)),
                heartbeat_interval: Millis(u64::arbitrary(g)),
                executors: (0..usize::arbitrary(g) % 3).map(|_| exec_info(g)).collect(),
            },
            16 => Message::FrameworkHeartbeat { epoch: e(g) },
            17 => Message::FrameworkError {
                epoch: e(g),
                message: s(g),
                failed_over_to: if bool::arbitrary(g) {
                    Some(InstanceId(u64::arbitrary(g)))
                } else {
                    None
                },
            },
            18 => Message::RequestAccepted { epoch: e(g), request: u64::arbitrary(g) },
            19 => Message::RequestRefused { epoch: e(g), request: u64::arbitrary(g), reason: s(g) },
            20 => Message::ExecutorUpdate { epoch: e(g), info: exec_info(g) },
            21 => Message::SlotFailed {
                epoch: e(g),
                group: s(g),
                slot: u32::arbitrary(g),
                reason: s(g),
            },
            22 => Message::LaunchExecutor {
                epoch: e(g),
                executor: ExecutorId(s(g)),
                framework: FrameworkId(s(g)),
                spec: ExecutorSpec {
                    command: strings(g),
                    env: env(g),
                    cores: u32::arbitrary(g),
                    memory_mb: u64::arbitrary(g),
                    launch: launch_spec(g),
                },
                launch: u64::arbitrary(g),
            },
            23 => Message::KillExecutorOnWorker { epoch: e(g), executor: ExecutorId(s(g)) },
            24 => Message::ExecutorStatus {
                incarnation: Incarnation(u64::arbitrary(g)),
                report: exec_report(g),
            },
            25 => Message::ExecutorStatusAck { epoch: e(g), executor: ExecutorId(s(g)) },
            26 => Message::StateRequest,
            27 => Message::StateReply(Box::new(cluster_state(g))),
            28 => Message::RemoveWorker { request: u64::arbitrary(g), worker: WorkerId(s(g)) },
            29 => {
                Message::KillFramework { request: u64::arbitrary(g), framework: FrameworkId(s(g)) }
            }
            30 => Message::FrameworkHeartbeatAck { epoch: e(g) },
            31 => Message::StepDown { request: u64::arbitrary(g) },
            32 => Message::SubscribeRefused { epoch: e(g), reason: s(g) },
            33 => Message::Callback { addr: Addr(s(g)) },
            34 => Message::LogRequest {
                request: u64::arbitrary(g),
                executor: ExecutorId(s(g)),
                stream: log_stream(g),
                offset: Option::<u64>::arbitrary(g),
                max: u32::arbitrary(g),
            },
            35 => Message::ReadLog {
                epoch: e(g),
                relay: u64::arbitrary(g),
                executor: ExecutorId(s(g)),
                stream: log_stream(g),
                offset: Option::<u64>::arbitrary(g),
                max: u32::arbitrary(g),
            },
            36 => Message::LogData {
                relay: u64::arbitrary(g),
                live: bool::arbitrary(g),
                read: if bool::arbitrary(g) {
                    LogRead::Chunk {
                        offset: u64::arbitrary(g),
                        data: Vec::<u8>::arbitrary(g),
                        size: u64::arbitrary(g),
                    }
                } else {
                    LogRead::Failed { reason: s(g) }
                },
            },
            37 => Message::LogChunk {
                epoch: e(g),
                request: u64::arbitrary(g),
                offset: u64::arbitrary(g),
                data: Vec::<u8>::arbitrary(g),
                size: u64::arbitrary(g),
                finished: bool::arbitrary(g),
            },
            38 => Message::CordonWorker { request: u64::arbitrary(g), worker: WorkerId(s(g)) },
            39 => Message::UncordonWorker { request: u64::arbitrary(g), worker: WorkerId(s(g)) },
            40 => Message::DrainWorker {
                request: u64::arbitrary(g),
                worker: WorkerId(s(g)),
                deadline: Millis(u64::arbitrary(g)),
            },
            41 => Message::ScaleGroup {
                request: u64::arbitrary(g),
                framework: FrameworkId(s(g)),
                group: s(g),
                slots: u32::arbitrary(g),
                remove: (0..usize::arbitrary(g) % 3).map(|_| ExecutorId(s(g))).collect(),
                stop: bool::arbitrary(g).then(|| regent_core::api::Stop {
                    signal: signal_arb(g),
                    deadline: Millis(u64::arbitrary(g)),
                }),
            },
            42 => Message::OperatorKillExecutor {
                request: u64::arbitrary(g),
                executor: ExecutorId(s(g)),
                refill: bool::arbitrary(g),
            },
            43 => Message::StopExecutorOnWorker {
                epoch: e(g),
                executor: ExecutorId(s(g)),
                grace: Millis(u64::arbitrary(g)),
                signal: signal_arb(g),
            },
            44 => Message::GroupScaled { epoch: e(g), group: s(g), slots: u32::arbitrary(g) },
            45 => Message::RegisterRefused { epoch: e(g), reason: s(g) },
            46 => Message::PlanRequest {
                request: u64::arbitrary(g),
                groups: (0..usize::arbitrary(g) % 3).map(|_| group_spec_arb(g)).collect(),
                tenant: Option::<String>::arbitrary(g),
            },
            47 => Message::WorkerUsage {
                incarnation: Incarnation(u64::arbitrary(g)),
                usage: WorkerUsage {
                    executors: (0..usize::arbitrary(g) % 3)
                        .map(|_| ExecutorUsage { executor: ExecutorId(s(g)), usage: usage_arb(g) })
                        .collect(),
                    work_dir_free_bytes: opt_u64(g),
                    work_dir_total_bytes: opt_u64(g),
                },
            },
            50 => Message::SubmitJob { request: u64::arbitrary(g), job: job_submission_arb(g) },
            51 => Message::JobAccepted {
                epoch: e(g),
                request: u64::arbitrary(g),
                job: FrameworkId(s(g)),
                version: u64::arbitrary(g),
                change: *g.choose(&JOB_CHANGES).expect("changes"),
            },
            52 => Message::DeleteJob { request: u64::arbitrary(g), job: FrameworkId(s(g)) },
            53 => Message::JobsRequest {
                request: u64::arbitrary(g),
                job: if bool::arbitrary(g) { Some(FrameworkId(s(g))) } else { None },
            },
            54 => Message::JobsReply {
                epoch: e(g),
                request: u64::arbitrary(g),
                jobs: (0..usize::arbitrary(g) % 3).map(|_| job_status_arb(g)).collect(),
            },
            55 => Message::RevokeToken {
                request: u64::arbitrary(g),
                id: regent_core::token::TokenId(u128::arbitrary(g).to_be_bytes()),
                expires_ms: Option::<u64>::arbitrary(g),
            },
            56 => Message::RetireKeys { request: u64::arbitrary(g), through: u32::arbitrary(g) },
            57 => Message::SetTenant { request: u64::arbitrary(g), tenant: tenant_arb(g) },
            58 => Message::TenantsRequest { request: u64::arbitrary(g) },
            59 => Message::TenantsReply {
                epoch: e(g),
                request: u64::arbitrary(g),
                tenants: (0..usize::arbitrary(g) % 3)
                    .map(|_| tenants::TenantView {
                        tenant: tenant_arb(g),
                        set: bool::arbitrary(g),
                        held: tenants::Held {
                            cores: u64::arbitrary(g),
                            memory_mb: u64::arbitrary(g),
                            resources: vec![(s(g), u64::arbitrary(g))],
                        },
                        dominant_share_ppm: u32::arbitrary(g),
                        frameworks: u32::arbitrary(g),
                    })
                    .collect(),
            },
            60 => Message::PromoteDeployment {
                request: u64::arbitrary(g),
                job: FrameworkId(s(g)),
                group: if bool::arbitrary(g) { Some(s(g)) } else { None },
            },
            61 => Message::ReportHealth {
                request: u64::arbitrary(g),
                executor: ExecutorId(s(g)),
                check: s(g),
                passing: bool::arbitrary(g),
                detail: s(g),
            },
            62 => Message::HealthOnWorker {
                epoch: e(g),
                executor: ExecutorId(s(g)),
                check: u8::arbitrary(g),
                passing: bool::arbitrary(g),
                detail: s(g),
            },
            _ => Message::PlanReply {
                epoch: e(g),
                request: u64::arbitrary(g),
                groups: (0..usize::arbitrary(g) % 3)
                    .map(|_| GroupPlan {
                        group: s(g),
                        slots: u32::arbitrary(g),
                        placed: (0..usize::arbitrary(g) % 3)
                            .map(|_| (u32::arbitrary(g), WorkerId(s(g))))
                            .collect(),
                        placed_omitted: u32::arbitrary(g),
                        unplaced: u32::arbitrary(g),
                        reason: if bool::arbitrary(g) { Some(s(g)) } else { None },
                        reasons: wait_reasons_arb(g),
                        victims: (0..usize::arbitrary(g) % 2)
                            .map(|_| regent_core::protocol::PlannedVictim {
                                executor: ExecutorId(s(g)),
                                framework: FrameworkId(s(g)),
                                group: s(g),
                                worker: WorkerId(s(g)),
                                tenant: s(g),
                                why: s(g),
                                for_slot: u32::arbitrary(g),
                            })
                            .collect(),
                        preemption: if bool::arbitrary(g) { Some(s(g)) } else { None },
                    })
                    .collect(),
            },
        })
    }
}

/// Up to three reasons a slot waits, of any kind.
fn wait_reasons_arb(g: &mut Gen) -> Vec<api::WaitReason> {
    use api::WaitReason as W;
    (0..usize::arbitrary(g) % 4)
        .map(|_| match u8::arbitrary(g) % 20 {
            0 => W::NoWorkers { registered: u32::arbitrary(g) },
            1 => W::NoMatchingWorker { constraint: s(g) },
            2 => W::UserNotOffered { user: s(g) },
            3 => W::TooLarge {
                dimension: s(g),
                needed: u64::arbitrary(g),
                largest: u64::arbitrary(g),
            },
            4 => W::Shortfall {
                dimension: s(g),
                needed: u64::arbitrary(g),
                most_free: u64::arbitrary(g),
                worker: if bool::arbitrary(g) { Some(WorkerId(s(g))) } else { None },
            },
            5 => W::PortsExhausted { needed: u32::arbitrary(g), most_free: u32::arbitrary(g) },
            6 => W::ExecutorsPerWorker { workers: u32::arbitrary(g), limit: u32::arbitrary(g) },
            7 => W::NoWorkerFitsAll { dimensions: vec![s(g), s(g)], workers: u32::arbitrary(g) },
            8 => W::Cordoned { workers: u32::arbitrary(g) },
            9 => W::Draining { workers: u32::arbitrary(g) },
            10 => W::Backoff { until_ms: u64::arbitrary(g), in_ms: u64::arbitrary(g) },
            11 => W::Recovering {},
            12 => W::NotDurable {},
            13 => W::Refused { problem: s(g) },
            14 => W::PlacedNext {},
            15 => W::TenantLimit {
                tenant: s(g),
                dimension: s(g),
                in_use: u64::arbitrary(g),
                limit: u64::arbitrary(g),
            },
            16 => W::BehindPriority { slots: u32::arbitrary(g) },
            18 => W::WaitingForPreempted { executors: u32::arbitrary(g) },
            _ => W::SingletonHold { until_ms: u64::arbitrary(g), in_ms: u64::arbitrary(g) },
        })
        .collect()
}

fn decode_all(bytes: &[u8], cuts: &[usize]) -> Result<Vec<Message>, DecodeError> {
    let mut d = Decoder::new(DecoderConfig::default());
    let mut out = Vec::new();
    let mut at = 0;
    let mut points: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
    points.sort();
    points.push(bytes.len());
    for p in points {
        d.feed(&bytes[at..p])?;
        at = p;
        while let Some(m) = d.next_message()? {
            out.push(m);
        }
    }
    Ok(out)
}

#[test]
fn every_message_round_trips_through_any_chunking() {
    fn prop(msgs: Vec<Arb>, cuts: Vec<usize>) -> bool {
        let msgs: Vec<Message> = msgs
            .into_iter()
            .map(|a| a.0)
            // A Hello of another version is refused by design (tested below).
            .filter(|m| !matches!(m, Message::Hello(h) if h.version != PROTOCOL_VERSION))
            .collect();
        let mut bytes = Vec::new();
        for m in &msgs {
            codec::encode_into(m, &mut bytes);
        }
        decode_all(&bytes, &cuts).map(|got| got == msgs).unwrap_or(false)
    }
    QuickCheck::new().tests(2_000).quickcheck(prop as fn(Vec<Arb>, Vec<usize>) -> bool);
}

#[test]
fn decoder_never_panics_on_arbitrary_bytes() {
    fn prop(bytes: Vec<u8>, cuts: Vec<usize>) -> bool {
        let _ = decode_all(&bytes, &cuts);
        true
    }
    QuickCheck::new().tests(5_000).quickcheck(prop as fn(Vec<u8>, Vec<usize>) -> bool);
    // Also with plausible prefixes: valid frames with corrupted bodies.
    fn corrupt(m: Arb, flips: Vec<(usize, u8)>) -> bool {
        let mut bytes = codec::encode(&m.0);
        for (i, x) in flips {
            let n = bytes.len();
            bytes[4 + i % (n - 4).max(1)] ^= x;
        }
        let _ = decode_all(&bytes, &[3, 7]);
        true
    }
    QuickCheck::new().tests(5_000).quickcheck(corrupt as fn(Arb, Vec<(usize, u8)>) -> bool);
}

#[test]
fn oversized_length_prefix_is_rejected_before_buffering_the_body() {
    let mut d = Decoder::new(DecoderConfig { max_frame: 1024, cluster: None });
    // 4 GiB announced: refused as soon as the prefix is complete.
    assert_eq!(d.feed(&[0xff, 0xff]), Ok(()));
    let err = d.feed(&[0xff, 0xff]).unwrap_err();
    assert_eq!(err, DecodeError::FrameTooLarge { len: u64::from(u32::MAX), max: 1024 });
    assert!(err.to_string().contains("4294967295") && err.to_string().contains("1024"));
    assert_eq!(d.buffered(), 0, "nothing kept for the refused frame");
    // The decoder stays failed: the connection must be closed.
    assert!(d.feed(&[0; 8]).is_err());
    assert!(d.next_message().is_err());
    // A frame exactly at the limit is fine.
    let mut d = Decoder::new(DecoderConfig { max_frame: 1024, cluster: None });
    let mut f = 1024u32.to_be_bytes().to_vec();
    f.extend(std::iter::repeat_n(0x7fu8, 1024));
    d.feed(&f).unwrap();
    assert!(matches!(d.next_message(), Err(DecodeError::Malformed { len: 1024, .. })));
}

#[test]
fn malformed_unsupported_version_and_wrong_cluster_are_named() {
    let cfg = DecoderConfig { max_frame: 1 << 16, cluster: Some("prod".into()) };
    let hello = |version, cluster: &str| {
        codec::encode(&Message::Hello(Hello {
            version,
            cluster: cluster.into(),
            role: Role::Worker,
            node: "w".into(),
        }))
    };
    let mut d = Decoder::new(cfg.clone());
    let other = PROTOCOL_VERSION + 1;
    d.feed(&hello(other, "prod")).unwrap();
    let e = d.next_message().unwrap_err();
    assert_eq!(e, DecodeError::UnsupportedVersion { got: other, supported: PROTOCOL_VERSION });
    assert!(e.to_string().contains(&format!("version {other}")));
    let mut d = Decoder::new(cfg.clone());
    d.feed(&hello(PROTOCOL_VERSION, "staging")).unwrap();
    let e = d.next_message().unwrap_err();
    assert!(
        matches!(&e, DecodeError::WrongCluster { got, expected } if got == "staging" && expected == "prod")
    );
    assert!(e.to_string().contains("staging") && e.to_string().contains("prod"));
    let mut d = Decoder::new(cfg.clone());
    d.feed(&hello(PROTOCOL_VERSION, "prod")).unwrap();
    assert!(matches!(d.next_message(), Ok(Some(Message::Hello(_)))));
    let mut d = Decoder::new(cfg.clone());
    d.feed(&[0, 0, 0, 3, 200, 1, 2]).unwrap();
    let e = d.next_message().unwrap_err();
    assert!(matches!(e, DecodeError::Malformed { len: 3, .. }), "{e}");
    // Trailing bytes inside a frame are malformed too.
    let mut f = codec::encode(&Message::HeartbeatAck { epoch: Epoch(1) });
    f.push(0);
    let n = (f.len() - 4) as u32;
    f[..4].copy_from_slice(&n.to_be_bytes());
    let mut d = Decoder::new(cfg);
    d.feed(&f).unwrap();
    let e = d.next_message().unwrap_err();
    assert!(e.to_string().contains("trailing"), "{e}");
}

fn group_spec() -> GroupSpec {
    GroupSpec {
        group: "web".into(),
        slots: 2,
        command: vec!["/usr/bin/server".into(), "--port=8080".into()],
        env: vec![("RUST_LOG".into(), "info".into())],
        cores: 2,
        memory_mb: 512,
        policy: GroupPolicy {
            restart: RestartPolicy {
                mode: RestartMode::Service,
                attempts: Some(5),
                delay_ms: 1_000,
                max_delay_ms: 60_000,
                healthy_after_ms: 30_000,
            },
            placement: Some(Placement::Pack),
            constraints: vec![
                Constraint::parse("disk=ssd").unwrap(),
                Constraint::parse("rack!=r9").unwrap(),
                Constraint::parse("gpu").unwrap(),
                Constraint::parse("zone in [z1, z2]").unwrap(),
                Constraint::parse("rack not in [r8]").unwrap(),
            ],
            spread: Some("rack".into()),
            priority: 80,
            update: Some(Box::new(regent_core::policy::UpdatePolicy {
                max_parallel: 2,
                min_healthy_time_ms: 5_000,
                healthy_deadline_ms: 60_000,
                progress_deadline_ms: 120_000,
                canary: 1,
                auto_promote: false,
                auto_revert: true,
            })),
        },
        launch: Box::new(golden_launch()),
    }
}

/// One fixed sample of every message variant, named for its golden file.
fn golden_samples() -> Vec<(&'static str, Message)> {
    let hint =
        LeaderHint { id: MasterId::new("m1"), addr: Addr::new("10.0.0.1:7077"), epoch: Epoch(42) };
    let masters = vec![Addr::new("10.0.0.1:7077"), Addr::new("10.0.0.2:7077")];
    let exec_info = ExecutorInfo {
        resources: Default::default(),
        host: Default::default(),
        ports: Default::default(),
        id: ExecutorId::new("e1"),
        group: "web".into(),
        slot: 0,
        worker: Some(WorkerId::new("w1")),
        state: ExecutorState::Running,
    };
    vec![
        (
            "hello",
            Message::Hello(Hello {
                version: PROTOCOL_VERSION,
                cluster: "regent".into(),
                role: Role::Worker,
                node: "w1".into(),
            }),
        ),
        (
            "hello_reply",
            Message::HelloReply(HelloReply {
                role: Role::Master,
                master: MasterId::new("m1"),
                leading: true,
                epoch: Epoch(42),
                leader: Some(hint.clone()),
                masters: masters.clone(),
            }),
        ),
        (
            "register_worker",
            Message::RegisterWorker(RegisterWorker {
                users: Default::default(),
                resources: Default::default(),
                host: Default::default(),
                ports: Default::default(),
                worker: WorkerId::new("w1"),
                incarnation: Incarnation(0xdead_beef),
                cores: 8,
                memory_mb: 16_384,
                executors: vec![ExecutorReport {
                    health: None,
                    ran_ms: None,
                    resources: Default::default(),
                    ports: Default::default(),
                    id: ExecutorId::new("e1"),
                    framework: FrameworkId::new("f1"),
                    cores: 2,
                    memory_mb: 512,
                    state: ExecutorState::Exited { code: 3 },
                }],
                epoch_seen: Epoch(41),
                launch_seen: 17,
                attributes: vec![("disk".into(), "ssd".into()), ("rack".into(), "r1".into())],
            }),
        ),
        ("worker_heartbeat", Message::WorkerHeartbeat { incarnation: Incarnation(0xdead_beef) }),
        (
            "registered",
            Message::Registered {
                epoch: Epoch(42),
                heartbeat_interval: Millis(1_000),
                duplicate: true,
                masters: masters.clone(),
            },
        ),
        ("not_leader", Message::NotLeader { epoch: Epoch(42), leader: Some(hint.clone()) }),
        ("heartbeat_ack", Message::HeartbeatAck { epoch: Epoch(42) }),
        ("reconnect_worker", Message::ReconnectWorker { epoch: Epoch(42) }),
        (
            "shutdown",
            Message::Shutdown { epoch: Epoch(42), reason: "worker id w1 conflict".into() },
        ),
        ("master_changed", Message::MasterChanged { epoch: Epoch(43), leader: hint, masters }),
        ("leader_suspended", Message::LeaderSuspended { epoch: Epoch(42) }),
        (
            "subscribe",
            Message::Subscribe(Subscribe {
                framework: Some(FrameworkId::new("f1")),
                name: "analytics".into(),
                instance: InstanceId(0x5eed),
                attempt: 3,
                failover_timeout: Millis(60_000),
                tenant: None,
            }),
        ),
        ("declare_group", Message::DeclareGroup { request: 7, spec: group_spec() }),
        ("kill_executor", Message::KillExecutor { request: 8, executor: ExecutorId::new("e1") }),
        ("teardown", Message::Teardown { request: 9 }),
        (
            "subscribed",
            Message::Subscribed {
                epoch: Epoch(42),
                framework: FrameworkId::new("f1"),
                heartbeat_interval: Millis(1_000),
                executors: vec![
                    exec_info.clone(),
                    ExecutorInfo {
                        resources: Default::default(),
                        host: Default::default(),
                        ports: Default::default(),
                        id: ExecutorId::new("e2"),
                        group: "web".into(),
                        slot: 1,
                        worker: None,
                        state: ExecutorState::Launching,
                    },
                ],
            },
        ),
        ("framework_heartbeat", Message::FrameworkHeartbeat { epoch: Epoch(42) }),
        (
            "framework_error",
            Message::FrameworkError {
                epoch: Epoch(42),
                message: "framework f1 failed over".into(),
                failed_over_to: Some(InstanceId(0xbeef)),
            },
        ),
        ("request_accepted", Message::RequestAccepted { epoch: Epoch(42), request: 7 }),
        (
            "request_refused",
            Message::RequestRefused {
                epoch: Epoch(42),
                request: 8,
                reason: "no such executor e9".into(),
            },
        ),
        (
            "executor_update",
            Message::ExecutorUpdate {
                epoch: Epoch(42),
                info: ExecutorInfo {
                    state: ExecutorState::Failed { reason: "exec format error".into() },
                    ..exec_info
                },
            },
        ),
        (
            "slot_failed",
            Message::SlotFailed {
                epoch: Epoch(42),
                group: "web".into(),
                slot: 1,
                reason: "no worker has 2 cores and 512 MiB free".into(),
            },
        ),
        (
            "launch_executor",
            Message::LaunchExecutor {
                epoch: Epoch(42),
                executor: ExecutorId::new("e1"),
                framework: FrameworkId::new("f1"),
                spec: ExecutorSpec {
                    command: group_spec().command,
                    env: group_spec().env,
                    cores: 2,
                    memory_mb: 512,
                    launch: Box::new(golden_launch()),
                },
                launch: 18,
            },
        ),
        (
            "kill_executor_on_worker",
            Message::KillExecutorOnWorker { epoch: Epoch(42), executor: ExecutorId::new("e1") },
        ),
        (
            "executor_status",
            Message::ExecutorStatus {
                incarnation: Incarnation(0xdead_beef),
                report: ExecutorReport {
                    // Its checks failing for 4.2 s (docs/design.md#issue-45).
                    health: Some(regent_core::protocol::HealthReport {
                        status: regent_core::protocol::HealthStatus::Failing,
                        for_ms: 4_200,
                        detail: "http: GET /health answered 500".into(),
                    }),
                    ran_ms: None,
                    resources: Default::default(),
                    ports: Default::default(),
                    id: ExecutorId::new("e1"),
                    framework: FrameworkId::new("f1"),
                    cores: 2,
                    memory_mb: 512,
                    state: ExecutorState::Killed,
                },
            },
        ),
        (
            "executor_status_ack",
            Message::ExecutorStatusAck { epoch: Epoch(42), executor: ExecutorId::new("e1") },
        ),
        ("state_request", Message::StateRequest),
        (
            "state_reply",
            Message::StateReply(Box::new(ClusterState {
                master: MasterId::new("m1"),
                status: MasterStatus::Alive,
                epoch: Epoch(42),
                leader: None,
                workers: vec![WorkerView {
                    users: Default::default(),
                    resources: Default::default(),
                    usage: Some(WorkerUsageView {
                        memory_bytes: 1 << 26,
                        cpu_usec: 2_500_000,
                        work_dir_free_bytes: Some(50 << 30),
                        work_dir_total_bytes: Some(100 << 30),
                        received_at: Millis(9_000),
                    }),
                    host: Default::default(),
                    ports: Default::default(),
                    ports_used: Default::default(),
                    id: WorkerId::new("w1"),
                    state: WorkerState::Alive,
                    cores: 8,
                    cores_used: 2,
                    memory_mb: 16_384,
                    memory_used_mb: 512,
                    cordoned: true,
                    drain: Some(DrainState::Draining),
                    drain_deadline_ms: Some(1_764_600_000_000),
                    executors: 1,
                    attributes: vec![("rack".into(), "r1".into())],
                }],
                frameworks: vec![FrameworkView {
                    tenant: None,
                    id: FrameworkId::new("f1"),
                    name: "app".into(),
                    state: FrameworkState::Active,
                    connected: true,
                    groups: vec![GroupView {
                        name: "main".into(),
                        slots: 3,
                        declared: 2,
                        running: 1,
                        waiting: 1,
                        last_end: Some("slot 2: exited 3".into()),
                        unplaced: 1,
                        reasons: vec![api::WaitReason::NoMatchingWorker {
                            constraint: "rack=r9".into(),
                        }],
                        deployment: Some(regent_core::api::DeploymentView {
                            seq: 3,
                            state: "canary".into(),
                            reason: None,
                            revert_of: None,
                            healthy: 0,
                            open: 3,
                            canary: 1,
                            max_parallel: 1,
                            min_healthy_time_ms: 10_000,
                            target_digest: 0x1234_5678,
                            revert_to_digest: Some(0x9abc_def0),
                            placed: 1,
                            old: 2,
                            canaries: vec![0],
                            auto_revert: true,
                            auto_promote: false,
                            healthy_deadline_ms: 300_000,
                            progress_deadline_ms: 600_000,
                            started_ms: 1_700_000_000_000,
                            progress_ms: 1_700_000_000_000,
                            progress_due_ms: Some(1_700_000_600_000),
                            reverts_because: None,
                        }),
                    }],
                }],
                executors: vec![ExecutorView {
                    health: Some(regent_core::protocol::HealthReport {
                        status: regent_core::protocol::HealthStatus::Failing,
                        for_ms: 1_500,
                        detail: "http: GET /health answered 500".into(),
                    }),
                    preempted_by: Some("batch/g".into()),
                    resources: Default::default(),
                    usage: Some(Usage {
                        memory_bytes: Some(1 << 26),
                        memory_peak_bytes: Some(1 << 27),
                        cpu_usec: Some(2_500_000),
                    }),
                    ports: Default::default(),
                    id: ExecutorId::new("e1"),
                    framework: FrameworkId::new("f1"),
                    worker: Some(WorkerId::new("w1")),
                    state: ExecutorState::Running,
                }],
                messages: 1000,
                rejected: 3,
                history: vec![FinishedFramework {
                    id: FrameworkId::new("f0"),
                    name: "nightly".into(),
                    outcome: FrameworkOutcome::Completed,
                    finished_at_ms: 1_764_603_000_000,
                    registered_at_ms: Some(1_764_602_000_000),
                    slots: vec![FinishedSlot {
                        group: "g".into(),
                        slot: 0,
                        executor: Some(ExecutorId::new("f0/g#0#1.1")),
                        state: Some(ExecutorState::Exited { code: 0 }),
                        attempts: 1,
                        preempted_by: Some("batch/g".into()),
                    }],
                    slots_omitted: 0,
                }],
                history_omitted: 0,
            })),
        ),
        ("remove_worker", Message::RemoveWorker { request: 7, worker: WorkerId::new("w9") }),
        (
            "kill_framework",
            Message::KillFramework { request: 8, framework: FrameworkId::new("f1") },
        ),
        ("framework_heartbeat_ack", Message::FrameworkHeartbeatAck { epoch: Epoch(42) }),
        ("step_down", Message::StepDown { request: 9 }),
        (
            "subscribe_refused",
            Message::SubscribeRefused {
                epoch: Epoch(42),
                reason: "framework name of 300 bytes; the limit is 256 bytes".into(),
            },
        ),
        ("callback", Message::Callback { addr: Addr::new("10.0.0.7:7078") }),
        (
            "log_request",
            Message::LogRequest {
                request: 10,
                executor: ExecutorId::new("fw-1/etl#0#42.1"),
                stream: LogStream::Stderr,
                offset: Some(65_536),
                max: 65_536,
            },
        ),
        (
            "read_log",
            Message::ReadLog {
                epoch: Epoch(42),
                relay: 3,
                executor: ExecutorId::new("fw-1/etl#0#42.1"),
                stream: LogStream::Stdout,
                offset: None,
                max: 4_096,
            },
        ),
        (
            "log_data",
            Message::LogData {
                relay: 3,
                live: true,
                read: LogRead::Chunk { offset: 7, data: b"hello\n".to_vec(), size: 13 },
            },
        ),
        (
            "log_chunk",
            Message::LogChunk {
                epoch: Epoch(42),
                request: 10,
                offset: 7,
                data: b"hello\n".to_vec(),
                size: 13,
                finished: false,
            },
        ),
        ("cordon_worker", Message::CordonWorker { request: 10, worker: WorkerId::new("w1") }),
        ("uncordon_worker", Message::UncordonWorker { request: 11, worker: WorkerId::new("w1") }),
        (
            "drain_worker",
            Message::DrainWorker {
                request: 12,
                worker: WorkerId::new("w1"),
                deadline: Millis(60_000),
            },
        ),
        (
            "scale_group",
            Message::ScaleGroup {
                request: 13,
                framework: FrameworkId::new("f1"),
                group: "main".into(),
                slots: 5,
                remove: Vec::new(),
                stop: None,
            },
        ),
        (
            "operator_kill_executor",
            Message::OperatorKillExecutor {
                request: 14,
                executor: ExecutorId::new("e1"),
                refill: true,
            },
        ),
        (
            "stop_executor_on_worker",
            Message::StopExecutorOnWorker {
                epoch: Epoch(42),
                executor: ExecutorId::new("e1"),
                grace: Millis(30_000),
                signal: regent_core::api::StopSignal::Term,
            },
        ),
        ("group_scaled", Message::GroupScaled { epoch: Epoch(42), group: "main".into(), slots: 5 }),
        (
            "register_refused",
            Message::RegisterRefused {
                epoch: Epoch(42),
                reason: "the cluster has 2 workers; the limit is 2 (max_workers)".into(),
            },
        ),
        (
            "plan_request",
            Message::PlanRequest { request: 9, groups: vec![group_spec()], tenant: None },
        ),
        ("update_group", Message::UpdateGroup { request: 10, spec: group_spec(), max_parallel: 2 }),
        (
            "worker_usage",
            Message::WorkerUsage {
                incarnation: Incarnation(7),
                usage: WorkerUsage {
                    executors: vec![ExecutorUsage {
                        executor: ExecutorId::new("e1"),
                        usage: Usage {
                            memory_bytes: Some(1 << 26),
                            memory_peak_bytes: None,
                            cpu_usec: Some(2_500_000),
                        },
                    }],
                    work_dir_free_bytes: Some(50 << 30),
                    work_dir_total_bytes: Some(100 << 30),
                },
            },
        ),
        (
            "plan_reply",
            Message::PlanReply {
                epoch: Epoch(42),
                request: 9,
                groups: vec![GroupPlan {
                    group: "web".into(),
                    slots: 4,
                    placed: vec![(0, WorkerId::new("w1")), (1, WorkerId::new("w2"))],
                    placed_omitted: 0,
                    unplaced: 2,
                    reason: Some(
                        "needs 4 more cores: the most free on a matching worker is 4 (on w2)"
                            .into(),
                    ),
                    reasons: vec![
                        api::WaitReason::Shortfall {
                            dimension: "cores".into(),
                            needed: 8,
                            most_free: 4,
                            worker: Some(WorkerId::new("w2")),
                        },
                        api::WaitReason::Cordoned { workers: 1 },
                    ],
                    victims: vec![regent_core::protocol::PlannedVictim {
                        executor: ExecutorId::new("batch/g#3#1"),
                        framework: FrameworkId::new("batch"),
                        group: "g".into(),
                        worker: WorkerId::new("w2"),
                        tenant: "b".into(),
                        why: "tenant above its fair share".into(),
                        for_slot: 2,
                    }],
                    preemption: Some(
                        "preemption budget: 60 of 60 victims left this minute for tenant a".into(),
                    ),
                }],
            },
        ),
        (
            "submit_job",
            Message::SubmitJob {
                request: 9,
                job: api::JobSubmission {
                    job: FrameworkId::new("web"),
                    name: "web".into(),
                    groups: vec![group_spec()],
                    key: Some("deploy-7".into()),
                    expect_version: Some(3),
                    max_parallel: 2,
                    tenant: Some("team-a".into()),
                },
            },
        ),
        (
            "job_accepted",
            Message::JobAccepted {
                epoch: Epoch(42),
                request: 9,
                job: FrameworkId::new("web"),
                version: 4,
                change: api::JobChange::Updated,
            },
        ),
        ("delete_job", Message::DeleteJob { request: 9, job: FrameworkId::new("web") }),
        (
            "revoke_token",
            Message::RevokeToken {
                request: 9,
                id: regent_core::token::TokenId([0xab; 16]),
                expires_ms: Some(1_800_000_000_000),
            },
        ),
        ("retire_keys", Message::RetireKeys { request: 9, through: 3 }),
        (
            "set_tenant",
            Message::SetTenant {
                request: 9,
                tenant: tenants::Tenant {
                    name: "team-a".into(),
                    guarantee: tenants::Dims::parse("cores=16,memory=64G,gpu=2").unwrap(),
                    limit: tenants::Dims::parse("cores=64").unwrap(),
                    weight: 3,
                },
            },
        ),
        ("tenants_request", Message::TenantsRequest { request: 9 }),
        (
            "promote_deployment",
            Message::PromoteDeployment {
                request: 10,
                job: FrameworkId("web".into()),
                group: Some("api".into()),
            },
        ),
        (
            "report_health",
            Message::ReportHealth {
                request: 11,
                executor: ExecutorId("web/api#0#3.7".into()),
                check: "ready".into(),
                passing: false,
                detail: "db down".into(),
            },
        ),
        (
            "health_on_worker",
            Message::HealthOnWorker {
                epoch: Epoch(42),
                executor: ExecutorId("web/api#0#3.7".into()),
                check: 1,
                passing: true,
                detail: String::new(),
            },
        ),
        (
            "tenants_reply",
            Message::TenantsReply {
                epoch: Epoch(42),
                request: 9,
                tenants: vec![tenants::TenantView {
                    tenant: tenants::Tenant::new("default"),
                    set: false,
                    held: tenants::Held {
                        cores: 8,
                        memory_mb: 4096,
                        resources: vec![("gpu".into(), 1)],
                    },
                    dominant_share_ppm: 250_000,
                    frameworks: 2,
                }],
            },
        ),
        ("jobs_request", Message::JobsRequest { request: 9, job: Some(FrameworkId::new("web")) }),
        (
            "jobs_reply",
            Message::JobsReply {
                epoch: Epoch(42),
                request: 9,
                jobs: vec![api::JobStatus {
                    tenant: None,
                    job: FrameworkId::new("web"),
                    name: "web".into(),
                    version: Some(4),
                    state: FrameworkState::Active,
                    groups: vec![api::GroupStatus {
                        group: "g".into(),
                        desired: 2,
                        placed: 1,
                        running: 1,
                        done: 0,
                        rolling: false,
                        priority: 50,
                        stop_after_ms: Some(30_000),
                        deployment: Some(regent_core::api::DeploymentView {
                            seq: 2,
                            state: "failed".into(),
                            reason: Some("crash loop: 3 ends on slot 0".into()),
                            revert_of: None,
                            healthy: 1,
                            open: 3,
                            canary: 0,
                            max_parallel: 1,
                            min_healthy_time_ms: 10_000,
                            target_digest: 7,
                            revert_to_digest: None,
                            placed: 1,
                            old: 0,
                            canaries: vec![],
                            auto_revert: false,
                            auto_promote: false,
                            healthy_deadline_ms: 300_000,
                            progress_deadline_ms: 0,
                            started_ms: 1_700_000_000_000,
                            progress_ms: 1_700_000_001_000,
                            progress_due_ms: None,
                            reverts_because: Some("crash loop: 3 ends on slot 1".into()),
                        }),
                        slots: vec![
                            api::SlotStatus {
                                health: None,
                                preempted_by: None,
                                slot: 0,
                                phase: api::SlotPhase::Running,
                                executor: Some(ExecutorId::new("web/g#0#42.1")),
                                worker: Some(WorkerId::new("w1")),
                                reason: None,
                                reasons: Vec::new(),
                            },
                            api::SlotStatus {
                                health: None,
                                preempted_by: Some("batch/g".into()),
                                slot: 1,
                                phase: api::SlotPhase::Waiting,
                                executor: None,
                                worker: None,
                                reason: Some(
                                    "needs 8 gpu: the largest matching worker has 4".into(),
                                ),
                                reasons: vec![api::WaitReason::TooLarge {
                                    dimension: "gpu".into(),
                                    needed: 8,
                                    largest: 4,
                                }],
                            },
                        ],
                    }],
                }],
            },
        ),
    ]
}

fn cluster_state(g: &mut Gen) -> ClusterState {
    ClusterState {
        master: MasterId(s(g)),
        status: *g.choose(&MasterStatus::ALL).expect("statuses"),
        epoch: Epoch(u64::arbitrary(g)),
        leader: if bool::arbitrary(g) { Some(hint(g)) } else { None },
        workers: (0..usize::arbitrary(g) % 3)
            .map(|_| WorkerView {
                users: Default::default(),
                resources: Default::default(),
                usage: if bool::arbitrary(g) {
                    Some(WorkerUsageView {
                        memory_bytes: u64::arbitrary(g),
                        cpu_usec: u64::arbitrary(g),
                        work_dir_free_bytes: opt_u64(g),
                        work_dir_total_bytes: opt_u64(g),
                        received_at: Millis(u64::arbitrary(g)),
                    })
                } else {
                    None
                },
                host: Default::default(),
                ports: Default::default(),
                ports_used: Default::default(),
                id: WorkerId(s(g)),
                state: *g.choose(&WorkerState::ALL).expect("states"),
                cores: u32::arbitrary(g),
                cores_used: u32::arbitrary(g),
                memory_mb: u64::arbitrary(g),
                memory_used_mb: u64::arbitrary(g),
                cordoned: bool::arbitrary(g),
                drain: g
                    .choose(&[None, Some(DrainState::Draining), Some(DrainState::Drained)])
                    .copied()
                    .flatten(),
                drain_deadline_ms: if bool::arbitrary(g) { Some(u64::arbitrary(g)) } else { None },
                executors: u32::arbitrary(g),
                attributes: if bool::arbitrary(g) { vec![(s(g), s(g))] } else { vec![] },
            })
            .collect(),
        frameworks: (0..usize::arbitrary(g) % 3)
            .map(|_| FrameworkView {
                tenant: None,
                id: FrameworkId(s(g)),
                name: s(g),
                state: *g.choose(&FrameworkState::ALL).expect("states"),
                connected: bool::arbitrary(g),
                groups: (0..usize::arbitrary(g) % 3)
                    .map(|_| GroupView {
                        name: s(g),
                        slots: u32::arbitrary(g),
                        declared: u32::arbitrary(g),
                        running: u32::arbitrary(g),
                        waiting: u32::arbitrary(g),
                        last_end: if bool::arbitrary(g) { Some(s(g)) } else { None },
                        unplaced: u32::arbitrary(g),
                        reasons: wait_reasons_arb(g),
                        deployment: if bool::arbitrary(g) {
                            Some(regent_core::api::DeploymentView {
                                seq: u64::arbitrary(g),
                                state: s(g),
                                reason: if bool::arbitrary(g) { Some(s(g)) } else { None },
                                canaries: vec![u32::arbitrary(g)],
                                target_digest: u32::arbitrary(g),
                                progress_due_ms: Option::<u64>::arbitrary(g),
                                ..Default::default()
                            })
                        } else {
                            None
                        },
                    })
                    .collect(),
            })
            .collect(),
        executors: (0..usize::arbitrary(g) % 3)
            .map(|_| ExecutorView {
                health: if bool::arbitrary(g) {
                    Some(regent_core::protocol::HealthReport {
                        status: *g
                            .choose(&[
                                regent_core::protocol::HealthStatus::Pending,
                                regent_core::protocol::HealthStatus::Passing,
                                regent_core::protocol::HealthStatus::Failing,
                            ])
                            .unwrap(),
                        for_ms: u64::arbitrary(g),
                        detail: s(g),
                    })
                } else {
                    None
                },
                preempted_by: if bool::arbitrary(g) { Some(s(g)) } else { None },
                resources: Default::default(),
                usage: if bool::arbitrary(g) { Some(usage_arb(g)) } else { None },
                ports: Default::default(),
                id: ExecutorId(s(g)),
                framework: FrameworkId(s(g)),
                worker: if bool::arbitrary(g) { Some(WorkerId(s(g))) } else { None },
                state: exec_state(g),
            })
            .collect(),
        messages: u64::arbitrary(g),
        rejected: u64::arbitrary(g),
        history: (0..usize::arbitrary(g) % 3)
            .map(|_| FinishedFramework {
                id: FrameworkId(s(g)),
                name: s(g),
                outcome: *g
                    .choose(&[
                        FrameworkOutcome::Completed,
                        FrameworkOutcome::Failed,
                        FrameworkOutcome::TornDown,
                        FrameworkOutcome::Killed,
                        FrameworkOutcome::TimedOut,
                    ])
                    .unwrap(),
                finished_at_ms: u64::arbitrary(g),
                registered_at_ms: Option::<u64>::arbitrary(g),
                slots: (0..usize::arbitrary(g) % 3)
                    .map(|_| FinishedSlot {
                        group: s(g),
                        slot: u32::arbitrary(g),
                        executor: if bool::arbitrary(g) { Some(ExecutorId(s(g))) } else { None },
                        state: if bool::arbitrary(g) { Some(exec_state(g)) } else { None },
                        attempts: u32::arbitrary(g),
                        preempted_by: if bool::arbitrary(g) { Some(s(g)) } else { None },
                    })
                    .collect(),
                slots_omitted: u32::arbitrary(g),
            })
            .collect(),
        history_omitted: u32::arbitrary(g),
    }
}

#[test]
fn golden_frames_pin_the_wire_format() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures/wire");
    let bless = std::env::var_os("REGENT_BLESS").is_some();
    let samples = golden_samples();
    assert_eq!(samples.len(), VARIANTS as usize, "every variant has a golden frame");
    for (name, msg) in samples {
        let path = dir.join(format!("{name}.bin"));
        let frame = codec::encode(&msg);
        if bless {
            std::fs::write(&path, &frame).unwrap();
        }
        let golden = std::fs::read(&path).unwrap_or_else(|e| {
            panic!("{}: {e} (run with REGENT_BLESS=1 to create)", path.display())
        });
        assert_eq!(
            frame, golden,
            "{name}: the encoding changed; that needs a PROTOCOL_VERSION bump"
        );
        let mut d = Decoder::new(DecoderConfig::default());
        d.feed(&golden).unwrap();
        assert_eq!(d.next_message().unwrap(), Some(msg), "{name}: golden frame decodes");
    }
}

/// Found by the `master_node` fuzz target: a state reply of some hundred
/// kilobytes was encoded through doubling buffers, one allocation of up to
/// twice the frame (over 1 MiB for a frame over 512 KiB). Frames are now
/// encoded, and sealed, into a buffer reserved at their exact length.
#[test]
fn a_large_frame_is_encoded_and_sealed_into_a_buffer_of_its_exact_length() {
    let executors = (0..12_000)
        .map(|i| ExecutorView {
            health: None,
            preempted_by: None,
            resources: Default::default(),
            usage: None,
            ports: Default::default(),
            id: ExecutorId(format!("framework/group#{i}#1.{i}")),
            framework: FrameworkId::new("framework"),
            worker: Some(WorkerId::new("worker")),
            state: ExecutorState::Running,
        })
        .collect();
    let msg = Message::StateReply(Box::new(ClusterState {
        master: MasterId::new("m"),
        status: MasterStatus::Alive,
        epoch: Epoch(1),
        leader: None,
        workers: vec![],
        frameworks: vec![],
        executors,
        messages: 0,
        rejected: 0,
        history: vec![],
        history_omitted: 0,
    }));
    let frame = codec::encode(&msg);
    assert!(frame.len() > 512 * 1024, "a frame past half a MiB: {}", frame.len());
    assert_eq!(frame.len(), codec::frame_len(&msg));
    assert_eq!(frame.capacity(), frame.len());
    // A sealed frame (a session from a real handshake) carries its tag too.
    use regent_core::auth::{Handshake, Step};
    use regent_core::secret::Secret;
    let secret = Secret::new(*b"a cluster secret of 32 bytes....").unwrap();
    let (mut client, nonce) = Handshake::client(&secret, [1; 32]);
    let mut server = Handshake::server(&secret, [2; 32]);
    let Step::Send(challenge) = server.receive(&nonce[codec::LEN_PREFIX..]) else {
        panic!("no challenge")
    };
    let Step::Established { session: mut s, .. } = client.receive(&challenge[codec::LEN_PREFIX..])
    else {
        panic!("no session")
    };
    let sealed = s.sealer.seal(&msg);
    assert_eq!(sealed.len(), frame.len() + regent_core::auth::TAG_LEN);
    assert_eq!(sealed.capacity(), sealed.len());
}
