//! Starts real Apache Kafka clusters for Strait's tests, demo and benchmark.
//!
//! Each cluster is one combined KRaft node (`process.roles=broker,controller`) run with the
//! machine's JDK from a classpath folder resolved from Maven Central (`testkit/pom.xml`, cached in
//! the git-ignored `.cache/`). Clusters listen on free loopback ports, are ready once they answer a
//! Metadata request, and die with the process that started them (`PR_SET_PDEATHSIG`), so no JVM is
//! left behind even when that process is killed.

use std::fs;
use std::io;
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub mod clients;
pub mod jvm;
pub mod multi;
pub mod oidc;
mod ports;
pub mod proxy;
pub mod sample;
pub mod secure;

pub use proxy::TcpProxy;

use ports::{free_ports, port_taken};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};

/// Apache Kafka version used for brokers, MirrorMaker 2 and the Java compatibility checks.
pub const KAFKA_VERSION: &str = "4.1.1";

/// Broker heap cap; test brokers need far less than the 1 GB of Kafka's own scripts.
pub(crate) const HEAP: &str = "-Xmx512m";

/// How long a broker may take to answer Metadata after its JVM starts.
pub(crate) const READY_TIMEOUT: Duration = Duration::from_secs(120);

/// The repository root: two levels above this crate.
/// The slots a Strait instance said it owns last, from its log text (its `slots owned by this
/// instance ... slots=[0, 3]` lines); `None` before the first such line.
pub fn owned_slots(log: &str) -> Option<std::collections::BTreeSet<u32>> {
    let line = log.lines().rev().find(|l| l.contains("slots owned by this instance"))?;
    let list = line.split("slots=[").nth(1)?.split(']').next()?;
    Some(list.split(',').filter_map(|s| s.trim().parse().ok()).collect())
}

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("repo root exists")
}

/// Returns the folder holding every Kafka jar, resolving it with Maven on first use.
///
/// Errors: Maven missing or failing (its output is in the error).
pub fn kafka_libs() -> io::Result<PathBuf> {
    let root = repo_root();
    let libs = root.join(".cache").join(format!("kafka-{KAFKA_VERSION}")).join("libs");
    if libs.join(format!("kafka_2.13-{KAFKA_VERSION}.jar")).exists() {
        return Ok(libs);
    }
    let out = Command::new("mvn")
        .args(["-B", "-q", "dependency:copy-dependencies", "-DincludeScope=runtime"])
        .arg(format!("-DoutputDirectory={}", libs.display()))
        .arg(format!("-Dkafka.version={KAFKA_VERSION}"))
        .current_dir(root.join("testkit"))
        .output()?;
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "mvn dependency:copy-dependencies failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(libs)
}

/// A running single-node KRaft cluster. Dropping it kills the broker.
pub struct KafkaCluster {
    /// `host:port` clients connect to (the advertised PLAINTEXT listener).
    pub bootstrap: String,
    /// `host:port` the client listener binds (the same as `bootstrap` unless behind a proxy).
    pub listener: String,
    /// `host:port` of the broker's own PLAINTEXT listener: no proxy, no authentication, every
    /// right (`ANONYMOUS` is a super user where an authorizer runs), for test setup.
    pub internal: String,
    /// Folder with `server.properties`, `data/` and `server.log`.
    pub dir: PathBuf,
    libs: PathBuf,
    child: Child,
}

impl KafkaCluster {
    /// OS process id of the broker JVM.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Kills the broker with SIGKILL (no clean shutdown) and waits for it to exit.
    pub fn kill(&mut self) -> io::Result<()> {
        self.child.kill()?;
        self.child.wait().map(|_| ())
    }

    /// Starts the broker again on the same data and ports (after [`KafkaCluster::kill`]), and
    /// waits until it answers. Errors as [`start_clusters`].
    pub fn restart(&mut self) -> io::Result<()> {
        if self.child.try_wait()?.is_none() {
            self.kill()?;
        }
        self.child = spawn_broker(&self.libs, &self.dir)?;
        wait_ready(self)
    }
}

