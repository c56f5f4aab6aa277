//! The HTTP queries a master's pump has handed its node and not yet seen
//! answered: one table, kept the same way by every runtime's pump.
//!
//! The HTTP thread sends an [`HttpQuery`] with a reply channel; the pump
//! turns it into the node's [`Input::Query`] under a fresh [`QueryId`]
//! ([`Waiting::input`]) and hands the node's [`Output::Answer`] for that
//! number back on the channel ([`Waiting::answer`]). What to answer is the
//! node's decision (a read is an input: it passes the lease check like any
//! other); the pump only adds what only it knows, its count of refused
//! connections.
//!
//! [`Input::Query`]: regent_core::node::master::Input::Query
//! [`Output::Answer`]: regent_core::node::master::Output::Answer

use super::{HttpQuery, HttpSnapshot, MetricsSnapshot};
use regent_core::ids::QueryId;
use regent_core::node::master::{Answer, Counters, Input, Query};
use regent_core::protocol::Message;
use std::collections::HashMap;
use std::sync::mpsc::SyncSender;

/// Where an answer goes.
#[derive(Debug)]
enum Reply {
    State(SyncSender<HttpSnapshot>),
    Metrics(SyncSender<MetricsSnapshot>),
    /// A log read's or a command's reply message.
    Message(SyncSender<Message>),
    Revocations(SyncSender<regent_core::token::Revocations>),
}

/// The queries waiting for the node's answer, by number.
#[derive(Debug, Default)]
pub struct Waiting {
    replies: HashMap<QueryId, Reply>,
    next: u64,
}

impl Waiting {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// The node's input for `query`, under a fresh number; its reply
    /// channel is kept until the answer comes.
    pub fn input(&mut self, query: HttpQuery) -> Input {
        let id = QueryId(self.next);
        self.next += 1;
        let (ask, reply) = match query {
            HttpQuery::State { reply, cached } => (Query::State { cached }, Reply::State(reply)),
            HttpQuery::Metrics { reply } => (Query::Metrics, Reply::Metrics(reply)),
            HttpQuery::Log(q) => {
                let ask = Query::Log {
                    executor: q.executor,
                    stream: q.stream,
                    offset: q.offset,
                    max: q.max,
                };
                (ask, Reply::Message(q.reply))
            }
            HttpQuery::Command { msg, principal, reply } => {
                (Query::Command { msg, principal }, Reply::Message(reply))
            }
            HttpQuery::Revocations { reply } => (Query::Revocations, Reply::Revocations(reply)),
        };
        self.replies.insert(id, reply);
        Input::Query { query: id, ask }
    }

    /// Hands the node's `answer` to `query` to its asker, with the pump's
    /// count of refused connections. An answer of another kind than asked
    /// (a node bug) is dropped, which the asker sees as `503`.
    pub fn answer(&mut self, query: QueryId, answer: Answer, rejected_connections: u64) {
        let Some(reply) = self.replies.remove(&query) else { return };
        match (reply, answer) {
            (Reply::State(tx), Answer::State { state, counters }) => {
                let Counters { node, master } = *counters;
                let _ = tx.try_send(HttpSnapshot { state, rejected_connections, node, master });
            }
            (Reply::Metrics(tx), Answer::Metrics { gauges, counters }) => {
                let Counters { node, master } = *counters;
                let gauges = *gauges;
                let _ = tx.try_send(MetricsSnapshot { gauges, rejected_connections, node, master });
            }
            (Reply::Message(tx), Answer::Reply(msg)) => {
                let _ = tx.try_send(msg);
            }
            (Reply::Revocations(tx), Answer::Revocations(list)) => {
                let _ = tx.try_send(list);
            }
            (reply, answer) => {
                tracing::error!("query {query}: asked as {reply:?}, answered {answer:?}");
            }
        }
    }

    /// How many queries wait.
    pub fn len(&self) -> usize {
        self.replies.len()
    }

    /// Whether none waits.
    pub fn is_empty(&self) -> bool {
        self.replies.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use regent_core::node::master::Metrics;
    use regent_core::protocol::ClusterState;
    use std::sync::mpsc::sync_channel;
    use std::sync::Arc;

    fn counters() -> Box<Counters> {
        Box::new(Counters { node: Metrics::default(), master: Default::default() })
    }

    #[test]
    fn each_answer_reaches_its_own_asker_once() {
        let mut waiting = Waiting::new();
        let (state_tx, state_rx) = sync_channel(1);
        let (log_tx, log_rx) = sync_channel(1);
        let Input::Query { query: first, ask } =
            waiting.input(HttpQuery::State { reply: state_tx, cached: true })
        else {
            panic!("a query")
        };
        assert_eq!(ask, Query::State { cached: true });
        let log = super::super::logs::LogQuery {
            executor: "fw/g#0".into(),
            stream: regent_core::protocol::LogStream::Stdout,
            offset: None,
            max: 8,
            reply: log_tx,
        };
        let Input::Query { query: second, .. } = waiting.input(HttpQuery::Log(log)) else {
            panic!("a query")
        };
        assert_ne!(first, second, "every query has its own number");
        assert_eq!(waiting.len(), 2);
        let refused = Message::NotLeader { epoch: Default::default(), leader: None };
        waiting.answer(second, Answer::Reply(refused.clone()), 0);
        assert_eq!(log_rx.try_recv().ok(), Some(refused));
        let config = regent_core::master::Config::new("m1".into(), "127.0.0.1:1".into());
        let state: Arc<ClusterState> = Arc::new(regent_core::master::Master::new(config).state());
        waiting.answer(first, Answer::State { state: state.clone(), counters: counters() }, 7);
        let snap = state_rx.try_recv().expect("answered");
        assert_eq!(snap.rejected_connections, 7, "the pump's own count is added");
        assert!(Arc::ptr_eq(&snap.state, &state));
        assert!(waiting.is_empty());
        // A second answer for the same number reaches nobody.
        waiting.answer(first, Answer::State { state, counters: counters() }, 7);
        assert!(state_rx.try_recv().is_err());
    }
}
