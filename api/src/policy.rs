//! Authorization as a policy: what a caller (a subject, a tenant, roles) may do, graph by graph.
//!
//! A policy is declared in a TOML file (`mostrador api --policy FILE`), or is the one the binary's
//! graphs come with, or else [`Policy::default`]: owner-only, where every thread is its owner's
//! alone, as on the official server whose threads are their owners'. A file reads:
//!
//! ```toml
//! # Roles that see the whole queue (GET /queue, the dashboard's counts over every tenant).
//! operators = ["admin"]
//!
//! # Where a token's claims are (dot-separated paths; a roles claim is a name or a list).
//! [caller]
//! subject = "sub"
//! tenant = "org"
//! roles = "realm_access.roles"
//!
//! # Every graph, unless a table of its own says otherwise.
//! [graphs."*"]
//! start = ["*"]        # who starts runs: "*" is any caller
//! read = ["auditor"]   # roles that read their tenant's threads, besides the thread's owner
//! decide = ["owner"]   # who answers a thread's interrupts: "owner", roles of its tenant, "*"
//! crons = ["*"]        # who schedules runs (and must also be allowed to start them)
//!
//! [graphs.refunds]
//! decide = ["manager"] # a manager of the thread's tenant, not its owner
//! ```
//!
//! A graph's table takes what it leaves out from `graphs."*"`, which takes what it leaves out from
//! the owner-only defaults (`start = ["*"]`, `read = []`, `decide = ["owner"]`, `crons = ["*"]`).
//! Roles that decide a graph's interrupts also read its threads: nobody answers what they cannot
//! see. Whatever the policy, changing a thread (its metadata, its runs, deleting it) is its
//! owner's alone, and a thread the caller may not see answers exactly as a missing one
//! ([`crate::authorize`]).

use std::collections::{BTreeMap, BTreeSet};

use mostrador_queue::Thread;
use mostrador_queue::thread::Visibility;
use serde::Deserialize;

use crate::auth::{Caller, ClaimPaths};

/// Which callers a rule admits: any caller, or those with one of some roles.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Roles {
    any: bool,
    names: BTreeSet<String>,
}

impl Roles {
    /// Every caller.
    pub fn anyone() -> Self {
        Self {
            any: true,
            names: BTreeSet::new(),
        }
    }

    /// Callers with one of these roles.
    pub fn of<I: IntoIterator<Item = S>, S: Into<String>>(names: I) -> Self {
        Self {
            any: false,
            names: names.into_iter().map(Into::into).collect(),
        }
    }

    /// The roles named (besides `"*"`).
    pub fn names(&self) -> impl Iterator<Item = &String> {
        self.names.iter()
    }

    /// Whether `caller` is admitted.
    pub fn admit(&self, caller: &Caller) -> bool {
        self.any || caller.roles.iter().any(|role| self.names.contains(role))
    }
}

/// What callers may do with one graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rules {
    /// Who starts its runs, directly or by a cron.
    pub start: Roles,
    /// Who reads the threads of their tenant, besides each thread's owner.
    pub read: Roles,
    /// Whether a thread's owner answers its interrupts.
    pub owner_decides: bool,
    /// Who of the thread's tenant answers them.
    pub decide: Roles,
    /// Who schedules its runs (crons).
    pub crons: Roles,
}

impl Default for Rules {
    /// Owner-only.
    fn default() -> Self {
        Self {
            start: Roles::anyone(),
            read: Roles::default(),
            owner_decides: true,
            decide: Roles::default(),
            crons: Roles::anyone(),
        }
    }
}

impl Rules {
    /// Who of a thread's tenant sees it: its readers and its deciders.
    fn tenant_sees(&self, caller: &Caller) -> bool {
        self.read.admit(caller) || self.decide.admit(caller)
    }
}

/// An authorization policy; [`Policy::default`] is owner-only.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    /// Roles that see the whole queue.
    pub operators: Roles,
    /// The rules of graphs without rules of their own.
    pub default: Rules,
    /// Graphs' own rules.
    pub graphs: BTreeMap<String, Rules>,
}

