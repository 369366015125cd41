//! The bridge: everything between a command and a Studio plugin.
//!
//! Adapters (MCP, CLI) see only [`Bridge`]: list sessions, call an action, cancel it (by
//! cancelling the call's token), subscribe to events. Whether this process hosts the
//! plugins itself or reaches a host through another studio-bridge process (and which of
//! the two it is after a failover) is decided here and nowhere else.
//!
//! Roles (ARCHITECTURE.md, Processes): every process that needs the bridge tries to bind
//! the port. The one that succeeds is the host; the others confirm over `/v1/health` that
//! a compatible studio-bridge owns it and connect to `/v1/client` as peers. When the host
//! goes away, each peer fails its in-flight calls with `host_lost` (never re-sent),
//! waits 0–500 ms of jitter (none after a clean shutdown) and races to bind again.

pub mod budget;
pub mod calls;
pub mod connection;
pub mod events;
pub mod host;
pub mod link;
pub mod liveness;
pub mod origin;
pub mod pairing;
pub mod peer;
pub mod peer_pairing;
pub mod peer_server;
pub mod probe;
pub mod registry;
pub mod resolve;
pub mod secret_file;
pub mod token;
pub mod turns;
pub mod unidentified;
pub mod writer;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmpv::Value as Msgpack;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

pub use events::GAP_EVENT;
pub use registry::{RefusedPlugin, SessionInfo, SessionList};
pub use resolve::Target;

use crate::protocol::raw::RawValue;
use crate::protocol::{Context, PROTOCOL_VERSION, Ran};
use crate::protocol::{ErrorCode, ToolError};
use events::{EventSink, EventStream};
use host::{BindError, Host, HostConfig};
use peer::{ConnectError, PeerLink};
use probe::Owner;
use registry::Registry;

/// One call of a plugin action.
#[derive(Debug, Clone)]
pub struct Call {
    pub target: Target,
    pub action: String,
    pub args: Msgpack,
    /// The context used when the target instance is in Play and the caller named none.
    pub default_context: Context,
    /// The deadline for the whole call, waiting for a session or a host included.
    pub timeout: Duration,
    /// The `timeoutMs` the plugin is given, if shorter than what is left of the deadline.
    pub plugin_timeout: Option<Duration>,
    /// A write's id, chosen by its caller before sending, so that the caller can name it
    /// whatever becomes of the call: the plugin keeps the outcome under it for `state`.
    pub operation_id: Option<String>,
    /// The host's own request (a command's internal probe, `doctor --studio`, a poll after
    /// the first): the Studio Bridge panel does not list it. Pause and approval still apply.
    pub quiet: bool,
}

/// A plugin's answer to a call, and the session that gave it.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// The plugin's result as it came (see [`crate::protocol::raw`]).
    pub value: RawValue,
    /// Always known on the host; from a peer, what the host said.
    pub ran: Option<Ran>,
}

/// A progress report from a plugin, forwarded to the caller.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    pub progress: f64,
    pub total: Option<f64>,
    pub message: Option<String>,
}

/// Progress reports one call's consumer may have queued (see [`CallHooks::progress`]).
pub const PROGRESS_QUEUE: usize = 64;

/// What one read from a WebSocket (a plugin's, a peer's, either end) takes at most.
/// tungstenite zeroes this much of its buffer before every read, including the read
/// that finds the socket empty after each frame, and most frames are a few hundred
/// bytes: at its default (128 KiB) the zeroing cost more than the read, and at 32 KiB
/// it was still an eighth of the host's instructions in B1 (callgrind). A large
/// result arrives in reads of this size: about a thousand more for 10 MB, against
/// the tens of milliseconds of its conversion.
pub(crate) const SOCKET_READ_BUFFER: usize = 8 * 1024;

/// What a caller can do to a call in flight.
#[derive(Debug, Clone, Default)]
pub struct CallHooks {
    /// Where the call's progress reports go: a queue of [`PROGRESS_QUEUE`]. Progress is
    /// advisory, so a consumer that falls behind loses reports, not memory.
    pub progress: Option<mpsc::Sender<Progress>>,
    /// Cancelling this token sends `cancel` to the plugin and fails the call with `cancelled`.
    pub cancel: CancellationToken,
}

