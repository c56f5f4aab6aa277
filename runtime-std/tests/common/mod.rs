//! Helpers shared by the store tests: sample records, the fixture generator,
//! and running this test binary as a child process.
#![allow(dead_code)]

use regent_core::protocol::GroupSpec;
use regent_core::secret::Secret;
use regent_core::store::format::{self, Damage, HEADER_LEN, MAGIC, SEALED_HEADER_LEN};
use regent_core::store::format::{FORMAT_VERSION, UNSEALED_VERSION};
use regent_core::store::seal::{SealKey, Sealing};
use regent_core::store::{
    FrameworkRecord, GroupRecord, HistoryRecord, Record, RecordKey, SlotOutcome, WorkerRecord,
};
use regent_core::{Epoch, FrameworkId, Incarnation, WorkerId};
use regent_std::store::names::record_file_name;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// `fixtures/store/` in the repository.
pub fn fixtures_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/store")
}

pub fn worker(id: &str, inc: u64) -> Record {
    Record::Worker(WorkerRecord {
        dead: false,
        id: WorkerId::new(id),
        incarnation: Incarnation(inc),
        cores: 8,
        memory_mb: 16384,
        callback: None,
        maintenance: None,
    })
}

pub fn framework(id: &str, name: &str) -> Record {
    Record::Framework(FrameworkRecord {
        id: FrameworkId::new(id),
        name: name.into(),
        failover_timeout_ms: 60_000,
        groups: vec![GroupRecord {
            replacing: Default::default(),
            preempted: Default::default(),
            counted: Default::default(),
            deployment: None,
            eras: Vec::new(),
            spec: GroupSpec {
                group: "main".into(),
                slots: 2,
                command: vec!["/bin/true".into()],
                env: vec![("K".into(), "V".into())],
                cores: 1,
                memory_mb: 256,
                policy: Default::default(),
                launch: Default::default(),
            },
            slots: vec![
                SlotOutcome::Done { executor: "fw-1/main#0#1.1".into() },
                SlotOutcome::Pending,
            ],
            retries_used: 1,
            restarts: Default::default(),
        }],
        callback: None,
        registered_at_ms: None,
        job: None,
        tenant: None,
    })
}

/// The records of the valid fixture store, in key order.
pub fn valid_records() -> Vec<Record> {
    let mut v = vec![
        Record::Epoch(Epoch(42)),
        worker("worker-1", 0x1111),
        worker("rack 2/worker-7", 0x2222),
        framework("fw-1", "analytics"),
    ];
    v.sort_by_key(Record::key);
    v
}

/// Workers cordoned (with a callback address), draining and drained.
pub fn maintained_records() -> Vec<Record> {
    use regent_core::store::Maintenance;
    let with = |id: &str, inc: u64, callback: Option<&str>, m: Maintenance| {
        let Record::Worker(mut w) = worker(id, inc) else { unreachable!("a worker record") };
        w.callback = callback.map(regent_core::Addr::new);
        w.maintenance = Some(m);
        Record::Worker(w)
    };
    let mut v = vec![
        Record::Epoch(Epoch(42)),
        with("worker-1", 0x1111, Some("10.0.0.7:7078"), Maintenance::Cordoned),
        with("worker-2", 0x2222, None, Maintenance::Draining { deadline_ms: 1_796_137_200_000 }),
        with("worker-3", 0x3333, None, Maintenance::Drained),
    ];
    v.sort_by_key(Record::key);
    v
}

/// A framework whose group has a policy (docs/design.md#issue-22): service restarts with a
/// backoff, `pack`, two constraints and a spread attribute.
pub fn framework_with_policy() -> Record {
    use regent_core::policy::{Constraint, Placement, RestartMode};
    let Record::Framework(mut f) = framework("fw-2", "webfarm") else {
        unreachable!("a framework record")
    };
    f.registered_at_ms = Some(1_796_137_200_000);
    let policy = &mut f.groups[0].spec.policy;
    policy.restart.mode = RestartMode::Service;
    policy.restart.attempts = Some(5);
    policy.restart.delay_ms = 1_000;
    policy.restart.max_delay_ms = 60_000;
    policy.restart.healthy_after_ms = 30_000;
    policy.placement = Some(Placement::Pack);
    policy.constraints =
        vec![Constraint::parse("disk=ssd").unwrap(), Constraint::parse("rack!=r9").unwrap()];
    policy.spread = Some("rack".into());
    Record::Framework(f)
}

