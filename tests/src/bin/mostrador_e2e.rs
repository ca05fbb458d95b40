//! `mostrador` serving the retail graphs and the end-to-end test graphs (see the
//! `mostrador-tests` library).

use std::process::ExitCode;

fn main() -> ExitCode {
    mostrador::main(mostrador::App {
        build: |pool, model| {
            let mut graphs = mostrador_retail::graphs::all(pool, model);
            graphs.extend(mostrador_tests::graphs(pool));
            graphs
        },
        // The retail policy; `e2e_approval` stands for `cliente`: a decision for the managers of
        // the store.
        policy: Some(concat!(
            include_str!("../../../apps/retail/policy.toml"),
            "\n[graphs.e2e_approval]\ndecide = [\"manager\"]\n"
        )),
        // Test graphs: served beside a `langgraph.json`'s too (the benchmarks compare them).
        example: false,
        ..mostrador_retail::APP
    })
}
