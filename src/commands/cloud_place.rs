//! Which universe and place an Open Cloud call is for (the `cloud_*` and `datastore`
//! tools): the arguments' `universe`/`place` (`--universe`/`--place`), else the open
//! Studio's `gameId`/`placeId` from its session, the one the caller's target names or the
//! only Studio connected. A place never published (id 0) is an error naming the flags.

use std::time::Duration;

use tokio::time::Instant;

use super::Invocation;
use crate::bridge::SessionInfo;
use crate::cloud::{self, Cloud};
use crate::protocol::{Context, ToolError};

/// How long a cloud call waits for the session list when it must default the ids.
const SESSIONS_WAIT: Duration = Duration::from_secs(5);

/// A universe, and a place when the tool needs one.
#[derive(Debug, Clone, Copy)]
pub struct Where {
    pub universe: u64,
    pub place: Option<u64>,
}

/// The universe (and, with `need_place`, the place) for this call.
pub async fn resolve(
    cx: &Invocation,
    universe: Option<i64>,
    place: Option<i64>,
    need_place: bool,
) -> Result<Where, ToolError> {
    if let Some(universe) = universe
        && (place.is_some() || !need_place)
    {
        return Ok(Where {
            universe: cloud::published_id(universe, "universe")?,
            place: place.map(|p| cloud::published_id(p, "place")).transpose()?,
        });
    }
    let studio = open_studio(cx).await?;
    let universe = universe.unwrap_or(studio.game_id);
    let place = place.unwrap_or(studio.place_id);
    Ok(Where {
        universe: cloud::published_id(universe, "universe")?,
        place: if need_place {
            Some(cloud::published_id(place, "place")?)
        } else {
            None
        },
    })
}

/// The open Studio whose ids a call takes: the caller's target, else the only one.
async fn open_studio(cx: &Invocation) -> Result<SessionInfo, ToolError> {
    let pass = "pass universe and place (--universe and --place on the command line)";
    let sessions = cx.bridge.sessions(SESSIONS_WAIT).await.map_err(|error| {
        ToolError::invalid_args(format!(
            "No universe or place was given, and the open Studio's could not be read ({}); {pass}.",
            error.message
        ))
    })?;
    let defaults = cx.defaults.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let session_id = cx.target.session_id.clone().or(defaults.session_id);
    let instance_id = cx.target.instance_id.clone().or(defaults.instance_id);
    let mut edits: Vec<SessionInfo> = sessions
        .into_iter()
        .filter(|s| session_id.as_deref().is_none_or(|id| s.session_id == id))
        .filter(|s| instance_id.as_deref().is_none_or(|id| s.instance_id == id))
        .filter(|s| s.context == Context::Edit || session_id.is_some())
        .collect();
    edits.sort_by(|a, b| a.instance_id.cmp(&b.instance_id));
    edits.dedup_by(|a, b| a.instance_id == b.instance_id);
    match edits.len() {
        0 => Err(ToolError::invalid_args(format!(
            "No universe or place was given, and no Studio is connected to take them from; {pass}."
        ))),
        1 => Ok(edits.remove(0)),
        _ => {
            let open: Vec<String> = edits
                .iter()
                .map(|s| format!("{} (place {}, universe {})", s.place_name, s.place_id, s.game_id))
                .collect();
            Err(ToolError::invalid_args(format!(
                "Several Studios are open ({}): {pass}, or choose one with studio_target.",
                open.join(", ")
            )))
        }
    }
}

/// The client, and the deadline of a call that may take `timeout`.
pub fn client(timeout: Duration) -> Result<(Cloud, Instant), ToolError> {
    Ok((Cloud::configured()?, Instant::now() + timeout))
}
