//! Where a piece of text is still stored: every Postgres table of the test database and every
//! Redis key of its namespace, read whole. For the tests that content erasure leaves no copy.

use moderation_shared::redis_conn::RedisConn;
use redis::Value as RedisValue;

use crate::TestApp;

impl TestApp {
    /// The tables of the test database holding `marker` in any column: as text, or as the hex
    /// of its bytes (a `bytea` column, such as a delivery's body, shows that way).
    pub async fn tables_holding(&self, marker: &str) -> Vec<String> {
        let client = self.db.pool.get().await.expect("connect");
        let tables: Vec<String> = client
            .query(
                "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
                 WHERE n.nspname = 'public' AND c.relkind = 'r' ORDER BY 1",
                &[],
            )
            .await
            .expect("list tables")
            .iter()
            .map(|row| row.get(0))
            .collect();
        let hex = hex::encode(marker.as_bytes());
        let mut holding = Vec::new();
        for table in tables {
            let found: bool = client
                .query_one(
                    &format!(
                        "SELECT EXISTS (SELECT 1 FROM \"{table}\" t \
                                        WHERE t::text LIKE '%' || $1 || '%' \
                                           OR t::text LIKE '%' || $2 || '%')"
                    ),
                    &[&marker, &hex],
                )
                .await
                .expect("search a table")
                .get(0);
            if found {
                holding.push(table);
            }
        }
        holding
    }

    /// The keys of this app's Redis namespace holding `marker` in any value (strings, hashes,
    /// lists, sets, sorted sets and streams).
    pub async fn redis_keys_holding(&self, marker: &str) -> Vec<String> {
        let conn = RedisConn::new(&self.redis).expect("redis settings");
        let pattern = conn.key("*");
        let marker = marker.as_bytes().to_vec();
        conn.with(|mut conn| async move {
            let keys = crate::worker::scan_keys(&mut conn, &pattern).await?;
            let mut holding = Vec::new();
            for key in keys {
                let kind: String = redis::cmd("TYPE").arg(&key).query_async(&mut conn).await?;
                let read = match kind.as_str() {
                    "string" => redis::cmd("GET").arg(&key).clone(),
                    "hash" => redis::cmd("HGETALL").arg(&key).clone(),
                    "list" => redis::cmd("LRANGE").arg(&key).arg(0).arg(-1).clone(),
                    "set" => redis::cmd("SMEMBERS").arg(&key).clone(),
                    "zset" => redis::cmd("ZRANGE").arg(&key).arg(0).arg(-1).clone(),
                    "stream" => redis::cmd("XRANGE").arg(&key).arg("-").arg("+").clone(),
                    _ => continue,
                };
                let value: RedisValue = read.query_async(&mut conn).await?;
                if holds(&value, &marker) {
                    holding.push(key);
                }
            }
            Ok(holding)
        })
        .await
        .expect("read the namespace")
    }
}

/// Whether any bulk string inside `value` contains `marker`.
fn holds(value: &RedisValue, marker: &[u8]) -> bool {
    match value {
        RedisValue::BulkString(bytes) => bytes.windows(marker.len()).any(|w| w == marker),
        RedisValue::SimpleString(text) => text.contains(&*String::from_utf8_lossy(marker)),
        RedisValue::Array(items) | RedisValue::Set(items) => {
            items.iter().any(|item| holds(item, marker))
        }
        RedisValue::Map(pairs) => pairs
            .iter()
            .any(|(k, v)| holds(k, marker) || holds(v, marker)),
        _ => false,
    }
}
