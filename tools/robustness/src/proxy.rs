//! Peer-link proxies: with 3 members, every member advertises a proxy port
//! the runner owns as its peer URL and listens on its real peer port; the
//! proxy forwards TCP to the real port, one task pair per connection (one
//! copy loop each way), and lets the fault loop blackhole, delay or drop the
//! bytes of one directed link.
//!
//! A connection's source member is found when it is accepted: its source
//! port names a socket in `/proc/net/tcp`, whose inode one member process
//! holds as an fd. Bytes from member A to member B are the client-to-server
//! bytes of A's connections to B's proxy and the server-to-client bytes of
//! B's connections to A's proxy; a directed link's state governs both. A
//! connection whose source is unknown follows a state only when every link
//! it could be on has it.
//!
//! A connection that lost bytes to a blackhole never forwards again (its
//! byte stream has a hole: the receiver would decode garbage, which no real
//! network does to a TCP stream); it is closed when the fault heals, as TCP
//! would have given up on it, and the members reconnect.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

/// What happens to the bytes of one directed link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Link {
    Flow,
    /// Read and discarded.
    Blackhole,
    /// Forwarded in order, each chunk this much later than it was read.
    Delay(Duration),
}

#[derive(Debug)]
struct Conn {
    from: Option<usize>,
    to: usize,
    kill: watch::Sender<bool>,
    /// Bytes were discarded: the stream has a hole, it must not carry
    /// anything again (the receiver would decode garbage); closed at heal.
    tainted: Arc<AtomicBool>,
}

#[derive(Debug)]
pub struct Net {
    /// `links[from][to]`.
    links: Mutex<Vec<Vec<Link>>>,
    /// Each member's process, to tell where a connection comes from.
    pids: Mutex<Vec<Option<u32>>>,
    conns: Mutex<Vec<Conn>>,
}

impl Net {
    /// Proxies `proxy_ports[i]` → `127.0.0.1:real_ports[i]`, accepting from now on.
    pub async fn start(proxy_ports: &[u16], real_ports: &[u16]) -> std::io::Result<Arc<Net>> {
        let n = proxy_ports.len();
        let net = Arc::new(Net {
            links: Mutex::new(vec![vec![Link::Flow; n]; n]),
            pids: Mutex::new(vec![None; n]),
            conns: Mutex::new(Vec::new()),
        });
        for (to, (&pp, &rp)) in proxy_ports.iter().zip(real_ports).enumerate() {
            let l = TcpListener::bind(("127.0.0.1", pp)).await?;
            let net = net.clone();
            tokio::spawn(async move {
                loop {
                    match l.accept().await {
                        Ok((s, addr)) => {
                            tokio::spawn(net.clone().serve(to, s, addr.port(), pp, rp));
                        }
                        Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                    }
                }
            });
        }
        Ok(net)
    }

    pub fn set_pid(&self, i: usize, pid: Option<u32>) {
        self.pids.lock().expect("pids")[i] = pid;
    }

    /// Sets the state of the directed link `from` → `to`.
    pub fn set(&self, from: usize, to: usize, link: Link) {
        self.links.lock().expect("links")[from][to] = link;
    }

    /// Every link back to `Flow`; connections that lost bytes are closed
    /// (as TCP would have given up on them), the others flow on.
    pub fn heal(&self) {
        for row in self.links.lock().expect("links").iter_mut() {
            row.fill(Link::Flow);
        }
        self.conns.lock().expect("conns").retain(|c| {
            if c.tainted.load(Ordering::Relaxed) {
                let _ = c.kill.send(true);
                return false;
            }
            !c.kill.is_closed()
        });
    }

    /// Closes the current connections accepted by `to`'s proxy (from
    /// `from` only, if given). Returns how many.
    pub fn drop_conns(&self, from: Option<usize>, to: usize) -> usize {
        let mut conns = self.conns.lock().expect("conns");
        let mut n = 0;
        conns.retain(|c| {
            if c.kill.is_closed() {
                return false;
            }
            if c.to == to && (from.is_none() || c.from == from) {
                let _ = c.kill.send(true);
                n += 1;
                return false;
            }
            true
        });
        n
    }