/// An `event` a plugin sent (a state change or a log line).
#[derive(Debug, Clone, PartialEq)]
pub struct SessionEvent {
    pub session_id: String,
    pub event: String,
    pub data: serde_json::Value,
}

/// What this process is right now.
#[derive(Clone)]
enum Role {
    Host(Arc<Registry>),
    Peer(Arc<PeerLink>),
    /// Between hosts (failover) or still connecting.
    Electing,
}

/// The one interface adapters use to reach Studio.
/// `error` marked as one of a call that never reached Studio (`details.delivered:
/// false`): nothing ran, so it is safe to retry, and a write's error does not say it may
/// have completed (`commands::call::may_have_written`). Carried to peers with the error.
pub fn undelivered(error: ToolError) -> ToolError {
    error.with_details(serde_json::json!({ "delivered": false }))
}

#[derive(Clone)]
pub struct Bridge {
    role: watch::Receiver<Role>,
}

impl Bridge {
    /// Waits (within `deadline`) for a host to exist, then returns the current role.
    async fn settled(&self, deadline: tokio::time::Instant, cancel: &CancellationToken) -> Result<Role, ToolError> {
        let mut role = self.role.clone();
        loop {
            let current = role.borrow_and_update().clone();
            if !matches!(current, Role::Electing) {
                return Ok(current);
            }
            tokio::select! {
                changed = role.changed() => {
                    if changed.is_err() {
                        return Err(undelivered(peer::host_lost()));
                    }
                }
                () = tokio::time::sleep_until(deadline) => {
                    return Err(undelivered(ToolError::new(
                        ErrorCode::Timeout,
                        "No studio-bridge host could be reached before the deadline (a failover is in progress or the port is held by another program). Retry in a moment.",
                    )));
                }
                () = cancel.cancelled() => {
                    return Err(undelivered(ToolError::new(ErrorCode::Cancelled, "The call was cancelled by the caller.")));
                }
            }
        }
    }

    /// The session list. Within a new host's startup grace an empty list waits (until
    /// the deadline) for a first plugin: an agent or CLI that asks at once must not be
    /// told that no Studio is open while the plugins are still reconnecting.
    pub async fn sessions(&self, timeout: Duration) -> Result<Vec<SessionInfo>, ToolError> {
        self.session_list(timeout).await.map(|list| list.sessions)
    }

    /// The sessions and the last plugin the host refused.
    pub async fn session_list(&self, timeout: Duration) -> Result<SessionList, ToolError> {
        let deadline = tokio::time::Instant::now() + timeout;
        match self.settled(deadline, &CancellationToken::new()).await? {
            Role::Host(registry) => Ok(registry.session_list_after_startup(deadline).await),
            Role::Peer(link) => {
                link.sessions(deadline.saturating_duration_since(tokio::time::Instant::now()))
                    .await
            }
            Role::Electing => Err(peer::host_lost()),
        }
    }

    pub async fn call(&self, mut call: Call, hooks: CallHooks) -> Result<Reply, ToolError> {
        let deadline = tokio::time::Instant::now() + call.timeout;
        let role = self.settled(deadline, &hooks.cancel).await?;
        call.timeout = deadline.saturating_duration_since(tokio::time::Instant::now());
        match role {
            Role::Host(registry) => registry.call(call, hooks).await,
            Role::Peer(link) => link.call(call, hooks).await,
            Role::Electing => Err(peer::host_lost()),
        }
    }

    /// Streams `events` (e.g. `["log"]`) from the sessions `target` names, across
    /// failovers: when the host this peer subscribed through goes away, the subscription
    /// is made again on the next host (or on this process, should it take over), and the
    /// stream says so once with a [`GAP_EVENT`], since events sent meanwhile may be
    /// missing. It ends when the receiver is dropped or this process leaves the bridge.
    pub async fn subscribe(&self, target: &Target, events: &[String]) -> Result<EventStream, ToolError> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        let role = self.settled(deadline, &CancellationToken::new()).await?;
        let (sender, receiver) = EventSink::new();
        match role {
            Role::Host(registry) => {
                tokio::spawn(forward_to(registry, target.clone(), events.to_vec(), sender));
            }
            Role::Peer(link) => {
                let first = link.subscribe(target, events)?;
                tokio::spawn(follow_across_failovers(
                    self.role.clone(),
                    link,
                    first,
                    target.clone(),
                    events.to_vec(),
                    sender,
                ));
            }
            Role::Electing => return Err(peer::host_lost()),
        }
        Ok(receiver)
    }
}

