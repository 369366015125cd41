//! The paired plugin (issues #16, #25): a host accepts only plugins that prove they hold
//! the secret `install-plugin` wrote into the installed model (and proves itself to them
//! first), unless `--allow-unpaired`; a carried
//! playtest session is vouched for by the paired socket that carries it. The real plugin
//! under Lune pairs in every test of tests/real_plugin.rs; here fake plugins play the
//! installed plugin (with the secret read back out of a real install) and the stranger.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::json;
use support::fake_plugin::{FakePlugin, Identity, studio_like};
use support::free_port;
use support::mcp_client::{Mcp, binary, install_plugin};
use tokio::io::AsyncReadExt;

const WAIT: Duration = Duration::from_secs(15);

/// A config directory of its own (so rotating its secret touches no other test).
fn config_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("pairing-{name}-{}", free_port()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The secret the plugin model installed at `rbxm` carries.
fn secret_of(rbxm: &Path) -> String {
    studio_bridge::plugin_install::secret_in_model(&std::fs::read(rbxm).unwrap()).expect("the install carries a secret")
}

fn paired(instance: &str, secret: &str) -> Identity {
    Identity {
        pairing: Some(secret.to_owned()),
        ..Identity::edit(instance)
    }
}

async fn refused(plugin: &FakePlugin) -> (String, String, Option<u16>) {
    let log = plugin
        .wait("a reject and a close", WAIT, |log| {
            !log.rejects.is_empty() && !log.closes.is_empty()
        })
        .await;
    assert_eq!(log.welcomes, 0, "a refused plugin is never welcomed");
    let (code, message) = log.rejects[0].clone();
    (code, message, log.closes[0])
}

async fn session_ids(mcp: &Mcp) -> Vec<String> {
    let result = mcp.ok("studio_sessions", json!({})).await;
    result["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["sessionId"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn the_installed_secret_is_accepted_and_a_stranger_is_refused_as_unpaired() {
    let dir = config_dir("stranger");
    let rbxm = install_plugin(&dir, &[]).await;
    let port = free_port();
    let mcp = Mcp::spawn_with_config_dir(port, &[], &dir).await;

    let stranger = FakePlugin::start(port, Identity::edit("S"), studio_like());
    let (code, message, close) = refused(&stranger).await;
    assert_eq!(code, "unpaired");
    assert_eq!(close, Some(4003));
    assert!(
        message
            .to_lowercase()
            .contains("reinstall the plugin with studio-bridge install-plugin"),
        "{message}"
    );

    let wrong = FakePlugin::start(port, paired("W", &"0".repeat(64)), studio_like());
    assert_eq!(refused(&wrong).await.0, "unpaired");

    let _installed = FakePlugin::connect(port, paired("A", &secret_of(&rbxm)), studio_like()).await;
    assert_eq!(
        session_ids(&mcp).await,
        ["A-edit"],
        "only the paired plugin is a session"
    );
}

#[tokio::test]
async fn a_rotated_secret_refuses_the_old_install_and_the_secret_never_reaches_the_log() {
    let dir = config_dir("rotate");
    let old = secret_of(&install_plugin(&dir, &[]).await);
    let port = free_port();
    let mut serve = tokio::process::Command::new(binary())
        .args(["serve", "--no-install-plugin", "--port", &port.to_string()])
        .env("STUDIO_BRIDGE_CONFIG_DIR", &dir)
        .env("STUDIO_BRIDGE_LOG", "trace")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();

    let before = FakePlugin::connect(port, paired("A", &old), studio_like()).await;
    before.stop().await;

    let new = secret_of(&install_plugin(&dir, &["--rotate-secret"]).await);
    assert_ne!(new, old);
    // The running host reads the secret at each hello: no restart needed.
    let stale = FakePlugin::start(port, paired("A", &old), studio_like());
    let (code, message, close) = refused(&stale).await;
    assert_eq!((code.as_str(), close), ("unpaired", Some(4003)));
    assert!(
        message.contains("rotated") && message.contains("install-plugin"),
        "{message}"
    );
    FakePlugin::connect(port, paired("B", &new), studio_like())
        .await
        .stop()
        .await;

    serve.start_kill().unwrap();
    let mut log = String::new();
    serve.stderr.take().unwrap().read_to_string(&mut log).await.unwrap();
    assert!(log.contains("unpaired"), "the refusal is logged: {log}");
    assert!(!log.contains(&old) && !log.contains(&new), "a secret reached the log");
}

#[tokio::test]
async fn allow_unpaired_accepts_a_stranger() {
    let dir = config_dir("allow");
    install_plugin(&dir, &[]).await;
    let port = free_port();
    let mcp = Mcp::spawn_with_config_dir(port, &["--allow-unpaired"], &dir).await;
    let stranger = FakePlugin::connect(port, Identity::edit("S"), studio_like()).await;
    assert!(stranger.log().rejects.is_empty());
    assert_eq!(session_ids(&mcp).await, ["S-edit"]);
}

#[tokio::test]
async fn a_carried_playtest_session_needs_no_secret_of_its_own() {
    let dir = config_dir("carried");
    let secret = secret_of(&install_plugin(&dir, &[]).await);
    let port = free_port();
    let mcp = Mcp::spawn_with_config_dir(port, &[], &dir).await;
    let edit = FakePlugin::connect(port, paired("A", &secret), studio_like()).await;
    // The carried hellos carry no pairing, as the real plugin's do.
    edit.carry(Identity::play("A", "server"));
    edit.carry(Identity::play("A", "client"));
    let log = edit
        .wait("two carried welcomes", WAIT, |log| log.carried_welcomes.len() == 2)
        .await;
    assert!(log.rejects.is_empty(), "{:?}", log.rejects);
    assert_eq!(session_ids(&mcp).await, ["A-edit", "A-server", "A-client"]);
}

/// Mutual pairing (PROTOCOL.md, "Pairing is mutual"): the host proves itself on the
/// plugin's nonce before it asks anything, and a plugin that asks but cannot prove itself
/// in turn is refused, whatever else it knows.
#[tokio::test]
async fn the_host_proves_itself_first_and_a_forged_plugin_proof_is_refused() {
    let dir = config_dir("mutual");
    let secret = secret_of(&install_plugin(&dir, &[]).await);
    let port = free_port();
    let mcp = Mcp::spawn_with_config_dir(port, &[], &dir).await;

    let installed = FakePlugin::connect(port, paired("A", &secret), studio_like()).await;
    assert_eq!(installed.log().challenges, [true], "the host's proof is right");

    let forged = FakePlugin::start(
        port,
        Identity {
            forged_auth: Some(vec![0; 32]),
            ..paired("F", &secret)
        },
        studio_like(),
    );
    let (code, _, close) = refused(&forged).await;
    assert_eq!((code.as_str(), close), ("unpaired", Some(4003)));
    assert_eq!(forged.log().challenges, [true], "even a forger is proven to first");
    assert_eq!(session_ids(&mcp).await, ["A-edit"]);
}

/// `--allow-unpaired` admits plugins that cannot prove themselves, but a paired plugin
/// still gets the host's proof (it serves no host without one).
#[tokio::test]
async fn allow_unpaired_still_proves_itself_to_a_paired_plugin() {
    let dir = config_dir("allow-proof");
    let secret = secret_of(&install_plugin(&dir, &[]).await);
    let port = free_port();
    let mcp = Mcp::spawn_with_config_dir(port, &["--allow-unpaired"], &dir).await;
    let installed = FakePlugin::connect(port, paired("A", &secret), studio_like()).await;
    assert_eq!(installed.log().challenges, [true]);
    assert_eq!(session_ids(&mcp).await, ["A-edit"]);
}

/// A connection that has said a well-formed hello leaves the places of those that have
/// not: noisy connections cannot evict a plugin in the middle of its pairing. Each round, a
/// plugin whose `auth` takes a second (a busy Studio) pairs while sixteen connections,
/// each upgraded and having sent one byte (so none counts as silent), take those places in
/// turn. Before, the pairing plugin still held the oldest place and was evicted: 0 of 5
/// paired.
#[tokio::test]
async fn noisy_connections_cannot_evict_a_plugin_during_its_pairing() {
    use studio_bridge::bridge::budget::MAX_UNIDENTIFIED_PLUGINS as SLOTS;
    use tokio::io::AsyncWriteExt;
    let dir = config_dir("noisy");
    let secret = secret_of(&install_plugin(&dir, &[]).await);
    let port = free_port();
    let mcp = Mcp::spawn_with_config_dir(port, &[], &dir).await;
    let mut paired_plugins = Vec::new();
    for round in 0..5 {
        let plugin = FakePlugin::start(
            port,
            Identity {
                auth_delay: Some(Duration::from_secs(1)),
                ..paired(&format!("P{round}"), &secret)
            },
            studio_like(),
        );
        plugin
            .wait("the host's challenge", WAIT, |log| !log.challenges.is_empty())
            .await;
        let mut noisy = Vec::new();
        for _ in 0..SLOTS {
            let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
            stream
                .write_all(
                    format!(
                        "GET /v1/plugin HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\nconnection: Upgrade\r\nupgrade: websocket\r\nsec-websocket-version: 13\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
                    )
                    .as_bytes(),
                )
                .await
                .unwrap();
            let mut head = [0u8; 12];
            stream.read_exact(&mut head).await.expect("upgraded");
            assert_eq!(&head[9..12], b"101", "{}", String::from_utf8_lossy(&head));
            // One byte of a frame: no longer silent.
            stream.write_all(&[0x82]).await.unwrap();
            // Read before the next one comes, so that none of them is the silent one.
            tokio::time::sleep(Duration::from_millis(20)).await;
            noisy.push(stream);
        }
        let log = plugin
            .wait("welcomed after its slow auth", WAIT, |log| {
                log.welcomes == 1 || !log.closes.is_empty()
            })
            .await;
        assert_eq!(
            (log.welcomes, log.closes.len()),
            (1, 0),
            "round {round}: the pairing plugin was welcomed, not closed"
        );
        paired_plugins.push(plugin);
    }
    assert_eq!(session_ids(&mcp).await.len(), 5, "all five paired");
}

/// `--allow-unpaired` stays with the process it was given to: a peer given it that takes
/// over from a paired host keeps the bridge paired, so a plugin without the secret is
/// still refused, while the paired plugin reconnects to it.
#[tokio::test]
async fn a_peer_taking_over_from_a_paired_host_stays_paired() {
    let dir = config_dir("takeover");
    let secret = secret_of(&install_plugin(&dir, &[]).await);
    let port = free_port();
    let host = Mcp::spawn_with_config_dir(port, &[], &dir).await;
    let peer = Mcp::spawn_with_config_dir(port, &["--allow-unpaired"], &dir).await;
    let installed = FakePlugin::connect(port, paired("A", &secret), studio_like()).await;
    assert_eq!(session_ids(&peer).await, ["A-edit"], "the peer sees the host's session");

    // The host leaves; the peer takes over, and the paired plugin comes back to it.
    host.client.cancel().await.unwrap();
    installed
        .wait("the paired plugin's reconnect", WAIT, |log| log.welcomes >= 2)
        .await;
    let stranger = FakePlugin::start(port, Identity::edit("S"), studio_like());
    let (code, _, close) = refused(&stranger).await;
    assert_eq!(
        (code.as_str(), close),
        ("unpaired", Some(4003)),
        "the bridge stays paired"
    );
    assert_eq!(session_ids(&peer).await, ["A-edit"]);
}

/// A refused plugin is visible: the host remembers the last one (its place, when, why),
/// `sessions` lists it beside the sessions, here and through a peer, and a call that
/// finds no session says why the open Studio is not one.
#[tokio::test]
async fn a_refused_plugin_is_named_by_sessions_and_by_no_sessions() {
    let dir = config_dir("refused");
    let _ = install_plugin(&dir, &[]).await;
    let port = free_port();
    let mcp = Mcp::spawn_with_config_dir(port, &[], &dir).await;
    let stranger = FakePlugin::start(port, Identity::edit("S"), studio_like());
    refused(&stranger).await;

    let listed = mcp.ok("studio_sessions", json!({})).await;
    assert_eq!(listed["sessions"], json!([]), "{listed}");
    assert_eq!(listed["refused"]["placeName"], "Place S", "{listed}");
    assert!(
        listed["refused"]["why"].as_str().unwrap().contains("install-plugin"),
        "{listed}"
    );
    let peer = Mcp::spawn_with_config_dir(port, &[], &dir).await;
    let through_peer = peer.ok("studio_sessions", json!({})).await;
    assert_eq!(
        through_peer["refused"], listed["refused"],
        "the host's memory, through a peer"
    );

    let error = mcp.err("studio_state", json!({})).await;
    assert_eq!(error["code"], "no_sessions", "{error}");
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("connected but was refused") && message.contains("studio-bridge doctor"),
        "{message}"
    );
}
