//! The durable record of running process groups: one small text file per
//! executor under `<work_dir>/running/`, written atomically (temp file,
//! fsync, rename, fsync of the directory) and removed when the executor ends.
//!
//! Format (one `key=value` per line, ids percent-escaped by
//! [`super::names::escape`]):
//!
//! ```text
//! regent-executor-record 2
//! executor=<id>
//! framework=<id>
//! pgid=<process group id = pid of the group leader>
//! start_time=<field 22 of /proc/<pgid>/stat, or - when unknown>
//! boot_id=<the contents of /proc/sys/kernel/random/boot_id, or - when unknown>
//! cores=<cores it holds>
//! memory_mb=<memory it holds in MiB>
//! kill_grace_ms=<its group's kill grace in ms; only when the group set one>
//! ports=<name>:<number>,...  (only when the executor holds named ports)
//! resources=<name>:<address>+<address>...,...  (only when it holds named resources)
//! disconnect_ms=<its group's disconnect.stop_after in ms; only for a singleton>
//! checks=<its group's health checks as one line of JSON; only when it has some>
//! sandbox=<what it was started with, one line of JSON: {"user":null or
//!         {"name","uid","gid","groups","home"},"cwd":"<dir>","env":[["NAME","value"],...]}>
//! end
//! ```
//!
//! The `disconnect_ms` and `checks` lines (docs/design.md#issue-45) keep a
//! singleton's rule and a group's health checks, so an executor re-adopted
//! by a restarted worker is still stopped when cut off and still checked.
//! The `sandbox` line ([`super::check::ExecContext`]) keeps the user, the
//! working directory and the whole environment it was started with, so its
//! exec checks run as it does, re-adopted too (JSON escapes every newline
//! and quote inside a string; `=` needs no escape, as only a line's first
//! one ends its key). A record without it (written before it existed, or
//! when a path is not UTF-8) is checked as before: in the executor's
//! directory, as the worker's executor user, with the worker's environment.
//!
//! **Secrets.** The environment is the group's `env` too, secrets
//! included: record files are created mode 0600 and `running/` is 0700,
//! both the worker's (root's, when executors run as other users), so no
//! executor's user can read another's environment there.
//!
//! The `kill_grace_ms`, `ports` and `resources` lines are optional (a record without
//! them is written byte for byte as before they existed, and earlier
//! builds skip lines they do not know), so a re-adopted executor keeps its
//! group's grace, its port numbers and its resources' addresses (reported
//! again to the leader, and never handed to another executor of this
//! worker).
//!
//! Version 1 records (written before worker upgrades re-adopted executors)
//! have no `boot_id`, `cores` or `memory_mb` line; they still read, with no
//! boot id (so what they name can never be proven to be this worker's:
//! see [`super::classify`]) and no resources.
//!
//! The closing `end` line means a torn file (any prefix of a record) never
//! parses, so a cut-off number is never taken for a pgid or start time.

use super::names::{escape, file_name, unescape};
use regent_core::{ExecutorId, FrameworkId};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

/// The first line of every record file written now.
pub const HEADER: &str = "regent-executor-record 2";

/// The first line of a record written before records named their boot.
pub const HEADER_V1: &str = "regent-executor-record 1";

/// Where Linux keeps the id of the current boot (a random UUID drawn at
/// every boot).
pub const BOOT_ID_PATH: &str = "/proc/sys/kernel/random/boot_id";

/// The extension of a committed record file.
pub const RECORD_EXT: &str = ".rec";

/// The suffix of a record being written (a crash may leave one behind).
pub const TEMP_SUFFIX: &str = ".tmp";

/// The suffix a damaged record is renamed to, for the operator.
pub const CORRUPT_SUFFIX: &str = ".corrupt";

/// One running process group, as recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// The executor.
    pub executor: ExecutorId,
    /// Its framework.
    pub framework: FrameworkId,
    /// The process group (the leader's pid).
    pub pgid: i32,
    /// The leader's start time in clock ticks since boot, if known.
    pub start_time: Option<u64>,
    /// The boot the process was started in ([`BOOT_ID_PATH`]), if known;
    /// `None` in a version 1 record.
    pub boot_id: Option<String>,
    /// Cores the executor holds (0 in a version 1 record).
    pub cores: u32,
    /// Memory the executor holds in MiB (0 in a version 1 record).
    pub memory_mb: u64,
    /// Its group's kill grace, when the group set one
    /// ([`regent_core::launch::LaunchSpec::kill_grace_ms`]).
    pub kill_grace_ms: Option<u64>,
    /// The named ports the worker numbered for it
    /// ([`regent_core::ports`]), in its group's order; empty when none.
    pub ports: Vec<(String, u16)>,
    /// The named resources' addresses the worker gave it
    /// ([`regent_core::resources`]), in its group's order; empty when none.
    pub resources: regent_core::resources::Assigned,
    /// Its group's disconnect rule's `stop_after`, in ms (a singleton;
    /// docs/design.md#issue-45); `None` when it has none.
    pub disconnect_ms: Option<u64>,
    /// Its group's health checks (docs/design.md#issue-45); empty when none.
    pub checks: Vec<regent_core::launch::CheckSpec>,
    /// The user, working directory and environment it was started with,
    /// for its exec checks; `None` in a record written before they were
    /// kept.
    pub sandbox: Option<super::check::ExecContext>,
}

