//! The executor shim: a tiny parent process per executor that outlives the
//! worker and records how the executor ended.
//!
//! An executor a new worker process re-adopts (see the module docs of
//! [`super`]) is not that process's child: it cannot `wait` for it. So every
//! executor runs under a shim — the `regent` binary itself, started as
//! `regent executor-shim --status FILE --stdout FILE -- CMD ARGS...` (a
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
//! Signals: the shim handles SIGTERM, SIGINT and SIGHUP with a handler that
//! does nothing (a handled signal is reset to its default in the exec'd
//! command, an ignored one would be inherited). So the SIGTERM the
//! supervisor sends to the whole group for a graceful stop ends (or is
//! handled by) the command, and the shim survives to record how it ended.
//! The shim never forwards a signal: signal the group, as the worker does.
//! SIGKILL of the group kills both; then no status is written (the worker
//! that sent it knows it killed them).

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
}

impl ShimStatus {
    /// The shim's own exit code for this status: the command's code,
    /// `128 + signal`, or [`CANNOT_START_EXIT`].
    pub fn exit_code(&self) -> i32 {
        match self {
            ShimStatus::Exited { code } => *code,
            ShimStatus::Signaled { signal } => 128 + signal,
            ShimStatus::CannotStart { .. } => CANNOT_START_EXIT,
        }
    }

    /// The file text:
    ///
    /// ```text
    /// regent-exit-status 1
    /// exited=<code> | signal=<number> | cannot-start=<reason on one line>
    /// end
    /// ```
    pub fn encode(&self) -> String {
        let line = match self {
            ShimStatus::Exited { code } => format!("exited={code}"),
            ShimStatus::Signaled { signal } => format!("signal={signal}"),
            ShimStatus::CannotStart { reason } => {
                format!("cannot-start={}", one_line(reason))
            }
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

/// The arguments of `regent executor-shim`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShimArgs {
    /// Where the status is written.
    pub status: PathBuf,
    /// The file the command's stdout is appended to (the shim's own stdout
    /// is the handshake pipe).
    pub stdout: PathBuf,
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
            "--".into(),
        ];
        v.extend(self.command.iter().cloned());
        v
    }

    /// Parses what follows [`SUBCOMMAND`] (the `regent` binary parses it
    /// with clap; this is for other binaries that act as the shim, such as
    /// tests). Names the problem on bad input.
    pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<ShimArgs, ShimError> {
        let mut args = args.into_iter();
        let (mut status, mut stdout) = (None, None);
        loop {
            let Some(arg) = args.next() else {
                return Err(ShimError::NoSeparator);
            };
            match arg.to_str() {
                Some("--") => break,
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
    let started = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&args.stdout)
        .map_err(|e| format!("cannot open {}: {e}", args.stdout.display()))
        .and_then(|out| {
            let (program, rest) = args.command.split_first().ok_or("empty command")?;
            let child_out = out
                .try_clone()
                .map_err(|e| format!("cannot open {}: {e}", args.stdout.display()))?;
            Command::new(program)
                .args(rest)
                .stdin(Stdio::inherit())
                .stdout(child_out)
                .stderr(Stdio::inherit())
                .spawn()
                .map(|child| (child, out))
                .map_err(|e| format!("cannot start {:?}: {e}", program.to_string_lossy()))
        });
    let (mut child, out) = match started {
        Ok(started) => started,
        Err(reason) => {
            let status = ShimStatus::CannotStart { reason: one_line(&reason) };
            record(&args.status, &status);
            handshake(&format!("{HANDSHAKE_CANNOT_START} {}", one_line(&reason)));
            return CANNOT_START_EXIT;
        }
    };
    handshake(&format!("{HANDSHAKE_STARTED} {}", child.id()));
    // The handshake pipe closes: the supervisor reads to its end.
    if let Err(e) = rustix::stdio::dup2_stdout(&out) {
        eprintln!("regent {SUBCOMMAND}: cannot close the handshake pipe: {e}");
    }
    drop(out);
    let status = match child.wait() {
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
    record(&args.status, &status);
    status.exit_code()
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
