import java.io.File;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.StandardCopyOption;
import java.util.LinkedHashMap;
import java.util.Map;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.yarn.conf.YarnConfiguration;
import org.apache.hadoop.yarn.server.MiniYARNCluster;

/**
 * Hadoop's own MiniDFSCluster (1 NameNode, 1 DataNode) and MiniYARNCluster (1 ResourceManager,
 * 1 NodeManager) in one JVM, listening on 127.0.0.1 only, for shardforge's tests.
 *
 * usage: ShardforgeMiniHadoop BASE_DIR CONF_DIR NM_MEMORY_MB NM_VCORES
 *
 * Writes the client configuration (core-site.xml, hdfs-site.xml, yarn-site.xml: point
 * HADOOP_CONF_DIR at CONF_DIR), then CONF_DIR/cluster.json (addresses, written last: the
 * sign that the cluster is up). Runs until its standard input closes or it gets SIGTERM,
 * then stops YARN and HDFS. Compiled by `python -m shardforge.deploy.jvm_deps --hadoop` against
 * hadoop-client-minicluster (Maven Central) at the Hadoop version pyspark ships.
 */
public final class ShardforgeMiniHadoop {
  private static final String LOOPBACK = "127.0.0.1";

  public static void main(String[] args) throws Exception {
    if (args.length != 4) {
      System.err.println("usage: ShardforgeMiniHadoop BASE_DIR CONF_DIR NM_MEMORY_MB NM_VCORES");
      System.exit(2);
    }
    File base = new File(args[0]).getAbsoluteFile();
    File confDir = new File(args[1]).getAbsoluteFile();
    int memoryMb = Integer.parseInt(args[2]);
    int vcores = Integer.parseInt(args[3]);
    confDir.mkdirs();

    Configuration conf = new YarnConfiguration();
    conf.set("hadoop.tmp.dir", new File(base, "tmp").getPath());
    conf.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, new File(base, "dfs").getPath());
    conf.setInt("dfs.replication", 1);
    conf.setBoolean("dfs.permissions.enabled", false);
    conf.setBoolean("dfs.webhdfs.enabled", true);
    // every YARN server socket on loopback only (MiniDFSCluster binds 127.0.0.1 by itself)
    conf.set("yarn.resourcemanager.bind-host", LOOPBACK);
    conf.set("yarn.nodemanager.bind-host", LOOPBACK);
    conf.set("yarn.timeline-service.bind-host", LOOPBACK);
    // sized for a small machine: one NodeManager offering memoryMb and vcores
    conf.setInt("yarn.nodemanager.resource.memory-mb", memoryMb);
    // MiniYARNCluster's NodeManager takes its memory from this key instead (default 4096)
    conf.setInt("yarn.minicluster.yarn.nodemanager.resource.memory-mb", memoryMb);
    conf.setInt("yarn.nodemanager.resource.cpu-vcores", vcores);
    conf.setInt("yarn.scheduler.minimum-allocation-mb", 128);
    conf.setInt("yarn.scheduler.maximum-allocation-mb", memoryMb);
    conf.setInt("yarn.scheduler.maximum-allocation-vcores", vcores);
    // the CapacityScheduler with one queue, `default` (a distribution's capacity-scheduler.xml)
    conf.set("yarn.scheduler.capacity.root.queues", "default");
    conf.set("yarn.scheduler.capacity.root.default.capacity", "100");
    conf.set("yarn.scheduler.capacity.root.default.maximum-capacity", "100");
    conf.setFloat("yarn.scheduler.capacity.maximum-am-resource-percent", 0.6f);
    conf.setBoolean("yarn.nodemanager.vmem-check-enabled", false);
    conf.setBoolean("yarn.nodemanager.pmem-check-enabled", false);
    conf.setFloat("yarn.nodemanager.disk-health-checker.max-disk-utilization-per-disk-percentage", 99.9f);
    conf.setInt("yarn.nodemanager.disk-health-checker.min-free-space-per-disk-mb", 64);
    conf.setInt("yarn.nodemanager.delete.debug-delay-sec", 600);   // keep finished containers' logs
    conf.setBoolean("yarn.log-aggregation-enable", false);

