//! Domain newtypes: ids, scopes, and the words the crates pass to each other (job status and
//! stage, failure codes, delivery state, secret status, chat messages, idempotency keys).
//!
//! Each word is an enum with `as_str()` (its wire and column name), `Display` and `FromStr`.
//! Postgres keeps them as text: the `db` modules map them at the row.

use std::{fmt, str::FromStr};

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// An enum of wire words: `as_str()`, `ALL`, `Display`, serde by the word, and `FromStr`
/// failing with `$error` (`unknown <what> "..."`).
macro_rules! word_enum {
    (
        $(#[$doc:meta])*
        $name:ident, $error:ident, $what:literal {
            $( $(#[$variant_doc:meta])* $variant:ident => $word:literal, )+
        }
    ) => {
        $(#[$doc])*
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord,
            serde::Serialize, serde::Deserialize,
        )]
        pub enum $name {
            $( $(#[$variant_doc])* #[serde(rename = $word)] $variant, )+
        }

        impl $name {
            /// Every value, in a stable order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The wire and column name.
            pub fn as_str(self) -> &'static str {
                match self {
                    $( $name::$variant => $word, )+
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        #[doc = concat!("A name that is not a [`", stringify!($name), "`].")]
        #[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
        #[error("unknown {} {:?}", $what, .0)]
        pub struct $error(pub String);

        impl std::str::FromStr for $name {
            type Err = $error;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $( $word => Ok($name::$variant), )+
                    _ => Err($error(s.to_owned())),
                }
            }
        }
    };
}

mod audit;
mod chat;
mod delivery;
mod idempotency;
mod job;
mod policy;

pub use audit::{AuditAction, UnknownAuditAction};
pub use chat::{ChatMessage, ChatRole, UnknownChatRole};
pub use delivery::{
    DeliveryState, DisabledReason, EndpointState, OperatorEvent, SecretStatus,
    UnknownDeliveryState, UnknownDisabledReason, UnknownEndpointState, UnknownOperatorEvent,
    UnknownSecretStatus, UnknownWebhookEvent, WebhookEvent,
};
pub use idempotency::{
    Idempotency, IdempotencyKey, InvalidIdempotencyKey, RequestFingerprint, IDEMPOTENCY_TTL,
    MAX_IDEMPOTENCY_KEY_LEN,
};
pub use job::{
    FailureCode, JobStage, JobStatus, UnknownFailureCode, UnknownJobStage, UnknownJobStatus,
};
pub use policy::{
    ActorType, AppealState, DecidedBy, JobReviewState, PolicyMode, PolicyStatus, ReviewItemState,
    ReviewReason, UnknownActorType, UnknownAppealState, UnknownDecidedBy, UnknownJobReviewState,
    UnknownPolicyMode, UnknownPolicyStatus, UnknownReviewItemState, UnknownReviewReason,
};

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub Uuid);

        impl $name {
            /// A fresh, time-ordered id.
            pub fn new() -> Self {
                Self(Uuid::now_v7())
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }

        impl FromStr for $name {
            type Err = uuid::Error;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Uuid::parse_str(s).map(Self)
            }
        }
    };
}

id_type!(
    /// An account (organisation): the tenant every key, job and registry entry belongs to.
    AccountId
);
id_type!(
    /// An API key.
    ApiKeyId
);
id_type!(
    /// A moderation job.
    JobId
);
id_type!(
    /// One delivery's claim on a job: written on the job row by the claim and by the result, so
    /// a claim or result run again after its reply was lost recognises its own write.
    ClaimToken
);
id_type!(
    /// A Shared Registry entry.
    RegistryEntryId
);
id_type!(
    /// An account's custom category.
    CustomCategoryId
);
id_type!(
    /// An entry of a hash bank.
    HashBankEntryId
);
id_type!(
    /// A person who signs in to the web dashboard.
    DashboardUserId
);
id_type!(
    /// A webhook delivery (`delivery_id` in the body, the `webhook-id` header).
    DeliveryId
);
id_type!(
    /// A review item: one review of a job (contract 14).
    ReviewItemId
);
id_type!(
    /// An appeal of a job's decision.
    AppealId
);

/// A kind of content, each with its own queue and workers. Chat is stored as `text`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Modality {
    /// Prompts and chats.
    Text,
    /// Images.
    Image,
    /// Videos.
    Video,
    /// Audio clips.
    Audio,
}

impl Modality {
    /// Every modality.
    pub const ALL: [Modality; 4] = [
        Modality::Text,
        Modality::Image,
        Modality::Video,
        Modality::Audio,
    ];

    /// The wire and queue name.
    pub fn as_str(self) -> &'static str {
        match self {
            Modality::Text => "text",
            Modality::Image => "image",
            Modality::Video => "video",
            Modality::Audio => "audio",
        }
    }
}

impl fmt::Display for Modality {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A modality name that is not one of [`Modality::ALL`].
#[derive(Debug, thiserror::Error)]
#[error("unknown modality {0:?} (expected text, image, video or audio)")]
pub struct UnknownModality(pub String);

impl FromStr for Modality {
    type Err = UnknownModality;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Modality::ALL
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| UnknownModality(s.to_owned()))
    }
}

