//! Answering messages: what the master does with each message a peer
//! sends it (workers, subscribers, operators, other masters), and the
//! refusals that go with them.
//!
//! * `Hello` is answered by every master, leading or not (role, leadership,
//!   epoch, leader hint, known masters); the connection keeps its role.
//! * A request that needs an acting leader is refused while this master
//!   cannot act: `LeaderSuspended` while its session is in doubt,
//!   `NotLeader` with a leader hint otherwise. A suspended leader still
//!   takes heartbeats, so its workers do not think it gone.
//! * One binding per connection: a registration or SUBSCRIBE on a
//!   connection that carries another worker or framework is refused
//!   ([`Master::binding_conflict`]).
//! * `StateRequest` is always answered, with a fresh or the cached snapshot
//!   ([`super::snapshot`]); a `PlanRequest` by an acting leader only
//!   ([`super::plan`]: it places against the live registry).
//! * Anything unexpected (say, master-to-peer messages) is refused and
//!   counted in `Metrics::rejected`, never fatal.
//!
//! What a message asks for is done elsewhere: registrations and heartbeats
//! in `workers`, reports in `executors`, subscriptions and framework
//! requests in `frameworks`, operator commands in `operator`, log reads in
//! `logs`.
//!
//! Tests: core/tests/registration.rs, core/tests/subscribe.rs,
//! core/tests/limits.rs, core/tests/advertised_masters.rs,
//! core/tests/recovery.rs (refusals while suspended).

use super::history::Ending;
use super::operator::WorkerChange;
use super::{authorize_query, Action, AfterWrite, Master, Origin};
use crate::ids::{ConnId, FrameworkId, WorkerId};
use crate::protocol::{ClusterState, HelloReply, Message, Role};
use crate::time::Millis;

