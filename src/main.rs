//! The `mostrador` binary: the command line of [`mostrador`] with the built-in graphs.

use std::process::ExitCode;

use mostrador_worker::Registry;

fn main() -> ExitCode {
    // The retail graphs register here when they land (the model client and graphs issue).
    mostrador::main(|_pool| Registry::new())
}
