//! No tenant exceeds its limit (docs/tenants.md, `regent-soak --tenants`):
//! at every ALIVE leader, the live executors of each tenant's frameworks
//! hold no more cores, memory or named resources than the tenant's limit
//! allows, not counting executors it is already stopping. The limits are
//! set before any job of theirs is submitted and never lowered; a worker
//! cut off from the leaders can bring back an executor placed under an
//! earlier leader while this one placed others under the limit: the
//! leader stops the one it adopts (sim seed 11 (docs/design.md#simulator-seeds)
//! with `--api-jobs --tenants`).

use crate::sim::engine::World;
use regent_core::master::Status;
use std::collections::BTreeMap;

pub(crate) fn check(w: &World) -> Result<(), String> {
    for (i, mp) in w.masters.iter().enumerate() {
        let master = mp.master();
        if !mp.p.up || master.status() != Status::Alive {
            continue;
        }
        let mut held: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
        // Not counted: executors the leader is already stopping (one a
        // worker that was cut off brought back over the limit is stopped
        // at once, its slot waiting again).
        let counted = |e: &&regent_core::master::ExecutorEntry| {
            !e.state.is_terminal() && !e.operator_stop && !e.kill_requested
        };
        for e in master.executors().filter(counted) {
            let h = held.entry(master.framework_tenant(&e.framework)).or_default();
            h.0 += u64::from(e.cores);
            h.1 += e.memory_mb;
        }
        for (tenant, (cores, memory)) in held {
            let Some(t) = master.tenant(tenant) else { continue };
            let over = |name: &str, used: u64| t.limit.get(name).is_some_and(|l| used > l);
            if over("cores", cores) || over("memory", memory) {
                return Err(format!(
                    "m{i}: tenant {tenant} holds {cores} cores and {memory} MiB; its limit is {}",
                    t.limit.describe()
                ));
            }
        }
    }
    Ok(())
}
