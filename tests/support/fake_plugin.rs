//! A fake Studio plugin: a WebSocket client that speaks PROTOCOL.md (hello, welcome,
//! request/response, progress, event, ping/pong, cancel) and answers each request as
//! the test says: at once, slowly, never, with an error, with a huge result, with
//! garbage, or by dropping the connection mid-call and coming back. With
//! [`Options::answer_inline`] it answers in its connection loop itself, for benchmarks.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use futures_util::{SinkExt, StreamExt};
use rmpv::Value;
use studio_bridge::bridge::pairing;
use tokio::sync::{Notify, mpsc};
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    Binary,
    Base64Text,
}

/// Who the fake plugin says it is in its `hello`.
#[derive(Debug, Clone)]
pub struct Identity {
    pub session_id: String,
    pub instance_id: String,
    pub context: &'static str,
    pub state: &'static str,
    pub place_name: String,
    pub framing: Framing,
    pub protocol: u64,
    /// The pairing secret it holds, to check the host's proof and prove itself
    /// (PROTOCOL.md, "Pairing is mutual"); none: a stranger, or a carried session.
    pub pairing: Option<String>,
    /// Answer a `challenge` with this proof instead of the right one (a plugin that
    /// cannot prove itself but asks the host to).
    pub forged_auth: Option<Vec<u8>>,
    /// A Play client's player name, sent as the hello's `player`.
    pub player: Option<String>,
    /// How long it takes to answer the host's `challenge` (a busy Studio).
    pub auth_delay: Option<Duration>,
}

impl Identity {
    pub fn edit(instance_id: &str) -> Identity {
        Identity {
            session_id: format!("{instance_id}-edit"),
            instance_id: instance_id.to_owned(),
            context: "edit",
            state: "Edit",
            place_name: format!("Place {instance_id}"),
            framing: Framing::Base64Text,
            protocol: 1,
            pairing: None,
            forged_auth: None,
            player: None,
            auth_delay: None,
        }
    }

    /// One DataModel of a Play instance: `context` is `edit`, `server` or `client`.
    pub fn play(instance_id: &str, context: &'static str) -> Identity {
        let state = match context {
            "server" => "Server",
            "client" => "Client",
            _ => "Edit",
        };
        Identity {
            session_id: format!("{instance_id}-{context}"),
            context,
            state,
            framing: if context == "edit" {
                Framing::Base64Text
            } else {
                Framing::Binary
            },
            ..Identity::edit(instance_id)
        }
    }
}

/// How to answer one request.
#[derive(Debug, Clone)]
pub enum Reply {
    Ok(Value),
    Err(&'static str, String),
    /// Wait, then answer.
    After(Duration, Box<Reply>),
    /// Send these progress reports, then answer.
    Progress(Vec<f64>, Box<Reply>),
    /// Never answer.
    Never,
    /// Drop the connection without answering; come back after the delay (or never).
    Drop(Option<Duration>),
    /// Send a malformed frame first, then answer.
    GarbageFirst(Box<Reply>),
    /// Answer `ok` with this result, already encoded as msgpack (a large result is
    /// encoded once, not once per request).
    Raw(Arc<Vec<u8>>),
}

/// How a fake plugin runs, beyond what it answers. The default is what the tests use.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Answer `Ok` and `Raw` replies in the connection loop itself, as soon as the
    /// request is read, rather than from a task per request: a plugin that answers at
    /// once, for benchmarks.
    pub answer_inline: bool,
    /// Keep no copy of each request in the log (`requests` stays empty; `answered` and
    /// the timestamps are still kept).
    pub quiet: bool,
}

pub type Handler = Arc<dyn Fn(&str, &Value) -> Reply + Send + Sync>;

/// A request the fake plugin received.
#[derive(Debug, Clone)]
pub struct Seen {
    pub id: u64,
    /// The multiplexed session the request was for (None: the socket's own).
    pub session: Option<String>,
    pub action: String,
    pub args: Value,
    pub timeout_ms: u64,
    /// The host sent it to this edit session only because no playtest was known
    /// (PROTOCOL.md, Sessions: `defaulted`).
    pub defaulted: bool,
}

