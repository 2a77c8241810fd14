//! The supervisor: the one place the member's actors are stopped.
//!
//! An actor that cannot go on (the WAL refused a write, the backend refused a commit) sends
//! [`Fatal`] to the supervisor and stops itself; a member that applied its own removal sends
//! [`Shutdown`]. Either way the supervisor, on the actors' System thread, tells the client side
//! to stop serving (the first reason to stop wins; later ones are only logged at debug level).
//! Once the client side has stopped, [`node::run_until`](crate::node::run_until) sends
//! [`StopActors`]: the supervisor answers with the recorded failure, if any, and stops the
//! System. `run_until` then syncs the backend one last time and returns the failure as
//! [`StartError::Fatal`](crate::node::StartError::Fatal), so the daemon exits 1 as etcd does;
//! a removal or a signal exits 0.
//!
//! The shutdown order is the same whatever the reason: stop serving clients (open streams are
//! ended), stop the actors, final backend sync.

use actcd_types::msg::{Fatal, Shutdown};
use actix::prelude::*;
use tokio::sync::oneshot;

/// Why the member stops, as far as the supervisor has heard: plain state, no actix.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// The first fatal error reported.
    pub failure: Option<Fatal>,
    /// Whether anything (a fatal error or a shutdown) has asked the member to stop.
    pub stopping: bool,
}

impl Verdict {
    /// Records a fatal error; true if it is the first one (the one logged and returned).
    pub fn fatal(&mut self, fatal: Fatal) -> bool {
        self.stopping = true;
        if self.failure.is_some() {
            return false;
        }
        self.failure = Some(fatal);
        true
    }

    /// Records an orderly shutdown; true if nothing had asked the member to stop before.
    pub fn shutdown(&mut self) -> bool {
        !std::mem::replace(&mut self.stopping, true)
    }

    /// The process exit code this verdict asks for: 1 after a fatal error, as etcd's.
    pub fn exit_code(&self) -> i32 {
        i32::from(self.failure.is_some())
    }
}

/// The client side has stopped serving: stop the actors, and answer with the first fatal error
/// reported (`None` after a signal or this member's removal).
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub struct StopActors {
    pub reply: oneshot::Sender<Option<Fatal>>,
}

pub struct Supervisor {
    verdict: Verdict,
    /// Tells the client side to stop serving; taken by the first reason to stop.
    stop_serving: Option<oneshot::Sender<()>>,
}

impl Supervisor {
    /// `stop_serving` fires once, when an actor reports a fatal error or a shutdown.
    pub fn new(stop_serving: oneshot::Sender<()>) -> Self {
        Self {
            verdict: Verdict::default(),
            stop_serving: Some(stop_serving),
        }
    }

    fn stop_serving(&mut self) {
        if let Some(tx) = self.stop_serving.take() {
            let _ = tx.send(());
        }
    }
}

impl Actor for Supervisor {
    type Context = Context<Self>;
}

impl Handler<Fatal> for Supervisor {
    type Result = ();

    fn handle(&mut self, msg: Fatal, _: &mut Context<Self>) {
        let (actor, error) = (msg.actor, msg.error.clone());
        if self.verdict.fatal(msg) {
            tracing::error!(actor, %error, "fatal error; shutting the member down");
        } else {
            tracing::debug!(actor, %error, "another fatal error while shutting down");
        }
        self.stop_serving();
    }
}

impl Handler<Shutdown> for Supervisor {
    type Result = ();

    fn handle(&mut self, msg: Shutdown, _: &mut Context<Self>) {
        if self.verdict.shutdown() {
            tracing::info!(reason = %msg.reason, "shutting the member down");
        }
        self.stop_serving();
    }
}

impl Handler<StopActors> for Supervisor {
    type Result = ();

    fn handle(&mut self, msg: StopActors, _: &mut Context<Self>) {
        let _ = msg.reply.send(self.verdict.failure.clone());
        System::current().stop_with_code(self.verdict.exit_code());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fatal(actor: &'static str) -> Fatal {
        Fatal {
            actor,
            error: "File too large".into(),
        }
    }

    #[test]
    fn the_first_fatal_error_is_the_one_kept() {
        struct Case {
            name: &'static str,
            events: Vec<Option<Fatal>>,
            want_failure: Option<Fatal>,
            want_firsts: Vec<bool>,
            want_exit: i32,
        }
        let cases = vec![
            Case {
                name: "nothing",
                events: vec![],
                want_failure: None,
                want_firsts: vec![],
                want_exit: 0,
            },
            Case {
                name: "removed",
                events: vec![None],
                want_failure: None,
                want_firsts: vec![true],
                want_exit: 0,
            },
            Case {
                name: "two actors fail",
                events: vec![Some(fatal("mvcc")), Some(fatal("applier"))],
                want_failure: Some(fatal("mvcc")),
                want_firsts: vec![true, false],
                want_exit: 1,
            },
            Case {
                name: "fails while shutting down",
                events: vec![None, Some(fatal("raft"))],
                want_failure: Some(fatal("raft")),
                want_firsts: vec![true, true],
                want_exit: 1,
            },
        ];
        for c in cases {
            let mut v = Verdict::default();
            let firsts: Vec<bool> = c
                .events
                .into_iter()
                .map(|e| match e {
                    Some(f) => v.fatal(f),
                    None => v.shutdown(),
                })
                .collect();
            assert_eq!(firsts, c.want_firsts, "{}", c.name);
            assert_eq!(v.failure, c.want_failure, "{}", c.name);
            assert_eq!(v.exit_code(), c.want_exit, "{}", c.name);
        }
    }

    #[test]
    fn a_fatal_error_stops_serving_and_the_system_with_code_1() {
        let sys = System::new();
        let (stop_tx, mut stop_rx) = oneshot::channel();
        let (reply, failure) = oneshot::channel();
        sys.block_on(async move {
            let sup = Supervisor::new(stop_tx).start();
            sup.send(fatal("mvcc")).await.unwrap();
            sup.send(fatal("applier")).await.unwrap();
            assert_eq!(
                stop_rx.try_recv(),
                Ok(()),
                "the client side is told to stop"
            );
            sup.do_send(StopActors { reply });
        });
        let code = sys.run();
        assert!(code.is_err(), "the System stops with a non-zero code");
        assert_eq!(failure.blocking_recv(), Ok(Some(fatal("mvcc"))));
    }

    #[test]
    fn a_removal_stops_the_system_with_code_0() {
        let sys = System::new();
        let (stop_tx, mut stop_rx) = oneshot::channel();
        let (reply, failure) = oneshot::channel();
        sys.block_on(async move {
            let sup = Supervisor::new(stop_tx).start();
            let reason = "the member has been permanently removed from the cluster".into();
            sup.send(Shutdown { reason }).await.unwrap();
            assert_eq!(stop_rx.try_recv(), Ok(()));
            sup.do_send(StopActors { reply });
        });
        assert!(sys.run().is_ok());
        assert_eq!(failure.blocking_recv(), Ok(None));
    }
}
