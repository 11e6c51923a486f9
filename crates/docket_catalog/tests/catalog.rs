//! The catalog's behaviour suites run against the in-memory stores (the
//! database backends run the same suites in `docket_storage`'s tests), and
//! what only the in-memory stores promise.

use std::sync::Arc;

use docket_catalog::memory::{MemoryAssets, MemoryCalls, MemoryScripts};
use docket_catalog::scripts::ScriptStore;
use docket_catalog::{AssetStore, CallCatalog};

mod assets {
    use super::*;

    docket_catalog::asset_store_suite!(async {
        (Arc::new(MemoryAssets::new()) as Arc<dyn AssetStore>, ())
    });
}

mod calls {
    use super::*;

    docket_catalog::call_catalog_suite!(async {
        (Arc::new(MemoryCalls::new()) as Arc<dyn CallCatalog>, ())
    });
}

mod prompts {
    use docket_catalog::PromptLibrary;
    use docket_catalog::memory::MemoryPrompts;

    use super::*;

    docket_catalog::prompt_library_suite!(async {
        (Arc::new(MemoryPrompts::new()) as Arc<dyn PromptLibrary>, ())
    });
}

mod principals {
    use docket_catalog::PrincipalStore;
    use docket_catalog::memory::MemoryPrincipals;

    use super::*;

    docket_catalog::principal_store_suite!(async {
        (
            Arc::new(MemoryPrincipals::new()) as Arc<dyn PrincipalStore>,
            (),
        )
    });
}

mod sessions {
    use docket_catalog::SessionStore;
    use docket_catalog::memory::MemorySessions;

    use super::*;

    docket_catalog::session_store_suite!(async {
        (Arc::new(MemorySessions::new()) as Arc<dyn SessionStore>, ())
    });
}

mod scripts {
    use docket_catalog::scripts::testing::{FlakyScripts, new_script};
    use docket_catalog::{CatalogError, generate_id};

    use super::*;

    docket_catalog::script_store_suite!(async {
        (Arc::new(MemoryScripts::new()) as Arc<dyn ScriptStore>, ())
    });

    /// A run of a script that does not exist is refused before it is queued.
    #[tokio::test]
    async fn a_run_needs_its_script() {
        let store = MemoryScripts::new();
        let (script, _) = store
            .create_script(new_script("alice", "daily"), u32::MAX)
            .await
            .expect("create");
        let mut run = docket_catalog::scripts::testing::new_run(&script, "alice");
        run.script_id = generate_id().expect("random");
        assert!(matches!(
            store.enqueue(run).await,
            Err(CatalogError::Invalid(_))
        ));
    }

    /// The flaky wrapper forwards, counts, and fails every call on demand.
    #[tokio::test]
    async fn flaky_scripts_fail_on_demand() {
        let flaky = FlakyScripts::new(Arc::new(MemoryScripts::new()));
        flaky
            .create_script(new_script("alice", "daily"), u32::MAX)
            .await
            .expect("forwarded");
        flaky.set_failing(true);
        assert!(matches!(
            flaky.find_script("alice", "daily").await,
            Err(CatalogError::Unavailable(_))
        ));
        flaky.set_failing(false);
        assert!(
            flaky
                .find_script("alice", "daily")
                .await
                .expect("forwarded")
                .is_some()
        );
        assert_eq!(flaky.calls(), 3);
    }
}

mod links {
    use docket_catalog::LinkStore;
    use docket_catalog::memory::MemoryLinks;

    use super::*;

    docket_catalog::link_store_suite!(async {
        (Arc::new(MemoryLinks::new()) as Arc<dyn LinkStore>, ())
    });
}

mod spools {
    use docket_catalog::SpoolStore;
    use docket_catalog::memory::MemorySpools;

    use super::*;

    docket_catalog::spool_store_suite!(async {
        (Arc::new(MemorySpools::new()) as Arc<dyn SpoolStore>, ())
    });
}
