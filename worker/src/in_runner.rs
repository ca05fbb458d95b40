//! One claimed run of a Python or JavaScript graph, from start to finish: a runner process
//! executes it with LangGraph's engine, beside other runs, while this side answers its checkpointer (fenced by the
//! run's lease),
//! forwards its events to the [`crate::publish::Publisher`], relays drain and cancel, and ends
//! the run with the transition its outcome calls for, as [`crate::execute`] does for Rust graphs.

use std::time::Duration;

use mostrador_queue::run::RunSpec;
use mostrador_queue::run::ending::Ending;
use mostrador_queue::state::saver::{Described, Saver, Write};
use mostrador_queue::{ClaimedRun, Error as QueueError, NewEvent, RunId};
use serde_json::json;
use tokio::time::{Instant, sleep_until};

use crate::Error;
use crate::execute::{Executor, Finish, RunHandle, cancelled, end, fail, postpone};
use crate::publish::RunEvents;
use crate::runner::checkpointer;
use crate::runner::protocol::{Cast, FromRunner, Outcome};
use crate::runner::{CANCEL_GRACE, Language, RunLink, Runners};
use crate::services::Services;

/// How a run left its runner.
enum Ended {
    /// The runner reported its outcome.
    Done(Outcome),
    /// The run was given up on, or its process died.
    Gone(Gone),
}

enum Gone {
    /// It died by itself (a crash, memory exhaustion) or broke the protocol.
    Died(String),
    /// What it sent without waiting for an answer could not be written.
    SaverFailed(String),
    /// The database failed for a while under one of its calls or casts: it waits for it.
    DatabaseFailed(String),
    /// It did not stop a cancelled run in time.
    Cancelled,
    /// It held its process's event loop, which the runs beside it share, this many seconds.
    Blocked(f64),
    TimedOut,
    LeaseLost,
}

impl Executor {
    /// Executes one claimed run of a Python or JavaScript graph to its end, which the claim does
    /// not outlive. `timeout` bounds the whole run.
    ///
    /// # Errors
    ///
    /// A database failure during a transition; the run stays `running` until its lease expires.
    pub async fn execute_in_runner(
        &self,
        claimed: ClaimedRun,
        runners: &Runners,
        handle: &RunHandle,
        timeout: Option<Duration>,
    ) -> Result<Finish, Error> {
        let pool = &self.pool;
        if let Some(action) = claimed.cancel_action {
            // Cancelled while it waited (released by a drain): honour it before running anything.
            handle.cancel(action);
        }
        let events =
            self.publisher
                .register(claimed.lease(), handle.control.clone(), claimed.streamed);
        if handle.control.is_cancelled() {
            return end(&events, claimed, cancelled(handle)).await;
        }
        let spec = match &claimed.spec {
            Ok(spec) => spec.clone(),
            Err(message) => {
                let message = message.clone();
                return fail(&events, claimed, "InvalidRun", &message, false).await;
            }
        };
        // Errors name the runner: `PythonRunnerDied`, `NodeRunnerDied`.
        let language = runners.language();
        let runner = language.runner();
        let mut link = match runners.place(&claimed).await {
            Ok(link) => link,
            Err(err) => {
                tracing::warn!(run_id = %claimed.run_id(), error = %err, runner, "no runner");
                return fail(
                    &events,
                    claimed,
                    &format!("{runner}Error"),
                    &err.to_string(),
                    true,
                )
                .await;
            }
        };
        let saver = Saver::fenced(pool.clone(), &claimed);
        let mut services = runners.services(saver.clone());
        let deadline = timeout.map(|timeout| Instant::now() + timeout);
        let ended = drive(
            &mut link,
            (&claimed, spec),
            handle,
            &events,
            (&saver, &mut services),
            deadline,
            self.max_concurrency,
        )
        .await?;
        // What its tools still had running (a command, a wait for a slot) ends with it, and its
        // kept connection goes back to the pool: the run leaves its slot with its ending.
        drop(services);
        drop(saver);
        match ended {
            Ended::Done(done) => {
                // A runner that ran out of memory may hold on to it: its process takes no new
                // run.
                if matches!(done, Outcome::Error { retire: true, .. }) {
                    link.retire();
                }
                drop(link);
                let ending = told(claimed.run_id(), handle, &done);
                end(&events, claimed, ending).await
            }
            Ended::Gone(gone) => {
                match gone {
                    // Its process is broken, or could not stop it in time (its event loop is
                    // blocked): the runs beside it fail retryably too.
                    Gone::Died(_) | Gone::Cancelled | Gone::Blocked(_) => link.kill(),
                    Gone::SaverFailed(_)
                    | Gone::DatabaseFailed(_)
                    | Gone::TimedOut
                    | Gone::LeaseLost => link.stop().await,
                }
                match gone {
                    Gone::LeaseLost => Ok(Finish::LeaseLost),
                    Gone::Cancelled => end(&events, claimed, cancelled(handle)).await,
                    Gone::TimedOut => {
                        tracing::info!(run_id = %claimed.run_id(), "run timed out");
                        end(&events, claimed, Ending::TimedOut).await
                    }
                    Gone::Died(why) => {
                        tracing::warn!(run_id = %claimed.run_id(), why, runner, "runner died");
                        // The next attempt resumes from the last checkpoint.
                        fail(&events, claimed, &format!("{runner}Died"), &why, true).await
                    }
                    Gone::Blocked(seconds) => {
                        tracing::warn!(run_id = %claimed.run_id(), seconds, "run blocked its runner's event loop");
                        // Not retried: it would block the next process's runs as well.
                        let remedy = match language {
                            Language::Python => {
                                "a blocking call in an async node (use an async client, a sync \
                                 node, or asyncio.to_thread)"
                            }
                            Language::JavaScript => {
                                "a synchronous loop or call in a node (await the work, or move it \
                                 to a worker thread)"
                            }
                        };
                        let message = format!(
                            "the run held its {} runner's event loop for {seconds} s, which the \
                             runs beside it share: {remedy}",
                            language.interpreter()
                        );
                        fail(&events, claimed, "BlockedEventLoop", &message, false).await
                    }
                    Gone::SaverFailed(why) => {
                        tracing::warn!(run_id = %claimed.run_id(), why, "checkpoint write failed");
                        fail(&events, claimed, "CheckpointerError", &why, true).await
                    }
                    Gone::DatabaseFailed(why) => postpone(&events, claimed, &why).await,
                }
            }
        }
    }
}