impl Master {
    /// Handles `msg`, received on `conn` at `now`.
    pub(super) fn on_message(
        &mut self,
        now: Millis,
        conn: ConnId,
        msg: Message,
        out: &mut Vec<Action>,
    ) {
        // A runtime that forgot `Connected`: adopt the connection.
        self.conns.entry(conn).or_default();
        // A token's holder sends only what its token grants.
        if !self.authorize(now, conn, &msg, out) {
            return;
        }
        match msg {
            Message::Hello(hello) => {
                let c = self.conns.get_mut(&conn).expect("inserted above");
                c.role = Some(hello.role);
                out.push(Action::Send {
                    conn,
                    msg: Message::HelloReply(HelloReply {
                        role: Role::Master,
                        master: self.config.id.clone(),
                        leading: self.may_act(),
                        epoch: self.epoch,
                        leader: self.leader_hint(),
                        masters: self.known_masters(),
                    }),
                });
            }
            Message::RegisterWorker(reg) => {
                if self.may_act() {
                    let (worker, incarnation) = (reg.worker.clone(), reg.incarnation);
                    let reports = reg.executors.clone();
                    // What the report saw of this leadership's launches: a
                    // worker at a lower epoch saw none; one at a higher epoch
                    // follows another leader and takes none of ours.
                    let seen = match reg.epoch_seen.cmp(&self.epoch) {
                        std::cmp::Ordering::Equal => reg.launch_seen,
                        std::cmp::Ordering::Less => 0,
                        std::cmp::Ordering::Greater => u64::MAX,
                    };
                    self.register_worker(now, conn, reg, out);
                    if self.workers.is_bound(&worker, incarnation, conn) {
                        self.reconcile(&worker, &reports, seen, conn, now, out);
                        let ids: Vec<_> = reports.iter().map(|r| r.id.clone()).collect();
                        for report in reports {
                            self.apply_report(&worker, report, now, out);
                        }
                        // Kills owed to what it runs are sent again; what
                        // dying executors held that it no longer has is
                        // free (`kills`).
                        self.settle_kills_on_registration(&worker, &ids, out);
                        // A worker back on a connection (a blip, a late
                        // report after recovery) is a candidate again:
                        // what waits is offered to it in this step. A new
                        // registration places once it is durable.
                        if self.workers.entries.get(&worker).map(|w| w.state)
                            == Some(super::WorkerState::Alive)
                        {
                            self.place(out);
                        }
                        // A draining worker (say, after a failover): what it
                        // runs is asked to stop, with what is left of the
                        // recorded deadline.
                        self.stop_draining_executors(now, &worker, out);
                    }
                    self.maybe_finish_recovery(now, out);
                } else {
                    out.push(self.refusal(conn));
                }
            }
            Message::WorkerHeartbeat { incarnation } => {
                // A suspended leader still accepts heartbeats: its workers
                // must not think it gone while it may yet resume.
                if self.accepts_heartbeats() {
                    self.worker_heartbeat(now, conn, incarnation, out);
                } else {
                    out.push(self.refusal(conn));
                }
            }
            Message::ExecutorStatus { incarnation, report } => {
                let bound = self.conns.get(&conn).and_then(|c| c.worker.clone());
                match bound {
                    Some(w) if self.may_act() && self.workers.is_bound(&w, incarnation, conn) => {
                        self.apply_report(&w, report, now, out)
                    }
                    // Not now: the worker keeps the report and sends it again.
                    _ => self.metrics.rejected += 1,
                }
            }
            Message::WorkerUsage { incarnation, usage } => {
                let bound = self.conns.get(&conn).and_then(|c| c.worker.clone());
                match bound {
                    Some(w) if self.may_act() && self.workers.is_bound(&w, incarnation, conn) => {
                        self.worker_usage(now, &w, usage)
                    }
                    // Observational: a sample not taken now is not missed.
                    _ => {}
                }
            }
            Message::Subscribe(sub) => {
                if self.may_act() {
                    self.subscribe(now, conn, sub, out);
                } else {
                    out.push(self.refusal(conn));
                }
            }
            Message::DeclareGroup { request, spec } if self.may_act() => {
                self.declare_group(conn, request, spec, out)
            }
            Message::UpdateGroup { request, spec, max_parallel } if self.may_act() => {
                self.update_group(now, conn, request, spec, max_parallel, out)
            }
            Message::KillExecutor { request, executor } if self.may_act() => {
                self.kill_request(conn, request, executor, out)
            }
            Message::Teardown { request } if self.may_act() => {
                self.teardown(now, conn, request, out)
            }
            // Keeps the subscription's connection alive; nothing to do.
            Message::FrameworkHeartbeatAck { .. } => {}
            Message::Callback { addr } => {
                if addr.as_str().len() > crate::limits::MAX_ADDR_BYTES {
                    let reason = format!(
                        "callback address of {} bytes; the limit is {} bytes (MAX_ADDR_BYTES)",
                        addr.as_str().len(),
                        crate::limits::MAX_ADDR_BYTES
                    );
                    out.push(Action::Close { conn, reason });
                    self.conns.remove(&conn);
                    self.metrics.rejected += 1;
                } else if let Some(c) = self.conns.get_mut(&conn) {
                    c.callback = Some(addr);
                }
            }
            Message::StateRequest => {
                let state = self.state_reply(now, conn);
                out.push(Action::Send { conn, msg: Message::StateReply(state) })
            }
            msg if msg.is_client_command() && self.may_act() => {
                let asked = crate::audit::Asked::of(self.principal(conn), &msg);
                let request = authorize_query::request_of(&msg);
                self.audit_pending(Origin::Conn(conn), request, asked);
                let from = out.len();
                self.client_command(now, Origin::Conn(conn), msg, out);
                // Answered at once, or once durable (`answer_durable`).
                self.audit_answered_now(now, Origin::Conn(conn), request, from, out)
            }
            Message::LogRequest { request, executor, stream, offset, max } if self.may_act() => {
                let asker = Origin::Conn(conn);
                self.log_request(now, asker, request, executor, stream, offset, max, out)
            }
            Message::LogData { relay, live, read } => self.log_data(conn, relay, live, read, out),
            // What needs an acting leader, while this master is not one.
            msg if msg.is_client_command()
                || matches!(
                    msg,
                    Message::DeclareGroup { .. }
                        | Message::UpdateGroup { .. }
                        | Message::KillExecutor { .. }
                        | Message::Teardown { .. }
                        | Message::LogRequest { .. }
                ) =>
            {
                out.push(self.refusal(conn))
            }
            // Anything else (master-to-peer messages): refused and counted,
            // never fatal.
            _ => {
                self.metrics.rejected += 1;
            }
        }
    }

