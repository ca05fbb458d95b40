//! The worker's publisher: one task that appends the events of all the worker's runs, and their
//! completions, in as few transactions as it can.
//!
//! A commit that NOTIFYs takes a global lock (Postgres serializes them), and every event append
//! notifies subscribers: notifying commits, not statements, are what limit a worker's throughput.
//! So runs never write their events, nor their endings, themselves. They buffer events; the
//! publisher takes every buffer and every ending waiting at that moment and writes them with one
//! statement (`ending::write`), so a run's last events and its ending always commit together.
//! A run's ending is written at once, and so is every event of a run a client streams from its
//! start (`streamed`: a chat's tokens), since a client waits for them: the event's own commit is
//! its whole delay, and whatever arrives while a transaction commits goes in the next one, so a
//! busy worker batches by itself and an idle one answers at the speed of one commit. A run nobody
//! streams (a wait, a background run) has its events wait at most [`FLUSH_INTERVAL`], written
//! with the next tick or its end: a short run's events and its end are one commit.
//!
//! Python graphs' runs also hand it the states their graphs described at checkpoints
//! ([`RunEvents::describe`]): written in the same transaction, before the events sent after them.
//!
//! A run whose lease turns out lost is cancelled and told so; nothing more is written for it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mostrador_graph::RunControl;
use mostrador_queue::db::{self, Connections};
use mostrador_queue::run::ending::{After, End};
use mostrador_queue::run::event;
use mostrador_queue::state::saver::Described;
use mostrador_queue::{Lease, NewEvent, RunId};

use crate::Error;
use mostrador_queue::PgPool;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::{Instant, MissedTickBehavior, interval_at};

/// How long a buffered event may wait to be appended.
pub const FLUSH_INTERVAL: Duration = Duration::from_millis(50);

/// A failed transaction is tried again this many times before its waiters get the error.
const TRIES: u32 = 3;

/// The handle runs use to reach the publisher task. Cheap to clone.
#[derive(Clone)]
pub struct Publisher {
    runs: Arc<Mutex<HashMap<RunId, Arc<Buffer>>>>,
    requests: mpsc::UnboundedSender<Request>,
    /// True once the task is gone. It never ends while a handle lives, so that is a bug (a
    /// panic): the worker stops claiming and exits, and its runs are told, not left hanging.
    stopped: watch::Receiver<bool>,
    task: Arc<tokio::task::AbortHandle>,
    /// Told the id of each run that hands its ending over, if anyone listens
    /// ([`Publisher::leaving`]).
    leaving: Arc<std::sync::OnceLock<mpsc::UnboundedSender<RunId>>>,
}

impl std::fmt::Debug for Publisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Publisher")
            .field("stopped", &*self.stopped.borrow())
            .finish_non_exhaustive()
    }
}

/// Says the publisher stopped when its task ends, whatever way (a panic unwinds through it).
struct Gone(watch::Sender<bool>);

impl Drop for Gone {
    fn drop(&mut self) {
        self.0.send_replace(true);
    }
}

#[derive(Debug)]
enum Request {
    /// A run has events that should not wait for the next tick.
    Wake,
    /// Append the run's events, then end it; `Ok(false)` when its lease was lost.
    End(End, oneshot::Sender<Result<bool, Error>>),
    /// Append everything buffered now; `Ok(false)` when the run's lease was lost.
    Flush(RunId, oneshot::Sender<Result<bool, Error>>),
}

/// One run's buffered events.
#[derive(Debug)]
struct Buffer {
    lease: Lease,
    control: RunControl,
    pending: Mutex<Pending>,
    /// A client streams it from its start: each event is written at once.
    streamed: bool,
    lost: AtomicBool,
    /// Its run holds its final checkpoint for its ending: what it buffers waits for the ending,
    /// so no event is visible before the checkpoint it follows.
    held: AtomicBool,
}

/// What a run has buffered: taken together, so a state is never written after an event that
/// was sent after it.
#[derive(Debug, Default)]
struct Pending {
    events: Vec<NewEvent>,
    described: Vec<Described>,
}

impl Pending {
    fn is_empty(&self) -> bool {
        self.events.is_empty() && self.described.is_empty()
    }
}

impl Buffer {
    fn lock(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending
            .lock()
            .expect("event buffer lock is never poisoned")
    }

    fn take(&self) -> Pending {
        std::mem::take(&mut *self.lock())
    }

    /// Puts what was taken back in front, after a transaction that did not commit.
    fn restore(&self, mut taken: Pending) {
        let mut buffered = self.lock();
        taken.events.append(&mut buffered.events);
        taken.described.append(&mut buffered.described);
        *buffered = taken;
    }
}

/// A run's access to the publisher: buffer events, flush, end. Unregisters on drop.
#[derive(Debug)]
pub struct RunEvents {
    buffer: Arc<Buffer>,
    publisher: Publisher,
}

impl Publisher {
    /// Starts the publisher task; it ends once every handle is dropped and its last flush is done.
    pub fn start(pool: PgPool) -> Self {
        Self::flushing_every(pool, FLUSH_INTERVAL)
    }