    MiniDFSCluster dfs = new MiniDFSCluster.Builder(conf).numDataNodes(1).build();
    dfs.waitActive();
    conf.set("fs.defaultFS", dfs.getURI().toString());
    MiniYARNCluster yarn = new MiniYARNCluster("shardforge", 1, 1, 1);
    yarn.init(conf);
    yarn.start();
    if (!yarn.waitForNodeManagersToConnect(60_000)) {
      throw new IllegalStateException("the NodeManager did not register with the ResourceManager");
    }
    Runtime.getRuntime().addShutdownHook(new Thread(() -> stop(yarn, dfs)));

    Configuration live = yarn.getConfig();
    Map<String, String> core = new LinkedHashMap<>();
    core.put("fs.defaultFS", dfs.getURI().toString());
    Map<String, String> hdfs = new LinkedHashMap<>();
    hdfs.put("dfs.replication", "1");
    hdfs.put("dfs.namenode.http-address", conf.get("dfs.namenode.http-address"));
    hdfs.put("dfs.webhdfs.enabled", "true");
    Map<String, String> yarnSite = new LinkedHashMap<>();
    for (String key : new String[] {"yarn.resourcemanager.address", "yarn.resourcemanager.scheduler.address",
        "yarn.resourcemanager.resource-tracker.address", "yarn.resourcemanager.admin.address",
        "yarn.resourcemanager.webapp.address", "yarn.scheduler.minimum-allocation-mb",
        "yarn.scheduler.maximum-allocation-mb", "yarn.scheduler.maximum-allocation-vcores"}) {
      yarnSite.put(key, live.get(key));
    }
    writeSite(new File(confDir, "core-site.xml"), core);
    writeSite(new File(confDir, "hdfs-site.xml"), hdfs);
    writeSite(new File(confDir, "yarn-site.xml"), yarnSite);

    String json = "{\n"
        + "  \"fs_default\": \"" + dfs.getURI() + "\",\n"
        + "  \"namenode_http\": \"" + conf.get("dfs.namenode.http-address") + "\",\n"
        + "  \"rm_address\": \"" + live.get("yarn.resourcemanager.address") + "\",\n"
        + "  \"rm_webapp\": \"" + live.get("yarn.resourcemanager.webapp.address") + "\",\n"
        + "  \"nm_memory_mb\": " + memoryMb + ",\n"
        + "  \"nm_vcores\": " + vcores + ",\n"
        + "  \"hadoop_version\": \"" + org.apache.hadoop.util.VersionInfo.getVersion() + "\",\n"
        + "  \"pid\": " + ProcessHandle.current().pid() + "\n}\n";
    File tmp = new File(confDir, "cluster.json.tmp");
    Files.write(tmp.toPath(), json.getBytes(StandardCharsets.UTF_8));
    Files.move(tmp.toPath(), new File(confDir, "cluster.json").toPath(), StandardCopyOption.ATOMIC_MOVE);
    System.out.println("shardforge-minihadoop: ready " + dfs.getURI());
    System.out.flush();

    while (System.in.read() != -1) {
      // runs until the parent closes our standard input
    }
    System.exit(0);   // the shutdown hook stops YARN, then HDFS
  }

  private static void stop(MiniYARNCluster yarn, MiniDFSCluster dfs) {
    try {
      yarn.stop();
    } finally {
      dfs.shutdown();
    }
  }

  private static void writeSite(File file, Map<String, String> props) throws IOException {
    Configuration site = new Configuration(false);
    for (Map.Entry<String, String> e : props.entrySet()) {
      site.set(e.getKey(), e.getValue());
    }
    try (OutputStream out = new FileOutputStream(file)) {
      site.writeXml(out);
    }
  }
}
