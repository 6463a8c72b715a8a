//! Budget sizes on the command line: a fraction of the machine (`0.5`) or an absolute amount
//! (`64m`, `1g`, `512`).

/// A share of a machine resource, or an absolute value.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Amount {
    /// A fraction in (0, 1].
    Fraction(f64),
    Absolute(u64),
}

impl Amount {
    /// The amount of `total` this stands for (at least 1).
    pub fn resolve(self, total: u64) -> u64 {
        match self {
            Amount::Fraction(f) => ((total as f64) * f).floor().max(1.0) as u64,
            Amount::Absolute(n) => n.max(1),
        }
    }

    /// Parses a fraction (it has a `.`: `0.5`, `1.0`) or a whole number with an optional
    /// binary suffix (`k`, `m`, `g`, `t`, any case, optionally followed by `b` or `ib`).
    pub fn parse(s: &str) -> Result<Self, String> {
        let s = s.trim();
        if s.contains('.') {
            return match s.parse::<f64>() {
                Ok(f) if f > 0.0 && f <= 1.0 => Ok(Amount::Fraction(f)),
                _ => Err(format!("`{s}` is not a fraction in (0, 1]")),
            };
        }
        let lower = s.to_ascii_lowercase();
        let digits_end = lower
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(lower.len());
        let (num, unit) = lower.split_at(digits_end);
        let shift = match unit.trim_end_matches("ib").trim_end_matches('b') {
            "" => 0,
            "k" => 10,
            "m" => 20,
            "g" => 30,
            "t" => 40,
            _ => return Err(format!("`{s}` has an unknown unit (use k, m, g or t)")),
        };
        let n: u64 = num.parse().map_err(|_| format!("`{s}` is not a number"))?;
        match n.checked_mul(1u64 << shift) {
            Some(v) if v > 0 => Ok(Amount::Absolute(v)),
            _ => Err(format!("`{s}` must be greater than zero and fit 64 bits")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_fractions_and_sizes() {
        assert_eq!(Amount::parse("0.5"), Ok(Amount::Fraction(0.5)));
        assert_eq!(Amount::parse("64m"), Ok(Amount::Absolute(64 << 20)));
        assert_eq!(Amount::parse("64MiB"), Ok(Amount::Absolute(64 << 20)));
        assert_eq!(Amount::parse("2G"), Ok(Amount::Absolute(2 << 30)));
        assert_eq!(Amount::parse("200"), Ok(Amount::Absolute(200)));
        for bad in ["0", "0.0", "1.5", "-1", "12x", "", "m"] {
            assert!(Amount::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn half_of_the_machine() {
        assert_eq!(Amount::Fraction(0.5).resolve(32768), 16384);
        assert_eq!(Amount::Absolute(100).resolve(32768), 100);
    }
}
