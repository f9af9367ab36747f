//! `rcute`: the rcute command-line tool. Subcommands live in the `rcute_cli` library.

use clap::{Parser, Subcommand};
use rcute_cli::layout_cmd::{self, LayoutArgs};
use std::io::Write;
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "rcute", version, about = "rcute: CuTe's layout algebra and kernels in Rust")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Evaluate a layout-algebra expression, e.g. 'zipped_divide((128,64),[32,16])'.
    Layout(LayoutArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Layout(args) => match layout_cmd::run(&args) {
            Ok(out) => {
                // A closed stdout (e.g. `| head`) is not an error worth a panic.
                let _ = std::io::stdout().write_all(out.as_bytes());
                ExitCode::SUCCESS
            }
            Err(f) => {
                let _ = std::io::stderr().write_all(f.render(&args.expr).as_bytes());
                ExitCode::from(f.exit_code())
            }
        },
    }
}
