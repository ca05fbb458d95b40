//! `mostrador` serving the retail graphs and the end-to-end test graphs (see the
//! `mostrador-tests` library).

use std::process::ExitCode;

fn main() -> ExitCode {
    mostrador::main(|pool, model| {
        let mut graphs = mostrador_agents::graphs::all(pool, model);
        graphs.extend(mostrador_tests::graphs(pool));
        graphs
    })
}