impl Record {
    /// The file text.
    pub fn encode(&self) -> String {
        let start = self.start_time.map_or_else(|| "-".to_owned(), |t| t.to_string());
        let boot = self.boot_id.as_deref().map_or_else(|| "-".to_owned(), escape);
        let grace = self.kill_grace_ms.map_or_else(String::new, |g| format!("kill_grace_ms={g}\n"));
        let ports = if self.ports.is_empty() {
            String::new()
        } else {
            let list: Vec<String> =
                self.ports.iter().map(|(n, p)| format!("{}:{p}", escape(n))).collect();
            format!("ports={}\n", list.join(","))
        };
        let resources = if self.resources.is_empty() {
            String::new()
        } else {
            let list: Vec<String> = self
                .resources
                .iter()
                .map(|(n, a)| {
                    let addresses: Vec<String> = a.iter().map(|a| escape(a)).collect();
                    format!("{}:{}", escape(n), addresses.join("+"))
                })
                .collect();
            format!("resources={}\n", list.join(","))
        };
        let disconnect =
            self.disconnect_ms.map_or_else(String::new, |ms| format!("disconnect_ms={ms}\n"));
        // JSON escapes every newline inside a string: one line.
        let checks = match serde_json::to_string(&self.checks) {
            Ok(json) if !self.checks.is_empty() => format!("checks={json}\n"),
            _ => String::new(),
        };
        // One line too; a path that is not UTF-8 cannot be JSON: the line
        // is left out (its checks then run as before it existed).
        let sandbox = match self.sandbox.as_ref().map(serde_json::to_string) {
            Some(Ok(json)) => format!("sandbox={json}\n"),
            None | Some(Err(_)) => String::new(),
        };
        format!(
            "{HEADER}\nexecutor={}\nframework={}\npgid={}\nstart_time={start}\nboot_id={boot}\n\
             cores={}\nmemory_mb={}\n{grace}{ports}{resources}{disconnect}{checks}{sandbox}end\n",
            escape(self.executor.as_str()),
            escape(self.framework.as_str()),
            self.pgid,
            self.cores,
            self.memory_mb,
        )
    }

    /// Parses file text; `None` if it is not a complete record.
    pub fn decode(text: &str) -> Option<Record> {
        let body = text.strip_suffix("\nend\n")?;
        let mut lines = body.lines();
        let v2 = match lines.next()? {
            HEADER => true,
            HEADER_V1 => false,
            _ => return None,
        };
        let (mut executor, mut framework, mut pgid, mut start) = (None, None, None, None);
        let (mut boot, mut cores, mut memory, mut grace) = (None, None, None, None);
        let mut ports = Vec::new();
        let mut resources = Vec::new();
        let (mut disconnect_ms, mut checks, mut sandbox) = (None, Vec::new(), None);
        for line in lines {
            let (k, v) = line.split_once('=')?;
            match k {
                "executor" => executor = Some(unescape(v)?),
                "framework" => framework = Some(unescape(v)?),
                "pgid" => pgid = Some(v.parse::<i32>().ok().filter(|p| *p > 1)?),
                "start_time" => start = Some(if v == "-" { None } else { Some(v.parse().ok()?) }),
                "boot_id" if v2 => boot = Some(if v == "-" { None } else { Some(unescape(v)?) }),
                "cores" if v2 => cores = Some(v.parse().ok()?),
                "memory_mb" if v2 => memory = Some(v.parse().ok()?),
                "kill_grace_ms" if v2 => grace = Some(v.parse().ok()?),
                "ports" if v2 => ports = decode_ports(v)?,
                "resources" if v2 => resources = decode_resources(v)?,
                "disconnect_ms" if v2 => disconnect_ms = Some(v.parse().ok()?),
                "checks" if v2 => checks = serde_json::from_str(v).ok()?,
                "sandbox" if v2 => sandbox = Some(serde_json::from_str(v).ok()?),
                _ => {}
            }
        }
        let (boot_id, cores, memory_mb) = if v2 { (boot?, cores?, memory?) } else { (None, 0, 0) };
        Some(Record {
            executor: ExecutorId(executor?),
            framework: FrameworkId(framework?),
            pgid: pgid?,
            start_time: start?,
            boot_id,
            cores,
            memory_mb,
            kill_grace_ms: grace,
            ports,
            resources,
            disconnect_ms,
            checks,
            sandbox,
        })
    }
}

