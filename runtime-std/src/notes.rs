//! The master node's notes in the operator's log, the same in both
//! runtimes: the level is the note's own ([`Note::level`]), the words and
//! fields are here.

use regent_core::elector::DeposeOutcome;
use regent_core::node::master::{Note, NoteLevel};

/// Logs at a level chosen at run time (tracing's macros take it statically).
macro_rules! at {
    ($level:expr, $($arg:tt)*) => {
        match $level {
            NoteLevel::Info => tracing::info!($($arg)*),
            NoteLevel::Warn => tracing::warn!($($arg)*),
        }
    };
}

/// Leadership changes, for the operator's log.
pub fn log_note(note: &Note) {
    let level = note.level();
    match note {
        Note::LeaderIs(h) => {
            at!(level, leader = %h.id, addr = %h.addr, floor = %h.epoch, "leader")
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
