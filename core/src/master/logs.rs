//! Executor output, relayed by the leader (`regent logs`, `GET
//! /api/logs/...`).
//!
//! An operator's [`Message::LogRequest`] (on a connection) or a local
//! asker's [`Event::LogQuery`](super::Event::LogQuery) (an HTTP read, by
//! [`QueryId`]) names an executor; the leader
//! looks up the worker it runs (or ran) on and, if that worker is
//! connected, relays a [`Message::ReadLog`] to it under a fresh relay
//! number. The worker's [`Message::LogData`] is checked against what was
//! asked and answered to the operator as [`Message::LogChunk`], or as
//! `RequestRefused` naming why. Every relay ends with exactly one answer to
//! the asker (an operator if still connected; a query always, as
//! [`Action::Answer`]):
//!
//! * the worker answers (with bytes, or why it could not read);
//! * the worker's connection closes first: refused, "disconnected";
//! * [`LOG_RELAY_TIMEOUT`] passes first: refused, "did not answer";
//! * the leadership ends first: a query is refused, "stopped leading" (an
//!   operator's connection closes).
//!
//! Bounds (docs/design.md#peer-input-never-panics): a chunk is at most [`MAX_LOG_CHUNK`] bytes; at
//! most [`MAX_LOG_RELAYS_PER_CONN`] relays per operator connection and
//! [`MAX_LOG_RELAYS`] in all are in flight. A `LogData` for a relay that was
//! never asked of that connection (a hostile or confused worker), or one
//! that does not fit what was asked, is refused and counted
//! ([`super::Metrics::log_answers_refused`]); a malformed one also ends its
//! relay with a refusal to the operator.
//!
//! `finished` in a chunk is true when the leader knows the executor as
//! ended *and* the worker, when it read, no longer ran it: the file then
//! grows no more.
//!
//! Tests: core/tests/log_relay.rs, core/tests/log_relay_node.rs.

use super::{Action, Master, Origin, Timer};
use crate::ids::{ConnId, ExecutorId, QueryId, WorkerId};
use crate::limits::{LOG_RELAY_TIMEOUT, MAX_LOG_CHUNK, MAX_LOG_RELAYS, MAX_LOG_RELAYS_PER_CONN};
use crate::protocol::{LogRead, LogStream, Message};
use crate::time::Millis;
use std::collections::BTreeMap;

/// One read on its way through the leader.
#[derive(Clone, Debug)]
struct Relay {
    /// Who asked: an operator's connection or a local query (`None` once
    /// the connection closed: the answer is dropped when it comes).
    client: Option<Origin>,
    /// The operator's request id.
    request: u64,
    executor: ExecutorId,
    worker: WorkerId,
    /// The worker's connection the read went out on: only it may answer.
    worker_conn: ConnId,
    offset: Option<u64>,
    max: u32,
    deadline: Millis,
}

/// The relays in flight (see the module docs).
#[derive(Debug, Default)]
pub(super) struct Relays {
    by_id: BTreeMap<u64, Relay>,
    next: u64,
}

impl Relays {
    /// How many relays are in flight.
    pub(super) fn len(&self) -> usize {
        self.by_id.len()
    }

    fn earliest(&self) -> Option<Millis> {
        self.by_id.values().map(|r| r.deadline).min()
    }

    /// Forgets every relay (the leadership ended: every connection
    /// closes); the local queries among them, with their request ids, are
    /// returned to be refused (nothing closes for them).
    pub(super) fn clear(&mut self) -> Vec<(QueryId, u64)> {
        let queries = self
            .by_id
            .values()
            .filter_map(|r| match r.client {
                Some(Origin::Query(q)) => Some((q, r.request)),
                _ => None,
            })
            .collect();
        self.by_id.clear();
        queries
    }
}

impl Master {
    /// The deadline of the relay timer while relays are in flight.
    pub(super) fn log_relay_deadline(&self) -> Option<Millis> {
        self.logs.earliest()
    }

    /// How many log reads are in flight at this leader.
    pub fn log_relays_in_flight(&self) -> usize {
        self.logs.len()
    }

    fn refuse_log(&mut self, to: Origin, request: u64, reason: String, out: &mut Vec<Action>) {
        self.metrics.log_requests_refused += 1;
        let msg = Message::RequestRefused { epoch: self.epoch, request, reason };
        out.push(to.reply(msg));
    }

    /// The leadership ended (`relays` are the local queries that were in
    /// flight): each query is refused, so every query gets its one answer.
    pub(super) fn log_queries_end(&mut self, relays: Vec<(QueryId, u64)>, out: &mut Vec<Action>) {
        for (query, request) in relays {
            let reason = "the master stopped leading before the worker answered; retry".into();
            self.refuse_log(Origin::Query(query), request, reason, out);
        }
    }

