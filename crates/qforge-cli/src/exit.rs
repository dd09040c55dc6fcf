//! Exit-code discipline: 0 success, 1 failed operation, 2 bad usage or bad input.

use std::fmt;

/// Why a command failed, which decides the exit code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The user's arguments or input files are wrong (exit 2).
    Input,
    /// The operation itself failed: I/O while writing, a missing device (exit 1).
    Failed,
}

/// An error with its exit-code kind; printed as one line on stderr.
pub struct CliError {
    pub kind: Kind,
    pub err: anyhow::Error,
}

impl CliError {
    pub fn code(&self) -> u8 {
        match self.kind {
            Kind::Input => 2,
            Kind::Failed => 1,
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The whole context chain on one line, without a cause the message before it already
        // quotes ("cannot open X: No such file…" is not followed by "No such file…" again).
        let mut line = String::new();
        for cause in self.err.chain() {
            let text = cause.to_string();
            if !line.contains(&text) {
                if !line.is_empty() {
                    line.push_str(": ");
                }
                line.push_str(&text);
            }
        }
        f.write_str(&line.replace('\n', " "))
    }
}

pub type CliResult<T> = Result<T, CliError>;

/// Classify any error: `.input()?` for bad input, `.failed()?` for a failed operation.
pub trait Classify<T> {
    fn input(self) -> CliResult<T>;
    fn failed(self) -> CliResult<T>;
}

impl<T, E: Into<anyhow::Error>> Classify<T> for Result<T, E> {
    fn input(self) -> CliResult<T> {
        self.map_err(|e| CliError { kind: Kind::Input, err: e.into() })
    }
    fn failed(self) -> CliResult<T> {
        self.map_err(|e| CliError { kind: Kind::Failed, err: e.into() })
    }
}

/// A bad-input error from a message.
pub fn bad_input(msg: impl fmt::Display) -> CliError {
    CliError { kind: Kind::Input, err: anyhow::anyhow!("{msg}") }
}

/// A failed-operation error from a message.
pub fn failed(msg: impl fmt::Display) -> CliError {
    CliError { kind: Kind::Failed, err: anyhow::anyhow!("{msg}") }
}