/// A framework whose group has restart state and launch options (a cwd, a
/// kill grace, an artifact to unpack): the appended store variant 10.
pub fn framework_with_launch() -> Record {
    use regent_core::store::SlotRestart;
    let Record::Framework(mut f) = framework_with_policy() else {
        unreachable!("a framework record")
    };
    f.id = regent_core::FrameworkId::new("fw-3");
    f.name = "tools".into();
    let g = &mut f.groups[0];
    g.restarts.insert(0, SlotRestart { failures: 2, not_before_ms: 1_796_137_260_000 });
    g.spec.launch.cwd = Some("work".into());
    g.spec.launch.kill_grace_ms = Some(10_000);
    g.spec.launch.artifacts.push(regent_core::launch::Artifact {
        source: "https://files.example/tool-1.2.tar.gz".into(),
        sha256: "5e".repeat(32),
        dest: "bin".into(),
        unpack: true,
    });
    Record::Framework(f)
}

/// A framework record whose group names ports (docs/design.md#issue-22): the appended
/// store variant 11.
pub fn framework_with_ports() -> Record {
    let Record::Framework(mut f) = framework_with_launch() else {
        unreachable!("a framework record")
    };
    f.id = regent_core::FrameworkId::new("fw-4");
    f.name = "web".into();
    f.groups[0].spec.launch.ports = vec!["http".into(), "admin".into()];
    Record::Framework(f)
}

/// A framework record whose group is being rolled to a new spec (`regent
/// run --update`): the appended variant 12.
pub fn framework_with_rollout() -> Record {
    let Record::Framework(mut f) = framework_with_ports() else { unreachable!() };
    f.groups[0].adopt_rollout(ROLLOUT);
    Record::Framework(f)
}

/// The rollout of [`framework_with_rollout`], as variant 12 stored it.
const ROLLOUT: regent_core::store::Rollout =
    regent_core::store::Rollout { max_parallel: 2, before_epoch: 44, before_launch: 17 };

/// Every group of `f` under [`ROLLOUT`] takes it on again from its spec as
/// it is now (a group record of layouts 6 to 11 reads its rollout as a
/// deployment of the spec it stores; docs/design.md#issue-45).
fn rolling(mut f: regent_core::store::FrameworkRecord) -> Record {
    for g in &mut f.groups {
        if g.deployment.is_some() {
            g.adopt_rollout(ROLLOUT);
        }
    }
    Record::Framework(f)
}

/// A framework record whose group runs as a named user (docs/design.md#issue-23), its
/// rollout under way: the appended variant 13.
pub fn framework_with_user() -> Record {
    let Record::Framework(mut f) = framework_with_rollout() else { unreachable!() };
    f.id = regent_core::FrameworkId::new("fw-5");
    f.groups[0].spec.launch.user = Some("alice".into());
    rolling(f)
}

/// A framework record whose group asks for named resources (docs/design.md#issue-23,
/// GPUs) and rotates its output its own way, as well as a user: the
/// appended variant 14.
pub fn framework_with_resources() -> Record {
    let Record::Framework(mut f) = framework_with_user() else { unreachable!() };
    f.id = regent_core::FrameworkId::new("fw-6");
    f.groups[0].spec.launch.resources = vec![("fpga".into(), 1), ("gpu".into(), 2)];
    f.groups[0].spec.launch.logs =
        Some(regent_core::launch::LogRotation { max_bytes: Some(65_536), files: Some(2) });
    rolling(f)
}

/// A framework record whose group's slot 0 has a counted end (docs/design.md#issue-41):
/// the appended variant 16, variant 14 frozen.
pub fn framework_with_counted_ends() -> Record {
    let Record::Framework(mut f) = framework_with_resources() else { unreachable!() };
    f.id = regent_core::FrameworkId::new("fw-7");
    f.groups[0].counted.insert(0, regent_core::ExecutorId::new("fw-7/g#0#48.3"));
    f.groups[0].replacing.insert(1, regent_core::ExecutorId::new("fw-7/g#1#48.2"));
    Record::Framework(f)
}

/// A job the leader owns (docs/design.md#issue-43: created through
/// `POST /v1/jobs`), at version 3 with two idempotency keys, its group as
/// in [`framework_with_counted_ends`]: the appended variant 17, variant 16
/// frozen.
pub fn framework_with_job() -> Record {
    use regent_core::api::JobChange;
    use regent_core::store::{JobKey, JobRecord};
    let Record::Framework(mut f) = framework_with_counted_ends() else { unreachable!() };
    f.id = regent_core::FrameworkId::new("job-web");
    f.failover_timeout_ms = 0;
    f.callback = None;
    let key = |key: &str, version, change| JobKey { key: key.into(), version, change };
    f.job = Some(JobRecord {
        version: 3,
        keys: vec![key("deploy-1", 1, JobChange::Created), key("deploy-2", 3, JobChange::Updated)],
    });
    Record::Framework(f)
}

