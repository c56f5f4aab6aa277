//! The executor shim: a tiny parent process per executor that outlives the
//! worker and records how the executor ended.
//!
//! An executor a new worker process re-adopts (see the module docs of
//! [`super`]) is not that process's child: it cannot `wait` for it. So every
//! executor runs under a shim — the `regent` binary itself, started as
//! `regent executor-shim --status FILE --stdout FILE [--cgroup DIR]... -- CMD ARGS...` (a
//! hidden subcommand; [`ShimArgs`]) — which the supervisor starts as the
//! leader of the executor's process group:
//!
//! ```text
//! worker (regent worker)                      may be killed and restarted
//! └─ regent executor-shim  (pid = pgid)       the recorded group leader
//!    └─ CMD ARGS...        (same group)       the executor's command
//! ```
//!
//! The shim spawns `CMD` as its child in its own group (same environment,
//! working directory and stderr; stdout to the `--stdout` file), tells the
//! supervisor on its stdout (a pipe) whether the command started
//! ([`HANDSHAKE_STARTED`] or [`HANDSHAKE_CANNOT_START`] and the reason),
//! waits for it, writes the [`ShimStatus`] to the status file atomically
//! (temp file, fsync, rename, fsync of the directory) and exits with the
//! same code (`128 + signal` when a signal ended the command,
//! [`CANNOT_START_EXIT`] when it could not be started).
//!
//! Signals: the shim handles SIGTERM, SIGINT and SIGHUP (and SIGQUIT,
//! SIGUSR1 and SIGUSR2, which a named scale may stop with) with a handler that
//! does nothing (a handled signal is reset to its default in the exec'd
//! command, an ignored one would be inherited). So the SIGTERM the
//! supervisor sends to the whole group for a graceful stop ends (or is
//! handled by) the command, and the shim survives to record how it ended.
//! The shim never forwards a signal: signal the group, as the worker does.
//! SIGKILL of the group kills both; then no status is written (the worker
//! that sent it knows it killed them).
//!
//! # The lease of a singleton (docs/design.md#issue-45)
//!
//! An executor of a group with a disconnect rule (`disconnect = {
//! stop_after = "30s" }`) is stopped by its worker's core once that worker
//! has heard from no master for `stop_after`; the leader re-places it only
//! `cut_off::replace_after` (`stop_after` + kill grace + a margin) after it
//! last heard from the worker. A worker *process* that is down (killed,
//! crashed, being restarted) or paused (SIGSTOP) stops nothing, so the shim
//! of such an executor enforces the same deadline itself, given
//! `--word FILE --stop-after MS --grace MS` ([`Lease`]): `FILE` (the
//! worker's [`WORD_FILE`]) holds when the worker's core last heard from the
//! master it follows, as an absolute `CLOCK_BOOTTIME` reading in ms
//! (written by the worker as its core says, [`write_word`]; never at a
//! worker's start). A thread polls it every `min(250 ms, stop_after / 10)`;
//! once the boot clock passes `word + stop_after` the shim sends SIGTERM to
//! its process group (the command and all it forked; the shim survives it),
//! SIGKILL after the grace if the command still runs, and records
//! [`ShimStatus::CutOff`], which a worker — the same process, or a new one
//! that re-adopts the executor — reports as the core's own cut-off stop is
//! (`Failed`, `stopped: no master heard for 30s`: no retry charged). Then
//! it kills what is left of its group, itself included (the status is
//! durable by then). A word file that is missing or unreadable counts as
//! word at the shim's start: the worker launched it on a leader's order
//! just before. The boot clock counts while the host is suspended and no
//! wall-clock step moves it.

use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write as _};
use std::os::unix::process::ExitStatusExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The hidden subcommand of the `regent` binary that runs the shim.
pub const SUBCOMMAND: &str = "executor-shim";

/// The name of the status file in the executor's directory.
pub const STATUS_FILE: &str = "exit-status";

/// The shim's exit code when the command could not be started (as a shell
/// reports a command it cannot run). Only a hint: the status file tells a
/// command that exited 127 from one that never started.
pub const CANNOT_START_EXIT: i32 = 127;

/// The first word of the shim's handshake line when the command runs
/// (followed by its pid).
pub const HANDSHAKE_STARTED: &str = "started";

