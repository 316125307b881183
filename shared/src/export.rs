//! The CSV export of an account's jobs, streamed: the api's `GET /api/v1/jobs/export` and the
//! dashboard's download write the same bytes.
//!
//! Rows come from Postgres as the client reads them, and are written by csv-async a chunk at a
//! time into a one-chunk channel the response body drains, so memory stays flat whatever the
//! row count. A failure after the first byte aborts the response (no terminating chunk), so a
//! client never mistakes a cut export for a whole one. A chunk the client has not taken within
//! the write deadline cuts the stream and gives the connection and the caller's slot back.

use std::{borrow::Cow, collections::HashMap, pin::Pin, time::Duration as StdDuration};

use bytes::Bytes;
use csv_async::AsyncWriterBuilder;
use deadpool_postgres::Object;
use futures_util::StreamExt;
use time::{format_description::well_known, Date, Duration, OffsetDateTime, Time};
use tokio::sync::mpsc;
use tokio_postgres::RowStream;

use crate::{
    clock,
    db::{
        job_reports::{self, ExportRow},
        DbError,
    },
    domain::{AccountId, ApiKeyId},
};

/// Bounds that are missing, unparsable, out of order or too far apart.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct InvalidWindow(pub String);

/// The longest window an export may cover.
pub const MAX_WINDOW: Duration = Duration::days(366);
/// Columns, in order.
pub const COLUMNS: [&str; 11] = [
    "job_id",
    "type",
    "status",
    "is_prohibited",
    "created_at",
    "completed_at",
    "api_key_id",
    "api_key_name",
    "prompt",
    "reason",
    "category_nsfw",
];
/// The UTF-8 byte-order mark the body starts with.
const BOM: &[u8] = b"\xEF\xBB\xBF";
/// Rows written per chunk of the body (a few tens of kilobytes).
const ROWS_PER_CHUNK: usize = 256;

/// Reads and checks the bounds: both present and parsable, `from` before `to`, at most
/// [`MAX_WINDOW`] apart.
pub fn window(
    from: Option<&str>,
    to: Option<&str>,
) -> Result<(OffsetDateTime, OffsetDateTime), InvalidWindow> {
    let bound = |name: &str, value: Option<&str>| {
        let value = value
            .ok_or_else(|| InvalidWindow(format!("the query parameter {name} is required")))?;
        parse_instant(value).ok_or_else(|| {
            InvalidWindow(format!(
                "{name} must be an ISO 8601 date-time such as 2026-11-22T10:00:00Z"
            ))
        })
    };
    let (from, to) = (bound("from", from)?, bound("to", to)?);
    if from >= to {
        return Err(InvalidWindow("from must be earlier than to".to_owned()));
    }
    if to - from > MAX_WINDOW {
        return Err(InvalidWindow(
            "the export window is longer than 366 days".to_owned(),
        ));
    }
    Ok((from, to))
}

/// Parses an ISO 8601 date-time with an offset (RFC 3339 and ISO 8601's other spellings), or a
/// bare date (midnight UTC). A `+` decoded to a space by a careless client is put back.
pub fn parse_instant(value: &str) -> Option<OffsetDateTime> {
    let value = value.trim();
    let repaired = value.replace(' ', "+");
    let parsed = [value, repaired.as_str()]
        .into_iter()
        .find_map(|v| {
            OffsetDateTime::parse(v, &well_known::Rfc3339)
                .or_else(|_| OffsetDateTime::parse(v, &well_known::Iso8601::DEFAULT))
                .ok()
        })
        .or_else(|| {
            let format = time::macros::format_description!("[year]-[month]-[day]");
            Date::parse(value, &format)
                .ok()
                .map(|d| d.with_time(Time::MIDNIGHT).assume_utc())
        });
    parsed
}

/// What the producer hands the response body.
pub enum Message {
    /// The next piece of the CSV.
    Chunk(Bytes),
    /// The whole export was sent; the body ends cleanly.
    End,
}

