//! The official MCP Inspector's CLI (the TypeScript SDK's client, which Claude Code is
//! built on) against the real binary: it lists the tools, lints their schemas (`--strict`)
//! and checks every result against its tool's `outputSchema`, as strict clients do.
//! `.ci/run` installs it from npm, with the Node 22 it needs, into
//! `$STUDIO_BRIDGE_TOOLS/npm` (default `~/.cache/studio-bridge-tools/npm`); without it
//! this test fails, unless `STUDIO_BRIDGE_ALLOW_SKIP=1` (TESTING.md).

use crate::support;

use std::path::PathBuf;
use std::process::{Output, Stdio};
use std::time::Duration;

use serde_json::Value as Json;
use support::fake_plugin::{FakePlugin, Identity, studio_like};
use support::free_port;
use support::mcp_client::{binary, unpaired_mcp_args};
use tokio::process::Command;

use support::TOOLS;

/// What the Inspector says when a result fails its tool's `outputSchema` (Ajv's messages,
/// or the SDK's own when `structuredContent` is missing or wrong).
const VALIDATION_COMPLAINTS: [&str; 6] = [
    "must have required property",
    "must NOT have additional properties",
    "must be ",
    "must match",
    "Structured content does not match",
    "declares an output schema but returned no structured content",
];

/// Every Inspector run is bounded: a hung one fails the test instead of blocking it.
const RUN_TIMEOUT: Duration = Duration::from_secs(90);

/// The Inspector and its Node, where `.ci/run` installs them.
struct Inspector {
    node: PathBuf,
    cli: PathBuf,
}

