//! Drives the real `studio-bridge mcp` binary over stdio with rmcp's client.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use rmcp::model::{CallToolRequestParams, CallToolResult, ProgressNotificationParam, ResourceUpdatedNotificationParam};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::Value as Json;
use tokio::process::Command;

/// Records the progress and resource-update notifications the server sends.
#[derive(Clone, Default)]
pub struct Recorder {
    pub progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
    /// The URIs of `notifications/resources/updated`, in order.
    pub updated: Arc<Mutex<Vec<String>>>,
}

impl ClientHandler for Recorder {
    async fn on_progress(&self, params: ProgressNotificationParam, _context: NotificationContext<RoleClient>) {
        self.progress.lock().unwrap().push(params);
    }

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.updated.lock().unwrap().push(params.uri);
    }
}

pub struct Mcp {
    pub client: RunningService<RoleClient, Recorder>,
    pub recorder: Recorder,
    /// Each tool's `outputSchema`, from `tools/list` at spawn: every result is checked
    /// against it, as the TypeScript SDK's client does.
    output_schemas: HashMap<String, Json>,
    pub port: u16,
    /// The process id of the `studio-bridge mcp` child.
    pub pid: u32,
}

pub fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_studio-bridge")
}

/// `mcp --port PORT --no-install-plugin --allow-unpaired`: an `mcp` process that never
/// touches a real Studio's plugins folder and lets fake plugins in without pairing.
pub fn unpaired_mcp_args(port: u16) -> [String; 5] {
    [
        "mcp",
        "--port",
        &port.to_string(),
        "--no-install-plugin",
        "--allow-unpaired",
    ]
    .map(str::to_owned)
}

/// A config directory that holds no config file (it does not exist).
pub fn empty_config_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("no-studio-bridge-config")
}

/// The config directory whose pairing secret this test run's installed plugins carry and
/// its paired hosts check (never the user's own).
pub fn paired_config_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("paired-config")
}

/// Runs `studio-bridge install-plugin --out <fresh folder> <extra…>` with
/// `STUDIO_BRIDGE_CONFIG_DIR=config_dir`; returns the installed model's path.
pub async fn install_plugin(config_dir: &Path, extra: &[&str]) -> PathBuf {
    let dir =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("installed-{}-{}", std::process::id(), super::free_port()));
    let output = Command::new(binary())
        .arg("install-plugin")
        .arg("--out")
        .arg(&dir)
        .args(extra)
        .env("STUDIO_BRIDGE_CONFIG_DIR", config_dir)
        .output()
        .await
        .expect("run studio-bridge install-plugin");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    dir.join("StudioBridge.rbxm")
}

impl Mcp {
    /// Spawns `studio-bridge mcp --port <port> --no-install-plugin <extra…>` and initializes.
    /// Its config directory is one with no config file, so a policy in the user's own
    /// config.toml never reaches a test.
    ///
    /// It runs with `--allow-unpaired`, for the fake plugins (which carry no secret); a
    /// host for the real plugin is [`Mcp::spawn_paired`].
    pub async fn spawn(port: u16, extra: &[&str]) -> Mcp {
        let args: Vec<&str> = std::iter::once("--allow-unpaired")
            .chain(extra.iter().copied())
            .collect();
        Mcp::spawn_with_config_dir(port, &args, &empty_config_dir()).await
    }

    /// [`Mcp::spawn`] requiring pairing with the secret in [`paired_config_dir`], the one
    /// [`install_plugin`] writes into the plugin (that directory holds no config file).
    pub async fn spawn_paired(port: u16, extra: &[&str]) -> Mcp {
        Mcp::spawn_with_config_dir(port, extra, &paired_config_dir()).await
    }

    /// [`Mcp::spawn_paired`] with environment variables set (`Some`) or removed (`None`),
    /// e.g. the X display a window screenshot reads.
    pub async fn spawn_paired_with_env(port: u16, extra: &[&str], env: &[(&str, Option<&str>)]) -> Mcp {
        Mcp::spawn_inner(port, extra, &paired_config_dir(), env, None).await
    }

    /// [`Mcp::spawn_paired_with_env`] with `dir` as the process's working directory (the
    /// project folder whose sourcemap, selene.toml and stylua.toml it reads).
    pub async fn spawn_paired_in(port: u16, dir: &Path, env: &[(&str, Option<&str>)]) -> Mcp {
        Mcp::spawn_inner(port, &[], &paired_config_dir(), env, Some(dir)).await
    }

    /// [`Mcp::spawn_with_config_dir`] with environment variables set or removed.
    pub async fn spawn_in_config_dir_with_env(
        port: u16,
        extra: &[&str],
        config_dir: &Path,
        env: &[(&str, Option<&str>)],
    ) -> Mcp {
        Mcp::spawn_inner(port, extra, config_dir, env, None).await
    }