    /// As [`Publisher::start`], with buffered events waiting at most `interval`.
    pub fn flushing_every(pool: PgPool, interval: Duration) -> Self {
        let (requests, receiver) = mpsc::unbounded_channel();
        let (gone, stopped) = watch::channel(false);
        let runs = Arc::default();
        let task = tokio::spawn({
            let runs = Arc::clone(&runs);
            async move {
                let _gone = Gone(gone);
                publish(
                    Connections::kept(db::publisher(&pool)),
                    runs,
                    receiver,
                    interval,
                )
                .await;
            }
        });
        Self {
            runs,
            requests,
            stopped,
            task: Arc::new(task.abort_handle()),
            leaving: Arc::default(),
        }
    }

    /// The ids of the runs that hand their ending over from now on, as they do: a run is done
    /// executing then, and only waits for its ending's commit. Once per publisher.
    ///
    /// # Panics
    ///
    /// Called twice.
    pub fn leaving(&self) -> mpsc::UnboundedReceiver<RunId> {
        let (sender, receiver) = mpsc::unbounded_channel();
        assert!(
            self.leaving.set(sender).is_ok(),
            "one listener to the runs leaving a publisher"
        );
        receiver
    }

    /// Resolves when the task is gone (see [`Publisher::stopped`]'s field).
    pub async fn stopped(&self) {
        let mut stopped = self.stopped.clone();
        let _ = stopped.wait_for(|stopped| *stopped).await;
    }

    /// Ends the task, as a bug would: for the tests of what follows.
    #[doc(hidden)]
    pub fn abort(&self) {
        self.task.abort();
    }

    /// Registers a held run; `control` is cancelled if its lease turns out lost. A `streamed`
    /// run's events are written at once; another's wait for the next tick or its end.
    pub fn register(&self, lease: Lease, control: RunControl, streamed: bool) -> RunEvents {
        let buffer = Arc::new(Buffer {
            lease,
            control,
            pending: Mutex::default(),
            streamed,
            lost: AtomicBool::new(false),
            held: AtomicBool::new(false),
        });
        self.runs
            .lock()
            .expect("publisher lock is never poisoned")
            .insert(lease.run_id(), Arc::clone(&buffer));
        RunEvents {
            buffer,
            publisher: self.clone(),
        }
    }
}

impl RunEvents {
    /// Buffers an event. Never blocks: the engine calls it from its tasks.
    pub fn push(&self, event: NewEvent) {
        let first = {
            let mut pending = self.buffer.lock();
            pending.events.push(event);
            pending.events.len() == 1
        };
        if self.buffer.streamed && first {
            // Its client waits for it: no tick to wait for. (Events that come while this one
            // waits for its commit go with it, or in the next.)
            let _ = self.publisher.requests.send(Request::Wake);
        }
    }

    /// Buffers the state a Python graph described at one of its checkpoints. It is written with
    /// the next events or the completion; no client waits for it alone.
    pub fn describe(&self, described: Described) {
        self.buffer.lock().described.push(described);
    }

    /// From now on, what the run buffers is written with its ending, not before: its final
    /// checkpoint waits for the ending ([`mostrador_queue::PgCheckpointer::holding_final`]).
    pub fn hold_for_end(&self) {
        self.buffer.held.store(true, Ordering::SeqCst);
    }

    /// Whether the lease was found lost while appending.
    pub fn lost(&self) -> bool {
        self.buffer.lost.load(Ordering::SeqCst)
    }

    /// Appends what is buffered; `Ok(false)` when the lease was lost.
    ///
    /// # Errors
    ///
    /// The database failed, [`TRIES`] times.
    pub async fn flush(&self) -> Result<bool, Error> {
        self.request(|reply| Request::Flush(self.buffer.lease.run_id(), reply))
            .await
    }

    /// Appends what is buffered and writes the run's ending in the same transaction (a rollback
    /// drops what is buffered: its events go with it); `Ok(false)` when the lease was lost.
    ///
    /// # Errors
    ///
    /// The database failed, [`TRIES`] times.
    pub async fn end(&self, end: End) -> Result<bool, Error> {
        if let Some(leaving) = self.publisher.leaving.get() {
            let _ = leaving.send(self.buffer.lease.run_id());
        }
        self.request(|reply| Request::End(end, reply)).await
    }

    async fn request(
        &self,
        request: impl FnOnce(oneshot::Sender<Result<bool, Error>>) -> Request,
    ) -> Result<bool, Error> {
        let gone = || Error::Publish {
            message: "the publisher stopped".into(),
            transient: false,
        };
        let (reply, replied) = oneshot::channel();
        self.publisher
            .requests
            .send(request(reply))
            .map_err(|_| gone())?;
        replied.await.map_err(|_| gone())?
    }
}

impl Drop for RunEvents {
    fn drop(&mut self) {
        self.publisher
            .runs
            .lock()
            .expect("publisher lock is never poisoned")
            .remove(&self.buffer.lease.run_id());
    }
}