#[derive(Debug, Default, Clone)]
pub struct Log {
    pub requests: Vec<Seen>,
    pub cancels: Vec<u64>,
    pub welcomes: usize,
    /// `welcome`s for the sessions this socket carries, by sessionId, in order.
    pub carried_welcomes: Vec<String>,
    pub rejects: Vec<(String, String)>,
    /// Each `challenge` received, and whether its host proof was right.
    pub challenges: Vec<bool>,
    pub pings: usize,
    pub closes: Vec<Option<u16>>,
    /// Responses sent.
    pub answered: u64,
    /// When the last request was read.
    pub last_request_at: Option<Instant>,
    /// When the last response was sent: with `answer_inline`, once the socket took the
    /// whole frame; otherwise once it was queued for the connection loop.
    pub last_answer_sent_at: Option<Instant>,
}

struct Shared {
    identity: Identity,
    handler: Handler,
    options: Options,
    port: u16,
    log: Mutex<Log>,
    changed: Notify,
    stop: CancellationToken,
    /// The live connection's control channel, for events sent by the test.
    current: Mutex<Option<mpsc::UnboundedSender<Control>>>,
    /// Playtest DataModels multiplexed over this plugin's socket (PROTOCOL.md, Sessions):
    /// said hello for after every `welcome`.
    carried: Mutex<Vec<Identity>>,
}

pub struct FakePlugin {
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl FakePlugin {
    /// Connects (retrying while the host starts) and returns once `welcome` arrived.
    pub async fn connect(port: u16, identity: Identity, handler: Handler) -> FakePlugin {
        FakePlugin::connect_with(port, identity, handler, Options::default()).await
    }

    /// [`FakePlugin::connect`] with [`Options`].
    pub async fn connect_with(port: u16, identity: Identity, handler: Handler, options: Options) -> FakePlugin {
        let plugin = FakePlugin::start_with(port, identity, handler, options);
        plugin
            .wait("welcome", Duration::from_secs(15), |log| log.welcomes >= 1)
            .await;
        plugin
    }

    /// Starts connecting in the background without waiting for `welcome`.
    pub fn start(port: u16, identity: Identity, handler: Handler) -> FakePlugin {
        FakePlugin::start_with(port, identity, handler, Options::default())
    }

    /// [`FakePlugin::start`] with [`Options`].
    pub fn start_with(port: u16, identity: Identity, handler: Handler, options: Options) -> FakePlugin {
        let shared = Arc::new(Shared {
            identity,
            handler,
            options,
            port,
            log: Mutex::new(Log::default()),
            changed: Notify::new(),
            stop: CancellationToken::new(),
            current: Mutex::new(None),
            carried: Mutex::new(Vec::new()),
        });
        let task = tokio::spawn(run(Arc::clone(&shared)));
        FakePlugin { shared, task }
    }

    pub fn log(&self) -> Log {
        self.shared.log.lock().unwrap().clone()
    }

    pub fn session_id(&self) -> &str {
        &self.shared.identity.session_id
    }

    /// Waits until `condition` holds on the log.
    pub async fn wait(&self, what: &str, timeout: Duration, condition: impl Fn(&Log) -> bool) -> Log {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.shared.changed.notified();
            {
                let log = self.shared.log.lock().unwrap();
                if condition(&log) {
                    return log.clone();
                }
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                panic!(
                    "fake plugin {}: timed out waiting for {what}; log: {:?}",
                    self.session_id(),
                    self.log()
                );
            }
        }
    }

    /// Sends an `event` (e.g. `log` with `{seq, level, body, timestamp}`) on the live
    /// connection, as the plugin does when Studio prints.
    pub fn send_event(&self, event: &str, data: Value) {
        let message = map(vec![("t", "event".into()), ("event", event.into()), ("data", data)]);
        let sender = self.shared.current.lock().unwrap().clone().expect("connected");
        let _ = sender.send(Control::Send(encode(&message, self.shared.identity.framing)));
    }

    /// Sends `count` `log` events (seq 1…count, each with a body of `body_bytes`) at
    /// `per_second`, as a script printing in a tight loop makes the plugin do; returns
    /// once all are written. Requests are not read meanwhile.
    pub async fn flood_logs(&self, count: u64, per_second: u64, body_bytes: usize) {
        self.start_flood_logs(count, per_second, body_bytes)
            .await
            .expect("the flood ran");
    }

