//! Executing one elector [`ZkOp`] with `zookeeper-client`, and the mapping
//! of the client's results and errors to the elector's vocabulary.

use regent_core::zk::{
    CreateMode, MultiOp, SessionId, Stat, WatchEvent, WatchKind, ZkError, ZkOp, ZkReply, ZkResult,
};
use zookeeper_client as zkc;

/// Maps a client error to the elector's [`ZkError`].
///
/// * `ConnectionLoss`, and the errors that leave a request's fate unknown
///   (`Timeout`, `NoHosts`, `SessionMoved`), map to
///   [`ZkError::ConnectionLoss`]: the operation may or may not have been
///   applied (AURORA-1061), and the elector must never read it as a plain
///   failure.
/// * `SessionExpired`, and the terminal states of a client (`ClientClosed`,
///   `AuthFailed`), map to [`ZkError::SessionExpired`]: the session is
///   finished.
/// * The node errors map one to one.
/// * `NoAuth` maps to [`ZkError::NoAuth`] (a cluster whose nodes another
///   secret owns; a fast takeover refused by the leader's ACL).
/// * Everything else (`InvalidAcl`, `BadArguments`, `Unimplemented`, ...)
///   maps to [`ZkError::BadArguments`] and is logged: the elector retries
///   the round later, it never mistakes it for an outcome of the recipe.
pub fn map_error(err: &zkc::Error) -> ZkError {
    use zkc::Error as E;
    match err {
        E::ConnectionLoss | E::Timeout | E::NoHosts | E::SessionMoved => ZkError::ConnectionLoss,
        E::SessionExpired | E::ClientClosed | E::AuthFailed => ZkError::SessionExpired,
        E::NoNode => ZkError::NoNode,
        E::NodeExists => ZkError::NodeExists,
        E::BadVersion => ZkError::BadVersion,
        E::NotEmpty => ZkError::NotEmpty,
        E::NoChildrenForEphemerals => ZkError::NoChildrenForEphemerals,
        E::NoAuth => ZkError::NoAuth,
        other => {
            tracing::warn!(error = %other, "ZooKeeper refused a request");
            ZkError::BadArguments
        }
    }
}

/// Converts the client's session id.
pub fn session_id(id: zkc::SessionId) -> SessionId {
    // ZooKeeper session ids are 64-bit patterns; keep the bits.
    SessionId(id.0 as u64)
}

/// Converts the client's node stat.
pub fn stat(s: &zkc::Stat) -> Stat {
    Stat {
        version: s.version,
        cversion: s.cversion,
        ephemeral_owner: (s.ephemeral_owner != 0).then_some(SessionId(s.ephemeral_owner as u64)),
        czxid: s.czxid as u64,
        mzxid: s.mzxid as u64,
    }
}

/// The client's create mode for the elector's.
pub fn create_mode(mode: CreateMode) -> zkc::CreateMode {
    match mode {
        CreateMode::Persistent => zkc::CreateMode::Persistent,
        CreateMode::Ephemeral => zkc::CreateMode::Ephemeral,
        CreateMode::PersistentSequential => zkc::CreateMode::PersistentSequential,
        CreateMode::EphemeralSequential => zkc::CreateMode::EphemeralSequential,
    }
}

/// The elector's watch kind for a fired node watch; `None` for session
/// events (the state watcher reports those).
pub fn watch_event(ev: &zkc::WatchedEvent) -> Option<WatchEvent> {
    let kind = match ev.event_type {
        zkc::EventType::Session => return None,
        zkc::EventType::NodeCreated => WatchKind::NodeCreated,
        zkc::EventType::NodeDeleted => WatchKind::NodeDeleted,
        zkc::EventType::NodeDataChanged => WatchKind::NodeDataChanged,
        zkc::EventType::NodeChildrenChanged => WatchKind::NodeChildrenChanged,
    };
    Some(WatchEvent { path: ev.path.clone(), kind })
}

/// Adds the operations of a multi to a client multi writer.
pub fn add_multi_ops(
    writer: &mut zkc::MultiWriter<'_>,
    ops: &[MultiOp],
    acls: &[zkc::Acl],
) -> Result<(), zkc::Error> {
    for op in ops {
        match op {
            MultiOp::Check { path, version } => writer.add_check_version(path, *version)?,
            MultiOp::Create { path, data, mode } => {
                let options = create_mode(*mode).with_acls(zkc::Acls::new(acls));
                writer.add_create(path, data, &options)?
            }
            MultiOp::SetData { path, data, version } => {
                writer.add_set_data(path, data, *version)?
            }
            MultiOp::Delete { path, version } => writer.add_delete(path, *version)?,
        }
    }
    Ok(())
}

/// The elector's reply for one result of a client multi (`BadArguments`
/// for a kind of result this build does not know).
pub fn multi_reply(r: zkc::MultiWriteResult) -> ZkResult {
    match r {
        zkc::MultiWriteResult::Check => Ok(ZkReply::Checked),
        zkc::MultiWriteResult::Delete => Ok(ZkReply::Deleted),
        zkc::MultiWriteResult::Create { path, .. } => Ok(ZkReply::Created { path }),
        zkc::MultiWriteResult::SetData { stat: s } => Ok(ZkReply::Stat(Some(stat(&s)))),
        other => {
            tracing::warn!(result = ?other, "unknown multi result");
            Err(ZkError::BadArguments)
        }
    }
}

