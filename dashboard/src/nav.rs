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
}

impl Nav {
    /// `aria-current` for the link of `section`.
    pub fn current(&self, section: &str) -> &'static str {
        if self.here == section {
            "page"
        } else {
            "false"
        }
    }
}