/// The first word of the shim's handshake line when the command could not
/// be started (followed by the reason).
pub const HANDSHAKE_CANNOT_START: &str = "cannot-start";

/// The first line of a status file.
const HEADER: &str = "regent-exit-status 1";

/// The name of the word file in the worker's work directory: when the
/// worker last heard from its master, for the shims of its singleton
/// executors ([`Lease`]).
pub const WORD_FILE: &str = "last-word";

/// The signal a lapsed lease stops the command with first
/// ([`ShimStatus::CutOff`]).
const TERM: i32 = 15;

/// How an executor's command ended, as the shim records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ShimStatus {
    /// It exited with this code.
    Exited {
        /// The exit code.
        code: i32,
    },
    /// A signal ended it.
    Signaled {
        /// The signal number.
        signal: i32,
    },
    /// It could not be started.
    CannotStart {
        /// Why, naming the OS error.
        reason: String,
    },
    /// The shim stopped it: its [`Lease`] lapsed (no word from a master
    /// for the group's `stop_after`, docs/design.md#issue-45).
    CutOff {
        /// The group's `stop_after`, in ms.
        stop_after_ms: u64,
    },
}

impl ShimStatus {
    /// The shim's own exit code for this status: the command's code,
    /// `128 + signal`, or [`CANNOT_START_EXIT`] (`128 + SIGTERM` for a
    /// lapsed lease, though the shim then ends by its own SIGKILL).
    pub fn exit_code(&self) -> i32 {
        match self {
            ShimStatus::Exited { code } => *code,
            ShimStatus::Signaled { signal } => 128 + signal,
            ShimStatus::CannotStart { .. } => CANNOT_START_EXIT,
            ShimStatus::CutOff { .. } => 128 + TERM,
        }
    }

    /// The file text:
    ///
    /// ```text
    /// regent-exit-status 1
    /// exited=<code> | signal=<number> | cannot-start=<reason on one line>
    ///   | cut-off=<stop_after ms>
    /// end
    /// ```
    pub fn encode(&self) -> String {
        let line = match self {
            ShimStatus::Exited { code } => format!("exited={code}"),
            ShimStatus::Signaled { signal } => format!("signal={signal}"),
            ShimStatus::CannotStart { reason } => {
                format!("cannot-start={}", one_line(reason))
            }
            ShimStatus::CutOff { stop_after_ms } => format!("cut-off={stop_after_ms}"),
        };
        format!("{HEADER}\n{line}\nend\n")
    }

    /// Parses file text; `None` unless it is a complete status.
    pub fn decode(text: &str) -> Option<ShimStatus> {
        let body = text.strip_prefix(HEADER)?.strip_prefix('\n')?.strip_suffix("\nend\n")?;
        let (key, value) = body.split_once('=')?;
        match key {
            "exited" => Some(ShimStatus::Exited { code: value.parse().ok()? }),
            "signal" => Some(ShimStatus::Signaled { signal: value.parse().ok()? }),
            "cut-off" => Some(ShimStatus::CutOff { stop_after_ms: value.parse().ok()? }),
            "cannot-start" if !value.contains('\n') => {
                Some(ShimStatus::CannotStart { reason: value.to_owned() })
            }
            _ => None,
        }
    }
}

/// `text` with line breaks replaced by spaces.
fn one_line(text: &str) -> String {
    text.replace(['\n', '\r'], " ")
}

/// The status recorded at `path`; `None` when there is none (the shim was
/// killed with SIGKILL, the executor predates the shim, or it still runs) or
/// it is incomplete.
pub fn read_status(path: &Path) -> Option<ShimStatus> {
    ShimStatus::decode(&fs::read_to_string(path).ok()?)
}

/// Writes `status` to `path` atomically and durably: a temporary file
/// beside it, fsync, rename, fsync of the directory.
pub fn write_status(path: &Path, status: &ShimStatus) -> io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    {
        let mut f = File::create(&tmp)?;
        f.write_all(status.encode().as_bytes())?;
        f.sync_all()?;
    }
    fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        File::open(if dir.as_os_str().is_empty() { Path::new(".") } else { dir })?.sync_all()?;
    }
    Ok(())
}