/// The ending the runner's outcome calls for.
fn told(run_id: RunId, handle: &RunHandle, done: &Outcome) -> Ending {
    match done {
        Outcome::Success => Ending::Success,
        Outcome::Interrupted => Ending::Paused,
        Outcome::Cancelled => cancelled(handle),
        Outcome::Drained { reason } => Ending::Released {
            reason: reason.clone(),
        },
        Outcome::Error {
            error,
            message,
            retryable,
            ..
        } => {
            tracing::warn!(%run_id, error, message, retryable, "run failed");
            Ending::Failed {
                error: json!({"error": error, "message": message}),
                retryable: *retryable,
            }
        }
    }
}

/// How long a task's writes, cast by the runner, may wait for the checkpoint that usually follows
/// them at once, to be written in one transaction with it (one commit per superstep).
const HOLD_WRITES: Duration = Duration::from_millis(5);

/// Writes the runner cast and the worker has not written yet, and what it sent after them.
#[derive(Default)]
struct Held {
    writes: Vec<Write>,
    /// Events and described states sent after the writes: published once they are written.
    after: Vec<Published>,
    until: Option<Instant>,
}

impl Held {
    fn hold(&mut self, write: Write) {
        self.writes.push(write);
        self.until
            .get_or_insert_with(|| Instant::now() + HOLD_WRITES);
    }

    /// Hands what waited for the writes to the publisher, once they are written.
    fn release(&mut self, events: &RunEvents) -> Result<(), Gone> {
        self.until = None;
        for published in std::mem::take(&mut self.after) {
            published.publish(events);
        }
        Ok(())
    }

    /// Hands an event or a state to the publisher: at once, or after the writes held before it.
    fn publish(&mut self, events: &RunEvents, published: Published) {
        if self.writes.is_empty() {
            published.publish(events);
        } else {
            self.after.push(published);
        }
    }

    /// Writes what is held, then releases what waited for it.
    async fn flush(&mut self, saver: &Saver, events: &RunEvents) -> Result<(), Gone> {
        saver
            .write(&std::mem::take(&mut self.writes))
            .await
            .map_err(saver_gone)?;
        self.release(events)
    }
}

fn saver_gone(err: QueueError) -> Gone {
    match err {
        QueueError::LeaseLost { .. } => Gone::LeaseLost,
        err if err.is_transient() => Gone::DatabaseFailed(err.to_string()),
        err => Gone::SaverFailed(err.to_string()),
    }
}

/// An event for the stream or a state the graph described, for the run's publisher.
enum Published {
    Event(NewEvent),
    Described(Described),
}

impl Published {
    fn publish(self, events: &RunEvents) {
        match self {
            Self::Event(event) => events.push(event),
            Self::Described(described) => events.describe(described),
        }
    }
}

