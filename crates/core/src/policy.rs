//! The rate-sharing policy tree shared by PQP, BC-PQP and the shapers (algorithms.md §0).
//!
//! Leaves are queue indices; inner nodes are `fair` (round robin), `weighted` (weights) and
//! `priority` (strict order, first child highest), nested freely. In a config file:
//!
//! ```text
//! policy = "fair"                         # all queues, equal shares
//! policy = "weighted"                     # all queues, with weights = [1, 2, 3, 4]
//! policy = "priority"                     # queue 0 over queue 1 over ...
//! policy = "priority(0, weighted(1:1, 2:2))"
//! policy = "weighted(fair(0, 1):3, 2:1)"  # a child's weight follows ':' (default 1)
//! ```

use std::fmt;

/// A resolved policy tree whose leaves cover every queue `0..queues` exactly once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PolicyNode {
    Queue(usize),
    Fair(Vec<PolicyNode>),
    Weighted(Vec<(PolicyNode, u32)>),
    Priority(Vec<PolicyNode>),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    #[error("policy '{spec}': {message} at character {position}")]
    Syntax { spec: String, message: String, position: usize },
    #[error("policy names queue {queue} but there are only {queues} queues (0..{queues})")]
    QueueOutOfRange { queue: usize, queues: usize },
    #[error("policy names queue {0} twice")]
    DuplicateQueue(usize),
    #[error("policy never serves queue {0}: every queue must appear exactly once")]
    MissingQueue(usize),
    #[error("weights has {got} entries but there are {queues} queues")]
    WeightCount { got: usize, queues: usize },
    #[error("weight of zero for {0}: weights must be positive")]
    ZeroWeight(String),
    #[error("'weights' is only used with policy = \"weighted\"")]
    UnusedWeights,
    #[error("an empty {0}() has nothing to serve")]
    EmptyNode(&'static str),
}

impl PolicyNode {
    /// Parses `spec` for `queues` queues; `weights` feeds the flat `weighted` form.
    pub fn resolve(spec: &str, queues: usize, weights: Option<&[u32]>) -> Result<PolicyNode, PolicyError> {
        let trimmed = spec.trim();
        let all = || (0..queues).map(PolicyNode::Queue);
        let node = match trimmed {
            "fair" => PolicyNode::Fair(all().collect()),
            "priority" => PolicyNode::Priority(all().collect()),
            "weighted" => {
                let w = weights.map(<[u32]>::to_vec).unwrap_or_else(|| vec![1; queues]);
                if w.len() != queues {
                    return Err(PolicyError::WeightCount { got: w.len(), queues });
                }
                PolicyNode::Weighted(all().zip(w).collect())
            }
            _ => Parser { spec: trimmed, pos: 0 }.parse_all()?,
        };
        if weights.is_some() && trimmed != "weighted" {
            return Err(PolicyError::UnusedWeights);
        }
        node.check(queues)?;
        Ok(node)
    }

    fn check(&self, queues: usize) -> Result<(), PolicyError> {
        let mut seen = vec![false; queues];
        self.visit_leaves(&mut |q| {
            if q >= queues {
                return Err(PolicyError::QueueOutOfRange { queue: q, queues });
            }
            if std::mem::replace(&mut seen[q], true) {
                return Err(PolicyError::DuplicateQueue(q));
            }
            Ok(())
        })?;
        match seen.iter().position(|s| !s) {
            Some(q) => Err(PolicyError::MissingQueue(q)),
            None => Ok(()),
        }
    }

    /// Calls `f` with every leaf queue index, depth first, in child order.
    pub fn visit_leaves<E>(&self, f: &mut impl FnMut(usize) -> Result<(), E>) -> Result<(), E> {
        match self {
            PolicyNode::Queue(q) => f(*q),
            PolicyNode::Fair(c) | PolicyNode::Priority(c) => c.iter().try_for_each(|n| n.visit_leaves(f)),
            PolicyNode::Weighted(c) => c.iter().try_for_each(|(n, _)| n.visit_leaves(f)),
        }
    }
}

impl fmt::Display for PolicyNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |f: &mut fmt::Formatter<'_>, name: &str, c: &[PolicyNode]| {
            write!(f, "{name}(")?;
            for (i, n) in c.iter().enumerate() {
                write!(f, "{}{n}", if i > 0 { ", " } else { "" })?;
            }
            write!(f, ")")
        };
        match self {
            PolicyNode::Queue(q) => write!(f, "{q}"),
            PolicyNode::Fair(c) => list(f, "fair", c),
            PolicyNode::Priority(c) => list(f, "priority", c),
            PolicyNode::Weighted(c) => {
                write!(f, "weighted(")?;
                for (i, (n, w)) in c.iter().enumerate() {
                    write!(f, "{}{n}:{w}", if i > 0 { ", " } else { "" })?;
                }
                write!(f, ")")
            }
        }
    }
}

struct Parser<'a> {
    spec: &'a str,
    pos: usize,
}

