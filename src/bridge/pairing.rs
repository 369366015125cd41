//! The paired plugin: the plugin and the host prove to each other that they hold this
//! user's pairing secret, and the secret itself never crosses the wire (PROTOCOL.md,
//! "Pairing is mutual").
//!
//! Why both ways: whoever binds 127.0.0.1:38741 first gets the plugin's connection. That
//! may be another user's process on a shared machine, a port forwarded from a devcontainer
//! or WSL, or anything a local program started. A plugin that sent its secret in `hello`,
//! or ran requests before the host proved itself, would hand that process the secret and
//! `exec` in every open place. So:
//!
//! 1. the plugin's `hello` carries a fresh `nonce` and no secret;
//! 2. the host answers `challenge {hostNonce, proof}`, `proof = HMAC(secret, "studio-bridge
//!    host" ‖ nonce ‖ hostNonce)`: only a holder of the secret can make it, and the plugin
//!    serves nothing to a host whose proof is wrong or missing;
//! 3. the plugin answers `auth {proof = HMAC(secret, "studio-bridge plugin" ‖ hostNonce ‖
//!    nonce)}`, which the host checks before it registers the session and sends `welcome`.
//!
//! The nonces make every proof good for one connection only, and the two labels make a
//! host proof useless as a plugin proof (a squatter cannot reflect one into the other).
//!
//! `install-plugin` (and `mcp`'s automatic install) writes the secret, 32 random bytes as
//! hex, to `<config dir>/plugin-secret` (readable by this user only) and into the installed
//! model. The HMAC key is that hex text as it is stored (64 ASCII bytes), which is what the
//! plugin holds. The host reads the file at each `hello`, so a rotated secret
//! (`install-plugin --rotate-secret`) refuses old installs at once. The secret is never
//! logged and never part of an error message.

use std::path::{Path, PathBuf};

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use super::secret_file;
use crate::config::config_dir;

/// The secret's file name inside the config directory.
pub const SECRET_FILE: &str = "plugin-secret";

/// Where the pairing secret lives, if this platform has a config directory.
pub fn secret_path() -> Option<PathBuf> {
    config_dir().map(|d| d.join(SECRET_FILE))
}

/// The secret in `path`, if there is one.
pub fn read_secret(path: &Path) -> Option<String> {
    secret_file::read(path)
}

/// The secret in `path`, created (0600 on Unix) when there is none yet. Two installs
/// racing to create it agree on one: the new file is linked into place only if no other
/// got there first.
pub fn ensure_secret(path: &Path) -> std::io::Result<String> {
    if let Some(secret) = read_secret(path) {
        return Ok(secret);
    }
    secret_file::write_unless_present(path, &secret_file::generate()?)
}

/// Replaces the secret in `path` with a new one: every plugin installed before is refused.
pub fn rotate_secret(path: &Path) -> std::io::Result<String> {
    let fresh = secret_file::generate()?;
    secret_file::write(path, &fresh)?;
    Ok(fresh)
}

pub use crate::protocol::messages::NONCE_BYTES;

type HmacSha256 = Hmac<Sha256>;

const HOST_LABEL: &[u8] = b"studio-bridge host";
const PLUGIN_LABEL: &[u8] = b"studio-bridge plugin";
/// The same handshake between studio-bridge processes on `/v1/client`, keyed with the
/// peer token (`peer_pairing.rs`): labels of their own, so that no proof made on one
/// endpoint is good on the other.
const PEER_HOST_LABEL: &[u8] = b"studio-bridge peer host";
const PEER_LABEL: &[u8] = b"studio-bridge peer";

/// The host's proof to a peer, keyed with the peer token.
pub fn peer_host_proof(token: &str, nonce: &[u8], host_nonce: &[u8]) -> Vec<u8> {
    mac(token, PEER_HOST_LABEL, nonce, host_nonce)
        .finalize()
        .into_bytes()
        .to_vec()
}

/// Whether `proof` is the host's proof to a peer (constant time).
pub fn peer_host_proof_matches(token: &str, nonce: &[u8], host_nonce: &[u8], proof: &[u8]) -> bool {
    mac(token, PEER_HOST_LABEL, nonce, host_nonce)
        .verify_slice(proof)
        .is_ok()
}

/// A peer's proof to the host, keyed with the peer token.
pub fn peer_proof(token: &str, host_nonce: &[u8], nonce: &[u8]) -> Vec<u8> {
    mac(token, PEER_LABEL, host_nonce, nonce)
        .finalize()
        .into_bytes()
        .to_vec()
}