    /// [`FakePlugin::flood_logs`], returning once the flood has started: what it returns
    /// is ready once all are written.
    pub fn start_flood_logs(
        &self,
        count: u64,
        per_second: u64,
        body_bytes: usize,
    ) -> tokio::sync::oneshot::Receiver<()> {
        let body = "x".repeat(body_bytes);
        let framing = self.shared.identity.framing;
        let frames: Vec<Message> = (1..=count)
            .map(|seq| {
                let data = map(vec![
                    ("seq", seq.into()),
                    ("level", "Print".into()),
                    ("body", body.as_str().into()),
                    ("timestamp", 0.into()),
                ]);
                encode(
                    &map(vec![("t", "event".into()), ("event", "log".into()), ("data", data)]),
                    framing,
                )
            })
            .collect();
        let (done, finished) = tokio::sync::oneshot::channel();
        let sender = self.shared.current.lock().unwrap().clone().expect("connected");
        let _ = sender.send(Control::Flood {
            frames,
            per_second,
            done,
        });
        finished
    }

    /// Carries one more session over this plugin's socket, as the edit plugin carries a
    /// playtest's server and clients: says its `hello` now and after every reconnect.
    pub fn carry(&self, identity: Identity) {
        let message = encode(&hello(&identity, None), self.shared.identity.framing);
        self.shared.carried.lock().unwrap().push(identity);
        if let Some(sender) = self.shared.current.lock().unwrap().clone() {
            let _ = sender.send(Control::Send(message));
        }
    }

    /// That carried session's DataModel closed: sends `bye` and stops carrying it.
    pub fn bye(&self, session_id: &str) {
        self.shared
            .carried
            .lock()
            .unwrap()
            .retain(|c| c.session_id != session_id);
        let message = map(vec![("t", "bye".into()), ("session", session_id.into())]);
        let sender = self.shared.current.lock().unwrap().clone().expect("connected");
        let _ = sender.send(Control::Send(encode(&message, self.shared.identity.framing)));
    }

    /// Stops for good, closing the connection.
    pub async fn stop(mut self) {
        self.shared.stop.cancel();
        let _ = (&mut self.task).await;
    }
}

impl Drop for FakePlugin {
    fn drop(&mut self) {
        self.shared.stop.cancel();
    }
}

fn note(shared: &Shared, change: impl FnOnce(&mut Log)) {
    change(&mut shared.log.lock().unwrap());
    shared.changed.notify_waiters();
}

fn map(entries: Vec<(&str, Value)>) -> Value {
    Value::Map(entries.into_iter().map(|(k, v)| (Value::from(k), v)).collect())
}

fn encode(value: &Value, framing: Framing) -> Message {
    let mut bytes = Vec::new();
    rmpv::encode::write_value(&mut bytes, value).expect("encode msgpack");
    match framing {
        Framing::Binary => Message::Binary(bytes.into()),
        Framing::Base64Text => Message::Text(BASE64.encode(bytes).into()),
    }
}

fn decode(message: &Message) -> Option<Value> {
    let bytes = match message {
        Message::Binary(bytes) => bytes.to_vec(),
        Message::Text(text) => BASE64.decode(text.as_bytes()).ok()?,
        _ => return None,
    };
    rmpv::decode::read_value(&mut &bytes[..]).ok()
}

/// The identity's hello; a paired one carries `nonce` (base64), for the host to prove on.
fn hello(identity: &Identity, nonce: Option<&[u8]>) -> Value {
    let mut hello = hello_fields(identity);
    if let (Value::Map(fields), Some(nonce)) = (&mut hello, nonce) {
        fields.push(("nonce".into(), BASE64.encode(nonce).into()));
    }
    hello
}