/// Feeds `sender` from this host's own registry until the receiver is dropped or the
/// host stops.
async fn forward_to(registry: Arc<Registry>, target: Target, events: Vec<String>, mut sender: EventSink) {
    peer_server::forward_events(registry, target, events, CancellationToken::new(), move |event| {
        sender.offer(event)
    })
    .await;
}

/// Relays a peer's subscription, re-subscribing on whatever this process joins or
/// becomes after its host goes away.
async fn follow_across_failovers(
    mut role: watch::Receiver<Role>,
    mut link: Arc<PeerLink>,
    mut feed: EventStream,
    target: Target,
    events: Vec<String>,
    mut sender: EventSink,
) {
    loop {
        // The link's feed ends when the link is lost.
        loop {
            let event = tokio::select! {
                event = feed.recv() => event,
                () = sender.closed() => return,
            };
            match event {
                Some(event) => {
                    if !sender.offer(event) {
                        return;
                    }
                }
                None => break,
            }
        }
        // Wait for a host other than the lost one, and subscribe there.
        loop {
            let next = tokio::select! {
                changed = role.changed() => changed,
                () = sender.closed() => return,
            };
            if next.is_err() {
                // This process left the bridge.
                return;
            }
            let current = role.borrow_and_update().clone();
            match current {
                Role::Electing => {}
                Role::Peer(next) if Arc::ptr_eq(&next, &link) => {}
                Role::Peer(next) => match next.subscribe(&target, &events) {
                    Ok(next_feed) => {
                        tracing::info!("re-subscribed to events on the new bridge host");
                        link = next;
                        feed = next_feed;
                        if !sender.offer(failover_gap()) {
                            return;
                        }
                        break;
                    }
                    // Lost again already: wait for the one after it.
                    Err(error) => tracing::debug!(%error, "could not re-subscribe yet"),
                },
                Role::Host(registry) => {
                    tracing::info!("subscribed to events on this process, now the bridge host");
                    if sender.offer(failover_gap()) {
                        forward_to(registry, target, events, sender).await;
                    }
                    return;
                }
            }
        }
    }
}

/// The gap a subscription's stream carries once per failover, when it has been made
/// again on a new host.
fn failover_gap() -> SessionEvent {
    events::gap(
        "",
        None,
        "The studio-bridge host changed (failover); this subscription continues on the new host. Events sent while no host was reachable may be missing.".to_owned(),
    )
}

/// How this process takes part in the bridge.
#[derive(Debug, Clone)]
pub enum Mode {
    /// Host if the port is free, else a peer of the studio-bridge that holds it; take
    /// over when that host goes away.
    Auto,
    /// Host or fail (`serve`).
    HostOnly,
    /// Always a peer of the host at `addr` (`mcp --remote`); never hosts.
    Remote { addr: String, token: String },
}

