//! The policy as the MCP surface applies it: what `tools/list` offers and which calls are
//! refused. The policy itself lives in [`crate::policy`], shared with the CLI and the
//! terminal; this module tests it over the real command table.

#[cfg(test)]
mod tests {
    use serde_json::{Map, Value as Json, json};

    use crate::commands::{self, DynCommand};
    use crate::policy::{Policy, PolicyFlags};
    use crate::protocol::ErrorCode;

    fn load(flags: PolicyFlags) -> Policy {
        Policy::load(
            PolicyFlags {
                ignore_config: true,
                ..flags
            },
            commands::ALL,
        )
        .unwrap()
    }

    fn denying(names: &str) -> Policy {
        load(PolicyFlags {
            deny_capabilities: vec![names.to_owned()],
            ..PolicyFlags::default()
        })
    }

    fn listed(policy: &Policy) -> Vec<String> {
        commands::ALL
            .iter()
            .filter(|c| policy.lists(**c))
            .map(|c| c.spec().tool_name())
            .collect()
    }

    fn command(name: &str) -> &'static dyn DynCommand {
        commands::find(name).unwrap()
    }

    fn args(json: Json) -> Map<String, Json> {
        match json {
            Json::Object(map) => map,
            _ => Map::new(),
        }
    }

    #[test]
    fn read_only_offers_the_reading_tools_and_the_reading_form_of_selection() {
        let policy = load(PolicyFlags {
            read_only: true,
            ..PolicyFlags::default()
        });
        assert_eq!(
            listed(&policy),
            [
                "studio_sessions",
                "studio_target",
                "studio_api",
                "studio_state",
                "studio_stats",
                "studio_logs",
                "studio_query",
                "studio_find",
                "studio_screenshot",
                "studio_script_read",
                "studio_script_search",
                "studio_debug",
                "studio_selection",
                "studio_asset_search",
                "studio_terrain",
                "studio_ui",
            ]
        );
        let exec = policy
            .check(command("exec"), &args(json!({"script": "return 1"})))
            .unwrap_err();
        assert_eq!(exec.code, ErrorCode::PermissionDenied);
        assert!(
            exec.message.contains("read-only mode (--read-only)"),
            "{}",
            exec.message
        );
        assert!(policy.check(command("selection"), &Map::new()).is_ok());
        assert!(
            policy
                .check(command("selection"), &args(json!({"sessionId": "A-edit"})))
                .is_ok()
        );
        let set = policy
            .check(command("selection"), &args(json!({"set": ["Workspace"]})))
            .unwrap_err();
        assert!(set.message.contains("changes Studio"), "{}", set.message);
    }

    #[test]
    fn denying_code_hides_exec_and_test_run_and_refuses_create_with_source() {
        let policy = denying("code");
        let names = listed(&policy);
        for hidden in ["studio_exec", "studio_test_run", "studio_script_edit"] {
            assert!(!names.iter().any(|n| n == hidden), "{hidden} listed: {names:?}");
        }
        for shown in ["studio_create", "studio_play", "studio_update", "studio_query"] {
            assert!(names.iter().any(|n| n == shown), "{shown} missing: {names:?}");
        }
        let runtime_game = args(json!({"script": "return 1", "runtime": "game"}));
        let error = policy.check(command("exec"), &runtime_game).unwrap_err();
        assert_eq!(error.details.unwrap()["rule"], "denied by --deny-capability code");
        assert!(
            policy
                .check(command("test_run"), &args(json!({"script": "return 1"})))
                .is_err()
        );
        let part = json!({"className": "Part", "parent": "Workspace"});
        assert!(policy.check(command("create"), &args(json!({"items": [part]}))).is_ok());
        let script = json!({"className": "Script", "parent": "ServerScriptService", "source": "print(1)"});
        let error = policy
            .check(command("create"), &args(json!({"items": [part, script]})))
            .unwrap_err();
        assert_eq!(error.details.unwrap()["capability"], "code");
        let property = json!({"className": "Script", "parent": "Workspace", "properties": {"Source": "x"}});
        assert!(
            policy
                .check(command("create"), &args(json!({"items": [property]})))
                .is_err()
        );
    }

    #[test]
    fn denying_play_hides_play_and_test_run_and_denying_assets_hides_insert_asset() {
        let names = listed(&denying("play"));
        assert!(
            !names.iter().any(|n| n == "studio_play" || n == "studio_test_run"),
            "{names:?}"
        );
        assert!(names.iter().any(|n| n == "studio_exec"), "{names:?}");
        let names = listed(&denying("assets"));
        assert!(!names.iter().any(|n| n == "studio_insert_asset"), "{names:?}");
        // Open Cloud's tools are offered only with an API key (none in tests).
        let cloud = commands::ALL
            .iter()
            .filter(|c| c.spec().name.starts_with("cloud_") || c.spec().name == "datastore")
            .count();
        assert_eq!(names.len(), commands::ALL.len() - 1 - cloud, "{names:?}");
    }

    #[test]
    fn denying_write_keeps_the_reading_selection_and_code_that_only_runs() {
        let policy = denying("write");
        let names = listed(&policy);
        for hidden in [
            "studio_create",
            "studio_update",
            "studio_delete",
            "studio_clone",
            "studio_undo",
            "studio_redo",
            "studio_script_edit",
            "studio_insert_asset",
        ] {
            assert!(!names.iter().any(|n| n == hidden), "{hidden} listed: {names:?}");
        }
        for shown in ["studio_selection", "studio_exec", "studio_play", "studio_test_run"] {
            assert!(names.iter().any(|n| n == shown), "{shown} missing: {names:?}");
        }
        assert!(policy.check(command("selection"), &Map::new()).is_ok());
        let error = policy
            .check(command("selection"), &args(json!({"set": []})))
            .unwrap_err();
        assert_eq!(error.details.unwrap()["capability"], "write");
    }

    #[test]
    fn a_glob_over_tool_names_matches_the_tables_names() {
        let error = Policy::load(
            PolicyFlags {
                deny: vec!["exec".into()],
                ignore_config: true,
                ..PolicyFlags::default()
            },
            commands::ALL,
        )
        .unwrap_err();
        assert!(error.contains("studio_exec"), "{error}");
        let policy = load(PolicyFlags {
            deny: vec!["studio_exec".into()],
            ..PolicyFlags::default()
        });
        assert!(!listed(&policy).iter().any(|n| n == "studio_exec"));
        assert!(
            policy.check(command("test_run"), &Map::new()).is_ok(),
            "a glob names tools, not capabilities"
        );
    }
}