fn hello_fields(identity: &Identity) -> Value {
    let mut fields = vec![
        ("t", "hello".into()),
        ("protocol", identity.protocol.into()),
        ("pluginVersion", "fake-0.0.1".into()),
        ("sessionId", identity.session_id.as_str().into()),
        ("instanceId", identity.instance_id.as_str().into()),
        ("context", identity.context.into()),
        ("placeName", identity.place_name.as_str().into()),
        // Luau numbers are doubles: send ids the way a Luau encoder would.
        ("placeId", Value::F64(1818.0)),
        ("gameId", Value::F64(0.0)),
        ("state", identity.state.into()),
        // Every action the command table sends to a plugin, as an up-to-date plugin has.
        (
            "actions",
            Value::Array(
                studio_bridge::commands::ALL
                    .iter()
                    .filter(|c| c.spec().needs_session)
                    .map(|c| c.spec().name.into())
                    .collect(),
            ),
        ),
    ];
    if let Some(player) = &identity.player {
        fields.push(("player", player.as_str().into()));
    }
    map(fields)
}

/// What the connection loop is told by a request handler.
enum Control {
    Send(Message),
    Drop(Option<Duration>),
    /// Send these frames at this rate, then say so.
    Flood {
        frames: Vec<Message>,
        per_second: u64,
        done: tokio::sync::oneshot::Sender<()>,
    },
}

async fn run(shared: Arc<Shared>) {
    let url = format!("ws://127.0.0.1:{}/v1/plugin", shared.port);
    let mut reconnect_after: Option<Duration> = Some(Duration::ZERO);
    while let Some(delay) = reconnect_after.take() {
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            () = shared.stop.cancelled() => return,
        }
        let socket = loop {
            match tokio_tungstenite::connect_async(url.as_str()).await {
                Ok((socket, _)) => break socket,
                Err(_) => {
                    tokio::select! {
                        () = tokio::time::sleep(Duration::from_millis(25)) => {}
                        () = shared.stop.cancelled() => return,
                    }
                }
            }
        };
        reconnect_after = serve(&shared, socket).await;
    }
}

