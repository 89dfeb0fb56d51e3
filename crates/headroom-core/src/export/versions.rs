//! The library versions the exports were checked with: the reference suite's pins
//! (`tests/reference/requirements.txt`), which run every export (`tests/reference/test_export.py`).
//!
//! A test keeps these equal to `tests/reference/requirements.txt`.

/// (package, version) as pinned in `tests/reference/requirements.txt`; a test keeps them equal.
pub const CHECKED_WITH: [(&str, &str); 5] = [
    ("torch", "2.15.0"),
    ("transformers", "5.23.0"),
    ("accelerate", "1.15.0"),
    ("peft", "0.21.2"),
    ("deepspeed", "0.19.8"),
];

/// TRL, which runs the objectives other than SFT (`training_args.py` builds its trainer), as
/// pinned beside them; the same test keeps it equal.
pub const TRL_VERSION: &str = "1.16.0";

/// The header line every export carries (a comment in the scripts and YAML, a note beside the
/// JSON).
pub fn checked_with_line() -> String {
    format!(
        "Checked with {} (Headroom's reference suite builds and dry-runs this file on CPU; bitsandbytes and Liger kernels need CUDA and are not run there)",
        CHECKED_WITH
            .iter()
            .map(|(p, v)| format!("{p} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::CHECKED_WITH;

    /// The versions written into the exports are the reference suite's pins, so the header
    /// names what the dry runs actually ran.
    #[test]
    fn headers_name_the_reference_suites_pins() {
        let req = include_str!("../../../../tests/reference/requirements.txt");
        let pins: Vec<(&str, &str)> = req
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .filter_map(|l| l.trim().split_once("=="))
            .collect();
        for (p, v) in CHECKED_WITH
            .into_iter()
            .chain([("trl", super::TRL_VERSION)])
        {
            assert!(
                pins.contains(&(p, v)),
                "{p} {v} is not pinned in tests/reference/requirements.txt: {pins:?}"
            );
        }
    }
}