/// A permission a key carries. Each endpoint needs exactly one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scope {
    /// `moderate:prompt`
    ModeratePrompt,
    /// `moderate:chat`
    ModerateChat,
    /// `moderate:image`
    ModerateImage,
    /// `moderate:video`
    ModerateVideo,
    /// `moderate:audio`
    ModerateAudio,
    /// `job:read`
    JobRead,
    /// `usage:read`
    UsageRead,
    /// `webhook:manage`
    WebhookManage,
    /// `registry:check`
    RegistryCheck,
    /// `registry:submit`
    RegistrySubmit,
    /// `settings:manage`: custom categories, blocklists, policies and the audit log; never a
    /// default.
    SettingsManage,
    /// `review:decide`: the review queue; never a client default (dashboard users have it).
    ReviewDecide,
    /// `job:appeal`: appeals of the account's jobs; never a client default.
    JobAppeal,
    /// `job:erase`: erasing a job's content now; never a client default.
    JobErase,
    /// `admin:config`: staff dashboard access, never issued to a programmatic key.
    AdminConfig,
}

impl Scope {
    /// Every scope, in a stable order.
    pub const ALL: [Scope; 15] = [
        Scope::ModeratePrompt,
        Scope::ModerateChat,
        Scope::ModerateImage,
        Scope::ModerateVideo,
        Scope::ModerateAudio,
        Scope::JobRead,
        Scope::UsageRead,
        Scope::WebhookManage,
        Scope::RegistryCheck,
        Scope::RegistrySubmit,
        Scope::SettingsManage,
        Scope::ReviewDecide,
        Scope::JobAppeal,
        Scope::JobErase,
        Scope::AdminConfig,
    ];

    /// The scopes a client-created key gets when none are asked for.
    pub const CLIENT_DEFAULT: [Scope; 5] = [
        Scope::ModeratePrompt,
        Scope::ModerateChat,
        Scope::ModerateImage,
        Scope::ModerateVideo,
        Scope::JobRead,
    ];

    /// The wire name, e.g. `moderate:prompt`.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::ModeratePrompt => "moderate:prompt",
            Scope::ModerateChat => "moderate:chat",
            Scope::ModerateImage => "moderate:image",
            Scope::ModerateVideo => "moderate:video",
            Scope::ModerateAudio => "moderate:audio",
            Scope::JobRead => "job:read",
            Scope::UsageRead => "usage:read",
            Scope::WebhookManage => "webhook:manage",
            Scope::RegistryCheck => "registry:check",
            Scope::RegistrySubmit => "registry:submit",
            Scope::SettingsManage => "settings:manage",
            Scope::ReviewDecide => "review:decide",
            Scope::JobAppeal => "job:appeal",
            Scope::JobErase => "job:erase",
            Scope::AdminConfig => "admin:config",
        }
    }

    /// Whether a programmatic key may carry this scope (`admin:config` never).
    pub fn issuable_to_keys(self) -> bool {
        self != Scope::AdminConfig
    }

    /// Whether only vetted registry members may hold this scope.
    pub fn needs_registry_membership(self) -> bool {
        matches!(self, Scope::RegistryCheck | Scope::RegistrySubmit)
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A scope name that is not one of [`Scope::ALL`].
#[derive(Debug, thiserror::Error)]
#[error("unknown scope {0:?}")]
pub struct UnknownScope(pub String);

impl FromStr for Scope {
    type Err = UnknownScope;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Scope::ALL
            .into_iter()
            .find(|scope| scope.as_str() == s)
            .ok_or_else(|| UnknownScope(s.to_owned()))
    }
}

/// The least UUIDv7 of the millisecond `at`: its 48 time bits followed by zeros, so every id
/// made at or after `at` is at least this and every id made before it is less. Time windows
/// over id-keyed tables (and their partition bounds) are id ranges through it.
pub fn id_floor(at: time::OffsetDateTime) -> Uuid {
    let millis = (at.unix_timestamp_nanos() / 1_000_000).clamp(0, (1 << 48) - 1);
    // Within 48 bits after the clamp.
    let millis = millis as u64;
    let mut bytes = [0u8; 16];
    bytes[..6].copy_from_slice(&millis.to_be_bytes()[2..]);
    Uuid::from_bytes(bytes)
}

/// The instant a UUIDv7 was made (to the millisecond), from its first 48 bits.
pub fn id_time(id: Uuid) -> time::OffsetDateTime {
    let mut millis = [0u8; 8];
    millis[2..].copy_from_slice(&id.as_bytes()[..6]);
    let millis = i128::from(u64::from_be_bytes(millis));
    // 48 bits of milliseconds are far inside the representable range.
    time::OffsetDateTime::from_unix_timestamp_nanos(millis * 1_000_000)
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_scope_round_trips_through_its_name() {
        for scope in Scope::ALL {
            assert_eq!(scope.as_str().parse::<Scope>().unwrap(), scope);
        }
    }

    fn assert_round_trips<T>(words: &[T])
    where
        T: Copy + PartialEq + fmt::Debug + fmt::Display + FromStr,
        T::Err: fmt::Debug,
    {
        for word in words {
            assert_eq!(word.to_string().parse::<T>().unwrap(), *word);
        }
    }

    #[test]
    fn every_word_round_trips_through_its_name() {
        assert_round_trips(JobStatus::ALL);
        assert_round_trips(JobStage::ALL);
        assert_round_trips(FailureCode::ALL);
        assert_round_trips(DeliveryState::ALL);
        assert_round_trips(SecretStatus::ALL);
        assert_round_trips(ChatRole::ALL);
    }

    #[test]
    fn admin_config_is_never_issuable() {
        assert!(!Scope::AdminConfig.issuable_to_keys());
        assert!(Scope::ALL.iter().filter(|s| !s.issuable_to_keys()).count() == 1);
    }

    #[test]
    fn an_id_floor_orders_ids_by_their_time() {
        let id = Uuid::now_v7();
        let at = id_time(id);
        assert!(id_floor(at) <= id);
        assert!(id_floor(at + time::Duration::milliseconds(1)) > id);
        assert_eq!(id_time(id_floor(at)), at);
    }
}