/// Serves one connection; returns when to reconnect (None: never).
async fn serve(
    shared: &Arc<Shared>,
    socket: tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>,
) -> Option<Duration> {
    let framing = shared.identity.framing;
    let (mut sink, mut stream) = socket.split();
    let nonce = shared
        .identity
        .pairing
        .as_ref()
        .map(|_| studio_bridge::bridge::pairing::nonce().expect("OS randomness"));
    if sink
        .send(encode(
            &hello(&shared.identity, nonce.as_ref().map(|n| &n[..])),
            framing,
        ))
        .await
        .is_err()
    {
        return Some(Duration::from_millis(50));
    }
    let (control_tx, mut control) = mpsc::unbounded_channel::<Control>();
    *shared.current.lock().unwrap() = Some(control_tx.clone());
    loop {
        tokio::select! {
            () = shared.stop.cancelled() => {
                let _ = sink.close().await;
                return None;
            }
            order = control.recv() => match order {
                Some(Control::Send(message)) => {
                    if sink.send(message).await.is_err() {
                        return Some(Duration::from_millis(50));
                    }
                }
                Some(Control::Flood { frames, per_second, done }) => {
                    // In 100 slices a second, each flushed at once.
                    let slice = (per_second / 100).max(1) as usize;
                    let mut tick = tokio::time::interval(Duration::from_millis(10));
                    for chunk in frames.chunks(slice) {
                        tick.tick().await;
                        for frame in chunk {
                            if sink.feed(frame.clone()).await.is_err() {
                                return Some(Duration::from_millis(50));
                            }
                        }
                        if sink.flush().await.is_err() {
                            return Some(Duration::from_millis(50));
                        }
                    }
                    let _ = done.send(());
                }
                Some(Control::Drop(again)) => {
                    // Abrupt: no close frame, as when Studio's process dies.
                    drop(sink);
                    drop(stream);
                    return again;
                }
                None => return Some(Duration::from_millis(50)),
            },
            incoming = stream.next() => {
                let message = match incoming {
                    Some(Ok(message)) => message,
                    Some(Err(_)) | None => {
                        note(shared, |log| log.closes.push(None));
                        return Some(Duration::from_millis(50));
                    }
                };
                if let Message::Close(frame) = &message {
                    let code = frame.as_ref().map(|f| u16::from(f.code));
                    note(shared, |log| log.closes.push(code));
                    let rejected = !shared.log.lock().unwrap().rejects.is_empty();
                    return if rejected { None } else { Some(Duration::from_millis(50)) };
                }
                let Some(value) = decode(&message) else { continue };
                match value["t"].as_str() {
                    Some("welcome") if value["sessionId"].as_str() != Some(shared.identity.session_id.as_str()) => {
                        let id = value["sessionId"].as_str().unwrap_or_default().to_owned();
                        note(shared, |log| log.carried_welcomes.push(id));
                    }
                    Some("welcome") => {
                        note(shared, |log| log.welcomes += 1);
                        let carried = shared.carried.lock().unwrap().clone();
                        for identity in carried {
                            let _ = control_tx.send(Control::Send(encode(&hello(&identity, None), framing)));
                        }
                    }
                    Some("challenge") => {
                        let (Some(secret), Some(nonce)) = (&shared.identity.pairing, &nonce) else { continue };
                        let bytes = |key: &str| BASE64.decode(value[key].as_str().unwrap_or_default()).unwrap_or_default();
                        let host_nonce = bytes("hostNonce");
                        let proven = pairing::host_proof_matches(secret, nonce, &host_nonce, &bytes("proof"));
                        note(shared, |log| log.challenges.push(proven));
                        let proof = shared
                            .identity
                            .forged_auth
                            .clone()
                            .unwrap_or_else(|| pairing::plugin_proof(secret, &host_nonce, nonce));
                        let auth = map(vec![("t", "auth".into()), ("proof", BASE64.encode(proof).into())]);
                        let auth = Control::Send(encode(&auth, framing));
                        match shared.identity.auth_delay {
                            None => {
                                let _ = control_tx.send(auth);
                            }
                            Some(delay) => {
                                let control_tx = control_tx.clone();
                                tokio::spawn(async move {
                                    tokio::time::sleep(delay).await;
                                    let _ = control_tx.send(auth);
                                });
                            }
                        }
                    }
                    Some("reject") => {
                        let code = value["code"].as_str().unwrap_or_default().to_owned();
                        let text = value["message"].as_str().unwrap_or_default().to_owned();
                        note(shared, |log| log.rejects.push((code, text)));
                    }
                    Some("ping") => {
                        note(shared, |log| log.pings += 1);
                        let pong = map(vec![("t", "pong".into()), ("n", value["n"].clone())]);
                        let _ = control_tx.send(Control::Send(encode(&pong, framing)));
                    }
                    Some("cancel") => {
                        let id = value["id"].as_u64().unwrap_or_default();
                        note(shared, |log| log.cancels.push(id));
                    }
                    Some("request") => {
                        let received = Instant::now();
                        let seen = Seen {
                            id: value["id"].as_u64().expect("request id is an unsigned int"),
                            session: value["session"].as_str().map(str::to_owned),
                            action: value["action"].as_str().unwrap_or_default().to_owned(),
                            args: value["args"].clone(),
                            timeout_ms: value["timeoutMs"].as_u64().unwrap_or_default(),
                            defaulted: value["defaulted"].as_bool().unwrap_or(false),
                        };
                        let reply = (shared.handler)(&seen.action, &seen.args);
                        let id = seen.id;
                        let session = seen.session.clone();
                        let quiet = shared.options.quiet;
                        note(shared, |log| {
                            log.last_request_at = Some(received);
                            if !quiet {
                                log.requests.push(seen);
                            }
                        });
                        if shared.options.answer_inline && matches!(reply, Reply::Ok(_) | Reply::Raw(_)) {
                            let Some(message) = response(id, session.as_deref(), reply, framing) else { continue };
                            if sink.send(message).await.is_err() {
                                return Some(Duration::from_millis(50));
                            }
                            answered(shared);
                        } else {
                            tokio::spawn(answer(Arc::clone(shared), id, session, reply, framing, control_tx.clone()));
                        }
                    }
                    _ => {}
                }
            }
        }
    }
}

fn answered(shared: &Shared) {
    let sent = Instant::now();
    note(shared, |log| {
        log.answered += 1;
        log.last_answer_sent_at = Some(sent);
    });
}

