//! The Auth service. Every call but Authenticate is one entry through the log, applied by the
//! auth store (which also decides who may make it). Passwords are hashed before they are
//! proposed (by the auth store, on its blocking pool), so the log never carries one in the
//! clear and bcrypt never runs on an actor thread.
//!
//! Authenticate follows etcd's design: the password is checked (by the auth store, on its
//! blocking pool) against the hash it holds, outside the log; then an entry carrying only the
//! user name (and, for simple tokens, the whole token the auth store drafted) goes through the
//! log so every member learns the token; a JWT is signed by the auth store once it applied.
//! The check remembers the auth revision it read; if the entry applies at another revision
//! (the password may have changed in between) the whole check runs again, so a token is never
//! issued for a password that no longer holds.

use std::sync::Arc;

use actcd_proto::actcdpb::{InternalAuthenticateRequest, InternalRaftRequest};
use actcd_proto::etcdserverpb::auth_server::Auth;
use actcd_proto::etcdserverpb::*;
use actcd_types::msg::{ApplyResponse, AuthReply};
use actcd_types::{AuthInfo, EtcdError};
use tonic::{Request, Response, Status};

use crate::pipeline::Pipeline;

pub struct AuthService {
    pub pipeline: Arc<Pipeline>,
}

impl AuthService {
    /// Proposes the request of `req` (placed into an entry by `set`) as its caller.
    async fn call<Q, T>(
        &self,
        req: Request<Q>,
        set: fn(&mut InternalRaftRequest, Q),
        pick: fn(AuthReply) -> Option<T>,
    ) -> Result<Response<T>, Status> {
        let who = self.pipeline.who(&req).await?;
        let mut r = InternalRaftRequest::default();
        set(&mut r, req.into_inner());
        self.propose(who, r, pick).await
    }

    /// Proposes `r` as `who` and picks the expected answer out of the store's reply.
    async fn propose<T>(
        &self,
        who: AuthInfo,
        r: InternalRaftRequest,
        pick: fn(AuthReply) -> Option<T>,
    ) -> Result<Response<T>, Status> {
        match self.pipeline.write(r, who).await? {
            ApplyResponse::Auth(reply) => pick(reply).map(Response::new).ok_or_else(mismatch),
            _ => Err(mismatch()),
        }
    }

    /// bcrypt by the auth store (on its blocking pool), base64-encoded as etcd proposes it.
    async fn hash(&self, password: Vec<u8>) -> Result<String, Status> {
        Ok(self.pipeline.hash_password(password).await?)
    }
}

/// The store answered with a reply of another kind: a bug, reported rather than panicked.
fn mismatch() -> Status {
    EtcdError::Internal("actcd: unexpected apply result for an auth request".into()).to_status()
}

#[tonic::async_trait]
impl Auth for AuthService {
    async fn auth_enable(
        &self,
        req: Request<AuthEnableRequest>,
    ) -> Result<Response<AuthEnableResponse>, Status> {
        let pick = |a| match a {
            AuthReply::Enable(r) => Some(r),
            _ => None,
        };
        self.call(req, |r, q| r.auth_enable = Some(q), pick).await
    }

    async fn auth_disable(
        &self,
        req: Request<AuthDisableRequest>,
    ) -> Result<Response<AuthDisableResponse>, Status> {
        let pick = |a| match a {
            AuthReply::Disable(r) => Some(r),
            _ => None,
        };
        self.call(req, |r, q| r.auth_disable = Some(q), pick).await
    }

    async fn auth_status(
        &self,
        req: Request<AuthStatusRequest>,
    ) -> Result<Response<AuthStatusResponse>, Status> {
        let pick = |a| match a {
            AuthReply::Status(r) => Some(r),
            _ => None,
        };
        self.call(req, |r, q| r.auth_status = Some(q), pick).await
    }

    async fn authenticate(
        &self,
        req: Request<AuthenticateRequest>,
    ) -> Result<Response<AuthenticateResponse>, Status> {
        let AuthenticateRequest { name, password } = req.into_inner();
        let p = &self.pipeline;
        // etcd reads the password with the store caught up to the log.
        p.linearizable_barrier().await?;
        loop {
            let checked_revision = p.check_password(&name, &password).await?;
            let simple_token = p.draft_token().await?;
            let r = InternalRaftRequest {
                authenticate: Some(InternalAuthenticateRequest {
                    name: name.clone(),
                    password: Vec::new(),
                    simple_token: simple_token.clone(),
                }),
                ..Default::default()
            };
            let (username, revision) = match p.write(r, AuthInfo::default()).await? {
                ApplyResponse::Auth(AuthReply::Authenticate { username, revision }) => {
                    (username, revision)
                }
                _ => return Err(mismatch()),
            };
            if revision != checked_revision {
                tracing::info!(user = %name.escape_ascii(), "auth revision moved during the password check; checking again");
                continue;
            }
            // A simple token was registered on every member as the login applied (the
            // gate hears it before this answer arrives); a JWT is signed by the auth store now.
            let token = p
                .sign_token(username, revision)
                .await?
                .unwrap_or(simple_token);
            let header = p.header(true).await?;
            return Ok(Response::new(AuthenticateResponse {
                header: Some(header),
                token,
            }));
        }
    }

