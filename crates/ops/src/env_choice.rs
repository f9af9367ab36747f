//! Settings read from one environment variable that names one of a few choices
//! (`RCUTE_TUNING`, `RCUTE_AWQ_PREFETCH`, `RCUTE_MOE_PREFETCH`): the variable's name and
//! its choices are data of the setting's type; parsing, the default for an unset or empty
//! variable, and the warning for an unknown value are this module's, once for all of them.
//!
//! ```
//! use rcute_ops::env_choice::EnvChoice;
//!
//! #[derive(Clone, Copy, Debug, PartialEq)]
//! enum Colour { Red, Blue }
//! impl EnvChoice for Colour {
//!     const VAR: &'static str = "EXAMPLE_COLOUR";
//!     const CHOICES: &'static [(&'static str, Self)] = &[("red", Colour::Red), ("blue", Colour::Blue)];
//! }
//! assert_eq!(Colour::parse(None), (Colour::Red, None));
//! assert_eq!(Colour::parse(Some(" blue ")), (Colour::Blue, None));
//! let (c, warning) = Colour::parse(Some("green"));
//! assert_eq!(c, Colour::Red);
//! assert_eq!(warning.unwrap(), r#"EXAMPLE_COLOUR="green" is not red or blue: using red"#);
//! ```

/// A setting named by the value of the environment variable [`EnvChoice::VAR`].
pub trait EnvChoice: Copy + 'static {
    /// The environment variable.
    const VAR: &'static str;
    /// The names the variable may hold and what each means; the first is the default
    /// (unset, empty, or an unknown name).
    const CHOICES: &'static [(&'static str, Self)];

    /// The setting `value` names (surrounding white space ignored): the default for `None`
    /// or an empty value; for an unknown name the default and the warning to print.
    fn parse(value: Option<&str>) -> (Self, Option<String>) {
        let (default_name, default) = Self::CHOICES[0];
        let value = value.map(str::trim).unwrap_or("");
        if value.is_empty() {
            return (default, None);
        }
        match Self::CHOICES.iter().find(|(name, _)| *name == value) {
            Some(&(_, choice)) => (choice, None),
            None => {
                let names: Vec<&str> = Self::CHOICES.iter().map(|(name, _)| *name).collect();
                let (last, rest) = names.split_last().expect("a setting has choices");
                let listed = if rest.is_empty() {
                    last.to_string()
                } else {
                    format!("{} or {last}", rest.join(", "))
                };
                (
                    default,
                    Some(format!("{}={value:?} is not {listed}: using {default_name}", Self::VAR)),
                )
            }
        }
    }

    /// [`EnvChoice::parse`] of the variable as the process sees it now.
    fn read_env() -> (Self, Option<String>) {
        Self::parse(std::env::var(Self::VAR).ok().as_deref())
    }

    /// [`EnvChoice::read_env`] with its warning printed to stderr: callers keep the result
    /// in a `OnceLock` so that a process reads (and warns) once.
    fn read_env_warning_printed() -> Self {
        let (choice, warning) = Self::read_env();
        if let Some(w) = warning {
            eprintln!("rcute: {w}");
        }
        choice
    }
}
