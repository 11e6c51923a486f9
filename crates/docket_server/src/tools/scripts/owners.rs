//! Who a script's owner is now, for a run that starts: the server's identity
//! configuration (API keys, the anonymous identity, the OIDC provider) and
//! personas, read when the worker starts the run, so a key removed or roles
//! cut (and the server restarted with that configuration) reach queued,
//! scheduled and reclaimed runs alike.

use std::collections::HashMap;

use docket_run_bridge::OwnerAccess;

use crate::auth::{AuthConfig, Identity};
use crate::persona::Personas;

use super::context::RUN_SCRIPT;

/// The owners this server's configuration knows, and what their roles allow.
pub(crate) struct ConfiguredOwners {
    /// The roles of each API key's subject (`apikey:<name>`).
    api_keys: HashMap<String, Vec<String>>,
    /// The anonymous identity's roles, when anonymous access is allowed.
    anonymous: Option<Vec<String>>,
    /// Whether people sign in as `oidc:` subjects: an OIDC provider is
    /// configured, or Docket's own authorization server (in front of one).
    oidc: bool,
    personas: Personas,
}

impl ConfiguredOwners {
    /// The owners of `auth`, their roles judged by `personas`.
    pub(crate) fn new(auth: &AuthConfig, personas: Personas) -> Self {
        Self {
            api_keys: auth
                .api_keys
                .iter()
                .map(|key| (key.subject(), key.roles.clone()))
                .collect(),
            anonymous: auth.allow_anonymous.then(|| auth.anonymous_roles.clone()),
            oidc: auth.oidc.is_some() || auth.oauth_server.is_some(),
            personas,
        }
    }

    /// What is known of `owner` now. An OIDC subject's roles travel only in
    /// that person's own tokens, so while a provider is configured its runs are
    /// not narrowed here; once none is, its owners no longer exist.
    pub(crate) fn access(&self, owner: &str) -> OwnerAccess {
        let roles = if owner == Identity::ANONYMOUS_SUBJECT {
            self.anonymous.as_ref()
        } else if owner.starts_with("oidc:") && self.oidc {
            return OwnerAccess::Unchecked;
        } else {
            self.api_keys.get(owner)
        };
        let Some(roles) = roles else {
            return OwnerAccess::Refused(format!(
                "the script's owner {owner} no longer exists on this server (its credentials \
                 were removed from the configuration), so the run was not started"
            ));
        };
        match self.personas.resolve(roles) {
            Some(persona) if persona.may_call_tool(RUN_SCRIPT) => OwnerAccess::Holds(roles.clone()),
            _ => OwnerAccess::Refused(format!(
                "the script's owner {owner} may no longer run scripts (no persona of their \
                 current roles may call {RUN_SCRIPT}), so the run was not started"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::auth::{ApiKeyConfig, OidcConfig};
    use crate::persona::AdminConfig;

    fn configured(oidc: bool) -> ConfiguredOwners {
        let key = |name: &str, roles: &[&str]| ApiKeyConfig {
            name: name.to_owned(),
            key: Some(format!("{name}-secret-0123456789")),
            roles: roles.iter().map(|role| (*role).to_owned()).collect(),
            ..ApiKeyConfig::default()
        };
        let auth = AuthConfig {
            api_keys: vec![key("alice", &["admin"]), key("carol", &["nobody"])],
            oidc: oidc.then(OidcConfig::default),
            ..AuthConfig::default()
        };
        ConfiguredOwners::new(
            &auth,
            Personas::new(&BTreeMap::new(), &AdminConfig::default()),
        )
    }

    #[test]
    fn owners_are_judged_by_the_configuration_of_now() {
        let owners = configured(false);
        assert_eq!(
            owners.access("apikey:alice"),
            OwnerAccess::Holds(vec!["admin".into()])
        );
        for gone in ["apikey:bob", "anonymous", "oidc:someone"] {
            assert!(
                matches!(owners.access(gone), OwnerAccess::Refused(message) if message.contains("no longer exists")),
                "{gone}"
            );
        }
        assert!(matches!(
            owners.access("apikey:carol"),
            OwnerAccess::Refused(message) if message.contains("may no longer run scripts")
        ));
        assert_eq!(
            configured(true).access("oidc:someone"),
            OwnerAccess::Unchecked
        );
    }

    /// People who sign in through Docket's own authorization server are
    /// `oidc:` subjects too, so their scripts run (found by the portal's
    /// browser check: a run of theirs was refused as of an owner gone).
    #[test]
    fn owners_signed_in_through_the_authorization_server_exist() {
        let auth = AuthConfig {
            oauth_server: Some(docket_oauth::OAuthServerConfig::default()),
            ..AuthConfig::default()
        };
        let owners = ConfiguredOwners::new(
            &auth,
            Personas::new(&BTreeMap::new(), &AdminConfig::default()),
        );
        assert_eq!(owners.access("oidc:someone"), OwnerAccess::Unchecked);
        assert!(matches!(
            owners.access("apikey:bob"),
            OwnerAccess::Refused(_)
        ));
    }
}
