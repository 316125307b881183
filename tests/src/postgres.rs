//! A Postgres cluster of a test's own on a free port, so restarting it disturbs no other test.
//! Made with the server's own `initdb` and `pg_ctl` (Debian's postgresql package) in a
//! temporary directory, trust authentication on loopback, removed when dropped. As root (CI),
//! the server runs as the `postgres` user, which `initdb` requires. A streaming standby of one
//! is copied with `pg_basebackup -R`, and promoted with `pg_ctl promote`. On a [`Host`] (the
//! multi-host tier) it runs in that host's namespace, listening on its address, and trusts
//! every address of the host's network, for its clients and for replication.

use std::{
    net::Ipv4Addr,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use crate::netns::Host;

/// A running private cluster.
pub struct PrivatePostgres {
    port: u16,
    dir: PathBuf,
    bin: PathBuf,
    host: Option<Host>,
}

impl PrivatePostgres {
    /// Makes and starts one.
    pub fn start() -> Self {
        Self::start_on(None)
    }

    /// Makes and starts one on `host`.
    pub fn start_in(host: &Host) -> Self {
        Self::start_on(Some(host))
    }

    fn start_on(host: Option<&Host>) -> Self {
        let cluster = Self::empty(host);
        cluster.pg(
            "initdb",
            &["--auth=trust", "--username=postgres", "--no-sync", "-D"],
            true,
        );
        if host.is_some() {
            let hba = cluster.data().join("pg_hba.conf");
            let mut rules = std::fs::read_to_string(&hba).expect("pg_hba.conf");
            rules.push_str("host all all 0.0.0.0/0 trust\nhost replication all 0.0.0.0/0 trust\n");
            std::fs::write(&hba, rules).expect("pg_hba.conf");
        }
        cluster.start_server();
        cluster
    }

    /// Copies `primary` (`pg_basebackup -R`: a standby that streams from it) and starts the
    /// copy, which answers read-only until [`Self::promote`]d.
    pub fn standby_of(primary: &PrivatePostgres) -> Self {
        Self::standby_on(primary, None)
    }

    /// [`Self::standby_of`] on `host`.
    pub fn standby_in(primary: &PrivatePostgres, host: &Host) -> Self {
        Self::standby_on(primary, Some(host))
    }

    fn standby_on(primary: &PrivatePostgres, host: Option<&Host>) -> Self {
        let cluster = Self::empty(host);
        let port = primary.port.to_string();
        let primary_ip = primary.ip().to_string();
        cluster.pg(
            "pg_basebackup",
            &[
                "-h",
                &primary_ip,
                "-p",
                &port,
                "-U",
                "postgres",
                "-X",
                "stream",
                "-R",
                // Without it the copy waits for a spread checkpoint: minutes.
                "--checkpoint=fast",
                "--no-sync",
                "-D",
            ],
            true,
        );
        cluster.start_server();
        cluster
    }

    /// A new directory for a cluster on a free port, owned by `postgres` when we are root.
    fn empty(host: Option<&Host>) -> Self {
        let port = crate::unused_port();
        let dir = std::env::temp_dir().join(format!("mt-pg-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).expect("make the cluster's directory");
        let cluster = Self {
            port,
            bin: server_bin(),
            dir,
            host: host.cloned(),
        };
        if is_root() {
            run(Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(&cluster.dir));
        }
        cluster
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Kills it as a crash would (`pg_ctl stop -m immediate`: no checkpoint, every session cut).
    pub fn kill(&self) {
        self.pg_ctl(&["stop", "-m", "immediate", "-w"]);
    }

    /// Makes a standby the primary (`pg_ctl promote`), waiting until it takes writes.
    pub fn promote(&self) {
        self.pg_ctl(&["promote", "-w"]);
    }

    /// The base URL (no database) of the cluster.
    pub fn base_url(&self) -> String {
        format!("postgres://postgres@{}:{}", self.ip(), self.port)
    }

    /// The address it listens on.
    pub fn addr(&self) -> std::net::SocketAddr {
        std::net::SocketAddr::from((self.ip(), self.port))
    }

    /// The IP address it listens on: its host's, or loopback.
    pub fn ip(&self) -> Ipv4Addr {
        self.host.as_ref().map_or(Ipv4Addr::LOCALHOST, |h| h.ip)
    }

    /// Restarts it (fast shutdown: every session is ended, as in a real restart).
    pub fn restart(&self) {
        self.pg_ctl(&["restart", "-m", "fast", "-w"]);
    }

    fn start_server(&self) {
        self.pg_ctl(&["start", "-w"]);
    }

    fn pg_ctl(&self, args: &[&str]) {
        let options = format!(
            "-p {} -c listen_addresses={} -c unix_socket_directories={} -c fsync=off \
             -c max_connections=200",
            self.port,
            self.ip(),
            self.dir.display()
        );
        let log = self.dir.join("server.log");
        let data = self.data();
        let mut all = vec!["-D", data.to_str().expect("utf-8 path"), "-l"];
        all.push(log.to_str().expect("utf-8 path"));
        all.extend(["-o", options.as_str()]);
        all.extend(args);
        self.pg("pg_ctl", &all, false);
    }

    fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    fn pg(&self, program: &str, args: &[&str], data_last: bool) {
        let mut command = self.command(program);
        command.args(args);
        if data_last {
            command.arg(self.data());
        }
        run(&mut command);
    }

    /// A server program, run as `postgres` when we are root, on its host if it has one.
    fn command(&self, program: &str) -> Command {
        let program = self.bin.join(program);
        match &self.host {
            // Only root enters a namespace.
            Some(host) => {
                let mut command = host.command("runuser");
                command.args(["-u", "postgres", "--"]).arg(program);
                command
            }
            None => as_postgres(program),
        }
    }
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        let _ = self
            .command("pg_ctl")
            .args(["stop", "-m", "immediate", "-D"])
            .arg(self.data())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The newest installed server's programs (`/usr/lib/postgresql/<version>/bin`).
fn server_bin() -> PathBuf {
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .expect("the postgresql server package is installed (scripts/test installs it)")
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|p| Path::new(p).join("initdb").exists())
        .collect();
    versions.sort();
    versions.pop().expect("an initdb under /usr/lib/postgresql")
}

/// `program`, run as `postgres` when we are root (`initdb` and PgBouncer refuse root).
pub(crate) fn as_postgres(program: impl AsRef<std::ffi::OsStr>) -> Command {
    if is_root() {
        let mut command = Command::new("runuser");
        command.args(["-u", "postgres", "--"]).arg(program);
        command
    } else {
        Command::new(program)
    }
}

pub(crate) fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

pub(crate) fn run(command: &mut Command) {
    let out = command.output().expect("run a Postgres program");
    assert!(
        out.status.success(),
        "{command:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
