//! No worker exits because of a duplicate registration: the simulator only
//! ever runs one process per worker id (a restart is a new incarnation of a
//! dead process), so an `Exit` naming an id conflict is always wrong. The
//! same for subscribers: an instance never exits for a failover to another
//! instance while no other instance of its framework runs.

use crate::sim::engine::World;

pub(crate) fn on_worker_exit(_w: &World, i: usize, reason: &str) -> Result<(), String> {
    if reason.contains("conflict") || reason.contains("shut down") {
        return Err(format!(
            "w{i} exited on a master's word although it is the only process with its id: {reason}"
        ));
    }
    Ok(())
}

pub(crate) fn on_sub_exit(_w: &World, s: usize, reason: &str) -> Result<(), String> {
    if reason.contains("failed over to instance") {
        return Err(format!("f{s} exited for a failover, but no other instance runs: {reason}"));
    }
    Ok(())
}
