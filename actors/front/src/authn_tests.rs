//! Tests of the front's `authn.rs` (its `tests` module, included from there by `#[path]`).

use super::*;

/// Answers the same thing every time.
struct Fixed(&'static str, Verdict);

impl Authenticator for Fixed {
    fn name(&self) -> &'static str {
        self.0
    }
    fn authenticate(&self, _: &Credentials, _: u64) -> Verdict {
        self.1.clone()
    }
}

fn gate(chain: Vec<Box<dyn Authenticator>>) -> AuthGate {
    let g = AuthGate::with_chain(Arc::default(), chain);
    g.observe(AuthEvent::State {
        enabled: true,
        revision: 7,
    });
    g
}

fn user(name: &str) -> Verdict {
    Verdict::User(AuthInfo {
        username: name.into(),
        revision: 7,
    })
}

#[test]
fn the_first_definite_answer_wins_and_every_answer_is_counted() {
    struct Case {
        name: &'static str,
        chain: Vec<Verdict>,
        want: Result<&'static str, EtcdError>,
        want_asked: usize,
    }
    let cases = vec![
        Case {
            name: "first claims",
            chain: vec![user("a"), user("b")],
            want: Ok("a"),
            want_asked: 1,
        },
        Case {
            name: "first passes, second claims",
            chain: vec![Verdict::NotMine, user("b")],
            want: Ok("b"),
            want_asked: 2,
        },
        Case {
            name: "rejection stops the chain",
            chain: vec![Verdict::Rejected(EtcdError::InvalidAuthToken), user("b")],
            want: Err(EtcdError::InvalidAuthToken),
            want_asked: 1,
        },
        Case {
            name: "nobody claims: the empty user",
            chain: vec![Verdict::NotMine, Verdict::NotMine],
            want: Ok(""),
            want_asked: 2,
        },
    ];
    for c in cases {
        let names = ["first", "second"];
        let chain = c
            .chain
            .into_iter()
            .zip(names)
            .map(|(v, n)| Box::new(Fixed(n, v)) as Box<dyn Authenticator>)
            .collect();
        let g = gate(chain);
        let got = g.identify(&Credentials::default());
        assert_eq!(
            got.map(|i| i.username),
            c.want.map(|w| w.as_bytes().to_vec()),
            "{}",
            c.name
        );
        let asked: u64 = g
            .stats()
            .iter()
            .map(|(_, s)| s.users + s.not_mine + s.rejected)
            .sum();
        assert_eq!(asked, c.want_asked as u64, "{}", c.name);
    }
}

#[test]
fn with_auth_disabled_credentials_are_ignored() {
    let g = AuthGate::with_chain(
        Arc::default(),
        vec![Box::new(Fixed(
            "t",
            Verdict::Rejected(EtcdError::InvalidAuthToken),
        ))],
    );
    assert_eq!(g.identify(&Credentials::default()), Ok(AuthInfo::default()));
    assert_eq!(g.stats()[0].1, AuthnCounts::default());
}

#[test]
fn certificate_names_are_users_at_the_current_revision() {
    let a = ClientCertAuthenticator;
    let creds = Credentials {
        cert_cn: Some("alice".into()),
        ..Default::default()
    };
    assert_eq!(
        a.authenticate(&creds, 9),
        Verdict::User(AuthInfo {
            username: "alice".into(),
            revision: 9
        })
    );
    assert_eq!(a.authenticate(&Credentials::default(), 9), Verdict::NotMine);
}

#[test]
fn basic_outcomes_become_verdicts_and_the_cache_follows_the_revision() {
    let a = BasicAuthenticator;
    assert_eq!(a.authenticate(&Credentials::default(), 3), Verdict::NotMine);
    let alice = AuthInfo {
        username: "alice".into(),
        revision: 3,
    };
    let creds = Credentials {
        basic: Some(BasicOutcome(Ok(alice.clone()))),
        ..Default::default()
    };
    assert_eq!(a.authenticate(&creds, 3), Verdict::User(alice));
    let creds = Credentials {
        basic: Some(BasicOutcome(Err(EtcdError::AuthFailed))),
        ..Default::default()
    };
    assert_eq!(
        a.authenticate(&creds, 3),
        Verdict::Rejected(EtcdError::AuthFailed)
    );

    let cache = BasicCache::default();
    assert!(!cache.matched("alice", "pw", 3));
    cache.remember("alice", "pw", 3);
    assert!(cache.matched("alice", "pw", 3));
    assert!(!cache.matched("alice", "other", 3), "another password");
    assert!(!cache.matched("alice", "pw", 4), "the auth state moved on");
    assert!(!cache.matched("bob", "pw", 3));
}