/// A job of tenant `team-a` (as [`framework_with_job`]) with a second
/// group of priority 80 (docs/design.md#issue-44): the appended variant 21.
pub fn framework_with_priority() -> Record {
    let Record::Framework(mut f) = framework_with_job() else { unreachable!() };
    f.id = regent_core::FrameworkId::new("fw-p");
    f.tenant = Some("team-a".into());
    let mut urgent = f.groups[0].clone();
    urgent.spec.group = "urgent".into();
    urgent.spec.policy.priority = 80;
    f.groups.push(urgent);
    rolling(f)
}

/// A job of tenant `team-a` (as [`framework_with_priority`]) with a third
/// group `leader`, a singleton (`disconnect = { stop_after = "30s" }`;
/// docs/design.md#issue-45): the appended variant 22.
pub fn framework_with_disconnect() -> Record {
    let Record::Framework(mut f) = framework_with_priority() else { unreachable!() };
    f.id = regent_core::FrameworkId::new("fw-s");
    let mut leader = f.groups[0].clone();
    leader.spec.group = "leader".into();
    leader.spec.launch.disconnect = Some(regent_core::launch::Disconnect::after_ms(30_000));
    f.groups.push(leader);
    rolling(f)
}

/// A job (as [`framework_with_disconnect`], its rollouts done) whose group
/// `web` has an update policy and a deployment awaiting promotion, with
/// the spec to revert to (docs/design.md#issue-45): the appended variant
/// 24.
pub fn framework_with_deployment() -> Record {
    use regent_core::store::{spec_digest, Deployment, DeploymentState, Era};
    let Record::Framework(mut f) = framework_with_disconnect() else { unreachable!() };
    f.id = regent_core::FrameworkId::new("fw-d");
    for g in &mut f.groups {
        g.deployment = None;
        g.eras.clear();
    }
    let web = &mut f.groups[0];
    let stable = web.spec.clone();
    web.spec.command.push("--v2".into());
    web.spec.policy.update = Some(Box::new(regent_core::policy::UpdatePolicy {
        max_parallel: 1,
        min_healthy_time_ms: 2_000,
        healthy_deadline_ms: 60_000,
        progress_deadline_ms: 0,
        canary: 1,
        auto_promote: false,
        auto_revert: true,
    }));
    let target = spec_digest(&web.spec);
    web.eras = vec![
        Era { from_epoch: 0, from_launch: 0, digest: spec_digest(&stable) },
        Era { from_epoch: 53, from_launch: 9, digest: target },
    ];
    web.deployment = Some(Deployment {
        seq: 4,
        target,
        policy: web.spec.policy.update_or_default(),
        state: DeploymentState::AwaitingPromotion,
        revert_to: Some(Box::new(stable)),
        revert_of: None,
        started_ms: 1_796_137_200_000,
        progress_ms: 1_796_137_260_000,
        healthy: [0].into(),
        ends: [(0, 1)].into(),
    });
    Record::Framework(f)
}

/// A job of tenant `team-a` (as [`framework_with_disconnect`]) whose group
/// `web` asks for a port `http` and has an http and a tcp health check
/// (docs/design.md#issue-45): the appended variant 23.
pub fn framework_with_checks() -> Record {
    use regent_core::launch::{CheckKind, CheckSpec};
    let Record::Framework(mut f) = framework_with_disconnect() else { unreachable!() };
    f.id = regent_core::FrameworkId::new("fw-c");
    let mut web = f.groups[0].clone();
    web.spec.group = "web".into();
    web.spec.launch.ports = vec!["http".into()];
    let http = CheckKind::Http { port: "http".into(), path: "/health".into(), expect: (200, 299) };
    web.spec.launch.checks = vec![
        CheckSpec { interval_ms: 5_000, failures: 2, ..CheckSpec::new(http) },
        CheckSpec::new(CheckKind::Tcp { port: "http".into() }),
    ];
    f.groups.push(web);
    rolling(f)
}

/// A cordoned worker declared DEAD, its record kept (docs/design.md#issue-41): the
/// appended variant 15, variant 7 frozen.
pub fn dead_cordoned_worker() -> Record {
    let Record::Worker(mut w) = worker("worker-9", 5) else { unreachable!() };
    w.maintenance = Some(regent_core::store::Maintenance::Cordoned);
    w.dead = true;
    Record::Worker(w)
}

/// Writes `record`'s image under its own file name in `dir`.
pub fn put_image(dir: &Path, record: &Record) -> PathBuf {
    let path = dir.join(record_file_name(&record.key()));
    fs::write(&path, format::encode(record).unwrap()).unwrap();
    path
}

