//! `regent logs EXECUTOR [--stderr] [--follow] [--tail-bytes N]`: an
//! executor's output, relayed by the leader from the executor's worker.
//!
//! The command reads the file chunk by chunk
//! ([`crate::client::fetch_log_chunk_with`], at most
//! [`MAX_LOG_CHUNK`] bytes each) and writes the bytes to its output as they
//! are (binary-safe, no decoding). Without `--follow` it stops once it has
//! written what the file held when it was read. With `--follow` it keeps
//! asking every [`FOLLOW_POLL`] for new bytes until the leader says the
//! executor has ended (`finished`) and everything was written, then
//! returns `Ok`.
//!
//! Every chunk is asked for anew of the masters, so a leader failover is
//! survived the way every client command survives it: standbys answer
//! `NotLeader` with a hint and the leader is found again. Once the first
//! chunk was read, failures (no leader reachable, or a refusal such as a
//! new leader that does not know the executor until its worker
//! re-registers) are retried until the patience's connect timeout passes
//! without a single success; the first chunk's refusal (an unknown
//! executor, say) ends the command at once with the leader's reason.

use crate::client::{fetch_log_chunk_with, ClientError, Patience};
use crate::net::NetConfig;
use regent_core::limits::MAX_LOG_CHUNK;
use regent_core::protocol::LogStream;
use regent_core::Addr;
use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often `--follow` asks for new bytes once it has caught up.
pub const FOLLOW_POLL: Duration = Duration::from_millis(500);

/// What `regent logs` prints.
#[derive(Clone, Debug)]
pub struct LogsOptions {
    /// The executor.
    pub executor: String,
    /// Which of its files.
    pub stream: LogStream,
    /// Keep reading until the executor has ended.
    pub follow: bool,
    /// Start this many bytes before the end instead of at the start.
    pub tail_bytes: Option<u64>,
}

/// Why the output could not be shown in full.
#[derive(Debug, thiserror::Error)]
pub enum LogsError {
    /// The first chunk: the leader refused (an unknown executor...) or no
    /// leader answered.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// A later chunk kept failing for the whole connect timeout.
    #[error("{why} (after {pos} bytes of {executor}'s {file}; gave up after {after:?}, --connect-timeout)")]
    GaveUp {
        /// The last chunk's failure.
        #[source]
        why: ClientError,
        /// How many bytes had been written.
        pos: u64,
        /// The executor whose output was read.
        executor: String,
        /// The file read (`stdout`, `stderr`).
        file: &'static str,
        /// The connect timeout given up after.
        after: std::time::Duration,
    },
    /// Writing to the output failed.
    #[error("cannot write the output: {0}")]
    Write(#[source] std::io::Error),
}

crate::error::into_report!(LogsError);

/// Writes the executor's output to `out` (see the module docs). The error
/// names why: the leader's refusal, or every master tried.
pub async fn print_logs(
    masters: &[Addr],
    net: Arc<NetConfig>,
    opts: &LogsOptions,
    patience: Patience<'_>,
    out: &mut impl Write,
) -> Result<(), LogsError> {
    let fetch = |offset: Option<u64>, max: u32| {
        fetch_log_chunk_with(
            masters,
            net.clone(),
            &opts.executor,
            opts.stream,
            offset,
            max,
            patience,
        )
    };
    // Where to start: the beginning, or `tail_bytes` before the end (the
    // size comes with an empty chunk).
    let mut chunk = match opts.tail_bytes {
        None => fetch(Some(0), MAX_LOG_CHUNK).await?,
        Some(n) => {
            let end = fetch(None, 0).await?;
            fetch(Some(end.size.saturating_sub(n)), MAX_LOG_CHUNK).await?
        }
    };
    let mut pos = chunk.offset;
    // Since when chunks fail in a row (`None`: the last one was read).
    let mut failing: Option<Instant> = None;
    let mut last_notice: Option<Instant> = None;
    loop {
        if chunk.offset == pos && !chunk.data.is_empty() {
            out.write_all(&chunk.data).map_err(LogsError::Write)?;
            out.flush().map_err(LogsError::Write)?;
            pos += chunk.data.len() as u64;
        }
        let caught_up = pos >= chunk.size;
        if caught_up && (!opts.follow || chunk.finished) {
            return Ok(());
        }
        if caught_up {
            async_io::Timer::after(FOLLOW_POLL).await;
        }
        // The next chunk; failures are retried while the connect timeout
        // has not passed since the first of them.
        loop {
            let why = match fetch(Some(pos), MAX_LOG_CHUNK).await {
                Ok(c) => {
                    failing = None;
                    chunk = c;
                    break;
                }
                Err(refused_or_unreachable) => refused_or_unreachable,
            };
            let since = *failing.get_or_insert_with(Instant::now);
            if since.elapsed() >= patience.connect_timeout {
                return Err(LogsError::GaveUp {
                    why,
                    pos,
                    executor: opts.executor.clone(),
                    file: opts.stream.file_name(),
                    after: patience.connect_timeout,
                });
            }
            if last_notice.is_none_or(|at| at.elapsed() >= crate::client::NOTICE_INTERVAL) {
                last_notice = Some(Instant::now());
                (patience.notice)(&format!("{why}; trying again"));
            }
            async_io::Timer::after(FOLLOW_POLL).await;
        }
    }
}
