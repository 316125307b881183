//! Reading `multipart/form-data` submissions with every limit enforced as parts arrive.
//!
//! - More than [`MAX_PLAIN_FIELDS`] non-file fields: 413.
//! - A non-file field over [`MAX_PLAIN_FIELD_BYTES`] UTF-8 bytes: 400, except the fields given
//!   a larger allowance (`text`), which give 413 past it.
//! - A file part over [`MAX_FILE_BYTES`]: 413. Unknown fields are ignored but count.
//! - A field given once per item of an array (as OpenAPI describes an array in a multipart
//!   body, and generated clients send it) counts once, if the handler allows it
//!   ([`Allowances::repeated`]): at most its item count of parts, [`MAX_FILE_BYTES`] together.

use actix_multipart::Multipart;
use actix_web::{http::header, web, HttpRequest};
use futures_util::TryStreamExt;

use crate::error::ApiError;

/// The most non-file fields a submission may have.
pub const MAX_PLAIN_FIELDS: usize = 8;
/// The most UTF-8 bytes of a non-file field without its own allowance.
pub const MAX_PLAIN_FIELD_BYTES: usize = 16_384;
/// The most bytes of a file part (and of a field with a large allowance).
pub const MAX_FILE_BYTES: usize = 256 * 1024;
/// The most parts of any kind, so a flood of empty file parts is refused too.
const MAX_PARTS: usize = 32;

/// What a form's fields may hold beyond the defaults.
#[derive(Debug, Clone, Copy, Default)]
pub struct Allowances {
    /// Fields allowed up to [`MAX_FILE_BYTES`] even when sent as ordinary fields.
    pub large: &'static [&'static str],
    /// A field that may be given once per item, and the most parts it may have.
    pub repeated: Option<(&'static str, usize)>,
}

/// One part of a form.
#[derive(Debug)]
pub struct Part {
    /// The field name.
    pub name: String,
    /// Whether it was sent as a file (has a filename).
    pub is_file: bool,
    /// Its bytes.
    pub value: Vec<u8>,
}

/// A whole form, read and checked against the limits.
#[derive(Debug, Default)]
pub struct Form {
    parts: Vec<Part>,
}

impl Form {
    /// The one part named `name`; a second part of that name is an error.
    pub fn take(&mut self, name: &str) -> Result<Option<Part>, ApiError> {
        let mut found = None;
        for part in std::mem::take(&mut self.parts) {
            if part.name == name {
                if found.is_some() {
                    return Err(ApiError::InvalidRequest(format!(
                        "field {name:?} is given more than once"
                    )));
                }
                found = Some(part);
            } else {
                self.parts.push(part);
            }
        }
        Ok(found)
    }

    /// Every part named `name`, in the order sent.
    pub fn take_all(&mut self, name: &str) -> Vec<Part> {
        let (found, rest) = std::mem::take(&mut self.parts)
            .into_iter()
            .partition(|part| part.name == name);
        self.parts = rest;
        found
    }

    /// The one non-file field `name` as text.
    pub fn text(&mut self, name: &str) -> Result<Option<String>, ApiError> {
        match self.take(name)? {
            None => Ok(None),
            Some(part) => String::from_utf8(part.value).map(Some).map_err(|_| {
                ApiError::InvalidRequest(format!("field {name:?} is not valid UTF-8"))
            }),
        }
    }
}

/// Reads the form of `req` with the limits, widened by `allow`.
pub async fn read_form(
    req: &HttpRequest,
    payload: web::Payload,
    allow: Allowances,
) -> Result<Form, ApiError> {
    let content_type = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !content_type
        .trim_start()
        .to_ascii_lowercase()
        .starts_with("multipart/form-data")
    {
        return Err(ApiError::UnsupportedMediaType(
            "submissions must be multipart/form-data".to_owned(),
        ));
    }
    let mut multipart = Multipart::new(req.headers(), payload);
    let mut form = Form::default();
    let mut parts = 0;
    let mut plain_fields = 0;
    let mut repeats = Repeats::default();
    while let Some(mut field) = multipart.try_next().await.map_err(malformed)? {
        let disposition = field.content_disposition();
        let name = disposition
            .and_then(|d| d.get_name())
            .ok_or_else(|| ApiError::InvalidRequest("a form part has no field name".to_owned()))?
            .to_owned();
        let is_file = disposition.and_then(|d| d.get_filename()).is_some();
        let repeated = allow.repeated.filter(|(field, _)| *field == name);
        if let Some((field, most)) = repeated {
            repeats.parts += 1;
            if repeats.parts > most {
                return Err(ApiError::PayloadTooLarge(format!(
                    "field {field:?} may be given at most {most} times"
                )));
            }
        }
        // A repeated field's parts count as one part and one field.
        let counted = repeated.is_none() || repeats.parts == 1;
        if counted {
            parts += 1;
            if parts > MAX_PARTS {
                return Err(ApiError::PayloadTooLarge(format!(
                    "a form may have at most {MAX_PARTS} parts"
                )));
            }
        }
        if !is_file && counted {
            plain_fields += 1;
            if plain_fields > MAX_PLAIN_FIELDS {
                return Err(ApiError::PayloadTooLarge(format!(
                    "a form may have at most {MAX_PLAIN_FIELDS} non-file fields"
                )));
            }
        }
        let limit = if is_file || allow.large.contains(&name.as_str()) {
            MAX_FILE_BYTES
        } else {
            MAX_PLAIN_FIELD_BYTES
        };
        let mut value = Vec::new();
        while let Some(chunk) = field.try_next().await.map_err(malformed)? {
            if value.len() + chunk.len() > limit {
                return Err(if limit == MAX_PLAIN_FIELD_BYTES {
                    ApiError::InvalidRequest(format!(
                        "field {name:?} is longer than {MAX_PLAIN_FIELD_BYTES} bytes"
                    ))
                } else {
                    ApiError::PayloadTooLarge(format!(
                        "field {name:?} is longer than {limit} bytes"
                    ))
                });
            }
            value.extend_from_slice(&chunk);
        }
        if repeated.is_some() {
            repeats.bytes += value.len();
            if repeats.bytes > MAX_FILE_BYTES {
                return Err(ApiError::PayloadTooLarge(format!(
                    "the parts of field {name:?} hold more than {MAX_FILE_BYTES} bytes together"
                )));
            }
        }
        form.parts.push(Part {
            name,
            is_file,
            value,
        });
    }
    Ok(form)
}

/// The parts of the repeated field read so far.
#[derive(Debug, Default)]
struct Repeats {
    parts: usize,
    bytes: usize,
}

fn malformed(err: actix_multipart::MultipartError) -> ApiError {
    ApiError::InvalidRequest(format!("malformed multipart body: {err}"))
}
