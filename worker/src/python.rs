//! One claimed run of a Python graph, from start to finish: a runner process executes it with
//! LangGraph's engine while this side answers its checkpointer (fenced by the run's lease),
//! forwards its events to the [`crate::publish::Publisher`], relays drain and cancel, and ends
//! the run with the transition its outcome calls for, as [`crate::execute`] does for Rust graphs.

use std::time::Duration;

use mostrador_queue::saver::Saver;
use mostrador_queue::{
    CancelAction, ClaimedRun, Error as QueueError, NewEvent, RunStatus, ThreadStatus,
};
use serde_json::{Value, json};
use tokio::time::{Instant, sleep_until};

use crate::Error;
use crate::execute::{Executor, Finish, RunHandle, complete, fail, transition};
use crate::publish::RunEvents;
use crate::runner::{self, CANCEL_GRACE, Runner, Runners};

/// How a run left its runner.
enum Ended {
    /// The runner reported its outcome and can take another run.
    Done(Value),
    /// The process was killed or died: it takes no other run.
    Gone(Gone),
}

enum Gone {
    /// It died by itself (a crash, memory exhaustion) or broke the protocol.
    Died(String),
    /// It did not stop a cancelled run in time.
    Cancelled,
    TimedOut,
    LeaseLost,
}

impl Executor {
    /// Executes one claimed run of a Python graph to its end. `timeout` bounds the whole run.
    ///
    /// # Errors
    ///
    /// A database failure during a transition; the run stays `running` until its lease expires.
    pub async fn execute_python(
        &self,
        claimed: &ClaimedRun,
        runners: &Runners,
        handle: &RunHandle,
        timeout: Option<Duration>,
    ) -> Result<Finish, Error> {
        let pool = &self.pool;
        if let Some(action) = claimed.cancel_action {
            // Cancelled while it waited (released by a drain): honour it before running anything.
            handle.cancel(action);
        }
        let events = self
            .publisher
            .register(claimed.lease(), handle.control.clone());
        if handle.control.is_cancelled() {
            return self
                .end(claimed, handle, &events, json!({"outcome": "cancelled"}))
                .await;
        }
        let mut runner = match runners.take().await {
            Ok(runner) => runner,
            Err(err) => {
                tracing::warn!(run_id = %claimed.run_id, error = %err, "no python runner");
                return fail(pool, claimed, "PythonRunnerError", &err.to_string(), true).await;
            }
        };
        let saver = Saver::fenced(pool.clone(), claimed.thread_id.0, claimed.lease());
        let deadline = timeout.map(|timeout| Instant::now() + timeout);
        let ended = drive(&mut runner, claimed, handle, &events, &saver, deadline).await?;
        match ended {
            Ended::Done(done) => {
                // A runner that ran out of memory may hold on to it: a new one takes the next run.
                if done["retire"].as_bool().unwrap_or(false) {
                    runner.kill().await;
                } else {
                    runners.give_back(runner);
                }
                self.end(claimed, handle, &events, done).await
            }
            Ended::Gone(gone) => {
                runner.kill().await;
                match gone {
                    Gone::LeaseLost => Ok(Finish::LeaseLost),
                    Gone::Cancelled => {
                        self.end(claimed, handle, &events, json!({"outcome": "cancelled"}))
                            .await
                    }
                    Gone::TimedOut => {
                        tracing::info!(run_id = %claimed.run_id, "run timed out");
                        complete(&events, claimed, RunStatus::Timeout, ThreadStatus::Error).await
                    }
                    Gone::Died(why) => {
                        tracing::warn!(run_id = %claimed.run_id, why, "python runner died");
                        if !events.flush().await? {
                            return Ok(Finish::LeaseLost);
                        }
                        // The next attempt resumes from the last checkpoint.
                        fail(pool, claimed, "PythonRunnerDied", &why, true).await
                    }
                }
            }
        }
    }

