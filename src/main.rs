//! The `mostrador` binary: the command line of [`mostrador`] with the four retail graphs.

use std::process::ExitCode;

fn main() -> ExitCode {
    mostrador::main(mostrador_retail::APP)
}