/// The `response` frame for an `Ok` or `Raw` reply (None for any other reply).
fn response(id: u64, session: Option<&str>, reply: Reply, framing: Framing) -> Option<Message> {
    let ok = |result| {
        let mut entries = vec![
            ("t", "response".into()),
            ("id", Value::F64(id as f64)),
            ("ok", true.into()),
        ];
        if let Some(session) = session {
            entries.push(("session", session.into()));
        }
        entries.push(("result", result));
        map(entries)
    };
    match reply {
        Reply::Ok(result) => Some(encode(&ok(result), framing)),
        Reply::Raw(result) => {
            // `result` is the map's last entry: encode it as nil, then put the
            // ready-made bytes in place of that one nil byte.
            let mut bytes = Vec::with_capacity(result.len() + 32);
            rmpv::encode::write_value(&mut bytes, &ok(Value::Nil)).expect("encode msgpack");
            assert_eq!(bytes.pop(), Some(0xc0), "nil is the last byte");
            bytes.extend_from_slice(&result);
            Some(match framing {
                Framing::Binary => Message::Binary(bytes.into()),
                Framing::Base64Text => Message::Text(BASE64.encode(bytes).into()),
            })
        }
        _ => None,
    }
}

async fn answer(
    shared: Arc<Shared>,
    id: u64,
    session: Option<String>,
    reply: Reply,
    framing: Framing,
    control: mpsc::UnboundedSender<Control>,
) {
    let mut reply = reply;
    let routed = |mut message: Value| {
        if let (Some(session), Value::Map(entries)) = (&session, &mut message) {
            entries.push(("session".into(), session.as_str().into()));
        }
        message
    };
    loop {
        let message = match reply {
            Reply::Ok(_) | Reply::Raw(_) => {
                if let Some(message) = response(id, session.as_deref(), reply, framing) {
                    let _ = control.send(Control::Send(message));
                }
                answered(&shared);
                return;
            }
            Reply::Err(code, message) => map(vec![
                ("t", "response".into()),
                ("id", id.into()),
                ("ok", false.into()),
                ("error", map(vec![("code", code.into()), ("message", message.into())])),
            ]),
            Reply::After(delay, then) => {
                tokio::time::sleep(delay).await;
                reply = *then;
                continue;
            }
            Reply::Progress(steps, then) => {
                let total = steps.last().copied().unwrap_or(0.0);
                for step in steps {
                    let progress = map(vec![
                        ("t", "progress".into()),
                        ("id", id.into()),
                        ("progress", Value::F64(step)),
                        ("total", Value::F64(total)),
                        ("message", format!("step {step}").into()),
                    ]);
                    let _ = control.send(Control::Send(encode(&routed(progress), framing)));
                }
                reply = *then;
                continue;
            }
            Reply::Never => return,
            Reply::Drop(again) => {
                let _ = control.send(Control::Drop(again));
                return;
            }
            Reply::GarbageFirst(then) => {
                let _ = control.send(Control::Send(Message::Binary(vec![0x81, 0xa1].into())));
                let _ = control.send(Control::Send(Message::Text("not base64 at all!".into())));
                reply = *then;
                continue;
            }
        };
        let _ = control.send(Control::Send(encode(&routed(message), framing)));
        answered(&shared);
        return;
    }
}

/// A handler that answers every action the way a healthy Studio would, in shape.
pub fn studio_like() -> Handler {
    Arc::new(|action: &str, args: &Value| match action {
        "state" => Reply::Ok(map(vec![
            ("state", "Edit".into()),
            ("placeName", "Place A".into()),
            ("placeId", Value::F64(1818.0)),
            ("gameId", 0.into()),
        ])),
        "exec" => Reply::Ok(map(vec![
            ("success", true.into()),
            ("returns", Value::Array(vec![Value::F64(2.0), Value::Nil, "ok".into()])),
            (
                "logs",
                Value::Array(vec![map(vec![("level", "Print".into()), ("body", "hello".into())])]),
            ),
        ])),
        other => Reply::Err("unknown_action", format!("no action {other} (args {args})")),
    })
}

pub fn handler(f: impl Fn(&str, &Value) -> Reply + Send + Sync + 'static) -> Handler {
    Arc::new(f)
}

pub fn value_map(entries: Vec<(&str, Value)>) -> Value {
    map(entries)
}
