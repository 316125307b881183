//! Hosts as Linux network namespaces on this one machine (`ip netns` and veth links, from
//! Debian's iproute2), for the multi-host chaos tier. Each [`Host`] has one veth link to a
//! bridge in the machine's own namespace (where the tests run, at the bridge's address) and an
//! address of its own on the bridge's private /24. A host can be cut from chosen addresses (a
//! blackhole route in its namespace: packets to them go nowhere, established connections
//! hang) or from the whole network (its link down). Needs root, as CI runs. Every namespace
//! and link goes when the [`Network`] is dropped.

use std::{
    net::Ipv4Addr,
    os::fd::AsFd,
    process::Command,
    sync::{Mutex, PoisonError},
};

/// A bridge and the hosts on it.
pub struct Network {
    id: String,
    bridge: String,
    subnet: [u8; 3],
    hosts: Mutex<Vec<Host>>,
}

/// A network namespace on a [`Network`].
#[derive(Debug, Clone)]
pub struct Host {
    /// What the test calls it (`api`, `worker-1`, ...).
    pub name: String,
    /// Its address on the bridge.
    pub ip: Ipv4Addr,
    namespace: String,
    /// Its veth link's end on the bridge, in the machine's own namespace.
    link: String,
}

impl Network {
    /// Makes the bridge, on a /24 of 10.0.0.0/8 that no route of this machine uses yet.
    pub fn new() -> Self {
        let id = uuid::Uuid::new_v4().simple().to_string()[..6].to_owned();
        let routes = output(Command::new("ip").args(["-4", "route", "show"]));
        let subnet = loop {
            let bytes = uuid::Uuid::new_v4().into_bytes();
            let subnet = [10, 200 + bytes[0] % 50, bytes[1]];
            if !routes.contains(&format!("10.{}.{}.", subnet[1], subnet[2])) {
                break subnet;
            }
        };
        let network = Self {
            bridge: format!("mtb{id}"),
            id,
            subnet,
            hosts: Mutex::new(Vec::new()),
        };
        ip(&["link", "add", &network.bridge, "type", "bridge"]);
        let address = format!("{}/24", network.gateway());
        ip(&["addr", "add", &address, "dev", &network.bridge]);
        ip(&["link", "set", &network.bridge, "up"]);
        network
    }

    /// The machine's own address on the bridge (where the tests and their receivers run).
    pub fn gateway(&self) -> Ipv4Addr {
        let [a, b, c] = self.subnet;
        Ipv4Addr::new(a, b, c, 1)
    }

    /// Adds a host named `name`, linked to the bridge and up.
    pub fn host(&self, name: &str) -> Host {
        let mut hosts = self.hosts.lock().unwrap_or_else(PoisonError::into_inner);
        let n = hosts.len() + 2;
        assert!(n < 255, "a /24 holds at most 253 hosts");
        let [a, b, c] = self.subnet;
        let host = Host {
            name: name.to_owned(),
            ip: Ipv4Addr::new(a, b, c, n as u8),
            namespace: format!("mt-{}-{name}", self.id),
            link: format!("mt{}h{n}", self.id),
        };
        let ns = host.namespace.as_str();
        ip(&["netns", "add", ns]);
        hosts.push(host.clone());
        ip(&[
            "link", "add", &host.link, "type", "veth", "peer", "name", "eth0", "netns", ns,
        ]);
        ip(&["link", "set", &host.link, "master", &self.bridge, "up"]);
        let address = format!("{}/24", host.ip);
        ip(&["-n", ns, "addr", "add", &address, "dev", "eth0"]);
        ip(&["-n", ns, "link", "set", "eth0", "up"]);
        ip(&["-n", ns, "link", "set", "lo", "up"]);
        let gateway = self.gateway().to_string();
        ip(&["-n", ns, "route", "add", "default", "via", &gateway]);
        host
    }
}

impl Default for Network {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        // A namespace's end of its veth link goes with it, and the other end with that.
        let hosts = self.hosts.get_mut().unwrap_or_else(PoisonError::into_inner);
        for host in hosts.iter() {
            let _ = Command::new("ip")
                .args(["netns", "delete", &host.namespace])
                .output();
        }
        let _ = Command::new("ip")
            .args(["link", "delete", &self.bridge])
            .output();
    }
}

impl Host {
    /// `program`, run in this host's namespace.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut command = Command::new("ip");
        command
            .args(["netns", "exec", &self.namespace])
            .arg(program);
        command
    }

    /// Cuts this host from `addresses`: what it sends them is dropped, until [`Self::heal`].
    pub fn cut_from(&self, addresses: &[Ipv4Addr]) {
        for address in addresses {
            let route = format!("{address}/32");
            ip(&[
                "-n",
                &self.namespace,
                "route",
                "replace",
                "blackhole",
                &route,
            ]);
        }
    }

    /// Undoes every [`Self::cut_from`].
    pub fn heal(&self) {
        ip(&["-n", &self.namespace, "route", "flush", "type", "blackhole"]);
    }

    /// Takes this host's link down: nothing reaches it or leaves it until [`Self::rejoin`].
    pub fn isolate(&self) {
        ip(&["link", "set", &self.link, "down"]);
    }

    /// Brings this host's link up again.
    pub fn rejoin(&self) {
        ip(&["link", "set", &self.link, "up"]);
    }

    /// A TCP listener on this host's address, `port` (0: any), made in its namespace: a
    /// server of the tests' own process that lives on this host.
    pub fn listen(&self, port: u16) -> std::net::TcpListener {
        let address = (self.ip, port);
        self.within(move || std::net::TcpListener::bind(address).expect("bind on the host"))
    }

    /// Whether a TCP connection from this host to `address` opens within a second (a check
    /// that a cut is in place, or healed).
    pub fn reaches(&self, address: std::net::SocketAddr) -> bool {
        self.within(move || {
            std::net::TcpStream::connect_timeout(&address, std::time::Duration::from_secs(1))
                .is_ok()
        })
    }

    /// Runs `f` on a thread of its own that has entered this host's namespace: the sockets
    /// it makes belong to the host, and stay there.
    fn within<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        let path = format!("/var/run/netns/{}", self.namespace);
        std::thread::spawn(move || {
            let namespace = std::fs::File::open(&path).expect("the host's namespace");
            rustix::thread::move_into_link_name_space(
                namespace.as_fd(),
                Some(rustix::thread::LinkNameSpaceType::Network),
            )
            .expect("enter the host's namespace");
            f()
        })
        .join()
        .expect("the thread in the host's namespace")
    }
}

fn ip(args: &[&str]) {
    output(Command::new("ip").args(args));
}

/// What `command` printed; panics naming it when it fails.
fn output(command: &mut Command) -> String {
    let out = command
        .output()
        .expect("run ip (iproute2: scripts/chaos installs it)");
    assert!(
        out.status.success(),
        "{command:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
