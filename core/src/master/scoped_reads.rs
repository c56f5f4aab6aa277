//! Tenant-scoped reads on the wire protocol (docs/security.md,
//! docs/design.md#issue-44): what the master answers a token's connection
//! to a read request is filtered by the same pure functions as the HTTP
//! face's reads ([`crate::visibility`]), with the connection's principal.
//!
//! * `StateReply` (`regent status`): [`ClusterState::visible_to`] — its
//!   frameworks, their executors and history, no workers;
//! * `JobsReply` for every job (`regent job status`):
//!   [`visibility::jobs_visible_to`] (one job by id is the scope check's:
//!   [`super::authorize`] refuses a framework outside the token's scope);
//! * `TenantsReply` (`regent tenant list`):
//!   [`visibility::tenants_visible_to`].
//!
//! A local asker (an HTTP request) is answered whole: the HTTP face filters
//! by the request's principal itself. A connection that proved the cluster
//! secret is the root and reads everything.
//!
//! Tests: core/tests/tokens.rs (wire reads of a tenant's token),
//! runtime-smol/tests/e2e_tokens_wire.rs.

use super::{Master, Origin};
use crate::protocol::{ClusterState, Message};
use crate::visibility;
use crate::ConnId;

impl Master {
    /// `msg`, a reply to `asker`'s read, with only what `asker` may read.
    pub(super) fn scoped_reply(&self, asker: Origin, msg: Message) -> Message {
        let Origin::Conn(conn) = asker else { return msg };
        let p = self.principal(conn);
        match msg {
            Message::JobsReply { epoch, request, jobs } => {
                Message::JobsReply { epoch, request, jobs: visibility::jobs_visible_to(p, jobs) }
            }
            Message::TenantsReply { epoch, request, tenants } => Message::TenantsReply {
                epoch,
                request,
                tenants: visibility::tenants_visible_to(p, tenants),
            },
            other => other,
        }
    }

    /// The part of the snapshot `state` that `conn`'s peer may read (a copy:
    /// the reply owns it).
    pub(super) fn scoped_state(&self, conn: ConnId, state: &ClusterState) -> Box<ClusterState> {
        Box::new(state.visible_to(self.principal(conn)))
    }
}
