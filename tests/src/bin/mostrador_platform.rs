//! `mostrador` with no Rust graph and no app: the platform alone, as a team that brings only its
//! own Python graphs (a `langgraph.json`) deploys it. `tests/python/run` serves its graphs with it,
//! under the default policy.

use std::process::ExitCode;

fn main() -> ExitCode {
    mostrador::main(mostrador::App::NONE)
}