/// An image with a valid header and CRC around an arbitrary payload.
pub fn image_with_payload(payload: &[u8]) -> Vec<u8> {
    let mut img = MAGIC.to_vec();
    img.extend_from_slice(&UNSEALED_VERSION.to_be_bytes());
    img.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    img.extend_from_slice(payload);
    let crc = crc32c(&img);
    img.extend_from_slice(&crc.to_be_bytes());
    img
}

/// CRC32C, computed here independently of the crate under test.
pub fn crc32c(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 { (crc >> 1) ^ 0x82F6_3B78 } else { crc >> 1 };
        }
    }
    !crc
}

/// What loading a fixture must give: the records and the stray temp files
/// removed, or every damaged file with its exact damage.
pub type Expect = Result<(Vec<Record>, Vec<String>), Vec<(String, Damage)>>;

/// One fixture case: a store directory and what loading it must give.
pub struct Case {
    /// Directory name under `fixtures/store/`.
    pub name: &'static str,
    /// Files in it.
    pub files: Vec<(String, Vec<u8>)>,
    /// The keys it is loaded with (a master's secrets).
    pub sealing: Sealing,
    /// What loading it must give.
    pub expect: Expect,
}

/// The cluster secret of the sealed fixtures (a test value, public).
pub fn fixture_secret() -> Secret {
    Secret::new(b"regent fixture secret A, public, never use it".to_vec()).unwrap()
}

/// Another cluster secret: a store sealed under it is under an unknown key
/// for a master with [`fixture_secret`] only.
pub fn other_secret() -> Secret {
    Secret::new(b"regent fixture secret B, public, never use it".to_vec()).unwrap()
}

/// The sealing of a master with [`fixture_secret`].
pub fn fixture_sealing() -> Sealing {
    Sealing::with_secret(&fixture_secret())
}

