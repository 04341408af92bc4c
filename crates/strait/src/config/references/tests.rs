use std::path::PathBuf;

use super::*;
use crate::config::Config;

/// A directory of this test's own, with `kafka.properties` (`password`, `user`) and a
/// Secret-like file `bootstrap`.
fn secrets(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("strait-references-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("kafka.properties"), "user = app-user\npassword=s3cr3t-in-file\n").unwrap();
    std::fs::write(dir.join("bootstrap"), "broker-1:9093").unwrap();
    dir
}

fn env(name: &str) -> Option<String> {
    (name == "SRC_HOST").then(|| "source.example".to_string())
}

#[test]
fn each_provider_resolves_alone_or_among_text() {
    let dir = secrets("each").display().to_string();
    let sources = Sources { env: &env };
    let cases = [
        ("${env:SRC_HOST}:9092", "source.example:9092"),
        (&format!("${{file:{dir}/kafka.properties:password}}"), "s3cr3t-in-file"),
        (&format!("${{directory:{dir}:bootstrap}},${{env:SRC_HOST}}:1"), "broker-1:9093,source.example:1"),
        // Not references: no colon (Kafka's rule), or no closing brace.
        ("topic-${name}", "topic-${name}"),
        ("a ${env:SRC_HOST", "a ${env:SRC_HOST"),
    ];
    for (text, want) in cases {
        assert_eq!(resolve(text, &sources).as_deref(), Ok(want), "{text}");
    }
}

#[test]
fn an_unresolvable_reference_is_named_and_no_value_shown() {
    let dir = secrets("errors").display().to_string();
    let sources = Sources { env: &env };
    let cases = [
        ("${env:NOT_SET}".to_string(), "`${env:NOT_SET}`: the environment variable NOT_SET is not set"),
        (format!("${{file:{dir}/kafka.properties:token}}"), "has no key token"),
        (format!("${{file:{dir}/missing.properties:password}}"), "cannot read"),
        (format!("${{directory:{dir}:missing}}"), "cannot read"),
        (format!("${{directory:{dir}:../kafka.properties}}"), "FILE a file name in DIR"),
        ("${vault:secret/kafka:password}".to_string(), "no config provider `vault`"),
    ];
    for (text, want) in cases {
        let why = resolve(&text, &sources).unwrap_err();
        assert!(why.contains(want) && why.contains(&text), "{text}: {why}");
        assert!(!why.contains("s3cr3t") && !why.contains("app-user"), "{why}");
    }
}

#[test]
fn a_config_read_resolves_every_string_and_names_the_field_at_fault() {
    let dir = secrets("config").display().to_string();
    let cluster = |alias: &str, password: &str| {
        format!(
            "[[clusters]]\nalias = \"{alias}\"\nbootstrap_servers = \"${{directory:{dir}:bootstrap}}\"\n\
             [clusters.client]\n\"sasl.username\" = \"${{file:{dir}/kafka.properties:user}}\"\n\
             \"sasl.password\" = \"{password}\"\n"
        )
    };
    let password = format!("${{file:{dir}/kafka.properties:password}}");
    let text = format!("{}{}[[flows]]\nsource = \"a\"\ntarget = \"b\"\n", cluster("a", &password), cluster("b", "x"));
    let flows = Config::parse(&text).unwrap();
    let source = &flows[0].source;
    assert_eq!(source.bootstrap_servers, "broker-1:9093");
    assert_eq!(source.client["sasl.username"], "app-user");
    assert_eq!(source.client["sasl.password"], "s3cr3t-in-file");
    assert!(!format!("{source:?}").contains("s3cr3t"), "Debug shows the resolved password");

    let broken = text.replacen(&password, &format!("${{file:{dir}/kafka.properties:nope}}"), 1);
    let e = Config::parse(&broken).unwrap_err().to_string();
    assert!(e.starts_with("clusters[0].client.\"sasl.password\": `${file:"), "{e}");
    let in_a_list = format!("{text}topics = [\"t\", \"${{env:STRAIT_TEST_UNSET_{}}}\"]\n", std::process::id());
    let e = Config::parse(&in_a_list).unwrap_err().to_string();
    assert!(e.starts_with("flows[0].topics[1]: `${env:STRAIT_TEST_UNSET_"), "{e}");
}

#[test]
fn errors_show_no_secret_whether_written_or_referenced() {
    let dir = secrets("redact").display().to_string();
    let base = "[[clusters]]\nalias = \"a\"\nbootstrap_servers = \"x:1\"\n[clusters.client]\n";
    let flow = "[[flows]]\nsource = \"a\"\ntarget = \"b\"\n[[clusters]]\nalias = \"b\"\nbootstrap_servers = \"y:1\"\n";
    let cases = [
        // A syntax error: the line and column, not the line.
        format!("{base}\"sasl.password\" = \"s3cr3t-in-file\n{flow}"),
        // A secret of the wrong type.
        format!("{base}\"sasl.password\" = 98765432112345\n{flow}").replace("98765432112345", "98765s3cr3t"),
        // A referenced value in a setting whose name does not say secret, refused later.
        format!("{base}\"ssl.ca.location\" = \"${{file:{dir}/kafka.properties:password}}\"\n{flow}"),
        // ... or in a flow's setting.
        format!("{base}{flow}[[flows]]\nsource = \"b\"\ntarget = \"a\"\ntopics = [\"(${{file:{dir}/kafka.properties:password}}\"]\n"),
    ];
    for text in &cases {
        let e = match Config::parse(text) {
            Err(e) => e.to_string(),
            Ok(_) => crate::config::cluster::check_client_files(&Config::read(text).unwrap().clusters)
                .map_err(|e| redact(e, &["s3cr3t-in-file".to_string()]))
                .unwrap_err()
                .to_string(),
        };
        assert!(!e.contains("s3cr3t"), "{e}");
    }
    let e = Config::parse(&cases[0]).unwrap_err().to_string();
    assert!(e.contains("TOML syntax at line 5, column"), "{e}");
}
