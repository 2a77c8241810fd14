//! `authenticate`: Authenticate round trips, each a full password check (bcrypt on the
//! server) and a token. Credentials come from `--user name:password`; the user must exist.
//! The connections' own tokens are not used: every call is a fresh login.

use actcd_proto::etcdserverpb::AuthenticateRequest;
use actcd_proto::etcdserverpb::auth_client::AuthClient;
use tonic::Status;
use tonic::transport::Channel;

use crate::BenchError;
use crate::load::{self, Op, Plan, Pool, Worker};
use crate::report::{Report, Stats};

struct Login {
    auth: AuthClient<Channel>,
    name: String,
    password: String,
}

impl Worker for Login {
    async fn call(&mut self, _: u64) -> Result<Op, Status> {
        let req = AuthenticateRequest {
            name: self.name.clone().into_bytes(),
            password: self.password.clone().into_bytes(),
        };
        let token = self.auth.authenticate(req).await?.into_inner().token;
        if token.is_empty() {
            return Err(Status::unknown("empty token"));
        }
        Ok(Op::Write)
    }
}

pub async fn authenticate(
    pool: &Pool,
    clients: usize,
    credentials: Option<(String, String)>,
    plan: Plan,
) -> Result<Report, BenchError> {
    let Some((name, password)) = credentials else {
        return Err(BenchError::Usage(
            "authenticate needs --user name:password".into(),
        ));
    };
    let workers = (0..clients.max(1))
        .map(|w| Login {
            auth: AuthClient::new(pool.conn(w).channel.clone()),
            name: name.clone(),
            password: password.clone(),
        })
        .collect();
    let (s, _) = load::drive("authenticate", workers, plan).await;
    if let Some(e) = s.unimplemented() {
        return Err(BenchError::Unimplemented(format!("authenticate ({e})")));
    }
    Ok(Report::new(
        "authenticate",
        Stats::new(s.all(), s.elapsed),
        s.errors,
    ))
}