/// The state of one streaming export; `S` is the caller's slot, held until the export ends.
pub struct Export<S> {
    /// The connection the rows come from, from the exports' pool, held until the export ends.
    client: Object,
    rows: Pin<Box<RowStream>>,
    names: HashMap<ApiKeyId, String>,
    started: bool,
    done: bool,
    /// Declared after `client`, so the connection is back in its pool before the slot frees.
    slot: S,
}

impl<S> Export<S> {
    /// An export of `account`'s jobs created in `[from, to)` with ids from `floor` on (the
    /// retention floor), read on `client` (hold it only for exports: it is kept until the
    /// export ends).
    pub async fn start(
        client: Object,
        account: AccountId,
        (from, to): (OffsetDateTime, OffsetDateTime),
        floor: uuid::Uuid,
        slot: S,
    ) -> Result<Self, DbError> {
        let names = job_reports::key_names(&client, account).await?;
        let rows = job_reports::export_rows(&client, account, from, to, floor).await?;
        Ok(Self {
            client,
            rows: Box::pin(rows),
            names,
            started: false,
            done: false,
            slot,
        })
    }

    /// Writes the export into `sender` a chunk at a time. Stops, dropping the connection and
    /// the slot, at the end, on a failure, when the body is dropped (the client went away), or
    /// when a chunk waits `write_timeout` for the client to take it.
    pub async fn run(mut self, sender: mpsc::Sender<Message>, write_timeout: StdDuration) {
        while !self.done {
            let chunk = match self.write_chunk().await {
                Ok(chunk) => chunk,
                Err(e) => {
                    tracing::error!(error = ?e, "Export failed while writing a chunk");
                    return;
                }
            };
            match tokio::time::timeout(write_timeout, sender.send(Message::Chunk(chunk.into())))
                .await
            {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return,
                Err(_) => {
                    tracing::info!(
                        timeout_ms = write_timeout.as_millis(),
                        "Export cut: the client did not read within the write deadline"
                    );
                    return;
                }
            }
        }
        // The end marker goes after the connection and slot are given back: the client
        // that reads it may start its next export at once.
        let Self { client, slot, .. } = self;
        drop(client);
        drop(slot);
        // A client gone meanwhile has nothing left to end; one that stalls past the deadline
        // here has its body aborted like any other.
        let _ = tokio::time::timeout(write_timeout, sender.send(Message::End)).await;
    }

    async fn write_chunk(&mut self) -> Result<Vec<u8>, std::io::Error> {
        let mut buffer = Vec::with_capacity(64 * 1024);
        if !self.started {
            buffer.extend_from_slice(BOM);
        }
        let mut writer = AsyncWriterBuilder::new()
            .has_headers(false)
            .create_writer(buffer);
        if !self.started {
            self.started = true;
            writer.write_record(COLUMNS).await.map_err(io_error)?;
        }
        for _ in 0..ROWS_PER_CHUNK {
            let Some(row) = self.rows.next().await else {
                self.done = true;
                break;
            };
            let row = row
                .map_err(|e| e.into())
                .and_then(|row| ExportRow::from_row(&row))
                .map_err(|e| {
                    tracing::error!(error = ?e, "Export failed while reading jobs");
                    std::io::Error::other(e)
                })?;
            writer
                .write_record(cells(&row, &self.names).iter().map(|c| bytes(guard(c))))
                .await
                .map_err(io_error)?;
        }
        writer.into_inner().await
    }
}

