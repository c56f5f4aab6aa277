//! At most one master acts as leader at any moment: process up and not
//! paused, master RECOVERING or ALIVE, and its elector acting (elected, not
//! suspended, lease valid: `Elector::is_acting(now)`). And never two ALIVE
//! masters with the same epoch.

use crate::sim::engine::World;
use regent_core::master::Status;

pub(crate) fn check(w: &World) -> Result<(), String> {
    let mut acting = Vec::new();
    let mut alive = Vec::new();
    for (i, mp) in w.masters.iter().enumerate() {
        if !mp.p.up {
            continue;
        }
        let status = mp.master().status();
        if status == Status::Alive {
            alive.push((i, mp.master().epoch()));
        }
        if !mp.p.paused(w.now)
            && matches!(status, Status::Alive | Status::Recovering)
            && mp.elector().is_acting(w.now)
        {
            acting.push((i, mp.master().epoch()));
        }
    }
    if acting.len() > 1 {
        return Err(format!(
            "{} masters act as leader at once: {acting:?} (master, epoch)",
            acting.len()
        ));
    }
    for (k, (i, e)) in alive.iter().enumerate() {
        if let Some((j, _)) = alive[k + 1..].iter().find(|(_, e2)| e2 == e) {
            return Err(format!("m{i} and m{j} are both ALIVE at {e}"));
        }
    }
    Ok(())
}
