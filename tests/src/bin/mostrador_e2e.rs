//! `mostrador` serving the end-to-end test graphs (see the `mostrador-tests` library).

use std::process::ExitCode;

fn main() -> ExitCode {
    mostrador::main(mostrador_tests::graphs)
}
