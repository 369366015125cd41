//! Which universe and place an Open Cloud call is for (the `cloud_*` and `datastore`
//! tools): the arguments' `universe`/`place` (`--universe`/`--place`), else the open
//! Studio's `gameId`/`placeId` from its session, chosen as a session command's call is
//! (`bridge::resolve`): the one the caller's target names, or the only Studio connected.
//! A place never published (id 0) is an error naming the flags.

use std::time::Duration;

use tokio::time::Instant;

use super::Invocation;
use crate::bridge::SessionInfo;
use crate::bridge::resolve::{self as resolution, Candidate, Choice};
use crate::cloud::{self, Cloud};
use crate::protocol::{Context, ErrorCode, ToolError};

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

/// The open Studio whose ids a call takes: the session the caller's target (or its
/// `studio_target` default) resolves to, as a session command's would; any DataModel of a
/// Studio carries the same ids, so the edit one is asked for.
async fn open_studio(cx: &Invocation) -> Result<SessionInfo, ToolError> {
    let pass = "pass universe and place (--universe and --place on the command line)";
    let sessions = cx.bridge.sessions(SESSIONS_WAIT).await.map_err(|error| {
        ToolError::invalid_args(format!(
            "No universe or place was given, and the open Studio's could not be read ({}); {pass}.",
            error.message
        ))
    })?;
    let mut target = cx.target.clone();
    if target.session_id.is_none() && target.instance_id.is_none() {
        let defaults = cx.defaults.lock().unwrap_or_else(|p| p.into_inner()).clone();
        target.session_id = defaults.session_id;
        target.instance_id = defaults.instance_id;
    }
    target.context = None;
    let candidates: Vec<Candidate<'_>> = sessions
        .iter()
        .map(|s| Candidate {
            session_id: &s.session_id,
            instance_id: &s.instance_id,
            context: s.context,
            state: &s.state,
        })
        .collect();
    let chosen = match resolution::resolve(&candidates, &target, Context::Edit) {
        Ok(Choice::Session(index) | Choice::Provisional(Ok(index))) => Ok(index),
        Ok(Choice::Provisional(Err(error))) | Err(error) => Err(error),
        Ok(Choice::Await(context)) => Err(ToolError::new(
            ErrorCode::ContextUnavailable,
            format!("the {context} session has not connected yet"),
        )),
    };
    chosen.map(|index| sessions[index].clone()).map_err(|mut error| {
        error.message = format!(
            "No universe or place was given, and the open Studio's were not found: {} For Open Cloud, {pass}.",
            error.message
        );
        error
    })
}

/// The client, and the deadline of a call that may take `timeout`.
pub fn client(timeout: Duration) -> Result<(Cloud, Instant), ToolError> {
    Ok((Cloud::configured()?, Instant::now() + timeout))
}