/// The fixture cases, generated from the format as it is. The committed
/// files must equal these byte for byte.
pub fn cases() -> Vec<Case> {
    let epoch = Record::Epoch(Epoch(42));
    let w1 = worker("worker-1", 0x1111);
    let w1_name = record_file_name(&w1.key());
    let w1_img = format::encode(&w1).unwrap();
    let file = |r: &Record| (record_file_name(&r.key()), format::encode(r).unwrap());
    let mut cases = Vec::new();

    cases.push(Case {
        name: "valid",
        files: valid_records().iter().map(file).collect(),
        sealing: Sealing::none(),
        expect: Ok((valid_records(), vec![])),
    });

    // Workers under an operator's cordon or drain (docs/design.md#issue-14): an appended
    // record variant; the records above keep their layouts.
    let maintained = maintained_records();
    cases.push(Case {
        name: "maintenance",
        files: maintained.iter().map(file).collect(),
        sealing: Sealing::none(),
        expect: Ok((maintained, vec![])),
    });

    // A framework with a group policy (docs/design.md#issue-22): the appended variant 8;
    // the records above keep their layouts.
    let mut policies = vec![Record::Epoch(Epoch(42)), framework_with_policy()];
    policies.sort_by_key(Record::key);
    cases.push(Case {
        name: "policies",
        files: policies.iter().map(file).collect(),
        sealing: Sealing::none(),
        expect: Ok((policies, vec![])),
    });

    // A framework with restart state and launch options (docs/design.md#issue-22): the
    // appended variant 10; the records above keep their layouts.
    let mut launch = vec![Record::Epoch(Epoch(43)), framework_with_launch()];
    launch.sort_by_key(Record::key);
    cases.push(Case {
        name: "launch",
        files: launch.iter().map(file).collect(),
        sealing: Sealing::none(),
        expect: Ok((launch, vec![])),
    });

    // A framework whose group names ports (docs/design.md#issue-22): the appended variant
    // 11; the records above keep their layouts.
    let mut ports = vec![Record::Epoch(Epoch(44)), framework_with_ports()];
    ports.sort_by_key(Record::key);
    cases.push(Case {
        name: "ports",
        files: ports.iter().map(file).collect(),
        sealing: Sealing::none(),
        expect: Ok((ports, vec![])),
    });

    // A framework whose group is being rolled to a new spec: the appended
    // variant 12, variant 11 frozen.
    let mut rollout = vec![Record::Epoch(Epoch(45)), framework_with_rollout()];
    rollout.sort_by_key(Record::key);
    cases.push(Case {
        name: "rollout",
        files: rollout.iter().map(file).collect(),
        sealing: Sealing::none(),
        expect: Ok((rollout, vec![])),
    });

    // A framework whose group names a user to run as: the appended variant
    // 13, variant 12 frozen.
    let mut user = vec![Record::Epoch(Epoch(46)), framework_with_user()];
    user.sort_by_key(Record::key);
    cases.push(Case {
        name: "user",
        files: user.iter().map(file).collect(),
        sealing: Sealing::none(),
        expect: Ok((user, vec![])),
    });

    // A framework whose group asks for named resources: the appended
    // variant 14, variant 13 frozen.
    let mut resources = vec![Record::Epoch(Epoch(47)), framework_with_resources()];
    resources.sort_by_key(Record::key);
    cases.push(Case {
        name: "resources",
        files: resources.iter().map(file).collect(),
        sealing: Sealing::none(),
        expect: Ok((resources, vec![])),
    });

    // A cordoned worker declared DEAD (variant 15) and a framework with a
    // counted end (variant 16).
    let mut counted =
        vec![Record::Epoch(Epoch(48)), dead_cordoned_worker(), framework_with_counted_ends()];
    counted.sort_by_key(Record::key);
    cases.push(Case {
        name: "counted",
        files: counted.iter().map(file).collect(),
        sealing: Sealing::none(),
        expect: Ok((counted, vec![])),
    });

    // A job the leader owns (variant 17).
    let mut job = vec![Record::Epoch(Epoch(49)), framework_with_job()];
    job.sort_by_key(Record::key);
    cases.push(Case {
        name: "job",
        files: job.iter().map(file).collect(),
        sealing: Sealing::none(),
        expect: Ok((job, vec![])),
    });

    // The revoked tokens and retired key ids (variant 18): one revoked for
    // good, one until its expiry, key ids through 2 retired.
    let revocations = regent_core::token::Revocations {
        tokens: [
            (regent_core::token::TokenId([0x11; 16]), None),
            (regent_core::token::TokenId([0x22; 16]), Some(1_800_000_000_000)),
        ]
        .into_iter()
        .collect(),
        retired_through: 2,
    };
    let mut revoked = vec![Record::Epoch(Epoch(50)), Record::Revocations(revocations)];
    revoked.sort_by_key(Record::key);
    cases.push(Case {
        name: "revocations",
        files: revoked.iter().map(file).collect(),
        sealing: Sealing::none(),
        expect: Ok((revoked, vec![])),
    });

    // A tenant an operator set (variant 19) and a framework of it (variant
    // 20; docs/tenants.md).
    let mut tenant = vec![
        Record::Epoch(Epoch(50)),
        Record::Tenant(regent_core::protocol::tenants::Tenant {
            name: "team-a".into(),
            guarantee: regent_core::protocol::tenants::Dims {
                cores: Some(16),
                memory_mb: Some(65_536),
                resources: vec![("gpu".into(), 2)],
            },
            limit: regent_core::protocol::tenants::Dims {
                cores: Some(64),
                memory_mb: None,
                resources: vec![],
            },
            weight: 3,
        }),
        Record::Framework(regent_core::store::FrameworkRecord {
            id: regent_core::FrameworkId::new("fw-t"),
            name: "etl".into(),
            failover_timeout_ms: 60_000,
            groups: vec![],
            callback: None,
            registered_at_ms: Some(1_796_137_200_000),
            job: None,
            tenant: Some("team-a".into()),
        }),
    ];
    tenant.sort_by_key(Record::key);
    cases.push(Case {
        name: "tenant",
        files: tenant.iter().map(file).collect(),
        sealing: Sealing::none(),
        expect: Ok((tenant, vec![])),
    });

    // A framework with a group of priority 80 (variant 21; its other
    // groups, and a framework of a tenant whose groups have the default
    // priority, keep variant 20, frozen; docs/design.md#issue-44).
    let mut priority = vec![Record::Epoch(Epoch(51)), framework_with_priority()];
    let Record::Framework(mut default_priority) = framework_with_job() else { unreachable!() };
    default_priority.id = regent_core::FrameworkId::new("fw-q");
    default_priority.tenant = Some("team-a".into());
    priority.push(Record::Framework(default_priority));
    priority.sort_by_key(Record::key);
    cases.push(Case {
        name: "priority",
        files: priority.iter().map(file).collect(),
        sealing: Sealing::none(),
        expect: Ok((priority, vec![])),
    });

    // A framework with a singleton group (variant 22; a framework with a
    // group of priority 80 and none of them keeps variant 21, frozen;
    // docs/design.md#issue-45).
    let mut disconnect = vec![Record::Epoch(Epoch(52)), framework_with_disconnect()];
    let Record::Framework(mut prioritized) = framework_with_priority() else { unreachable!() };
    prioritized.id = regent_core::FrameworkId::new("fw-r");
    disconnect.push(Record::Framework(prioritized));
    disconnect.sort_by_key(Record::key);
    cases.push(Case {
        name: "disconnect",
        files: disconnect.iter().map(file).collect(),
        sealing: Sealing::none(),
        expect: Ok((disconnect, vec![])),
    });

    // A framework with a checked group (variant 23; a framework with a
    // singleton group and no checks keeps variant 22, frozen;
    // docs/design.md#issue-45).
    let mut checks = vec![Record::Epoch(Epoch(53)), framework_with_checks()];
    let Record::Framework(mut singleton) = framework_with_disconnect() else { unreachable!() };
    singleton.id = regent_core::FrameworkId::new("fw-d");
    checks.push(Record::Framework(singleton));
    checks.sort_by_key(Record::key);
    cases.push(Case {
        name: "checks",
        files: checks.iter().map(file).collect(),
        sealing: Sealing::none(),
        expect: Ok((checks, vec![])),
    });

    // A framework with a deployed group (variant 24; a framework with a
    // singleton group and a rollout keeps variant 22, frozen;
    // docs/design.md#issue-45).
    let mut deployment = vec![Record::Epoch(Epoch(53)), framework_with_deployment()];
    let Record::Framework(mut singleton) = framework_with_disconnect() else { unreachable!() };
    singleton.id = regent_core::FrameworkId::new("fw-e");
    deployment.push(rolling(singleton));
    deployment.sort_by_key(Record::key);
    cases.push(Case {
        name: "deployment",
        files: deployment.iter().map(file).collect(),
        sealing: Sealing::none(),
        expect: Ok((deployment, vec![])),
    });

    // A framework with a preempted slot (variant 25; a framework with a
    // deployed group and no preempted slot keeps variant 24, frozen;
    // docs/design.md#issue-44).
    let mut preemption =
        vec![Record::Epoch(Epoch(54)), framework_with_preemption(), framework_with_deployment()];
    preemption.sort_by_key(Record::key);
    cases.push(Case {
        name: "preemption",
        files: preemption.iter().map(file).collect(),
        sealing: Sealing::none(),
        expect: Ok((preemption, vec![])),
    });

    // A finished framework whose slot's last end was a preemption (variant
    // 26; one without keeps variant 5, frozen; docs/design.md#issue-44).
    let mut history_preemption =
        vec![Record::Epoch(Epoch(54)), history(7), history_with_preemption(8)];
    history_preemption.sort_by_key(Record::key);
    cases.push(Case {
        name: "history-preemption",
        files: history_preemption.iter().map(file).collect(),
        sealing: Sealing::none(),
        expect: Ok((history_preemption, vec![])),
    });

    let cut = 20;
    cases.push(Case {
        name: "truncated",
        files: vec![file(&epoch), (w1_name.clone(), w1_img[..cut].to_vec())],
        sealing: Sealing::none(),
        expect: Err(vec![(
            w1_name.clone(),
            Damage::Truncated { len: cut, expected: w1_img.len(), in_header: false },
        )]),
    });

    let mut flipped = w1_img.clone();
    flipped[HEADER_LEN + 4] ^= 0x08;
    let stored = u32::from_be_bytes(flipped[flipped.len() - 4..].try_into().unwrap());
    cases.push(Case {
        name: "flipped-bit",
        files: vec![file(&epoch), (w1_name.clone(), flipped.clone())],
        sealing: Sealing::none(),
        expect: Err(vec![(
            w1_name.clone(),
            Damage::CrcMismatch { stored, computed: crc32c(&flipped[..flipped.len() - 4]) },
        )]),
    });

    let mut v3 = w1_img.clone();
    v3[4..6].copy_from_slice(&3u16.to_be_bytes());
    cases.push(Case {
        name: "unknown-version",
        files: vec![file(&epoch), (w1_name.clone(), v3)],
        sealing: Sealing::none(),
        expect: Err(vec![(
            w1_name.clone(),
            Damage::UnknownVersion { version: 3, supported: FORMAT_VERSION },
        )]),
    });

    let mut magic = w1_img.clone();
    magic[..4].copy_from_slice(b"SPRK");
    cases.push(Case {
        name: "bad-magic",
        files: vec![file(&epoch), (w1_name.clone(), magic)],
        sealing: Sealing::none(),
        expect: Err(vec![(w1_name.clone(), Damage::BadMagic { found: b"SPRK".to_vec() })]),
    });

    // Variant 127 of Record does not exist (variants are appended from 0;
    // 7 was the first unused one until the maintenance records took it);
    // the CRC is right.
    cases.push(Case {
        name: "malformed-payload",
        files: vec![file(&epoch), (w1_name.clone(), image_with_payload(&[127, 1, 2]))],
        sealing: Sealing::none(),
        expect: Err(vec![(
            w1_name.clone(),
            Damage::Malformed { len: 3, detail: "Serde Deserialization Error".into() },
        )]),
    });

    cases.push(Case {
        name: "wrong-key",
        files: vec![file(&epoch), ("w-worker-2.rec".into(), w1_img.clone())],
        sealing: Sealing::none(),
        expect: Err(vec![(
            "w-worker-2.rec".into(),
            Damage::WrongKey {
                stored_as: "w-worker-2.rec".into(),
                found: "worker/worker-1".into(),
            },
        )]),
    });

    // A crash while writing a new version of worker-1 (half written), and a
    // crash after a whole new framework image was written but before it was
    // renamed: neither is trusted; the committed records load.
    let newer = format::encode(&worker("worker-1", 0x9999)).unwrap();
    let fw2 = framework("fw-2", "never committed");
    let mut files: Vec<_> = valid_records().iter().map(file).collect();
    files.push((format!("{w1_name}.tmp"), newer[..newer.len() / 2].to_vec()));
    files.push((format!("{}.tmp", record_file_name(&fw2.key())), format::encode(&fw2).unwrap()));
    cases.push(Case {
        name: "stray-temp",
        files,
        sealing: Sealing::none(),
        expect: Ok((valid_records(), vec![format!("{w1_name}.tmp"), "f-fw-2.rec.tmp".into()])),
    });

    // Two damaged files at once: both are named.
    let mut two = w1_img.clone();
    two.push(0);
    let mut files: Vec<_> = vec![file(&epoch), (w1_name.clone(), two)];
    files.push(("f-fw-1.rec".into(), Vec::new()));
    cases.push(Case {
        name: "two-damaged",
        files,
        sealing: Sealing::none(),
        expect: Err(vec![
            (
                "f-fw-1.rec".into(),
                Damage::Truncated { len: 0, expected: HEADER_LEN, in_header: true },
            ),
            (
                w1_name.clone(),
                Damage::TrailingBytes { len: w1_img.len() + 1, expected: w1_img.len() },
            ),
        ]),
    });

    // Sealed (format version 2) under the fixture secret.
    let sealed = fixture_sealing();
    let key_a = SealKey::derive(&fixture_secret()).id();
    let key_b = SealKey::derive(&other_secret()).id();
    let sealed_file =
        |r: &Record, s: &Sealing| (record_file_name(&r.key()), format::encode_with(r, s).unwrap());
    cases.push(Case {
        name: "sealed-valid",
        files: valid_records().iter().map(|r| sealed_file(r, &sealed)).collect(),
        sealing: fixture_sealing(),
        expect: Ok((valid_records(), vec![])),
    });

    // A payload byte changed, everything else as written: there is no CRC
    // to recompute, and the MAC fails.
    let (_, mut altered) = sealed_file(&w1, &sealed);
    altered[SEALED_HEADER_LEN + 4] ^= 0x08;
    cases.push(Case {
        name: "sealed-altered",
        files: vec![sealed_file(&epoch, &sealed), (w1_name.clone(), altered)],
        sealing: fixture_sealing(),
        expect: Err(vec![(w1_name.clone(), Damage::BadMac { key_id: key_a })]),
    });

    cases.push(Case {
        name: "sealed-unknown-key",
        files: vec![
            sealed_file(&epoch, &sealed),
            sealed_file(&w1, &Sealing::with_secret(&other_secret())),
        ],
        sealing: fixture_sealing(),
        expect: Err(vec![(
            w1_name.clone(),
            Damage::UnknownKey { key_id: key_b, known: vec![key_a] },
        )]),
    });

    // A plain (version 1) record among sealed ones, loaded by a master with
    // the secret: planted by someone without it.
    cases.push(Case {
        name: "unsealed-under-secret",
        files: vec![sealed_file(&epoch, &sealed), file(&w1)],
        sealing: fixture_sealing(),
        expect: Err(vec![(w1_name.clone(), Damage::Unsealed)]),
    });

    // A finished framework in the history (a record kind appended after the
    // others): whole, torn, and sealed then altered.
    let h = history(7);
    let h_name = record_file_name(&h.key());
    let h_img = format::encode(&h).unwrap();
    let mut with_history = valid_records();
    with_history.push(h.clone());
    with_history.sort_by_key(Record::key);
    cases.push(Case {
        name: "history",
        files: with_history.iter().map(file).collect(),
        sealing: Sealing::none(),
        expect: Ok((with_history.clone(), vec![])),
    });
    let cut = h_img.len() - 9;
    cases.push(Case {
        name: "history-truncated",
        files: vec![file(&epoch), (h_name.clone(), h_img[..cut].to_vec())],
        sealing: Sealing::none(),
        expect: Err(vec![(
            h_name.clone(),
            Damage::Truncated { len: cut, expected: h_img.len(), in_header: false },
        )]),
    });
    let mut h_altered = format::encode_with(&h, &sealed).unwrap();
    h_altered[SEALED_HEADER_LEN + 3] ^= 0x01;
    cases.push(Case {
        name: "history-sealed-altered",
        files: vec![sealed_file(&epoch, &sealed), (h_name.clone(), h_altered)],
        sealing: fixture_sealing(),
        expect: Err(vec![(h_name, Damage::BadMac { key_id: key_a })]),
    });
    cases
}

