//! Commands are never interleaved between leaderships: once any master has
//! sent a command ([`Message::is_command`]: `LaunchExecutor`,
//! `KillExecutorOnWorker`, `Shutdown`) at epoch `e'`, no master sends a
//! command at a lower epoch afterwards. The simulator has one clock, so this
//! is the fast takeover's claim exactly: a successor's first command comes
//! after the deposed leader's last (the acting lease and the new leader's
//! wait, docs/design.md#time-is-an-input), whether the old leader died, was frozen, or was
//! deposed by a detector false positive while it lived on. A command counts
//! when the master's node emits it, whether or not its connection still
//! carries it.

use crate::sim::engine::World;
use regent_core::protocol::Message;

/// Master `m` sends the command `msg`.
pub(crate) fn on_command(w: &mut World, m: usize, msg: &Message) -> Result<(), String> {
    let Some(epoch) = msg.master_epoch() else {
        return Err(format!("m{m} sends a command without an epoch: {msg:?}"));
    };
    match w.obs.highest_command {
        Some((top, at, by)) if epoch < top => Err(format!(
            "m{m} sends a command at {epoch} after m{by} sent one at the higher {top} (at {at}): {msg:?}"
        )),
        Some((top, ..)) if epoch == top => Ok(()),
        _ => {
            w.obs.highest_command = Some((epoch, w.now, m));
            Ok(())
        }
    }
}
