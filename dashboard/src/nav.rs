//! The navigation bar of a signed-in page. A leaf: it imports nothing of the crate.

/// The navigation bar of a signed-in page.
#[derive(Debug, Clone)]
pub struct Nav {
    /// Who is signed in.
    pub email: String,
    /// Whether the staff pages are linked.
    pub staff: bool,
    /// Whether the registry pages are linked.
    pub member: bool,
    /// The session's CSRF token, for the sign-out form and the page's own forms.
    pub csrf: String,
    /// The section shown, marked in the bar.
    pub here: &'static str,
    /// The state of the account's webhook URL while it is not `active` (`failing`,
    /// `disabled`, `paused`): every page shows a banner.
    pub webhook_state: Option<&'static str>,
}

impl Nav {
    /// Whether the account's webhook URL is `failing` (its deliveries are still sent).
    pub fn webhook_failing(&self) -> bool {
        self.webhook_state == Some("failing")
    }

    /// `aria-current` for the link of `section`.
    pub fn current(&self, section: &str) -> &'static str {
        if self.here == section {
            "page"
        } else {
            "false"
        }
    }
}
