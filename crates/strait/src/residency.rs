//! Residency: topics restricted to compliance zones never reach a target outside them. Owns its
//! `[residency]` config types; a leaf below [`crate::config`].

use regex::Regex;
use serde::{Deserialize, Serialize};

use crate::rules::{compile, err, ConfigError};

/// Residency: which topics may be written to which zones (`[residency]`).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ResidencyConfig {
    /// What happens to a topic that no policy names: `allow` (default) or `deny`.
    #[serde(default)]
    pub default: ResidencyDefault,
    /// Policies; a topic named by several must pass them all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub policies: Vec<ResidencyPolicy>,
}

/// The rule for topics that no residency policy names.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ResidencyDefault {
    /// Replicate anywhere.
    #[default]
    Allow,
    /// Replicate nowhere.
    Deny,
}

/// One residency policy (`[[residency.policies]]`).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ResidencyPolicy {
    /// Name used in logs and errors.
    pub name: String,
    /// Regexes (whole-name match) of the topics it governs; matched against the source topic
    /// name and each suffix after a separator (so `eu.customers` is also `customers`), so
    /// renaming cannot escape it.
    pub topics: Vec<String>,
    /// If non-empty, every zone of the target must be listed here (a target with no zones fails).
    #[serde(default)]
    pub allow_zones: Vec<String>,
    /// No zone of the target may be listed here. Deny wins over allow.
    #[serde(default)]
    pub deny_zones: Vec<String>,
}

/// One compiled policy.
#[derive(Debug, Clone)]
struct Policy {
    name: String,
    topics: Vec<Regex>,
    allow_zones: Vec<String>,
    deny_zones: Vec<String>,
}

/// All residency policies, compiled; bound to a target with [`ResidencyRules::for_target`].
#[derive(Debug, Clone)]
pub struct ResidencyRules {
    default: ResidencyDefault,
    policies: Vec<Policy>,
}

impl ResidencyRules {
    /// Compiles `[residency]`. Errors name a bad regex or an empty policy name.
    pub fn compile(config: &ResidencyConfig) -> Result<Self, ConfigError> {
        let mut policies = Vec::new();
        for (i, p) in config.policies.iter().enumerate() {
            let field = format!("residency.policies[{i}]");
            if p.name.trim().is_empty() {
                return Err(err(format!("{field}.name"), "must not be empty"));
            }
            if p.topics.is_empty() {
                return Err(err(format!("{field}.topics"), "must list at least one regex"));
            }
            let topics = compile(&format!("{field}.topics"), &p.topics)?;
            if let Some(z) = p.allow_zones.iter().find(|z| p.deny_zones.contains(z)) {
                return Err(err(format!("{field}.deny_zones"), format!("zone {z:?} is both allowed and denied")));
            }
            policies.push(Policy {
                name: p.name.clone(),
                topics,
                allow_zones: p.allow_zones.clone(),
                deny_zones: p.deny_zones.clone(),
            });
        }
        Ok(Self { default: config.default, policies })
    }

    /// The gate for a target cluster with these zones.
    pub fn for_target(&self, alias: &str, zones: &[String]) -> ResidencyGate {
        ResidencyGate { rules: self.clone(), target_alias: alias.to_string(), target_zones: zones.to_vec() }
    }
}

/// Every name a topic may be known by: itself and each suffix after a `separator`. Under the
/// default policy that includes its original (first-hop) name; under identity naming it still
/// sees through MM2-style prefixed copies (`eu.customers` is also `customers`).
pub fn names_of<'a>(topic: &'a str, separator: &str) -> Vec<&'a str> {
    let mut names = vec![topic];
    names.extend(topic.match_indices(separator).map(|(i, _)| &topic[i + separator.len()..]));
    names
}

/// Decides, per topic, whether a given target cluster may hold it.
#[derive(Debug, Clone)]
pub struct ResidencyGate {
    rules: ResidencyRules,
    target_alias: String,
    target_zones: Vec<String>,
}