/// Whether `proof` is a peer's proof to the host (constant time).
pub fn peer_proof_matches(token: &str, host_nonce: &[u8], nonce: &[u8], proof: &[u8]) -> bool {
    mac(token, PEER_LABEL, host_nonce, nonce).verify_slice(proof).is_ok()
}

fn mac(secret: &str, label: &[u8], first: &[u8], second: &[u8]) -> HmacSha256 {
    // HMAC takes a key of any length, so `new_from_slice` cannot fail here.
    let mut mac = <HmacSha256 as KeyInit>::new_from_slice(secret.as_bytes()).expect("HMAC takes any key length");
    mac.update(label);
    mac.update(first);
    mac.update(second);
    mac
}

/// The host's proof for the plugin's `nonce` and its own `host_nonce`.
pub fn host_proof(secret: &str, nonce: &[u8], host_nonce: &[u8]) -> Vec<u8> {
    mac(secret, HOST_LABEL, nonce, host_nonce)
        .finalize()
        .into_bytes()
        .to_vec()
}

/// The plugin's proof, as the host expects it.
pub fn plugin_proof(secret: &str, host_nonce: &[u8], nonce: &[u8]) -> Vec<u8> {
    mac(secret, PLUGIN_LABEL, host_nonce, nonce)
        .finalize()
        .into_bytes()
        .to_vec()
}

/// Whether `proof` is the plugin's proof for these nonces (compared in constant time).
pub fn plugin_proof_matches(secret: &str, host_nonce: &[u8], nonce: &[u8], proof: &[u8]) -> bool {
    mac(secret, PLUGIN_LABEL, host_nonce, nonce).verify_slice(proof).is_ok()
}

/// Whether `proof` is the host's proof for these nonces (compared in constant time): what
/// the plugin checks, and `doctor` too.
pub fn host_proof_matches(secret: &str, nonce: &[u8], host_nonce: &[u8], proof: &[u8]) -> bool {
    mac(secret, HOST_LABEL, nonce, host_nonce).verify_slice(proof).is_ok()
}

/// A fresh nonce from the OS.
pub fn nonce() -> std::io::Result<[u8; NONCE_BYTES]> {
    let mut bytes = [0u8; NONCE_BYTES];
    getrandom::fill(&mut bytes).map_err(|e| std::io::Error::other(format!("no OS randomness: {e}")))?;
    Ok(bytes)
}

/// How a host treats plugins: it always proves itself to a plugin that asks (a `hello`
/// with a `nonce`) when it can read the secret; `allow_unpaired` also admits plugins
/// that cannot prove themselves (the Lune Studio, a hand-installed plugin).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pairing {
    /// The secret's file (read at each `hello`); `None` where the platform has no config
    /// directory, so nothing can be paired.
    secret: Option<PathBuf>,
    allow_unpaired: bool,
}

/// What a host does with a plugin's `hello`.
#[derive(Debug, PartialEq, Eq)]
pub enum Plan {
    /// Prove this host with `secret`, then check the plugin's `auth`.
    Challenge { secret: String },
    /// Admit the plugin without a handshake (`--allow-unpaired`, a plugin with no nonce).
    Admit,
    /// Refuse it, with the message the plugin shows its user (naming no secret).
    Refuse(String),
}

impl Pairing {
    /// The default: the plugin must prove itself with the secret in the user's config
    /// directory.
    pub fn required() -> Pairing {
        Pairing {
            secret: secret_path(),
            allow_unpaired: false,
        }
    }

    /// `--allow-unpaired`: a plugin that cannot prove itself is admitted too. A plugin
    /// that asks for the host's proof still gets it, when the secret can be read.
    pub fn allow_unpaired() -> Pairing {
        Pairing {
            secret: secret_path(),
            allow_unpaired: true,
        }
    }

    /// [`Pairing::required`] with the secret in `path`.
    pub fn required_at(path: PathBuf) -> Pairing {
        Pairing {
            secret: Some(path),
            allow_unpaired: false,
        }
    }

    /// This pairing for a process that takes over from a host that required pairing:
    /// `--allow-unpaired` was given to this process, not to that host's plugins, so the
    /// bridge they knew stays paired.
    pub fn as_paired_as(&self, previous_host_allowed_unpaired: bool) -> Pairing {
        Pairing {
            allow_unpaired: self.allow_unpaired && previous_host_allowed_unpaired,
            ..self.clone()
        }
    }

    /// Whether plugins that cannot prove themselves are admitted.
    pub fn allows_unpaired(&self) -> bool {
        self.allow_unpaired
    }