    /// The transition for the runner's outcome.
    async fn end(
        &self,
        claimed: &ClaimedRun,
        handle: &RunHandle,
        events: &RunEvents,
        done: Value,
    ) -> Result<Finish, Error> {
        let pool = &self.pool;
        if events.lost() {
            return Ok(Finish::LeaseLost);
        }
        match done["outcome"].as_str().unwrap_or_default() {
            "success" => complete(events, claimed, RunStatus::Success, ThreadStatus::Idle).await,
            "interrupted" => {
                complete(
                    events,
                    claimed,
                    RunStatus::Success,
                    ThreadStatus::Interrupted,
                )
                .await
            }
            "cancelled" => match handle.cancel_action() {
                Some(CancelAction::Interrupt) => {
                    complete(events, claimed, RunStatus::Interrupted, ThreadStatus::Idle).await
                }
                // Its events go with it.
                Some(CancelAction::Rollback) => {
                    transition(claimed.roll_back(pool).await, Finish::RolledBack)
                }
                // The worker's own drain timeout: another worker resumes it.
                None => self.release(claimed, events, "drain timeout").await,
            },
            "drained" => {
                let reason = done["reason"].as_str().unwrap_or("shutdown").to_owned();
                self.release(claimed, events, &reason).await
            }
            _ => {
                if !events.flush().await? {
                    return Ok(Finish::LeaseLost);
                }
                let kind = done["error"].as_str().unwrap_or("Error");
                let message = done["message"].as_str().unwrap_or_default();
                let retryable = done["retryable"].as_bool().unwrap_or(false);
                tracing::warn!(run_id = %claimed.run_id, kind, message, retryable, "run failed");
                fail(pool, claimed, kind, message, retryable).await
            }
        }
    }

    async fn release(
        &self,
        claimed: &ClaimedRun,
        events: &RunEvents,
        reason: &str,
    ) -> Result<Finish, Error> {
        if !events.flush().await? {
            return Ok(Finish::LeaseLost);
        }
        transition(claimed.release(&self.pool, reason).await, Finish::Released)
    }
}

/// Hands the run to the runner and serves it until it reports its outcome or is gone.
async fn drive(
    runner: &mut Runner,
    claimed: &ClaimedRun,
    handle: &RunHandle,
    events: &RunEvents,
    saver: &Saver,
    deadline: Option<Instant>,
) -> Result<Ended, Error> {
    let control = &handle.control;
    if let Err(err) = runner
        .send(&json!({"t": "run", "run": runner::run_spec(claimed)}))
        .await
    {
        return Ok(Ended::Gone(Gone::Died(err.to_string())));
    }
    let mut drain_sent = false;
    let mut cancel_deadline: Option<Instant> = None;
    let far = Instant::now() + Duration::from_secs(86_400 * 365);
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
                let _ = runner.send(&json!({"t": "cancel"})).await;
            }
            () = control.drain_requested(), if !drain_sent => {
                drain_sent = true;
                let reason = control.drain_reason();
                let _ = runner.send(&json!({"t": "drain", "reason": reason})).await;
            }
            message = runner.next() => {
                let message = match message {
                    Ok(message) => message,
                    Err(err) => return Ok(Ended::Gone(Gone::Died(err.to_string()))),
                };
                match message["t"].as_str() {
                    Some("call") => match runner::call(saver, &message).await {
                        Ok(reply) => {
                            if let Err(err) = runner.send(&reply).await {
                                return Ok(Ended::Gone(Gone::Died(err.to_string())));
                            }
                        }
                        Err(QueueError::LeaseLost { .. }) => {
                            return Ok(Ended::Gone(Gone::LeaseLost));
                        }
                        Err(err) => return Err(err.into()),
                    },
                    Some("event") => {
                        let name = message["event"].as_str().unwrap_or("values");
                        events.push(NewEvent::new(name, message["data"].clone()));
                    }
                    Some("done") => return Ok(Ended::Done(message)),
                    _ => {
                        return Ok(Ended::Gone(Gone::Died(format!("unexpected message {message:.200}"))));
                    }
                }
            }
        }
    }
}