/// A history record: framework `fw-0` killed by an operator, one slot
/// exited 0, one killed after two attempts, one that never ran.
pub fn history(seq: u64) -> Record {
    use regent_core::protocol::ExecutorState;
    use regent_core::protocol::{FinishedFramework, FinishedSlot, FrameworkOutcome};
    Record::History(HistoryRecord {
        seq,
        framework_digest: 0x0123_4567,
        framework: FinishedFramework {
            id: FrameworkId::new("fw-0"),
            name: "nightly".into(),
            outcome: FrameworkOutcome::Killed,
            finished_at_ms: 1_764_603_000_000,
            registered_at_ms: Some(1_764_602_000_000),
            slots: vec![
                FinishedSlot {
                    group: "main".into(),
                    slot: 0,
                    executor: Some("fw-0/main#0#1.1".into()),
                    state: Some(ExecutorState::Exited { code: 0 }),
                    attempts: 1,
                    preempted_by: None,
                },
                FinishedSlot {
                    group: "main".into(),
                    slot: 1,
                    executor: Some("fw-0/main#1#1.3".into()),
                    state: Some(ExecutorState::Killed),
                    attempts: 2,
                    preempted_by: None,
                },
                FinishedSlot {
                    group: "main".into(),
                    slot: 2,
                    executor: None,
                    state: None,
                    attempts: 0,
                    preempted_by: None,
                },
            ],
            slots_omitted: 0,
        },
    })
}

