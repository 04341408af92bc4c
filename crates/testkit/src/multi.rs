//! A three-broker Apache Kafka cluster that looks like production (see `shared/kafka-notes.md`):
//! three combined KRaft nodes (`process.roles=broker,controller`, node ids 1–3, one voter each),
//! replication factor 3 and `min.insync.replicas=2` for every topic (internal ones included),
//! unclean leader election off. One node at a time can be killed (SIGKILL), stopped with a
//! controlled shutdown (SIGTERM), paused (SIGSTOP/SIGCONT) and restarted on the same data and
//! ports: Kafka's own replication system tests bounce partition leaders this way.
//!
//! `strait-testkit up --three-node` holds one such cluster for the whole suite and serves
//! [`Control`] requests on a loopback port (`STRAIT_TEST_THREE_NODE_CONTROL`), so tests in another
//! process can bounce its nodes; the JVMs stay children of that process's main thread (their
//! `PR_SET_PDEATHSIG` follows the spawning thread).

mod partitions;

use std::fs;
use std::io::{self, BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

pub use self::partitions::{fully_replicated, leader, partitions, PartitionState};
use crate::ports::{self, free_ports, port_taken};
use crate::{await_brokers, cluster_id, java_command, kafka_libs, spawn_broker, HEAP, SHARED_PROPERTIES};

/// Node ids of the cluster.
pub const NODE_IDS: [i32; 3] = [1, 2, 3];

/// Longest a controlled shutdown (SIGTERM) may take before [`ThreeNodeCluster::stop`] fails.
const STOP_TIMEOUT: Duration = Duration::from_secs(120);

/// Longest a [`Control`] request may take (a restart waits for the node to answer).
const CONTROL_TIMEOUT: Duration = Duration::from_secs(300);

/// One KRaft node of a [`ThreeNodeCluster`].
struct Node {
    id: i32,
    /// `127.0.0.1:port` of its PLAINTEXT listener (clients and replication).
    address: String,
    /// Folder with `server.properties`, `data/` and `server.log`.
    dir: PathBuf,
    /// The JVM; `None` once killed or stopped.
    child: Option<Child>,
    paused: bool,
}

impl Node {
    fn pid(&self) -> io::Result<libc::pid_t> {
        let child = self.child.as_ref().ok_or_else(|| io::Error::other(format!("node {} is down", self.id)))?;
        libc::pid_t::try_from(child.id()).map_err(io::Error::other)
    }

    fn signal(&self, signal: libc::c_int) -> io::Result<()> {
        // SAFETY: kill(2) on our own child's pid.
        if unsafe { libc::kill(self.pid()?, signal) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Whether the JVM runs (paused counts as running); reaps it once it exited.
    fn running(&mut self) -> io::Result<bool> {
        let Some(child) = self.child.as_mut() else { return Ok(false) };
        if child.try_wait()?.is_some() {
            self.child = None;
            self.paused = false;
            return Ok(false);
        }
        Ok(true)
    }
}

/// A running three-node cluster. Dropping it kills every node.
pub struct ThreeNodeCluster {
    /// Every node's `host:port`, comma-separated (a `bootstrap.servers` value).
    pub bootstrap: String,
    libs: PathBuf,
    /// The folder given to [`Self::launch`].
    base: PathBuf,
    nodes: Vec<Node>,
}

impl ThreeNodeCluster {
    /// Formats three nodes under `base/three-node/node-<id>` (wiped first) with one cluster id
    /// and starts them, without waiting: see [`Self::wait_ready`]. Errors: Maven/JDK failures, a
    /// storage format failure.
    pub fn launch(base: &Path) -> io::Result<Self> {
        let libs = kafka_libs()?;
        let ports: [u16; 6] = free_ports()?;
        let (clients, controllers) = ports.split_at(NODE_IDS.len());
        let voters: Vec<String> =
            NODE_IDS.iter().zip(controllers).map(|(id, port)| format!("{id}@127.0.0.1:{port}")).collect();
        let cluster = cluster_id()?;
        let mut nodes = Vec::with_capacity(NODE_IDS.len());
        for ((&id, client), controller) in NODE_IDS.iter().zip(clients).zip(controllers) {
            let dir = base.join("three-node").join(format!("node-{id}"));
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir_all(&dir)?;
            fs::write(dir.join("server.properties"), properties(id, *client, *controller, &voters.join(","), &dir))?;
            format_storage(&libs, &dir, &cluster)?;
            nodes.push(Node { id, address: format!("127.0.0.1:{client}"), dir, child: None, paused: false });
        }
        // All three at once: each node waits for a quorum of voters.
        for node in &mut nodes {
            node.child = Some(spawn_broker(&libs, &node.dir)?);
        }
        let bootstrap = nodes.iter().map(|n| n.address.as_str()).collect::<Vec<_>>().join(",");
        Ok(Self { bootstrap, libs, base: base.to_path_buf(), nodes })
    }

    /// Waits until every node answers Metadata listing all three brokers. Errors: a node exited,
    /// or is not ready within 120 s (the error names its log).
    pub fn wait_ready(&mut self) -> io::Result<()> {
        for id in NODE_IDS {
            self.wait_node(id)?;
        }
        Ok(())
    }

    /// [`Self::wait_ready`] after [`Self::launch`]. A node whose port another process bound
    /// between the search for free ports and the node's bind exits at once (its log says
    /// `Address already in use`); the whole cluster then starts again on new ports (every node's
    /// settings name the voters' ports), twice at most. Errors as [`Self::wait_ready`].
    pub fn wait_started(&mut self) -> io::Result<()> {
        ports::wait_started(self, Self::wait_ready, Self::lost_a_port, |cluster| {
            cluster.kill_all();
            *cluster = Self::launch(&cluster.base.clone())?;
            Ok(())
        })
    }

    /// Whether a node exited because a port of its was taken.
    fn lost_a_port(&mut self) -> bool {
        self.nodes.iter_mut().any(|n| !n.running().unwrap_or(true) && port_taken(&n.dir))
    }

    /// Kills every node still running and waits for each to exit.
    fn kill_all(&mut self) {
        for node in &mut self.nodes {
            if let Some(mut child) = node.child.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }

    /// `(node id, host:port)` of every node.
    pub fn nodes(&self) -> Vec<(i32, String)> {
        self.nodes.iter().map(|n| (n.id, n.address.clone())).collect()
    }

    /// Kills node `id` with SIGKILL (no controlled shutdown) and waits for it to exit.
    /// Errors: no such node, or it is already down.
    pub fn kill(&mut self, id: i32) -> io::Result<()> {
        let node = self.node(id)?;
        let mut child = node.child.take().ok_or_else(|| io::Error::other(format!("node {id} is already down")))?;
        node.paused = false;
        child.kill()?;
        child.wait().map(|_| ())
    }

    /// Stops node `id` gracefully: SIGTERM (Kafka's controlled shutdown moves its leaderships
    /// away first), then waits up to 120 s for the JVM to exit. A paused node is continued first.
    /// Errors: no such node, it is down, or it did not exit in time (it is then killed).
    pub fn stop(&mut self, id: i32) -> io::Result<()> {
        let node = self.node(id)?;
        node.signal(libc::SIGTERM)?;
        if node.paused {
            node.signal(libc::SIGCONT)?;
        }
        let deadline = Instant::now() + STOP_TIMEOUT;
        while node.running()? {
            if Instant::now() > deadline {
                let _ = node.signal(libc::SIGKILL);
                return Err(io::Error::other(format!(
                    "node {id} did not exit within {STOP_TIMEOUT:?} of SIGTERM (killed); see {}",
                    node.dir.join("server.log").display()
                )));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(())
    }

    /// Pauses node `id` (SIGSTOP): it holds its connections and answers nothing, like a long GC
    /// pause or a frozen VM. Errors: no such node, or it is down.
    pub fn pause(&mut self, id: i32) -> io::Result<()> {
        let node = self.node(id)?;
        node.signal(libc::SIGSTOP)?;
        node.paused = true;
        Ok(())
    }

    /// Continues node `id` after [`Self::pause`] (SIGCONT). Errors: no such node, or it is down.
    pub fn resume(&mut self, id: i32) -> io::Result<()> {
        let node = self.node(id)?;
        node.signal(libc::SIGCONT)?;
        node.paused = false;
        Ok(())
    }

    /// Starts node `id` again on the same data and ports (killing it first if it still runs) and
    /// waits until it answers. Errors as [`Self::wait_ready`].
    pub fn restart(&mut self, id: i32) -> io::Result<()> {
        let libs = self.libs.clone();
        let node = self.node(id)?;
        if node.running()? {
            self.kill(id)?;
        }
        let node = self.node(id)?;
        node.child = Some(spawn_broker(&libs, &node.dir)?);
        self.wait_node(id)
    }

    /// Brings the cluster back whole: continues paused nodes, restarts those down, and waits until
    /// every node answers. Errors as [`Self::restart`].
    pub fn heal(&mut self) -> io::Result<()> {
        for id in NODE_IDS {
            let node = self.node(id)?;
            if !node.running()? {
                self.restart(id)?;
            } else if node.paused {
                self.resume(id)?;
            }
        }
        self.wait_ready()
    }

    fn node(&mut self, id: i32) -> io::Result<&mut Node> {
        self.nodes.iter_mut().find(|n| n.id == id).ok_or_else(|| io::Error::other(format!("no node {id}")))
    }

    /// Waits until node `id` (and only it: its own address as bootstrap) answers Metadata
    /// listing every broker.
    fn wait_node(&mut self, id: i32) -> io::Result<()> {
        let node = self.node(id)?;
        let (address, dir) = (node.address.clone(), node.dir.clone());
        let what = format!("node {id} at {address}");
        await_brokers(&address, NODE_IDS.len(), &dir, &what, || Ok((!node.running()?).then(|| "exited".to_string())))
    }

    /// Serves the [`Control`] requests waiting on `listener` (non-blocking), one at a time, on
    /// the calling thread (which must outlive the nodes it restarts). Errors: the listener
    /// failed; a failed request is answered to its client instead.
    pub fn serve_pending(&mut self, listener: &TcpListener) -> io::Result<()> {
        listener.set_nonblocking(true)?;
        loop {
            let stream = match listener.accept() {
                Ok((stream, _)) => stream,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) => return Err(e),
            };
            // A client that went away is its own problem; the next request is served all the same.
            let _ = self.answer(stream);
        }
    }

    /// Reads one request line from `stream`, runs it, and answers `ok` or `error <why>`.
    fn answer(&mut self, stream: TcpStream) -> io::Result<()> {
        stream.set_nonblocking(false)?;
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        let mut line = String::new();
        BufReader::new(&stream).read_line(&mut line)?;
        let outcome = match line.split_whitespace().collect::<Vec<_>>().as_slice() {
            ["heal"] => self.heal(),
            [verb, id] => match id.parse::<i32>() {
                Ok(id) => match *verb {
                    "kill" => self.kill(id),
                    "stop" => self.stop(id),
                    "restart" => self.restart(id),
                    "pause" => self.pause(id),
                    "resume" => self.resume(id),
                    _ => Err(io::Error::other(format!("unknown request {verb:?}"))),
                },
                Err(_) => Err(io::Error::other(format!("node id {id:?} is not a number"))),
            },
            _ => Err(io::Error::other(format!("unknown request {:?}", line.trim()))),
        };
        let reply = match outcome {
            Ok(()) => "ok\n".to_string(),
            Err(e) => format!("error {}\n", e.to_string().replace('\n', " ")),
        };
        (&stream).write_all(reply.as_bytes())
    }
}

impl Drop for ThreeNodeCluster {
    fn drop(&mut self) {
        self.kill_all();
    }
}

/// The node settings: a combined KRaft node of a three-voter quorum, RF 3 / min ISR 2 for every
/// topic. Fenced 6 s after its last heartbeat (Kafka's default 9 s) so bounces resume sooner.
fn properties(id: i32, client: u16, controller: u16, voters: &str, dir: &Path) -> String {
    format!(
        "process.roles=broker,controller\n\
         node.id={id}\n\
         controller.quorum.voters={voters}\n\
         listeners=PLAINTEXT://127.0.0.1:{client},CONTROLLER://127.0.0.1:{controller}\n\
         advertised.listeners=PLAINTEXT://127.0.0.1:{client}\n\
         listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT\n\
         controller.listener.names=CONTROLLER\n\
         inter.broker.listener.name=PLAINTEXT\n\
         log.dirs={data}\n\
         num.partitions=1\n\
         auto.create.topics.enable=false\n\
         default.replication.factor=3\n\
         min.insync.replicas=2\n\
         unclean.leader.election.enable=false\n\
         offsets.topic.replication.factor=3\n\
         offsets.topic.num.partitions=4\n\
         transaction.state.log.replication.factor=3\n\
         transaction.state.log.min.isr=2\n\
         transaction.state.log.num.partitions=4\n\
         share.coordinator.state.topic.replication.factor=3\n\
         share.coordinator.state.topic.min.isr=2\n\
         broker.heartbeat.interval.ms=1000\n\
         broker.session.timeout.ms=6000\n\
         group.initial.rebalance.delay.ms=0\n\
         {SHARED_PROPERTIES}",
        data = dir.join("data").display(),
    )
}

/// `kafka.tools.StorageTool format` of the node in `dir` with cluster id `cluster`.
fn format_storage(libs: &Path, dir: &Path, cluster: &str) -> io::Result<()> {
    let mut format = java_command(libs, dir, &[HEAP]);
    format.arg("kafka.tools.StorageTool").args(["format", "-t", cluster, "-c"]).arg(dir.join("server.properties"));
    let out = format.output()?;
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "kafka storage format failed in {}: {}",
            dir.display(),
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(())
}

/// A client of the [`ThreeNodeCluster`] held by `strait-testkit up --three-node`: each call is
/// one request (a line over a new loopback connection) answered once done.
#[derive(Clone, Debug)]
pub struct Control {
    /// `host:port` of the control listener.
    pub addr: String,
}

impl Control {
    /// [`ThreeNodeCluster::kill`] node `id`.
    pub fn kill(&self, id: i32) -> io::Result<()> {
        self.request(&format!("kill {id}"))
    }

    /// [`ThreeNodeCluster::stop`] node `id` (SIGTERM, waits for the exit).
    pub fn stop(&self, id: i32) -> io::Result<()> {
        self.request(&format!("stop {id}"))
    }

    /// [`ThreeNodeCluster::restart`] node `id` (waits until it answers).
    pub fn restart(&self, id: i32) -> io::Result<()> {
        self.request(&format!("restart {id}"))
    }

    /// [`ThreeNodeCluster::pause`] node `id` (SIGSTOP).
    pub fn pause(&self, id: i32) -> io::Result<()> {
        self.request(&format!("pause {id}"))
    }

    /// [`ThreeNodeCluster::resume`] node `id` (SIGCONT).
    pub fn resume(&self, id: i32) -> io::Result<()> {
        self.request(&format!("resume {id}"))
    }

    /// [`ThreeNodeCluster::heal`]: every node up and continued.
    pub fn heal(&self) -> io::Result<()> {
        self.request("heal")
    }

    fn request(&self, line: &str) -> io::Result<()> {
        let stream = TcpStream::connect(&self.addr)?;
        stream.set_read_timeout(Some(CONTROL_TIMEOUT))?;
        (&stream).write_all(format!("{line}\n").as_bytes())?;
        let mut reply = String::new();
        BufReader::new(&stream).read_line(&mut reply)?;
        match reply.trim_end() {
            "ok" => Ok(()),
            other => Err(io::Error::other(format!("{line}: {}", other.strip_prefix("error ").unwrap_or(other)))),
        }
    }
}
