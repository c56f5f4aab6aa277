//! The nodes' notes in the operator's log, the same in both runtimes: the
//! level is the note's own ([`Note::level`]), the words and fields are here.

use regent_core::elector::DeposeOutcome;
use regent_core::node::master::{Note, NoteLevel};
use regent_core::node::worker::Note as WorkerNote;

/// Logs at a level chosen at run time (tracing's macros take it statically).
macro_rules! at {
    ($level:expr, $($arg:tt)*) => {
        match $level {
            NoteLevel::Debug => tracing::debug!($($arg)*),
            NoteLevel::Info => tracing::info!($($arg)*),
            NoteLevel::Warn => tracing::warn!($($arg)*),
        }
    };
}

/// Leadership changes, for the operator's log.
pub fn log_note(note: &Note) {
    let level = note.level();
    match note {
        Note::LeaderNamed { id, addr, floor } => {
            at!(level, leader = %id, %addr, %floor, "leader")
        }
        Note::Elected { floor } => at!(level, %floor, "elected"),
        Note::Suspended => at!(level, "coordination session in doubt: suspended"),
        Note::Resumed => at!(level, "coordination session back: resumed"),
        Note::Revoked => at!(level, "leadership lost: back to standby"),
        Note::SteppedDown { reason } => {
            at!(level, "giving up leadership, back to standby and rejoining the election: {reason}")
        }
        Note::Deposing { leader, evidence } => {
            at!(level, %leader, "the leader's process is gone ({evidence}): deposing it")
        }
        Note::Deposed { leader, outcome: DeposeOutcome::Deleted { node } } => {
            at!(level, %leader, %node, "deposed: deleted its election node")
        }
        Note::Deposed { leader, outcome: DeposeOutcome::Skipped { reason } } => {
            at!(level, %leader, "not deposed ({reason}): its session timeout applies")
        }
        Note::PeerUnreached { addr, reason } => {
            at!(level, %addr, "could not tell a recorded peer of this leader: {reason}")
        }
        Note::CommandsStalled { held, waited, reason } => {
            at!(
                level,
                held,
                waited_ms = waited.0,
                "{held} commands (launch, kill, shutdown) have waited {} s and cannot be sent: {reason}",
                waited.0 / 1000
            )
        }
    }
}

/// Logs a worker node's [`WorkerNote`] at its level
/// ([`WorkerNote::level`]): connections, dial failures, closes, the
/// followed master and registration.
pub fn log_worker_note(note: &WorkerNote) {
    let level = note.level();
    match note {
        WorkerNote::Connected { master, conn } => at!(level, %master, %conn, "connected to master"),
        WorkerNote::DialFailed { master, reason, refused_first: true, .. } => {
            at!(level, %master, %reason, "master refused by the exposure check")
        }
        WorkerNote::DialFailed { master, reason, .. } => {
            at!(level, %master, %reason, "cannot connect to master")
        }
        WorkerNote::Disconnected { master, reason } => {
            at!(level, %master, %reason, "disconnected from master")
        }
        WorkerNote::Closing { master, reason } => {
            at!(level, %master, %reason, "closing the connection to master")
        }
        WorkerNote::Status(st) => match (&st.active, st.registered) {
            (Some(m), true) => {
                at!(level, master = %m, epoch = st.max_epoch.0, "registered with master")
            }
            (Some(m), false) => {
                at!(level, master = %m, epoch = st.max_epoch.0, "following master; registering")
            }
            (None, _) => at!(level, "no master followed"),
        },
        WorkerNote::NotStarting { executor } => {
            at!(level, %executor, "not starting an executor: the worker is shutting down")
        }
        WorkerNote::Hinted { leader } => {
            at!(level, leader = %leader.addr, epoch = leader.epoch.0, "a master says it leads; probing it")
        }
        WorkerNote::Rejected { master, reason } => {
            at!(level, %master, %reason, "ignored a master's message past a limit")
        }
        WorkerNote::RegistrationRefused { master, reason } => {
            at!(level, %master, %reason, "registration refused; retrying slowly")
        }
    }
}