impl Drop for KafkaCluster {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `count` independent clusters under `base` (one sub-folder each, wiped first), in
/// parallel, and waits until every one answers Metadata.
///
/// Errors: Maven/JDK failures, a storage format failure, or a broker not ready within 120 s
/// (the error names its log file).
pub fn start_clusters(count: usize, base: &Path) -> io::Result<Vec<KafkaCluster>> {
    let libs = kafka_libs()?;
    let mut clusters = Vec::with_capacity(count);
    for i in 0..count {
        let dir = base.join(format!("cluster-{i}"));
        clusters.push(launch(&libs, &dir, Launch::default())?);
    }
    for c in &mut clusters {
        // A port found free can be taken by another process before the broker binds it: such a
        // broker exits at once, and is started again on new ports (twice at most).
        ports::wait_started(c, wait_ready, lost_its_port, |c| {
            let dir = c.dir.clone();
            *c = launch(&libs, &dir, Launch::default())?;
            Ok(())
        })?;
    }
    Ok(clusters)
}

/// Whether `cluster`'s broker exited because a port of its was taken ([`port_taken`]).
fn lost_its_port(cluster: &mut KafkaCluster) -> bool {
    let exited = cluster.child.try_wait().ok().flatten().is_some();
    exited && port_taken(&cluster.dir)
}

/// Starts one cluster under `base` that clients reach only through a [`TcpProxy`] (its
/// advertised listener is the proxy), so a test can cut and heal the network between clients and
/// the broker. Errors as [`start_clusters`].
pub fn start_cluster_behind_proxy(base: &Path) -> io::Result<(KafkaCluster, TcpProxy)> {
    start_cluster_behind(&base.join("cluster-proxied"), TcpProxy::start)
}

/// Starts one cluster in `dir` whose advertised client listener is a relay that `relay` starts
/// on the listener it is given, forwarding to the broker's `host:port` (a [`TcpProxy`], or the
/// benchmark's delay proxy for a far cluster). Setup goes through [`KafkaCluster::internal`],
/// which no relay stands in front of. Errors as [`start_clusters`], or `relay`'s.
pub fn start_cluster_behind<P>(
    dir: &Path,
    relay: impl FnOnce(TcpListener, &str) -> io::Result<P>,
) -> io::Result<(KafkaCluster, P)> {
    let libs = kafka_libs()?;
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let proxy_port = listener.local_addr()?.port();
    let how = Launch { advertised: Some(proxy_port), ..Launch::default() };
    let mut cluster = launch(&libs, dir, how)?;
    let proxy = relay(listener, &cluster.listener)?;
    wait_ready(&mut cluster)?;
    Ok((cluster, proxy))
}

/// A KRaft cluster id: 16 random bytes, URL-safe base64 without padding (22 characters), not
/// starting with `-` (the storage tool would read it as an option).
pub(crate) fn cluster_id() -> io::Result<String> {
    loop {
        let id = random_cluster_id()?;
        if !id.starts_with('-') {
            return Ok(id);
        }
    }
}

fn random_cluster_id() -> io::Result<String> {
    let mut bytes = [0u8; 16];
    io::Read::read_exact(&mut fs::File::open("/dev/urandom")?, &mut bytes)?;
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut bits = 0u32;
    let mut nbits = 0;
    let mut out = String::with_capacity(22);
    for b in bytes {
        bits = (bits << 8) | b as u32;
        nbits += 8;
        while nbits >= 6 {
            nbits -= 6;
            out.push(ALPHABET[((bits >> nbits) & 63) as usize] as char);
        }
    }
    out.push(ALPHABET[((bits << (6 - nbits)) & 63) as usize] as char);
    Ok(out)
}

/// `java` (from `JAVA_HOME` when set) with `heap` options, Kafka's classpath `libs`, logs in
/// `dir`, and the project's log4j2 settings.
pub(crate) fn java_command(libs: &Path, dir: &Path, heap: &[&str]) -> Command {
    let java =
        std::env::var("JAVA_HOME").map(|h| PathBuf::from(h).join("bin/java")).unwrap_or_else(|_| PathBuf::from("java"));
    let mut cmd = Command::new(java);
    cmd.args(heap)
        .arg("-XX:+UseG1GC")
        .arg("-Djava.awt.headless=true")
        .arg(format!("-Dkafka.logs.dir={}", dir.display()))
        .arg(format!("-Dlog4j2.configurationFile={}", repo_root().join("testkit/log4j2.properties").display()))
        .arg("-cp")
        .arg(format!("{}/*", libs.display()));
    cmd
}

/// Broker settings every test and bench cluster shares, whatever its layout.
/// - Records are never deleted for their age: tests write records stamped years ago (fidelity
///   keeps them exact), and the broker's retention check, every 5 minutes, would delete them
///   mid-test wherever a run's timing put it.
/// - Ended delayed fetches leave the fetch purgatory after 100 more requests instead of 1,000:
///   librdkafka names every assigned partition in each fetch, and idle wide consumers otherwise
///   fill a broker's heap with ended ones (bench/FINDINGS.md, "Wide layouts").
pub(crate) const SHARED_PROPERTIES: &str = "log.retention.ms=-1\nfetch.purgatory.purge.interval.requests=100\n";

/// How [`launch`] sets a cluster up beyond the defaults.
#[derive(Default)]
pub(crate) struct Launch {
    /// Clients are told to connect to this port (a proxy's) instead of the listener's.
    pub(crate) advertised: Option<u16>,
    /// A SASL_SSL client listener instead of PLAINTEXT.
    pub(crate) secure: Option<secure::Listener>,
}

/// Formats and starts a cluster in `dir`. The broker talks to itself, and tests set up their data,
/// on a PLAINTEXT `INTERNAL` listener whatever the client listener is.
pub(crate) fn launch(libs: &Path, dir: &Path, how: Launch) -> io::Result<KafkaCluster> {
    let _ = fs::remove_dir_all(dir);
    fs::create_dir_all(dir)?;
    let [port, internal, ctrl] = free_ports()?;
    let advertised = how.advertised.unwrap_or(port);
    let name = if how.secure.is_some() { "SASL_SSL" } else { "PLAINTEXT" };
    let props = dir.join("server.properties");
    fs::write(
        &props,
        format!(
            "process.roles=broker,controller\n\
             node.id=1\n\
             controller.quorum.voters=1@127.0.0.1:{ctrl}\n\
             listeners={name}://127.0.0.1:{port},INTERNAL://127.0.0.1:{internal},CONTROLLER://127.0.0.1:{ctrl}\n\
             advertised.listeners={name}://127.0.0.1:{advertised},INTERNAL://127.0.0.1:{internal}\n\
             listener.security.protocol.map={name}:{name},INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT\n\
             controller.listener.names=CONTROLLER\n\
             inter.broker.listener.name=INTERNAL\n\
             log.dirs={data}\n\
             num.partitions=1\n\
             auto.create.topics.enable=false\n\
             offsets.topic.replication.factor=1\n\
             offsets.topic.num.partitions=4\n\
             transaction.state.log.replication.factor=1\n\
             transaction.state.log.min.isr=1\n\
             transaction.state.log.num.partitions=4\n\
             share.coordinator.state.topic.replication.factor=1\n\
             share.coordinator.state.topic.min.isr=1\n\
             group.initial.rebalance.delay.ms=0\n\
             log.cleaner.backoff.ms=1000\n\
             {SHARED_PROPERTIES}\
             {secure}",
            data = dir.join("data").display(),
            secure = how.secure.as_ref().map(secure::Listener::properties).unwrap_or_default(),
        ),
    )?;
    let mut format = java_command(libs, dir, &[HEAP]);
    format.arg("kafka.tools.StorageTool").args(["format", "-t", &cluster_id()?, "-c"]).arg(&props);
    for scram in how.secure.iter().flat_map(secure::Listener::scram_users) {
        format.args(["--add-scram", &scram]);
    }
    let format = format.output()?;
    if !format.status.success() {
        return Err(io::Error::other(format!(
            "kafka storage format failed in {}: {}",
            dir.display(),
            String::from_utf8_lossy(&format.stderr)
        )));
    }
    let child = spawn_broker(libs, dir)?;
    Ok(KafkaCluster {
        bootstrap: format!("127.0.0.1:{advertised}"),
        listener: format!("127.0.0.1:{port}"),
        internal: format!("127.0.0.1:{internal}"),
        dir: dir.to_path_buf(),
        libs: libs.to_path_buf(),
        child,
    })
}

/// Starts MirrorMaker 2 in dedicated mode (`org.apache.kafka.connect.mirror.MirrorMaker`, from
/// the same Maven artifacts as the brokers) with `props` written to `dir/mm2.properties`, its
/// output to `dir/mm2.log`, and the heap of Kafka's `connect-mirror-maker.sh`. It dies with the
/// thread that started it. Errors: Maven/JDK failures, or the folder cannot be written.
pub fn start_mirror_maker(dir: &Path, props: &str) -> io::Result<Child> {
    let libs = kafka_libs()?;
    fs::create_dir_all(dir)?;
    fs::write(dir.join("mm2.properties"), props)?;
    let log = fs::OpenOptions::new().create(true).append(true).open(dir.join("mm2.log"))?;
    // The heap of Kafka's connect-mirror-maker.sh.
    let mut cmd = java_command(&libs, dir, &["-Xms256M", "-Xmx2G"]);
    cmd.arg("org.apache.kafka.connect.mirror.MirrorMaker")
        .arg(dir.join("mm2.properties"))
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    die_with_parent(&mut cmd);
    cmd.spawn()
}

/// Asks the kernel to kill the child when the thread that spawned it exits, so no JVM outlives
/// the process that started it.
fn die_with_parent(cmd: &mut Command) {
    // SAFETY: prctl is async-signal-safe; it only sets the parent-death signal of the child.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Starts the broker of the formatted folder `dir`.
pub(crate) fn spawn_broker(libs: &Path, dir: &Path) -> io::Result<Child> {
    let props = dir.join("server.properties");
    let log = fs::OpenOptions::new().create(true).append(true).open(dir.join("stdout.log"))?;
    let mut cmd = java_command(libs, dir, &[HEAP]);
    cmd.arg("kafka.Kafka").arg(&props).stdin(Stdio::null()).stdout(log.try_clone()?).stderr(log);
    die_with_parent(&mut cmd);
    cmd.spawn()
}

pub(crate) fn wait_ready(cluster: &mut KafkaCluster) -> io::Result<()> {
    let (address, dir) = (cluster.internal.clone(), cluster.dir.clone());
    let what = format!("broker at {}", cluster.bootstrap);
    await_brokers(&address, 1, &dir, &what, || Ok(cluster.child.try_wait()?.map(|s| format!("exited with {s}"))))
}

/// Asks `address` for Metadata every 200 ms until it lists at least `brokers` brokers. `exited`
/// says why the process waited for is gone (`None` while it runs). Errors, naming `what` and
/// `dir`'s `server.log`: it exited, or it is not ready within [`READY_TIMEOUT`].
pub(crate) fn await_brokers(
    address: &str,
    brokers: usize,
    dir: &Path,
    what: &str,
    mut exited: impl FnMut() -> io::Result<Option<String>>,
) -> io::Result<()> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", address)
        .set("log_level", "0")
        .create()
        .map_err(io::Error::other)?;
    let log = dir.join("server.log");
    let start = Instant::now();
    loop {
        if let Some(why) = exited()? {
            return Err(io::Error::other(format!("{what} {why}; see {}", log.display())));
        }
        match consumer.fetch_metadata(None, Duration::from_secs(1)) {
            Ok(md) if md.brokers().len() >= brokers => return Ok(()),
            _ if start.elapsed() > READY_TIMEOUT => {
                return Err(io::Error::other(format!(
                    "{what} not ready after {READY_TIMEOUT:?}; see {}",
                    log.display()
                )))
            }
            _ => std::thread::sleep(Duration::from_millis(200)),
        }
    }
}