#[derive(Debug, Clone)]
pub struct BridgeOptions {
    pub port: u16,
    pub max_message_bytes: usize,
    pub mode: Mode,
    /// Whether plugins must be paired, should this process host.
    pub pairing: pairing::Pairing,
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(
        "port {port} on 127.0.0.1 is held by another program, not a studio-bridge host ({found}). Stop it, or choose another port with --port or STUDIO_BRIDGE_PORT (the Studio plugin must use the same port)."
    )]
    Foreign { port: u16, found: String },
    #[error(
        "port {port} is held by studio-bridge {version}, which speaks protocol {protocol}; this studio-bridge speaks protocol {ours}. Use the same studio-bridge version everywhere, or choose another port with --port."
    )]
    Incompatible {
        port: u16,
        version: String,
        protocol: u64,
        ours: u64,
    },
    #[error(
        "port {port} is already in use by another studio-bridge host; `serve` needs the port to itself (stop the other host, or pass --port)"
    )]
    HostTaken { port: u16 },
    #[error("{0}")]
    Bind(#[from] BindError),
    #[error("{0}")]
    Connect(#[from] ConnectError),
}

/// A started bridge: the interface, and the handle that stops it cleanly.
pub struct Running {
    pub bridge: Bridge,
    control: Arc<Control>,
}

struct Control {
    role: watch::Sender<Role>,
    host: Mutex<Option<Host>>,
    stop: CancellationToken,
}

impl Running {
    /// Whether this process is the host right now.
    pub fn is_host(&self) -> bool {
        matches!(*self.control.role.borrow(), Role::Host(_))
    }

    /// The address the host listens on, when this process is the host.
    pub fn host_addr(&self) -> Option<std::net::SocketAddr> {
        self.control
            .host
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|h| h.addr)
    }

    /// Leaves the bridge: a host tells its peers (close 4002) so one takes over at once.
    pub async fn shutdown(self) {
        self.control.stop.cancel();
        let host = self.control.host.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(host) = host {
            host.shutdown().await;
        }
    }
}

enum Became {
    Host(Host),
    /// A peer of a host, and whether that host admits unpaired plugins (its `/v1/health`
    /// says `pairing: "off"`): a takeover keeps the bridge as paired as it was.
    Peer(Arc<PeerLink>, bool),
}

/// Joins the bridge on `options.port`: as host, or as a peer of the host there.
pub async fn start(options: BridgeOptions) -> Result<Running, StartError> {
    let first = become_something(&options).await?;
    let (role_tx, role_rx) = watch::channel(Role::Electing);
    let control = Arc::new(Control {
        role: role_tx,
        host: Mutex::new(None),
        stop: CancellationToken::new(),
    });
    let link = adopt(&control, first);
    if let Some((link, host_allowed_unpaired)) = link {
        tokio::spawn(supervise(Arc::clone(&control), options, link, host_allowed_unpaired));
    }
    Ok(Running {
        bridge: Bridge { role: role_rx },
        control,
    })
}

/// Records what this process became; returns the peer link to watch, if a peer, and
/// whether its host admits unpaired plugins.
fn adopt(control: &Control, became: Became) -> Option<(Arc<PeerLink>, bool)> {
    match became {
        Became::Host(host) => {
            let registry = Arc::clone(&host.registry);
            *control.host.lock().unwrap_or_else(|p| p.into_inner()) = Some(host);
            control.role.send_replace(Role::Host(registry));
            None
        }
        Became::Peer(link, host_allowed_unpaired) => {
            control.role.send_replace(Role::Peer(Arc::clone(&link)));
            Some((link, host_allowed_unpaired))
        }
    }
}

/// Watches the link to the host; when it goes, fails over.
async fn supervise(
    control: Arc<Control>,
    mut options: BridgeOptions,
    mut link: Arc<PeerLink>,
    mut host_allowed_unpaired: bool,
) {
    loop {
        let lost = link.lost();
        tokio::select! {
            () = lost.cancelled() => {}
            () = control.stop.cancelled() => return,
        }
        control.role.send_replace(Role::Electing);
        tracing::warn!(
            clean = link.closed_cleanly(),
            "lost the bridge host; taking over or rejoining"
        );
        if !link.closed_cleanly() {
            tokio::time::sleep(jitter()).await;
        }
        // Taking over, this process admits unpaired plugins only if it was told to and the
        // host it replaces did too.
        options.pairing = options.pairing.as_paired_as(host_allowed_unpaired);
        let next = loop {
            if control.stop.is_cancelled() {
                return;
            }
            match become_something(&options).await {
                Ok(became) => break became,
                Err(error) => {
                    tracing::warn!(%error, "no bridge host yet; retrying");
                    tokio::select! {
                        () = tokio::time::sleep(Duration::from_millis(250)) => {}
                        () = control.stop.cancelled() => return,
                    }
                }
            }
        };
        match adopt(&control, next) {
            Some((new_link, allowed)) => {
                tracing::info!("joined the new bridge host as a peer");
                link = new_link;
                host_allowed_unpaired = allowed;
            }
            None => {
                tracing::info!(port = options.port, "became the bridge host");
                return;
            }
        }
    }
}