/// A policy file read: where the claims are, and the policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyFile {
    /// `None` when the file has no `[caller]` table.
    pub claims: Option<ClaimPaths>,
    pub policy: Policy,
}

impl Policy {
    /// Reads a policy file's text.
    ///
    /// # Errors
    ///
    /// What is wrong with it: TOML syntax, an unknown key, `"owner"` where only roles go, an
    /// empty role name.
    pub fn parse(text: &str) -> Result<PolicyFile, String> {
        let file: File = toml::from_str(text).map_err(|err| err.to_string())?;
        let claims = file.caller.map(|caller| {
            let defaults = ClaimPaths::default();
            ClaimPaths {
                subject: caller.subject.unwrap_or(defaults.subject),
                tenant: caller.tenant.unwrap_or(defaults.tenant),
                roles: caller.roles.unwrap_or(defaults.roles),
            }
        });
        let mut graphs = file.graphs;
        let default = match graphs.remove("*") {
            Some(table) => table.over(&Rules::default(), "*")?,
            None => Rules::default(),
        };
        let graphs = graphs
            .into_iter()
            .map(|(graph_id, table)| Ok((graph_id.clone(), table.over(&default, &graph_id)?)))
            .collect::<Result<_, String>>()?;
        Ok(PolicyFile {
            claims,
            policy: Self {
                operators: roles(&file.operators, "operators", false)?.1,
                default,
                graphs,
            },
        })
    }

    /// The rules of `graph_id` (of a thread no run has bound to a graph yet: `None`).
    pub fn rules(&self, graph_id: Option<&str>) -> &Rules {
        graph_id
            .and_then(|graph_id| self.graphs.get(graph_id))
            .unwrap_or(&self.default)
    }

    /// Whether `caller` sees `thread`: its owner, or one its graph's rules let read its tenant's
    /// threads.
    pub fn sees(&self, caller: &Caller, thread: &Thread) -> bool {
        thread.owner == caller.subject
            || (same_tenant(caller, thread)
                && match thread.graph_id.as_deref() {
                    Some(graph_id) => self.rules(Some(graph_id)).tenant_sees(caller),
                    // No run has bound it yet, so it may become any graph's: read where the
                    // tenant's threads of every graph are read (as searches list it).
                    None => self.reads_every_graph(caller),
                })
    }

    /// Whether `caller` reads the threads of their tenant whatever their graph.
    fn reads_every_graph(&self, caller: &Caller) -> bool {
        self.default.tenant_sees(caller)
            && self.graphs.values().all(|rules| rules.tenant_sees(caller))
    }

    /// Whether `caller`, who sees `thread`, answers its interrupts. `graph_id`: the thread's
    /// graph, or the one a first run names.
    pub fn decides(&self, caller: &Caller, thread: &Thread, graph_id: &str) -> bool {
        let rules = self.rules(Some(thread.graph_id.as_deref().unwrap_or(graph_id)));
        (rules.owner_decides && thread.owner == caller.subject)
            || (same_tenant(caller, thread) && rules.decide.admit(caller))
    }

    /// Whether `caller` starts runs of `graph_id`.
    pub fn starts(&self, caller: &Caller, graph_id: &str) -> bool {
        self.rules(Some(graph_id)).start.admit(caller)
    }

    /// Whether `caller` schedules runs of `graph_id`.
    pub fn schedules(&self, caller: &Caller, graph_id: &str) -> bool {
        self.rules(Some(graph_id)).crons.admit(caller)
    }

    /// Whether `caller` sees the whole queue.
    pub fn is_operator(&self, caller: &Caller) -> bool {
        self.operators.admit(caller)
    }

