//! A TCP proxy of our own, put between the fleet and Postgres or Redis to make the network
//! fail on demand: it passes bytes, blackholes them (holds every byte both ways while the
//! connections stay open, as a dropped route does), loses the server's replies (what the
//! client sent still arrives and commits; it never hears back), cuts every connection, and
//! heals.

use std::net::SocketAddr;

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{
        tcp::{OwnedReadHalf, OwnedWriteHalf},
        TcpListener, TcpStream,
    },
    sync::watch,
};

/// What the proxy does to traffic now; `cuts` counts [`FaultProxy::cut`]s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Network {
    passing: bool,
    replying: bool,
    cuts: u64,
}

/// Which way a pump copies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    ToServer,
    ToClient,
}

/// A running proxy to one upstream address; stops when dropped.
pub struct FaultProxy {
    port: u16,
    network: watch::Sender<Network>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FaultProxy {
    /// Starts a passing proxy on a free loopback port to `upstream`.
    pub async fn start(upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let (network, watching) = watch::channel(Network {
            passing: true,
            replying: true,
            cuts: 0,
        });
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                tokio::spawn(relay(client, upstream, watching.clone()));
            }
        });
        Self {
            port,
            network,
            task,
        }
    }

    /// The port clients connect to.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Holds every byte from now on, both ways; new connections are accepted and get nothing.
    pub fn blackhole(&self) {
        self.network.send_modify(|n| n.passing = false);
    }

    /// From now on the server's replies are dropped, while what clients send still reaches
    /// it: a statement commits and its client never learns it did. Cut the connections after
    /// it, as a broken route would end them.
    pub fn lose_replies(&self) {
        self.network.send_modify(|n| n.replying = false);
    }

    /// Passes bytes again both ways, the held ones first.
    pub fn heal(&self) {
        self.network.send_modify(|n| {
            n.passing = true;
            n.replying = true;
        });
    }

    /// Closes every open connection (new ones are accepted as the proxy's mode allows).
    pub fn cut(&self) {
        self.network.send_modify(|n| n.cuts += 1);
    }
}

/// One client connection: connects upstream once bytes may pass, then pumps both ways until
/// either side closes or the connection is cut.
async fn relay(client: TcpStream, upstream: SocketAddr, mut network: watch::Receiver<Network>) {
    let cuts = network.borrow().cuts;
    let cut = move |n: &Network| n.cuts != cuts;
    let may_pass = match network.wait_for(|n| n.passing || cut(n)).await {
        Ok(now) => !cut(&now),
        Err(_) => false,
    };
    if !may_pass {
        return;
    }
    let Ok(server) = TcpStream::connect(upstream).await else {
        return;
    };
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let mut watch_cut = network.clone();
    tokio::select! {
        () = pump(client_read, server_write, network.clone(), cuts, Direction::ToServer) => {}
        () = pump(server_read, client_write, network, cuts, Direction::ToClient) => {}
        _ = watch_cut.wait_for(cut) => {}
    }
}

/// Copies `from` to `to`, holding each chunk read while the network is blackholed, and
/// dropping replies while they are lost.
async fn pump(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    mut network: watch::Receiver<Network>,
    cuts: u64,
    direction: Direction,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let (may_pass, replying) = match network.wait_for(|n| n.passing || n.cuts != cuts).await {
            Ok(now) => (now.cuts == cuts, now.replying),
            Err(_) => (false, false),
        };
        if !may_pass {
            return;
        }
        if direction == Direction::ToClient && !replying {
            continue;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
