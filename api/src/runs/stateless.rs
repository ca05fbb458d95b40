//! Stateless runs (`/runs`, `/runs/batch`, `/runs/wait`, `/runs/stream`): each on a new thread
//! of the caller, bound to its graph.

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use mostrador_queue::ThreadId;
use mostrador_queue::run;
use mostrador_queue::thread::NewThread;
use uuid::Uuid;

use super::accept::{
    Accepted, CreateRun, Follow, new_run, new_thread_metadata, refused, resolve_assistant,
    run_grant, rust_graph, subscribed,
};
use super::wait::{streaming, waiting};
use super::{content_location, run_answer};
use crate::app::AppState;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::extract::{Body, RunHeaders};
use crate::stream;
use crate::wire;

/// Validates and enqueues stateless runs, each on a new thread of the caller bound to its graph,
/// all or nothing; `follow` says what the request does with the runs it creates.
async fn accept_stateless(
    state: &AppState,
    caller: &Caller,
    bodies: Vec<CreateRun>,
    follow: Follow,
) -> Result<Vec<Accepted>, ApiError> {
    state.within_share(caller)?;
    let mut runs = Vec::with_capacity(bodies.len());
    let mut assistants = Vec::with_capacity(bodies.len());
    let mut subscriptions = Vec::with_capacity(bodies.len());
    for mut body in bodies {
        run_grant(state, caller, None, &mut body).await?;
        let assistant = resolve_assistant(state, caller, &body).await?;
        if body.resumes() {
            return Err(ApiError::bad_request(
                "You must provide a thread_id when resuming.",
            ));
        }
        // `on_completion: delete` (the default): the thread goes when the run ends, with the
        // statement that ends it; a wait deletes it itself, once it has read the answer.
        let temporary = body.deletes_on_completion() && follow != Follow::Waits;
        let python = state.is_python(&assistant.graph_id);
        let graph = rust_graph(state, python, &assistant);
        let new = new_run(
            state,
            caller,
            ThreadId(Uuid::now_v7()),
            &assistant,
            body,
            graph,
            None,
        )?;
        let new_thread = NewThread {
            graph_id: Some(assistant.graph_id.clone()),
            owner: caller.subject.clone(),
            tenant: caller.tenant.clone(),
            metadata: new_thread_metadata(state, &new),
            temporary,
            ttl: state.default_thread_ttl(),
            quota: state.thread_quota(),
        };
        let (new, events) = subscribed(state, new, follow);
        runs.push((new_thread, new));
        assistants.push(assistant);
        subscriptions.push(events);
    }
    let created = run::enqueue_on_new_threads(state.pool(), &runs, Some(state.queue_limit()))
        .await
        .map_err(|err| refused(state, caller, err))?
        .ok_or_else(|| ApiError::failed("a new thread's id was taken"))?;
    state.metrics().runs_created.inc_by(created.len() as u64);
    Ok(created
        .into_iter()
        .zip(assistants)
        .zip(subscriptions)
        .map(|(((thread, enqueued), assistant), events)| Accepted {
            thread,
            assistant,
            run: enqueued.run,
            events,
        })
        .collect())
}

/// `POST /runs`: a background run on a new thread, deleted when the run ends unless
/// `on_completion` is `keep`.
pub async fn create_stateless(
    State(state): State<AppState>,
    caller: Caller,
    RunHeaders(headers): RunHeaders,
    Body(mut body): Body<CreateRun>,
) -> Result<Response, ApiError> {
    body.headers = headers;
    let accepted = accept_stateless(&state, &caller, vec![body], Follow::No).await?;
    let run = &accepted[0].run;
    Ok((content_location(run), Json(run_answer(run))).into_response())
}

/// `POST /runs/batch`: background runs, each on a new thread (deleted when its run ends unless
/// its `on_completion` is `keep`), enqueued all or nothing.
pub async fn batch(
    State(state): State<AppState>,
    caller: Caller,
    RunHeaders(headers): RunHeaders,
    Body(mut bodies): Body<Vec<CreateRun>>,
) -> Result<Json<Vec<wire::Run>>, ApiError> {
    for body in &mut bodies {
        body.headers.clone_from(&headers);
    }
    if bodies.is_empty() || bodies.len() > 1000 {
        return Err(ApiError::unprocessable("a batch holds 1 to 1000 runs"));
    }
    let accepted = accept_stateless(&state, &caller, bodies, Follow::No).await?;
    Ok(Json(accepted.iter().map(|a| run_answer(&a.run)).collect()))
}

/// `POST /runs/wait`: a run on a new thread; the final state once it ended. The thread is then
/// deleted unless `on_completion` is `keep`; a wait the api cuts short (it shuts down) leaves the
/// run going and its thread, for the client to join again.
pub async fn wait_stateless(
    State(state): State<AppState>,
    caller: Caller,
    RunHeaders(headers): RunHeaders,
    Body(mut body): Body<CreateRun>,
) -> Result<Response, ApiError> {
    body.headers = headers;
    let delete = body.deletes_on_completion();
    let on_disconnect = body.on_disconnect();
    let slot = stream::slot(&state, &caller)?;
    let accepted = accept_stateless(&state, &caller, vec![body], Follow::Waits).await?;
    let mut accepted = accepted.into_iter().next().expect("one run");
    let start = accepted.start();
    Ok(waiting(
        state,
        slot,
        accepted.run,
        start,
        delete,
        on_disconnect,
    ))
}

/// `POST /runs/stream`: a run on a new thread, streamed; the thread is deleted when the run ends
/// unless `on_completion` is `keep` (a client that lost the stream rejoins it while the run
/// goes on).
pub async fn stream_stateless(
    State(state): State<AppState>,
    caller: Caller,
    RunHeaders(headers): RunHeaders,
    Body(mut body): Body<CreateRun>,
) -> Result<Response, ApiError> {
    body.headers = headers;
    let messages = body.messages_form();
    let on_disconnect = body.on_disconnect();
    let slot = stream::slot(&state, &caller)?;
    let accepted = accept_stateless(&state, &caller, vec![body], Follow::Streams).await?;
    let accepted = accepted.into_iter().next().expect("one run");
    Ok(streaming(&state, slot, accepted, messages, on_disconnect))
}