/// What one transaction carries out.
#[derive(Default)]
struct Batch {
    /// The tick came: every run's events go, not only the streamed runs'.
    tick: bool,
    ends: Vec<End>,
    /// Beside `ends`, in the same order.
    ended: Vec<oneshot::Sender<Result<bool, Error>>>,
    flushes: Vec<(RunId, oneshot::Sender<Result<bool, Error>>)>,
    tries: u32,
}

impl Batch {
    fn add(&mut self, request: Request) {
        match request {
            Request::Wake => {}
            Request::End(end, reply) => {
                self.ends.push(end);
                self.ended.push(reply);
            }
            Request::Flush(run_id, reply) => self.flushes.push((run_id, reply)),
        }
    }
}

async fn publish(
    connections: Connections,
    runs: Arc<Mutex<HashMap<RunId, Arc<Buffer>>>>,
    mut requests: mpsc::UnboundedReceiver<Request>,
    every: Duration,
) {
    // N.B. The first tick a whole period after the start, not at once as `interval`'s: a run
    // registered meanwhile would have its first events written alone, though nobody streams it.
    let mut tick = interval_at(Instant::now() + every, every);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut batch = Batch::default();
    loop {
        tokio::select! {
            request = requests.recv() => match request {
                Some(request) => batch.add(request),
                None => return,
            },
            _ = tick.tick() => batch.tick = true,
        }
        while let Ok(request) = requests.try_recv() {
            batch.add(request);
        }
        batch = flush(&connections, &runs, batch).await;
    }
}

/// Writes every buffer and the batch's endings in one transaction, and answers the batch.
/// Returns what must be tried again.
async fn flush(
    connections: &Connections,
    runs: &Mutex<HashMap<RunId, Arc<Buffer>>>,
    batch: Batch,
) -> Batch {
    let buffers: Vec<Arc<Buffer>> = runs
        .lock()
        .expect("publisher lock is never poisoned")
        .values()
        .filter(|buffer| {
            let ending = batch.ends.iter().any(|end| end.lease() == buffer.lease);
            let due = batch.tick
                || buffer.streamed
                || ending
                || batch
                    .flushes
                    .iter()
                    .any(|(run_id, _)| *run_id == buffer.lease.run_id());
            due && !buffer.lost.load(Ordering::SeqCst)
                && (!buffer.held.load(Ordering::SeqCst) || ending)
        })
        .cloned()
        .collect();
    let taken: Vec<(Arc<Buffer>, Pending)> = buffers
        .into_iter()
        .map(|buffer| {
            let pending = buffer.take();
            (buffer, pending)
        })
        .filter(|(buffer, pending)| {
            // A rolled back run's events go with it.
            !pending.is_empty()
                && !batch
                    .ends
                    .iter()
                    .any(|end| end.lease() == buffer.lease && end.after() == After::RolledBack)
        })
        .collect();
    if taken.is_empty() && batch.ends.is_empty() {
        for (_, reply) in batch.flushes {
            let _ = reply.send(Ok(true));
        }
        return Batch::default();
    }

    let appends: Vec<(Lease, &[NewEvent])> = taken
        .iter()
        .filter(|(_, pending)| !pending.events.is_empty())
        .map(|(buffer, pending)| (buffer.lease, pending.events.as_slice()))
        .collect();
    let described: Vec<(Lease, &[Described])> = taken
        .iter()
        .filter(|(_, pending)| !pending.described.is_empty())
        .map(|(buffer, pending)| (buffer.lease, pending.described.as_slice()))
        .collect();
    match event::publish(connections, &described, &appends, &batch.ends).await {
        Ok(lost) => {
            for (buffer, _) in &taken {
                if lost.contains(&buffer.lease) {
                    buffer.lost.store(true, Ordering::SeqCst);
                    buffer.control.cancel();
                }
            }
            let is_lost = |run_id: RunId| {
                lost.iter().any(|lease| lease.run_id() == run_id)
                    || runs
                        .lock()
                        .expect("publisher lock is never poisoned")
                        .get(&run_id)
                        .is_some_and(|buffer| buffer.lost.load(Ordering::SeqCst))
            };
            for (end, reply) in batch.ends.iter().zip(batch.ended) {
                let _ = reply.send(Ok(!is_lost(end.lease().run_id())));
            }
            for (run_id, reply) in batch.flushes {
                let _ = reply.send(Ok(!is_lost(run_id)));
            }
            Batch::default()
        }
        Err(err) => {
            for (buffer, pending) in taken {
                buffer.restore(pending);
            }
            let tries = batch.tries + 1;
            if tries < TRIES {
                tracing::warn!(error = %err, tries, "publishing events failed: trying again");
                return Batch { tries, ..batch };
            }
            tracing::error!(error = %err, "publishing events failed");
            let failed = || Error::Publish {
                message: err.to_string(),
                transient: err.is_transient(),
            };
            for reply in batch.ended {
                let _ = reply.send(Err(failed()));
            }
            for (_, reply) in batch.flushes {
                let _ = reply.send(Err(failed()));
            }
            Batch::default()
        }
    }
}
