//! The actions the audit log records (contract 13).

word_enum!(
    /// What an audit event records.
    AuditAction, UnknownAuditAction, "audit action" {
        /// A policy version was made (detail: its diff against the active version).
        PolicyVersionCreated => "policy.version_created",
        /// A version was activated (detail: the diff against the one it replaced).
        PolicyActivated => "policy.activated",
        /// A version started running as the shadow.
        PolicyShadowStarted => "policy.shadow_started",
        /// The shadow stopped.
        PolicyShadowStopped => "policy.shadow_stopped",
        /// A reviewer decided a review item.
        ReviewDecided => "review.decided",
        /// A job was appealed.
        AppealCreated => "appeal.created",
        /// An appeal was decided.
        AppealDecided => "appeal.decided",
        /// An API key was issued.
        KeyCreated => "key.created",
        /// An API key was disabled.
        KeyDisabled => "key.disabled",
        /// An API key was enabled again.
        KeyEnabled => "key.enabled",
        /// An API key was deleted.
        KeyDeleted => "key.deleted",
        /// An API key was renamed.
        KeyRenamed => "key.renamed",
        /// The account's webhook URL was set.
        WebhookUrlSet => "webhook.url_set",
        /// The account's webhook URL was cleared.
        WebhookUrlCleared => "webhook.url_cleared",
        /// The signing secret was rotated.
        WebhookSecretRotated => "webhook.secret_rotated",
        /// The webhook URL's state changed (contract 17).
        WebhookEndpointState => "webhook.endpoint_state",
        /// A custom category was created, changed or deleted.
        CustomCategoryChanged => "custom_category.changed",
        /// Blocklist terms were added or removed.
        BlocklistChanged => "blocklist.changed",
        /// A job's content was erased on request.
        JobContentErased => "job.content_erased",
        /// An operator changed the account's plan or switches (`modctl org set`).
        AccountChanged => "account.changed",
        /// An operator terminated the account.
        AccountTerminated => "account.terminated",
        /// A dashboard user was created.
        UserCreated => "user.created",
        /// A dashboard user was disabled.
        UserDisabled => "user.disabled",
    }
);
