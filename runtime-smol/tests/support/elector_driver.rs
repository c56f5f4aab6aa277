//! A test driver for the bare elector on smol: one [`Elector`], one
//! [`ZkBackend`], its timers, and a channel of outcomes. The daemons do not
//! use it (they drive `regent_core::node::MasterNode`); the elector suites
//! use it to exercise the elector alone against a real server.

use async_channel::{Receiver, Sender};
use regent_core::elector::{Action, Config, Elector, ElectorStatus, Event, Timer as ElectorTimer};
use regent_core::zk::MultiOp;
use regent_core::{Addr, Epoch, MasterId, Millis};
use regent_smol::zk::{ZkBackend, ZkConfig};
use smol::future;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// What the elector tells its owner: the elector's outcome actions, in the
/// order it emitted them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The leader this elector sees changed (possibly to itself); see
    /// [`Action::LeaderNamed`].
    LeaderIs {
        /// The leader's master id.
        id: MasterId,
        /// The leader's address.
        addr: Addr,
        /// The epoch floor.
        floor: Epoch,
    },
    /// This process leads; make an epoch of at least `floor` durable before
    /// acting. `fence` is the check to put first in every store write of
    /// this leadership ; it stays valid
    /// until `Revoked`.
    Elected {
        /// The epoch floor.
        floor: Epoch,
        /// The elector's [`Elector::fence`] at election time.
        fence: MultiOp,
    },
    /// The session is in doubt: stop acting as leader, keep state.
    Suspended,
    /// The session is back and this process still leads: act again.
    Resumed,
    /// Leadership is lost: stop acting as leader.
    Revoked,
}

/// What the owner can ask of a running elector.
#[derive(Debug)]
pub enum Command {
    /// Give up for good: close the session (the candidate node goes at
    /// once), report `Revoked` if leading, and return.
    Shutdown,
    /// Send the elector's [`Snapshot`] on the given channel.
    Snapshot(Sender<Snapshot>),
}

/// What a running elector shows (tests, status pages).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// The elector's status when asked.
    pub status: ElectorStatus,
    /// The fence of the current leadership, if leading.
    pub fence: Option<MultiOp>,
    /// The full path of the own candidate node, if known.
    pub node_path: Option<String>,
    /// The current session's negotiated timeout, once connected.
    pub negotiated_timeout: Option<Millis>,
}

/// A handle on an elector started by [`spawn_elector`].
#[derive(Clone, Debug)]
pub struct ElectorHandle {
    commands: Sender<Command>,
}

impl ElectorHandle {
    /// Asks the elector to shut down (see [`Command::Shutdown`]).
    pub async fn shutdown(&self) {
        let _ = self.commands.send(Command::Shutdown).await;
    }

    /// The elector's snapshot; `None` once it has stopped.
    pub async fn snapshot(&self) -> Option<Snapshot> {
        let (tx, rx) = async_channel::bounded(1);
        self.commands.send(Command::Snapshot(tx)).await.ok()?;
        rx.recv().await.ok()
    }
}

/// Starts [`run_elector`] on smol's global executor. Returns the handle,
/// the outcomes, and the task (dropping it cancels the elector without
/// closing its session cleanly; prefer [`ElectorHandle::shutdown`]).
pub fn spawn_elector(
    config: Config,
    zk: ZkConfig,
) -> (ElectorHandle, Receiver<Outcome>, smol::Task<()>) {
    let (out_tx, out_rx) = async_channel::unbounded();
    let (cmd_tx, cmd_rx) = async_channel::unbounded();
    let task = smol::spawn(run_elector(config, zk, out_tx, cmd_rx));
    (ElectorHandle { commands: cmd_tx }, out_rx, task)
}

enum Wake {
    Event(Event),
    Deadline,
    Command(Option<Command>),
}

