//! Where a gateway's secrets come from: the environment in production (the tenant file names the
//! variables, never their values), a map in tests.

use std::collections::HashMap;

use super::gateway::GatewayError;
use crate::domain::Secret;

/// Where named secrets come from.
pub trait Secrets: Send + Sync {
    fn get(&self, name: &str) -> Option<Secret>;
}

/// The process environment (and `.env`, loaded at start).
pub struct EnvSecrets;

impl Secrets for EnvSecrets {
    fn get(&self, name: &str) -> Option<Secret> {
        std::env::var(name).ok().filter(|v| !v.trim().is_empty()).map(Secret::new)
    }
}

/// Fixed secrets, for tests and tools.
#[derive(Default)]
pub struct MapSecrets(pub HashMap<String, String>);

impl Secrets for MapSecrets {
    fn get(&self, name: &str) -> Option<Secret> {
        self.0.get(name).cloned().map(Secret::new)
    }
}

/// Reads the secret a setting names, or says which one is missing.
pub fn required_secret(secrets: &dyn Secrets, setting: &str, name: Option<&str>) -> Result<Secret, GatewayError> {
    let name = name.ok_or_else(|| GatewayError::NotConfigured(format!("[pix] {setting} is not set")))?;
    secrets.get(name).ok_or_else(|| {
        GatewayError::NotConfigured(format!("the environment variable {name} ([pix] {setting}) is not set"))
    })
}