/// A `ports=` line's value: `name:number` pairs separated by commas.
fn decode_ports(v: &str) -> Option<Vec<(String, u16)>> {
    v.split(',')
        .map(|pair| {
            let (n, p) = pair.rsplit_once(':')?;
            Some((unescape(n)?, p.parse().ok()?))
        })
        .collect()
}

/// A `resources=` line's value: `name:address+address` separated by
/// commas (names and addresses escaped).
fn decode_resources(v: &str) -> Option<regent_core::resources::Assigned> {
    v.split(',')
        .map(|kind| {
            let (n, list) = kind.split_once(':')?;
            let addresses = list.split('+').map(unescape).collect::<Option<Vec<String>>>()?;
            Some((unescape(n)?, addresses))
        })
        .collect()
}

/// The committed file of an executor's record.
pub fn record_path(dir: &Path, executor: &ExecutorId) -> PathBuf {
    dir.join(format!("{}{RECORD_EXT}", file_name(executor.as_str())))
}

/// Writes a record atomically and durably, mode 0600 (a temporary file a
/// crash left behind with another mode is set to it too).
pub fn write(dir: &Path, record: &Record) -> io::Result<()> {
    let path = record_path(dir, &record.executor);
    let mut tmp = path.clone().into_os_string();
    tmp.push(TEMP_SUFFIX);
    let tmp = PathBuf::from(tmp);
    // The worker's alone: it holds the executor's environment.
    let mut f =
        OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&tmp)?;
    f.set_permissions(fs::Permissions::from_mode(0o600))?;
    f.write_all(record.encode().as_bytes())?;
    f.sync_all()?;
    drop(f);
    fs::rename(&tmp, &path)?;
    sync_dir(dir)
}