    /// Why `worker` may not register, or `framework` subscribe, on `conn`
    /// (the other is `None`), if it may not: the connection already
    /// carries another worker registered on it or a framework subscribed on
    /// it (a binding that moved to another connection, or whose framework
    /// ended, does not count). Counted as a rejection.
    ///
    /// One binding per connection (docs/design.md#issue-20): a connection closes once,
    /// and everything bound to it must hear of it. The second request is
    /// refused rather than unbinding the first: the first was acknowledged
    /// and did nothing wrong, and unbinding it silently would start its
    /// failover clock (or leave its worker unreachable) while its peer
    /// believes it is bound; no regent client ever binds two ids to one
    /// connection, so only a confused client hears the refusal.
    pub(super) fn binding_conflict(
        &mut self,
        conn: ConnId,
        worker: Option<&WorkerId>,
        framework: Option<&FrameworkId>,
    ) -> Option<String> {
        let c = self.conns.get(&conn)?;
        let bound_worker = c
            .worker
            .as_ref()
            .filter(|w| Some(*w) != worker)
            .filter(|w| self.workers.entries.get(*w).is_some_and(|e| e.conn == Some(conn)));
        let bound_framework = c
            .framework
            .as_ref()
            .filter(|f| Some(*f) != framework)
            .filter(|f| self.frameworks.get(*f).is_some_and(|fw| fw.conn == Some(conn)));
        let bound = match (bound_worker, bound_framework) {
            (Some(w), _) => format!("worker {w}"),
            (None, Some(f)) => format!("framework {f}"),
            (None, None) => return None,
        };
        let asking = match (worker, framework) {
            (Some(w), _) => format!("registration of worker {w}"),
            (None, Some(f)) => format!("SUBSCRIBE of framework {f}"),
            (None, None) => "request".to_owned(),
        };
        self.metrics.rejected += 1;
        Some(format!(
            "{asking} refused: this connection already carries {bound}; bind one worker or \
             framework per connection"
        ))
    }

    /// The answer to a `StateRequest` on `conn` at `now`: a fresh snapshot
    /// or the cached one, by the rule of [`super::snapshot`] (every request gets
    /// one).
    fn state_reply(&mut self, now: Millis, conn: ConnId) -> Box<ClusterState> {
        let last_fresh = self.conns.get(&conn).and_then(|c| c.last_fresh_state);
        let (state, fresh) = self.snapshot_for(now, last_fresh);
        if fresh {
            if let Some(c) = self.conns.get_mut(&conn) {
                c.last_fresh_state = Some(now);
            }
        }
        // The message owns its copy (it is encoded on the way out), with
        // only what the peer may read.
        self.scoped_state(conn, &state)
    }

    /// The answer to a request this master cannot act on right now.
    fn refusal(&self, conn: ConnId) -> Action {
        Action::Send { conn, msg: self.refusal_message() }
    }

    /// What [`Master::refusal`] says, for any asker: `LeaderSuspended`, or
    /// `NotLeader` with the leader this master knows of.
    pub(super) fn refusal_message(&self) -> Message {
        if self.suspended() {
            return Message::LeaderSuspended { epoch: self.epoch };
        }
        Message::NotLeader { epoch: self.epoch, leader: self.leader_hint() }
    }

    /// Handles a client's command from a local asker (the HTTP API):
    /// exactly one [`Action::Answer`] for `query` follows, now or once the
    /// write it made is durable. The commands mean what they mean on a
    /// connection (`on_message`), and are answered the same.
    pub(super) fn on_command(
        &mut self,
        now: Millis,
        query: crate::ids::QueryId,
        msg: Message,
        principal: &crate::token::Principal,
        out: &mut Vec<Action>,
    ) {
        let asker = Origin::Query(query);
        if !self.may_act() {
            out.push(asker.reply(self.refusal_message()));
            return;
        }
        // What the sender may do, before anything is done
        // (docs/design.md#issue-44).
        self.audit_asked(asker, principal, &msg);
        let request = authorize_query::request_of(&msg);
        let from = out.len();
        self.authorized_command(now, asker, msg, principal, out);
        // Answered at once, or once durable (`answer_durable`).
        self.audit_answered_now(now, asker, request, from, out);
    }

    /// [`Master::on_command`]'s `msg` once its audit is pending: checked
    /// against `principal`, then handled.
    fn authorized_command(
        &mut self,
        now: Millis,
        asker: Origin,
        msg: Message,
        principal: &crate::token::Principal,
        out: &mut Vec<Action>,
    ) {
        if let Err(denied) = self.authorize_query(principal, &msg) {
            let reason = format!("{}{denied}", authorize_query::FORBIDDEN);
            out.push(self.refuse_request(asker, authorize_query::request_of(&msg), reason));
            return;
        }
        // A job submitted with a token of a tenant is that tenant's (the
        // credential's tenant wins; naming another is refused by
        // `tenant_for`, which sees it named).
        let mut msg = msg;
        if let (Message::SubmitJob { job, .. }, Some(t)) = (&mut msg, principal.tenant()) {
            job.tenant.get_or_insert_with(|| t.to_owned());
            if job.tenant.as_deref() != Some(t) {
                let reason = format!(
                    "{}the credential belongs to tenant {t}; it cannot act for tenant {}",
                    authorize_query::FORBIDDEN,
                    job.tenant.as_deref().unwrap_or_default()
                );
                out.push(self.refuse_request(asker, authorize_query::request_of(&msg), reason));
                return;
            }
        }
        // Anything but a client's command is refused there, and counted.
        self.client_command(now, asker, msg, out)
    }

