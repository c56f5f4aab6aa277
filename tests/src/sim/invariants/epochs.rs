//! Epochs never decrease anywhere: per master process, per worker process
//! (its highest epoch seen), per subscriber process, and in the store; and
//! every new leadership (a master reaching RECOVERING) has an epoch strictly
//! higher than every earlier leadership's.

use crate::sim::engine::World;
use regent_core::master::Status;
use regent_core::store::Record;

pub(crate) fn check(w: &mut World) -> Result<(), String> {
    for (i, mp) in w.masters.iter().enumerate() {
        let e = mp.master().epoch();
        let (gen, last) = w.obs.master_epoch[i];
        if gen == mp.p.gen && e < last {
            return Err(format!("m{i}'s epoch went down from {last} to {e}"));
        }
        w.obs.master_epoch[i] = (mp.p.gen, e);
        let leading = mp.p.up
            && matches!(
                mp.master().status(),
                Status::Recovering | Status::Alive | Status::Suspended
            );
        if leading && w.obs.leadership[i] != Some((mp.p.gen, e)) {
            // A new leadership: its epoch is durable and must beat them all.
            if e <= w.obs.max_leadership {
                return Err(format!(
                    "m{i} leads at {e}, not above an earlier leadership's {}",
                    w.obs.max_leadership
                ));
            }
            w.obs.max_leadership = e;
            w.obs.leadership[i] = Some((mp.p.gen, e));
            w.obs.leaderships += 1;
        }
    }
    for (i, wp) in w.workers.iter().enumerate() {
        let e = wp.worker().status().max_epoch;
        let (gen, last) = w.obs.worker_epoch[i];
        if gen == wp.p.gen && e < last {
            return Err(format!("w{i}'s highest epoch went down from {last} to {e}"));
        }
        w.obs.worker_epoch[i] = (wp.p.gen, e);
    }
    for (i, sp) in w.subs.iter().enumerate() {
        let e = sp.sub().status().max_epoch;
        let (gen, last) = w.obs.sub_epoch[i];
        if gen == sp.p.gen && e < last {
            return Err(format!("f{i}'s highest epoch went down from {last} to {e}"));
        }
        w.obs.sub_epoch[i] = (sp.p.gen, e);
    }
    Ok(())
}

pub(crate) fn on_store_write(w: &mut World, record: &Record) -> Result<(), String> {
    if let Record::Epoch(e) = record {
        if *e <= w.obs.store_epoch {
            return Err(format!("the store's epoch goes from {} to {e}", w.obs.store_epoch));
        }
        w.obs.store_epoch = *e;
    }
    Ok(())
}
