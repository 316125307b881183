//! A PgBouncer of a test's own (Debian's `pgbouncer`) on a free port in front of a
//! [`PrivatePostgres`](crate::postgres::PrivatePostgres): trust authentication, session mode
//! (Debian 12's PgBouncer is 1.18, and transaction mode keeps the named prepared statements
//! the fleet uses only from 1.21 on), stopped and removed when dropped. As root it runs as the
//! `postgres` user, since PgBouncer refuses root.

use std::{path::PathBuf, time::Duration};

use crate::postgres::{as_postgres, is_root, run};

/// Where Debian installs it (`scripts/chaos` installs the package).
const PGBOUNCER: &str = "/usr/sbin/pgbouncer";

/// A running PgBouncer.
pub struct PgBouncer {
    port: u16,
    dir: PathBuf,
}

impl PgBouncer {
    /// Starts one in front of the server at `127.0.0.1:server_port`, for every database there.
    pub async fn start(server_port: u16) -> Self {
        let port = crate::unused_port();
        let dir =
            std::env::temp_dir().join(format!("mt-pgbouncer-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).expect("make PgBouncer's directory");
        let ini = dir.join("pgbouncer.ini");
        std::fs::write(
            &ini,
            format!(
                "[databases]\n\
                 * = host=127.0.0.1 port={server_port}\n\
                 [pgbouncer]\n\
                 listen_addr = 127.0.0.1\n\
                 listen_port = {port}\n\
                 unix_socket_dir =\n\
                 auth_type = trust\n\
                 auth_file = {dir}/userlist.txt\n\
                 admin_users = postgres\n\
                 pool_mode = session\n\
                 max_client_conn = 1000\n\
                 default_pool_size = 150\n\
                 logfile = {dir}/pgbouncer.log\n\
                 pidfile = {dir}/pgbouncer.pid\n",
                dir = dir.display()
            ),
        )
        .expect("write pgbouncer.ini");
        std::fs::write(dir.join("userlist.txt"), "\"postgres\" \"\"\n").expect("write userlist");
        if is_root() {
            run(std::process::Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(&dir));
        }
        run(as_postgres(PGBOUNCER).arg("-d").arg(&ini));
        let bouncer = Self { port, dir };
        crate::eventually(Duration::from_secs(10), "PgBouncer to listen", || async {
            tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .ok()
                .map(drop)
        })
        .await;
        bouncer
    }

    /// The port clients connect to.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The client connections it holds to `database` now (its admin console's `SHOW CLIENTS`).
    pub async fn clients_of(&self, database: &str) -> usize {
        let (client, connection) = tokio_postgres::connect(
            &format!("postgres://postgres@127.0.0.1:{}/pgbouncer", self.port),
            tokio_postgres::NoTls,
        )
        .await
        .expect("PgBouncer's admin console");
        let driving = tokio::spawn(connection);
        let rows = client
            .simple_query("SHOW CLIENTS")
            .await
            .expect("SHOW CLIENTS");
        driving.abort();
        rows.iter()
            .filter(|message| match message {
                tokio_postgres::SimpleQueryMessage::Row(row) => {
                    row.get("database") == Some(database)
                }
                _ => false,
            })
            .count()
    }
}

impl Drop for PgBouncer {
    fn drop(&mut self) {
        let pid = std::fs::read_to_string(self.dir.join("pgbouncer.pid"))
            .ok()
            .and_then(|pid| pid.trim().parse().ok())
            .and_then(rustix::process::Pid::from_raw);
        if let Some(pid) = pid {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