    /// [`Mcp::spawn`] with `STUDIO_BRIDGE_CONFIG_DIR` set to `config_dir`.
    pub async fn spawn_with_config_dir(port: u16, extra: &[&str], config_dir: &Path) -> Mcp {
        Mcp::spawn_inner(port, extra, config_dir, &[], None).await
    }

    async fn spawn_inner(
        port: u16,
        extra: &[&str],
        config_dir: &Path,
        env: &[(&str, Option<&str>)],
        dir: Option<&Path>,
    ) -> Mcp {
        let mut command = Command::new(binary());
        if let Some(dir) = dir {
            command.current_dir(dir);
        }
        for (name, value) in env {
            match value {
                Some(value) => command.env(name, value),
                None => command.env_remove(name),
            };
        }
        // Tests never touch a real Studio's plugins folder.
        command
            .arg("mcp")
            .arg("--port")
            .arg(port.to_string())
            .arg("--no-install-plugin")
            .args(extra);
        command.env("STUDIO_BRIDGE_LOG", "warn");
        command.env("STUDIO_BRIDGE_CONFIG_DIR", config_dir);
        let (transport, _stderr) = TokioChildProcess::builder(command)
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn studio-bridge mcp");
        let pid = transport.id().expect("child pid");
        let recorder = Recorder::default();
        let client = recorder.clone().serve(transport).await.expect("MCP initialize");
        let output_schemas = client
            .list_all_tools()
            .await
            .expect("tools/list")
            .into_iter()
            .filter_map(|tool| {
                let schema = tool.output_schema?;
                Some((tool.name.to_string(), Json::Object((*schema).clone())))
            })
            .collect();
        Mcp {
            client,
            recorder,
            output_schemas,
            port,
            pid,
        }
    }

    pub async fn call(&self, tool: &str, args: Json) -> CallToolResult {
        let Json::Object(arguments) = args else {
            panic!("arguments must be an object")
        };
        let result = self
            .client
            .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments))
            .await
            .unwrap_or_else(|e| panic!("{tool} failed at the protocol level: {e}"));
        self.check_against_schema(tool, &result);
        result
    }

    /// What a strict client checks: a success's `structuredContent` is valid against the
    /// tool's `outputSchema`; an error carries none (its JSON is in the text only).
    pub fn check_against_schema(&self, tool: &str, result: &CallToolResult) {
        if result.is_error == Some(true) {
            assert!(
                result.structured_content.is_none(),
                "{tool}: an error result must not carry structuredContent (strict clients validate it against the outputSchema): {result:?}"
            );
            let error = error_of(result);
            assert!(
                error["code"].is_string() && error["message"].is_string(),
                "{tool}: {error}"
            );
            return;
        }
        let Some(schema) = self.output_schemas.get(tool) else {
            return;
        };
        let structured = result
            .structured_content
            .as_ref()
            .unwrap_or_else(|| panic!("{tool}: a tool with an outputSchema must return structuredContent"));
        let validator =
            jsonschema::validator_for(schema).unwrap_or_else(|e| panic!("{tool}: invalid outputSchema: {e}"));
        let problems: Vec<String> = validator
            .iter_errors(structured)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(
            problems.is_empty(),
            "{tool}: structuredContent fails its outputSchema: {problems:?}\nresult: {structured}\nschema: {schema}"
        );
    }

    /// Calls a tool that must succeed; returns its structured content.
    pub async fn ok(&self, tool: &str, args: Json) -> Json {
        let result = self.call(tool, args).await;
        assert_ne!(result.is_error, Some(true), "{tool} failed: {result:?}");
        structured(&result)
    }

    /// Calls a tool that must fail with a tool error; returns `error`.
    pub async fn err(&self, tool: &str, args: Json) -> Json {
        let result = self.call(tool, args).await;
        assert_eq!(result.is_error, Some(true), "{tool} should have failed: {result:?}");
        error_of(&result)
    }
}

/// The `error` object of an error result, read from its text block (the only place it is).
pub fn error_of(result: &CallToolResult) -> Json {
    let text = result
        .content
        .iter()
        .find_map(|c| c.as_text().map(|t| t.text.clone()))
        .expect("an error result has a text block");
    let json: Json = serde_json::from_str(&text).expect("the error text is JSON");
    json["error"].clone()
}

/// The structured content of a result, checking that its text block carries the same
/// JSON (some clients show the model only one of the two).
pub fn structured(result: &CallToolResult) -> Json {
    let structured = result.structured_content.clone().expect("structuredContent");
    let text = result
        .content
        .iter()
        .find_map(|c| c.as_text().map(|t| t.text.clone()))
        .expect("a text block");
    assert_eq!(
        serde_json::from_str::<Json>(&text).unwrap(),
        structured,
        "text and structuredContent differ"
    );
    structured
}
