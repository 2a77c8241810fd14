//! The fault injector: one fault every interval, each healed before the
//! next (kill → restart after 1–2 s; stop → continue after 2× the election
//! timeout).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::cluster::{Cluster, ELECTION_MS, status};
use crate::traffic::Clock;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Fault {
    Kill,
    KillLeader,
    Stop,
}

impl Fault {
    pub fn name(self) -> &'static str {
        match self {
            Fault::Kill => "kill",
            Fault::KillLeader => "kill-leader",
            Fault::Stop => "stop",
        }
    }
    pub fn parse(s: &str) -> Result<Vec<Fault>, String> {
        let mut out = Vec::new();
        for w in s.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            out.push(match w {
                "kill" => Fault::Kill,
                "kill-leader" => Fault::KillLeader,
                "stop" => Fault::Stop,
                "none" => continue,
                _ => {
                    return Err(format!(
                        "unknown fault {w:?} (kill, kill-leader, stop, none)"
                    ));
                }
            });
        }
        Ok(out)
    }
}

/// One injected fault, for the summary and the dump.
#[derive(Clone, Debug)]
pub struct Injected {
    pub t: u64,
    pub fault: Fault,
    pub member: String,
    pub note: String,
}

/// Index of the leader, via Status on every member.
async fn leader(cluster: &Arc<Mutex<Cluster>>) -> Option<usize> {
    let (urls, ids): (Vec<String>, Vec<u64>) = {
        let c = cluster.lock().expect("cluster lock");
        (c.urls(), c.members.iter().map(|m| m.id).collect())
    };
    for url in &urls {
        if let Some((_, leader)) = status(url).await
            && leader != 0
            && let Some(i) = ids.iter().position(|&id| id == leader)
        {
            return Some(i);
        }
    }
    None
}

async fn sleep_unless(stop: &AtomicBool, d: Duration) {
    let end = tokio::time::Instant::now() + d;
    while tokio::time::Instant::now() < end && !stop.load(Ordering::Relaxed) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub async fn inject(
    cluster: Arc<Mutex<Cluster>>,
    kinds: Vec<Fault>,
    interval: Duration,
    seed: u64,
    clock: Clock,
    stop: Arc<AtomicBool>,
) -> Vec<Injected> {
    let mut rng = StdRng::seed_from_u64(seed ^ 0xFA17_5EED);
    let mut done = Vec::new();
    let n = cluster.lock().expect("cluster lock").members.len();
    let kinds: Vec<Fault> = if n == 1 {
        kinds.into_iter().filter(|k| *k == Fault::Kill).collect()
    } else {
        kinds
    };
    if kinds.is_empty() {
        return done;
    }
    // Start to start: a fault's own duration does not stretch the interval
    // (unless it is longer than the interval).
    let mut next = tokio::time::Instant::now() + interval;
    loop {
        sleep_unless(
            &stop,
            next.saturating_duration_since(tokio::time::Instant::now()),
        )
        .await;
        next = tokio::time::Instant::now().max(next) + interval;
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let fault = kinds[rng.random_range(0..kinds.len())];
        let random = rng.random_range(0..n);
        let pause = Duration::from_millis(rng.random_range(1000..=2000));
        let t = clock.now();
        let (i, note) = match fault {
            Fault::Kill | Fault::KillLeader => {
                let (i, how) = if fault == Fault::KillLeader {
                    match leader(&cluster).await {
                        Some(i) => (i, "leader"),
                        None => (random, "leader unknown, random member"),
                    }
                } else {
                    (random, "random member")
                };
                let name = {
                    let mut c = cluster.lock().expect("cluster lock");
                    c.kill(i);
                    c.members[i].name.clone()
                };
                println!(
                    "[{:6.2}s] fault {}: SIGKILL {name} ({how}), restart in {:.1}s",
                    t as f64 / 1e9,
                    fault.name(),
                    pause.as_secs_f64()
                );
                tokio::time::sleep(pause).await;
                let r = cluster.lock().expect("cluster lock").start(i);
                let note = match r {
                    Ok(()) => format!("{how}; restarted after {:.1}s", pause.as_secs_f64()),
                    Err(e) => format!("{how}; restart failed: {e}"),
                };
                (i, note)
            }
            Fault::Stop => {
                let d = Duration::from_millis(2 * ELECTION_MS);
                let name = {
                    let mut c = cluster.lock().expect("cluster lock");
                    c.signal_stop(random, true);
                    c.members[random].name.clone()
                };
                println!(
                    "[{:6.2}s] fault stop: SIGSTOP {name} for {:.1}s",
                    t as f64 / 1e9,
                    d.as_secs_f64()
                );
                tokio::time::sleep(d).await;
                cluster
                    .lock()
                    .expect("cluster lock")
                    .signal_stop(random, false);
                (random, format!("continued after {:.1}s", d.as_secs_f64()))
            }
        };
        let member = cluster.lock().expect("cluster lock").members[i]
            .name
            .clone();
        done.push(Injected {
            t,
            fault,
            member,
            note,
        });
    }
    done
}