/// Removes an executor's record durably (a missing record is not an error).
pub fn remove(dir: &Path, executor: &ExecutorId) -> io::Result<()> {
    match fs::remove_file(record_path(dir, executor)) {
        Ok(()) => sync_dir(dir),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// fsyncs a directory so a rename or unlink in it is durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// What [`scan`] found in the record directory.
#[derive(Debug, Default)]
pub struct Scan {
    /// Parsed records, with the file each came from.
    pub records: Vec<(PathBuf, Record)>,
    /// Committed records that could not be parsed (left in place).
    pub damaged: Vec<PathBuf>,
    /// Unparseable temporary files (a crash mid-write, before any pgid was
    /// committed).
    pub torn: Vec<PathBuf>,
}

/// Reads every record file. A temporary file that parses completely is
/// taken as a record too: the crash came after it was written but before
/// its rename, and its process group may still run.
pub fn scan(dir: &Path) -> io::Result<Scan> {
    let mut scan = Scan::default();
    let mut entries: Vec<_> = fs::read_dir(dir)?.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for path in entries {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let committed = name.ends_with(RECORD_EXT);
        let temp = name.ends_with(TEMP_SUFFIX);
        if !committed && !temp {
            continue;
        }
        let parsed = fs::read_to_string(&path).ok().and_then(|t| Record::decode(&t));
        match parsed {
            Some(r) => scan.records.push((path, r)),
            None if committed => scan.damaged.push(path),
            None => scan.torn.push(path),
        }
    }
    Ok(scan)
}

/// A process's start time (clock ticks since boot, field 22 of
/// `/proc/<pid>/stat`) and process group (field 5); `None` if the process
/// does not exist or `/proc` is unavailable.
pub fn proc_stat(pid: i32) -> Option<ProcStat> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may contain spaces
    // and parentheses: parse after the last ')'.
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (state).
    Some(ProcStat {
        state: fields.first()?.chars().next()?,
        pgid: fields.get(2)?.parse().ok()?,
        start_time: fields.get(19)?.parse().ok()?,
    })
}

/// The id of the current boot ([`BOOT_ID_PATH`]), `None` if it cannot be
/// read (no `/proc`).
pub fn boot_id() -> Option<String> {
    let id = fs::read_to_string(BOOT_ID_PATH).ok()?;
    let id = id.trim();
    (!id.is_empty()).then(|| id.to_owned())
}

/// The parts of `/proc/<pid>/stat` the supervisor uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcStat {
    /// Process state (`R`, `S`, `Z`, ...).
    pub state: char,
    /// Process group.
    pub pgid: i32,
    /// Start time in clock ticks since boot.
    pub start_time: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_round_trips() {
        let r = Record {
            resources: Default::default(),
            executor: ExecutorId::new("e 1/x=y"),
            framework: FrameworkId::new("fw\n2"),
            pgid: 4242,
            start_time: Some(123456),
            boot_id: Some("0b5e1c8a-3c1e-4a55-9d5e-6c3f2f9b7a10".into()),
            cores: 2,
            memory_mb: 512,
            kill_grace_ms: Default::default(),
            ports: Vec::new(),
            disconnect_ms: None,
            checks: Vec::new(),
            sandbox: None,
        };
        assert_eq!(Record::decode(&r.encode()), Some(r.clone()));
        let unknown = Record { start_time: None, boot_id: None, ..r.clone() };
        assert_eq!(Record::decode(&unknown.encode()), Some(unknown.clone()));
        // A group's kill grace is one more line; without one, the text is
        // what it was before the line existed.
        assert!(!r.encode().contains("kill_grace_ms"));
        let graced = Record { kill_grace_ms: Some(10_000), ..r.clone() };
        assert!(graced.encode().ends_with("\nkill_grace_ms=10000\nend\n"));
        assert_eq!(Record::decode(&graced.encode()), Some(graced.clone()));
        // Named ports are one more line, kept in order through a round trip.
        assert!(!r.encode().contains("ports="));
        let served =
            Record { ports: vec![("http".into(), 20001), ("admin".into(), 20000)], ..r.clone() };
        assert!(served.encode().ends_with("\nports=http:20001,admin:20000\nend\n"));
        // So are named resources' addresses.
        let gpus = Record {
            resources: vec![
                ("gpu".into(), vec!["2".into(), "3".into()]),
                ("fpga".into(), vec!["0000:3b:00.0".into()]),
            ],
            ..served.clone()
        };
        let text = gpus.encode();
        assert!(text.ends_with("\nresources=gpu:2+3,fpga:0000%3A3b%3A00.0\nend\n"), "{text}");
        assert_eq!(Record::decode(&text), Some(gpus));
        assert_eq!(Record::decode(&served.encode()), Some(served.clone()));
        let bad = served.encode().replace("admin:20000", "admin:99999");
        assert_eq!(Record::decode(&bad), None, "a port past 65535 is a damaged record");
        // A torn record (any prefix of a complete one) never parses.
        let text = unknown.encode();
        for cut in 0..text.len() {
            assert_eq!(Record::decode(&text[..cut]), None, "cut {cut}");
        }
    }

    #[test]
    fn a_singletons_rule_and_its_groups_checks_are_kept_and_older_records_read_without() {
        use regent_core::launch::{CheckKind, CheckSpec};
        // A record written before these lines existed (a worker upgraded
        // under its executors): it reads, with no rule and no checks.
        let before = "regent-executor-record 2\nexecutor=web%2Fg%230%231\nframework=web\n\
                      pgid=4242\nstart_time=99\nboot_id=b\ncores=1\nmemory_mb=64\n\
                      ports=http:20000\nend\n";
        let old = Record::decode(before).expect("an older record reads");
        assert_eq!((old.disconnect_ms, old.checks.len()), (None, 0));
        assert_eq!(old.encode(), before, "and is written byte for byte as before");
        let http = CheckKind::Http {
            port: "http".into(),
            path: "/health?a=b\nc".into(),
            expect: (200, 299),
        };
        let kept = Record {
            disconnect_ms: Some(30_000),
            checks: vec![
                CheckSpec { failures: 2, ..CheckSpec::new(http) },
                CheckSpec::new(CheckKind::Exec {
                    command: vec!["test".into(), "-f".into(), "x y".into()],
                }),
            ],
            ..old
        };
        let text = kept.encode();
        assert!(text.contains("\ndisconnect_ms=30000\nchecks=[{"), "{text}");
        assert_eq!(text.lines().count(), before.lines().count() + 2, "one line each: {text}");
        assert_eq!(Record::decode(&text), Some(kept));
        let torn = text.replace("\"failures\":2", "\"failures\":");
        assert_eq!(Record::decode(&torn), None, "damaged checks are a damaged record");
    }

    #[test]
    fn what_an_executor_was_started_with_is_kept_and_older_records_read_without() {
        use crate::exec::check::ExecContext;
        use crate::exec::user::RunAs;
        // A record written before the line existed reads with none, and is
        // written byte for byte as before.
        let before = "regent-executor-record 2\nexecutor=e1\nframework=fw\npgid=4242\n\
                      start_time=99\nboot_id=b\ncores=1\nmemory_mb=64\ncheckz=x\nend\n";
        let old = Record::decode(before).expect("an older record reads");
        assert_eq!(old.sandbox, None);
        assert_eq!(old.encode(), before.replace("checkz=x\n", ""), "an unknown line is skipped");
        let context = ExecContext {
            user: Some(RunAs {
                name: "svc".into(),
                uid: 1001,
                gid: 1002,
                groups: vec![27, 1002],
                home: "/home/s v c".into(),
            }),
            cwd: "/var/lib/regent/executors/e1/app dir".into(),
            env: vec![
                ("A".into(), "x=y=z".into()),
                ("MULTI".into(), "line 1\nend\nsandbox=forged\n".into()),
                ("QUOTE".into(), "\"{}\\ % \u{1f600} \t".into()),
                ("REGENT_PORT_HTTP".into(), "20001".into()),
                ("empty".into(), String::new()),
            ],
        };
        let kept = Record { sandbox: Some(context.clone()), ..old.clone() };
        let text = kept.encode();
        assert_eq!(text.lines().count(), before.lines().count(), "one line, for the unknown one");
        let line = text.lines().find(|l| l.starts_with("sandbox=")).expect("a sandbox line");
        assert!(line.starts_with("sandbox={\"user\":{\"name\":\"svc\",\"uid\":1001"), "{line}");
        assert!(text.ends_with("}\nend\n"), "the last line before end: {text}");
        assert_eq!(Record::decode(&text), Some(kept.clone()), "values with newlines and = survive");
        // Without a user of its own (the worker's).
        let own = Record { sandbox: Some(ExecContext { user: None, ..context }), ..old };
        assert!(own.encode().contains("sandbox={\"user\":null,"), "{}", own.encode());
        assert_eq!(Record::decode(&own.encode()), Some(own));
        // A damaged line is a damaged record, and a torn record never parses.
        let damaged = text.replace("\"uid\":1001", "\"uid\":");
        assert_eq!(Record::decode(&damaged), None);
        // (A cut inside a character is not UTF-8: `scan` cannot read it.)
        for cut in (0..text.len()).filter(|c| text.is_char_boundary(*c)) {
            assert_eq!(Record::decode(&text[..cut]), None, "cut {cut}");
        }
    }

    #[test]
    fn records_are_the_workers_alone() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let r = Record::decode(
            "regent-executor-record 2\nexecutor=e1\nframework=fw\npgid=4242\n\
             start_time=99\nboot_id=b\ncores=1\nmemory_mb=64\nend\n",
        )
        .unwrap();
        // A temporary file a crash left with a looser mode is tightened too.
        let tmp = dir.path().join(format!("e1{RECORD_EXT}{TEMP_SUFFIX}"));
        fs::write(&tmp, "torn").unwrap();
        fs::set_permissions(&tmp, fs::Permissions::from_mode(0o644)).unwrap();
        write(dir.path(), &r).unwrap();
        let mode = fs::metadata(record_path(dir.path(), &r.executor)).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn version_1_records_still_read_without_a_boot_id() {
        let v1 = "regent-executor-record 1\nexecutor=e1\nframework=fw\npgid=4242\n\
                  start_time=99\nend\n";
        let r = Record::decode(v1).expect("a version 1 record reads");
        assert_eq!(r.pgid, 4242);
        assert_eq!(r.start_time, Some(99));
        assert_eq!(r.boot_id, None, "a version 1 record names no boot");
        assert_eq!((r.cores, r.memory_mb), (0, 0));
        // A version 2 record without its boot id line is torn, not old.
        let v2 = v1.replace("record 1", "record 2");
        assert_eq!(Record::decode(&v2), None);
    }

    #[test]
    fn boot_id_of_this_machine() {
        let id = boot_id().expect("/proc is available on Linux");
        assert_eq!(id.len(), 36, "{id}");
    }

    #[test]
    fn proc_stat_of_self() {
        let me = std::process::id() as i32;
        let st = proc_stat(me).expect("/proc is available on Linux");
        assert_eq!(st.pgid, rustix::process::getpgrp().as_raw_nonzero().get());
        assert!(st.start_time > 0);
    }
}