    /// The state of bytes going `from` → `to` (either may be unknown).
    fn link(&self, from: Option<usize>, to: Option<usize>) -> Link {
        let links = self.links.lock().expect("links");
        let n = links.len();
        let cands: Vec<Link> = match (from, to) {
            (Some(f), Some(t)) => vec![links[f][t]],
            (None, Some(t)) => (0..n).filter(|&f| f != t).map(|f| links[f][t]).collect(),
            (Some(f), None) => (0..n).filter(|&t| t != f).map(|t| links[f][t]).collect(),
            (None, None) => vec![Link::Flow],
        };
        if cands.windows(2).all(|w| w[0] == w[1]) {
            cands[0]
        } else {
            Link::Flow
        }
    }

    async fn serve(
        self: Arc<Self>,
        to: usize,
        down: TcpStream,
        src_port: u16,
        proxy_port: u16,
        real_port: u16,
    ) {
        let pids = self.pids.lock().expect("pids").clone();
        let from = tokio::task::spawn_blocking(move || source(&pids, src_port, proxy_port))
            .await
            .ok()
            .flatten();
        let up = match tokio::time::timeout(
            Duration::from_secs(1),
            TcpStream::connect(("127.0.0.1", real_port)),
        )
        .await
        {
            Ok(Ok(s)) => s,
            _ => return,
        };
        let _ = down.set_nodelay(true);
        let _ = up.set_nodelay(true);
        let (kill, killed) = watch::channel(false);
        let tainted = Arc::new(AtomicBool::new(false));
        self.conns.lock().expect("conns").push(Conn {
            from,
            to,
            kill,
            tainted: tainted.clone(),
        });
        let (dr, dw) = down.into_split();
        let (ur, uw) = up.into_split();
        let a = pump(self.clone(), from, Some(to), dr, uw, tainted.clone());
        let b = pump(self.clone(), Some(to), from, ur, dw, tainted);
        let mut killed = killed;
        tokio::select! {
            _ = a => {}
            _ = b => {}
            _ = killed.wait_for(|k| *k) => {}
        }
    }
}

/// One direction of a connection: a reader that stamps each chunk with
/// when it may go (or discards it), a writer that sends them in order.
async fn pump(
    net: Arc<Net>,
    from: Option<usize>,
    to: Option<usize>,
    mut r: OwnedReadHalf,
    mut w: OwnedWriteHalf,
    tainted: Arc<AtomicBool>,
) {
    let (tx, mut rx) = mpsc::channel::<(Instant, Vec<u8>)>(256);
    let reader = async move {
        let mut buf = vec![0u8; 64 * 1024];
        let mut last = Instant::now();
        loop {
            let k = match r.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(k) => k,
            };
            let now = Instant::now();
            let link = net.link(from, to);
            if link == Link::Blackhole {
                tainted.store(true, Ordering::Relaxed);
                continue;
            }
            if tainted.load(Ordering::Relaxed) {
                break;
            }
            let due = match link {
                Link::Delay(d) => now + d,
                _ => now,
            }
            .max(last);
            last = due;
            if tx.send((due, buf[..k].to_vec())).await.is_err() {
                break;
            }
        }
    };
    let writer = async move {
        while let Some((due, chunk)) = rx.recv().await {
            tokio::time::sleep_until(due).await;
            if w.write_all(&chunk).await.is_err() {
                break;
            }
        }
    };
    tokio::join!(reader, writer);
}

/// The member whose process owns the socket `127.0.0.1:src_port` →
/// `dst_port`, via `/proc/net/tcp` and `/proc/<pid>/fd`.
fn source(pids: &[Option<u32>], src_port: u16, dst_port: u16) -> Option<usize> {
    let port_of = |a: &str| {
        a.rsplit(':')
            .next()
            .and_then(|p| u16::from_str_radix(p, 16).ok())
    };
    let mut inode = None;
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(s) = std::fs::read_to_string(table) else {
            continue;
        };
        for line in s.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() > 9 && port_of(f[1]) == Some(src_port) && port_of(f[2]) == Some(dst_port) {
                inode = Some(format!("socket:[{}]", f[9]));
                break;
            }
        }
        if inode.is_some() {
            break;
        }
    }
    let inode = inode?;
    for (i, pid) in pids.iter().enumerate() {
        let Some(pid) = pid else { continue };
        let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        for e in dir.flatten() {
            if std::fs::read_link(e.path()).is_ok_and(|l| l.to_string_lossy() == inode.as_str()) {
                return Some(i);
            }
        }
    }
    None
}
