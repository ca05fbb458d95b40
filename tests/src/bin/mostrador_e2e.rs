//! `mostrador` serving the retail graphs and the end-to-end test graphs (see the
//! `mostrador-tests` library).

use std::process::ExitCode;

fn main() -> ExitCode {
    mostrador::main(mostrador::GraphSet {
        build: |pool, model| {
            let mut graphs = mostrador_agents::graphs::all(pool, model);
            graphs.extend(mostrador_tests::graphs(pool));
            graphs
        },
        // `e2e_approval` stands for `cliente`: a decision for the managers of the store.
        decided_by_managers: &["cliente", "e2e_approval"],
        started_by_staff: mostrador_agents::graphs::STARTED_BY_STAFF,
    })
}
