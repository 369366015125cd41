//! Mutual pairing with the real plugin under Lune (PROTOCOL.md, "Pairing is mutual"): the
//! installed plugin pairs with the real host, and a process that holds the port first
//! without the user's secret gets neither the secret nor any work done; `doctor` names it.

use crate::support;

use std::time::Duration;

use serde_json::json;
use support::free_port;
use support::lune::HeadlessStudio;
use support::squatter::{Ploy, Squatter};
use support::studio::{edit_studio, installed_plugin, paired_secret};

/// The real plugin against a squatter playing `ploy`: it warns once naming `doctor`,
/// sends no secret, no proof and no response, and runs nothing.
async fn squatter_gets_nothing(ploy: Ploy) {
    let rbxm = installed_plugin().await;
    let secret = paired_secret();
    let port = free_port();
    let squatter = Squatter::start(port, ploy).await;
    let mut studio = HeadlessStudio::start(port, &rbxm, "edit");
    let warning = studio
        .wait_for_line("studio-bridge doctor", Duration::from_secs(30))
        .await;
    assert!(
        warning.contains("could not prove it is your studio-bridge"),
        "{warning}"
    );
    // The first refusal is retried after 2 s (a port race lost for a moment), and that one
    // too gets nothing; the next retry waits 30 s.
    support::wait_for("the plugin's one quick retry", Duration::from_secs(15), || {
        squatter.seen.lock().unwrap().connections >= 2
    })
    .await;
    // Long enough for a reply to the request, had the plugin run it, and for a third
    // connection, had the pause not grown to 30 s.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let seen = squatter.seen.lock().unwrap();
    assert_eq!(seen.kinds()[0], "hello", "{:?}", seen.kinds());
    assert!(
        seen.kinds().iter().all(|kind| kind == "hello"),
        "the plugin sent the squatter more than hellos: {:?}",
        seen.kinds()
    );
    assert_eq!(
        seen.connections, 2,
        "one retry after 2 s, then none within the 30 s pause"
    );
    for frame in &seen.frames {
        assert!(
            !frame.windows(secret.len()).any(|w| w == secret.as_bytes()),
            "the secret crossed the wire"
        );
        // Nothing of the place before the host proved itself: the protocol and a nonce.
        let hello = rmpv::decode::read_value(&mut &frame[..]).expect("msgpack");
        for field in ["sessionId", "instanceId", "placeName", "placeId", "gameId", "actions"] {
            assert!(hello[field].is_nil(), "the squatter learnt {field}: {hello}");
        }
        assert!(hello["nonce"].is_str(), "{hello}");
    }
    let lines = studio.lines_so_far().join("\n");
    // The plugin's own note on a welcome it accepts (the harness also notes every welcome
    // frame it sees go by, accepted or not).
    assert!(
        !lines.contains("connected to studio-bridge"),
        "the plugin took the squatter's welcome:\n{lines}"
    );
    assert_eq!(
        lines.matches("studio-bridge doctor").count(),
        1,
        "one warning:\n{lines}"
    );
}

#[tokio::test]
async fn a_squatter_with_a_forged_proof_gets_no_secret_and_no_exec() {
    squatter_gets_nothing(Ploy::ForgedChallenge).await;
}

#[tokio::test]
async fn a_squatter_that_skips_the_challenge_gets_no_secret_and_no_exec() {
    squatter_gets_nothing(Ploy::NoChallenge).await;
}

#[tokio::test]
async fn the_real_host_proves_itself_and_the_plugin_serves_it() {
    let (_, mcp, mut studio) = edit_studio().await;
    let result = mcp
        .ok("studio_exec", json!({"script": "return 1 + 1", "context": "edit"}))
        .await;
    assert_eq!(result["returns"], json!([2]));
    let lines = studio.lines_so_far().join("\n");
    assert!(!lines.contains("studio-bridge doctor"), "no pairing warning:\n{lines}");
}
