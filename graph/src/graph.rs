//! Defining a graph: channels, nodes, edges, conditional edges; compiled once, run many times.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use crate::channel::{Reducer, State};
use crate::node::{Command, END, Goto, NodeContext, NodeError, RetryPolicy, START};
use crate::{Error, Result};

type NodeFuture = Pin<Box<dyn Future<Output = std::result::Result<Command, NodeError>> + Send>>;
pub(crate) type NodeFn = Arc<dyn Fn(NodeContext) -> NodeFuture + Send + Sync>;
/// A conditional edge: where to go from the state after the source node's superstep.
pub(crate) type RouteFn = Arc<dyn Fn(&State) -> Vec<Goto> + Send + Sync>;

/// What a node runs.
#[derive(Clone)]
pub(crate) enum Body {
    /// A function of the state, under the node's retry policy and timeout.
    Fn(NodeFn),
    /// A compiled graph, which the engine runs as a subgraph.
    Graph(Graph),
}

/// A node and how it is run.
#[derive(Clone)]
pub(crate) struct NodeSpec {
    pub(crate) body: Body,
    pub(crate) retry: Option<RetryPolicy>,
    pub(crate) timeout: Option<Duration>,
}

/// Builds a graph. Names are checked when it is compiled.
///
/// ```
/// use mostrador_graph::{Command, END, Reducer, START, StateGraph};
/// use serde_json::json;
///
/// let graph = StateGraph::new()
///     .channel("messages", Reducer::Messages)
///     .node("greet", |ctx| async move {
///         let n = ctx.get("messages").and_then(|m| m.as_array()).map_or(0, Vec::len);
///         Ok(Command::new().set("messages", json!({"role": "ai", "content": format!("hola ({n})")})))
///     })
///     .edge(START, "greet")
///     .edge("greet", END)
///     .compile()
///     .expect("a valid graph");
/// assert_eq!(graph.nodes().collect::<Vec<_>>(), ["greet"]);
/// ```
#[derive(Default)]
pub struct StateGraph {
    channels: BTreeMap<String, Reducer>,
    nodes: BTreeMap<String, NodeSpec>,
    edges: Vec<(String, String)>,
    routes: Vec<(String, RouteFn)>,
}

impl std::fmt::Debug for StateGraph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateGraph")
            .field("channels", &self.channels)
            .field("nodes", &self.nodes.keys().collect::<Vec<_>>())
            .field("edges", &self.edges)
            .finish()
    }
}

impl StateGraph {
    pub fn new() -> Self {
        Self::default()
    }

    /// Declares a channel of the state and how its writes combine.
    pub fn channel(mut self, name: impl Into<String>, reducer: Reducer) -> Self {
        self.channels.insert(name.into(), reducer);
        self
    }

