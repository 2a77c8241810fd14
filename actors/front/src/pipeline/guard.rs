//! The checks current etcd makes before a call that 3.5.1 left open: who must be logged in
//! (`requireAuthInfo`), and which lease calls need permission on the keys attached to the lease
//! (`checkLeaseRenew`, `checkLeaseTimeToLive`, `checkLeaseLeases`, GHSA-q8m4-xhhv-38mg and
//! CVE-2023-32082). What each route requires is listed in `routes.rs`.

use actcd_types::auth::Perm;
use actcd_types::msg::LeaseKeys;
use actcd_types::{AuthInfo, EtcdError};

use crate::authn::Credentials;
use crate::pipeline::Pipeline;

impl Pipeline {
    /// etcd's `requireAuthInfo`: with auth on, a caller nobody authenticated is refused with
    /// `etcdserver: user name is empty`; with auth off everyone passes.
    pub fn require_user(&self, who: &AuthInfo) -> Result<(), EtcdError> {
        if self.auth.enabled() && who.username.is_empty() {
            Err(EtcdError::UserEmpty)
        } else {
            Ok(())
        }
    }

    /// Who `creds` name (see [`Pipeline::who`]): for the calls that read their credentials once
    /// and are judged again at every message (a keepalive stream).
    pub async fn identify(&self, creds: &Credentials) -> Result<AuthInfo, EtcdError> {
        if !self.auth.enabled() {
            return Ok(AuthInfo::default());
        }
        match self.auth.identify(creds) {
            Err(EtcdError::InvalidAuthToken) if self.auth.may_be_unapplied(creds) => {
                self.linearizable_barrier().await?;
                self.auth.identify(creds)
            }
            other => other,
        }
    }

    /// etcd's lease checks: with auth on, the caller must be logged in; root passes; anyone
    /// else needs `perm` on every key attached to each of `ids` (write to keep a lease alive,
    /// read to see its keys or list it). A lease that does not exist has no keys, and the call
    /// goes on to answer as it would. All checks use one permission view; if a newer one was
    /// published meanwhile, the call is refused with `auth: revision in header is old`, as
    /// etcd refuses it when its auth revision moved during the check.
    pub async fn check_lease_keys(
        &self,
        who: &AuthInfo,
        ids: &[i64],
        perm: Perm,
    ) -> Result<(), EtcdError> {
        if !self.auth.enabled() {
            return Ok(());
        }
        self.require_user(who)?;
        let view = self.auth.view();
        if view.check_admin(who).is_ok() {
            return Ok(());
        }
        for &id in ids {
            let keys = match self.routes.lease_keys.send(LeaseKeys { id }).await? {
                Ok(keys) => keys,
                Err(EtcdError::LeaseNotFound) => continue,
                Err(e) => return Err(e),
            };
            for key in keys {
                view.check_range(who, &key, &[], perm)?;
            }
        }
        if self.auth.view().revision() != view.revision() {
            return Err(EtcdError::AuthOldRevision);
        }
        Ok(())
    }
}
