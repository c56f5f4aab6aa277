//! Epochs never decrease anywhere: per master process, per worker process
//! (its highest epoch seen), per subscriber process, and in the store; and
//! every new leadership (a master reaching RECOVERING) has an epoch strictly
//! higher than every earlier leadership's, in the store's order: a
//! leadership begins when its epoch lands in the store (what workers and
//! subscribers are fenced by), and a master reaches RECOVERING only with
//! the epoch it last wrote there. (With ZooKeeper far away, a leader
//! deposed right after its epoch write landed may see that write's reply,
//! and reach RECOVERING, after its successor did: it leads at a lower
//! epoch for the moment before it sees its node deleted, and its acting
//! lease keeps it from commanding.)

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
            // A new leadership: its epoch is the one it made durable, which
            // beat every earlier one when it landed (`on_store_write`).
            if w.obs.landed_epoch.get(&i) != Some(&e) {
                return Err(format!(
                    "m{i} leads at {e}, which is not the epoch it wrote into the store last ({:?})",
                    w.obs.landed_epoch.get(&i)
                ));
            }
            w.obs.max_leadership = w.obs.max_leadership.max(e);
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

pub(crate) fn on_store_write(w: &mut World, m: usize, record: &Record) -> Result<(), String> {
    if let Record::Epoch(e) = record {
        if *e <= w.obs.store_epoch {
            return Err(format!("the store's epoch goes from {} to {e}", w.obs.store_epoch));
        }
        w.obs.store_epoch = *e;
        w.obs.landed_epoch.insert(m, *e);
    }
    Ok(())
}