/// 0–500 ms, so that survivors of a crashed host do not all bind at the same instant.
fn jitter() -> Duration {
    let mut bytes = [0u8; 2];
    let random = getrandom::fill(&mut bytes)
        .map(|()| u16::from_le_bytes(bytes))
        .unwrap_or(250);
    Duration::from_millis(u64::from(random % 501))
}

async fn become_something(options: &BridgeOptions) -> Result<Became, StartError> {
    let config = HostConfig {
        port: options.port,
        max_message_bytes: options.max_message_bytes,
        pairing: options.pairing.clone(),
    };
    match &options.mode {
        Mode::Remote { addr, token } => {
            let link = PeerLink::connect(
                addr,
                port_of(addr).unwrap_or(options.port),
                token,
                options.max_message_bytes,
            )
            .await?;
            // A remote host's pairing is its own; this process never hosts.
            Ok(Became::Peer(link, false))
        }
        Mode::HostOnly => match Host::start(config).await {
            Ok(host) => Ok(Became::Host(host)),
            Err(BindError::InUse { port }) => match probe::probe(port).await {
                Owner::Bridge { .. } => Err(StartError::HostTaken { port }),
                owner => Err(foreign(port, owner)),
            },
            Err(error) => Err(error.into()),
        },
        Mode::Auto => {
            // The owner may vanish between a failed bind and the probe: then bind again.
            let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
            loop {
                match Host::start(config.clone()).await {
                    Ok(host) => return Ok(Became::Host(host)),
                    Err(BindError::InUse { port }) => match probe::probe(port).await {
                        Owner::Bridge { pairing_off, .. } => {
                            match join(port, options.max_message_bytes, deadline).await {
                                Ok(link) => return Ok(Became::Peer(link, pairing_off)),
                                Err(error) if tokio::time::Instant::now() >= deadline => return Err(error.into()),
                                Err(error) => tracing::debug!(%error, "could not join the host yet"),
                            }
                        }
                        Owner::Nobody if tokio::time::Instant::now() < deadline => {}
                        owner => return Err(foreign(port, owner)),
                    },
                    Err(error) => return Err(error.into()),
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// Connects to the local host as a peer, re-reading the token file after a refused or
/// unproven handshake (a new host may just have replaced it), until `deadline`. With no
/// token file there is nothing to prove: a holder of the port that wrote none is no host
/// of this user's (an empty key would be a proof anyone can make).
async fn join(
    port: u16,
    max_message_bytes: usize,
    deadline: tokio::time::Instant,
) -> Result<Arc<PeerLink>, ConnectError> {
    let path = token::token_path(port);
    loop {
        let joined = match secret_file::read(&path) {
            Some(token) => PeerLink::connect(&format!("127.0.0.1:{port}"), port, &token, max_message_bytes).await,
            None => Err(ConnectError::Unproven {
                port,
                why: format!(
                    "there is no peer token at {}, which a studio-bridge host writes first",
                    path.display()
                ),
            }),
        };
        match joined {
            Err(ConnectError::Unauthorized | ConnectError::Unproven { .. })
                if tokio::time::Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            other => return other,
        }
    }
}

fn foreign(port: u16, owner: Owner) -> StartError {
    match owner {
        Owner::IncompatibleBridge { version, protocol, .. } => StartError::Incompatible {
            port,
            version,
            protocol,
            ours: PROTOCOL_VERSION,
        },
        Owner::Other(found) => StartError::Foreign { port, found },
        Owner::Nobody => StartError::Foreign {
            port,
            found: "it refused connections".into(),
        },
        Owner::Bridge { version, .. } => StartError::Foreign {
            port,
            found: format!("studio-bridge {version}"),
        },
    }
}

fn port_of(addr: &str) -> Option<u16> {
    addr.rsplit_once(':').and_then(|(_, port)| port.parse().ok())
}
