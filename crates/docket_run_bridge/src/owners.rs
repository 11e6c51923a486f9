//! Who a run acts for when it starts: the script owner's standing now, as the
//! server's identity configuration tells it ([`OwnerAccess`]), and the roles a
//! run acts with — those its version's author saved *and* its owner still
//! holds ([`acting_roles`]).
//!
//! The roles a version saved are a grant made in the past; access that ends
//! must end for runs too. So a run is not admitted on what was true when it was
//! queued or its schedule was set, but on what is true when a worker starts it
//! (first start, retry, or reclaim alike).

/// What the server knows of a script's owner at the moment a run starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OwnerAccess {
    /// The owner exists and holds these roles now.
    Holds(Vec<String>),
    /// The owner's identity provider cannot be asked outside a request (an
    /// OpenID Connect subject: its roles arrive only in the person's own
    /// tokens), so the run acts with its version's saved roles.
    Unchecked,
    /// The owner no longer exists or may no longer run scripts; the message
    /// says which, in words the run's reader is shown.
    Refused(String),
}

/// The roles a run acts with: its version author's saved roles that the
/// owner holds too (all of them when the owner cannot be checked); `Err` with
/// the reason when the owner is refused.
///
/// # Errors
/// The [`OwnerAccess::Refused`] message.
pub fn acting_roles(author_roles: &[String], owner: OwnerAccess) -> Result<Vec<String>, String> {
    match owner {
        OwnerAccess::Holds(current) => Ok(author_roles
            .iter()
            .filter(|role| current.contains(role))
            .cloned()
            .collect()),
        OwnerAccess::Unchecked => Ok(author_roles.to_vec()),
        OwnerAccess::Refused(message) => Err(message),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roles(names: &[&str]) -> Vec<String> {
        names.iter().map(|name| (*name).to_owned()).collect()
    }

    #[test]
    fn a_run_keeps_only_the_saved_roles_its_owner_still_holds() {
        let saved = roles(&["admin", "analyst"]);
        assert_eq!(
            acting_roles(&saved, OwnerAccess::Holds(roles(&["analyst", "viewer"]))),
            Ok(roles(&["analyst"]))
        );
        assert_eq!(
            acting_roles(&saved, OwnerAccess::Holds(Vec::new())),
            Ok(Vec::new())
        );
        assert_eq!(acting_roles(&saved, OwnerAccess::Unchecked), Ok(saved));
        assert_eq!(
            acting_roles(&roles(&["a"]), OwnerAccess::Refused("gone".into())),
            Err("gone".into())
        );
    }
}