/// A job (as [`framework_with_deployment`]) whose group `g`'s slot 1
/// executor was stopped by a preemption for `batch/urgent`, which the
/// record names with it (docs/design.md#issue-44): the appended variant 25.
pub fn framework_with_preemption() -> Record {
    let Record::Framework(mut f) = framework_with_deployment() else { unreachable!() };
    f.id = regent_core::FrameworkId::new("fw-x");
    let victim = regent_core::ExecutorId::new("fw-x/g#1#54.2");
    f.groups[0].replace(1, victim.clone());
    let by = regent_core::store::Preemptor { executor: victim, by: "batch/urgent".into() };
    f.groups[0].preempted.insert(1, by);
    Record::Framework(f)
}

/// A history record (as [`history`]) whose slot 1's last end was a
/// preemption for `batch/urgent` (docs/design.md#issue-44): the appended
/// variant 26.
pub fn history_with_preemption(seq: u64) -> Record {
    let Record::History(mut h) = history(seq) else { unreachable!() };
    h.framework.id = FrameworkId::new("fw-9");
    h.framework.slots[1].preempted_by = Some("batch/urgent".into());
    Record::History(h)
}

/// Writes every case under `root` (replacing what is there).
pub fn write_fixtures(root: &Path) {
    for case in cases() {
        let dir = root.join(case.name);
        if dir.exists() {
            fs::remove_dir_all(&dir).unwrap();
        }
        fs::create_dir_all(&dir).unwrap();
        for (name, bytes) in &case.files {
            fs::write(dir.join(name), bytes).unwrap();
        }
    }
}

/// Copies a fixture case into a fresh temporary directory (tests never open
/// the committed fixtures in place: opening writes the LOCK file).
pub fn copy_case(name: &str) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    for entry in fs::read_dir(fixtures_root().join(name)).unwrap() {
        let entry = entry.unwrap();
        fs::copy(entry.path(), tmp.path().join(entry.file_name())).unwrap();
    }
    tmp
}

/// The sorted file names in `dir`.
pub fn file_names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> =
        fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    v.sort();
    v
}

/// Runs the ignored test `name` of this test binary as a child process with
/// `env` set, stdout piped.
pub fn spawn_child(name: &str, env: &[(&str, &str)]) -> Child {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([name, "--exact", "--ignored", "--nocapture", "--test-threads=1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.spawn().unwrap()
}

/// The key of a record, for assertions.
pub fn key(r: &Record) -> RecordKey {
    r.key()
}
