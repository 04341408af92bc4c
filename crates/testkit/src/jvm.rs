//! Runs `testkit/java/Mm2Check.java`, a cross-check of Strait's MirrorMaker 2 records and topics
//! against Apache Kafka's own MM2 classes (`connect-mirror`, `connect-mirror-client`), with the
//! machine's JDK and the jars of [`kafka_libs`].
//!
//! The tool is compiled once into `.cache/mm2check/` (again whenever the `.java` file is newer
//! than its class). Its subcommands print one fact per line:
//! - `golden`: `heartbeat.key <hex>`, `heartbeat.value <hex>`, `checkpoint.key <hex>`,
//!   `checkpoint.value <hex>`, `offsetsync.key <hex>`, `offsetsync.value <hex>` (lower-case hex),
//!   serialized by MM2 for the golden values of the formats page (see [`golden_vectors`]).
//! - `decode BOOTSTRAP TOPIC offsetsync|checkpoint|heartbeat`: reads every partition of TOPIC
//!   from the beginning up to the end offsets taken at start and decodes each record with MM2's
//!   `deserializeRecord`: `ok <toString of the decoded object>` or
//!   `rejected <offset> <exception class>: <message>`; `missing <TOPIC>` when the topic does not
//!   exist; always last `total <n> ok <n> rejected <n>`.
//! - `translate BOOTSTRAP SOURCE_ALIAS GROUP`: `RemoteClusterUtils.translateOffsets` with a 30 s
//!   timeout: `offset <topic> <partition> <offset>` sorted by topic then partition, then
//!   `total <n>`. When the checkpoints topic (`<SOURCE_ALIAS>.checkpoints.internal` under the
//!   default policy) does not exist it prints `missing <topic>` and `total 0` without calling MM2,
//!   whose consumer would otherwise wait 60 s and throw a `TimeoutException`.
//! - `client BOOTSTRAP`: `MirrorClient`'s `upstream <alias>`, `heartbeats <topic>` and
//!   `checkpoints <topic>` lines, each group sorted.
//! - `producers BOOTSTRAP TOPIC`: Kafka's `Admin.describeProducers` over every partition of
//!   TOPIC: a `producer <partition> <producer id>` line per producer with state on the broker
//!   (sorted), then `total <n>`.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::SystemTime;

use crate::{kafka_libs, repo_root};

/// Serializes the freshness check and compilation among this process's threads; other processes
/// are kept apart by compiling into a private folder and renaming the classes into place.
static COMPILE: Mutex<()> = Mutex::new(());

/// Makes each compilation folder name unique within the process.
static COMPILE_SEQ: AtomicU64 = AtomicU64::new(0);

/// Heap cap for the tool's JVM.
const HEAP: &str = "-Xmx256m";

/// Runs `Mm2Check` with `args` (see the module docs for the subcommands) and returns its stdout.
///
/// Errors: Maven or the JDK missing, a compile failure, or a non-zero exit of the tool; the error
/// includes the arguments, the exit status and the tool's stderr.
pub fn mm2_check(args: &[&str]) -> io::Result<String> {
    let libs = kafka_libs()?;
    let classes = compiled(&libs)?;
    let out = Command::new(jdk_tool("java"))
        .arg(HEAP)
        .arg("-XX:TieredStopAtLevel=1")
        .arg("-Djava.awt.headless=true")
        .arg("-Dlog4j2.level=WARN")
        .arg("-cp")
        .arg(format!("{}:{}/*", classes.display(), libs.display()))
        .arg("Mm2Check")
        .args(args)
        .output()?;
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "Mm2Check {} failed ({}): {}{}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim_end(),
            if out.stdout.is_empty() {
                String::new()
            } else {
                format!("\nstdout: {}", String::from_utf8_lossy(&out.stdout).trim_end())
            }
        )));
    }
    String::from_utf8(out.stdout).map_err(io::Error::other)
}

/// MM2's serialization of the formats page's golden values, as `(name, lower-case hex)` pairs in
/// the tool's order: `heartbeat.key`, `heartbeat.value`, `checkpoint.key`, `checkpoint.value`,
/// `offsetsync.key`, `offsetsync.value`.
///
/// Errors: as [`mm2_check`], or a line of the output that is not `name hex`.
pub fn golden_vectors() -> io::Result<Vec<(String, String)>> {
    mm2_check(&["golden"])?
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| match line.split_once(' ') {
            Some((name, hex)) if !hex.is_empty() && hex.bytes().all(|b| b.is_ascii_hexdigit()) => {
                Ok((name.to_string(), hex.to_string()))
            }
            _ => Err(io::Error::other(format!("unexpected Mm2Check golden line: {line:?}"))),
        })
        .collect()
}

/// A JDK executable (`java`, `javac`): from `$JAVA_HOME/bin` when set, else from `PATH`.
fn jdk_tool(name: &str) -> PathBuf {
    std::env::var_os("JAVA_HOME")
        .map(|h| PathBuf::from(h).join("bin").join(name))
        .unwrap_or_else(|| PathBuf::from(name))
}

fn modified(path: &Path) -> Option<SystemTime> {
    fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// Returns the folder holding an up-to-date `Mm2Check.class`, compiling it first if needed.
fn compiled(libs: &Path) -> io::Result<PathBuf> {
    let root = repo_root();
    let source = root.join("testkit/java/Mm2Check.java");
    let classes = root.join(".cache/mm2check");
    let class = classes.join("Mm2Check.class");
    let _guard = COMPILE.lock().unwrap_or_else(|e| e.into_inner());
    let source_time = modified(&source)
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("{} not found", source.display())))?;
    if modified(&class).is_some_and(|t| t >= source_time) {
        return Ok(classes);
    }
    fs::create_dir_all(&classes)?;
    let tmp = classes.join(format!("tmp-{}-{}", std::process::id(), COMPILE_SEQ.fetch_add(1, Ordering::Relaxed)));
    let _ = fs::remove_dir_all(&tmp);
    fs::create_dir_all(&tmp)?;
    let result = compile_into(libs, &source, &tmp).and_then(|()| {
        // Move the main class last, so a concurrent freshness check never sees it before the
        // classes it needs.
        let mut files: Vec<PathBuf> = fs::read_dir(&tmp)?.map(|e| e.map(|e| e.path())).collect::<io::Result<_>>()?;
        files.sort_by_key(|p| p.file_name().is_some_and(|n| n == "Mm2Check.class"));
        for file in files {
            let name = file.file_name().expect("read_dir entries have names");
            fs::rename(&file, classes.join(name))?;
        }
        Ok(())
    });
    let _ = fs::remove_dir_all(&tmp);
    result.map(|()| classes)
}

fn compile_into(libs: &Path, source: &Path, dir: &Path) -> io::Result<()> {
    let out = Command::new(jdk_tool("javac"))
        .arg("-nowarn")
        .arg("-d")
        .arg(dir)
        .arg("-cp")
        .arg(format!("{}/*", libs.display()))
        .arg(source)
        .output()?;
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "javac {} failed ({}): {}{}",
            source.display(),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(())
}
