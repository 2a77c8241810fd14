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

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use actcd_proto::actcdpb::{InternalRaftRequest, RequestHeader};
    use actcd_proto::etcdserverpb::PutRequest;
    use actix::Addr;
    use tokio::sync::oneshot;

    use super::*;

    /// Stands in for raft and the applier, recording the order of what arrives.
    struct Recorder {
        log: Arc<Mutex<Vec<String>>>,
        refuse: bool,
    }

    impl Actor for Recorder {
        type Context = Context<Self>;
    }

    impl Handler<Propose> for Recorder {
        type Result = Result<(), EtcdError>;
        fn handle(&mut self, _: Propose, _: &mut Context<Self>) -> Self::Result {
            self.log.lock().unwrap().push("propose".into());
            if self.refuse {
                Err(EtcdError::NoLeader)
            } else {
                Ok(())
            }
        }
    }

    impl Handler<Register> for Recorder {
        type Result = ();
        fn handle(&mut self, m: Register, _: &mut Context<Self>) {
            self.log.lock().unwrap().push(format!("register {}", m.id));
        }
    }

    impl Handler<Cancel> for Recorder {
        type Result = ();
        fn handle(&mut self, m: Cancel, _: &mut Context<Self>) {
            self.log.lock().unwrap().push(format!("cancel {}", m.id));
        }
    }

    fn put(id: u64, key: &[u8]) -> InternalRaftRequest {
        InternalRaftRequest {
            header: Some(RequestHeader {
                id,
                ..Default::default()
            }),
            put: Some(PutRequest {
                key: key.to_vec(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn start(refuse: bool) -> (Addr<PreflightActor>, Arc<Mutex<Vec<String>>>) {
        let log = Arc::new(Mutex::new(Vec::new()));
        let fake = Recorder {
            log: log.clone(),
            refuse,
        }
        .start();
        let peers = PreflightPeers {
            propose: fake.clone().recipient(),
            register: fake.clone().recipient(),
            cancel: fake.recipient(),
        };
        (PreflightActor::new(Limits::default(), peers).start(), log)
    }

    #[actix_rt::test]
    async fn admitted_writes_register_before_they_are_proposed() {
        let (pf, log) = start(false);
        let (tx, _rx) = oneshot::channel();
        pf.send(Submit {
            request: put(7, b"k"),
            reply: tx,
        })
        .await
        .unwrap()
        .unwrap();
        assert_eq!(log.lock().unwrap().clone(), vec!["register 7", "propose"]);
    }

    #[actix_rt::test]
    async fn refused_writes_reach_nobody() {
        let (pf, log) = start(false);
        let (tx, _rx) = oneshot::channel();
        let err = pf
            .send(Submit {
                request: put(8, b""),
                reply: tx,
            })
            .await
            .unwrap();
        assert_eq!(err, Err(EtcdError::EmptyKey));
        pf.send(RaftProgress {
            committed: 10_000,
            applied: 10,
        })
        .await
        .unwrap();
        let (tx, _rx) = oneshot::channel();
        let err = pf
            .send(Submit {
                request: put(9, b"k"),
                reply: tx,
            })
            .await
            .unwrap();
        assert_eq!(err, Err(EtcdError::TooManyRequests));
        assert!(log.lock().unwrap().is_empty());
    }

    #[actix_rt::test]
    async fn a_proposal_raft_refuses_cancels_its_waiter() {
        let (pf, log) = start(true);
        let (tx, _rx) = oneshot::channel();
        let err = pf
            .send(Submit {
                request: put(5, b"k"),
                reply: tx,
            })
            .await
            .unwrap();
        assert_eq!(err, Err(EtcdError::NoLeader));
        // Cancel is sent without waiting; let it arrive.
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert_eq!(
            log.lock().unwrap().clone(),
            vec!["register 5", "propose", "cancel 5"]
        );
    }
}