/// Writes the word file `path` ([`WORD_FILE`]): `boot_ms`, the boot
/// clock's reading in ms of the worker's last word from its master.
/// Atomic (a temporary file beside it, then a rename) so a shim never
/// reads half a number; not fsynced: a host that goes down takes the
/// executors with it.
pub fn write_word(path: &Path, boot_ms: u64) -> io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    fs::write(&tmp, format!("{boot_ms}\n"))?;
    fs::rename(&tmp, path)
}

/// The word in the word file `path` ([`write_word`]), if it can be read.
pub fn read_word(path: &Path) -> Option<u64> {
    fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The lease of a singleton executor's shim (see the module docs):
/// `--word FILE --stop-after MS --grace MS`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    /// The worker's word file ([`WORD_FILE`]).
    pub word: PathBuf,
    /// The group's `stop_after`, in ms: the command is stopped once the
    /// boot clock passes the word plus this.
    pub stop_after_ms: u64,
    /// How long after SIGTERM the command gets before SIGKILL, in ms.
    pub grace_ms: u64,
}

impl Lease {
    /// How often the word file is read: `min(250 ms, stop_after / 10)`
    /// (at least 10 ms).
    pub fn poll(&self) -> std::time::Duration {
        std::time::Duration::from_millis((self.stop_after_ms / 10).clamp(10, 250))
    }
}

/// The arguments of `regent executor-shim`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShimArgs {
    /// Where the status is written.
    pub status: PathBuf,
    /// The file the command's stdout is appended to (the shim's own stdout
    /// is the handshake pipe).
    pub stdout: PathBuf,
    /// The command's stderr file, when the shim writes it (with
    /// `rotation`); else the command inherits the shim's stderr.
    pub stderr: Option<PathBuf>,
    /// Rotate the command's stdout (and `stderr`) by size
    /// (`--log-max-bytes N --log-files K`; [`super::rotate`]): the command
    /// writes into pipes the shim copies into rotating files. `None`: the
    /// command writes the files itself, unbounded.
    pub rotation: Option<super::rotate::Rotation>,
    /// The identity the command runs as (`--user UID:GID:GROUPS`; the
    /// shim stays root and starts it through
    /// [`super::user::EXEC_SUBCOMMAND`]). `None`: the shim's own.
    pub user: Option<super::user::Identity>,
    /// The cgroups the shim joins before it starts the command
    /// (`--cgroup DIR`, one per hierarchy: [`super::cgroup`]), so the
    /// command and all it forks are limited from the start. Empty: none.
    pub cgroups: Vec<PathBuf>,
    /// The lease of a singleton executor (`--word FILE --stop-after MS
    /// --grace MS`, see the module docs). `None`: the command runs until
    /// it ends or is signalled.
    pub lease: Option<Lease>,
    /// The program (looked up in `PATH`) and its arguments.
    pub command: Vec<OsString>,
}

impl ShimArgs {
    /// The command line after the program: [`SUBCOMMAND`], the options,
    /// `--` and the command.
    pub fn to_args(&self) -> Vec<OsString> {
        let mut v: Vec<OsString> = vec![
            SUBCOMMAND.into(),
            "--status".into(),
            self.status.clone().into(),
            "--stdout".into(),
            self.stdout.clone().into(),
        ];
        if let Some(stderr) = &self.stderr {
            v.push("--stderr".into());
            v.push(stderr.clone().into());
        }
        if let Some(r) = self.rotation {
            v.push("--log-max-bytes".into());
            v.push(r.max_bytes.to_string().into());
            v.push("--log-files".into());
            v.push(r.files.to_string().into());
        }
        if let Some(user) = &self.user {
            v.push("--user".into());
            v.push(user.to_string().into());
        }
        for dir in &self.cgroups {
            v.push("--cgroup".into());
            v.push(dir.clone().into());
        }
        if let Some(lease) = &self.lease {
            v.push("--word".into());
            v.push(lease.word.clone().into());
            v.push("--stop-after".into());
            v.push(lease.stop_after_ms.to_string().into());
            v.push("--grace".into());
            v.push(lease.grace_ms.to_string().into());
        }
        v.push("--".into());
        v.extend(self.command.iter().cloned());
        v
    }

