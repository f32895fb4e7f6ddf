//! What every console page shares: the navigation (the admin, the tenant, the other tenants,
//! the logout form's CSRF token).

use super::auth::Admin;
use crate::store::TenantRef;
use crate::tenant::Tenant;

/// The console's sections, for the navigation's highlight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    Agenda,
    Conversations,
    Charges,
    Actions,
    Failures,
    Catalog,
}

impl Section {
    fn name(self) -> &'static str {
        match self {
            Self::Agenda => "agenda",
            Self::Conversations => "conversations",
            Self::Charges => "charges",
            Self::Actions => "actions",
            Self::Failures => "failures",
            Self::Catalog => "catalog",
        }
    }
}

/// The frame around every page (`templates/console/base.html`).
pub struct Nav {
    pub email: String,
    pub slug: String,
    pub business: String,
    pub tenants: Vec<TenantRef>,
    /// The form token for the logout button; pages use the same one for their own forms.
    pub csrf: String,
    pub section: Section,
}

impl Nav {
    pub fn new(admin: &Admin, tenant: &Tenant, csrf: String, section: Section) -> Self {
        Self {
            email: admin.email.clone(),
            slug: tenant.slug.clone(),
            business: tenant.name.clone(),
            tenants: admin.tenants.clone(),
            csrf,
            section,
        }
    }

    /// A link inside this tenant's console: `/admin/{slug}/{path}`.
    pub fn href(&self, path: &str) -> String {
        format!("/admin/{}/{}", self.slug, path)
    }

    /// Whether this page belongs to `section` (its lowercase name).
    pub fn is(&self, section: &str) -> bool {
        self.section.name() == section
    }
}

/// An instant as the console shows it: the tenant's local date and time, to the minute.
pub fn local_time(tz: chrono_tz::Tz, t: chrono::DateTime<chrono::Utc>) -> String {
    t.with_timezone(&tz).format("%d/%m/%Y %H:%M").to_string()
}