/// Runs an elector against the ZooKeeper ensemble `zk` until
/// [`Command::Shutdown`] or until nobody listens to `outcomes` any more
/// (then it shuts down the same way).
///
/// The loop: wait for a backend event, the earliest timer deadline or a
/// command; make one `handle` call (every due timer is one call); execute
/// every action in order (I/O actions by the [`ZkBackend`], `SetTimer` /
/// `CancelTimer` on the deadline table, outcomes sent on `outcomes`);
/// recompute the next deadline. Time is [`Millis`] since a monotonic
/// [`Instant`] taken at start. No protocol decision is made here.
///
/// `outcomes` should be unbounded (or drained promptly): the loop awaits
/// each send.
pub async fn run_elector(
    config: Config,
    zk: ZkConfig,
    outcomes: Sender<Outcome>,
    commands: Receiver<Command>,
) {
    let base = Instant::now();
    let now = || Millis(base.elapsed().as_millis() as u64);
    let mut driver = Driver {
        elector: Elector::new(config),
        backend: ZkBackend::new(zk),
        timers: BTreeMap::new(),
        outcomes,
    };
    let mut commands_open = true;
    let mut live = driver.feed(now(), Event::Start).await;
    while live {
        let deadline = driver.timers.values().min().copied();
        let wake = future::or(
            future::or(
                async { Wake::Event(Event::Zk(driver.backend.next_event().await)) },
                async {
                    match deadline {
                        Some(at) => {
                            async_io::Timer::at(base + Duration::from_millis(at.0)).await;
                            Wake::Deadline
                        }
                        None => future::pending().await,
                    }
                },
            ),
            async {
                if commands_open {
                    Wake::Command(commands.recv().await.ok())
                } else {
                    future::pending().await
                }
            },
        )
        .await;
        live = match wake {
            Wake::Event(event) => driver.feed(now(), event).await,
            Wake::Deadline => driver.fire_due(now()).await,
            Wake::Command(None) => {
                // Every handle is gone: keep electing until the outcomes
                // are not listened to.
                commands_open = false;
                true
            }
            Wake::Command(Some(Command::Shutdown)) => {
                let _ = driver.feed(now(), Event::Shutdown).await;
                false
            }
            Wake::Command(Some(Command::Snapshot(reply))) => {
                let _ = reply.try_send(driver.snapshot(now()));
                true
            }
        };
    }
    if driver.outcomes.is_closed() {
        // Nobody listens: give up the candidacy rather than hold it.
        let _ = driver.feed(now(), Event::Shutdown).await;
    }
    tracing::info!("elector stopped");
}

struct Driver {
    elector: Elector,
    backend: ZkBackend,
    timers: BTreeMap<ElectorTimer, Millis>,
    outcomes: Sender<Outcome>,
}

impl Driver {
    /// One `handle` call and its actions; `false` once the outcomes are not
    /// listened to.
    async fn feed(&mut self, now: Millis, event: Event) -> bool {
        tracing::trace!(?event, "elector event");
        let actions = self.elector.handle(now, event);
        let mut live = true;
        for action in actions {
            tracing::trace!(?action, "elector action");
            let outcome = match action {
                Action::Zk(command) => {
                    self.backend.execute(command);
                    continue;
                }
                Action::SetTimer { timer, at } => {
                    self.timers.insert(timer, at);
                    continue;
                }
                Action::CancelTimer { timer } => {
                    self.timers.remove(&timer);
                    continue;
                }
                Action::LeaderNamed { id, addr, floor } => Outcome::LeaderIs { id, addr, floor },
                Action::Elected { floor } => {
                    // The elector reports Elected with its own node known and
                    // leading, so fence() is Some. Should a later action of
                    // the same batch have ended that leadership, a check that
                    // can never pass keeps the store safe (and `Revoked`
                    // follows).
                    let fence = self.elector.fence().unwrap_or_else(|| MultiOp::Check {
                        path: format!("{}/no-leadership", self.elector.config().election_path()),
                        version: -2,
                    });
                    Outcome::Elected { floor, fence }
                }
                Action::Suspended => Outcome::Suspended,
                Action::Resumed => Outcome::Resumed,
                Action::Revoked => Outcome::Revoked,
                Action::Masters { .. }
                | Action::Confirmed { .. }
                | Action::Outgrown { .. }
                | Action::Deposed { .. } => continue,
            };
            tracing::info!(?outcome, "elector outcome");
            if self.outcomes.send(outcome).await.is_err() {
                live = false;
            }
        }
        live
    }

    /// Feeds every timer whose deadline has passed, earliest first.
    async fn fire_due(&mut self, now: Millis) -> bool {
        let mut due: Vec<(Millis, ElectorTimer)> =
            self.timers.iter().filter(|(_, at)| **at <= now).map(|(t, at)| (*at, *t)).collect();
        due.sort();
        let mut live = true;
        for (_, timer) in due {
            self.timers.remove(&timer);
            live &= self.feed(now, Event::Timer(timer)).await;
        }
        live
    }

    fn snapshot(&self, now: Millis) -> Snapshot {
        Snapshot {
            status: self.elector.status(now),
            fence: self.elector.fence(),
            node_path: self.elector.node_path(),
            negotiated_timeout: self.backend.session().map(|(_, t)| t),
        }
    }
}