    async fn user_add(
        &self,
        req: Request<AuthUserAddRequest>,
    ) -> Result<Response<AuthUserAddResponse>, Status> {
        let who = self.pipeline.who(&req).await?;
        let mut add = req.into_inner();
        if !add.options.as_ref().is_some_and(|o| o.no_password) {
            add.hashed_password = self.hash(std::mem::take(&mut add.password)).await?;
        }
        let r = InternalRaftRequest {
            auth_user_add: Some(add),
            ..Default::default()
        };
        self.propose(who, r, |a| match a {
            AuthReply::UserAdd(r) => Some(r),
            _ => None,
        })
        .await
    }

    async fn user_get(
        &self,
        req: Request<AuthUserGetRequest>,
    ) -> Result<Response<AuthUserGetResponse>, Status> {
        let pick = |a| match a {
            AuthReply::UserGet(r) => Some(r),
            _ => None,
        };
        self.call(req, |r, q| r.auth_user_get = Some(q), pick).await
    }

    async fn user_list(
        &self,
        req: Request<AuthUserListRequest>,
    ) -> Result<Response<AuthUserListResponse>, Status> {
        let pick = |a| match a {
            AuthReply::UserList(r) => Some(r),
            _ => None,
        };
        self.call(req, |r, q| r.auth_user_list = Some(q), pick)
            .await
    }

    async fn user_delete(
        &self,
        req: Request<AuthUserDeleteRequest>,
    ) -> Result<Response<AuthUserDeleteResponse>, Status> {
        let pick = |a| match a {
            AuthReply::UserDelete(r) => Some(r),
            _ => None,
        };
        self.call(req, |r, q| r.auth_user_delete = Some(q), pick)
            .await
    }

    async fn user_change_password(
        &self,
        req: Request<AuthUserChangePasswordRequest>,
    ) -> Result<Response<AuthUserChangePasswordResponse>, Status> {
        let who = self.pipeline.who(&req).await?;
        let mut change = req.into_inner();
        // etcd hashes only a non-empty password; an empty one reaches the store as it is.
        if !change.password.is_empty() {
            change.hashed_password = self.hash(std::mem::take(&mut change.password)).await?;
        }
        let r = InternalRaftRequest {
            auth_user_change_password: Some(change),
            ..Default::default()
        };
        self.propose(who, r, |a| match a {
            AuthReply::UserChangePassword(r) => Some(r),
            _ => None,
        })
        .await
    }

    async fn user_grant_role(
        &self,
        req: Request<AuthUserGrantRoleRequest>,
    ) -> Result<Response<AuthUserGrantRoleResponse>, Status> {
        let pick = |a| match a {
            AuthReply::UserGrantRole(r) => Some(r),
            _ => None,
        };
        self.call(req, |r, q| r.auth_user_grant_role = Some(q), pick)
            .await
    }

    async fn user_revoke_role(
        &self,
        req: Request<AuthUserRevokeRoleRequest>,
    ) -> Result<Response<AuthUserRevokeRoleResponse>, Status> {
        let pick = |a| match a {
            AuthReply::UserRevokeRole(r) => Some(r),
            _ => None,
        };
        self.call(req, |r, q| r.auth_user_revoke_role = Some(q), pick)
            .await
    }

    async fn role_add(
        &self,
        req: Request<AuthRoleAddRequest>,
    ) -> Result<Response<AuthRoleAddResponse>, Status> {
        let pick = |a| match a {
            AuthReply::RoleAdd(r) => Some(r),
            _ => None,
        };
        self.call(req, |r, q| r.auth_role_add = Some(q), pick).await
    }

    async fn role_get(
        &self,
        req: Request<AuthRoleGetRequest>,
    ) -> Result<Response<AuthRoleGetResponse>, Status> {
        let pick = |a| match a {
            AuthReply::RoleGet(r) => Some(r),
            _ => None,
        };
        self.call(req, |r, q| r.auth_role_get = Some(q), pick).await
    }

    async fn role_list(
        &self,
        req: Request<AuthRoleListRequest>,
    ) -> Result<Response<AuthRoleListResponse>, Status> {
        let pick = |a| match a {
            AuthReply::RoleList(r) => Some(r),
            _ => None,
        };
        self.call(req, |r, q| r.auth_role_list = Some(q), pick)
            .await
    }

    async fn role_delete(
        &self,
        req: Request<AuthRoleDeleteRequest>,
    ) -> Result<Response<AuthRoleDeleteResponse>, Status> {
        let pick = |a| match a {
            AuthReply::RoleDelete(r) => Some(r),
            _ => None,
        };
        self.call(req, |r, q| r.auth_role_delete = Some(q), pick)
            .await
    }

    async fn role_grant_permission(
        &self,
        req: Request<AuthRoleGrantPermissionRequest>,
    ) -> Result<Response<AuthRoleGrantPermissionResponse>, Status> {
        let pick = |a| match a {
            AuthReply::RoleGrantPermission(r) => Some(r),
            _ => None,
        };
        self.call(req, |r, q| r.auth_role_grant_permission = Some(q), pick)
            .await
    }

    async fn role_revoke_permission(
        &self,
        req: Request<AuthRoleRevokePermissionRequest>,
    ) -> Result<Response<AuthRoleRevokePermissionResponse>, Status> {
        let pick = |a| match a {
            AuthReply::RoleRevokePermission(r) => Some(r),
            _ => None,
        };
        self.call(req, |r, q| r.auth_role_revoke_permission = Some(q), pick)
            .await
    }
}
