package longterm.testnode;

import org.codelibs.opensearch.runner.OpenSearchRunner;

/**
 * Starts one OpenSearch node bound to 127.0.0.1 on the given HTTP port, with its data in the
 * given directory, prints "READY <port>" once the cluster is yellow, and stops when its
 * standard input closes (so the test process that started it can never leave it behind).
 *
 * Usage: Node HTTP_PORT TRANSPORT_PORT DATA_DIR [PLUGIN_CLASS...]
 *
 * The transport port is pinned, discovery is single-node and the cluster name is unique per
 * start, so the node can never join another test node on this machine.
 */
public final class Node {
    public static void main(String[] args) throws Exception {
        final int port = Integer.parseInt(args[0]);
        final int transport = Integer.parseInt(args[1]);
        final String base = args[2];
        final String cluster = "longterm-test-" + port;
        OpenSearchRunner.Configs configs = OpenSearchRunner.newConfigs()
                .basePath(base).numOfNode(1).clusterName(cluster).baseHttpPort(port - 1).printOnFailure();
        for (int i = 3; i < args.length; i++) {
            configs = configs.pluginTypes(args[i]);
        }
        final OpenSearchRunner runner = new OpenSearchRunner();
        runner.setMaxHttpPort(-1);
        runner.onBuild((index, settings) -> {
            settings.put("http.port", String.valueOf(port));
            settings.put("network.host", "127.0.0.1");
            settings.put("transport.port", String.valueOf(transport));
            settings.put("discovery.type", "single-node");
            settings.remove("cluster.initial_cluster_manager_nodes");
            settings.remove("cluster.initial_master_nodes");
            settings.put("cluster.routing.allocation.disk.threshold_enabled", false);
            settings.put("knn.memory.circuit_breaker.enabled", false);
        }).build(configs);
        runner.ensureYellow();
        System.out.println("READY " + port);
        System.out.flush();
        while (System.in.read() != -1) {
            // wait for the parent to close our stdin
        }
        runner.close();
        runner.clean();
    }
}