/// The cells of one row, in [`COLUMNS`] order.
fn cells<'a>(row: &'a ExportRow, names: &'a HashMap<ApiKeyId, String>) -> [Cow<'a, str>; 11] {
    let flag = |b: Option<bool>| Cow::Borrowed(b.map_or("", |b| if b { "true" } else { "false" }));
    let instant = |at: Option<OffsetDateTime>| {
        at.map_or(Cow::Borrowed(""), |at| clock::format_millis(at).into())
    };
    [
        row.job_id.to_string().into(),
        Cow::Borrowed(row.job_type.as_str()),
        Cow::Borrowed(row.status.as_str()),
        flag(row.is_prohibited),
        instant(Some(row.created_at)),
        instant(row.completed_at),
        row.api_key_id
            .map_or(Cow::Borrowed(""), |id| id.to_string().into()),
        row.api_key_id
            .and_then(|id| names.get(&id))
            .map_or(Cow::Borrowed(""), |name| Cow::Borrowed(name.as_str())),
        Cow::Borrowed(row.prompt.as_str()),
        Cow::Borrowed(row.reason.as_deref().unwrap_or("")),
        flag(row.category_nsfw),
    ]
}

/// The CSV-injection guard: a cell a spreadsheet would read as a formula gets a leading `'`.
pub fn guard(cell: &str) -> Cow<'_, str> {
    match cell.as_bytes().first() {
        Some(b'=' | b'+' | b'-' | b'@' | b'\t' | b'\r') => Cow::Owned(format!("'{cell}")),
        _ => Cow::Borrowed(cell),
    }
}

fn bytes(cell: Cow<'_, str>) -> Cow<'_, [u8]> {
    match cell {
        Cow::Borrowed(s) => Cow::Borrowed(s.as_bytes()),
        Cow::Owned(s) => Cow::Owned(s.into_bytes()),
    }
}

fn io_error(err: csv_async::Error) -> std::io::Error {
    std::io::Error::other(err)
}

/// The response body draining `receiver`: it ends cleanly only after [`Message::End`], and
/// fails (aborting the response) when the producer stops short.
pub fn body(
    receiver: mpsc::Receiver<Message>,
) -> impl futures_util::Stream<Item = Result<Bytes, std::io::Error>> {
    futures_util::stream::unfold(Some(receiver), |receiver| async move {
        let mut receiver = receiver?;
        match receiver.recv().await {
            Some(Message::Chunk(chunk)) => Some((Ok(chunk), Some(receiver))),
            Some(Message::End) => None,
            // The producer stopped without reaching the end: abort the response.
            None => Some((Err(std::io::Error::other("the export was cut short")), None)),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn formula_like_cells_are_prefixed_and_others_left_alone() {
        for cell in ["=1+1", "+1", "-1", "@SUM(A1)", "\tx", "\rx"] {
            assert_eq!(guard(cell), format!("'{cell}"));
        }
        for cell in ["", "plain", " =x", "'quoted", "x=1"] {
            assert_eq!(guard(cell), cell);
        }
    }

    #[test]
    fn instants_parse_in_iso_8601_spellings() {
        let at = datetime!(2026-11-22 10:00:00 UTC);
        assert_eq!(parse_instant("2026-11-22T10:00:00Z"), Some(at));
        assert_eq!(parse_instant("2026-11-22T10:00:00.000Z"), Some(at));
        assert_eq!(parse_instant("2026-11-22T11:00:00+01:00"), Some(at));
        assert_eq!(parse_instant("2026-11-22T11:00:00 01:00"), Some(at));
        assert_eq!(
            parse_instant("2026-11-22"),
            Some(datetime!(2026-11-22 0:00 UTC))
        );
        for bad in [
            "",
            "yesterday",
            "2026-13-01T00:00:00Z",
            "2026-11-22T10:00:00",
        ] {
            assert_eq!(parse_instant(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn the_window_allows_exactly_366_days_and_refuses_one_second_more() {
        let from = "2025-01-01T00:00:00Z";
        assert!(window(Some(from), Some("2026-01-02T00:00:00Z")).is_ok());
        assert!(window(Some(from), Some("2026-01-02T00:00:01Z")).is_err());
    }

    #[test]
    fn the_window_needs_both_bounds_in_order() {
        let t = "2026-01-01T00:00:00Z";
        assert!(window(None, Some(t)).is_err());
        assert!(window(Some(t), None).is_err());
        assert!(window(Some(t), Some(t)).is_err());
        assert!(window(Some("2026-01-02T00:00:00Z"), Some(t)).is_err());
    }
}