/// Hands the run to the runner and serves it until it reports its outcome or is gone.
async fn drive(
    runner: &mut RunLink,
    (claimed, spec): (&ClaimedRun, RunSpec),
    handle: &RunHandle,
    events: &RunEvents,
    (saver, services): (&Saver, &mut Services),
    deadline: Option<Instant>,
    max_concurrency: Option<usize>,
) -> Result<Ended, Error> {
    let control = &handle.control;
    let spec = checkpointer::run_spec(saver, claimed, spec, max_concurrency).await;
    if let Err(err) = runner.start(spec).await {
        return Ok(Ended::Gone(Gone::Died(err.to_string())));
    }
    let mut drain_sent = false;
    let mut cancel_deadline: Option<Instant> = None;
    let mut held = Held::default();
    let far = Instant::now() + Duration::from_secs(86_400 * 365);
    let died = |err: crate::runner::RunnerError| Gone::Died(err.to_string());
    loop {
        tokio::select! {
            biased;
            () = sleep_until(cancel_deadline.unwrap_or(far)), if cancel_deadline.is_some() => {
                return Ok(Ended::Gone(if events.lost() { Gone::LeaseLost } else { Gone::Cancelled }));
            }
            () = sleep_until(deadline.unwrap_or(far)), if deadline.is_some() => {
                return Ok(Ended::Gone(Gone::TimedOut));
            }
            () = control.cancelled(), if cancel_deadline.is_none() => {
                cancel_deadline = Some(Instant::now() + CANCEL_GRACE);
                let _ = runner.cancel().await;
            }
            () = control.drain_requested(), if !drain_sent => {
                drain_sent = true;
                let _ = runner.drain(control.drain_reason()).await;
            }
            () = sleep_until(held.until.unwrap_or(far)), if held.until.is_some() => {
                if let Err(gone) = held.flush(saver, events).await {
                    return Ok(Ended::Gone(gone));
                }
            }
            Some(ready) = services.next(), if services.working() => {
                let sent = match ready {
                    Ok(reply) => runner.reply(&reply).await.map_err(died),
                    Err(QueueError::LeaseLost { .. }) => Err(Gone::LeaseLost),
                    Err(err) => return Err(err.into()),
                };
                if let Err(gone) = sent {
                    return Ok(Ended::Gone(gone));
                }
            }
            message = runner.next() => {
                let message = match message {
                    Ok(message) => message,
                    Err(err) => {
                        // What it cast before it died is its finished tasks' work: keep it.
                        let _ = held.flush(saver, events).await;
                        return Ok(Ended::Gone(died(err)));
                    }
                };
                let handled = match message {
                    FromRunner::Call { id, call, .. } if Services::serves(&call) => {
                        match services.call(id, call).await {
                            Ok(Some(reply)) => runner.reply(&reply).await.map_err(died),
                            Ok(None) => Ok(()),
                            Err(QueueError::LeaseLost { .. }) => Err(Gone::LeaseLost),
                            Err(err) => return Err(err.into()),
                        }
                    }
                    FromRunner::Call { id, call, .. } => {
                        let writes = std::mem::take(&mut held.writes);
                        match checkpointer::call(saver, writes, id, call).await {
                            Ok(reply) => match held.release(events) {
                                Ok(()) => runner.reply(&reply).await.map_err(died),
                                Err(gone) => Err(gone),
                            },
                            Err(err) => Err(saver_gone(err)),
                        }
                    }
                    FromRunner::Cast { cast, .. } => match services.cast(cast) {
                        None => Ok(()),
                        Some(Cast::Describe { checkpoint_id, snapshot }) => {
                            held.publish(events, Published::Described(Described { checkpoint_id, snapshot }));
                            Ok(())
                        }
                        Some(cast) => match checkpointer::write_of(cast) {
                            Ok(Some(write)) => {
                                held.hold(write);
                                Ok(())
                            }
                            Ok(None) => Ok(()),
                            Err(err) => Err(saver_gone(err)),
                        },
                    },
                    FromRunner::Event { event, data, .. } => {
                        held.publish(events, Published::Event(NewEvent::new(event, data)));
                        Ok(())
                    }
                    FromRunner::Blocked { seconds, .. } => {
                        return Ok(Ended::Gone(Gone::Blocked(seconds)));
                    }
                    FromRunner::Done { outcome, .. } => match held.flush(saver, events).await {
                        Ok(()) => return Ok(Ended::Done(outcome)),
                        Err(gone) => Err(gone),
                    },
                    other => Err(Gone::Died(format!("unexpected message {other:?}"))),
                };
                if let Err(gone) = handled {
                    return Ok(Ended::Gone(gone));
                }
            }
        }
    }
}