    /// Parses what follows [`SUBCOMMAND`] (the `regent` binary parses it
    /// with clap; this is for other binaries that act as the shim, such as
    /// tests). Names the problem on bad input.
    pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<ShimArgs, ShimError> {
        let mut args = args.into_iter();
        let (mut status, mut stdout, mut cgroups) = (None, None, Vec::new());
        let (mut stderr, mut max_bytes, mut files) = (None, None, None);
        let mut user = None;
        let (mut word, mut stop_after_ms, mut grace_ms) = (None, None, None);
        loop {
            let Some(arg) = args.next() else {
                return Err(ShimError::NoSeparator);
            };
            match arg.to_str() {
                Some("--") => break,
                Some("--user") => {
                    let value = args.next().ok_or(ShimError::NoValue("--user"))?;
                    let parsed = value.to_str().and_then(|v| v.parse().ok());
                    user = Some(parsed.ok_or(ShimError::BadNumber("--user UID:GID:GROUPS"))?);
                }
                Some("--stderr") => {
                    stderr =
                        Some(PathBuf::from(args.next().ok_or(ShimError::NoValue("--stderr"))?));
                }
                Some(flag @ ("--log-max-bytes" | "--log-files")) => {
                    let name =
                        if flag == "--log-files" { "--log-files" } else { "--log-max-bytes" };
                    let value = args.next().ok_or(ShimError::NoValue(name))?;
                    let n: u64 = value
                        .to_str()
                        .and_then(|v| v.parse().ok())
                        .filter(|n| *n > 0)
                        .ok_or(ShimError::BadNumber(name))?;
                    if name == "--log-files" {
                        files = Some(u32::try_from(n).map_err(|_| ShimError::BadNumber(name))?);
                    } else {
                        max_bytes = Some(n);
                    }
                }
                Some("--cgroup") => {
                    cgroups.push(PathBuf::from(args.next().ok_or(ShimError::NoValue("--cgroup"))?));
                }
                Some("--word") => {
                    word = Some(PathBuf::from(args.next().ok_or(ShimError::NoValue("--word"))?));
                }
                Some(flag @ ("--stop-after" | "--grace")) => {
                    let name = if flag == "--grace" { "--grace" } else { "--stop-after" };
                    let value = args.next().ok_or(ShimError::NoValue(name))?;
                    let ms: u64 = value
                        .to_str()
                        .and_then(|v| v.parse().ok())
                        .filter(|n| *n > 0 || name == "--grace")
                        .ok_or(ShimError::BadNumber(name))?;
                    *(if name == "--grace" { &mut grace_ms } else { &mut stop_after_ms }) =
                        Some(ms);
                }
                Some(flag @ ("--status" | "--stdout")) => {
                    let flag = if flag == "--status" { "--status" } else { "--stdout" };
                    let value = args.next().ok_or(ShimError::NoValue(flag))?;
                    let slot = if flag == "--status" { &mut status } else { &mut stdout };
                    *slot = Some(PathBuf::from(value));
                }
                _ => return Err(ShimError::Unexpected(arg)),
            }
        }
        let command: Vec<OsString> = args.collect();
        if command.is_empty() {
            return Err(ShimError::NoCommand);
        }
        Ok(ShimArgs {
            status: status.ok_or(ShimError::Missing("--status FILE"))?,
            stdout: stdout.ok_or(ShimError::Missing("--stdout FILE"))?,
            stderr,
            user,
            rotation: match (max_bytes, files) {
                (None, None) => None,
                (Some(max_bytes), Some(files)) => {
                    Some(super::rotate::Rotation { max_bytes, files })
                }
                (None, Some(_)) => return Err(ShimError::Missing("--log-max-bytes N")),
                (Some(_), None) => return Err(ShimError::Missing("--log-files K")),
            },
            cgroups,
            lease: match (word, stop_after_ms, grace_ms) {
                (None, None, None) => None,
                (Some(word), Some(stop_after_ms), Some(grace_ms)) => {
                    Some(Lease { word, stop_after_ms, grace_ms })
                }
                (None, ..) => return Err(ShimError::Missing("--word FILE")),
                (_, None, _) => return Err(ShimError::Missing("--stop-after MS")),
                (.., None) => return Err(ShimError::Missing("--grace MS")),
            },
            command,
        })
    }
}