impl ResidencyGate {
    /// `Ok(())` when the target may hold the topic; otherwise the reason, naming the policy.
    ///
    /// `names` are the names the topic is known by (its source name and its original, first-hop
    /// name); a policy governs the topic when any of them matches. Every governing policy must pass:
    /// no target zone in `deny_zones`, and, when `allow_zones` is set, every target zone in it (a
    /// target without zones fails an allow list). A topic no policy governs follows the default.
    pub fn check(&self, names: &[&str]) -> Result<(), String> {
        let zones = &self.target_zones;
        let mut governed = false;
        for p in &self.rules.policies {
            if !names.iter().any(|n| p.topics.iter().any(|r| r.is_match(n))) {
                continue;
            }
            governed = true;
            if let Some(z) = zones.iter().find(|z| p.deny_zones.contains(z)) {
                return Err(format!("policy {:?} denies zone {z:?} of target {:?}", p.name, self.target_alias));
            }
            if !p.allow_zones.is_empty() {
                if zones.is_empty() {
                    return Err(format!(
                        "policy {:?} allows only zones {:?} and target {:?} declares no zones",
                        p.name, p.allow_zones, self.target_alias
                    ));
                }
                if let Some(z) = zones.iter().find(|z| !p.allow_zones.contains(z)) {
                    return Err(format!(
                        "policy {:?} allows only zones {:?}; target {:?} is in {z:?}",
                        p.name, p.allow_zones, self.target_alias
                    ));
                }
            }
        }
        if !governed && self.rules.default == ResidencyDefault::Deny {
            return Err("no residency policy names this topic and the default is deny".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(default: ResidencyDefault) -> ResidencyRules {
        ResidencyRules::compile(&ResidencyConfig {
            default,
            policies: vec![
                ResidencyPolicy {
                    name: "gdpr".into(),
                    topics: vec!["customers.*".into()],
                    allow_zones: vec!["eu".into()],
                    deny_zones: vec![],
                },
                ResidencyPolicy {
                    name: "no-cn".into(),
                    topics: vec![".*".into()],
                    allow_zones: vec![],
                    deny_zones: vec!["cn".into()],
                },
            ],
        })
        .unwrap()
    }

    #[test]
    fn decisions_table() {
        let z = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let cases: &[(ResidencyDefault, &[&str], &str, bool)] = &[
            (ResidencyDefault::Allow, &["eu"], "customers", true),
            (ResidencyDefault::Allow, &["us"], "customers", false),
            (ResidencyDefault::Allow, &["eu", "us"], "customers", false),
            (ResidencyDefault::Allow, &[], "customers", false),
            (ResidencyDefault::Allow, &["us"], "orders", true),
            (ResidencyDefault::Allow, &["eu", "cn"], "customers", false),
            (ResidencyDefault::Allow, &["cn"], "orders", false),
        ];
        for (default, zones, topic, ok) in cases {
            let gate = rules(*default).for_target("t", &z(zones));
            assert_eq!(gate.check(&[topic]).is_ok(), *ok, "{zones:?} {topic}");
        }
    }

    #[test]
    fn default_deny_blocks_unnamed_topics_only() {
        let gate = ResidencyRules::compile(&ResidencyConfig {
            default: ResidencyDefault::Deny,
            policies: vec![ResidencyPolicy {
                name: "eu".into(),
                topics: vec!["eu-.*".into()],
                allow_zones: vec!["eu".into()],
                deny_zones: vec![],
            }],
        })
        .unwrap()
        .for_target("t", &["eu".into()]);
        assert!(gate.check(&["eu-orders"]).is_ok());
        assert!(gate.check(&["orders"]).is_err());
    }

    #[test]
    fn renaming_cannot_escape_a_policy() {
        let gate = rules(ResidencyDefault::Allow).for_target("t", &["us".into()]);
        assert_eq!(names_of("a.b.customers", "."), vec!["a.b.customers", "b.customers", "customers"]);
        assert_eq!(names_of("a_customers", "_"), vec!["a_customers", "customers"]);
        for topic in ["src.customers", "eu-central.customers", "x.y.customers"] {
            assert!(gate.check(&names_of(topic, ".")).is_err(), "{topic} must stay out of us");
        }
        assert!(gate.check(&names_of("src.orders", ".")).is_ok());
    }
}
