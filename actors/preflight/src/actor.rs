use actcd_types::EtcdError;
use actcd_types::msg::{Cancel, Propose, RaftProgress, Register, Submit};
use actix::{Actor, Context, Handler, Recipient, ResponseFuture};

use crate::check::{Limits, MAX_APPLY_GAP, check_request};

/// Where admitted writes go.
#[derive(Clone)]
pub struct PreflightPeers {
    pub propose: Recipient<Propose>,
    pub register: Recipient<Register>,
    pub cancel: Recipient<Cancel>,
}

pub struct PreflightActor {
    limits: Limits,
    peers: PreflightPeers,
    committed: u64,
    applied: u64,
}

impl PreflightActor {
    pub fn new(limits: Limits, peers: PreflightPeers) -> Self {
        Self {
            limits,
            peers,
            committed: 0,
            applied: 0,
        }
    }
}

impl Actor for PreflightActor {
    type Context = Context<Self>;
}

impl Handler<Submit> for PreflightActor {
    type Result = ResponseFuture<Result<(), EtcdError>>;

    /// Validate, register the waiter, then propose. The proposal itself is awaited outside the
    /// actor so one slow proposal never holds up the checks of the next.
    fn handle(&mut self, msg: Submit, _: &mut Context<Self>) -> Self::Result {
        let checked = if self.committed.saturating_sub(self.applied) > MAX_APPLY_GAP {
            Err(EtcdError::TooManyRequests)
        } else {
            check_request(&msg.request, &self.limits)
        };
        let data = match checked {
            Ok(d) => d,
            Err(e) => return Box::pin(async move { Err(e) }),
        };
        let id = msg.request.header.as_ref().map_or(0, |h| h.id);
        // do_send is bounded here by the number of requests in flight, one entry each.
        self.peers.register.do_send(Register {
            id,
            reply: msg.reply,
        });
        let peers = self.peers.clone();
        Box::pin(async move {
            let res = match peers.propose.send(Propose { data }).await {
                Ok(r) => r,
                Err(e) => Err(EtcdError::from(e)),
            };
            if res.is_err() {
                peers.cancel.do_send(Cancel { id });
            }
            res
        })
    }
}

impl Handler<RaftProgress> for PreflightActor {
    type Result = ();

    fn handle(&mut self, msg: RaftProgress, _: &mut Context<Self>) {
        self.committed = msg.committed;
        self.applied = msg.applied;
    }
}