    /// Adds a node: an async function from its context to a [`Command`].
    pub fn node<F, Fut>(self, name: impl Into<String>, run: F) -> Self
    where
        F: Fn(NodeContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<Command, NodeError>> + Send + 'static,
    {
        self.node_with(name, run, None, None)
    }

    /// Adds a node with a retry policy (for retryable failures and timeouts) and a timeout per
    /// attempt.
    pub fn node_with<F, Fut>(
        mut self,
        name: impl Into<String>,
        run: F,
        retry: Option<RetryPolicy>,
        timeout: Option<Duration>,
    ) -> Self
    where
        F: Fn(NodeContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<Command, NodeError>> + Send + 'static,
    {
        let run: NodeFn = Arc::new(move |ctx| Box::pin(run(ctx)));
        self.nodes.insert(
            name.into(),
            NodeSpec {
                body: Body::Fn(run),
                retry,
                timeout,
            },
        );
        self
    }

    /// Adds a compiled graph as a node, as LangGraph does: it starts from the channels of the
    /// state it shares with this graph, runs with checkpoints of its own (in a namespace of the
    /// thread, `node:task`), streams its events under that namespace, and its interrupts are
    /// this node's (a resume of the thread resumes it). Its final values of the shared channels
    /// are the node's writes, through this graph's reducers.
    pub fn subgraph(mut self, name: impl Into<String>, graph: Graph) -> Self {
        self.nodes.insert(
            name.into(),
            NodeSpec {
                body: Body::Graph(graph),
                retry: None,
                timeout: None,
            },
        );
        self
    }

    /// After `from` runs, `to` runs in the next superstep. `from` may be [`START`], `to` [`END`].
    pub fn edge(mut self, from: impl Into<String>, to: impl Into<String>) -> Self {
        self.edges.push((from.into(), to.into()));
        self
    }

    /// After `from` runs, `route` chooses from the state where to go: node names, [`END`], or
    /// [`crate::Send`]s.
    pub fn conditional_edge<R, G>(mut self, from: impl Into<String>, route: R) -> Self
    where
        R: Fn(&State) -> Vec<G> + Send + Sync + 'static,
        G: Into<Goto>,
    {
        let route: RouteFn =
            Arc::new(move |state| route(state).into_iter().map(Into::into).collect());
        self.routes.push((from.into(), route));
        self
    }

    /// Checks the graph and freezes it.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidGraph`] for an edge to or from an unknown node, a reserved node name, or a
    /// graph without an entry point.
    pub fn compile(self) -> Result<Graph> {
        let invalid = |reason: String| Err(Error::InvalidGraph(reason));
        for name in self.nodes.keys() {
            if name == START || name == END || name.is_empty() {
                return invalid(format!("{name:?} is not a valid node name"));
            }
        }
        for (from, to) in &self.edges {
            if from != START && !self.nodes.contains_key(from) {
                return invalid(format!("edge from unknown node {from:?}"));
            }
            if to != END && !self.nodes.contains_key(to) {
                return invalid(format!("edge to unknown node {to:?}"));
            }
        }
        for (from, _) in &self.routes {
            if from != START && !self.nodes.contains_key(from) {
                return invalid(format!("conditional edge from unknown node {from:?}"));
            }
        }
        if !self.edges.iter().any(|(from, _)| from == START)
            && !self.routes.iter().any(|(from, _)| from == START)
        {
            return invalid("no edge from START: the graph has no entry point".into());
        }
        let mut edges: HashMap<String, Vec<String>> = HashMap::new();
        for (from, to) in self.edges {
            edges.entry(from).or_default().push(to);
        }
        let mut routes: HashMap<String, Vec<RouteFn>> = HashMap::new();
        for (from, route) in self.routes {
            routes.entry(from).or_default().push(route);
        }
        Ok(Graph {
            inner: Arc::new(Inner {
                channels: self.channels,
                nodes: self.nodes,
                edges,
                routes,
            }),
        })
    }
}

/// A compiled graph. Cheap to clone; run it any number of times concurrently.
#[derive(Clone)]
pub struct Graph {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) channels: BTreeMap<String, Reducer>,
    pub(crate) nodes: BTreeMap<String, NodeSpec>,
    pub(crate) edges: HashMap<String, Vec<String>>,
    pub(crate) routes: HashMap<String, Vec<RouteFn>>,
}

impl std::fmt::Debug for Graph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Graph")
            .field("channels", &self.inner.channels)
            .field("nodes", &self.inner.nodes.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Graph {
    /// The node names, sorted.
    pub fn nodes(&self) -> impl Iterator<Item = &str> {
        self.inner.nodes.keys().map(String::as_str)
    }

    /// The nodes that are compiled graphs, by name.
    pub fn subgraphs(&self) -> impl Iterator<Item = (&str, &Graph)> {
        self.inner
            .nodes
            .iter()
            .filter_map(|(name, spec)| match &spec.body {
                Body::Graph(graph) => Some((name.as_str(), graph)),
                Body::Fn(_) => None,
            })
    }

    /// The state's channel names, sorted.
    pub fn channels(&self) -> impl Iterator<Item = &str> {
        self.inner.channels.keys().map(String::as_str)
    }

    /// The fixed edges `(from, to)`, sorted; `from` may be [`START`], `to` [`END`].
    pub fn edges(&self) -> Vec<(&str, &str)> {
        let mut edges: Vec<(&str, &str)> = self
            .inner
            .edges
            .iter()
            .flat_map(|(from, tos)| tos.iter().map(move |to| (from.as_str(), to.as_str())))
            .collect();
        edges.sort_unstable();
        edges
    }

    /// The nodes (or [`START`]) whose successors a route chooses at run time, sorted.
    pub fn routed(&self) -> Vec<&str> {
        let mut routed: Vec<&str> = self.inner.routes.keys().map(String::as_str).collect();
        routed.sort_unstable();
        routed
    }
}