    /// What to do with a `hello` that did (`asked`) or did not carry a nonce.
    pub fn plan(&self, asked: bool) -> Plan {
        let secret = self.secret.as_deref().and_then(read_secret);
        match (asked, secret) {
            (true, Some(secret)) => Plan::Challenge { secret },
            _ if self.allow_unpaired => Plan::Admit,
            (_, None) => Plan::Refuse(format!(
                "studio-bridge refused this plugin: this machine has no pairing secret yet ({} is missing). Reinstall the plugin with studio-bridge install-plugin, then restart Studio.",
                self.secret
                    .as_deref()
                    .map_or_else(|| "no config directory".to_owned(), |p| p.display().to_string())
            )),
            (false, Some(_)) => Plan::Refuse(
                "studio-bridge refused this plugin: it is not paired with this studio-bridge (or predates mutual pairing). Reinstall the plugin with studio-bridge install-plugin, then restart Studio.".into(),
            ),
        }
    }

    /// The message for a plugin whose `auth` was wrong or missing; `None` when it is
    /// admitted anyway (`--allow-unpaired`).
    pub fn refuse_failed_auth(&self) -> Option<String> {
        (!self.allow_unpaired).then(|| {
            "studio-bridge refused this plugin: it carries a different pairing secret (an older install: the secret was rotated). Reinstall the plugin with studio-bridge install-plugin, then restart Studio.".into()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        std::env::temp_dir()
            .join(format!("sb-pairing-{name}-{}", std::process::id()))
            .join(SECRET_FILE)
    }

    #[test]
    fn ensure_creates_once_then_keeps_and_rotate_replaces() {
        let path = temp("ensure");
        let first = ensure_secret(&path).unwrap();
        assert_eq!(first.len(), 64);
        assert_eq!(ensure_secret(&path).unwrap(), first);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600);
        }
        let rotated = rotate_secret(&path).unwrap();
        assert_ne!(rotated, first);
        assert_eq!(read_secret(&path).as_deref(), Some(rotated.as_str()));
        let _ = std::fs::remove_dir_all(path.parent().unwrap());
    }

    /// The vector pinned here is also pinned in plugin/tests/Pairing.spec.luau: both
    /// sides compute the same proofs (made with Python's hmac module).
    #[test]
    fn proofs_match_the_known_answers_and_bind_their_label_and_order() {
        let b64 = |s: &str| base64_simd::STANDARD.decode_to_vec(s).unwrap();
        let secret = "0123456789abcdef".repeat(4);
        let nonce: Vec<u8> = (0..16).collect();
        let host_nonce: Vec<u8> = (16..32).collect();
        let host = host_proof(&secret, &nonce, &host_nonce);
        assert_eq!(host, b64("Nx2tqDo2wtCdWzqlW2kJh62w1Qh9YBgBGG344Y7Qpx0="));
        let plugin = plugin_proof(&secret, &host_nonce, &nonce);
        assert_eq!(plugin, b64("3jJY6E6qN7Hi4RgEnBtKZFSkMvZqn4FZ0rLdCH/Ly5U="));
        assert!(plugin_proof_matches(&secret, &host_nonce, &nonce, &plugin));
        assert!(host_proof_matches(&secret, &nonce, &host_nonce, &host));
        // A host proof is no plugin proof (a squatter cannot reflect one), nonces in the
        // other order prove nothing, and another secret proves nothing.
        assert!(!plugin_proof_matches(&secret, &host_nonce, &nonce, &host));
        assert!(!host_proof_matches(&secret, &host_nonce, &nonce, &host));
        assert!(!plugin_proof_matches(&"f".repeat(64), &host_nonce, &nonce, &plugin));
        assert!(!plugin_proof_matches(&secret, &host_nonce, &nonce, &plugin[..31]));
    }

    #[test]
    fn the_plan_challenges_when_asked_and_refuses_or_admits_the_rest() {
        let path = temp("plan");
        let required = Pairing::required_at(path.clone());
        let missing = required.plan(true);
        assert!(
            matches!(&missing, Plan::Refuse(m) if m.contains("install-plugin")),
            "{missing:?}"
        );
        let secret = ensure_secret(&path).unwrap();
        assert_eq!(required.plan(true), Plan::Challenge { secret: secret.clone() });
        let old = required.plan(false);
        assert!(
            matches!(&old, Plan::Refuse(m) if m.contains("Reinstall the plugin with studio-bridge install-plugin") && !m.contains(&secret)),
            "{old:?}"
        );
        assert!(required.refuse_failed_auth().is_some_and(|m| !m.contains(&secret)));
        let open = Pairing {
            secret: Some(path.clone()),
            allow_unpaired: true,
        };
        assert_eq!(open.plan(false), Plan::Admit);
        assert_eq!(open.plan(true), Plan::Challenge { secret });
        assert_eq!(open.refuse_failed_auth(), None);
        let _ = std::fs::remove_dir_all(path.parent().unwrap());
    }
}