    /// The threads `caller` sees, as the queue's searches filter them (the rule of
    /// [`Policy::sees`]); `served`: every graph the api serves.
    pub fn visibility<'a>(
        &self,
        caller: &Caller,
        served: impl Iterator<Item = &'a str>,
    ) -> Visibility {
        let mut visibility = Visibility::owner(caller.subject.clone());
        let Some(tenant) = &caller.tenant else {
            return visibility;
        };
        let everywhere = self.reads_every_graph(caller);
        let graphs: Vec<String> = if everywhere {
            Vec::new()
        } else {
            served
                .map(str::to_owned)
                .chain(self.graphs.keys().cloned())
                .filter(|graph_id| self.rules(Some(graph_id)).tenant_sees(caller))
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect()
        };
        if everywhere || !graphs.is_empty() {
            visibility.tenant = Some(tenant.clone());
            visibility.tenant_graphs = (!everywhere).then_some(graphs);
        }
        visibility
    }
}

fn same_tenant(caller: &Caller, thread: &Thread) -> bool {
    caller.tenant.is_some() && caller.tenant == thread.tenant
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    operators: Vec<String>,
    caller: Option<CallerTable>,
    #[serde(default)]
    graphs: BTreeMap<String, RulesTable>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CallerTable {
    subject: Option<String>,
    tenant: Option<String>,
    roles: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RulesTable {
    start: Option<Vec<String>>,
    read: Option<Vec<String>>,
    decide: Option<Vec<String>>,
    crons: Option<Vec<String>>,
}

impl RulesTable {
    /// These rules, taking what they leave out from `base`.
    fn over(self, base: &Rules, graph_id: &str) -> Result<Rules, String> {
        let field = |name: &str| format!("graphs.{graph_id:?}.{name}");
        let pick = |list: Option<Vec<String>>, name: &str, base: &Roles| match list {
            Some(list) => roles(&list, &field(name), false).map(|(_, roles)| roles),
            None => Ok::<_, String>(base.clone()),
        };
        let (owner_decides, decide) = match self.decide {
            Some(list) => roles(&list, &field("decide"), true)?,
            None => (base.owner_decides, base.decide.clone()),
        };
        Ok(Rules {
            start: pick(self.start, "start", &base.start)?,
            read: pick(self.read, "read", &base.read)?,
            owner_decides,
            decide,
            crons: pick(self.crons, "crons", &base.crons)?,
        })
    }
}

/// A list of role names, `"*"` (any caller) and, where `owner` is allowed, `"owner"`.
fn roles(list: &[String], field: &str, owner: bool) -> Result<(bool, Roles), String> {
    let mut found = (false, Roles::default());
    for name in list {
        match name.as_str() {
            "*" => found.1.any = true,
            "owner" if owner => found.0 = true,
            "owner" => {
                return Err(format!(
                    "{field}: \"owner\" names no role here (a thread's owner always reads and \
                     starts runs on it)"
                ));
            }
            "" => return Err(format!("{field}: a role's name may not be empty")),
            role => {
                found.1.names.insert(role.to_owned());
            }
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caller(subject: &str, roles: &[&str], tenant: Option<&str>) -> Caller {
        Caller::new(subject)
            .with_roles(roles.iter().copied())
            .in_tenant(tenant)
    }

    fn thread(owner: &str, tenant: &str, graph_id: &str) -> Thread {
        Thread {
            thread_id: mostrador_queue::ThreadId(uuid::Uuid::nil()),
            graph_id: Some(graph_id.into()),
            owner: owner.into(),
            tenant: Some(tenant.into()),
            status: mostrador_queue::ThreadStatus::Idle,
            metadata: serde_json::json!({}),
            created_at: chrono::Utc::now(),
            updated_at: chrono::Utc::now(),
            state_updated_at: chrono::Utc::now(),
        }
    }

    #[test]
    fn the_default_policy_is_owner_only() {
        let policy = Policy::default();
        let ana = thread("ana", "s1", "g");
        let boss = caller("boss", &["manager", "admin"], Some("s1"));
        assert!(policy.sees(&caller("ana", &[], None), &ana));
        assert!(!policy.sees(&boss, &ana));
        assert!(policy.decides(&caller("ana", &[], None), &ana, "g"));
        assert!(!policy.decides(&boss, &ana, "g"));
        assert!(policy.starts(&boss, "g") && policy.schedules(&boss, "g"));
        assert!(!policy.is_operator(&boss));
        assert_eq!(
            policy.visibility(&boss, ["g"].into_iter()),
            Visibility::owner("boss")
        );
    }

    #[test]
    fn a_graphs_table_takes_what_it_leaves_out_from_the_star_table() {
        let file = Policy::parse(
            r#"
            operators = ["manager"]
            [caller]
            tenant = "store"
            [graphs."*"]
            read = ["manager"]
            [graphs.cliente]
            decide = ["manager"]
            [graphs.compras]
            start = ["clerk", "manager"]
            crons = ["clerk", "manager"]
            [graphs.diario]
            read = []
            "#,
        )
        .expect("a policy");
        let claims = file.claims.expect("a caller table");
        assert_eq!(
            (
                claims.subject.as_str(),
                claims.tenant.as_str(),
                claims.roles.as_str()
            ),
            ("sub", "store", "roles")
        );
        let policy = file.policy;
        let marta = caller("marta", &["manager"], Some("s1"));
        let ana = caller("ana", &["customer"], Some("s1"));
        let other = caller("jordi", &["manager"], Some("s2"));
        assert!(policy.sees(&marta, &thread("ana", "s1", "tienda")));
        assert!(!policy.sees(&other, &thread("ana", "s1", "tienda")));
        assert!(!policy.sees(&marta, &thread("ana", "s1", "diario")));
        let unbound = Thread {
            graph_id: None,
            ..thread("ana", "s1", "g")
        };
        assert!(
            !policy.sees(&marta, &unbound),
            "a thread of no graph yet, where one graph's are not read"
        );
        let refund = thread("ana", "s1", "cliente");
        assert!(policy.decides(&marta, &refund, "cliente"));
        assert!(!policy.decides(&ana, &refund, "cliente"));
        assert!(!policy.decides(&other, &refund, "cliente"));
        assert!(policy.decides(&ana, &thread("ana", "s1", "tienda"), "tienda"));
        assert!(!policy.starts(&ana, "compras") && !policy.schedules(&ana, "compras"));
        assert!(policy.starts(&marta, "compras") && policy.starts(&ana, "tienda"));
        assert!(policy.is_operator(&marta) && !policy.is_operator(&ana));
        let visibility = policy.visibility(&marta, ["tienda", "diario"].into_iter());
        assert_eq!(visibility.tenant.as_deref(), Some("s1"));
        assert_eq!(
            visibility.tenant_graphs,
            Some(vec!["cliente".into(), "compras".into(), "tienda".into()])
        );
    }

    #[test]
    fn deciders_read_the_threads_they_decide() {
        let policy = Policy::parse("[graphs.g]\ndecide = [\"owner\", \"supervisor\"]")
            .expect("a policy")
            .policy;
        let sup = caller("sup", &["supervisor"], Some("t"));
        assert!(policy.sees(&sup, &thread("ana", "t", "g")));
        assert!(policy.decides(&sup, &thread("ana", "t", "g"), "g"));
        assert!(!policy.sees(&sup, &thread("ana", "t", "h")));
        assert_eq!(
            policy
                .visibility(&sup, ["g", "h"].into_iter())
                .tenant_graphs,
            Some(vec!["g".into()])
        );
    }

    #[test]
    fn mistakes_in_a_policy_file_are_refused_by_name() {
        for (text, says) in [
            ("[graphs.g]\nstrat = [\"*\"]", "strat"),
            ("[graphs.g]\nread = [\"owner\"]", "graphs.\"g\".read"),
            ("[graphs.g]\nstart = [\"\"]", "may not be empty"),
            ("operators = \"admin\"", "operators"),
            ("[caller]\nrole = \"x\"", "role"),
            ("[graphs.g", "graphs"),
        ] {
            let err = Policy::parse(text).expect_err(text);
            assert!(err.contains(says), "{text}: {err}");
        }
    }
}