impl Inspector {
    fn locate() -> Option<Inspector> {
        let tools = std::env::var_os("STUDIO_BRIDGE_TOOLS")
            .filter(|dir| !dir.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache/studio-bridge-tools")))?;
        let modules = tools.join("npm").join("node_modules");
        let inspector = Inspector {
            node: modules.join(".bin").join("node"),
            cli: modules.join("@modelcontextprotocol/inspector/clients/launcher/build/index.js"),
        };
        (inspector.node.is_file() && inspector.cli.is_file()).then_some(inspector)
    }

    /// Runs `inspector --cli --format json <inspector_args…> -- studio-bridge mcp --port
    /// <port> --no-install-plugin`: the Inspector spawns the server and talks to it.
    async fn run(&self, port: u16, inspector_args: &[&str]) -> Run {
        let mut command = Command::new(&self.node);
        command
            .arg(&self.cli)
            .args(["--cli", "--format", "json"])
            .args(inspector_args)
            .args(server_env())
            .arg("--")
            .arg(binary())
            .args(unpaired_mcp_args(port));
        self.finish(command, format!("inspector {}", inspector_args.join(" ")))
            .await
    }

    /// Runs the Inspector `command` to its end (bounded by [`RUN_TIMEOUT`]), with its Node
    /// first on PATH: the launcher may start other Node scripts, and they must get the
    /// same Node 22.
    async fn finish(&self, mut command: Command, what: String) -> Run {
        let node_bin = self.node.parent().expect("node's bin dir").to_path_buf();
        let path = std::env::join_paths(
            std::iter::once(node_bin).chain(std::env::var_os("PATH").iter().flat_map(std::env::split_paths)),
        )
        .expect("PATH");
        command.env("PATH", path).stdin(Stdio::null()).kill_on_drop(true);
        let output: Output = tokio::time::timeout(RUN_TIMEOUT, command.output())
            .await
            .unwrap_or_else(|_| panic!("{what}: no answer within {RUN_TIMEOUT:?}"))
            .unwrap_or_else(|e| panic!("{what}: cannot run {}: {e}", self.node.display()));
        let run = Run {
            what,
            code: output.status.code(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        };
        let shown: String = run.stdout.trim().chars().take(240).collect();
        eprintln!("{}: exit {:?}: {shown}", run.what, run.code);
        run
    }
}

impl Inspector {
    /// Runs `inspector --cli --format json --transport http --server-url <url> --header
    /// "Authorization: Bearer <token>" <inspector_args…>`.
    async fn run_http(&self, url: &str, token: &str, inspector_args: &[&str]) -> Run {
        let mut command = Command::new(&self.node);
        command
            .arg(&self.cli)
            .args(["--cli", "--format", "json", "--transport", "http", "--server-url", url])
            .args(["--header", &format!("Authorization: Bearer {token}")])
            .args(inspector_args);
        self.finish(
            command,
            format!("inspector --transport http {}", inspector_args.join(" ")),
        )
        .await
    }
}

/// `-e KEY=VALUE` for the server: the TypeScript SDK gives a stdio server only a few
/// variables (HOME, PATH, …), so the ones that place the bridge's token file (shared
/// with `serve`, which inherits ours) are passed on explicitly.
fn server_env() -> Vec<String> {
    let mut args = vec!["-e".to_owned(), "STUDIO_BRIDGE_LOG=warn".to_owned()];
    for key in ["XDG_RUNTIME_DIR", "XDG_CACHE_HOME"] {
        if let Ok(value) = std::env::var(key) {
            args.extend(["-e".to_owned(), format!("{key}={value}")]);
        }
    }
    args
}

struct Run {
    what: String,
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Run {
    /// The method's result: `--format json` prints `{"result": …}` on stdout.
    fn result(&self) -> Json {
        let printed: Json = serde_json::from_str(self.stdout.trim())
            .unwrap_or_else(|e| panic!("{}: stdout is not JSON ({e}):\n{self}", self.what));
        printed
            .get("result")
            .cloned()
            .unwrap_or_else(|| panic!("{}: no result:\n{self}", self.what))
    }

    /// The tool names of a `tools/list` run, in order.
    fn tool_names(&self) -> Vec<String> {
        self.result()["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("no tools:\n{self}"))
            .iter()
            .filter_map(|tool| tool["name"].as_str().map(str::to_owned))
            .collect()
    }

    fn assert_no_validation_complaint(&self) {
        for complaint in VALIDATION_COMPLAINTS {
            assert!(
                !self.stdout.contains(complaint) && !self.stderr.contains(complaint),
                "{}: the Inspector rejected the result ({complaint:?}):\n{self}",
                self.what
            );
        }
    }

    /// `--strict`'s error-severity findings, as (tool, schema path).
    fn strict_errors(&self) -> Vec<(String, String)> {
        let mut lines = self.stderr.lines();
        let mut errors = Vec::new();
        while let Some(line) = lines.next() {
            if let Some(tool) = line
                .strip_prefix("Error: tool \"")
                .and_then(|rest| rest.strip_suffix('"'))
            {
                let path = lines
                    .next()
                    .and_then(|next| next.trim().strip_prefix("Path: "))
                    .unwrap_or_default();
                errors.push((tool.to_owned(), path.to_owned()));
            }
        }
        errors
    }
}

impl std::fmt::Display for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// The text block of a tool result.
fn text_of(result: &Json) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_default()
}

#[tokio::test]
async fn the_mcp_inspector_accepts_our_tools_and_results() {
    let Some(inspector) = Inspector::locate() else {
        support::missing_tool("the MCP Inspector is not installed (.ci/run installs it and Node 22 from npm)");
        return;
    };

    // tools/list, with the schema lint.
    let list = inspector
        .run(free_port(), &["--strict", "--method", "tools/list"])
        .await;
    assert_eq!(list.tool_names(), TOOLS, "{list}");
    // The schema lint finds nothing, not even a warning (type arrays, bare `true`).
    let errors = list.strict_errors();
    assert!(errors.is_empty(), "--strict schema errors {errors:?}:\n{list}");
    assert!(!list.stderr.contains("Warning"), "--strict schema warnings:\n{list}");
    assert_eq!(list.code, Some(0), "{list}");

    // An error result (no Studio, after the startup grace): readable, and no
    // structuredContent for the Inspector to hold against the outputSchema.
    let state = inspector
        .run(free_port(), &["--method", "tools/call", "--tool-name", "studio_state"])
        .await;
    state.assert_no_validation_complaint();
    let result = state.result();
    assert_eq!(result["isError"], true, "{state}");
    assert!(result.get("structuredContent").is_none(), "{state}");
    let text = text_of(&result);
    assert!(
        text.contains("no_sessions") && text.contains("Is Studio running"),
        "{state}"
    );
    assert_ne!(state.code, Some(0), "an error result is not a success:\n{state}");

    // Success results: `serve` hosts, a fake Studio joins it, and the server the
    // Inspector spawns joins `serve` as a peer.
    let port = free_port();
    let mut serve = Command::new(binary())
        .args([
            "serve",
            "--port",
            &port.to_string(),
            "--no-install-plugin",
            "--allow-unpaired",
        ])
        .env("STUDIO_BRIDGE_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn studio-bridge serve");
    let plugin = FakePlugin::connect(port, Identity::edit("A"), studio_like()).await;

    let state = inspector
        .run(port, &["--method", "tools/call", "--tool-name", "studio_state"])
        .await;
    state.assert_no_validation_complaint();
    assert_eq!(state.code, Some(0), "{state}");
    let result = state.result();
    assert_ne!(result["isError"], true, "{state}");
    assert_eq!(result["structuredContent"]["state"], "Edit", "{state}");
    assert!(text_of(&result).contains("\"state\""), "{state}");

    let exec = inspector
        .run(
            port,
            &[
                "--method",
                "tools/call",
                "--tool-name",
                "studio_exec",
                "--tool-arg",
                "script=return 1",
            ],
        )
        .await;
    exec.assert_no_validation_complaint();
    assert_eq!(exec.code, Some(0), "{exec}");
    let result = exec.result();
    assert_ne!(result["isError"], true, "{exec}");
    assert!(result["structuredContent"]["returns"].is_array(), "{exec}");
    assert!(text_of(&result).contains("\"returns\""), "{exec}");
    let requests = plugin.log().requests;
    assert_eq!(
        requests.last().map(|r| r.args["script"].as_str()),
        Some(Some("return 1"))
    );

    // `api` is answered by the host from the API dump: its structured result passes the
    // Inspector's check against its outputSchema too.
    let api = inspector
        .run(
            port,
            &[
                "--method",
                "tools/call",
                "--tool-name",
                "studio_api",
                "--tool-arg",
                "class=Part",
                "--tool-arg",
                "member=Color",
            ],
        )
        .await;
    api.assert_no_validation_complaint();
    assert_eq!(api.code, Some(0), "{api}");
    let result = api.result();
    assert_eq!(
        result["structuredContent"]["properties"][0]["from"], "BasePart",
        "{api}"
    );

    plugin.stop().await;
    serve.kill().await.expect("stop studio-bridge serve");
}

#[tokio::test]
async fn the_mcp_inspector_lists_and_reads_our_resources() {
    let Some(inspector) = Inspector::locate() else {
        support::missing_tool("the MCP Inspector is not installed (.ci/run installs it and Node 22 from npm)");
        return;
    };
    let list = inspector.run(free_port(), &["--method", "resources/list"]).await;
    assert_eq!(list.code, Some(0), "{list}");
    let uris: Vec<String> = list.result()["resources"]
        .as_array()
        .unwrap_or_else(|| panic!("no resources:\n{list}"))
        .iter()
        .filter_map(|r| r["uri"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(uris, ["studio://guide", "studio://sessions"], "{list}");

    let templates = inspector
        .run(free_port(), &["--method", "resources/templates/list"])
        .await;
    assert_eq!(templates.code, Some(0), "{templates}");
    assert_eq!(
        templates.result()["resourceTemplates"][0]["uriTemplate"],
        "studio://logs/{sessionId}",
        "{templates}"
    );

    let guide = inspector
        .run(free_port(), &["--method", "resources/read", "--uri", "studio://guide"])
        .await;
    assert_eq!(guide.code, Some(0), "{guide}");
    let contents = &guide.result()["contents"][0];
    assert_eq!(contents["mimeType"], "text/markdown", "{guide}");
    assert!(
        contents["text"]
            .as_str()
            .unwrap_or_default()
            .contains("## Writes and undo"),
        "{guide}"
    );
}

#[tokio::test]
async fn the_mcp_inspector_drives_every_tool_and_a_result_page_over_http() {
    use support::fake_plugin::{Reply, handler, value_map};
    let Some(inspector) = Inspector::locate() else {
        support::missing_tool("the MCP Inspector is not installed (.ci/run installs it and Node 22 from npm)");
        return;
    };
    let (port, http) = (free_port(), free_port());
    let mut server = Command::new(binary())
        .args(unpaired_mcp_args(port))
        .args(["--max-result-kib", "16", "--http", &format!("127.0.0.1:{http}")])
        .env("STUDIO_BRIDGE_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn studio-bridge mcp --http");
    // HTTP's own token (kept across restarts), once the server listens.
    let token_file = studio_bridge::mcp::http::http_token_path(port);
    support::wait_for("the HTTP token file", Duration::from_secs(30), || {
        token_file.exists() && std::net::TcpStream::connect(("127.0.0.1", http)).is_ok()
    })
    .await;
    let token = std::fs::read_to_string(&token_file).unwrap().trim().to_owned();
    let url = format!("http://127.0.0.1:{http}/mcp");
    let studio = studio_like();
    let _plugin = FakePlugin::connect(
        port,
        Identity::edit("A"),
        handler(move |action, args| match action {
            "find" => Reply::Ok(value_map(vec![(
                "matches",
                rmpv::Value::Array(
                    (0..2000)
                        .map(|i| {
                            value_map(vec![
                                ("path", format!("game.Workspace.Part{i}").into()),
                                ("className", "Part".into()),
                            ])
                        })
                        .collect(),
                ),
            )])),
            other => studio(other, args),
        }),
    )
    .await;
    // The server may still be starting its HTTP listener: the first list waits for it.
    let mut list = inspector.run_http(&url, &token, &["--method", "tools/list"]).await;
    for _ in 0..20 {
        if list.code == Some(0) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
        list = inspector.run_http(&url, &token, &["--method", "tools/list"]).await;
    }
    assert_eq!(list.tool_names(), TOOLS, "every tool over HTTP:\n{list}");

    for (tool, args) in [
        ("studio_state", vec![]),
        ("studio_exec", vec!["--tool-arg", "script=return 1"]),
        // The fix a syntax error names, accepted by the strict client (#41): in the schema.
        (
            "studio_exec",
            vec!["--tool-arg", "script=return 1", "--tool-arg", "check=false"],
        ),
        (
            "studio_api",
            vec!["--tool-arg", "class=Part", "--tool-arg", "member=Color"],
        ),
    ] {
        let mut inspector_args = vec!["--method", "tools/call", "--tool-name", tool];
        inspector_args.extend(args);
        let call = inspector.run_http(&url, &token, &inspector_args).await;
        call.assert_no_validation_complaint();
        assert_eq!(call.code, Some(0), "{call}");
        assert_ne!(call.result()["isError"], true, "{call}");
    }

    // A cut result links to its rest; the same server serves its pages.
    let find = inspector
        .run_http(
            &url,
            &token,
            &[
                "--method",
                "tools/call",
                "--tool-name",
                "studio_find",
                "--tool-arg",
                "className=Part",
            ],
        )
        .await;
    find.assert_no_validation_complaint();
    let result = find.result();
    assert_eq!(result["structuredContent"]["truncated"], true, "{find}");
    let link = result["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "resource_link")
        .unwrap_or_else(|| panic!("a resource_link:\n{find}"));
    let uri = format!("{}?page=1", link["uri"].as_str().unwrap());
    let page = inspector
        .run_http(&url, &token, &["--method", "resources/read", "--uri", &uri])
        .await;
    assert_eq!(page.code, Some(0), "{page}");
    let contents = &page.result()["contents"][0];
    let kept = result["structuredContent"]["matches"].as_array().unwrap().len();
    assert_eq!(contents["_meta"]["from"], kept, "{page}");
    let entries: Json = serde_json::from_str(contents["text"].as_str().unwrap()).unwrap();
    assert_eq!(entries[0]["path"], format!("game.Workspace.Part{kept}"), "{page}");

    server.kill().await.expect("stop mcp --http");
}

/// Open Cloud's tools through the strict client, against the stand-in: offered with a key,
/// their schemas pass `--strict`, and each result passes its `outputSchema`.
#[tokio::test]
async fn the_mcp_inspector_drives_the_open_cloud_tools() {
    let Some(inspector) = Inspector::locate() else {
        support::missing_tool("the MCP Inspector is not installed (.ci/run installs it and Node 22 from npm)");
        return;
    };
    let stand_in = support::open_cloud::OpenCloud::start().await;
    stand_in.put(
        "PlayerData",
        "user_1",
        serde_json::json!({"coins": 5}),
        serde_json::json!([]),
        serde_json::json!({}),
    );
    let env = [
        format!("ROBLOX_API_KEY={}", support::open_cloud::KEY),
        format!("STUDIO_BRIDGE_OPEN_CLOUD_URL={}", stand_in.url()),
    ];
    let run = |args: Vec<String>| {
        let inspector = &inspector;
        let env = &env;
        async move {
            let mut command = Command::new(&inspector.node);
            command
                .arg(&inspector.cli)
                .args(["--cli", "--format", "json"])
                .args(&args)
                .args(server_env());
            for pair in env {
                command.args(["-e", pair]);
            }
            command.arg("--").arg(binary()).args(unpaired_mcp_args(free_port()));
            inspector.finish(command, format!("inspector {}", args.join(" "))).await
        }
    };
    let words = |items: &[&str]| items.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();

    let list = run(words(&["--strict", "--method", "tools/list"])).await;
    let names = list.tool_names();
    for tool in [
        "studio_cloud_exec",
        "studio_cloud_publish",
        "studio_datastore",
        "studio_cloud_message",
        "studio_cloud_restart",
    ] {
        assert!(names.iter().any(|n| n == tool), "{tool}:\n{list}");
    }
    assert!(list.strict_errors().is_empty(), "{list}");
    assert!(!list.stderr.contains("Warning"), "{list}");

    let call = |tool: &str, args: &[&str]| {
        let mut all = words(&["--method", "tools/call", "--tool-name", tool]);
        for arg in args {
            all.extend(["--tool-arg".to_owned(), (*arg).to_owned()]);
        }
        all
    };
    let exec = run(call(
        "studio_cloud_exec",
        &["script=print('hi') return 1 + 1", "universe=1", "place=2"],
    ))
    .await;
    exec.assert_no_validation_complaint();
    let result = exec.result();
    assert_eq!(result["structuredContent"]["results"], serde_json::json!([2]), "{exec}");
    assert_eq!(result["structuredContent"]["logs"][0]["body"], "hi", "{exec}");

    let get = run(call(
        "studio_datastore",
        &["action=get", "store=PlayerData", "key=user_1", "universe=1"],
    ))
    .await;
    get.assert_no_validation_complaint();
    assert_eq!(
        get.result()["structuredContent"]["value"],
        serde_json::json!({"coins": 5}),
        "{get}"
    );

    let dir = std::env::temp_dir().join(format!("sb-inspector-publish-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let place = dir.join("game.rbxl");
    let dom = rbx_dom_weak::WeakDom::new(rbx_dom_weak::InstanceBuilder::new("DataModel"));
    rbx_binary::to_writer(std::fs::File::create(&place).unwrap(), &dom, dom.root().children()).unwrap();
    let file_arg = format!("file={}", place.display());
    let publish = run(call(
        "studio_cloud_publish",
        &[&file_arg, "versionType=Saved", "universe=1", "place=2"],
    ))
    .await;
    publish.assert_no_validation_complaint();
    assert_eq!(publish.result()["structuredContent"]["versionNumber"], 1, "{publish}");

    let message = run(call(
        "studio_cloud_message",
        &["topic=News", "message=hello", "universe=1"],
    ))
    .await;
    message.assert_no_validation_complaint();
    assert_eq!(message.result()["structuredContent"]["published"], true, "{message}");
    let restart = run(call("studio_cloud_restart", &["universe=1"])).await;
    restart.assert_no_validation_complaint();
    assert_eq!(restart.result()["structuredContent"]["restarted"], true, "{restart}");
    assert_eq!(stand_in.messages(), [(1, "News".to_owned(), "hello".to_owned())]);
    assert_eq!(stand_in.restarts(), [1]);
}
