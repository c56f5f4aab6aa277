//! No tenant exceeds its limit (docs/tenants.md, `regent-soak --tenants`):
//! at every ALIVE leader, the live executors of each tenant's frameworks
//! hold no more cores, memory or named resources than the tenant's limit
//! allows. The limits are set before any job of theirs is submitted and
//! never lowered, so no executor placed under an earlier leader (and
//! adopted from its worker's report) passes them either.

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
        for e in master.executors().filter(|e| !e.state.is_terminal()) {
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