    /// A client's command (an operator's, or a job's) from `asker`, a peer
    /// on a connection or a local asker, while this master may act: the
    /// answer goes back to `asker`, once durable for a write. `msg` is one
    /// of the commands `on_message` and `on_command` route here; any other
    /// message is refused and counted.
    fn client_command(&mut self, now: Millis, asker: Origin, msg: Message, out: &mut Vec<Action>) {
        match msg {
            Message::ScaleGroup { request, framework, group, slots, remove, stop } => {
                self.scale_group(asker, request, framework, group, slots, remove, stop, out)
            }
            Message::RemoveWorker { request, worker } => {
                // Accepted only once the record's delete is durable
                // (docs/design.md#durable-before-acknowledged): `remove_worker` attaches the acceptance to it.
                let then = AfterWrite::AcceptTo { to: asker, request };
                if !self.remove_worker(&worker, Some(then), out) {
                    let reason = match self.workers.entries.get(&worker) {
                        Some(w) => format!(
                            "worker {worker} is {:?}: only UNKNOWN or DEAD workers can be removed",
                            w.state
                        ),
                        None => format!("no worker {worker}"),
                    };
                    out.push(self.refuse_request(asker, request, reason));
                }
            }
            Message::KillFramework { request, framework } => {
                if self.frameworks.contains_key(&framework) {
                    let then = Some(AfterWrite::AcceptTo { to: asker, request });
                    self.remove_framework(now, &framework, Ending::Killed, then, out);
                } else {
                    let reason = format!("no framework {framework}");
                    out.push(self.refuse_request(asker, request, reason));
                }
            }
            Message::CordonWorker { request, worker } => {
                self.change_worker(now, asker, request, worker, WorkerChange::Cordon, out)
            }
            Message::UncordonWorker { request, worker } => {
                let change = WorkerChange::Uncordon;
                self.change_worker(now, asker, request, worker, change, out)
            }
            Message::DrainWorker { request, worker, deadline } => {
                let change = WorkerChange::Drain { deadline };
                self.change_worker(now, asker, request, worker, change, out)
            }
            Message::OperatorKillExecutor { request, executor, refill } => {
                self.operator_kill(asker, request, executor, refill, out)
            }
            Message::PlanRequest { request, groups, tenant } => {
                let groups = self.plan_with_victims(now, asker, &groups, tenant.as_deref());
                out.push(asker.reply(Message::PlanReply { epoch: self.epoch, request, groups }));
            }
            Message::SubmitJob { request, job } => self.submit_job(now, asker, request, job, out),
            Message::RevokeToken { request, id, expires_ms } => {
                let what = super::authorize::Revoke::Token { id, expires_ms };
                self.revoke(now, asker, request, what, out)
            }
            Message::RetireKeys { request, through } => {
                self.revoke(now, asker, request, super::authorize::Revoke::Keys { through }, out)
            }
            Message::DeleteJob { request, job } => self.delete_job(now, asker, request, job, out),
            Message::JobsRequest { request, job } => {
                let msg = self.scoped_reply(asker, self.jobs_reply(now, request, job.as_ref()));
                // A peer's decoder takes frames up to the default limit; a
                // local asker takes the message itself.
                let len = crate::codec::frame_len(&msg);
                if matches!(asker, Origin::Conn(_)) && len > crate::codec::DEFAULT_MAX_FRAME {
                    let reason = format!(
                        "the status asked for is {len} bytes, more than a frame may carry ({} \
                         bytes); ask for one job at a time, or use the HTTP API",
                        crate::codec::DEFAULT_MAX_FRAME
                    );
                    out.push(self.refuse_request(asker, request, reason));
                } else {
                    out.push(asker.reply(msg));
                }
            }
            Message::SetTenant { request, tenant } => self.set_tenant(asker, request, tenant, out),
            Message::PromoteDeployment { request, job, group } => {
                self.promote_deployment(now, asker, request, job, group, out)
            }
            Message::ReportHealth { request, executor, check, passing, detail } => {
                self.report_health(asker, request, executor, &check, passing, detail, out)
            }
            Message::TenantsRequest { request } => {
                out.push(asker.reply(self.scoped_reply(asker, self.tenants_reply(request))))
            }
            other => {
                self.metrics.rejected += 1;
                let reason = format!("{} is not a command a client sends", other.kind());
                out.push(self.refuse_request(asker, 0, reason));
            }
        }
    }

    /// `RequestRefused` of `request` to `asker` (a connection or a local
    /// asker), saying why.
    pub(super) fn refuse_request(
        &self,
        asker: impl Into<Origin>,
        request: u64,
        reason: String,
    ) -> Action {
        asker.into().reply(Message::RequestRefused { epoch: self.epoch, request, reason })
    }
}