/// The elector's result for one read of a client multi read
/// (`BadArguments` for a kind of result this build does not know).
pub fn multi_read_result(r: zkc::MultiReadResult) -> ZkResult {
    match r {
        zkc::MultiReadResult::Data { data, stat: s } => Ok(ZkReply::Data { data, stat: stat(&s) }),
        zkc::MultiReadResult::Error { err } => Err(map_error(&err)),
        other => {
            tracing::warn!(result = ?other, "unexpected multi read result");
            Err(ZkError::BadArguments)
        }
    }
}

/// Executes `op` on `client`, creating nodes with `acls`. Returns the
/// result and, for a watching read that left a watch, the one-shot watcher.
///
/// The request is handed to the client on the first poll of the returned
/// future, before it first waits: a caller that polls each future once as
/// soon as it makes it keeps the send order of its operations.
pub async fn execute(
    client: &zkc::Client,
    op: ZkOp,
    acls: &[zkc::Acl],
) -> (ZkResult, Option<zkc::OneshotWatcher>) {
    let err = |e: zkc::Error| map_error(&e);
    match op {
        ZkOp::Create { path, data, mode } => {
            let options = create_mode(mode).with_acls(zkc::Acls::new(acls));
            let r = client.create(&path, &data, &options).await;
            let r = r.map(|(_, seq)| {
                let path = if mode.is_sequential() { format!("{path}{seq}") } else { path };
                ZkReply::Created { path }
            });
            (r.map_err(err), None)
        }
        ZkOp::Delete { path, version } => {
            (client.delete(&path, version).await.map(|()| ZkReply::Deleted).map_err(err), None)
        }
        ZkOp::Exists { path, watch: false } => {
            let r = client.check_stat(&path).await;
            (r.map(|s| ZkReply::Stat(s.as_ref().map(stat))).map_err(err), None)
        }
        ZkOp::Exists { path, watch: true } => match client.check_and_watch_stat(&path).await {
            Ok((s, w)) => (Ok(ZkReply::Stat(s.as_ref().map(stat))), Some(w)),
            Err(e) => (Err(err(e)), None),
        },
        ZkOp::GetData { path, watch: false } => {
            let r = client.get_data(&path).await;
            (r.map(|(data, s)| ZkReply::Data { data, stat: stat(&s) }).map_err(err), None)
        }
        ZkOp::GetData { path, watch: true } => match client.get_and_watch_data(&path).await {
            Ok((data, s, w)) => (Ok(ZkReply::Data { data, stat: stat(&s) }), Some(w)),
            Err(e) => (Err(err(e)), None),
        },
        ZkOp::SetData { path, data, version } => {
            let r = client.set_data(&path, &data, version).await;
            (r.map(|s| ZkReply::Stat(Some(stat(&s)))).map_err(err), None)
        }
        ZkOp::GetChildren { path, watch: false } => {
            (client.list_children(&path).await.map(ZkReply::Children).map_err(err), None)
        }
        ZkOp::GetChildren { path, watch: true } => {
            match client.list_and_watch_children(&path).await {
                Ok((children, w)) => (Ok(ZkReply::Children(children)), Some(w)),
                Err(e) => (Err(err(e)), None),
            }
        }
        ZkOp::Sync { path } => {
            (client.sync(&path).await.map(|()| ZkReply::Synced).map_err(err), None)
        }
        ZkOp::MultiRead(paths) => {
            let mut reader = client.new_multi_reader();
            for path in &paths {
                if let Err(e) = reader.add_get_data(path) {
                    return (Err(err(e)), None);
                }
            }
            let r = reader.commit().await.map_err(err).map(|results| {
                ZkReply::MultiRead(results.into_iter().map(multi_read_result).collect())
            });
            (r, None)
        }
        ZkOp::Multi(ops) => {
            let mut writer = client.new_multi_writer();
            if let Err(e) = add_multi_ops(&mut writer, &ops, acls) {
                return (Err(err(e)), None);
            }
            let r = match writer.commit().await {
                Ok(results) => results
                    .into_iter()
                    .map(multi_reply)
                    .collect::<Result<_, _>>()
                    .map(ZkReply::Multi),
                Err(zkc::MultiWriteError::RequestFailed { source })
                | Err(zkc::MultiWriteError::OperationFailed { source, .. }) => Err(err(source)),
            };
            (r, None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_loss_is_never_a_plain_failure() {
        assert_eq!(map_error(&zkc::Error::ConnectionLoss), ZkError::ConnectionLoss);
        assert_eq!(map_error(&zkc::Error::Timeout), ZkError::ConnectionLoss);
        assert_eq!(map_error(&zkc::Error::SessionExpired), ZkError::SessionExpired);
        assert_eq!(map_error(&zkc::Error::NoNode), ZkError::NoNode);
        assert_eq!(map_error(&zkc::Error::BadVersion), ZkError::BadVersion);
        assert_eq!(map_error(&zkc::Error::NoAuth), ZkError::NoAuth);
    }
}