impl Parser<'_> {
    fn err<T>(&self, message: impl Into<String>) -> Result<T, PolicyError> {
        Err(PolicyError::Syntax { spec: self.spec.to_string(), message: message.into(), position: self.pos })
    }

    fn skip_ws(&mut self) {
        while self.spec[self.pos..].starts_with(char::is_whitespace) {
            self.pos += 1;
        }
    }

    fn eat(&mut self, c: char) -> bool {
        self.skip_ws();
        if self.spec[self.pos..].starts_with(c) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn take_while(&mut self, pred: impl Fn(char) -> bool) -> &str {
        self.skip_ws();
        let start = self.pos;
        while self.spec[self.pos..].starts_with(&pred) {
            self.pos += 1;
        }
        &self.spec[start..self.pos]
    }

    fn number(&mut self) -> Result<u64, PolicyError> {
        let digits = self.take_while(|c| c.is_ascii_digit());
        match digits.parse() {
            Ok(n) => Ok(n),
            Err(_) => self.err("expected a number"),
        }
    }

    fn parse_all(mut self) -> Result<PolicyNode, PolicyError> {
        let node = self.node()?;
        self.skip_ws();
        if self.pos != self.spec.len() {
            return self.err("unexpected text after the policy");
        }
        Ok(node)
    }

    fn node(&mut self) -> Result<PolicyNode, PolicyError> {
        self.skip_ws();
        if self.spec[self.pos..].starts_with(|c: char| c.is_ascii_digit()) {
            let q = self.number()?;
            return Ok(PolicyNode::Queue(q.min(usize::MAX as u64) as usize));
        }
        let name = self.take_while(|c| c.is_ascii_alphabetic()).to_string();
        let kind: &'static str = match name.as_str() {
            "fair" => "fair",
            "weighted" => "weighted",
            "priority" => "priority",
            "" => return self.err("expected a queue number or fair(...), weighted(...), priority(...)"),
            _ => return self.err(format!("unknown policy '{name}' (expected fair, weighted or priority)")),
        };
        if !self.eat('(') {
            return self.err(format!("expected '(' after {kind}"));
        }
        let mut children = Vec::new();
        if !self.eat(')') {
            loop {
                let child = self.node()?;
                let weight = if self.eat(':') {
                    let w = self.number()?;
                    if w == 0 {
                        return Err(PolicyError::ZeroWeight(child.to_string()));
                    }
                    if kind != "weighted" {
                        return self.err(format!("a weight ':{w}' only makes sense inside weighted(...)"));
                    }
                    w.min(u32::MAX as u64) as u32
                } else {
                    1
                };
                children.push((child, weight));
                if self.eat(')') {
                    break;
                }
                if !self.eat(',') {
                    return self.err("expected ',' or ')'");
                }
            }
        }
        if children.is_empty() {
            return Err(PolicyError::EmptyNode(kind));
        }
        Ok(match kind {
            "fair" => PolicyNode::Fair(children.into_iter().map(|(n, _)| n).collect()),
            "priority" => PolicyNode::Priority(children.into_iter().map(|(n, _)| n).collect()),
            _ => PolicyNode::Weighted(children),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flat_forms_cover_all_queues() {
        assert_eq!(PolicyNode::resolve("fair", 2, None).unwrap(), PolicyNode::Fair(vec![PolicyNode::Queue(0), PolicyNode::Queue(1)]));
        let w = PolicyNode::resolve("weighted", 2, Some(&[1, 3])).unwrap();
        assert_eq!(w.to_string(), "weighted(0:1, 1:3)");
        assert!(matches!(PolicyNode::resolve("weighted", 3, Some(&[1, 3])), Err(PolicyError::WeightCount { .. })));
        assert!(matches!(PolicyNode::resolve("fair", 2, Some(&[1, 3])), Err(PolicyError::UnusedWeights)));
    }

    #[test]
    fn nested_round_trips() {
        let spec = "priority(0, weighted(1:1, 2:2))";
        let n = PolicyNode::resolve(spec, 3, None).unwrap();
        assert_eq!(n.to_string(), spec);
        let n = PolicyNode::resolve(" weighted( fair(0,1):3 , 2 ) ", 3, None).unwrap();
        assert_eq!(n.to_string(), "weighted(fair(0, 1):3, 2:1)");
    }

    #[test]
    fn errors_say_what_is_wrong() {
        assert!(matches!(PolicyNode::resolve("priority(0, 1)", 3, None), Err(PolicyError::MissingQueue(2))));
        assert!(matches!(PolicyNode::resolve("fair(0, 0)", 1, None), Err(PolicyError::DuplicateQueue(0))));
        assert!(matches!(PolicyNode::resolve("fair(0, 5)", 2, None), Err(PolicyError::QueueOutOfRange { queue: 5, .. })));
        assert!(matches!(PolicyNode::resolve("roundrobin", 2, None), Err(PolicyError::Syntax { .. })));
        assert!(matches!(PolicyNode::resolve("fair(0:2, 1)", 2, None), Err(PolicyError::Syntax { .. })));
        assert!(matches!(PolicyNode::resolve("weighted(0:0, 1)", 2, None), Err(PolicyError::ZeroWeight(_))));
        assert!(matches!(PolicyNode::resolve("fair()", 0, None), Err(PolicyError::EmptyNode("fair"))));
        assert!(matches!(PolicyNode::resolve("fair(0, 1", 2, None), Err(PolicyError::Syntax { .. })));
        let e = PolicyNode::resolve("fair(0, 1) x", 2, None).unwrap_err();
        assert!(e.to_string().contains("character 11"), "{e}");
    }
}