    /// An operator (or a local query) asks for a chunk of `executor`'s
    /// output (leader, acting).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn log_request(
        &mut self,
        now: Millis,
        conn: Origin,
        request: u64,
        executor: ExecutorId,
        stream: LogStream,
        offset: Option<u64>,
        max: u32,
        out: &mut Vec<Action>,
    ) {
        if max > MAX_LOG_CHUNK {
            let reason = format!(
                "a chunk of {max} bytes was asked for; the limit is {MAX_LOG_CHUNK} bytes (MAX_LOG_CHUNK)"
            );
            return self.refuse_log(conn, request, reason, out);
        }
        let Some(worker) = self.executors.get(&executor).map(|e| e.worker.clone()) else {
            let reason = format!(
                "no executor {executor} is known to the leader (`regent status` lists them; \
                 the executors of a removed framework are forgotten)"
            );
            return self.refuse_log(conn, request, reason, out);
        };
        let worker_conn = match self.workers.entries.get(&worker) {
            Some(w) => match w.conn {
                Some(c) => c,
                None => {
                    let reason = format!(
                        "executor {executor} runs on worker {worker}, which is not connected \
                         to the leader (it is {:?}); its output stays in that worker's work \
                         directory",
                        w.state
                    );
                    return self.refuse_log(conn, request, reason, out);
                }
            },
            None => {
                let reason = format!(
                    "executor {executor} ran on worker {worker}, which the leader no longer \
                     knows; its output stays in that worker's work directory"
                );
                return self.refuse_log(conn, request, reason, out);
            }
        };
        let mine = self.logs.by_id.values().filter(|r| r.client == Some(conn)).count();
        if mine >= MAX_LOG_RELAYS_PER_CONN {
            let reason = format!(
                "{mine} log reads of this connection are in flight; the limit is \
                 {MAX_LOG_RELAYS_PER_CONN} (MAX_LOG_RELAYS_PER_CONN)"
            );
            return self.refuse_log(conn, request, reason, out);
        }
        if self.logs.len() >= MAX_LOG_RELAYS {
            let reason = format!(
                "{} log reads are in flight at the leader; the limit is {MAX_LOG_RELAYS} \
                 (MAX_LOG_RELAYS); retry shortly",
                self.logs.len()
            );
            return self.refuse_log(conn, request, reason, out);
        }
        let relay = self.logs.next;
        self.logs.next += 1;
        let deadline = now + LOG_RELAY_TIMEOUT;
        if self.logs.by_id.is_empty() || !self.armed.contains_key(&Timer::LogRelays) {
            out.push(Action::SetTimer { timer: Timer::LogRelays, at: deadline });
        }
        self.logs.by_id.insert(
            relay,
            Relay {
                client: Some(conn),
                request,
                executor: executor.clone(),
                worker,
                worker_conn,
                offset,
                max,
                deadline,
            },
        );
        self.metrics.log_relays += 1;
        out.push(Action::Send {
            conn: worker_conn,
            msg: Message::ReadLog { epoch: self.epoch, relay, executor, stream, offset, max },
        });
    }

    /// A worker answers a `ReadLog` on `conn`.
    pub(super) fn log_data(
        &mut self,
        conn: ConnId,
        relay: u64,
        live: bool,
        read: LogRead,
        out: &mut Vec<Action>,
    ) {
        // Only the connection the read went out on may answer it: anything
        // else is a relay never asked of this peer.
        if self.logs.by_id.get(&relay).map(|r| r.worker_conn) != Some(conn) {
            self.metrics.log_answers_refused += 1;
            self.metrics.rejected += 1;
            return;
        }
        let r = self.logs.by_id.remove(&relay).expect("looked up above");
        let answer = match read {
            LogRead::Chunk { offset, data, size } => {
                let fits = data.len() <= r.max as usize
                    && r.offset.is_none_or(|o| o == offset)
                    && offset.checked_add(data.len() as u64).is_some_and(|end| end <= size);
                if fits {
                    let finished = !live
                        && self.executors.get(&r.executor).is_some_and(|e| e.state.is_terminal());
                    Ok(Message::LogChunk {
                        epoch: self.epoch,
                        request: r.request,
                        offset,
                        data,
                        size,
                        finished,
                    })
                } else {
                    self.metrics.log_answers_refused += 1;
                    self.metrics.rejected += 1;
                    Err(format!(
                        "worker {} answered with a chunk that does not fit the read asked for \
                         ({} bytes at offset {offset} of {size}; asked for at most {} bytes at {})",
                        r.worker,
                        data.len(),
                        r.max,
                        r.offset.map_or("the tail".to_string(), |o| o.to_string())
                    ))
                }
            }
            LogRead::Failed { reason } => Err(format!("worker {}: {reason}", r.worker)),
        };
        let Some(client) = r.client else { return };
        match answer {
            Ok(msg) => out.push(client.reply(msg)),
            Err(reason) => self.refuse_log(client, r.request, reason, out),
        }
    }

    /// `conn` closed: relays it asked for are answered into the void;
    /// relays waiting on it (a worker's) are answered now.
    pub(super) fn log_conn_closed(&mut self, conn: ConnId, out: &mut Vec<Action>) {
        if self.logs.by_id.is_empty() {
            return;
        }
        let mut gone = Vec::new();
        for (id, r) in self.logs.by_id.iter_mut() {
            if r.client == Some(Origin::Conn(conn)) {
                r.client = None;
            }
            if r.worker_conn == conn {
                gone.push(*id);
            }
        }
        for id in gone {
            let r = self.logs.by_id.remove(&id).expect("listed above");
            if let Some(client) = r.client {
                let reason = format!(
                    "worker {} disconnected before it answered the read of executor {}'s \
                     output; retry once it is back",
                    r.worker, r.executor
                );
                self.refuse_log(client, r.request, reason, out);
            }
        }
    }

    /// The relay timer: relays past their deadline are answered.
    pub(super) fn log_relays_expire(&mut self, now: Millis, out: &mut Vec<Action>) {
        let due: Vec<u64> =
            self.logs.by_id.iter().filter(|(_, r)| r.deadline <= now).map(|(id, _)| *id).collect();
        for id in due {
            let r = self.logs.by_id.remove(&id).expect("listed above");
            self.metrics.log_relays_timed_out += 1;
            if let Some(client) = r.client {
                let reason = format!(
                    "worker {} did not answer the read of executor {}'s output within {}",
                    r.worker, r.executor, LOG_RELAY_TIMEOUT
                );
                self.refuse_log(client, r.request, reason, out);
            }
        }
        if let Some(at) = self.logs.earliest() {
            out.push(Action::SetTimer { timer: Timer::LogRelays, at });
        }
    }
}