/// Why the shim's arguments are refused ([`ShimArgs::parse`]).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ShimError {
    /// No `--` before the command.
    #[error("missing `-- CMD ARGS...`")]
    NoSeparator,
    /// A flag without its value.
    #[error("{0} needs a value")]
    NoValue(&'static str),
    /// An argument the shim does not take.
    #[error("unexpected argument {0:?}")]
    Unexpected(OsString),
    /// A count that is not a positive number.
    #[error("{0} needs a positive number")]
    BadNumber(&'static str),
    /// Nothing after `--`.
    #[error("no command after `--`")]
    NoCommand,
    /// A required flag is missing.
    #[error("missing {0}")]
    Missing(&'static str),
}

crate::error::into_report!(ShimError);

/// Runs the shim: starts the command, reports the handshake on stdout,
/// waits, records the status and returns the exit code to exit with.
/// Diagnostics go to stderr (the executor's stderr file).
pub fn run(args: &ShimArgs) -> i32 {
    // Installed before the command exists: a graceful stop of the group
    // never kills the shim before it can record the end.
    if let Err(e) = ctrlc::set_handler(|| {}) {
        eprintln!("regent {SUBCOMMAND}: cannot handle termination signals: {e}");
    }
    // The other signals a stop may start with (`StopSignal`): handled the
    // same way, so the shim outlives them too.
    let seen = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for sig in
        [signal_hook::consts::SIGQUIT, signal_hook::consts::SIGUSR1, signal_hook::consts::SIGUSR2]
    {
        if let Err(e) = signal_hook::flag::register(sig, seen.clone()) {
            eprintln!("regent {SUBCOMMAND}: cannot handle signal {sig}: {e}");
        }
    }
    let started = join_cgroups(&args.cgroups)
        .and_then(|()| {
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(&args.stdout)
                .map_err(|e| format!("cannot open {}: {e}", args.stdout.display()))
        })
        .and_then(|out| Ok((out, open_rotating(args)?)))
        .and_then(|(out, rotating)| {
            let (program, rest) = args.command.split_first().ok_or("empty command")?;
            let mut cmd = match &args.user {
                None => {
                    let mut cmd = Command::new(program);
                    cmd.args(rest);
                    cmd
                }
                // This binary drops to the user in a process of its own and
                // execs the command there (same pid).
                Some(identity) => {
                    let me = std::env::current_exe()
                        .map_err(|e| format!("cannot find the shim's own binary: {e}"))?;
                    let mut cmd = Command::new(me);
                    cmd.arg(super::user::EXEC_SUBCOMMAND)
                        .arg(identity.to_string())
                        .arg("--")
                        .args(&args.command);
                    cmd
                }
            };
            cmd.stdin(Stdio::inherit());
            match &rotating {
                None => {
                    let child_out = out
                        .try_clone()
                        .map_err(|e| format!("cannot open {}: {e}", args.stdout.display()))?;
                    cmd.stdout(child_out).stderr(Stdio::inherit());
                }
                Some((_, err)) => {
                    cmd.stdout(Stdio::piped());
                    cmd.stderr(if err.is_some() { Stdio::piped() } else { Stdio::inherit() });
                }
            }
            cmd.spawn()
                .map(|child| (child, out, rotating))
                .map_err(|e| format!("cannot start {:?}: {e}", program.to_string_lossy()))
        });
    let (mut child, out, rotating) = match started {
        Ok(started) => started,
        Err(reason) => {
            let status = ShimStatus::CannotStart { reason: one_line(&reason) };
            record(&args.status, &status);
            handshake(&format!("{HANDSHAKE_CANNOT_START} {}", one_line(&reason)));
            return CANNOT_START_EXIT;
        }
    };
    handshake(&format!("{HANDSHAKE_STARTED} {}", child.id()));
    let copiers = rotating.map(|(out_file, err_file)| {
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let mut n = 0;
        if let Some(pipe) = child.stdout.take() {
            copy_in_background(pipe, out_file, done_tx.clone());
            n += 1;
        }
        if let (Some(pipe), Some(file)) = (child.stderr.take(), err_file) {
            copy_in_background(pipe, file, done_tx);
            n += 1;
        }
        (done_rx, n)
    });
    // The handshake pipe closes: the supervisor reads to its end.
    if let Err(e) = rustix::stdio::dup2_stdout(&out) {
        eprintln!("regent {SUBCOMMAND}: cannot close the handshake pipe: {e}");
    }
    drop(out);
    let watch = args.lease.clone().and_then(|lease| watch_lease(lease, &args.status, child.id()));
    let waited = child.wait();
    // From here the watch neither signals nor records: the command ended
    // (or was stopped by it, then said so below).
    let cut_off = watch.as_ref().and_then(|w| w.end());
    let status = match waited {
        Ok(st) => match (st.code(), st.signal()) {
            (Some(code), _) => ShimStatus::Exited { code },
            (None, Some(signal)) => ShimStatus::Signaled { signal },
            (None, None) => ShimStatus::Exited { code: 255 },
        },
        Err(e) => {
            // Cannot happen for our own child; nothing to record.
            eprintln!("regent {SUBCOMMAND}: cannot wait for the command: {e}");
            return 255;
        }
    };
    if let Some((done, n)) = copiers {
        // The command's output is copied to its end; a process it left
        // behind that still holds the pipes is not waited for long (the
        // worker kills the group once the shim ends).
        let deadline = std::time::Instant::now() + COPY_GRACE;
        for _ in 0..n {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if done.recv_timeout(left).is_err() {
                break;
            }
        }
    }
    let status = match cut_off {
        Some(stop_after_ms) => ShimStatus::CutOff { stop_after_ms },
        None => status,
    };
    record(&args.status, &status);
    if cut_off.is_some() {
        // What the command forked goes too, now that the end is recorded
        // (no worker may be there to do it: docs/design.md#issue-45).
        kill_own_group(None, rustix::process::Signal::KILL);
    }
    status.exit_code()
}

/// The watch over a singleton's [`Lease`] (see the module docs): a thread
/// that stops the command once the lease lapses.
struct Watch {
    /// Whether the lease lapsed (the command is being stopped for it), and
    /// whether the command ended: the thread signals and records only
    /// while it has not, under this lock.
    state: std::sync::Arc<std::sync::Mutex<WatchState>>,
    stop_after_ms: u64,
}

#[derive(Default)]
struct WatchState {
    lapsed: bool,
    ended: bool,
}

impl Watch {
    /// The command ended: the watch stops. `Some(stop_after)` if the
    /// lease had lapsed (the end is the watch's doing).
    fn end(&self) -> Option<u64> {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.ended = true;
        st.lapsed.then_some(self.stop_after_ms)
    }
}

/// Starts the thread that watches `lease` for the command `child`
/// (recording to `status` if it must kill the group); `None` (said on
/// stderr) if it cannot start.
fn watch_lease(lease: Lease, status: &Path, child: u32) -> Option<Watch> {
    let state = std::sync::Arc::new(std::sync::Mutex::new(WatchState::default()));
    let watch = Watch { state: state.clone(), stop_after_ms: lease.stop_after_ms };
    let status = status.to_owned();
    // A missing or unreadable word file is word at the shim's start: the
    // worker launched it on a leader's order just before.
    let start = crate::clock::boot_ms();
    let spawned = std::thread::Builder::new().name("regent-shim-lease".into()).spawn(move || {
        let lock = || state.lock().unwrap_or_else(|e| e.into_inner());
        let poll = lease.poll();
        loop {
            if lock().ended {
                return;
            }
            let word = read_word(&lease.word).unwrap_or(start);
            let due = word.saturating_add(lease.stop_after_ms);
            let now = crate::clock::boot_ms();
            if now > due {
                break;
            }
            std::thread::sleep(
                poll.min(std::time::Duration::from_millis(due.saturating_add(1) - now)),
            );
        }
        {
            let mut st = lock();
            if st.ended {
                return;
            }
            st.lapsed = true;
            eprintln!(
                "regent {SUBCOMMAND}: no word from a master for {} ms (the group's stop_after): \
                 stopping the command (SIGTERM, SIGKILL after {} ms)",
                lease.stop_after_ms, lease.grace_ms
            );
            kill_own_group(Some(child), rustix::process::Signal::TERM);
        }
        let grace_end =
            std::time::Instant::now() + std::time::Duration::from_millis(lease.grace_ms);
        while std::time::Instant::now() < grace_end {
            if lock().ended {
                return;
            }
            std::thread::sleep(
                poll.min(grace_end.saturating_duration_since(std::time::Instant::now())),
            );
        }
        let st = lock();
        if !st.ended {
            // Still running after the grace: recorded first (the kill
            // takes the shim too), then killed with all it forked.
            record(&status, &ShimStatus::CutOff { stop_after_ms: lease.stop_after_ms });
            kill_own_group(Some(child), rustix::process::Signal::KILL);
        }
    });
    match spawned {
        Ok(_) => Some(watch),
        Err(e) => {
            eprintln!(
                "regent {SUBCOMMAND}: cannot start a thread to watch the lease: {e}; the command \
                 is stopped only by its worker"
            );
            None
        }
    }
}

/// Sends `signal` to the shim's process group when the shim leads it (the
/// supervisor starts it so: the command and all it forked, the shim
/// itself too), else to `child` alone (never to a group the shim only
/// belongs to: it may be its parent's); nothing without a child then.
fn kill_own_group(child: Option<u32>, signal: rustix::process::Signal) {
    let me = rustix::process::getpid();
    let sent = if rustix::process::getpgrp() == me {
        rustix::process::kill_process_group(me, signal)
    } else {
        match child.and_then(|c| rustix::process::Pid::from_raw(c as i32)) {
            Some(pid) => rustix::process::kill_process(pid, signal),
            None => return,
        }
    };
    if let Err(e) = sent {
        eprintln!("regent {SUBCOMMAND}: cannot send {signal:?}: {e}");
    }
}

/// How long the shim waits, after the command ended, for its output pipes
/// to be copied to their end.
const COPY_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

type Rotating = (super::rotate::RotatingFile, Option<super::rotate::RotatingFile>);

/// The rotating stdout (and stderr) files, when `args` rotate.
fn open_rotating(args: &ShimArgs) -> Result<Option<Rotating>, String> {
    let Some(rotation) = args.rotation else { return Ok(None) };
    let open = |path: &Path| {
        super::rotate::RotatingFile::open(path, rotation)
            .map_err(|e| format!("cannot open {}: {e}", path.display()))
    };
    let out = open(&args.stdout)?;
    let err = args.stderr.as_deref().map(open).transpose()?;
    Ok(Some((out, err)))
}

/// Copies `pipe` into `file` on a thread of its own until the pipe ends,
/// then says so on `done`. A file that cannot be written is reported once
/// and the pipe still drained (the command must never block on it).
fn copy_in_background(
    mut pipe: impl io::Read + Send + 'static,
    mut file: super::rotate::RotatingFile,
    done: std::sync::mpsc::Sender<()>,
) {
    let spawned = std::thread::Builder::new().name("regent-shim-copy".into()).spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        let mut failed = false;
        loop {
            match pipe.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    if let Err(e) = file.write_all(&buf[..n]) {
                        if !failed {
                            eprintln!(
                                "regent {SUBCOMMAND}: cannot write the command's output: {e}"
                            );
                            failed = true;
                        }
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        let _ = done.send(());
    });
    if let Err(e) = spawned {
        eprintln!("regent {SUBCOMMAND}: cannot start a thread to copy the command's output: {e}");
    }
}

/// Moves the shim into each of `cgroups` (its pid written to
/// `cgroup.procs`); the command it starts next inherits them.
fn join_cgroups(cgroups: &[PathBuf]) -> Result<(), String> {
    let pid = std::process::id().to_string();
    for dir in cgroups {
        let procs = dir.join("cgroup.procs");
        super::cgroup::write_file(&procs, &pid)
            .map_err(|e| format!("cannot join cgroup {}: {e}", dir.display()))?;
    }
    Ok(())
}

fn record(path: &Path, status: &ShimStatus) {
    if let Err(e) = write_status(path, status) {
        eprintln!("regent {SUBCOMMAND}: cannot record the exit status in {}: {e}", path.display());
    }
}

/// Writes the handshake line to stdout (a pipe the supervisor reads; a
/// supervisor that went away is no reason to stop).
fn handshake(line: &str) {
    let mut out = io::stdout().lock();
    let _ = writeln!(out, "{line}").and_then(|()| out.flush());
}
